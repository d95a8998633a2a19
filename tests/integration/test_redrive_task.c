/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Redrive tasks (issue 38, part 3) against the real broker: a task over
 * 2,000 kept letters at 200 a second (every letter reaches the workers
 * once, at the rate: getStatus' counts, sampled, never pass rate times the
 * time between two samples plus one burst, and its progress only grows);
 * a second task on the same policy refused, a cancel that stops one; bad
 * rates, filters and targets refused with the member and the reason; and a
 * SIGTERM in the middle of a task, which goes on after the restart where
 * it stopped, nothing sent twice or lost; and dlqctl redrive --all, which
 * follows a task with plain lines when its output is not a terminal, and
 * with a progress bar on one (a pseudo-terminal), the bar ending at the
 * task's final counts.
 *
 * Letters are made in bulk by a "mill": a raw libmosquitto client that
 * NACKs every message of jobs/# as it arrives (a compact NACK), under a
 * policy of max_attempts=1. Once they are kept the mill is gone, and a
 * counting worker takes its place: the redriven copies go to the letters'
 * origin topics, and it counts each payload ("n-<i>") it receives.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "flood.h"
#include "harness.h"
#include "letters_common.h"
#include "proc.h"
#include "test_util.h"

#define MAX_LETTERS 2000
#define RATE 200
#define BURST 21 /* rate / 10 + 1: what the docs say a burst is */

/* ---- a raw client: NACKs or counts every message of jobs/# ---- */

struct mill {
	struct mosquitto *mosq;
	pthread_mutex_t lock;
	bool nack;                      /* NACK each message; else count it */
	unsigned seen[MAX_LETTERS];     /* by payload index: copies of distinct dlq-ids */
	char ids[MAX_LETTERS][24];      /* the dlq-id of each one's copy */
	size_t got;                     /* distinct copies */
	size_t resent;                  /* the broker's resends (the same dlq-id again: QoS 1's DUP) */
	size_t odd;                     /* payloads not of the form n-<i> */
	bool subscribed;                /* its SUBACK came */
};

static void mill_connected(struct mosquitto *mosq, void *obj, int rc, int flags, const mosquitto_property *props)
{
	(void)obj;
	(void)flags;
	(void)props;
	if(rc == 0) mosquitto_subscribe_v5(mosq, NULL, "jobs/#", 1, 0, NULL);
}

static void mill_subscribed(struct mosquitto *mosq, void *obj, int mid, int n, const int *qos,
		const mosquitto_property *props)
{
	(void)mosq;
	(void)mid;
	(void)n;
	(void)qos;
	(void)props;
	struct mill *w = obj;
	pthread_mutex_lock(&w->lock);
	w->subscribed = true;
	pthread_mutex_unlock(&w->lock);
}

static void mill_message(struct mosquitto *mosq, void *obj, const struct mosquitto_message *m,
		const mosquitto_property *props)
{
	struct mill *w = obj;
	if(w->nack){
		char id[64];
		if(props_user(props, DLQ_PROP_ID, id, sizeof(id))){
			mosquitto_publish_v5(mosq, NULL, DLQ_NACK_TOPIC, (int)strlen(id), id, 1, false, NULL);
		}
		return;
	}
	char text[32] = "";
	int n = m->payloadlen < (int)sizeof(text) - 1 ? m->payloadlen : (int)sizeof(text) - 1;
	memcpy(text, m->payload, (size_t)n);
	text[n] = '\0';
	int i = -1;
	char id[24] = "";
	props_user(props, DLQ_PROP_ID, id, sizeof(id));
	pthread_mutex_lock(&w->lock);
	if(sscanf(text, "n-%d", &i) == 1 && i >= 0 && i < MAX_LETTERS){
		/* A copy the broker sends again after a restart (it was sent and
		 * not acknowledged before) carries the dlq-id it had: the plugin
		 * published it once. Another dlq-id is another copy. */
		if(w->seen[i] && id[0] && !strcmp(id, w->ids[i])){
			w->resent++;
		}else{
			w->seen[i]++;
			w->got++;
			snprintf(w->ids[i], sizeof(w->ids[i]), "%s", id);
		}
	}else{
		w->odd++;
	}
	pthread_mutex_unlock(&w->lock);
}

/* A mill connected to b as id; persistent (a session that outlives a
 * restart of a broker with persistence) or not. */
