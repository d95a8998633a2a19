/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of settle.c and attempts.c, the settlement of deliveries
 * besides a NACK: ACKs, progress reports, final NACKs, and a policy's
 * ack_timeout running out, which is a failed attempt exactly as a NACK of
 * it (a retry copy, or at the last attempt the dead letter, its reason
 * naming the subscriber and the deadline). On Mosquitto 2.1's rule (a
 * clock per send, dlq__sent) and 2.0's (the deliveries routed to a
 * subscriber, one at a time, from redelivery tracking's READ checks); the
 * replies of late and repeated settlements; the record that outlives its
 * NACK window while a delivery of it is awaited; deadlines across a
 * restart, with and without the journal. Against the fake broker port and
 * its clocks.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_suite.h"
#include "config/config.h"
#include "engine/dlq.h"
#include "engine/recount.h"
#include "engine_calls.h"
#include "fake_port.h"
#include "mosquitto_dlq.h"
#include "test_util.h"

static struct dlq d;
static bool live;
static char dir[64];
static char state_path[128];

enum { POOL = 0, ONCE = 1, PLAIN = 2, TARGETED = 3 };

static const struct dlq_option standard[] = {
	{"policy", "jobs/# max_attempts=3 dead_letter=dead/jobs retry_to=jobs/retry ack_timeout=30s"},
	{"policy", "once/# max_attempts=1 dead_letter=dead/once ack_timeout=2s"},
	{"policy", "plain/# max_attempts=3 dead_letter=dead/plain"},
	{"policy", "mine/# max_attempts=3 dead_letter=dead/mine ack_timeout=10s"},
};

/* Starts with the standard policies, 2.1's rule (exact: a clock per send)
 * or 2.0's (redelivery tracking allow), and the extra options. */
static void start_extra(bool exact, const struct dlq_option *extra, size_t n_extra)
{
	struct dlq_option opts[16];
	size_t n = 0;
	for(size_t i = 0; i < ARRAY_LEN(standard); i++) opts[n++] = standard[i];
	opts[n++] = (struct dlq_option){"redelivery_tracking", "allow"};
	for(size_t i = 0; i < n_extra; i++) opts[n++] = extra[i];
	engine_start(&d, &live, opts, n, ENGINE_NO_SYS | ENGINE_BROKER_PERSISTENCE | (exact ? ENGINE_EXACT_COUNTING : 0));
}

static void start(bool exact)
{
	fake_reset();
	fake.now_ms = 1000;
	fake.wall_ms = 1700000000000;
	start_extra(exact, NULL, 0);
}

static void stop(void)
{
	engine_stop(&d, &live);
	fake_reset();
}

static void publish(const char *topic, const char *payload, char id[DLQ_ID_LEN + 1])
{
	engine_track(&d, topic, payload, 1, NULL, id);
}

/* 2.1: the broker writes the message with id to client (v5), as
 * MESSAGE_OUT shows it; its deadline starts. */
static void sent(const char *client, const char *id, const char *topic, const char *payload)
{
	struct dlq_send s;
	dlq__sent(&d, client, 0, id, strlen(id), topic, payload, (uint32_t)strlen(payload), &s);
	ck_assert_uint_gt(s.attempt, 0);
	if(s.policy->ack_timeout_ms) dlq__deadline_sent(&d, &s, client, true);
}

/* 2.0: a READ check of the message to client on conn (settles: MQTT v5). */
static bool routed(const char *client, uintptr_t conn, const char *topic, const char *payload, bool settles)
{
	struct dlq_read_check c = {
		.client = client, .conn = conn, .topic = topic,
		.payload = payload, .payload_len = (uint32_t)strlen(payload), .qos = 1,
		.settles = settles, .persists = true,
	};
	return dlq__read_check(&d, &c);
}

static struct dlq_nack_result settle(enum dlq_settle_kind kind, const char *id, const char *client)
{
	struct dlq_settle s = {.kind = kind, .id = id, .id_len = strlen(id), .client = client};
	struct dlq_nack_result res;
	dlq__settle(&d, &s, &res);
	return res;
}

static enum dlq_nack_status ack(const char *id, const char *client)
{
	return settle(DLQ_SETTLE_ACK, id, client).status;
}

static enum dlq_nack_status nack(const char *id, const char *client, bool final)
{
	struct dlq_nack n = {.id = id, .id_len = strlen(id), .client = client, .client_persists = true,
		.client_settles = true, .final = final};
	struct dlq_nack_result res;
	dlq__nack(&d, &n, &res);
	return res.status;
}

