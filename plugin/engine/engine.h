/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What the engine's own files share and nothing else uses: dlq.c (tracking,
 * NACKs, ticks) and gone.c (copies for clients that leave, held copies).
 * The public face of the engine is dlq.h.
 */
#ifndef DLQ_ENGINE_H
#define DLQ_ENGINE_H

#include <stdbool.h>

#include "engine/dlq.h"
#include "model/envelope.h"

/* Counts an event in the totals and in the counters of its policy. */
#define COUNT(d, policy, field, n) do{ \
		struct dlq_counters *pc_ = dlq__policy_counters((d), (policy)); \
		(d)->counters.field += (n); \
		if(pc_) pc_->field += (n); \
	}while(0)

/* Makes room for bytes more in the ledger, oldest records first, without
 * touching what is owed. */
void engine__make_room(struct dlq *d, size_t bytes);

/* Hands e to the broker. Accepted: e waits in "sent" until the broker has
 * taken it. Refused (or no memory for a copy's record): e waits in "owed".
 * Takes e either way. */
void engine__send(struct dlq *d, struct dlq_envelope *e);

/* Makes and sends the dead letter of r for client after `delivered`
 * deliveries: 0, ENOSPC (what is owed would pass max_pending_bytes; only
 * checked when bounded) or ENOMEM; on failure nothing was published or
 * recorded. */
int engine__dead_letter_of(struct dlq *d, struct dlq_record *r, const char *client, const char *reason,
		unsigned delivered, bool bounded);

/* The copy record for a targeted copy e (for a client whose session does
 * not persist) is now in the ledger: held for that client (holds.h). */
void engine__hold(struct dlq *d, const struct dlq_envelope *e, struct dlq_record *copy);

/* client NACKed r: a hold of r for client is over (the NACK's nacker entry
 * makes that durable). */
void engine__nacked(struct dlq *d, struct dlq_record *r, const char *client);

/* Dead-letters the message of r, delivered `delivered` times to client
 * without acknowledgement, as a NACK at its last allowed attempt would.
 * Returns whether the dead letter was made (if not, the message must stay
 * in the session). */
bool engine__divert_redelivered(struct dlq *d, struct dlq_record *r, const char *client, unsigned delivered);

/* 2.1 (sends.c): the attempt number of r's chain for a client it was
 * written to `sends` times (0: not sent to it), from the sends the broker
 * showed. */
unsigned engine__attempt_of(const struct dlq_record *r, unsigned sends);

/* 2.1 (sends.c): a READ check with exact counting; true when the message
 * leaves the client's session (see dlq__read_check). */
bool engine__read_check_exact(struct dlq *d, const struct dlq_read_check *c);

/* At startup, after the state was restored: the held copies saved in it
 * were for sessions not known to last. Those whose session the broker
 * restored (2.1 says so) are the session's now; the others did not survive
 * the restart, and their dead letters wait in "owed" for the first tick. */
void engine__settle_restored_holds(struct dlq *d);

/* Why a targeted copy cannot reach its client (engine__copy_qos). */
#define ENGINE_COPY_QOS0_OFFLINE (-1) /* a QoS 0 subscription of an offline session */
#define ENGINE_COPY_NO_SESSION (-2)   /* the broker (2.1) has no session for the client */

/* The QoS targeted retry copy e goes out with (dead letters and ordinary
 * copies: their own), filling *m with what the target's subscriptions say
 * (m->id_count 0 when nothing is known); or a negative ENGINE_COPY_* when
 * the copy cannot reach its client. session_events.c. */
int engine__copy_qos(const struct dlq *d, const struct dlq_envelope *e, struct dlq_sub_match *m);

/* Appends m's subscription identifiers to h. Returns 0 or ENOMEM. */
int engine__add_sub_ids(struct dlq_headers *h, const struct dlq_sub_match *m);

/* Replaces copy e, which cannot reach its client for reason why (a
 * negative ENGINE_COPY_*), with its dead letter. Takes e (kept in "owed"
 * if the dead letter cannot be made). gone.c. */
void engine__copy_unreachable(struct dlq *d, struct dlq_envelope *e, int why);

/* client went offline and its session lasts: the copies of QoS 0 the
 * broker was handed for it, and the held ones of QoS 0, become dead
 * letters. gone.c. */
void engine__gone_qos0(struct dlq *d, const char *client);

#endif
