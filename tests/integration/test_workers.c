/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The example workers, as a user runs them: examples/numbers_worker.c (C,
 * libmosquitto), examples/python/numbers_worker.py (paho-mqtt, run by
 * Debian's /usr/bin/python3) and examples/node/numbers_worker.js (MQTT.js
 * from examples/node/node_modules), each started as a process against the
 * real broker with the plugin on a loopback TCP port. Each must do the
 * odd/even flow exactly: every even number processed once, every odd one
 * failed and NACKed at attempts 1, 2 and 3 and then parked in the dead-letter
 * topic with its payload, the publisher's properties and the worker's
 * reason, and nothing else; also when the publisher set a dlq-id of its own
 * (the worker must NACK the plugin's, the last). On an untracked topic a
 * worker must say that a message has no dlq-id, and report the plugin's
 * reply to a NACK of a made-up id. SIGTERM ends a worker with status 0.
 * The JavaScript worker also reports a NACK the broker's ACL refuses.
 * The pool workers (examples/python/pool_worker.py, examples/node/
 * pool_worker.js) run with --ack under a policy with an ack_timeout: every
 * job they processed is ACKed in time and delivered once, the poison one
 * NACKed into its dead letter, and no deadline runs out.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_suite.h"
#include "harness.h"
#include "proc.h"
#include "test_util.h"

#define POLICY "numbers max_attempts=3 dead_letter=dead/numbers"
#define REASON "odd numbers are not accepted"
#define FAKE_ID "AAAAAAAAAAAAAAAA"
#define POOL_SUBSCRIPTION "$share/workers/jobs/#"
#define GOOD_JOBS 4

enum lang { LANG_C, LANG_PYTHON, LANG_NODE, LANG_COUNT };

static const char *const lang_names[LANG_COUNT] = { "c", "python", "node" };

/* A broker with the plugin, the numbers policy and a loopback TCP listener
 * (the Python and JavaScript libraries speak TCP); its port in *port. */
static struct broker *tcp_broker(int *port)
{
	struct broker *b = broker_new(__func__);
	*port = it_free_port();
	broker_conf(b, "listener %d 127.0.0.1", *port);
	broker_plugin(b);
	broker_conf(b, "plugin_opt_policy " POLICY);
	broker_start(b);
	return b;
}

/* Puts at argv[n] on the options every example worker connects with:
 * 127.0.0.1, port_s and client id id; returns the new n. */
static size_t connect_args(const char **argv, size_t n, const char *port_s, const char *id)
{
	argv[n++] = "--host";
	argv[n++] = "127.0.0.1";
	argv[n++] = "--port";
	argv[n++] = port_s;
	argv[n++] = "--id";
	argv[n++] = id;
	return n;
}

/* Starts the worker of lang as the documented command line does, with
 * client id id on topic, and waits until it says it subscribed. */
static struct proc *start_worker(enum lang lang, int port, const char *id, const char *topic)
{
	char port_s[16];
	char script[4096];
	const char *argv[16];
	size_t n = 0;

	snprintf(port_s, sizeof(port_s), "%d", port);
	switch(lang){
		case LANG_C:
			argv[n++] = proc_env_or_fail("DLQ_C_WORKER");
			break;
		case LANG_PYTHON:
			proc_example_command("python/numbers_worker.py", script, sizeof(script), argv, &n);
			break;
		case LANG_NODE:
			proc_example_command("node/numbers_worker.js", script, sizeof(script), argv, &n);
			break;
		default:
			ck_abort_msg("no language %d", (int)lang);
	}
	n = connect_args(argv, n, port_s, id);
	argv[n++] = "--topic";
	argv[n++] = topic;
	argv[n] = NULL;

	struct proc *p = proc_spawn(argv);
	char ready[256];
	snprintf(ready, sizeof(ready), "subscribed to %s\n", topic);
	if(!proc_wait_error(p, ready, 1, HARNESS_WAIT_MS)){
		proc_dump(p);
		ck_abort_msg("the %s worker did not subscribe to %s", lang_names[lang], topic);
	}
	return p;
}

/* How many lines of text are exactly line. */
static size_t lines_equal(const char *text, const char *line)
{
	size_t n = 0;
	size_t len = strlen(line);
	for(const char *s = text; *s; ){
		const char *eol = strchr(s, '\n');
		size_t l = eol ? (size_t)(eol - s) : strlen(s);
		if(l == len && memcmp(s, line, len) == 0){
			n++;
		}
		s += l + (eol ? 1 : 0);
	}
	return n;
}

/* The value of the last user property called name, or NULL. */
static const char *last_user(const struct it_msg *m, const char *name)
{
	const char *v = NULL;
	for(size_t i = 0; i < m->nusers; i++){
		if(strcmp(m->users[i].name, name) == 0){
			v = m->users[i].value;
		}
	}
	return v;
}

/* Stops the worker with SIGTERM: it must exit with status 0. */
static void stop_worker(struct proc *p)
{
	proc_kill(p, SIGTERM);
	int st = proc_wait(p, HARNESS_WAIT_MS);
	if(st != 0){
		proc_dump(p);
	}
	ck_assert_msg(st == 0, "the worker exited with status %d on SIGTERM", st);
}

/* The odd/even flow with the worker of lang: 1..6 to numbers, each with a
 * user property sent-by=test and, when spoof, a dlq-id of the publisher's
 * before the plugin's. */
static void odd_even_flow(enum lang lang, bool spoof)
{
	int port;
	struct broker *b = tcp_broker(&port);
	struct client *watcher = client_subscribed(b, "watcher", "numbers");
	client_subscribe(watcher, "dead/numbers", 1);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	char id[64];
	snprintf(id, sizeof(id), "worker-%s-%d", lang_names[lang], (int)getpid());
	struct proc *w = start_worker(lang, port, id, "numbers");

	mosquitto_property *props = NULL;
	if(spoof){
		ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, DLQ_PROP_ID, FAKE_ID), 0);
	}
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, "sent-by", "test"), 0);
	for(int i = 1; i <= 6; i++){
		char p[8];
		snprintf(p, sizeof(p), "%d", i);
		ck_assert_int_eq(client_publish(pub, "numbers", p, (int)strlen(p), 1, props), 0);
	}
	mosquitto_property_free_all(&props);

	client_expect(watcher, "dead/numbers", 3);
	/* 3 processed and 9 failed lines, then nothing late. */
	if(!proc_wait_output(w, "\n", 12, HARNESS_WAIT_MS)){
		proc_dump(w);
		ck_abort_msg("the %s worker did not print 12 lines", lang_names[lang]);
	}
	clients_settle(pub, watcher);
	proc_pump(w);

	const char *out = proc_out(w);
	bool ok = it_count(out, "\n") == 12;
	for(int i = 1; i <= 6 && ok; i++){
		char line[64];
		if(i % 2 == 0){
			snprintf(line, sizeof(line), "processed %d", i);
			ok = lines_equal(out, line) == 1;
			continue;
		}
		for(int k = 1; k <= 3 && ok; k++){
			snprintf(line, sizeof(line), "failed %d (attempt %d)", i, k);
			ok = lines_equal(out, line) == 1;
		}
	}
	/* Readiness is all a worker may say on stderr in this flow. */
	ok = ok && it_count(proc_err(w), "\n") == 1 && it_lines_with(proc_err(w), "subscribed to numbers", NULL, 0) == 1;
	if(!ok){
		proc_dump(w);
		client_dump(watcher, NULL);
		ck_abort_msg("the %s worker did not do the odd/even flow exactly", lang_names[lang]);
	}

	/* The broker sent the six originals and the three dead letters, nothing
	 * more: retry copies went to the worker alone. */
	client_expect_exactly(watcher, "numbers", 6);
	client_expect_exactly(watcher, "dead/numbers", 3);
	for(int i = 1; i <= 5; i += 2){
		char p[8];
		snprintf(p, sizeof(p), "%d", i);
		const struct it_msg *orig = client_find_payload(watcher, "numbers", p, 0);
		ck_assert_msg(orig != NULL, "original %d not seen", i);
		ck_assert_uint_eq(msg_user_count(orig, DLQ_PROP_ID), spoof ? 2 : 1);
		const char *origin = last_user(orig, DLQ_PROP_ID);
		ck_assert_msg(it_is_dlq_id(origin) && strcmp(origin, FAKE_ID) != 0, "bad stamp %s on %d", origin, i);

		const struct it_msg *dl = client_find_payload(watcher, "dead/numbers", p, 0);
		ck_assert_msg(dl != NULL, "no dead letter of %d", i);
		ck_assert_str_eq(dl->topic, "dead/numbers");
		ck_assert_int_eq(dl->payloadlen, 1);
		expect_dead_letter(dl, "numbers", origin, 3, id, "numbers", REASON);
		ck_assert_pstr_eq(msg_user(dl, "sent-by"), "test");
	}
	stop_worker(w);
	broker_shutdown(b);
}