static struct mill *mill_new(struct broker *b, const char *id, bool nack, bool persistent)
{
	struct mill *w = calloc(1, sizeof(*w));
	ck_assert_ptr_nonnull(w);
	pthread_mutex_init(&w->lock, NULL);
	w->nack = nack;
	w->mosq = mosquitto_new(id, !persistent, w);
	ck_assert_ptr_nonnull(w->mosq);
	mosquitto_int_option(w->mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
	mosquitto_connect_v5_callback_set(w->mosq, mill_connected);
	mosquitto_message_v5_callback_set(w->mosq, mill_message);
	mosquitto_subscribe_v5_callback_set(w->mosq, mill_subscribed);
	mosquitto_reconnect_delay_set(w->mosq, 1, 1, false);
	mosquitto_property *props = NULL;
	if(persistent) ck_assert_int_eq(mosquitto_property_add_int32(&props, MQTT_PROP_SESSION_EXPIRY_INTERVAL, 3600), 0);
	ck_assert_int_eq(mosquitto_connect_bind_v5(w->mosq, broker_socket(b), 0, 60, NULL, props), 0);
	mosquitto_property_free_all(&props);
	ck_assert_int_eq(mosquitto_loop_start(w->mosq), 0);
	/* Subscribed before anything is published for it. */
	uint64_t deadline = it_now_ms() + (uint64_t)HARNESS_WAIT_MS;
	for(;;){
		pthread_mutex_lock(&w->lock);
		bool done = w->subscribed;
		pthread_mutex_unlock(&w->lock);
		if(done) break;
		ck_assert_msg(it_now_ms() < deadline, "%s did not subscribe", id);
		it_sleep_ms(10);
	}
	return w;
}

static void mill_free(struct mill *w)
{
	mosquitto_disconnect(w->mosq);
	mosquitto_loop_stop(w->mosq, false);
	mosquitto_destroy(w->mosq);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

static size_t mill_got(struct mill *w)
{
	pthread_mutex_lock(&w->lock);
	size_t n = w->got;
	pthread_mutex_unlock(&w->lock);
	return n;
}

/* Waits until w received n messages in all (HARNESS_WAIT_MS after the
 * last one came). */
static void mill_wait(struct mill *w, size_t n)
{
	size_t last = mill_got(w);
	uint64_t deadline = it_now_ms() + (uint64_t)HARNESS_WAIT_MS;
	while(mill_got(w) < n){
		if(mill_got(w) != last){
			last = mill_got(w);
			deadline = it_now_ms() + (uint64_t)HARNESS_WAIT_MS;
		}
		ck_assert_msg(it_now_ms() < deadline, "the worker got %zu messages, expected %zu", mill_got(w), n);
		it_sleep_ms(20);
	}
}

/* Fails unless w received a copy of each of the payloads 0 to n - 1, one
 * each (the broker's own resends of one aside), and nothing else. */
static void mill_expect_each_once(struct mill *w, int n)
{
	pthread_mutex_lock(&w->lock);
	int missing = 0, twice = 0;
	for(int i = 0; i < n; i++){
		if(w->seen[i] == 0) missing++;
		if(w->seen[i] > 1) twice++;
	}
	size_t got = w->got, odd = w->odd, resent = w->resent;
	pthread_mutex_unlock(&w->lock);
	if(resent) fprintf(stderr, "the broker sent %zu copies again (QoS 1, unacknowledged before a restart)\n", resent);
	ck_assert_msg(missing == 0 && twice == 0 && got == (size_t)n && odd == 0,
			"the worker got %zu messages (%zu odd): %d of %d letters missing, %d twice", got, odd, missing, n, twice);
}

/* n letters of jobs/<i % 10> with payloads "n-<i>", made by a mill's
 * NACKs, and kept (insp waits for them). */
static void make_letters(struct broker *b, struct client *insp, int n)
{
	struct mill *m = mill_new(b, "mill", true, false);
	struct flood *f = flood_new(b, "pub");
	for(int i = 0; i < n; i++){
		char topic[32], payload[32];
		snprintf(topic, sizeof(topic), "jobs/%d", i % 10);
		snprintf(payload, sizeof(payload), "n-%d", i);
		flood_publish(f, topic, payload, (int)strlen(payload), 1);
	}
	flood_drain(f, HARNESS_WAIT_MS);
	flood_free(f);
	uint64_t deadline = it_now_ms() + (uint64_t)harness_deadline_ms(60000);
	double kept;
	while((kept = status_num(insp, NULL, "keptDeadLetters")) != n){
		ck_assert_msg(it_now_ms() < deadline, "%g letters kept, expected %d", kept, n);
		it_sleep_ms(100);
	}
	mill_free(m);
}

/* A broker with the store and policy jobs/# (and mail/#), every NACK a
 * dead letter, queues unbounded (the mill and the worker take thousands of
 * messages at once); with durable, the broker's persistence and a state
 * file (with journal, plugin_opt_state_save_on_change). */
static struct broker *task_broker(const char *label, bool durable, bool journal)
{
	struct broker *b = broker_new(label);
	broker_conf(b, "max_queued_messages 0");
	if(durable){
		broker_conf(b, "persistence true");
		broker_conf(b, "persistence_location %s", broker_path(b, ""));
	}
	broker_plugin(b);
	if(durable) broker_conf(b, "plugin_opt_state_file %s", broker_path(b, STATE_NAME));
	if(journal) broker_conf(b, "plugin_opt_state_save_on_change true");
	broker_conf(b, "plugin_opt_%s", JOBS);
	broker_conf(b, "plugin_opt_%s", MAIL);
	start_store(b);
	return b;
}

/* A broker of task_broker with n letters kept, and an inspector. */
static struct broker *broker_with_letters(const char *label, bool durable, bool journal, int n, struct client **insp)
{
	struct broker *b = task_broker(label, durable, journal);
	*insp = ops_client(b, "inspector");
	make_letters(b, *insp, n);
	return b;
}

/* ---- commands ---- */

/* startRedriveTask with the members of the JSON text members (an object's
 * inside, may be ""); returns the reply, *e its response. */
static cJSON *start_task(struct client *c, const char *members, const cJSON **e)
{
	char text[512];
	snprintf(text, sizeof(text), "{\"command\":\"" DLQ_COMMAND_START_REDRIVE_TASK "\"%s%s}", *members ? "," : "", members);
	cJSON *cmd = cJSON_Parse(text);
	ck_assert_msg(cmd != NULL, "not JSON: %s", text);
	return ask(c, cmd, e);
}

static cJSON *cancel_task(struct client *c, const char *members, const cJSON **e)
{
	char text[256];
	snprintf(text, sizeof(text), "{\"command\":\"" DLQ_COMMAND_CANCEL_REDRIVE_TASK "\"%s%s}", *members ? "," : "", members);
	cJSON *cmd = cJSON_Parse(text);
	ck_assert_msg(cmd != NULL, "not JSON: %s", text);
	return ask(c, cmd, e);
}

/* startRedriveTask with members, which must start a task: its id. */
static double start_id(struct client *c, const char *members)
{
	const cJSON *e;
	cJSON *reply = start_task(c, members, &e);
	double id = json_num(entry_data(e), "id");
	ck_assert_msg(id >= 1, "no task id");
	cJSON_Delete(reply);
	return id;
}

/* A sample of a task's progress from getStatus, with when it was asked
 * and answered (the test's monotonic clock). */
struct sample {
	uint64_t asked, answered;
	double moved, failed, left;
	char state[16];
};

/* The task with id in getStatus' "redriveTasks". */
static struct sample task_sample(struct client *c, double id)
{
	struct sample s = { .asked = it_now_ms() };
	char topic[192];
	cJSON *doc;
	const cJSON *data = status_get(c, reply_topic(c, topic, sizeof(topic)), &doc);
	s.answered = it_now_ms();
	const cJSON *tasks = cJSON_GetObjectItemCaseSensitive(data, "redriveTasks");
	ck_assert_msg(cJSON_IsArray(tasks), "getStatus has no \"redriveTasks\" array");
	const cJSON *t, *found = NULL;
	cJSON_ArrayForEach(t, tasks){
		if(json_num(t, "id") == id) found = t;
	}
	ck_assert_msg(found != NULL, "getStatus does not show task %g", id);
	s.moved = json_num(found, "moved");
	s.failed = json_num(found, "failed");
	s.left = json_num(found, "left");
	snprintf(s.state, sizeof(s.state), "%s", json_str(found, "state") ? json_str(found, "state") : "");
	cJSON_Delete(doc);
	return s;
}

/* Samples task id every interval_ms until it is no longer running (or,
 * with stop_at, has moved that many), into s (at most max); checks that
 * its progress only grows and that between any two samples it moved no
 * more than rate times the time between them plus one burst. Returns how
 * many samples. */
static size_t follow(struct client *c, double id, double rate, double burst, struct sample *s, size_t max,
		double stop_at)
{
	size_t n = 0;
	uint64_t deadline = it_now_ms() + (uint64_t)harness_deadline_ms(120000);
	for(;;){
		ck_assert_msg(n < max, "more than %zu samples", max);
		s[n] = task_sample(c, id);
		if(n > 0){
			ck_assert_msg(s[n].moved >= s[n - 1].moved && s[n].failed >= s[n - 1].failed
					&& s[n].left <= s[n - 1].left, "progress went back: moved %g -> %g, failed %g -> %g, left %g -> %g",
					s[n - 1].moved, s[n].moved, s[n - 1].failed, s[n].failed, s[n - 1].left, s[n].left);
		}
		/* The broker answered sample j after it answered sample i by at
		 * most answered(j) - asked(i): the bucket allows rate times that,
		 * plus what it held, one burst. */
		for(size_t i = 0; i < n; i++){
			double secs = (double)(s[n].answered - s[i].asked) / 1000.0;
			double most = rate * secs + burst;
			ck_assert_msg(s[n].moved - s[i].moved <= most, "moved %g in at most %.3f s: more than %g", s[n].moved - s[i].moved,
					secs, most);
		}
		n++;
		if(strcmp(s[n - 1].state, "running") || (stop_at > 0 && s[n - 1].moved >= stop_at)) return n;
		ck_assert_msg(it_now_ms() < deadline, "the task still runs after 120 s: moved %g", s[n - 1].moved);
		it_sleep_ms(250);
	}
}

/* Prints how many letters each second moved (from samples about a second
 * apart), for the log. */
static void print_seconds(const char *label, const struct sample *s, size_t n)
{
	size_t from = 0;
	for(size_t i = 1; i < n; i++){
		if(s[i].answered - s[from].answered >= 1000 || i == n - 1){
			fprintf(stderr, "%s: %.0f moved in %.2f s\n", label, s[i].moved - s[from].moved,
					(double)(s[i].answered - s[from].answered) / 1000.0);
			from = i;
		}
	}
}

/* ---- (1) a task over 2,000 letters at 200 a second ---- */

START_TEST(test_task_at_rate)
{
	struct client *insp;
	struct broker *b = broker_with_letters(__func__, false, false, MAX_LETTERS, &insp);
	struct mill *worker = mill_new(b, "worker", false, false);

	const cJSON *e;
	cJSON *reply = start_task(insp, "\"filter\":\"jobs/#\",\"rate\":200", &e);
	const cJSON *t = entry_data(e);
	double id = json_num(t, "id");
	ck_assert_msg(id >= 1, "no task id");
	expect_str_member(t, "state", "running");
	expect_str_member(t, "policy", "jobs/#");
	ck_assert_msg(json_num(t, "rate") == RATE && json_num(t, "burst") == BURST && json_num(t, "left") == MAX_LETTERS
			&& json_num(t, "moved") == 0, "the new task is not as asked");
	ck_assert_msg(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(t, "to")), "\"to\" is not null");
	cJSON_Delete(reply);

	static struct sample s[1000];
	size_t n = follow(insp, id, RATE, BURST, s, 1000, 0);
	print_seconds("200/s", s, n);
	struct sample last = s[n - 1];
	ck_assert_msg(!strcmp(last.state, "done") && last.moved == MAX_LETTERS && last.failed == 0 && last.left == 0,
			"the task ended %s: moved %g, failed %g, left %g", last.state, last.moved, last.failed, last.left);
	mill_wait(worker, MAX_LETTERS);
	it_sleep_ms(200);
	mill_expect_each_once(worker, MAX_LETTERS);
	ck_assert_msg(status_num(insp, NULL, "keptDeadLetters") == 0, "letters are still kept");

	/* Its own figures: at least (2000 - one burst) / 200 = 9.9 s from
	 * start to end, and not more than 30 s (scaled for a slow machine). */
	char topic[192];
	cJSON *doc;
	const cJSON *data = status_get(insp, reply_topic(insp, topic, sizeof(topic)), &doc);
	const cJSON *task = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(data, "redriveTasks"), 0);
	double took = json_num(task, "ended") - json_num(task, "started");
	fprintf(stderr, "200/s: 2000 letters in %.1f s\n", took / 1000.0);
	ck_assert_msg(took >= 9000 && took <= harness_deadline_ms(30000), "the task took %g ms", took);
	cJSON_Delete(doc);
	mill_free(worker);
	client_free(insp);
}
END_TEST

