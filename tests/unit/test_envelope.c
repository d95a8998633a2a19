/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of envelope.c: what a retry copy and a dead letter are made of
 * and the exact list of properties each goes out with: the original
 * headers, in order, then the plugin's own (design.md, "Dead letters").
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check_suite.h"
#include "fake_port.h"
#include "model/envelope.h"
#include "model/record.h"
#include "mosquitto_dlq.h"
#include "record_fixture.h"
#include "test_util.h"
#include "util/headers.h"
#include "util/id.h"

static struct dlq_policy numbers = {
	.filter = "numbers",
	.dead_letter = "dead/numbers",
	.retry_to = NULL,
	.max_attempts = 3,
};

static struct dlq_policy telemetry = {
	.filter = "devices/+/telemetry",
	.dead_letter = "dead/telemetry",
	.retry_to = "devices/retry/telemetry",
	.max_attempts = 5,
};

static const char corr[] = {'c', '\0', 'o', '\0'};

static struct dlq_idgen idgen;
static struct dlq_headers original; /* the publisher's headers */

static struct dlq_id fresh_id(void)
{
	struct dlq_id id;
	ck_assert_int_eq(id__gen_next(&idgen, &id), 0);
	return id;
}

static const char *text(const struct dlq_id *id)
{
	static char buf[4][DLQ_ID_LEN + 1];
	static int next;
	char *b = buf[next++ % 4];
	id__encode(id, b);
	return b;
}

/* An original on "numbers", qos given, with the standard test headers. */
static struct dlq_record *original_record(uint8_t qos)
{
	struct dlq_id id = fresh_id();
	struct dlq_record *r = record_fixture__make(0, .id = &id, .origin_id = &id, .topic = "numbers",
			.payload = "42", .payload_len = 2, .headers = original.data, .headers_len = original.len,
			.policy = &numbers, .attempt = 1, .qos = qos, .now_ms = 1000);
	ck_assert_ptr_nonnull(r);
	return r;
}

/* A walk through an encoded header list, entry by entry. */
struct walk {
	const uint8_t *data;
	size_t len;
	size_t pos;
};

static void expect_hdr(struct walk *w, uint8_t kind, const void *a, size_t a_len)
{
	struct dlq_header e;
	ck_assert_msg(headers__next(w->data, w->len, &w->pos, &e), "header of kind %u missing", kind);
	ck_assert_uint_eq(e.kind, kind);
	ck_assert_uint_eq(e.a_len, a_len);
	ck_assert_mem_eq(e.a, a, a_len);
}

static void expect_user(struct walk *w, const char *name, const char *value)
{
	struct dlq_header e;
	ck_assert_msg(headers__next(w->data, w->len, &w->pos, &e), "user property %s missing", name);
	ck_assert_uint_eq(e.kind, DLQ_HDR_USER_PROPERTY);
	ck_assert_str_eq(e.a, name);
	ck_assert_str_eq(e.b, value);
}

static void expect_no_more(struct walk *w)
{
	struct dlq_header e;
	if(headers__next(w->data, w->len, &w->pos, &e)){
		ck_abort_msg("unexpected header of kind %u: %s", e.kind, e.a);
	}
	ck_assert_uint_eq(w->pos, w->len);
}

/* The publisher's headers, in the order they were given. */
static void expect_original_headers(struct walk *w)
{
	const uint8_t format = 1;
	expect_hdr(w, DLQ_HDR_PAYLOAD_FORMAT, &format, 1);
	expect_hdr(w, DLQ_HDR_CONTENT_TYPE, "text/plain", 10);
	expect_user(w, "trace", "t-1");
	expect_hdr(w, DLQ_HDR_CORRELATION_DATA, corr, sizeof(corr));
	expect_user(w, "trace", "t-2");
}

START_TEST(format_time_writes_rfc3339_utc_with_milliseconds)
{
	char out[32];
	envelope__format_time(0, out);
	ck_assert_str_eq(out, "1970-01-01T00:00:00.000Z");
	envelope__format_time(1, out);
	ck_assert_str_eq(out, "1970-01-01T00:00:00.001Z");
	envelope__format_time(1790000000123LL, out);
	ck_assert_str_eq(out, "2026-09-21T14:13:20.123Z");
	envelope__format_time(951782400999LL, out);
	ck_assert_str_eq(out, "2000-02-29T00:00:00.999Z");
	envelope__format_time(253402300799999LL, out);
	ck_assert_str_eq(out, "9999-12-31T23:59:59.999Z");
}
END_TEST