/* Moves the clocks to at (ms since the start) and ticks. */
static void tick_at(uint64_t at)
{
	fake.wall_ms += (int64_t)(at - fake.now_ms);
	fake.now_ms = at;
	dlq__tick(&d);
}

static size_t published_to(const char *topic)
{
	size_t n = 0;
	for(size_t i = 0; i < fake.publish_count; i++){
		if(!strcmp(fake.publishes[i].topic, topic)) n++;
	}
	return n;
}

static const struct fake_publish *last_to(const char *topic)
{
	for(size_t i = fake.publish_count; i-- > 0; ){
		if(!strcmp(fake.publishes[i].topic, topic)) return &fake.publishes[i];
	}
	ck_abort_msg("nothing published to %s", topic);
	return NULL;
}

/* The running gauges agree with a recount. */
static void expect_gauges(void)
{
	struct dlq_gauges total;
	recount__gauges(&d, NULL, &total);
	ck_assert_uint_eq(total.awaiting, d.gauges.total.awaiting);
	ck_assert_uint_eq(total.awaiting, d.deadlines.count);
	ck_assert_uint_eq(total.ledger_bytes, d.ledger.bytes);
}

/* 2.1: a delivery not settled within ack_timeout of its send is a failed
 * attempt: at 30 s and not before, a retry copy to the policy's retry
 * topic (retry-count 1), counted; the hung client's late ACK and late NACK
 * are refused, saying so, and change nothing. */
START_TEST(a_hung_delivery_is_retried_at_its_deadline)
{
	char id[DLQ_ID_LEN + 1];
	start(true);
	publish("jobs/a", "job", id);
	sent("hung", id, "jobs/a", "job");
	ck_assert_uint_eq(d.deadlines.count, 1);
	expect_gauges();
	tick_at(1000 + 29999);
	ck_assert_uint_eq(fake.publish_count, 0);
	tick_at(1000 + 30000);
	ck_assert_uint_eq(published_to("jobs/retry"), 1);
	const struct fake_publish *copy = last_to("jobs/retry");
	ck_assert_str_eq(fake_header_value(copy, DLQ_PROP_RETRY_COUNT), "1");
	ck_assert_str_eq(fake_header_value(copy, DLQ_PROP_ORIGIN_ID), id);
	ck_assert_uint_eq(engine__totals(&d)->ack_timeouts, 1);
	ck_assert_uint_eq(engine__totals(&d)->retry_copies, 1);
	ck_assert_uint_eq(d.deadlines.count, 0);
	ck_assert_int_eq(ack(id, "hung"), DLQ_NACK_TIMED_OUT);
	ck_assert_int_eq(nack(id, "hung", false), DLQ_NACK_TIMED_OUT);
	ck_assert_int_eq(settle(DLQ_SETTLE_PROGRESS, id, "hung").status, DLQ_NACK_TIMED_OUT);
	ck_assert_ptr_nonnull(strstr(dlq__nack_status_text(DLQ_NACK_TIMED_OUT), "retry copy"));
	tick_at(1000 + 120000);
	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert_uint_eq(engine__totals(&d)->acks_refused, 2);
	ck_assert_uint_eq(engine__totals(&d)->nacks_refused, 1);
	expect_gauges();
	stop();
}
END_TEST

/* The copy is a delivery of its own: sent to a worker that ACKs it, its
 * clock stops and nothing more happens; the chain's last attempt that runs
 * out is the dead letter, reason naming the client and the deadline as
 * configured, retry-count the attempts. */
