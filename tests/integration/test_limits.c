/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Abuse and limits, against the real broker: a policy file of 10,000
 * filters (startup time and per-message cost printed, routing checked for a
 * few), topics of the protocol's 65,535 bytes tracked, NACKed and
 * dead-lettered (and one level too many refused by the broker), a payload
 * larger than plugin_opt_max_pending_bytes delivered unstamped and counted,
 * a client flooding 10,000 NACKs of unknown ids and one flooding 10,000
 * control commands while other clients are served, a 16 MiB control
 * message refused unparsed, and NACKs of ids the NACKing client never
 * received (also when the ACL keeps the topic from it).
 *
 * Figures go to stderr as lines starting "limits: " (meson keeps them in
 * its test log); they are printed, never asserted, since the machine's load
 * decides them. The brokers log with log_type all, as every harness broker
 * does, which makes a flood slower than it would be in production.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flood.h"
#include "harness.h"
#include "proc.h"

#define REPLY_TOPIC "limits/reply"
#define FLOOD_N 10000

/* ---- helpers ---- */

/* Sends {"commands":[{"command":name}]} with REPLY_TOPIC as response topic
 * and returns the "data" of its single reply entry, detached (the caller
 * frees it); *bytes gets the size of the reply. Fails on an error entry. */
static cJSON *command(struct client *c, const char *name, size_t *bytes)
{
	char payload[128];
	snprintf(payload, sizeof(payload), "{\"commands\":[{\"command\":\"%s\"}]}", name);
	mosquitto_property *p = NULL;
	ck_assert_int_eq(mosquitto_property_add_string(&p, MQTT_PROP_RESPONSE_TOPIC, REPLY_TOPIC), 0);
	size_t n = client_count(c, REPLY_TOPIC) + 1;
	int rc = client_publish(c, DLQ_CONTROL_TOPIC, payload, (int)strlen(payload), 1, p);
	mosquitto_property_free_all(&p);
	ck_assert_msg(rc < 0x80, "the broker refused %s: %s", name, mosquitto_reason_string(rc));
	const struct it_msg *m = client_expect(c, REPLY_TOPIC, n);
	if(bytes){
		*bytes = (size_t)m->payloadlen;
	}
	cJSON *doc = msg_json(m);
	ck_assert_msg(doc != NULL, "%s: the reply is not JSON", name);
	cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "responses"), 0);
	ck_assert_msg(e != NULL && json_str(e, "error") == NULL, "%s: %s", name, e ? json_str(e, "error") : "no entry");
	cJSON *data = cJSON_DetachItemFromObjectCaseSensitive(e, "data");
	cJSON_Delete(doc);
	ck_assert_msg(data != NULL, "%s: no data", name);
	return data;
}

static cJSON *status(struct client *c)
{
	return command(c, DLQ_COMMAND_GET_STATUS, NULL);
}

static double num(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	ck_assert_msg(cJSON_IsNumber(v), "no number \"%s\"", name);
	return v->valuedouble;
}

static const cJSON *totals(const cJSON *data)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(data, "totals");
	ck_assert_msg(cJSON_IsObject(t), "no totals in the status");
	return t;
}

/* The status entry of filter among data's policies. */
static const cJSON *policy_status(const cJSON *data, const char *filter)
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

/* The gauges of a status object must be those of an empty ledger and
 * outbox. */
static void expect_empty_gauges(const cJSON *o, const char *what)
{
	ck_assert_msg(num(o, "records") == 0 && num(o, "ledgerBytes") == 0 && num(o, "pending") == 0
			&& num(o, "delayed") == 0 && num(o, "owedBytes") == 0,
			"%s: records %g ledgerBytes %g pending %g delayed %g owedBytes %g, expected all 0", what,
			num(o, "records"), num(o, "ledgerBytes"), num(o, "pending"), num(o, "delayed"), num(o, "owedBytes"));
}

/* A memory figure of the broker in KiB from /proc/<pid>/status ("VmRSS",
 * resident now; "VmHWM", the most it was), or -1. */