/* The reference: what gmtime_r and strftime write. */
static void reference_time(int64_t ms, char out[32])
{
	time_t s = (time_t)(ms / 1000);
	int frac = (int)(ms % 1000);
	if(frac < 0){
		frac += 1000;
		s -= 1;
	}
	struct tm tm;
	gmtime_r(&s, &tm);
	size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, 32 - n, ".%03dZ", frac);
}

START_TEST(format_time_agrees_with_strftime)
{
	char a[32], b[32];
	/* Day and year boundaries, leap days, the ends of the 4-digit years,
	 * before 1970, and pseudo-random instants in between. */
	const int64_t fixed[] = {
		-1, -999, -1000, -1001, -86400000, -62167219200000LL, -62167219200001LL, 253402300800000LL,
		951868799999LL, 951868800000LL, 4107542400000LL, 978307199999LL, 978307200000LL,
	};
	for(size_t i = 0; i < ARRAY_LEN(fixed); i++){
		envelope__format_time(fixed[i], a);
		reference_time(fixed[i], b);
		ck_assert_msg(!strcmp(a, b), "%lld: %s, strftime says %s", (long long)fixed[i], a, b);
	}
	uint64_t x = 88172645463325252ull;
	for(int i = 0; i < 200000; i++){
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		int64_t ms = (int64_t)(x % 253402300800000ull);
		envelope__format_time(ms, a);
		reference_time(ms, b);
		ck_assert_msg(!strcmp(a, b), "%lld: %s, strftime says %s", (long long)ms, a, b);
	}
}
END_TEST

START_TEST(a_targeted_retry_copy_goes_to_the_record_topic_for_its_client)
{
	struct dlq_record *r = original_record(1);
	struct dlq_id copy_id = fresh_id();
	struct dlq_envelope *e = envelope__retry_copy(r, &copy_id, NULL, "sub1", "sub1", 1790000000123LL);
	ck_assert_ptr_nonnull(e);

	ck_assert_int_eq(e->kind, DLQ_ENV_RETRY_COPY);
	ck_assert_str_eq(e->target_client, "sub1");
	ck_assert_str_eq(e->topic, "numbers");
	ck_assert_str_eq(e->origin_topic, "numbers");
	ck_assert_str_eq(e->filter, "numbers");
	ck_assert_str_eq(e->dead_letter, "dead/numbers");
	ck_assert_str_eq(e->client, "sub1");
	ck_assert_ptr_null(e->reason);
	ck_assert_uint_eq(e->payload_len, 2);
	ck_assert_mem_eq(e->payload, "42", 2);
	ck_assert_mem_eq(e->id.raw, copy_id.raw, sizeof(copy_id.raw));
	ck_assert_mem_eq(e->origin_id.raw, r->id.raw, sizeof(r->id.raw));
	ck_assert_uint_eq(e->retry_count, 1);
	ck_assert_uint_eq(e->qos, 1);
	ck_assert_uint_eq(envelope__qos(e), 1);
	ck_assert_int_eq(e->time_ms, 1790000000123LL);
	ck_assert_uint_ge(e->bytes, sizeof(*e) + 2 + original.len);

	struct dlq_headers h = {0};
	ck_assert_int_eq(envelope__headers(e, &h), 0);
	struct walk w = {h.data, h.len, 0};
	expect_original_headers(&w);
	expect_user(&w, DLQ_PROP_ID, text(&copy_id));
	expect_user(&w, DLQ_PROP_RETRY_COUNT, "1");
	expect_user(&w, DLQ_PROP_ORIGIN_TOPIC, "numbers");
	expect_user(&w, DLQ_PROP_ORIGIN_ID, text(&r->id));
	expect_no_more(&w);

	headers__free(&h);
	envelope__free(e);
	record__free(r);
}
END_TEST

