/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Subscribers that cannot NACK, against the real broker: on 2.1 (its
 * SUBSCRIBE event) an MQTT 3.1.1 client subscribing to a filter that can
 * receive tracked messages is logged once per connection, however often it
 * subscribes, directly or through $share, and each such subscription is
 * counted in getStatus (subscribersWithoutNack, totals and the policy's
 * entry); an MQTT 5 subscriber and a 3.1.1 subscriber of an untracked filter
 * are neither logged nor counted. 2.0 shows the plugin no subscriptions:
 * there the count stays 0 and docs/memory-and-limits.md says how to check.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define REPLY_TOPIC "subs/reply"
#define POLICY_FILTER "jobs/#"

/* getStatus's data, from a v5 client; *doc is the reply to free. */
static const cJSON *get_status(struct client *c, cJSON **doc)
{
	static const char payload[] = "{\"commands\":[{\"command\":\"" DLQ_COMMAND_GET_STATUS "\"}]}";
	mosquitto_property *p = NULL;
	ck_assert_int_eq(mosquitto_property_add_string(&p, MQTT_PROP_RESPONSE_TOPIC, REPLY_TOPIC), 0);
	size_t n = client_count(c, REPLY_TOPIC) + 1;
	int rc = client_publish(c, DLQ_CONTROL_TOPIC, payload, (int)strlen(payload), 1, p);
	mosquitto_property_free_all(&p);
	ck_assert_msg(rc < 0x80, "the broker refused getStatus: %s", mosquitto_reason_string(rc));
	*doc = msg_json(client_expect(c, REPLY_TOPIC, n));
	ck_assert_msg(*doc != NULL, "getStatus reply is not JSON");
	const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(*doc, "responses"), 0);
	ck_assert_msg(e && json_str(e, "error") == NULL, "getStatus failed");
	return cJSON_GetObjectItemCaseSensitive(e, "data");
}

/* How often the log has the warning about client id. */
static int warnings_for(struct broker *b, const char *id)
{
	char want[256];
	snprintf(want, sizeof(want), "dlq: client \"%s\" subscribed to ", id);
	char *log = broker_log(b);
	int n = 0;
	for(const char *p = log; (p = strstr(p, want)) != NULL; p += strlen(want)) n++;
	free(log);
	return n;
}

START_TEST(test_old_protocol_subscriber_reported)
{
	struct broker *b = dlq_broker("policy " POLICY_FILTER " max_attempts=3 dead_letter=dead/jobs");
	struct client *old = client_new(b, "old", MQTT_PROTOCOL_V311);
	struct client *modern = client_new(b, "modern", MQTT_PROTOCOL_V5);
	struct client *untracked = client_new(b, "untracked", MQTT_PROTOCOL_V311);

	client_subscribe(old, "jobs/+", 1);
	client_subscribe(old, "+/urgent", 1);           /* overlaps jobs/# at "jobs/urgent" */
	client_subscribe(old, "$share/workers/jobs/a", 1);
	client_subscribe(modern, "jobs/#", 1);
	client_subscribe(untracked, "other/#", 1);
	client_subscribe(untracked, "$SYS/#", 1);
	clients_settle(old, modern, untracked);

	cJSON *doc;
	const cJSON *data = get_status(modern, &doc);
	double total = json_num(cJSON_GetObjectItemCaseSensitive(data, "totals"), "subscribersWithoutNack");
	double policy = json_num(status_policy(data, POLICY_FILTER), "subscribersWithoutNack");
	cJSON_Delete(doc);
	int old_warnings = warnings_for(b, client_id(old));
	int modern_warnings = warnings_for(b, client_id(modern));
	int untracked_warnings = warnings_for(b, client_id(untracked));

	if(!BROKER_IS_21()){
		/* 2.0 has no SUBSCRIBE event: nothing to see, nothing counted. */
		ck_assert_msg(total == 0 && policy == 0 && old_warnings == 0, "2.0: counted %g/%g, logged %d",
				total, policy, old_warnings);
		return;
	}
	ck_assert_msg(total == 3 && policy == 3, "subscribersWithoutNack totals %g, policy %g; expected 3, 3",
			total, policy);
	ck_assert_msg(old_warnings == 1, "the 3.1.1 subscriber was logged %d times, expected once", old_warnings);
	ck_assert_msg(modern_warnings == 0 && untracked_warnings == 0, "logged: v5 subscriber %d, untracked %d",
			modern_warnings, untracked_warnings);
	char want[512];
	snprintf(want, sizeof(want), "dlq: client \"%s\" subscribed to \"jobs/+\" with MQTT 3.1.1: it receives tracked "
			"messages without a dlq-id and cannot NACK them (policy \"" POLICY_FILTER "\")", client_id(old));
	char *log = broker_log(b);
	ck_assert_msg(strstr(log, want) != NULL, "no line \"%s\" in the log", want);
	ck_assert_msg(strstr(log, "dlq: dlq: ") == NULL, "a line with the prefix twice");
	free(log);

	/* A new connection of the same client is reported again: the plugin
	 * forgot it when the first one ended. */
	char id[128];
	snprintf(id, sizeof(id), "%s", client_id(old));
	client_free(old);
	struct client *again = client_new_session(b, id, MQTT_PROTOCOL_V311, 0);
	client_subscribe(again, "jobs/x", 1);
	client_sync(again);
	data = get_status(modern, &doc);
	total = json_num(cJSON_GetObjectItemCaseSensitive(data, "totals"), "subscribersWithoutNack");
	cJSON_Delete(doc);
	ck_assert_msg(total == 4, "subscribersWithoutNack %g after the reconnect, expected 4", total);
	ck_assert_int_eq(warnings_for(b, id), 2);
}
END_TEST

static Suite *subscribers_suite(void)
{
	Suite *s = suite_create("subscribers");
	TCase *tc = harness_tcase("without_nack");
	tcase_add_test(tc, test_old_protocol_subscriber_reported);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return harness_run(subscribers_suite());
}
