/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The engine's state: one struct per plugin instance (struct dlq), what it
 * reads of itself in a few loads (inline), and what its files share and
 * nothing outside the engine uses. Every file of engine/ includes it; it
 * includes only the layers below (model, config, store, util), so that no
 * engine file is reached through it. The engine's face to the broker
 * adapters is dlq.h; its outbound path is outbound.h.
 */
#ifndef DLQ_ENGINE_H
#define DLQ_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config/config.h"
#include "engine/dlq.h"
#include "model/counters.h"
#include "model/deadlines.h"
#include "model/deadsubs.h"
#include "model/gauges.h"
#include "model/history.h"
#include "model/holds.h"
#include "model/letters.h"
#include "model/ledger.h"
#include "model/match_cache.h"
#include "model/nonack.h"
#include "model/outbox.h"
#include "model/redelivery.h"
#include "model/redrive_task.h"
#include "model/schedule.h"
#include "model/send_cache.h"
#include "model/sessions.h"
#include "model/unsaved.h"
#include "store/persist.h"
#include "store/store_port.h"
#include "util/id.h"
#include "util/port.h"

/* The refusal warnings of one plugin_opt_collect filter in the current
 * window (collect.c): those logged, and those counted and not logged. */
struct dlq_collect_warn {
	uint64_t window_ms; /* port__now_ms() at the window's first warning */
	unsigned logged;
	uint64_t unlogged;
};

struct dlq {
	struct dlq_config cfg;    /* owned */
	struct dlq_broker broker; /* owned: what the broker is (dlq__init) */
	struct dlq_ledger ledger; /* owned */
	struct dlq_outbox outbox; /* owned */
	struct dlq_unsaved unsaved; /* owned: what the broker took and has not saved yet */
	struct dlq_schedule delayed; /* owned: retry copies waiting for their delay */
	struct dlq_idgen idgen;
	uint64_t next_seq;        /* envelope sequence numbers */
	uint64_t changes;         /* bumped on every change of what is owed (state saving) */
	struct dlq_persist persist; /* owned: state file and journal */
	struct dlq_store_port store; /* what changes are noted to: persist's journal, or nothing */
	struct dlq_redelivery redelivery; /* owned: used with cfg.redelivery on */
	struct dlq_holds holds;     /* owned: retry copies held for clients whose session does not persist */
	struct dlq_policy_table *retired; /* owned: tables replaced by reloads, kept while chains use them */
	size_t retired_count;
	unsigned policy_generation;       /* bumped by every reload */
	struct dlq_match_cache matches;   /* owned: policy matches by topic, of cfg.policies */
	struct dlq_counters counters;          /* totals */
	struct dlq_counters *policy_counters;  /* owned: one per policy of cfg.policies, by index */
	struct dlq_history *policy_history;    /* owned: each policy's last hour by minute, by index (history.h) */
	struct dlq_gauge_book gauges;          /* owned: running gauges of ledger, outbox and schedule */
	uint64_t last_evict_log_ms; /* rate limit of the eviction warning */
	bool evict_held;            /* a failed attempt is under way: room is made when it is done
	                             * (engine__attempt_failed), not while it still uses its record */
	struct dlq_nonack nonack;   /* owned: connected clients warned about as unable to NACK */
	struct dlq_deadsubs deadsubs; /* owned: (client, filter) pairs warned about as reading dead letters */
	struct dlq_sessions sessions; /* owned: sessions as Mosquitto 2.1 shows them (empty on 2.0) */
	bool sessions_full_noted;     /* the "sessions not followed" line was logged */
	/* The last tick found nothing to do, whatever the time (tick.c,
	 * tick_timeless): nothing tracked, delayed, owed or taken, no state
	 * file. From there only a tracked message, a READ
	 * check (a kick), a reload or a session's end (sessions.ended, which
	 * dlq__tick looks at too) can give a tick work, and dlq__track,
	 * dlq__read_check and dlq__reload clear this; so does every broker
	 * event but those of dlq__quiet_event (dlq__event). */
	bool tick_quiet;
	/* 2.1's exact counting: which record a send is of, by the stored
	 * message's addresses (send_cache.h); set up by dlq__init there, empty
	 * elsewhere. */
	struct dlq_send_cache sends;
	/* The dead-letter store (letters.h): every dead letter the broker
	 * accepted, until an operator takes it; its operations are
	 * engine/letter_store.c's. */
	struct dlq_letters letters;
	uint64_t last_letter_drop_log_ms; /* rate limit of the "store full" warning */
	uint64_t last_letter_expire_log_ms; /* rate limit of the "past their age" notice */
	/* The warnings of messages refused on a plugin_opt_collect filter
	 * (collect.c): a limiter per filter, by its index; owned, made at the
	 * first refusal (collect_warn_count of them, the filters' count then). */
	struct dlq_collect_warn *collect_warn;
	size_t collect_warn_count;
	/* The tick (port__now_ms) from which the next pass of the age bound
	 * is due (letter_store__expire); UINT64_MAX when no kept letter has
	 * an age bound. */
	uint64_t letters_due_ms;
	/* Redrive tasks (model/redrive_task.h), run by engine/redrive_tasks.c
	 * at the tick while any is running. */
	struct dlq_redrive_tasks tasks;
	/* Deliveries awaiting settlement within their policy's ack_timeout
	 * (deadlines.h; engine/settle.c), and whether any policy has one. */
	struct dlq_deadlines deadlines;
	bool any_deadlines;
	uint64_t last_timeout_log_ms; /* rate limit of the "could not retry a timed-out delivery" error */
};

