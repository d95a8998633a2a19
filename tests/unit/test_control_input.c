/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of control_input.c and of what control.c does with its
 * verdicts: a response topic that is not a valid topic name (the reply goes
 * to the default topic and says why), JSON text that is not UTF-8 or whose
 * strings hold \u0000 (refused, naming the member), client text echoed in a
 * reply (cut at a character boundary, valid UTF-8), and the cap on what the
 * status commands of one message may return.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "api/control.h"
#include "api/control_input.h"
#include "check_suite.h"
#include "config/config.h"
#include "engine/dlq.h"
#include "engine_calls.h"
#include "fake_port.h"
#include "mosquitto_dlq.h"
#include "test_util.h"
#include "util/errtext.h"

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t handle_ns; /* the last control__handle */
static struct dlq d;
static struct dlq_control_reply reply;
static cJSON *doc;

static void setup(void)
{
	static const struct dlq_option opts[] = {
		{"policy", "jobs max_attempts=3 dead_letter=dead/jobs"},
		{"policy", "slow max_attempts=3 dead_letter=dead/slow"},
		{"policy", "more/# max_attempts=3 dead_letter=dead/more"},
	};
	fake_reset();
	engine_start(&d, NULL, opts, ARRAY_LEN(opts), ENGINE_NO_SYS);
}

static void teardown(void)
{
	control__reply_free(&reply);
	cJSON_Delete(doc);
	doc = NULL;
	engine_stop(&d, NULL);
	fake_reset();
}

/* A strict check of the whole reply: well-formed UTF-8 throughout (what
 * a strict JSON parser demands), then JSON. */
static void parse_reply(void)
{
	size_t len = strlen(reply.json);
	ck_assert_msg(errtext__utf8_check(reply.json, len) == len, "reply is not UTF-8: %s", reply.json);
	doc = cJSON_Parse(reply.json);
	ck_assert_msg(doc != NULL, "reply is not JSON: %s", reply.json);
}

static const cJSON *request(bool compact, const char *payload, size_t len, const char *response_topic)
{
	void *exact = malloc(len ? len : 1);
	ck_assert_ptr_nonnull(exact);
	if(len) memcpy(exact, payload, len);
	struct dlq_control_request req = {
		.compact = compact, .payload = exact, .payload_len = len, .client = "c",
		.reply_wanted = true, .response_topic = response_topic,
	};
	control__reply_free(&reply);
	cJSON_Delete(doc);
	doc = NULL;
	uint64_t t0 = mono_ns();
	ck_assert_int_eq(control__handle(&d, &req, &reply), 0);
	handle_ns = mono_ns() - t0;
	free(exact);
	ck_assert_ptr_nonnull(reply.json);
	parse_reply();
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(doc, "responses");
	ck_assert(cJSON_IsArray(r));
	return r;
}

static const cJSON *json(const char *payload)
{
	return request(false, payload, strlen(payload), NULL);
}

static const char *error_of(const cJSON *responses, int i)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(responses, i), "error");
	return cJSON_IsString(e) ? e->valuestring : NULL;
}

START_TEST(response_topics_that_are_not_topic_names_are_named)
{
	ck_assert_ptr_null(control_input__topic_problem("me/replies"));
	ck_assert_ptr_null(control_input__topic_problem("caf\xc3\xa9/$x"));
	ck_assert_str_eq(control_input__topic_problem(""), "is empty");
	ck_assert_str_eq(control_input__topic_problem("#"), "contains a wildcard (+ or #)");
	ck_assert_str_eq(control_input__topic_problem("+"), "contains a wildcard (+ or #)");
	ck_assert_str_eq(control_input__topic_problem("a/#"), "contains a wildcard (+ or #)");
	ck_assert_str_eq(control_input__topic_problem("bad\xff"), "is not valid UTF-8");
	ck_assert_str_eq(control_input__topic_problem("\xed\xa0\x80"), "is not valid UTF-8"); /* a surrogate */
	char *huge = malloc(65537);
	ck_assert_ptr_nonnull(huge);
	memset(huge, 'a', 65536);
	huge[65536] = '\0';
	ck_assert_str_eq(control_input__topic_problem(huge), "is longer than 65535 bytes");
	huge[65535] = '\0';
	ck_assert_ptr_null(control_input__topic_problem(huge));
	free(huge);
}
END_TEST

