/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of control.c, the $CONTROL API: a compact NACK and JSON command
 * documents in, one {"responses":[...]} reply out (design.md, "Replies").
 * Replies are parsed back with cJSON and checked entry by entry; bad input of
 * every kind must come back as an "error" entry, never as silence.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "api/control.h"
#include "check_suite.h"
#include "config/config.h"
#include "engine/dlq.h"
#include "engine_calls.h"
#include "fake_port.h"
#include "mosquitto_dlq.h"
#include "test_util.h"


static const struct dlq_option standard[] = {
	{"policy", "numbers max_attempts=3 dead_letter=dead/numbers"},
	{"policy", "once max_attempts=1 dead_letter=dead/once"},
	{"policy", "jobs/# max_attempts=3 dead_letter=dead/jobs ack_timeout=30s"},
};

static struct dlq d;
static struct dlq_control_reply reply;
static cJSON *doc; /* the parsed reply */

static void track(const char *topic, const char *payload, char id[DLQ_ID_LEN + 1])
{
	const struct dlq_policy *p = dlq__policy_for(&d, topic);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(dlq__track(&d, p, topic, payload, (uint32_t)strlen(payload), 1, NULL, 0, id), 0);
}

/* The "delay-ms" and "final" user properties of the next compact request,
 * or NULL. */
static const char *next_delay_ms;
static const char *next_final;

/* Runs a request and parses its reply into doc; returns the responses. */
static const cJSON *run(enum dlq_compact compact, const void *payload, size_t len, const char *client, const char *reason)
{
	/* An MQTT payload has no terminating NUL: hand over exactly len bytes,
	 * so that ASan sees any read past them. */
	void *exact = malloc(len ? len : 1);
	ck_assert_ptr_nonnull(exact);
	if(len) memcpy(exact, payload, len);
	struct dlq_control_request req = {
		.compact = compact,
		.payload = exact,
		.payload_len = len,
		.client = client,
		.reason = reason,
		.delay_ms = next_delay_ms,
		.final = next_final,
		/* As with a v5 response topic: a reply to read, whatever happens. */
		.reply_wanted = true,
	};
	next_delay_ms = NULL;
	next_final = NULL;
	control__reply_free(&reply);
	cJSON_Delete(doc);
	doc = NULL;
	int rc = control__handle(&d, &req, &reply);
	free(exact);
	ck_assert_int_eq(rc, 0);
	ck_assert_ptr_nonnull(reply.json);
	doc = cJSON_Parse(reply.json);
	ck_assert_msg(doc != NULL, "reply is not JSON: %s", reply.json);
	ck_assert(cJSON_IsObject(doc));
	ck_assert_int_eq(cJSON_GetArraySize(doc), 1); /* "responses" and nothing else */
	const cJSON *responses = cJSON_GetObjectItemCaseSensitive(doc, "responses");
	ck_assert_msg(cJSON_IsArray(responses), "no responses array: %s", reply.json);
	return responses;
}

static const cJSON *compact(const char *payload, const char *client, const char *reason)
{
	return run(DLQ_COMPACT_NACK, payload, strlen(payload), client, reason);
}

static const cJSON *json(const char *payload, const char *client)
{
	return run(DLQ_COMPACT_NONE, payload, strlen(payload), client, NULL);
}

static const cJSON *entry(const cJSON *responses, int i)
{
	const cJSON *e = cJSON_GetArrayItem(responses, i);
	ck_assert_msg(cJSON_IsObject(e), "response %d missing: %s", i, reply.json);
	return e;
}

static const char *str(const cJSON *e, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void expect_str(const cJSON *e, const char *key, const char *value)
{
	const char *v = str(e, key);
	ck_assert_msg(v != NULL, "no string \"%s\" in %s", key, reply.json);
	ck_assert_str_eq(v, value);
}

static void expect_absent(const cJSON *e, const char *key)
{
	ck_assert_msg(cJSON_GetObjectItemCaseSensitive(e, key) == NULL, "\"%s\" present in %s", key, reply.json);
}

static void expect_num(const cJSON *e, const char *key, double value)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);
	ck_assert_msg(cJSON_IsNumber(v), "no number \"%s\" in %s", key, reply.json);
	ck_assert_msg(v->valuedouble == value, "\"%s\" is %g, expected %g", key, v->valuedouble, value);
}

static void expect_result(const cJSON *e, const char *id, const char *result, double attempt, double max)
{
	expect_str(e, "command", DLQ_COMMAND_NACK);
	expect_str(e, "id", id);
	expect_str(e, "result", result);
	expect_num(e, "attempt", attempt);
	expect_num(e, "maxAttempts", max);
	expect_absent(e, "error");
}

/* An error entry whose text contains what; id NULL: no id expected. */
static void expect_error(const cJSON *e, const char *command, const char *id, const char *what)
{
	if(command){
		expect_str(e, "command", command);
	}
	if(id){
		expect_str(e, "id", id);
	}
	const char *err = str(e, "error");
	ck_assert_msg(err != NULL, "no error in %s", reply.json);
	ck_assert_msg(strstr(err, what) != NULL, "error \"%s\" does not say \"%s\"", err, what);
	expect_absent(e, "result");
}

static const char *published_reason(size_t i)
{
	ck_assert_uint_gt(fake.publish_count, i);
	const char *r = fake_header_value(&fake.publishes[i], DLQ_PROP_DEAD_LETTER_REASON);
	ck_assert_ptr_nonnull(r);
	return r;
}

/* ------------------------------------------------------------------ */

