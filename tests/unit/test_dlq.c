/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of dlq.c, the engine, against the fake broker port: what a
 * subscriber and the dead-letter topic's readers would see after tracking,
 * NACKs, ticks and clients leaving (design.md, "Semantics"): the topic,
 * target client, QoS, payload and properties of every publish, and that
 * nothing else was published.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "engine/dlq.h"
#include "engine_calls.h"
#include "fake_port.h"
#include "model/envelope.h"
#include "mosquitto_dlq.h"
#include "test_util.h"
#include "util/headers.h"
#include "util/id.h"


static const struct dlq_option standard[] = {
	{"policy", "numbers max_attempts=3 dead_letter=dead/numbers"},
	{"policy", "devices/+/telemetry max_attempts=5 dead_letter=dead/telemetry retry_to=devices/retry/telemetry"},
	{"policy", "once max_attempts=1 dead_letter=dead/once"},
};

static struct dlq d;
static bool d_live;
static struct dlq_headers original; /* a publisher's properties */

/* No $SYS publishes among the ones counted here. */
static void start(const struct dlq_option *opts, size_t count)
{
	engine_start(&d, &d_live, opts, count, ENGINE_NO_SYS);
}

static void stop(void)
{
	engine_stop(&d, &d_live);
}

static void track_with(const char *topic, const char *payload, uint8_t qos, const struct dlq_headers *h,
		char id[DLQ_ID_LEN + 1])
{
	const struct dlq_policy *p = dlq__policy_for(&d, topic);
	ck_assert_ptr_nonnull(p);
	int rc = dlq__track(&d, p, topic, payload, (uint32_t)strlen(payload), qos,
			h ? h->data : NULL, h ? h->len : 0, id);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(strlen(id), DLQ_ID_LEN);
	struct dlq_id parsed;
	ck_assert(id__decode(id, DLQ_ID_LEN, &parsed));
}

static void track(const char *topic, const char *payload, uint8_t qos, char id[DLQ_ID_LEN + 1])
{
	track_with(topic, payload, qos, NULL, id);
}

static enum dlq_nack_status nack_full(const char *id, const char *client, const char *reason, struct dlq_nack_result *res)
{
	struct dlq_nack n = {.id = id, .id_len = strlen(id), .reason = reason, .client = client};
	dlq__nack(&d, &n, res);
	return res->status;
}

/* A NACK with the session flag and, when requested_ms is not negative, a
 * delay of its own. */
static enum dlq_nack_status nack_with(const char *id, const char *client, bool persists, int64_t requested_ms,
		struct dlq_nack_result *res)
{
	struct dlq_nack n = {
		.id = id,
		.id_len = strlen(id),
		.client = client,
		.client_persists = persists,
		.delay_requested = requested_ms >= 0,
		.delay_ms = requested_ms >= 0 ? (uint64_t)requested_ms : 0,
	};
	dlq__nack(&d, &n, res);
	return res->status;
}

static enum dlq_nack_status nack(const char *id, const char *client)
{
	struct dlq_nack_result res;
	return nack_full(id, client, NULL, &res);
}

static bool known(const char *id)
{
	struct dlq_id parsed;
	ck_assert(id__decode(id, strlen(id), &parsed));
	return ledger__find(&d.ledger, &parsed) != NULL;
}

static const struct fake_publish *pub(size_t i)
{
	ck_assert_msg(i < fake.publish_count, "publish #%zu missing (%zu made)", i, fake.publish_count);
	return &fake.publishes[i];
}

static void expect_publish(size_t i, const char *client, const char *topic, uint8_t qos, const char *payload)
{
	const struct fake_publish *p = pub(i);
	if(client == NULL){
		ck_assert_msg(p->client == NULL, "publish #%zu targeted at %s", i, p->client);
	}else{
		ck_assert_ptr_nonnull(p->client);
		ck_assert_str_eq(p->client, client);
	}
	ck_assert_str_eq(p->topic, topic);
	ck_assert_uint_eq(p->qos, qos);
	ck_assert(!p->retain);
	ck_assert_uint_eq(p->payload_len, strlen(payload));
	ck_assert_mem_eq(p->payload, payload, p->payload_len);
}

static const char *hdr(size_t i, const char *name)
{
	return fake_header_value(pub(i), name);
}

static void expect_hdr(size_t i, const char *name, const char *value)
{
	const char *v = hdr(i, name);
	ck_assert_msg(v != NULL, "publish #%zu has no %s", i, name);
	ck_assert_str_eq(v, value);
}

/* The exact list of user property names of publish i, in order. */
static void expect_user_names(size_t i, const char *const *names, size_t count)
{
	const struct fake_publish *p = pub(i);
	size_t pos = 0, n = 0;
	struct dlq_header e;
	while(headers__next(p->headers, p->headers_len, &pos, &e)){
		if(e.kind != DLQ_HDR_USER_PROPERTY) continue;
		ck_assert_msg(n < count, "publish #%zu: unexpected user property %s", i, e.a);
		ck_assert_str_eq(e.a, names[n]);
		n++;
	}
	ck_assert_uint_eq(pos, p->headers_len);
	ck_assert_uint_eq(n, count);
}

static const char *const copy_names[] = {
	DLQ_PROP_ID, DLQ_PROP_RETRY_COUNT, DLQ_PROP_ORIGIN_TOPIC, DLQ_PROP_ORIGIN_ID,
};
static const char *const dead_letter_names[] = {
	DLQ_PROP_RETRY_COUNT, DLQ_PROP_ORIGIN_TOPIC, DLQ_PROP_ORIGIN_ID, DLQ_PROP_DEAD_LETTER_REASON,
	DLQ_PROP_DEAD_LETTER_CLIENT, DLQ_PROP_DEAD_LETTER_FILTER, DLQ_PROP_DEAD_LETTER_TIME, DLQ_PROP_DEAD_LETTER_CAUSE,
	DLQ_PROP_DEAD_LETTER_ID,
};

/* A dead letter's names when its publisher set a "trace" property. */
static const char *const traced_dead_letter_names[] = {
	"trace", DLQ_PROP_RETRY_COUNT, DLQ_PROP_ORIGIN_TOPIC, DLQ_PROP_ORIGIN_ID, DLQ_PROP_DEAD_LETTER_REASON,
	DLQ_PROP_DEAD_LETTER_CLIENT, DLQ_PROP_DEAD_LETTER_FILTER, DLQ_PROP_DEAD_LETTER_TIME, DLQ_PROP_DEAD_LETTER_CAUSE,
	DLQ_PROP_DEAD_LETTER_ID,
};

/* The dlq-id a retry copy was stamped with, copied out. */
static void copy_id(size_t i, char out[DLQ_ID_LEN + 1])
{
	const char *v = hdr(i, DLQ_PROP_ID);
	ck_assert_ptr_nonnull(v);
	ck_assert_uint_eq(strlen(v), DLQ_ID_LEN);
	memcpy(out, v, DLQ_ID_LEN + 1);
}

/* What publish i must be: its target client (to NULL: none), topic, QoS
 * and payload; its user property names in order (names NULL: not
 * checked); and the value of every property below that is not NULL. */
struct want {
	const char *to, *topic;
	uint8_t qos;
	const char *payload;
	const char *const *names;
	size_t names_count;
	const char *retry_count, *origin_topic, *origin_id, *first_nack_time;
	const char *dl_reason, *dl_client, *dl_filter, *dl_time, *dl_cause;
};

/* The names every dead letter of a message published without user
 * properties carries. */
#define DEAD_LETTER_NAMES .names = dead_letter_names, .names_count = ARRAY_LEN(dead_letter_names)

#define expect(i, ...) expect_message((i), &(const struct want){__VA_ARGS__})
static void expect_message(size_t i, const struct want *w)
{
	const struct {
		const char *name, *value;
	} props[] = {
		{DLQ_PROP_RETRY_COUNT, w->retry_count},
		{DLQ_PROP_ORIGIN_TOPIC, w->origin_topic},
		{DLQ_PROP_ORIGIN_ID, w->origin_id},
		{DLQ_PROP_FIRST_NACK_TIME, w->first_nack_time},
		{DLQ_PROP_DEAD_LETTER_REASON, w->dl_reason},
		{DLQ_PROP_DEAD_LETTER_CLIENT, w->dl_client},
		{DLQ_PROP_DEAD_LETTER_FILTER, w->dl_filter},
		{DLQ_PROP_DEAD_LETTER_TIME, w->dl_time},
		{DLQ_PROP_DEAD_LETTER_CAUSE, w->dl_cause},
	};

	expect_publish(i, w->to, w->topic, w->qos, w->payload);
	if(w->names) expect_user_names(i, w->names, w->names_count);
	for(size_t k = 0; k < ARRAY_LEN(props); k++){
		if(props[k].value) expect_hdr(i, props[k].name, props[k].value);
	}
}

static size_t logs_containing(const char *text)
{
	size_t n = 0;
	for(size_t i = 0; i < fake.log_count; i++){
		if(strstr(fake.logs[i], text)) n++;
	}
	return n;
}

static const char *log_containing(const char *text)
{
	for(size_t i = 0; i < fake.log_count; i++){
		if(strstr(fake.logs[i], text)) return fake.logs[i];
	}
	return NULL;
}

static void now_time(char out[32])
{
	envelope__format_time(fake.wall_ms, out);
}

/* The standard policies started, "42" tracked on "numbers" at QoS 1 (its
 * dlq-id in id0) and NACKed once by sub1: a retry copy is made for sub1. */
static void start_with_a_copy_for_sub1(char id0[DLQ_ID_LEN + 1])
{
	start(standard, ARRAY_LEN(standard));
	track("numbers", "42", 1, id0);
	ck_assert_int_eq(nack(id0, "sub1"), DLQ_NACK_RETRIED);
}

/* ------------------------------------------------------------------ */

