/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What the broker took, once per tick (see engine.h, engine__settle_taken):
 * kept until the broker saved it (model/unsaved.h says why), or forgotten
 * at once and journaled as taken when nothing needs keeping.
 */
#include <string.h>

#include "engine/engine.h"
#include "model/envelope.h"
#include "store/store_port.h"
#include "util/port.h"

#define BOUND_LOG_INTERVAL_MS 60000

/* Forgets the oldest kept envelope: journaled as taken. */
static void pop_forget(struct dlq *d)
{
	struct dlq_unsaved *u = &d->unsaved;
	struct dlq_envelope *e = u->list.head;
	u->list.head = e->next;
	if(u->list.head) u->list.head->prev = NULL;
	else u->list.tail = NULL;
	u->list.count--;
	u->bytes -= e->bytes;
	store_port__remove(&d->store, e->seq);
	envelope__free(e);
	d->changes++;
}

/* A held copy's session does not persist: no broker save carries it, and
 * its hold dead-letters it after a restart. */
static bool worth_keeping(const struct dlq *d, const struct dlq_envelope *e)
{
	return d->broker.db_path && store_port__on(&d->store)
			&& !(e->kind == DLQ_ENV_RETRY_COPY && e->target_client && !e->target_persists);
}

void engine__settle_taken(struct dlq *d, uint64_t now)
{
	struct dlq_unsaved *u = &d->unsaved;
	if(u->list.count == 0 && d->outbox.settling.count == 0) return;

	/* Look first: a save seen now may have happened before what settles
	 * in this tick was taken, so that is stamped with the count after it. */
	if(d->broker.db_path && unsaved__file_changed(u, d->broker.db_path)) u->saves++;
	while(u->list.head && u->list.head->broker_saves < u->saves){
		pop_forget(d);
	}

	struct dlq_envelope *e;
	while((e = d->outbox.settling.head) != NULL){
		outbox__unlink(&d->outbox, &d->outbox.settling, e);
		if(worth_keeping(d, e)){
			/* The broker has the envelope now: no policy of it is
			 * used again (a restore finds it by filter), and none
			 * keeps a retired policy table alive. */
			e->policy = NULL;
			e->broker_saves = u->saves;
			unsaved__push(u, e);
		}else{
			store_port__remove(&d->store, e->seq);
			envelope__free(e);
		}
		d->changes++;
	}

	if(u->bytes > d->cfg.max_pending_bytes){
		size_t n = 0;
		while(u->bytes > d->cfg.max_pending_bytes){
			pop_forget(d);
			n++;
		}
		if(u->warned_ms == 0 || now - u->warned_ms >= BOUND_LOG_INTERVAL_MS){
			u->warned_ms = now;
			port__log(DLQ_LOG_WARNING, "the broker has not saved its database (%s) since it took %zu retry copies "
					"and dead letters worth more than max_pending_bytes: %zu of them are no longer kept, and a "
					"SIGKILL before its next save loses those it has not delivered (a shorter autosave_interval "
					"saves sooner)", d->broker.db_path, u->list.count + n, n);
		}
	}
}
