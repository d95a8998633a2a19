/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Operating the plugin, against the real broker: the getStatus counters
 * after a known flow (per policy and in total), listPolicies,
 * resetCounters, error replies to unknown commands and malformed JSON
 * without a disconnect, the retained $SYS/broker/dlq/... topics, and live
 * reload of plugin_opt_policy_file on SIGHUP: a new max_attempts applies to
 * the next message and to chains in flight, an invalid file leaves the old
 * policies in place, and a chain whose filter is gone keeps its policy.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "harness.h"
#include "proc.h"
#include "test_util.h"

#define REPLY_TOPIC "ops/reply"

/* Publishes payload on $CONTROL/dlq/v1 with REPLY_TOPIC as response topic
 * and waits for the reply (the n-th on that topic for this client). Returns
 * the parsed reply; the caller frees it. */
static cJSON *request(struct client *c, const char *payload)
{
	mosquitto_property *p = NULL;
	ck_assert_int_eq(mosquitto_property_add_string(&p, MQTT_PROP_RESPONSE_TOPIC, REPLY_TOPIC), 0);
	ck_assert_int_eq(mosquitto_property_add_binary(&p, MQTT_PROP_CORRELATION_DATA, "ops", 3), 0);
	size_t n = client_count(c, REPLY_TOPIC) + 1;
	int rc = client_publish(c, DLQ_CONTROL_TOPIC, payload, (int)strlen(payload), 1, p);
	mosquitto_property_free_all(&p);
	ck_assert_msg(rc < 0x80, "the broker refused the request: %s", mosquitto_reason_string(rc));
	const struct it_msg *m = client_expect(c, REPLY_TOPIC, n);
	ck_assert_msg(m->correlation_len == 3 && !memcmp(m->correlation, "ops", 3), "reply without our correlation data");
	cJSON *doc = msg_json(m);
	ck_assert_msg(doc != NULL, "reply is not JSON: %s", m->payload);
	return doc;
}

/* Sends {"commands":[{"command":name}]} and returns the reply; *data gets
 * its single entry's "data" (borrowed from the reply). Fails the test on
 * an error entry. */
static cJSON *command(struct client *c, const char *name, const cJSON **data)
{
	char payload[256];
	snprintf(payload, sizeof(payload), "{\"commands\":[{\"command\":\"%s\",\"correlationData\":\"c-%s\"}]}", name, name);
	cJSON *doc = request(c, payload);
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, "responses");
	ck_assert_msg(cJSON_GetArraySize(arr) == 1, "%s: expected one response", name);
	const cJSON *e = cJSON_GetArrayItem(arr, 0);
	ck_assert_msg(json_str(e, "error") == NULL, "%s: error \"%s\"", name, json_str(e, "error"));
	ck_assert_str_eq(json_str(e, "command"), name);
	char corr[64];
	snprintf(corr, sizeof(corr), "c-%s", name);
	ck_assert_str_eq(json_str(e, "correlationData"), corr);
	if(data){
		*data = cJSON_GetObjectItemCaseSensitive(e, "data");
	}
	return doc;
}

static void expect_counts(const cJSON *o, const char *what, double tracked, double nacks, double retry, double dead)
{
	ck_assert_msg(json_num(o, "tracked") == tracked && json_num(o, "nacks") == nacks && json_num(o, "retryCopies") == retry
			&& json_num(o, "deadLetters") == dead && json_num(o, "publishFailures") == 0 && json_num(o, "nacksRefused") == 0,
			"%s: tracked %g nacks %g retryCopies %g deadLetters %g publishFailures %g nacksRefused %g; "
			"expected %g %g %g %g 0 0", what, json_num(o, "tracked"), json_num(o, "nacks"), json_num(o, "retryCopies"),
			json_num(o, "deadLetters"), json_num(o, "publishFailures"), json_num(o, "nacksRefused"), tracked, nacks, retry, dead);
}

/* The known flow: two messages on alpha (max 2), the first NACKed twice
 * (a retry copy, then a dead letter); one on beta/x (max 3) NACKed once;
 * one on an untracked topic. */
