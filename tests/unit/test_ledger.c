/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of ledger.c: records of NACKable deliveries, found by dlq-id,
 * leaving oldest first when the NACK window passes or when the memory bound
 * needs room, with a byte count that always equals what the records hold.
 */
#include <check.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "fake_port.h"
#include "model/ledger.h"
#include "record_fixture.h"
#include "util/headers.h"
#include "util/id.h"

static struct dlq_policy policy = {
	.filter = "numbers",
	.dead_letter = "dead/numbers",
	.retry_to = NULL,
	.max_attempts = 3,
};

static struct dlq_idgen idgen;

/* The ledger under test, made by setup and freed by teardown. */
static struct dlq_ledger l;

static struct dlq_id fresh_id(void)
{
	struct dlq_id id;
	ck_assert_int_eq(id__gen_next(&idgen, &id), 0);
	return id;
}

/* A record of an original on "numbers" created at now_ms. */
static struct dlq_record *make_record(const char *payload, uint64_t now_ms)
{
	struct dlq_id id = fresh_id();
	struct dlq_record *r = record_fixture__make(0, .id = &id, .origin_id = &id, .topic = "numbers",
			.payload = payload, .payload_len = (uint32_t)strlen(payload), .policy = &policy, .attempt = 1,
			.qos = 1, .now_ms = now_ms);
	ck_assert_ptr_nonnull(r);
	return r;
}

static uint64_t sum_bytes(const struct dlq_ledger *l)
{
	uint64_t sum = 0;
	size_t n = 0;
	for(const struct dlq_record *r = l->oldest; r; r = r->newer){
		sum += record__bytes(r);
		n++;
	}
	ck_assert_uint_eq(n, l->count);
	return sum;
}

/* The age list, the table and the byte count agree with each other. */
static void check_consistent(const struct dlq_ledger *l)
{
	ck_assert_uint_eq(l->bytes, sum_bytes(l));
	size_t n = 0;
	const struct dlq_record *last = NULL;
	for(const struct dlq_record *r = l->oldest; r; r = r->newer){
		ck_assert_ptr_eq(ledger__find(l, &r->id), r);
		last = r;
		n++;
	}
	ck_assert_ptr_eq(last, l->newest);
	ck_assert_uint_eq(n, l->count);
	if(l->count == 0){
		ck_assert_ptr_null(l->oldest);
		ck_assert_ptr_null(l->newest);
		ck_assert_uint_eq(l->bytes, 0);
	}
}

START_TEST(an_original_is_the_small_record)
{
	struct dlq_id id = fresh_id();
	struct dlq_record *r = record_fixture__make(0, .id = &id, .origin_id = &id, .topic = "jobs/1",
			.origin_topic = "jobs/1", .payload = "p", .payload_len = 1, .policy = &policy, .attempt = 1,
			.qos = 1, .now_ms = 7);
	ck_assert_ptr_nonnull(r);
	ck_assert_ptr_null(record__more(r));
	ck_assert_mem_eq(record__origin_id(r)->raw, id.raw, sizeof(id.raw));
	ck_assert_int_eq(record__first_nack_ms(r), 0);
	record__set_first_nack_ms(r, 5); /* an original keeps none */
	ck_assert_int_eq(record__first_nack_ms(r), 0);
	ck_assert_str_eq(record__topic(r), "jobs/1");
	ck_assert_mem_eq(record__payload(r), "p", 1);
	/* What it accounts for: the struct, topic, payload and a bucket. */
	ck_assert_uint_eq(record__bytes(r), offsetof(struct dlq_record, data) + 7 + 1 + sizeof(void *));
	/* The topic starts where the fields end, in the struct's tail. */
	ck_assert_ptr_eq(record__topic(r), r->data);
	record__free(r);
	/* With the more part (redelivery tracking), the same message costs
	 * that part more, and says so. */
	r = record_fixture__make(DLQ_RECORD_MORE, .id = &id, .topic = "jobs/1", .payload = "p", .payload_len = 1,
			.policy = &policy, .attempt = 1, .qos = 1, .now_ms = 7);
	ck_assert_ptr_nonnull(record__more(r));
	ck_assert_str_eq(record__topic(r), "jobs/1");
	ck_assert_mem_eq(record__origin_id(r)->raw, id.raw, sizeof(id.raw));
	ck_assert_uint_eq(record__bytes(r), sizeof(*r) + sizeof(struct dlq_record_more) + 7 + 1 + sizeof(void *));
	record__free(r);
}
END_TEST

