/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Acknowledgement deadlines (a policy's ack_timeout) against the real
 * broker, on every line: a pool of two workers on a shared subscription, one
 * that ACKs every job and one that receives jobs and never settles any
 * (every job ends ACKed once, or dead-lettered after exactly max_attempts
 * deliveries naming the hung client; none is lost; none is delivered again
 * once ACKed; how late the deadlines ran out is printed, per line); a job
 * that reports progress for three times its deadline and then ACKs; a
 * backlog behind a worker with an in-flight window of one, whose queued
 * messages never run out while they wait; the replies of late, repeated,
 * foreign and malformed settlements and of a final NACK; an MQTT 3.1.1
 * subscriber, which is not held to the deadline; a retry copy waiting in a
 * lasting session behind its hung original when the session ends (one dead
 * letter; issue 45's case 4, lost on 2.1); deadlines across a SIGTERM and a
 * SIGKILL (one that ran out while the broker was down is a failed attempt
 * once, never twice).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_suite.h"
#include "harness.h"
#include "raw.h"
#include "test_util.h"

#define SHARED "$share/workers/jobs/#"
#define EXPIRY_S 3600
#define JOBS 10

/* The tests' ack_timeout in ms: a second, far above any round trip
 * through the broker, scaled like every deadline (harness.h) so that a
 * slowed-down run keeps the same margins. */
static int ack_ms(void)
{
	return harness_deadline_ms(1000);
}

/* A broker as the worker-pool recipe sets it up for the line (docs/worker-pool.md),
 * with policy and, if state is true, a state file (journaled with journal);
 * not started. */
static struct broker *deadline_broker(const char *label, const char *policy, bool state, bool journal)
{
	struct broker *b = broker_new(label);
	if(broker_version() < 2000013) broker_conf(b, "max_inflight_messages 1"); /* 2.0.13 fixed Receive Maximum */
	broker_plugin(b);
	broker_conf(b, "plugin_opt_policy %s", policy);
	/* 2.0 shows a delivery only through redelivery tracking's access
	 * check, which ack_timeout needs there. */
	broker_conf(b, "plugin_opt_redelivery_tracking allow");
	if(!BROKER_IS_21()) broker_conf(b, "plugin_opt_v5_sessions_persist true");
	if(state){
		broker_conf(b, "plugin_opt_state_file %s", broker_path(b, "dlq.state"));
		if(journal) broker_conf(b, "plugin_opt_state_save_on_change true");
	}
	return b;
}

/* Publishes id to a compact settlement topic (ack, progress, nack) at
 * QoS 1 with a v5 response topic (NULL: none); fails on a refused publish. */
static void settle(struct client *c, const char *topic, const char *id, const char *response_topic)
{
	mosquitto_property *p = NULL;
	if(response_topic){
		ck_assert_int_eq(mosquitto_property_add_string(&p, MQTT_PROP_RESPONSE_TOPIC, response_topic), 0);
	}
	int rc = client_publish(c, topic, id, (int)strlen(id), 1, p);
	mosquitto_property_free_all(&p);
	ck_assert_msg(rc < 0x80, "the broker refused a publish to %s: %s", topic, mosquitto_reason_string(rc));
}

/* One JSON command of c's, replied on reply_topic: the reply's entry,
 * checked for the command's name; *doc to free. */
static const cJSON *command(struct client *c, const char *reply_topic, const char *json, const char *name, cJSON **doc)
{
	size_t n = client_count(c, reply_topic) + 1;
	mosquitto_property *p = NULL;
	ck_assert_int_eq(mosquitto_property_add_string(&p, MQTT_PROP_RESPONSE_TOPIC, reply_topic), 0);
	int rc = client_publish(c, DLQ_CONTROL_TOPIC, json, (int)strlen(json), 1, p);
	mosquitto_property_free_all(&p);
	ck_assert_int_lt(rc, 0x80);
	*doc = expect_reply(client_expect(c, reply_topic, n), 1);
	const cJSON *e = reply_entry(*doc, 0);
	ck_assert_str_eq(json_str(e, "command"), name);
	return e;
}

/* {"commands":[{"command":name,"id":id}]} as c, replied on reply_topic. */
static const cJSON *settle_json(struct client *c, const char *reply_topic, const char *name, const char *id, cJSON **doc)
{
	char json[256];
	snprintf(json, sizeof(json), "{\"commands\":[{\"command\":\"%s\",\"id\":\"%s\"}]}", name, id);
	return command(c, reply_topic, json, name, doc);
}

static void expect_result(const cJSON *e, const char *result)
{
	const char *r = json_str(e, "result");
	ck_assert_msg(r && !strcmp(r, result) && json_str(e, "error") == NULL, "reply entry: expected \"%s\", got %s%s",
			result, r ? r : "error ", r ? "" : (json_str(e, "error") ? json_str(e, "error") : "(none)"));
}

/* The message's retry-count, 0 for an original. */
static unsigned retry_count(const struct it_msg *m)
{
	const char *rc = msg_user(m, DLQ_PROP_RETRY_COUNT);
	return rc ? (unsigned)atoi(rc) : 0;
}

/* getStatus's totals as c sees them (replied on reply_topic): each name
 * given, followed by the int it must be; the list ends with NULL. */
static void expect_totals(struct client *c, const char *reply_topic, ...)
{
	cJSON *doc;
	const cJSON *totals = cJSON_GetObjectItemCaseSensitive(status_get(c, reply_topic, &doc), "totals");
	va_list ap;
	va_start(ap, reply_topic);
	for(const char *name; (name = va_arg(ap, const char *)) != NULL; ){
		int want = va_arg(ap, int);
		ck_assert_msg((int)json_num(totals, name) == want, "getStatus: totals.%s is %d, expected %d", name,
				(int)json_num(totals, name), want);
	}
	va_end(ap);
	cJSON_Delete(doc);
}

/* Waits until c's getStatus (replied on reply_topic) counts n deadlines
 * run out (a net far above the time it takes: the suite must pass on a
 * busy machine). */
static void wait_ack_timeouts(struct client *c, const char *reply_topic, int n)
{
	uint64_t end = it_now_ms() + (uint64_t)harness_deadline_ms(20000);
	for(;;){
		cJSON *doc;
		const cJSON *totals = cJSON_GetObjectItemCaseSensitive(status_get(c, reply_topic, &doc), "totals");
		int got = (int)json_num(totals, "ackTimeouts");
		cJSON_Delete(doc);
		if(got >= n) return;
		ck_assert_msg(it_now_ms() < end, "%d deadlines ran out, waited for %d", got, n);
		it_sleep_ms(50);
	}
}

/* The first id of the chain m belongs to. */
static const char *origin_of(const struct it_msg *m)
{
	const char *o = msg_user(m, DLQ_PROP_ORIGIN_ID);
	return o ? o : dlq_id_of(m);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Where the failed attempt a delivery to hung of chain origin at attempt
 * `attempt` made arrived (a retry copy of retry-count attempt, at either
 * worker, or at the last attempt the dead letter), or NULL. */
static const struct it_msg *product_of(struct client *workers[2], struct client *insp, const char *origin,
		unsigned attempt, unsigned max)
{
	if(attempt >= max){
		for(size_t i = 0; i < client_count(insp, "dead/#"); i++){
			const struct it_msg *m = client_msg(insp, "dead/#", i);
			if(!strcmp(origin_of(m), origin)) return m;
		}
		return NULL;
	}
	for(int w = 0; w < 2; w++){
		for(size_t i = 0; i < client_count(workers[w], "jobs/#"); i++){
			const struct it_msg *m = client_msg(workers[w], "jobs/#", i);
			if(!strcmp(origin_of(m), origin) && retry_count(m) == attempt) return m;
		}
	}
	return NULL;
}

/* The pool: JOBS jobs on a shared subscription of a worker that ACKs each
 * delivery as it comes and one that receives and never settles. */
START_TEST(test_pool_with_a_hung_worker)
{
	char policy[256];
	snprintf(policy, sizeof(policy), "jobs/# max_attempts=3 dead_letter=dead/jobs retry_to=jobs/retry ack_timeout=%dms",
			ack_ms());
	struct broker *b = deadline_broker(__func__, policy, false, false);
	broker_start(b);
	struct client *hung = client_new_session(b, "hung", MQTT_PROTOCOL_V5, EXPIRY_S);
	struct client *good = client_new_session(b, "good", MQTT_PROTOCOL_V5, EXPIRY_S);
	struct client *insp = client_subscribed(b, "insp", "dead/#");
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	client_subscribe(hung, SHARED, 1);
	client_subscribe(good, SHARED, 1);
	char payload[JOBS][16];
	for(int i = 0; i < JOBS; i++){
		char topic[32];
		snprintf(payload[i], sizeof(payload[i]), "job-%d", i);
		snprintf(topic, sizeof(topic), "jobs/%d", i);
		client_publish_str(pub, topic, payload[i], 1);
	}

	/* The good worker ACKs every delivery, until each job is ACKed or
	 * dead: on 2.0 the hung worker's deliveries run out one after another
	 * (deadlines.h), so this may take a deadline per delivery it holds. */
	size_t seen = 0, acked = 0;
	uint64_t until = it_now_ms() + (uint64_t)HARNESS_WAIT_MS + (uint64_t)JOBS * 3 * (uint64_t)ack_ms();
	while(acked + client_count(insp, "dead/#") < JOBS){
		if(it_now_ms() >= until){
			client_dump(good, "jobs/#");
			client_dump(hung, "jobs/#");
			client_dump(insp, "dead/#");
		}
		ck_assert_msg(it_now_ms() < until, "after %zu ACKs and %zu dead letters, nothing more came", acked,
				client_count(insp, "dead/#"));
		client_wait(good, "jobs/#", seen + 1, 100);
		while(seen < client_count(good, "jobs/#")){
			const struct it_msg *m = client_msg(good, "jobs/#", seen++);
			settle(good, DLQ_ACK_TOPIC, dlq_id_of(m), NULL);
			acked++;
		}
	}
	/* Twice the deadline more: nothing ACKed comes again, nothing else
	 * runs out. */
	it_sleep_ms((unsigned)(2 * ack_ms()));
	clients_settle(good, hung, insp, pub);

	struct client *workers[2] = { good, hung };
	size_t dead = 0, hung_deliveries = 0;
	int64_t late[3 * JOBS];
	size_t nlate = 0;
	for(int i = 0; i < JOBS; i++){
		size_t at_good = 0, at_hung = 0;
		while(client_find_payload(good, "jobs/#", payload[i], at_good)) at_good++;
		while(client_find_payload(hung, "jobs/#", payload[i], at_hung)) at_hung++;
		hung_deliveries += at_hung;
		const struct it_msg *dl = client_find_payload(insp, "dead/#", payload[i], 0);
		if(dl){
			/* Dead: three deliveries, all to the hung worker. */
			ck_assert_msg(at_good == 0 && at_hung == 3, "%s: dead-lettered after %zu deliveries to hung and %zu to good",
					payload[i], at_hung, at_good);
			ck_assert_ptr_null(client_find_payload(insp, "dead/#", payload[i], 1));
			char reason[256];
			snprintf(reason, sizeof(reason), "subscriber \"hung\" did not acknowledge it within %dms", ack_ms());
			expect_dead_letter(dl, msg_user(dl, DLQ_PROP_ORIGIN_TOPIC), origin_of(dl), 3, "hung", "jobs/#", reason);
			dead++;
		}else{
			/* ACKed once, by the good worker, after the hung worker's
			 * deliveries ran out: nothing after it. */
			ck_assert_msg(at_good == 1 && at_hung < 3, "%s: %zu deliveries to good, %zu to hung, no dead letter",
					payload[i], at_good, at_hung);
			const struct it_msg *m = client_find_payload(good, "jobs/#", payload[i], 0);
			ck_assert_uint_eq(retry_count(m), at_hung);
		}
		/* How late each of the hung worker's deliveries ran out: from
		 * when it arrived to when its copy or dead letter did, less the
		 * deadline. */
		for(size_t k = 0; k < at_hung; k++){
			const struct it_msg *m = client_find_payload(hung, "jobs/#", payload[i], k);
			const struct it_msg *p = product_of(workers, insp, origin_of(m), retry_count(m) + 1, 3);
			ck_assert_msg(p != NULL, "%s: delivery %zu to hung ran out into nothing", payload[i], k + 1);
			late[nlate++] = (int64_t)p->at_ms - (int64_t)m->at_ms - ack_ms();
		}
	}
	ck_assert_uint_eq(acked + dead, JOBS);
	ck_assert_uint_eq(client_count(good, "$CONTROL/#"), 0); /* every ACK was taken */
	cJSON *doc;
	const cJSON *data = status_get(pub, "status/pool", &doc);
	const cJSON *totals = cJSON_GetObjectItemCaseSensitive(data, "totals");
	ck_assert_uint_eq((unsigned)json_num(totals, "acks"), acked);
	ck_assert_uint_eq((unsigned)json_num(totals, "ackTimeouts"), hung_deliveries);
	ck_assert_uint_eq((unsigned)json_num(totals, "deadLetters"), dead);
	ck_assert_uint_eq((unsigned)json_num(totals, "awaitingAck"), 0);
	ck_assert_uint_eq((unsigned)json_num(status_policy(data, "jobs/#"), "ackTimeouts"), hung_deliveries);
	cJSON_Delete(doc);
	/* No deadline ran out before its time; the figures of this line. */
	qsort(late, nlate, sizeof(late[0]), cmp_i64);
	ck_assert_msg(nlate == 0 || late[0] > -50, "a deadline ran out %lld ms early", (long long)-late[0]);
	printf("deadlines on mosquitto %d.%d.%d: %zu jobs, %zu ACKed, %zu dead-lettered; %zu deliveries to the hung worker "
			"ran out, later than ack_timeout (%d ms) by min %lld, median %lld, max %lld ms\n",
			broker_version() / 1000000, broker_version() / 1000 % 1000, broker_version() % 1000, (size_t)JOBS, acked,
			dead, nlate, ack_ms(), nlate ? (long long)late[0] : 0, nlate ? (long long)late[nlate / 2] : 0,
			nlate ? (long long)late[nlate - 1] : 0);
}
END_TEST

/* A long job reports progress every third of its deadline for three
 * deadlines, then ACKs: never run out, nothing retried. An MQTT 3.1.1
 * subscriber of the same message, which cannot settle it, is not held to
 * the deadline. */
START_TEST(test_progress_keeps_a_long_job_alive)
{
	char policy[256];
	snprintf(policy, sizeof(policy), "jobs/# max_attempts=3 dead_letter=dead/jobs ack_timeout=%dms", ack_ms());
	struct broker *b = deadline_broker(__func__, policy, false, false);
	broker_start(b);
	struct client *w = client_subscribed(b, "w", "jobs/#");
	struct client *v3 = client_new(b, "v3", MQTT_PROTOCOL_V311);
	struct client *pub = client_subscribed(b, "pub", "dead/#");
	client_subscribe(v3, "jobs/#", 1);
	client_publish_str(pub, "jobs/long", "long", 1);
	const char *id = expect_original(client_expect(w, "jobs/#", 1));
	client_expect(v3, "jobs/#", 1);
	uint64_t start = it_now_ms();
	unsigned reports = 0;
	while(it_now_ms() - start < 3 * (uint64_t)ack_ms()){
		it_sleep_ms((unsigned)(ack_ms() / 3));
		settle(w, DLQ_PROGRESS_TOPIC, id, "r/w");
		cJSON *doc = expect_reply(client_expect(w, "r/w", ++reports), 1);
		const cJSON *e = reply_entry(doc, 0);
		ck_assert_str_eq(json_str(e, "command"), DLQ_COMMAND_PROGRESS);
		expect_result(e, "extended");
		ck_assert_int_eq((int)json_num(e, "deadlineMs"), ack_ms());
		cJSON_Delete(doc);
	}
	cJSON *doc;
	expect_result(settle_json(w, "r/w", DLQ_COMMAND_ACK, id, &doc), "acked");
	cJSON_Delete(doc);
	/* Progress after the ACK is refused as such. */
	ck_assert(json_str(settle_json(w, "r/w", DLQ_COMMAND_PROGRESS, id, &doc), "error"));
	ck_assert_ptr_nonnull(strstr(json_str(reply_entry(doc, 0), "error"), "already ACKed"));
	cJSON_Delete(doc);
	it_sleep_ms((unsigned)(2 * ack_ms()));
	clients_settle(w, v3, pub);
	client_expect_exactly(w, "jobs/#", 1);
	client_expect_exactly(v3, "jobs/#", 1);
	client_expect_exactly(pub, "dead/#", 0);
	const cJSON *data = status_get(pub, "status/long", &doc);
	const cJSON *totals = cJSON_GetObjectItemCaseSensitive(data, "totals");
	ck_assert_int_eq((int)json_num(totals, "ackTimeouts"), 0);
	ck_assert_int_eq((int)json_num(totals, "acks"), 1);
	ck_assert_int_eq((int)json_num(totals, "progress"), (int)reports);
	ck_assert_int_eq((int)json_num(totals, "retryCopies"), 0);
	ck_assert_int_eq((int)json_num(totals, "awaitingAck"), 0);
	cJSON_Delete(doc);
	ck_assert_uint_ge(reports, 8);
}
END_TEST

/* A worker with an in-flight window of one (Receive Maximum 1; 2.0.11's
 * max_inflight_messages 1) takes 1.2 deadlines per job's share of two, ACKs
 * it and only then acknowledges it (PUBACK), as a library does when its
 * message handler returns: three jobs published at once wait in its session
 * behind each other for longer than the deadline, and none runs out. */
START_TEST(test_a_backlog_never_runs_out)
{
	char policy[256];
	int t = 2 * ack_ms();
	snprintf(policy, sizeof(policy), "jobs/# max_attempts=3 dead_letter=dead/jobs retry_to=jobs/retry ack_timeout=%dms", t);
	struct broker *b = deadline_broker(__func__, policy, false, false);
	broker_start(b);
	struct raw_options o = { .id = "slow", .protocol = MQTT_PROTOCOL_V5, .clean = true, .receive_max = 1 };
	struct raw *w = raw_new(b, &o);
	raw_connect(w);
	ck_assert_uint_eq(raw_subscribe(w, "jobs/#", 1), 1);
	struct client *pub = client_subscribed(b, "pub", "dead/#");
	for(int i = 0; i < 3; i++){
		char payload[16];
		snprintf(payload, sizeof(payload), "job-%d", i);
		client_publish_str(pub, "jobs/backlog", payload, 1);
	}
	for(int i = 0; i < 3; i++){
		const struct raw_msg *m = raw_expect(w);
		char want[16];
		snprintf(want, sizeof(want), "job-%d", i);
		ck_assert_str_eq(m->payload, want);
		const char *id = NULL;
		for(size_t k = 0; k < m->nusers; k++){
			if(!strcmp(m->users[k].name, DLQ_PROP_ID)) id = m->users[k].value;
		}
		ck_assert_ptr_nonnull(id);
		it_sleep_ms((unsigned)(t * 6 / 10));
		ck_assert(raw_send_publish(w, DLQ_ACK_TOPIC, id, strlen(id), 1));
		ck_assert(raw_puback(w, m->mid));
	}
	/* A deadline more: nothing runs out, nothing else comes. */
	raw_drain(w, t + HARNESS_SETTLE_MS);
	const struct raw_msg *m;
	ck_assert_int_eq(raw_next(w, 0, &m), RAW_TIMEOUT);
	clients_settle(pub);
	client_expect_exactly(pub, "dead/#", 0);
	expect_totals(pub, "status/backlog", "acks", 3, "ackTimeouts", 0, "retryCopies", 0, NULL);
	raw_free(w);
}
END_TEST

/* Every reply as documented (docs/settling.md), nothing lost, nothing
 * duplicated: a late ACK and a late NACK of deliveries that ran out; an ACK
 * of an unknown, an expired and a malformed id; an ACK by a client the
 * message was not sent to; progress after an ACK; a final NACK at the first
 * attempt, in JSON and compact; a compact NACK whose "final" is neither true
 * nor false. */
START_TEST(test_replies)
{
	char jobs[256], plain[128];
	snprintf(jobs, sizeof(jobs), "jobs/# max_attempts=3 dead_letter=dead/jobs ack_timeout=%dms", ack_ms());
	snprintf(plain, sizeof(plain), "plain/# max_attempts=3 dead_letter=dead/plain");
	struct broker *b = deadline_broker(__func__, jobs, false, false);
	broker_conf(b, "plugin_opt_policy %s", plain);
	/* Longer than the first two deadlines take to run out on 2.0 (one
	 * after the other, deadlines.h): the records stay to answer a late
	 * settlement. */
	broker_conf(b, "plugin_opt_nack_window %dms", 5 * ack_ms());
	broker_start(b);
	struct client *w = client_subscribed(b, "w", "jobs/#");
	struct client *other = client_new(b, "other", MQTT_PROTOCOL_V5);
	struct client *insp = client_subscribed(b, "insp", "dead/#");
	client_subscribe(w, "plain/#", 1);
	const char *topics[] = { "jobs/late-ack", "jobs/late-nack", "jobs/foreign", "jobs/final", "jobs/compact-final",
		"plain/expired" };
	char ids[ARRAY_LEN(topics)][DLQ_ID_LEN + 1];
	for(size_t i = 0; i < ARRAY_LEN(topics); i++){
		client_publish_str(insp, topics[i], topics[i], 1);
		snprintf(ids[i], sizeof(ids[i]), "%s", expect_original(client_expect(w, topics[i], 1)));
	}
	cJSON *doc;
	/* Another client's ACK settles its part, not w's. */
	expect_result(settle_json(other, "r/other", DLQ_COMMAND_ACK, ids[2], &doc), "acked");
	cJSON_Delete(doc);
	expect_result(settle_json(w, "r/w", DLQ_COMMAND_ACK, ids[2], &doc), "acked");
	ck_assert_int_eq((int)json_num(reply_entry(doc, 0), "attempt"), 1);
	ck_assert_int_eq((int)json_num(reply_entry(doc, 0), "maxAttempts"), 3);
	cJSON_Delete(doc);
	expect_reply_error(settle_json(w, "r/w", DLQ_COMMAND_PROGRESS, ids[2], &doc), "already ACKed");
	cJSON_Delete(doc);
	expect_reply_error(settle_json(w, "r/w", DLQ_COMMAND_NACK, ids[2], &doc), "already ACKed");
	cJSON_Delete(doc);
	/* A final NACK, JSON, with its reason; and compact. */
	char json[256];
	snprintf(json, sizeof(json), "{\"commands\":[{\"command\":\"nack\",\"id\":\"%s\",\"final\":true,"
			"\"reason\":\"schema error\"}]}", ids[3]);
	expect_result(command(w, "r/w", json, DLQ_COMMAND_NACK, &doc), "dead-lettered");
	cJSON_Delete(doc);
	mosquitto_property *p = NULL;
	ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, DLQ_PROP_NACK_FINAL, "maybe"), 0);
	ck_assert_int_lt(client_publish(w, DLQ_NACK_TOPIC, ids[4], DLQ_ID_LEN, 1, p), 0x80);
	mosquitto_property_free_all(&p);
	cJSON *refused = expect_reply(client_expect(w, DLQ_RESPONSE_TOPIC, 1), 1);
	expect_reply_error(reply_entry(refused, 0), "\"final\" must be \"true\" or \"false\"");
	cJSON_Delete(refused);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, DLQ_PROP_NACK_FINAL, "true"), 0);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, DLQ_PROP_NACK_REASON, "cannot parse"), 0);
	ck_assert_int_lt(client_publish(w, DLQ_NACK_TOPIC, ids[4], DLQ_ID_LEN, 1, p), 0x80);
	mosquitto_property_free_all(&p);
	const struct it_msg *dl = client_expect(insp, "dead/#", 2);
	ck_assert_ptr_nonnull(dl);
	const struct it_msg *first = client_find_payload(insp, "dead/jobs", "jobs/final", 0);
	const struct it_msg *second = client_find_payload(insp, "dead/jobs", "jobs/compact-final", 0);
	ck_assert_ptr_nonnull(first);
	ck_assert_ptr_nonnull(second);
	expect_dead_letter(first, "jobs/final", ids[3], 1, client_id(w), "jobs/#", "schema error");
	expect_dead_letter(second, "jobs/compact-final", ids[4], 1, client_id(w), "jobs/#", "cannot parse");
	ck_assert_str_eq(msg_user(first, DLQ_PROP_DEAD_LETTER_FINAL), "true");
	ck_assert_str_eq(msg_user(second, DLQ_PROP_DEAD_LETTER_FINAL), "true");
	/* Unknown and malformed ids. */
	expect_reply_error(settle_json(w, "r/w", DLQ_COMMAND_ACK, "AAAAAAAAAAAAAAAA", &doc), "unknown or expired dlq-id");
	cJSON_Delete(doc);
	expect_reply_error(settle_json(w, "r/w", DLQ_COMMAND_ACK, "abc", &doc), "malformed dlq-id");
	cJSON_Delete(doc);
	expect_reply_error(command(w, "r/w", "{\"commands\":[{\"command\":\"ack\"}]}", DLQ_COMMAND_ACK, &doc),
			"missing or non-string \"id\"");
	cJSON_Delete(doc);

	/* The first two run out (retry_to=delivery: a copy for w each). */
	const struct it_msg *c0 = client_expect(w, "jobs/late-ack", 2);
	const struct it_msg *c1 = client_expect(w, "jobs/late-nack", 2);
	expect_retry_copy(c0, "jobs/late-ack", ids[0], 1);
	expect_retry_copy(c1, "jobs/late-nack", ids[1], 1);
	expect_reply_error(settle_json(w, "r/w", DLQ_COMMAND_ACK, ids[0], &doc), "delivery timed out");
	cJSON_Delete(doc);
	expect_reply_error(settle_json(w, "r/w", DLQ_COMMAND_NACK, ids[1], &doc), "delivery timed out");
	cJSON_Delete(doc);
	/* The copies are deliveries of their own: ACKed, they are done. */
	expect_result(settle_json(w, "r/w", DLQ_COMMAND_ACK, dlq_id_of(c0), &doc), "acked");
	ck_assert_int_eq((int)json_num(reply_entry(doc, 0), "attempt"), 2);
	cJSON_Delete(doc);
	expect_result(settle_json(w, "r/w", DLQ_COMMAND_ACK, dlq_id_of(c1), &doc), "acked");
	cJSON_Delete(doc);
	/* The plain policy's record is past its NACK window by now. */
	it_sleep_ms((unsigned)(5 * ack_ms()));
	expect_reply_error(settle_json(w, "r/w", DLQ_COMMAND_ACK, ids[5], &doc), "unknown or expired dlq-id");
	cJSON_Delete(doc);
	it_sleep_ms((unsigned)ack_ms());
	clients_settle(w, other, insp);
	client_expect_exactly(w, "jobs/#", 5 + 2); /* the originals, and the two copies */
	client_expect_exactly(insp, "dead/#", 2);
	client_expect_exactly(w, DLQ_RESPONSE_TOPIC, 1);
	const cJSON *totals = cJSON_GetObjectItemCaseSensitive(status_get(insp, "status/replies", &doc), "totals");
	ck_assert_int_eq((int)json_num(totals, "ackTimeouts"), 2);
	ck_assert_int_eq((int)json_num(totals, "acks"), 4);
	ck_assert_int_eq((int)json_num(totals, "finalNacks"), 2);
	ck_assert_int_eq((int)json_num(totals, "retryCopies"), 2);
	ck_assert_int_eq((int)json_num(totals, "awaitingAck"), 0);
	cJSON_Delete(doc);
}
END_TEST