/* ---- (2) one task per policy, and a cancel ---- */

START_TEST(test_one_task_per_policy_and_cancel)
{
	enum { N = 300 };
	struct client *insp;
	struct broker *b = broker_with_letters(__func__, false, false, N, &insp);
	struct mill *worker = mill_new(b, "worker", false, false);

	double id = start_id(insp, "\"filter\":\"jobs/#\",\"rate\":50");
	const cJSON *e;
	cJSON *reply;
	/* The same policy, and every policy (no filter): refused. */
	reply = start_task(insp, "\"filter\":\"jobs/#\"", &e);
	entry_error(e, "a redrive task (", false);
	entry_error(e, "is already running for this policy", false);
	cJSON_Delete(reply);
	reply = start_task(insp, "", &e);
	entry_error(e, "is already running for every policy", false);
	cJSON_Delete(reply);
	/* Another policy's task runs beside it (none of its letters: done). */
	reply = start_task(insp, "\"filter\":\"mail/#\"", &e);
	const cJSON *other = entry_data(e);
	ck_assert_msg(json_num(other, "left") == 0, "mail/# has letters");
	cJSON_Delete(reply);

	static struct sample s[200];
	size_t n = follow(insp, id, 50, 6, s, 200, 60);
	ck_assert_msg(!strcmp(s[n - 1].state, "running"), "the task ended early");
	reply = cancel_task(insp, "\"filter\":\"jobs/#\"", &e);
	const cJSON *t = entry_data(e);
	expect_str_member(t, "state", "cancelled");
	double moved = json_num(t, "moved"), left = json_num(t, "left");
	ck_assert_msg(moved >= 60 && moved < N && moved + left == N && json_num(t, "failed") == 0,
			"cancelled after %g moved, %g left", moved, left);
	cJSON_Delete(reply);
	/* Stopped: nothing more moves. */
	it_sleep_ms(1000);
	struct sample after = task_sample(insp, id);
	ck_assert_msg(after.moved == moved && !strcmp(after.state, "cancelled") && after.left == left,
			"after the cancel: %s, moved %g, left %g", after.state, after.moved, after.left);
	ck_assert_msg(status_num(insp, NULL, "keptDeadLetters") == left, "kept letters are not the task's left");
	mill_wait(worker, (size_t)moved);
	it_sleep_ms(300);
	ck_assert_msg(mill_got(worker) == (size_t)moved, "the worker got %zu, the task moved %g", mill_got(worker), moved);
	reply = cancel_task(insp, "\"filter\":\"jobs/#\"", &e);
	entry_error(e, "no redrive task is running for the policy \"jobs/#\"", true);
	cJSON_Delete(reply);
	/* A new task takes the rest, by id cancel refused once it is done. */
	reply = start_task(insp, "\"filter\":\"jobs/#\",\"rate\":1000", &e);
	double id2 = json_num(entry_data(e), "id");
	ck_assert_msg(id2 > id && json_num(entry_data(e), "left") == left, "the second task is not over the rest");
	cJSON_Delete(reply);
	n = follow(insp, id2, 1000, 101, s, 200, 0);
	ck_assert_msg(!strcmp(s[n - 1].state, "done") && s[n - 1].moved == left, "the second task: %s, moved %g",
			s[n - 1].state, s[n - 1].moved);
	mill_wait(worker, N);
	it_sleep_ms(200);
	mill_expect_each_once(worker, N);
	char members[64];
	snprintf(members, sizeof(members), "\"task\":%g", id2);
	reply = cancel_task(insp, members, &e);
	entry_error(e, "no running redrive task", false);
	cJSON_Delete(reply);
	mill_free(worker);
	client_free(insp);
}
END_TEST