START_TEST(test_flow)
{
	odd_even_flow((enum lang)_i, false);
}
END_TEST

START_TEST(test_flow_publisher_dlq_id)
{
	odd_even_flow((enum lang)_i, true);
}
END_TEST

/* On a topic no policy covers: a number with a made-up dlq-id is NACKed
 * and the plugin's refusal reported; one without any is reported as
 * untracked; a payload that is not a number is reported and skipped. The
 * worker goes on. */
START_TEST(test_untracked)
{
	enum lang lang = (enum lang)_i;
	int port;
	struct broker *b = tcp_broker(&port);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct proc *w = start_worker(lang, port, "worker-untracked", "plain");

	mosquitto_property *props = NULL;
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, DLQ_PROP_ID, FAKE_ID), 0);
	client_publish(pub, "plain", "3", 1, 1, props);
	mosquitto_property_free_all(&props);
	client_publish_str(pub, "plain", "5", 1);
	client_publish_str(pub, "plain", "five", 1);

	static const char *const want[] = {
		"NACK of " FAKE_ID " refused: unknown or expired dlq-id",
		"carries no dlq-id",
		"ignored a message on plain that is not a number",
	};
	for(size_t i = 0; i < ARRAY_LEN(want); i++){
		if(!proc_wait_error(w, want[i], 1, HARNESS_WAIT_MS)){
			proc_dump(w);
			ck_abort_msg("the %s worker did not say \"%s\"", lang_names[lang], want[i]);
		}
	}
	clients_settle(pub);
	proc_pump(w);
	ck_assert_uint_eq(lines_equal(proc_out(w), "failed 3 (attempt 1)"), 1);
	ck_assert_uint_eq(lines_equal(proc_out(w), "failed 5 (attempt 1)"), 1);
	ck_assert_uint_eq(it_count(proc_out(w), "\n"), 2);
	/* The 5 line names the number and the topic. */
	ck_assert_uint_eq(it_lines_with(proc_err(w), "carries no dlq-id", NULL, 0), 1);
	char line[512];
	it_lines_with(proc_err(w), "carries no dlq-id", line, sizeof(line));
	ck_assert_msg(strstr(line, "5") && strstr(line, "plain"), "unclear: %s", line);
	stop_worker(w);
	broker_shutdown(b);
}
END_TEST