START_TEST(the_last_attempt_that_runs_out_is_dead_lettered)
{
	char id[DLQ_ID_LEN + 1];
	start(true);
	publish("once/a", "job", id);
	sent("hung", id, "once/a", "job");
	tick_at(1000 + 2000);
	ck_assert_uint_eq(published_to("dead/once"), 1);
	const struct fake_publish *dl = last_to("dead/once");
	ck_assert_str_eq(fake_header_value(dl, DLQ_PROP_DEAD_LETTER_REASON),
			"subscriber \"hung\" did not acknowledge it within 2s");
	ck_assert_str_eq(fake_header_value(dl, DLQ_PROP_DEAD_LETTER_CLIENT), "hung");
	ck_assert_str_eq(fake_header_value(dl, DLQ_PROP_RETRY_COUNT), "1");
	ck_assert_ptr_null(fake_header_value(dl, DLQ_PROP_DEAD_LETTER_FINAL));
	ck_assert_str_eq(fake_header_value(dl, DLQ_PROP_DEAD_LETTER_CAUSE), DLQ_CAUSE_ACK_TIMEOUT);
	ck_assert_uint_eq(engine__totals(&d)->dead_letters, 1);
	ck_assert_uint_eq(engine__totals(&d)->dead_letters_by_cause[DLQ_DEAD_ACK_TIMEOUT], 1);
	ck_assert_int_eq(ack(id, "hung"), DLQ_NACK_TIMED_OUT_DEAD);

	/* A chain: the copy of a pool job is sent to a good worker that ACKs. */
	char job[DLQ_ID_LEN + 1];
	publish("jobs/b", "work", job);
	sent("hung", job, "jobs/b", "work");
	tick_at(1000 + 2000 + 30000);
	const char *copy_id = fake_header_value(last_to("jobs/retry"), DLQ_PROP_ID);
	ck_assert_ptr_nonnull(copy_id);
	char copy[DLQ_ID_LEN + 1];
	snprintf(copy, sizeof(copy), "%s", copy_id);
	sent("good", copy, "jobs/retry", "work");
	struct dlq_nack_result res = settle(DLQ_SETTLE_ACK, copy, "good");
	ck_assert_int_eq(res.status, DLQ_NACK_ACKED);
	ck_assert_uint_eq(res.attempt, 2);
	ck_assert_uint_eq(res.max_attempts, 3);
	size_t before = fake.publish_count;
	tick_at(1000 + 2000 + 30000 + 60000);
	ck_assert_uint_eq(fake.publish_count, before);
	ck_assert_uint_eq(engine__totals(&d)->acks, 1);
	stop();
}
END_TEST

/* Progress restarts the clock: a job reporting every 20 s for three times
 * its deadline, then ACKed, never runs out; the reply says how long is
 * left. */
START_TEST(progress_keeps_a_long_job_alive)
{
	char id[DLQ_ID_LEN + 1];
	start(true);
	publish("jobs/a", "long", id);
	sent("w", id, "jobs/a", "long");
	for(uint64_t t = 20000; t <= 100000; t += 20000){
		tick_at(1000 + t);
		struct dlq_nack_result res = settle(DLQ_SETTLE_PROGRESS, id, "w");
		ck_assert_int_eq(res.status, DLQ_NACK_EXTENDED);
		ck_assert_uint_eq(res.delay_ms, 30000);
	}
	tick_at(1000 + 125000);
	ck_assert_uint_eq(fake.publish_count, 0);
	ck_assert_int_eq(ack(id, "w"), DLQ_NACK_ACKED);
	/* Progress after the ACK: refused as ACKed. */
	ck_assert_int_eq(settle(DLQ_SETTLE_PROGRESS, id, "w").status, DLQ_NACK_ALREADY_ACKED);
	tick_at(1000 + 500000);
	ck_assert_uint_eq(fake.publish_count, 0);
	ck_assert_uint_eq(engine__totals(&d)->progress, 5);
	ck_assert_uint_eq(engine__totals(&d)->ack_timeouts, 0);
	stop();
}
END_TEST

/* Each client settles its delivery once: ACK then NACK, NACK then ACK, ACK
 * twice are refused saying how it was settled; unknown and malformed ids
 * are refused; an ACK by a client the message was not sent to settles that
 * client's part only (the other's clock runs out all the same); progress
 * where no clock runs (a policy without ack_timeout, or not sent to that
 * client) says so. */