/* ---- (3) bad input ---- */

#define RATE_ERR "\"rate\" must be a whole number of letters a second from 1 to 10000 (default 100)"
#define TO_ERR "\"to\" must be a topic name without wildcards, not starting with $"
#define EITHER_ERR "give either \"task\" (a task's id) or \"filter\" (a policy filter)"
#define TASK_ERR "\"task\" must be a task's id (a whole number from 1)"

START_TEST(test_bad_input)
{
	struct broker *b = task_broker(__func__, false, false);
	struct client *insp = ops_client(b, "inspector");
	static const struct { bool cancel; const char *members, *error; } cases[] = {
		{ false, "\"rate\":0", RATE_ERR },
		{ false, "\"rate\":-5", RATE_ERR },
		{ false, "\"rate\":10001", RATE_ERR },
		{ false, "\"rate\":2.5", RATE_ERR },
		{ false, "\"rate\":\"fast\"", RATE_ERR },
		{ false, "\"filter\":5", "\"filter\" must be a string" },
		/* Empty: it would match nothing now and, read back from the state
		 * file as none, every letter after a restart. */
		{ false, "\"filter\":\"\"", "\"filter\" must not be empty: leave it out to match every one" },
		{ false, "\"deadLetter\":\"\"", "\"deadLetter\" must not be empty: leave it out to match every one" },
		{ false, "\"reason\":[]", "\"reason\" must be a string" },
		{ false, "\"cause\":\"tired\"", ERR_UNKNOWN_CAUSE("tired") },
		{ false, "\"since\":\"yesterday\"", "\"since\" must be milliseconds since the epoch or RFC 3339 UTC text, "
				"e.g. \"2026-12-02T10:00:00Z\"" },
		{ false, "\"since\":2000,\"until\":1000", "\"since\" is after \"until\": the filter matches no letter" },
		{ false, "\"to\":\"jobs/+\"", TO_ERR },
		{ false, "\"to\":\"$SYS/x\"", TO_ERR },
		{ false, "\"to\":7", "\"to\" must be a string" },
		{ true, "", EITHER_ERR },
		{ true, "\"task\":1,\"filter\":\"jobs/#\"", EITHER_ERR },
		{ true, "\"task\":\"one\"", TASK_ERR },
		{ true, "\"task\":0", TASK_ERR },
		{ true, "\"task\":7", "no running redrive task 7" },
	};
	for(size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++){
		const cJSON *e;
		cJSON *reply = cases[i].cancel ? cancel_task(insp, cases[i].members, &e) : start_task(insp, cases[i].members, &e);
		entry_error(e, cases[i].error, true);
		cJSON_Delete(reply);
	}
	/* Nothing was started: no task in getStatus. */
	char topic[192];
	cJSON *doc;
	const cJSON *data = status_get(insp, reply_topic(insp, topic, sizeof(topic)), &doc);
	const cJSON *tasks = cJSON_GetObjectItemCaseSensitive(data, "redriveTasks");
	ck_assert_msg(cJSON_IsArray(tasks) && cJSON_GetArraySize(tasks) == 0, "tasks were started");
	cJSON_Delete(doc);
	client_free(insp);
}
END_TEST

