/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Limits of size and count, against the real broker: a policy file of
 * 10,000 filters (startup time and per-message cost printed, routing
 * checked for a few), topics of the protocol's 65,535 bytes tracked, NACKed
 * and dead-lettered (and one level too many refused by the broker), and a
 * payload larger than plugin_opt_max_pending_bytes delivered unstamped and
 * counted. test_limits_abuse.c has the floods, the oversized control
 * message and the NACKs of ids never received.
 *
 * Figures go to stderr as lines starting "limits: " (meson keeps them in
 * its test log); they are printed, never asserted, since the machine's load
 * decides them. The brokers log with log_type all, as every harness broker
 * does, which makes them slower than they would be in production.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "harness.h"
#include "limits_common.h"
#include "proc.h"
#include "raw.h"
#include "test_util.h"

/* ---- helpers ---- */

/* The gauges of a status object must be those of an empty ledger and
 * outbox. */
static void expect_empty_gauges(const cJSON *o, const char *what)
{
	ck_assert_msg(json_num(o, "records") == 0 && json_num(o, "ledgerBytes") == 0 && json_num(o, "pending") == 0
			&& json_num(o, "delayed") == 0 && json_num(o, "owedBytes") == 0,
			"%s: records %g ledgerBytes %g pending %g delayed %g owedBytes %g, expected all 0", what,
			json_num(o, "records"), json_num(o, "ledgerBytes"), json_num(o, "pending"), json_num(o, "delayed"), json_num(o, "owedBytes"));
}

/* ---- 10,000 filters ---- */

/* Policy i of the big table: three shapes, interleaved so that siblings
 * arrive out of order (as in the unit test of policy.c); max_attempts=1,
 * dead letters to dead/<i>. The topic names one matched by it alone. */
static void big_policy(unsigned i, char *filter, size_t flen, char *topic, size_t tlen)
{
	unsigned k = (i * 7919u) % 10000u;
	switch(i % 3){
		case 0:
			snprintf(filter, flen, "site/%u/#", k);
			snprintf(topic, tlen, "site/%u/a/b", k);
			break;
		case 1:
			snprintf(filter, flen, "site/%u/+/temp", k);
			snprintf(topic, tlen, "site/%u/room/temp", k);
			break;
		default:
			snprintf(filter, flen, "+/%u/x/y", k);
			snprintf(topic, tlen, "other/%u/x/y", k);
			break;
	}
}

static char *big_policy_file(unsigned count)
{
	size_t cap = (size_t)count * 96 + 64, len = 0;
	char *json = malloc(cap);
	ck_assert_ptr_nonnull(json);
	len += (size_t)snprintf(json + len, cap - len, "{\"policies\":[\n");
	for(unsigned i = 0; i < count; i++){
		char filter[64], topic[64];
		big_policy(i, filter, sizeof(filter), topic, sizeof(topic));
		len += (size_t)snprintf(json + len, cap - len,
				"{\"filter\":\"%s\",\"max_attempts\":1,\"dead_letter\":\"dead/%u\"}%s\n",
				filter, i, i + 1 < count ? "," : "");
	}
	snprintf(json + len, cap - len, "]}\n");
	return json;
}

/* Starts a broker with the first count policies of the big table, from a
 * file; *ms gets the time from start to its "running" line. */
static struct broker *big_broker(const char *label, unsigned count, uint64_t *ms)
{
	struct broker *b = broker_new(label);
	broker_plugin(b);
	char *json = big_policy_file(count);
	const char *path = broker_file(b, "policies.json", json);
	free(json);
	broker_conf(b, "plugin_opt_policy_file %s", path);
	broker_conf(b, "plugin_opt_sys_interval 0s");
	/* The rounds below publish 2,000 messages as fast as the broker
	 * acknowledges them, and the worker must receive every one. With the
	 * default max_queued_messages (1000) the broker drops what a worker
	 * left behind by more than its queue and in-flight window: on a busy
	 * machine the worker's network thread can lose the CPU long enough for
	 * that (9998 of 10009 arrived, the rest never would). An unbounded queue
	 * makes the count depend on the plugin only, however slow the worker. */
	broker_conf(b, "max_queued_messages 0");
	uint64_t t0 = it_now_ms();
	broker_start(b);
	*ms = it_now_ms() - t0;
	return b;
}

/* Publishes count messages at QoS 1, one at a time, the j-th to the topic
 * of policy (j * step) % mod, and waits until worker has them all; returns
 * the time in µs. */
static uint64_t publish_round(struct client *pub, struct client *worker, unsigned count, unsigned mod, unsigned step)
{
	size_t before = client_count(worker, NULL);
	uint64_t t0 = it_now_ms();
	for(unsigned j = 0; j < count; j++){
		char filter[64], topic[64];
		big_policy((j * step) % mod, filter, sizeof(filter), topic, sizeof(topic));
		client_publish_str(pub, topic, "m", 1);
	}
	client_expect(worker, NULL, before + count);
	return (it_now_ms() - t0) * 1000u;
}