/* Issue 45, case 5: one dead letter per message. A v5 subscriber with a
 * lasting session that sends no PUBACK drops its connection twice and comes
 * back, and the broker sends the message again each time (attempts 2 and
 * 3); then it hangs, and the deadline dead-letters the message at attempt 3.
 * It comes back once more and gets what its session holds: that resend was
 * taken as a fourth delivery and dead-lettered again by redelivery tracking
 * ("delivered 3 times ... removed from its session"); the deadline had
 * settled it. Then it ends its session (clean start): nothing more. */
START_TEST(test_one_dead_letter_per_message)
{
	char policy[256];
	int ack = 3 * ack_ms(); /* each drop and return fits in it */
	snprintf(policy, sizeof(policy), "ta/# max_attempts=3 dead_letter=dead/ta retry_to=delivery ack_timeout=%dms", ack);
	struct broker *b = deadline_broker(__func__, policy, false, false);
	broker_start(b);
	struct client *insp = client_subscribed(b, "insp", "dead/#");
	char id[64];
	snprintf(id, sizeof(id), "hung-%d", (int)getpid());
	struct raw_options o = { .id = id, .protocol = MQTT_PROTOCOL_V5, .clean = false, .expiry_s = EXPIRY_S,
		.receive_max = 1 };
	struct raw *r = raw_new(b, &o);
	raw_connect(r);
	ck_assert_uint_eq(raw_subscribe(r, "ta/x/#", 1), 1);
	client_publish_str(insp, "ta/x/1", "poison", 1);
	const struct raw_msg *m = raw_expect(r);
	ck_assert_str_eq(m->payload, "poison");
	char dlq_id[DLQ_ID_LEN + 1];
	ck_assert_ptr_nonnull(raw_user(m, DLQ_PROP_ID));
	snprintf(dlq_id, sizeof(dlq_id), "%s", raw_user(m, DLQ_PROP_ID));
	for(int i = 0; i < 2; i++){
		raw_close(r);
		ck_assert_msg(raw_connect(r), "the session was not resumed");
		m = raw_expect(r);
		ck_assert_str_eq(m->payload, "poison");
	}
	char reason[256];
	snprintf(reason, sizeof(reason), "subscriber \"%s\" did not acknowledge it within %dms", id, ack);
	expect_dead_letter(client_expect(insp, "dead/#", 1), "ta/x/1", dlq_id, 3, id, "ta/#", reason);

	/* Back once more: the broker resends what the session holds (with no
	 * deadline), and no second dead letter is made of it. */
	raw_close(r);
	ck_assert_msg(raw_connect(r), "the session was not resumed");
	m = raw_expect(r);
	ck_assert_str_eq(m->payload, "poison");
	raw_close(r);
	raw_free(r);
	o.clean = true;
	o.expiry_s = 0;
	r = raw_new(b, &o);
	ck_assert_msg(!raw_connect(r), "the session was resumed after a clean start");
	clients_settle(insp);
	client_expect_exactly(insp, "dead/#", 1);
	expect_totals(insp, "status/r", "deadLetters", 1, "diverted", 0, "ackTimeouts", 1, "awaitingAck", 0, NULL);
	raw_free(r);
}
END_TEST