START_TEST(a_fixed_retry_copy_is_an_ordinary_publish_to_retry_to)
{
	struct dlq_id id = fresh_id();
	struct dlq_record *r = record_fixture__make(0, .id = &id, .origin_id = &id, .topic = "devices/7/telemetry",
			.payload = "t=21", .payload_len = 4, .policy = &telemetry, .attempt = 1, .qos = 0,
			.now_ms = 1000);
	ck_assert_ptr_nonnull(r);
	struct dlq_id copy_id = fresh_id();
	struct dlq_envelope *e = envelope__retry_copy(r, &copy_id, "devices/retry/telemetry", NULL, "sub1", 5);
	ck_assert_ptr_nonnull(e);

	ck_assert_ptr_null(e->target_client);
	ck_assert_str_eq(e->topic, "devices/retry/telemetry");
	ck_assert_str_eq(e->origin_topic, "devices/7/telemetry");
	ck_assert_str_eq(e->client, "sub1");
	ck_assert_uint_eq(e->qos, 0);
	ck_assert_uint_eq(envelope__qos(e), 0); /* a copy keeps the original's QoS */

	struct dlq_headers h = {0};
	ck_assert_int_eq(envelope__headers(e, &h), 0);
	struct walk w = {h.data, h.len, 0};
	expect_user(&w, DLQ_PROP_ID, text(&copy_id));
	expect_user(&w, DLQ_PROP_RETRY_COUNT, "1");
	expect_user(&w, DLQ_PROP_ORIGIN_TOPIC, "devices/7/telemetry");
	expect_user(&w, DLQ_PROP_ORIGIN_ID, text(&id));
	expect_no_more(&w);

	headers__free(&h);
	envelope__free(e);
	record__free(r);
}
END_TEST

START_TEST(a_copy_of_a_copy_keeps_the_chains_origin)
{
	/* The record of a third delivery: on the retry topic, origin elsewhere. */
	struct dlq_id origin = fresh_id(), id = fresh_id(), copy_id = fresh_id();
	struct dlq_record *r = record_fixture__make(0, .id = &id, .origin_id = &origin,
			.topic = "devices/retry/telemetry", .origin_topic = "devices/7/telemetry", .payload = "t=21",
			.payload_len = 4, .headers = original.data, .headers_len = original.len, .policy = &telemetry,
			.attempt = 3, .qos = 2, .now_ms = 1000);
	ck_assert_ptr_nonnull(r);
	struct dlq_envelope *e = envelope__retry_copy(r, &copy_id, "devices/retry/telemetry", NULL, "sub9", 5);
	ck_assert_ptr_nonnull(e);
	ck_assert_uint_eq(e->retry_count, 3);
	ck_assert_uint_eq(envelope__qos(e), 2);

	struct dlq_headers h = {0};
	ck_assert_int_eq(envelope__headers(e, &h), 0);
	struct walk w = {h.data, h.len, 0};
	expect_original_headers(&w);
	expect_user(&w, DLQ_PROP_ID, text(&copy_id));
	expect_user(&w, DLQ_PROP_RETRY_COUNT, "3");
	expect_user(&w, DLQ_PROP_ORIGIN_TOPIC, "devices/7/telemetry");
	expect_user(&w, DLQ_PROP_ORIGIN_ID, text(&origin));
	expect_no_more(&w);

	headers__free(&h);
	envelope__free(e);
	record__free(r);
}
END_TEST