/* The broker's access check, played: only "reader" may read "numbers". */
static int only_reader(void *ctx, const char *topic, const void *payload, uint32_t len, uint8_t qos)
{
	(void)payload;
	(void)len;
	(void)qos;
	return !strcmp((const char *)ctx, "reader") && !strcmp(topic, "numbers") ? 0 : EACCES;
}

static enum dlq_nack_status nack_checked(const char *id, const char *client)
{
	struct dlq_nack n = {.id = id, .id_len = strlen(id), .client = client,
		.may_read = only_reader, .may_read_ctx = (void *)client};
	struct dlq_nack_result res;
	dlq__nack(&d, &n, &res);
	return res.status;
}

/* A client the broker would not let read the message cannot NACK it, even
 * with its id: nothing is published, the refusal is counted, and a client
 * that may read it still can. */
START_TEST(a_nack_needs_read_access)
{
	char id[DLQ_ID_LEN + 1];
	start(standard, ARRAY_LEN(standard));
	track("numbers", "7", 1, id);
	ck_assert_int_eq(nack_checked(id, "stranger"), DLQ_NACK_NOT_PERMITTED);
	ck_assert_uint_eq(fake.publish_count, 0);
	ck_assert_uint_eq(engine__totals(&d)->nacks_refused, 1);
	ck_assert_uint_eq(engine__totals(&d)->nacks, 0);
	ck_assert_str_eq(dlq__nack_status_text(DLQ_NACK_NOT_PERMITTED), "refused: this client may not read the message");
	ck_assert_int_eq(nack_checked(id, "reader"), DLQ_NACK_RETRIED);
	expect_publish(0, "reader", "numbers", 1, "7");
	stop();
}
END_TEST

START_TEST(policies_are_found_by_topic)
{
	start(standard, ARRAY_LEN(standard));
	const struct dlq_policy *p = dlq__policy_for(&d, "numbers");
	ck_assert_ptr_nonnull(p);
	ck_assert_str_eq(p->dead_letter, "dead/numbers");
	p = dlq__policy_for(&d, "devices/7/telemetry");
	ck_assert_ptr_nonnull(p);
	ck_assert_str_eq(p->filter, "devices/+/telemetry");
	ck_assert_ptr_null(dlq__policy_for(&d, "numbers/7"));
	ck_assert_ptr_null(dlq__policy_for(&d, "dead/numbers"));
	ck_assert_ptr_null(dlq__policy_for(&d, "elsewhere"));
}
END_TEST

START_TEST(tracking_stamps_distinct_ids_and_publishes_nothing)
{
	start(standard, ARRAY_LEN(standard));
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1], c[DLQ_ID_LEN + 1];
	track("numbers", "1", 0, a);
	track("numbers", "2", 1, b);
	track("devices/7/telemetry", "3", 2, c);
	ck_assert_str_ne(a, b);
	ck_assert_str_ne(b, c);
	ck_assert_str_ne(a, c);
	ck_assert(known(a) && known(b) && known(c));
	ck_assert_uint_eq(engine__totals(&d)->tracked, 3);
	ck_assert_uint_eq(fake.publish_count, 0);
}
END_TEST

START_TEST(a_delivery_chain_ends_in_a_dead_letter_after_max_attempts)
{
	start(standard, ARRAY_LEN(standard));
	char id0[DLQ_ID_LEN + 1], id1[DLQ_ID_LEN + 1], id2[DLQ_ID_LEN + 1];
	struct dlq_nack_result res;
	track_with("numbers", "42", 1, &original, id0);

	/* Delivery 1 NACKed: a copy for sub1 only, on the original topic. */
	ck_assert_int_eq(nack_full(id0, "sub1", NULL, &res), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(res.attempt, 1);
	ck_assert_uint_eq(res.max_attempts, 3);
	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert_str_eq(hdr(0, "trace"), "t-1");
	const char *const names0[] = {"trace", DLQ_PROP_ID, DLQ_PROP_RETRY_COUNT, DLQ_PROP_ORIGIN_TOPIC, DLQ_PROP_ORIGIN_ID};
	expect(0, .to = "sub1", .topic = "numbers", .qos = 1, .payload = "42", .names = names0,
			.names_count = ARRAY_LEN(names0), .retry_count = "1", .origin_topic = "numbers", .origin_id = id0);
	copy_id(0, id1);
	ck_assert_str_ne(id1, id0);

	/* Delivery 2 (the copy) NACKed: another copy. */
	dlq__tick(&d);
	ck_assert_int_eq(nack_full(id1, "sub1", NULL, &res), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(res.attempt, 2);
	ck_assert_uint_eq(fake.publish_count, 2);
	expect(1, .to = "sub1", .topic = "numbers", .qos = 1, .payload = "42", .retry_count = "2",
			.origin_topic = "numbers", .origin_id = id0);
	copy_id(1, id2);
	ck_assert_str_ne(id2, id0);
	ck_assert_str_ne(id2, id1);

	/* Delivery 3 NACKed: attempts are spent, a dead letter. */
	dlq__tick(&d);
	fake.wall_ms = 1790000000123LL;
	ck_assert_int_eq(nack_full(id2, "sub1", "cannot parse 42", &res), DLQ_NACK_DEAD_LETTERED);
	ck_assert_uint_eq(res.attempt, 3);
	ck_assert_uint_eq(res.max_attempts, 3);
	ck_assert_uint_eq(fake.publish_count, 3);
	expect(2, .topic = "dead/numbers", .qos = 1, .payload = "42", .names = traced_dead_letter_names,
			.names_count = ARRAY_LEN(traced_dead_letter_names), .retry_count = "3", .origin_topic = "numbers",
			.origin_id = id0, .dl_reason = "cannot parse 42", .dl_client = "sub1", .dl_filter = "numbers",
			.dl_time = "2026-09-21T14:13:20.123Z", .dl_cause = DLQ_CAUSE_NACK);
	expect_hdr(2, "trace", "t-1");
	ck_assert_uint_eq(engine__totals(&d)->dead_letters_by_cause[DLQ_DEAD_NACK], 1);
	ck_assert_uint_eq(engine__totals(&d)->dead_letters, 1);

	/* The publisher's other properties travel along, in order. */
	size_t pos = 0;
	struct dlq_header e;
	ck_assert(headers__next(pub(2)->headers, pub(2)->headers_len, &pos, &e));
	ck_assert_uint_eq(e.kind, DLQ_HDR_CONTENT_TYPE);
	ck_assert_str_eq(e.a, "text/plain");

	dlq__tick(&d);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 3);
	ck_assert_uint_eq(engine__totals(&d)->nacks, 3);
	ck_assert_uint_eq(engine__totals(&d)->retry_copies, 2);
	ck_assert_uint_eq(engine__totals(&d)->dead_letters, 1);
	ck_assert_uint_eq(engine__totals(&d)->nacks_refused, 0);
}
END_TEST

START_TEST(a_fixed_chain_goes_through_retry_to)
{
	start(standard, ARRAY_LEN(standard));
	char id[DLQ_ID_LEN + 1], id0[DLQ_ID_LEN + 1];
	struct dlq_nack_result res;
	track("devices/7/telemetry", "t=21", 0, id0);
	memcpy(id, id0, sizeof(id));

	/* Four NACKs by whoever receives each copy: four copies, each an
	 * ordinary publish to the retry topic. */
	for(unsigned n = 1; n <= 4; n++){
		const char *who = n % 2 ? "sub1" : "sub2";
		ck_assert_int_eq(nack_full(id, who, NULL, &res), DLQ_NACK_RETRIED);
		ck_assert_uint_eq(res.attempt, n);
		ck_assert_uint_eq(res.max_attempts, 5);
		ck_assert_uint_eq(fake.publish_count, n);
		char count[8];
		snprintf(count, sizeof(count), "%u", n);
		expect(n - 1, .topic = "devices/retry/telemetry", .qos = 0, .payload = "t=21", .names = copy_names,
				.names_count = ARRAY_LEN(copy_names), .retry_count = count, .origin_topic = "devices/7/telemetry",
				.origin_id = id0);
		copy_id(n - 1, id);
		dlq__tick(&d);
	}
	/* The fifth delivery NACKed: the dead letter, QoS raised to 1. */
	char when[32];
	now_time(when);
	ck_assert_int_eq(nack_full(id, "sub9", NULL, &res), DLQ_NACK_DEAD_LETTERED);
	ck_assert_uint_eq(res.attempt, 5);
	ck_assert_uint_eq(fake.publish_count, 5);
	expect(4, .topic = "dead/telemetry", .qos = 1, .payload = "t=21", DEAD_LETTER_NAMES, .retry_count = "5",
			.origin_topic = "devices/7/telemetry", .origin_id = id0, .dl_client = "sub9",
			.dl_filter = "devices/+/telemetry", .dl_time = when);
	ck_assert_msg(strstr(hdr(4, DLQ_PROP_DEAD_LETTER_REASON), "max_attempts") != NULL,
			"reason \"%s\" does not say attempts ran out", hdr(4, DLQ_PROP_DEAD_LETTER_REASON));
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 5);
}
END_TEST

START_TEST(max_attempts_1_dead_letters_at_once)
{
	start(standard, ARRAY_LEN(standard));
	char id0[DLQ_ID_LEN + 1];
	struct dlq_nack_result res;
	track("once", "only", 0, id0);
	ck_assert_int_eq(nack_full(id0, "sub1", "no handler", &res), DLQ_NACK_DEAD_LETTERED);
	ck_assert_uint_eq(res.attempt, 1);
	ck_assert_uint_eq(res.max_attempts, 1);
	ck_assert_uint_eq(fake.publish_count, 1);
	expect(0, .topic = "dead/once", .qos = 1, .payload = "only", DEAD_LETTER_NAMES, .retry_count = "1",
			.origin_topic = "once", .origin_id = id0, .dl_reason = "no handler", .dl_client = "sub1", .dl_filter = "once");
	ck_assert_uint_eq(engine__totals(&d)->dead_letters, 1);
	ck_assert_uint_eq(engine__totals(&d)->retry_copies, 0);
}
END_TEST

