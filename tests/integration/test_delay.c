/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Retry delays against the real broker: a policy's retry_delay, backoff and
 * its cap, jitter, a delay asked for by the NACK (JSON "delay", compact
 * "delay-ms") and its errors, first-nack-time, delays on a fixed retry
 * topic, and what happens to a held-back copy when its subscriber leaves
 * (with and without a session that persists).
 *
 * Delays are 1 to 5 s, not the minutes a real policy would use, to keep the
 * suite's run time modest; the behaviour does not depend on the length.
 * Timing bounds: see delay_checks.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "delay_checks.h"
#include "harness.h"
#include "test_util.h"

/* retry_delay=2s: the copy comes once, no earlier than 2 s after the NACK,
 * with retry-count 1 and first-nack-time; nothing comes before it. */
START_TEST(test_policy_delay)
{
	struct broker *b = dlq_broker("policy jobs max_attempts=3 dead_letter=dlq/jobs retry_delay=2s");
	struct client *w = client_subscribed(b, "worker", "jobs");
	struct client *watcher = client_subscribed(b, "watcher", "dlq/#");
	client_publish_str(watcher, "jobs", "job-1", 1);
	const char *id = expect_original(client_expect(w, "jobs", 1));

	struct nack_at at = nack_compact(w, id, NULL, NULL);
	/* Nothing yet a second later (the broker handled the NACK long ago). */
	it_sleep_ms(1000);
	client_sync(w);
	client_expect_exactly(w, "jobs", 1);

	const struct it_msg *copy = client_expect(w, "jobs", 2);
	expect_due(copy, &at, 2000, "retry_delay=2s");
	ck_assert_str_eq(copy->payload, "job-1");
	ck_assert_int_eq(copy->qos, 1);
	expect_retry_copy(copy, "jobs", id, 1);
	expect_first_nack_time(copy, &at);

	clients_expect_totals(w, 2, watcher, 0);
}
END_TEST

/* retry_delay=1s retry_backoff=2 retry_max_delay=3s: the copies after
 * deliveries 1, 2 and 3 wait 1 s, 2 s and 3 s (4 s capped), as the replies'
 * delayMs say; every copy of the chain carries the first NACK's time; the
 * last NACK dead-letters at once. */
START_TEST(test_backoff_and_cap)
{
	struct broker *b = dlq_broker(
			"policy jobs max_attempts=4 dead_letter=dlq/jobs retry_delay=1s retry_backoff=2 retry_max_delay=3s");
	struct client *w = client_subscribed(b, "worker", "jobs");
	struct client *watcher = client_subscribed(b, "watcher", "dlq/#");
	client_publish_str(watcher, "jobs", "job-2", 1);
	char origin[32], cur[32], first_nack[64] = "";
	keep(origin, sizeof(origin), expect_original(client_expect(w, "jobs", 1)));
	keep(cur, sizeof(cur), origin);

	const long want[] = { 1000, 2000, 3000 };
	struct nack_at first = {0};
	for(int n = 1; n <= 3; n++){
		struct nack_at at = nack_json(w, cur, NULL);
		if(n == 1){
			first = at;
		}
		long delay = expect_ok_reply(w, DLQ_RESPONSE_TOPIC, (size_t)n, cur, "retried", n, 4);
		ck_assert_msg(delay == want[n - 1], "NACK of delivery %d: delayMs %ld, expected %ld", n, delay, want[n - 1]);
		const struct it_msg *copy = client_expect(w, "jobs", (size_t)n + 1);
		char what[64];
		snprintf(what, sizeof(what), "backoff, copy after delivery %d", n);
		expect_due(copy, &at, (uint64_t)want[n - 1], what);
		ck_assert_str_eq(copy->payload, "job-2");
		keep(cur, sizeof(cur), expect_retry_copy(copy, "jobs", origin, (unsigned)n));
		/* The chain's first NACK, on every copy. */
		expect_first_nack_time(copy, &first);
		if(n == 1){
			keep(first_nack, sizeof(first_nack), msg_user(copy, DLQ_PROP_FIRST_NACK_TIME));
		}else{
			ck_assert_str_eq(msg_user(copy, DLQ_PROP_FIRST_NACK_TIME), first_nack);
		}
	}

	/* Delivery 4 is the last: a dead letter, not delayed. */
	struct nack_at at = nack_json(w, cur, NULL);
	ck_assert_int_eq(expect_ok_reply(w, DLQ_RESPONSE_TOPIC, 4, cur, "dead-lettered", 4, 4), -1);
	const struct it_msg *dl = client_expect(watcher, "dlq/jobs", 1);
	ck_assert_msg(dl->at_ms < at.acked + 1000, "the dead letter took %llu ms", (unsigned long long)(dl->at_ms - at.sent));
	ck_assert_str_eq(dl->payload, "job-2");
	expect_dead_letter(dl, "jobs", origin, 4, client_id(w), "jobs", NULL);

	clients_settle(w, watcher);
	client_expect_exactly(w, "jobs", 4);
	client_expect_exactly(w, DLQ_RESPONSE_TOPIC, 4);
	client_expect_exactly(watcher, NULL, 1);
}
END_TEST

