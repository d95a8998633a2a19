/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Subscribers that cannot NACK, against the real broker: on 2.1 (its
 * SUBSCRIBE event) an MQTT 3.1.1 client subscribing to a filter that can
 * receive tracked messages is logged once per connection, however often it
 * subscribes, directly or through $share, and each such subscription is
 * counted in getStatus (subscribersWithoutNack, totals and the policy's
 * entry); an MQTT 5 subscriber and a 3.1.1 subscriber of an untracked filter
 * are neither logged nor counted. 2.0 shows the plugin no subscriptions:
 * there the count stays 0 and docs/memory-and-limits.md says how to check.
 * Subscribers of dead letters: on 2.1 a filter that takes in a dead-letter
 * topic and a tracked filter (`#`, `+/#`) is logged once per client and
 * filter and each such subscription counted (subscribersOfDeadLetters); an
 * inspector of `dead/#` is not. Copies that honour the subscription: on
 * 2.1 a targeted retry copy goes at the lower of the original's and the
 * granted QoS, with the subscription's identifier; on 2.0 at the
 * original's QoS without one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "harness.h"

#define REPLY_TOPIC "subs/reply"
#define POLICY_FILTER "jobs/#"

/* How many of b's log lines warn of a subscription of client id ("dlq:
 * client "id" subscribed to "), those saying what too when it is not
 * NULL. */
static int warnings_for(struct broker *b, const char *id, const char *what)
{
	char want[256];
	snprintf(want, sizeof(want), "dlq: client \"%s\" subscribed to ", id);
	char *log = broker_log(b);
	int n = 0;
	for(const char *p = log; (p = strstr(p, want)) != NULL; p += strlen(want)){
		const char *eol = strchr(p, '\n');
		const char *hit = what ? strstr(p, what) : p;
		if(hit && (eol == NULL || hit < eol)) n++;
	}
	free(log);
	return n;
}

START_TEST(test_old_protocol_subscriber_reported)
{
	struct broker *b = dlq_broker("policy " POLICY_FILTER " max_attempts=3 dead_letter=dead/jobs");
	struct client *old = client_new(b, "old", MQTT_PROTOCOL_V311);
	struct client *modern = client_new(b, "modern", MQTT_PROTOCOL_V5);
	struct client *untracked = client_new(b, "untracked", MQTT_PROTOCOL_V311);

	client_subscribe(old, "jobs/+", 1);
	client_subscribe(old, "+/urgent", 1);           /* overlaps jobs/# at "jobs/urgent" */
	client_subscribe(old, "$share/workers/jobs/a", 1);
	client_subscribe(modern, "jobs/#", 1);
	client_subscribe(untracked, "other/#", 1);
	client_subscribe(untracked, "$SYS/#", 1);
	clients_settle(old, modern, untracked);

	cJSON *doc;
	const cJSON *data = status_get(modern, REPLY_TOPIC, &doc);
	double total = json_num(cJSON_GetObjectItemCaseSensitive(data, "totals"), "subscribersWithoutNack");
	double policy = json_num(status_policy(data, POLICY_FILTER), "subscribersWithoutNack");
	cJSON_Delete(doc);
	int old_warnings = warnings_for(b, client_id(old), NULL);
	int modern_warnings = warnings_for(b, client_id(modern), NULL);
	int untracked_warnings = warnings_for(b, client_id(untracked), NULL);

	if(!BROKER_IS_21()){
		/* 2.0 has no SUBSCRIBE event: nothing to see, nothing counted. */
		ck_assert_msg(total == 0 && policy == 0 && old_warnings == 0, "2.0: counted %g/%g, logged %d",
				total, policy, old_warnings);
		return;
	}
	ck_assert_msg(total == 3 && policy == 3, "subscribersWithoutNack totals %g, policy %g; expected 3, 3",
			total, policy);
	ck_assert_msg(old_warnings == 1, "the 3.1.1 subscriber was logged %d times, expected once", old_warnings);
	ck_assert_msg(modern_warnings == 0 && untracked_warnings == 0, "logged: v5 subscriber %d, untracked %d",
			modern_warnings, untracked_warnings);
	char want[512];
	snprintf(want, sizeof(want), "dlq: client \"%s\" subscribed to \"jobs/+\" with MQTT 3.1.1: it receives tracked "
			"messages without a dlq-id and cannot NACK them (policy \"" POLICY_FILTER "\")", client_id(old));
	char *log = broker_log(b);
	ck_assert_msg(strstr(log, want) != NULL, "no line \"%s\" in the log", want);
	ck_assert_msg(strstr(log, "dlq: dlq: ") == NULL, "a line with the prefix twice");
	free(log);

	/* A new connection of the same client is reported again: the plugin
	 * forgot it when the first one ended. */
	char id[128];
	snprintf(id, sizeof(id), "%s", client_id(old));
	client_free(old);
	struct client *again = client_new_session(b, id, MQTT_PROTOCOL_V311, 0);
	client_subscribe(again, "jobs/x", 1);
	client_sync(again);
	data = status_get(modern, REPLY_TOPIC, &doc);
	total = json_num(cJSON_GetObjectItemCaseSensitive(data, "totals"), "subscribersWithoutNack");
	cJSON_Delete(doc);
	ck_assert_msg(total == 4, "subscribersWithoutNack %g after the reconnect, expected 4", total);
	ck_assert_int_eq(warnings_for(b, id, NULL), 2);
}
END_TEST

