/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of deadlines.c, the deliveries awaiting settlement within an
 * ack_timeout: the queues in the order clocks run out, whatever the mix of
 * durations and restarts; 2.1's rule (a clock per send) and 2.0's (one
 * delivery at a time per client, in the order routed, only while the
 * client is connected); the bytes and gauges they count in; the restore of
 * a state file.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "model/deadlines.h"
#include "model/gauges.h"
#include "model/ledger.h"
#include "model/policy.h"
#include "record_fixture.h"
#include "test_util.h"

static struct dlq_policy p30 = { .filter = "jobs/#", .max_attempts = 3, .ack_timeout_ms = 30000, .ack_timeout = "30s" };
static struct dlq_policy p5 = { .filter = "fast/#", .max_attempts = 3, .ack_timeout_ms = 5000, .ack_timeout = "5s" };

static struct dlq_ledger ledger;
static struct dlq_deadlines ds;
static unsigned made;

static void setup(enum dlq_deadline_mode mode)
{
	ck_assert_int_eq(ledger__init(&ledger), 0);
	deadlines__init(&ds, mode);
	ds.ledger = &ledger;
	made = 0;
}

static void teardown(void)
{
	deadlines__cleanup(&ds);
	ledger__cleanup(&ledger);
}

/* A record of policy p in the ledger. */
static struct dlq_record *rec(const struct dlq_policy *p)
{
	struct dlq_id id;
	memset(&id, 0, sizeof(id));
	id.raw[0] = (uint8_t)++made;
	id.raw[1] = (uint8_t)(made >> 8);
	struct dlq_record *r = record_fixture__make(0, .id = &id, .topic = "jobs/a", .payload = "x", .payload_len = 1,
			.policy = p, .attempt = 1, .qos = 1, .now_ms = 0);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(ledger__insert(&ledger, r), 0);
	return r;
}

/* What runs out by now, removed one by one as the engine settles them,
 * into out (at most n); returns how many. */
static size_t drain(uint64_t now, struct dlq_record **out, size_t n)
{
	size_t k = 0;
	struct dlq_deadline *e;
	while((e = deadlines__expired(&ds, now)) != NULL){
		ck_assert_uint_lt(k, n);
		out[k++] = e->record;
		deadlines__done(&ds, e, now);
	}
	return k;
}

/* Clocks of two durations started in a mixed order run out in the order
 * of their ends, and a clock started again (a resend, progress) moves to
 * the end of its queue. */
START_TEST(clocks_run_out_in_order_of_their_ends)
{
	setup(DLQ_DEADLINES_PER_SEND);
	struct dlq_record *a = rec(&p30), *b = rec(&p5), *c = rec(&p30), *e = rec(&p5);
	ck_assert_ptr_nonnull(deadlines__sent(&ds, a, "w", 1000));   /* ends 31000 */
	ck_assert_ptr_nonnull(deadlines__sent(&ds, b, "w", 2000));   /* ends 7000 */
	ck_assert_ptr_nonnull(deadlines__sent(&ds, c, "w", 3000));   /* ends 33000 */
	ck_assert_ptr_nonnull(deadlines__sent(&ds, e, "w", 4000));   /* ends 9000 */
	ck_assert_uint_eq(ds.running, 4);
	ck_assert_uint_eq(ds.queue_count, 2);
	ck_assert_uint_eq(deadlines__next_due(&ds), 7000);
	ck_assert_ptr_null(deadlines__expired(&ds, 6999));
	/* b reports progress at 6000: it now ends at 11000, after e. */
	deadlines__start(&ds, deadlines__find(&ds, b, "w"), 6000);
	struct dlq_record *out[8];
	ck_assert_uint_eq(drain(10000, out, 8), 1);
	ck_assert_ptr_eq(out[0], e);
	ck_assert_uint_eq(drain(32000, out, 8), 2);
	ck_assert_ptr_eq(out[0], b);
	ck_assert_ptr_eq(out[1], a);
	ck_assert_uint_eq(deadlines__next_due(&ds), 33000);
	ck_assert_uint_eq(drain(UINT64_MAX - 1, out, 8), 1);
	ck_assert_ptr_eq(out[0], c);
	ck_assert_uint_eq(ds.count, 0);
	ck_assert_uint_eq(ds.client_count, 0);
	ck_assert_uint_eq(deadlines__next_due(&ds), UINT64_MAX);
	teardown();
}
END_TEST

