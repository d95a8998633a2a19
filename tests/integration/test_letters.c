/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The dead-letter store (issue 24) against the real broker, through its
 * JSON commands on $CONTROL/dlq/v1: the operator's story (a letter made
 * before anyone looked is listed, read in full, redriven once to a worker
 * that NACKs it again, and a second redrive is refused); letters across a
 * restart (SIGTERM, and SIGKILL with plugin_opt_state_save_on_change); the
 * store's bound (the oldest dropped and counted); paging and filters, the
 * dead-letter cause among them; garbage and oversized commands; access by
 * the broker's acl_file; and the store turned off; a payload cut in a
 * reply; the $SYS topics.
 *
 * The same file runs on every broker line. Where the broker does not
 * export mosquitto_acl_check (Debian 13's 2.0.21), the store's default
 * access mode cannot be honoured and every store command is refused
 * (test_access shows that error); there the other tests start the broker
 * again with plugin_opt_dead_letter_access control (start_store). Elsewhere
 * they run in the default mode, without an acl_file, where every client
 * may read and write everything.
 *
 * Commands are sent by v5 clients with a response topic of their own
 * ("replies/<client id>"), so that each reply is the sender's. Letters are
 * made one after the other (each NACK acknowledged before the next message
 * is published), so the order they are kept in is the order of the NACKs.
 *
 * The age bound (issue 38, part 2: plugin_opt_dead_letter_keep_for, a
 * policy's dead_letter_keep_for) is tested last, at a tick and across a
 * restart.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "harness.h"
#include "letters_common.h"
#include "proc.h"
#include "raw.h"
#include "test_util.h"

/* ---- (1) the operator's story ---- */

/* The issue's story: policy jobs/# max_attempts=1 dead_letter=dead/jobs, a
 * worker NACKs a message, and only then does an inspector come. The letter
 * is listed and read in full, redriven to its origin topic (the worker
 * gets it again, tracked under a fresh dlq-id, and its NACK makes a new
 * letter), and a second redrive of the same letter is refused. */
START_TEST(test_operator_story)
{
	struct broker *b = STORE_BROKER(JOBS);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *worker = client_subscribed(b, "worker", "jobs/#");
	mosquitto_property *props = NULL;
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, "origin", "pub-1"), 0);
	ck_assert_int_eq(mosquitto_property_add_string(&props, MQTT_PROP_CONTENT_TYPE, "text/plain"), 0);
	ck_assert_int_eq(mosquitto_property_add_string(&props, MQTT_PROP_RESPONSE_TOPIC, "answers/x"), 0);
	ck_assert_int_eq(mosquitto_property_add_binary(&props, MQTT_PROP_CORRELATION_DATA, "c1", 2), 0);
	char id[ID_BUF];
	make_letter(pub, worker, "jobs/x", "job-1", 5, props, "cannot parse job", id);
	mosquitto_property_free_all(&props);

	/* Only now does anyone look. */
	struct client *insp = ops_client(b, "inspector");
	client_subscribe(insp, "dead/#", 1);
	wait_kept(insp, 1);
	ck_assert_msg(status_num(insp, "jobs/#", "keptDeadLetters") == 1, "jobs/# keptDeadLetters is not 1");
	ck_assert_msg(status_num(insp, NULL, "keptDeadLetterBytes") > 5, "keptDeadLetterBytes");

	struct page p = list_page(insp, NULL, 0, false, 0);
	ck_assert_msg(p.count == 1 && p.matched == 1 && !p.has_next, "list: %d letters, matched %g, next %d",
			p.count, p.matched, p.has_next);
	const struct want w = { NULL, "dead/jobs", "jobs/x", id, "cannot parse job", client_id(worker), "jobs/#", 1, 1, 5 };
	const cJSON *s = cJSON_GetArrayItem(p.letters, 0);
	expect_summary(s, &w);
	char letter[ID_BUF], when[64];
	snprintf(letter, sizeof(letter), "%s", json_str(s, "id"));
	snprintf(when, sizeof(when), "%s", json_str(s, "time"));
	cJSON_Delete(p.doc);

	/* In full: the summary, the payload and every property. */
	const cJSON *d;
	cJSON *doc = get_letter(insp, letter, &d);
	struct want wl = w;
	wl.id = letter;
	expect_summary(d, &wl);
	expect_payload(d, "job-1", 5, true);
	const cJSON *pr = cJSON_GetObjectItemCaseSensitive(d, "properties");
	char *t = json_text(d);
	ck_assert_msg(cJSON_IsArray(pr), "no properties array: %s", t);
	expect_user_prop(pr, "origin", "pub-1");
	const cJSON *x = find_prop(pr, "content-type", NULL);
	ck_assert_msg(x && json_str(x, "value") && !strcmp(json_str(x, "value"), "text/plain"), "content-type: %s", t);
	x = find_prop(pr, "response-topic", NULL);
	ck_assert_msg(x && json_str(x, "value") && !strcmp(json_str(x, "value"), "answers/x"), "response-topic: %s", t);
	x = find_prop(pr, "correlation-data", NULL);
	ck_assert_msg(x && json_str(x, "value") && !strcmp(json_str(x, "value"), "YzE="), "correlation-data: %s", t);
	expect_user_prop(pr, DLQ_PROP_DEAD_LETTER_ID, letter);
	expect_user_prop(pr, DLQ_PROP_DEAD_LETTER_REASON, "cannot parse job");
	expect_user_prop(pr, DLQ_PROP_DEAD_LETTER_CLIENT, client_id(worker));
	expect_user_prop(pr, DLQ_PROP_DEAD_LETTER_FILTER, "jobs/#");
	expect_user_prop(pr, DLQ_PROP_DEAD_LETTER_TIME, when);
	expect_user_prop(pr, DLQ_PROP_ORIGIN_TOPIC, "jobs/x");
	expect_user_prop(pr, DLQ_PROP_ORIGIN_ID, id);
	expect_user_prop(pr, DLQ_PROP_RETRY_COUNT, "1");
	ck_assert_msg(find_prop(pr, "user-property", DLQ_PROP_ID) == NULL, "a dead letter's properties hold a dlq-id: %s", t);
	free(t);
	cJSON_Delete(doc);

	/* Redriven to its origin topic: the worker gets it again, tracked. */
	const cJSON *r;
	doc = one_id(insp, DLQ_COMMAND_REDRIVE_DEAD_LETTERS, letter, NULL, &r);
	result_redriven(r, "jobs/x", true);
	cJSON_Delete(doc);
	const struct it_msg *again = client_expect(worker, "jobs/#", 2);
	ck_assert_str_eq(again->topic, "jobs/x");
	ck_assert_str_eq(again->payload, "job-1");
	ck_assert_int_eq(again->qos, 1);
	char id2[ID_BUF];
	snprintf(id2, sizeof(id2), "%s", dlq_id_of(again));
	ck_assert_msg(strcmp(id2, id), "the redriven message has the original's dlq-id %s", id);
	ck_assert_msg(msg_user_count(again, "origin") == 1 && !strcmp(msg_user(again, "origin"), "pub-1"),
			"the redriven message lost the publisher's user property");
	ck_assert_msg(again->content_type && !strcmp(again->content_type, "text/plain"), "the redriven message's content type");
	/* A new chain's first delivery (docs/properties.md): retry-count 0,
	 * where a fresh publish has none, and where it came from. */
	ck_assert_msg(msg_user(again, DLQ_PROP_RETRY_COUNT) && !strcmp(msg_user(again, DLQ_PROP_RETRY_COUNT), "0"),
			"the redriven message's retry-count is %s, expected 0", msg_user(again, DLQ_PROP_RETRY_COUNT));
	ck_assert_msg(msg_user(again, DLQ_PROP_ORIGIN_TOPIC) && !strcmp(msg_user(again, DLQ_PROP_ORIGIN_TOPIC), "jobs/x"),
			"the redriven message's origin-topic");
	static const char *const dl_only[] = { DLQ_PROP_DEAD_LETTER_ID, DLQ_PROP_DEAD_LETTER_REASON,
		DLQ_PROP_DEAD_LETTER_CLIENT, DLQ_PROP_DEAD_LETTER_FILTER, DLQ_PROP_DEAD_LETTER_TIME,
		DLQ_PROP_DEAD_LETTER_CAUSE };
	for(size_t i = 0; i < ARRAY_LEN(dl_only); i++){
		ck_assert_msg(msg_user(again, dl_only[i]) == NULL, "the redriven message carries %s", dl_only[i]);
	}
	if(msg_user(again, DLQ_PROP_ORIGIN_ID)){
		ck_assert_str_eq(msg_user(again, DLQ_PROP_ORIGIN_ID), id);
	}
	/* It left the store with the broker's acceptance, which the reply
	 * reported. */
	ck_assert_msg(status_num(insp, NULL, "keptDeadLetters") == 0, "keptDeadLetters is not 0 after the redrive");
	ck_assert_msg(status_num(insp, "jobs/#", "keptDeadLetters") == 0, "jobs/# keptDeadLetters is not 0");

	/* Once only. */
	doc = one_id(insp, DLQ_COMMAND_REDRIVE_DEAD_LETTERS, letter, NULL, &r);
	result_error(r, ERR_UNKNOWN, true);
	cJSON_Delete(doc);
	cJSON *cmd = cmd_new(DLQ_COMMAND_GET_DEAD_LETTER);
	cJSON_AddStringToObject(cmd, "id", letter);
	const cJSON *e;
	doc = ask(insp, cmd, &e);
	entry_error(e, ERR_UNKNOWN, true);
	cJSON_Delete(doc);

	/* Tracked again: the worker's NACK makes a new letter, which the
	 * inspector, subscribed by now, also receives. */
	client_nack(worker, id2, NULL);
	const struct it_msg *dl = client_expect(insp, "dead/#", 1);
	ck_assert_str_eq(dl->topic, "dead/jobs");
	ck_assert_str_eq(dl->payload, "job-1");
	expect_dead_letter(dl, "jobs/x", id, 1, client_id(worker), "jobs/#", NULL);
	const char *letter2 = msg_user(dl, DLQ_PROP_DEAD_LETTER_ID);
	ck_assert_msg(letter2 && it_is_dlq_id(letter2) && msg_user_count(dl, DLQ_PROP_DEAD_LETTER_ID) == 1,
			"the dead letter does not carry one dead-letter-id");
	ck_assert_msg(strcmp(letter2, letter), "the new letter has the redriven letter's id");
	wait_kept(insp, 1);
	p = list_page(insp, NULL, 0, false, 0);
	ck_assert_msg(p.count == 1 && p.matched == 1 && !p.has_next, "list: %d letters, matched %g", p.count, p.matched);
	const struct want w2 = { letter2, "dead/jobs", "jobs/x", id, NULL, client_id(worker), "jobs/#", 1, 1, 5 };
	expect_summary(cJSON_GetArrayItem(p.letters, 0), &w2);
	cJSON_Delete(p.doc);

	clients_settle(worker, insp, pub);
	client_expect_exactly(worker, "jobs/#", 2);
	client_expect_exactly(insp, "dead/#", 1);
	ck_assert_uint_eq(client_disconnects(insp), 0);
}
END_TEST