static void known_flow(struct client *worker, struct client *pub, struct client *dead)
{
	client_subscribe(worker, "alpha", 1);
	client_subscribe(worker, "beta/#", 1);
	client_subscribe(worker, "other", 1);
	client_subscribe(dead, "dlq/#", 1);
	client_publish_str(pub, "alpha", "a1", 1);
	client_publish_str(pub, "alpha", "a2", 1);
	client_publish_str(pub, "beta/x", "b1", 1);
	client_publish_str(pub, "other", "o1", 1);
	client_expect(worker, "other", 1);
	const char *a1 = expect_original(client_find_payload(worker, "alpha", "a1", 0));
	const char *b1 = expect_original(client_find_payload(worker, "beta/x", "b1", 0));
	client_nack(worker, a1, "first");
	const char *copy = expect_retry_copy(client_expect(worker, "alpha", 3), "alpha", a1, 1);
	client_nack(worker, copy, "second");
	client_expect(dead, "dlq/alpha", 1);
	client_nack(worker, b1, NULL);
	expect_retry_copy(client_expect(worker, "beta/x", 2), "beta/x", b1, 1);
	clients_settle(worker, pub, dead);
}

START_TEST(test_get_status_counters)
{
	struct broker *b = dlq_broker("policy alpha max_attempts=2 dead_letter=dlq/alpha",
			"policy beta/# max_attempts=3 dead_letter=dlq/beta");
	struct client *worker = client_new(b, "worker", MQTT_PROTOCOL_V5);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *dead = client_new(b, "dead", MQTT_PROTOCOL_V5);
	known_flow(worker, pub, dead);

	const cJSON *data;
	cJSON *doc = command(pub, DLQ_COMMAND_GET_STATUS, &data);
	const cJSON *totals = cJSON_GetObjectItemCaseSensitive(data, "totals");
	expect_counts(status_policy(data, "alpha"), "alpha", 2, 2, 1, 1);
	expect_counts(status_policy(data, "beta/#"), "beta/#", 1, 1, 1, 0);
	expect_counts(totals, "totals", 3, 3, 2, 1);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(data, "policies")), 2);
	/* Records: the three originals and the two retry copies stay NACKable
	 * for the window; nothing is owed or delayed once the broker took it. */
	ck_assert_msg(json_num(totals, "records") == 5, "records %g, expected 5", json_num(totals, "records"));
	ck_assert_msg(json_num(status_policy(data, "alpha"), "records") == 3, "alpha records");
	ck_assert_msg(json_num(totals, "ledgerBytes") > 0, "ledgerBytes");
	ck_assert_msg(json_num(totals, "pending") == 0 && json_num(totals, "delayed") == 0 && json_num(totals, "evicted") == 0
			&& json_num(totals, "unknownIds") == 0, "pending/delayed/evicted/unknownIds not 0");
	ck_assert_msg(json_num(data, "nackWindowMs") == DLQ_DEFAULT_NACK_WINDOW_MS, "nackWindowMs");
	ck_assert_msg(json_num(data, "maxPendingBytes") == (double)DLQ_DEFAULT_MAX_PENDING_BYTES, "maxPendingBytes");
	cJSON_Delete(doc);
}
END_TEST

START_TEST(test_list_policies)
{
	struct broker *b = dlq_broker("policy alpha max_attempts=2 dead_letter=dlq/alpha",
			"policy beta/# max_attempts=3 dead_letter=dlq/beta retry_to=beta/retry retry_delay=2s retry_backoff=2");
	struct client *c = client_new(b, "ops", MQTT_PROTOCOL_V5);
	const cJSON *data;
	cJSON *doc = command(c, DLQ_COMMAND_LIST_POLICIES, &data);
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(data, "policies");
	ck_assert_int_eq(cJSON_GetArraySize(list), 2);
	const cJSON *a = cJSON_GetArrayItem(list, 0);
	const cJSON *p = cJSON_GetArrayItem(list, 1);
	ck_assert_str_eq(json_str(a, "filter"), "alpha");
	ck_assert_msg(json_num(a, "maxAttempts") == 2, "alpha maxAttempts");
	ck_assert_str_eq(json_str(a, "deadLetter"), "dlq/alpha");
	ck_assert_str_eq(json_str(a, "retryTo"), DLQ_RETRY_TO_DELIVERY);
	ck_assert_str_eq(json_str(p, "filter"), "beta/#");
	ck_assert_msg(json_num(p, "maxAttempts") == 3, "beta maxAttempts");
	ck_assert_str_eq(json_str(p, "retryTo"), "beta/retry");
	ck_assert_msg(json_num(p, "retryDelayMs") == 2000 && json_num(p, "retryBackoff") == 2, "beta delay/backoff");
	ck_assert_msg(json_str(p, "source") != NULL, "source");
	cJSON_Delete(doc);
}
END_TEST

