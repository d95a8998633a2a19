/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of model/history.c, a policy's per-minute ring: counts land in
 * the minute of the wall clock, a gap of minutes reads as nothing, minutes
 * older than the hour fall out, the clock may jump forward past the whole
 * ring or back (the minutes after the new time are dropped), and restored
 * minutes are merged only when within the hour.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "model/history.h"

/* 2026-09-21, some minute's start, in milliseconds. */
#define T0 (1790000040LL * 1000)
#define MIN (60 * 1000LL)

static struct dlq_history h;
static struct dlq_history_minute out[DLQ_HISTORY_MINUTES];

static void setup(void)
{
	memset(&h, 0, sizeof(h));
	memset(out, 0, sizeof(out));
}

START_TEST(minutes_start_on_the_minute)
{
	ck_assert_int_eq(history__minute_of(T0), T0 / 1000);
	ck_assert_int_eq(history__minute_of(T0 + 59999), T0 / 1000);
	ck_assert_int_eq(history__minute_of(T0 + 60000), T0 / 1000 + 60);
	ck_assert_int_eq(history__minute_of(-5), 0);
	ck_assert_uint_eq(sizeof(struct dlq_history), 3368);
}
END_TEST

START_TEST(events_count_in_their_minute)
{
	history__count(&h, T0 + 1000, DLQ_HISTORY_NACK, 0);
	history__count(&h, T0 + 2000, DLQ_HISTORY_NACK, 0);
	history__count(&h, T0 + 3000, DLQ_HISTORY_DEAD_LETTER, DLQ_DEAD_NACK);
	history__count(&h, T0 + MIN, DLQ_HISTORY_DEAD_LETTER, DLQ_DEAD_FINAL);
	history__count(&h, T0 + MIN, DLQ_HISTORY_DEAD_LETTER, 999); /* out of range: unknown */
	history__count(&h, T0 + MIN + 5, DLQ_HISTORY_REDRIVE, 0);
	history__count(&h, T0 + MIN + 6, DLQ_HISTORY_ACK_TIMEOUT, 0);
	size_t n = history__minutes(&h, T0 + MIN + 30000, out);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(out[0].minute, T0 / 1000);
	ck_assert_uint_eq(out[0].nacks, 2);
	ck_assert_uint_eq(out[0].dead_letters[DLQ_DEAD_NACK], 1);
	ck_assert_uint_eq(history__dead_letters(&out[0]), 1);
	ck_assert_int_eq(out[1].minute, T0 / 1000 + 60);
	ck_assert_uint_eq(out[1].nacks, 0);
	ck_assert_uint_eq(out[1].dead_letters[DLQ_DEAD_FINAL], 1);
	ck_assert_uint_eq(out[1].dead_letters[DLQ_DEAD_UNKNOWN], 1);
	ck_assert_uint_eq(history__dead_letters(&out[1]), 2);
	ck_assert_uint_eq(out[1].redrives, 1);
	ck_assert_uint_eq(out[1].ack_timeouts, 1);
}
END_TEST

/* Ten idle minutes between two counts: nothing in between, and a slot
 * reused after an hour starts from zero. */
START_TEST(a_gap_reads_as_nothing_and_old_minutes_fall_out)
{
	history__count(&h, T0, DLQ_HISTORY_NACK, 0);
	history__count(&h, T0 + 10 * MIN, DLQ_HISTORY_NACK, 0);
	ck_assert_uint_eq(history__minutes(&h, T0 + 10 * MIN, out), 2);
	ck_assert_int_eq(out[1].minute - out[0].minute, 600);
	/* 59 minutes after T0 it is still in the hour; 60 after, it is not. */
	ck_assert_uint_eq(history__minutes(&h, T0 + 59 * MIN, out), 2);
	ck_assert_uint_eq(history__minutes(&h, T0 + 60 * MIN, out), 1);
	ck_assert_int_eq(out[0].minute, (T0 + 10 * MIN) / 1000);
	/* T0's slot taken again an hour later: its old count is gone. */
	history__count(&h, T0 + 60 * MIN, DLQ_HISTORY_NACK, 0);
	ck_assert_uint_eq(history__minutes(&h, T0 + 60 * MIN, out), 2);
	ck_assert_uint_eq(out[1].nacks, 1);
	ck_assert_int_eq(out[1].minute, (T0 + 60 * MIN) / 1000);
}
END_TEST

/* Every minute of an hour and then some: the ring holds the last 60. */
START_TEST(the_ring_holds_the_last_sixty_minutes)
{
	for(int k = 0; k < 90; k++){
		for(int i = 0; i <= k % 5; i++) history__count(&h, T0 + k * MIN, DLQ_HISTORY_NACK, 0);
	}
	size_t n = history__minutes(&h, T0 + 89 * MIN, out);
	ck_assert_uint_eq(n, DLQ_HISTORY_MINUTES);
	for(size_t i = 0; i < n; i++){
		int k = 30 + (int)i;
		ck_assert_int_eq(out[i].minute, (T0 + k * MIN) / 1000);
		ck_assert_uint_eq(out[i].nacks, (uint32_t)(k % 5 + 1));
	}
}
END_TEST