/* 2.1's exact counting: an original gets the 4-byte sends part (68 bytes
 * before its topic on a 64-bit machine, what an original cost before), a
 * retry copy or a record with a chain behind it the more part instead. */
START_TEST(a_counting_original_has_the_sends_part)
{
	struct dlq_id id = fresh_id(), origin = fresh_id();
	struct dlq_record *r = record_fixture__make(DLQ_RECORD_SENDS, .id = &id, .topic = "jobs/1", .payload = "p",
			.payload_len = 1, .policy = &policy, .attempt = 1, .qos = 1, .now_ms = 7);
	ck_assert_ptr_nonnull(r);
	ck_assert_ptr_null(record__more(r));
	ck_assert_ptr_nonnull(record__sends(r));
	ck_assert_uint_eq(record__sends(r)->client, 0);
	ck_assert_uint_eq(record__sends(r)->sends, 0);
	ck_assert_uint_eq(record__attempt(r), 1);
	ck_assert_str_eq(record__topic(r), "jobs/1");
	ck_assert_str_eq(record__origin_topic(r), "jobs/1");
	ck_assert_mem_eq(record__payload(r), "p", 1);
	ck_assert_uint_eq(record__bytes(r), sizeof(*r) + sizeof(struct dlq_record_sends) + 7 + 1 + sizeof(void *));
	if(sizeof(void *) == 8) ck_assert_uint_eq(DLQ_RECORD_HEAD(r->flags), 68);
	record__free(r);

	r = record_fixture__make(DLQ_RECORD_SENDS, .id = &id, .origin_id = &origin, .topic = "jobs/retry",
			.origin_topic = "jobs/1", .payload = "p", .payload_len = 1, .policy = &policy, .attempt = 2,
			.qos = 1, .now_ms = 7);
	ck_assert_ptr_nonnull(record__more(r));
	ck_assert_ptr_null(record__sends(r));
	ck_assert_uint_eq(record__attempt(r), 2);
	ck_assert_str_eq(record__origin_topic(r), "jobs/1");
	ck_assert_mem_eq(record__payload(r), "p", 1);
	record__free(r);
	/* Restored with an attempt above 1 (its own id as origin): the more
	 * part keeps the attempt. */
	r = record_fixture__make(DLQ_RECORD_SENDS, .id = &id, .origin_id = &id, .topic = "jobs/1", .payload = "p",
			.payload_len = 1, .policy = &policy, .attempt = 3, .qos = 1, .now_ms = 7);
	ck_assert_ptr_nonnull(record__more(r));
	ck_assert_uint_eq(record__attempt(r), 3);
	record__free(r);
	r = record_fixture__make(0, .id = &id, .origin_id = &id, .topic = "jobs/1", .payload = "p", .payload_len = 1,
			.policy = &policy, .attempt = 3, .qos = 1, .now_ms = 7);
	ck_assert_ptr_nonnull(record__more(r));
	ck_assert_uint_eq(record__attempt(r), 3);
	record__free(r);
}
END_TEST

/* The tracked path's one-pass constructor makes, for each part, the record
 * record__make makes of the same fields, and knows its size as record__bytes
 * does. */
