/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Faults outside the plugin, against the real broker: mosquitto_broker_publish
 * refusing the plugin's publishes for a while (the test build of the module,
 * DLQ_TEST_PLUGIN, with DLQ_TEST_FAIL_PUBLISHES=N failing the first N), and
 * a dead-letter reader that is offline while its queue in the broker
 * (max_queued_messages) runs full.
 *
 * A refused retry copy or dead letter is kept and tried again on every tick
 * until the broker takes it, then delivered once, with one log line; a
 * targeted copy whose subscriber leaves meanwhile becomes a dead letter; a
 * reply the broker refuses is lost, but what it answered is counted. What
 * the broker drops from a full queue the plugin cannot see: it counts every
 * dead letter it handed over and logs each, and the broker counts the drops.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_suite.h"
#include "harness.h"
#include "proc.h"

#define REPLY_TOPIC "faults/reply"

/* A broker with the test build of the plugin, whose first fail_publishes
 * publishes fail, and one plugin_opt_<opt> line per further argument. */
#define faulty_broker(fail_publishes, ...) \
	faulty_broker_at(__func__, (fail_publishes), __VA_ARGS__, (const char *)NULL)
static struct broker *faulty_broker_at(const char *label, const char *fail_publishes, ...)
{
	struct broker *b = broker_new(label);
	const char *plugin = getenv("DLQ_TEST_PLUGIN");
	ck_assert_msg(plugin && *plugin, "DLQ_TEST_PLUGIN is not set: run the tests with meson test");
	ck_assert_msg(access(plugin, R_OK) == 0, "DLQ_TEST_PLUGIN %s: %s", plugin, strerror(errno));
	broker_conf(b, "plugin %s", plugin);
	/* Every publish counts against the failures, $SYS topics too. */
	broker_conf(b, "plugin_opt_sys_interval 0s");
	va_list ap;
	va_start(ap, fail_publishes);
	const char *opt;
	while((opt = va_arg(ap, const char *)) != NULL){
		broker_conf(b, "plugin_opt_%s", opt);
	}
	va_end(ap);
	broker_setenv(b, "DLQ_TEST_FAIL_PUBLISHES", fail_publishes);
	broker_start(b);
	return b;
}

/* How many lines of the broker's log contain needle. */
static size_t log_lines(struct broker *b, const char *needle)
{
	char *log = broker_log_since_start(b);
	size_t n = it_lines_with(log, needle, NULL, 0);
	free(log);
	return n;
}

/* getStatus's totals, as a detached object the caller frees. */
static cJSON *status_totals(struct client *c)
{
	const char *payload = "{\"commands\":[{\"command\":\"" DLQ_COMMAND_GET_STATUS "\"}]}";
	mosquitto_property *p = NULL;
	ck_assert_int_eq(mosquitto_property_add_string(&p, MQTT_PROP_RESPONSE_TOPIC, REPLY_TOPIC), 0);
	size_t n = client_count(c, REPLY_TOPIC) + 1;
	client_publish(c, DLQ_CONTROL_TOPIC, payload, (int)strlen(payload), 1, p);
	mosquitto_property_free_all(&p);
	cJSON *doc = expect_reply(client_expect(c, REPLY_TOPIC, n), 1);
	cJSON *data = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "responses"), 0), "data");
	cJSON *totals = cJSON_DetachItemFromObjectCaseSensitive(data, "totals");
	cJSON_Delete(doc);
	ck_assert_msg(cJSON_IsObject(totals), "no totals in the status");
	return totals;
}

static void keep(char *dst, size_t size, const char *src)
{
	ck_assert_ptr_nonnull(src);
	snprintf(dst, size, "%s", src);
}

/* ---- mosquitto_broker_publish failing ---- */

/* The retry copy is refused 20 times (about 2 s of ticks): it arrives once
 * when the broker takes it, the failure is logged once and counted 20
 * times, and nothing stays owed. */
