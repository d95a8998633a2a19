/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Redrive tasks: an operator's "move every kept letter that matches this
 * filter back to its origin topic (or to a given topic), at this many
 * letters a second". A task is its filter (model/letters.h's
 * struct dlq_letter_match, strings owned), its target, its rate and its
 * progress (moved, failed, left); the tasks of a plugin are a short list,
 * running and ended ones, the ended kept for getStatus until newer ones
 * push them out. The pacing is a token bucket (model/pacer.h): rate
 * letters a second, at most one burst (pacer__burst) at once. At
 * most one task runs per policy filter; one without a filter takes every
 * policy and so conflicts with every other running task. Nothing here
 * walks the store or publishes: engine/redrive_tasks.c does, at the tick.
 */
#ifndef DLQ_REDRIVE_TASK_H
#define DLQ_REDRIVE_TASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/letters.h"
#include "model/pacer.h"

enum dlq_task_state {
	DLQ_TASK_RUNNING = 0,
	DLQ_TASK_DONE = 1,      /* every matching letter was tried */
	DLQ_TASK_CANCELLED = 2, /* cancelled by an operator */
};
#define DLQ_TASK_STATES 3

struct dlq_redrive_task {
	struct dlq_redrive_task *next; /* the list, newest first */
	uint64_t id;                   /* from 1, never reused (saved) */
	uint8_t state;                 /* enum dlq_task_state */
	uint32_t rate;                 /* letters a second */
	int64_t started_ms;            /* wall clock; letters dead-lettered after it are not the task's */
	int64_t ended_ms;              /* wall clock; 0 while it runs */
	uint64_t moved, failed;        /* published again and let go of; refused by the broker (kept) */
	uint64_t left;                 /* at its end: matching letters not tried (while it runs: counted) */
	struct dlq_letter_match match; /* its strings owned */
	char *to;                      /* owned; NULL: each letter's origin topic */
	char *client;                  /* owned: who started it (the log and the copies' dead-letter-client) */
	/* Where it is: saved with it (the letter it tries next), so that a
	 * restart goes on from there with its counters, neither trying nor
	 * counting again the letters it tried (those it failed are still
	 * kept, before its place). Not tracked: it starts from the oldest at
	 * its next step. */
	struct dlq_letter_cursor cursor;
	bool tracked;                  /* cursor is registered with the store */
	/* Not saved: how fast it may go on. */
	struct dlq_pacer pacer;
	uint64_t noted_ms;             /* when its progress was last noted to the store port */
	/* The last count of its letters left (redrive_tasks__left), valid
	 * while the store is as it was (the engine's change count, plus 1;
	 * 0: none) and the task where it was: getStatus repeated in one
	 * message walks the store once. */
	uint64_t left_stamp;
	const struct dlq_letter *left_from;
	uint64_t left_count;
};

struct dlq_redrive_tasks {
	struct dlq_redrive_task *head; /* owned, newest first */
	size_t count;
	size_t running;
	uint64_t next_id;              /* the next task's id (>= 1) */
};

void redrive_task__list_init(struct dlq_redrive_tasks *t);
/* Frees every task; the store's cursors must be untracked first (or the
 * store gone). */
void redrive_task__list_cleanup(struct dlq_redrive_tasks *t);

/* A new task (state running, counters 0) with copies of match's strings,
 * to and client. Returns it (not yet in a list) or NULL (out of memory). */
struct dlq_redrive_task *redrive_task__new(const struct dlq_letter_match *match, const char *to, const char *client,
		uint32_t rate);
void redrive_task__free(struct dlq_redrive_task *task);

/* The running task that a task of filter (NULL: every policy) conflicts
 * with, or NULL: one of the same filter, or either of them without one. */
struct dlq_redrive_task *redrive_task__conflict(const struct dlq_redrive_tasks *t, const char *filter);

/* Adds task (taken) as the newest, with the next id unless it has one
 * (restored: a task of that id already in the list is replaced). Ended
 * tasks beyond DLQ_MAX_REDRIVE_TASKS_KEPT go, oldest first. */
void redrive_task__add(struct dlq_redrive_tasks *t, struct dlq_redrive_task *task);

/* The task with id, or NULL. */
struct dlq_redrive_task *redrive_task__find(const struct dlq_redrive_tasks *t, uint64_t id);

/* The word of a state ("running", "done", "cancelled"). */
const char *redrive_task__state_word(uint8_t state);

#endif
