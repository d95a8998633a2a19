/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The plugin's contract as a user checks it: what an original delivery, a
 * retry copy, a dead letter and a $CONTROL reply must carry (property names
 * and topics from mosquitto_dlq.h). Each check fails the test at the
 * caller's line, naming the message and what was wrong.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness_int.h"
#include "test_util.h"

const char *dlq_id_of_at(const char *file, int line, const struct it_msg *m)
{
	size_t n = msg_user_count(m, DLQ_PROP_ID);
	const char *id = msg_user(m, DLQ_PROP_ID);
	if(n != 1 || !it_is_dlq_id(id)){
		fail_at(file, line, "message on %s (payload \"%.40s\"): expected exactly one valid %s, got %zu (first \"%s\")",
				m->topic, m->payload, DLQ_PROP_ID, n, id ? id : "(none)");
	}
	return id;
}

static void expect_user_once(const char *file, int line, const struct it_msg *m, const char *name, const char *value)
{
	size_t n = msg_user_count(m, name);
	const char *v = msg_user(m, name);
	if(n != 1){
		fail_at(file, line, "message on %s (payload \"%.40s\"): expected exactly one %s, got %zu",
				m->topic, m->payload, name, n);
	}
	if(value && strcmp(v, value)){
		fail_at(file, line, "message on %s (payload \"%.40s\"): %s is \"%s\", expected \"%s\"",
				m->topic, m->payload, name, v, value);
	}
}

static void expect_user_absent(const char *file, int line, const struct it_msg *m, const char *name)
{
	const char *v = msg_user(m, name);
	if(v){
		fail_at(file, line, "message on %s (payload \"%.40s\"): unexpected %s \"%s\"",
				m->topic, m->payload, name, v);
	}
}

static const char *const dead_letter_only[] = {
	DLQ_PROP_DEAD_LETTER_REASON, DLQ_PROP_DEAD_LETTER_CLIENT,
	DLQ_PROP_DEAD_LETTER_FILTER, DLQ_PROP_DEAD_LETTER_TIME, DLQ_PROP_DEAD_LETTER_ID,
	DLQ_PROP_DEAD_LETTER_CAUSE, DLQ_PROP_DEAD_LETTER_BROKER,
};

/* The documented vocabulary of dead-letter-cause (mosquitto_dlq.h). */
static const char *const causes[] = {
	DLQ_CAUSE_NACK, DLQ_CAUSE_FINAL, DLQ_CAUSE_ACK_TIMEOUT, DLQ_CAUSE_REDELIVERY_LIMIT, DLQ_CAUSE_SUBSCRIBER_GONE,
	DLQ_CAUSE_NO_SESSION, DLQ_CAUSE_OFFLINE_QOS0, DLQ_CAUSE_RESTART, DLQ_CAUSE_UNKNOWN,
};

const char *expect_original_at(const char *file, int line, const struct it_msg *m)
{
	const char *id = dlq_id_of_at(file, line, m);
	expect_user_absent(file, line, m, DLQ_PROP_RETRY_COUNT);
	expect_user_absent(file, line, m, DLQ_PROP_ORIGIN_TOPIC);
	expect_user_absent(file, line, m, DLQ_PROP_ORIGIN_ID);
	for(size_t i = 0; i < ARRAY_LEN(dead_letter_only); i++){
		expect_user_absent(file, line, m, dead_letter_only[i]);
	}
	return id;
}

const char *expect_retry_copy_at(const char *file, int line, const struct it_msg *m,
		const char *origin_topic, const char *origin_id, unsigned retry_count)
{
	char count[16];
	snprintf(count, sizeof(count), "%u", retry_count);
	const char *id = dlq_id_of_at(file, line, m);
	if(origin_id && !strcmp(id, origin_id)){
		fail_at(file, line, "retry copy on %s carries the origin's %s %s; expected a fresh one",
				m->topic, DLQ_PROP_ID, id);
	}
	expect_user_once(file, line, m, DLQ_PROP_RETRY_COUNT, count);
	expect_user_once(file, line, m, DLQ_PROP_ORIGIN_TOPIC, origin_topic);
	expect_user_once(file, line, m, DLQ_PROP_ORIGIN_ID, origin_id);
	for(size_t i = 0; i < ARRAY_LEN(dead_letter_only); i++){
		expect_user_absent(file, line, m, dead_letter_only[i]);
	}
	return id;
}

