/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The engine: one struct per plugin instance holding the configuration, the
 * ledger and the outbox, and the operations the broker adapters call with
 * plain C arguments: track an inbound publish, NACK a delivery, tick, and a
 * client leaving.
 */
#ifndef DLQ_DLQ_H
#define DLQ_DLQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/systopics.h"
#include "config/config.h"
#include "engine/deadsubs.h"
#include "engine/nonack.h"
#include "engine/unsaved.h"
#include "model/gauges.h"
#include "model/holds.h"
#include "model/ledger.h"
#include "model/match_cache.h"
#include "model/outbox.h"
#include "model/redelivery.h"
#include "model/schedule.h"
#include "model/sessions.h"
#include "store/persist.h"
#include "util/id.h"

struct dlq_counters {
	uint64_t tracked;          /* inbound publishes stamped */
	uint64_t untracked_full;   /* matched a policy but did not fit the memory bound */
	uint64_t nacks;            /* NACKs accepted */
	uint64_t nacks_refused;    /* unknown/expired/malformed/duplicate/full */
	uint64_t unknown_ids;      /* NACKs of ids never issued, expired or evicted (totals only) */
	uint64_t retry_copies;     /* retry copies accepted by the broker */
	uint64_t delayed;          /* retry copies held back for a delay */
	uint64_t dead_letters;     /* dead letters accepted by the broker */
	uint64_t publish_failures; /* broker refused a publish (kept and retried) */
	uint64_t expired;          /* records that left the NACK window */
	uint64_t evicted;          /* records evicted for the memory bound */
	uint64_t redeliveries;     /* redeliveries after a reconnect counted as attempts */
	uint64_t diverted;         /* redelivered messages removed from a session and dead-lettered */
	uint64_t subscribers_without_nack; /* subscriptions to tracked filters by clients without MQTT 5 */
	uint64_t subscribers_of_dead_letters; /* subscriptions taking in dead letters and tracked messages (totals only) */
	uint64_t sent_without_stamp; /* 2.1: sends stripped of the plugin's properties to fit a Maximum Packet Size */
};

struct dlq {
	struct dlq_config cfg;    /* owned */
	struct dlq_ledger ledger; /* owned */
	struct dlq_outbox outbox; /* owned */
	struct dlq_unsaved unsaved; /* owned: what the broker took and has not saved yet */
	struct dlq_schedule delayed; /* owned: retry copies waiting for their delay */
	struct dlq_idgen idgen;
	uint64_t next_seq;        /* envelope sequence numbers */
	uint64_t changes;         /* bumped on every change of what is owed (state saving) */
	struct dlq_persist persist; /* owned: state file and journal */
	struct dlq_sys sys;         /* owned: $SYS/broker/dlq/... */
	struct dlq_redelivery redelivery; /* owned: used with cfg.redelivery on */
	struct dlq_holds holds;     /* owned: retry copies held for clients whose session does not persist */
	struct dlq_policy_table *retired; /* owned: tables replaced by reloads, kept while chains use them */
	size_t retired_count;
	unsigned policy_generation;       /* bumped by every reload */
	struct dlq_match_cache matches;   /* owned: policy matches by topic, of cfg.policies */
	struct dlq_counters counters;          /* totals */
	struct dlq_counters *policy_counters;  /* owned: one per policy of cfg.policies, by index */
	struct dlq_gauge_book gauges;          /* owned: running gauges of ledger, outbox and schedule */
	uint64_t last_evict_log_ms; /* rate limit of the eviction warning */
	struct dlq_nonack nonack;   /* owned: connected clients warned about as unable to NACK */
	struct dlq_deadsubs deadsubs; /* owned: (client, filter) pairs warned about as reading dead letters */
	struct dlq_sessions sessions; /* owned: sessions as Mosquitto 2.1 shows them (empty on 2.0) */
	bool sessions_full_noted;     /* the "sessions not followed" line was logged */
	/* The last tick found nothing to do, whatever the time (tick.c,
	 * tick_timeless): nothing tracked, delayed, owed or taken, no state
	 * file, no $SYS topics. From there only a tracked message, a READ
	 * check (a kick), a reload or a session's end (sessions.ended, which
	 * dlq__tick looks at too) can give a tick work, and dlq__track,
	 * dlq__read_check and dlq__reload clear this; so does every broker
	 * event but those of dlq__quiet_event (dlq__event). */
	bool tick_quiet;
	/* The records of recent sends' dlq-ids (sends.c), by the id's first
	 * byte: the broker writes a stored message to each of its subscribers,
	 * mostly within a few sends of each other, so a send's id text is
	 * compared instead of decoded and looked up. Borrowed; a record is
	 * forgotten when it leaves the ledger (record_dropped). */
	struct dlq_sent_slot {
		struct dlq_record *record;
		char id[DLQ_ID_LEN];
	} recent_sends[256];
};

