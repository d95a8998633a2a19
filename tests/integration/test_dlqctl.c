/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The dlqctl tool (DLQCTL), run as a process against the real broker and
 * plugin: status and policies tables and --json, inspect rows, and redrive:
 * republished to the origin topic without the plugin's properties and
 * stamped afresh, --dry-run publishing and acknowledging nothing, --max,
 * --reason-contains and --origin (letters passed over are put back and
 * redriven later), an interrupted redrive (kill -9) losing nothing, a run
 * stopping when what it redrove fails again, no
 * republish into a topic nobody subscribes to, and garbage on the
 * dead-letter topic; and the plugin's dead-letter store: list, show,
 * redrive ID (once only), delete and purge of a letter made before anyone
 * subscribed to its dead-letter topic, and list --cause. Bridged brokers are in
 * test_bridge.c.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "harness.h"
#include "proc.h"
#include "test_util.h"

/* Waits for the k-th (0-based) delivery of payload on topic. */
static const struct it_msg *delivery(struct client *c, const char *topic, const char *payload, size_t k)
{
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	const struct it_msg *m;
	while((m = client_find_payload(c, topic, payload, k)) == NULL){
		if(it_now_ms() > deadline){
			client_dump(c, NULL);
			ck_abort_msg("client %s: delivery %zu of \"%s\" on %s did not come", client_id(c), k + 1, payload, topic);
		}
		client_wait(c, topic, client_count(c, topic) + 1, 50);
	}
	return m;
}

/* Publishes payload to topic (with props), has worker NACK it (with
 * reason) until it is dead-lettered after max_attempts deliveries, and
 * waits for the dead letter at watch. k: how many deliveries of the same
 * payload worker had before. Returns the first dlq-id of the chain. */
static const char *make_dead(struct client *pub, struct client *worker, struct client *watch, const char *topic,
		const char *payload, const mosquitto_property *props, const char *reason, unsigned max_attempts, size_t k)
{
	size_t before = client_count(watch, "dlq/#");
	client_publish(pub, topic, payload, (int)strlen(payload), 1, props);
	const char *first = NULL;
	for(unsigned i = 0; i < max_attempts; i++){
		const struct it_msg *m = delivery(worker, topic, payload, k + i);
		const char *id = dlq_id_of(m);
		if(i == 0){
			first = id;
		}
		client_nack(worker, id, reason);
	}
	client_expect(watch, "dlq/#", before + 1);
	return first;
}

/* How many lines of text start with word followed by a space. */
static size_t rows(const char *text, const char *word)
{
	size_t n = 0;
	size_t len = strlen(word);
	for(const char *p = text; p && *p; ){
		if(!strncmp(p, word, len) && p[len] == ' '){
			n++;
		}
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	return n;
}

/* Field n (0-based, space-separated) of line, in a static buffer (one at a
 * time); "" when it has fewer. */
static const char *field(const char *line, size_t n)
{
	static char out[256];
	const char *p = line;
	for(size_t i = 0; ; i++){
		p += strspn(p, " ");
		size_t len = strcspn(p, " \n");
		if(len == 0) break;
		if(i == n){
			snprintf(out, sizeof(out), "%.*s", (int)len, p);
			return out;
		}
		p += len;
	}
	return "";
}

/* Fails the test unless the first line of p's output that starts with
 * first begins with the space-separated fields want (NULL-terminated). */
static void expect_row(struct proc *p, const char *first, const char *const *want)
{
	char key[128];
	snprintf(key, sizeof(key), "%s ", first);
	const char *out = proc_out(p);
	const char *at = strstr(out, key);
	while(at && at != out && at[-1] != '\n'){
		at = strstr(at + 1, key);
	}
	if(!at){
		proc_dump(p);
		ck_abort_msg("no row starting with \"%s\"", first);
	}
	char line[1024];
	snprintf(line, sizeof(line), "%.*s", (int)strcspn(at, "\n"), at);
	char *save = NULL;
	char *tok = strtok_r(line, " ", &save);
	for(size_t i = 0; want[i]; i++){
		if(tok == NULL || strcmp(tok, want[i])){
			proc_dump(p);
			ck_abort_msg("row \"%s\": field %zu is \"%s\", expected \"%s\"", first, i, tok ? tok : "(none)", want[i]);
		}
		tok = strtok_r(NULL, " ", &save);
	}
}

START_TEST(test_status_and_policies)
{
	struct broker *b = dlq_broker("policy alpha max_attempts=1 dead_letter=dlq/alpha",
			"policy beta/# max_attempts=3 dead_letter=dlq/beta retry_delay=2s");
	struct client *worker = client_subscribed(b, "worker", "alpha");
	struct client *watch = client_subscribed(b, "watch", "dlq/#");
	make_dead(watch, worker, watch, "alpha", "a1", NULL, NULL, 1, 0);
	client_publish_str(watch, "alpha", "a2", 1);
	client_expect(worker, "alpha", 2);
	clients_settle(worker, watch);

	struct proc *p = dlqctl_expect(0, b, "status");
	const char *alpha[] = { "alpha", "2", "1", "0", "1", "0", NULL };
	const char *beta[] = { "beta/#", "0", "0", "0", "0", "0", NULL };
	const char *total[] = { "TOTAL", "2", "1", "0", "1", "0", NULL };
	expect_row(p, "FILTER", (const char *[]){ "FILTER", "TRACKED", "NACKS", "RETRY-COPIES", "DEAD-LETTERS", NULL });
	expect_row(p, "alpha", alpha);
	expect_row(p, "beta/#", beta);
	expect_row(p, "TOTAL", total);

	p = dlqctl_expect(0, b, "status", "--json");
	cJSON *doc = cJSON_Parse(proc_out(p));
	ck_assert_msg(doc != NULL, "status --json is not JSON: %s", proc_out(p));
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(doc, "totals");
	ck_assert_msg(cJSON_GetObjectItemCaseSensitive(t, "deadLetters")->valuedouble == 1, "deadLetters");
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(doc, "policies")), 2);
	cJSON_Delete(doc);

	p = dlqctl_expect(0, b, "policies");
	expect_row(p, "alpha", (const char *[]){ "alpha", "1", "dlq/alpha", "delivery", "0s", NULL });
	expect_row(p, "beta/#", (const char *[]){ "beta/#", "3", "dlq/beta", "delivery", "2s", NULL });
	p = dlqctl_expect(0, b, "policies", "--json");
	doc = cJSON_Parse(proc_out(p));
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(doc, "policies")), 2);
	cJSON_Delete(doc);

	p = dlqctl_expect(0, b, "reset-counters");
	ck_assert_msg(strstr(proc_out(p), "counters reset"), "reset-counters said: %s", proc_out(p));
	p = dlqctl_expect(0, b, "status");
	expect_row(p, "TOTAL", (const char *[]){ "TOTAL", "0", "0", "0", "0", "0", NULL });
}
END_TEST