void expect_dead_letter_at(const char *file, int line, const struct it_msg *m,
		const char *origin_topic, const char *origin_id, unsigned retry_count,
		const char *client, const char *filter, const char *reason)
{
	char count[16];
	snprintf(count, sizeof(count), "%u", retry_count);
	if(m->qos < 1){
		fail_at(file, line, "dead letter on %s arrived at QoS %d; expected at least 1", m->topic, m->qos);
	}
	if(m->retain){
		fail_at(file, line, "dead letter on %s arrived retained", m->topic);
	}
	expect_user_absent(file, line, m, DLQ_PROP_ID);
	expect_user_once(file, line, m, DLQ_PROP_RETRY_COUNT, count);
	expect_user_once(file, line, m, DLQ_PROP_ORIGIN_TOPIC, origin_topic);
	expect_user_once(file, line, m, DLQ_PROP_ORIGIN_ID, origin_id);
	expect_user_once(file, line, m, DLQ_PROP_DEAD_LETTER_CLIENT, client);
	expect_user_once(file, line, m, DLQ_PROP_DEAD_LETTER_FILTER, filter);
	expect_user_once(file, line, m, DLQ_PROP_DEAD_LETTER_REASON, reason);
	expect_user_once(file, line, m, DLQ_PROP_DEAD_LETTER_TIME, NULL);
	/* One word of the vocabulary; one the plugin makes now, not an older
	 * state file's "unknown". */
	expect_user_once(file, line, m, DLQ_PROP_DEAD_LETTER_CAUSE, NULL);
	const char *cause = msg_user(m, DLQ_PROP_DEAD_LETTER_CAUSE);
	size_t known = 0;
	while(known < ARRAY_LEN(causes) - 1 && strcmp(cause, causes[known])) known++;
	if(known == ARRAY_LEN(causes) - 1){
		fail_at(file, line, "dead letter on %s: %s \"%s\" is not a cause the plugin makes", m->topic,
				DLQ_PROP_DEAD_LETTER_CAUSE, cause);
	}
	/* The broker that made it (plugin_opt_broker_name, by default the host
	 * name; test_broker_name.c checks the value): one name, once. */
	expect_user_once(file, line, m, DLQ_PROP_DEAD_LETTER_BROKER, NULL);
	if(!*msg_user(m, DLQ_PROP_DEAD_LETTER_BROKER) || strpbrk(msg_user(m, DLQ_PROP_DEAD_LETTER_BROKER), "/+# ")){
		fail_at(file, line, "dead letter on %s: %s \"%s\" is not a broker's name", m->topic,
				DLQ_PROP_DEAD_LETTER_BROKER, msg_user(m, DLQ_PROP_DEAD_LETTER_BROKER));
	}
	/* Its name in the dead-letter store, unless the store is off (the
	 * letters suite checks that it is there): an id, once. */
	if(msg_user(m, DLQ_PROP_DEAD_LETTER_ID)) expect_user_once(file, line, m, DLQ_PROP_DEAD_LETTER_ID, NULL);
	if(msg_user(m, DLQ_PROP_DEAD_LETTER_ID) && !it_is_dlq_id(msg_user(m, DLQ_PROP_DEAD_LETTER_ID))){
		fail_at(file, line, "dead letter on %s: %s \"%s\" is not an id", m->topic, DLQ_PROP_DEAD_LETTER_ID,
				msg_user(m, DLQ_PROP_DEAD_LETTER_ID));
	}
	const char *why = msg_user(m, DLQ_PROP_DEAD_LETTER_REASON);
	if(!reason && (!*why || !strcasestr(why, "attempt"))){
		fail_at(file, line, "dead letter on %s: %s \"%s\" does not say that attempts ran out",
				m->topic, DLQ_PROP_DEAD_LETTER_REASON, why);
	}
	const char *when = msg_user(m, DLQ_PROP_DEAD_LETTER_TIME);
	if(!it_is_recent_rfc3339(when, 60)){
		fail_at(file, line, "dead letter on %s: %s \"%s\" is not a current RFC 3339 UTC time",
				m->topic, DLQ_PROP_DEAD_LETTER_TIME, when);
	}
}