START_TEST(a_clock_far_forward_leaves_an_empty_hour)
{
	history__count(&h, T0, DLQ_HISTORY_NACK, 0);
	ck_assert_uint_eq(history__minutes(&h, T0 + 1000 * MIN, out), 0);
	history__count(&h, T0 + 1000 * MIN, DLQ_HISTORY_REDRIVE, 0);
	ck_assert_uint_eq(history__minutes(&h, T0 + 1000 * MIN, out), 1);
	ck_assert_uint_eq(out[0].redrives, 1);
	ck_assert_uint_eq(out[0].nacks, 0);
}
END_TEST

/* The clock put back five minutes: the minutes after the new time are not
 * read, and the next count drops them, so that they are not mixed with
 * the minutes still to come when the clock gets there again. */
START_TEST(a_clock_put_back_drops_the_minutes_after_it)
{
	for(int k = 0; k < 10; k++) history__count(&h, T0 + k * MIN, DLQ_HISTORY_NACK, 0);
	ck_assert_uint_eq(history__minutes(&h, T0 + 4 * MIN, out), 5);
	history__count(&h, T0 + 4 * MIN + 10, DLQ_HISTORY_NACK, 0);
	ck_assert_uint_eq(history__minutes(&h, T0 + 4 * MIN, out), 5);
	ck_assert_uint_eq(out[4].nacks, 2);
	/* Minutes 5 to 9 again: each holds only what is counted now. */
	history__count(&h, T0 + 7 * MIN, DLQ_HISTORY_NACK, 0);
	ck_assert_uint_eq(history__minutes(&h, T0 + 9 * MIN, out), 6);
	ck_assert_int_eq(out[5].minute, (T0 + 7 * MIN) / 1000);
	ck_assert_uint_eq(out[5].nacks, 1);
	/* Back by days: nothing of the later hour is read or kept. */
	history__count(&h, T0 - 3000 * MIN, DLQ_HISTORY_NACK, 0);
	ck_assert_uint_eq(history__minutes(&h, T0 - 3000 * MIN, out), 1);
	ck_assert_uint_eq(history__minutes(&h, T0 + 9 * MIN, out), 0);
	/* Before 1970: counted in its first minute. */
	history__count(&h, -1, DLQ_HISTORY_NACK, 0);
	ck_assert_uint_eq(history__minutes(&h, 0, out), 1);
	ck_assert_int_eq(out[0].minute, 0);
}
END_TEST

START_TEST(restored_minutes_merge_within_the_hour)
{
	struct dlq_history_minute m = { .minute = T0 / 1000, .nacks = 3, .redrives = 1 };
	m.dead_letters[DLQ_DEAD_RESTART] = 2;
	history__count(&h, T0 + 5 * MIN, DLQ_HISTORY_NACK, 0);
	ck_assert(history__merge(&h, &m, T0 + 5 * MIN));
	ck_assert(history__merge(&h, &m, T0 + 5 * MIN)); /* twice: added */
	struct dlq_history_minute old = m, future = m, odd = m;
	old.minute -= 60 * 60;
	future.minute = (T0 + 6 * MIN) / 1000;
	odd.minute += 1;
	ck_assert(!history__merge(&h, &old, T0 + 5 * MIN));
	ck_assert(!history__merge(&h, &future, T0 + 5 * MIN));
	ck_assert(!history__merge(&h, &odd, T0 + 5 * MIN));
	ck_assert_uint_eq(history__minutes(&h, T0 + 5 * MIN, out), 2);
	ck_assert_uint_eq(out[0].nacks, 6);
	ck_assert_uint_eq(out[0].redrives, 2);
	ck_assert_uint_eq(out[0].dead_letters[DLQ_DEAD_RESTART], 4);
	ck_assert_uint_eq(out[1].nacks, 1);
	/* The newest minute is still the one counted: counting on goes on
	 * from it, dropping nothing. */
	history__count(&h, T0 + 5 * MIN, DLQ_HISTORY_NACK, 0);
	ck_assert_uint_eq(history__minutes(&h, T0 + 5 * MIN, out), 2);
	/* Counts saturate rather than wrap. */
	m.nacks = UINT32_MAX;
	ck_assert(history__merge(&h, &m, T0 + 5 * MIN));
	ck_assert_uint_eq(history__minutes(&h, T0 + 5 * MIN, out), 2);
	ck_assert_uint_eq(out[0].nacks, UINT32_MAX);
}
END_TEST

int main(void)
{
	return check_run(check_suite("history", check_fixture(tcase_create("history"), setup, NULL),
			CHECK_TESTS(minutes_start_on_the_minute, events_count_in_their_minute,
			a_gap_reads_as_nothing_and_old_minutes_fall_out, the_ring_holds_the_last_sixty_minutes,
			a_clock_far_forward_leaves_an_empty_hour, a_clock_put_back_drops_the_minutes_after_it,
			restored_minutes_merge_within_the_hour)));
}