START_TEST(a_compact_nack_that_went_well_builds_no_reply_unless_asked)
{
	char id[DLQ_ID_LEN + 1];
	track("numbers", "1", id);
	struct dlq_control_request req = {
		.compact = true,
		.payload = id,
		.payload_len = strlen(id),
		.client = "sub1",
	};
	control__reply_free(&reply);
	ck_assert_int_eq(control__handle(&d, &req, &reply), 0);
	ck_assert(!reply.must_send);
	ck_assert_ptr_null(reply.json);
	ck_assert_uint_eq(fake.publish_count, 1); /* the copy went out all the same */

	/* A failed one is answered even unasked. */
	ck_assert_int_eq(control__handle(&d, &req, &reply), 0);
	ck_assert(reply.must_send);
	ck_assert_ptr_nonnull(reply.json);
	ck_assert_msg(strstr(reply.json, "already NACKed") != NULL, "reply: %s", reply.json);
}
END_TEST

START_TEST(a_compact_nack_is_carried_out_and_answered)
{
	char id[DLQ_ID_LEN + 1];
	track("numbers", "42", id);
	const cJSON *r = compact(id, "sub1", NULL);
	ck_assert_int_eq(cJSON_GetArraySize(r), 1);
	expect_result(entry(r, 0), id, "retried", 1, 3);
	expect_absent(entry(r, 0), "correlationData");
	ck_assert_uint_eq(reply.errors, 0);
	ck_assert(reply.must_send); /* asked for, as with a response topic */

	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert_str_eq(fake.publishes[0].client, "sub1");
	ck_assert_str_eq(fake.publishes[0].topic, "numbers");
}
END_TEST

START_TEST(a_compact_nack_carries_its_reason_to_the_dead_letter)
{
	char id[DLQ_ID_LEN + 1];
	track("once", "42", id);
	const cJSON *r = compact(id, "sub1", "schema mismatch");
	expect_result(entry(r, 0), id, "dead-lettered", 1, 1);
	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert_str_eq(fake.publishes[0].topic, "dead/once");
	ck_assert_str_eq(published_reason(0), "schema mismatch");
	ck_assert_str_eq(fake_header_value(&fake.publishes[0], DLQ_PROP_DEAD_LETTER_CLIENT), "sub1");
}
END_TEST

START_TEST(a_failed_compact_nack_is_answered_with_an_error)
{
	const cJSON *r = compact("AAAAAAAAAAAAAAAA", "sub1", NULL);
	ck_assert_int_eq(cJSON_GetArraySize(r), 1);
	expect_error(entry(r, 0), DLQ_COMMAND_NACK, "AAAAAAAAAAAAAAAA", "unknown or expired dlq-id");
	ck_assert_uint_eq(reply.errors, 1);
	ck_assert(reply.must_send);

	r = compact("hello", "sub1", NULL);
	expect_error(entry(r, 0), DLQ_COMMAND_NACK, "hello", "malformed");
	ck_assert_uint_eq(reply.errors, 1);
	ck_assert(reply.must_send);

	r = compact("", "sub1", NULL);
	expect_error(entry(r, 0), DLQ_COMMAND_NACK, NULL, "malformed");
	ck_assert(reply.must_send);
	ck_assert_uint_eq(fake.publish_count, 0);
	ck_assert_uint_eq(engine__totals(&d)->nacks_refused, 3);
}
END_TEST

START_TEST(a_garbage_payload_is_not_echoed_whole)
{
	char garbage[200];
	memset(garbage, 'g', sizeof(garbage) - 1);
	garbage[sizeof(garbage) - 1] = '\0';
	garbage[3] = '\n';
	const cJSON *r = compact(garbage, "sub1", NULL);
	const char *id = str(entry(r, 0), "id");
	if(id != NULL){
		ck_assert_uint_le(strlen(id), DLQ_ID_LEN);
	}
	expect_error(entry(r, 0), DLQ_COMMAND_NACK, NULL, "malformed");
}
END_TEST

START_TEST(white_space_around_a_compact_id_is_forgiven)
{
	/* `echo ID | mosquitto_pub -l -t $CONTROL/dlq/v1/nack` sends ID\n. */
	const char *const wrap[][2] = {{"", "\n"}, {"", "\r\n"}, {"  ", " "}, {"\t", "\n\n"}};
	for(size_t i = 0; i < ARRAY_LEN(wrap); i++){
		char id[DLQ_ID_LEN + 1], payload[64];
		track("numbers", "42", id);
		snprintf(payload, sizeof(payload), "%s%s%s", wrap[i][0], id, wrap[i][1]);
		const cJSON *r = compact(payload, "sub1", NULL);
		expect_result(entry(r, 0), id, "retried", 1, 3);
		ck_assert_uint_eq(reply.errors, 0);
	}
	ck_assert_uint_eq(fake.publish_count, ARRAY_LEN(wrap));
	/* White space inside the id is not forgiven. */
	char id[DLQ_ID_LEN + 1], payload[64];
	track("numbers", "42", id);
	snprintf(payload, sizeof(payload), "%.8s %s", id, id + 8);
	const cJSON *r = compact(payload, "sub1", NULL);
	expect_error(entry(r, 0), DLQ_COMMAND_NACK, NULL, "malformed");
}
END_TEST