/* The broker's ACL refuses the NACK itself (PUBACK 135): MQTT.js hands the
 * reason code to the helper's nack promise and the worker says so. (paho
 * 1.6 and the C worker do not see it: docs/nack-from-your-language.md.) */
START_TEST(test_node_nack_denied)
{
	int port = it_free_port();
	struct broker *b = broker_new(__func__);
	/* # does not match $CONTROL/...: only the NACK is refused. */
	broker_conf(b, "acl_file %s", broker_file(b, "acl", "topic readwrite #\n"));
	broker_conf(b, "listener %d 127.0.0.1", port);
	broker_plugin(b);
	broker_conf(b, "plugin_opt_policy " POLICY);
	broker_start(b);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct proc *w = start_worker(LANG_NODE, port, "worker-denied", "numbers");

	client_publish_str(pub, "numbers", "1", 1);
	if(!proc_wait_error(w, "NACK of 1 refused by the broker", 1, HARNESS_WAIT_MS)){
		proc_dump(w);
		ck_abort_msg("the node worker did not report the refused NACK");
	}
	clients_settle(pub);
	proc_pump(w);
	ck_assert_str_eq(proc_out(w), "failed 1 (attempt 1)\n");
	stop_worker(w);
	broker_shutdown(b);
}
END_TEST

/* The pool worker of lang (python or node) started with --ack, as its
 * usage line says, with client id id; waits until it subscribed. */
static struct proc *start_pool_worker(enum lang lang, int port, const char *id)
{
	char port_s[16];
	char script[4096];
	const char *argv[16];
	size_t n = 0;

	snprintf(port_s, sizeof(port_s), "%d", port);
	proc_example_command(lang == LANG_PYTHON ? "python/pool_worker.py" : "node/pool_worker.js", script,
			sizeof(script), argv, &n);
	n = connect_args(argv, n, port_s, id);
	argv[n++] = "--ack";
	argv[n] = NULL;

	struct proc *p = proc_spawn(argv);
	if(!proc_wait_error(p, "subscribed to " POOL_SUBSCRIPTION "\n", 1, HARNESS_WAIT_MS)){
		proc_dump(p);
		ck_abort_msg("the %s pool worker did not subscribe to %s", lang_names[lang], POOL_SUBSCRIPTION);
	}
	return p;
}

/* The pool worker of lang with --ack, under a policy with an ack_timeout
 * (3 s, scaled as every deadline: harness.h) and the worker-pool recipe's
 * broker lines (docs/worker-pool.md): good-1 ... good-4 and poison-5. Each good job
 * must be processed, ACKed and delivered once, the poison job NACKed at
 * each of its 3 deliveries (2 retry copies, then its dead letter), and,
 * once the deadline has passed since, none of the deliveries may have run
 * out: a worker that only processed (the PUBACK is no ACK) fails here. */
