/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The redrive task commands (see task_commands.h): startRedriveTask
 * {filter members..., "to": topic, "rate": n} and cancelRedriveTask
 * {"task": id} or {"filter": policy}, each answered with the task as
 * getStatus' "redriveTasks" shows it.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "api/letter_filter.h"
#include "api/task_commands.h"
#include "engine/redrive_tasks.h"
#include "model/cause.h"
#include "mosquitto_dlq.h"
#include "util/errtext.h"
#include "util/topic.h"

#define DLQ_STR_(x) #x
#define DLQ_STR(x) DLQ_STR_(x)

bool task_commands__is(const char *name)
{
	return !strcmp(name, DLQ_COMMAND_START_REDRIVE_TASK) || !strcmp(name, DLQ_COMMAND_CANCEL_REDRIVE_TASK);
}

/* A string member, or null: NULL. */
static bool add_str_or_null(cJSON *o, const char *name, const char *v)
{
	return (v ? cJSON_AddStringToObject(o, name, v) : cJSON_AddNullToObject(o, name)) != NULL;
}

static bool add_num(cJSON *o, const char *name, double v)
{
	return cJSON_AddNumberToObject(o, name, v) != NULL;
}

/* The task as getStatus and the commands show it. */
static cJSON *task_json(const struct dlq *d, struct dlq_redrive_task *t)
{
	const struct dlq_letter_match *m = &t->match;
	cJSON *o = cJSON_CreateObject();
	cJSON *f = o ? cJSON_AddObjectToObject(o, "match") : NULL;
	bool ok = f && add_num(o, "id", (double)t->id) && add_str_or_null(o, "policy", m->filter)
			&& add_str_or_null(o, "to", t->to) && add_num(o, "rate", t->rate)
			&& add_num(o, "burst", pacer__burst(t->rate))
			&& cJSON_AddStringToObject(o, "state", redrive_task__state_word(t->state))
			&& add_num(o, "moved", (double)t->moved) && add_num(o, "failed", (double)t->failed)
			&& add_num(o, "left", (double)redrive_tasks__left(d, t))
			&& add_num(o, "started", (double)t->started_ms)
			&& (t->ended_ms == 0 || add_num(o, "ended", (double)t->ended_ms))
			&& add_str_or_null(o, "client", t->client)
			&& (m->filter == NULL || cJSON_AddStringToObject(f, "filter", m->filter))
			&& (m->dead_letter == NULL || cJSON_AddStringToObject(f, "deadLetter", m->dead_letter))
			&& (m->reason == NULL || cJSON_AddStringToObject(f, "reason", m->reason))
			&& (m->broker == NULL || cJSON_AddStringToObject(f, "broker", m->broker))
			&& (!m->cause_given || cJSON_AddStringToObject(f, "cause", cause__name(m->cause)))
			&& (!m->since_given || add_num(f, "since", (double)m->since))
			&& (!m->until_given || add_num(f, "until", (double)m->until));
	if(!ok){
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

cJSON *task_commands__status(const struct dlq *d)
{
	cJSON *a = cJSON_CreateArray();
	for(struct dlq_redrive_task *t = a ? redrive_tasks__list(d)->head : NULL; t; t = t->next){
		cJSON *o = task_json(d, t);
		if(o == NULL || !cJSON_AddItemToArray(a, o)){
			cJSON_Delete(o);
			cJSON_Delete(a);
			return NULL;
		}
	}
	return a;
}

/* "rate": absent or null gives the default. */
static int rate_member(const cJSON *cmd, uint32_t *rate, char *err, size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cmd, "rate");
	*rate = DLQ_REDRIVE_RATE_DEFAULT;
	if(v == NULL || cJSON_IsNull(v)) return 0;
	if(!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble)
			|| v->valuedouble < 1 || v->valuedouble > DLQ_REDRIVE_RATE_MAX){
		errtext__set(err, errlen, "\"rate\" must be a whole number of letters a second from 1 to "
				DLQ_STR(DLQ_REDRIVE_RATE_MAX) " (default " DLQ_STR(DLQ_REDRIVE_RATE_DEFAULT) ")");
		return EINVAL;
	}
	*rate = (uint32_t)v->valuedouble;
	return 0;
}

static int run_start(struct dlq *d, const struct letter_store_asker *who, const cJSON *cmd, cJSON **data,
		char *err, size_t errlen)
{
	struct dlq_letter_match m;
	const char *to;
	uint32_t rate;
	if(letter_filter__parse(cmd, &m, err, errlen) || letter_filter__string(cmd, "to", &to, err, errlen)
			|| rate_member(cmd, &rate, err, errlen)){
		return EINVAL;
	}
	if(m.since_given && m.until_given && m.since > m.until){
		errtext__set(err, errlen, "\"since\" is after \"until\": the filter matches no letter");
		return EINVAL;
	}
	if(to && (!topic__valid_publish(to) || to[0] == '$')){
		errtext__set(err, errlen, "\"to\" must be a topic name without wildcards, not starting with $");
		return EINVAL;
	}
	struct dlq_redrive_task *t;
	int rc = redrive_tasks__start(d, who, &m, to, rate, &t, err, errlen);
	if(rc == EBUSY || rc == EACCES) return EINVAL;
	if(rc) return rc;
	*data = task_json(d, t);
	return *data ? 0 : ENOMEM;
}

static int run_cancel(struct dlq *d, const struct letter_store_asker *who, const cJSON *cmd, cJSON **data,
		char *err, size_t errlen)
{
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(cmd, "task");
	const char *filter;
	if(letter_filter__string(cmd, "filter", &filter, err, errlen)) return EINVAL;
	bool has_id = id && !cJSON_IsNull(id);
	if(has_id && (!cJSON_IsNumber(id) || id->valuedouble != floor(id->valuedouble) || id->valuedouble < 1
			|| id->valuedouble > 9.0e15)){
		errtext__set(err, errlen, "\"task\" must be a task's id (a whole number from 1)");
		return EINVAL;
	}
	if(has_id == (filter != NULL)){
		errtext__set(err, errlen, "give either \"task\" (a task's id) or \"filter\" (a policy filter)");
		return EINVAL;
	}
	struct dlq_redrive_task *t;
	if(redrive_tasks__cancel(d, has_id ? (uint64_t)id->valuedouble : 0, filter, who->client, &t, err, errlen)){
		return EINVAL;
	}
	*data = task_json(d, t);
	return *data ? 0 : ENOMEM;
}

int task_commands__run(struct dlq *d, const struct letter_store_asker *who, const char *name, const cJSON *cmd,
		cJSON **data, char *err, size_t errlen)
{
	*data = NULL;
	if(!strcmp(name, DLQ_COMMAND_START_REDRIVE_TASK)) return run_start(d, who, cmd, data, err, errlen);
	return run_cancel(d, who, cmd, data, err, errlen);
}
