/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Acknowledgement deadlines at the edges of a subscriber's session (issue
 * 45), against the real broker, on every line, with a policy that retries
 * to the delivery topic (a retry copy for the subscriber alone):
 * - a subscriber whose session does not outlive its connection receives a
 *   message and leaves without settling it (DISCONNECT, progress then
 *   DISCONNECT, a TCP reset): its deadline runs out for a client the
 *   broker no longer has, whose copy the broker would drop in silence, so
 *   the message is dead-lettered, once, at that attempt, and nothing waits
 *   for the client any more;
 * - a hung subscriber that resumes its session without subscribing again
 *   (on 2.0 the plugin sees that only as the broker ends the old session
 *   object: deadlines__offline) is held to its deadline as before: its
 *   retry copies run out in turn into the dead letter at max_attempts.
 * Deadlines here are generous upper bounds, never timed assertions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "raw.h"
#include "test_util.h"

#define MAX_ATTEMPTS 3

/* The ack_timeout in ms, scaled like every deadline (harness.h). */
static int ack_ms(void)
{
	return harness_deadline_ms(1000);
}

/* A broker with the issue's policy on ta/#, started. */
static struct broker *ta_broker(const char *label)
{
	struct broker *b = broker_new(label);
	broker_plugin(b);
	broker_conf(b, "plugin_opt_policy ta/# max_attempts=%d dead_letter=dead/ta retry_to=delivery ack_timeout=%dms",
			MAX_ATTEMPTS, ack_ms());
	/* 2.0 shows deliveries only through redelivery tracking. */
	broker_conf(b, "plugin_opt_redelivery_tracking allow");
	if(!BROKER_IS_21()) broker_conf(b, "plugin_opt_v5_sessions_persist true");
	broker_start(b);
	return b;
}

/* Waits, far beyond the deadlines, for n dead letters at insp. */
static void wait_dead_letters(struct client *insp, size_t n)
{
	int bound = HARNESS_WAIT_MS + 4 * MAX_ATTEMPTS * ack_ms();
	ck_assert_msg(client_wait(insp, "dead/#", n, bound), "%zu dead letters expected, %zu came", n,
			client_count(insp, "dead/#"));
}

/* The getStatus totals' figure name, as insp sees them. */
static int total(struct client *insp, const char *name)
{
	cJSON *doc;
	const cJSON *totals = cJSON_GetObjectItemCaseSensitive(status_get(insp, "status/t", &doc), "totals");
	int v = (int)json_num(totals, name);
	cJSON_Delete(doc);
	return v;
}

/* Waits until nothing awaits settlement (the gauge is read from the
 * plugin's status, which a tick may change after the dead letter). */
static void expect_nothing_awaited(struct client *insp)
{
	uint64_t until = it_now_ms() + (uint64_t)HARNESS_WAIT_MS;
	int n;
	while((n = total(insp, "awaitingAck")) != 0){
		ck_assert_msg(it_now_ms() < until, "awaitingAck stays %d", n);
		it_sleep_ms(50);
	}
}

static const char *raw_dlq_id(const struct raw_msg *m)
{
	const char *id = raw_user(m, DLQ_PROP_ID);
	ck_assert_ptr_nonnull(id);
	return id;
}

enum leaving {
	LEAVE_DISCONNECT,          /* DISCONNECT */
	LEAVE_AFTER_PROGRESS,      /* progress, then DISCONNECT */
	LEAVE_RESET,               /* the socket closed, no DISCONNECT */
};

/* Issue 45, case 1: a v5 subscriber with a clean start and no session
 * expiry receives a message (and PUBACKs it), settles nothing and leaves.
 * Its deadline runs out for a client id the broker no longer knows: one
 * dead letter per message, at the first attempt, saying the subscriber has
 * no session; no retry copy the broker would drop; nothing awaited. */
START_TEST(test_a_subscriber_that_leaves_without_a_session)
{
	struct broker *b = ta_broker(__func__);
	struct client *insp = client_new(b, "insp", MQTT_PROTOCOL_V5);
	client_subscribe(insp, "dead/#", 1);
	const enum leaving ways[] = { LEAVE_DISCONNECT, LEAVE_AFTER_PROGRESS, LEAVE_RESET };
	const size_t n = sizeof(ways) / sizeof(ways[0]);
	for(size_t i = 0; i < n; i++){
		char id[32], payload[32];
		snprintf(id, sizeof(id), "leaver-%zu", i);
		snprintf(payload, sizeof(payload), "job-%zu", i);
		struct raw_options o = { .id = id, .protocol = MQTT_PROTOCOL_V5, .clean = true };
		struct raw *w = raw_new(b, &o);
		raw_connect(w);
		ck_assert_uint_eq(raw_subscribe(w, "ta/x/#", 1), 1);
		client_publish_str(insp, "ta/x/1", payload, 1);
		const struct raw_msg *m = raw_expect(w);
		uint64_t received = it_now_ms();
		ck_assert_str_eq(m->payload, payload);
		ck_assert(raw_puback(w, m->mid));
		if(ways[i] == LEAVE_AFTER_PROGRESS){
			const char *dlq_id = raw_dlq_id(m);
			ck_assert_uint_lt(raw_publish(w, DLQ_PROGRESS_TOPIC, dlq_id, strlen(dlq_id), 1), 0x80);
		}
		it_sleep_ms((unsigned)(ack_ms() * 3 / 10));
		if(ways[i] == LEAVE_RESET){
			raw_close(w);
		}else{
			ck_assert(raw_disconnect(w));
		}
		wait_dead_letters(insp, i + 1);
		const struct it_msg *dl = client_msg(insp, "dead/#", i);
		/* The figure of each run, not an assertion. */
		printf("broker %d, leaver %zu: dead letter %llu ms after the message was received (ack_timeout %d ms)\n",
				broker_version(), i, (unsigned long long)(dl->at_ms - received), ack_ms());
		ck_assert_str_eq(dl->topic, "dead/ta");
		ck_assert_str_eq(dl->payload, payload);
		ck_assert_str_eq(msg_user(dl, DLQ_PROP_RETRY_COUNT), "1");
		char want[128];
		snprintf(want, sizeof(want), "subscriber \"%s\" has no session at the broker", id);
		const char *reason = msg_user(dl, DLQ_PROP_DEAD_LETTER_REASON);
		ck_assert_msg(reason && strstr(reason, want), "dead-letter reason: %s", reason ? reason : "(none)");
		/* Nothing else came to a client of that id. */
		ck_assert_uint_eq(raw_count(w, NULL, NULL), 1);
		raw_free(w);
	}
	/* A deadline more: nothing runs out again, nothing else comes. */
	it_sleep_ms((unsigned)ack_ms());
	clients_settle(insp);
	client_expect_exactly(insp, "dead/#", n);
	expect_nothing_awaited(insp);
	ck_assert_int_eq(total(insp, "ackTimeouts"), (int)n);
	ck_assert_int_eq(total(insp, "deadLetters"), (int)n);
	ck_assert_int_eq(total(insp, "retryCopies"), 0);
}
END_TEST