START_TEST(a_dead_letter_carries_the_documented_headers_in_order)
{
	struct dlq_id origin = fresh_id(), id = fresh_id();
	struct dlq_record *r = record_fixture__make(0, .id = &id, .origin_id = &origin, .topic = "numbers",
			.payload = "42", .payload_len = 2, .headers = original.data, .headers_len = original.len,
			.policy = &numbers, .attempt = 3, .qos = 1, .now_ms = 1000);
	ck_assert_ptr_nonnull(r);
	struct dlq_envelope *e = envelope__dead_letter(r, "sub1", "edge-1", DLQ_DEAD_NACK, "parse error: not a number",
			1790000000123LL);
	ck_assert_ptr_nonnull(e);

	ck_assert_int_eq(e->kind, DLQ_ENV_DEAD_LETTER);
	ck_assert_ptr_null(e->target_client);
	ck_assert_str_eq(e->topic, "dead/numbers");
	ck_assert_str_eq(e->reason, "parse error: not a number");
	ck_assert_uint_eq(e->payload_len, 2);
	ck_assert_mem_eq(e->payload, "42", 2);
	ck_assert_uint_eq(e->retry_count, 3);
	ck_assert_uint_eq(envelope__qos(e), 1);

	struct dlq_headers h = {0};
	ck_assert_int_eq(envelope__headers(e, &h), 0);
	struct walk w = {h.data, h.len, 0};
	expect_original_headers(&w);
	expect_user(&w, DLQ_PROP_RETRY_COUNT, "3");
	expect_user(&w, DLQ_PROP_ORIGIN_TOPIC, "numbers");
	expect_user(&w, DLQ_PROP_ORIGIN_ID, text(&origin));
	expect_user(&w, DLQ_PROP_DEAD_LETTER_REASON, "parse error: not a number");
	expect_user(&w, DLQ_PROP_DEAD_LETTER_CLIENT, "sub1");
	expect_user(&w, DLQ_PROP_DEAD_LETTER_FILTER, "numbers");
	expect_user(&w, DLQ_PROP_DEAD_LETTER_TIME, "2026-09-21T14:13:20.123Z");
	expect_user(&w, DLQ_PROP_DEAD_LETTER_CAUSE, "nack");
	expect_user(&w, DLQ_PROP_DEAD_LETTER_BROKER, "edge-1");
	expect_no_more(&w);
	headers__free(&h);

	/* Once the engine names it for the dead-letter store, its id comes
	 * last, and a copy keeps every field. */
	e->id = fresh_id();
	struct dlq_envelope *c = envelope__copy(e);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(envelope__headers(c, &h), 0);
	struct fake_publish as_sent = {.headers = h.data, .headers_len = h.len};
	ck_assert_str_eq(fake_header_value(&as_sent, DLQ_PROP_DEAD_LETTER_ID), text(&e->id));
	ck_assert_str_eq(fake_header_value(&as_sent, DLQ_PROP_DEAD_LETTER_TIME), "2026-09-21T14:13:20.123Z");
	ck_assert_str_eq(c->reason, e->reason);
	ck_assert_uint_eq(c->cause, DLQ_DEAD_NACK);
	ck_assert_str_eq(c->broker, "edge-1");
	ck_assert_str_eq(fake_header_value(&as_sent, DLQ_PROP_DEAD_LETTER_BROKER), "edge-1");
	ck_assert_uint_eq(c->retry_count, 3);
	ck_assert_mem_eq(c->origin_id.raw, origin.raw, DLQ_ID_RAW_LEN);
	envelope__free(c);

	headers__free(&h);
	envelope__free(e);
	record__free(r);
}
END_TEST

START_TEST(without_a_reason_the_dead_letter_says_attempts_ran_out)
{
	struct dlq_record *r = original_record(1);
	struct dlq_envelope *e = envelope__dead_letter(r, "sub1", "edge-1", DLQ_DEAD_NACK, NULL, 0);
	ck_assert_ptr_nonnull(e);
	ck_assert_ptr_nonnull(e->reason);
	/* It names the limit that was reached. */
	ck_assert_str_eq(e->reason, "max_attempts (3) reached");

	struct dlq_headers h = {0};
	ck_assert_int_eq(envelope__headers(e, &h), 0);
	struct fake_publish as_sent = {.headers = h.data, .headers_len = h.len};
	ck_assert_str_eq(fake_header_value(&as_sent, DLQ_PROP_DEAD_LETTER_REASON), e->reason);
	ck_assert_str_eq(fake_header_value(&as_sent, DLQ_PROP_DEAD_LETTER_TIME), "1970-01-01T00:00:00.000Z");
	headers__free(&h);
	envelope__free(e);
	record__free(r);
}
END_TEST