/* ---- (2) across restarts ---- */

static const unsigned char binary_payload[] = { 0x00, 0x01, 0xff, 0xfe, 'x' };

/* Three letters (text, binary, text with a user property) made, listed,
 * the broker stopped (SIGTERM, or SIGKILL when kill) and started again:
 * the same letters are listed, with the same summaries and payloads. One
 * is then redriven and one deleted, and after another stop and start only
 * the third is left. */
static void restart_case(const char *label, bool kill)
{
	struct broker *b = broker_new(label);
	broker_plugin(b);
	broker_conf(b, "plugin_opt_state_file %s", broker_path(b, STATE_NAME));
	broker_conf(b, "plugin_opt_%s", JOBS);
	if(kill){
		broker_conf(b, "plugin_opt_state_save_on_change true");
	}
	start_store(b);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *worker = client_subscribed(b, "worker", "jobs/#");
	struct client *insp = ops_client(b, "inspector");
	char orig[3][ID_BUF];
	make_letter(pub, worker, "jobs/a", "first", 5, NULL, "r1", orig[0]);
	make_letter(pub, worker, "jobs/b", binary_payload, (int)sizeof(binary_payload), NULL, "r2", orig[1]);
	mosquitto_property *props = NULL;
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, "k", "v"), 0);
	make_letter(pub, worker, "jobs/c", "third", 5, props, "r3", orig[2]);
	mosquitto_property_free_all(&props);
	wait_kept(insp, 3);

	cJSON *order = tmpl_str("order", "oldest");
	struct page before = list_page(insp, order, 0, false, 0);
	ck_assert_msg(before.count == 3 && before.matched == 3 && !before.has_next, "before: %d letters, matched %g",
			before.count, before.matched);
	char ids[3][ID_BUF];
	static const char *const topics[] = { "jobs/a", "jobs/b", "jobs/c" };
	static const char *const reasons[] = { "r1", "r2", "r3" };
	static const int sizes[] = { 5, (int)sizeof(binary_payload), 5 };
	for(int i = 0; i < 3; i++){
		const struct want w = { NULL, "dead/jobs", topics[i], orig[i], reasons[i], client_id(worker), "jobs/#", 1, 1,
			sizes[i] };
		const cJSON *s = cJSON_GetArrayItem(before.letters, i);
		expect_summary(s, &w);
		snprintf(ids[i], sizeof(ids[i]), "%s", json_str(s, "id"));
	}
	client_free(pub);
	client_free(worker);
	client_free(insp);

	if(kill){
		broker_kill(b);
	}else{
		broker_shutdown(b);
	}
	broker_start(b);
	ck_assert_msg(!log_has(b, "damage") && !log_has(b, "kept aside"), "the plugin found damage in its state file");
	insp = ops_client(b, "inspector");
	ck_assert_msg(status_num(insp, NULL, "keptDeadLetters") == 3, "keptDeadLetters is not 3 after the restart");
	ck_assert_msg(status_num(insp, "jobs/#", "keptDeadLetters") == 3, "jobs/# keptDeadLetters after the restart");
	struct page after = list_page(insp, order, 0, false, 0);
	ck_assert_msg(after.count == 3 && after.matched == 3 && !after.has_next, "after: %d letters, matched %g",
			after.count, after.matched);
	for(int i = 0; i < 3; i++){
		const cJSON *a = cJSON_GetArrayItem(before.letters, i);
		const cJSON *z = cJSON_GetArrayItem(after.letters, i);
		if(!cJSON_Compare(a, z, true)){
			char *ta = json_text(a), *tz = json_text(z);
			ck_abort_msg("letter %d before the restart: %s; after: %s", i, ta, tz);
		}
	}
	cJSON_Delete(before.doc);
	cJSON_Delete(after.doc);
	const cJSON *d;
	cJSON *doc = get_letter(insp, ids[0], &d);
	expect_payload(d, "first", 5, true);
	cJSON_Delete(doc);
	doc = get_letter(insp, ids[1], &d);
	expect_payload(d, binary_payload, sizeof(binary_payload), false);
	cJSON_Delete(doc);
	doc = get_letter(insp, ids[2], &d);
	expect_payload(d, "third", 5, true);
	expect_user_prop(cJSON_GetObjectItemCaseSensitive(d, "properties"), "k", "v");
	expect_user_prop(cJSON_GetObjectItemCaseSensitive(d, "properties"), DLQ_PROP_DEAD_LETTER_ID, ids[2]);
	cJSON_Delete(doc);

	/* Taken after the restart, and gone after the next one. */
	const cJSON *r;
	doc = one_id(insp, DLQ_COMMAND_REDRIVE_DEAD_LETTERS, ids[0], NULL, &r);
	result_redriven(r, "jobs/a", true);
	cJSON_Delete(doc);
	doc = one_id(insp, DLQ_COMMAND_DELETE_DEAD_LETTERS, ids[1], NULL, &r);
	ck_assert_msg(json_str(r, "result") && !strcmp(json_str(r, "result"), "deleted") && !json_str(r, "error"),
			"delete did not say deleted");
	cJSON_Delete(doc);
	ck_assert_msg(status_num(insp, NULL, "keptDeadLetters") == 1, "keptDeadLetters is not 1");
	client_free(insp);
	if(kill){
		broker_kill(b);
	}else{
		broker_shutdown(b);
	}
	broker_start(b);
	insp = ops_client(b, "inspector");
	struct page last = list_page(insp, order, 0, false, 0);
	ck_assert_msg(last.count == 1 && last.matched == 1, "after the second restart: %d letters, matched %g",
			last.count, last.matched);
	expect_str_member(cJSON_GetArrayItem(last.letters, 0), "id", ids[2]);
	cJSON_Delete(last.doc);
	doc = one_id(insp, DLQ_COMMAND_REDRIVE_DEAD_LETTERS, ids[0], NULL, &r);
	result_error(r, ERR_UNKNOWN, true);
	cJSON_Delete(doc);
	cJSON_Delete(order);
}

/* Copies from to to (the test fails if it cannot). */
static void copy_fixture(const char *from, const char *to)
{
	char *text = NULL;
	size_t len = 0;
	FILE *in = fopen(from, "rb");
	ck_assert_msg(in != NULL, "cannot open the fixture %s: %s", from, strerror(errno));
	FILE *out = open_memstream(&text, &len);
	ck_assert_ptr_nonnull(out);
	char buf[4096];
	size_t n;
	while((n = fread(buf, 1, sizeof(buf), in)) > 0) fwrite(buf, 1, n, out);
	fclose(in);
	fclose(out);
	FILE *f = fopen(to, "wb");
	ck_assert_msg(f != NULL && fwrite(text, 1, len, f) == len && fclose(f) == 0, "cannot write %s", to);
	free(text);
}

/* Issue 36 changed the state format (journal generations). A state file
 * and journal written by the version before it
 * (fixtures/state-0.1.0-890389b, its README says how) are read: the
 * snapshot's kept dead letter and the journal's, with their payloads and
 * reasons; their NACKable deliveries are past a 100 ms nack_window, so
 * skipped. The journal is folded into a snapshot at that start, so a
 * SIGKILL right after it loses nothing and applies nothing twice. Its
 * letters, saved before broker names (issue 39), are the restoring
 * broker's (plugin_opt_broker_name), and stay so across the restart. */
START_TEST(test_state_of_the_previous_version)
{
	const char *fixtures = getenv("DLQ_FIXTURES");
	ck_assert_msg(fixtures && *fixtures, "DLQ_FIXTURES is not set: run the tests with meson test");
	struct broker *b = broker_new(__func__);
	const char *state = broker_path(b, STATE_NAME);
	char from[600], journal[600];
	snprintf(from, sizeof(from), "%s/state-0.1.0-890389b/dlq.state", fixtures);
	copy_fixture(from, state);
	snprintf(from, sizeof(from), "%s/state-0.1.0-890389b/dlq.state.journal", fixtures);
	snprintf(journal, sizeof(journal), "%s.journal", state);
	copy_fixture(from, journal);
	broker_plugin(b);
	broker_conf(b, "plugin_opt_state_file %s", state);
	broker_conf(b, "plugin_opt_state_save_on_change true");
	broker_conf(b, "plugin_opt_dead_letter_keep 1MiB");
	broker_conf(b, "plugin_opt_nack_window 100ms");
	broker_conf(b, "plugin_opt_policy jobs max_attempts=2 dead_letter=dlq/jobs");
	broker_conf(b, "plugin_opt_broker_name centre-1");
	/* Not start_store: its second start (where the broker lacks
	 * mosquitto_acl_check) would read the files the first one wrote. */
	broker_conf(b, "plugin_opt_dead_letter_access control");
	broker_start(b);
	ck_assert_msg(!log_has(b, "damage") && !log_has(b, "kept aside"), "the plugin found damage in the old files");
	ck_assert_msg(log_has(b, "restored 0 NACKable deliveries (3 expired or without their policy skipped)"),
			"the snapshot's 3 deliveries were not read");
	ck_assert_msg(log_has(b, ", 1 kept dead letters"), "the snapshot's kept dead letter was not read");
	ck_assert_msg(log_has(b, "dlq.state.journal: ") && !log_has(b, ": 0 entries applied"),
			"the old journal was not applied");

	for(int round = 0; round < 2; round++){
		struct client *insp = ops_client(b, "inspector");
		cJSON *order = tmpl_str("order", "oldest");
		struct page p = list_page(insp, order, 0, false, 0);
		ck_assert_msg(p.count == 2 && p.matched == 2, "round %d: %d letters, matched %g", round, p.count, p.matched);
		static const char *const payloads[] = { "job1", "job2" };
		for(int i = 0; i < 2; i++){
			const cJSON *s = cJSON_GetArrayItem(p.letters, i);
			expect_str_member(s, "deadLetter", "dlq/jobs");
			expect_str_member(s, "broker", "centre-1");
			const cJSON *d;
			cJSON *doc = get_letter(insp, json_str(s, "id"), &d);
			expect_payload(d, payloads[i], 4, true);
			expect_user_prop(cJSON_GetObjectItemCaseSensitive(d, "properties"), DLQ_PROP_DEAD_LETTER_BROKER, "centre-1");
			cJSON_Delete(doc);
		}
		cJSON_Delete(p.doc);
		cJSON_Delete(order);
		client_free(insp);
		if(round == 0){
			broker_kill(b);
			broker_start(b);
			ck_assert_msg(!log_has(b, "damage"), "the files written at the first start are damaged");
			ck_assert_msg(log_has(b, ", 2 kept dead letters"), "the snapshot written at the first start lacks a letter");
		}
	}
}
END_TEST

