/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Abuse, against the real broker: a client flooding 10,000 NACKs of
 * unknown ids and one flooding 10,000 control commands while other clients
 * are served, a 16 MiB control message refused unparsed, and NACKs of ids
 * the NACKing client never received (also when the ACL keeps the topic
 * from it). test_limits.c has the limits of size and count.
 *
 * Figures go to stderr, as in test_limits.c, as lines starting "limits: ",
 * printed and never asserted. The brokers log with log_type all, as every
 * harness broker does, which makes a flood slower than it would be in
 * production.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "flood.h"
#include "harness.h"
#include "limits_common.h"

#define FLOOD_N 10000

/* ---- floods ---- */

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

/* The broker's latest count of dropped messages as c, subscribed to
 * BROKER_DROPPED_TOPIC, last heard it (the broker publishes it once a
 * sys_interval, when it changed); 0 before it said any. */
static size_t broker_dropped(struct client *c)
{
	size_t n = client_count(c, BROKER_DROPPED_TOPIC);
	const struct it_msg *m = n > 0 ? client_msg(c, BROKER_DROPPED_TOPIC, n - 1) : NULL;
	return m ? strtoul(m->payload, NULL, 10) : 0;
}

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
	struct client *worker = client_subscribed(b, "worker", "jobs");
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *dead = client_subscribed(b, "dead", "dlq/#");
	struct client *ops = client_new(b, "ops", MQTT_PROTOCOL_V5);
	client_subscribe(ops, BROKER_DROPPED_TOPIC, 0);
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
	flood_drain(f, harness_deadline_ms(60000));
	uint64_t handled_ms = it_now_ms() - t0;
	/* Every NACK's reply either reaches the flooder or is dropped and
	 * counted by the broker: wait until the two add up to all of them. A
	 * pause in the replies (waiting for them "to stop coming") is no sign
	 * of the end on a busy machine, where the broker may be off the CPU for
	 * a second in the middle of the flood. */
	size_t got = flood_received(f), dropped = broker_dropped(ops);
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	while(got + dropped < FLOOD_N && it_now_ms() < deadline){
		flood_wait(f, got + 1, 100);
		got = flood_received(f);
		dropped = broker_dropped(ops);
	}
	long rss_after = broker_rss_kib(b);
	ck_assert_msg(got + dropped == FLOOD_N, "%zu replies reached the flooder and the broker dropped %zu: %zu of %d NACKs "
			"unaccounted for", got, dropped, got + dropped < FLOOD_N ? FLOOD_N - got - dropped : 0, FLOOD_N);
	client_expect_dropped(ops, FLOOD_N - got);

	ck_assert_msg(flood_connected(f) && flood_disconnects(f) == 0, "the flooder was disconnected");
	ck_assert_msg(flood_hits(f, unknown) == got, "%zu of %zu replies were not \"unknown\" refusals",
			got - flood_hits(f, unknown), got);
	cJSON *data = status(ops);
	const cJSON *t = totals(data);
	ck_assert_msg(json_num(t, "unknownIds") == FLOOD_N && json_num(t, "nacksRefused") == FLOOD_N,
			"unknownIds %g nacksRefused %g, expected %d each", json_num(t, "unknownIds"), json_num(t, "nacksRefused"), FLOOD_N);
	ck_assert_msg(json_num(t, "nacks") == 2 * 8 && json_num(t, "deadLetters") == 8, "the other client's chains: nacks %g deadLetters %g",
			json_num(t, "nacks"), json_num(t, "deadLetters"));
	/* The refused NACKs left nothing behind: 8 chains, 2 records each. */
	ck_assert_msg(json_num(t, "records") == 16 && json_num(t, "pending") == 0 && json_num(t, "delayed") == 0 && json_num(t, "owedBytes") == 0,
			"records %g pending %g delayed %g owedBytes %g", json_num(t, "records"), json_num(t, "pending"),
			json_num(t, "delayed"), json_num(t, "owedBytes"));
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
	struct client *worker = client_subscribed(b, "worker", "jobs");
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *dead = client_subscribed(b, "dead", "dlq/#");
	struct client *ops = client_new(b, "ops", MQTT_PROTOCOL_V5);
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
	flood_drain(bulk, harness_deadline_ms(60000));
	flood_free(bulk);
	uint64_t t1 = it_now_ms();
	cJSON *data = status(ops);
	uint64_t one_status_ms = it_now_ms() - t1;
	ck_assert_int_eq(json_num(totals(data), "records"), BULK + 6);
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
	flood_drain(f, harness_deadline_ms(120000));
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
	ck_assert_msg(json_num(t, "unknownIds") == FLOOD_N / 4 && json_num(t, "nacksRefused") == FLOOD_N / 4,
			"unknownIds %g nacksRefused %g", json_num(t, "unknownIds"), json_num(t, "nacksRefused"));
	ck_assert_msg(json_num(t, "records") == BULK + 16 && json_num(t, "pending") == 0 && json_num(t, "owedBytes") == 0,
			"records %g pending %g owedBytes %g", json_num(t, "records"), json_num(t, "pending"), json_num(t, "owedBytes"));
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

/* A JSON control message of 16 MiB is refused with an error reply before it
 * is parsed: parsed, a document of small values costs some 40 times its size
 * (measured: a 16 MiB one took the broker to 680 MB). The limit under test
 * is the plugin's own, so the broker must let the message through: 2.0.x
 * takes packets up to MQTT's 256 MiB by default, but 2.1 refuses any larger
 * than 2,000,000 bytes (its default max_packet_size), so the broker is given
 * room for it explicitly. */
START_TEST(test_oversized_control_document)
{
	struct broker *b = broker_new(__func__);
	broker_plugin(b);
	broker_conf(b, "plugin_opt_policy jobs max_attempts=2 dead_letter=dlq/jobs");
	broker_conf(b, "plugin_opt_sys_interval 0s");
	broker_conf(b, "max_packet_size %d", 32 * 1024 * 1024);
	broker_start(b);
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
	struct client *worker = client_subscribed(b, "worker", "jobs");
	struct client *other = client_new(b, "other", MQTT_PROTOCOL_V5);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
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

	/* Mosquitto 2.0.21 does not export mosquitto_acl_check: the plugin
	 * says so at startup, and there the id is a bearer handle. */
	char *log = broker_log(b);
	bool no_check = strstr(log, "does not export mosquitto_acl_check") != NULL;
	free(log);
	if(no_check){
		fprintf(stderr, "limits: this broker has no mosquitto_acl_check: the NACK is not checked\n");
		client_nack(other, id, NULL);
		expect_retry_copy(client_expect(other, topic, 1), topic, id, 1);
		return;
	}
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

int main(void)
{
	Suite *s = suite_create("limits_abuse");
	TCase *tc = harness_tcase("limits_abuse");
	/* Floods and a 16 MiB message take longer than the harness's default,
	 * the more so under a sanitizer. */
	tcase_set_timeout(tc, 480);
	check_add(s, tc, CHECK_TESTS(test_nack_flood, test_control_flood, test_oversized_control_document,
			test_nack_of_id_never_received, test_nack_of_id_never_received_respects_read_acl));
	return harness_run(s);
}