/* retry_jitter=0.5 on retry_delay=2s: each delay lies in [1 s, 2 s], as the
 * reply says, and the copy honours the delay it was given. */
START_TEST(test_jitter)
{
	struct broker *b = dlq_broker("policy jobs max_attempts=3 dead_letter=dlq/jobs retry_delay=2s retry_jitter=0.5");
	struct client *w = client_subscribed(b, "worker", "jobs");
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	enum { N = 4 };
	char ids[N][32];
	const char *payloads[N] = { "j0", "j1", "j2", "j3" };
	for(int i = 0; i < N; i++){
		client_publish_str(pub, "jobs", payloads[i], 1);
		keep(ids[i], sizeof(ids[i]), expect_original(client_expect(w, "jobs", (size_t)i + 1)));
	}
	struct nack_at at[N];
	long delay[N];
	for(int i = 0; i < N; i++){
		at[i] = nack_json(w, ids[i], NULL);
		delay[i] = expect_ok_reply(w, DLQ_RESPONSE_TOPIC, (size_t)i + 1, ids[i], "retried", 1, 3);
		ck_assert_msg(delay[i] >= 1000 && delay[i] <= 2000, "jittered delayMs %ld outside [1000, 2000]", delay[i]);
	}
	client_expect(w, "jobs", 2 * N);
	bool differ = false;
	for(int i = 0; i < N; i++){
		const struct it_msg *copy = client_find_payload(w, "jobs", payloads[i], 1);
		ck_assert_ptr_nonnull(copy);
		expect_retry_copy(copy, "jobs", ids[i], 1);
		char what[64];
		snprintf(what, sizeof(what), "jitter, %s", payloads[i]);
		expect_due(copy, &at[i], (uint64_t)delay[i], what);
		differ |= delay[i] != delay[0];
	}
	/* Four draws from a 1000 ms range are all equal with odds of 1e-9. */
	ck_assert_msg(differ, "four jittered delays were all %ld ms", delay[0]);
	clients_settle(w, pub);
	client_expect_exactly(w, "jobs", 2 * N);
}
END_TEST

/* A JSON NACK's "delay" replaces the policy's: 1s instead of 5s, 0s for at
 * once; above retry_max_delay it is capped. */