/* How records are made, for how deliveries to clients are followed per
 * record: 2.1's exact counting gives originals the sends part (their first
 * client's sends, in the record) and retry copies the more part; 2.0's
 * redelivery tracking gives every record the more part; otherwise only
 * retry copies have one. Records made from a state file, which may be
 * retry copies or have a chain behind them, are made with the same part
 * (record__make). */
static inline uint8_t engine__original_part(const struct dlq *d)
{
	if(d->broker.exact_counting) return DLQ_RECORD_SENDS;
	return d->cfg.redelivery != DLQ_REDELIVERY_OFF ? DLQ_RECORD_MORE : 0;
}

/* The counters of policy p, or NULL when p is not in the current table
 * (a chain that began under a policy since removed by a reload). */
static inline struct dlq_counters *engine__policy_counters(struct dlq *d, const struct dlq_policy *p)
{
	long i = policy__index_in(&d->cfg.policies, p);
	if(i < 0 || d->policy_counters == NULL) return NULL;
	return &d->policy_counters[i];
}

/* What the state file saves of d and restores into it (persist.h): set up
 * by dlq__init, with or without a state file. */
static inline struct state_view *engine__state_view(struct dlq *d)
{
	return &d->persist.view;
}

/* The totals of every counter (what getStatus and $SYS report as totals). */
static inline const struct dlq_counters *engine__totals(const struct dlq *d)
{
	return &d->counters;
}

/* How many envelopes the plugin owes: outbox and delayed copies. */
static inline size_t engine__owed_count(const struct dlq *d)
{
	return d->outbox.owed.count + d->outbox.sent.count + d->outbox.settling.count + d->delayed.count;
}

/* Bytes of everything the plugin owes: outbox and delayed copies. */
static inline uint64_t engine__owed_bytes(const struct dlq *d)
{
	return d->outbox.bytes + d->delayed.bytes;
}

/* Counts an event in the totals and in the counters of its policy. */
#define COUNT(d, policy, field, n) do{ \
		struct dlq_counters *pc_ = engine__policy_counters((d), (policy)); \
		(d)->counters.field += (n); \
		if(pc_) pc_->field += (n); \
	}while(0)

/* Counts an event in the minute it happened, in the rate history of its
 * policy (history.h); a policy no longer in the table has none. */
static inline void engine__note_minute(struct dlq *d, const struct dlq_policy *policy, enum dlq_history_what what,
		unsigned cause)
{
	long i = policy__index_in(&d->cfg.policies, policy);
	if(i < 0 || d->policy_history == NULL) return;
	history__count(&d->policy_history[i], port__wall_ms(), what, cause);
}

/* Owed envelopes are never evicted, so a new one is taken only while what
 * is owed, with it, stays within the bound. */
static inline bool engine__fits_owed(const struct dlq *d, const struct dlq_envelope *e)
{
	return engine__owed_bytes(d) + e->bytes <= d->cfg.max_pending_bytes;
}

/* A delivery's clock started (or started again): the state file saves it
 * (a snapshot at its next save; the journal at once, when there is one),
 * so that a restart goes on from it. */
static inline void engine__note_deadline(struct dlq *d, const struct dlq_deadline *e)
{
	if(e == NULL) return;
	d->changes++;
	store_port__deadline(&d->store, e);
}

/* A delivery that failed: its subscriber NACKed it, or its clock ran out
 * (engine__attempt_failed). */
struct dlq_failure {
	const char *client;      /* borrowed: the subscriber whose delivery failed */
	const char *reason;      /* borrowed: the dead letter's reason, if it comes to that; NULL: attempts ran out */
	uint8_t how;             /* DLQ_SETTLED_NACK, or DLQ_SETTLED_TIMEOUT (its clock ran out) */
	bool final;              /* a final NACK: dead-lettered whatever attempts remain */
	bool client_persists;    /* the client's session outlives its connection */
	bool client_settles;     /* the client reads dlq-ids (MQTT v5): a copy for it is held to a deadline */
	bool client_gone;        /* 2.0: the client left without a session that lasts (deadlines__gone) */
	bool bounded;            /* refused when what is owed fills max_pending_bytes (a NACK, which may be
	                            sent again); a timeout is not: its record was counted, and it would be lost */
	bool delay_requested;    /* the NACK asks for its own delay ... */
	uint64_t delay_ms;       /* ... of this many milliseconds (capped by the policy) */
};