/* 2.1: a delivery per (record, client); a resend starts its clock again;
 * another client's is its own. The record is flagged while any exists, and
 * each counts its bytes in the ledger and in the awaiting gauge, given back
 * as they go. */
START_TEST(per_send_deliveries_count_and_leave)
{
	struct dlq_gauge_book book;
	struct dlq_policy_table t = {0};
	struct dlq_policy p;
	memset(&p, 0, sizeof(p));
	policy__set_defaults(&p);
	p.max_attempts = 3;
	p.ack_timeout_ms = 30000;
	p.filter = strdup("jobs/#");
	p.dead_letter = strdup("dead/jobs");
	p.ack_timeout = strdup("30s");
	ck_assert_int_eq(policy__table_add(&t, &p), 0);
	ck_assert_int_eq(policy__table_finish(&t, NULL, 0), 0);
	ck_assert_int_eq(gauges__init(&book, &t), 0);
	setup(DLQ_DEADLINES_PER_SEND);
	ds.book = &book;
	ledger.book = &book;
	struct dlq_record *r = rec(&t.items[0]);
	uint64_t bytes = ledger.bytes;
	ck_assert(!deadlines__of(r));
	struct dlq_deadline *w = deadlines__sent(&ds, r, "w", 100);
	ck_assert(deadlines__of(r));
	ck_assert_ptr_eq(deadlines__sent(&ds, r, "w", 200), w);
	ck_assert_uint_eq(w->due_ms, 30200);
	struct dlq_deadline *v = deadlines__sent(&ds, r, "v", 300);
	ck_assert_ptr_ne(v, w);
	ck_assert_uint_eq(ds.count, 2);
	ck_assert_uint_eq(ledger.bytes, bytes + 2 * DLQ_DEADLINE_BYTES);
	ck_assert_uint_eq(book.total.awaiting, 2);
	ck_assert_uint_eq(book.per[0].awaiting, 2);
	ck_assert_ptr_eq(deadlines__find(&ds, r, "v"), v);
	ck_assert_ptr_null(deadlines__find(&ds, r, "u"));
	/* Settled: the next of the client does not start (2.1 sends each). */
	ck_assert_ptr_null(deadlines__done(&ds, w, 400));
	ck_assert(deadlines__of(r));
	deadlines__record_gone(&ds, r);
	ck_assert(!deadlines__of(r));
	ck_assert_uint_eq(ds.count, 0);
	ck_assert_uint_eq(ledger.bytes, bytes);
	ck_assert_uint_eq(book.total.awaiting, 0);
	ck_assert_uint_eq(book.per[0].awaiting, 0);
	teardown();
	gauges__cleanup(&book);
	policy__table_free(&t);
}
END_TEST

/* 2.0: a client's deliveries in the order routed; only the first runs,
 * and only while the client is connected; the next starts when the first
 * is settled or runs out, and when the client comes back. */
START_TEST(sequential_one_at_a_time)
{
	setup(DLQ_DEADLINES_SEQUENTIAL);
	struct dlq_record *a = rec(&p30), *b = rec(&p30), *c = rec(&p30);
	struct dlq_deadline *ea, *eb, *ec;
	ck_assert_int_eq(deadlines__routed(&ds, a, "w", true, 1000, &ea), 0);
	ck_assert_int_eq(deadlines__routed(&ds, b, "w", true, 1000, &eb), 0);
	ck_assert_int_eq(deadlines__routed(&ds, c, "w", true, 1000, &ec), 0);
	ck_assert_ptr_nonnull(ea->queue);
	ck_assert_ptr_null(eb->queue);
	ck_assert_ptr_null(ec->queue);
	ck_assert_uint_eq(ds.running, 1);
	/* a settled at 5000: b's clock starts then, not when it was routed. */
	ck_assert_ptr_eq(deadlines__done(&ds, ea, 5000), eb);
	ck_assert_uint_eq(eb->due_ms, 35000);
	ck_assert_ptr_null(ec->queue);
	/* b runs out: c starts at once (the client is connected). */
	struct dlq_deadline *x = deadlines__expired(&ds, 35000);
	ck_assert_ptr_eq(x, eb);
	ck_assert_ptr_eq(deadlines__done(&ds, eb, 35000), ec);
	ck_assert_uint_eq(ec->due_ms, 65000);
	/* A late settlement of b: c was only now sent, its clock starts again. */
	ck_assert_ptr_eq(deadlines__late(&ds, "w", 50000), ec);
	ck_assert_uint_eq(ec->due_ms, 80000);
	/* An unknown client, or 2.1's rule: nothing. */
	ck_assert_ptr_null(deadlines__late(&ds, "nobody", 1));
	teardown();
}
END_TEST