START_TEST(test_json_delay_overrides_policy)
{
	struct broker *b = dlq_broker(
			"policy slow max_attempts=3 dead_letter=dlq/slow retry_delay=5s",
			"policy capped max_attempts=3 dead_letter=dlq/capped retry_delay=1s retry_max_delay=2s");
	struct client *w = client_subscribed(b, "worker", "slow");
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	client_subscribe(w, "capped", 1);
	client_publish_str(pub, "slow", "s1", 1);
	client_publish_str(pub, "slow", "s0", 1);
	client_publish_str(pub, "capped", "c10", 1);
	char s1[32], s0[32], c10[32];
	keep(s1, sizeof(s1), expect_original(client_expect(w, "slow", 1)));
	keep(s0, sizeof(s0), expect_original(client_expect(w, "slow", 2)));
	keep(c10, sizeof(c10), expect_original(client_expect(w, "capped", 1)));

	struct nack_at at1 = nack_json(w, s1, "\"1s\"");
	ck_assert_int_eq(expect_ok_reply(w, DLQ_RESPONSE_TOPIC, 1, s1, "retried", 1, 3), 1000);
	struct nack_at at0 = nack_json(w, s0, "\"0s\"");
	ck_assert_int_eq(expect_ok_reply(w, DLQ_RESPONSE_TOPIC, 2, s0, "retried", 1, 3), 0);
	struct nack_at at10 = nack_json(w, c10, "\"10s\"");
	ck_assert_int_eq(expect_ok_reply(w, DLQ_RESPONSE_TOPIC, 3, c10, "retried", 1, 3), 2000);

	/* "0s": at once, long before the policy's 5 s. */
	const struct it_msg *m0 = client_expect(w, "slow", 3);
	ck_assert_str_eq(m0->payload, "s0");
	expect_retry_copy(m0, "slow", s0, 1);
	expect_due(m0, &at0, 0, "JSON delay 0s");

	/* "1s": due after 1 s, and so arrives before 1 s + 2 s < 5 s. */
	const struct it_msg *m1 = client_expect(w, "slow", 4);
	ck_assert_str_eq(m1->payload, "s1");
	expect_retry_copy(m1, "slow", s1, 1);
	expect_first_nack_time(m1, &at1);
	expect_due(m1, &at1, 1000, "JSON delay 1s over policy 5s");

	/* "10s" capped at retry_max_delay=2s. */
	const struct it_msg *m10 = client_expect(w, "capped", 2);
	ck_assert_str_eq(m10->payload, "c10");
	expect_retry_copy(m10, "capped", c10, 1);
	expect_first_nack_time(m10, &at10);
	expect_due(m10, &at10, 2000, "JSON delay 10s capped at 2s");

	clients_settle(w, pub);
	client_expect_exactly(w, "slow", 4);
	client_expect_exactly(w, "capped", 2);
	client_expect_exactly(w, DLQ_RESPONSE_TOPIC, 3);
	client_expect_exactly(w, NULL, 9);
}
END_TEST

/* The compact form's "delay-ms" user property: 1500 instead of the policy's
 * 4 s (reply delayMs 1500 on the request's response topic), and a value
 * above retry_max_delay capped at it. */
START_TEST(test_compact_delay_ms)
{
	struct broker *b = dlq_broker("policy jobs max_attempts=3 dead_letter=dlq/jobs retry_delay=4s retry_max_delay=4s");
	struct client *w = client_subscribed(b, "worker", "jobs");
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	client_publish_str(pub, "jobs", "short", 1);
	client_publish_str(pub, "jobs", "long", 1);
	char a[32], c[32];
	keep(a, sizeof(a), expect_original(client_expect(w, "jobs", 1)));
	keep(c, sizeof(c), expect_original(client_expect(w, "jobs", 2)));

	struct nack_at at_a = nack_compact(w, a, "1500", "replies/worker");
	ck_assert_int_eq(expect_ok_reply(w, "replies/worker", 1, a, "retried", 1, 3), 1500);
	struct nack_at at_c = nack_compact(w, c, "600000", "replies/worker");
	ck_assert_int_eq(expect_ok_reply(w, "replies/worker", 2, c, "retried", 1, 3), 4000);

	const struct it_msg *ma = client_expect(w, "jobs", 3);
	ck_assert_str_eq(ma->payload, "short");
	expect_retry_copy(ma, "jobs", a, 1);
	expect_first_nack_time(ma, &at_a);
	/* Due after 1.5 s, so before 3.5 s < 4 s: the policy's delay was not used. */
	expect_due(ma, &at_a, 1500, "delay-ms 1500 over policy 4s");

	const struct it_msg *mc = client_expect(w, "jobs", 4);
	ck_assert_str_eq(mc->payload, "long");
	expect_retry_copy(mc, "jobs", c, 1);
	expect_first_nack_time(mc, &at_c);
	expect_due(mc, &at_c, 4000, "delay-ms 600000 capped at 4s");

	clients_settle(w, pub);
	client_expect_exactly(w, "jobs", 4);
	client_expect_exactly(w, "replies/worker", 2);
	client_expect_exactly(w, DLQ_RESPONSE_TOPIC, 0);
}
END_TEST

/* A broker with policy (one plugin option line), a worker subscribed to
 * "jobs" and a publisher, which publishes payload: the worker's original
 * delivery's dlq-id in id. */