/* How records are made, for how deliveries to clients are followed per
 * record: 2.1's exact counting gives originals the sends part (their first
 * client's sends, in the record) and retry copies the more part; 2.0's
 * redelivery tracking gives every record the more part; otherwise only
 * retry copies have one. */
static inline dlq_record_new_fn *engine__record_new_fn(const struct dlq *d)
{
	if(d->cfg.exact_counting) return record__new_counting;
	return d->cfg.redelivery != DLQ_REDELIVERY_OFF ? record__new_more : record__new;
}

/* Takes ownership of *cfg (zeroed on return, whatever the result) and, with
 * a state file, restores the saved state (see persist.h). Returns 0, ENOMEM,
 * or an errno from the state file with a message in err; on failure call
 * dlq__cleanup all the same. */
int dlq__init(struct dlq *d, struct dlq_config *cfg, char *err, size_t errlen);

/* Saves the state (with a state file) or logs what is still owed (it cannot
 * be published any more), then frees everything. */
void dlq__cleanup(struct dlq *d);

/* The policy for an inbound publish on topic, or NULL: then the message is
 * not tracked and nothing else need be done. Borrowed from the config.
 * Answered from a cache of recent topics when it can be (match_cache.h),
 * which is why d is not const. */
static inline const struct dlq_policy *dlq__policy_for(struct dlq *d, const char *topic)
{
	return match_cache__match(&d->matches, &d->cfg.policies, d->policy_generation, topic);
}
/* Whether the cache knows topic's policy (then in *policy, NULL for none);
 * false: ask dlq__policy_for. */
static inline bool dlq__policy_cached(struct dlq *d, const char *topic, const struct dlq_policy **policy)
{
	return match_cache__hit(&d->matches, d->policy_generation, topic, policy);
}
/* The policy for topic when dlq__policy_cached had no answer (not asking
 * the cache a second time). */
static inline const struct dlq_policy *dlq__policy_missed(struct dlq *d, const char *topic)
{
	return match_cache__miss(&d->matches, &d->cfg.policies, d->policy_generation, topic);
}

/* Tracks an inbound publish that matched policy: records it in the ledger
 * and writes the dlq-id to stamp it with into id_out. headers are the
 * message's own properties, encoded (the caller's). Returns 0 (stamp it),
 * ENOSPC (larger than the memory bound allows: do not stamp) or ENOMEM. */
int dlq__track(struct dlq *d, const struct dlq_policy *policy, const char *topic,
		const void *payload, uint32_t payload_len, uint8_t qos,
		const uint8_t *headers, size_t headers_len, char id_out[DLQ_ID_LEN + 1]);

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
};

/* Asks the broker's access control whether the NACKing client may read a
 * message (topic, payload, QoS): 0 yes, EACCES no. */
typedef int (*dlq_may_read_fn)(void *ctx, const char *topic, const void *payload, uint32_t payload_len, uint8_t qos);

struct dlq_nack {
	const char *id;          /* borrowed; id_len bytes, not NUL-terminated */
	size_t id_len;
	const char *reason;      /* borrowed, NUL-terminated, or NULL */
	const char *client;      /* borrowed: the NACKing client's id */
	bool client_persists;    /* the client's session outlives its connection */
	bool delay_requested;    /* the NACK asks for its own delay ... */
	uint64_t delay_ms;       /* ... of this many milliseconds (capped by the policy) */
	dlq_may_read_fn may_read;/* NULL: no check (a dlq-id is then a bearer handle) */
	void *may_read_ctx;
};

struct dlq_nack_result {
	enum dlq_nack_status status;
	unsigned attempt;        /* the delivery that was NACKed (1 = first) */
	unsigned max_attempts;
	uint64_t delay_ms;       /* retried: how long the copy is held back */
};

/* Handles one NACK: a retry copy or a dead letter when accepted. Publishing
 * failures do not fail the NACK: the envelope waits in the outbox. */