START_TEST(test_refused_retry_copy_arrives_once)
{
	struct broker *b = faulty_broker("20", "policy jobs max_attempts=3 dead_letter=dlq/jobs");
	struct client *worker = client_subscribed(b, "worker", "jobs");
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	client_publish_str(pub, "jobs", "j1", 1);
	const char *id = expect_original(client_expect(worker, "jobs", 1));
	uint64_t t0 = it_now_ms();
	client_nack(worker, id, NULL);
	ck_assert_msg(it_wait_log(b, "failed to publish retry copy to \"jobs\"", 1, HARNESS_WAIT_MS), "no failure logged");
	const struct it_msg *copy = client_expect(worker, "jobs", 2);
	uint64_t ms = it_now_ms() - t0;
	expect_retry_copy(copy, "jobs", id, 1);
	ck_assert_str_eq(copy->payload, "j1");
	clients_settle(worker, pub);
	client_expect_exactly(worker, NULL, 2);
	ck_assert_uint_eq(log_lines(b, "failed to publish retry copy"), 1);
	cJSON *t = status_totals(client_new(b, "ops", MQTT_PROTOCOL_V5));
	ck_assert_msg(json_num(t, "publishFailures") == 20 && json_num(t, "retryCopies") == 1 && json_num(t, "nacks") == 1
			&& json_num(t, "pending") == 0 && json_num(t, "owedBytes") == 0,
			"publishFailures %g retryCopies %g nacks %g pending %g owedBytes %g", json_num(t, "publishFailures"),
			json_num(t, "retryCopies"), json_num(t, "nacks"), json_num(t, "pending"), json_num(t, "owedBytes"));
	cJSON_Delete(t);
	fprintf(stderr, "faults: a retry copy refused 20 times arrived %llu ms after its NACK\n", (unsigned long long)ms);
}
END_TEST

/* The same for a dead letter: whole, once, with its reason. */
START_TEST(test_refused_dead_letter_arrives_once)
{
	struct broker *b = faulty_broker("20", "policy jobs max_attempts=1 dead_letter=dlq/jobs");
	struct client *worker = client_subscribed(b, "worker", "jobs");
	struct client *inspector = client_subscribed(b, "inspector", "dlq/#");
	client_publish_str(inspector, "jobs", "poison", 1);
	const char *id = expect_original(client_expect(worker, "jobs", 1));
	client_nack(worker, id, "cannot digest");
	ck_assert_msg(it_wait_log(b, "failed to publish dead letter to \"dlq/jobs\"", 1, HARNESS_WAIT_MS), "no failure logged");
	const struct it_msg *dl = client_expect(inspector, "dlq/jobs", 1);
	ck_assert_str_eq(dl->payload, "poison");
	expect_dead_letter(dl, "jobs", id, 1, client_id(worker), "jobs", "cannot digest");
	clients_expect_totals(inspector, 1, worker, 1);
	ck_assert_uint_eq(log_lines(b, "failed to publish dead letter"), 1);
	ck_assert_uint_eq(log_lines(b, "dead-lettered message from \"jobs\""), 1);
	cJSON *t = status_totals(client_new(b, "ops", MQTT_PROTOCOL_V5));
	ck_assert_msg(json_num(t, "publishFailures") == 20 && json_num(t, "deadLetters") == 1 && json_num(t, "pending") == 0,
			"publishFailures %g deadLetters %g pending %g", json_num(t, "publishFailures"), json_num(t, "deadLetters"),
			json_num(t, "pending"));
	cJSON_Delete(t);
}
END_TEST

/* A targeted retry copy still refused when its subscriber leaves without a
 * session becomes a dead letter, itself refused until the failures end,
 * then delivered once. */
