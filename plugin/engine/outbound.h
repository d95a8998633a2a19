/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The engine's outbound path (outbound.c): handing retry copies and dead
 * letters to the broker, the dead letter of a record, a copy that cannot
 * reach its client, the QoS a copy goes out with, and the memory bound.
 * Every event handler (tracking, NACKs, ticks, clients leaving, sessions,
 * exact counting) calls down into it; it calls none of them.
 */
#ifndef DLQ_OUTBOUND_H
#define DLQ_OUTBOUND_H

#include <stdbool.h>
#include <errno.h>
#include <stddef.h>

#include "engine/engine.h"
#include "model/envelope.h"

/* Evicts the oldest records until bytes more fit beside what is owed
 * (outbound__make_room, when they do not). */
void outbound__evict_for(struct dlq *d, size_t bytes);

/* Makes room for bytes more in the ledger, oldest records first, without
 * touching what is owed; not while a failed attempt is under way
 * (d->evict_held: its retry copy's record must not evict the record the
 * attempt still uses, often the oldest): it makes room when done. Inline:
 * every tracked message asks, and nearly always there is room. */
static inline void outbound__make_room(struct dlq *d, size_t bytes)
{
	if(d->ledger.bytes + engine__owed_bytes(d) + bytes > d->cfg.max_pending_bytes) outbound__evict_for(d, bytes);
}

/* Records r in the ledger if it fits the memory bound (making room,
 * oldest first). Takes r either way. Returns 0, ENOSPC (it does not fit
 * beside what is owed: freed) or an error of ledger__insert. */
int outbound__remember(struct dlq *d, struct dlq_record *r);
/* outbound__remember for a record whose record__bytes the caller knows
 * (the tracked path: inline). */
static inline int outbound__remember_sized(struct dlq *d, struct dlq_record *r, size_t bytes)
{
	if(engine__owed_bytes(d) + bytes > d->cfg.max_pending_bytes){
		record__free(r);
		return ENOSPC;
	}
	outbound__make_room(d, bytes);
	return ledger__insert_sized(&d->ledger, r, bytes);
}

/* Hands e to the broker. Accepted: e waits in "sent" until the broker has
 * taken it. Refused (or no memory for a copy's record): e waits in "owed".
 * Takes e either way. */
void outbound__send(struct dlq *d, struct dlq_envelope *e);
/* outbound__send without the refusal's handling: returns 0 (accepted, e
 * waits in "sent"), -1 (a targeted copy that cannot reach its client: e
 * was made its dead letter, outbound__copy_unreachable), or the broker's
 * errno (nothing published or counted, e still the caller's). */
int outbound__publish(struct dlq *d, struct dlq_envelope *e);

/* Publishes kept dead letter l as it is kept (payload, QoS 1, the
 * original headers and every property of the plugin's, its maker's
 * dead-letter-broker and dead-letter-id among them) on topic, routed as
 * any message: a redrive request for the broker that made it, which its
 * bridge carries home (plugin_opt_redrive_home). Nothing is kept of it
 * here. Returns 0 (the broker accepted it), or the broker's errno. */
int outbound__send_home(struct dlq *d, const struct dlq_envelope *l, const char *topic);

/* Makes and sends the dead letter of r for client after `delivered`
 * deliveries, for cause (DLQ_DEAD_FINAL: a final NACK's, which says so,
 * dead-letter-final): 0, ENOSPC (what is owed would pass max_pending_bytes;
 * only checked when bounded) or ENOMEM; on failure nothing was published or
 * recorded. */
int outbound__dead_letter_of(struct dlq *d, struct dlq_record *r, const char *client, enum dlq_cause cause,
		const char *reason, unsigned delivered, bool bounded);

/* The copy record for a targeted copy e (for a client whose session does
 * not persist, or, on 2.1, one whose session lasts: hold_lasting) is now
 * in the ledger: held for that client (holds.h). A lasting session's hold
 * outlives the connection; when the session ends, a copy the broker never
 * sent is dead-lettered and one it sent is let go (its deadline, if any,
 * runs on: gone.c). */
void outbound__hold(struct dlq *d, const struct dlq_envelope *e, struct dlq_record *copy);

/* Dead-letters the message of r, delivered `delivered` times to client
 * without acknowledgement, as a NACK at its last allowed attempt would.
 * Returns whether the dead letter was made (if not, the message must stay
 * in the session). */
bool outbound__divert_redelivered(struct dlq *d, struct dlq_record *r, const char *client, unsigned delivered);

/* Replaces the retry copy e (for one client) by its dead letter with
 * cause and reason, noted and sent. Returns false, with nothing changed,
 * when the dead letter could not be made; e itself is the caller's either
 * way. */
bool outbound__divert_copy(struct dlq *d, const struct dlq_envelope *e, enum dlq_cause cause, const char *reason);

/* The counts of the delivery of r to client changed: the state file is to
 * save them (a snapshot at its next save; the journal at once, when there
 * is one), so that a restart goes on from them. */
void outbound__note_delivery(struct dlq *d, const struct dlq_record *r, const char *client);

/* Why a targeted copy cannot reach its client (outbound__copy_qos). */
#define OUTBOUND_COPY_QOS0_OFFLINE (-1) /* a QoS 0 subscription of an offline session */
#define OUTBOUND_COPY_NO_SESSION (-2)   /* the broker (2.1) has no session for the client */

/* The QoS targeted retry copy e goes out with (dead letters and ordinary
 * copies: their own), filling *m with what the target's subscriptions say
 * (m->id_count 0 when nothing is known); or a negative OUTBOUND_COPY_* when
 * the copy cannot reach its client.  */
int outbound__copy_qos(const struct dlq *d, const struct dlq_envelope *e, struct dlq_sub_match *m);

/* Replaces copy e, which cannot reach its client for reason why (a
 * negative OUTBOUND_COPY_*), with its dead letter. Takes e (kept in "owed"
 * if the dead letter cannot be made). */
void outbound__copy_unreachable(struct dlq *d, struct dlq_envelope *e, int why);

#endif