START_TEST(an_original_made_in_one_pass_is_the_record_the_others_make)
{
	struct dlq_headers h = {0};
	ck_assert_int_eq(headers__add_user(&h, "trace", "t-1"), 0);
	struct dlq_id id = fresh_id();
	const char payload[] = {'4', '\0', '2'};
	const uint8_t parts[] = { 0, DLQ_RECORD_MORE, DLQ_RECORD_SENDS };
	for(size_t i = 0; i < 3; i++){
		size_t bytes = 0;
		struct dlq_record *a = record__new_original(parts[i], &id, "devices/7/telemetry", payload, sizeof(payload),
				h.data, h.len, &policy, 1, 42, &bytes);
		struct dlq_record *b = record_fixture__make(parts[i], .id = &id, .topic = "devices/7/telemetry",
				.payload = payload, .payload_len = sizeof(payload), .headers = h.data, .headers_len = h.len,
				.policy = &policy, .attempt = 1, .qos = 1, .now_ms = 42);
		ck_assert_ptr_nonnull(a);
		ck_assert_ptr_nonnull(b);
		ck_assert_uint_eq(a->flags, b->flags);
		ck_assert_uint_eq(bytes, record__bytes(a));
		ck_assert_uint_eq(bytes, record__bytes(b));
		ck_assert_uint_eq(DLQ_RECORD_HEAD(a->flags), DLQ_RECORD_HEAD(b->flags));
		/* Everything after the pointers the ledger sets: the same bytes. */
		size_t from = offsetof(struct dlq_record, policy);
		size_t len = DLQ_RECORD_HEAD(a->flags) + 20 + sizeof(payload) + h.len - from;
		ck_assert_mem_eq((const char *)a + from, (const char *)b + from, len);
		ck_assert_uint_eq(record__attempt(a), 1);
		ck_assert_ptr_null(a->settlers);
		ck_assert_str_eq(record__origin_topic(a), "devices/7/telemetry");
		record__free(a);
		record__free(b);
	}
	size_t bytes;
	char topic[65537];
	memset(topic, 'a', sizeof(topic) - 1);
	topic[sizeof(topic) - 1] = '\0';
	ck_assert_ptr_null(record__new_original(0, &id, topic, "x", 1, NULL, 0, &policy, 1, 1, &bytes));
	headers__free(&h);
}
END_TEST

START_TEST(a_record_keeps_what_it_was_made_from)
{
	struct dlq_headers h = {0};
	ck_assert_int_eq(headers__add_user(&h, "trace", "t-1"), 0);
	struct dlq_id id = fresh_id(), origin = fresh_id();
	const char payload[] = {'4', '\0', '2'};
	struct dlq_record *r = record_fixture__make(0, .id = &id, .origin_id = &origin,
			.topic = "devices/retry/telemetry", .origin_topic = "devices/7/telemetry", .payload = payload,
			.payload_len = sizeof(payload), .headers = h.data, .headers_len = h.len, .policy = &policy,
			.attempt = 2, .qos = 2, .now_ms = 4242);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(record__topic(r), "devices/retry/telemetry");
	ck_assert_str_eq(record__origin_topic(r), "devices/7/telemetry");
	ck_assert_uint_eq(r->payload_len, sizeof(payload));
	ck_assert_mem_eq(record__payload(r), payload, sizeof(payload));
	ck_assert_uint_eq(r->headers_len, h.len);
	ck_assert_mem_eq(record__headers(r), h.data, h.len);
	ck_assert_mem_eq(r->id.raw, id.raw, sizeof(id.raw));
	ck_assert_mem_eq(record__origin_id(r)->raw, origin.raw, sizeof(origin.raw));
	/* A retry copy (another origin) has the more part; an original not. */
	ck_assert_ptr_nonnull(record__more(r));
	ck_assert_ptr_eq(r->policy, &policy);
	ck_assert_uint_eq(record__attempt(r), 2);
	ck_assert_uint_eq(r->qos, 2);
	ck_assert_uint_eq(r->created_ms, 4242);
	ck_assert_ptr_null(r->settlers);
	ck_assert_uint_ge(record__bytes(r), sizeof(*r) + strlen("devices/retry/telemetry")
			+ strlen("devices/7/telemetry") + sizeof(payload) + h.len);
	record__free(r);
	headers__free(&h);
}
END_TEST