START_TEST(test_refused_copy_of_a_client_that_left_is_dead_lettered)
{
	struct broker *b = faulty_broker("30", "policy jobs max_attempts=3 dead_letter=dlq/jobs");
	struct client *worker = client_subscribed(b, "worker", "jobs");
	struct client *inspector = client_subscribed(b, "inspector", "dlq/#");
	client_publish_str(inspector, "jobs", "j1", 1);
	char id[32], wid[128];
	keep(id, sizeof(id), expect_original(client_expect(worker, "jobs", 1)));
	keep(wid, sizeof(wid), client_id(worker));
	client_nack(worker, id, NULL);
	ck_assert_msg(it_wait_log(b, "failed to publish retry copy to \"jobs\"", 1, HARNESS_WAIT_MS), "no failure logged");
	client_free(worker);
	const struct it_msg *dl = client_expect(inspector, "dlq/jobs", 1);
	ck_assert_str_eq(dl->payload, "j1");
	char reason[256];
	snprintf(reason, sizeof(reason), "subscriber \"%s\" left without a session before its retry copy was delivered", wid);
	expect_dead_letter(dl, "jobs", id, 1, wid, "jobs", reason);
	clients_settle(inspector);
	client_expect_exactly(inspector, NULL, 1);
	cJSON *t = status_totals(client_new(b, "ops", MQTT_PROTOCOL_V5));
	ck_assert_msg(json_num(t, "publishFailures") == 30 && json_num(t, "deadLetters") == 1 && json_num(t, "retryCopies") == 0
			&& json_num(t, "pending") == 0,
			"publishFailures %g deadLetters %g retryCopies %g pending %g", json_num(t, "publishFailures"),
			json_num(t, "deadLetters"), json_num(t, "retryCopies"), json_num(t, "pending"));
	cJSON_Delete(t);
}
END_TEST

/* A reply the broker refuses is not tried again (it answers one request,
 * which the client may repeat), but the refusal it carried is counted. */
START_TEST(test_refused_reply_is_lost_but_counted)
{
	struct broker *b = faulty_broker("1", "policy jobs max_attempts=3 dead_letter=dlq/jobs");
	struct client *worker = client_new(b, "worker", MQTT_PROTOCOL_V5);
	client_nack(worker, "Unknown-00000001", NULL);
	ck_assert_msg(it_wait_log(b, "not sent", 1, HARNESS_WAIT_MS), "no lost reply logged");
	clients_settle(worker);
	client_expect_exactly(worker, DLQ_RESPONSE_TOPIC, 0);
	client_nack(worker, "Unknown-00000002", NULL);
	cJSON *doc = expect_reply(client_expect(worker, DLQ_RESPONSE_TOPIC, 1), 1);
	expect_reply_error(reply_entry(doc, 0), "unknown or expired dlq-id");
	cJSON_Delete(doc);
	cJSON *t = status_totals(worker);
	ck_assert_msg(json_num(t, "unknownIds") == 2 && json_num(t, "nacksRefused") == 2, "unknownIds %g nacksRefused %g",
			json_num(t, "unknownIds"), json_num(t, "nacksRefused"));
	cJSON_Delete(t);
	ck_assert_uint_eq(log_lines(b, "reply to \""), 1);
}
END_TEST

/* ---- a dead-letter reader away while its queue fills ---- */

/* A broker with the plugin, policy jobs (max_attempts=1, dead letters to
 * dlq/jobs), $SYS every second, and the given queue limits. */
static struct broker *queue_broker(const char *label, int max_queued, int max_inflight)
{
	struct broker *b = broker_new(label);
	broker_plugin(b);
	broker_conf(b, "plugin_opt_policy jobs max_attempts=1 dead_letter=dlq/jobs");
	broker_conf(b, "plugin_opt_sys_interval 0s");
	broker_conf(b, "sys_interval 1");
	broker_conf(b, "max_queued_messages %d", max_queued);
	broker_conf(b, "max_inflight_messages %d", max_inflight);
	broker_start(b);
	return b;
}

/* Dead-letters n messages while the inspector (a persistent session,
 * subscribed to dlq/# at QoS 1) is offline, then brings it back and returns
 * it; *got is how many of the n it received (all checked: dead letters of
 * jobs, each payload at most once). The plugin must have handed all n to
 * the broker, counted and logged them. */