START_TEST(test_reset_counters)
{
	struct broker *b = dlq_broker("policy alpha max_attempts=2 dead_letter=dlq/alpha",
			"policy beta/# max_attempts=3 dead_letter=dlq/beta");
	struct client *worker = client_new(b, "worker", MQTT_PROTOCOL_V5);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *dead = client_new(b, "dead", MQTT_PROTOCOL_V5);
	known_flow(worker, pub, dead);

	cJSON *doc = command(pub, DLQ_COMMAND_RESET_COUNTERS, NULL);
	cJSON_Delete(doc);
	const cJSON *data;
	doc = command(pub, DLQ_COMMAND_GET_STATUS, &data);
	expect_counts(cJSON_GetObjectItemCaseSensitive(data, "totals"), "totals", 0, 0, 0, 0);
	expect_counts(status_policy(data, "alpha"), "alpha", 0, 0, 0, 0);
	expect_counts(status_policy(data, "beta/#"), "beta/#", 0, 0, 0, 0);
	/* Gauges are not counters: the records are still there. */
	ck_assert_msg(json_num(cJSON_GetObjectItemCaseSensitive(data, "totals"), "records") == 5, "records after reset");
	cJSON_Delete(doc);
	char *log = broker_log(b);
	ck_assert_msg(strstr(log, "counters reset by \"") != NULL, "no \"counters reset by\" in the log");
	free(log);

	/* Counting goes on from zero. */
	client_publish_str(pub, "alpha", "a3", 1);
	client_expect(worker, "alpha", 4);
	doc = command(pub, DLQ_COMMAND_GET_STATUS, &data);
	expect_counts(status_policy(data, "alpha"), "alpha after reset", 1, 0, 0, 0);
	cJSON_Delete(doc);
}
END_TEST

START_TEST(test_bad_requests_get_error_replies)
{
	struct broker *b = dlq_broker("policy alpha max_attempts=2 dead_letter=dlq/alpha");
	struct client *c = client_new(b, "ops", MQTT_PROTOCOL_V5);
	static const struct {
		const char *payload;
		const char *error;
	} bad[] = {
		{ "{\"commands\":[{\"command\":\"frobnicate\",\"correlationData\":7}]}", "unknown command \"frobnicate\"" },
		{ "{\"commands\":[{\"command\":\"getStatus\"", "payload is not valid JSON" },
		{ "not json at all", "payload is not valid JSON" },
		{ "{\"commands\":{}}", "payload must be an object with a \"commands\" array" },
		{ "{\"commands\":[42]}", "each command must be a JSON object" },
		{ "{\"commands\":[{\"command\":5}]}", "missing or non-string \"command\"" },
	};
	for(size_t i = 0; i < ARRAY_LEN(bad); i++){
		cJSON *doc = request(c, bad[i].payload);
		const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "responses"), 0);
		const char *err = json_str(e, "error");
		ck_assert_msg(err && strstr(err, bad[i].error), "reply to %s: error \"%s\", expected \"%s\"",
				bad[i].payload, err ? err : "(none)", bad[i].error);
		ck_assert_msg(cJSON_GetObjectItemCaseSensitive(e, "data") == NULL, "an error entry with data");
		if(i == 0){
			ck_assert_str_eq(json_str(e, "command"), "frobnicate");
			ck_assert_msg(json_num(e, "correlationData") == 7, "correlationData not echoed");
		}
		cJSON_Delete(doc);
		ck_assert_msg(client_connected(c) && client_disconnects(c) == 0, "disconnected after %s", bad[i].payload);
	}
	/* The same client goes on to a good command. */
	cJSON *doc = command(c, DLQ_COMMAND_GET_STATUS, NULL);
	cJSON_Delete(doc);
	clients_settle(c);
	client_expect_exactly(c, REPLY_TOPIC, ARRAY_LEN(bad) + 1);
	ck_assert_uint_eq(client_disconnects(c), 0);
}
END_TEST

/* Waits until a message on topic with this payload arrived. */
static const struct it_msg *wait_value(struct client *c, const char *topic, const char *payload)
{
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	const struct it_msg *m;
	while((m = client_find_payload(c, topic, payload, 0)) == NULL){
		if(it_now_ms() > deadline){
			client_dump(c, topic);
			ck_abort_msg("no \"%s\" on %s within %d ms", payload, topic, HARNESS_WAIT_MS);
		}
		client_wait(c, topic, client_count(c, topic) + 1, 100);
	}
	return m;
}