/* ---- (4) a SIGTERM in the middle ---- */

/* A task over 600 letters at 100 a second, stopped by SIGTERM after some
 * 150, goes on after the start: its counters as they were, the letters
 * it moved gone, the rest moved; the worker (a persistent session, with
 * the broker's persistence) gets one copy of each (the broker's own resend of
 * one sent and not acknowledged before the SIGTERM has the same dlq-id). */
static void resume_case(const char *label, bool journal)
{
	enum { N = 600 };
	struct client *insp;
	struct broker *b = broker_with_letters(label, true, journal, N, &insp);
	struct mill *worker = mill_new(b, "worker", false, true);

	double id = start_id(insp, "\"filter\":\"jobs/#\",\"rate\":100");
	const cJSON *e;
	cJSON *reply;
	static struct sample s[200];
	size_t n = follow(insp, id, 100, 11, s, 200, 150);
	ck_assert_msg(!strcmp(s[n - 1].state, "running"), "the task ended before the SIGTERM");
	client_free(insp);
	broker_shutdown(b);
	size_t before = mill_got(worker);
	broker_start(b);
	ck_assert_msg(!log_has(b, "damage"), "the plugin found damage in its state file");
	insp = ops_client(b, "inspector");
	struct sample resumed = task_sample(insp, id);
	fprintf(stderr, "%s: %zu received before the restart, the task resumed at %g moved, %g left\n", label, before,
			resumed.moved, resumed.left);
	ck_assert_msg(resumed.moved >= s[n - 1].moved && resumed.moved + resumed.left == N,
			"after the restart: %s, moved %g, left %g", resumed.state, resumed.moved, resumed.left);
	n = follow(insp, id, 100, 11, s, 200, 0);
	ck_assert_msg(!strcmp(s[n - 1].state, "done") && s[n - 1].moved == N && s[n - 1].failed == 0,
			"after the restart the task ended %s: moved %g, failed %g", s[n - 1].state, s[n - 1].moved, s[n - 1].failed);
	mill_wait(worker, N);
	it_sleep_ms(300);
	mill_expect_each_once(worker, N);
	ck_assert_msg(status_num(insp, NULL, "keptDeadLetters") == 0, "letters are still kept");
	/* A second task is refused no more: the first is done. */
	reply = start_task(insp, "\"filter\":\"jobs/#\"", &e);
	ck_assert_msg(json_num(entry_data(e), "left") == 0, "letters left for a new task");
	cJSON_Delete(reply);
	mill_free(worker);
	client_free(insp);
}

