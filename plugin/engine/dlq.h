/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The engine's face to the broker adapters: the operations they call with
 * plain C arguments (start and stop, track an inbound publish, NACK a
 * delivery, tick, a client leaving, sessions, exact counting, reload). Each
 * is defined in the engine file its comment names; the state they work on
 * is engine.h's struct dlq, opaque outside engine/ (engine.h is the
 * engine's own: docs/design.md, Layout). Only declarations here, so that
 * no engine file depends on another through it.
 */
#ifndef DLQ_DLQ_H
#define DLQ_DLQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "model/counters.h"
#include "model/deadlines.h"
#include "model/gauges.h"
#include "model/history.h"
#include "model/letters.h"
#include "model/record.h"
#include "model/redelivery.h"
#include "mosquitto_dlq.h"

/* The engine's state, one per plugin instance: opaque outside engine/
 * (engine.h, private to the engine, defines it). */
struct dlq;

/* What the engine is told about the broker it runs in, once, at startup
 * (dlq__init): facts of the running broker and its configuration, not
 * options. The broker adapters find them (broker/plugin.c: the capability
 * probe, brokerconf.c); the engine only reads them. All false or NULL: a
 * 2.0 broker without persistence, about which nothing else is known. */
struct dlq_broker {
	bool persistence;          /* persistence true: sessions survive a restart */
	bool per_listener_settings; /* the broker sends no TICK events */
	bool queue_qos0_messages;  /* the broker keeps QoS 0 messages for offline sessions */
	bool exact_counting;       /* 2.1: the broker shows every send (MESSAGE_OUT): attempts are
	                              counted from sends (exact_counting.c), not from reconnect bursts */
	/* Whether the broker holds a session for client (2.1's
	 * mosquitto_client), called with ctx: 1 yes, 0 no; NULL where the
	 * broker cannot say (2.0). */
	int (*has_session)(void *ctx, const char *client);
	void *ctx;                 /* borrowed */
	char *db_path;             /* owned: the broker's database file, when it autosaves; else NULL */
};

/* What a settlement command (NACK, ACK, progress) came to. */
enum dlq_nack_status {
	DLQ_NACK_RETRIED,        /* a retry copy was made */
	DLQ_NACK_DEAD_LETTERED,  /* the chain ended in a dead letter */
	DLQ_NACK_MALFORMED_ID,   /* not 16 base64url characters */
	DLQ_NACK_UNKNOWN_ID,     /* never issued, expired or evicted */
	DLQ_NACK_DUPLICATE,      /* this client already NACKed this delivery */
	DLQ_NACK_FULL,           /* owed copies and dead letters fill the bound */
	DLQ_NACK_NOMEM,
	DLQ_NACK_RANDOM_FAILED,  /* no fresh dlq-id could be drawn */
	DLQ_NACK_NOT_PERMITTED,  /* the broker's access control does not let this client read the message */
	DLQ_NACK_ACKED,          /* ACK: the delivery is settled */
	DLQ_NACK_EXTENDED,       /* progress: the delivery's clock started again */
	DLQ_NACK_ALREADY_ACKED,  /* this client already ACKed this delivery */
	DLQ_NACK_TIMED_OUT,      /* its clock ran out first: a retry copy was made instead */
	DLQ_NACK_TIMED_OUT_DEAD, /* its clock ran out first, at its last attempt: dead-lettered */
	DLQ_NACK_NO_DEADLINE,    /* progress of a delivery with no clock */
	DLQ_NACK_DIVERTED,       /* redelivery tracking dead-lettered it first: delivered max_attempts times */
};

/* Asks the broker's access control whether the settling client may read a
 * message (topic, payload, QoS): 0 yes, EACCES no. */
typedef int (*dlq_may_read_fn)(void *ctx, const char *topic, const void *payload, uint32_t payload_len, uint8_t qos);