START_TEST(test_sys_topics)
{
	struct broker *b = dlq_broker("policy alpha max_attempts=1 dead_letter=dlq/alpha", "sys_interval 1s");
	struct client *sys = client_subscribed(b, "sys", DLQ_SYS_TOPIC_PREFIX "#");
	struct client *worker = client_subscribed(b, "worker", "alpha");
	/* The first values appear within an interval. */
	wait_value(sys, DLQ_SYS_TOPIC_PREFIX "dead_letters", "0");
	wait_value(sys, DLQ_SYS_TOPIC_PREFIX "policies/0/filter", "alpha");

	client_publish_str(worker, "alpha", "x", 1);
	const char *id = expect_original(client_expect(worker, "alpha", 1));
	client_nack(worker, id, NULL);
	wait_value(sys, DLQ_SYS_TOPIC_PREFIX "dead_letters", "1");
	wait_value(sys, DLQ_SYS_TOPIC_PREFIX "tracked", "1");
	wait_value(sys, DLQ_SYS_TOPIC_PREFIX "nacks", "1");
	wait_value(sys, DLQ_SYS_TOPIC_PREFIX "policies/0/dead_letters", "1");

	/* Retained: a client that subscribes now gets the current values. */
	struct client *late = client_subscribed(b, "late", DLQ_SYS_TOPIC_PREFIX "#");
	const struct it_msg *m = wait_value(late, DLQ_SYS_TOPIC_PREFIX "dead_letters", "1");
	ck_assert_msg(m->retain, "$SYS/broker/dlq/dead_letters is not retained");
	m = wait_value(late, DLQ_SYS_TOPIC_PREFIX "policies/0/filter", "alpha");
	ck_assert_msg(m->retain, "policies/0/filter is not retained");
	wait_value(late, DLQ_SYS_TOPIC_PREFIX "retry_copies", "0");

	/* The counters 2.1 alone can fill: a subscriber of everything takes
	 * in the dead letters (issue 13); on 2.0 they stay 0. */
	wait_value(sys, DLQ_SYS_TOPIC_PREFIX "subscribers_of_dead_letters", "0");
	wait_value(sys, DLQ_SYS_TOPIC_PREFIX "sent_without_stamp", "0");
	if(BROKER_IS_21()){
		client_subscribed(b, "all", "#");
		wait_value(sys, DLQ_SYS_TOPIC_PREFIX "subscribers_of_dead_letters", "1");
		wait_value(sys, DLQ_SYS_TOPIC_PREFIX "policies/0/subscribers_of_dead_letters", "0");
	}
}
END_TEST

/* A broker whose policies come from a file, which the test rewrites. */
static struct broker *file_broker(const char *label, const char *json, const char **path)
{
	struct broker *b = broker_new(label);
	broker_plugin(b);
	*path = broker_file(b, "policies.json", json);
	broker_conf(b, "plugin_opt_policy_file %s", *path);
	broker_start(b);
	return b;
}

static void reload(struct broker *b, const char *json, const char *expect_log, size_t nth)
{
	broker_file(b, "policies.json", json);
	it_signal_broker(b, SIGHUP);
	if(!it_wait_log(b, expect_log, nth, HARNESS_WAIT_MS)){
		ck_abort_msg("no \"%s\" in the broker's log after SIGHUP", expect_log);
	}
	/* The plugin logs in the middle of the broker's reload, which clears
	 * its SIGHUP flag only at the end (signal__flag_check: the security
	 * re-init, the log files reopened and the keepalive lists rebuilt come
	 * after the plugin's RELOAD event): a SIGHUP sent in between is merged
	 * into the reload under way, and the next line never comes. A round
	 * trip through the broker starts after that loop pass has finished. */
	struct client *c = client_new(b, "reloader", MQTT_PROTOCOL_V5);
	client_sync(c);
	client_free(c);
}

#define JOBS(n) "{\"policies\":[{\"filter\":\"jobs\",\"max_attempts\":" #n ",\"dead_letter\":\"dlq/jobs\"}]}"

/* NACKs every delivery of payload on jobs until it is dead-lettered (the
 * dead client then holds more than dead_before letters); returns how many
 * deliveries it got, after checking that no further one comes. */