START_TEST(an_origin_topic_equal_to_the_topic_is_the_topic)
{
	struct dlq_id id = fresh_id();
	struct dlq_record *a = record_fixture__make(0, .id = &id, .origin_id = &id, .topic = "numbers", .payload = "",
			.payload_len = 0, .policy = &policy, .attempt = 1, .qos = 0, .now_ms = 1);
	struct dlq_record *b = record_fixture__make(0, .id = &id, .origin_id = &id, .topic = "numbers",
			.origin_topic = "numbers", .payload = "", .payload_len = 0, .policy = &policy, .attempt = 1,
			.qos = 0, .now_ms = 1);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	ck_assert_str_eq(record__origin_topic(a), "numbers");
	ck_assert_str_eq(record__origin_topic(b), "numbers");
	/* Nothing stored twice. */
	ck_assert_uint_eq(record__bytes(a), record__bytes(b));
	ck_assert_uint_eq(a->payload_len, 0);
	ck_assert_uint_eq(a->headers_len, 0);
	record__free(a);
	record__free(b);
}
END_TEST

START_TEST(a_topic_over_65535_bytes_makes_no_record)
{
	char *topic = malloc(65537);
	memset(topic, 't', 65536);
	topic[65536] = '\0';
	struct dlq_id id = fresh_id();
	ck_assert_ptr_null(record_fixture__make(0, .id = &id, .origin_id = &id, .topic = topic, .payload = "x",
			.payload_len = 1, .policy = &policy, .attempt = 1, .qos = 0, .now_ms = 1));
	ck_assert_ptr_null(record_fixture__make(0, .id = &id, .origin_id = &id, .topic = "numbers",
			.origin_topic = topic, .payload = "x", .payload_len = 1, .policy = &policy, .attempt = 1,
			.qos = 0, .now_ms = 1));
	topic[65535] = '\0';
	struct dlq_record *r = record_fixture__make(0, .id = &id, .origin_id = &id, .topic = topic, .payload = "x",
			.payload_len = 1, .policy = &policy, .attempt = 1, .qos = 0, .now_ms = 1);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(strlen(record__topic(r)), 65535);
	record__free(r);
	free(topic);
}
END_TEST

START_TEST(inserted_records_are_found_by_id)
{
	struct dlq_record *r[3];
	for(int i = 0; i < 3; i++){
		r[i] = make_record("payload", 1000 + (uint64_t)i);
		ck_assert_int_eq(ledger__insert(&l, r[i]), 0);
	}
	ck_assert_uint_eq(l.count, 3);
	for(int i = 0; i < 3; i++){
		ck_assert_ptr_eq(ledger__find(&l, &r[i]->id), r[i]);
	}
	ck_assert_ptr_eq(l.oldest, r[0]);
	ck_assert_ptr_eq(l.newest, r[2]);
	struct dlq_id unknown = fresh_id();
	ck_assert_ptr_null(ledger__find(&l, &unknown));
	ck_assert_uint_eq(l.bytes, record__bytes(r[0]) + record__bytes(r[1]) + record__bytes(r[2]));
	check_consistent(&l);
}
END_TEST

START_TEST(records_expire_oldest_first_after_the_window)
{
	struct dlq_record *r1 = make_record("one", 1000);
	struct dlq_record *r2 = make_record("two", 2000);
	struct dlq_record *r3 = make_record("three", 3000);
	struct dlq_id id1 = r1->id, id2 = r2->id, id3 = r3->id;
	ck_assert_int_eq(ledger__insert(&l, r1), 0);
	ck_assert_int_eq(ledger__insert(&l, r2), 0);
	ck_assert_int_eq(ledger__insert(&l, r3), 0);

	/* Window 1000 ms at 3000: r1 is 2000 ms old (out), r2 exactly 1000
	 * ms old (still in: only records older than the window leave). */
	ck_assert_uint_eq(ledger__expire(&l, 3000, 1000), 1);
	ck_assert_ptr_null(ledger__find(&l, &id1));
	ck_assert_ptr_eq(ledger__find(&l, &id2), r2);
	ck_assert_ptr_eq(ledger__find(&l, &id3), r3);
	ck_assert_ptr_eq(l.oldest, r2);
	check_consistent(&l);

	/* Nothing more at the same time; one ms later r2 goes. */
	ck_assert_uint_eq(ledger__expire(&l, 3000, 1000), 0);
	ck_assert_uint_eq(ledger__expire(&l, 3001, 1000), 1);
	ck_assert_ptr_null(ledger__find(&l, &id2));
	ck_assert_ptr_eq(ledger__find(&l, &id3), r3);
	check_consistent(&l);

	ck_assert_uint_eq(ledger__expire(&l, 4001, 1000), 1);
	ck_assert_ptr_null(ledger__find(&l, &id3));
	ck_assert_uint_eq(l.count, 0);
	ck_assert_uint_eq(l.bytes, 0);
	check_consistent(&l);
	ck_assert_uint_eq(ledger__expire(&l, 100000, 1000), 0);
}
END_TEST