START_TEST(json_commands_are_answered_in_order_with_their_correlation_data)
{
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1], c[DLQ_ID_LEN + 1];
	track("numbers", "A", a);
	track("once", "B", b);
	track("numbers", "C", c);
	char cmd[1024];
	snprintf(cmd, sizeof(cmd),
			"{\"commands\":["
			"{\"command\":\"nack\",\"id\":\"%s\",\"correlationData\":\"c-1\"},"
			"{\"command\":\"nack\",\"id\":\"%s\",\"reason\":\"bad input\"},"
			"{\"command\":\"nack\",\"id\":\"%s\",\"correlationData\":{\"n\":5}}"
			"]}", a, b, c);
	const cJSON *r = json(cmd, "sub1");
	ck_assert_int_eq(cJSON_GetArraySize(r), 3);
	expect_result(entry(r, 0), a, "retried", 1, 3);
	expect_str(entry(r, 0), "correlationData", "c-1");
	expect_result(entry(r, 1), b, "dead-lettered", 1, 1);
	expect_absent(entry(r, 1), "correlationData");
	expect_result(entry(r, 2), c, "retried", 1, 3);
	const cJSON *corr = cJSON_GetObjectItemCaseSensitive(entry(r, 2), "correlationData");
	ck_assert(cJSON_IsObject(corr));
	expect_num(corr, "n", 5);
	ck_assert_uint_eq(reply.errors, 0);
	ck_assert(reply.must_send); /* every JSON command is answered */

	ck_assert_uint_eq(fake.publish_count, 3);
	ck_assert_str_eq(fake.publishes[0].topic, "numbers");
	ck_assert_mem_eq(fake.publishes[0].payload, "A", 1);
	ck_assert_str_eq(fake.publishes[1].topic, "dead/once");
	ck_assert_str_eq(published_reason(1), "bad input");
	ck_assert_str_eq(fake.publishes[2].topic, "numbers");
	ck_assert_mem_eq(fake.publishes[2].payload, "C", 1);
}
END_TEST

START_TEST(every_bad_command_gets_its_own_error)
{
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	track("numbers", "A", a);
	track("numbers", "B", b);
	char cmd[2048];
	snprintf(cmd, sizeof(cmd),
			"{\"commands\":["
			"5,"
			"{\"command\":\"retry\",\"id\":\"%s\",\"correlationData\":\"x\"},"
			"{\"command\":\"nack\",\"correlationData\":\"y\"},"
			"{\"command\":\"nack\",\"id\":7},"
			"{\"command\":\"nack\",\"id\":\"abc\"},"
			"{\"command\":\"nack\",\"id\":\"AAAAAAAAAAAAAAAA\"},"
			"{\"command\":\"nack\",\"id\":\"%s\"},"
			"{\"command\":\"nack\",\"id\":\"%s\"},"
			"{\"id\":\"%s\"},"
			"{\"command\":\"nack\",\"id\":\"%s\",\"reason\":5},"
			"{\"command\":\"NACK\",\"id\":\"%s\"}"
			"]}", a, a, a, b, b, b);
	const cJSON *r = json(cmd, "sub1");
	ck_assert_int_eq(cJSON_GetArraySize(r), 11);
	expect_error(entry(r, 0), NULL, NULL, "JSON object");
	/* The known names come from the command tables, in their order. */
	expect_error(entry(r, 1), "retry", NULL, "unknown command \"retry\" (known: nack, ack, progress, listPolicies, "
			"getStatus, resetCounters, getHistory, listDeadLetters, getDeadLetter, redriveDeadLetters, "
			"deleteDeadLetters, purgeDeadLetters, startRedriveTask, cancelRedriveTask, listBrokers)");
	expect_str(entry(r, 1), "correlationData", "x");
	expect_error(entry(r, 2), DLQ_COMMAND_NACK, NULL, "\"id\"");
	expect_str(entry(r, 2), "correlationData", "y");
	expect_error(entry(r, 3), DLQ_COMMAND_NACK, NULL, "\"id\"");
	expect_error(entry(r, 4), DLQ_COMMAND_NACK, "abc", "malformed");
	expect_error(entry(r, 5), DLQ_COMMAND_NACK, "AAAAAAAAAAAAAAAA", "unknown or expired dlq-id");
	expect_result(entry(r, 6), a, "retried", 1, 3);
	expect_error(entry(r, 7), DLQ_COMMAND_NACK, a, dlq__nack_status_text(DLQ_NACK_DUPLICATE));
	expect_error(entry(r, 8), NULL, NULL, "\"command\"");
	expect_error(entry(r, 9), DLQ_COMMAND_NACK, NULL, "reason");
	expect_error(entry(r, 10), "NACK", NULL, "unknown command"); /* names are case-sensitive */
	ck_assert_uint_eq(reply.errors, 10);
	ck_assert(reply.must_send);
	/* Only the good command did anything. */
	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert_str_eq(fake.publishes[0].client, "sub1");
	ck_assert_uint_eq(engine__totals(&d)->nacks, 1);
}
END_TEST

START_TEST(a_document_that_is_not_json_is_answered_with_an_error)
{
	const char *const bad[] = {"not json", "{\"commands\":[", "", "nack"};
	for(size_t i = 0; i < ARRAY_LEN(bad); i++){
		const cJSON *r = json(bad[i], "sub1");
		ck_assert_int_eq(cJSON_GetArraySize(r), 1);
		expect_error(entry(r, 0), NULL, NULL, "not valid JSON");
		ck_assert_uint_eq(reply.errors, 1);
		ck_assert(reply.must_send);
	}
	ck_assert_uint_eq(fake.publish_count, 0);
}
END_TEST

START_TEST(a_document_without_a_commands_array_is_answered_with_an_error)
{
	const char *const bad[] = {
		"{\"foo\":1}", "{\"commands\":{}}", "{\"commands\":\"nack\"}", "[]", "42",
		"{\"Commands\":[]}",
	};
	for(size_t i = 0; i < ARRAY_LEN(bad); i++){
		const cJSON *r = json(bad[i], "sub1");
		ck_assert_int_eq(cJSON_GetArraySize(r), 1);
		expect_error(entry(r, 0), NULL, NULL, "\"commands\" array");
		ck_assert_uint_eq(reply.errors, 1);
		ck_assert(reply.must_send);
	}
}
END_TEST

START_TEST(an_empty_command_list_gets_an_empty_reply)
{
	const cJSON *r = json("{\"commands\":[]}", "sub1");
	ck_assert_int_eq(cJSON_GetArraySize(r), 0);
	ck_assert_uint_eq(reply.errors, 0);
	ck_assert(reply.must_send);
}
END_TEST

