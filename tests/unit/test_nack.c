/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of the engine's NACKs (nack.c): which are refused and with what
 * status, each client's own chain, and a NACK the bound or the random source
 * refuses, against the fake broker port and the engine fixture of fixtures.h:
 * the topic, target client, QoS, payload and properties of every publish, and
 * that nothing else was published.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "engine/dlq.h"
#include "fake_port.h"
#include "fixtures.h"
#include "mosquitto_dlq.h"
#include "test_util.h"

START_TEST(a_second_nack_by_the_same_client_is_refused)
{
	char id0[DLQ_ID_LEN + 1];
	struct dlq_nack_result res;
	start_tracking("numbers", "42", 1, id0);
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
	char id0[DLQ_ID_LEN + 1], a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	start_tracking("numbers", "42", 1, id0);
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

/* Ids a NACK of sub1 refuses while one message is tracked, and how. */
static const struct {
	const char *id;
	enum dlq_nack_status status;
} refused_ids[] = {
	{"AAAAAAAAAAAAAAAA", DLQ_NACK_UNKNOWN_ID}, /* the right shape, never stamped */
	{"abc", DLQ_NACK_MALFORMED_ID},
	{"", DLQ_NACK_MALFORMED_ID},
	{"AAAAAAAAAAAAAAAAA", DLQ_NACK_MALFORMED_ID},
	{"AAAAAAAA+AAAAAAA", DLQ_NACK_MALFORMED_ID},
	{"AAAAAAAA/AAAAAA=", DLQ_NACK_MALFORMED_ID},
};

START_TEST(unknown_and_malformed_ids_are_refused)
{
	char id0[DLQ_ID_LEN + 1];
	start_tracking("numbers", "42", 1, id0);
	for(size_t i = 0; i < ARRAY_LEN(refused_ids); i++){
		enum dlq_nack_status st = nack(refused_ids[i].id, "sub1");
		ck_assert_msg(st == refused_ids[i].status, "NACK of \"%s\": %s", refused_ids[i].id, dlq__nack_status_text(st));
	}
	/* id_len counts, not the NUL. */
	struct dlq_nack_result res;
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

/* A flood of NACKs of ids never issued is refused and counted, one by one,
 * and leaves nothing behind: no record, no envelope, no byte, no publish
 * (the replies are control.c's), and no log line a client could flood. */
START_TEST(ten_thousand_unknown_nacks_leave_nothing_behind)
{
	char id0[DLQ_ID_LEN + 1];
	start_tracking("numbers", "42", 1, id0);
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

START_TEST(a_failing_random_source_refuses_the_nack_and_changes_nothing)
{
	char id0[DLQ_ID_LEN + 1], spare[DLQ_ID_LEN + 1];
	start_tracking("numbers", "42", 1, id0);
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

START_TEST(owed_envelopes_filling_the_bound_refuse_nacks)
{
	char ids[FILL_MOST][DLQ_ID_LEN + 1];
	int tracked = start_filled_to_the_bound(ids);
	ck_assert_int_gt(tracked, 3);

	int accepted = 0, full = 0;
	int accepted_ids[FILL_MOST];
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

int main(void)
{
	return check_run(check_suite("nack", check_fixture(tcase_create("nack"), setup, teardown),
			CHECK_TESTS(a_second_nack_by_the_same_client_is_refused,
			each_client_nacking_the_original_starts_its_own_chain, unknown_and_malformed_ids_are_refused,
			status_texts_are_distinct, ten_thousand_unknown_nacks_leave_nothing_behind,
			a_failing_random_source_refuses_the_nack_and_changes_nothing, owed_envelopes_filling_the_bound_refuse_nacks,
			a_copy_is_nackable_from_when_it_is_published)));
}
