/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What the engine does with the envelopes restored from the state file at
 * startup, before the state file saves them again (dlq__init): a retry
 * copy for one client that can no longer reach it is dead-lettered, or
 * waits in "owed" for the first tick.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/letter_store.h"
#include "model/envelope.h"
#include "util/errtext.h"
#include "util/port.h"

/* A restored retry copy for one client can only reach it if its session
 * survived the restart; otherwise the broker would drop it silently. 2.1
 * says which sessions it restored (the broker reads its database before it
 * loads plugins): a copy for one of them waits for it, whatever was
 * thought of the session when it NACKed; one for another client, with
 * broker persistence, waits too, and is dead-lettered when it falls due if
 * the broker has no session for the client by then (outbound__copy_qos). */
static bool unreachable(const struct dlq *d, struct dlq_envelope *e)
{
	if(e->kind != DLQ_ENV_RETRY_COPY || e->target_client == NULL) return false;
	if(d->broker.has_session){
		if(d->broker.has_session(d->broker.ctx, e->target_client)){
			e->target_persists = true;
			return false;
		}
		return !d->broker.persistence;
	}
	return !(d->broker.persistence && e->target_persists);
}

/* A retry copy the broker accepted in the loop pass it stopped in is
 * saved owed (the broker may not have taken it: it is published again).
 * Something may already stand for it: its client settled it (a NACK, an
 * ACK, its clock run out), or the plugin let go of it with its dead letter
 * when the client left without a session (either way a settler of its
 * record), or it is held for a client whose session did not survive the
 * restart, and the hold makes its dead letter
 * (engine__settle_restored_holds). Then the owed copy goes: published
 * again it would be dead-lettered a second time where it cannot reach its
 * client, and a resend of a settled delivery is settled already. */
static bool stood_for(const struct dlq *d, const struct dlq_envelope *e)
{
	if(e->kind != DLQ_ENV_RETRY_COPY || e->target_client == NULL) return false;
	const struct dlq_record *r = ledger__find(&d->ledger, &e->id);
	if(r == NULL) return false;
	if(ledger__has_settler(r, e->target_client)) return true;
	const char *holder = holds__client(r);
	if(holder == NULL || strcmp(holder, e->target_client)) return false;
	return !(d->broker.has_session && d->broker.has_session(d->broker.ctx, e->target_client));
}

void engine__settle_restored_copies(struct dlq *d)
{
	char reason[512];

	/* Delayed ones that cannot be delivered need not wait: to owed. */
	size_t n = 0;
	for(size_t i = 0; i < d->delayed.count; i++){
		if(unreachable(d, d->delayed.heap[i])) n++;
	}
	struct dlq_envelope **found = n ? malloc(n * sizeof(*found)) : NULL;
	if(found){
		n = 0;
		for(size_t i = 0; i < d->delayed.count; i++){
			if(unreachable(d, d->delayed.heap[i])) found[n++] = d->delayed.heap[i];
		}
		for(size_t i = 0; i < n; i++){
			schedule__remove(&d->delayed, found[i]);
			found[i]->due_ms = 0;
			outbox__push(&d->outbox, &d->outbox.owed, found[i]);
		}
		free(found);
	}

	struct dlq_envelope *e = d->outbox.owed.head;
	while(e){
		struct dlq_envelope *next = e->next;
		if(stood_for(d, e)){
			outbox__unlink(&d->outbox, &d->outbox.owed, e);
			envelope__free(e);
		}else if(unreachable(d, e)){
			snprintf(reason, sizeof(reason), d->broker.persistence
					? "the broker restarted and subscriber " QFMT " had no session that survives it"
					: "the broker restarted without persistence, so subscriber " QFMT " has no session to receive its retry copy",
					Q(e->target_client));
			struct dlq_envelope *dl = envelope__dead_letter_from_copy(e, d->cfg.broker_name, DLQ_DEAD_RESTART, reason,
					port__wall_ms());
			if(dl){
				dl->seq = d->next_seq++;
				letter_store__name(d, dl);
				outbox__unlink(&d->outbox, &d->outbox.owed, e);
				envelope__free(e);
				outbox__push(&d->outbox, &d->outbox.owed, dl);
			}
		}
		e = next;
	}
}