START_TEST(too_many_commands_are_refused_as_a_whole)
{
	char id[DLQ_ID_LEN + 1];
	track("numbers", "42", id);
	size_t cap = 64 + (DLQ_MAX_COMMANDS + 1) * 128;
	char *cmd = malloc(cap);
	ck_assert_ptr_nonnull(cmd);
	size_t n = (size_t)snprintf(cmd, cap, "{\"commands\":[");
	for(int i = 0; i < DLQ_MAX_COMMANDS + 1; i++){
		n += (size_t)snprintf(cmd + n, cap - n, "%s{\"command\":\"nack\",\"id\":\"%s\"}", i ? "," : "", id);
	}
	snprintf(cmd + n, cap - n, "]}");
	const cJSON *r = json(cmd, "sub1");
	ck_assert_int_eq(cJSON_GetArraySize(r), 1);
	expect_error(entry(r, 0), NULL, NULL, "too many");
	ck_assert_uint_eq(fake.publish_count, 0);
	free(cmd);
}
END_TEST

/* A document over DLQ_MAX_CONTROL_BYTES is refused unparsed, whatever it
 * holds; one of exactly that size is carried out. */
START_TEST(an_oversized_document_is_refused_before_parsing)
{
	char id[DLQ_ID_LEN + 1];
	track("numbers", "42", id);
	char *doc_text = malloc(DLQ_MAX_CONTROL_BYTES + 2);
	ck_assert_ptr_nonnull(doc_text);
	int n = snprintf(doc_text, DLQ_MAX_CONTROL_BYTES + 2, "{\"commands\":[{\"command\":\"nack\",\"id\":\"%s\"}]}", id);
	/* Padded with white space, which JSON allows after the value. */
	memset(doc_text + n, ' ', DLQ_MAX_CONTROL_BYTES + 1 - (size_t)n);
	doc_text[DLQ_MAX_CONTROL_BYTES + 1] = '\0';
	const cJSON *r = json(doc_text, "sub1");
	ck_assert_int_eq(cJSON_GetArraySize(r), 1);
	expect_error(entry(r, 0), NULL, NULL, "payload larger than 1048576 bytes");
	ck_assert_uint_eq(fake.publish_count, 0);

	doc_text[DLQ_MAX_CONTROL_BYTES] = '\0';
	r = json(doc_text, "sub1");
	ck_assert_int_eq(cJSON_GetArraySize(r), 1);
	expect_result(entry(r, 0), id, "retried", 1, 3);
	ck_assert_uint_eq(fake.publish_count, 1);
	free(doc_text);
}
END_TEST

START_TEST(the_most_commands_allowed_are_all_answered)
{
	size_t cap = 64 + DLQ_MAX_COMMANDS * 128;
	char *cmd = malloc(cap);
	ck_assert_ptr_nonnull(cmd);
	size_t n = (size_t)snprintf(cmd, cap, "{\"commands\":[");
	for(int i = 0; i < DLQ_MAX_COMMANDS; i++){
		n += (size_t)snprintf(cmd + n, cap - n, "%s{\"command\":\"nack\",\"id\":\"AAAAAAAAAAAAAAAA\",\"correlationData\":%d}",
				i ? "," : "", i);
	}
	snprintf(cmd + n, cap - n, "]}");
	const cJSON *r = json(cmd, "sub1");
	ck_assert_int_eq(cJSON_GetArraySize(r), DLQ_MAX_COMMANDS);
	ck_assert_uint_eq(reply.errors, DLQ_MAX_COMMANDS);
	for(int i = 0; i < DLQ_MAX_COMMANDS; i += 111){
		expect_error(entry(r, i), DLQ_COMMAND_NACK, "AAAAAAAAAAAAAAAA", "unknown or expired dlq-id");
		expect_num(entry(r, i), "correlationData", i);
	}
	expect_num(entry(r, DLQ_MAX_COMMANDS - 1), "correlationData", DLQ_MAX_COMMANDS - 1);
	free(cmd);
}
END_TEST

START_TEST(an_overlong_reason_is_cut_to_the_limit)
{
	char id[DLQ_ID_LEN + 1];
	char *reason = malloc(4000);
	ck_assert_ptr_nonnull(reason);

	/* ASCII: cut at exactly DLQ_REASON_MAX_BYTES. */
	memset(reason, 'r', 3000);
	reason[3000] = '\0';
	track("once", "1", id);
	compact(id, "sub1", reason);
	ck_assert_uint_eq(reply.errors, 0);
	ck_assert_uint_eq(strlen(published_reason(0)), DLQ_REASON_MAX_BYTES);
	ck_assert_mem_eq(published_reason(0), reason, DLQ_REASON_MAX_BYTES);

	/* Exactly at the limit: kept whole. */
	reason[DLQ_REASON_MAX_BYTES] = '\0';
	track("once", "2", id);
	compact(id, "sub1", reason);
	ck_assert_str_eq(published_reason(1), reason);

	/* A two-byte character across the limit is dropped whole. */
	memset(reason, 'r', DLQ_REASON_MAX_BYTES - 1);
	strcpy(reason + DLQ_REASON_MAX_BYTES - 1, "\xc3\xa9 and more");
	track("once", "3", id);
	compact(id, "sub1", reason);
	ck_assert_uint_eq(strlen(published_reason(2)), DLQ_REASON_MAX_BYTES - 1);

	/* A three-byte character across the limit, in a JSON command. */
	memset(reason, 'r', DLQ_REASON_MAX_BYTES - 2);
	strcpy(reason + DLQ_REASON_MAX_BYTES - 2, "\xe2\x82\xac");
	track("once", "4", id);
	size_t cap = DLQ_REASON_MAX_BYTES + 256;
	char *cmd = malloc(cap);
	snprintf(cmd, cap, "{\"commands\":[{\"command\":\"nack\",\"id\":\"%s\",\"reason\":\"%s\"}]}", id, reason);
	json(cmd, "sub1");
	ck_assert_uint_eq(reply.errors, 0);
	ck_assert_uint_eq(strlen(published_reason(3)), DLQ_REASON_MAX_BYTES - 2);
	ck_assert_mem_eq(published_reason(3), reason, DLQ_REASON_MAX_BYTES - 2);
	ck_assert_uint_eq(fake.publish_count, 4);
	free(cmd);
	free(reason);
}
END_TEST