START_TEST(expiry_stops_at_the_first_record_inside_the_window)
{
	/* Records made in the same millisecond leave together. */
	for(int i = 0; i < 10; i++){
		ck_assert_int_eq(ledger__insert(&l, make_record("same", 5000)), 0);
	}
	for(int i = 0; i < 10; i++){
		ck_assert_int_eq(ledger__insert(&l, make_record("later", 6000)), 0);
	}
	ck_assert_uint_eq(ledger__expire(&l, 5000 + 300000, 300000), 0);
	ck_assert_uint_eq(ledger__expire(&l, 5001 + 300000, 300000), 10);
	ck_assert_uint_eq(l.count, 10);
	ck_assert_uint_eq(l.oldest->created_ms, 6000);
	check_consistent(&l);
}
END_TEST

START_TEST(eviction_frees_the_oldest_until_the_target)
{
	struct dlq_record *r[5];
	struct dlq_id ids[5];
	for(int i = 0; i < 5; i++){
		r[i] = make_record("some payload of a few bytes", 1000 + (uint64_t)i);
		ids[i] = r[i]->id;
		ck_assert_int_eq(ledger__insert(&l, r[i]), 0);
	}
	uint64_t all = l.bytes;
	size_t one = record__bytes(r[0]);

	/* Already within the target: nothing leaves. */
	ck_assert_uint_eq(ledger__evict_to(&l, all), 0);
	ck_assert_uint_eq(l.count, 5);

	/* One byte too many: exactly the oldest leaves. */
	ck_assert_uint_eq(ledger__evict_to(&l, all - 1), 1);
	ck_assert_ptr_null(ledger__find(&l, &ids[0]));
	ck_assert_ptr_eq(ledger__find(&l, &ids[1]), r[1]);
	ck_assert_uint_eq(l.bytes, all - one);
	check_consistent(&l);

	/* Room for two more records' worth: r1 and r2 leave, r3 and r4 stay. */
	ck_assert_uint_eq(ledger__evict_to(&l, record__bytes(r[3]) + record__bytes(r[4])), 2);
	ck_assert_ptr_null(ledger__find(&l, &ids[1]));
	ck_assert_ptr_null(ledger__find(&l, &ids[2]));
	ck_assert_ptr_eq(ledger__find(&l, &ids[3]), r[3]);
	ck_assert_ptr_eq(ledger__find(&l, &ids[4]), r[4]);
	check_consistent(&l);

	ck_assert_uint_eq(ledger__evict_to(&l, 0), 2);
	ck_assert_uint_eq(l.count, 0);
	ck_assert_uint_eq(l.bytes, 0);
	check_consistent(&l);
	ck_assert_uint_eq(ledger__evict_to(&l, 0), 0);
}
END_TEST