START_TEST(qos_2_is_kept_by_copies_and_dead_letters)
{
	start(standard, ARRAY_LEN(standard));
	char id0[DLQ_ID_LEN + 1], id1[DLQ_ID_LEN + 1];
	track("numbers", "2", 2, id0);
	ck_assert_int_eq(nack(id0, "sub1"), DLQ_NACK_RETRIED);
	expect_publish(0, "sub1", "numbers", 2, "2");
	copy_id(0, id1);
	ck_assert_int_eq(nack(id1, "sub1"), DLQ_NACK_RETRIED);
	copy_id(1, id1);
	ck_assert_int_eq(nack(id1, "sub1"), DLQ_NACK_DEAD_LETTERED);
	expect_publish(2, NULL, "dead/numbers", 2, "2");
	ck_assert_uint_eq(fake.publish_count, 3);
}
END_TEST

START_TEST(a_second_nack_by_the_same_client_is_refused)
{
	start(standard, ARRAY_LEN(standard));
	char id0[DLQ_ID_LEN + 1];
	struct dlq_nack_result res;
	track("numbers", "42", 1, id0);
	ck_assert_int_eq(nack(id0, "sub1"), DLQ_NACK_RETRIED);
	ck_assert_int_eq(nack_full(id0, "sub1", NULL, &res), DLQ_NACK_DUPLICATE);
	ck_assert_uint_eq(fake.publish_count, 1);
	dlq__tick(&d);
	ck_assert_int_eq(nack(id0, "sub1"), DLQ_NACK_DUPLICATE);
	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert_uint_eq(engine__totals(&d)->nacks, 1);
	ck_assert_uint_eq(engine__totals(&d)->nacks_refused, 2);
	ck_assert_uint_eq(engine__totals(&d)->retry_copies, 1);
}
END_TEST