START_TEST(a_reason_is_made_safe_for_a_user_property)
{
	/* Decided in control.c: control characters become spaces, bytes that
	 * are not UTF-8 become '?', so the broker accepts the property. */
	char id[DLQ_ID_LEN + 1];
	track("once", "1", id);
	compact(id, "sub1", "line 1\nline 2\tend");
	ck_assert_str_eq(published_reason(0), "line 1 line 2 end");
	track("once", "2", id);
	compact(id, "sub1", "bad \xff byte, caf\xc3\xa9");
	ck_assert_str_eq(published_reason(1), "bad ? byte, caf\xc3\xa9");
}
END_TEST

START_TEST(an_empty_or_null_reason_means_attempts_ran_out)
{
	char id[DLQ_ID_LEN + 1], cmd[256];
	track("once", "1", id);
	compact(id, "sub1", "");
	ck_assert_msg(strstr(published_reason(0), "max_attempts") != NULL, "reason \"%s\"", published_reason(0));
	track("once", "2", id);
	snprintf(cmd, sizeof(cmd), "{\"commands\":[{\"command\":\"nack\",\"id\":\"%s\",\"reason\":null}]}", id);
	json(cmd, "sub1");
	ck_assert_uint_eq(reply.errors, 0);
	ck_assert_msg(strstr(published_reason(1), "max_attempts") != NULL, "reason \"%s\"", published_reason(1));
}
END_TEST

START_TEST(the_sender_is_the_nacking_client)
{
	char id[DLQ_ID_LEN + 1], cmd[256];
	track("numbers", "42", id);
	snprintf(cmd, sizeof(cmd), "{\"commands\":[{\"command\":\"nack\",\"id\":\"%s\"}]}", id);
	json(cmd, "sub7");
	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert_str_eq(fake.publishes[0].client, "sub7");
	/* The same id from another client starts its own chain... */
	compact(id, "sub8", NULL);
	ck_assert_uint_eq(reply.errors, 0);
	ck_assert_str_eq(fake.publishes[1].client, "sub8");
	/* ...and from the first again is a duplicate. */
	const cJSON *r = compact(id, "sub7", NULL);
	expect_error(entry(r, 0), DLQ_COMMAND_NACK, id, dlq__nack_status_text(DLQ_NACK_DUPLICATE));
	ck_assert_uint_eq(fake.publish_count, 2);
}
END_TEST

/* ---- delays ------------------------------------------------------------ */

/* A JSON nack command for id with a "delay" member (raw JSON text). */
static const cJSON *json_nack_delay(const char *id, const char *delay_json, const char *client)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "{\"commands\":[{\"command\":\"nack\",\"id\":\"%s\",\"delay\":%s}]}", id, delay_json);
	return json(cmd, client);
}

static const cJSON *compact_delay(const char *id, const char *client, const char *delay_ms)
{
	next_delay_ms = delay_ms;
	return compact(id, client, NULL);
}

START_TEST(a_json_delay_holds_the_copy_back_and_is_answered)
{
	char id[DLQ_ID_LEN + 1];
	track("numbers", "42", id);
	uint64_t t0 = fake.now_ms;
	const cJSON *r = json_nack_delay(id, "\"3s\"", "sub1");
	ck_assert_int_eq(cJSON_GetArraySize(r), 1);
	expect_result(entry(r, 0), id, "retried", 1, 3);
	expect_num(entry(r, 0), "delayMs", 3000);
	ck_assert_uint_eq(reply.errors, 0);
	ck_assert_uint_eq(fake.publish_count, 0);
	fake.now_ms = t0 + 2999;
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 0);
	fake.now_ms = t0 + 3000;
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert_str_eq(fake.publishes[0].client, "sub1");
	ck_assert_str_eq(fake.publishes[0].topic, "numbers");
	ck_assert_ptr_nonnull(fake_header_value(&fake.publishes[0], DLQ_PROP_FIRST_NACK_TIME));
}
END_TEST

START_TEST(json_delays_are_capped_and_zero_means_at_once)
{
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1], c[DLQ_ID_LEN + 1];
	track("numbers", "A", a);
	track("numbers", "B", b);
	track("numbers", "C", c);
	const cJSON *r = json_nack_delay(a, "\"0s\"", "sub1");
	expect_result(entry(r, 0), a, "retried", 1, 3);
	expect_num(entry(r, 0), "delayMs", 0);
	ck_assert_uint_eq(fake.publish_count, 1);
	/* The policy's retry_max_delay (default 1h) caps what a NACK asks. */
	r = json_nack_delay(b, "\"2h\"", "sub1");
	expect_num(entry(r, 0), "delayMs", DLQ_DEFAULT_RETRY_MAX_DELAY_MS);
	/* null is no delay asked for: the policy's (none). */
	r = json_nack_delay(c, "null", "sub1");
	expect_result(entry(r, 0), c, "retried", 1, 3);
	expect_num(entry(r, 0), "delayMs", 0);
	ck_assert_uint_eq(fake.publish_count, 2);
	ck_assert_uint_eq(d.delayed.count, 1);
}
END_TEST