/* Wrong command lines exit with 2, a broker without the plugin with 1,
 * and neither crashes. */
START_TEST(test_errors)
{
	struct broker *plain = broker_new("plain");
	broker_start(plain);
	static const char *const usage[][4] = {
		{ "redrive", NULL },
		{ "inspect", "a/#/b", NULL },
		{ "frobnicate", NULL },
		{ "status", "--max", "3", NULL },
		{ "redrive", "dlq/x", "--max", "-1" },
		{ "redrive", "dlq/x", "--rate", "fast" },
		{ "redrive", "dlq/x", "--origin", "a/#/b" },
		{ "inspect", "dlq/x", "-c", NULL },
		{ "status", "--bogus", NULL },
		{ "status", "extra", NULL },
		{ "show", NULL },
		{ "show", "not-an-id", NULL },
		{ "purge", NULL },
		{ "purge", "--all", "--filter", "a/#" },
		{ "redrive", "AAAAAAAAAAAAAAAA", "--max", "1" },
		{ "redrive", "dlq/x", "--to", "a/b" },
		{ "list", "--order", "sideways", NULL },
		{ "list", "--since", "yesterday", NULL },
		{ "list", "--cause", "ack-timeout", NULL },
		{ "status", "--cause", "nack", NULL },
	};
	for(size_t i = 0; i < ARRAY_LEN(usage); i++){
		struct proc *p = dlqctl_run(plain, usage[i][0], usage[i][1], usage[i][2], usage[i][3], NULL);
		if(proc_status(p) != 2 || strstr(proc_err(p), "dlqctl: ") == NULL){
			proc_dump(p);
			ck_abort_msg("case %zu: expected exit status 2 and a message", i);
		}
	}
	/* A cause that is none names the option, the word and every cause. */
	struct proc *p = dlqctl_expect(2, plain, "list", "--cause", "ack-timeout");
	ck_assert_msg(strstr(proc_err(p), "--cause \"ack-timeout\": expected one of nack, final, ack_timeout, redelivery_limit, "
			"subscriber_gone, no_session, offline_qos0, restart, unknown"), "stderr: %s", proc_err(p));
	p = dlqctl_expect(1, plain, "status", "--timeout", "1");
	ck_assert_msg(strstr(proc_err(p), "no reply"), "stderr: %s", proc_err(p));
	p = dlqctl_expect(0, plain, "--help");
	ck_assert_msg(strstr(proc_out(p), "Usage: dlqctl"), "no usage");
	/* Nothing listens on this socket. */
	p = dlqctl_run(plain, "--unix", "/nonexistent/sock", "status", NULL);
	ck_assert_int_eq(proc_status(p), 1);
	ck_assert_msg(strstr(proc_err(p), "cannot connect"), "stderr: %s", proc_err(p));
}
END_TEST

