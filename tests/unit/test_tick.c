/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of the engine's tick (tick.c): records past their NACK window, and
 * when a quiet tick asks to be woken, against the fake broker port and the
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

int main(void)
{
	return check_run(check_suite("tick", check_fixture(tcase_create("tick"), setup, teardown),
			CHECK_TESTS(records_expire_after_the_nack_window, a_quiet_tick_wakes_for_what_comes_after_it,
			the_default_window_is_300_seconds)));
}