struct dlq_nack_result {
	enum dlq_nack_status status;
	unsigned attempt;        /* the delivery that was NACKed or ACKed (1 = first) */
	unsigned max_attempts;
	uint64_t delay_ms;       /* retried: how long the copy is held back; extended: until the clock runs out */
};


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

/* ---- Reads and notes (face.c): what api/ and broker/ read of the
 * engine, and the notes the adapters make per message ---- */

/* A zeroed engine to dlq__init, or NULL (out of memory). */
struct dlq *dlq__new(void);
/* Frees an engine from dlq__new that dlq__cleanup has cleaned up, or that
 * never started (dlq__init did not run); NULL: nothing. */
void dlq__free(struct dlq *d);

/* The policy for an inbound publish on topic, or NULL: then the message is
 * not tracked and nothing else need be done. Borrowed from the config.
 * Answered from a cache of recent topics when it can be (match_cache.h),
 * which is why d is not const. */
const struct dlq_policy *dlq__policy_for(struct dlq *d, const char *topic);
/* Whether the cache knows topic's policy (then in *policy, NULL for none);
 * false: ask dlq__policy_missed. */
bool dlq__policy_cached(struct dlq *d, const char *topic, const struct dlq_policy **policy);
/* The policy for topic when dlq__policy_cached had no answer (not asking
 * the cache a second time). */
const struct dlq_policy *dlq__policy_missed(struct dlq *d, const char *topic);

/* ---- Collecting (collect.c): other brokers' dead letters, carried in
 * by bridges on plugin_opt_collect filters ---- */

/* An inbound publish on a collect filter, its parts borrowed. */
struct dlq_collected_msg {
	const char *topic;
	const char *client;      /* who sent it (the bridge), for the log; may be NULL */
	const void *payload;
	uint32_t payload_len;
	uint8_t qos;
	const uint8_t *headers;  /* every property it came with, the plugin's names too (encoded, util/headers.h) */
	size_t headers_len;
};

/* Whether topic is on a plugin_opt_collect filter. */
bool dlq__collects(const struct dlq *d, const char *topic);
/* Keeps the dead letter m carries in the store, once per its broker and
 * dead-letter-id; one that is no dead letter is not kept, and logged with
 * its topic and why. Nothing is returned: the message goes on to its
 * subscribers whatever became of it here. */
void dlq__collect(struct dlq *d, const struct dlq_collected_msg *m);

/* Any broker event other than those below: it ends a reconnect's run of
 * access checks, and may give the next tick work (a quiet tick looks
 * again). */
void dlq__event(struct dlq *d);
/* The events that cannot give a tick work by themselves: a tick, and an
 * inbound publish before it is tracked (dlq__track then wakes the tick).
 * The broker sends both about once per message under load, so an
 * untracked message's tick returns at once. */
void dlq__quiet_event(struct dlq *d);

/* Once per broker loop pass (tick.c): lets go of what the broker has
 * taken, expires records, publishes the retry copies now due, and retries
 * owed envelopes. When nothing could be due it returns at once, without
 * reading the clock (the broker ticks about once per message under load).
 * Returns the time it read (port__now_ms), or 0 when it read none, so that
 * the caller's own timed work (the $SYS topics) need not read it again. */
uint64_t dlq__tick(struct dlq *d);

/* The configuration in use (a reload replaces it). */
const struct dlq_config *dlq__config(const struct dlq *d);
/* What the engine was told about the broker (dlq__init). */
const struct dlq_broker *dlq__broker(const struct dlq *d);
/* Bumped by every reload: policy indexes may name other filters after it. */
unsigned dlq__policy_generation(const struct dlq *d);
/* Nothing is tracked: no record a send could be of. */
bool dlq__tracks_nothing(const struct dlq *d);
/* 2.1: the broker said client's session outlives its connection
 * (CLIENT_OFFLINE), and it has not ended since (sessions.h). */
bool dlq__session_lasts(const struct dlq *d, const char *client);
/* Some policy has an ack_timeout. */
bool dlq__any_deadlines(const struct dlq *d);