START_TEST(settled_once_per_client)
{
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1], p[DLQ_ID_LEN + 1];
	start(true);
	publish("jobs/a", "A", a);
	publish("jobs/b", "B", b);
	publish("plain/c", "P", p);
	sent("w", a, "jobs/a", "A");
	sent("w", b, "jobs/b", "B");
	ck_assert_int_eq(ack(a, "w"), DLQ_NACK_ACKED);
	ck_assert_int_eq(ack(a, "w"), DLQ_NACK_ALREADY_ACKED);
	ck_assert_int_eq(nack(a, "w", false), DLQ_NACK_ALREADY_ACKED);
	ck_assert_int_eq(nack(b, "w", false), DLQ_NACK_RETRIED);
	ck_assert_int_eq(ack(b, "w"), DLQ_NACK_DUPLICATE);
	ck_assert_int_eq(ack("AAAAAAAAAAAAAAAA", "w"), DLQ_NACK_UNKNOWN_ID);
	ck_assert_int_eq(ack("short", "w"), DLQ_NACK_MALFORMED_ID);
	ck_assert_int_eq(settle(DLQ_SETTLE_PROGRESS, p, "w").status, DLQ_NACK_NO_DEADLINE);
	ck_assert_int_eq(ack(p, "w"), DLQ_NACK_ACKED);
	ck_assert_int_eq(nack(p, "w", false), DLQ_NACK_ALREADY_ACKED);

	char c[DLQ_ID_LEN + 1];
	publish("jobs/c", "C", c);
	sent("hung", c, "jobs/c", "C");
	ck_assert_int_eq(settle(DLQ_SETTLE_PROGRESS, c, "other").status, DLQ_NACK_NO_DEADLINE);
	ck_assert_int_eq(ack(c, "other"), DLQ_NACK_ACKED);
	ck_assert_uint_eq(d.deadlines.count, 1);
	size_t before = published_to("jobs/retry");
	tick_at(1000 + 30000);
	ck_assert_uint_eq(published_to("jobs/retry"), before + 1);
	ck_assert_uint_eq(engine__totals(&d)->acks, 3);
	expect_gauges();
	stop();
}
END_TEST

/* A final NACK dead-letters at its first attempt, whatever remain, with
 * its reason and dead-letter-final; counted as a NACK and a final NACK. */
START_TEST(a_final_nack_dead_letters_at_once)
{
	char id[DLQ_ID_LEN + 1];
	start(true);
	publish("jobs/a", "bad", id);
	sent("w", id, "jobs/a", "bad");
	struct dlq_nack n = {.id = id, .id_len = strlen(id), .client = "w", .client_persists = true,
		.final = true, .reason = "schema error"};
	struct dlq_nack_result res;
	dlq__nack(&d, &n, &res);
	ck_assert_int_eq(res.status, DLQ_NACK_DEAD_LETTERED);
	ck_assert_uint_eq(res.attempt, 1);
	ck_assert_uint_eq(published_to("dead/jobs"), 1);
	const struct fake_publish *dl = last_to("dead/jobs");
	ck_assert_str_eq(fake_header_value(dl, DLQ_PROP_DEAD_LETTER_FINAL), "true");
	ck_assert_str_eq(fake_header_value(dl, DLQ_PROP_DEAD_LETTER_REASON), "schema error");
	ck_assert_str_eq(fake_header_value(dl, DLQ_PROP_RETRY_COUNT), "1");
	ck_assert_uint_eq(engine__totals(&d)->final_nacks, 1);
	ck_assert_uint_eq(engine__totals(&d)->nacks, 1);
	ck_assert_uint_eq(d.deadlines.count, 0);
	tick_at(1000 + 60000);
	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert_int_eq(nack(id, "w", true), DLQ_NACK_DUPLICATE);
	stop();
}
END_TEST

/* A resend after a reconnect is the next attempt and starts the clock
 * again; the attempt that runs out then is the second. */
START_TEST(a_resend_starts_the_clock_again)
{
	char id[DLQ_ID_LEN + 1];
	start(true);
	publish("jobs/a", "job", id);
	sent("w", id, "jobs/a", "job");
	tick_at(1000 + 20000);
	sent("w", id, "jobs/a", "job");
	tick_at(1000 + 30000);
	ck_assert_uint_eq(fake.publish_count, 0);
	tick_at(1000 + 50000);
	ck_assert_uint_eq(published_to("jobs/retry"), 1);
	ck_assert_str_eq(fake_header_value(last_to("jobs/retry"), DLQ_PROP_RETRY_COUNT), "2");
	stop();
}
END_TEST

/* A record one of whose deliveries awaits settlement stays past its NACK
 * window (its window starts again), so that its deadline can make the
 * retry copy; once settled it expires as any. */
START_TEST(an_awaited_record_outlives_its_window)
{
	const struct dlq_option extra[] = {{"nack_window", "10s"}};
	char id[DLQ_ID_LEN + 1], other[DLQ_ID_LEN + 1];
	fake_reset();
	fake.now_ms = 1000;
	fake.wall_ms = 1700000000000;
	start_extra(true, extra, ARRAY_LEN(extra));
	publish("jobs/a", "job", id);
	publish("jobs/a", "other", other);
	sent("w", id, "jobs/a", "job");
	tick_at(1000 + 15000);
	ck_assert_uint_eq(d.ledger.count, 1);
	ck_assert_uint_eq(engine__totals(&d)->expired, 1);
	tick_at(1000 + 30000);
	ck_assert_uint_eq(published_to("jobs/retry"), 1);
	/* The copy's own record is there; the original leaves at its next
	 * window's end. */
	tick_at(1000 + 15000 + 10001);
	tick_at(1000 + 45000);
	ck_assert_uint_eq(engine__totals(&d)->expired, 3);
	stop();
}
END_TEST