/* Issue 45, case 6: an empty payload is held to its deadline too. On 2.0
 * the READ check that routes it carries no payload address to find the
 * message by (the broker stores an empty payload as NULL), and it was never
 * held (ackTimeouts 0, awaitingAck 0). A v5 subscriber that settles nothing
 * gets its retry copy (retry_to=delivery) when the deadline runs out, ACKs
 * the copy, and nothing awaits settlement any more. */
START_TEST(test_an_empty_payload_is_held)
{
	char policy[256];
	snprintf(policy, sizeof(policy), "ta/# max_attempts=3 dead_letter=dead/ta retry_to=delivery ack_timeout=%dms",
			ack_ms());
	struct broker *b = deadline_broker(__func__, policy, false, false);
	broker_start(b);
	struct client *w = client_subscribed(b, "w", "ta/x/#");
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	client_publish(pub, "ta/x/empty", "", 0, 1, NULL);
	const struct it_msg *m = client_expect(w, "ta/x/empty", 1);
	ck_assert_int_eq(m->payloadlen, 0);
	char id[DLQ_ID_LEN + 1];
	snprintf(id, sizeof(id), "%s", expect_original(m));
	const struct it_msg *copy = client_expect(w, "ta/x/empty", 2);
	ck_assert_int_eq(copy->payloadlen, 0);
	expect_retry_copy(copy, "ta/x/empty", id, 1);
	cJSON *doc;
	expect_result(settle_json(w, "r/w", DLQ_COMMAND_ACK, dlq_id_of(copy), &doc), "acked");
	cJSON_Delete(doc);
	clients_settle(w, pub);
	client_expect_exactly(w, "ta/x/empty", 2);
	expect_totals(pub, "status/r", "ackTimeouts", 1, "retryCopies", 1, "acks", 1, "awaitingAck", 0, NULL);

	/* 2.0 routes a QoS 2 message at its PUBREL, which no plugin sees: an
	 * empty one is not held there (docs/semantics.md says so), and its
	 * ACK is accepted as on a policy without ack_timeout. */
	if(BROKER_IS_21()) return;
	client_publish(pub, "ta/x/qos2", "", 0, 2, NULL);
	snprintf(id, sizeof(id), "%s", expect_original(client_expect(w, "ta/x/qos2", 1)));
	clients_settle(w, pub);
	expect_totals(pub, "status/r", "awaitingAck", 0, NULL);
	expect_result(settle_json(w, "r/w", DLQ_COMMAND_ACK, id, &doc), "acked");
	cJSON_Delete(doc);
}
END_TEST