static void count_started(void *ctx, const struct dlq_deadline *e)
{
	ck_assert_ptr_nonnull(e->queue);
	(*(size_t *)ctx)++;
}

/* 2.0: routed to a client not known to be connected (a session left
 * behind): nothing runs until it comes back; a running clock runs on when
 * it leaves, and what waits behind it starts only when it is back; a
 * client whose session ends gets every waiting clock started at once. */
START_TEST(sequential_offline_and_back)
{
	setup(DLQ_DEADLINES_SEQUENTIAL);
	struct dlq_record *a = rec(&p30), *b = rec(&p30), *c = rec(&p5);
	struct dlq_deadline *ea, *eb, *ec;
	ck_assert_int_eq(deadlines__routed(&ds, a, "w", false, 1000, &ea), 0);
	ck_assert_ptr_null(ea->queue);
	ck_assert_ptr_eq(deadlines__online(&ds, "w", 2000), ea);
	ck_assert_uint_eq(ea->due_ms, 32000);
	ck_assert_int_eq(deadlines__routed(&ds, b, "w", true, 3000, &eb), 0);
	ea->client->persists = true;
	ck_assert_ptr_null(deadlines__offline(&ds, "w", 11, false, 4000, NULL, NULL));
	ck_assert_ptr_nonnull(ea->queue); /* it was sent: its clock runs on */
	/* a runs out while w is away: b waits for w. */
	ck_assert_ptr_null(deadlines__done(&ds, ea, 32000));
	ck_assert_ptr_null(eb->queue);
	ck_assert_ptr_eq(deadlines__online(&ds, "w", 40000), eb);
	ck_assert_uint_eq(eb->due_ms, 70000);

	/* v's session ends with two waiting: both start. */
	struct dlq_deadline *v1, *v2;
	ck_assert_int_eq(deadlines__routed(&ds, c, "v", true, 1000, &v1), 0);
	ck_assert_int_eq(deadlines__routed(&ds, a, "v", true, 1000, &v2), 0);
	ck_assert_int_eq(deadlines__routed(&ds, b, "v", true, 1000, &ec), 0);
	ck_assert_ptr_null(v2->queue);
	size_t started = 0;
	ck_assert_ptr_null(deadlines__offline(&ds, "v", 12, true, 9000, count_started, &started));
	ck_assert(deadlines__gone(&ds, v1->client)); /* left without a session */
	ck_assert_uint_eq(started, 2);
	ck_assert_ptr_nonnull(v2->queue);
	ck_assert_ptr_nonnull(ec->queue);
	ck_assert_uint_eq(v2->due_ms, 39000);
	ck_assert_uint_eq(v1->due_ms, 6000); /* started when routed, runs on */
	/* Seen connected again (a clean reconnect that subscribed): not gone. */
	ck_assert_ptr_null(deadlines__online(&ds, "v", 9500)); /* its first clock runs already */
	ck_assert(!deadlines__gone(&ds, v1->client));
	teardown();
}
END_TEST

/* 2.0 reports the end of a connection once more as a new connection takes
 * over the session it left: the client is back, and what waits behind its
 * first delivery starts when that one is done. Only for the connection the
 * client left on, from a session it did not start clean; any sign of the
 * client connected ends its being gone. */
