/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of collected.c: a dead letter another broker's plugin made,
 * as its bridge carries it in (its properties as envelope__headers writes
 * them), read back whole (id, broker, origin, reason, client, filter,
 * time, cause, retry count, final, payload, the publisher's own
 * properties); a message missing one of the plugin's properties, with one
 * twice or with a value no plugin writes is refused, naming the property.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "model/collected.h"
#include "model/envelope.h"
#include "mosquitto_dlq.h"
#include "test_util.h"
#include "util/headers.h"
#include "util/id.h"

static char why[512];

/* The dead letter edge-3 made (its publisher's tenant property first). */
static struct dlq_envelope *made(void)
{
	struct dlq_headers own = {0};
	ck_assert_int_eq(headers__add_user(&own, "tenant", "acme"), 0);
	ck_assert_int_eq(headers__add(&own, DLQ_HDR_CONTENT_TYPE, "text/plain", 10, NULL, 0), 0);
	struct dlq_envelope *e = envelope__new(DLQ_ENV_DEAD_LETTER, NULL, "dead/orders", "orders/7", "orders/#",
			"dead/orders", "no stock", "worker-3", "edge-3", "seven", 5, own.data, (uint32_t)own.len);
	headers__free(&own);
	ck_assert_ptr_nonnull(e);
	ck_assert(id__decode("AAAAAAAAAAAAAAAB", 16, &e->id));
	ck_assert(id__decode("BBBBBBBBBBBBBBBC", 16, &e->origin_id));
	e->time_ms = 1796000000123;
	e->retry_count = 3;
	e->cause = DLQ_DEAD_FINAL;
	e->final = true;
	e->qos = 1;
	return e;
}

/* Its properties as the bridge delivers them. */
static void props_of(const struct dlq_envelope *e, struct dlq_headers *h)
{
	ck_assert_int_eq(envelope__headers(e, h), 0);
}

START_TEST(a_dead_letter_reads_back_whole)
{
	struct dlq_envelope *e = made();
	struct dlq_headers h = {0};
	props_of(e, &h);
	struct dlq_envelope *got;
	ck_assert_int_eq(collected__letter("fleet/edge-3/dead/orders", "seven", 5, 1, h.data, h.len, &got, why,
			sizeof(why)), 0);
	ck_assert_int_eq(got->kind, DLQ_ENV_DEAD_LETTER);
	ck_assert(id__equal(&got->id, &e->id));
	ck_assert(id__equal(&got->origin_id, &e->origin_id));
	ck_assert_str_eq(got->broker, "edge-3");
	ck_assert_str_eq(got->topic, "fleet/edge-3/dead/orders");
	ck_assert_str_eq(got->dead_letter, "fleet/edge-3/dead/orders");
	ck_assert_str_eq(got->origin_topic, "orders/7");
	ck_assert_str_eq(got->filter, "orders/#");
	ck_assert_str_eq(got->reason, "no stock");
	ck_assert_str_eq(got->client, "worker-3");
	ck_assert_int_eq(got->time_ms, 1796000000123);
	ck_assert_uint_eq(got->retry_count, 3);
	ck_assert_uint_eq(got->cause, DLQ_DEAD_FINAL);
	ck_assert(got->final);
	ck_assert_uint_eq(got->qos, 1);
	ck_assert_uint_eq(got->payload_len, 5);
	ck_assert_mem_eq(got->payload, "seven", 5);
	/* The original headers are the publisher's alone, in their order;
	 * published again they are the same dead letter. */
	ck_assert_uint_eq(got->headers_len, e->headers_len);
	ck_assert_mem_eq(got->headers, e->headers, e->headers_len);
	struct dlq_headers again = {0};
	props_of(got, &again);
	ck_assert_uint_eq(again.len, h.len);
	ck_assert_mem_eq(again.data, h.data, h.len);
	headers__free(&again);
	headers__free(&h);
	envelope__free(got);
	envelope__free(e);
}
END_TEST

/* Without dead-letter-final it is no final one; a QoS 0 delivery is
 * kept with QoS 0; an empty payload is kept empty. */
START_TEST(optional_parts)
{
	struct dlq_envelope *e = made();
	e->final = false;
	e->cause = DLQ_DEAD_NACK;
	struct dlq_headers h = {0};
	props_of(e, &h);
	struct dlq_envelope *got;
	ck_assert_int_eq(collected__letter("fleet/x", NULL, 0, 0, h.data, h.len, &got, why, sizeof(why)), 0);
	ck_assert(!got->final);
	ck_assert_uint_eq(got->cause, DLQ_DEAD_NACK);
	ck_assert_uint_eq(got->qos, 0);
	ck_assert_uint_eq(got->payload_len, 0);
	envelope__free(got);
	headers__free(&h);
	envelope__free(e);
}
END_TEST

/* Rebuilds e's properties with the plugin's property name replaced by
 * value (NULL: left out), and with twice the original one after it. */
static void props_with(const struct dlq_envelope *e, const char *name, const char *value, bool twice,
		struct dlq_headers *out)
{
	struct dlq_headers all = {0};
	props_of(e, &all);
	size_t pos = 0;
	struct dlq_header x;
	while(headers__next(all.data, all.len, &pos, &x)){
		if(x.kind == DLQ_HDR_USER_PROPERTY && !strcmp(x.a, name)){
			if(value) ck_assert_int_eq(headers__add_user(out, name, value), 0);
			if(twice) ck_assert_int_eq(headers__add_user(out, name, x.b), 0);
			continue;
		}
		ck_assert_int_eq(headers__add(out, x.kind, x.a, x.a_len, x.b, x.b_len), 0);
	}
	headers__free(&all);
}