static long broker_mem_kib(struct broker *b, const char *field)
{
	FILE *f = fopen(broker_path(b, "pid"), "r");
	long pid = 0;
	if(f){
		if(fscanf(f, "%ld", &pid) != 1){
			pid = 0;
		}
		fclose(f);
	}
	if(pid <= 0){
		return -1;
	}
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	f = fopen(path, "r");
	if(!f){
		return -1;
	}
	long kib = -1;
	size_t flen = strlen(field);
	while(fgets(line, sizeof(line), f)){
		if(!strncmp(line, field, flen) && line[flen] == ':' && sscanf(line + flen + 1, "%ld", &kib) == 1){
			break;
		}
	}
	fclose(f);
	return kib;
}

static long broker_rss_kib(struct broker *b)
{
	return broker_mem_kib(b, "VmRSS");
}

/* One full chain on topic for a policy with max_attempts=2: publish, NACK
 * the original, NACK the copy, the dead letter arrives. Returns how long it
 * took, in ms, and the original's dlq-id in *origin (owned by worker) when
 * origin is not NULL. worker subscribes to filter (which matches topic and
 * is what failure messages name: Check refuses a message of 64 KiB), dead
 * to the dead-letter topic; n is how many chains ran before on them. */
static uint64_t one_chain(struct client *pub, struct client *worker, struct client *dead, const char *topic,
		const char *filter, const char *dead_topic, size_t n, const char **origin)
{
	char payload[32];
	snprintf(payload, sizeof(payload), "chain-%zu", n);
	uint64_t t0 = it_now_ms();
	client_publish_str(pub, topic, payload, 1);
	const char *id = expect_original(client_expect(worker, filter, 2 * n + 1));
	client_nack(worker, id, NULL);
	const char *copy = expect_retry_copy(client_expect(worker, filter, 2 * n + 2), topic, id, 1);
	client_nack(worker, copy, NULL);
	const struct it_msg *dl = client_expect(dead, dead_topic, n + 1);
	ck_assert_str_eq(dl->payload, payload);
	if(origin){
		*origin = id;
	}
	return it_now_ms() - t0;
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
	struct client *worker = client_new(big, "worker", MQTT_PROTOCOL_V5);
	struct client *pub = client_new(big, "pub", MQTT_PROTOCOL_V5);
	struct client *dead = client_new(big, "dead", MQTT_PROTOCOL_V5);
	client_subscribe(worker, "site/#", 1);
	client_subscribe(worker, "other/#", 1);
	client_subscribe(dead, "dead/#", 1);
	static const unsigned picks[] = { 0, 1, 2, 3333, 5000, 7777, 9998, 9999 };
	for(size_t j = 0; j < sizeof(picks) / sizeof(picks[0]); j++){
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
	client_expect_exactly(dead, NULL, sizeof(picks) / sizeof(picks[0]));

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
	ck_assert_int_eq(num(totals(data), "deadLetters"), sizeof(picks) / sizeof(picks[0]));
	cJSON_Delete(data);
	fprintf(stderr, "limits: with 10000 policies, listPolicies replies %zu bytes in %llu ms, getStatus %zu bytes in %llu ms "
			"(round trips)\n", bytes, (unsigned long long)list_ms, status_bytes, (unsigned long long)status_ms);

	/* Per-message cost: rounds of 2,000 tracked publishes (QoS 1, one at
	 * a time) against both brokers, timed until the subscriber has them. */
	enum { ROUND = 2000 };
	struct client *wsmall = client_new(small, "worker", MQTT_PROTOCOL_V5);
	struct client *psmall = client_new(small, "pub", MQTT_PROTOCOL_V5);
	client_subscribe(wsmall, "site/#", 1);
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
	ck_assert_int_eq(num(totals(data), "tracked"), sizeof(picks) / sizeof(picks[0]) + 2 * ROUNDS * ROUND);
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
	struct client *worker = client_new(b, "worker", MQTT_PROTOCOL_V5);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *dead = client_new(b, "dead", MQTT_PROTOCOL_V5);
	client_subscribe(worker, "long/#", 1);
	client_subscribe(dead, "dlq/#", 1);
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
	 * publisher, and the plugin never sees the message. */
	char *deep = long_topic(1000, BROKER_MAX_SLASHES + 1);
	struct flood *f = flood_new(b, "deep");
	flood_publish(f, deep, "x", 1, 1);
	ck_assert_msg(flood_wait_disconnects(f, 1, HARNESS_WAIT_MS), "a topic of %d levels did not cost its publisher the connection",
			BROKER_MAX_SLASHES + 2);
	free(deep);
	flood_free(f);

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
	ck_assert_msg(num(t, "tracked") == 2 && num(t, "nacks") == 4 && num(t, "retryCopies") == 2
			&& num(t, "deadLetters") == 2 && num(t, "nacksRefused") == 0 && num(t, "untrackedFull") == 0,
			"unexpected counters for two long chains");
	cJSON_Delete(data);
}
END_TEST

/* ---- payloads over the memory bound ---- */

START_TEST(test_oversized_payload_is_counted)
{
	struct broker *b = dlq_broker("max_pending_bytes 4KiB", "policy big max_attempts=1 dead_letter=dlq/big",
			"sys_interval 0s");
	struct client *worker = client_new(b, "worker", MQTT_PROTOCOL_V5);
	struct client *watcher = client_new(b, "watcher", MQTT_PROTOCOL_V5);
	struct client *ops = client_new(b, "ops", MQTT_PROTOCOL_V5);
	client_subscribe(worker, "big", 1);
	client_subscribe(watcher, "dlq/#", 1);

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
	ck_assert_msg(num(t, "untrackedFull") == 2 && num(t, "tracked") == 0, "untrackedFull %g tracked %g",
			num(t, "untrackedFull"), num(t, "tracked"));
	ck_assert_int_eq(num(policy_status(data, "big"), "untrackedFull"), 2);
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
	ck_assert_msg(num(t, "untrackedFull") == 2 && num(t, "tracked") == 2 && num(t, "evicted") == 2
			&& num(t, "unknownIds") == 1 && num(t, "nacksRefused") == 1 && num(t, "deadLetters") == 1,
			"untrackedFull %g tracked %g evicted %g unknownIds %g nacksRefused %g deadLetters %g",
			num(t, "untrackedFull"), num(t, "tracked"), num(t, "evicted"), num(t, "unknownIds"),
			num(t, "nacksRefused"), num(t, "deadLetters"));
	ck_assert_msg(num(t, "ledgerBytes") + num(t, "owedBytes") <= 4096, "the bound was exceeded: ledgerBytes %g owedBytes %g",
			num(t, "ledgerBytes"), num(t, "owedBytes"));
	cJSON_Delete(data);
	clients_settle(worker, watcher, ops);
	client_expect_exactly(worker, "big", 4);
	client_expect_exactly(watcher, NULL, 1);
}
END_TEST

/* ---- floods ---- */

/* A well-formed dlq-id that was never issued (the plugin draws ids from
 * the OS's random source; these are counted). */
static void unknown_id(unsigned i, char out[DLQ_ID_LEN + 1])
{
	snprintf(out, DLQ_ID_LEN + 1, "Unknown-%08u", i);
}

/* While a flood is being handled: chains of another client, each timed.
 * Returns the slowest, in ms. */
static uint64_t serve_during(struct client *pub, struct client *worker, struct client *dead, size_t first,
		size_t chains, uint64_t *total_ms)
{
	uint64_t slowest = 0, sum = 0;
	for(size_t n = first; n < first + chains; n++){
		uint64_t ms = one_chain(pub, worker, dead, "jobs", "jobs", "dlq/jobs", n, NULL);
		sum += ms;
		if(ms > slowest){
			slowest = ms;
		}
	}
	*total_ms = sum;
	return slowest;
}

START_TEST(test_nack_flood)
{
	struct broker *b = broker_new(__func__);
	broker_plugin(b);
	broker_conf(b, "plugin_opt_policy jobs max_attempts=2 dead_letter=dlq/jobs");
	broker_conf(b, "plugin_opt_sys_interval 0s");
	broker_conf(b, "sys_interval 1");
	broker_start(b);
	struct client *worker = client_new(b, "worker", MQTT_PROTOCOL_V5);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *dead = client_new(b, "dead", MQTT_PROTOCOL_V5);
	struct client *ops = client_new(b, "ops", MQTT_PROTOCOL_V5);
	client_subscribe(ops, BROKER_DROPPED_TOPIC, 0);
	client_subscribe(worker, "jobs", 1);
	client_subscribe(dead, "dlq/#", 1);
	uint64_t quiet_ms;
	serve_during(pub, worker, dead, 0, 3, &quiet_ms);
	long rss_before = broker_rss_kib(b);

	/* 10,000 compact NACKs at QoS 0, queued at once: the broker reads them
	 * as fast as it can, and the plugin refuses each with a reply. The
	 * broker drops replies beyond the flooder's max_queued_messages (1000)
	 * and counts them: every NACK is answered or counted twice over. */
	struct flood *f = flood_new(b, "flooder");
	size_t unknown = flood_count(f, "unknown or expired dlq-id");
	uint64_t t0 = it_now_ms();
	for(unsigned i = 0; i < FLOOD_N; i++){
		char id[DLQ_ID_LEN + 1];
		unknown_id(i, id);
		flood_publish(f, DLQ_NACK_TOPIC, id, DLQ_ID_LEN, 0);
	}
	uint64_t busy_ms;
	uint64_t slowest = serve_during(pub, worker, dead, 3, 5, &busy_ms);
	flood_drain(f, 60000);
	uint64_t handled_ms = it_now_ms() - t0;
	/* Replies are queued for the flooder as they are made: wait until they
	 * stop coming. */
	size_t got;
	do{
		got = flood_received(f);
	}while(flood_wait(f, got + 1, 1000));
	long rss_after = broker_rss_kib(b);
	ck_assert_uint_le(got, FLOOD_N);
	client_expect_dropped(ops, FLOOD_N - got);

	ck_assert_msg(flood_connected(f) && flood_disconnects(f) == 0, "the flooder was disconnected");
	ck_assert_msg(flood_hits(f, unknown) == got, "%zu of %zu replies were not \"unknown\" refusals",
			got - flood_hits(f, unknown), got);
	cJSON *data = status(ops);
	const cJSON *t = totals(data);
	ck_assert_msg(num(t, "unknownIds") == FLOOD_N && num(t, "nacksRefused") == FLOOD_N,
			"unknownIds %g nacksRefused %g, expected %d each", num(t, "unknownIds"), num(t, "nacksRefused"), FLOOD_N);
	ck_assert_msg(num(t, "nacks") == 2 * 8 && num(t, "deadLetters") == 8, "the other client's chains: nacks %g deadLetters %g",
			num(t, "nacks"), num(t, "deadLetters"));
	/* The refused NACKs left nothing behind: 8 chains, 2 records each. */
	ck_assert_msg(num(t, "records") == 16 && num(t, "pending") == 0 && num(t, "delayed") == 0 && num(t, "owedBytes") == 0,
			"records %g pending %g delayed %g owedBytes %g", num(t, "records"), num(t, "pending"),
			num(t, "delayed"), num(t, "owedBytes"));
	cJSON_Delete(data);
	fprintf(stderr, "limits: 10000 compact NACKs of unknown ids (QoS 0) handled in %llu ms; %zu replies reached the "
			"flooder, the broker dropped the rest (max_queued_messages); all %d counted in unknownIds; "
			"5 chains of another client meanwhile took %llu ms (slowest %llu ms; 3 chains before: %llu ms); "
			"broker RSS %ld -> %ld KiB\n",
			(unsigned long long)handled_ms, got, FLOOD_N, (unsigned long long)busy_ms,
			(unsigned long long)slowest, (unsigned long long)quiet_ms, rss_before, rss_after);
	clients_settle(worker, pub, dead);
	client_expect_exactly(dead, NULL, 8);
}
END_TEST

START_TEST(test_control_flood)
{
	struct broker *b = dlq_broker("policy jobs max_attempts=2 dead_letter=dlq/jobs",
			"policy bulk max_attempts=1 dead_letter=dlq/bulk", "sys_interval 0s");
	struct client *worker = client_new(b, "worker", MQTT_PROTOCOL_V5);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *dead = client_new(b, "dead", MQTT_PROTOCOL_V5);
	struct client *ops = client_new(b, "ops", MQTT_PROTOCOL_V5);
	client_subscribe(worker, "jobs", 1);
	client_subscribe(dead, "dlq/#", 1);
	uint64_t quiet_ms;
	serve_during(pub, worker, dead, 0, 3, &quiet_ms);

	/* A ledger that is not empty: getStatus walks it for its gauges. */
	enum { BULK = 20000 };
	struct flood *bulk = flood_new(b, "bulk");
	static char body[100];
	memset(body, 'b', sizeof(body));
	for(unsigned i = 0; i < BULK; i++){
		flood_publish(bulk, "bulk", body, (int)sizeof(body), 0);
	}
	flood_drain(bulk, 60000);
	flood_free(bulk);
	uint64_t t1 = it_now_ms();
	cJSON *data = status(ops);
	uint64_t one_status_ms = it_now_ms() - t1;
	ck_assert_int_eq(num(totals(data), "records"), BULK + 6);
	cJSON_Delete(data);
	long rss_before = broker_rss_kib(b);

	/* 10,000 commands, one per message, at QoS 1 (as fast as the broker's
	 * receive maximum lets them in): status and policy listings, unknown
	 * commands and NACKs of unknown ids, each with its own correlation. */
	struct flood *f = flood_new(b, "controller");
	size_t errors = flood_count(f, "\"error\"");
	size_t statuses = flood_count(f, "\"totals\"");
	uint64_t t0 = it_now_ms();
	for(unsigned i = 0; i < FLOOD_N; i++){
		char payload[256], id[DLQ_ID_LEN + 1];
		unknown_id(i, id);
		static const char *const cmds[] = {
			"{\"command\":\"" DLQ_COMMAND_GET_STATUS "\",\"correlationData\":\"f-%u\"}",
			"{\"command\":\"" DLQ_COMMAND_LIST_POLICIES "\",\"correlationData\":\"f-%u\"}",
			"{\"command\":\"noSuchCommand\",\"correlationData\":\"f-%u\"}",
			"{\"command\":\"" DLQ_COMMAND_NACK "\",\"id\":\"%s\",\"correlationData\":\"f-%u\"}",
		};
		char cmd[160];
		if(i % 4 == 3){
			snprintf(cmd, sizeof(cmd), cmds[3], id, i);
		}else{
			snprintf(cmd, sizeof(cmd), cmds[i % 4], i);
		}
		snprintf(payload, sizeof(payload), "{\"commands\":[%s]}", cmd);
		flood_publish(f, DLQ_CONTROL_TOPIC, payload, (int)strlen(payload), 1);
	}
	uint64_t busy_ms;
	uint64_t slowest = serve_during(pub, worker, dead, 3, 5, &busy_ms);
	flood_drain(f, 120000);
	uint64_t handled_ms = it_now_ms() - t0;
	bool all = flood_wait(f, FLOOD_N, HARNESS_WAIT_MS);
	long rss_after = broker_rss_kib(b);

	ck_assert_msg(flood_connected(f) && flood_disconnects(f) == 0, "the flooder was disconnected");
	ck_assert_msg(all && flood_seen(f) == FLOOD_N, "%zu replies for %zu distinct requests of %d",
			flood_received(f), flood_seen(f), FLOOD_N);
	ck_assert_uint_eq(flood_hits(f, errors), FLOOD_N / 2);
	ck_assert_uint_eq(flood_hits(f, statuses), FLOOD_N / 4);
	data = status(ops);
	const cJSON *t = totals(data);
	ck_assert_msg(num(t, "unknownIds") == FLOOD_N / 4 && num(t, "nacksRefused") == FLOOD_N / 4,
			"unknownIds %g nacksRefused %g", num(t, "unknownIds"), num(t, "nacksRefused"));
	ck_assert_msg(num(t, "records") == BULK + 16 && num(t, "pending") == 0 && num(t, "owedBytes") == 0,
			"records %g pending %g owedBytes %g", num(t, "records"), num(t, "pending"), num(t, "owedBytes"));
	cJSON_Delete(data);
	fprintf(stderr, "limits: with %d records in the ledger, one getStatus round trip took %llu ms; "
			"10000 control commands (2500 of them getStatus; QoS 1, one per message) were answered in %llu ms, every one; "
			"5 chains of another client meanwhile took %llu ms (slowest %llu ms; 3 chains before: %llu ms); "
			"broker RSS %ld -> %ld KiB\n",
			BULK + 6, (unsigned long long)one_status_ms, (unsigned long long)handled_ms, (unsigned long long)busy_ms,
			(unsigned long long)slowest, (unsigned long long)quiet_ms, rss_before, rss_after);
	clients_settle(worker, pub, dead);
	client_expect_exactly(dead, NULL, 8);
}
END_TEST

/* A JSON control message of 16 MiB (the broker takes up to 256 MiB by
 * default) is refused with an error reply before it is parsed: parsed, a
 * document of small values costs some 40 times its size (measured: a
 * 16 MiB one took the broker to 680 MB). */
START_TEST(test_oversized_control_document)
{
	struct broker *b = dlq_broker("policy jobs max_attempts=2 dead_letter=dlq/jobs", "sys_interval 0s");
	struct client *ops = client_new(b, "ops", MQTT_PROTOCOL_V5);
	enum { SIZE = 16 * 1024 * 1024 };
	char *doc_text = malloc(SIZE + 1);
	ck_assert_ptr_nonnull(doc_text);
	size_t n = (size_t)snprintf(doc_text, SIZE + 1, "{\"commands\":[0");
	while(n + 3 < SIZE){
		doc_text[n++] = ',';
		doc_text[n++] = '0';
	}
	doc_text[n++] = ']';
	doc_text[n++] = '}';
	doc_text[n] = '\0';
	long before = broker_mem_kib(b, "VmHWM");
	client_publish(ops, DLQ_CONTROL_TOPIC, doc_text, (int)n, 1, NULL);
	free(doc_text);
	cJSON *doc = expect_reply(client_expect(ops, DLQ_RESPONSE_TOPIC, 1), 1);
	const char *err = json_str(reply_entry(doc, 0), "error");
	ck_assert_msg(err && strstr(err, "payload larger than 1048576 bytes"), "error: %s", err ? err : "none");
	cJSON_Delete(doc);
	long after = broker_mem_kib(b, "VmHWM");
	fprintf(stderr, "limits: a %d-byte JSON control message was refused; the broker's peak memory went from %ld to %ld KiB\n",
			SIZE, before, after);
	/* The broker itself holds the message, once or twice; the plugin adds
	 * nothing of that order. */
	ck_assert_msg(after - before < 4 * SIZE / 1024, "peak memory grew by %ld KiB", after - before);
	ck_assert(client_connected(ops));
}
END_TEST

/* ---- ids a client never received ---- */

/* A dlq-id is a bearer handle: the plugin cannot tell whether the client
 * that presents it received the message (Mosquitto 2.0 tells a plugin
 * nothing per delivery), so a client given another's id gets the retry
 * copy, sent to it alone, and the subscriber's own NACK still works. An id
 * never issued is refused. */
START_TEST(test_nack_of_id_never_received)
{
	struct broker *b = dlq_broker("policy jobs max_attempts=3 dead_letter=dlq/jobs", "sys_interval 0s");
	struct client *worker = client_new(b, "worker", MQTT_PROTOCOL_V5);
	struct client *other = client_new(b, "other", MQTT_PROTOCOL_V5);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	client_subscribe(worker, "jobs", 1);
	client_publish_str(pub, "jobs", "j1", 1);
	const char *id = expect_original(client_expect(worker, "jobs", 1));

	char never[DLQ_ID_LEN + 1];
	unknown_id(1, never);
	client_nack(other, never, NULL);
	cJSON *doc = expect_reply(client_expect(other, DLQ_RESPONSE_TOPIC, 1), 1);
	expect_reply_error(reply_entry(doc, 0), "unknown or expired dlq-id");
	cJSON_Delete(doc);

	client_nack(other, id, NULL);
	const struct it_msg *copy = client_expect(other, "jobs", 1);
	ck_assert_str_eq(copy->payload, "j1");
	expect_retry_copy(copy, "jobs", id, 1);
	client_nack(worker, id, NULL);
	expect_retry_copy(client_expect(worker, "jobs", 2), "jobs", id, 1);
	clients_settle(worker, other, pub);
	client_expect_exactly(worker, NULL, 2);
	client_expect_exactly(other, "jobs", 1);
}
END_TEST

/* The same with an acl_file that does not let the other client read the
 * topic. The broker makes no read check for a publish a plugin addresses to
 * one client, so the plugin asks the broker's access check itself before it
 * takes a NACK: the other client is refused and receives nothing, and the
 * worker's own NACK still works. */
START_TEST(test_nack_of_id_never_received_respects_read_acl)
{
	struct broker *b = broker_new(__func__);
	broker_plugin(b);
	broker_conf(b, "plugin_opt_policy jobs/# max_attempts=3 dead_letter=dlq/jobs");
	broker_conf(b, "plugin_opt_sys_interval 0s");
	const char *acl = broker_file(b, "acl",
			"pattern readwrite harness/sync/%c\n"
			"pattern read jobs/%c\n"
			"topic write jobs/#\n"
			"topic write $CONTROL/dlq/v1/#\n"
			"topic read $CONTROL/dlq/v1/response\n");
	broker_conf(b, "acl_file %s", acl);
	broker_start(b);
	struct client *worker = client_new(b, "worker", MQTT_PROTOCOL_V5);
	struct client *other = client_new(b, "other", MQTT_PROTOCOL_V5);
	char topic[192];
	snprintf(topic, sizeof(topic), "jobs/%s", client_id(worker));
	client_subscribe(worker, topic, 1);
	client_subscribe(other, "jobs/#", 1); /* granted, but the ACL keeps the worker's topic from it */
	client_publish_str(other, topic, "secret", 1);
	const char *id = expect_original(client_expect(worker, topic, 1));
	clients_settle(worker, other);
	client_expect_exactly(other, "jobs/#", 0);

	client_nack(other, id, NULL);
	cJSON *doc = expect_reply(client_expect(other, DLQ_RESPONSE_TOPIC, 1), 1);
	expect_reply_error(reply_entry(doc, 0), "refused: this client may not read the message");
	cJSON_Delete(doc);
	clients_settle(other, worker);
	client_expect_exactly(other, "jobs/#", 0);

	client_nack(worker, id, NULL);
	expect_retry_copy(client_expect(worker, topic, 2), topic, id, 1);
	clients_settle(worker, other);
	client_expect_exactly(other, "jobs/#", 0);
	client_expect_exactly(worker, NULL, 2);
}
END_TEST

static Suite *limits_suite(void)
{
	Suite *s = suite_create("limits");
	TCase *tc = harness_tcase("limits");
	/* Floods and 10,000-policy brokers take longer than the harness's
	 * default, the more so under a sanitizer. */
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_ten_thousand_filters);
	tcase_add_test(tc, test_longest_topics);
	tcase_add_test(tc, test_oversized_payload_is_counted);
	tcase_add_test(tc, test_nack_flood);
	tcase_add_test(tc, test_control_flood);
	tcase_add_test(tc, test_oversized_control_document);
	tcase_add_test(tc, test_nack_of_id_never_received);
	tcase_add_test(tc, test_nack_of_id_never_received_respects_read_acl);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(limits_suite());
	harness_init(sr);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	failed += harness_finish();
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