cJSON *expect_reply_at(const char *file, int line, const struct it_msg *m, int n)
{
	cJSON *doc = msg_json(m);
	if(!doc){
		fail_at(file, line, "reply on %s is not JSON: \"%.200s\"", m->topic, m->payload);
	}
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, "responses");
	if(!cJSON_IsArray(arr)){
		fail_at(file, line, "reply on %s has no \"responses\" array: %.300s", m->topic, m->payload);
	}
	if(cJSON_GetArraySize(arr) != n){
		fail_at(file, line, "reply on %s has %d responses, expected %d: %.300s",
				m->topic, cJSON_GetArraySize(arr), n, m->payload);
	}
	for(int i = 0; i < n; i++){
		if(!cJSON_IsObject(cJSON_GetArrayItem(arr, i))){
			fail_at(file, line, "reply on %s: response %d is not an object: %.300s", m->topic, i, m->payload);
		}
	}
	return doc;
}

const cJSON *reply_entry(const cJSON *doc, int i)
{
	return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "responses"), i);
}

const char *json_str(const cJSON *e, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, name);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

double json_num(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	ck_assert_msg(cJSON_IsNumber(v), "no number \"%s\"", name);
	return v->valuedouble;
}

const cJSON *status_policy(const cJSON *data, const char *filter)
{
	const cJSON *p;
	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(data, "policies")){
		const char *f = json_str(p, "filter");
		if(f && !strcmp(f, filter)){
			return p;
		}
	}
	ck_abort_msg("no policy %s in the status", filter);
	return NULL;
}

const struct it_msg *command_reply(struct client *c, const char *reply_topic, const char *payload, const char *what)
{
	mosquitto_property *p = NULL;
	ck_assert_int_eq(mosquitto_property_add_string(&p, MQTT_PROP_RESPONSE_TOPIC, reply_topic), 0);
	size_t n = client_count(c, reply_topic) + 1;
	int rc = client_publish(c, DLQ_CONTROL_TOPIC, payload, (int)strlen(payload), 1, p);
	mosquitto_property_free_all(&p);
	ck_assert_msg(rc < 0x80, "the broker refused %s: %s", what, mosquitto_reason_string(rc));
	return client_expect(c, reply_topic, n);
}

const cJSON *command_data(struct client *c, const char *reply_topic, const char *command, cJSON **doc)
{
	char payload[512];
	ck_assert_int_lt(snprintf(payload, sizeof(payload), "{\"commands\":[%s]}", command), (int)sizeof(payload));
	*doc = msg_json(command_reply(c, reply_topic, payload, command));
	ck_assert_msg(*doc != NULL, "the reply to %s is not JSON", command);
	const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(*doc, "responses"), 0);
	ck_assert_msg(e && json_str(e, "error") == NULL, "%s failed: %s", command, e ? json_str(e, "error") : "no reply");
	return cJSON_GetObjectItemCaseSensitive(e, "data");
}

const cJSON *status_get(struct client *c, const char *reply_topic, cJSON **doc)
{
	return command_data(c, reply_topic, "{\"command\":\"" DLQ_COMMAND_GET_STATUS "\"}", doc);
}

static char *json_text(const cJSON *e)
{
	char *t = cJSON_PrintUnformatted(e);
	return t ? t : harness__xstrdup("(unprintable)");
}

void expect_reply_ok_at(const char *file, int line, const cJSON *e, const char *id,
		const char *result, int attempt, int max_attempts)
{
	const char *cmd = json_str(e, "command");
	const char *rid = json_str(e, "id");
	const char *res = json_str(e, "result");
	const cJSON *att = cJSON_GetObjectItemCaseSensitive(e, "attempt");
	const cJSON *max = cJSON_GetObjectItemCaseSensitive(e, "maxAttempts");
	if(!cmd || strcmp(cmd, DLQ_COMMAND_NACK) || !rid || strcmp(rid, id) || !res || strcmp(res, result)
			|| !cJSON_IsNumber(att) || att->valueint != attempt
			|| !cJSON_IsNumber(max) || max->valueint != max_attempts
			|| cJSON_GetObjectItemCaseSensitive(e, "error")){
		fail_at(file, line, "reply entry %s; expected command \"nack\", id \"%s\", result \"%s\", attempt %d, "
				"maxAttempts %d and no error", json_text(e), id, result, attempt, max_attempts);
	}
}

void expect_reply_error_at(const char *file, int line, const cJSON *e, const char *want)
{
	const char *err = json_str(e, "error");
	if(!err || !*err || (want && !strstr(err, want)) || cJSON_GetObjectItemCaseSensitive(e, "result")){
		fail_at(file, line, "reply entry %s; expected an error%s%s%s and no result", json_text(e),
				want ? " containing \"" : "", want ? want : "", want ? "\"" : "");
	}
}
