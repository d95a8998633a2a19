/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Redrive tasks run by the engine (redrive_tasks.c; the tasks themselves
 * and their pacing are model/redrive_task.h): started and cancelled by an
 * operator's command (api/task_commands.c), paced at the tick, each letter
 * published again as a single redrive publishes it (redrive.c: it leaves
 * the store only once the broker accepted the copy). A task takes the
 * letters its filter matches that were dead-lettered before it started
 * (so that a copy that fails again and comes back is not moved twice).
 */
#ifndef DLQ_REDRIVE_TASKS_H
#define DLQ_REDRIVE_TASKS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/dlq.h"
#include "engine/letter_store.h"
#include "model/redrive_task.h"

/* Starts a task of who over the letters m matches (its strings copied),
 * published to to (NULL: each letter's origin topic) at rate letters a
 * second (1 to DLQ_REDRIVE_RATE_MAX, checked by the caller). Refused, with
 * the reason in err: EBUSY when a running task conflicts
 * (redrive_task__conflict), EACCES when, with
 * plugin_opt_dead_letter_access check, who may not read a matching letter
 * or write its target. Returns 0 with *out the task (borrowed; its left
 * the letters it matched), or one of those, or ENOMEM. */
int redrive_tasks__start(struct dlq *d, const struct letter_store_asker *who, const struct dlq_letter_match *m,
		const char *to, uint32_t rate, struct dlq_redrive_task **out, char *err, size_t errlen);

/* Cancels the running task with id (filter NULL), or the one running for
 * the policy filter (id 0), on behalf of client. Returns 0 with *out the
 * task (borrowed), or ENOENT with the reason in err. */
int redrive_tasks__cancel(struct dlq *d, uint64_t id, const char *filter, const char *client,
		struct dlq_redrive_task **out, char *err, size_t errlen);

/* The letters a running task has still to try (a walk from where it is,
 * done again only when the store or the task moved since the last);
 * an ended task's left as it ended. */
uint64_t redrive_tasks__left(const struct dlq *d, struct dlq_redrive_task *t);

/* The tick: each running task moves the letters its bucket allows
 * (now: port__now_ms), and ends when it has tried every one. */
void redrive_tasks__tick(struct dlq *d, uint64_t now);

/* The tasks (borrowed): getStatus shows them. */
const struct dlq_redrive_tasks *redrive_tasks__list(const struct dlq *d);

/* Forgets the store's cursors of every task (before the store goes). */
void redrive_tasks__detach(struct dlq *d);

#endif