static void one_job(const char *policy, const char *payload, struct client **w, struct client **pub, char id[32])
{
	struct broker *b = dlq_broker(policy);
	*w = client_new(b, "worker", MQTT_PROTOCOL_V5);
	*pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	client_subscribe(*w, "jobs", 1);
	client_publish_str(*pub, "jobs", payload, 1);
	keep(id, 32, expect_original(client_expect(*w, "jobs", 1)));
}

/* A malformed delay gets an error reply and changes nothing: no copy, and
 * the same delivery can still be NACKed properly. */
START_TEST(test_bad_delays_refused)
{
	struct client *w, *pub;
	char id[32];
	one_job("policy jobs max_attempts=3 dead_letter=dlq/jobs", "job-3", &w, &pub, id);

	const char *bad_ms[] = { "abc", "-5", "1.5", "", " 100", "100 ", "1e3", "+100", "100ms",
		"99999999999999999999999" };
	size_t replies = 0;
	for(size_t i = 0; i < ARRAY_LEN(bad_ms); i++){
		nack_compact(w, id, bad_ms[i], NULL);
		expect_error_reply(w, DLQ_RESPONSE_TOPIC, ++replies, "\"" DLQ_PROP_NACK_DELAY_MS "\" must be a whole number");
	}
	const char *bad_json[] = { "\"5\"", "5", "\"-1s\"", "\"1x\"", "\"\"", "true", "{}", "\"1.5s\"" };
	for(size_t i = 0; i < ARRAY_LEN(bad_json); i++){
		nack_json(w, id, bad_json[i]);
		expect_error_reply(w, DLQ_RESPONSE_TOPIC, ++replies, "\"delay\" must be a duration with its unit");
	}
	clients_settle(w, pub);
	client_expect_exactly(w, "jobs", 1);
	client_expect_exactly(w, DLQ_RESPONSE_TOPIC, replies);

	/* Nothing was recorded: the delivery is still NACKable, once. */
	struct nack_at at = nack_compact(w, id, "1000", NULL);
	const struct it_msg *copy = client_expect(w, "jobs", 2);
	expect_retry_copy(copy, "jobs", id, 1);
	expect_due(copy, &at, 1000, "delay-ms 1000 after refused ones");
	clients_settle(w, pub);
	client_expect_exactly(w, "jobs", 2);
	client_expect_exactly(w, DLQ_RESPONSE_TOPIC, replies);
	client_expect_exactly(w, NULL, 2 + replies);
}
END_TEST

/* A compact NACK's user properties are read whole (issue 45): "delay-ms"
 * of 34 characters, "0…05000", is 5000 ms (it was cut to 31 characters and
 * answered with delayMs 5); one that a 33rd character makes no number is
 * refused (cut, it read as 500); a "final" of "true" and more is refused. */
START_TEST(test_long_nack_properties_read_whole)
{
	struct client *w, *pub;
	char id[32];
	one_job("policy jobs max_attempts=3 dead_letter=dlq/jobs retry_max_delay=60s", "job-long", &w, &pub, id);

	nack_compact(w, id, "00000000000000000000000000005000x", NULL);
	expect_error_reply(w, DLQ_RESPONSE_TOPIC, 1, "\"" DLQ_PROP_NACK_DELAY_MS "\" must be a whole number");
	mosquitto_property *p = NULL;
	ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, DLQ_PROP_NACK_FINAL,
			"true, and whatever follows it"), 0);
	ck_assert_int_lt(client_publish(w, DLQ_NACK_TOPIC, id, (int)strlen(id), 1, p), 0x80);
	mosquitto_property_free_all(&p);
	expect_error_reply(w, DLQ_RESPONSE_TOPIC, 2, "\"" DLQ_PROP_NACK_FINAL "\" must be \"true\" or \"false\"");

	const char *long_ms = "0000000000000000000000000000005000";
	ck_assert_uint_eq(strlen(long_ms), 34);
	struct nack_at at = nack_compact(w, id, long_ms, "replies/worker");
	ck_assert_int_eq(expect_ok_reply(w, "replies/worker", 1, id, "retried", 1, 3), 5000);
	const struct it_msg *copy = client_expect(w, "jobs", 2);
	expect_retry_copy(copy, "jobs", id, 1);
	/* Not before its 5 s (cut, it was due after 5 ms). */
	ck_assert_uint_ge(copy->at_ms + EARLY_SLACK_MS, at.sent + 5000);
	clients_settle(w, pub);
	client_expect_exactly(w, "jobs", 2);
	client_expect_exactly(w, "replies/worker", 1);
	client_expect_exactly(w, DLQ_RESPONSE_TOPIC, 2);
}
END_TEST