START_TEST(test_pool_worker_acks)
{
	enum lang lang = (enum lang)_i;
	int ack_ms = harness_deadline_ms(3000);
	int port = it_free_port();
	struct broker *b = broker_new(__func__);
	if(broker_version() < 2000013) broker_conf(b, "max_inflight_messages 1"); /* 2.0.13 fixed Receive Maximum */
	broker_conf(b, "listener %d 127.0.0.1", port);
	broker_plugin(b);
	broker_conf(b, "plugin_opt_policy jobs/# max_attempts=3 dead_letter=dead/jobs ack_timeout=%dms", ack_ms);
	/* 2.0 shows a delivery only through redelivery tracking's access check,
	 * which ack_timeout needs there. */
	broker_conf(b, "plugin_opt_redelivery_tracking allow");
	if(!BROKER_IS_21()) broker_conf(b, "plugin_opt_v5_sessions_persist true");
	broker_start(b);
	struct client *watcher = client_subscribed(b, "watcher", "dead/jobs");
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	char id[64];
	snprintf(id, sizeof(id), "pool-%s-%d", lang_names[lang], (int)getpid());
	struct proc *w = start_pool_worker(lang, port, id);

	for(int i = 1; i <= GOOD_JOBS; i++){
		char job[16];
		snprintf(job, sizeof(job), "good-%d", i);
		client_publish_str(pub, "jobs/ack", job, 1);
	}
	client_publish_str(pub, "jobs/ack", "poison-5", 1);

	const struct it_msg *dl = client_expect(watcher, "dead/jobs", 1);
	ck_assert_str_eq(dl->payload, "poison-5");
	ck_assert_pstr_eq(msg_user(dl, DLQ_PROP_DEAD_LETTER_REASON), "poison job");
	ck_assert_pstr_eq(msg_user(dl, DLQ_PROP_RETRY_COUNT), "3");
	ck_assert_ptr_null(msg_user(dl, DLQ_PROP_DEAD_LETTER_FINAL));
	if(!proc_wait_output(w, "processed good-", GOOD_JOBS, HARNESS_WAIT_MS)){
		proc_dump(w);
		ck_abort_msg("the %s pool worker did not process the %d good jobs", lang_names[lang], GOOD_JOBS);
	}
	/* The deadline and more since the last delivery: any delivery left
	 * unsettled has run out by now. */
	it_sleep_ms((unsigned)ack_ms + 1000);
	clients_settle(pub, watcher);
	proc_pump(w);

	const char *out = proc_out(w);
	bool ok = it_count(out, "\n") == 3 + 2 * GOOD_JOBS && it_count(out, "received poison-5 ") == 3;
	for(int i = 1; i <= GOOD_JOBS && ok; i++){
		char line[32];
		snprintf(line, sizeof(line), "received good-%d ", i);
		ok = it_count(out, line) == 1;
		snprintf(line, sizeof(line), "processed good-%d", i);
		ok = ok && lines_equal(out, line) == 1;
	}
	/* Connection news and readiness are all it may say: no refused ACK. */
	ok = ok && it_count(proc_err(w), "\n") == 2 && it_lines_with(proc_err(w), "connected (", NULL, 0) == 1;
	if(!ok){
		proc_dump(w);
		ck_abort_msg("the %s pool worker did not process each good job once and the poison job 3 times",
				lang_names[lang]);
	}
	client_expect_exactly(watcher, "dead/jobs", 1);

	cJSON *doc;
	const cJSON *totals = cJSON_GetObjectItemCaseSensitive(status_get(pub, "status/acks", &doc), "totals");
	ck_assert_int_eq((int)json_num(totals, "acks"), GOOD_JOBS);
	ck_assert_int_eq((int)json_num(totals, "ackTimeouts"), 0);
	ck_assert_int_eq((int)json_num(totals, "retryCopies"), 2);
	ck_assert_int_eq((int)json_num(totals, "nacks"), 3);
	ck_assert_int_eq((int)json_num(totals, "deadLetters"), 1);
	ck_assert_int_eq((int)json_num(totals, "awaitingAck"), 0);
	cJSON_Delete(doc);
	stop_worker(w);
	broker_shutdown(b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("workers");
	TCase *tc = harness_tcase("workers");
	check_loops(tc, 0, LANG_COUNT, CHECK_TESTS(test_flow, test_flow_publisher_dlq_id, test_untracked));
	tcase_add_test(tc, test_node_nack_denied);
	tcase_add_loop_test(tc, test_pool_worker_acks, LANG_PYTHON, LANG_COUNT);
	suite_add_tcase(s, tc);
	return harness_run(s);
}