START_TEST(test_sigterm_resumes)
{
	resume_case(__func__, false);
}
END_TEST

START_TEST(test_sigterm_resumes_with_journal)
{
	resume_case(__func__, true);
}
END_TEST

/* ---- (5) dlqctl redrive --all ---- */

/* Whether out (dlqctl's standard output) is plain lines only, each of
 * task id ("redrive task <id> started: ...", "redrive task <id>: running,
 * ...", "redrive task <id> done: ..."): no bar, no carriage return. */
static bool plain_lines(const char *out, int id)
{
	char head[32];
	int n = snprintf(head, sizeof(head), "redrive task %d", id);
	if(strchr(out, '\r') || strchr(out, '[')) return false;
	for(const char *l = out; *l; ){
		const char *eol = strchr(l, '\n');
		if(eol == NULL || strncmp(l, head, (size_t)n) || (l[n] != ' ' && l[n] != ':')) return false;
		l = eol + 1;
	}
	return true;
}

/* dlqctl redrive --all starts a task and follows it to its end (plain
 * lines: its output is a pipe); Ctrl-C leaves a task running and says so;
 * redrive --cancel stops it; a second task on a policy is refused in the
 * plugin's words; a bad rate is a usage error. */
START_TEST(test_dlqctl_redrive_all)
{
	enum { N = 150 };
	struct client *insp;
	struct broker *b = broker_with_letters(__func__, false, false, N, &insp);
	struct mill *worker = mill_new(b, "worker", false, false);

	struct proc *p = dlqctl_expect(2, b, "redrive", "--all", "--rate", "2.5");
	ck_assert_msg(strstr(proc_err(p), "--rate for redrive --all: a whole number of letters a second from 1 to 10000"),
			"stderr: %s", proc_err(p));
	/* A task of jobs/#, slow enough to be interrupted. */
	p = dlqctl_spawn(b, "redrive", "--all", "--filter", "jobs/#", "--rate", "60");
	ck_assert_msg(proc_wait_output(p, "redrive task 1: running", 1, HARNESS_WAIT_MS), "no progress line");
	struct proc *second = dlqctl_expect(1, b, "redrive", "--all", "--filter", "jobs/#");
	ck_assert_msg(strstr(proc_err(second), "a redrive task (1) is already running for this policy"), "stderr: %s",
			proc_err(second));
	/* Ctrl-C: dlqctl stops following; the task goes on. */
	proc_kill(p, SIGINT);
	ck_assert_int_eq(proc_wait(p, HARNESS_WAIT_MS), 1);
	ck_assert_msg(strstr(proc_err(p), "stopped following redrive task 1; it goes on in the broker "
			"(dlqctl redrive --cancel --task 1 stops it)"), "stderr: %s", proc_err(p));
	ck_assert_msg(strstr(proc_out(p), "redrive task 1 started: 150 letters to their origin topics at 60 a second "
			"(bursts of 7)"), "stdout: %s", proc_out(p));
	/* Not a terminal (a pipe): plain lines, a progress line among them. */
	ck_assert_msg(plain_lines(proc_out(p), 1), "not plain lines: %s", proc_out(p));
	struct sample running = task_sample(insp, 1);
	it_sleep_ms(300);
	struct sample later = task_sample(insp, 1);
	ck_assert_msg(!strcmp(later.state, "running") && later.moved > running.moved, "the task stopped with dlqctl");
	p = dlqctl_expect(0, b, "redrive", "--cancel", "--task", "1");
	ck_assert_msg(strstr(proc_out(p), "redrive task 1 cancelled: "), "stdout: %s", proc_out(p));
	struct sample cancelled = task_sample(insp, 1);
	ck_assert_msg(!strcmp(cancelled.state, "cancelled") && cancelled.left > 0, "the task is %s, %g left", cancelled.state,
			cancelled.left);
	/* The rest, followed to the end. */
	p = dlqctl_expect(0, b, "redrive", "--all", "--rate", "1000");
	char want[128];
	snprintf(want, sizeof(want), "redrive task 2 done: %.0f moved, 0 failed, 0 left, in ", cancelled.left);
	ck_assert_msg(strstr(proc_out(p), want), "stdout: %s", proc_out(p));
	ck_assert_msg(plain_lines(proc_out(p), 2), "not plain lines: %s", proc_out(p));
	mill_wait(worker, N);
	it_sleep_ms(200);
	mill_expect_each_once(worker, N);
	p = dlqctl_expect(1, b, "redrive", "--cancel", "--filter", "jobs/#");
	ck_assert_msg(strstr(proc_err(p), "no redrive task is running for the policy \"jobs/#\""), "stderr: %s", proc_err(p));
	mill_free(worker);
	client_free(insp);
}
END_TEST