/* Issue 45, case 4 (2.1 lost the copy; run on every line): session expiry 3600, Receive Maximum 1, no PUBACK, nothing
 * settled. The deadline runs out into a retry copy for the same client,
 * which waits in the session behind the unacknowledged original; the
 * client comes back (the broker resends the original) and ends its
 * session (DISCONNECT with session expiry 0). The message ends as one dead
 * letter, and nothing awaits an ACK any more. */
START_TEST(test_copy_behind_a_hung_slot_when_the_session_ends)
{
	char policy[256];
	snprintf(policy, sizeof(policy), "ta/# max_attempts=3 dead_letter=dead/ta retry_to=delivery ack_timeout=%dms",
			ack_ms());
	struct broker *b = deadline_broker(__func__, policy, false, false);
	broker_start(b);
	struct client *insp = client_subscribed(b, "insp", "dead/#");
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
	wait_ack_timeouts(pub, "status/edges", 1);
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
	expect_totals(pub, "status/edges", "deadLetters", 1, "awaitingAck", 0, NULL);
	client_free(pub);
	client_free(insp);
}
END_TEST

/* The dead letters the store keeps, and the totals, as getStatus shows them
 * to c: how many letters, the first one's reason. */
static size_t kept_letters(struct client *c, const char *reply, char *reason, size_t size)
{
	cJSON *doc;
	const cJSON *e = command(c, reply, "{\"commands\":[{\"command\":\"listDeadLetters\"}]}", DLQ_COMMAND_LIST_DEAD_LETTERS,
			&doc);
	const cJSON *letters = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "data"), "letters");
	size_t n = (size_t)cJSON_GetArraySize(letters);
	if(n && reason) snprintf(reason, size, "%s", json_str(cJSON_GetArrayItem(letters, 0), "reason"));
	cJSON_Delete(doc);
	return n;
}