/* 2.0: the deliveries routed to a client are worked through one at a
 * time: the first's clock starts when it is routed, the next's when the
 * first is settled or runs out; a late ACK of one that ran out starts the
 * next's again; a client not seen connected waits until it is. */
START_TEST(sequential_on_2_0)
{
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1], c[DLQ_ID_LEN + 1];
	start(false);
	publish("jobs/a", "A", a);
	publish("jobs/b", "B", b);
	publish("jobs/c", "C", c);
	dlq__client_active(&d, "w", 7);
	ck_assert(!routed("w", 7, "jobs/a", "A", true));
	ck_assert(!routed("w", 7, "jobs/b", "B", true));
	ck_assert(!routed("w", 7, "jobs/c", "C", true));
	ck_assert(!routed("v3", 8, "jobs/a", "A", false)); /* cannot settle: not held */
	ck_assert_uint_eq(d.deadlines.count, 3);
	ck_assert_uint_eq(d.deadlines.running, 1);
	expect_gauges();
	tick_at(1000 + 20000);
	ck_assert_int_eq(ack(a, "w"), DLQ_NACK_ACKED);   /* b starts at 21 s */
	tick_at(1000 + 49999);
	ck_assert_uint_eq(fake.publish_count, 0);
	tick_at(1000 + 50000);                            /* b runs out; c starts */
	ck_assert_uint_eq(published_to("jobs/retry"), 1);
	tick_at(1000 + 70000);
	ck_assert_int_eq(ack(b, "w"), DLQ_NACK_TIMED_OUT); /* late: c starts again */
	tick_at(1000 + 81000);
	ck_assert_uint_eq(published_to("jobs/retry"), 1);
	tick_at(1000 + 100000);
	ck_assert_uint_eq(published_to("jobs/retry"), 2);
	ck_assert_uint_eq(d.deadlines.count, 0);
	expect_gauges();
	stop();
}
END_TEST

/* 2.0: a READ check of an empty payload, as the broker makes it (NULL). */
static bool routed_empty(const char *client, uintptr_t conn, const char *topic)
{
	struct dlq_read_check c = {
		.client = client, .conn = conn, .topic = topic, .payload = NULL, .payload_len = 0, .qos = 1,
		.settles = true, .persists = true,
	};
	return dlq__read_check(&d, &c);
}

/* 2.0: an empty payload has no address to find its message by (the broker
 * stores NULL); the checks that route it, right after it was tracked, hold
 * it to its deadline (issue 45: it was never held). A check after another
 * event, or on another topic, is not taken for it. */
START_TEST(an_empty_payload_is_held_on_2_0)
{
	char a[DLQ_ID_LEN + 1];
	start(false);
	dlq__client_active(&d, "w", 7);
	dlq__client_active(&d, "x", 8);
	dlq__client_active(&d, "y", 9);
	publish("jobs/e", "", a);
	ck_assert(!routed_empty("w", 7, "jobs/e"));
	ck_assert(!routed_empty("x", 8, "jobs/f"));
	ck_assert(!routed_empty("x", 8, "jobs/e"));
	ck_assert_uint_eq(d.deadlines.count, 2);
	dlq__event(&d);
	ck_assert(!routed_empty("y", 9, "jobs/e"));
	ck_assert_uint_eq(d.deadlines.count, 2);
	expect_gauges();
	tick_at(1000 + 30000);
	ck_assert_uint_eq(published_to("jobs/retry"), 2);
	ck_assert_uint_eq(d.deadlines.count, 0);
	stop();
}
END_TEST

/* 2.0: a retry copy for one client (retry_to=delivery) gets no READ
 * check: its deadline goes from when the broker is handed it. */