START_TEST(test_inspect_rows)
{
	struct broker *b = dlq_broker("policy orders/# max_attempts=1 dead_letter=dlq/orders");
	struct client *worker = client_subscribed(b, "worker", "orders/#");
	struct client *watch = client_subscribed(b, "watch", "dlq/#");

	struct proc *insp = dlqctl_spawn(b, "inspect", "dlq/orders", "--max", "3", "--idle", "20");
	ck_assert_msg(proc_wait_output(insp, "ORIGIN-TOPIC", 1, HARNESS_WAIT_MS), "inspect printed no header");
	make_dead(watch, worker, watch, "orders/1", "first", NULL, "db down", 1, 0);
	make_dead(watch, worker, watch, "orders/2", "two\nlines", NULL, "bad input", 1, 0);
	make_dead(watch, worker, watch, "orders/3", "third", NULL, NULL, 1, 0);
	ck_assert_int_eq(proc_wait(insp, HARNESS_WAIT_MS), 0);
	const char *out = proc_out(insp);
	ck_assert_msg(it_count(out, "\n") == 4, "expected a header and 3 rows:\n%s", out);
	expect_row(insp, "orders/1", (const char *[]){ "orders/1", "1", "db", "down", client_id(worker), NULL });
	expect_row(insp, "orders/2", (const char *[]){ "orders/2", "1", "bad", "input", client_id(worker), NULL });
	ck_assert_msg(strstr(out, "two.lines") != NULL, "the payload preview is not made printable:\n%s", out);
	ck_assert_msg(strstr(out, "max_attempts (1) reached") != NULL, "no default reason:\n%s", out);

	/* A persistent session: letters wait in it, are printed once as JSON
	 * lines, and are consumed. */
	dlqctl_expect(0, b, "inspect", "-c", "-i", "insp-json", "dlq/#", "--max", "0");
	make_dead(watch, worker, watch, "orders/4", "four", NULL, "r4", 1, 0);
	make_dead(watch, worker, watch, "orders/5", "five", NULL, "r5", 1, 0);
	struct proc *p = dlqctl_expect(0, b, "inspect", "-c", "-i", "insp-json", "dlq/#", "--json");
	ck_assert_msg(it_count(proc_out(p), "\n") == 2, "expected 2 JSON lines:\n%s", proc_out(p));
	cJSON *doc = cJSON_Parse(proc_out(p));
	ck_assert_msg(doc != NULL, "not JSON: %s", proc_out(p));
	ck_assert_str_eq(json_str(doc, "originTopic"), "orders/4");
	ck_assert_str_eq(json_str(doc, "reason"), "r4");
	ck_assert_str_eq(json_str(doc, "retryCount"), "1");
	ck_assert_str_eq(json_str(doc, "payload"), "four");
	ck_assert_str_eq(json_str(doc, "topic"), "dlq/orders");
	cJSON_Delete(doc);
	p = dlqctl_expect(0, b, "inspect", "-c", "-i", "insp-json", "dlq/#", "--json");
	ck_assert_msg(proc_out(p)[0] == '\0', "letters printed twice:\n%s", proc_out(p));
}
END_TEST

/* Everything a publisher can set, so that we see what a redrive keeps. */
static mosquitto_property *rich_props(void)
{
	mosquitto_property *p = NULL;
	ck_assert_int_eq(mosquitto_property_add_string(&p, MQTT_PROP_CONTENT_TYPE, "text/plain"), 0);
	ck_assert_int_eq(mosquitto_property_add_string(&p, MQTT_PROP_RESPONSE_TOPIC, "answers/here"), 0);
	ck_assert_int_eq(mosquitto_property_add_binary(&p, MQTT_PROP_CORRELATION_DATA, "c-42", 4), 0);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, "tenant", "acme"), 0);
	return p;
}

static void expect_kept_props(const struct it_msg *m)
{
	ck_assert_str_eq(m->content_type ? m->content_type : "(none)", "text/plain");
	ck_assert_str_eq(m->response_topic ? m->response_topic : "(none)", "answers/here");
	ck_assert_msg(m->correlation_len == 4 && !memcmp(m->correlation, "c-42", 4), "correlation data lost");
	ck_assert_str_eq(msg_user(m, "tenant") ? msg_user(m, "tenant") : "(none)", "acme");
	ck_assert_uint_eq(msg_user_count(m, "tenant"), 1);
	ck_assert_msg(msg_user(m, "dlqctl-kept") == NULL, "dlqctl's own property was carried");
}

START_TEST(test_redrive_stamps_afresh)
{
	struct broker *b = dlq_broker("policy orders/# max_attempts=2 dead_letter=dlq/orders");
	struct client *worker = client_subscribed(b, "worker", "orders/#");
	struct client *watch = client_subscribed(b, "watch", "dlq/#");
	/* The session that parks the letters, opened before they come. */
	struct proc *p = dlqctl_expect(0, b, "redrive", "dlq/orders", "--max", "0");
	ck_assert_msg(rows(proc_out(p), "redriven") == 0, "--max 0 redrove:\n%s", proc_out(p));

	mosquitto_property *props = rich_props();
	const char *first = make_dead(watch, worker, watch, "orders/7", "seven", props, "db down", 2, 0);
	mosquitto_property_free_all(&props);
	const struct it_msg *dl = client_msg(watch, "dlq/orders", 0);
	expect_dead_letter(dl, "orders/7", first, 2, client_id(worker), "orders/#", "db down");

	p = dlqctl_expect(0, b, "redrive", "dlq/orders");
	ck_assert_msg(rows(proc_out(p), "redriven") == 1, "expected one redriven row:\n%s", proc_out(p));
	const struct it_msg *m = delivery(worker, "orders/7", "seven", 2);
	const char *fresh = expect_original(m);
	ck_assert_msg(strcmp(fresh, first), "the redriven message kept its old dlq-id");
	expect_kept_props(m);

	/* It fails again: a retry copy with retry-count 1, then a dead letter
	 * with retry-count 2, its origin-id the fresh one. */
	client_nack(worker, fresh, "still down");
	const struct it_msg *copy = delivery(worker, "orders/7", "seven", 3);
	const char *copy_id = expect_retry_copy(copy, "orders/7", fresh, 1);
	expect_kept_props(copy);
	client_nack(worker, copy_id, "still down");
	dl = client_expect(watch, "dlq/orders", 2);
	expect_dead_letter(dl, "orders/7", fresh, 2, client_id(worker), "orders/#", "still down");

	/* And can be redriven again. */
	p = dlqctl_expect(0, b, "redrive", "dlq/orders");
	ck_assert_msg(rows(proc_out(p), "redriven") == 1, "second redrive:\n%s", proc_out(p));
	expect_original(delivery(worker, "orders/7", "seven", 4));
	clients_settle(worker, watch);
	client_expect_exactly(worker, "orders/#", 5);
	client_expect_exactly(watch, NULL, 2);
}
END_TEST