static unsigned fail_until_dead(struct client *worker, struct client *dead, const char *payload, size_t dead_before)
{
	unsigned deliveries = 0;
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	for(;;){
		const struct it_msg *m = client_find_payload(worker, "jobs", payload, deliveries);
		if(m){
			client_nack(worker, dlq_id_of(m), NULL);
			deliveries++;
			continue;
		}
		if(client_count(dead, "dlq/jobs") > dead_before){
			break;
		}
		if(it_now_ms() > deadline){
			client_dump(worker, NULL);
			ck_abort_msg("\"%s\": neither a further delivery nor a dead letter after %u deliveries", payload, deliveries);
		}
		client_wait(worker, "jobs", client_count(worker, "jobs") + 1, 50);
	}
	clients_settle(worker, dead);
	ck_assert_msg(client_find_payload(worker, "jobs", payload, deliveries) == NULL,
			"\"%s\" delivered again after its dead letter", payload);
	client_expect_exactly(dead, "dlq/jobs", dead_before + 1);
	return deliveries;
}

START_TEST(test_reload_changes_max_attempts)
{
	const char *path;
	struct broker *b = file_broker(__func__, JOBS(3), &path);
	struct client *worker = client_subscribed(b, "worker", "jobs");
	struct client *dead = client_subscribed(b, "dead", "dlq/#");

	client_publish_str(dead, "jobs", "before", 1);
	client_expect(worker, "jobs", 1);
	ck_assert_uint_eq(fail_until_dead(worker, dead, "before", 0), 3);

	reload(b, JOBS(1), "reload: 1 policies in use", 1);
	client_publish_str(dead, "jobs", "after", 1);
	client_expect(worker, "jobs", 4);
	ck_assert_uint_eq(fail_until_dead(worker, dead, "after", 1), 1);
	const struct it_msg *dl = client_expect(dead, "dlq/jobs", 2);
	ck_assert_str_eq(dl->payload, "after");
	ck_assert_str_eq(msg_user(dl, DLQ_PROP_RETRY_COUNT), "1");
	clients_settle(worker, dead);
	client_expect_exactly(dead, "dlq/jobs", 2);
}
END_TEST

#define NO_POLICIES "{\"policies\":[]}"
#define NO_POLICIES_NOTICE "no policies: nothing is tracked and nothing is changed"

/* Publishes payload to jobs and checks the worker receives it unstamped
 * (n-th on jobs) and that getStatus lists no policy and keeps the records
 * it kept before (none from this message). */
static void expect_untracked(struct client *worker, struct client *pub, const char *payload, size_t n, double records)
{
	client_publish_str(pub, "jobs", payload, 1);
	const struct it_msg *m = client_expect(worker, "jobs", n);
	ck_assert_str_eq(m->payload, payload);
	ck_assert_msg(m->nusers == 0, "\"%s\" arrived with %zu user properties (a dlq-id?)", payload, m->nusers);
	const cJSON *data;
	cJSON *doc = command(pub, DLQ_COMMAND_GET_STATUS, &data);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(data, "policies")), 0);
	double kept = json_num(cJSON_GetObjectItemCaseSensitive(data, "totals"), "records");
	ck_assert_msg(kept == records, "%g records kept, expected %g", kept, records);
	cJSON_Delete(doc);
}

/* No policy (as the Debian package's dlq.conf ships, or a policy file
 * emptied): the broker starts with a notice, nothing is stamped, control
 * commands answer; a reload to a policy tracks, and back to none stops. */
START_TEST(test_no_policies_then_reload)
{
	const char *path;
	struct broker *b = file_broker(__func__, NO_POLICIES, &path);
	ck_assert_msg(it_wait_log(b, NO_POLICIES_NOTICE, 1, HARNESS_WAIT_MS), "no notice of the empty policy table");
	struct client *worker = client_subscribed(b, "worker", "jobs");
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *dead = client_subscribed(b, "dead", "dlq/#");
	expect_untracked(worker, pub, "none-1", 1, 0);

	reload(b, JOBS(1), "reload: 1 policies in use", 1);
	client_publish_str(pub, "jobs", "tracked", 1);
	ck_assert_uint_eq(fail_until_dead(worker, dead, "tracked", 0), 1);

	reload(b, NO_POLICIES, "reload: 0 policies in use", 1);
	ck_assert_msg(it_wait_log(b, NO_POLICIES_NOTICE, 2, HARNESS_WAIT_MS), "no notice after the reload to no policies");
	/* The dead-lettered message's record stays for its NACK window. */
	expect_untracked(worker, pub, "none-2", 3, 1);
	clients_settle(worker, pub, dead);
	client_expect_exactly(dead, "dlq/jobs", 1);
	client_expect_exactly(worker, "jobs", 3);
}
END_TEST