/* Issue 45, case 3: a hung subscriber with a lasting session receives a
 * message, leaves, and resumes its session (clean start off) without
 * subscribing again; it never settles anything. Each delivery runs out in
 * turn: its retry copies come (retry-count 1, then 2), and the last
 * attempt becomes the dead letter; nothing is left awaited. */
START_TEST(test_a_session_resumed_without_subscribing)
{
	struct broker *b = ta_broker(__func__);
	struct client *insp = client_new(b, "insp", MQTT_PROTOCOL_V5);
	client_subscribe(insp, "dead/#", 1);
	struct raw_options o = { .id = "resumer", .protocol = MQTT_PROTOCOL_V5, .clean = false, .expiry_s = 3600 };
	struct raw *w = raw_new(b, &o);
	raw_connect(w);
	ck_assert_uint_eq(raw_subscribe(w, "ta/x/#", 1), 1);
	client_publish_str(insp, "ta/x/1", "job", 1);
	const struct raw_msg *m = raw_expect(w);
	uint64_t received = it_now_ms();
	ck_assert_str_eq(m->payload, "job");
	ck_assert(raw_puback(w, m->mid));
	it_sleep_ms((unsigned)(ack_ms() / 5));
	ck_assert(raw_disconnect(w));
	it_sleep_ms((unsigned)(ack_ms() * 3 / 10));
	ck_assert(raw_connect(w)); /* the session is resumed */
	/* Its retry copies come one after another, each acknowledged (PUBACK)
	 * and never settled. */
	int bound = HARNESS_WAIT_MS + 4 * ack_ms();
	for(unsigned attempt = 1; attempt < MAX_ATTEMPTS; attempt++){
		ck_assert_int_eq(raw_next(w, bound, &m), RAW_PUBLISH);
		ck_assert_str_eq(m->topic, "ta/x/1");
		ck_assert_str_eq(m->payload, "job");
		const char *rc = raw_user(m, DLQ_PROP_RETRY_COUNT);
		ck_assert_msg(rc && (unsigned)atoi(rc) == attempt, "copy %u: retry-count %s", attempt, rc ? rc : "(none)");
		ck_assert(raw_puback(w, m->mid));
		printf("broker %d: retry copy %u %llu ms after the original was received (ack_timeout %d ms)\n",
				broker_version(), attempt, (unsigned long long)(it_now_ms() - received), ack_ms());
	}
	wait_dead_letters(insp, 1);
	const struct it_msg *dl = client_msg(insp, "dead/#", 0);
	printf("broker %d: dead letter %llu ms after the original was received\n", broker_version(),
			(unsigned long long)(dl->at_ms - received));
	ck_assert_str_eq(dl->payload, "job");
	ck_assert_str_eq(msg_user(dl, DLQ_PROP_RETRY_COUNT), "3");
	const char *reason = msg_user(dl, DLQ_PROP_DEAD_LETTER_REASON);
	ck_assert_msg(reason && strstr(reason, "subscriber \"resumer\" did not acknowledge it within"),
			"dead-letter reason: %s", reason ? reason : "(none)");
	/* A deadline more: nothing else comes, to it or as a dead letter. */
	raw_drain(w, ack_ms() + HARNESS_SETTLE_MS);
	ck_assert_int_eq(raw_next(w, 0, &m), RAW_TIMEOUT);
	clients_settle(insp);
	client_expect_exactly(insp, "dead/#", 1);
	expect_nothing_awaited(insp);
	ck_assert_int_eq(total(insp, "ackTimeouts"), MAX_ATTEMPTS);
	ck_assert_int_eq(total(insp, "retryCopies"), MAX_ATTEMPTS - 1);
	ck_assert_int_eq(total(insp, "deadLetters"), 1);
	raw_free(w);
}
END_TEST

static Suite *deadline_sessions_suite(void)
{
	Suite *s = suite_create("deadline_sessions");
	TCase *tc = harness_tcase("deadline_sessions");
	tcase_add_test(tc, test_a_subscriber_that_leaves_without_a_session);
	tcase_add_test(tc, test_a_session_resumed_without_subscribing);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return harness_run(deadline_sessions_suite());
}