START_TEST(test_redrive_dry_run)
{
	struct broker *b = dlq_broker("policy orders/# max_attempts=1 dead_letter=dlq/orders");
	struct client *worker = client_subscribed(b, "worker", "orders/#");
	struct client *watch = client_subscribed(b, "watch", "#");
	dlqctl_expect(0, b, "redrive", "dlq/orders", "--max", "0");
	make_dead(watch, worker, watch, "orders/1", "one", NULL, "x", 1, 0);
	make_dead(watch, worker, watch, "orders/2", "two", NULL, "y", 1, 0);
	clients_settle(worker, watch);
	size_t seen = client_count(watch, NULL);

	for(int run = 0; run < 2; run++){
		struct proc *p = dlqctl_expect(0, b, "redrive", "dlq/orders", "--dry-run");
		ck_assert_msg(rows(proc_out(p), "would-redrive") == 2, "run %d:\n%s", run, proc_out(p));
		ck_assert_msg(strstr(proc_err(p), "nothing was published or acknowledged"), "%s", proc_err(p));
	}
	clients_settle(worker, watch);
	client_expect_exactly(worker, "orders/#", 2);
	client_expect_exactly(watch, NULL, seen);

	struct proc *p = dlqctl_expect(0, b, "redrive", "dlq/orders");
	ck_assert_msg(rows(proc_out(p), "redriven") == 2, "%s", proc_out(p));
	delivery(worker, "orders/1", "one", 1);
	delivery(worker, "orders/2", "two", 1);
}
END_TEST

START_TEST(test_redrive_filters_and_max)
{
	struct broker *b = dlq_broker("policy orders/# max_attempts=1 dead_letter=dlq/orders");
	struct client *worker = client_subscribed(b, "worker", "orders/#");
	struct client *watch = client_subscribed(b, "watch", "dlq/#");
	dlqctl_expect(0, b, "redrive", "dlq/orders", "--max", "0");
	make_dead(watch, worker, watch, "orders/a", "a-db", NULL, "db down", 1, 0);
	make_dead(watch, worker, watch, "orders/b", "b-bad", NULL, "bad input", 1, 0);
	make_dead(watch, worker, watch, "orders/a", "a-bad", NULL, "bad input", 1, 0);
	make_dead(watch, worker, watch, "orders/b", "b-db", NULL, "db down", 1, 0);

	/* --reason-contains and --max: the first matching letter only. */
	struct proc *p = dlqctl_expect(0, b, "redrive", "dlq/orders", "--reason-contains", "db", "--max", "1");
	ck_assert_msg(rows(proc_out(p), "redriven") == 1 && rows(proc_out(p), "kept") == 0, "%s", proc_out(p));
	delivery(worker, "orders/a", "a-db", 1);

	/* --origin: b's letters go, a's is put back, and the run stops when it
	 * meets it again. */
	p = dlqctl_expect(0, b, "redrive", "dlq/orders", "--origin", "orders/b");
	ck_assert_msg(rows(proc_out(p), "redriven") == 2 && rows(proc_out(p), "kept") == 1, "%s", proc_out(p));
	ck_assert_msg(strstr(proc_err(p), "every dead letter seen once"), "%s", proc_err(p));
	delivery(worker, "orders/b", "b-bad", 1);
	delivery(worker, "orders/b", "b-db", 1);

	/* The letter put back is still there, and a plain redrive takes it. */
	p = dlqctl_expect(0, b, "redrive", "dlq/orders", "--dry-run");
	ck_assert_msg(rows(proc_out(p), "would-redrive") == 1 && strstr(proc_out(p), "a-bad"), "%s", proc_out(p));
	p = dlqctl_expect(0, b, "redrive", "dlq/orders");
	ck_assert_msg(rows(proc_out(p), "redriven") == 1, "%s", proc_out(p));
	expect_original(delivery(worker, "orders/a", "a-bad", 1));
	ck_assert_msg(msg_user(client_find_payload(worker, "orders/a", "a-bad", 1), "dlqctl-kept") == NULL,
			"the put-back marker reached the origin topic");

	clients_settle(worker, watch);
	client_expect_exactly(worker, "orders/#", 8);
	p = dlqctl_expect(0, b, "redrive", "dlq/orders", "--dry-run");
	ck_assert_msg(rows(proc_out(p), "would-redrive") == 0, "%s", proc_out(p));
}
END_TEST