/* What getStatus and $SYS report of the totals or of one policy. */
struct dlq_figures {
	struct dlq_counters counters;
	struct dlq_gauges gauges;
	struct dlq_letter_tally kept;  /* the dead-letter store's */
};
/* The figures of policy (its index in dlq__config's table), or the totals
 * for a policy < 0 or past the table. */
void dlq__figures(const struct dlq *d, long policy, struct dlq_figures *out);
/* Every counter, totals and per policy, back to 0 (resetCounters). The
 * rate history is left as it is: it says what happened in each minute. */
void dlq__reset_counters(struct dlq *d);
/* The minutes of policy's rate history (its index in dlq__config's table;
 * model/history.h) in the hour up to wall_ms that hold anything, oldest
 * first, into out; returns how many (0 for a policy past the table). */
size_t dlq__history(const struct dlq *d, size_t policy, int64_t wall_ms,
		struct dlq_history_minute out[DLQ_HISTORY_MINUTES]);

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
 * for its targeted retry copies (outbound__copy_qos), and checked against the
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

/* ---- a kept dead letter redriven (redrive.c; access is the caller's to
 * check; the store's other operations: letter_store.h) ---- */
struct dlq_redrive_result {
	bool tracked;                 /* a policy takes the topic: the copy is NACKable */
	char dlq_id[DLQ_ID_LEN + 1];  /* its dlq-id when tracked, else "" */
	bool home;                    /* sent home (plugin_opt_redrive_home): the two below say where */
	char broker[DLQ_MAX_BROKER_NAME_LEN + 1]; /* the broker it was sent home to */
	char topic[DLQ_HOME_TOPIC_MAX];           /* the home topic it was published on here */
};
/* Publishes kept letter l again, to topic (NULL: its origin topic), as a
 * new chain's first delivery (a fresh dlq-id where a policy takes the
 * topic; origin-topic and origin-id kept), on behalf of client; logged as
 * a notice, or with quiet (a redrive task's letters, whose start and end
 * are the notices) at debug level. Without a topic, a letter another
 * broker made is sent home instead when plugin_opt_redrive_home is set
 * (res->home): published as kept on its home topic, for that broker's
 * bridge to carry home. Only when the broker accepted it does l leave the
 * store (freed). Returns 0, or the broker's errno / ENOMEM / EIO (no id
 * from the random source) with l still kept. */
int dlq__redrive_letter(struct dlq *d, struct dlq_letter *l, const char *topic, const char *client, bool quiet,
		struct dlq_redrive_result *res);
/* The topic a redrive of l to topic (NULL: none given) publishes on here,
 * whose write access the asker needs: topic, l's home topic (written into
 * home) when it goes home, or its origin topic. Borrowed from topic, l or
 * home. */
const char *dlq__redrive_target(const struct dlq *d, const struct dlq_letter *l, const char *topic,
		char home[DLQ_HOME_TOPIC_MAX]);
/* Publishes dead letter dl, which the store does not keep (a redrive
 * request's), to its origin topic as dlq__redrive_letter does, on behalf
 * of client. dl stays the caller's. Returns as dlq__redrive_letter. */
int dlq__redrive_envelope(struct dlq *d, const struct dlq_envelope *dl, const char *client,
		struct dlq_redrive_result *res);

/* ---- a redrive request from the centre (redrive_request.c;
 * plugin_opt_redrive_from) ---- */

/* Whether topic is plugin_opt_redrive_from's topic. */
bool dlq__redrive_requested(const struct dlq *d, const char *topic);
/* Redrives the dead letter request m carries, when it comes from the
 * configured client and is a dead letter this broker made: published to
 * its origin topic as a local redrive, and let go of in the store if kept
 * here. Anything else is refused with a warning naming its topic, its
 * sender and why, and nothing is published. The message goes on to its
 * subscribers whatever became of it here. */
void dlq__redrive_request(struct dlq *d, const struct dlq_collected_msg *m);

#endif