START_TEST(test_restart_sigterm)
{
	restart_case(__func__, false);
}
END_TEST

START_TEST(test_restart_sigkill_save_on_change)
{
	restart_case(__func__, true);
}
END_TEST

/* ---- (3) the bound ---- */

#define BOUND_N 12
#define BOUND_SIZE 1000

static void bound_payload(char *buf, int i, int size)
{
	memset(buf, 'a' + i % 26, (size_t)size);
	char head[16];
	int n = snprintf(head, sizeof(head), "letter-%02d ", i);
	memcpy(buf, head, (size_t)n);
}

/* The originIds of the kept letters, oldest first, into ids; returns how
 * many. */
static size_t kept_origins(struct client *c, char (*ids)[ID_BUF], size_t max)
{
	cJSON *order = tmpl_str("order", "oldest");
	struct page p = list_page(c, order, DLQ_MAX_LIST_LIMIT, false, 0);
	cJSON_Delete(order);
	ck_assert_msg(!p.has_next && p.matched == p.count, "list: %d letters, matched %g", p.count, p.matched);
	ck_assert_msg((size_t)p.count <= max, "%d letters kept", p.count);
	for(int i = 0; i < p.count; i++){
		const char *o = json_str(cJSON_GetArrayItem(p.letters, i), "originId");
		ck_assert_ptr_nonnull(o);
		snprintf(ids[i], ID_BUF, "%s", o);
	}
	size_t n = (size_t)p.count;
	cJSON_Delete(p.doc);
	return n;
}

/* plugin_opt_dead_letter_keep 4KiB and letters of 1000-byte payloads: the
 * newest are kept, the oldest dropped and counted, the kept bytes within
 * the bound; a letter larger than the bound by itself is not kept, and
 * counted. */
START_TEST(test_bound_drops_oldest)
{
	struct broker *b = STORE_BROKER("dead_letter_keep 4KiB", JOBS);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *worker = client_subscribed(b, "worker", "jobs/#");
	struct client *insp = ops_client(b, "inspector");
	char orig[BOUND_N + 2][ID_BUF];
	char payload[5000];
	for(int i = 0; i < BOUND_N; i++){
		char topic[32];
		snprintf(topic, sizeof(topic), "jobs/%02d", i);
		bound_payload(payload, i, BOUND_SIZE);
		make_letter(pub, worker, topic, payload, BOUND_SIZE, NULL, "too big to bear", orig[i]);
	}
	/* Every letter was kept or dropped. */
	uint64_t deadline = it_now_ms() + (uint64_t)HARNESS_WAIT_MS;
	double kept, dropped;
	while((kept = status_num(insp, NULL, "keptDeadLetters")) + (dropped = status_num(insp, NULL, "deadLettersDropped"))
			!= BOUND_N){
		ck_assert_msg(it_now_ms() < deadline, "kept %g + dropped %g, expected %d letters", kept, dropped, BOUND_N);
		it_sleep_ms(20);
	}
	double bytes = status_num(insp, NULL, "keptDeadLetterBytes");
	char topic[192];
	cJSON *sdoc;
	const cJSON *sdata = status_get(insp, reply_topic(insp, topic, sizeof(topic)), &sdoc);
	ck_assert_msg(json_num(sdata, "deadLetterKeepBytes") == 4096, "deadLetterKeepBytes %g, expected 4096",
			json_num(sdata, "deadLetterKeepBytes"));
	cJSON_Delete(sdoc);
	fprintf(stderr, "letters: bound 4096 bytes, %d letters of %d bytes: %g kept (%g bytes), %g dropped\n",
			BOUND_N, BOUND_SIZE, kept, bytes, dropped);
	/* Each letter counts its payload at least, so at most four fit. */
	ck_assert_msg(kept >= 1 && kept <= 4, "%g letters kept in 4096 bytes", kept);
	ck_assert_msg(bytes <= 4096 && bytes >= kept * BOUND_SIZE, "keptDeadLetterBytes %g for %g letters", bytes, kept);
	ck_assert_msg(status_num(insp, "jobs/#", "deadLettersDropped") == dropped, "jobs/# deadLettersDropped");
	ck_assert_msg(status_num(insp, "jobs/#", "keptDeadLetters") == kept, "jobs/# keptDeadLetters");

	/* The newest are the ones kept, in order. */
	char ids[BOUND_N + 2][ID_BUF];
	size_t k = kept_origins(insp, ids, BOUND_N + 2);
	ck_assert_uint_eq(k, (size_t)kept);
	for(size_t i = 0; i < k; i++){
		ck_assert_msg(!strcmp(ids[i], orig[BOUND_N - k + i]), "kept letter %zu is not of message %zu", i,
				BOUND_N - k + i);
	}
	/* The newest letter's payload is whole. */
	cJSON *order = tmpl_str("order", "newest");
	struct page p = list_page(insp, order, 1, false, 0);
	cJSON_Delete(order);
	char newest[ID_BUF];
	snprintf(newest, sizeof(newest), "%s", json_str(cJSON_GetArrayItem(p.letters, 0), "id"));
	cJSON_Delete(p.doc);
	const cJSON *d;
	cJSON *doc = get_letter(insp, newest, &d);
	bound_payload(payload, BOUND_N - 1, BOUND_SIZE);
	expect_payload(d, payload, BOUND_SIZE, true);
	cJSON_Delete(doc);

	/* Logged, never silently. */
	deadline = it_now_ms() + (uint64_t)HARNESS_WAIT_MS;
	while(!log_has(b, LOG_STORE_FULL)){
		ck_assert_msg(it_now_ms() < deadline, "the log does not say \"%s...\"", LOG_STORE_FULL);
		it_sleep_ms(20);
	}

	/* A letter larger than the bound by itself: not kept, counted; the
	 * kept ones stay. */
	bound_payload(payload, BOUND_N, 5000);
	make_letter(pub, worker, "jobs/big", payload, 5000, NULL, "too big to bear", orig[BOUND_N]);
	deadline = it_now_ms() + (uint64_t)HARNESS_WAIT_MS;
	while(status_num(insp, NULL, "deadLettersDropped") != dropped + 1){
		ck_assert_msg(it_now_ms() < deadline, "the letter larger than the bound was not counted as dropped");
		it_sleep_ms(20);
	}
	ck_assert_msg(status_num(insp, NULL, "keptDeadLetters") == kept, "a letter larger than the bound changed the store");
	char ids2[BOUND_N + 2][ID_BUF];
	ck_assert_uint_eq(kept_origins(insp, ids2, BOUND_N + 2), k);
	for(size_t i = 0; i < k; i++){
		ck_assert_msg(!strcmp(ids2[i], ids[i]), "a letter larger than the bound dropped kept letter %zu", i);
	}

	/* One more of the usual size takes the oldest one's place. */
	bound_payload(payload, BOUND_N + 1, BOUND_SIZE);
	make_letter(pub, worker, "jobs/zz", payload, BOUND_SIZE, NULL, "too big to bear", orig[BOUND_N + 1]);
	deadline = it_now_ms() + (uint64_t)HARNESS_WAIT_MS;
	while(status_num(insp, NULL, "deadLettersDropped") != dropped + 2){
		ck_assert_msg(it_now_ms() < deadline, "deadLettersDropped is not %g", dropped + 2);
		it_sleep_ms(20);
	}
	ck_assert_uint_eq(kept_origins(insp, ids2, BOUND_N + 2), k);
	for(size_t i = 0; i + 1 < k; i++){
		ck_assert_msg(!strcmp(ids2[i], ids[i + 1]), "after one more, kept letter %zu is not the next oldest", i);
	}
	ck_assert_msg(!strcmp(ids2[k - 1], orig[BOUND_N + 1]), "the newest letter was not kept");
	ck_assert_msg(status_num(insp, NULL, "keptDeadLetterBytes") <= 4096, "keptDeadLetterBytes past the bound");
}
END_TEST

/* ---- (4) paging and filters ---- */

#define PAGED_N 25

/* Letter i: on mail/<i> when i % 3 == 2, else jobs/<i>; reason
 * "database timeout" when i % 4 == 0, else "bad format <i>". */
static bool paged_mail(int i)
{
	return i % 3 == 2;
}

static bool paged_timeout(int i)
{
	return i % 4 == 0;
}

/* The indexes of the letters in ids (n), by their letter ids in letter
 * (total); fails on an id that is none of them. */
static void indexes_of(char (*ids)[ID_BUF], size_t n, char (*letter)[ID_BUF], int total, int *out)
{
	for(size_t k = 0; k < n; k++){
		out[k] = -1;
		for(int i = 0; i < total; i++){
			if(!strcmp(ids[k], letter[i])){
				out[k] = i;
			}
		}
		ck_assert_msg(out[k] >= 0, "listed letter %s was never made", ids[k]);
	}
}

/* Lists with tmpl (limit letters a page, all pages) and fails unless
 * exactly the letters i of letter (total, at most PAGED_N) with want(i)
 * come, newest first (or oldest first when tmpl says so). */
static void expect_listing_of(struct client *c, int total, int limit, cJSON *tmpl, char (*letter)[ID_BUF],
		bool (*want)(int, const void *), const void *arg, bool oldest, const char *what)
{
	char ids[PAGED_N + 1][ID_BUF];
	size_t pages;
	ck_assert_int_le(total, PAGED_N);
	size_t n = list_all(c, tmpl, limit, ids, PAGED_N + 1, &pages);
	int got[PAGED_N + 1];
	indexes_of(ids, n, letter, total, got);
	int expected[PAGED_N], m = 0;
	for(int k = 0; k < total; k++){
		int i = oldest ? k : total - 1 - k;
		if(want(i, arg)){
			expected[m++] = i;
		}
	}
	char list[512] = "";
	for(size_t k = 0; k < n; k++){
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%d", k ? "," : "", got[k]);
	}
	ck_assert_msg(n == (size_t)m, "%s: %zu letters (%s), expected %d", what, n, list, m);
	for(int k = 0; k < m; k++){
		ck_assert_msg(got[k] == expected[k], "%s: letter %d listed in place %d (%s)", what, got[k], k, list);
	}
	ck_assert_msg(pages == (size_t)(m == 0 ? 1 : (m + limit - 1) / limit), "%s: %zu pages for %d letters", what, pages, m);
	cJSON_Delete(tmpl);
}

/* The PAGED_N letters of test_paging_and_filters, 10 a page. */
static void expect_listing(struct client *c, cJSON *tmpl, char (*letter)[ID_BUF], bool (*want)(int, const void *),
		const void *arg, bool oldest, const char *what)
{
	expect_listing_of(c, PAGED_N, 10, tmpl, letter, want, arg, oldest, what);
}

static bool want_all(int i, const void *arg)
{
	(void)i;
	(void)arg;
	return true;
}

