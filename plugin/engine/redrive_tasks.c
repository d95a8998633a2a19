/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Redrive tasks at work (see redrive_tasks.h): started after their access
 * and conflict checks, paced at the tick by their token bucket, each letter
 * published through redrive.c's single redrive, their progress noted to the
 * store port (a start, an end and a cancel at once; progress at most once
 * a second, and every snapshot holds it).
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/redrive_tasks.h"
#include "util/errtext.h"
#include "util/port.h"

/* At most this many letters looked at per task and tick: a task whose
 * filter matches few of many kept letters spreads its walk over ticks. */
#define WALK_PER_TICK 4096
/* Progress is noted to the store port at most this often. */
#define NOTE_INTERVAL_MS 1000

/* Whether l is one of task's letters: matched, and dead-lettered before
 * the task started. */
static bool task_takes(const struct dlq_redrive_task *t, const struct dlq_letter *l)
{
	return l->env->time_ms <= t->started_ms && letters__matches(&t->match, l->env);
}

/* The policy filter named in a message: the task's, or "every policy". */
static const char *scope(const struct dlq_redrive_task *t)
{
	return t->match.filter ? t->match.filter : "every policy";
}

static void note(struct dlq *d, struct dlq_redrive_task *t, bool sync)
{
	t->noted_ms = port__now_ms();
	d->changes++;
	store_port__task(&d->store, t, sync);
}

int redrive_tasks__start(struct dlq *d, const struct letter_store_asker *who, const struct dlq_letter_match *m,
		const char *to, uint32_t rate, struct dlq_redrive_task **out, char *err, size_t errlen)
{
	struct dlq_redrive_task *other = redrive_task__conflict(&d->tasks, m->filter);
	if(other){
		errtext__set(err, errlen, "a redrive task (%" PRIu64 ") is already running for %s: cancel it "
				"(cancelRedriveTask) or wait for it to end; at most one task runs per policy, and one without "
				"\"filter\" takes every policy", other->id, m->filter && other->match.filter ? "this policy"
				: "every policy");
		return EBUSY;
	}
	struct dlq_redrive_task *t = redrive_task__new(m, to, who->client, rate);
	if(t == NULL) return ENOMEM;
	t->started_ms = port__wall_ms();
	/* With plugin_opt_dead_letter_access check the asker's rights are
	 * checked now, for every letter the task takes: the tick runs without
	 * its client. */
	uint64_t matched = 0, unreadable = 0, unwritable = 0;
	char home[DLQ_HOME_TOPIC_MAX];
	for(struct dlq_letter *l = d->letters.oldest; l; l = l->newer){
		if(!task_takes(t, l)) continue;
		matched++;
		if(!letter_store__may_read(d, who, l)) unreadable++;
		else if(!letter_store__may_write(d, who, l, dlq__redrive_target(d, l, to, home))) unwritable++;
	}
	if(unreadable || unwritable){
		errtext__set(err, errlen, "not permitted: of the %" PRIu64 " letters the filter matches, this client may not "
				"read %" PRIu64 " and may not write the target of %" PRIu64, matched, unreadable, unwritable);
		redrive_task__free(t);
		return EACCES;
	}
	t->left = matched;
	redrive_task__add(&d->tasks, t);
	note(d, t, true);
	/* The tick has work from now on. */
	d->tick_quiet = false;
	port__log(DLQ_LOG_NOTICE, "redrive task %" PRIu64 " started by " QFMT " for %s: %" PRIu64 " letters to "
			"%s at %" PRIu32 " a second", t->id, Q(who->client), scope(t), matched,
			to ? to : "their origin topics", rate);
	*out = t;
	return 0;
}

/* Ends running task t in state, noting how many it left. */
static void end(struct dlq *d, struct dlq_redrive_task *t, uint8_t state)
{
	t->left = redrive_tasks__left(d, t);
	if(t->tracked) letters__untrack(&d->letters, &t->cursor);
	t->tracked = false;
	t->state = state;
	t->ended_ms = port__wall_ms();
	d->tasks.running--;
	note(d, t, true);
}

