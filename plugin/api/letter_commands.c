/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The dead-letter store's commands (see letter_commands.h): a command's
 * members checked and turned into a call of the store
 * (engine/letter_store.h, engine/dlq.h's redrive), and its results into
 * the reply's JSON. A letter a client may not read is, for that client,
 * not there in a list, and named as not permitted when it asks for it by
 * id. Every answer is bounded: a page holds at most DLQ_MAX_LIST_LIMIT
 * letters and ends early near DLQ_MAX_LIST_REPLY_BYTES (the store's walk);
 * a payload is cut at DLQ_MAX_LETTER_PAYLOAD_REPLY (letter_view).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "api/letter_commands.h"
#include "api/letter_filter.h"
#include "api/letter_view.h"
#include "api/task_commands.h"
#include "engine/letter_store.h"
#include "mosquitto_dlq.h"
#include "util/errtext.h"
#include "util/id.h"
#include "util/topic.h"

#define UNKNOWN_ID "unknown dead-letter id (never kept, or already redriven, deleted or dropped)"

static const char *const names[] = {
	DLQ_COMMAND_LIST_DEAD_LETTERS, DLQ_COMMAND_GET_DEAD_LETTER, DLQ_COMMAND_REDRIVE_DEAD_LETTERS,
	DLQ_COMMAND_DELETE_DEAD_LETTERS, DLQ_COMMAND_PURGE_DEAD_LETTERS, DLQ_COMMAND_START_REDRIVE_TASK,
	DLQ_COMMAND_CANCEL_REDRIVE_TASK, DLQ_COMMAND_LIST_BROKERS,
};

bool letter_commands__is(const char *name)
{
	for(size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++){
		if(!strcmp(name, names[i])) return true;
	}
	return false;
}

const char *letter_commands__name(size_t i)
{
	return i < sizeof(names) / sizeof(names[0]) ? names[i] : NULL;
}

/* The letter an id names, or NULL (also for text that is no id). */
static struct dlq_letter *letter_by_text(const struct dlq *d, const char *s)
{
	struct dlq_id id;
	if(!id__decode(s, strlen(s), &id)) return NULL;
	return letter_store__find(d, &id);
}

static bool add_str(cJSON *o, const char *name, const char *v)
{
	return cJSON_AddStringToObject(o, name, v ? v : "") != NULL;
}

static bool add_num(cJSON *o, const char *name, double v)
{
	return cJSON_AddNumberToObject(o, name, v) != NULL;
}

/* {name:[]}, the array in *array (borrowed); NULL when out of memory. */
static cJSON *object_with_array(const char *name, cJSON **array)
{
	cJSON *o = cJSON_CreateObject();
	*array = o ? cJSON_AddArrayToObject(o, name) : NULL;
	if(*array == NULL){
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* ---- listDeadLetters ---- */

static int run_list(struct dlq *d, const struct letter_store_asker *who, const cJSON *cmd, cJSON **data,
		char *err, size_t errlen)
{
	struct letter_store_query q = { .newest_first = true, .limit = DLQ_LIST_DEFAULT_LIMIT };
	const char *order;
	if(letter_filter__string(cmd, "order", &order, err, errlen)) return EINVAL;
	if(order && !strcmp(order, "oldest")) q.newest_first = false;
	else if(order && strcmp(order, "newest")){
		errtext__set(err, errlen, "\"order\" must be \"newest\" or \"oldest\"");
		return EINVAL;
	}
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cmd, "limit");
	if(v && !cJSON_IsNull(v)){
		if(!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1
				|| v->valuedouble > DLQ_MAX_LIST_LIMIT){
			errtext__set(err, errlen, "\"limit\" must be a whole number from 1 to %d", DLQ_MAX_LIST_LIMIT);
			return EINVAL;
		}
		q.limit = (size_t)v->valuedouble;
	}
	v = cJSON_GetObjectItemCaseSensitive(cmd, "cursor");
	if(v && !cJSON_IsNull(v)){
		if(!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 || v->valuedouble > 9.0e15){
			errtext__set(err, errlen, "\"cursor\" must be the \"next\" number of an earlier page");
			return EINVAL;
		}
		q.cursor_given = true;
		q.cursor = (uint64_t)v->valuedouble;
	}
	if(letter_filter__parse(cmd, &q.match, err, errlen)) return EINVAL;

	struct letter_store_page page;
	letter_store__list(d, &q, who, &page);
	cJSON *list;
	cJSON *o = object_with_array("letters", &list);
	if(o == NULL) return ENOMEM;
	for(size_t i = 0; i < page.count; i++){
		cJSON *s = letter_view__summary(page.letters[i]);
		if(s == NULL || !cJSON_AddItemToArray(list, s)){
			cJSON_Delete(s);
			cJSON_Delete(o);
			return ENOMEM;
		}
	}
	/* "matched" on a first page only (the store counts it there). */
	if((!q.cursor_given && !add_num(o, "matched", (double)page.matched)) || (page.more && !add_num(o, "next", (double)page.next))){
		cJSON_Delete(o);
		return ENOMEM;
	}
	*data = o;
	return 0;
}

/* ---- by id ---- */

static int run_get(struct dlq *d, const struct letter_store_asker *who, const cJSON *cmd, cJSON **data,
		char *err, size_t errlen)
{
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(cmd, "id");
	if(!cJSON_IsString(id)){
		errtext__set(err, errlen, "missing or non-string \"id\"");
		return EINVAL;
	}
	struct dlq_letter *l = letter_by_text(d, id->valuestring);
	if(l == NULL){
		errtext__set(err, errlen, UNKNOWN_ID);
		return EINVAL;
	}
	if(!letter_store__may_read(d, who, l)){
		errtext__set(err, errlen, "not permitted: this client may not read " QFMT, Q(l->env->topic));
		return EINVAL;
	}
	*data = letter_view__full(l);
	return *data ? 0 : ENOMEM;
}

/* The ids member of a redrive or delete. */
static int ids_member(const cJSON *cmd, const cJSON **ids, char *err, size_t errlen)
{
	*ids = cJSON_GetObjectItemCaseSensitive(cmd, "ids");
	if(!cJSON_IsArray(*ids) || cJSON_GetArraySize(*ids) == 0){
		errtext__set(err, errlen, "missing or empty \"ids\" array");
		return EINVAL;
	}
	if(cJSON_GetArraySize(*ids) > DLQ_MAX_LETTER_IDS){
		errtext__set(err, errlen, "\"ids\" must hold at most %d ids", DLQ_MAX_LETTER_IDS);
		return EINVAL;
	}
	const cJSON *id;
	cJSON_ArrayForEach(id, *ids){
		if(!cJSON_IsString(id)){
			errtext__set(err, errlen, "each of \"ids\" must be a string");
			return EINVAL;
		}
	}
	return 0;
}

/* Adds {"id":...,"error":...} or {"id":...,"result":...} to results; the
 * id is echoed as far as it is printable ASCII of id length. */
static cJSON *result_entry(cJSON *results, const char *id, const char *result, const char *error)
{
	char shown[DLQ_ID_LEN + 1];
	size_t n = strlen(id);
	if(n > DLQ_ID_LEN) n = DLQ_ID_LEN;
	for(size_t i = 0; i < n; i++) shown[i] = (id[i] > 0x20 && id[i] < 0x7f) ? id[i] : '?';
	shown[n] = '\0';
	cJSON *r = cJSON_CreateObject();
	if(r == NULL || !cJSON_AddItemToArray(results, r)){
		cJSON_Delete(r);
		return NULL;
	}
	if(!add_str(r, "id", shown) || !add_str(r, error ? "error" : "result", error ? error : result)) return NULL;
	return r;
}

static int run_by_ids(struct dlq *d, const struct letter_store_asker *who, const cJSON *cmd, bool redrive,
		cJSON **data, char *err, size_t errlen)
{
	const cJSON *ids;
	if(ids_member(cmd, &ids, err, errlen)) return EINVAL;
	const char *topic = NULL;
	if(redrive){
		if(letter_filter__string(cmd, "topic", &topic, err, errlen)) return EINVAL;
		if(topic && (!topic__valid_publish(topic) || topic[0] == '$')){
			errtext__set(err, errlen, "\"topic\" must be a topic name without wildcards, not starting with $");
			return EINVAL;
		}
	}
	cJSON *results;
	cJSON *o = object_with_array("results", &results);
	if(o == NULL) return ENOMEM;
	const cJSON *id;
	bool ok = true;
	cJSON_ArrayForEach(id, ids){
		char msg[256];
		char home[DLQ_HOME_TOPIC_MAX];
		struct dlq_letter *l = letter_by_text(d, id->valuestring);
		const char *to = l && redrive ? dlq__redrive_target(d, l, topic, home) : NULL;
		cJSON *r;
		if(l == NULL){
			r = result_entry(results, id->valuestring, NULL, UNKNOWN_ID);
		}else if(!letter_store__may_read(d, who, l)){
			errtext__set(msg, sizeof(msg), "not permitted: this client may not read " QFMT, Q(l->env->topic));
			r = result_entry(results, id->valuestring, NULL, msg);
		}else if(redrive && !letter_store__may_write(d, who, l, to)){
			errtext__set(msg, sizeof(msg), "not permitted: this client may not write " QFMT, Q(to));
			r = result_entry(results, id->valuestring, NULL, msg);
		}else if(redrive){
			/* The target is copied: the letter, where it may point, goes. */
			char *target = errtext__dup_range(to, strlen(to));
			struct dlq_redrive_result res;
			int rc = target ? dlq__redrive_letter(d, l, topic ? target : NULL, who->client, false, &res) : ENOMEM;
			if(rc){
				errtext__set(msg, sizeof(msg), "publish failed: %s; the letter is kept",
						rc == EIO ? "the random source failed (no dlq-id)" : strerror(rc));
				r = result_entry(results, id->valuestring, NULL, msg);
			}else if(res.home){
				/* Sent, not known to have arrived: the bridge's session
				 * holds it while the broker is unreachable. */
				errtext__set(msg, sizeof(msg), "sent home to %s", res.broker);
				r = result_entry(results, id->valuestring, msg, NULL);
				ok = r && add_str(r, "broker", res.broker) && add_str(r, "via", res.topic)
						&& cJSON_AddBoolToObject(r, "tracked", false);
			}else{
				r = result_entry(results, id->valuestring, "redriven", NULL);
				ok = r && add_str(r, "topic", target) && cJSON_AddBoolToObject(r, "tracked", res.tracked)
						&& (!res.tracked || add_str(r, "dlqId", res.dlq_id));
			}
			free(target);
		}else{
			letter_store__delete(d, l);
			r = result_entry(results, id->valuestring, "deleted", NULL);
		}
		if(r == NULL || !ok){
			cJSON_Delete(o);
			return ENOMEM;
		}
	}
	*data = o;
	return 0;
}

static int run_purge(struct dlq *d, const struct letter_store_asker *who, const cJSON *cmd, cJSON **data,
		char *err, size_t errlen)
{
	const char *filter;
	if(letter_filter__string(cmd, "filter", &filter, err, errlen)) return EINVAL;
	const cJSON *all = cJSON_GetObjectItemCaseSensitive(cmd, "all");
	if(filter == NULL && !cJSON_IsTrue(all)){
		errtext__set(err, errlen, "missing \"filter\" (a policy filter) or \"all\": true");
		return EINVAL;
	}
	size_t purged, refused;
	letter_store__purge(d, who, filter, &purged, &refused);
	cJSON *o = cJSON_CreateObject();
	if(o == NULL || !add_num(o, "purged", (double)purged) || !add_num(o, "notPermitted", (double)refused)){
		cJSON_Delete(o);
		return ENOMEM;
	}
	*data = o;
	return 0;
}

/* ---- listBrokers ---- */

/* {"broker","kept","bytes","newestTime","newestTimeMs","newestId"} of t,
 * or NULL when out of memory. */
static cJSON *broker_entry(const struct dlq_broker_tally *t)
{
	const struct dlq_envelope *e = t->newest ? t->newest->env : NULL;
	char id[DLQ_ID_LEN + 1] = "", when[32] = "";
	if(e){
		id__encode(&e->id, id);
		envelope__format_time(e->time_ms, when);
	}
	cJSON *o = cJSON_CreateObject();
	if(o == NULL || !add_str(o, "broker", t->name) || !add_num(o, "kept", (double)t->count)
			|| !add_num(o, "bytes", (double)t->bytes) || !add_str(o, "newestTime", when)
			|| !add_num(o, "newestTimeMs", e ? (double)e->time_ms : 0) || !add_str(o, "newestId", id)){
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* Every broker with kept letters, by name, from the tallies the store
 * keeps (no walk of the letters): at most DLQ_MAX_BROKERS_LISTED, those
 * whose name sorts after "after" when it is given; "count" is every
 * broker's, "next" the "after" of the next reply when there is one. */
static int run_brokers(struct dlq *d, const cJSON *cmd, cJSON **data, char *err, size_t errlen)
{
	const char *after;
	if(letter_filter__string(cmd, "after", &after, err, errlen)) return EINVAL;
	size_t n;
	const struct dlq_broker_tally *t = letter_store__brokers(d, &n);
	size_t i = 0;
	while(after && i < n && strcmp(t[i].name, after) <= 0) i++;
	cJSON *list;
	cJSON *o = object_with_array("brokers", &list);
	if(o == NULL) return ENOMEM;
	size_t listed = 0;
	for(; i < n && listed < DLQ_MAX_BROKERS_LISTED; i++, listed++){
		cJSON *b = broker_entry(&t[i]);
		if(b == NULL || !cJSON_AddItemToArray(list, b)){
			cJSON_Delete(b);
			cJSON_Delete(o);
			return ENOMEM;
		}
	}
	if(!add_num(o, "count", (double)n) || (i < n && !add_str(o, "next", t[i - 1].name))){
		cJSON_Delete(o);
		return ENOMEM;
	}
	*data = o;
	return 0;
}

int letter_commands__run(struct dlq *d, const struct letter_store_asker *who, const char *name, const cJSON *cmd,
		cJSON **data, char *err, size_t errlen)
{
	*data = NULL;
	switch(letter_store__refusal(d, who)){
	case LETTER_STORE_OFF:
		errtext__set(err, errlen, "the dead-letter store is off (plugin_opt_dead_letter_keep 0)");
		return EINVAL;
	case LETTER_STORE_UNCHECKED:
		errtext__set(err, errlen, "this broker does not export mosquitto_acl_check: set plugin_opt_dead_letter_access "
				"control to let every client that may publish to " DLQ_CONTROL_TOPIC " use the dead-letter store");
		return EINVAL;
	case LETTER_STORE_OPEN:
		break;
	}
	if(task_commands__is(name)) return task_commands__run(d, who, name, cmd, data, err, errlen);
	if(!strcmp(name, DLQ_COMMAND_LIST_DEAD_LETTERS)) return run_list(d, who, cmd, data, err, errlen);
	if(!strcmp(name, DLQ_COMMAND_GET_DEAD_LETTER)) return run_get(d, who, cmd, data, err, errlen);
	if(!strcmp(name, DLQ_COMMAND_REDRIVE_DEAD_LETTERS)) return run_by_ids(d, who, cmd, true, data, err, errlen);
	if(!strcmp(name, DLQ_COMMAND_DELETE_DEAD_LETTERS)) return run_by_ids(d, who, cmd, false, data, err, errlen);
	if(!strcmp(name, DLQ_COMMAND_LIST_BROKERS)) return run_brokers(d, cmd, data, err, errlen);
	return run_purge(d, who, cmd, data, err, errlen);
}