/* A worker with a session (expiry_s: its session expiry interval) that
 * takes payload on "jobs", NACKs it and leaves, while a watcher reads
 * dlq/#: what the tests of a held-back copy's subscriber leaving start
 * from. */
struct left_worker {
	struct client *watcher;
	char id[32];
	struct nack_at at;
};

static struct left_worker nack_and_leave(struct broker *b, const char *worker, int expiry_s, const char *payload)
{
	struct left_worker lw;
	struct client *w = client_new_session(b, worker, MQTT_PROTOCOL_V5, expiry_s);
	lw.watcher = client_new(b, "watcher", MQTT_PROTOCOL_V5);
	client_subscribe(w, "jobs", 1);
	client_subscribe(lw.watcher, "dlq/#", 1);
	client_publish_str(lw.watcher, "jobs", payload, 1);
	keep(lw.id, sizeof(lw.id), expect_original(client_expect(w, "jobs", 1)));
	lw.at = nack_compact(w, lw.id, NULL, NULL);
	client_free(w);
	return lw;
}

/* The worker of nack_and_leave comes back (its session present or not, as
 * said); its copy (due delay_ms after the NACK) was dead-lettered when it
 * left, so nothing more comes for anyone. */
static void back_to_nothing(struct broker *b, const struct left_worker *lw, const char *worker, int expiry_s,
		bool session_present, int delay_ms)
{
	const struct it_msg *dl = client_expect(lw->watcher, "dlq/jobs", 1);
	ck_assert_msg(dl->at_ms < lw->at.sent + (uint64_t)delay_ms, "the dead letter came only when the copy was due");
	char reason[256];
	snprintf(reason, sizeof(reason), "subscriber \"%s\" left without a session before its retry copy was delivered",
			worker);
	expect_dead_letter(dl, "jobs", lw->id, 1, worker, "jobs", reason);

	struct client *w = client_new_session(b, worker, MQTT_PROTOCOL_V5, expiry_s);
	ck_assert_msg(client_session_present(w) == session_present, "the broker %s %s's session",
			session_present ? "did not resume" : "kept", worker);
	sleep_until(lw->at.sent + (uint64_t)delay_ms + 500);
	clients_settle(w, lw->watcher);
	client_expect_exactly(w, NULL, 0);
	client_expect_exactly(lw->watcher, NULL, 1);
}

/* A subscriber whose session ends with its connection leaves while its
 * copy is held back: the message becomes a dead letter at once, not when
 * the copy would have been due, and nothing else is published for it. */
START_TEST(test_clean_subscriber_leaves_while_delayed)
{
	struct broker *b = dlq_broker("policy jobs max_attempts=3 dead_letter=dlq/jobs retry_delay=4s");
	struct client *w = client_subscribed(b, "worker", "jobs");
	struct client *other = client_subscribed(b, "other", "jobs");
	struct client *watcher = client_subscribed(b, "watcher", "dlq/#");
	client_publish_str(watcher, "jobs", "job-4", 1);
	char id[32], wid[128], reason[256];
	keep(id, sizeof(id), expect_original(client_expect(w, "jobs", 1)));
	keep(wid, sizeof(wid), client_id(w));
	snprintf(reason, sizeof(reason), "subscriber \"%s\" left without a session before its retry copy was delivered", wid);

	struct nack_at at = nack_compact(w, id, NULL, NULL);
	it_sleep_ms(300);
	uint64_t left = it_now_ms();
	client_free(w);

	const struct it_msg *dl = client_expect(watcher, "dlq/jobs", 1);
	fprintf(stderr, "lateness: dead letter of a left subscriber: %llu ms after it disconnected\n",
			(unsigned long long)(dl->at_ms - left));
	ck_assert_msg(dl->at_ms < left + LATE_LIMIT_MS && dl->at_ms < at.sent + 4000,
			"the dead letter came %llu ms after the subscriber left (its copy was due %llu ms after it left)",
			(unsigned long long)(dl->at_ms - left), (unsigned long long)(at.sent + 4000 - left));
	ck_assert_str_eq(dl->payload, "job-4");
	expect_dead_letter(dl, "jobs", id, 1, wid, "jobs", reason);

	/* Past the copy's due time: nothing more, for anyone. */
	sleep_until(at.sent + 4000 + 500);
	clients_expect_totals(watcher, 1, other, 1);
}
END_TEST