START_TEST(test_ten_thousand_filters)
{
	uint64_t small_ms, big_ms;
	struct broker *small = big_broker("limits-3-policies", 3, &small_ms);
	struct broker *big = big_broker("limits-10000-policies", 10000, &big_ms);
	fprintf(stderr, "limits: startup to \"running\": %llu ms with 10000 policies, %llu ms with 3\n",
			(unsigned long long)big_ms, (unsigned long long)small_ms);
	ck_assert_msg(it_wait_log(big, "loaded: 10000 policies", 1, HARNESS_WAIT_MS), "no \"loaded: 10000 policies\"");

	/* Routing: a few policies spread over the table, each by a topic only
	 * it matches, dead-lettered at the first NACK to its own topic with its
	 * own filter named. */
	struct client *worker = client_subscribed(big, "worker", "site/#");
	struct client *pub = client_new(big, "pub", MQTT_PROTOCOL_V5);
	struct client *dead = client_subscribed(big, "dead", "dead/#");
	client_subscribe(worker, "other/#", 1);
	static const unsigned picks[] = { 0, 1, 2, 3333, 5000, 7777, 9998, 9999 };
	for(size_t j = 0; j < ARRAY_LEN(picks); j++){
		char filter[64], topic[64], dead_topic[32], payload[32];
		big_policy(picks[j], filter, sizeof(filter), topic, sizeof(topic));
		snprintf(dead_topic, sizeof(dead_topic), "dead/%u", picks[j]);
		snprintf(payload, sizeof(payload), "p%u", picks[j]);
		client_publish_str(pub, topic, payload, 1);
		const char *id = expect_original(client_expect(worker, topic, 1));
		client_nack(worker, id, NULL);
		const struct it_msg *dl = client_expect(dead, dead_topic, 1);
		ck_assert_str_eq(dl->payload, payload);
		expect_dead_letter(dl, topic, id, 1, client_id(worker), filter, NULL);
	}
	client_publish_str(pub, "site/10000/a/b", "untracked", 1);
	const struct it_msg *m = client_expect(worker, "site/10000/a/b", 1);
	ck_assert_msg(msg_user(m, DLQ_PROP_ID) == NULL, "a topic no filter matches was stamped");
	clients_settle(worker, pub, dead);
	client_expect_exactly(dead, NULL, ARRAY_LEN(picks));

	/* The control replies grow with the table. */
	struct client *ops = client_new(big, "ops", MQTT_PROTOCOL_V5);
	size_t bytes;
	uint64_t t0 = it_now_ms();
	cJSON *data = command(ops, DLQ_COMMAND_LIST_POLICIES, &bytes);
	uint64_t list_ms = it_now_ms() - t0;
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(data, "policies")), 10000);
	cJSON_Delete(data);
	size_t status_bytes;
	t0 = it_now_ms();
	data = command(ops, DLQ_COMMAND_GET_STATUS, &status_bytes);
	uint64_t status_ms = it_now_ms() - t0;
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(data, "policies")), 10000);
	ck_assert_int_eq(json_num(totals(data), "deadLetters"), ARRAY_LEN(picks));
	cJSON_Delete(data);
	fprintf(stderr, "limits: with 10000 policies, listPolicies replies %zu bytes in %llu ms, getStatus %zu bytes in %llu ms "
			"(round trips)\n", bytes, (unsigned long long)list_ms, status_bytes, (unsigned long long)status_ms);

	/* Per-message cost: rounds of 2,000 tracked publishes (QoS 1, one at
	 * a time) against both brokers, timed until the subscriber has them. */
	enum { ROUND = 2000 };
	struct client *wsmall = client_subscribed(small, "worker", "site/#");
	struct client *psmall = client_new(small, "pub", MQTT_PROTOCOL_V5);
	client_subscribe(wsmall, "other/#", 1);
	/* Topics of policies 0..2 only, which the small table tracks too;
	 * then topics of 2,000 different policies. Three rounds of each,
	 * alternating, the best of each kept: the machine's load varies. */
	enum { ROUNDS = 3 };
	uint64_t us_small = UINT64_MAX, us_big_same = UINT64_MAX, us_big_spread = UINT64_MAX;
	for(int r = 0; r < ROUNDS; r++){
		uint64_t us = publish_round(psmall, wsmall, ROUND, 3, 1);
		us_small = us < us_small ? us : us_small;
		us = publish_round(pub, worker, ROUND, 3, 1);
		us_big_same = us < us_big_same ? us : us_big_same;
		us = publish_round(pub, worker, ROUND, 10000, 7);
		us_big_spread = us < us_big_spread ? us : us_big_spread;
	}
	fprintf(stderr, "limits: per tracked publish (QoS 1, publish to delivery, one at a time, best of %d rounds of %d): "
			"%.1f us with 3 policies, %.1f us with 10000 (same topics), %.1f us with 10000 (topics spread over the table)\n",
			ROUNDS, ROUND, (double)us_small / ROUND, (double)us_big_same / ROUND, (double)us_big_spread / ROUND);
	data = status(ops);
	ck_assert_int_eq(json_num(totals(data), "tracked"), ARRAY_LEN(picks) + 2 * ROUNDS * ROUND);
	cJSON_Delete(data);
}
END_TEST

