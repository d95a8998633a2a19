/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of the engine's failed attempts (attempts.c): the chain of retry
 * copies that ends in a dead letter after max_attempts, retry_to, QoS, and the
 * delays between copies (backoff, its cap, jitter, a NACK's own delay), against
 * the fake broker port and the engine fixture of fixtures.h: the topic, target
 * client, QoS, payload and properties of every publish, and that nothing else
 * was published.
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
	char id[DLQ_ID_LEN + 1], id0[DLQ_ID_LEN + 1];
	struct dlq_nack_result res;
	start_tracking("devices/7/telemetry", "t=21", 0, id0);
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
	char id0[DLQ_ID_LEN + 1];
	struct dlq_nack_result res;
	start_tracking("once", "only", 0, id0);
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
	char id0[DLQ_ID_LEN + 1], id1[DLQ_ID_LEN + 1];
	start_tracking("numbers", "2", 2, id0);
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
	char id[DLQ_ID_LEN + 1];
	uint64_t t = start_with_a_delayed_copy("fixed/3", "f", 2, NULL, false, id);
	/* Its NACKer leaving changes nothing: the copy is for everyone. */
	dlq__client_gone(&d, "sub1");
	ck_assert_uint_eq(d.delayed.count, 1);
	expect_due_at(t + 2000, 0);
	expect_publish(0, NULL, "fixed/retry", 2, "f");
	expect_hdr(0, DLQ_PROP_ORIGIN_TOPIC, "fixed/3");
}
END_TEST

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

int main(void)
{
	return check_run(check_suite("attempts", check_fixture(tcase_create("attempts"), setup, teardown),
			CHECK_TESTS(a_delivery_chain_ends_in_a_dead_letter_after_max_attempts, a_fixed_chain_goes_through_retry_to,
			max_attempts_1_dead_letters_at_once, qos_2_is_kept_by_copies_and_dead_letters,
			a_topic_of_65535_bytes_goes_through_its_chain, a_delayed_copy_goes_out_when_due_and_not_before,
			backoff_doubles_the_delay_along_the_chain, retry_max_delay_caps_the_backoff,
			a_nack_may_ask_for_its_own_delay, jitter_draws_delays_within_its_bounds,
			an_untargeted_delayed_copy_goes_to_retry_to, delayed_copies_count_toward_the_bound)));
}