static void expect_refused(const char *name, const char *value, bool twice, const char *want)
{
	struct dlq_envelope *e = made();
	struct dlq_headers h = {0};
	props_with(e, name, value, twice, &h);
	struct dlq_envelope *got = (void *)1;
	why[0] = '\0';
	ck_assert_int_eq(collected__letter("fleet/x", "p", 1, 1, h.data, h.len, &got, why, sizeof(why)), EINVAL);
	ck_assert_ptr_null(got);
	ck_assert_msg(strstr(why, name) && strstr(why, want), "%s=%s: \"%s\" lacks \"%s\"", name, value ? value : "(none)",
			why, want);
	headers__free(&h);
	envelope__free(e);
}

START_TEST(each_required_property_missing_is_refused)
{
	static const char *const required[] = {
		DLQ_PROP_DEAD_LETTER_ID, DLQ_PROP_DEAD_LETTER_BROKER, DLQ_PROP_ORIGIN_TOPIC, DLQ_PROP_ORIGIN_ID,
		DLQ_PROP_RETRY_COUNT, DLQ_PROP_DEAD_LETTER_TIME, DLQ_PROP_DEAD_LETTER_CAUSE, DLQ_PROP_DEAD_LETTER_REASON,
		DLQ_PROP_DEAD_LETTER_CLIENT, DLQ_PROP_DEAD_LETTER_FILTER,
	};
	for(size_t i = 0; i < ARRAY_LEN(required); i++){
		expect_refused(required[i], NULL, false, "missing");
	}
}
END_TEST

START_TEST(wrong_values_are_refused_naming_the_property)
{
	static const struct {
		const char *name, *value, *want;
	} cases[] = {
		{DLQ_PROP_DEAD_LETTER_ID, "short", "base64url"},
		{DLQ_PROP_DEAD_LETTER_ID, "AAAAAAAAAAAAAAAA", "base64url"}, /* the zero id names no letter */
		{DLQ_PROP_ORIGIN_ID, "AAAAAAAAAAAAAAA!", "base64url"},
		{DLQ_PROP_DEAD_LETTER_BROKER, "", "empty"},
		{DLQ_PROP_DEAD_LETTER_BROKER, "edge/3", "'/'"},
		{DLQ_PROP_ORIGIN_TOPIC, "orders/+", "published"},
		{DLQ_PROP_ORIGIN_TOPIC, "", "published"},
		{DLQ_PROP_DEAD_LETTER_FILTER, "orders/#/x", "filter"},
		{DLQ_PROP_RETRY_COUNT, "-1", "0 to 65535"},
		{DLQ_PROP_RETRY_COUNT, "65536", "0 to 65535"},
		{DLQ_PROP_RETRY_COUNT, "03", "0 to 65535"},
		{DLQ_PROP_RETRY_COUNT, "", "0 to 65535"},
		{DLQ_PROP_DEAD_LETTER_TIME, "yesterday", "RFC 3339"},
		{DLQ_PROP_DEAD_LETTER_TIME, "2026-12-06T10:00:00+01:00", "RFC 3339"},
		{DLQ_PROP_DEAD_LETTER_CAUSE, "boredom", "cause"},
		{DLQ_PROP_DEAD_LETTER_FINAL, "yes", "\"true\""},
	};
	for(size_t i = 0; i < ARRAY_LEN(cases); i++){
		expect_refused(cases[i].name, cases[i].value, false, cases[i].want);
	}
}
END_TEST

START_TEST(a_property_twice_is_refused)
{
	expect_refused(DLQ_PROP_DEAD_LETTER_ID, "AAAAAAAAAAAAAAA2", true, "twice");
	expect_refused(DLQ_PROP_DEAD_LETTER_BROKER, "edge-9", true, "twice");
}
END_TEST

/* No properties at all (a v3.1.1 publisher, a v3.1.1 bridge): refused,
 * dead-letter-id named first. */
START_TEST(no_properties_is_no_dead_letter)
{
	struct dlq_envelope *got = (void *)1;
	ck_assert_int_eq(collected__letter("fleet/x", "garbage", 7, 0, NULL, 0, &got, why, sizeof(why)), EINVAL);
	ck_assert_ptr_null(got);
	ck_assert_msg(strstr(why, DLQ_PROP_DEAD_LETTER_ID " missing"), "%s", why);
}
END_TEST

/* The plugin's other names (a dlq-id, a later version's dead-letter-*)
 * are not the dead letter's: left out, the letter kept. */
START_TEST(other_names_of_the_plugin_are_left_out)
{
	struct dlq_envelope *e = made();
	struct dlq_headers h = {0};
	props_of(e, &h);
	ck_assert_int_eq(headers__add_user(&h, DLQ_PROP_ID, "CCCCCCCCCCCCCCCC"), 0);
	ck_assert_int_eq(headers__add_user(&h, "dead-letter-future", "x"), 0);
	struct dlq_envelope *got;
	ck_assert_int_eq(collected__letter("fleet/x", "seven", 5, 1, h.data, h.len, &got, why, sizeof(why)), 0);
	ck_assert_mem_eq(got->headers, e->headers, e->headers_len);
	ck_assert_uint_eq(got->headers_len, e->headers_len);
	envelope__free(got);
	headers__free(&h);
	envelope__free(e);
}
END_TEST

int main(void)
{
	return check_run(check_suite("collected", tcase_create("core"), CHECK_TESTS(a_dead_letter_reads_back_whole,
			optional_parts, each_required_property_missing_is_refused,
			wrong_values_are_refused_naming_the_property, a_property_twice_is_refused,
			no_properties_is_no_dead_letter, other_names_of_the_plugin_are_left_out)));
}