static bool want_mail(int i, const void *arg)
{
	(void)arg;
	return paged_mail(i);
}

static bool want_timeout(int i, const void *arg)
{
	(void)arg;
	return paged_timeout(i);
}

static bool want_jobs_timeout(int i, const void *arg)
{
	(void)arg;
	return !paged_mail(i) && paged_timeout(i);
}

static bool want_none(int i, const void *arg)
{
	(void)i;
	(void)arg;
	return false;
}

/* Letters whose timeMs lies in [range[0], range[1]]; arg: the letters'
 * times (PAGED_N) and the range. */
struct time_range {
	const double *times;
	double since, until;
};

static bool want_range(int i, const void *arg)
{
	const struct time_range *r = arg;
	return r->times[i] >= r->since && r->times[i] <= r->until;
}

/* 25 letters across two policies, listed 10 a page: each exactly once,
 * newest first, and oldest first with "order":"oldest"; the filters
 * "filter", "deadLetter", "reason", "since" and "until" narrow the list;
 * then a delete and a purge of one policy. */
START_TEST(test_paging_and_filters)
{
	struct broker *b = STORE_BROKER(JOBS, MAIL);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *worker = client_subscribed(b, "worker", "jobs/#");
	struct client *watcher = client_subscribed(b, "watcher", "dead/#");
	struct client *insp = ops_client(b, "inspector");
	client_subscribe(worker, "mail/#", 1);
	char orig[PAGED_N][ID_BUF], letter[PAGED_N][ID_BUF];
	for(int i = 0; i < PAGED_N; i++){
		char topic[32], payload[32], reason[32];
		snprintf(topic, sizeof(topic), "%s/%02d", paged_mail(i) ? "mail" : "jobs", i);
		snprintf(payload, sizeof(payload), "letter-%02d", i);
		if(paged_timeout(i)){
			snprintf(reason, sizeof(reason), "database timeout");
		}else{
			snprintf(reason, sizeof(reason), "bad format %d", i);
		}
		make_letter(pub, worker, topic, payload, (int)strlen(payload), NULL, reason, orig[i]);
		/* The letter as published names its id in the store. */
		const struct it_msg *dl = client_expect(watcher, "dead/#", (size_t)i + 1);
		ck_assert_str_eq(dl->payload, payload);
		ck_assert_str_eq(dl->topic, paged_mail(i) ? "dead/mail" : "dead/jobs");
		expect_dead_letter(dl, topic, orig[i], 1, client_id(worker), paged_mail(i) ? "mail/#" : "jobs/#", reason);
		const char *lid = msg_user(dl, DLQ_PROP_DEAD_LETTER_ID);
		ck_assert_msg(lid && it_is_dlq_id(lid) && msg_user_count(dl, DLQ_PROP_DEAD_LETTER_ID) == 1,
				"dead letter %d does not carry one dead-letter-id", i);
		snprintf(letter[i], sizeof(letter[i]), "%s", lid);
	}
	wait_kept(insp, PAGED_N);
	ck_assert_msg(status_num(insp, "jobs/#", "keptDeadLetters") == 17, "jobs/# keptDeadLetters");
	ck_assert_msg(status_num(insp, "mail/#", "keptDeadLetters") == 8, "mail/# keptDeadLetters");
	ck_assert_msg(status_num(insp, NULL, "deadLettersDropped") == 0, "deadLettersDropped");

	/* Every summary, oldest first in one page of 100. */
	cJSON *t = tmpl_str("order", "oldest");
	struct page p = list_page(insp, t, DLQ_MAX_LIST_LIMIT, false, 0);
	cJSON_Delete(t);
	ck_assert_msg(p.count == PAGED_N && p.matched == PAGED_N && !p.has_next, "one page: %d letters, matched %g",
			p.count, p.matched);
	double times[PAGED_N];
	for(int i = 0; i < PAGED_N; i++){
		char topic[32], reason[32];
		snprintf(topic, sizeof(topic), "%s/%02d", paged_mail(i) ? "mail" : "jobs", i);
		if(paged_timeout(i)){
			snprintf(reason, sizeof(reason), "database timeout");
		}else{
			snprintf(reason, sizeof(reason), "bad format %d", i);
		}
		const struct want w = { letter[i], paged_mail(i) ? "dead/mail" : "dead/jobs", topic, orig[i], reason,
			client_id(worker), paged_mail(i) ? "mail/#" : "jobs/#", 1, 1, 9 };
		const cJSON *s = cJSON_GetArrayItem(p.letters, i);
		expect_summary(s, &w);
		times[i] = json_num(s, "timeMs");
		ck_assert_msg(i == 0 || times[i] >= times[i - 1], "letter %d is older than letter %d", i, i - 1);
	}
	cJSON_Delete(p.doc);
	/* The default page is 20. */
	p = list_page(insp, NULL, 0, false, 0);
	ck_assert_msg(p.count == DLQ_LIST_DEFAULT_LIMIT && p.has_next && p.matched == PAGED_N,
			"default page: %d letters, next %d, matched %g", p.count, p.has_next, p.matched);
	cJSON_Delete(p.doc);

	expect_listing(insp, NULL, letter, want_all, NULL, false, "newest first");
	expect_listing(insp, tmpl_str("order", "newest"), letter, want_all, NULL, false, "order newest");
	expect_listing(insp, tmpl_str("order", "oldest"), letter, want_all, NULL, true, "order oldest");
	expect_listing(insp, tmpl_str("filter", "mail/#"), letter, want_mail, NULL, false, "filter mail/#");
	expect_listing(insp, tmpl_str("deadLetter", "dead/mail"), letter, want_mail, NULL, false, "deadLetter dead/mail");
	expect_listing(insp, tmpl_str("filter", "mail"), letter, want_none, NULL, false, "filter mail (not a policy)");
	expect_listing(insp, tmpl_str("reason", "timeout"), letter, want_timeout, NULL, false, "reason timeout");
	expect_listing(insp, tmpl_str("reason", "Timeout"), letter, want_none, NULL, false, "reason Timeout");
	t = tmpl_str("filter", "jobs/#");
	cJSON_AddStringToObject(t, "reason", "database");
	cJSON_AddStringToObject(t, "order", "oldest");
	expect_listing(insp, t, letter, want_jobs_timeout, NULL, true, "filter jobs/# and reason database");

	/* A time range, as numbers and as RFC 3339 text. */
	struct time_range range = { times, times[10], times[15] };
	t = cJSON_CreateObject();
	cJSON_AddNumberToObject(t, "since", range.since);
	cJSON_AddNumberToObject(t, "until", range.until);
	expect_listing(insp, t, letter, want_range, &range, false, "since and until (ms)");
	p = list_page(insp, NULL, DLQ_MAX_LIST_LIMIT, false, 0);
	char since[64] = "", until[64] = "";
	const cJSON *s;
	cJSON_ArrayForEach(s, p.letters){
		if(!strcmp(json_str(s, "id"), letter[10])) snprintf(since, sizeof(since), "%s", json_str(s, "time"));
		if(!strcmp(json_str(s, "id"), letter[15])) snprintf(until, sizeof(until), "%s", json_str(s, "time"));
	}
	cJSON_Delete(p.doc);
	t = tmpl_str("since", since);
	cJSON_AddStringToObject(t, "until", until);
	expect_listing(insp, t, letter, want_range, &range, false, "since and until (RFC 3339)");
	struct time_range after = { times, times[20], 1e15 };
	t = cJSON_CreateObject();
	cJSON_AddNumberToObject(t, "since", after.since);
	expect_listing(insp, t, letter, want_range, &after, false, "since alone");

	/* A delete takes one letter; a purge one policy's. */
	const cJSON *r;
	cJSON *doc = one_id(insp, DLQ_COMMAND_DELETE_DEAD_LETTERS, letter[0], NULL, &r);
	ck_assert_msg(json_str(r, "result") && !strcmp(json_str(r, "result"), "deleted") && !json_str(r, "error"),
			"delete did not say deleted");
	cJSON_Delete(doc);
	doc = one_id(insp, DLQ_COMMAND_DELETE_DEAD_LETTERS, letter[0], NULL, &r);
	result_error(r, ERR_UNKNOWN, true);
	cJSON_Delete(doc);
	cJSON *cmd = cmd_new(DLQ_COMMAND_PURGE_DEAD_LETTERS);
	cJSON_AddStringToObject(cmd, "filter", "mail/#");
	const cJSON *e;
	doc = ask(insp, cmd, &e);
	const cJSON *pd = entry_data(e);
	ck_assert_msg(json_num(pd, "purged") == 8 && json_num(pd, "notPermitted") == 0, "purge mail/#: purged %g, notPermitted %g",
			json_num(pd, "purged"), json_num(pd, "notPermitted"));
	cJSON_Delete(doc);
	ck_assert_msg(status_num(insp, NULL, "keptDeadLetters") == 16, "keptDeadLetters after delete and purge");
	ck_assert_msg(status_num(insp, "mail/#", "keptDeadLetters") == 0, "mail/# keptDeadLetters after the purge");
	ck_assert_msg(status_num(insp, "mail/#", "keptDeadLetterBytes") == 0, "mail/# keptDeadLetterBytes after the purge");
	p = list_page(insp, NULL, DLQ_MAX_LIST_LIMIT, false, 0);
	ck_assert_msg(p.count == 16 && p.matched == 16, "after delete and purge: %d letters, matched %g", p.count, p.matched);
	cJSON_ArrayForEach(s, p.letters){
		expect_str_member(s, "filter", "jobs/#");
		ck_assert_msg(strcmp(json_str(s, "id"), letter[0]), "the deleted letter is listed");
	}
	cJSON_Delete(p.doc);
	cmd = cmd_new(DLQ_COMMAND_PURGE_DEAD_LETTERS);
	cJSON_AddBoolToObject(cmd, "all", true);
	doc = ask(insp, cmd, &e);
	pd = entry_data(e);
	ck_assert_msg(json_num(pd, "purged") == 16 && json_num(pd, "notPermitted") == 0, "purge all: purged %g",
			json_num(pd, "purged"));
	cJSON_Delete(doc);
	ck_assert_msg(status_num(insp, NULL, "keptDeadLetters") == 0, "keptDeadLetters after purging all");
	ck_assert_msg(status_num(insp, NULL, "keptDeadLetterBytes") == 0, "keptDeadLetterBytes after purging all");
}
END_TEST

/* Letters of two causes, nack (the last attempt NACKed) and final (a
 * final NACK), across two policies: "cause" lists one cause's, newest
 * first, page after page, also with a policy's filter; each summary says
 * its cause; a cause no letter has lists none. */
#define CAUSED_N 12

static bool caused_final(int i, const void *arg)
{
	(void)arg;
	return i % 3 == 0;
}

static bool caused_nack(int i, const void *arg)
{
	return !caused_final(i, arg);
}

static bool caused_final_mail(int i, const void *arg)
{
	return caused_final(i, arg) && i % 2 == 1;
}