/* ---- topics of 65,535 bytes ---- */

/* Mosquitto refuses a topic with more than this many '/' (its
 * TOPIC_HIERARCHY_LIMIT) and disconnects the publisher. */
#define BROKER_MAX_SLASHES 200

/* A topic of len bytes, "long/" then levels of 'x' separated so that the
 * topic has slashes '/' in all (at least 1). */
static char *long_topic(size_t len, size_t slashes)
{
	char *t = malloc(len + 1);
	ck_assert_ptr_nonnull(t);
	memcpy(t, "long/", 5);
	memset(t + 5, 'x', len - 5);
	/* The further slashes evenly over the rest, none at the end. */
	size_t more = slashes - 1;
	for(size_t k = 1; k <= more; k++){
		t[5 + k * (len - 6) / (more + 1)] = '/';
	}
	t[len] = '\0';
	return t;
}

static size_t slashes_in(const char *t)
{
	size_t n = 0;
	for(; *t; t++){
		n += *t == '/';
	}
	return n;
}

START_TEST(test_longest_topics)
{
	struct broker *b = dlq_broker("policy long/# max_attempts=2 dead_letter=dlq/long", "sys_interval 0s");
	struct client *worker = client_subscribed(b, "worker", "long/#");
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *dead = client_subscribed(b, "dead", "dlq/#");
	/* 65,535 bytes in 2 levels, and in as many levels as the broker takes. */
	static const size_t slashes[] = { 1, BROKER_MAX_SLASHES };
	for(size_t k = 0; k < 2; k++){
		char *topic = long_topic(65535, slashes[k]);
		ck_assert_uint_eq(strlen(topic), 65535);
		ck_assert_uint_eq(slashes_in(topic), slashes[k]);
		const char *id;
		uint64_t ms = one_chain(pub, worker, dead, topic, "long/#", "dlq/long", k, &id);
		const struct it_msg *dl = client_msg(dead, "dlq/long", k);
		expect_dead_letter(dl, topic, id, 2, client_id(worker), "long/#", NULL);
		ck_assert_uint_eq(strlen(msg_user(dl, DLQ_PROP_ORIGIN_TOPIC)), 65535);
		fprintf(stderr, "limits: a 65535-byte topic of %zu levels went through publish, 2 NACKs and its dead letter in %llu ms\n",
				slashes[k] + 1, (unsigned long long)ms);
		free(topic);
	}
	clients_settle(worker, pub, dead);
	client_expect_exactly(worker, NULL, 4);
	client_expect_exactly(dead, NULL, 2);

	/* One level more is the broker's to refuse: it disconnects the
	 * publisher, and the plugin never sees the message. The raw client
	 * sends it as it is: 2.1's libmosquitto refuses such a topic itself
	 * (its mosquitto_pub_topic_check, libcommon/topic_common.c, counts the
	 * levels in the client library too; 2.0's counted them only in the
	 * broker), and a publisher on another library may send it all the same. */
	char *deep = long_topic(1000, BROKER_MAX_SLASHES + 1);
	struct raw *r = raw_new(b, &(struct raw_options){ .id = "deep", .protocol = MQTT_PROTOCOL_V5, .clean = true });
	raw_connect(r);
	ck_assert(raw_send_publish(r, deep, "x", 1, 1));
	const struct raw_msg *got = NULL;
	ck_assert_msg(raw_next(r, HARNESS_WAIT_MS, &got) == RAW_CLOSED, "a topic of %d levels did not cost its publisher the connection",
			BROKER_MAX_SLASHES + 2);
	free(deep);
	raw_free(r);

	/* One byte more cannot be sent at all: MQTT encodes a topic's length in
	 * two bytes, and libmosquitto refuses it before the broker sees it. */
	char *over = long_topic(65536, 1);
	struct mosquitto *m = mosquitto_new(NULL, true, NULL);
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_publish_v5(m, NULL, over, 1, "x", 1, false, NULL), MOSQ_ERR_INVAL);
	mosquitto_destroy(m);
	free(over);

	cJSON *data = status(client_new(b, "ops", MQTT_PROTOCOL_V5));
	const cJSON *t = totals(data);
	ck_assert_msg(json_num(t, "tracked") == 2 && json_num(t, "nacks") == 4 && json_num(t, "retryCopies") == 2
			&& json_num(t, "deadLetters") == 2 && json_num(t, "nacksRefused") == 0 && json_num(t, "untrackedFull") == 0,
			"unexpected counters for two long chains");
	cJSON_Delete(data);
}
END_TEST