/* What the warning of a subscription that takes in dead letters says. */
#define TAKES_DEAD_LETTERS "which takes in the dead-letter topic"

START_TEST(test_subscribers_of_dead_letters)
{
	struct broker *b = dlq_broker("policy " POLICY_FILTER " max_attempts=3 dead_letter=dead/jobs");
	struct client *all = client_new(b, "all", MQTT_PROTOCOL_V5);
	struct client *plus = client_new(b, "plus", MQTT_PROTOCOL_V311);
	struct client *insp = client_new(b, "insp", MQTT_PROTOCOL_V5);
	struct client *worker = client_new(b, "worker", MQTT_PROTOCOL_V5);

	client_subscribe(all, "#", 1);
	client_subscribe(all, "#", 0);                 /* the same filter again: counted, not logged again */
	client_subscribe(plus, "$share/g/+/#", 1);
	client_subscribe(insp, "dead/#", 1);           /* dead letters only */
	client_subscribe(worker, "jobs/#", 1);         /* tracked messages only */
	clients_settle(all, plus, insp, worker);

	cJSON *doc;
	const cJSON *data = status_get(insp, REPLY_TOPIC, &doc);
	double total = json_num(cJSON_GetObjectItemCaseSensitive(data, "totals"), "subscribersOfDeadLetters");
	cJSON_Delete(doc);
	int w_all = warnings_for(b, client_id(all), TAKES_DEAD_LETTERS);
	int w_plus = warnings_for(b, client_id(plus), TAKES_DEAD_LETTERS);
	int w_insp = warnings_for(b, client_id(insp), TAKES_DEAD_LETTERS);
	int w_worker = warnings_for(b, client_id(worker), TAKES_DEAD_LETTERS);
	if(!BROKER_IS_21()){
		ck_assert_msg(total == 0 && w_all == 0, "2.0: counted %g, logged %d", total, w_all);
		return;
	}
	ck_assert_msg(total == 3, "subscribersOfDeadLetters %g, expected 3", total);
	ck_assert_msg(w_all == 1 && w_plus == 1, "logged: # %d times, $share/g/+/# %d times; expected once each",
			w_all, w_plus);
	ck_assert_msg(w_insp == 0 && w_worker == 0, "logged: dead/# %d, jobs/# %d", w_insp, w_worker);
	char want[512];
	snprintf(want, sizeof(want), "dlq: client \"%s\" subscribed to \"#\", which takes in the dead-letter topic "
			"\"dead/jobs\" as well as messages of policy \"" POLICY_FILTER "\": it receives dead letters as new "
			"deliveries", client_id(all));
	char *log = broker_log(b);
	ck_assert_msg(strstr(log, want) != NULL, "no line \"%s\" in the log", want);
	free(log);
}
END_TEST

/* Expects m at qos with exactly the subscription identifier want (0: none). */
static void expect_sub(const struct it_msg *m, int qos, uint32_t want, const char *what)
{
	ck_assert_msg(m->qos == qos, "%s: QoS %d, expected %d", what, m->qos, qos);
	if(want == 0){
		ck_assert_msg(m->nsub_ids == 0, "%s: %zu subscription identifiers, expected none", what, m->nsub_ids);
		return;
	}
	ck_assert_msg(m->nsub_ids == 1 && m->sub_ids[0] == want, "%s: subscription identifiers %zu (first %u), "
			"expected exactly %u", what, m->nsub_ids, m->nsub_ids ? (unsigned)m->sub_ids[0] : 0u, (unsigned)want);
}

