/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of schedule.c, the min-heap of delayed retry copies: envelopes
 * come out in order of due time, equal due times in order of arrival (seq),
 * any one can be taken out without breaking the heap, and the byte count
 * follows what is in it. A randomised run of 10,000 operations is held to a
 * sorted reference.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "model/envelope.h"
#include "model/schedule.h"
#include "test_util.h"


static struct dlq_schedule s;

/* A retry copy due at due, with sequence number seq; its payload makes the
 * byte counts differ from one envelope to the next. */
static struct dlq_envelope *env(uint64_t due, uint64_t seq)
{
	char payload[32];
	int n = snprintf(payload, sizeof(payload), "%llu", (unsigned long long)seq);
	struct dlq_envelope *e = envelope__new(DLQ_ENV_RETRY_COPY, "sub1", "numbers", "numbers", "numbers",
			"dead/numbers", NULL, "sub1", NULL, payload, (uint32_t)n, NULL, 0);
	if(e == NULL) ck_abort_msg("out of memory");
	e->due_ms = due;
	e->seq = seq;
	return e;
}

static void push(struct dlq_envelope *e)
{
	ck_assert_int_eq(schedule__push(&s, e), 0);
}

/* Takes the first due envelope out; the caller owns it. */
static struct dlq_envelope *pop(void)
{
	struct dlq_envelope *e = schedule__peek(&s);
	ck_assert_ptr_nonnull(e);
	schedule__remove(&s, e);
	return e;
}

static bool before(const struct dlq_envelope *a, const struct dlq_envelope *b)
{
	if(a->due_ms != b->due_ms) return a->due_ms < b->due_ms;
	return a->seq < b->seq;
}

/* The heap property, every slot index and the byte sum. Checked with plain
 * comparisons and one assertion: Check's assertions cost a write to the
 * parent process each, which a loop over the heap on every operation of
 * the randomised test would pay thousands of times. */
static void check_heap(void)
{
	uint64_t bytes = 0;
	const char *problem = NULL;
	size_t at = 0;
	if(s.count > s.capacity) problem = "count beyond capacity";
	for(size_t i = 0; problem == NULL && i < s.count; i++){
		if(s.heap[i]->heap_index != i){
			problem = "an envelope does not know its slot";
		}else if(i > 0 && before(s.heap[i], s.heap[(i - 1) / 2])){
			problem = "an envelope is due before its parent";
		}
		at = i;
		bytes += s.heap[i]->bytes;
	}
	ck_assert_msg(problem == NULL, "heap of %zu: %s (slot %zu)", s.count, problem, at);
	ck_assert_uint_eq(s.bytes, bytes);
}

/* ------------------------------------------------------------------ */

START_TEST(an_empty_schedule_has_nothing_due)
{
	ck_assert_ptr_null(schedule__peek(&s));
	ck_assert_uint_eq(s.count, 0);
	ck_assert_uint_eq(s.bytes, 0);
}
END_TEST

START_TEST(envelopes_come_out_in_order_of_due_time)
{
	static const uint64_t dues[] = {5000, 1000, 9000, 3000, 7000, 2000, 8000, 4000, 6000, 500};
	for(size_t i = 0; i < ARRAY_LEN(dues); i++){
		push(env(dues[i], i + 1));
		check_heap();
	}
	ck_assert_uint_eq(s.count, ARRAY_LEN(dues));
	ck_assert_uint_eq(schedule__peek(&s)->due_ms, 500);

	uint64_t last = 0;
	for(size_t i = 0; i < ARRAY_LEN(dues); i++){
		struct dlq_envelope *e = pop();
		ck_assert_uint_ge(e->due_ms, last);
		last = e->due_ms;
		envelope__free(e);
		check_heap();
	}
	ck_assert_uint_eq(last, 9000);
	ck_assert_ptr_null(schedule__peek(&s));
	ck_assert_uint_eq(s.bytes, 0);
}
END_TEST

START_TEST(equal_due_times_keep_their_order_of_arrival)
{
	/* Pushed in an order that would shuffle them if ties were broken by
	 * anything but seq. */
	static const uint64_t seqs[] = {7, 3, 9, 1, 5, 2, 8, 4, 6, 10, 12, 11};
	for(size_t i = 0; i < ARRAY_LEN(seqs); i++){
		push(env(1000, seqs[i]));
	}
	push(env(999, 100));
	push(env(1001, 0));
	struct dlq_envelope *e = pop();
	ck_assert_uint_eq(e->seq, 100);
	envelope__free(e);
	for(uint64_t want = 1; want <= 12; want++){
		e = pop();
		ck_assert_uint_eq(e->due_ms, 1000);
		ck_assert_uint_eq(e->seq, want);
		envelope__free(e);
	}
	e = pop();
	ck_assert_uint_eq(e->seq, 0);
	envelope__free(e);
	ck_assert_uint_eq(s.count, 0);
}
END_TEST

START_TEST(any_envelope_can_be_removed)
{
	enum { N = 50 };
	struct dlq_envelope *all[N];
	for(size_t i = 0; i < N; i++){
		all[i] = env((uint64_t)((i * 37) % N) * 10, i);
		push(all[i]);
	}
	/* The root, a leaf, the last slot, and some in between. */
	static const size_t order[] = {0, 49, 25, 1, 48, 13, 7, 30};
	bool gone[N] = {false};
	for(size_t k = 0; k < ARRAY_LEN(order); k++){
		struct dlq_envelope *e = all[order[k]];
		schedule__remove(&s, e);
		gone[order[k]] = true;
		envelope__free(e);
		check_heap();
	}
	/* The rest come out in order, and exactly the rest. */
	size_t left = 0;
	struct dlq_envelope *prev = NULL;
	while(s.count){
		struct dlq_envelope *e = pop();
		ck_assert(!gone[e->seq]);
		if(prev) ck_assert(before(prev, e));
		envelope__free(prev);
		prev = e;
		left++;
	}
	envelope__free(prev);
	ck_assert_uint_eq(left, N - ARRAY_LEN(order));
}
END_TEST