/* ---- payloads over the memory bound ---- */

START_TEST(test_oversized_payload_is_counted)
{
	struct broker *b = dlq_broker("max_pending_bytes 4KiB", "policy big max_attempts=1 dead_letter=dlq/big",
			"sys_interval 0s");
	struct client *worker = client_subscribed(b, "worker", "big");
	struct client *watcher = client_subscribed(b, "watcher", "dlq/#");
	struct client *ops = client_new(b, "ops", MQTT_PROTOCOL_V5);

	/* Larger than the bound, and exactly the bound (which the record's own
	 * overhead takes past it): both delivered whole, neither stamped. */
	static char large[1024 * 1024];
	memset(large, 'x', sizeof(large));
	client_publish(watcher, "big", large, (int)sizeof(large), 1, NULL);
	client_publish(watcher, "big", large, 4096, 1, NULL);
	const struct it_msg *m = client_expect(worker, "big", 2);
	ck_assert_int_eq(client_msg(worker, "big", 0)->payloadlen, (int)sizeof(large));
	ck_assert_int_eq(m->payloadlen, 4096);
	for(size_t i = 0; i < 2; i++){
		ck_assert_msg(msg_user(client_msg(worker, "big", i), DLQ_PROP_ID) == NULL, "message %zu was stamped", i);
	}
	cJSON *data = status(ops);
	const cJSON *t = totals(data);
	ck_assert_msg(json_num(t, "untrackedFull") == 2 && json_num(t, "tracked") == 0, "untrackedFull %g tracked %g",
			json_num(t, "untrackedFull"), json_num(t, "tracked"));
	ck_assert_int_eq(json_num(status_policy(data, "big"), "untrackedFull"), 2);
	expect_empty_gauges(t, "totals");
	cJSON_Delete(data);

	/* Two 3 KiB messages: each fits alone, so the second evicts the first,
	 * whose NACK is then refused as unknown; the second goes on, and its
	 * dead letter, owed until the broker takes it, evicts its record. */
	client_publish(watcher, "big", large, 3072, 1, NULL);
	const char *first = expect_original(client_expect(worker, "big", 3));
	client_publish(watcher, "big", large, 3072, 1, NULL);
	const char *second = expect_original(client_expect(worker, "big", 4));
	client_nack(worker, first, NULL);
	const struct it_msg *r = client_expect(worker, DLQ_RESPONSE_TOPIC, 1);
	cJSON *doc = expect_reply(r, 1);
	expect_reply_error(reply_entry(doc, 0), "unknown or expired dlq-id");
	cJSON_Delete(doc);
	client_nack(worker, second, NULL);
	const struct it_msg *dl = client_expect(watcher, "dlq/big", 1);
	ck_assert_int_eq(dl->payloadlen, 3072);
	expect_dead_letter(dl, "big", second, 1, client_id(worker), "big", NULL);

	data = status(ops);
	t = totals(data);
	ck_assert_msg(json_num(t, "untrackedFull") == 2 && json_num(t, "tracked") == 2 && json_num(t, "evicted") == 2
			&& json_num(t, "unknownIds") == 1 && json_num(t, "nacksRefused") == 1 && json_num(t, "deadLetters") == 1,
			"untrackedFull %g tracked %g evicted %g unknownIds %g nacksRefused %g deadLetters %g",
			json_num(t, "untrackedFull"), json_num(t, "tracked"), json_num(t, "evicted"), json_num(t, "unknownIds"),
			json_num(t, "nacksRefused"), json_num(t, "deadLetters"));
	ck_assert_msg(json_num(t, "ledgerBytes") + json_num(t, "owedBytes") <= 4096, "the bound was exceeded: ledgerBytes %g owedBytes %g",
			json_num(t, "ledgerBytes"), json_num(t, "owedBytes"));
	cJSON_Delete(data);
	clients_settle(worker, watcher, ops);
	client_expect_exactly(worker, "big", 4);
	client_expect_exactly(watcher, NULL, 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("limits");
	TCase *tc = harness_tcase("limits");
	/* 10,000-policy brokers take longer than the harness's default, the
	 * more so under a sanitizer. */
	tcase_set_timeout(tc, 480);
	check_add(s, tc, CHECK_TESTS(test_ten_thousand_filters, test_longest_topics, test_oversized_payload_is_counted));
	return harness_run(s);
}
