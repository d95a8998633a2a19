/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Acknowledgement deadlines at the edges of a session (issue 45), on every
 * line: each case once lost or held a message, and each test would fail
 * again without its fix. A retry copy that waits in a lasting session
 * behind its hung original, whose session then ends: the broker drops the
 * copy with the session, and the plugin dead-letters it once (2.1 showed
 * nothing: the copy, never sent, was lost).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "raw.h"
#include "test_util.h"

#define POLICY_FMT "ta/# max_attempts=3 dead_letter=dead/ta retry_to=delivery ack_timeout=%dms"
#define EXPIRY_S 3600

/* The tests' ack_timeout in ms: a second, scaled like every deadline. */
static int ack_ms(void)
{
	return harness_deadline_ms(1000);
}

static struct broker *edge_broker(const char *label)
{
	char policy[256];
	snprintf(policy, sizeof(policy), POLICY_FMT, ack_ms());
	struct broker *b = broker_new(label);
	if(broker_version() < 2000013) broker_conf(b, "max_inflight_messages 1"); /* 2.0.13 fixed Receive Maximum */
	broker_plugin(b);
	broker_conf(b, "plugin_opt_policy %s", policy);
	broker_conf(b, "plugin_opt_redelivery_tracking allow");
	if(!BROKER_IS_21()) broker_conf(b, "plugin_opt_v5_sessions_persist true");
	return b;
}

/* The totals of a getStatus reply, in *doc (the caller frees it). */
static const cJSON *totals_of(struct client *c, cJSON **doc)
{
	return cJSON_GetObjectItemCaseSensitive(status_get(c, "status/edges", doc), "totals");
}

/* Waits until the plugin counted n deadlines run out (a net far above the
 * time it takes: the suite must pass on a busy machine). */
static void wait_ack_timeouts(struct client *c, int n)
{
	uint64_t end = it_now_ms() + (uint64_t)harness_deadline_ms(20000);
	for(;;){
		cJSON *doc;
		int got = (int)json_num(totals_of(c, &doc), "ackTimeouts");
		cJSON_Delete(doc);
		if(got >= n) return;
		ck_assert_msg(it_now_ms() < end, "%d deadlines ran out, waited for %d", got, n);
		it_sleep_ms(50);
	}
}

/* Case 4: session expiry 3600, Receive Maximum 1, no PUBACK, nothing
 * settled. The deadline runs out into a retry copy for the same client,
 * which waits in the session behind the unacknowledged original; the
 * client comes back (the broker resends the original) and ends its
 * session (DISCONNECT with session expiry 0). The message ends as one dead
 * letter, and nothing awaits an ACK any more. */
START_TEST(test_copy_behind_a_hung_slot_when_the_session_ends)
{
	struct broker *b = edge_broker(__func__);
	broker_start(b);
	struct client *insp = client_new(b, "insp", MQTT_PROTOCOL_V5);
	client_subscribe(insp, "dead/#", 1);
	struct raw_options o = { .id = "hung", .protocol = MQTT_PROTOCOL_V5, .clean = true, .expiry_s = EXPIRY_S,
		.receive_max = 1 };
	struct raw *w = raw_new(b, &o);
	raw_connect(w);
	ck_assert_uint_eq(raw_subscribe(w, "ta/x/#", 1), 1);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	client_publish_str(pub, "ta/x/1", "job", 1);
	const struct raw_msg *m = raw_expect(w);
	ck_assert_str_eq(m->payload, "job");
	/* No PUBACK: the copy the deadline makes waits behind the original. */
	wait_ack_timeouts(pub, 1);
	raw_close(w);
	raw_free(w);

	o.clean = false;
	w = raw_new(b, &o);
	raw_connect(w);
	raw_drain(w, HARNESS_SETTLE_MS);
	ck_assert(raw_disconnect_expiry(w, 0));
	raw_free(w);

	const struct it_msg *dl = client_expect(insp, "dead/ta", 1);
	ck_assert_str_eq(msg_user(dl, DLQ_PROP_ORIGIN_TOPIC), "ta/x/1");
	ck_assert_int_eq((int)dl->payloadlen, 3);
	/* One dead letter, ever: a deadline more and a settle find no other. */
	it_sleep_ms((unsigned)ack_ms());
	clients_settle(insp, pub);
	client_expect_exactly(insp, "dead/#", 1);
	cJSON *doc;
	const cJSON *t = totals_of(pub, &doc);
	ck_assert_int_eq((int)json_num(t, "deadLetters"), 1);
	ck_assert_int_eq((int)json_num(t, "awaitingAck"), 0);
	cJSON_Delete(doc);
	client_free(pub);
	client_free(insp);
}
END_TEST

static Suite *deadline_edges_suite(void)
{
	Suite *s = suite_create("deadline_edges");
	TCase *tc = harness_tcase("deadline_edges");
	tcase_add_test(tc, test_copy_behind_a_hung_slot_when_the_session_ends);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return harness_run(deadline_edges_suite());
}