START_TEST(a_reply_for_an_invalid_response_topic_goes_to_the_default_topic)
{
	static const char *const bad[] = { "", "#", "+", "a/#" };
	for(size_t i = 0; i < ARRAY_LEN(bad); i++){
		json("{\"commands\":[{\"command\":\"getStatus\"}]}");
		ck_assert_str_eq(reply.topic, DLQ_RESPONSE_TOPIC);
		request(false, "{\"commands\":[{\"command\":\"getStatus\"}]}", 39, bad[i]);
		ck_assert_msg(!strcmp(reply.topic, DLQ_RESPONSE_TOPIC), "reply for \"%s\" on \"%s\"", bad[i], reply.topic);
		const cJSON *why = cJSON_GetObjectItemCaseSensitive(doc, "responseTopicError");
		ck_assert_msg(cJSON_IsString(why), "no responseTopicError for \"%s\": %s", bad[i], reply.json);
		char want[64];
		snprintf(want, sizeof(want), "response topic \"%s\" ", bad[i]);
		ck_assert_msg(strstr(why->valuestring, want) && strstr(why->valuestring, "replied on " DLQ_RESPONSE_TOPIC),
				"%s", why->valuestring);
	}
	/* A compact NACK with one: its reply is sent (a response topic asks for
	 * one) to the default topic. */
	request(true, "nonsense", 8, "a/+/b");
	ck_assert(reply.must_send);
	ck_assert_str_eq(reply.topic, DLQ_RESPONSE_TOPIC);
	ck_assert(strstr(reply.json, "contains a wildcard"));
	/* A good one is used as it is, and the reply says nothing about it. */
	request(false, "{\"commands\":[]}", 15, "me/replies");
	ck_assert_str_eq(reply.topic, "me/replies");
	ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(doc, "responseTopicError"));
}
END_TEST

START_TEST(an_unknown_command_is_echoed_cut_at_a_character_boundary)
{
	/* The issue's input: "a" and 38 "é", 77 bytes. */
	char name[128] = "a";
	for(int i = 0; i < 38; i++) strcat(name, "\xc3\xa9");
	char payload[256];
	snprintf(payload, sizeof(payload), "{\"commands\":[{\"command\":\"%s\"}]}", name);
	const cJSON *r = json(payload); /* parse_reply checked UTF-8 */
	const char *err = error_of(r, 0);
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(strstr(err, "unknown command \"a\xc3\xa9") && strstr(err, "\xc3\xa9...\""), "%s", err);
	const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(r, 0), "command");
	ck_assert(cJSON_IsString(cmd) && strlen(cmd->valuestring) <= 64);
	/* 4-byte characters, and control characters made spaces. */
	json("{\"commands\":[{\"command\":\"\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80"
			"\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80"
			"\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80"
			"\xf0\x9f\x98\x80\\u0007\"}]}");
	/* A response topic is echoed the same way. */
	char topic[200] = "t/";
	for(int i = 0; i < 40; i++) strcat(topic, "\xe2\x82\xac");
	strcat(topic, "/#");
	request(false, "{\"commands\":[]}", 15, topic);
}
END_TEST