int redrive_tasks__cancel(struct dlq *d, uint64_t id, const char *filter, const char *client,
		struct dlq_redrive_task **out, char *err, size_t errlen)
{
	struct dlq_redrive_task *t = NULL;
	for(struct dlq_redrive_task *c = d->tasks.head; c && t == NULL; c = c->next){
		if(c->state != DLQ_TASK_RUNNING) continue;
		if(id ? c->id == id : (c->match.filter && !strcmp(c->match.filter, filter))) t = c;
	}
	if(t == NULL){
		if(id) errtext__set(err, errlen, "no running redrive task %" PRIu64, id);
		else errtext__set(err, errlen, "no redrive task is running for the policy " QFMT, Q(filter));
		return ENOENT;
	}
	end(d, t, DLQ_TASK_CANCELLED);
	port__log(DLQ_LOG_NOTICE, "redrive task %" PRIu64 " cancelled by " QFMT " after %" PRIu64 " moved, %" PRIu64
			" failed, %" PRIu64 " left", t->id, Q(client), t->moved, t->failed, t->left);
	*out = t;
	return 0;
}

uint64_t redrive_tasks__left(const struct dlq *d, struct dlq_redrive_task *t)
{
	if(t->state != DLQ_TASK_RUNNING) return t->left;
	const struct dlq_letter *from = t->tracked ? t->cursor.at : d->letters.oldest;
	if(t->left_stamp == d->changes + 1 && t->left_from == from) return t->left_count;
	uint64_t n = 0;
	for(const struct dlq_letter *l = from; l; l = l->newer){
		if(task_takes(t, l)) n++;
	}
	t->left_stamp = d->changes + 1;
	t->left_from = from;
	t->left_count = n;
	return n;
}

/* Moves what t's bucket allows, from where it is. */
static void step(struct dlq *d, struct dlq_redrive_task *t, uint64_t now)
{
	if(!t->tracked){
		/* Started, or restored without a place (a file older than
		 * places, or a task noted before its first step): from the
		 * oldest letter. A task restored with its place is tracked
		 * already, there (store/state_read.c). */
		letters__track(&d->letters, &t->cursor);
		t->tracked = true;
	}
	pacer__advance(&t->pacer, t->rate, now);
	unsigned walked = 0;
	struct dlq_letter *l;
	bool moved = false;
	while(pacer__ready(&t->pacer) && (l = t->cursor.at) != NULL && walked++ < WALK_PER_TICK){
		/* Past it first: it leaves the store when its copy is accepted. */
		t->cursor.at = l->newer;
		if(!task_takes(t, l)) continue;
		(void)pacer__take(&t->pacer);
		struct dlq_redrive_result res;
		int rc = dlq__redrive_letter(d, l, t->to, t->client, true, &res);
		if(rc) t->failed++;
		else t->moved++;
		moved = true;
	}
	if(t->cursor.at == NULL){
		end(d, t, DLQ_TASK_DONE);
		port__log(DLQ_LOG_NOTICE, "redrive task %" PRIu64 " for %s done: %" PRIu64 " moved, %" PRIu64 " failed "
				"(kept)", t->id, scope(t), t->moved, t->failed);
	}else if(moved && now - t->noted_ms >= NOTE_INTERVAL_MS){
		note(d, t, false);
	}
}

void redrive_tasks__tick(struct dlq *d, uint64_t now)
{
	for(struct dlq_redrive_task *t = d->tasks.head; t; t = t->next){
		if(t->state == DLQ_TASK_RUNNING) step(d, t, now);
	}
}

const struct dlq_redrive_tasks *redrive_tasks__list(const struct dlq *d)
{
	return &d->tasks;
}

void redrive_tasks__detach(struct dlq *d)
{
	for(struct dlq_redrive_task *t = d->tasks.head; t; t = t->next){
		if(t->tracked) letters__untrack(&d->letters, &t->cursor);
		t->tracked = false;
	}
}