#define BAR_CELLS 30 /* tools/cmd_task.c's BAR_WIDTH */

/* One draw of dlqctl's progress bar: "[###...] done/total  moved M  failed
 * F  left L  R/s ". */
struct bar {
	char cells[BAR_CELLS + 1];
	double done, total, moved, failed, left, rate;
};

/* Reads one draw (the text between two carriage returns, or the last one
 * and the newline), which must be whole. */
static struct bar read_bar(const char *text, size_t len)
{
	char copy[256];
	ck_assert_msg(len < sizeof(copy), "a bar of %zu bytes", len);
	memcpy(copy, text, len);
	copy[len] = '\0';
	struct bar b;
	int end = 0;
	int n = sscanf(copy, "[%30[#.]] %lf/%lf  moved %lf  failed %lf  left %lf  %lf/s %n", b.cells, &b.done, &b.total,
			&b.moved, &b.failed, &b.left, &b.rate, &end);
	ck_assert_msg(n == 7 && (size_t)end == len && strlen(b.cells) == BAR_CELLS, "not a bar: \"%s\"", copy);
	/* Filled in proportion to the letters tried, the rest dots. */
	int filled = (int)strspn(b.cells, "#");
	int want = b.total > 0 ? (int)((b.moved + b.failed) * BAR_CELLS / b.total) : BAR_CELLS;
	ck_assert_msg(filled == want && strspn(b.cells + filled, ".") == (size_t)(BAR_CELLS - filled),
			"bar \"%s\": %d cells filled for %g of %g", b.cells, filled, b.moved + b.failed, b.total);
	ck_assert_msg(b.done == b.moved + b.failed && b.total == b.moved + b.failed + b.left, "bar \"%s\": its figures disagree",
			copy);
	return b;
}