START_TEST(text_that_is_not_utf8_is_refused_naming_the_byte)
{
	const char bad[] = "{\"commands\":[{\"command\":\"nack\",\"id\":\"x\",\"correlationData\":\"\xff\"}]}";
	const cJSON *r = json(bad);
	ck_assert_int_eq(cJSON_GetArraySize(r), 1);
	ck_assert_str_eq(error_of(r, 0), "payload is not valid UTF-8 (at byte 59)");
	const char nul[] = "{\"commands\":[{\"command\":\"nack\",\"id\":\"x\0y\"}]}";
	r = request(false, nul, sizeof(nul) - 1, NULL);
	ck_assert_str_eq(error_of(r, 0), "payload holds a NUL byte (at byte 38)");
	ck_assert_uint_eq(engine__totals(&d)->nacks + engine__totals(&d)->nacks_refused, 0);
}
END_TEST

START_TEST(a_string_holding_u0000_is_refused_naming_its_member)
{
	char id[DLQ_ID_LEN + 1];
	const struct dlq_policy *p = dlq__policy_for(&d, "jobs");
	ck_assert_int_eq(dlq__track(&d, p, "jobs", "x", 1, 1, NULL, 0, id), 0);
	static const struct {
		const char *member;
		const char *fmt;
	} cases[] = {
		{ "delay", "{\"commands\":[{\"command\":\"nack\",\"id\":\"%s\",\"delay\":\"5ms\\u0000\"}]}" },
		{ "id", "{\"commands\":[{\"command\":\"nack\",\"id\":\"%s\\u0000\"}]}" },
		{ "reason", "{\"commands\":[{\"command\":\"nack\",\"id\":\"%s\",\"reason\":\"a\\u0000b\"}]}" },
		{ "command", "{\"commands\":[{\"command\":\"nack\\u0000\",\"id\":\"%s\"}]}" },
		{ "correlationData", "{\"commands\":[{\"command\":\"nack\",\"id\":\"%s\",\"correlationData\":{\"k\":[\"\\u0000\"]}}]}" },
		{ "commands", "{\"commands\":[\"\\u0000\"],\"x\":\"%s\"}" },
	};
	for(size_t i = 0; i < ARRAY_LEN(cases); i++){
		char payload[256];
		snprintf(payload, sizeof(payload), cases[i].fmt, id);
		const cJSON *r = json(payload);
		ck_assert_int_eq(cJSON_GetArraySize(r), 1);
		char want[80];
		snprintf(want, sizeof(want), "\"%s\" must not contain a NUL character (\\u0000)", cases[i].member);
		ck_assert_msg(error_of(r, 0) && !strcmp(error_of(r, 0), want), "%s: %s", payload, reply.json);
	}
	/* Nothing was NACKed; an escaped backslash before u0000 is no NUL,
	 * and the same NACK without one goes through. */
	ck_assert_uint_eq(engine__totals(&d)->nacks, 0);
	char payload[256];
	snprintf(payload, sizeof(payload), "{\"commands\":[{\"command\":\"nack\",\"id\":\"%s\",\"reason\":\"\\\\u0000\",\"delay\":\"5ms\"}]}", id);
	const cJSON *r = json(payload);
	ck_assert_ptr_null(error_of(r, 0));
	ck_assert_uint_eq(engine__totals(&d)->nacks, 1);
}
END_TEST