/* kill -9 in the middle of a slow redrive, then a second run: every
 * letter reaches its origin topic at least once, at most one twice. */
START_TEST(test_redrive_interrupted)
{
	struct broker *b = dlq_broker("policy orders/# max_attempts=1 dead_letter=dlq/orders");
	struct client *worker = client_subscribed(b, "worker", "orders/#");
	struct client *watch = client_subscribed(b, "watch", "dlq/#");
	dlqctl_expect(0, b, "redrive", "dlq/orders", "--max", "0");
	const char *payloads[] = { "p1", "p2", "p3", "p4", "p5", "p6" };
	for(size_t i = 0; i < 6; i++){
		make_dead(watch, worker, watch, "orders/x", payloads[i], NULL, NULL, 1, 0);
	}

	struct proc *slow = dlqctl_spawn(b, "redrive", "dlq/orders", "--rate", "4");
	ck_assert_msg(proc_wait_output(slow, "\nredriven ", 2, HARNESS_WAIT_MS), "no progress:\n%s", proc_out(slow));
	proc_kill(slow, SIGKILL);
	ck_assert_int_eq(proc_wait(slow, HARNESS_WAIT_MS), 128 + SIGKILL);
	size_t first_run = rows(proc_out(slow), "redriven");
	ck_assert_msg(first_run >= 2 && first_run < 6, "killed too late: %zu redriven", first_run);

	struct proc *p = dlqctl_expect(0, b, "redrive", "dlq/orders");
	size_t second_run = rows(proc_out(p), "redriven");
	ck_assert_msg(first_run + second_run >= 6 && first_run + second_run <= 7,
			"redriven %zu + %zu times", first_run, second_run);
	for(size_t i = 0; i < 6; i++){
		delivery(worker, "orders/x", payloads[i], 1);
	}
	clients_settle(worker, watch);
	size_t total = client_count(worker, "orders/x");
	ck_assert_msg(total >= 12 && total <= 13, "%zu deliveries on orders/x", total);
	p = dlqctl_expect(0, b, "redrive", "dlq/orders", "--dry-run");
	ck_assert_msg(rows(proc_out(p), "would-redrive") == 0, "left behind:\n%s", proc_out(p));
}
END_TEST

/* Consumers that still fail: the messages a run redrove come back as dead
 * letters (marked with the run), and the run stops there instead of
 * sending them round again; they wait for the next run. */
START_TEST(test_redrive_stops_when_consumers_still_fail)
{
	struct broker *b = dlq_broker("policy orders/# max_attempts=1 dead_letter=dlq/orders");
	struct client *worker = client_subscribed(b, "worker", "orders/#");
	struct client *watch = client_subscribed(b, "watch", "dlq/#");
	dlqctl_expect(0, b, "redrive", "dlq/orders", "--max", "0");
	make_dead(watch, worker, watch, "orders/x", "p1", NULL, "bug", 1, 0);
	make_dead(watch, worker, watch, "orders/x", "p2", NULL, "bug", 1, 0);

	struct proc *r = dlqctl_spawn(b, "redrive", "dlq/orders", "--idle", "5");
	for(size_t i = 0; i < 2; i++){
		const struct it_msg *m = delivery(worker, "orders/x", i ? "p2" : "p1", 1);
		ck_assert_msg(msg_user(m, "dlqctl-redriven") != NULL, "a redriven message without its run's mark");
		client_nack(worker, dlq_id_of(m), "still the bug");
	}
	ck_assert_int_eq(proc_wait(r, HARNESS_WAIT_MS), 0);
	ck_assert_msg(rows(proc_out(r), "redriven") == 2, "%s", proc_out(r));
	ck_assert_msg(strstr(proc_err(r), "its consumers still fail"), "%s", proc_err(r));
	const struct it_msg *again = client_expect(watch, "dlq/orders", 4);
	ck_assert_msg(msg_user(again, "dlqctl-redriven") != NULL, "the dead letter lost the run's mark");

	clients_settle(worker, watch);
	client_expect_exactly(worker, "orders/x", 4);
	r = dlqctl_expect(0, b, "redrive", "dlq/orders", "--dry-run");
	ck_assert_msg(rows(proc_out(r), "would-redrive") == 2, "%s", proc_out(r));
}
END_TEST

/* A republish nobody would receive is not made: the letter stays. */
START_TEST(test_redrive_without_subscriber)
{
	struct broker *b = dlq_broker("policy orders/# max_attempts=1 dead_letter=dlq/orders");
	struct client *worker = client_subscribed(b, "worker", "orders/#");
	struct client *watch = client_subscribed(b, "watch", "dlq/#");
	dlqctl_expect(0, b, "redrive", "dlq/orders", "--max", "0");
	make_dead(watch, worker, watch, "orders/x", "lonely", NULL, NULL, 1, 0);
	client_free(worker);

	struct proc *p = dlqctl_expect(1, b, "redrive", "dlq/orders");
	ck_assert_msg(strstr(proc_err(p), "no subscriber"), "%s", proc_err(p));
	p = dlqctl_expect(0, b, "redrive", "dlq/orders", "--dry-run");
	ck_assert_msg(rows(proc_out(p), "would-redrive") == 1, "the letter was lost:\n%s", proc_out(p));
}
END_TEST

