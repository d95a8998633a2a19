/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of letter_view.c, what a kept dead letter shows in a reply
 * (getDeadLetter): its payload as text when it is UTF-8 an MQTT client
 * accepts, else base64, and the whole view, printed as the reply is, valid
 * UTF-8 by libmosquitto's own check (which refuses U+0001-U+001F,
 * U+007F-U+009F and the noncharacters: cJSON escapes the first as \uXXXX
 * and writes the others as they are). Dead letters made by the engine
 * against the fake broker port.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <mosquitto.h>

#include "api/letter_view.h"
#include "check_suite.h"
#include "engine/dlq.h"
#include "engine_calls.h"
#include "fake_port.h"
#include "mosquitto_dlq.h"
#include "test_util.h"

static struct dlq d;
static bool d_live;

/* The view of the dead letter of a message with payload, NACKed once. */
static cJSON *view_of(const char *payload)
{
	struct dlq_option opts[] = {
		{"policy", "jobs/# max_attempts=1 dead_letter=dead/jobs"},
		{"broker_name", "edge-1"},
	};
	char id[DLQ_ID_LEN + 1];
	fake_reset();
	engine_start(&d, &d_live, opts, ARRAY_LEN(opts), ENGINE_NO_SYS);
	engine_track(&d, "jobs/a", payload, 1, NULL, id);
	ck_assert_int_eq(engine_nack(&d, id, "worker", false), DLQ_NACK_DEAD_LETTERED);
	ck_assert_uint_eq(d.letters.count, 1);
	cJSON *v = letter_view__full(d.letters.oldest);
	ck_assert_ptr_nonnull(v);
	engine_stop(&d, &d_live);
	fake_reset();
	return v;
}

/* The view printed as a reply is: valid for libmosquitto. */
static void expect_mqtt_text(const cJSON *v)
{
	char *s = cJSON_PrintUnformatted(v);
	ck_assert_ptr_nonnull(s);
	ck_assert_msg(mosquitto_validate_utf8(s, (int)strlen(s)) == MOSQ_ERR_SUCCESS, "not valid UTF-8 for MQTT: %s", s);
	free(s);
}

static void expect_payload(const char *payload, const char *encoding, const char *shown)
{
	cJSON *v = view_of(payload);
	const cJSON *enc = cJSON_GetObjectItemCaseSensitive(v, "payloadEncoding");
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(v, "payload");
	ck_assert_msg(cJSON_IsString(enc) && !strcmp(enc->valuestring, encoding), "payload %s: payloadEncoding %s, not %s",
			shown, cJSON_IsString(enc) ? enc->valuestring : "(none)", encoding);
	ck_assert_msg(cJSON_IsString(p), "payload %s: no payload", shown);
	if(!strcmp(encoding, "utf-8")) ck_assert_str_eq(p->valuestring, payload);
	expect_mqtt_text(v);
	cJSON_Delete(v);
}

START_TEST(text_is_shown_as_it_is)
{
	expect_payload("plain text", "utf-8", "plain text");
	expect_payload("tab\there, line\nthere", "utf-8", "with TAB and LF (escaped by cJSON)");
	expect_payload("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "utf-8", "with é, € and an emoji");
}
END_TEST

START_TEST(what_mqtt_refuses_is_base64)
{
	expect_payload("he\x7f\x7f", "base64", "with DEL (U+007F)");
	expect_payload("next \xc2\x85 line", "base64", "with NEL (U+0085)");
	expect_payload("x \xef\xbf\xbe", "base64", "with U+FFFE");
	expect_payload("x \xef\xb7\x90", "base64", "with U+FDD0");
	expect_payload("\xff\xfe", "base64", "not UTF-8");
	expect_payload("\xed\xa0\x80", "base64", "a surrogate");
}
END_TEST

/* The view's member name is the string value. */
static void expect_member(const cJSON *v, const char *name, const char *value)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(v, name);
	ck_assert_msg(cJSON_IsString(m), "%s is not a string", name);
	ck_assert_str_eq(m->valuestring, value);
}

/* The view's properties hold exactly one user property key, of value. */
static void expect_one_user_prop(const cJSON *v, const char *key, const char *value)
{
	size_t found = 0;
	const cJSON *p;
	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(v, "properties")){
		const cJSON *k = cJSON_GetObjectItemCaseSensitive(p, "key");
		if(cJSON_IsString(k) && !strcmp(k->valuestring, key)){
			ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(p, "value")->valuestring, value);
			found++;
		}
	}
	ck_assert_uint_eq(found, 1);
}

/* The summary says the letter's cause, as its dead-letter-cause property
 * (among its properties) does. */
START_TEST(the_summary_says_the_cause)
{
	cJSON *v = view_of("job");
	expect_member(v, "cause", DLQ_CAUSE_NACK);
	expect_one_user_prop(v, DLQ_PROP_DEAD_LETTER_CAUSE, DLQ_CAUSE_NACK);
	cJSON_Delete(v);
}
END_TEST

/* The summary says the broker that made the letter (plugin_opt_broker_name),
 * as its dead-letter-broker property does, once. */
START_TEST(the_summary_says_the_broker)
{
	cJSON *v = view_of("job");
	expect_member(v, "broker", "edge-1");
	expect_one_user_prop(v, DLQ_PROP_DEAD_LETTER_BROKER, "edge-1");
	cJSON_Delete(v);
}
END_TEST

/* The name is read once, at start: a reload keeps it (the plugin reloads
 * the options it started with, and the host name is not read again). */
START_TEST(a_reload_keeps_the_broker_name)
{
	struct dlq_option opts[] = {
		{"policy", "jobs/# max_attempts=1 dead_letter=dead/jobs"},
		{"broker_name", "edge-1"},
	};
	struct dlq_option again[] = {
		{"policy", "jobs/# max_attempts=1 dead_letter=dead/jobs"},
		{"broker_name", "edge-2"},
	};
	char id[DLQ_ID_LEN + 1], err[1024];
	fake_reset();
	engine_start(&d, &d_live, opts, ARRAY_LEN(opts), ENGINE_NO_SYS);
	ck_assert_msg(dlq__reload(&d, again, ARRAY_LEN(again), err, sizeof(err)) == 0, "%s", err);
	ck_assert_msg(dlq__reload(&d, again, 1, err, sizeof(err)) == 0, "%s", err);
	engine_track(&d, "jobs/a", "job", 1, NULL, id);
	ck_assert_int_eq(engine_nack(&d, id, "worker", false), DLQ_NACK_DEAD_LETTERED);
	ck_assert_uint_eq(d.letters.count, 1);
	ck_assert_str_eq(d.letters.oldest->env->broker, "edge-1");
	engine_stop(&d, &d_live);
	fake_reset();
}
END_TEST

START_TEST(base64_gives_the_bytes_back)
{
	cJSON *v = view_of("he\x7f");
	expect_member(v, "payload", "aGV/");
	cJSON_Delete(v);
}
END_TEST

int main(void)
{
	return check_run(check_suite("letter_view", tcase_create("payload"), CHECK_TESTS(text_is_shown_as_it_is,
			what_mqtt_refuses_is_base64, base64_gives_the_bytes_back, the_summary_says_the_cause,
			the_summary_says_the_broker, a_reload_keeps_the_broker_name)));
}