static struct client *dead_letters_while_away(struct broker *b, size_t n, const char *inspector_id, size_t *got)
{
	struct client *insp = client_new_session(b, inspector_id, MQTT_PROTOCOL_V5, 600);
	client_subscribe(insp, "dlq/#", 1);
	client_free(insp);

	struct client *worker = client_subscribed(b, "worker", "jobs");
	for(size_t i = 0; i < n; i++){
		char payload[32];
		snprintf(payload, sizeof(payload), "p%zu", i);
		client_publish_str(worker, "jobs", payload, 1);
		client_nack(worker, expect_original(client_expect(worker, "jobs", i + 1)), "away");
	}
	struct client *ops = client_new(b, "ops", MQTT_PROTOCOL_V5);
	cJSON *t = status_totals(ops);
	ck_assert_msg(json_num(t, "deadLetters") == (double)n, "deadLetters %g, expected %zu", json_num(t, "deadLetters"), n);
	cJSON_Delete(t);
	ck_assert_uint_eq(log_lines(b, "dead-lettered message from \"jobs\""), n);

	insp = client_new_session(b, inspector_id, MQTT_PROTOCOL_V5, 600);
	ck_assert_msg(client_session_present(insp), "the broker did not keep the inspector's session");
	clients_settle(insp);
	*got = client_count(insp, "dlq/#");
	for(size_t i = 0; i < *got; i++){
		const struct it_msg *m = client_msg(insp, "dlq/#", i);
		ck_assert_str_eq(m->topic, "dlq/jobs");
		ck_assert_ptr_null(client_find_payload(insp, "dlq/#", m->payload, 1));
	}
	client_expect_exactly(insp, NULL, *got);
	return insp;
}

/* 30 dead letters while the inspector is away, its queue limited to 5: the
 * broker keeps what fits (measured on 2.0.11: the first 5) and drops the
 * rest, counting them in $SYS. The plugin handed over, counted and logged
 * all 30; it cannot see the drops. With no queue limit
 * (max_queued_messages 0), all 30 arrive. */
START_TEST(test_offline_inspector_with_a_full_queue)
{
	enum { N = 30 };
	char id[64];
	snprintf(id, sizeof(id), "inspector-%ld", (long)getpid());
	struct broker *b = queue_broker("limited-queue", 5, 5);
	struct client *watch = client_new(b, "watch", MQTT_PROTOCOL_V5);
	client_subscribe(watch, BROKER_DROPPED_TOPIC, 0);
	size_t got;
	struct client *insp = dead_letters_while_away(b, N, id, &got);
	fprintf(stderr, "faults: an offline inspector with max_queued_messages 5 and max_inflight_messages 5 "
			"received %zu of %d dead letters; the broker dropped the rest\n", got, N);
	ck_assert_uint_lt(got, N);
	ck_assert_uint_gt(got, 0);
	/* The first ones were kept, the later ones dropped. */
	for(size_t i = 0; i < got; i++){
		char payload[32];
		snprintf(payload, sizeof(payload), "p%zu", i);
		ck_assert_msg(client_find_payload(insp, "dlq/#", payload, 0), "dead letter %s is missing", payload);
	}
	client_expect_dropped(watch, N - got);

	struct broker *unlimited = queue_broker("unlimited-queue", 0, 20);
	dead_letters_while_away(unlimited, N, id, &got);
	ck_assert_uint_eq(got, N);
}
END_TEST

int main(void)
{
	return harness_run(check_suite("faults", check_timeout(harness_tcase("faults"), 240),
			CHECK_TESTS(test_refused_retry_copy_arrives_once, test_refused_dead_letter_arrives_once,
			test_refused_copy_of_a_client_that_left_is_dead_lettered, test_refused_reply_is_lost_but_counted,
			test_offline_inspector_with_a_full_queue)));
}