/* Garbage on the dead-letter topic is shown, skipped, and harms nothing. */
START_TEST(test_garbage_on_dead_letter_topic)
{
	struct broker *b = dlq_broker("policy orders/# max_attempts=1 dead_letter=dlq/orders");
	struct client *worker = client_subscribed(b, "worker", "orders/#");
	struct client *watch = client_subscribed(b, "watch", "dlq/#");
	dlqctl_expect(0, b, "redrive", "dlq/orders", "--max", "0");
	struct proc *insp = dlqctl_spawn(b, "inspect", "dlq/orders", "--max", "3", "--idle", "20");
	ck_assert_msg(proc_wait_output(insp, "ORIGIN-TOPIC", 1, HARNESS_WAIT_MS), "inspect printed no header");
	static const unsigned char junk[] = { 0xff, 0x00, 0xfe, '\n', 0x1b, '[', '2', 'J' };
	client_publish(watch, "dlq/orders", junk, (int)sizeof(junk), 1, NULL);
	mosquitto_property *p = NULL;
	ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, DLQ_PROP_ORIGIN_TOPIC, "bad/#"), 0);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, DLQ_PROP_DEAD_LETTER_TIME, "yesterday"), 0);
	client_publish(watch, "dlq/orders", "fake", 4, 1, p);
	mosquitto_property_free_all(&p);
	make_dead(watch, worker, watch, "orders/x", "real", NULL, NULL, 1, 0);

	ck_assert_int_eq(proc_wait(insp, HARNESS_WAIT_MS), 0);
	ck_assert_msg(it_count(proc_out(insp), "\n") == 4, "%s", proc_out(insp));
	ck_assert_msg(strchr(proc_out(insp), 0x1b) == NULL, "an escape sequence was printed");

	/* What cannot be redriven is skipped: acknowledged, published nowhere. */
	struct proc *r = dlqctl_expect(0, b, "redrive", "dlq/orders");
	ck_assert_msg(rows(proc_out(r), "redriven") == 1 && rows(proc_out(r), "skipped") == 2, "%s", proc_out(r));
	ck_assert_msg(strstr(proc_out(r), "not a dead letter"), "%s", proc_out(r));
	ck_assert_msg(strstr(proc_out(r), "origin-topic is not a topic"), "%s", proc_out(r));
	delivery(worker, "orders/x", "real", 1);
	clients_settle(worker, watch);
	client_expect_exactly(worker, "orders/#", 2);
	client_expect_exactly(watch, "dlq/orders", 3);
	r = dlqctl_expect(0, b, "redrive", "dlq/orders", "--dry-run");
	ck_assert_msg(strstr(proc_err(r), "would redrive 0, keep 0, skip 0"), "%s", proc_err(r));
}
END_TEST

/* The kept letter's id, from listDeadLetters through list --json, once
 * there are want letters matching filter (a policy's); "" when want is 0. */
static const char *kept_id(struct broker *b, const char *filter, int want, char *id, size_t len)
{
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	for(;;){
		struct proc *p = dlqctl_expect(0, b, "list", "--json", "--filter", filter);
		cJSON *doc = cJSON_Parse(proc_out(p));
		ck_assert_msg(doc != NULL, "list --json is not JSON: %s", proc_out(p));
		const cJSON *matched = cJSON_GetObjectItemCaseSensitive(doc, "matched");
		const cJSON *letters = cJSON_GetObjectItemCaseSensitive(doc, "letters");
		ck_assert_msg(cJSON_IsNumber(matched) && cJSON_IsArray(letters), "list --json: %s", proc_out(p));
		if(matched->valuedouble == want){
			ck_assert_int_eq(cJSON_GetArraySize(letters), want);
			const char *s = want ? json_str(cJSON_GetArrayItem(letters, 0), "id") : "";
			ck_assert_msg(s != NULL && (want == 0 || it_is_dlq_id(s)), "no id: %s", proc_out(p));
			snprintf(id, len, "%s", s);
			cJSON_Delete(doc);
			return id;
		}
		cJSON_Delete(doc);
		if(it_now_ms() > deadline){
			proc_dump(p);
			ck_abort_msg("%d kept dead letters of %s did not come", want, filter);
		}
		it_sleep_ms(50);
	}
}

/* A dead letter made while nobody subscribes to its dead-letter topic is
 * kept by the plugin: list shows it, show prints its payload and reason,
 * redrive ID republishes it to its origin topic once (a second redrive of
 * the id fails), delete takes one away, and purge empties the store. */