START_TEST(bytes_follow_the_envelopes)
{
	struct dlq_envelope *a = env(10, 1);
	struct dlq_envelope *b = env(20, 22222222);
	struct dlq_envelope *c = env(30, 3);
	ck_assert_uint_ne(a->bytes, b->bytes);
	push(a);
	ck_assert_uint_eq(s.bytes, a->bytes);
	push(b);
	push(c);
	ck_assert_uint_eq(s.bytes, a->bytes + b->bytes + c->bytes);
	schedule__remove(&s, b);
	ck_assert_uint_eq(s.bytes, a->bytes + c->bytes);
	envelope__free(b);
	struct dlq_envelope *first = pop();
	ck_assert_ptr_eq(first, a);
	ck_assert_uint_eq(s.bytes, c->bytes);
	envelope__free(first);
	/* What is left is freed by cleanup (ASan/valgrind would see a leak). */
	schedule__cleanup(&s);
	ck_assert_uint_eq(s.count, 0);
	ck_assert_uint_eq(s.bytes, 0);
	ck_assert_ptr_null(s.heap);
}
END_TEST

/* ---- randomised, against a sorted reference ---- */

/* Inserts e into the sorted reference of n envelopes. */
static void ref_insert(struct dlq_envelope **ref, size_t n, struct dlq_envelope *e)
{
	size_t lo = 0, hi = n;
	while(lo < hi){
		size_t mid = lo + (hi - lo) / 2;
		if(before(ref[mid], e)){
			lo = mid + 1;
		}else{
			hi = mid;
		}
	}
	memmove(ref + lo + 1, ref + lo, (n - lo) * sizeof(*ref));
	ref[lo] = e;
}

static uint64_t rng_state = 0x2545F4914F6CDD1DULL;

static uint64_t rnd(uint64_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state % n;
}

START_TEST(ten_thousand_random_operations_match_a_sorted_reference)
{
	enum { OPS = 10000, MAX = OPS };
	struct dlq_envelope **ref = malloc(MAX * sizeof(*ref)); /* live envelopes, sorted */
	ck_assert_ptr_nonnull(ref);
	size_t n = 0;
	uint64_t seq = 0, pushes = 0, pops = 0, removes = 0;

	for(int op = 0; op < OPS; op++){
		/* Pushes outnumber the rest, so the heap grows to about a
		 * thousand. */
		uint64_t what = rnd(20);
		if(n == 0 || what < 11){
			/* Few distinct due times, so ties are common. */
			struct dlq_envelope *e = env(rnd(200), seq++);
			if(schedule__push(&s, e)) ck_abort_msg("push failed");
			ref_insert(ref, n++, e);
			pushes++;
		}else if(what < 15){
			struct dlq_envelope *e = schedule__peek(&s);
			if(e != ref[0]) ck_abort_msg("operation %d: the first due is not the reference's", op);
			schedule__remove(&s, e);
			memmove(ref, ref + 1, (n - 1) * sizeof(*ref));
			n--;
			envelope__free(e);
			pops++;
		}else{
			size_t k = (size_t)rnd(n);
			struct dlq_envelope *e = ref[k];
			schedule__remove(&s, e);
			memmove(ref + k, ref + k + 1, (n - k - 1) * sizeof(*ref));
			n--;
			envelope__free(e);
			removes++;
		}
		if(s.count != n || schedule__peek(&s) != (n ? ref[0] : NULL)){
			ck_abort_msg("operation %d: %zu in the heap, %zu in the reference, or a different first", op, s.count, n);
		}
		check_heap();
	}
	check_heap();
	ck_assert_uint_gt(n, 500);
	/* Every kind of operation ran many times. */
	ck_assert_uint_gt(pushes, 4000);
	ck_assert_uint_gt(pops, 1500);
	ck_assert_uint_gt(removes, 1000);
	/* Draining gives the reference order exactly. */
	for(size_t i = 0; i < n; i++){
		struct dlq_envelope *e = pop();
		ck_assert_ptr_eq(e, ref[i]);
		envelope__free(e);
	}
	ck_assert_uint_eq(s.count, 0);
	ck_assert_uint_eq(s.bytes, 0);
	free(ref);
}
END_TEST

START_TEST(a_large_schedule_grows_and_drains_in_order)
{
	enum { N = 5000 };
	for(uint64_t i = 0; i < N; i++){
		push(env((i * 7919) % N, i));
	}
	ck_assert_uint_eq(s.count, N);
	check_heap();
	for(uint64_t want = 0; want < N; want++){
		struct dlq_envelope *e = pop();
		ck_assert_uint_eq(e->due_ms, want);
		envelope__free(e);
	}
}
END_TEST

/* ------------------------------------------------------------------ */

static void setup(void)
{
	schedule__init(&s);
}

static void teardown(void)
{
	schedule__cleanup(&s);
}

static Suite *schedule_suite(void)
{
	Suite *su = suite_create("schedule");
	TCase *tc = tcase_create("heap");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	check_add(su, tc, CHECK_TESTS(an_empty_schedule_has_nothing_due, envelopes_come_out_in_order_of_due_time,
			equal_due_times_keep_their_order_of_arrival, any_envelope_can_be_removed, bytes_follow_the_envelopes,
			ten_thousand_random_operations_match_a_sorted_reference, a_large_schedule_grows_and_drains_in_order));
	return su;
}

int main(void)
{
	return check_run(schedule_suite());
}