/* ---- defined by one event handler and called by another (outbound.c
 * calls none of them) ---- */

/* attempts.c: the delivery of r to f->client failed: a retry copy, or at its
 * last attempt (or a final NACK) the dead letter; the client has settled
 * it (f->how) and its clock, if any, stops. Fills res (status, attempt,
 * max_attempts, delay_ms); on any status but RETRIED and DEAD_LETTERED
 * nothing changed. The caller has checked that the client had not settled
 * it yet; after RETRIED or DEAD_LETTERED r may be gone (evicted for the
 * memory bound): the caller must not use it. */
void engine__attempt_failed(struct dlq *d, struct dlq_record *r, const struct dlq_failure *f,
		struct dlq_nack_result *res);

/* attempts.c: deliveries of r's chain to client so far (1: the first). */
unsigned engine__attempts_of(struct dlq *d, struct dlq_record *r, const char *client);

/* attempts.c: the record a settlement command (NACK, ACK, progress) of
 * client names by id (id_len bytes), if client may settle it: not when the
 * id is malformed or unknown, when may_read (NULL: not asked, with ctx)
 * says the client may not read the message, or when the client settled it
 * before (a late settlement of a delivery whose clock ran out starts the
 * clock of the client's next delivery again on 2.0: deadlines__late).
 * Returns the record with res's attempt and max_attempts filled, or NULL
 * with res->status saying why. *policy gets the record's policy, when it
 * was found, for the counters. */
struct dlq_record *engine__record_to_settle(struct dlq *d, const char *id, size_t id_len, const char *client,
		dlq_may_read_fn may_read, void *ctx, struct dlq_nack_result *res, const struct dlq_policy **policy);

/* attempts.c, once per tick when a clock may have run out: each delivery
 * whose clock ran out by now is a failed attempt of its subscriber, as a
 * NACK of it would be: a retry copy, or at its last attempt its dead
 * letter. */
void engine__deadlines_tick(struct dlq *d, uint64_t now);

/* settle.c: a 2.0 READ check (redelivery tracking), classified (v), of a
 * message that left the client's session or not (removed): the deadline
 * of that delivery, when its policy has an ack_timeout (deadlines.h,
 * SEQUENTIAL). */
void engine__deadline_routed(struct dlq *d, const struct dlq_read_check *c, const struct dlq_read_verdict *v,
		bool removed);

/* attempts.c: client settled its delivery of r: its clock stops, and on 2.0
 * the clock of the client's next delivery starts (deadlines.h). */
void engine__deadline_done(struct dlq *d, struct dlq_record *r, const char *client);

/* client settled r (a NACK or an ACK): a hold of r for client is over
 * (the settler entry makes that durable). Inline: the settling files share
 * it without calling into each other. */
static inline void engine__nacked(struct dlq *d, struct dlq_record *r, const char *client)
{
	const char *holder = holds__client(r);
	if(holder && !strcmp(holder, client)) holds__release(&d->holds, r);
}

/* client went offline and its session lasts: the copies of QoS 0 the
 * broker was handed for it, and the held ones of QoS 0, become dead
 * letters. gone.c. */
void engine__gone_qos0(struct dlq *d, const char *client);

/* 2.1: client's session that lasted has ended (a clean start): the copies
 * held for it that the broker never sent become dead letters, those it
 * sent are let go. gone.c. */
void engine__lasting_session_ended(struct dlq *d, const char *client);

/* 2.1: the attempt number of r's chain for a client it was written to
 * `sends` times (0: not sent to it), from the sends the broker showed
 * (exact_counting.c). */
static inline unsigned engine__attempt_of(const struct dlq_record *r, unsigned sends)
{
	return record__attempt(r) + (sends ? sends - 1u : 0u);
}

/* 2.1 (exact_counting.c): a READ check with exact counting; true when the message
 * leaves the client's session (see dlq__read_check). */
bool engine__read_check_exact(struct dlq *d, const struct dlq_read_check *c);

/* At startup, after the state file was restored and before it is saved
 * again: restored retry copies whose client cannot have a session any more
 * become dead letters (waiting in "owed"), and delayed ones that cannot be
 * delivered go to "owed" at once. restore.c. */
void engine__settle_restored_copies(struct dlq *d);

/* At startup, after the state was restored: the held copies saved in it
 * were for sessions not known to last. Those whose session the broker
 * restored (2.1 says so) are the session's now; the others did not survive
 * the restart, and their dead letters wait in "owed" for the first tick. */
void engine__settle_restored_holds(struct dlq *d);

/* Once per tick, before anything is published in it: what the broker took
 * at the top of this loop pass (the outbox's "settling") is kept until the
 * broker saves it, or forgotten at once (journaled as taken) when the
 * plugin keeps nothing; what a save since holds is forgotten. taken.c. */
void engine__settle_taken(struct dlq *d, uint64_t now);

#endif