START_TEST(test_store)
{
	/* Access per letter is the letters suite's; here every line (2.0.21
	 * has no mosquitto_acl_check to ask) lets dlqctl's client in. */
	struct broker *b = dlq_broker("policy jobs/# max_attempts=1 dead_letter=dlq/jobs", "dead_letter_access control");
	struct client *worker = client_subscribed(b, "worker", "jobs/#");
	char id[64], again[64];

	client_publish_str(worker, "jobs/x", "hello", 1);
	const char *first = dlq_id_of(delivery(worker, "jobs/x", "hello", 0));
	client_nack(worker, first, "db down");
	kept_id(b, "jobs/#", 1, id, sizeof(id));

	struct proc *p = dlqctl_expect(0, b, "list");
	expect_row(p, "ID", (const char *[]){ "ID", "TIME", "BROKER", "DEAD-LETTER", "ORIGIN-TOPIC", "RETRY-COUNT", "CAUSE",
		"CLIENT", "REASON", NULL });
	ck_assert_msg(it_count(proc_out(p), "\n") == 2, "expected a header and one row:\n%s", proc_out(p));
	char line[1024];
	ck_assert_msg(it_lines_with(proc_out(p), id, line, sizeof(line)) == 1, "no row of %s:\n%s", id, proc_out(p));
	ck_assert_msg(strstr(line, " dlq/jobs ") && strstr(line, " jobs/x ") && strstr(line, client_id(worker))
			&& strstr(line, "db down"), "row: %s", line);
	/* Without plugin_opt_broker_name, the broker is the host name. */
	expect_row(p, id, (const char *[]){ id, field(line, 1), it_host_name(), "dlq/jobs", "jobs/x", "1", DLQ_CAUSE_NACK,
		client_id(worker), "db", "down", NULL });

	p = dlqctl_expect(0, b, "show", id);
	const char *reason = strstr(proc_out(p), "\nreason:");
	ck_assert_msg(reason != NULL, "show: no reason line:\n%s", proc_out(p));
	snprintf(line, sizeof(line), "%.*s", (int)strcspn(reason + 1, "\n"), reason + 1);
	ck_assert_msg(strstr(line, " db down"), "show: reason line \"%s\"", line);
	ck_assert_msg(strstr(proc_out(p), "payload (utf-8):\nhello\n"), "show:\n%s", proc_out(p));
	ck_assert_msg(strstr(proc_out(p), "origin-topic:") && strstr(proc_out(p), "jobs/x"), "show:\n%s", proc_out(p));

	p = dlqctl_expect(0, b, "redrive", id);
	ck_assert_msg(rows(proc_out(p), id) == 1 && strstr(proc_out(p), "redriven"), "redrive:\n%s", proc_out(p));
	/* Tracked again as a new chain's first delivery: a fresh dlq-id, the
	 * origin kept, none of the dead letter's properties. */
	const struct it_msg *m = delivery(worker, "jobs/x", "hello", 1);
	ck_assert_msg(strcmp(dlq_id_of(m), first), "the redriven message kept its old dlq-id");
	ck_assert_str_eq(msg_user(m, DLQ_PROP_ORIGIN_TOPIC) ? msg_user(m, DLQ_PROP_ORIGIN_TOPIC) : "(none)", "jobs/x");
	ck_assert_str_eq(msg_user(m, DLQ_PROP_ORIGIN_ID) ? msg_user(m, DLQ_PROP_ORIGIN_ID) : "(none)", first);
	ck_assert_msg(msg_user(m, DLQ_PROP_DEAD_LETTER_REASON) == NULL && msg_user(m, DLQ_PROP_DEAD_LETTER_ID) == NULL,
			"the redriven message carries the dead letter's properties");
	p = dlqctl_expect(1, b, "redrive", id);
	ck_assert_msg(strstr(proc_err(p), "unknown dead-letter id"), "second redrive: %s", proc_err(p));
	clients_settle(worker);
	client_expect_exactly(worker, "jobs/#", 2);
	p = dlqctl_expect(1, b, "show", id);
	ck_assert_msg(strstr(proc_err(p), "unknown dead-letter id"), "show of a redriven id: %s", proc_err(p));

	/* delete: the letter goes, unpublished. */
	client_nack(worker, dlq_id_of(m), "again");
	kept_id(b, "jobs/#", 1, again, sizeof(again));
	ck_assert_msg(strcmp(again, id), "a new dead letter with the old id");
	p = dlqctl_expect(0, b, "delete", again);
	ck_assert_msg(rows(proc_out(p), again) == 1, "delete:\n%s", proc_out(p));
	kept_id(b, "jobs/#", 0, again, sizeof(again));

	/* purge: counts without --yes, empties with it. */
	client_publish_str(worker, "jobs/y", "one", 1);
	client_nack(worker, dlq_id_of(delivery(worker, "jobs/y", "one", 0)), NULL);
	client_publish_str(worker, "jobs/y", "two", 1);
	client_nack(worker, dlq_id_of(delivery(worker, "jobs/y", "two", 0)), NULL);
	kept_id(b, "jobs/#", 2, again, sizeof(again));
	p = dlqctl_expect(0, b, "purge", "--filter", "jobs/#");
	ck_assert_msg(strstr(proc_out(p), "2 kept dead letters") && strstr(proc_out(p), "--yes"), "%s", proc_out(p));
	kept_id(b, "jobs/#", 2, again, sizeof(again));
	p = dlqctl_expect(0, b, "purge", "--filter", "jobs/#", "--yes");
	ck_assert_msg(strstr(proc_out(p), "purged 2 "), "purge:\n%s", proc_out(p));
	kept_id(b, "jobs/#", 0, again, sizeof(again));
	p = dlqctl_expect(0, b, "list");
	ck_assert_msg(it_count(proc_out(p), "\n") == 1, "expected the header only:\n%s", proc_out(p));

	/* A payload that is not text is shown as a hex dump; purge --all. */
	static const unsigned char bin[] = { 0xff, 0x00, 0x1b, 'A' };
	client_publish(worker, "jobs/z", bin, (int)sizeof(bin), 1, NULL);
	client_expect(worker, "jobs/z", 1);
	client_nack(worker, dlq_id_of(client_msg(worker, "jobs/z", 0)), NULL);
	kept_id(b, "jobs/#", 1, again, sizeof(again));
	p = dlqctl_expect(0, b, "show", again);
	ck_assert_msg(strstr(proc_out(p), "payload (binary, 4 bytes):\n00000000  ff 00 1b 41"), "show:\n%s", proc_out(p));
	ck_assert_msg(strchr(proc_out(p), 0x1b) == NULL, "an escape character was printed");
	p = dlqctl_expect(0, b, "purge", "--all", "--yes");
	ck_assert_msg(strstr(proc_out(p), "purged 1 "), "purge --all:\n%s", proc_out(p));
	kept_id(b, "jobs/#", 0, again, sizeof(again));
	clients_settle(worker);
	client_expect_exactly(worker, "jobs/#", 5);
}
END_TEST