/* A v5 subscriber with clean_start=false and a session expiry interval,
 * while plugin_opt_v5_sessions_persist is not set. 2.0: the plugin cannot
 * see the expiry, so it counts the session as ending with the connection
 * and dead-letters the held-back copy when the client leaves; when the
 * client comes back the copy does not come (docs/memory-and-limits.md, Limits). 2.1: the
 * broker says the session lasts (CLIENT_OFFLINE), so the copy waits for it
 * and comes once when the client is back, with no dead letter. */
START_TEST(test_v5_session_without_option_counts_as_clean)
{
	struct broker *b = dlq_broker("policy jobs max_attempts=3 dead_letter=dlq/jobs retry_delay=2s");
	struct left_worker lw = nack_and_leave(b, "w5", 300, "job-5");

	if(BROKER_IS_21()){
		it_sleep_ms(500);
		struct client *w = client_new_session(b, "w5", MQTT_PROTOCOL_V5, 300);
		ck_assert_msg(client_session_present(w), "the broker did not resume w5's session");
		const struct it_msg *copy = client_expect(w, "jobs", 1);
		expect_due(copy, &lw.at, 2000, "2.1: a lasting session's copy");
		expect_retry_copy(copy, "jobs", lw.id, 1);
		clients_settle(w, lw.watcher);
		client_expect_exactly(w, NULL, 1);
		client_expect_exactly(lw.watcher, NULL, 0);
		return;
	}
	back_to_nothing(b, &lw, "w5", 300, true, 2000);
}
END_TEST

/* A v5 worker with clean_start=false and no session expiry interval (0):
 * its session ends with its connection, on every broker line (2.1 sends
 * DISCONNECT, not CLIENT_OFFLINE), so its held-back copy is dead-lettered
 * when it leaves, and nothing comes when it is back. */
START_TEST(test_v5_session_without_expiry_dead_letters)
{
	struct broker *b = dlq_broker("policy jobs max_attempts=3 dead_letter=dlq/jobs retry_delay=2s");
	struct left_worker lw = nack_and_leave(b, "w0", 0, "job-0");
	back_to_nothing(b, &lw, "w0", 0, false, 2000);
}
END_TEST

/* With plugin_opt_v5_sessions_persist true, a subscriber with a persistent
 * session that leaves and comes back before its copy is due gets the copy
 * once, when due, and no dead letter is made. On 2.1 one startup notice
 * says the option is not needed (2.0 logs none). */
START_TEST(test_persistent_subscriber_back_before_due)
{
	struct broker *b = dlq_broker("v5_sessions_persist true",
			"policy jobs max_attempts=3 dead_letter=dlq/jobs retry_delay=3s");
	char *log = broker_log(b);
	const char *notice = "dlq: plugin_opt_v5_sessions_persist is not needed on Mosquitto 2.1 and is not used";
	const char *seen = strstr(log, notice);
	bool twice = seen && strstr(seen + 1, notice);
	ck_assert_msg(BROKER_IS_21() ? seen != NULL && !twice : seen == NULL, "the notice that the option is not needed: %s",
			seen ? (twice ? "logged twice" : "logged") : "not logged");
	free(log);
	struct left_worker lw = nack_and_leave(b, "wp", 300, "job-6");
	struct client *watcher = lw.watcher;
	const char *id = lw.id;
	struct nack_at at = lw.at;
	it_sleep_ms(500);
	struct client *w = client_new_session(b, "wp", MQTT_PROTOCOL_V5, 300);
	ck_assert_msg(client_session_present(w), "the broker did not resume wp's session");

	const struct it_msg *copy = client_expect(w, "jobs", 1);
	expect_due(copy, &at, 3000, "persistent subscriber back before due");
	ck_assert_str_eq(copy->payload, "job-6");
	expect_retry_copy(copy, "jobs", id, 1);
	expect_first_nack_time(copy, &at);

	clients_expect_totals(w, 1, watcher, 0);
}
END_TEST

