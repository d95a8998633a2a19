/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Keeping what the broker took until the broker has saved it (see
 * unsaved.h): watching the broker's database file, and moving envelopes
 * from the outbox's "settling" list to the kept list and out of it.
 */
#include <string.h>
#include <sys/stat.h>

#include "engine/engine.h"
#include "engine/unsaved.h"
#include "store/persist.h"
#include "util/port.h"

#define BOUND_LOG_INTERVAL_MS 60000

void unsaved__init(struct dlq_unsaved *u)
{
	memset(u, 0, sizeof(*u));
}

void unsaved__cleanup(struct dlq_unsaved *u)
{
	struct dlq_envelope *e = u->list.head;
	while(e){
		struct dlq_envelope *next = e->next;
		envelope__free(e);
		e = next;
	}
	memset(u, 0, sizeof(*u));
}

/* Whether the file at path differs from the last look (a save replaced
 * it); records what it looks like now. A file that cannot be read counts
 * as absent: its appearance is a save, its disappearance is not. */
static bool file_changed(struct dlq_unsaved *u, const char *path)
{
	struct stat st;
	if(stat(path, &st) != 0){
		u->present = false;
		return false;
	}
	bool changed = !u->present || st.st_dev != u->dev || st.st_ino != u->ino || st.st_size != u->size
			|| st.st_mtim.tv_sec != u->mtime.tv_sec || st.st_mtim.tv_nsec != u->mtime.tv_nsec;
	u->present = true;
	u->dev = st.st_dev;
	u->ino = st.st_ino;
	u->size = st.st_size;
	u->mtime = st.st_mtim;
	return changed;
}

static void push(struct dlq_unsaved *u, struct dlq_envelope *e)
{
	e->next = NULL;
	e->prev = u->list.tail;
	if(u->list.tail) u->list.tail->next = e;
	else u->list.head = e;
	u->list.tail = e;
	u->list.count++;
	u->bytes += e->bytes;
}

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
	persist__note_remove(d, e->seq);
	envelope__free(e);
	d->changes++;
}

/* A held copy's session does not persist: no broker save carries it, and
 * its hold dead-letters it after a restart. */
static bool worth_keeping(const struct dlq *d, const struct dlq_envelope *e)
{
	return d->cfg.broker_db_path && d->persist.journal_fd >= 0
			&& !(e->kind == DLQ_ENV_RETRY_COPY && e->target_client && !e->target_persists);
}

void engine__settle_taken(struct dlq *d, uint64_t now)
{
	struct dlq_unsaved *u = &d->unsaved;
	if(u->list.count == 0 && d->outbox.settling.count == 0) return;

	/* Look first: a save seen now may have happened before what settles
	 * in this tick was taken, so that is stamped with the count after it. */
	if(d->cfg.broker_db_path && file_changed(u, d->cfg.broker_db_path)) u->saves++;
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
			push(u, e);
		}else{
			persist__note_remove(d, e->seq);
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
					"saves sooner)", d->cfg.broker_db_path, u->list.count + n, n);
		}
	}
}
