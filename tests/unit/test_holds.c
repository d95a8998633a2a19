/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of holds.c: records held by client, found in O(1) by client,
 * released one by one, the holder freed with its last record; the table
 * grows with the number of clients.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "model/holds.h"
#include "model/record.h"
#include "record_fixture.h"
#include "util/id.h"

static struct dlq_policy policy = {
	.filter = "jobs",
	.dead_letter = "dead/jobs",
	.max_attempts = 3,
};

/* A retry copy (only copies are held): its origin differs from its id. */
static struct dlq_record *record(unsigned n)
{
	struct dlq_id id, origin;
	memset(&id, 0, sizeof(id));
	memcpy(id.raw, &n, sizeof(n));
	origin = id;
	origin.raw[DLQ_ID_RAW_LEN - 1] = 0xff;
	struct dlq_record *r = record_fixture__make(0, .id = &id, .origin_id = &origin, .topic = "jobs",
			.payload = "x", .payload_len = 1, .policy = &policy, .attempt = 2, .qos = 1, .now_ms = 0);
	ck_assert_ptr_nonnull(r);
	return r;
}

START_TEST(an_original_cannot_be_held)
{
	struct dlq_holds h;
	ck_assert_int_eq(holds__init(&h), 0);
	struct dlq_id id;
	memset(&id, 7, sizeof(id));
	struct dlq_record *r = record_fixture__make(0, .id = &id, .topic = "jobs", .payload = "x", .payload_len = 1,
			.policy = &policy, .attempt = 1, .qos = 1, .now_ms = 0);
	ck_assert_ptr_nonnull(r);
	ck_assert_ptr_null(record__more(r));
	ck_assert_int_eq(holds__add(&h, r, "w1"), EINVAL);
	ck_assert_ptr_null(holds__client(r));
	holds__release(&h, r);
	ck_assert_uint_eq(h.records, 0);
	holds__cleanup(&h);
	record__free(r);
}
END_TEST

START_TEST(records_are_held_by_client_and_released_one_by_one)
{
	struct dlq_holds h;
	ck_assert_int_eq(holds__init(&h), 0);
	struct dlq_record *a = record(1), *b = record(2), *c = record(3);
	ck_assert_int_eq(holds__add(&h, a, "w1"), 0);
	ck_assert_int_eq(holds__add(&h, b, "w1"), 0);
	ck_assert_int_eq(holds__add(&h, c, "w2"), 0);
	ck_assert_uint_eq(h.holders, 2);
	ck_assert_uint_eq(h.records, 3);
	ck_assert_str_eq(holds__client(a), "w1");
	ck_assert_str_eq(holds__client(c), "w2");
	struct dlq_holder *k = holds__find(&h, "w1");
	ck_assert_ptr_nonnull(k);
	ck_assert_uint_eq(k->count, 2);
	ck_assert_ptr_null(holds__find(&h, "w"));

	holds__release(&h, a); /* the newest first, or not: any order */
	ck_assert_ptr_null(holds__client(a));
	ck_assert_uint_eq(holds__find(&h, "w1")->count, 1);
	ck_assert_ptr_eq(holds__find(&h, "w1")->records, b);
	holds__release(&h, a); /* not held: nothing */
	holds__release(&h, b);
	ck_assert_ptr_null(holds__find(&h, "w1"));
	ck_assert_uint_eq(h.holders, 1);
	ck_assert_uint_eq(h.records, 1);

	/* Cleanup lets go of what is left; the records stay the caller's. */
	holds__cleanup(&h);
	ck_assert_ptr_null(holds__client(c));
	record__free(a);
	record__free(b);
	record__free(c);
}
END_TEST

START_TEST(many_clients_grow_the_table)
{
	enum { N = 1000 };
	struct dlq_holds h;
	ck_assert_int_eq(holds__init(&h), 0);
	static struct dlq_record *r[N];
	char client[32];
	for(unsigned i = 0; i < N; i++){
		r[i] = record(i);
		snprintf(client, sizeof(client), "client-%u", i % 500);
		ck_assert_int_eq(holds__add(&h, r[i], client), 0);
	}
	ck_assert_uint_eq(h.holders, 500);
	ck_assert_uint_ge(h.size, 500);
	for(unsigned i = 0; i < 500; i++){
		snprintf(client, sizeof(client), "client-%u", i);
		struct dlq_holder *k = holds__find(&h, client);
		ck_assert_ptr_nonnull(k);
		ck_assert_uint_eq(k->count, 2);
	}
	for(unsigned i = 0; i < N; i += 2){
		holds__release(&h, r[i]);
	}
	ck_assert_uint_eq(h.records, N / 2);
	for(unsigned i = 1; i < N; i += 2){
		holds__release(&h, r[i]);
	}
	ck_assert_uint_eq(h.holders, 0);
	ck_assert_uint_eq(h.records, 0);
	holds__cleanup(&h);
	for(unsigned i = 0; i < N; i++){
		record__free(r[i]);
	}
}
END_TEST

int main(void)
{
	return check_run(check_suite("holds", tcase_create("holds"),
			CHECK_TESTS(records_are_held_by_client_and_released_one_by_one, many_clients_grow_the_table,
			an_original_cannot_be_held)));
}