START_TEST(test_cause_filter)
{
	struct broker *b = STORE_BROKER(JOBS, MAIL);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *worker = client_subscribed(b, "worker", "jobs/#");
	struct client *insp = ops_client(b, "inspector");
	client_subscribe(worker, "mail/#", 1);
	char letter[CAUSED_N][ID_BUF];
	for(int i = 0; i < CAUSED_N; i++){
		char topic[32], payload[32];
		snprintf(topic, sizeof(topic), "%s/%02d", i % 2 ? "mail" : "jobs", i);
		snprintf(payload, sizeof(payload), "caused-%02d", i);
		char id[ID_BUF];
		if(!caused_final(i, NULL)){
			make_letter(pub, worker, topic, payload, (int)strlen(payload), NULL, "nacked", id);
			continue;
		}
		size_t n = client_count(worker, topic) + 1;
		ck_assert_int_lt(client_publish(pub, topic, payload, (int)strlen(payload), 1, NULL), 0x80);
		snprintf(id, sizeof(id), "%s", expect_original(client_expect(worker, topic, n)));
		mosquitto_property *p = NULL;
		ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, DLQ_PROP_NACK_FINAL, "true"), 0);
		ck_assert_int_lt(client_publish(worker, DLQ_NACK_TOPIC, id, DLQ_ID_LEN, 1, p), 0x80);
		mosquitto_property_free_all(&p);
	}
	wait_kept(insp, CAUSED_N);
	/* The letters' ids, oldest first, and each summary's cause. */
	cJSON *t = tmpl_str("order", "oldest");
	struct page p = list_page(insp, t, DLQ_MAX_LIST_LIMIT, false, 0);
	cJSON_Delete(t);
	ck_assert_msg(p.count == CAUSED_N, "%d letters listed, expected %d", p.count, CAUSED_N);
	for(int i = 0; i < CAUSED_N; i++){
		const cJSON *s = cJSON_GetArrayItem(p.letters, i);
		snprintf(letter[i], sizeof(letter[i]), "%s", json_str(s, "id"));
		expect_str_member(s, "cause", caused_final(i, NULL) ? DLQ_CAUSE_FINAL : DLQ_CAUSE_NACK);
	}
	cJSON_Delete(p.doc);

	expect_listing_of(insp, CAUSED_N, 3, tmpl_str("cause", DLQ_CAUSE_FINAL), letter, caused_final, NULL, false, "cause final");
	expect_listing_of(insp, CAUSED_N, 3, tmpl_str("cause", DLQ_CAUSE_NACK), letter, caused_nack, NULL, false, "cause nack");
	t = tmpl_str("cause", DLQ_CAUSE_FINAL);
	cJSON_AddStringToObject(t, "filter", "mail/#");
	cJSON_AddStringToObject(t, "order", "oldest");
	expect_listing_of(insp, CAUSED_N, 3, t, letter, caused_final_mail, NULL, true, "cause final and filter mail/#");
	expect_listing_of(insp, CAUSED_N, 3, tmpl_str("cause", DLQ_CAUSE_ACK_TIMEOUT), letter, want_none, NULL, false,
			"cause ack_timeout");
	/* Each cause's letters in a page of their own, every summary of it. */
	t = tmpl_str("cause", DLQ_CAUSE_NACK);
	p = list_page(insp, t, DLQ_MAX_LIST_LIMIT, false, 0);
	cJSON_Delete(t);
	ck_assert_msg(p.count == 8 && p.matched == 8, "cause nack: %d letters, matched %g", p.count, p.matched);
	const cJSON *s;
	cJSON_ArrayForEach(s, p.letters){
		expect_str_member(s, "cause", DLQ_CAUSE_NACK);
	}
	cJSON_Delete(p.doc);
}
END_TEST

/* ---- (5) bad input ---- */

/* One bad command and what its error says: exact text, or text the error
 * must contain. */
struct bad {
	const char *json;      /* the command object */
	const char *error;
	bool exact;
};

static const struct bad bad_commands[] = {
	{ "{\"command\":\"listDeadLetters\",\"limit\":0}", "limit", false },
	{ "{\"command\":\"listDeadLetters\",\"limit\":101}", "limit", false },
	{ "{\"command\":\"listDeadLetters\",\"limit\":-1}", "limit", false },
	{ "{\"command\":\"listDeadLetters\",\"limit\":2.5}", "limit", false },
	{ "{\"command\":\"listDeadLetters\",\"limit\":\"x\"}", "limit", false },
	{ "{\"command\":\"listDeadLetters\",\"cursor\":\"abc\"}", "cursor", false },
	{ "{\"command\":\"listDeadLetters\",\"order\":\"sideways\"}", "order", false },
	{ "{\"command\":\"listDeadLetters\",\"since\":\"yesterday\"}", "since", false },
	{ "{\"command\":\"listDeadLetters\",\"until\":[1]}", "until", false },
	{ "{\"command\":\"listDeadLetters\",\"filter\":7}", "filter", false },
	{ "{\"command\":\"listDeadLetters\",\"reason\":true}", "reason", false },
	{ "{\"command\":\"listDeadLetters\",\"cause\":\"ack-timeout\"}", ERR_UNKNOWN_CAUSE("ack-timeout"), true },
	{ "{\"command\":\"listDeadLetters\",\"cause\":\"\"}", ERR_UNKNOWN_CAUSE(""), true },
	{ "{\"command\":\"listDeadLetters\",\"cause\":7}", "\"cause\" must be a string", true },
	{ "{\"command\":\"getDeadLetter\"}", ERR_NO_ID, true },
	{ "{\"command\":\"getDeadLetter\",\"id\":42}", ERR_NO_ID, true },
	{ "{\"command\":\"getDeadLetter\",\"id\":\"" UNKNOWN_ID "\"}", ERR_UNKNOWN, true },
	{ "{\"command\":\"redriveDeadLetters\"}", ERR_NO_IDS, true },
	{ "{\"command\":\"redriveDeadLetters\",\"ids\":\"" UNKNOWN_ID "\"}", ERR_NO_IDS, true },
	{ "{\"command\":\"redriveDeadLetters\",\"ids\":[]}", ERR_NO_IDS, true },
	{ "{\"command\":\"redriveDeadLetters\",\"ids\":[42]}", ERR_ID_NOT_STRING, true },
	{ "{\"command\":\"redriveDeadLetters\",\"ids\":[\"" UNKNOWN_ID "\"],\"topic\":\"jobs/#\"}", ERR_TOPIC_WILDCARD, true },
	{ "{\"command\":\"redriveDeadLetters\",\"ids\":[\"" UNKNOWN_ID "\"],\"topic\":\"jobs/+/x\"}", ERR_TOPIC_WILDCARD, true },
	{ "{\"command\":\"deleteDeadLetters\",\"ids\":{}}", ERR_NO_IDS, true },
	{ "{\"command\":\"deleteDeadLetters\",\"ids\":[null]}", ERR_ID_NOT_STRING, true },
	{ "{\"command\":\"purgeDeadLetters\"}", ERR_NO_FILTER, true },
	{ "{\"command\":\"purgeDeadLetters\",\"all\":false}", ERR_NO_FILTER, true },
};

/* Garbage members of the store's commands get clear errors, the sender
 * stays connected, the letter kept stays, and the broker answers after. */
START_TEST(test_bad_input)
{
	struct broker *b = STORE_BROKER(JOBS);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *worker = client_subscribed(b, "worker", "jobs/#");
	struct client *ops = ops_client(b, "ops");
	char orig[ID_BUF];
	make_letter(pub, worker, "jobs/x", "kept", 4, NULL, "kept", orig);
	wait_kept(ops, 1);

	for(size_t i = 0; i < ARRAY_LEN(bad_commands); i++){
		cJSON *cmd = cJSON_Parse(bad_commands[i].json);
		ck_assert_msg(cmd != NULL, "test data %zu is not JSON", i);
		const cJSON *e;
		cJSON *doc = ask(ops, cmd, &e);
		const char *err = json_str(e, "error");
		fprintf(stderr, "letters: %s -> %s\n", bad_commands[i].json, err ? err : "(no error)");
		entry_error(e, bad_commands[i].error, bad_commands[i].exact);
		cJSON_Delete(doc);
	}

	/* 101 ids; 100 unknown ones are answered one by one. */
	const char *ids[DLQ_MAX_LETTER_IDS + 1];
	for(size_t i = 0; i < ARRAY_LEN(ids); i++){
		ids[i] = UNKNOWN_ID;
	}
	static const char *const id_commands[] = { DLQ_COMMAND_REDRIVE_DEAD_LETTERS, DLQ_COMMAND_DELETE_DEAD_LETTERS };
	for(size_t c = 0; c < ARRAY_LEN(id_commands); c++){
		cJSON *cmd = cmd_new(id_commands[c]);
		cmd_ids(cmd, DLQ_MAX_LETTER_IDS + 1, ids);
		const cJSON *e;
		cJSON *doc = ask(ops, cmd, &e);
		entry_error(e, ERR_TOO_MANY_IDS, true);
		cJSON_Delete(doc);
		cmd = cmd_new(id_commands[c]);
		cmd_ids(cmd, DLQ_MAX_LETTER_IDS, ids);
		doc = ask(ops, cmd, &e);
		const cJSON *results = cJSON_GetObjectItemCaseSensitive(entry_data(e), "results");
		ck_assert_msg(cJSON_GetArraySize(results) == DLQ_MAX_LETTER_IDS, "%s of 100 ids: %d results", id_commands[c],
				cJSON_GetArraySize(results));
		const cJSON *r;
		cJSON_ArrayForEach(r, results){
			result_error(r, ERR_UNKNOWN, true);
		}
		cJSON_Delete(doc);
	}

	/* A good and a bad command in one message: each answered in its place. */
	static const char two[] = "{\"commands\":[{\"command\":\"listDeadLetters\",\"limit\":\"x\",\"correlationData\":\"k1\"},"
		"{\"command\":\"listDeadLetters\",\"correlationData\":\"k2\"}]}";
	char topic[192];
	mosquitto_property *p = NULL;
	ck_assert_int_eq(mosquitto_property_add_string(&p, MQTT_PROP_RESPONSE_TOPIC, reply_topic(ops, topic, sizeof(topic))), 0);
	size_t n = client_count(ops, topic) + 1;
	ck_assert_int_lt(client_publish(ops, DLQ_CONTROL_TOPIC, two, (int)strlen(two), 1, p), 0x80);
	mosquitto_property_free_all(&p);
	cJSON *doc = expect_reply(client_expect(ops, topic, n), 2);
	entry_error(reply_entry(doc, 0), "limit", false);
	ck_assert_str_eq(json_str(reply_entry(doc, 0), "correlationData"), "k1");
	ck_assert_str_eq(json_str(reply_entry(doc, 1), "correlationData"), "k2");
	const cJSON *d = entry_data(reply_entry(doc, 1));
	ck_assert_msg(json_num(d, "matched") == 1, "the good command of two did not list the letter");
	cJSON_Delete(doc);

	/* Nothing of that disconnected anyone, took the letter, or stopped
	 * the broker. */
	ck_assert_msg(client_connected(ops) && client_disconnects(ops) == 0, "the sender was disconnected");
	ck_assert_msg(status_num(ops, NULL, "keptDeadLetters") == 1, "the kept letter is gone");
	struct page pg = list_page(ops, NULL, 0, false, 0);
	ck_assert_msg(pg.count == 1 && pg.matched == 1, "list after garbage: %d letters", pg.count);
	expect_str_member(cJSON_GetArrayItem(pg.letters, 0), "originId", orig);
	cJSON_Delete(pg.doc);
	clients_settle(worker, ops, pub);
	client_expect_exactly(worker, "jobs/#", 1);
}
END_TEST