START_TEST(each_client_nacking_the_original_starts_its_own_chain)
{
	start(standard, ARRAY_LEN(standard));
	char id0[DLQ_ID_LEN + 1], a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	track("numbers", "42", 1, id0);
	ck_assert_int_eq(nack(id0, "sub1"), DLQ_NACK_RETRIED);
	ck_assert_int_eq(nack(id0, "sub2"), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(fake.publish_count, 2);
	expect_publish(0, "sub1", "numbers", 1, "42");
	expect_publish(1, "sub2", "numbers", 1, "42");
	expect_hdr(0, DLQ_PROP_RETRY_COUNT, "1");
	expect_hdr(1, DLQ_PROP_RETRY_COUNT, "1");
	expect_hdr(1, DLQ_PROP_ORIGIN_ID, id0);
	copy_id(0, a);
	copy_id(1, b);
	ck_assert_str_ne(a, b);
	dlq__tick(&d);

	/* sub2's chain runs out; sub1's is still at its second delivery. */
	ck_assert_int_eq(nack(b, "sub2"), DLQ_NACK_RETRIED);
	copy_id(2, b);
	ck_assert_int_eq(nack(b, "sub2"), DLQ_NACK_DEAD_LETTERED);
	expect_publish(3, NULL, "dead/numbers", 1, "42");
	expect_hdr(3, DLQ_PROP_RETRY_COUNT, "3");
	expect_hdr(3, DLQ_PROP_DEAD_LETTER_CLIENT, "sub2");
	expect_hdr(3, DLQ_PROP_ORIGIN_ID, id0);

	struct dlq_nack_result res;
	ck_assert_int_eq(nack_full(a, "sub1", NULL, &res), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(res.attempt, 2);
	expect_publish(4, "sub1", "numbers", 1, "42");
	expect_hdr(4, DLQ_PROP_RETRY_COUNT, "2");
	ck_assert_uint_eq(fake.publish_count, 5);
}
END_TEST

START_TEST(unknown_and_malformed_ids_are_refused)
{
	start(standard, ARRAY_LEN(standard));
	char id0[DLQ_ID_LEN + 1];
	track("numbers", "42", 1, id0);
	struct dlq_nack_result res;
	ck_assert_int_eq(nack("AAAAAAAAAAAAAAAA", "sub1"), DLQ_NACK_UNKNOWN_ID);
	ck_assert_int_eq(nack("abc", "sub1"), DLQ_NACK_MALFORMED_ID);
	ck_assert_int_eq(nack("", "sub1"), DLQ_NACK_MALFORMED_ID);
	ck_assert_int_eq(nack("AAAAAAAAAAAAAAAAA", "sub1"), DLQ_NACK_MALFORMED_ID);
	ck_assert_int_eq(nack("AAAAAAAA+AAAAAAA", "sub1"), DLQ_NACK_MALFORMED_ID);
	ck_assert_int_eq(nack_full("AAAAAAAA/AAAAAA=", "sub1", NULL, &res), DLQ_NACK_MALFORMED_ID);
	/* id_len counts, not the NUL. */
	struct dlq_nack n = {.id = id0, .id_len = DLQ_ID_LEN - 1, .client = "sub1"};
	dlq__nack(&d, &n, &res);
	ck_assert_int_eq(res.status, DLQ_NACK_MALFORMED_ID);
	ck_assert_uint_eq(fake.publish_count, 0);
	ck_assert_uint_eq(engine__totals(&d)->nacks_refused, 7);
	ck_assert_uint_eq(engine__totals(&d)->nacks, 0);
	/* The real one still works. */
	ck_assert_int_eq(nack(id0, "sub1"), DLQ_NACK_RETRIED);
}
END_TEST

START_TEST(status_texts_are_distinct)
{
	ck_assert_str_eq(dlq__nack_status_text(DLQ_NACK_RETRIED), "retried");
	ck_assert_str_eq(dlq__nack_status_text(DLQ_NACK_UNKNOWN_ID), "unknown or expired dlq-id");
	const enum dlq_nack_status all[] = {
		DLQ_NACK_RETRIED, DLQ_NACK_DEAD_LETTERED, DLQ_NACK_MALFORMED_ID, DLQ_NACK_UNKNOWN_ID,
		DLQ_NACK_DUPLICATE, DLQ_NACK_FULL, DLQ_NACK_NOMEM,
	};
	for(size_t i = 0; i < ARRAY_LEN(all); i++){
		const char *t = dlq__nack_status_text(all[i]);
		ck_assert_ptr_nonnull(t);
		ck_assert_uint_gt(strlen(t), 0);
		for(size_t j = 0; j < i; j++){
			ck_assert_str_ne(t, dlq__nack_status_text(all[j]));
		}
	}
}
END_TEST

START_TEST(records_expire_after_the_nack_window)
{
	const struct dlq_option opts[] = {
		{"policy", "numbers max_attempts=3 dead_letter=dead/numbers"},
		{"nack_window", "10s"},
	};
	start(opts, ARRAY_LEN(opts));
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1], copy[DLQ_ID_LEN + 1];
	uint64_t t0 = fake.now_ms;
	track("numbers", "a", 1, a);
	track("numbers", "b", 1, b);

	/* Exactly at the end of the window a record is still NACKable. */
	fake.now_ms = t0 + 10000;
	dlq__tick(&d);
	ck_assert_uint_eq(engine__totals(&d)->expired, 0);
	ck_assert_int_eq(nack(a, "sub1"), DLQ_NACK_RETRIED);
	copy_id(0, copy);

	/* One millisecond later both originals are gone; the copy, made at
	 * t0 + 10 s, is not. */
	fake.now_ms = t0 + 10001;
	dlq__tick(&d);
	ck_assert_uint_eq(engine__totals(&d)->expired, 2);
	ck_assert_int_eq(nack(b, "sub1"), DLQ_NACK_UNKNOWN_ID);
	ck_assert_int_eq(nack(a, "sub2"), DLQ_NACK_UNKNOWN_ID);
	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert(known(copy));

	fake.now_ms = t0 + 20001;
	dlq__tick(&d);
	ck_assert_int_eq(nack(copy, "sub1"), DLQ_NACK_UNKNOWN_ID);
	ck_assert_uint_eq(engine__totals(&d)->expired, 3);
	ck_assert_uint_eq(d.ledger.count, 0);
	ck_assert_uint_eq(d.ledger.bytes, 0);
	ck_assert_uint_eq(fake.publish_count, 1);
}
END_TEST

/* A tick with nothing to do at any time (no $SYS topics, nothing tracked)
 * makes the next ticks return at once; what comes after it wakes them. */
START_TEST(a_quiet_tick_wakes_for_what_comes_after_it)
{
	const struct dlq_option opts[] = {
		{"policy", "numbers max_attempts=3 dead_letter=dead/numbers"},
		{"nack_window", "10s"},
		{"sys_interval", "0s"},
	};
	start(opts, ARRAY_LEN(opts));
	uint64_t t0 = fake.now_ms;
	dlq__tick(&d);
	ck_assert(d.tick_quiet);
	dlq__quiet_event(&d); /* an untracked message, a tick */
	ck_assert(d.tick_quiet);

	/* A tracked message (dlq__track, with no event before it) wakes the
	 * tick: its record expires after the window. */
	char a[DLQ_ID_LEN + 1];
	track("numbers", "a", 1, a);
	ck_assert(!d.tick_quiet);
	fake.now_ms = t0 + 10001;
	dlq__tick(&d);
	ck_assert_uint_eq(engine__totals(&d)->expired, 1);
	ck_assert_uint_eq(d.ledger.count, 0);

	/* Quiet again; any other event wakes it. */
	dlq__tick(&d);
	ck_assert(d.tick_quiet);
	dlq__event(&d);
	ck_assert(!d.tick_quiet);
}
END_TEST

START_TEST(the_default_window_is_300_seconds)
{
	start(standard, ARRAY_LEN(standard));
	char a[DLQ_ID_LEN + 1];
	uint64_t t0 = fake.now_ms;
	track("numbers", "a", 1, a);
	fake.now_ms = t0 + DLQ_DEFAULT_NACK_WINDOW_MS;
	dlq__tick(&d);
	ck_assert(known(a));
	fake.now_ms = t0 + DLQ_DEFAULT_NACK_WINDOW_MS + 1;
	dlq__tick(&d);
	ck_assert_int_eq(nack(a, "sub1"), DLQ_NACK_UNKNOWN_ID);
}
END_TEST

static const struct dlq_option small[] = {
	{"policy", "numbers max_attempts=3 dead_letter=dead/numbers"},
	{"policy", "once max_attempts=1 dead_letter=dead/once"},
	{"max_pending_bytes", "1KiB"},
};

START_TEST(the_bound_evicts_the_oldest_records_first)
{
	start(small, ARRAY_LEN(small));
	ck_assert_uint_eq(d.cfg.max_pending_bytes, 1024);
	enum { N = 20 };
	char ids[N][DLQ_ID_LEN + 1];
	char payload[101];
	memset(payload, 'p', 100);
	payload[100] = '\0';
	for(int i = 0; i < N; i++){
		track("numbers", payload, 1, ids[i]);
		ck_assert_uint_le(d.ledger.bytes + d.outbox.bytes, 1024);
	}
	ck_assert_uint_eq(engine__totals(&d)->tracked, N);
	/* A prefix of the oldest is gone, the newest are all there. */
	int first_known = 0;
	while(first_known < N && !known(ids[first_known])) first_known++;
	ck_assert_int_gt(first_known, 0);
	ck_assert_int_lt(first_known, N);
	for(int i = first_known; i < N; i++){
		ck_assert_msg(known(ids[i]), "record %d evicted before an older one", i);
	}
	ck_assert_uint_eq(engine__totals(&d)->evicted, (uint64_t)first_known);
	ck_assert_uint_eq(d.ledger.count, (size_t)(N - first_known));
	ck_assert(fake_logged("max_pending_bytes"));

	ck_assert_int_eq(nack(ids[0], "sub1"), DLQ_NACK_UNKNOWN_ID);
	ck_assert_int_eq(nack(ids[N - 1], "sub1"), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(fake.publish_count, 1);
	expect_publish(0, "sub1", "numbers", 1, payload);
}
END_TEST

START_TEST(a_message_larger_than_the_bound_is_not_tracked)
{
	start(small, ARRAY_LEN(small));
	char a[DLQ_ID_LEN + 1];
	track("numbers", "small", 1, a);
	const struct dlq_policy *p = dlq__policy_for(&d, "numbers");

	static char big[2048];
	memset(big, 'x', sizeof(big));
	char id[DLQ_ID_LEN + 1] = "untouched";
	ck_assert_int_eq(dlq__track(&d, p, "numbers", big, sizeof(big), 1, NULL, 0, id), ENOSPC);
	/* Within the bound as payload, over it as a record. */
	ck_assert_int_eq(dlq__track(&d, p, "numbers", big, 1020, 1, NULL, 0, id), ENOSPC);
	ck_assert_uint_eq(engine__totals(&d)->untracked_full, 2);
	ck_assert_uint_eq(engine__totals(&d)->tracked, 1);
	/* Refusing it evicted nothing. */
	ck_assert(known(a));
	ck_assert_uint_eq(d.ledger.count, 1);
	ck_assert_uint_eq(engine__totals(&d)->evicted, 0);
	ck_assert_uint_eq(fake.publish_count, 0);
}
END_TEST

/* MQTT's longest topic, 65,535 bytes: tracked, copied and dead-lettered
 * whole, its origin-topic property 65,535 bytes too. */
START_TEST(a_topic_of_65535_bytes_goes_through_its_chain)
{
	static const struct dlq_option opts[] = {
		{"policy", "long/# max_attempts=2 dead_letter=dead/long"},
	};
	start(opts, ARRAY_LEN(opts));
	static char topic[65536];
	memcpy(topic, "long/", 5);
	memset(topic + 5, 'x', 65530);
	topic[65535] = '\0';
	char id0[DLQ_ID_LEN + 1], id1[DLQ_ID_LEN + 1];
	track(topic, "p", 1, id0);
	ck_assert_int_eq(nack(id0, "sub1"), DLQ_NACK_RETRIED);
	expect_publish(0, "sub1", topic, 1, "p");
	expect_hdr(0, DLQ_PROP_ORIGIN_TOPIC, topic);
	copy_id(0, id1);
	dlq__tick(&d);
	ck_assert_int_eq(nack(id1, "sub1"), DLQ_NACK_DEAD_LETTERED);
	expect(1, .topic = "dead/long", .qos = 1, .payload = "p", DEAD_LETTER_NAMES, .origin_topic = topic,
			.origin_id = id0, .dl_filter = "long/#");
	ck_assert_uint_eq(engine__totals(&d)->nacks_refused, 0);
}
END_TEST

/* A flood of NACKs of ids never issued is refused and counted, one by one,
 * and leaves nothing behind: no record, no envelope, no byte, no publish
 * (the replies are control.c's), and no log line a client could flood. */
START_TEST(ten_thousand_unknown_nacks_leave_nothing_behind)
{
	start(standard, ARRAY_LEN(standard));
	char id0[DLQ_ID_LEN + 1];
	track("numbers", "42", 1, id0);
	size_t records = d.ledger.count;
	uint64_t bytes = d.ledger.bytes;
	size_t logs = fake.log_count;
	for(unsigned i = 0; i < 10000; i++){
		char id[DLQ_ID_LEN + 1];
		snprintf(id, sizeof(id), "Unknown-%08u", i);
		ck_assert_int_eq(nack(id, "flooder"), DLQ_NACK_UNKNOWN_ID);
	}
	ck_assert_uint_eq(engine__totals(&d)->nacks_refused, 10000);
	ck_assert_uint_eq(engine__totals(&d)->unknown_ids, 10000);
	ck_assert_uint_eq(engine__totals(&d)->nacks, 0);
	ck_assert_uint_eq(d.ledger.count, records);
	ck_assert_uint_eq(d.ledger.bytes, bytes);
	ck_assert_uint_eq(engine__owed_count(&d), 0);
	ck_assert_uint_eq(engine__owed_bytes(&d), 0);
	ck_assert_uint_eq(fake.publish_count, 0);
	ck_assert_uint_eq(fake.log_count, logs);
	/* The real id is still there for its subscriber. */
	ck_assert_int_eq(nack(id0, "sub1"), DLQ_NACK_RETRIED);
}
END_TEST

/* Tracks empty messages of "once" (max_attempts=1: a NACK dead-letters
 * them) until the first eviction, or n of them: the ledger filled up to the
 * bound. Returns how many were tracked, their ids in ids. */
static int fill_to_the_bound(char (*ids)[DLQ_ID_LEN + 1], int n)
{
	int tracked = 0;

	while(tracked < n && engine__totals(&d)->evicted == 0){
		track("once", "", 0, ids[tracked]);
		tracked++;
	}
	return tracked;
}

START_TEST(owed_envelopes_count_against_the_bound_with_the_records)
{
	/* design.md: records stay NACKable "within max_pending_bytes counted
	 * over ledger records and owed envelopes", and owed envelopes are never
	 * evicted: so records must make room for them. Only owed envelopes
	 * alone may stand over the bound (then NACKs are refused as full). */
	start(small, ARRAY_LEN(small));
	enum { N = 40 };
	char ids[N][DLQ_ID_LEN + 1];
	int tracked = fill_to_the_bound(ids, N);
	fake.fail_publishes = 1000000;
	for(int i = tracked - 1; i >= 0; i--){
		if(!known(ids[i])) continue;
		if(nack(ids[i], "sub1") != DLQ_NACK_DEAD_LETTERED) break;
		ck_assert_msg(d.ledger.bytes + d.outbox.bytes <= d.cfg.max_pending_bytes || d.ledger.count == 0,
				"after %zu owed dead letters: ledger %llu + outbox %llu bytes > max_pending_bytes %llu",
				d.outbox.owed.count, (unsigned long long)d.ledger.bytes,
				(unsigned long long)d.outbox.bytes, (unsigned long long)d.cfg.max_pending_bytes);
	}
}
END_TEST

START_TEST(a_dead_letter_the_broker_refuses_is_published_on_a_later_tick)
{
	start(standard, ARRAY_LEN(standard));
	char id0[DLQ_ID_LEN + 1];
	track("once", "keep me", 1, id0);
	fake.fail_publishes = 2;
	ck_assert_int_eq(nack(id0, "sub1"), DLQ_NACK_DEAD_LETTERED);
	ck_assert_uint_eq(fake.publish_count, 0);
	ck_assert_uint_eq(d.outbox.owed.count, 1);
	ck_assert_uint_eq(engine__totals(&d)->nacks, 1);
	ck_assert_uint_eq(engine__totals(&d)->publish_failures, 1);
	const char *line = log_containing("failed to publish dead letter");
	ck_assert_msg(line != NULL, "no log line about the failed dead letter");
	ck_assert_msg(strstr(line, "dead/once") != NULL, "log line \"%s\" does not name the topic", line);

	dlq__tick(&d); /* fails again: logged once only */
	ck_assert_uint_eq(fake.publish_count, 0);
	ck_assert_uint_eq(engine__totals(&d)->publish_failures, 2);
	ck_assert_uint_eq(logs_containing("failed to publish"), 1);

	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 1);
	expect(0, .topic = "dead/once", .qos = 1, .payload = "keep me", DEAD_LETTER_NAMES, .retry_count = "1",
			.origin_id = id0, .dl_client = "sub1");
	ck_assert_uint_eq(d.outbox.owed.count, 0);
	ck_assert_uint_eq(engine__totals(&d)->dead_letters, 1);
	/* Accepted, it stays accounted until the broker has taken it: the
	 * top of the next loop pass, which the next tick follows. */
	ck_assert_uint_eq(d.outbox.settling.count, 1);
	dlq__tick(&d);
	ck_assert_uint_eq(d.outbox.bytes, 0);

	dlq__tick(&d);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert_uint_eq(fake.publish_calls, 3);
}
END_TEST

START_TEST(a_retry_copy_the_broker_refuses_is_published_on_a_later_tick)
{
	start(standard, ARRAY_LEN(standard));
	char id0[DLQ_ID_LEN + 1], id1[DLQ_ID_LEN + 1];
	track("numbers", "42", 1, id0);
	fake.fail_publishes = 1;
	ck_assert_int_eq(nack(id0, "sub1"), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(fake.publish_count, 0);
	const char *line = log_containing("failed to publish retry copy");
	ck_assert_msg(line != NULL, "no log line about the failed retry copy");
	ck_assert_msg(strstr(line, "numbers") != NULL, "log line \"%s\" does not name the topic", line);

	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 1);
	expect_publish(0, "sub1", "numbers", 1, "42");
	expect_hdr(0, DLQ_PROP_RETRY_COUNT, "1");
	copy_id(0, id1);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert_uint_eq(d.outbox.owed.count, 0);
	ck_assert_uint_eq(d.outbox.sent.count, 0);
	ck_assert_uint_eq(d.outbox.settling.count, 0);

	/* The copy that went out late is NACKable like any other. */
	ck_assert_int_eq(nack(id1, "sub1"), DLQ_NACK_RETRIED);
	expect_hdr(1, DLQ_PROP_RETRY_COUNT, "2");
	ck_assert_uint_eq(fake.publish_count, 2);
}
END_TEST

START_TEST(owed_envelopes_filling_the_bound_refuse_nacks)
{
	start(small, ARRAY_LEN(small));
	enum { N = 40 };
	char ids[N][DLQ_ID_LEN + 1];
	int tracked = fill_to_the_bound(ids, N);
	ck_assert_int_gt(tracked, 3);

	fake.fail_publishes = 1000000;
	int accepted = 0, full = 0;
	int accepted_ids[N];
	const char *refused = NULL;
	for(int i = 0; i < tracked; i++){
		if(!known(ids[i])) continue;
		enum dlq_nack_status st = nack(ids[i], "sub1");
		if(st == DLQ_NACK_DEAD_LETTERED){
			ck_assert_msg(full == 0, "NACK %d accepted after one was refused as full", i);
			accepted_ids[accepted++] = i;
		}else{
			ck_assert_msg(st == DLQ_NACK_FULL, "NACK %d: %s", i, dlq__nack_status_text(st));
			refused = ids[i];
			full++;
		}
	}
	ck_assert_int_gt(accepted, 0);
	ck_assert_int_gt(full, 0);
	ck_assert_uint_eq(d.outbox.owed.count, (size_t)accepted);
	/* Owed envelopes stay within the bound: the one that would have
	 * crossed it was refused. */
	ck_assert_uint_le(d.outbox.bytes, 1024);
	ck_assert_uint_gt(d.outbox.bytes + d.outbox.owed.head->bytes, 1024);
	ck_assert_uint_eq(engine__totals(&d)->nacks_refused, (uint64_t)full);
	ck_assert_uint_eq(fake.publish_count, 0);

	/* The broker takes them again: every owed dead letter goes out once. */
	fake.fail_publishes = 0;
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, (size_t)accepted);
	for(int i = 0; i < accepted; i++){
		expect_publish((size_t)i, NULL, "dead/once", 1, "");
		expect_hdr((size_t)i, DLQ_PROP_ORIGIN_ID, ids[accepted_ids[i]]);
	}
	dlq__tick(&d);
	ck_assert_uint_eq(d.outbox.bytes, 0);

	/* A NACK refused as full changed nothing: it can be made again. */
	ck_assert(refused != NULL && known(refused));
	ck_assert_int_eq(nack(refused, "sub1"), DLQ_NACK_DEAD_LETTERED);
	ck_assert_uint_eq(fake.publish_count, (size_t)accepted + 1);
	expect_hdr((size_t)accepted, DLQ_PROP_ORIGIN_ID, refused);
}
END_TEST