START_TEST(a_dead_letter_has_at_least_qos_1)
{
	for(uint8_t qos = 0; qos <= 2; qos++){
		struct dlq_record *r = original_record(qos);
		struct dlq_envelope *e = envelope__dead_letter(r, "sub1", "edge-1", DLQ_DEAD_NACK, NULL, 0);
		ck_assert_ptr_nonnull(e);
		ck_assert_uint_eq(envelope__qos(e), qos < 1 ? 1 : qos);
		envelope__free(e);
		record__free(r);
	}
}
END_TEST

START_TEST(a_dead_letter_without_original_headers_has_only_the_plugins)
{
	struct dlq_id id = fresh_id();
	struct dlq_record *r = record_fixture__make(0, .id = &id, .origin_id = &id, .topic = "numbers", .payload = "",
			.payload_len = 0, .policy = &numbers, .attempt = 1, .qos = 0, .now_ms = 1000);
	ck_assert_ptr_nonnull(r);
	struct dlq_envelope *e = envelope__dead_letter(r, "c", NULL, DLQ_DEAD_FINAL, "why", 0);
	ck_assert_ptr_nonnull(e);
	ck_assert_uint_eq(e->payload_len, 0);
	struct dlq_headers h = {0};
	ck_assert_int_eq(envelope__headers(e, &h), 0);
	struct walk w = {h.data, h.len, 0};
	expect_user(&w, DLQ_PROP_RETRY_COUNT, "1");
	expect_user(&w, DLQ_PROP_ORIGIN_TOPIC, "numbers");
	expect_user(&w, DLQ_PROP_ORIGIN_ID, text(&id));
	expect_user(&w, DLQ_PROP_DEAD_LETTER_REASON, "why");
	expect_user(&w, DLQ_PROP_DEAD_LETTER_CLIENT, "c");
	expect_user(&w, DLQ_PROP_DEAD_LETTER_FILTER, "numbers");
	expect_user(&w, DLQ_PROP_DEAD_LETTER_TIME, "1970-01-01T00:00:00.000Z");
	expect_user(&w, DLQ_PROP_DEAD_LETTER_CAUSE, "final");
	expect_no_more(&w);
	headers__free(&h);
	envelope__free(e);
	record__free(r);
}
END_TEST

START_TEST(a_dead_letter_from_a_copy_replaces_it)
{
	struct dlq_id origin = fresh_id(), id = fresh_id(), copy_id = fresh_id();
	struct dlq_record *r = record_fixture__make(0, .id = &id, .origin_id = &origin, .topic = "numbers",
			.payload = "42", .payload_len = 2, .headers = original.data, .headers_len = original.len,
			.policy = &numbers, .attempt = 2, .qos = 0, .now_ms = 1000);
	ck_assert_ptr_nonnull(r);
	struct dlq_envelope *copy = envelope__retry_copy(r, &copy_id, NULL, "sub1", "sub1", 5);
	ck_assert_ptr_nonnull(copy);
	record__free(r); /* the copy holds everything it needs */

	const char *why = "subscriber sub1 left without a session before its retry copy was delivered";
	struct dlq_envelope *e = envelope__dead_letter_from_copy(copy, "edge-1", DLQ_DEAD_SUBSCRIBER_GONE, why,
			1790000000123LL);
	ck_assert_ptr_nonnull(e);
	envelope__free(copy);

	ck_assert_int_eq(e->kind, DLQ_ENV_DEAD_LETTER);
	ck_assert_ptr_null(e->target_client);
	ck_assert_str_eq(e->topic, "dead/numbers");
	ck_assert_uint_eq(e->payload_len, 2);
	ck_assert_mem_eq(e->payload, "42", 2);
	ck_assert_uint_eq(envelope__qos(e), 1);

	/* The copy never arrived: the count of deliveries is the copy's. */
	struct dlq_headers h = {0};
	ck_assert_int_eq(envelope__headers(e, &h), 0);
	struct walk w = {h.data, h.len, 0};
	expect_original_headers(&w);
	expect_user(&w, DLQ_PROP_RETRY_COUNT, "2");
	expect_user(&w, DLQ_PROP_ORIGIN_TOPIC, "numbers");
	expect_user(&w, DLQ_PROP_ORIGIN_ID, text(&origin));
	expect_user(&w, DLQ_PROP_DEAD_LETTER_REASON, why);
	expect_user(&w, DLQ_PROP_DEAD_LETTER_CLIENT, "sub1");
	expect_user(&w, DLQ_PROP_DEAD_LETTER_FILTER, "numbers");
	expect_user(&w, DLQ_PROP_DEAD_LETTER_TIME, "2026-09-21T14:13:20.123Z");
	expect_user(&w, DLQ_PROP_DEAD_LETTER_CAUSE, "subscriber_gone");
	expect_user(&w, DLQ_PROP_DEAD_LETTER_BROKER, "edge-1");
	expect_no_more(&w);
	headers__free(&h);
	envelope__free(e);
}
END_TEST

