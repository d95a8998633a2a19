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
 *   retry copies run out in turn into the dead letter at max_attempts;
 * - (2.0) a worker pool as the README sets it up, a healthy worker and a
 *   hung one that PUBACKs and never settles: the jobs left to the hung
 *   worker alone run out at each delivery into one dead letter each, also
 *   when the broker stores a retry copy in the buffer it freed for the
 *   chain's copy before (issue 45, case 2).
 * Deadlines here are generous upper bounds, never timed assertions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
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
	struct client *insp = client_subscribed(b, "insp", "dead/#");
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
	struct client *insp = client_subscribed(b, "insp", "dead/#");
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


/* ---- issue 45, case 2: a worker pool (2.0) ---- */

#define POOL_SHARED "$share/workers/jobs/#"
#define POOL_JOBS 6
#define POOL_LONE 2

struct pool {
	struct client *good, *hung, *insp, *pub;
	size_t seen;   /* good's jobs/# messages ACKed */
};

/* The README's worker-pool configuration for 2.0.11 (persistence, a
 * 10 s autosave, a window of one, the journaled state file, redelivery
 * tracking, lasting v5 sessions) with the issue's policy, started. */
static struct broker *pool_broker(const char *label)
{
	struct broker *b = broker_new(label);
	broker_conf(b, "persistence true");
	broker_conf(b, "persistence_location %s", broker_path(b, ""));
	broker_conf(b, "autosave_interval 10");
	broker_conf(b, "max_inflight_messages 1");
	broker_plugin(b);
	broker_conf(b, "plugin_opt_policy jobs/# max_attempts=%d dead_letter=dead/jobs ack_timeout=%dms retry_to=jobs/retry",
			MAX_ATTEMPTS, ack_ms());
	broker_conf(b, "plugin_opt_state_file %s", broker_path(b, "dlq.state"));
	broker_conf(b, "plugin_opt_state_save_on_change true");
	broker_conf(b, "plugin_opt_redelivery_tracking allow");
	broker_conf(b, "plugin_opt_v5_sessions_persist true");
	broker_start(b);
	return b;
}

/* The healthy worker at work for about ms: it ACKs each job as it comes
 * (its PUBACK went at once: libmosquitto's). */
static void pool_serve(struct pool *p, int ms)
{
	uint64_t until = it_now_ms() + (uint64_t)ms;
	do{
		client_wait(p->good, "jobs/#", p->seen + 1, 20);
		while(p->seen < client_count(p->good, "jobs/#")){
			const char *id = dlq_id_of(client_msg(p->good, "jobs/#", p->seen++));
			ck_assert_int_lt(client_publish(p->good, DLQ_ACK_TOPIC, id, (int)strlen(id), 1, NULL), 0x80);
		}
	}while(it_now_ms() < until);
}

/* How many deliveries of payload c received on jobs/#. */
static size_t deliveries_of(struct client *c, const char *payload)
{
	size_t n = 0;
	while(client_find_payload(c, "jobs/#", payload, n)) n++;
	return n;
}

/* Issue 45, case 2 (2.0 only): in a worker pool, a job left to a hung
 * worker that PUBACKs and never settles must run out at each of its
 * deliveries into a dead letter. On 2.0 the plugin knows a delivery by the
 * address of the broker's stored payload in its READ check. Each retry copy
 * of one chain has the same topic (retry_to) and payload, and when the hung
 * worker's PUBACK frees copy k's stored message before copy k+1 is stored,
 * glibc's malloc hands copy k+1 the very buffer copy k had: the plugin took
 * copy k+1's check for copy k, whose clock had run out already, and copy
 * k+1 waited on no clock for ever, neither retried nor dead-lettered (fixed
 * in plugin/model/redelivery.c, newer_copy).
 *
 * The issue saw it with 6-byte payloads, which share glibc's smallest size
 * class (chunks of 32 bytes) with most of what the broker allocates, so
 * the reuse came only from some sequences of events. Here the two jobs
 * handed to the hung worker alone have payloads of 200 and 232 bytes: the
 * broker stores a payload in malloc(len + 1) (2.0's src/database.c,
 * db__messages_easy_queue), i.e. 201 bytes (the 224-byte
 * chunks, requests of 201 to 216) and 233 bytes (the 256-byte chunks,
 * requests of 233 to 248), classes nothing else allocates while the copies
 * go round (the plugin's own buffer for a copy, malloc(len), is in the
 * classes below: 208 and 240; the packets that carry them are larger). A
 * freed copy's buffer is then the next one glibc's LIFO tcache gives out in
 * its class, to the next copy of the same chain: every run, without the
 * fix, the chains stop at their second copy (retry-count 2). The jobs
 * before them go through a healthy worker and the hung one as the issue's
 * pool did; each ends ACKed once or dead-lettered once. */