/* A command document over 1 MiB gets the existing size error, unparsed,
 * and the broker answers after. */
START_TEST(test_oversized_command)
{
	struct broker *b = STORE_BROKER(JOBS);
	struct client *ops = ops_client(b, "ops");
	size_t size = DLQ_MAX_CONTROL_BYTES + 64 * 1024;
	char *text = malloc(size + 1);
	ck_assert_ptr_nonnull(text);
	static const char head[] = "{\"commands\":[{\"command\":\"listDeadLetters\",\"reason\":\"";
	static const char tail[] = "\"}]}";
	memcpy(text, head, sizeof(head) - 1);
	memset(text + sizeof(head) - 1, 'x', size - (sizeof(head) - 1) - (sizeof(tail) - 1));
	memcpy(text + size - (sizeof(tail) - 1), tail, sizeof(tail) - 1);
	text[size] = '\0';
	/* Under every line's max_packet_size (2.1 defaults to 2000000 bytes). */
	cJSON *doc = ask_text(ops, text, size);
	free(text);
	const char *err = json_str(reply_entry(doc, 0), "error");
	ck_assert_msg(err && strstr(err, "payload larger than 1048576 bytes"), "error: %s", err ? err : "none");
	cJSON_Delete(doc);
	ck_assert_msg(status_num(ops, NULL, "keptDeadLetters") == 0, "getStatus after the oversized command");
	ck_assert(client_connected(ops));
}
END_TEST

/* ---- (6) access ---- */

/* A raw v5 client with a username, whose commands carry the response
 * topic "$CONTROL/dlq/v1/response/<user>" (under $CONTROL/dlq/v1/#, the
 * one tree nosy may use). */
struct asker {
	struct raw *r;
	char reply[128];
};

static void asker_new(struct asker *a, struct broker *b, const char *user)
{
	struct raw_options o = { .id = user, .protocol = MQTT_PROTOCOL_V5, .clean = true, .username = user };
	a->r = raw_new(b, &o);
	raw_connect(a->r);
	snprintf(a->reply, sizeof(a->reply), DLQ_RESPONSE_TOPIC "/%s", user);
	ck_assert_uint_lt(raw_subscribe(a->r, a->reply, 1), 0x80);
	raw_set_response_topic(a->r, a->reply);
}

/* Sends {"commands":[cmd]} (taking cmd) and returns the reply; *e its one
 * response. */
static cJSON *raw_ask(struct asker *a, cJSON *cmd, const cJSON **e)
{
	cJSON *doc = cJSON_CreateObject();
	cJSON_AddItemToArray(cJSON_AddArrayToObject(doc, "commands"), cmd);
	char *text = json_text(doc);
	cJSON_Delete(doc);
	unsigned rc = raw_publish(a->r, DLQ_CONTROL_TOPIC, text, strlen(text), 1);
	ck_assert_msg(rc < 0x80, "the broker refused %s's command (0x%02x): %s", raw_id(a->r), rc, text);
	free(text);
	const struct raw_msg *m;
	for(;;){
		m = raw_expect(a->r);
		if(m->qos){
			raw_puback(a->r, m->mid);
		}
		if(!strcmp(m->topic, a->reply)) break;
	}
	cJSON *reply = cJSON_Parse(m->payload);
	ck_assert_msg(reply != NULL, "reply to %s is not JSON: %s", raw_id(a->r), m->payload);
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(reply, "responses");
	ck_assert_msg(cJSON_GetArraySize(arr) == 1, "reply to %s: %s", raw_id(a->r), m->payload);
	*e = cJSON_GetArrayItem(arr, 0);
	ck_assert(!raw_closed(a->r));
	return reply;
}

static cJSON *raw_one_id(struct asker *a, const char *command, const char *id, const char *topic, const cJSON **r)
{
	const cJSON *e;
	cJSON *doc = raw_ask(a, one_id_command(command, id, topic), &e);
	*r = only_result(e, id);
	return doc;
}

/* Every store command from a answers ERR_NO_ACL_CHECK. */
static void expect_all_refused_without_check(struct asker *a, const char *id)
{
	static const char *const commands[] = { DLQ_COMMAND_LIST_DEAD_LETTERS, DLQ_COMMAND_GET_DEAD_LETTER,
		DLQ_COMMAND_REDRIVE_DEAD_LETTERS, DLQ_COMMAND_DELETE_DEAD_LETTERS, DLQ_COMMAND_PURGE_DEAD_LETTERS };
	for(size_t i = 0; i < ARRAY_LEN(commands); i++){
		cJSON *cmd = cmd_new(commands[i]);
		if(i == 1){
			cJSON_AddStringToObject(cmd, "id", id);
		}else if(i == 2 || i == 3){
			cmd_ids(cmd, 1, &id);
		}else if(i == 4){
			cJSON_AddStringToObject(cmd, "filter", "jobs/#");
		}
		const cJSON *e;
		cJSON *doc = raw_ask(a, cmd, &e);
		entry_error(e, ERR_NO_ACL_CHECK, true);
		cJSON_Delete(doc);
	}
}

/* The default access mode with an acl_file: "inspector" may read dead/#
 * and write jobs/#, "nosy" nothing but $CONTROL/dlq/v1/#. Nosy lists
 * nothing and may take nothing; the inspector lists, reads and redrives,
 * but not to a topic it may not write. Where the broker does not export
 * mosquitto_acl_check, every store command is refused, saying what to set. */
START_TEST(test_access)
{
	struct broker *b = broker_new(__func__);
	broker_plugin(b);
	broker_conf(b, "plugin_opt_%s", JOBS);
	broker_conf(b, "acl_file %s", broker_file(b, "acl",
			"topic readwrite jobs/#\n"
			"topic write $CONTROL/dlq/v1/#\n"
			"topic read $CONTROL/dlq/v1/response\n"
			"pattern readwrite harness/sync/%c\n"
			"user inspector\n"
			"topic read dead/#\n"
			"topic write jobs/#\n"
			"topic readwrite $CONTROL/dlq/v1/#\n"
			"user nosy\n"
			"topic readwrite $CONTROL/dlq/v1/#\n"));
	broker_start(b);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *worker = client_subscribed(b, "worker", "jobs/#");
	char orig[2][ID_BUF];
	make_letter(pub, worker, "jobs/x", "secret-1", 8, NULL, "r1", orig[0]);
	make_letter(pub, worker, "jobs/y", "secret-2", 8, NULL, "r2", orig[1]);
	struct asker insp, nosy;
	asker_new(&insp, b, "inspector");
	asker_new(&nosy, b, "nosy");

	/* getStatus is not a store command: it answers everywhere. */
	uint64_t deadline = it_now_ms() + (uint64_t)HARNESS_WAIT_MS;
	for(;;){
		const cJSON *e;
		cJSON *doc = raw_ask(&insp, cmd_new(DLQ_COMMAND_GET_STATUS), &e);
		double kept = json_num(cJSON_GetObjectItemCaseSensitive(entry_data(e), "totals"), "keptDeadLetters");
		cJSON_Delete(doc);
		if(kept == 2) break;
		ck_assert_msg(it_now_ms() < deadline, "keptDeadLetters is %g, expected 2", kept);
		it_sleep_ms(20);
	}

	if(lacks_acl_check(b)){
		fprintf(stderr, "letters: mosquitto %d does not export mosquitto_acl_check: "
				"every store command is refused in the default access mode\n", broker_version());
		expect_all_refused_without_check(&insp, UNKNOWN_ID);
		expect_all_refused_without_check(&nosy, UNKNOWN_ID);
		const cJSON *e;
		cJSON *doc = raw_ask(&insp, cmd_new(DLQ_COMMAND_GET_STATUS), &e);
		ck_assert_msg(json_num(cJSON_GetObjectItemCaseSensitive(entry_data(e), "totals"), "keptDeadLetters") == 2,
				"the refused commands changed the store");
		cJSON_Delete(doc);
		clients_settle(worker, pub);
		client_expect_exactly(worker, "jobs/#", 2);
		raw_free(insp.r);
		raw_free(nosy.r);
		return;
	}

	/* The inspector lists both. */
	cJSON *t = tmpl_str("order", "oldest");
	cJSON *cmd = cJSON_Duplicate(t, true);
	cJSON_AddStringToObject(cmd, "command", DLQ_COMMAND_LIST_DEAD_LETTERS);
	const cJSON *e;
	cJSON *doc = raw_ask(&insp, cmd, &e);
	const cJSON *d = entry_data(e);
	const cJSON *letters = cJSON_GetObjectItemCaseSensitive(d, "letters");
	ck_assert_msg(cJSON_GetArraySize(letters) == 2 && json_num(d, "matched") == 2, "the inspector lists %d letters",
			cJSON_GetArraySize(letters));
	char ids[2][ID_BUF];
	for(int i = 0; i < 2; i++){
		const cJSON *s = cJSON_GetArrayItem(letters, i);
		expect_str_member(s, "originId", orig[i]);
		snprintf(ids[i], sizeof(ids[i]), "%s", json_str(s, "id"));
	}
	cJSON_Delete(doc);

	/* Nosy sees nothing and takes nothing. */
	cmd = cJSON_Duplicate(t, true);
	cJSON_AddStringToObject(cmd, "command", DLQ_COMMAND_LIST_DEAD_LETTERS);
	doc = raw_ask(&nosy, cmd, &e);
	d = entry_data(e);
	ck_assert_msg(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(d, "letters")) == 0 && json_num(d, "matched") == 0
			&& cJSON_GetObjectItemCaseSensitive(d, "next") == NULL, "nosy lists letters");
	cJSON_Delete(doc);
	cmd = cmd_new(DLQ_COMMAND_GET_DEAD_LETTER);
	cJSON_AddStringToObject(cmd, "id", ids[0]);
	doc = raw_ask(&nosy, cmd, &e);
	entry_error(e, "not permitted: this client may not read \"dead/jobs\"", true);
	cJSON_Delete(doc);
	const cJSON *r;
	doc = raw_one_id(&nosy, DLQ_COMMAND_REDRIVE_DEAD_LETTERS, ids[0], NULL, &r);
	result_error(r, "not permitted: this client may not read \"dead/jobs\"", true);
	cJSON_Delete(doc);
	doc = raw_one_id(&nosy, DLQ_COMMAND_REDRIVE_DEAD_LETTERS, ids[0], "jobs/x", &r);
	result_error(r, "not permitted", false);
	cJSON_Delete(doc);
	doc = raw_one_id(&nosy, DLQ_COMMAND_DELETE_DEAD_LETTERS, ids[1], NULL, &r);
	result_error(r, "not permitted", false);
	cJSON_Delete(doc);
	cmd = cmd_new(DLQ_COMMAND_PURGE_DEAD_LETTERS);
	cJSON_AddStringToObject(cmd, "filter", "jobs/#");
	doc = raw_ask(&nosy, cmd, &e);
	d = entry_data(e);
	ck_assert_msg(json_num(d, "purged") == 0 && json_num(d, "notPermitted") == 2, "nosy's purge: purged %g, notPermitted %g",
			json_num(d, "purged"), json_num(d, "notPermitted"));
	cJSON_Delete(doc);
	cmd = cmd_new(DLQ_COMMAND_PURGE_DEAD_LETTERS);
	cJSON_AddBoolToObject(cmd, "all", true);
	doc = raw_ask(&nosy, cmd, &e);
	d = entry_data(e);
	ck_assert_msg(json_num(d, "purged") == 0 && json_num(d, "notPermitted") == 2, "nosy's purge all: purged %g",
			json_num(d, "purged"));
	cJSON_Delete(doc);
	clients_settle(worker, pub);
	client_expect_exactly(worker, "jobs/#", 2);

	/* The inspector reads one, may not redrive it where it may not
	 * write, and redrives it to its origin topic. */
	cmd = cmd_new(DLQ_COMMAND_GET_DEAD_LETTER);
	cJSON_AddStringToObject(cmd, "id", ids[0]);
	doc = raw_ask(&insp, cmd, &e);
	expect_payload(entry_data(e), "secret-1", 8, true);
	cJSON_Delete(doc);
	doc = raw_one_id(&insp, DLQ_COMMAND_REDRIVE_DEAD_LETTERS, ids[0], "other/x", &r);
	result_error(r, "not permitted: this client may not write \"other/x\"", true);
	cJSON_Delete(doc);
	doc = raw_one_id(&insp, DLQ_COMMAND_REDRIVE_DEAD_LETTERS, ids[0], NULL, &r);
	result_redriven(r, "jobs/x", true);
	cJSON_Delete(doc);
	const struct it_msg *again = client_expect(worker, "jobs/#", 3);
	ck_assert_str_eq(again->topic, "jobs/x");
	ck_assert_str_eq(again->payload, "secret-1");
	doc = raw_one_id(&insp, DLQ_COMMAND_DELETE_DEAD_LETTERS, ids[1], NULL, &r);
	ck_assert_msg(json_str(r, "result") && !strcmp(json_str(r, "result"), "deleted"), "the inspector's delete");
	cJSON_Delete(doc);
	doc = raw_ask(&insp, cmd_new(DLQ_COMMAND_GET_STATUS), &e);
	ck_assert_msg(json_num(cJSON_GetObjectItemCaseSensitive(entry_data(e), "totals"), "keptDeadLetters") == 0,
			"letters left after the inspector took both");
	cJSON_Delete(doc);
	cJSON_Delete(t);
	clients_settle(worker, pub);
	client_expect_exactly(worker, "jobs/#", 3);
	raw_free(insp.r);
	raw_free(nosy.r);
}
END_TEST