START_TEST(a_targeted_copy_whose_client_left_this_pass_becomes_a_dead_letter)
{
	start(standard, ARRAY_LEN(standard));
	char id0[DLQ_ID_LEN + 1];
	track_with("numbers", "42", 0, &original, id0);
	ck_assert_int_eq(nack(id0, "sub1"), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(fake.publish_count, 1);
	expect_publish(0, "sub1", "numbers", 0, "42");

	fake.wall_ms = 1790000000999LL;
	dlq__client_gone(&d, "sub1");
	ck_assert_uint_eq(fake.publish_count, 2);
	expect(1, .topic = "dead/numbers", .qos = 1, .payload = "42", .names = traced_dead_letter_names,
			.names_count = ARRAY_LEN(traced_dead_letter_names), .retry_count = "1", .origin_topic = "numbers",
			.origin_id = id0, .dl_client = "sub1", .dl_filter = "numbers", .dl_time = "2026-09-21T14:13:20.999Z",
			.dl_cause = DLQ_CAUSE_SUBSCRIBER_GONE);
	ck_assert_uint_eq(engine__totals(&d)->dead_letters_by_cause[DLQ_DEAD_SUBSCRIBER_GONE], 1);
	const char *reason = hdr(1, DLQ_PROP_DEAD_LETTER_REASON);
	ck_assert_msg(strstr(reason, "subscriber") && strstr(reason, "sub1")
			&& strstr(reason, "left without a session before its retry copy was delivered"),
			"reason \"%s\"", reason);
	ck_assert_uint_eq(engine__totals(&d)->dead_letters, 1);

	/* Once is enough. */
	dlq__client_gone(&d, "sub1");
	dlq__tick(&d);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 2);
	ck_assert_uint_eq(d.outbox.bytes, 0);
}
END_TEST

static int no_session(void *ctx, const char *client)
{
	(void)ctx;
	(void)client;
	return 0;
}

/* 2.1 says the broker has no session for the client a copy is due for: the
 * broker would drop the copy, so it is dead-lettered, of cause no_session. */
START_TEST(a_copy_due_for_a_client_without_a_session_is_dead_lettered)
{
	start(standard, ARRAY_LEN(standard));
	d.broker.has_session = no_session;
	char id0[DLQ_ID_LEN + 1];
	track_with("numbers", "42", 1, &original, id0);
	ck_assert_int_eq(nack(id0, "sub1"), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(fake.publish_count, 1);
	expect_publish(0, NULL, "dead/numbers", 1, "42");
	const char *reason = hdr(0, DLQ_PROP_DEAD_LETTER_REASON);
	ck_assert_msg(strstr(reason, "\"sub1\" has no session at the broker"), "reason \"%s\"", reason);
	expect_hdr(0, DLQ_PROP_DEAD_LETTER_CAUSE, DLQ_CAUSE_NO_SESSION);
	ck_assert_uint_eq(engine__totals(&d)->dead_letters_by_cause[DLQ_DEAD_NO_SESSION], 1);
	ck_assert_uint_eq(engine__totals(&d)->dead_letters, 1);
	ck_assert_uint_eq(engine__totals(&d)->retry_copies, 0);
	d.broker.has_session = NULL;
}
END_TEST

/* After a tick the broker has taken the copy and handed it to the client's
 * session; 2.0.11 reads a DISCONNECT sent right after the NACK only then
 * (one packet per connection per loop pass). The copy's record is held for
 * the client until it NACKs it or its window ends: leaving first makes the
 * dead letter, once. */
START_TEST(a_copy_taken_by_the_broker_is_held_until_its_client_leaves)
{
	char id0[DLQ_ID_LEN + 1];
	start_with_a_copy_for_sub1(id0);
	char copy[DLQ_ID_LEN + 1];
	copy_id(0, copy);
	dlq__tick(&d);
	dlq__tick(&d);
	ck_assert_uint_eq(engine__owed_count(&d), 0);
	ck_assert_uint_eq(d.holds.records, 1);

	dlq__client_gone(&d, "sub2");
	ck_assert_uint_eq(fake.publish_count, 1);
	dlq__client_gone(&d, "sub1");
	ck_assert_uint_eq(fake.publish_count, 2);
	expect(1, .topic = "dead/numbers", .qos = 1, .payload = "42", DEAD_LETTER_NAMES, .retry_count = "1",
			.origin_topic = "numbers", .origin_id = id0, .dl_client = "sub1", .dl_cause = DLQ_CAUSE_SUBSCRIBER_GONE);
	const char *reason = hdr(1, DLQ_PROP_DEAD_LETTER_REASON);
	ck_assert_msg(strstr(reason, "\"sub1\" left without a session before confirming its retry copy"),
			"reason \"%s\"", reason);
	ck_assert_uint_eq(engine__totals(&d)->dead_letters, 1);
	ck_assert_uint_eq(engine__totals(&d)->dead_letters_by_cause[DLQ_DEAD_SUBSCRIBER_GONE], 1);
	ck_assert_uint_eq(d.holds.records, 0);
	ck_assert_uint_eq(d.holds.holders, 0);

	/* Once: leaving again makes nothing, and a late NACK of the copy by
	 * the client would start a second chain of a dead-lettered message. */
	dlq__client_gone(&d, "sub1");
	ck_assert_uint_eq(fake.publish_count, 2);
	ck_assert_int_eq(nack(copy, "sub1"), DLQ_NACK_DUPLICATE);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 2);
}
END_TEST

/* The client NACKed its copy: that copy is settled (the NACK made the next
 * one, itself held); only the newest is dead-lettered when it leaves. */