START_TEST(a_nacker_is_recorded_once_per_client)
{
	struct dlq_record *r = make_record("42", 1000);
	ck_assert_int_eq(ledger__insert(&l, r), 0);
	uint64_t before = l.bytes;

	ck_assert_int_eq(ledger__add_settler(&l, r, "sub1", DLQ_SETTLED_NACK), 0);
	ck_assert_uint_gt(l.bytes, before);
	check_consistent(&l);
	uint64_t with_one = l.bytes;

	ck_assert_int_eq(ledger__add_settler(&l, r, "sub1", DLQ_SETTLED_NACK), EEXIST);
	ck_assert_uint_eq(l.bytes, with_one);

	ck_assert_int_eq(ledger__add_settler(&l, r, "sub2", DLQ_SETTLED_NACK), 0);
	ck_assert_int_eq(ledger__add_settler(&l, r, "sub", DLQ_SETTLED_NACK), 0); /* a prefix is another client */
	ck_assert_int_eq(ledger__add_settler(&l, r, "sub10", DLQ_SETTLED_NACK), 0);
	ck_assert_int_eq(ledger__add_settler(&l, r, "sub2", DLQ_SETTLED_NACK), EEXIST);
	ck_assert_int_eq(ledger__add_settler(&l, r, "sub1", DLQ_SETTLED_NACK), EEXIST);
	ck_assert_int_eq(ledger__add_settler(&l, r, "", DLQ_SETTLED_NACK), 0);
	ck_assert_int_eq(ledger__add_settler(&l, r, "", DLQ_SETTLED_NACK), EEXIST);
	check_consistent(&l);

	/* The record's nackers leave with it and take their bytes along. */
	ck_assert_uint_eq(ledger__evict_to(&l, 0), 1);
	ck_assert_uint_eq(l.bytes, 0);
}
END_TEST

START_TEST(nackers_of_a_record_not_yet_inserted_count_once_inserted)
{
	struct dlq_record *r = make_record("42", 1000);
	size_t bare = record__bytes(r);
	ck_assert_int_eq(ledger__add_settler(&l, r, "sub1", DLQ_SETTLED_NACK), 0);
	ck_assert_uint_eq(l.bytes, 0);
	ck_assert_uint_gt(record__bytes(r), bare);
	ck_assert_int_eq(ledger__insert(&l, r), 0);
	ck_assert_uint_eq(l.bytes, record__bytes(r));
	check_consistent(&l);
	ck_assert_uint_eq(ledger__expire(&l, 1000000, 1000), 1);
	ck_assert_uint_eq(l.bytes, 0);
}
END_TEST

START_TEST(bytes_return_to_zero_after_mixed_removals)
{
	char payload[64];
	for(int i = 0; i < 300; i++){
		snprintf(payload, sizeof(payload), "%0*d", 1 + i % 50, i);
		struct dlq_record *r = make_record(payload, 1000 + (uint64_t)i);
		ck_assert_int_eq(ledger__insert(&l, r), 0);
		if(i % 3 == 0) ck_assert_int_eq(ledger__add_settler(&l, r, "a-client", DLQ_SETTLED_NACK), 0);
		if(i % 5 == 0) ck_assert_int_eq(ledger__add_settler(&l, r, "another-client-id", DLQ_SETTLED_NACK), 0);
	}
	check_consistent(&l);
	ck_assert_uint_eq(ledger__expire(&l, 1000 + 99 + 500, 500), 99);
	check_consistent(&l);
	ck_assert_uint_eq(l.oldest->created_ms, 1099);
	ledger__evict_to(&l, l.bytes / 2);
	check_consistent(&l);
	ck_assert_uint_eq(l.newest->created_ms, 1299);
	ledger__evict_to(&l, 0);
	check_consistent(&l);
	ck_assert_uint_eq(l.count, 0);
	ck_assert_uint_eq(l.bytes, 0);
}
END_TEST