START_TEST(status_commands_of_one_message_are_capped)
{
	/* Three policies: each status command costs 4 entries, so 25 fit. */
	size_t n = DLQ_MAX_COMMANDS;
	size_t cap = DLQ_MAX_STATUS_ENTRIES / (d.cfg.policies.count + 1);
	char *payload = malloc(n * 40 + 64);
	ck_assert_ptr_nonnull(payload);
	size_t o = (size_t)sprintf(payload, "{\"commands\":[");
	for(size_t i = 0; i < n; i++){
		o += (size_t)sprintf(payload + o, "%s{\"command\":\"%s\"}", i ? "," : "",
				i % 3 == 0 ? DLQ_COMMAND_LIST_POLICIES : DLQ_COMMAND_GET_STATUS);
	}
	strcpy(payload + o, "]}");
	/* A printed figure, not an assertion: what one such message costs. */
	const cJSON *r = json(payload);
	fprintf(stderr, "control: a message of %zu status commands (%zu run, %zu policies) took %.2f ms "
			"to handle, its %zu-byte reply included\n", n, cap, d.cfg.policies.count, (double)handle_ns / 1e6,
			strlen(reply.json));
	free(payload);
	ck_assert_int_eq(cJSON_GetArraySize(r), (int)n);
	for(size_t i = 0; i < n; i++){
		const char *err = error_of(r, (int)i);
		if(i < cap){
			ck_assert_msg(err == NULL, "entry %zu: %s", i, err);
		}else{
			ck_assert_msg(err && strstr(err, "not run: the status commands of one message may return at most 100 "),
					"entry %zu: %s", i, err ? err : "(data)");
		}
	}
	ck_assert_uint_eq(reply.errors, n - cap);
}
END_TEST

START_TEST(the_first_status_command_runs_whatever_the_policies)
{
	engine_stop(&d, NULL);
	/* 1200 policies: more than the cap on their own. */
	struct dlq_option *opts = calloc(1200, sizeof(*opts));
	char (*lines)[64] = calloc(1200, sizeof(*lines));
	ck_assert(opts && lines);
	for(int i = 0; i < 1200; i++){
		snprintf(lines[i], sizeof(lines[i]), "p/%d max_attempts=2 dead_letter=dead/p", i);
		opts[i] = (struct dlq_option){"policy", lines[i]};
	}
	engine_start(&d, NULL, opts, 1200, ENGINE_NO_SYS);
	free(opts);
	free(lines);
	const cJSON *r = json("{\"commands\":[{\"command\":\"getStatus\"},{\"command\":\"nack\",\"id\":\"x\"},"
			"{\"command\":\"listPolicies\"},{\"command\":\"getStatus\"}]}");
	ck_assert_ptr_null(error_of(r, 0));
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(r, 0), "data");
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(data, "policies")), 1200);
	ck_assert_str_eq(error_of(r, 1), "malformed dlq-id: expected 16 base64url characters");
	ck_assert_ptr_null(error_of(r, 2)); /* the first of its kind */
	ck_assert(error_of(r, 3) && strstr(error_of(r, 3), "not run"));
}
END_TEST

START_TEST(clean_cuts_at_character_boundaries_and_replaces_what_is_not_text)
{
	char out[8];
	ck_assert_uint_eq(errtext__clean("ab\xc3\xa9\xc3\xa9\xc3\xa9", 8, out, 5), 4);
	ck_assert_str_eq(out, "ab\xc3\xa9");
	ck_assert_uint_eq(errtext__clean("\xff\x01\xef\xbf\xbe" "a", 6, out, 7), 6);
	ck_assert_str_eq(out, "? ?a"); /* ill-formed, control, non-character */
	ck_assert_uint_eq(errtext__utf8_check("ok\xe2\x82", 4), 2);
	ck_assert_uint_eq(errtext__utf8_check("\xc0\x80", 2), 0); /* overlong NUL */
	ck_assert_uint_eq(errtext__utf8_check("\xef\xbf\xbe", 3), 3); /* a non-character is well-formed */
}
END_TEST

int main(void)
{
	return check_run(check_suite("control_input", check_fixture(tcase_create("core"), setup, teardown), CHECK_TESTS(
			response_topics_that_are_not_topic_names_are_named,
			a_reply_for_an_invalid_response_topic_goes_to_the_default_topic,
			an_unknown_command_is_echoed_cut_at_a_character_boundary, text_that_is_not_utf8_is_refused_naming_the_byte,
			a_string_holding_u0000_is_refused_naming_its_member, status_commands_of_one_message_are_capped,
			the_first_status_command_runs_whatever_the_policies,
			clean_cuts_at_character_boundaries_and_replaces_what_is_not_text)));
}