void dlq__nack(struct dlq *d, const struct dlq_nack *n, struct dlq_nack_result *res);

/* A stable, human-readable text for a status. */
const char *dlq__nack_status_text(enum dlq_nack_status s);

/* Once per broker loop pass: lets go of what the broker has taken, expires
 * records, publishes the retry copies now due, and retries owed envelopes.
 * When nothing could be due it returns at once, without reading the clock
 * (the broker ticks about once per message under load); and when the last
 * tick found nothing at all to do and no event came since that could
 * change that (tick_quiet), in one load, inlined into the TICK callback. */
void dlq__tick_awake(struct dlq *d);
static inline void dlq__tick(struct dlq *d)
{
	if(!d->tick_quiet || d->sessions.ended) dlq__tick_awake(d);
}

/* A client's connection ended. Retry copies for it that are owed, delayed,
 * or were sent in this loop pass (the broker has not taken them yet) become
 * dead letters, unless its session was known to persist when it NACKed
 * (struct dlq_nack.client_persists); so do the copies the broker took but
 * the client did not NACK within their NACK window (held, holds.h). What
 * the broker says at disconnect is not used: on a takeover it marks even a
 * persistent session clean. */
void dlq__client_gone(struct dlq *d, const char *client);

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

/* Any broker event other than those below: it ends a reconnect's run of
 * access checks, and may give the next tick work (a quiet tick looks
 * again). */
static inline void dlq__event(struct dlq *d)
{
	redelivery__event(&d->redelivery);
	d->tick_quiet = false;
}
/* The events that cannot give a tick work by themselves: a tick, and an
 * inbound publish before it is tracked (dlq__track then wakes the tick).
 * The broker sends both about once per message under load, so an
 * untracked message's tick returns at once. */
static inline void dlq__quiet_event(struct dlq *d){ redelivery__event(&d->redelivery); }

/* client showed it is connected on conn (it published, subscribed, sent a
 * control message, or was checked for writing). */
void dlq__client_active(struct dlq *d, const char *client, uintptr_t conn);

/* client's connection conn ended (before dlq__client_gone). */
void dlq__client_left(struct dlq *d, const char *client, uintptr_t conn);

/* One READ access check. Returns true when the plugin removes this message
 * from the client's session (the answer must then be a denial): it was
 * redelivered after a reconnect as often as its policy allows, and its dead
 * letter is made. Otherwise the plugin has no opinion. */
bool dlq__read_check(struct dlq *d, const struct dlq_read_check *c);

/* ---- exact counting on Mosquitto 2.1 (sends.c) ---- */

/* What the engine says about one PUBLISH the broker writes to a client. */
struct dlq_send {
	unsigned attempt;                /* the attempt number for that client (1 = first); 0: not tracked */
	const struct dlq_policy *policy; /* the record's policy (borrowed), when tracked */
};

/* The broker writes a message carrying the dlq-id id (id_len bytes: the
 * last dlq-id user property of the stored message) with this topic and
 * payload to client. When it is a tracked record, counts the send and
 * fills *s with the attempt it is for client. Needs d->cfg.exact_counting. */
void dlq__sent(struct dlq *d, const char *client, const char *id, size_t id_len, const char *topic,
		const void *payload, uint32_t payload_len, struct dlq_send *s);

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

/* The counters of policy p, or NULL when p is not in the current table
 * (a chain that began under a policy since removed by a reload). */
static inline struct dlq_counters *dlq__policy_counters(struct dlq *d, const struct dlq_policy *p)
{
	long i = policy__index_in(&d->cfg.policies, p);
	if(i < 0 || d->policy_counters == NULL) return NULL;
	return &d->policy_counters[i];
}

/* The totals of every counter (what getStatus and $SYS report as totals). */
static inline const struct dlq_counters *dlq__totals(const struct dlq *d)
{
	return &d->counters;
}

/* How many envelopes the plugin owes: outbox and delayed copies. */
static inline size_t dlq__owed_count(const struct dlq *d)
{
	return d->outbox.owed.count + d->outbox.sent.count + d->outbox.settling.count + d->delayed.count;
}

/* Bytes of everything the plugin owes: outbox and delayed copies. */
static inline uint64_t dlq__owed_bytes(const struct dlq *d)
{
	return d->outbox.bytes + d->delayed.bytes;
}

#endif