START_TEST(a_hundred_thousand_records_grow_the_table)
{
	enum { N = 100000 };
	size_t initial_buckets = l.nbuckets;
	struct dlq_id *ids = malloc(N * sizeof(*ids));
	ck_assert_ptr_nonnull(ids);
	for(int i = 0; i < N; i++){
		struct dlq_record *r = make_record("x", 1000 + (uint64_t)i / 10);
		ids[i] = r->id;
		ck_assert_int_eq(ledger__insert(&l, r), 0);
	}
	ck_assert_uint_eq(l.count, N);
	ck_assert_uint_gt(l.nbuckets, initial_buckets);
	ck_assert_uint_eq(l.nbuckets & (l.nbuckets - 1), 0); /* a power of two */
	/* About one bucket per record: chains stay short. */
	ck_assert_uint_ge(l.nbuckets * 2, (size_t)N);
	for(int i = 0; i < N; i++){
		const struct dlq_record *r = ledger__find(&l, &ids[i]);
		ck_assert_ptr_nonnull(r);
		ck_assert_mem_eq(r->id.raw, ids[i].raw, sizeof(ids[i].raw));
	}
	check_consistent(&l);

	/* Expire the first half by time, then the rest by the bound. */
	ck_assert_uint_eq(ledger__expire(&l, 1000 + N / 20 + 1000, 1000), N / 2);
	ck_assert_ptr_null(ledger__find(&l, &ids[0]));
	ck_assert_ptr_null(ledger__find(&l, &ids[N / 2 - 1]));
	ck_assert_ptr_nonnull(ledger__find(&l, &ids[N / 2]));
	check_consistent(&l);
	ck_assert_uint_eq(ledger__evict_to(&l, 0), N / 2);
	ck_assert_uint_eq(l.bytes, 0);
	ck_assert_uint_eq(l.count, 0);
	for(int i = 0; i < N; i += 997){
		ck_assert_ptr_null(ledger__find(&l, &ids[i]));
	}
	free(ids);
}
END_TEST

/* A doubling of the table moves its records a few chains at a time: right
 * after it starts, records are in both tables and every one is found, an
 * eviction and an expiry pass in the middle find theirs, and the table
 * before is freed once the inserts and passes have moved it all. */
START_TEST(a_doubling_moves_records_over_the_following_calls)
{
	size_t initial = l.nbuckets;
	size_t n = 0;
	while(l.old == NULL){
		ck_assert_int_eq(ledger__insert(&l, make_record("x", 1000 + n)), 0);
		n++;
		ck_assert_uint_le(n, 2 * initial + 1);
	}
	/* The insert that found the table full began the doubling. */
	ck_assert_uint_eq(n, 2 * initial + 1);
	ck_assert_uint_eq(l.nbuckets, 2 * initial);
	ck_assert_uint_eq(l.nold, initial);
	ck_assert_uint_gt(l.moved, 0);
	ck_assert_uint_lt(l.moved, initial);
	check_consistent(&l);

	/* Evicting the oldest ten: each found in whichever table holds it. */
	uint64_t ten = 0;
	const struct dlq_record *r = l.oldest;
	for(int i = 0; i < 10; i++, r = r->newer) ten += record__bytes(r);
	ck_assert_uint_eq(ledger__evict_to(&l, l.bytes - ten), 10);
	ck_assert_ptr_nonnull(l.old);
	check_consistent(&l);

	/* A few more inserts move a few more chains each. */
	size_t before = l.moved;
	for(int i = 0; i < 3; i++){
		ck_assert_int_eq(ledger__insert(&l, make_record("y", 5000)), 0);
	}
	ck_assert_ptr_nonnull(l.old);
	ck_assert_uint_gt(l.moved, before);
	check_consistent(&l);

	/* Expiry passes move more, and the table before goes once all are. */
	int passes = 0;
	while(l.old){
		ck_assert_uint_eq(ledger__expire(&l, 5000, 1000000), 0);
		ck_assert_int_lt(++passes, 1000);
		check_consistent(&l);
	}
	ck_assert_uint_eq(l.nold, 0);
	ck_assert_uint_eq(l.moved, 0);
	for(size_t i = 0; i < l.nbuckets; i++){
		for(const struct dlq_record *c = l.buckets[i]; c; c = c->hnext){
			ck_assert_uint_eq(id__hash(&c->id) & (l.nbuckets - 1), i);
		}
	}
}
END_TEST

/* A restore sizes the table once: reserving for n records gives the table
 * a doubling would reach at n (a power of two, at least n / 2 buckets),
 * finishes a doubling under way, keeps every record found, and the n
 * records then go in with no doubling; a smaller reserve changes nothing. */