START_TEST(a_bad_json_delay_is_an_error_and_changes_nothing)
{
	char id[DLQ_ID_LEN + 1];
	track("numbers", "42", id);
	static const char *const bad[] = {"30", "\"abc\"", "\"30\"", "\"-1s\"", "\"1.5s\"", "\"\"", "true", "{}", "[\"3s\"]"};
	for(size_t i = 0; i < ARRAY_LEN(bad); i++){
		const cJSON *r = json_nack_delay(id, bad[i], "sub1");
		ck_assert_int_eq(cJSON_GetArraySize(r), 1);
		expect_error(entry(r, 0), DLQ_COMMAND_NACK, NULL, "\"delay\" must be a duration with its unit");
		ck_assert_uint_eq(reply.errors, 1);
		ck_assert(reply.must_send);
	}
	ck_assert_uint_eq(fake.publish_count, 0);
	ck_assert_uint_eq(d.delayed.count, 0);
	ck_assert_uint_eq(engine__totals(&d)->nacks, 0);
	/* The delivery was not taken as NACKed by sub1. */
	const cJSON *r = compact(id, "sub1", NULL);
	expect_result(entry(r, 0), id, "retried", 1, 3);
	ck_assert_uint_eq(fake.publish_count, 1);
}
END_TEST

START_TEST(a_compact_delay_ms_holds_the_copy_back)
{
	char id[DLQ_ID_LEN + 1];
	track("numbers", "42", id);
	uint64_t t0 = fake.now_ms;
	const cJSON *r = compact_delay(id, "sub1", "1500");
	expect_result(entry(r, 0), id, "retried", 1, 3);
	expect_num(entry(r, 0), "delayMs", 1500);
	ck_assert_uint_eq(reply.errors, 0);
	ck_assert_uint_eq(fake.publish_count, 0);
	fake.now_ms = t0 + 1499;
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 0);
	fake.now_ms = t0 + 1500;
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert_str_eq(fake.publishes[0].client, "sub1");

	/* "0" is at once; a huge one is capped. */
	char b[DLQ_ID_LEN + 1], c[DLQ_ID_LEN + 1];
	track("numbers", "B", b);
	track("numbers", "C", c);
	r = compact_delay(b, "sub1", "0");
	expect_num(entry(r, 0), "delayMs", 0);
	ck_assert_uint_eq(fake.publish_count, 2);
	r = compact_delay(c, "sub1", "9223372036854775807");
	expect_num(entry(r, 0), "delayMs", DLQ_DEFAULT_RETRY_MAX_DELAY_MS);
}
END_TEST

START_TEST(a_bad_compact_delay_ms_is_an_error_naming_it)
{
	char id[DLQ_ID_LEN + 1];
	track("numbers", "42", id);
	static const char *const bad[] = {"-1", "1.5", "x", "", " 5", "5 ", "+5", "0x10", "1500ms", "99999999999999999999999"};
	for(size_t i = 0; i < ARRAY_LEN(bad); i++){
		const cJSON *r = compact_delay(id, "sub1", bad[i]);
		ck_assert_int_eq(cJSON_GetArraySize(r), 1);
		expect_error(entry(r, 0), DLQ_COMMAND_NACK, id, DLQ_PROP_NACK_DELAY_MS);
		ck_assert_msg(reply.errors == 1 && reply.must_send, "delay-ms \"%s\" not answered as an error", bad[i]);
	}
	ck_assert_uint_eq(fake.publish_count, 0);
	ck_assert_uint_eq(d.delayed.count, 0);
	const cJSON *r = compact(id, "sub1", NULL);
	expect_result(entry(r, 0), id, "retried", 1, 3);
}
END_TEST

/* ---- settling: ACK, progress, final NACKs ---- */

/* The compact topics name their command; any other topic is JSON. */
START_TEST(the_compact_topics_are_known_by_name)
{
	ck_assert_int_eq(control__compact_of(DLQ_NACK_TOPIC), DLQ_COMPACT_NACK);
	ck_assert_int_eq(control__compact_of(DLQ_ACK_TOPIC), DLQ_COMPACT_ACK);
	ck_assert_int_eq(control__compact_of(DLQ_PROGRESS_TOPIC), DLQ_COMPACT_PROGRESS);
	ck_assert_int_eq(control__compact_of(DLQ_CONTROL_TOPIC), DLQ_COMPACT_NONE);
	ck_assert_int_eq(control__compact_of("$CONTROL/dlq/v1/ACK"), DLQ_COMPACT_NONE);
	ck_assert_int_eq(control__compact_of(NULL), DLQ_COMPACT_NONE);
}
END_TEST

/* A compact ACK and progress report are answered as a NACK is: the ACK's
 * result with its attempt, progress where no clock runs (this engine shows
 * no deliveries) refused saying why, anything after the ACK refused as
 * ACKed, a NACK too. */
START_TEST(compact_acks_and_progress_are_answered)
{
	char id[DLQ_ID_LEN + 1];
	track("jobs/a", "j", id);
	const cJSON *r = run(DLQ_COMPACT_PROGRESS, id, strlen(id), "w", NULL);
	expect_str(entry(r, 0), "command", DLQ_COMMAND_PROGRESS);
	expect_error(entry(r, 0), DLQ_COMMAND_PROGRESS, id, "no ack_timeout runs");
	r = run(DLQ_COMPACT_ACK, id, strlen(id), "w", NULL);
	expect_str(entry(r, 0), "command", DLQ_COMMAND_ACK);
	expect_str(entry(r, 0), "result", "acked");
	expect_num(entry(r, 0), "attempt", 1);
	expect_num(entry(r, 0), "maxAttempts", 3);
	expect_absent(entry(r, 0), "error");
	r = run(DLQ_COMPACT_PROGRESS, id, strlen(id), "w", NULL);
	expect_error(entry(r, 0), DLQ_COMMAND_PROGRESS, id, "already ACKed");
	r = run(DLQ_COMPACT_ACK, id, strlen(id), "w", NULL);
	expect_error(entry(r, 0), DLQ_COMMAND_ACK, id, "already ACKed");
	r = compact(id, "w", NULL);
	expect_error(entry(r, 0), DLQ_COMMAND_NACK, id, "already ACKed");
	r = run(DLQ_COMPACT_ACK, "nonsense", 8, "w", NULL);
	expect_error(entry(r, 0), DLQ_COMMAND_ACK, "nonsense", "malformed");
	ck_assert_uint_eq(fake.publish_count, 0);
	ck_assert_uint_eq(engine__totals(&d)->acks, 1);
	ck_assert_uint_eq(engine__totals(&d)->acks_refused, 4);
}
END_TEST