/* A delivery whose deadline runs out while the broker is down (SIGTERM:
 * saved at shutdown; SIGKILL: journaled) is a failed attempt at the first
 * tick after the start: one dead letter (max_attempts 1), kept; a second
 * restart makes no second one. */
static void restart_case(bool kill)
{
	char policy[256];
	snprintf(policy, sizeof(policy), "jobs/# max_attempts=1 dead_letter=dead/jobs ack_timeout=%dms", 2 * ack_ms());
	struct broker *b = deadline_broker(kill ? "restart-kill" : "restart-term", policy, true, kill);
	broker_conf(b, "plugin_opt_dead_letter_access control");
	broker_start(b);
	struct client *hung = client_new(b, "hung", MQTT_PROTOCOL_V5);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	char hung_id[128];
	snprintf(hung_id, sizeof(hung_id), "%s", client_id(hung));
	client_subscribe(hung, "jobs/#", 1);
	client_publish_str(pub, "jobs/down", "down", 1);
	expect_original(client_expect(hung, "jobs/#", 1));
	client_sync(hung);
	if(kill){
		broker_kill(b);
	}else{
		broker_shutdown(b);
	}
	client_free(hung);
	client_free(pub);
	it_sleep_ms((unsigned)(3 * ack_ms()));
	broker_start(b);
	pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	char reason[256] = "", want[256];
	snprintf(want, sizeof(want), "subscriber \"%s\" did not acknowledge it within %dms", hung_id, 2 * ack_ms());
	uint64_t until = it_now_ms() + (uint64_t)HARNESS_WAIT_MS;
	while(kept_letters(pub, "r/pub", reason, sizeof(reason)) == 0){
		ck_assert_msg(it_now_ms() < until, "no dead letter after the restart");
		it_sleep_ms(50);
	}
	ck_assert_str_eq(reason, want);
	cJSON *doc;
	const cJSON *totals = cJSON_GetObjectItemCaseSensitive(status_get(pub, "status/r", &doc), "totals");
	ck_assert_int_eq((int)json_num(totals, "ackTimeouts"), 1);
	ck_assert_int_eq((int)json_num(totals, "awaitingAck"), 0);
	cJSON_Delete(doc);
	client_free(pub);
	/* Again: the letter is kept, and nothing runs out a second time. */
	if(kill){
		it_sleep_ms(100);
		broker_kill(b);
	}else{
		broker_shutdown(b);
	}
	broker_start(b);
	pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	it_sleep_ms(HARNESS_SETTLE_MS);
	ck_assert_uint_eq(kept_letters(pub, "r/pub", NULL, 0), 1);
	totals = cJSON_GetObjectItemCaseSensitive(status_get(pub, "status/r", &doc), "totals");
	ck_assert_int_eq((int)json_num(totals, "ackTimeouts"), 0);
	ck_assert_int_eq((int)json_num(totals, "deadLetters"), 0);
	cJSON_Delete(doc);
}