START_TEST(test_reload_invalid_file_keeps_policies)
{
	const char *path;
	struct broker *b = file_broker(__func__, JOBS(2), &path);
	struct client *worker = client_subscribed(b, "worker", "jobs");
	struct client *dead = client_subscribed(b, "dead", "dlq/#");

	reload(b, "{\"policies\":[{\"filter\":\"jobs\",\"max_attempts\":0,\"dead_letter\":\"dlq/jobs\"}]}",
			"reload refused, the policies in use stay", 1);
	reload(b, "{\"policies\":[", "reload refused, the policies in use stay", 2);
	client_publish_str(dead, "jobs", "x", 1);
	client_expect(worker, "jobs", 1);
	ck_assert_uint_eq(fail_until_dead(worker, dead, "x", 0), 2);
	ck_assert_str_eq(msg_user(client_msg(dead, "dlq/jobs", 0), DLQ_PROP_RETRY_COUNT), "2");
	char *log = broker_log(b);
	ck_assert_msg(strstr(log, "max_attempts") != NULL, "the refusal does not say why");
	free(log);
}
END_TEST

/* Observed and documented: a chain in flight follows the new policy of its
 * filter. A copy at attempt 2 of a max-3 chain, after a reload to max 2,
 * is dead-lettered at its NACK instead of retried. */
START_TEST(test_reload_chain_in_flight_follows_new_policy)
{
	const char *path;
	struct broker *b = file_broker(__func__, JOBS(3), &path);
	struct client *worker = client_subscribed(b, "worker", "jobs");
	struct client *dead = client_subscribed(b, "dead", "dlq/#");
	client_publish_str(dead, "jobs", "x", 1);
	const char *id = expect_original(client_expect(worker, "jobs", 1));
	client_nack(worker, id, NULL);
	const char *copy = expect_retry_copy(client_expect(worker, "jobs", 2), "jobs", id, 1);

	reload(b, JOBS(2), "reload: 1 policies in use", 1);
	client_nack(worker, copy, "after reload");
	const struct it_msg *dl = client_expect(dead, "dlq/jobs", 1);
	expect_dead_letter(dl, "jobs", id, 2, client_id(worker), "jobs", "after reload");
	clients_settle(worker, dead);
	client_expect_exactly(worker, "jobs", 2);
	client_expect_exactly(dead, NULL, 1);
}
END_TEST

/* A chain whose filter left the table keeps the policy it started with;
 * new messages on that topic are no longer tracked. */
START_TEST(test_reload_removed_filter_keeps_old_policy)
{
	const char *path;
	struct broker *b = file_broker(__func__,
			"{\"policies\":[{\"filter\":\"jobs\",\"max_attempts\":3,\"dead_letter\":\"dlq/jobs\"},"
			"{\"filter\":\"old\",\"max_attempts\":3,\"dead_letter\":\"dlq/old\"}]}", &path);
	struct client *worker = client_subscribed(b, "worker", "old");
	struct client *dead = client_subscribed(b, "dead", "dlq/#");
	client_publish_str(dead, "old", "x", 1);
	const char *id = expect_original(client_expect(worker, "old", 1));
	client_nack(worker, id, NULL);
	const char *copy = expect_retry_copy(client_expect(worker, "old", 2), "old", id, 1);

	reload(b, JOBS(1), "reload: 1 policies in use", 1);
	client_nack(worker, copy, NULL);
	const char *copy2 = expect_retry_copy(client_expect(worker, "old", 3), "old", id, 2);
	client_nack(worker, copy2, NULL);
	expect_dead_letter(client_expect(dead, "dlq/old", 1), "old", id, 3, client_id(worker), "old", NULL);

	client_publish_str(dead, "old", "new", 1);
	const struct it_msg *m = client_expect(worker, "old", 4);
	ck_assert_str_eq(m->payload, "new");
	ck_assert_msg(msg_user(m, DLQ_PROP_ID) == NULL, "a message on a removed filter was stamped");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ops");
	check_add(s, harness_tcase("status"), CHECK_TESTS(test_get_status_counters, test_list_policies, test_reset_counters,
			test_bad_requests_get_error_replies, test_sys_topics));
	check_add(s, harness_tcase("reload"), CHECK_TESTS(test_reload_changes_max_attempts, test_no_policies_then_reload,
			test_reload_invalid_file_keeps_policies, test_reload_chain_in_flight_follows_new_policy,
			test_reload_removed_filter_keeps_old_policy));
	return harness_run(s);
}