/* A compact ACK that went well wants no reply unless asked, as a NACK. */
START_TEST(a_compact_ack_that_went_well_builds_no_reply)
{
	char id[DLQ_ID_LEN + 1];
	track("jobs/a", "j", id);
	struct dlq_control_request req = {
		.compact = DLQ_COMPACT_ACK, .payload = id, .payload_len = strlen(id), .client = "w",
	};
	control__reply_free(&reply);
	ck_assert_int_eq(control__handle(&d, &req, &reply), 0);
	ck_assert(!reply.must_send);
	ck_assert_ptr_null(reply.json);
	ck_assert_int_eq(control__handle(&d, &req, &reply), 0);
	ck_assert(reply.must_send);
	ck_assert_msg(strstr(reply.json, "already ACKed") != NULL, "reply: %s", reply.json);
}
END_TEST

/* A final NACK, compact ("final" user property) or JSON ("final": true),
 * dead-letters at the first attempt with dead-letter-final; "final" that
 * is neither true nor false is refused, naming it, and changes nothing. */
START_TEST(final_nacks)
{
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	track("numbers", "a", a);
	track("numbers", "b", b);
	next_final = "maybe";
	const cJSON *r = compact(a, "w", NULL);
	expect_error(entry(r, 0), DLQ_COMMAND_NACK, a, "\"final\" must be \"true\" or \"false\"");
	next_final = "false";
	r = compact(a, "w", NULL);
	expect_result(entry(r, 0), a, "retried", 1, 3);
	next_final = "true";
	r = compact(b, "w", "bad schema");
	expect_result(entry(r, 0), b, "dead-lettered", 1, 3);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "{\"commands\":[{\"command\":\"nack\",\"id\":\"%s\",\"final\":\"yes\"}]}", a);
	r = json(cmd, "v");
	expect_error(entry(r, 0), DLQ_COMMAND_NACK, NULL, "\"final\" must be true or false");
	snprintf(cmd, sizeof(cmd), "{\"commands\":[{\"command\":\"nack\",\"id\":\"%s\",\"final\":true}]}", a);
	r = json(cmd, "v");
	expect_result(entry(r, 0), a, "dead-lettered", 1, 3);
	ck_assert_uint_eq(fake.publish_count, 3);
	ck_assert_str_eq(fake.publishes[1].topic, "dead/numbers");
	ck_assert_str_eq(fake_header_value(&fake.publishes[1], DLQ_PROP_DEAD_LETTER_FINAL), "true");
	ck_assert_str_eq(fake_header_value(&fake.publishes[1], DLQ_PROP_DEAD_LETTER_REASON), "bad schema");
	ck_assert_str_eq(fake_header_value(&fake.publishes[2], DLQ_PROP_DEAD_LETTER_FINAL), "true");
	ck_assert_ptr_null(fake_header_value(&fake.publishes[0], DLQ_PROP_DEAD_LETTER_FINAL));
	ck_assert_uint_eq(engine__totals(&d)->final_nacks, 2);
	ck_assert_uint_eq(engine__totals(&d)->nacks, 3);
	/* Both final, at attempt 1 of 3: of cause "final", not "nack". */
	ck_assert_str_eq(fake_header_value(&fake.publishes[1], DLQ_PROP_DEAD_LETTER_CAUSE), DLQ_CAUSE_FINAL);
	ck_assert_str_eq(fake_header_value(&fake.publishes[2], DLQ_PROP_DEAD_LETTER_CAUSE), DLQ_CAUSE_FINAL);
	ck_assert_uint_eq(engine__totals(&d)->dead_letters_by_cause[DLQ_DEAD_FINAL], 2);
	ck_assert_uint_eq(engine__totals(&d)->dead_letters_by_cause[DLQ_DEAD_NACK], 0);
}
END_TEST

/* JSON ack and progress: the id is required. */
START_TEST(json_acks_need_an_id)
{
	const cJSON *r = json("{\"commands\":[{\"command\":\"ack\",\"correlationData\":1},"
			"{\"command\":\"progress\",\"id\":5}]}", "w");
	expect_error(entry(r, 0), DLQ_COMMAND_ACK, NULL, "missing or non-string \"id\"");
	expect_error(entry(r, 1), DLQ_COMMAND_PROGRESS, NULL, "missing or non-string \"id\"");
	ck_assert_uint_eq(reply.errors, 2);
}
END_TEST

/* getHistory: each policy's minutes that hold anything, oldest first, with
 * the dead letters by cause; "policy" picks one. */