START_TEST(a_targeted_copy_is_held_on_2_0)
{
	char id[DLQ_ID_LEN + 1];
	start(false);
	publish("mine/a", "job", id);
	dlq__client_active(&d, "w", 7);
	ck_assert(!routed("w", 7, "mine/a", "job", true));
	ck_assert_int_eq(nack(id, "w", false), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert_str_eq(fake.publishes[0].client, "w");
	ck_assert_uint_eq(d.deadlines.count, 1);
	ck_assert_uint_eq(d.deadlines.running, 1);
	tick_at(1000 + 10000);
	ck_assert_uint_eq(fake.publish_count, 2);
	ck_assert_str_eq(fake.publishes[1].client, "w");
	ck_assert_str_eq(fake_header_value(&fake.publishes[1], DLQ_PROP_RETRY_COUNT), "2");
	stop();
}
END_TEST

/* 2.0: a retry copy the broker stores at the address of an earlier copy
 * of the same chain, which it freed (the same topic and payload, so the
 * same content), is that new copy, held to its deadline (issue 45, case
 * 2: the earlier copy, already run out, was found for it, and the new
 * delivery waited on no clock for ever). */
START_TEST(a_copy_at_an_earlier_copys_address_is_held_on_2_0)
{
	char id[DLQ_ID_LEN + 1];
	char original[] = "lone-1";
	char stored[] = "lone-1"; /* the broker's buffer of each copy in turn */
	start(false);
	dlq__client_active(&d, "h", 7);
	publish("jobs/x", original, id);
	ck_assert(!routed("h", 7, "jobs/x", original, true));
	tick_at(1000 + 30000);
	ck_assert_uint_eq(published_to("jobs/retry"), 1);
	ck_assert(!routed("h", 7, "jobs/retry", stored, true));
	ck_assert_uint_eq(d.deadlines.count, 1);
	tick_at(1000 + 60000);
	ck_assert_uint_eq(published_to("jobs/retry"), 2);
	ck_assert(!routed("h", 7, "jobs/retry", stored, true));
	ck_assert_uint_eq(d.deadlines.count, 1);
	tick_at(1000 + 90000);
	ck_assert_uint_eq(published_to("dead/jobs"), 1);
	ck_assert_uint_eq(d.deadlines.count, 0);
	stop();
}
END_TEST

/* Ends the engine for a restart: a shutdown (it saves), or a crash: the
 * state files as they are now are copied aside, the engine is stopped
 * without them, and the next start reads the copies. The fake port is
 * reset (what was published is forgotten, and the clocks: the caller sets
 * them). */
static void go_down(bool crash)
{
	static unsigned crashes, restarts;
	if(crash){
		char copy[200], cmd[600];
		snprintf(copy, sizeof(copy), "%s/crash%u", dir, ++crashes);
		snprintf(cmd, sizeof(cmd), "cp %s %s && { [ ! -e %s.journal ] || cp %s.journal %s.journal; }",
				state_path, copy, state_path, state_path, copy);
		ck_assert_int_eq(system(cmd), 0);
		stop();
		snprintf(state_path, sizeof(state_path), "%s", copy);
	}else{
		stop();
	}
	/* The fake random source starts again with the fake port: ids drawn
	 * after the restart must not repeat those before it. */
	fake.random_state = 0x5eed0000u + crashes * 1000u + ++restarts;
}

/* A restart: deadlines come back from the state file (a snapshot at
 * shutdown, or the journal after a crash); one that passed while the
 * broker was down runs out at the first tick, once, and a second restart
 * does not run it out again; an ACK journaled before a crash stays an ACK. */
static void restart_case(bool crash)
{
	const struct dlq_option extra[] = {
		{"state_file", state_path},
		{"state_save_on_change", crash ? "true" : "false"},
	};
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1], c[DLQ_ID_LEN + 1];
	snprintf(dir, sizeof(dir), "/tmp/dlq-settle-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(state_path, sizeof(state_path), "%s/state", dir);
	fake_reset();
	fake.now_ms = 1000;
	fake.wall_ms = 1700000000000;
	start_extra(true, extra, ARRAY_LEN(extra));
	publish("jobs/a", "A", a);
	publish("jobs/b", "B", b);
	publish("jobs/c", "C", c);
	sent("w", a, "jobs/a", "A");
	sent("w", b, "jobs/b", "B");
	sent("w", c, "jobs/c", "C");
	ck_assert_int_eq(ack(b, "w"), DLQ_NACK_ACKED);
	fake.now_ms += 10000;
	fake.wall_ms += 10000;
	ck_assert_int_eq(settle(DLQ_SETTLE_PROGRESS, c, "w").status, DLQ_NACK_EXTENDED); /* c ends 40 s after the start */
	go_down(crash);
	/* Down 25 s: a's end (30 s) passes, c's (40 s) does not. */
	fake.now_ms = 9000000;
	fake.wall_ms = 1700000000000 + 35000;
	start_extra(true, extra, ARRAY_LEN(extra));
	ck_assert_uint_eq(d.deadlines.count, 2);
	dlq__tick(&d);
	ck_assert_uint_eq(published_to("jobs/retry"), 1);
	ck_assert_str_eq(fake_header_value(last_to("jobs/retry"), DLQ_PROP_ORIGIN_ID), a);
	char copy[DLQ_ID_LEN + 1];
	snprintf(copy, sizeof(copy), "%s", fake_header_value(last_to("jobs/retry"), DLQ_PROP_ID));
	ck_assert_int_eq(ack(b, "w"), DLQ_NACK_ALREADY_ACKED);
	/* Restarted again at once: a is not run out twice. */
	go_down(crash);
	fake.now_ms = 19000000;
	fake.wall_ms = 1700000000000 + 35000;
	start_extra(true, extra, ARRAY_LEN(extra));
	ck_assert_uint_eq(d.deadlines.count, 1);
	dlq__tick(&d);
	/* The copy the broker may not have taken before it stopped is
	 * published again (the same copy, at least once); a's clock does not
	 * run out a second time. */
	for(size_t i = 0; i < fake.publish_count; i++){
		ck_assert_str_eq(fake_header_value(&fake.publishes[i], DLQ_PROP_ID), copy);
	}
	size_t again = fake.publish_count;
	ck_assert_int_eq(ack(a, "w"), DLQ_NACK_TIMED_OUT);
	/* c runs out at its own end: 5 s after this start. */
	tick_at(19000000 + 4999);
	ck_assert_uint_eq(fake.publish_count, again);
	tick_at(19000000 + 5000);
	ck_assert_uint_eq(fake.publish_count, again + 1);
	ck_assert_str_eq(fake_header_value(last_to("jobs/retry"), DLQ_PROP_ORIGIN_ID), c);
	stop();
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(deadlines_survive_a_shutdown)
{
	restart_case(false);
}
END_TEST

START_TEST(deadlines_survive_a_crash_with_the_journal)
{
	restart_case(true);
}
END_TEST

/* A reload that takes a policy's ack_timeout away forgets the deliveries
 * awaited under it; one that changes it keeps their ends, and a clock
 * started again takes the new duration. */
START_TEST(reload_changes_deadlines)
{
	char path[128], a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	snprintf(dir, sizeof(dir), "/tmp/dlq-settle-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/policies.json", dir);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("{\"policies\":[{\"filter\":\"x/#\",\"max_attempts\":3,\"dead_letter\":\"dead/x\",\"ack_timeout\":\"30s\"},"
			"{\"filter\":\"y/#\",\"max_attempts\":3,\"dead_letter\":\"dead/y\",\"ack_timeout\":\"30s\"}]}", f);
	fclose(f);
	struct dlq_option opts[] = {{"policy_file", path}, {"redelivery_tracking", "allow"}};
	fake_reset();
	fake.now_ms = 1000;
	engine_start(&d, &live, opts, ARRAY_LEN(opts), ENGINE_NO_SYS | ENGINE_EXACT_COUNTING);
	publish("x/1", "X", a);
	publish("y/1", "Y", b);
	sent("w", a, "x/1", "X");
	sent("w", b, "y/1", "Y");
	f = fopen(path, "w");
	fputs("{\"policies\":[{\"filter\":\"x/#\",\"max_attempts\":3,\"dead_letter\":\"dead/x\"},"
			"{\"filter\":\"y/#\",\"max_attempts\":3,\"dead_letter\":\"dead/y\",\"ack_timeout\":\"5s\"}]}", f);
	fclose(f);
	char err[512];
	ck_assert_int_eq(dlq__reload(&d, opts, ARRAY_LEN(opts), err, sizeof(err)), 0);
	ck_assert_uint_eq(d.deadlines.count, 1);
	ck_assert_uint_eq(d.gauges.total.awaiting, 1);
	expect_gauges();
	ck_assert_int_eq(settle(DLQ_SETTLE_PROGRESS, a, "w").status, DLQ_NACK_NO_DEADLINE);
	struct dlq_nack_result res = settle(DLQ_SETTLE_PROGRESS, b, "w");
	ck_assert_int_eq(res.status, DLQ_NACK_EXTENDED);
	ck_assert_uint_eq(res.delay_ms, 5000);
	tick_at(1000 + 4999);
	ck_assert_uint_eq(fake.publish_count, 0);
	tick_at(1000 + 5000);
	ck_assert_uint_eq(fake.publish_count, 1); /* the copy, to w on y/1 (retry_to=delivery) */
	ck_assert_str_eq(fake.publishes[0].topic, "y/1");
	ck_assert_str_eq(fake.publishes[0].client, "w");
	engine_stop(&d, &live);
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
	fake_reset();
}
END_TEST

/* Without ack_timeout nothing runs: no delivery is kept, a send costs
 * nothing more, and no tick does anything. */
START_TEST(no_deadline_without_ack_timeout)
{
	char id[DLQ_ID_LEN + 1];
	start(true);
	publish("plain/a", "P", id);
	sent("w", id, "plain/a", "P");
	ck_assert_uint_eq(d.deadlines.count, 0);
	tick_at(1000 + 3600000);
	ck_assert_uint_eq(fake.publish_count, 0);
	stop();
}
END_TEST

/* A failed attempt whose retry copy's record does not fit beside its own
 * (max_pending_bytes 1KiB, 600-byte jobs): the copy is sent, and room is
 * made only once the attempt is done with the failed record, which is
 * then evicted, oldest first (and the copy's record after it, which does
 * not fit beside the copy still owed). Before, taking the copy's record in
 * evicted the failed record while the attempt still used it: a use after
 * free, which the sanitizer runs of this test report. Both ways in: a
 * NACK, and a deadline that runs out. */
START_TEST(a_copy_that_evicts_its_original)
{
	static const struct dlq_option small[] = {{"max_pending_bytes", "1KiB"}};
	char payload[601];
	char id[DLQ_ID_LEN + 1];
	memset(payload, 'x', sizeof(payload) - 1);
	payload[sizeof(payload) - 1] = '\0';
	fake_reset();
	fake.now_ms = 1000;
	fake.wall_ms = 1700000000000;
	start_extra(true, small, ARRAY_LEN(small));

	publish("jobs/a", payload, id);
	sent("w", id, "jobs/a", payload);
	ck_assert_int_eq(nack(id, "w", false), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(published_to("jobs/retry"), 1);
	ck_assert_str_eq(fake_header_value(last_to("jobs/retry"), DLQ_PROP_ORIGIN_ID), id);
	ck_assert_uint_eq(engine__totals(&d)->evicted, 2);
	ck_assert_uint_eq(d.ledger.count, 0);
	ck_assert_int_eq(nack(id, "w", false), DLQ_NACK_UNKNOWN_ID);
	expect_gauges();

	/* Two ticks: the broker takes the copy, which is owed no more. */
	tick_at(1001);
	tick_at(1002);
	ck_assert_uint_eq(engine__owed_bytes(&d), 0);
	publish("jobs/b", payload, id);
	sent("hung", id, "jobs/b", payload);
	ck_assert_uint_eq(d.deadlines.count, 1);
	tick_at(1002 + 30000);
	ck_assert_uint_eq(published_to("jobs/retry"), 2);
	ck_assert_str_eq(fake_header_value(last_to("jobs/retry"), DLQ_PROP_ORIGIN_ID), id);
	ck_assert_uint_eq(engine__totals(&d)->ack_timeouts, 1);
	ck_assert_uint_eq(engine__totals(&d)->evicted, 4);
	ck_assert_uint_eq(d.deadlines.count, 0);
	ck_assert_uint_eq(d.ledger.count, 0);
	expect_gauges();
	stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("settle");
	check_add(s, tcase_create("2.1"), CHECK_TESTS(a_hung_delivery_is_retried_at_its_deadline,
			the_last_attempt_that_runs_out_is_dead_lettered, progress_keeps_a_long_job_alive, settled_once_per_client,
			a_final_nack_dead_letters_at_once, a_resend_starts_the_clock_again, an_awaited_record_outlives_its_window,
			no_deadline_without_ack_timeout, reload_changes_deadlines, a_copy_that_evicts_its_original));
	check_add(s, tcase_create("2.0"), CHECK_TESTS(sequential_on_2_0, a_targeted_copy_is_held_on_2_0,
			an_empty_payload_is_held_on_2_0, a_copy_at_an_earlier_copys_address_is_held_on_2_0));
	check_add(s, tcase_create("restarts"), CHECK_TESTS(deadlines_survive_a_shutdown,
			deadlines_survive_a_crash_with_the_journal));
	return check_run(s);
}