START_TEST(headers_are_appended_to_what_the_list_holds)
{
	/* envelope__headers writes into h: it appends, it does not reset. */
	struct dlq_record *r = original_record(1);
	struct dlq_id copy_id = fresh_id();
	struct dlq_envelope *e = envelope__retry_copy(r, &copy_id, NULL, "sub1", "sub1", 0);
	ck_assert_ptr_nonnull(e);
	struct dlq_headers h = {0};
	ck_assert_int_eq(headers__add_user(&h, "first", "1"), 0);
	ck_assert_int_eq(envelope__headers(e, &h), 0);
	struct walk w = {h.data, h.len, 0};
	expect_user(&w, "first", "1");
	expect_original_headers(&w);
	expect_user(&w, DLQ_PROP_ID, text(&copy_id));
	headers__free(&h);
	envelope__free(e);
	record__free(r);
}
END_TEST

static void setup(void)
{
	fake_reset();
	id__gen_init(&idgen);
	const uint8_t format = 1;
	memset(&original, 0, sizeof(original));
	ck_assert_int_eq(headers__add(&original, DLQ_HDR_PAYLOAD_FORMAT, &format, 1, NULL, 0), 0);
	ck_assert_int_eq(headers__add(&original, DLQ_HDR_CONTENT_TYPE, "text/plain", 10, NULL, 0), 0);
	ck_assert_int_eq(headers__add_user(&original, "trace", "t-1"), 0);
	ck_assert_int_eq(headers__add(&original, DLQ_HDR_CORRELATION_DATA, corr, sizeof(corr), NULL, 0), 0);
	ck_assert_int_eq(headers__add_user(&original, "trace", "t-2"), 0);
}

static void teardown(void)
{
	headers__free(&original);
	fake_reset();
}

/* Bytes the plugin's own user properties take in the MQTT packet (each is
 * 1 byte of identifier, then name and value with 2-byte lengths): what the
 * "Maximum Packet Size" figures of docs/memory-and-limits.md say. The
 * original's headers are not counted. */
static size_t own_property_bytes(const struct dlq_envelope *e)
{
	struct dlq_headers h = {0};
	ck_assert_int_eq(envelope__headers(e, &h), 0);
	struct walk w = {h.data, h.len, e->headers_len};
	size_t n = 0;
	struct dlq_header x;
	while(w.pos < w.len && headers__next(w.data, w.len, &w.pos, &x)){
		ck_assert_uint_eq(x.kind, DLQ_HDR_USER_PROPERTY);
		n += 1u + 2u + x.a_len + 2u + x.b_len;
	}
	headers__free(&h);
	return n;
}

