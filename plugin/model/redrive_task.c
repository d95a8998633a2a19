/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Redrive tasks (see redrive_task.h): the list, and what conflicts with
 * what.
 */
#include <stdlib.h>
#include <string.h>

#include "model/redrive_task.h"
#include "mosquitto_dlq.h"

void redrive_task__list_init(struct dlq_redrive_tasks *t)
{
	memset(t, 0, sizeof(*t));
	t->next_id = 1;
}

void redrive_task__free(struct dlq_redrive_task *task)
{
	if(task == NULL) return;
	free((char *)task->match.filter);
	free((char *)task->match.dead_letter);
	free((char *)task->match.reason);
	free((char *)task->match.broker);
	free(task->to);
	free(task->client);
	free(task);
}

void redrive_task__list_cleanup(struct dlq_redrive_tasks *t)
{
	while(t->head){
		struct dlq_redrive_task *next = t->head->next;
		redrive_task__free(t->head);
		t->head = next;
	}
	redrive_task__list_init(t);
}

/* A copy of s, or NULL for NULL; *bad set when out of memory. */
static char *dup_or_null(const char *s, bool *bad)
{
	if(s == NULL) return NULL;
	char *c = strdup(s);
	if(c == NULL) *bad = true;
	return c;
}

struct dlq_redrive_task *redrive_task__new(const struct dlq_letter_match *match, const char *to, const char *client,
		uint32_t rate)
{
	struct dlq_redrive_task *task = calloc(1, sizeof(*task));
	if(task == NULL) return NULL;
	bool bad = false;
	task->match = *match;
	task->match.filter = dup_or_null(match->filter, &bad);
	task->match.dead_letter = dup_or_null(match->dead_letter, &bad);
	task->match.reason = dup_or_null(match->reason, &bad);
	task->match.broker = dup_or_null(match->broker, &bad);
	task->to = dup_or_null(to, &bad);
	task->client = dup_or_null(client, &bad);
	task->rate = rate;
	task->state = DLQ_TASK_RUNNING;
	if(bad){
		redrive_task__free(task);
		return NULL;
	}
	return task;
}

struct dlq_redrive_task *redrive_task__conflict(const struct dlq_redrive_tasks *t, const char *filter)
{
	for(struct dlq_redrive_task *task = t->head; task; task = task->next){
		if(task->state != DLQ_TASK_RUNNING) continue;
		if(filter == NULL || task->match.filter == NULL || !strcmp(filter, task->match.filter)) return task;
	}
	return NULL;
}

struct dlq_redrive_task *redrive_task__find(const struct dlq_redrive_tasks *t, uint64_t id)
{
	for(struct dlq_redrive_task *task = t->head; task; task = task->next){
		if(task->id == id) return task;
	}
	return NULL;
}

/* Unlinks and frees the task *at points to. */
static void drop_at(struct dlq_redrive_tasks *t, struct dlq_redrive_task **at)
{
	struct dlq_redrive_task *gone = *at;
	*at = gone->next;
	if(gone->state == DLQ_TASK_RUNNING) t->running--;
	t->count--;
	redrive_task__free(gone);
}

void redrive_task__add(struct dlq_redrive_tasks *t, struct dlq_redrive_task *task)
{
	if(task->id == 0){
		task->id = t->next_id++;
	}else{
		for(struct dlq_redrive_task **at = &t->head; *at; at = &(*at)->next){
			if((*at)->id == task->id){
				drop_at(t, at);
				break;
			}
		}
		if(task->id >= t->next_id) t->next_id = task->id + 1;
	}
	task->next = t->head;
	t->head = task;
	t->count++;
	if(task->state == DLQ_TASK_RUNNING) t->running++;
	/* The oldest ended tasks go past the bound; running ones stay. */
	while(t->count > DLQ_MAX_REDRIVE_TASKS_KEPT){
		struct dlq_redrive_task **last = NULL;
		for(struct dlq_redrive_task **at = &t->head; *at; at = &(*at)->next){
			if((*at)->state != DLQ_TASK_RUNNING) last = at;
		}
		if(last == NULL) break;
		drop_at(t, last);
	}
}

const char *redrive_task__state_word(uint8_t state)
{
	switch(state){
	case DLQ_TASK_RUNNING: return "running";
	case DLQ_TASK_DONE: return "done";
	case DLQ_TASK_CANCELLED: return "cancelled";
	default: return "unknown";
	}
}