START_TEST(test_a_pool_job_left_to_a_hung_worker)
{
	if(BROKER_IS_21()){
		printf("broker %d: issue 45's case 2 is 2.0's (2.1 finds a delivery by its dlq-id): skipped\n",
				broker_version());
		return;
	}
	struct broker *b = pool_broker(__func__);
	struct pool p = { 0 };
	p.good = client_new_session(b, "good", MQTT_PROTOCOL_V5, 3600);
	p.hung = client_new_session(b, "hung", MQTT_PROTOCOL_V5, 3600);
	p.insp = client_new(b, "insp", MQTT_PROTOCOL_V5);
	p.pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	client_subscribe(p.insp, "dead/#", 1);
	client_subscribe(p.good, POOL_SHARED, 1);
	client_subscribe(p.hung, POOL_SHARED, 1);

	/* The pool: jobs shared by the two workers until each is ACKed or
	 * dead; on 2.0 the hung worker's deliveries run out one after
	 * another, a deadline each. */
	char payload[POOL_JOBS + POOL_LONE][256];
	for(int i = 0; i < POOL_JOBS; i++){
		char topic[32];
		snprintf(payload[i], sizeof(payload[i]), "job-%02d", i + 1);
		snprintf(topic, sizeof(topic), "jobs/%s", payload[i]);
		client_publish_str(p.pub, topic, payload[i], 1);
	}
	uint64_t until = it_now_ms() + (uint64_t)HARNESS_WAIT_MS + (uint64_t)POOL_JOBS * MAX_ATTEMPTS * (uint64_t)ack_ms();
	while(p.seen + client_count(p.insp, "dead/#") < POOL_JOBS){
		if(it_now_ms() >= until){
			client_dump(p.good, "jobs/#");
			client_dump(p.hung, "jobs/#");
			client_dump(p.insp, "dead/#");
		}
		ck_assert_msg(it_now_ms() < until, "after %zu ACKs and %zu dead letters, nothing more came", p.seen,
				client_count(p.insp, "dead/#"));
		pool_serve(&p, 50);
	}
	size_t pool_dead = client_count(p.insp, "dead/#");

	/* The healthy worker leaves the group (and stays connected): the next
	 * jobs are the hung worker's alone. */
	client_unsubscribe(p.good, POOL_SHARED);
	static const size_t lone_len[POOL_LONE] = { 200, 232 };
	uint64_t published = it_now_ms();
	for(int i = 0; i < POOL_LONE; i++){
		char *pl = payload[POOL_JOBS + i];
		int n = snprintf(pl, sizeof(payload[0]), "lone-%d ", i + 1);
		memset(pl + n, 'x', lone_len[i] - (size_t)n);
		pl[lone_len[i]] = '\0';
		char topic[32];
		snprintf(topic, sizeof(topic), "jobs/lone-%d", i + 1);
		client_publish_str(p.pub, topic, pl, 1);
	}
	/* Three deliveries each, one deadline each, one after another; far
	 * more is allowed. */
	int bound = HARNESS_WAIT_MS + 2 * POOL_LONE * MAX_ATTEMPTS * ack_ms();
	until = it_now_ms() + (uint64_t)bound;
	while(client_count(p.insp, "dead/#") < pool_dead + POOL_LONE && it_now_ms() < until){
		pool_serve(&p, 50);
	}
	for(int i = 0; i < POOL_LONE; i++){
		const char *pl = payload[POOL_JOBS + i];
		const struct it_msg *dl = client_find_payload(p.insp, "dead/#", pl, 0);
		if(dl == NULL){
			client_dump(p.hung, "jobs/#");
			client_dump(p.insp, "dead/#");
		}
		ck_assert_msg(dl != NULL, "lone-%d (%zu bytes): no dead letter within %d ms; the hung worker had %zu of its "
				"deliveries (the last one never ran out)", i + 1, lone_len[i], bound, deliveries_of(p.hung, pl));
		printf("broker %d: lone-%d (%zu bytes) dead-lettered %llu ms after it was published (ack_timeout %d ms)\n",
				broker_version(), i + 1, lone_len[i], (unsigned long long)(dl->at_ms - published), ack_ms());
	}

	/* Two deadlines more: nothing ACKed comes again, nothing else runs
	 * out. */
	pool_serve(&p, 2 * ack_ms());
	clients_settle(p.good, p.hung, p.insp, p.pub);
	size_t dead = 0;
	char reason[256];
	snprintf(reason, sizeof(reason), "subscriber \"hung\" did not acknowledge it within %dms", ack_ms());
	for(int i = 0; i < POOL_JOBS + POOL_LONE; i++){
		size_t at_good = deliveries_of(p.good, payload[i]), at_hung = deliveries_of(p.hung, payload[i]);
		const struct it_msg *dl = client_find_payload(p.insp, "dead/#", payload[i], 0);
		if(i >= POOL_JOBS){
			/* The hung worker's alone: its three deliveries (the original,
			 * retry-count 1 and 2), then the dead letter. */
			ck_assert_msg(at_good == 0 && at_hung == MAX_ATTEMPTS, "lone-%d: %zu deliveries to good, %zu to hung",
					i - POOL_JOBS + 1, at_good, at_hung);
			for(size_t k = 0; k < at_hung; k++){
				const char *rc = msg_user(client_find_payload(p.hung, "jobs/#", payload[i], k), DLQ_PROP_RETRY_COUNT);
				ck_assert_uint_eq(rc ? (unsigned)atoi(rc) : 0, k);
			}
			ck_assert_ptr_nonnull(dl);
		}
		if(dl){
			ck_assert_msg(at_good == 0 && at_hung == MAX_ATTEMPTS, "%.8s: dead-lettered after %zu deliveries to hung "
					"and %zu to good", payload[i], at_hung, at_good);
			ck_assert_msg(client_find_payload(p.insp, "dead/#", payload[i], 1) == NULL, "%.8s: dead-lettered twice",
					payload[i]);
			/* Its original was the hung worker's first delivery of it. */
			const struct it_msg *original = client_find_payload(p.hung, "jobs/#", payload[i], 0);
			expect_dead_letter(dl, original->topic, expect_original(original), MAX_ATTEMPTS, "hung", "jobs/#", reason);
			dead++;
		}else{
			/* ACKed once, by the healthy worker, after the hung worker's
			 * deliveries ran out. */
			ck_assert_msg(at_good == 1 && at_hung < MAX_ATTEMPTS, "%s: %zu deliveries to good, %zu to hung, no dead letter",
					payload[i], at_good, at_hung);
		}
	}
	ck_assert_uint_eq(p.seen + dead, POOL_JOBS + POOL_LONE);
	client_expect_exactly(p.insp, "dead/#", dead);
	expect_nothing_awaited(p.insp);
	ck_assert_int_eq(total(p.insp, "acks"), (int)p.seen);
	ck_assert_int_eq(total(p.insp, "deadLetters"), (int)dead);
	printf("broker %d: pool of %d jobs: %zu ACKed, %zu dead-lettered\n", broker_version(), POOL_JOBS, p.seen,
			pool_dead);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("deadline_sessions");
	check_add(s, harness_tcase("deadline_sessions"), CHECK_TESTS(test_a_subscriber_that_leaves_without_a_session,
			test_a_session_resumed_without_subscribing));
	check_add(s, harness_tcase("pool"), CHECK_TESTS(test_a_pool_job_left_to_a_hung_worker));
	return harness_run(s);
}