/* ---- (7) the store off ---- */

/* plugin_opt_dead_letter_keep 0: dead letters are published as before and
 * nothing is kept; the store's commands say the store is off. */
START_TEST(test_store_off)
{
	struct broker *b = STORE_BROKER("dead_letter_keep 0", JOBS);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *worker = client_subscribed(b, "worker", "jobs/#");
	struct client *watcher = client_subscribed(b, "watcher", "dead/#");
	struct client *ops = ops_client(b, "ops");
	char orig[ID_BUF];
	make_letter(pub, worker, "jobs/x", "gone", 4, NULL, "r", orig);
	const struct it_msg *dl = client_expect(watcher, "dead/#", 1);
	expect_dead_letter(dl, "jobs/x", orig, 1, client_id(worker), "jobs/#", "r");
	/* Not kept, so not named. */
	ck_assert_msg(msg_user(dl, DLQ_PROP_DEAD_LETTER_ID) == NULL, "a dead letter named with the store off");
	char topic[192];
	cJSON *sdoc;
	const cJSON *sdata = status_get(ops, reply_topic(ops, topic, sizeof(topic)), &sdoc);
	ck_assert_msg(json_num(sdata, "deadLetterKeepBytes") == 0, "deadLetterKeepBytes");
	ck_assert_msg(json_num(cJSON_GetObjectItemCaseSensitive(sdata, "totals"), "keptDeadLetters") == 0, "keptDeadLetters");
	cJSON_Delete(sdoc);
	const cJSON *e;
	cJSON *doc = ask(ops, cmd_new(DLQ_COMMAND_LIST_DEAD_LETTERS), &e);
	entry_error(e, ERR_OFF, true);
	cJSON_Delete(doc);
	const char *lid = msg_user(dl, DLQ_PROP_DEAD_LETTER_ID);
	const char *id = lid ? lid : UNKNOWN_ID;
	cJSON *cmd = cmd_new(DLQ_COMMAND_REDRIVE_DEAD_LETTERS);
	cmd_ids(cmd, 1, &id);
	doc = ask(ops, cmd, &e);
	entry_error(e, ERR_OFF, true);
	cJSON_Delete(doc);
	clients_settle(worker, watcher, ops);
	client_expect_exactly(worker, "jobs/#", 1);
	client_expect_exactly(watcher, NULL, 1);
}
END_TEST

/* A policy's own bound (dead_letter_keep= on its line): its letters are
 * dropped, oldest first and counted for it, while the other policy's stay. */
START_TEST(test_policy_bound)
{
	struct broker *b = STORE_BROKER("policy jobs/# max_attempts=1 dead_letter=dead/jobs dead_letter_keep=3KiB",
			"policy mail/# max_attempts=1 dead_letter=dead/mail");
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *worker = client_subscribed(b, "worker", "jobs/#");
	struct client *ops = ops_client(b, "ops");
	client_subscribe(worker, "mail/#", 1);
	char payload[1000];
	memset(payload, 'k', sizeof(payload));
	char orig[ID_BUF];
	for(int i = 0; i < 5; i++){
		make_letter(pub, worker, "jobs/x", payload, (int)sizeof(payload), NULL, "r", orig);
		make_letter(pub, worker, "mail/x", payload, (int)sizeof(payload), NULL, "r", orig);
	}
	wait_kept(ops, 5 + status_num(ops, "jobs/#", "keptDeadLetters"));
	double jobs = status_num(ops, "jobs/#", "keptDeadLetters");
	ck_assert_msg(jobs >= 1 && jobs < 5, "jobs/# keeps %g letters under its 3KiB", jobs);
	ck_assert_msg(status_num(ops, "jobs/#", "keptDeadLetterBytes") <= 3072, "jobs/# passes its bound");
	ck_assert_msg(status_num(ops, "jobs/#", "deadLettersDropped") == 5 - jobs, "jobs/# dropped");
	ck_assert_msg(status_num(ops, "mail/#", "keptDeadLetters") == 5, "mail/# lost letters to jobs/#'s bound");
	ck_assert_msg(status_num(ops, "mail/#", "deadLettersDropped") == 0, "mail/# dropped");
}
END_TEST

/* ---- (8) a large payload, $SYS ---- */

/* getDeadLetter gives at most DLQ_MAX_LETTER_PAYLOAD_REPLY bytes of a
 * payload, saying it was cut; payloadBytes is the whole size. */
START_TEST(test_large_payload_cut)
{
	struct broker *b = STORE_BROKER(JOBS);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *worker = client_subscribed(b, "worker", "jobs/#");
	struct client *ops = ops_client(b, "ops");
	enum { SIZE = 300 * 1000 };
	char *payload = malloc(SIZE);
	ck_assert_ptr_nonnull(payload);
	memset(payload, 'p', SIZE);
	char orig[ID_BUF];
	make_letter(pub, worker, "jobs/big", payload, SIZE, NULL, "large", orig);
	free(payload);
	wait_kept(ops, 1);
	struct page p = list_page(ops, NULL, 0, false, 0);
	ck_assert_int_eq(p.count, 1);
	const struct want w = { NULL, "dead/jobs", "jobs/big", orig, "large", client_id(worker), "jobs/#", 1, 1, SIZE };
	expect_summary(cJSON_GetArrayItem(p.letters, 0), &w);
	char id[ID_BUF];
	snprintf(id, sizeof(id), "%s", json_str(cJSON_GetArrayItem(p.letters, 0), "id"));
	cJSON_Delete(p.doc);
	const cJSON *d;
	cJSON *doc = get_letter(ops, id, &d);
	const char *got = json_str(d, "payload");
	const char *enc = json_str(d, "payloadEncoding");
	ck_assert_msg(enc && !strcmp(enc, "utf-8"), "payloadEncoding %s", enc ? enc : "(none)");
	ck_assert_msg(got && strlen(got) == DLQ_MAX_LETTER_PAYLOAD_REPLY && strspn(got, "p") == strlen(got),
			"a %d-byte payload given as %zu bytes", SIZE, got ? strlen(got) : 0);
	ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "payloadTruncated")), "payloadTruncated is not true");
	ck_assert_msg(json_num(d, "payloadBytes") == SIZE, "payloadBytes %g", json_num(d, "payloadBytes"));
	cJSON_Delete(doc);
	/* The letter kept is whole: redriven, the worker gets all of it. */
	const cJSON *r;
	doc = one_id(ops, DLQ_COMMAND_REDRIVE_DEAD_LETTERS, id, NULL, &r);
	result_redriven(r, "jobs/big", true);
	cJSON_Delete(doc);
	const struct it_msg *again = client_expect(worker, "jobs/big", 2);
	ck_assert_int_eq(again->payloadlen, SIZE);
	ck_assert_uint_eq(strspn(again->payload, "p"), (size_t)SIZE);
}
END_TEST

#define SYS_KEPT DLQ_SYS_TOPIC_PREFIX "kept_dead_letters"
#define SYS_KEPT_BYTES DLQ_SYS_TOPIC_PREFIX "kept_dead_letter_bytes"

/* The last value received on topic, or NULL. */
static const char *last_value(struct client *c, const char *topic)
{
	size_t n = client_count(c, topic);
	return n ? client_msg(c, topic, n - 1)->payload : NULL;
}

