/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The engine's face to the broker adapters: the operations they call with
 * plain C arguments (start and stop, track an inbound publish, NACK a
 * delivery, tick, a client leaving, sessions, exact counting, reload). Each
 * is defined in the engine file its comment names; the state they work on
 * is engine.h's struct dlq. Only declarations here, and the tick's inline
 * entry (tick.h), so that no engine file depends on another through it.
 */
#ifndef DLQ_DLQ_H
#define DLQ_DLQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "engine/engine.h"
#include "engine/tick.h"

/* Takes ownership of *cfg (zeroed on return, whatever the result) and of
 * *broker, the facts of the broker it runs in (engine.h; NULL: nothing
 * known; its db_path is the engine's, and NULL on return), and, with a
 * state file, restores the saved state (see store/persist.h). Returns 0, ENOMEM,
 * or an errno from the state file with a message in err; on failure call
 * dlq__cleanup all the same. */
int dlq__init(struct dlq *d, struct dlq_config *cfg, struct dlq_broker *broker, char *err, size_t errlen);

/* Saves the state (with a state file) or logs what is still owed (it cannot
 * be published any more), then frees everything. */
void dlq__cleanup(struct dlq *d);

/* Tracks an inbound publish that matched policy: records it in the ledger
 * and writes the dlq-id to stamp it with into id_out. headers are the
 * message's own properties, encoded (the caller's). Returns 0 (stamp it),
 * ENOSPC (larger than the memory bound allows: do not stamp) or ENOMEM. */
int dlq__track(struct dlq *d, const struct dlq_policy *policy, const char *topic,
		const void *payload, uint32_t payload_len, uint8_t qos,
		const uint8_t *headers, size_t headers_len, char id_out[DLQ_ID_LEN + 1]);


struct dlq_nack {
	const char *id;          /* borrowed; id_len bytes, not NUL-terminated */
	size_t id_len;
	const char *reason;      /* borrowed, NUL-terminated, or NULL */
	const char *client;      /* borrowed: the NACKing client's id */
	bool client_persists;    /* the client's session outlives its connection */
	bool client_settles;     /* the client reads dlq-ids (MQTT v5): its retry copy is held to a deadline */
	bool final;              /* a final NACK: dead-lettered at once, whatever attempts remain */
	bool delay_requested;    /* the NACK asks for its own delay ... */
	uint64_t delay_ms;       /* ... of this many milliseconds (capped by the policy) */
	dlq_may_read_fn may_read;/* NULL: no check (a dlq-id is then a bearer handle) */
	void *may_read_ctx;
};

/* Handles one NACK: a retry copy or a dead letter when accepted. Publishing
 * failures do not fail the NACK: the envelope waits in the outbox. */
void dlq__nack(struct dlq *d, const struct dlq_nack *n, struct dlq_nack_result *res);

/* The other settlements of a delivery (settle.c): an ACK (processed), or
 * progress (still being worked on: its ack_timeout starts again). */
enum dlq_settle_kind {
	DLQ_SETTLE_ACK,
	DLQ_SETTLE_PROGRESS,
};

struct dlq_settle {
	enum dlq_settle_kind kind;
	const char *id;          /* borrowed; id_len bytes, not NUL-terminated */
	size_t id_len;
	const char *client;      /* borrowed: the settling client's id */
	dlq_may_read_fn may_read;/* NULL: no check */
	void *may_read_ctx;
};

/* Handles one ACK or progress report of client's delivery: status
 * DLQ_NACK_ACKED or DLQ_NACK_EXTENDED (delay_ms: until its clock runs out)
 * when accepted, else a refusal (dlq__nack_status_text) that changes
 * nothing, but that a late settlement of a delivery whose clock ran out
 * tells 2.0's deadlines the client was still working (deadlines.h). */
void dlq__settle(struct dlq *d, const struct dlq_settle *s, struct dlq_nack_result *res);


/* A stable, human-readable text for a status. */
const char *dlq__nack_status_text(enum dlq_nack_status s);

/* A client's connection ended. Retry copies for it that are owed, delayed,
 * or were sent in this loop pass (the broker has not taken them yet) become
 * dead letters, unless its session was known to persist when it NACKed
 * (struct dlq_nack.client_persists); so do the copies the broker took but
 * the client did not NACK within their NACK window (held, holds.h). What
 * the broker says at disconnect is not used: on a takeover it marks even a
 * persistent session clean. */
void dlq__client_gone(struct dlq *d, const char *client);

/* client's connection ended because another connection took its id. On
 * 2.0 as dlq__client_gone. On 2.1 the same, except that the copies held
 * for a session that lasted stay held: the next CONNECT says whether that
 * session goes on (dlq__client_connected). */
void dlq__client_taken_over(struct dlq *d, const char *client);

/* client, connected with MQTT protocol level protocol (3: 3.1, 4: 3.1.1;
 * not 5), subscribed to filter ("$share/<group>/" prefix and all): if a
 * policy's messages can reach it, the subscription is counted in
 * subscribers_without_nack (totals and that policy) and, the first time
 * for this connection of client, a warning is logged (nonack.h). Returns
 * that policy (the first declared that overlaps), or NULL. */
const struct dlq_policy *dlq__subscribed_without_nack(struct dlq *d, const char *client, const char *filter,
		int protocol);

/* ---- sessions and subscriptions as Mosquitto 2.1 shows them
 * (session_events.c; never called on 2.0) ---- */