START_TEST(test_copies_honour_the_subscription)
{
	struct broker *b = dlq_broker("policy sites/+/telemetry max_attempts=3 dead_letter=dead/telemetry");
	struct client *q0 = client_new(b, "q0", MQTT_PROTOCOL_V5);
	struct client *q1 = client_new(b, "q1", MQTT_PROTOCOL_V5);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	client_subscribe_id(q0, "sites/+/telemetry", 0, 7);
	client_subscribe_id(q1, "sites/+/telemetry", 1, 9);
	client_publish_str(pub, "sites/a/telemetry", "t1", 1);

	const struct it_msg *o0 = client_expect(q0, "sites/#", 1);
	const struct it_msg *o1 = client_expect(q1, "sites/#", 1);
	expect_sub(o0, 0, 7, "original to the QoS 0 subscriber");
	expect_sub(o1, 1, 9, "original to the QoS 1 subscriber");
	char id0[32], id1[32];
	snprintf(id0, sizeof(id0), "%s", expect_original(o0));
	snprintf(id1, sizeof(id1), "%s", expect_original(o1));
	client_nack(q0, id0, NULL);
	client_nack(q1, id1, NULL);
	const struct it_msg *c0 = client_expect(q0, "sites/#", 2);
	const struct it_msg *c1 = client_expect(q1, "sites/#", 2);
	expect_retry_copy(c0, "sites/a/telemetry", id0, 1);
	expect_retry_copy(c1, "sites/a/telemetry", id1, 1);
	if(BROKER_IS_21()){
		expect_sub(c0, 0, 7, "2.1: retry copy to the QoS 0 subscriber");
		expect_sub(c1, 1, 9, "2.1: retry copy to the QoS 1 subscriber");
	}else{
		/* 2.0 shows the plugin no subscriptions (docs/supported-brokers.md). */
		expect_sub(c0, 1, 0, "2.0: retry copy to the QoS 0 subscriber");
		expect_sub(c1, 1, 0, "2.0: retry copy to the QoS 1 subscriber");
	}
	clients_settle(q0, q1, pub);
	client_expect_exactly(q0, NULL, 2);
	client_expect_exactly(q1, NULL, 2);
	client_expect_exactly(pub, NULL, 0);
}
END_TEST

/* The subscription is the session's: a v5 subscriber with a lasting
 * session subscribes (QoS 0, identifier 7), leaves and comes back without
 * subscribing again; its copy still goes at QoS 0 with identifier 7 (2.1
 * sends DISCONNECT for the old connection of a session it resumes, and the
 * plugin keeps what it knew). A clean start forgets it: the copy then goes
 * as nothing were known (QoS of the original, no identifier). */
START_TEST(test_subscription_kept_across_a_resumed_session)
{
	struct broker *b = dlq_broker("policy sites/+/telemetry max_attempts=3 dead_letter=dead/telemetry");
	struct client *w = client_new_session(b, "resumer", MQTT_PROTOCOL_V5, 300);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	client_subscribe_id(w, "sites/+/telemetry", 0, 7);
	client_free(w);
	w = client_new_session(b, "resumer", MQTT_PROTOCOL_V5, 300);
	ck_assert_msg(client_session_present(w), "the broker did not resume the session");
	client_publish_str(pub, "sites/b/telemetry", "t2", 1);
	const struct it_msg *o = client_expect(w, "sites/#", 1);
	expect_sub(o, 0, 7, "original in the resumed session");
	char id[32];
	snprintf(id, sizeof(id), "%s", expect_original(o));
	client_nack(w, id, NULL);
	const struct it_msg *c = client_expect(w, "sites/#", 2);
	expect_retry_copy(c, "sites/b/telemetry", id, 1);
	if(BROKER_IS_21()){
		expect_sub(c, 0, 7, "2.1: retry copy in the resumed session");
	}else{
		/* The session persists (clean_start=false with expiry, but 2.0
		 * cannot see the expiry: no plugin_opt_v5_sessions_persist). */
		expect_sub(c, 1, 0, "2.0: retry copy in the resumed session");
	}
	clients_settle(w, pub);
	client_expect_exactly(w, NULL, 2);
}
END_TEST

int main(void)
{
	return harness_run(check_suite("subscribers", harness_tcase("without_nack"),
			CHECK_TESTS(test_old_protocol_subscriber_reported, test_subscribers_of_dead_letters,
			test_copies_honour_the_subscription, test_subscription_kept_across_a_resumed_session)));
}