/* $SYS shows the kept letters and bytes (broker/dlq/kept_dead_letters
 * and broker/dlq/kept_dead_letter_bytes, totals, snake_case as the other $SYS topics), published in the same pass
 * as the other values: once dead_letters says 1, they say 1 and the bytes
 * getStatus gives. */
START_TEST(test_sys_topics)
{
	struct broker *b = STORE_BROKER(JOBS, "sys_interval 1s");
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *worker = client_subscribed(b, "worker", "jobs/#");
	struct client *sys = ops_client(b, "sys");
	client_subscribe(sys, DLQ_SYS_TOPIC_PREFIX "#", 1);
	char orig[ID_BUF];
	make_letter(pub, worker, "jobs/x", "job", 3, NULL, "r", orig);
	uint64_t deadline = it_now_ms() + (uint64_t)HARNESS_WAIT_MS;
	while(client_find_payload(sys, DLQ_SYS_TOPIC_PREFIX "dead_letters", "1", 0) == NULL){
		ck_assert_msg(it_now_ms() < deadline, "no dead_letters 1 on $SYS");
		client_wait(sys, DLQ_SYS_TOPIC_PREFIX "dead_letters", client_count(sys, DLQ_SYS_TOPIC_PREFIX "dead_letters") + 1,
				100);
	}
	clients_settle(sys);
	const char *kept = last_value(sys, SYS_KEPT);
	const char *bytes = last_value(sys, SYS_KEPT_BYTES);
	if(kept == NULL || bytes == NULL){
		fprintf(stderr, "letters: the $SYS topics received:\n");
		client_dump(sys, DLQ_SYS_TOPIC_PREFIX "#");
	}
	ck_assert_msg(kept && !strcmp(kept, "1"), "%s is %s, expected 1", SYS_KEPT, kept ? kept : "(never published)");
	char want[32];
	snprintf(want, sizeof(want), "%.0f", status_num(sys, NULL, "keptDeadLetterBytes"));
	ck_assert_msg(bytes && !strcmp(bytes, want), "%s is %s, expected %s", SYS_KEPT_BYTES, bytes ? bytes : "(never published)",
			want);
}
END_TEST

/* ---- (9) the age bound (issue 38, part 2) ---- */

#define LOG_EXPIRED "dropped kept dead letters past their age"

/* Waits until c has received payload on topic (a $SYS value). */
static void wait_sys_value(struct client *c, const char *topic, const char *payload)
{
	uint64_t deadline = it_now_ms() + (uint64_t)HARNESS_WAIT_MS;
	while(client_find_payload(c, topic, payload, 0) == NULL){
		if(it_now_ms() >= deadline){
			client_dump(c, DLQ_SYS_TOPIC_PREFIX "#");
			ck_abort_msg("no %s %s on $SYS", topic, payload);
		}
		client_wait(c, topic, client_count(c, topic) + 1, 100);
	}
}

/* plugin_opt_dead_letter_keep_for 2s: the jobs/# letters are kept, and
 * gone 2 s after their dead-letter time (at a tick: seen by polling
 * getStatus), not before, counted in deadLettersExpired (in total and for
 * jobs/#) and on $SYS beside dead_letters_dropped, which stays 0;
 * mail/#'s own dead_letter_keep_for=forever keeps its letter. */
START_TEST(test_age_bound)
{
	struct broker *b = STORE_BROKER("dead_letter_keep_for 2s", JOBS, MAIL " dead_letter_keep_for=forever",
			"sys_interval 1s");
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *worker = client_subscribed(b, "worker", "jobs/#");
	struct client *ops = ops_client(b, "ops");
	struct client *sys = ops_client(b, "sys");
	client_subscribe(sys, DLQ_SYS_TOPIC_PREFIX "#", 1);
	client_subscribe(worker, "mail/#", 1);
	char orig[ID_BUF];
	uint64_t first = it_now_ms();
	for(int i = 0; i < 3; i++) make_letter(pub, worker, "jobs/x", "job", 3, NULL, "r", orig);
	make_letter(pub, worker, "mail/x", "mail", 4, NULL, "r", orig);
	wait_kept(ops, 4);
	uint64_t made = it_now_ms();
	/* Not before their age: a reply given less than 2 s after the first
	 * letter was made counts all three (a slow machine skips this). */
	double kept = status_num(ops, "jobs/#", "keptDeadLetters");
	if(it_now_ms() < first + 1900){
		ck_assert_msg(kept == 3, "jobs/# keeps %g letters %llu ms after the first was made", kept,
				(unsigned long long)(it_now_ms() - first));
	}
	uint64_t deadline = made + 2000 + (uint64_t)HARNESS_WAIT_MS;
	while((kept = status_num(ops, "jobs/#", "keptDeadLetters")) != 0){
		ck_assert_msg(it_now_ms() < deadline, "jobs/# still keeps %g letters %llu ms after they were made", kept,
				(unsigned long long)(it_now_ms() - made));
		it_sleep_ms(20);
	}
	uint64_t gone = it_now_ms();
	ck_assert_msg(gone >= first + 2000, "the letters went %llu ms after the first was made, before their age of 2 s",
			(unsigned long long)(gone - first));
	fprintf(stderr, "letters: dead_letter_keep_for 2s: the letters made in %llu ms were gone %llu ms after the "
			"last (seen by polling every 20 ms)\n", (unsigned long long)(made - first), (unsigned long long)(gone - made));
	ck_assert_msg(status_num(ops, NULL, "deadLettersExpired") == 3, "deadLettersExpired is not 3");
	ck_assert_msg(status_num(ops, "jobs/#", "deadLettersExpired") == 3, "jobs/# deadLettersExpired is not 3");
	ck_assert_msg(status_num(ops, "mail/#", "deadLettersExpired") == 0, "mail/# deadLettersExpired is not 0");
	ck_assert_msg(status_num(ops, "mail/#", "keptDeadLetters") == 1, "mail/# lost its letter kept forever");
	ck_assert_msg(status_num(ops, NULL, "deadLettersDropped") == 0, "deadLettersDropped is not 0");
	struct proc *st = dlqctl_expect(0, b, "status");
	ck_assert_msg(strstr(proc_out(st), "dead letters kept: 1; dropped for the store's size: 0; dropped for their age: 3\n"),
			"dlqctl status does not show the letters dropped for their age:\n%s", proc_out(st));
	char topic[192];
	cJSON *sdoc;
	const cJSON *sdata = status_get(ops, reply_topic(ops, topic, sizeof(topic)), &sdoc);
	ck_assert_msg(json_num(sdata, "deadLetterKeepForMs") == 2000, "deadLetterKeepForMs %g, expected 2000",
			json_num(sdata, "deadLetterKeepForMs"));
	cJSON_Delete(sdoc);
	ck_assert_msg(log_has(b, LOG_EXPIRED), "no \"%s\" in the log", LOG_EXPIRED);
	wait_sys_value(sys, DLQ_SYS_TOPIC_PREFIX "dead_letters_expired", "3");
	wait_sys_value(sys, DLQ_SYS_TOPIC_PREFIX "policies/0/dead_letters_expired", "3");
	wait_sys_value(sys, DLQ_SYS_TOPIC_PREFIX "policies/1/dead_letters_expired", "0");
	wait_sys_value(sys, DLQ_SYS_TOPIC_PREFIX "dead_letters_dropped", "0");
}
END_TEST

/* With a state file: jobs/#'s letters (its own dead_letter_keep_for=4s)
 * pass their age while the broker is down, and the plugin drops them as it
 * starts, counted in deadLettersExpired from the first getStatus on;
 * mail/#'s letter, of no age bound, comes back. */
START_TEST(test_age_bound_across_restart)
{
	struct broker *b = broker_new(__func__);
	broker_plugin(b);
	broker_conf(b, "plugin_opt_state_file %s", broker_path(b, STATE_NAME));
	broker_conf(b, "plugin_opt_%s dead_letter_keep_for=4s", JOBS);
	broker_conf(b, "plugin_opt_%s", MAIL);
	start_store(b);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *worker = client_subscribed(b, "worker", "jobs/#");
	struct client *ops = ops_client(b, "ops");
	client_subscribe(worker, "mail/#", 1);
	char orig[ID_BUF];
	make_letter(pub, worker, "jobs/a", "a", 1, NULL, "r", orig);
	make_letter(pub, worker, "jobs/b", "b", 1, NULL, "r", orig);
	make_letter(pub, worker, "mail/c", "c", 1, NULL, "r", orig);
	wait_kept(ops, 3);
	uint64_t made = it_now_ms();
	ck_assert_msg(status_num(ops, "jobs/#", "keptDeadLetters") == 2, "jobs/# keptDeadLetters before the restart");
	client_free(pub);
	client_free(worker);
	client_free(ops);
	broker_shutdown(b);
	/* Down until the jobs letters are past their age. */
	uint64_t now = it_now_ms();
	if(now < made + 4300) it_sleep_ms((unsigned)(made + 4300 - now));
	broker_start(b);
	ops = ops_client(b, "ops");
	ck_assert_msg(status_num(ops, NULL, "deadLettersExpired") == 2, "deadLettersExpired is not 2 after the restart");
	ck_assert_msg(status_num(ops, "jobs/#", "deadLettersExpired") == 2, "jobs/# deadLettersExpired after the restart");
	ck_assert_msg(status_num(ops, "jobs/#", "keptDeadLetters") == 0, "jobs/# keeps letters past their age");
	ck_assert_msg(status_num(ops, "mail/#", "keptDeadLetters") == 1, "mail/# lost its letter at the restart");
	ck_assert_msg(status_num(ops, NULL, "deadLettersDropped") == 0, "deadLettersDropped is not 0");
	ck_assert_msg(log_has(b, LOG_EXPIRED), "no \"%s\" in the log", LOG_EXPIRED);
	struct page p = list_page(ops, NULL, 0, false, 0);
	ck_assert_msg(p.count == 1 && p.matched == 1, "after the restart: %d letters listed, matched %g", p.count, p.matched);
	expect_str_member(cJSON_GetArrayItem(p.letters, 0), "originTopic", "mail/c");
	cJSON_Delete(p.doc);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("letters");
	TCase *tc = harness_tcase("letters");
	/* Restarts, and some hundred round trips in the paging test: more than
	 * the harness's default on a busy machine, the more so under a
	 * sanitizer. */
	tcase_set_timeout(tc, 480);
	check_add(s, tc, CHECK_TESTS(test_operator_story, test_restart_sigterm, test_state_of_the_previous_version,
			test_restart_sigkill_save_on_change, test_bound_drops_oldest, test_paging_and_filters, test_cause_filter,
			test_bad_input, test_oversized_command, test_access, test_store_off, test_policy_bound,
			test_large_payload_cut, test_sys_topics, test_age_bound, test_age_bound_across_restart));
	return harness_run(s);
}
