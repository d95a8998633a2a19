/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of the engine's outbound path (outbound.c): what the broker
 * refused is owed and published on a later tick, what counts against the bound,
 * and a copy that cannot reach its client, against the fake broker port and the
 * engine fixture of fixtures.h: the topic, target client, QoS, payload and
 * properties of every publish, and that nothing else was published.
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

START_TEST(a_dead_letter_the_broker_refuses_is_published_on_a_later_tick)
{
	char id0[DLQ_ID_LEN + 1];
	start_tracking("once", "keep me", 1, id0);
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
	char id0[DLQ_ID_LEN + 1], id1[DLQ_ID_LEN + 1];
	start_tracking("numbers", "42", 1, id0);
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

START_TEST(owed_envelopes_count_against_the_bound_with_the_records)
{
	/* design.md: records stay NACKable "within max_pending_bytes counted
	 * over ledger records and owed envelopes", and owed envelopes are never
	 * evicted: so records must make room for them. Only owed envelopes
	 * alone may stand over the bound (then NACKs are refused as full). */
	char ids[FILL_MOST][DLQ_ID_LEN + 1];
	int tracked = start_filled_to_the_bound(ids);
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

/* The broker drops a QoS 0 message for an offline session: a copy that is
 * to wait in a persistent session goes out at QoS 1. Copies for sessions
 * that do not persist keep the original's QoS. */
START_TEST(a_copy_for_a_persistent_session_goes_out_at_qos_1)
{
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	start_tracking("numbers", "a", 0, a);
	track("numbers", "b", 0, b);
	struct dlq_nack_result res;
	ck_assert_int_eq(nack_with(a, "sub1", true, -1, &res), DLQ_NACK_RETRIED);
	ck_assert_int_eq(nack(b, "sub2"), DLQ_NACK_RETRIED);
	expect_publish(0, "sub1", "numbers", 1, "a");
	expect_publish(1, "sub2", "numbers", 0, "b");
	ck_assert_uint_eq(d.holds.records, 1); /* sub2's only */
}
END_TEST

int main(void)
{
	return check_run(check_suite("outbound", check_fixture(tcase_create("outbound"), setup, teardown),
			CHECK_TESTS(a_dead_letter_the_broker_refuses_is_published_on_a_later_tick,
			a_retry_copy_the_broker_refuses_is_published_on_a_later_tick,
			owed_envelopes_count_against_the_bound_with_the_records,
			a_copy_due_for_a_client_without_a_session_is_dead_lettered,
			a_copy_for_a_persistent_session_goes_out_at_qos_1)));
}
