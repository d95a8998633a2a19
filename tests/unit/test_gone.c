/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of the engine's retry copies for a client that leaves (gone.c):
 * sent, taken, held, owed or delayed, each becomes a dead letter unless the
 * client's session lasts, against the fake broker port and the engine fixture
 * of fixtures.h: the topic, target client, QoS, payload and properties of every
 * publish, and that nothing else was published.
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

/* client leaves (the broker's disconnect, whatever it says of the
 * session); then exactly published messages have gone out in all. */
static void leaves(const char *client, size_t published)
{
	dlq__client_gone(&d, client);
	ck_assert_msg(fake.publish_count == published, "after %s left: %zu published, expected %zu", client,
			fake.publish_count, published);
}

START_TEST(a_targeted_copy_whose_client_left_this_pass_becomes_a_dead_letter)
{
	start(standard, ARRAY_LEN(standard));
	char id0[DLQ_ID_LEN + 1];
	track_with("numbers", "42", 0, &original, id0);
	ck_assert_int_eq(nack(id0, "sub1"), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(fake.publish_count, 1);
	expect_publish(0, "sub1", "numbers", 0, "42");

	fake.wall_ms = 1790000000999LL;
	leaves("sub1", 2);
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

	leaves("sub2", 1);
	leaves("sub1", 2);
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
	leaves("sub1", 2);
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
	leaves("sub1", 3);
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
	leaves("sub3", 6);
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
	leaves("sub1", 1);
}
END_TEST

START_TEST(a_persisting_session_keeps_its_copy)
{
	char id0[DLQ_ID_LEN + 1];
	start_tracking("numbers", "42", 1, id0);
	struct dlq_nack_result res;
	ck_assert_int_eq(nack_with(id0, "sub1", true, -1, &res), DLQ_NACK_RETRIED);
	/* Whatever the broker says at disconnect (a takeover marks even a
	 * persistent session clean), the copy stays: its session persists. */
	leaves("sub1", 1);
	dlq__tick(&d);
	leaves("sub1", 1);
}
END_TEST

START_TEST(only_the_leaving_clients_targeted_copies_are_dead_lettered)
{
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	start_tracking("numbers", "for sub2", 1, a);
	track("devices/7/telemetry", "fixed", 1, b);
	ck_assert_int_eq(nack(a, "sub2"), DLQ_NACK_RETRIED);
	ck_assert_int_eq(nack(b, "sub1"), DLQ_NACK_RETRIED); /* an ordinary publish: not sub1's */
	ck_assert_uint_eq(fake.publish_count, 2);
	dlq__client_gone(&d, "sub1");
	leaves("sub", 2);
	leaves("sub2", 3);
	expect_publish(2, NULL, "dead/numbers", 1, "for sub2");
	expect_hdr(2, DLQ_PROP_DEAD_LETTER_CLIENT, "sub2");
}
END_TEST

START_TEST(an_owed_copy_whose_client_left_becomes_a_dead_letter)
{
	char id0[DLQ_ID_LEN + 1];
	start_tracking("numbers", "42", 1, id0);
	fake.fail_publishes = 2;
	ck_assert_int_eq(nack(id0, "sub1"), DLQ_NACK_RETRIED);
	dlq__tick(&d); /* refused again: still owed a loop pass later */
	ck_assert_uint_eq(fake.publish_count, 0);
	ck_assert_uint_eq(d.outbox.owed.count, 1);

	leaves("sub1", 1);
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

START_TEST(a_delayed_copy_whose_client_left_without_a_session_is_dead_lettered_at_once)
{
	char id0[DLQ_ID_LEN + 1];
	uint64_t t = start_with_a_delayed_copy("slow", "42", 1, &original, false, id0);
	ck_assert_uint_gt(d.delayed.bytes, 0);
	fake.now_ms = t + 500;
	dlq__client_gone(&d, "sub2");
	ck_assert_uint_eq(d.delayed.count, 1);
	leaves("sub1", 1);
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
	char id0[DLQ_ID_LEN + 1];
	uint64_t t = start_with_a_delayed_copy("slow", "42", 1, NULL, true, id0);
	leaves("sub1", 0);
	ck_assert_uint_eq(d.delayed.count, 1);
	expect_due_at(t + 2000, 0);
	expect_publish(0, "sub1", "slow", 1, "42");
}
END_TEST

int main(void)
{
	return check_run(check_suite("gone", check_fixture(tcase_create("gone"), setup, teardown),
			CHECK_TESTS(a_targeted_copy_whose_client_left_this_pass_becomes_a_dead_letter,
			a_copy_taken_by_the_broker_is_held_until_its_client_leaves, a_held_copy_nacked_by_its_client_is_settled,
			a_held_copy_is_let_go_when_its_window_ends, a_persisting_session_keeps_its_copy,
			only_the_leaving_clients_targeted_copies_are_dead_lettered,
			an_owed_copy_whose_client_left_becomes_a_dead_letter,
			a_delayed_copy_whose_client_left_without_a_session_is_dead_lettered_at_once,
			a_delayed_copy_for_a_persisting_session_waits_for_its_client)));
}