START_TEST(a_held_copy_nacked_by_its_client_is_settled)
{
	char id0[DLQ_ID_LEN + 1];
	start_with_a_copy_for_sub1(id0);
	dlq__tick(&d);
	char copy[DLQ_ID_LEN + 1];
	copy_id(0, copy);
	ck_assert_int_eq(nack(copy, "sub1"), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(d.holds.records, 1);
	dlq__tick(&d);
	dlq__tick(&d);
	dlq__client_gone(&d, "sub1");
	ck_assert_uint_eq(fake.publish_count, 3);
	expect_publish(2, NULL, "dead/numbers", 1, "42");
	expect_hdr(2, DLQ_PROP_RETRY_COUNT, "2");
	expect_hdr(2, DLQ_PROP_ORIGIN_ID, id0);
	ck_assert_uint_eq(engine__totals(&d)->dead_letters, 1);

	/* A copy NACKed into a dead letter leaves nothing held. */
	char id1[DLQ_ID_LEN + 1];
	track("numbers", "43", 1, id1);
	ck_assert_int_eq(nack(id1, "sub3"), DLQ_NACK_RETRIED);
	copy_id(3, copy);
	dlq__tick(&d);
	ck_assert_int_eq(nack(copy, "sub3"), DLQ_NACK_RETRIED);
	copy_id(4, copy);
	dlq__tick(&d);
	ck_assert_int_eq(nack(copy, "sub3"), DLQ_NACK_DEAD_LETTERED);
	ck_assert_uint_eq(d.holds.records, 0);
	dlq__client_gone(&d, "sub3");
	ck_assert_uint_eq(fake.publish_count, 6);
}
END_TEST

/* Past its NACK window the client had its chance to NACK the copy: it is
 * let go with its record, as an original delivery is. */
START_TEST(a_held_copy_is_let_go_when_its_window_ends)
{
	char id0[DLQ_ID_LEN + 1];
	start_with_a_copy_for_sub1(id0);
	dlq__tick(&d);
	fake.now_ms += DLQ_DEFAULT_NACK_WINDOW_MS + 1;
	dlq__tick(&d);
	ck_assert_uint_eq(d.holds.records, 0);
	dlq__client_gone(&d, "sub1");
	ck_assert_uint_eq(fake.publish_count, 1);
}
END_TEST

/* The broker drops a QoS 0 message for an offline session: a copy that is
 * to wait in a persistent session goes out at QoS 1. Copies for sessions
 * that do not persist keep the original's QoS. */
START_TEST(a_copy_for_a_persistent_session_goes_out_at_qos_1)
{
	start(standard, ARRAY_LEN(standard));
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	track("numbers", "a", 0, a);
	track("numbers", "b", 0, b);
	struct dlq_nack_result res;
	ck_assert_int_eq(nack_with(a, "sub1", true, -1, &res), DLQ_NACK_RETRIED);
	ck_assert_int_eq(nack(b, "sub2"), DLQ_NACK_RETRIED);
	expect_publish(0, "sub1", "numbers", 1, "a");
	expect_publish(1, "sub2", "numbers", 0, "b");
	ck_assert_uint_eq(d.holds.records, 1); /* sub2's only */
}
END_TEST

START_TEST(a_persisting_session_keeps_its_copy)
{
	start(standard, ARRAY_LEN(standard));
	char id0[DLQ_ID_LEN + 1];
	track("numbers", "42", 1, id0);
	struct dlq_nack_result res;
	ck_assert_int_eq(nack_with(id0, "sub1", true, -1, &res), DLQ_NACK_RETRIED);
	/* Whatever the broker says at disconnect (a takeover marks even a
	 * persistent session clean), the copy stays: its session persists. */
	dlq__client_gone(&d, "sub1");
	ck_assert_uint_eq(fake.publish_count, 1);
	dlq__tick(&d);
	dlq__client_gone(&d, "sub1");
	ck_assert_uint_eq(fake.publish_count, 1);
}
END_TEST

START_TEST(only_the_leaving_clients_targeted_copies_are_dead_lettered)
{
	start(standard, ARRAY_LEN(standard));
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	track("numbers", "for sub2", 1, a);
	track("devices/7/telemetry", "fixed", 1, b);
	ck_assert_int_eq(nack(a, "sub2"), DLQ_NACK_RETRIED);
	ck_assert_int_eq(nack(b, "sub1"), DLQ_NACK_RETRIED); /* an ordinary publish: not sub1's */
	ck_assert_uint_eq(fake.publish_count, 2);
	dlq__client_gone(&d, "sub1");
	dlq__client_gone(&d, "sub");
	ck_assert_uint_eq(fake.publish_count, 2);
	dlq__client_gone(&d, "sub2");
	ck_assert_uint_eq(fake.publish_count, 3);
	expect_publish(2, NULL, "dead/numbers", 1, "for sub2");
	expect_hdr(2, DLQ_PROP_DEAD_LETTER_CLIENT, "sub2");
}
END_TEST

START_TEST(an_owed_copy_whose_client_left_becomes_a_dead_letter)
{
	start(standard, ARRAY_LEN(standard));
	char id0[DLQ_ID_LEN + 1];
	track("numbers", "42", 1, id0);
	fake.fail_publishes = 2;
	ck_assert_int_eq(nack(id0, "sub1"), DLQ_NACK_RETRIED);
	dlq__tick(&d); /* refused again: still owed a loop pass later */
	ck_assert_uint_eq(fake.publish_count, 0);
	ck_assert_uint_eq(d.outbox.owed.count, 1);

	dlq__client_gone(&d, "sub1");
	ck_assert_uint_eq(fake.publish_count, 1);
	expect(0, .topic = "dead/numbers", .qos = 1, .payload = "42", DEAD_LETTER_NAMES, .retry_count = "1",
			.origin_id = id0, .dl_client = "sub1");
	ck_assert_uint_eq(d.outbox.owed.count, 0);
	dlq__tick(&d);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 1); /* the copy is not sent after all */
	ck_assert_uint_eq(engine__totals(&d)->retry_copies, 0);
	ck_assert_uint_eq(d.outbox.bytes, 0);
}
END_TEST

START_TEST(a_failing_random_source_tracks_nothing)
{
	start(standard, ARRAY_LEN(standard));
	const struct dlq_policy *p = dlq__policy_for(&d, "numbers");
	char id[DLQ_ID_LEN + 1] = "untouched";
	fake.fail_random = 1;
	int rc = dlq__track(&d, p, "numbers", "42", 2, 1, NULL, 0, id);
	ck_assert_int_ne(rc, 0);
	ck_assert_int_ne(rc, ENOSPC);
	ck_assert_str_eq(id, "untouched");
	ck_assert_uint_eq(d.ledger.count, 0);
	ck_assert_uint_eq(engine__totals(&d)->tracked, 0);
	ck_assert(fake_logged("random"));
	ck_assert_uint_eq(fake.publish_count, 0);
	/* It recovers with the source. */
	track("numbers", "42", 1, id);
	ck_assert_uint_eq(engine__totals(&d)->tracked, 1);
}
END_TEST

