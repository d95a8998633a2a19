/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The getHistory command's data (see history_report.h), rendered with
 * cJSON from the engine's reads (dlq__history).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/history_report.h"
#include "model/cause.h"
#include "util/errtext.h"

static bool add_num(cJSON *o, const char *name, double v)
{
	return cJSON_AddNumberToObject(o, name, v) != NULL;
}

/* "byCause": the causes with dead letters in m, in the documented order
 * (DLQ_CAUSE_WORDS: nack first, unknown last). */
static bool add_causes(cJSON *o, const struct dlq_history_minute *m)
{
	cJSON *by = cJSON_AddObjectToObject(o, "byCause");
	for(unsigned k = 0; by && k < DLQ_DEAD_CAUSES; k++){
		unsigned c = (k + 1) % DLQ_DEAD_CAUSES;
		if(m->dead_letters[c] && !add_num(by, cause__name(c), m->dead_letters[c])) return false;
	}
	return by != NULL;
}

static bool add_policy(cJSON *list, const struct dlq *d, size_t i, int64_t wall_ms)
{
	struct dlq_history_minute m[DLQ_HISTORY_MINUTES];
	size_t n = dlq__history(d, i, wall_ms, m);
	cJSON *o = cJSON_CreateObject();
	if(o == NULL || !cJSON_AddItemToArray(list, o)){
		cJSON_Delete(o);
		return false;
	}
	cJSON *minutes = cJSON_AddStringToObject(o, "filter", dlq__config(d)->policies.items[i].filter)
			? cJSON_AddArrayToObject(o, "minutes") : NULL;
	for(size_t k = 0; minutes && k < n; k++){
		cJSON *e = cJSON_CreateObject();
		if(e == NULL || !cJSON_AddItemToArray(minutes, e)){
			cJSON_Delete(e);
			return false;
		}
		if(!add_num(e, "minute", (double)m[k].minute) || !add_num(e, "nacks", m[k].nacks)
				|| !add_num(e, "ackTimeouts", m[k].ack_timeouts)
				|| !add_num(e, "deadLetters", (double)history__dead_letters(&m[k])) || !add_causes(e, &m[k])
				|| !add_num(e, "redrives", m[k].redrives)){
			return false;
		}
	}
	return minutes != NULL;
}

int history_report__json(const struct dlq *d, const char *filter, int64_t wall_ms, cJSON **data, char *err,
		size_t errlen)
{
	const struct dlq_policy_table *t = &dlq__config(d)->policies;
	long only = -1;
	if(filter){
		for(size_t i = 0; i < t->count && only < 0; i++){
			if(!strcmp(t->items[i].filter, filter)) only = (long)i;
		}
		if(only < 0){
			char shown[65];
			size_t len = strlen(filter);
			bool cut = errtext__clean(filter, len, shown, sizeof(shown) - 1) < len;
			snprintf(err, errlen, "no policy has the filter \"%s%s\"", shown, cut ? "..." : "");
			return EINVAL;
		}
	}
	cJSON *root = cJSON_CreateObject();
	cJSON *list = root ? cJSON_AddArrayToObject(root, "policies") : NULL;
	bool ok = list && add_num(root, "minute", (double)history__minute_of(wall_ms))
			&& add_num(root, "minutes", DLQ_HISTORY_MINUTES);
	for(size_t i = 0; ok && i < t->count; i++){
		if(only >= 0 && (size_t)only != i) continue;
		ok = add_policy(list, d, i, wall_ms);
	}
	if(!ok){
		cJSON_Delete(root);
		return ENOMEM;
	}
	*data = root;
	return 0;
}