/* The same, but the subscriber is away when the copy falls due: the broker
 * keeps it in the session and delivers it, once, on its return. */
START_TEST(test_persistent_subscriber_away_at_due)
{
	struct broker *b = dlq_broker("v5_sessions_persist true",
			"policy jobs max_attempts=3 dead_letter=dlq/jobs retry_delay=1s");
	struct left_worker lw = nack_and_leave(b, "wa", 300, "job-7");
	struct client *watcher = lw.watcher;
	const char *id = lw.id;
	struct nack_at at = lw.at;
	sleep_until(at.sent + 1000 + 1000);
	clients_settle(watcher);
	client_expect_exactly(watcher, NULL, 0);

	struct client *w = client_new_session(b, "wa", MQTT_PROTOCOL_V5, 300);
	ck_assert_msg(client_session_present(w), "the broker did not resume wa's session");
	const struct it_msg *copy = client_expect(w, "jobs", 1);
	ck_assert_msg(copy->at_ms >= at.sent + 1000, "copy before due");
	ck_assert_str_eq(copy->payload, "job-7");
	expect_retry_copy(copy, "jobs", id, 1);
	expect_first_nack_time(copy, &at);

	clients_expect_totals(w, 1, watcher, 0);
}
END_TEST

/* A fixed retry topic with a delay: every subscriber of it gets the copy
 * once, when due; the NACKing client leaving does not matter (the copy is
 * not addressed to it), and the copy can be NACKed in turn. */
START_TEST(test_fixed_retry_topic_delay)
{
	struct broker *b = dlq_broker(
			"policy tasks max_attempts=2 dead_letter=dlq/tasks retry_to=tasks/retry retry_delay=2s");
	struct client *nacker = client_subscribed(b, "nacker", "tasks");
	struct client *a = client_subscribed(b, "a", "tasks/retry");
	struct client *c = client_subscribed(b, "c", "tasks/retry");
	struct client *watcher = client_subscribed(b, "watcher", "dlq/#");
	client_publish_str(watcher, "tasks", "task-8", 1);
	char id[32];
	keep(id, sizeof(id), expect_original(client_expect(nacker, "tasks", 1)));
	struct nack_at at = nack_compact(nacker, id, NULL, NULL);
	client_free(nacker);

	const struct it_msg *ca = client_expect(a, "tasks/retry", 1);
	const struct it_msg *cc = client_expect(c, "tasks/retry", 1);
	expect_due(ca, &at, 2000, "fixed retry topic, subscriber a");
	expect_due(cc, &at, 2000, "fixed retry topic, subscriber c");
	ck_assert_str_eq(ca->payload, "task-8");
	char copy_id[32];
	keep(copy_id, sizeof(copy_id), expect_retry_copy(ca, "tasks", id, 1));
	ck_assert_str_eq(expect_retry_copy(cc, "tasks", id, 1), copy_id);
	expect_first_nack_time(ca, &at);
	expect_first_nack_time(cc, &at);

	/* Attempt 2 of 2: a dead letter at once. */
	client_nack(c, copy_id, "task-8 is broken");
	const struct it_msg *dl = client_expect(watcher, "dlq/tasks", 1);
	expect_dead_letter(dl, "tasks", id, 2, client_id(c), "tasks", "task-8 is broken");

	clients_settle(a, c, watcher);
	client_expect_exactly(a, NULL, 1);
	client_expect_exactly(c, NULL, 1);
	client_expect_exactly(watcher, "dlq/#", 1);
}
END_TEST

int main(void)
{
	return harness_run(check_suite("delay", check_timeout(harness_tcase("delay"), 180), CHECK_TESTS(test_policy_delay,
			test_backoff_and_cap, test_jitter, test_json_delay_overrides_policy, test_compact_delay_ms,
			test_bad_delays_refused, test_long_nack_properties_read_whole, test_clean_subscriber_leaves_while_delayed,
			test_v5_session_without_option_counts_as_clean, test_v5_session_without_expiry_dead_letters,
			test_persistent_subscriber_back_before_due, test_persistent_subscriber_away_at_due,
			test_fixed_retry_topic_delay)));
}