START_TEST(a_failing_random_source_refuses_the_nack_and_changes_nothing)
{
	start(standard, ARRAY_LEN(standard));
	char id0[DLQ_ID_LEN + 1], spare[DLQ_ID_LEN + 1];
	track("numbers", "42", 1, id0);
	/* Use up the ids drawn in the first block, so the copy needs a draw. */
	size_t per_block = sizeof(d.idgen.pool) / DLQ_ID_RAW_LEN;
	for(size_t i = 1; i < per_block; i++){
		track("numbers", "filler", 1, spare);
	}
	fake.fail_random = 1;
	enum dlq_nack_status st = nack(id0, "sub1");
	ck_assert_int_ne(st, DLQ_NACK_RETRIED);
	ck_assert_int_ne(st, DLQ_NACK_DEAD_LETTERED);
	ck_assert_uint_eq(fake.publish_count, 0);
	ck_assert_uint_eq(engine__totals(&d)->nacks, 0);
	/* Not recorded as NACKed by sub1: it may try again. */
	ck_assert_int_eq(nack(id0, "sub1"), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(fake.publish_count, 1);
}
END_TEST

/* ---- delays ------------------------------------------------------------ */

static const struct dlq_option delayed[] = {
	{"policy", "slow max_attempts=3 dead_letter=dead/slow retry_delay=2s"},
	{"policy", "backoff max_attempts=5 dead_letter=dead/backoff retry_delay=1s retry_backoff=2"},
	{"policy", "capped max_attempts=5 dead_letter=dead/capped retry_delay=1s retry_backoff=10 retry_max_delay=30s"},
	{"policy", "numbers max_attempts=3 dead_letter=dead/numbers"},
	{"policy", "fixed/+ max_attempts=3 dead_letter=dead/fixed retry_to=fixed/retry retry_delay=2s"},
	{"policy", "jitter max_attempts=3 dead_letter=dead/jitter retry_delay=10s retry_jitter=0.5"},
};

/* Ticks at t - 1 (nothing new may go out) and at t (exactly one). */
static void expect_due_at(uint64_t t, size_t published_before)
{
	fake.now_ms = t - 1;
	dlq__tick(&d);
	ck_assert_msg(fake.publish_count == published_before, "published before it was due (at %llu)",
			(unsigned long long)(t - 1));
	fake.now_ms = t;
	dlq__tick(&d);
	ck_assert_msg(fake.publish_count == published_before + 1, "%zu publishes when due, expected 1",
			fake.publish_count - published_before);
}

static const char *const delayed_copy_names[] = {
	"trace", DLQ_PROP_ID, DLQ_PROP_RETRY_COUNT, DLQ_PROP_ORIGIN_TOPIC, DLQ_PROP_ORIGIN_ID, DLQ_PROP_FIRST_NACK_TIME,
};

START_TEST(a_delayed_copy_goes_out_when_due_and_not_before)
{
	start(delayed, ARRAY_LEN(delayed));
	char id0[DLQ_ID_LEN + 1];
	struct dlq_nack_result res;
	track_with("slow", "42", 1, &original, id0);
	uint64_t t0 = fake.now_ms;
	fake.wall_ms = 1790000000042LL;
	ck_assert_int_eq(nack_with(id0, "sub1", false, -1, &res), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(res.delay_ms, 2000);
	ck_assert_uint_eq(res.attempt, 1);
	ck_assert_uint_eq(fake.publish_count, 0);
	ck_assert_uint_eq(d.delayed.count, 1);
	ck_assert_uint_eq(engine__totals(&d)->delayed, 1);
	ck_assert_uint_eq(engine__totals(&d)->retry_copies, 0);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 0);

	fake.wall_ms += 1999;
	expect_due_at(t0 + 2000, 0);
	/* first-nack-time: when the message was first NACKed (RFC 3339, UTC,
	 * milliseconds), not when the copy went out. */
	expect(0, .to = "sub1", .topic = "slow", .qos = 1, .payload = "42", .names = delayed_copy_names,
			.names_count = ARRAY_LEN(delayed_copy_names), .retry_count = "1", .origin_topic = "slow",
			.origin_id = id0, .first_nack_time = "2026-09-21T14:13:20.042Z");
	ck_assert_uint_eq(engine__totals(&d)->retry_copies, 1);
	ck_assert_uint_eq(d.delayed.count, 0);

	fake.now_ms += 100000;
	dlq__tick(&d);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert_uint_eq(engine__owed_bytes(&d), 0);
}
END_TEST

START_TEST(backoff_doubles_the_delay_along_the_chain)
{
	start(delayed, ARRAY_LEN(delayed));
	char id[DLQ_ID_LEN + 1], id0[DLQ_ID_LEN + 1], first[32];
	struct dlq_nack_result res;
	track("backoff", "b", 1, id0);
	memcpy(id, id0, sizeof(id));
	now_time(first);
	for(unsigned k = 1; k <= 4; k++){
		uint64_t t = fake.now_ms;
		ck_assert_int_eq(nack_with(id, "sub1", false, -1, &res), DLQ_NACK_RETRIED);
		ck_assert_uint_eq(res.attempt, k);
		ck_assert_uint_eq(res.delay_ms, 1000ull << (k - 1));
		fake.wall_ms += 60000; /* the first NACK's time stays */
		expect_due_at(t + (1000ull << (k - 1)), k - 1);
		char count[8];
		snprintf(count, sizeof(count), "%u", k);
		expect(k - 1, .to = "sub1", .topic = "backoff", .qos = 1, .payload = "b", .retry_count = count,
				.origin_id = id0, .first_nack_time = first);
		copy_id(k - 1, id);
		dlq__tick(&d);
	}
	/* The fifth delivery's NACK ends the chain, at once. */
	ck_assert_int_eq(nack_with(id, "sub1", false, -1, &res), DLQ_NACK_DEAD_LETTERED);
	ck_assert_uint_eq(fake.publish_count, 5);
	expect(4, .topic = "dead/backoff", .qos = 1, .payload = "b", .retry_count = "5", .origin_id = id0);
}
END_TEST

START_TEST(retry_max_delay_caps_the_backoff)
{
	start(delayed, ARRAY_LEN(delayed));
	char id[DLQ_ID_LEN + 1];
	struct dlq_nack_result res;
	static const uint64_t want[] = {1000, 10000, 30000, 30000};
	track("capped", "c", 1, id);
	for(size_t k = 0; k < ARRAY_LEN(want); k++){
		uint64_t t = fake.now_ms;
		ck_assert_int_eq(nack_with(id, "sub1", false, -1, &res), DLQ_NACK_RETRIED);
		ck_assert_uint_eq(res.delay_ms, want[k]);
		expect_due_at(t + want[k], k);
		copy_id(k, id);
		dlq__tick(&d);
	}
}
END_TEST

START_TEST(a_nack_may_ask_for_its_own_delay)
{
	start(delayed, ARRAY_LEN(delayed));
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1], c[DLQ_ID_LEN + 1], e[DLQ_ID_LEN + 1];
	struct dlq_nack_result res;
	track("slow", "shorter", 1, a);
	track("slow", "none", 1, b);
	track("slow", "longer", 1, c);
	track("numbers", "policy has none", 1, e);
	uint64_t t = fake.now_ms;

	/* Shorter than the policy's: replaces it. */
	ck_assert_int_eq(nack_with(a, "sub1", false, 500, &res), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(res.delay_ms, 500);
	/* Zero: at once, and then no first-nack-time (it was not held back). */
	ck_assert_int_eq(nack_with(b, "sub1", false, 0, &res), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(res.delay_ms, 0);
	ck_assert_uint_eq(fake.publish_count, 1);
	expect_publish(0, "sub1", "slow", 1, "none");
	expect_user_names(0, copy_names, ARRAY_LEN(copy_names));
	/* Longer than retry_max_delay (1h by default): capped. */
	ck_assert_int_eq(nack_with(c, "sub1", false, 7200000, &res), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(res.delay_ms, DLQ_DEFAULT_RETRY_MAX_DELAY_MS);
	/* On a policy without a delay, it holds the copy back all the same. */
	ck_assert_int_eq(nack_with(e, "sub1", false, 1500, &res), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(res.delay_ms, 1500);

	expect_due_at(t + 500, 1);
	expect_publish(1, "sub1", "slow", 1, "shorter");
	expect_due_at(t + 1500, 2);
	expect_publish(2, "sub1", "numbers", 1, "policy has none");
	expect_hdr(2, DLQ_PROP_RETRY_COUNT, "1");
	ck_assert_ptr_nonnull(hdr(2, DLQ_PROP_FIRST_NACK_TIME));
	expect_due_at(t + DLQ_DEFAULT_RETRY_MAX_DELAY_MS, 3);
	expect_publish(3, "sub1", "slow", 1, "longer");
}
END_TEST

START_TEST(jitter_draws_delays_within_its_bounds)
{
	start(delayed, ARRAY_LEN(delayed));
	char id[DLQ_ID_LEN + 1], client[16];
	struct dlq_nack_result res;
	track("jitter", "j", 1, id);
	uint64_t lo = UINT64_MAX, hi = 0;
	for(int i = 0; i < 50; i++){
		snprintf(client, sizeof(client), "sub%d", i);
		ck_assert_int_eq(nack_with(id, client, false, -1, &res), DLQ_NACK_RETRIED);
		ck_assert_uint_ge(res.delay_ms, 5000);
		ck_assert_uint_le(res.delay_ms, 10000);
		if(res.delay_ms < lo) lo = res.delay_ms;
		if(res.delay_ms > hi) hi = res.delay_ms;
	}
	/* Drawn, not fixed. */
	ck_assert_uint_lt(lo, hi);
	/* Each copy goes out at its own due time. */
	uint64_t heap_min = schedule__peek(&d.delayed)->due_ms;
	ck_assert_uint_eq(heap_min, fake.now_ms + lo);
}
END_TEST

START_TEST(an_untargeted_delayed_copy_goes_to_retry_to)
{
	start(delayed, ARRAY_LEN(delayed));
	char id[DLQ_ID_LEN + 1];
	struct dlq_nack_result res;
	track("fixed/3", "f", 2, id);
	uint64_t t = fake.now_ms;
	ck_assert_int_eq(nack_with(id, "sub1", false, -1, &res), DLQ_NACK_RETRIED);
	/* Its NACKer leaving changes nothing: the copy is for everyone. */
	dlq__client_gone(&d, "sub1");
	ck_assert_uint_eq(d.delayed.count, 1);
	expect_due_at(t + 2000, 0);
	expect_publish(0, NULL, "fixed/retry", 2, "f");
	expect_hdr(0, DLQ_PROP_ORIGIN_TOPIC, "fixed/3");
}
END_TEST

START_TEST(a_delayed_copy_whose_client_left_without_a_session_is_dead_lettered_at_once)
{
	start(delayed, ARRAY_LEN(delayed));
	char id0[DLQ_ID_LEN + 1];
	struct dlq_nack_result res;
	track_with("slow", "42", 1, &original, id0);
	uint64_t t = fake.now_ms;
	ck_assert_int_eq(nack_with(id0, "sub1", false, -1, &res), DLQ_NACK_RETRIED);
	ck_assert_uint_gt(d.delayed.bytes, 0);
	fake.now_ms = t + 500;
	dlq__client_gone(&d, "sub2");
	ck_assert_uint_eq(d.delayed.count, 1);
	dlq__client_gone(&d, "sub1");
	ck_assert_uint_eq(fake.publish_count, 1);
	expect(0, .topic = "dead/slow", .qos = 1, .payload = "42", .retry_count = "1", .origin_id = id0, .dl_client = "sub1");
	expect_hdr(0, "trace", "t-1");
	const char *reason = hdr(0, DLQ_PROP_DEAD_LETTER_REASON);
	ck_assert_msg(strstr(reason, "sub1") && strstr(reason, "left without a session before its retry copy was delivered"),
			"reason \"%s\"", reason);
	ck_assert_uint_eq(d.delayed.count, 0);
	ck_assert_uint_eq(d.delayed.bytes, 0);
	/* Nothing goes out when the copy would have been due. */
	fake.now_ms = t + 60000;
	dlq__tick(&d);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert_uint_eq(engine__totals(&d)->retry_copies, 0);
	ck_assert_uint_eq(engine__owed_bytes(&d), 0);
}
END_TEST

START_TEST(a_delayed_copy_for_a_persisting_session_waits_for_its_client)
{
	start(delayed, ARRAY_LEN(delayed));
	char id0[DLQ_ID_LEN + 1];
	struct dlq_nack_result res;
	track("slow", "42", 1, id0);
	uint64_t t = fake.now_ms;
	ck_assert_int_eq(nack_with(id0, "sub1", true, -1, &res), DLQ_NACK_RETRIED);
	dlq__client_gone(&d, "sub1");
	ck_assert_uint_eq(fake.publish_count, 0);
	ck_assert_uint_eq(d.delayed.count, 1);
	expect_due_at(t + 2000, 0);
	expect_publish(0, "sub1", "slow", 1, "42");
}
END_TEST

static const struct dlq_option delayed_small[] = {
	{"policy", "slow max_attempts=3 dead_letter=dead/slow retry_delay=2s"},
	{"max_pending_bytes", "1KiB"},
};

START_TEST(delayed_copies_count_toward_the_bound)
{
	/* A NACK is refused when its copy would take what is owed, delayed
	 * copies included, past the bound; that shows when the ledger has room
	 * for a record but not for a copy. Which payload size leads there
	 * depends on struct sizes, so a range is tried. */
	const struct dlq_policy *p;
	struct dlq_nack_result res;
	char id[DLQ_ID_LEN + 1], payload[401];
	bool refused = false;
	for(size_t plen = 0; plen <= 400 && !refused; plen += 10){
		stop();
		start(delayed_small, ARRAY_LEN(delayed_small));
		p = dlq__policy_for(&d, "slow");
		memset(payload, 'p', plen);
		payload[plen] = '\0';
		size_t accepted = 0;
		for(int i = 0; i < 20; i++){
			if(dlq__track(&d, p, "slow", payload, (uint32_t)plen, 0, NULL, 0, id) != 0) break;
			enum dlq_nack_status st = nack_with(id, "sub1", false, -1, &res);
			if(st == DLQ_NACK_RETRIED){
				accepted++;
				ck_assert_uint_le(d.ledger.bytes + engine__owed_bytes(&d), 1024);
				continue;
			}
			ck_assert_msg(st == DLQ_NACK_FULL, "NACK %d: %s", i, dlq__nack_status_text(st));
			refused = true;
			break;
		}
		if(!refused) continue;

		/* What is owed is all delayed, and one more copy would not fit. */
		ck_assert_uint_gt(accepted, 0);
		ck_assert_uint_eq(d.outbox.bytes, 0);
		ck_assert_uint_eq(d.delayed.count, accepted);
		ck_assert_uint_eq(engine__owed_bytes(&d), d.delayed.bytes);
		ck_assert_uint_le(d.delayed.bytes, 1024);
		ck_assert_uint_gt(d.delayed.bytes + schedule__peek(&d.delayed)->bytes, 1024);
		ck_assert_uint_eq(engine__totals(&d)->nacks, accepted);
		ck_assert_uint_eq(fake.publish_count, 0);
		/* The refused NACK changed nothing. */
		struct dlq_id raw;
		ck_assert(id__decode(id, DLQ_ID_LEN, &raw));
		const struct dlq_record *r = ledger__find(&d.ledger, &raw);
		ck_assert_ptr_nonnull(r);
		ck_assert_ptr_null(r->settlers);

		/* Once they have gone out and been taken, there is room again. */
		fake.now_ms += 2000;
		dlq__tick(&d);
		ck_assert_uint_eq(fake.publish_count, accepted);
		dlq__tick(&d);
		ck_assert_uint_eq(engine__owed_bytes(&d), 0);
		if(known(id)){
			ck_assert_int_eq(nack_with(id, "sub1", false, -1, &res), DLQ_NACK_RETRIED);
		}else{
			track("slow", payload, 0, id);
			ck_assert_int_eq(nack_with(id, "sub1", false, -1, &res), DLQ_NACK_RETRIED);
		}
	}
	ck_assert_msg(refused, "no payload size led to a NACK refused as full");
}
END_TEST

static const struct dlq_option delayed_short_window[] = {
	{"policy", "slow max_attempts=3 dead_letter=dead/slow retry_delay=5s"},
	{"nack_window", "1s"},
};

START_TEST(a_copy_is_nackable_from_when_it_is_published)
{
	/* A delay longer than the NACK window must still yield a copy that can
	 * be NACKed: its record is made when it goes out. */
	start(delayed_short_window, ARRAY_LEN(delayed_short_window));
	char id0[DLQ_ID_LEN + 1], copy[DLQ_ID_LEN + 1];
	struct dlq_nack_result res;
	track("slow", "w", 1, id0);
	uint64_t t = fake.now_ms;
	ck_assert_int_eq(nack_with(id0, "sub1", false, -1, &res), DLQ_NACK_RETRIED);
	id__encode(&schedule__peek(&d.delayed)->id, copy);
	ck_assert(!known(copy));
	fake.now_ms = t + 1001;
	dlq__tick(&d);
	ck_assert(!known(id0)); /* the original's window has passed */
	expect_due_at(t + 5000, 0);
	char published[DLQ_ID_LEN + 1];
	copy_id(0, published);
	ck_assert_str_eq(published, copy);
	ck_assert(known(copy));
	fake.now_ms = t + 6000;
	dlq__tick(&d);
	ck_assert(known(copy));
	ck_assert_int_eq(nack_with(copy, "sub1", false, -1, &res), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(res.attempt, 2);
	ck_assert_uint_eq(res.delay_ms, 5000);
	fake.now_ms = t + 6001;
	dlq__tick(&d);
	ck_assert(!known(copy));
}
END_TEST

/* ------------------------------------------------------------------ */

static void setup(void)
{
	fake_reset();
	memset(&original, 0, sizeof(original));
	ck_assert_int_eq(headers__add(&original, DLQ_HDR_CONTENT_TYPE, "text/plain", 10, NULL, 0), 0);
	ck_assert_int_eq(headers__add_user(&original, "trace", "t-1"), 0);
}

START_TEST(what_is_owed_at_shutdown_is_reported_not_published)
{
	start(standard, ARRAY_LEN(standard));
	char id0[DLQ_ID_LEN + 1];
	track("numbers", "7", 1, id0);
	fake.fail_publishes = 1;
	ck_assert_int_eq(nack(id0, "sub1"), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(d.outbox.owed.count, 1);
	size_t calls = fake.publish_calls;
	stop();
	ck_assert_uint_eq(fake.publish_calls, calls);
	ck_assert_msg(log_containing("1 retry copies or dead letters the broker had not accepted are lost at shutdown") != NULL,
			"no shutdown report");
}
END_TEST

static void teardown(void)
{
	stop();
	headers__free(&original);
	fake_reset();
}

static Suite *dlq_suite(void)
{
	Suite *s = suite_create("dlq");
	TCase *tc = tcase_create("chains");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, policies_are_found_by_topic);
	tcase_add_test(tc, a_nack_needs_read_access);
	tcase_add_test(tc, tracking_stamps_distinct_ids_and_publishes_nothing);
	tcase_add_test(tc, a_delivery_chain_ends_in_a_dead_letter_after_max_attempts);
	tcase_add_test(tc, a_fixed_chain_goes_through_retry_to);
	tcase_add_test(tc, max_attempts_1_dead_letters_at_once);
	tcase_add_test(tc, qos_2_is_kept_by_copies_and_dead_letters);
	tcase_add_test(tc, a_second_nack_by_the_same_client_is_refused);
	tcase_add_test(tc, each_client_nacking_the_original_starts_its_own_chain);
	tcase_add_test(tc, unknown_and_malformed_ids_are_refused);
	tcase_add_test(tc, status_texts_are_distinct);
	suite_add_tcase(s, tc);

	tc = tcase_create("window and bound");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, records_expire_after_the_nack_window);
	tcase_add_test(tc, a_quiet_tick_wakes_for_what_comes_after_it);
	tcase_add_test(tc, the_default_window_is_300_seconds);
	tcase_add_test(tc, the_bound_evicts_the_oldest_records_first);
	tcase_add_test(tc, a_message_larger_than_the_bound_is_not_tracked);
	tcase_add_test(tc, owed_envelopes_filling_the_bound_refuse_nacks);
	tcase_add_test(tc, owed_envelopes_count_against_the_bound_with_the_records);
	suite_add_tcase(s, tc);

	tc = tcase_create("limits");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, a_topic_of_65535_bytes_goes_through_its_chain);
	tcase_add_test(tc, ten_thousand_unknown_nacks_leave_nothing_behind);
	suite_add_tcase(s, tc);

	tc = tcase_create("publish failures");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, a_dead_letter_the_broker_refuses_is_published_on_a_later_tick);
	tcase_add_test(tc, a_retry_copy_the_broker_refuses_is_published_on_a_later_tick);
	suite_add_tcase(s, tc);

	tc = tcase_create("clients leaving");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, a_targeted_copy_whose_client_left_this_pass_becomes_a_dead_letter);
	tcase_add_test(tc, a_copy_due_for_a_client_without_a_session_is_dead_lettered);
	tcase_add_test(tc, a_copy_taken_by_the_broker_is_held_until_its_client_leaves);
	tcase_add_test(tc, a_held_copy_nacked_by_its_client_is_settled);
	tcase_add_test(tc, a_held_copy_is_let_go_when_its_window_ends);
	tcase_add_test(tc, a_copy_for_a_persistent_session_goes_out_at_qos_1);
	tcase_add_test(tc, a_persisting_session_keeps_its_copy);
	tcase_add_test(tc, only_the_leaving_clients_targeted_copies_are_dead_lettered);
	tcase_add_test(tc, an_owed_copy_whose_client_left_becomes_a_dead_letter);
	suite_add_tcase(s, tc);

	tc = tcase_create("random source");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, a_failing_random_source_tracks_nothing);
	tcase_add_test(tc, a_failing_random_source_refuses_the_nack_and_changes_nothing);
	tcase_add_test(tc, what_is_owed_at_shutdown_is_reported_not_published);
	suite_add_tcase(s, tc);

	tc = tcase_create("delays");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, a_delayed_copy_goes_out_when_due_and_not_before);
	tcase_add_test(tc, backoff_doubles_the_delay_along_the_chain);
	tcase_add_test(tc, retry_max_delay_caps_the_backoff);
	tcase_add_test(tc, a_nack_may_ask_for_its_own_delay);
	tcase_add_test(tc, jitter_draws_delays_within_its_bounds);
	tcase_add_test(tc, an_untargeted_delayed_copy_goes_to_retry_to);
	tcase_add_test(tc, a_delayed_copy_whose_client_left_without_a_session_is_dead_lettered_at_once);
	tcase_add_test(tc, a_delayed_copy_for_a_persisting_session_waits_for_its_client);
	tcase_add_test(tc, delayed_copies_count_toward_the_bound);
	tcase_add_test(tc, a_copy_is_nackable_from_when_it_is_published);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(dlq_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