START_TEST(a_reserve_sizes_the_table_at_once)
{
	enum { N = 50000 };
	size_t before = 0;
	struct dlq_id first[4000];
	while(l.old == NULL){
		ck_assert_uint_lt(before, sizeof(first) / sizeof(first[0]));
		struct dlq_record *r = make_record("x", 1000);
		first[before++] = r->id;
		ck_assert_int_eq(ledger__insert(&l, r), 0);
	}
	ck_assert_int_eq(ledger__reserve(&l, before + N), 0);
	ck_assert_ptr_null(l.old);
	ck_assert_uint_eq(l.nbuckets & (l.nbuckets - 1), 0);
	ck_assert_uint_ge(l.nbuckets * 2, before + N);
	ck_assert_uint_lt(l.nbuckets, before + N);
	size_t sized = l.nbuckets;
	for(size_t i = 0; i < before; i++) ck_assert_ptr_nonnull(ledger__find(&l, &first[i]));
	check_consistent(&l);
	for(int i = 0; i < N; i++){
		ck_assert_int_eq(ledger__insert(&l, make_record("y", 2000)), 0);
		ck_assert_ptr_null(l.old);
	}
	ck_assert_uint_eq(l.nbuckets, sized);
	ck_assert_int_eq(ledger__reserve(&l, 10), 0);
	ck_assert_uint_eq(l.nbuckets, sized);
	check_consistent(&l);
}
END_TEST

/* Cleanup in the middle of a doubling frees both tables (LeakSanitizer). */
START_TEST(cleanup_in_a_doubling_frees_both_tables)
{
	while(l.old == NULL){
		ck_assert_int_eq(ledger__insert(&l, make_record("x", 1000)), 0);
	}
	ledger__cleanup(&l);
	ck_assert_ptr_null(l.old);
	ck_assert_ptr_null(l.buckets);
}
END_TEST

START_TEST(cleanup_frees_records_and_their_nackers)
{
	/* Checked by ASan/valgrind: nothing leaks. */
	for(int i = 0; i < 50; i++){
		struct dlq_record *r = make_record("leak?", 1000);
		ck_assert_int_eq(ledger__insert(&l, r), 0);
		ck_assert_int_eq(ledger__add_settler(&l, r, "sub1", DLQ_SETTLED_NACK), 0);
	}
	ledger__cleanup(&l);
	ck_assert_uint_eq(l.count, 0);
	ck_assert_uint_eq(l.bytes, 0);
	ck_assert_ptr_null(l.oldest);
	record__free(NULL);
}
END_TEST

static void setup(void)
{
	fake_reset();
	id__gen_init(&idgen);
	ck_assert_int_eq(ledger__init(&l), 0);
}

/* A test that cleaned the ledger up itself leaves it zeroed, which
 * ledger__cleanup takes again. */
static void teardown(void)
{
	ledger__cleanup(&l);
	fake_reset();
}

int main(void)
{
	Suite *s = suite_create("ledger");
	check_add(s, check_fixture(tcase_create("records"), setup, teardown),
			CHECK_TESTS(a_record_keeps_what_it_was_made_from, an_original_is_the_small_record,
			a_counting_original_has_the_sends_part, an_original_made_in_one_pass_is_the_record_the_others_make,
			an_origin_topic_equal_to_the_topic_is_the_topic, a_topic_over_65535_bytes_makes_no_record,
			inserted_records_are_found_by_id));

	check_add(s, check_fixture(tcase_create("leaving"), setup, teardown),
			CHECK_TESTS(records_expire_oldest_first_after_the_window,
			expiry_stops_at_the_first_record_inside_the_window, eviction_frees_the_oldest_until_the_target,
			bytes_return_to_zero_after_mixed_removals, cleanup_frees_records_and_their_nackers));

	check_add(s, check_fixture(tcase_create("nackers"), setup, teardown),
			CHECK_TESTS(a_nacker_is_recorded_once_per_client,
			nackers_of_a_record_not_yet_inserted_count_once_inserted));

	TCase *tc = tcase_create("scale");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120); /* valgrind */
	check_add(s, tc, CHECK_TESTS(a_hundred_thousand_records_grow_the_table,
			a_doubling_moves_records_over_the_following_calls, a_reserve_sizes_the_table_at_once,
			cleanup_in_a_doubling_frees_both_tables));
	return check_run(s);
}