START_TEST(sequential_resume_is_seen_at_the_takeover)
{
	setup(DLQ_DEADLINES_SEQUENTIAL);
	struct dlq_record *a = rec(&p30), *b = rec(&p30);
	struct dlq_deadline *ea, *eb;
	ck_assert_int_eq(deadlines__routed(&ds, a, "w", true, 1000, &ea), 0);
	ea->client->persists = true;
	ck_assert_ptr_null(deadlines__offline(&ds, "w", 7, false, 2000, NULL, NULL));
	ck_assert(!ea->client->online);
	ck_assert(!deadlines__gone(&ds, ea->client)); /* its session lasts */
	/* Another connection's end is an end: it left on 8. */
	ck_assert_ptr_null(deadlines__offline(&ds, "w", 8, false, 2500, NULL, NULL));
	ck_assert(!ea->client->online);
	/* The takeover reports 8 again (forced clean by then): back. */
	ck_assert_ptr_null(deadlines__offline(&ds, "w", 8, true, 3000, NULL, NULL)); /* a's clock runs already */
	ck_assert(ea->client->online);
	/* a's clock runs on; b, routed to the session while nothing showed the
	 * client connected, starts when a runs out. */
	ck_assert_int_eq(deadlines__routed(&ds, b, "w", false, 4000, &eb), 0);
	ck_assert_ptr_null(eb->queue);
	ck_assert_ptr_eq(deadlines__done(&ds, ea, 31000), eb);
	ck_assert_uint_eq(eb->due_ms, 61000);
	deadlines__remove(&ds, eb);

	/* A clean session is not resumed: its second end is an end. */
	struct dlq_deadline *ec;
	ck_assert_int_eq(deadlines__routed(&ds, a, "c", true, 1000, &ec), 0);
	ck_assert_ptr_null(deadlines__offline(&ds, "c", 9, true, 2000, NULL, NULL));
	ck_assert(deadlines__gone(&ds, ec->client));
	ck_assert_ptr_null(deadlines__offline(&ds, "c", 9, true, 2100, NULL, NULL));
	ck_assert(!ec->client->online);
	ck_assert(deadlines__gone(&ds, ec->client));
	teardown();
}
END_TEST

/* Restored in the file's order, running ones in any order of their ends:
 * after deadlines__restored each queue runs out in order; a waiting one
 * stays waiting; a later entry for the same delivery replaces it. */
START_TEST(restore_sorts_the_queues)
{
	setup(DLQ_DEADLINES_SEQUENTIAL);
	struct dlq_record *r[6];
	uint64_t ends[6] = { 50, 10, 40, 20, 0, 30 };
	for(int i = 0; i < 6; i++){
		r[i] = rec(&p30);
		ck_assert_int_eq(deadlines__restore(&ds, r[i], i % 2 ? "a" : "b", ends[i]), 0);
	}
	ck_assert_int_eq(deadlines__restore(&ds, r[0], "b", 5), 0); /* replaces 50 */
	deadlines__restored(&ds);
	ck_assert_uint_eq(ds.count, 6);
	ck_assert_uint_eq(ds.running, 5);
	ck_assert_ptr_null(deadlines__find(&ds, r[4], "b")->queue);
	uint64_t last = 0;
	struct dlq_deadline *e;
	size_t n = 0;
	while((e = deadlines__expired(&ds, 1000)) != NULL){
		ck_assert_uint_ge(e->due_ms, last);
		last = e->due_ms;
		deadlines__remove(&ds, e);
		n++;
	}
	ck_assert_uint_eq(n, 5);
	ck_assert_uint_eq(last, 40);
	/* Client b's order is the file's: r0, r2, r4. */
	ck_assert_uint_eq(ds.count, 1);
	teardown();
}
END_TEST

/* Many clocks, one duration: the expired scan looks at the queue heads
 * only, and a thousand run out in start order. */
START_TEST(a_thousand_in_order)
{
	setup(DLQ_DEADLINES_PER_SEND);
	enum { N = 1000 };
	static struct dlq_record *rs[N];
	for(int i = 0; i < N; i++){
		rs[i] = rec(i % 2 ? &p30 : &p5);
		ck_assert_ptr_nonnull(deadlines__sent(&ds, rs[i], "w", (uint64_t)i));
	}
	uint64_t last = 0;
	struct dlq_deadline *e;
	size_t n = 0;
	while((e = deadlines__expired(&ds, UINT64_MAX - 1)) != NULL){
		ck_assert_uint_ge(e->due_ms, last);
		last = e->due_ms;
		deadlines__remove(&ds, e);
		n++;
	}
	ck_assert_uint_eq(n, N);
	ck_assert_uint_eq(ds.count, 0);
	ck_assert_uint_eq(ds.running, 0);
	teardown();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("deadlines");
	check_add(s, tcase_create("queues"), CHECK_TESTS(clocks_run_out_in_order_of_their_ends, a_thousand_in_order,
			restore_sorts_the_queues));
	check_add(s, tcase_create("rules"), CHECK_TESTS(per_send_deliveries_count_and_leave, sequential_one_at_a_time,
			sequential_offline_and_back, sequential_resume_is_seen_at_the_takeover));
	return check_run(s);
}