START_TEST(get_history_reports_each_policys_minutes)
{
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1], c[DLQ_ID_LEN + 1];
	track("numbers", "1", a);
	track("numbers", "2", b);
	track("once", "3", c);
	fake.wall_ms = 1790000040000LL + 5000; /* 5 s into a minute */
	expect_result(entry(compact(a, "w", NULL), 0), a, "retried", 1, 3);
	expect_result(entry(compact(c, "w", NULL), 0), c, "dead-lettered", 1, 1);
	fake.wall_ms += 2 * 60000;
	expect_result(entry(compact(b, "w", NULL), 0), b, "retried", 1, 3);
	const cJSON *r = json("{\"commands\":[{\"command\":\"getHistory\",\"correlationData\":1},"
			"{\"command\":\"getHistory\",\"policy\":\"once\"},{\"command\":\"getHistory\",\"policy\":\"nope\"},"
			"{\"command\":\"getHistory\",\"policy\":5}]}", "ops");
	ck_assert_int_eq(cJSON_GetArraySize(r), 4);
	expect_str(entry(r, 0), "command", DLQ_COMMAND_GET_HISTORY);
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(entry(r, 0), "data");
	expect_num(data, "minute", 1790000040 + 120);
	expect_num(data, "minutes", 60);
	const cJSON *policies = cJSON_GetObjectItemCaseSensitive(data, "policies");
	ck_assert_int_eq(cJSON_GetArraySize(policies), 3);
	const cJSON *numbers = cJSON_GetArrayItem(policies, 0);
	expect_str(numbers, "filter", "numbers");
	const cJSON *minutes = cJSON_GetObjectItemCaseSensitive(numbers, "minutes");
	ck_assert_int_eq(cJSON_GetArraySize(minutes), 2);
	expect_num(cJSON_GetArrayItem(minutes, 0), "minute", 1790000040);
	expect_num(cJSON_GetArrayItem(minutes, 0), "nacks", 1);
	expect_num(cJSON_GetArrayItem(minutes, 0), "deadLetters", 0);
	expect_num(cJSON_GetArrayItem(minutes, 0), "redrives", 0);
	expect_num(cJSON_GetArrayItem(minutes, 0), "ackTimeouts", 0);
	expect_num(cJSON_GetArrayItem(minutes, 1), "minute", 1790000040 + 120);
	expect_num(cJSON_GetArrayItem(minutes, 1), "nacks", 1);
	const cJSON *once = cJSON_GetArrayItem(policies, 1);
	minutes = cJSON_GetObjectItemCaseSensitive(once, "minutes");
	ck_assert_int_eq(cJSON_GetArraySize(minutes), 1);
	expect_num(cJSON_GetArrayItem(minutes, 0), "deadLetters", 1);
	const cJSON *by = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(minutes, 0), "byCause");
	ck_assert_int_eq(cJSON_GetArraySize(by), 1);
	expect_num(by, "nack", 1);
	minutes = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(policies, 2), "minutes");
	ck_assert(cJSON_IsArray(minutes));
	ck_assert_int_eq(cJSON_GetArraySize(minutes), 0);
	/* One policy, by its filter. */
	policies = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(entry(r, 1), "data"), "policies");
	ck_assert_int_eq(cJSON_GetArraySize(policies), 1);
	expect_str(cJSON_GetArrayItem(policies, 0), "filter", "once");
	expect_error(entry(r, 2), DLQ_COMMAND_GET_HISTORY, NULL, "no policy has the filter \"nope\"");
	expect_error(entry(r, 3), DLQ_COMMAND_GET_HISTORY, NULL, "\"policy\" must be");
	/* An hour later nothing is left. */
	fake.wall_ms += 60 * 60000;
	r = json("{\"commands\":[{\"command\":\"getHistory\"}]}", "ops");
	policies = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(entry(r, 0), "data"), "policies");
	for(int i = 0; i < 3; i++){
		ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(policies, i), "minutes")), 0);
	}
}
END_TEST

/* ------------------------------------------------------------------ */

static void setup(void)
{
	fake_reset();
	/* No $SYS publishes among the ones counted here. */
	engine_start(&d, NULL, standard, ARRAY_LEN(standard), ENGINE_NO_SYS);
	memset(&reply, 0, sizeof(reply));
	doc = NULL;
}

static void teardown(void)
{
	control__reply_free(&reply);
	cJSON_Delete(doc);
	doc = NULL;
	engine_stop(&d, NULL);
	fake_reset();
}

int main(void)
{
	Suite *s = suite_create("control");
	check_add(s, check_fixture(tcase_create("compact"), setup, teardown),
			CHECK_TESTS(a_compact_nack_is_carried_out_and_answered,
			a_compact_nack_that_went_well_builds_no_reply_unless_asked,
			a_compact_nack_carries_its_reason_to_the_dead_letter, a_failed_compact_nack_is_answered_with_an_error,
			a_garbage_payload_is_not_echoed_whole, white_space_around_a_compact_id_is_forgiven));

	check_add(s, check_fixture(tcase_create("json"), setup, teardown),
			CHECK_TESTS(json_commands_are_answered_in_order_with_their_correlation_data,
			every_bad_command_gets_its_own_error, a_document_that_is_not_json_is_answered_with_an_error,
			a_document_without_a_commands_array_is_answered_with_an_error, an_empty_command_list_gets_an_empty_reply,
			too_many_commands_are_refused_as_a_whole, the_most_commands_allowed_are_all_answered,
			an_oversized_document_is_refused_before_parsing, the_sender_is_the_nacking_client,
			get_history_reports_each_policys_minutes));

	check_add(s, check_fixture(tcase_create("reasons"), setup, teardown),
			CHECK_TESTS(an_overlong_reason_is_cut_to_the_limit, a_reason_is_made_safe_for_a_user_property,
			an_empty_or_null_reason_means_attempts_ran_out));

	check_add(s, check_fixture(tcase_create("delays"), setup, teardown),
			CHECK_TESTS(a_json_delay_holds_the_copy_back_and_is_answered, json_delays_are_capped_and_zero_means_at_once,
			a_bad_json_delay_is_an_error_and_changes_nothing, a_compact_delay_ms_holds_the_copy_back,
			a_bad_compact_delay_ms_is_an_error_naming_it));

	check_add(s, check_fixture(tcase_create("settling"), setup, teardown),
			CHECK_TESTS(the_compact_topics_are_known_by_name, compact_acks_and_progress_are_answered,
			a_compact_ack_that_went_well_builds_no_reply, final_nacks, json_acks_need_an_id));
	return check_run(s);
}