/* dlqctl redrive --all with its output on a terminal (a pseudo-terminal)
 * draws a progress bar redrawn in place (carriage returns, no newline
 * between two draws), its figures only growing, which ends full at the
 * task's final counts; then a newline and the closing line; none of the
 * plain lines. 150 letters at 50 a second: some 3 s, a draw every 250 ms.
 * Skipped, saying so, where there are no pseudo-terminals (a 2.1 root
 * made before scripts/brokers.sh bound the host's /dev/pts into it). */
START_TEST(test_dlqctl_redrive_all_draws_a_bar_on_a_terminal)
{
	enum { N = 150 };
	char why[128];
	if(!proc_tty_available(why, sizeof(why))){
		printf("redrive_task: dlqctl on a terminal skipped, no pseudo-terminal here (%s)\n", why);
		return;
	}
	struct client *insp;
	struct broker *b = broker_with_letters(__func__, false, false, N, &insp);
	struct mill *worker = mill_new(b, "worker", false, false);

	struct proc *p = dlqctl_spawn_tty(b, "redrive", "--all", "--filter", "jobs/#", "--rate", "50");
	int st = proc_wait(p, HARNESS_WAIT_MS);
	if(st != 0) proc_dump(p);
	ck_assert_int_eq(st, 0);
	const char *out = proc_out(p);
	const char *started = "redrive task 1 started: 150 letters to their origin topics at 50 a second (bursts of 6)\n";
	ck_assert_msg(!strncmp(out, started, strlen(started)), "stdout: %s", out);
	const char *bars = out + strlen(started);
	const char *eol = strchr(bars, '\n');
	ck_assert_msg(bars[0] == '\r' && eol != NULL, "no bar after the first line: %s", out);
	/* Each draw starts with a carriage return; the last ends at the newline. */
	struct bar last = {0};
	size_t draws = 0;
	for(const char *at = bars; at < eol; ){
		const char *next = memchr(at + 1, '\r', (size_t)(eol - at - 1));
		if(next == NULL) next = eol;
		struct bar now = read_bar(at + 1, (size_t)(next - at - 1));
		ck_assert_msg(now.total == N, "a bar of %g letters, not %d", now.total, N);
		ck_assert_msg(draws == 0 || (now.moved >= last.moved && now.failed >= last.failed && now.left <= last.left),
				"the bar went back: moved %g -> %g, left %g -> %g", last.moved, now.moved, last.left, now.left);
		last = now;
		draws++;
		at = next;
	}
	fprintf(stderr, "dlqctl drew its bar %zu times\n", draws);
	ck_assert_msg(last.moved == N && last.failed == 0 && last.left == 0 && strspn(last.cells, "#") == BAR_CELLS,
			"the last bar: [%s] moved %g, failed %g, left %g", last.cells, last.moved, last.failed, last.left);
	const char *done = "redrive task 1 done: 150 moved, 0 failed, 0 left, in ";
	ck_assert_msg(!strncmp(eol + 1, done, strlen(done)) && it_count(eol + 1, "\n") == 1
			&& eol[1 + strlen(eol + 1) - 1] == '\n', "after the bar: %s", eol + 1);
	ck_assert_msg(!strstr(out, "redrive task 1: running"), "a plain line on a terminal: %s", out);
	struct sample task = task_sample(insp, 1);
	ck_assert_msg(!strcmp(task.state, "done") && task.moved == N, "the plugin's task: %s, moved %g", task.state, task.moved);
	mill_wait(worker, N);
	it_sleep_ms(200);
	mill_expect_each_once(worker, N);
	mill_free(worker);
	client_free(insp);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("redrive_task");
	/* Tasks of 10 s and more, and thousands of letters made first. */
	check_add(s, check_timeout(harness_tcase("redrive_task"), 600), CHECK_TESTS(test_bad_input,
			test_one_task_per_policy_and_cancel, test_task_at_rate, test_sigterm_resumes,
			test_sigterm_resumes_with_journal, test_dlqctl_redrive_all,
			test_dlqctl_redrive_all_draws_a_bar_on_a_terminal));
	return harness_run(s);
}