START_TEST(test_deadline_across_sigterm)
{
	restart_case(false);
}
END_TEST

START_TEST(test_deadline_across_sigkill)
{
	restart_case(true);
}
END_TEST

/* The retained value of a $SYS topic c subscribed to, once it is want
 * (fails after the harness's wait). */
static void wait_sys(struct client *c, const char *name, const char *want)
{
	char topic[256];
	snprintf(topic, sizeof(topic), DLQ_SYS_TOPIC_PREFIX "%s", name);
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	while(client_find_payload(c, topic, want, 0) == NULL){
		if(it_now_ms() > deadline){
			client_dump(c, topic);
			ck_abort_msg("no \"%s\" on %s within %d ms", want, topic, HARNESS_WAIT_MS);
		}
		client_wait(c, topic, client_count(c, topic) + 1, 100);
	}
}

/* What a $SYS-to-Prometheus exporter (sapcc/mosquitto-exporter) makes of a
 * topic: "$SYS/" dropped, each '/' and ' ' an '_'; true when that is a
 * valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), written to out. */
static bool metric_name(const char *topic, char *out, size_t size)
{
	snprintf(out, size, "%s", topic + strlen("$SYS/"));
	for(char *p = out; *p; p++){
		if(*p == '/' || *p == ' ') *p = '_';
		bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' || *p == ':'
				|| (p > out && *p >= '0' && *p <= '9');
		if(!ok) return false;
	}
	return true;
}