/* client connected (clean_start: its old session is gone). */
void dlq__client_connected(struct dlq *d, const char *client, bool clean_start);

/* client subscribed to filter ("$share/<group>/" prefix and all) with
 * granted QoS qos and subscription identifier identifier (0: none): kept
 * for its targeted retry copies (engine__copy_qos), and checked against the
 * dead-letter topics (dlq__subscribed_to_dead_letters). */
void dlq__subscribed(struct dlq *d, const char *client, const char *filter, uint8_t qos, uint32_t identifier);

/* client unsubscribed from filter (as it sent it). */
void dlq__unsubscribed(struct dlq *d, const char *client, const char *filter);

/* client's connection ended and the broker keeps its session (2.1's
 * CLIENT_OFFLINE; call instead of dlq__client_gone): its copies not yet
 * handed to the broker now wait for the session (at QoS 1 or more unless
 * its subscription says 0), those handed over at QoS 0 become dead letters. */
void dlq__client_offline(struct dlq *d, const char *client);

/* A subscription of client to filter ("$share/<group>/" prefix and all)
 * that takes in both a dead-letter topic and a policy filter is counted in
 * subscribers_of_dead_letters and, the first time for this (client,
 * filter) during a connection, logged (deadsubs.h). Returns whether it
 * does. */
bool dlq__subscribed_to_dead_letters(struct dlq *d, const char *client, const char *filter);

/* ---- redelivery tracking (cfg.redelivery on; see redelivery.h) ----
 * Connections are the broker's context pointers, as opaque numbers. */

/* client showed it is connected on conn (it published, subscribed, sent a
 * control message, or was checked for writing). */
void dlq__client_active(struct dlq *d, const char *client, uintptr_t conn);

/* client's connection conn ended (before dlq__client_gone); clean: the
 * connection started its session clean (as the broker says then). On 2.0
 * the end of a connection that already ended is the sign that the client
 * is back, resuming its session (deadlines__offline). */
void dlq__client_left(struct dlq *d, const char *client, uintptr_t conn, bool clean);

/* One READ access check. Returns true when the plugin removes this message
 * from the client's session (the answer must then be a denial): it was
 * redelivered after a reconnect as often as its policy allows, and its dead
 * letter is made. Otherwise the plugin has no opinion. */
bool dlq__read_check(struct dlq *d, const struct dlq_read_check *c);

/* ---- exact counting on Mosquitto 2.1 (exact_counting.c) ---- */

/* What the engine says about one PUBLISH the broker writes to a client. */
struct dlq_send {
	unsigned attempt;                /* the attempt number for that client (1 = first); 0: not tracked */
	const struct dlq_policy *policy; /* the record's policy (borrowed), when tracked */
	struct dlq_record *record;       /* the record (borrowed, until the engine's next call), when tracked */
};

/* The broker writes a message carrying the dlq-id id (id_len bytes: the
 * last dlq-id user property of the stored message) with this topic and
 * payload (the stored message's own addresses) to client on connection
 * conn (0: not known; with the broker's own client string, the pair finds
 * the client without hashing its id). When it is a tracked record, counts
 * the send and fills *s with the attempt it is for client. Needs
 * d->broker.exact_counting. */
void dlq__sent(struct dlq *d, const char *client, uintptr_t conn, const char *id, size_t id_len, const char *topic,
		const void *payload, uint32_t payload_len, struct dlq_send *s);

/* 2.1 (settle.c): the send s (dlq__sent, tracked, its policy with an
 * ack_timeout) to client, which reads dlq-ids (MQTT v5) and whose session
 * lasts or not (persists), starts the clock of that delivery, or starts it
 * again (a resend after a reconnect is the next attempt), unless client
 * settled it before. */
void dlq__deadline_sent(struct dlq *d, const struct dlq_send *s, const char *client, bool persists);

/* A send of a message of policy p went out without the plugin's properties
 * (they would have passed the subscriber's Maximum Packet Size). */
void dlq__sent_without_stamp(struct dlq *d, const struct dlq_policy *p);

/* Re-reads the policies from opts (the options the plugin was started
 * with; plugin_opt_policy_file is read again) and, when the whole new table
 * is valid, swaps it in: chains in flight follow the new policy of their
 * filter, or keep their old policy if the filter is gone. Other options are
 * not changed. Returns 0, or EINVAL/ENOMEM with the reason in err and
 * nothing changed. */
int dlq__reload(struct dlq *d, const struct dlq_option *opts, size_t count, char *err, size_t errlen);

/* ---- the dead-letter store (kept.c; access is the caller's to check) ---- */
struct dlq_redrive_result {
	bool tracked;                 /* a policy takes the topic: the copy is NACKable */
	char dlq_id[DLQ_ID_LEN + 1];  /* its dlq-id when tracked, else "" */
};
/* Publishes kept letter l again, to topic (NULL: its origin topic), as a
 * new chain's first delivery (a fresh dlq-id where a policy takes the
 * topic; origin-topic and origin-id kept), on behalf of client. Only when
 * the broker accepted it does l leave the store (freed). Returns 0, or
 * the broker's errno / ENOMEM / EIO (no id from the random source) with l
 * still kept. */
int dlq__redrive_letter(struct dlq *d, struct dlq_letter *l, const char *topic, const char *client,
		struct dlq_redrive_result *res);
/* Removes l from the store and frees it. */
void dlq__delete_letter(struct dlq *d, struct dlq_letter *l);

#endif