START_TEST(what_copies_and_dead_letters_add_to_a_packet)
{
	struct dlq_record *r = original_record(1);
	struct dlq_id copy_id = fresh_id();
	struct dlq_envelope *c = envelope__retry_copy(r, &copy_id, NULL, "sub1", "sub1", 0);
	ck_assert_ptr_nonnull(c);
	c->retry_count = 1;
	size_t t = strlen("numbers");
	/* dlq-id 27, retry-count 16 + digits, origin-topic 17 + topic, origin-id 30. */
	ck_assert_uint_eq(own_property_bytes(c), 27 + 17 + 17 + t + 30);
	c->delay_ms = 1000;
	ck_assert_uint_eq(own_property_bytes(c), 27 + 17 + 17 + t + 30 + 44); /* first-nack-time */

	struct dlq_envelope *dl = envelope__dead_letter(r, "sub1", "edge-1", DLQ_DEAD_ACK_TIMEOUT, "why", 0);
	ck_assert_ptr_nonnull(dl);
	dl->retry_count = 3;
	/* retry-count, origin-topic, origin-id, then 23 + value for reason,
	 * client and filter, 45 for dead-letter-time, and 22 + the word for
	 * dead-letter-cause, and 23 + the name for dead-letter-broker. */
	size_t last = 22 + strlen(DLQ_CAUSE_ACK_TIMEOUT) + 23 + strlen("edge-1");
	ck_assert_uint_eq(own_property_bytes(dl), 17 + 17 + t + 30 + 23 + 3 + 23 + 4 + 23 + t + 45 + last);
	/* Named in the dead-letter store: dead-letter-id, 19 + 16. */
	dl->id = fresh_id();
	ck_assert_uint_eq(own_property_bytes(dl), 17 + 17 + t + 30 + 23 + 3 + 23 + 4 + 23 + t + 45 + last + 35);
	envelope__free(dl);
	envelope__free(c);
	record__free(r);
}
END_TEST

/* Each cause has its own word, which reads back as it; the words are
 * what a Prometheus metric name may hold ([a-z0-9_]), and none is another
 * counter's ("dropped"); one out of range reads as unknown. */
START_TEST(every_cause_has_its_own_word)
{
	for(unsigned c = 0; c < DLQ_DEAD_CAUSES; c++){
		const char *w = cause__name(c);
		ck_assert_ptr_nonnull(w);
		ck_assert_uint_gt(strlen(w), 0);
		ck_assert_uint_eq(strspn(w, "abcdefghijklmnopqrstuvwxyz0123456789_"), strlen(w));
		ck_assert_str_ne(w, "dropped");
		enum dlq_cause back;
		ck_assert(cause__parse(w, &back));
		ck_assert_uint_eq(back, c);
		for(unsigned o = 0; o < c; o++){
			ck_assert_str_ne(cause__name(o), w);
		}
	}
	ck_assert_str_eq(cause__name(DLQ_DEAD_NACK), DLQ_CAUSE_NACK);
	ck_assert_str_eq(cause__name(DLQ_DEAD_RESTART), DLQ_CAUSE_RESTART);
	ck_assert_str_eq(cause__name(DLQ_DEAD_CAUSES), DLQ_CAUSE_UNKNOWN);
	enum dlq_cause none;
	ck_assert(!cause__parse("ack-timeout", &none));
	ck_assert(!cause__parse("", &none));
	ck_assert(!cause__parse(NULL, &none));
	/* Every word once, in the documented order, for an error to list;
	 * cut to what a buffer holds. */
	char all[DLQ_CAUSE_WORDS_LEN];
	cause__words(all, sizeof(all));
	ck_assert_str_eq(all, "nack, final, ack_timeout, redelivery_limit, subscriber_gone, no_session, offline_qos0, "
			"restart, unknown");
	char cut[12];
	cause__words(cut, sizeof(cut));
	ck_assert_str_eq(cut, "nack, final");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("envelope");
	check_add(s, tcase_create("time"), CHECK_TESTS(format_time_writes_rfc3339_utc_with_milliseconds,
			format_time_agrees_with_strftime));

	check_add(s, check_fixture(tcase_create("retry copy"), setup, teardown),
			CHECK_TESTS(a_targeted_retry_copy_goes_to_the_record_topic_for_its_client,
			a_fixed_retry_copy_is_an_ordinary_publish_to_retry_to, what_copies_and_dead_letters_add_to_a_packet,
			a_copy_of_a_copy_keeps_the_chains_origin, headers_are_appended_to_what_the_list_holds));

	check_add(s, check_fixture(tcase_create("dead letter"), setup, teardown),
			CHECK_TESTS(a_dead_letter_carries_the_documented_headers_in_order,
			without_a_reason_the_dead_letter_says_attempts_ran_out, a_dead_letter_has_at_least_qos_1,
			a_dead_letter_without_original_headers_has_only_the_plugins, a_dead_letter_from_a_copy_replaces_it,
			every_cause_has_its_own_word));
	return check_run(s);
}