/* Issue 38: every dead letter says why in dead-letter-cause, one word, and
 * is counted by cause, per policy and in total, in getStatus and $SYS (one
 * number per topic, each a distinct valid Prometheus name as an exporter
 * makes it). Four ways: the last attempt NACKed (nack), a final NACK at
 * attempt 1 of 2 (final), the last attempt's ack_timeout ran out
 * (ack_timeout), a retry copy whose subscriber left without a session
 * (subscriber_gone). */
START_TEST(test_dead_letter_causes)
{
	char jobs[256];
	int ack = ack_ms();
	snprintf(jobs, sizeof(jobs), "jobs/# max_attempts=2 dead_letter=dead/jobs ack_timeout=%dms", ack);
	struct broker *b = deadline_broker(__func__, jobs, false, false);
	broker_conf(b, "plugin_opt_policy gone/# max_attempts=2 dead_letter=dead/gone");
	broker_conf(b, "plugin_opt_sys_interval 1s");
	broker_start(b);
	struct client *insp = client_subscribed(b, "insp", "dead/#");
	struct client *sys = client_subscribed(b, "sys", DLQ_SYS_TOPIC_PREFIX "#");
	struct client *w = client_subscribed(b, "w", "jobs/w/#");
	struct client *hung = client_subscribed(b, "hung", "jobs/h/#");
	struct client *leaver = client_subscribed(b, "leaver", "gone/#");
	wait_sys(sys, "dead_letters_by_cause/nack", "0");

	/* nack: NACKed at attempt 2 of 2. */
	client_publish_str(insp, "jobs/w/nack", "nack", 1);
	char id_nack[DLQ_ID_LEN + 1];
	snprintf(id_nack, sizeof(id_nack), "%s", expect_original(client_expect(w, "jobs/w/nack", 1)));
	client_nack(w, id_nack, "bad input");
	const char *copy = expect_retry_copy(client_expect(w, "jobs/w/nack", 2), "jobs/w/nack", id_nack, 1);
	client_nack(w, copy, "still bad");
	const struct it_msg *dl = client_expect(insp, "dead/#", 1);
	expect_dead_letter(dl, "jobs/w/nack", id_nack, 2, client_id(w), "jobs/#", "still bad");
	ck_assert_str_eq(msg_user(dl, DLQ_PROP_DEAD_LETTER_CAUSE), DLQ_CAUSE_NACK);

	/* final: a final NACK at attempt 1 of 2. */
	client_publish_str(insp, "jobs/w/final", "final", 1);
	char id_final[DLQ_ID_LEN + 1];
	snprintf(id_final, sizeof(id_final), "%s", expect_original(client_expect(w, "jobs/w/final", 1)));
	mosquitto_property *p = NULL;
	ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, DLQ_PROP_NACK_FINAL, "true"), 0);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, DLQ_PROP_NACK_REASON, "schema"), 0);
	ck_assert_int_lt(client_publish(w, DLQ_NACK_TOPIC, id_final, DLQ_ID_LEN, 1, p), 0x80);
	mosquitto_property_free_all(&p);
	dl = client_expect(insp, "dead/#", 2);
	expect_dead_letter(dl, "jobs/w/final", id_final, 1, client_id(w), "jobs/#", "schema");
	ck_assert_str_eq(msg_user(dl, DLQ_PROP_DEAD_LETTER_CAUSE), DLQ_CAUSE_FINAL);
	ck_assert_str_eq(msg_user(dl, DLQ_PROP_DEAD_LETTER_FINAL), "true");

	/* ack_timeout: hung settles neither the original nor its copy. */
	client_publish_str(insp, "jobs/h/hang", "hang", 1);
	char id_hang[DLQ_ID_LEN + 1];
	snprintf(id_hang, sizeof(id_hang), "%s", expect_original(client_expect(hung, "jobs/h/hang", 1)));
	expect_retry_copy(client_expect(hung, "jobs/h/hang", 2), "jobs/h/hang", id_hang, 1);
	dl = client_expect(insp, "dead/#", 3);
	char reason[256];
	snprintf(reason, sizeof(reason), "subscriber \"%s\" did not acknowledge it within %dms", client_id(hung), ack);
	expect_dead_letter(dl, "jobs/h/hang", id_hang, 2, client_id(hung), "jobs/#", reason);
	ck_assert_str_eq(msg_user(dl, DLQ_PROP_DEAD_LETTER_CAUSE), DLQ_CAUSE_ACK_TIMEOUT);

	/* subscriber_gone: leaver gets its retry copy and leaves without a
	 * session, neither NACKing nor confirming it. */
	client_publish_str(insp, "gone/x", "gone", 1);
	char id_gone[DLQ_ID_LEN + 1], leaver_id[128];
	snprintf(id_gone, sizeof(id_gone), "%s", expect_original(client_expect(leaver, "gone/x", 1)));
	client_nack(leaver, id_gone, NULL);
	expect_retry_copy(client_expect(leaver, "gone/x", 2), "gone/x", id_gone, 1);
	snprintf(leaver_id, sizeof(leaver_id), "%s", client_id(leaver));
	client_free(leaver);
	dl = client_expect(insp, "dead/#", 4);
	ck_assert_str_eq(dl->topic, "dead/gone");
	ck_assert_str_eq(msg_user(dl, DLQ_PROP_ORIGIN_ID), id_gone);
	ck_assert_str_eq(msg_user(dl, DLQ_PROP_DEAD_LETTER_CLIENT), leaver_id);
	ck_assert_str_eq(msg_user(dl, DLQ_PROP_DEAD_LETTER_CAUSE), DLQ_CAUSE_SUBSCRIBER_GONE);
	ck_assert_msg(strstr(msg_user(dl, DLQ_PROP_DEAD_LETTER_REASON), "left without a session"), "reason \"%s\"",
			msg_user(dl, DLQ_PROP_DEAD_LETTER_REASON));
	clients_settle(insp, w, hung);
	client_expect_exactly(insp, "dead/#", 4);

	/* getStatus: by cause, in total and per policy; they add up to
	 * deadLetters. */
	static const char *const words[] = {
		DLQ_CAUSE_NACK, DLQ_CAUSE_FINAL, DLQ_CAUSE_ACK_TIMEOUT, DLQ_CAUSE_REDELIVERY_LIMIT, DLQ_CAUSE_SUBSCRIBER_GONE,
		DLQ_CAUSE_NO_SESSION, DLQ_CAUSE_OFFLINE_QOS0, DLQ_CAUSE_RESTART, DLQ_CAUSE_UNKNOWN,
	};
	static const int total[] = { 1, 1, 1, 0, 1, 0, 0, 0, 0 };
	static const int of_jobs[] = { 1, 1, 1, 0, 0, 0, 0, 0, 0 };
	static const int of_gone[] = { 0, 0, 0, 0, 1, 0, 0, 0, 0 };
	cJSON *doc;
	const cJSON *data = status_get(insp, "r/insp", &doc);
	const cJSON *groups[] = {
		cJSON_GetObjectItemCaseSensitive(data, "totals"), status_policy(data, "jobs/#"), status_policy(data, "gone/#"),
	};
	const int *wants[] = { total, of_jobs, of_gone };
	for(size_t g = 0; g < ARRAY_LEN(groups); g++){
		const cJSON *by = cJSON_GetObjectItemCaseSensitive(groups[g], "deadLettersByCause");
		ck_assert_msg(cJSON_IsObject(by), "group %zu: no deadLettersByCause", g);
		ck_assert_int_eq(cJSON_GetArraySize(by), (int)ARRAY_LEN(words));
		int sum = 0;
		for(size_t i = 0; i < ARRAY_LEN(words); i++){
			int n = (int)json_num(by, words[i]);
			ck_assert_msg(n == wants[g][i], "group %zu: deadLettersByCause.%s is %d, expected %d", g, words[i], n,
					wants[g][i]);
			sum += n;
		}
		ck_assert_int_eq(sum, (int)json_num(groups[g], "deadLetters"));
	}
	cJSON_Delete(doc);

	/* $SYS: one number per topic, the same counts. */
	char name[128], value[16];
	wait_sys(sys, "dead_letters", "4");
	for(size_t i = 0; i < ARRAY_LEN(words); i++){
		snprintf(name, sizeof(name), "dead_letters_by_cause/%s", words[i]);
		snprintf(value, sizeof(value), "%d", total[i]);
		wait_sys(sys, name, value);
		snprintf(name, sizeof(name), "policies/0/dead_letters_by_cause/%s", words[i]);
		snprintf(value, sizeof(value), "%d", of_jobs[i]);
		wait_sys(sys, name, value);
		snprintf(name, sizeof(name), "policies/1/dead_letters_by_cause/%s", words[i]);
		snprintf(value, sizeof(value), "%d", of_gone[i]);
		wait_sys(sys, name, value);
	}
	/* Each topic the plugin published is a valid metric name of its own:
	 * no two topics make the same. */
	size_t n = client_count(sys, DLQ_SYS_TOPIC_PREFIX "#");
	struct { const char *topic; char metric[128]; } *seen = calloc(n, sizeof(*seen));
	ck_assert_ptr_nonnull(seen);
	size_t distinct = 0;
	for(size_t i = 0; i < n; i++){
		const struct it_msg *m = client_msg(sys, DLQ_SYS_TOPIC_PREFIX "#", i);
		char metric[128];
		ck_assert_msg(metric_name(m->topic, metric, sizeof(metric)), "%s makes no valid metric name (%s)", m->topic,
				metric);
		size_t k = 0;
		while(k < distinct && strcmp(seen[k].topic, m->topic)){
			ck_assert_msg(strcmp(seen[k].metric, metric), "%s and %s make the same metric %s", seen[k].topic,
					m->topic, metric);
			k++;
		}
		if(k == distinct){
			seen[distinct].topic = m->topic;
			snprintf(seen[distinct].metric, sizeof(seen[distinct].metric), "%s", metric);
			distinct++;
		}
	}
	ck_assert_uint_ge(distinct, 3 * ARRAY_LEN(words));
	free(seen);
}
END_TEST

int main(void)
{
	return harness_run(check_suite("deadlines", harness_tcase("deadlines"), CHECK_TESTS(test_pool_with_a_hung_worker,
			test_progress_keeps_a_long_job_alive, test_a_backlog_never_runs_out, test_replies,
			test_one_dead_letter_per_message, test_an_empty_payload_is_held,
			test_copy_behind_a_hung_slot_when_the_session_ends, test_deadline_across_sigterm,
			test_deadline_across_sigkill, test_dead_letter_causes)));
}