/* list --cause shows the kept letters of one dead-letter-cause: a final
 * NACK's (final) apart from a NACK of the last attempt (nack), the cause
 * in its column; a cause no letter has shows none. */
START_TEST(test_list_by_cause)
{
	struct broker *b = dlq_broker("policy jobs/# max_attempts=1 dead_letter=dlq/jobs", "dead_letter_access control");
	struct client *worker = client_subscribed(b, "worker", "jobs/#");
	char id[64], fin[64], non[64];

	client_publish_str(worker, "jobs/f", "fin", 1);
	const char *first = dlq_id_of(delivery(worker, "jobs/f", "fin", 0));
	mosquitto_property *props = NULL;
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, DLQ_PROP_NACK_FINAL, "true"), 0);
	ck_assert_int_lt(client_publish(worker, DLQ_NACK_TOPIC, first, DLQ_ID_LEN, 1, props), 0x80);
	mosquitto_property_free_all(&props);
	kept_id(b, "jobs/#", 1, fin, sizeof(fin));
	client_publish_str(worker, "jobs/n", "non", 1);
	client_nack(worker, dlq_id_of(delivery(worker, "jobs/n", "non", 0)), "no");
	kept_id(b, "jobs/#", 2, non, sizeof(non));

	static const struct {
		const char *cause;
		const char *id_of;     /* "f": the final letter's row, "n": the other's, NULL: none */
	} cases[] = {
		{ DLQ_CAUSE_FINAL, "f" }, { DLQ_CAUSE_NACK, "n" }, { DLQ_CAUSE_ACK_TIMEOUT, NULL },
	};
	for(size_t i = 0; i < ARRAY_LEN(cases); i++){
		struct proc *p = dlqctl_expect(0, b, "list", "--cause", cases[i].cause);
		if(cases[i].id_of == NULL){
			ck_assert_msg(it_count(proc_out(p), "\n") == 1, "--cause %s: expected the header only:\n%s", cases[i].cause,
					proc_out(p));
			ck_assert_msg(strstr(proc_err(p), "0 dead letters"), "--cause %s: stderr %s", cases[i].cause, proc_err(p));
			continue;
		}
		snprintf(id, sizeof(id), "%s", cases[i].id_of[0] == 'f' ? fin : non);
		ck_assert_msg(it_count(proc_out(p), "\n") == 2, "--cause %s: expected a header and one row:\n%s", cases[i].cause,
				proc_out(p));
		char line[1024];
		ck_assert_msg(it_lines_with(proc_out(p), id, line, sizeof(line)) == 1, "--cause %s: no row of %s:\n%s",
				cases[i].cause, id, proc_out(p));
		expect_row(p, id, (const char *[]){ id, field(line, 1), it_host_name(), "dlq/jobs",
			cases[i].id_of[0] == 'f' ? "jobs/f" : "jobs/n",
			"1", cases[i].cause, NULL });
	}
	/* With --json, the plugin's data: each summary's cause. */
	struct proc *p = dlqctl_expect(0, b, "list", "--json", "--cause", DLQ_CAUSE_FINAL);
	cJSON *doc = cJSON_Parse(proc_out(p));
	const cJSON *letters = cJSON_GetObjectItemCaseSensitive(doc, "letters");
	ck_assert_msg(cJSON_GetArraySize(letters) == 1 && json_str(cJSON_GetArrayItem(letters, 0), "cause")
			&& !strcmp(json_str(cJSON_GetArrayItem(letters, 0), "cause"), DLQ_CAUSE_FINAL), "list --json --cause final: %s",
			proc_out(p));
	cJSON_Delete(doc);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dlqctl");
	check_add(s, harness_tcase("status"), CHECK_TESTS(test_status_and_policies, test_errors));
	check_add(s, harness_tcase("inspect"), CHECK_TESTS(test_inspect_rows, test_garbage_on_dead_letter_topic));
	check_add(s, harness_tcase("redrive"), CHECK_TESTS(test_redrive_stamps_afresh, test_redrive_dry_run,
			test_redrive_filters_and_max, test_redrive_interrupted, test_redrive_stops_when_consumers_still_fail,
			test_redrive_without_subscriber));
	check_add(s, harness_tcase("store"), CHECK_TESTS(test_store, test_list_by_cause));
	return harness_run(s);
}
