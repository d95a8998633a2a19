/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of redrive tasks: model/redrive_task.c (the burst, the token
 * bucket, which tasks conflict, the bounded list) and engine/redrive_tasks.c
 * against the fake broker port (a task moves the letters its filter
 * matches at its rate, tick by tick, to their origin topics or its own; a
 * publish the broker refuses is counted as failed and the letter kept; a
 * letter dead-lettered after the start is not the task's; a cancel stops
 * it; its progress reaches the store port; with a state file, a restart,
 * or a crash with the journal, goes on after the letters it tried, so that
 * a letter whose publish the broker refused is tried and counted in failed
 * once), and what a tick costs with a task running over 100,000 kept
 * letters (printed).
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_suite.h"
#include "engine/dlq.h"
#include "engine/engine.h"
#include "engine/letter_store.h"
#include "engine/redrive_tasks.h"
#include "engine_calls.h"
#include "fake_port.h"
#include "model/redrive_task.h"
#include "mosquitto_dlq.h"
#include "test_util.h"

/* ---- the model ---- */

START_TEST(a_burst_is_a_tenth_of_a_second_and_one)
{
	ck_assert_uint_eq(pacer__burst(1), 2);
	ck_assert_uint_eq(pacer__burst(9), 2);
	ck_assert_uint_eq(pacer__burst(10), 2);
	ck_assert_uint_eq(pacer__burst(11), 3);
	ck_assert_uint_eq(pacer__burst(DLQ_REDRIVE_RATE_DEFAULT), 11);
	ck_assert_uint_eq(pacer__burst(200), 21);
	ck_assert_uint_eq(pacer__burst(DLQ_REDRIVE_RATE_MAX), 1001);
}
END_TEST

/* Ticks at uneven intervals for 20 s, taking every token: no window of
 * the run gets more than rate times its length plus one burst, and the
 * whole run gets the rate. */
START_TEST(the_bucket_holds_the_rate_and_one_burst)
{
	static const uint32_t rates[] = { 1, 7, 100, 200, 999, DLQ_REDRIVE_RATE_MAX };
	for(size_t r = 0; r < ARRAY_LEN(rates); r++){
		uint32_t rate = rates[r];
		struct dlq_pacer p = {0};
		enum { TICKS = 4000 };
		static uint64_t at[TICKS], taken[TICKS + 1];
		uint64_t now = 1000, seed = 12345;
		taken[0] = 0;
		for(size_t i = 0; i < TICKS; i++){
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			now += 1 + (seed >> 33) % 10;
			at[i] = now;
			pacer__advance(&p, rate, now);
			uint64_t n = 0;
			while(pacer__take(&p)) n++;
			taken[i + 1] = taken[i] + n;
		}
		uint32_t burst = pacer__burst(rate);
		for(size_t i = 0; i < TICKS; i += 7){
			for(size_t j = i; j < TICKS; j += 13){
				/* Ticks i to j, a window of at[j] - at[i] ms. */
				uint64_t got = taken[j + 1] - taken[i];
				uint64_t most = (uint64_t)rate * (at[j] - at[i]) / 1000 + burst;
				ck_assert_msg(got <= most, "rate %u: %llu in %llu ms", rate, (unsigned long long)got,
						(unsigned long long)(at[j] - at[i]));
			}
		}
		uint64_t whole = (uint64_t)rate * (at[TICKS - 1] - at[0]) / 1000;
		ck_assert_msg(taken[TICKS] >= whole, "rate %u: %llu in the whole run, %llu expected", rate,
				(unsigned long long)taken[TICKS], (unsigned long long)whole);
	}
}
END_TEST

START_TEST(a_first_refill_gives_one_burst)
{
	struct dlq_pacer p = {0};
	pacer__advance(&p, 200, 5000);
	unsigned n = 0;
	while(pacer__take(&p)) n++;
	ck_assert_uint_eq(n, 21);
	/* 4 ms at 200/s: not yet one letter; 5 ms: one. */
	pacer__advance(&p, 200, 5004);
	ck_assert(!pacer__take(&p));
	pacer__advance(&p, 200, 5005);
	ck_assert(pacer__take(&p));
	ck_assert(!pacer__take(&p));
	/* A long pause earns one burst, no more. */
	pacer__advance(&p, 200, 60000);
	n = 0;
	while(pacer__take(&p)) n++;
	ck_assert_uint_eq(n, 21);
}
END_TEST

static struct dlq_redrive_task *task_of(const char *filter, uint8_t state)
{
	struct dlq_letter_match m = { .filter = filter };
	struct dlq_redrive_task *t = redrive_task__new(&m, NULL, "op", 10);
	ck_assert_ptr_nonnull(t);
	t->state = state;
	if(state != DLQ_TASK_RUNNING) t->ended_ms = 1;
	return t;
}

START_TEST(one_task_runs_per_policy)
{
	struct dlq_redrive_tasks t;
	redrive_task__list_init(&t);
	ck_assert_ptr_null(redrive_task__conflict(&t, "jobs/#"));
	ck_assert_ptr_null(redrive_task__conflict(&t, NULL));
	redrive_task__add(&t, task_of("mail/#", DLQ_TASK_DONE));
	ck_assert_ptr_null(redrive_task__conflict(&t, "mail/#"));
	ck_assert_ptr_null(redrive_task__conflict(&t, NULL));
	struct dlq_redrive_task *jobs = task_of("jobs/#", DLQ_TASK_RUNNING);
	redrive_task__add(&t, jobs);
	ck_assert_uint_eq(jobs->id, 2);
	ck_assert_uint_eq(t.running, 1);
	ck_assert_ptr_eq(redrive_task__conflict(&t, "jobs/#"), jobs);
	ck_assert_ptr_eq(redrive_task__conflict(&t, NULL), jobs);
	ck_assert_ptr_null(redrive_task__conflict(&t, "mail/#"));
	struct dlq_redrive_task *all = task_of(NULL, DLQ_TASK_RUNNING);
	redrive_task__add(&t, all);
	ck_assert_ptr_nonnull(redrive_task__conflict(&t, "mail/#"));
	ck_assert_ptr_eq(redrive_task__find(&t, 3), all);
	redrive_task__list_cleanup(&t);
	ck_assert_uint_eq(t.count, 0);
}
END_TEST

START_TEST(ended_tasks_go_past_the_bound_running_ones_stay)
{
	struct dlq_redrive_tasks t;
	redrive_task__list_init(&t);
	redrive_task__add(&t, task_of("a", DLQ_TASK_RUNNING));
	for(int i = 0; i < 40; i++) redrive_task__add(&t, task_of("b", i % 2 ? DLQ_TASK_DONE : DLQ_TASK_CANCELLED));
	ck_assert_uint_eq(t.count, DLQ_MAX_REDRIVE_TASKS_KEPT);
	ck_assert_uint_eq(t.running, 1);
	ck_assert_ptr_nonnull(redrive_task__find(&t, 1));
	ck_assert_ptr_nonnull(redrive_task__find(&t, 41));
	ck_assert_ptr_null(redrive_task__find(&t, 2));
	/* A restored task of an id kept replaces it; ids go on after it. */
	struct dlq_redrive_task *again = task_of("a", DLQ_TASK_DONE);
	again->id = 1;
	redrive_task__add(&t, again);
	ck_assert_ptr_eq(redrive_task__find(&t, 1), again);
	ck_assert_uint_eq(t.running, 0);
	struct dlq_redrive_task *later = task_of("c", DLQ_TASK_DONE);
	later->id = 100;
	redrive_task__add(&t, later);
	struct dlq_redrive_task *next = task_of("c", DLQ_TASK_DONE);
	redrive_task__add(&t, next);
	ck_assert_uint_eq(next->id, 101);
	redrive_task__list_cleanup(&t);
}
END_TEST

/* ---- the engine ---- */

static struct dlq d;
static bool d_live;

/* The engine with jobs/# and mail/#, every NACK a dead letter, and a
 * store of keep bytes. */
static void start_keeping(const char *keep)
{
	struct dlq_option opts[] = {
		{"policy", "jobs/# max_attempts=1 dead_letter=dead/jobs"},
		{"policy", "mail/# max_attempts=1 dead_letter=dead/mail"},
		{"dead_letter_access", "control"},
		{"dead_letter_keep", keep},
	};
	fake_reset();
	fake.now_ms = 1000;
	fake.wall_ms = 1790000000000LL;
	engine_start(&d, &d_live, opts, ARRAY_LEN(opts), ENGINE_NO_SYS);
}

static void start(void)
{
	start_keeping("64MB");
}

static void stop(void)
{
	engine_stop(&d, &d_live);
	fake_reset();
}

/* Publishes so far to topics starting with prefix. */
static size_t published_to(const char *prefix)
{
	size_t n = 0;
	for(size_t i = 0; i < fake.publish_count; i++){
		if(!strncmp(fake.publishes[i].topic, prefix, strlen(prefix))) n++;
	}
	return n;
}

static struct dlq_redrive_task *start_task(const char *filter, const char *to, uint32_t rate)
{
	struct letter_store_asker who = { .client = "op" };
	struct dlq_letter_match m = { .filter = filter };
	struct dlq_redrive_task *t = NULL;
	char err[256];
	int rc = redrive_tasks__start(&d, &who, &m, to, rate, &t, err, sizeof(err));
	ck_assert_msg(rc == 0, "refused: %s", err);
	return t;
}

/* Ticks every step_ms until ms have passed. */
static void run_for(uint64_t ms, uint64_t step_ms)
{
	for(uint64_t t = 0; t < ms; t += step_ms){
		fake.now_ms += step_ms;
		dlq__tick(&d);
	}
}

START_TEST(a_task_moves_its_letters_at_its_rate)
{
	start();
	for(int i = 0; i < 30; i++) engine_dead_letter(&d, i % 3 ? "jobs/a" : "mail/b", "p");
	ck_assert_uint_eq(d.letters.count, 30);
	fake.wall_ms += 10;
	struct dlq_redrive_task *t = start_task("jobs/#", NULL, 10);
	ck_assert_uint_eq(t->left, 20);
	ck_assert_uint_eq(redrive_tasks__left(&d, t), 20);
	/* A letter made after the start is not the task's. */
	fake.wall_ms += 10;
	engine_dead_letter(&d, "jobs/late", "late");
	size_t before = published_to("jobs/");
	/* The first tick moves one burst (2 at 10/s), then one each 100 ms. */
	dlq__tick(&d);
	ck_assert_uint_eq(t->moved, 2);
	run_for(1000, 50);
	ck_assert_uint_eq(t->moved, 12);
	ck_assert_uint_eq(published_to("jobs/a"), 12);
	ck_assert_uint_eq(redrive_tasks__left(&d, t), 8);
	run_for(1000, 50);
	ck_assert_uint_eq(t->state, DLQ_TASK_DONE);
	ck_assert_uint_eq(t->moved, 20);
	ck_assert_uint_eq(t->left, 0);
	ck_assert_uint_eq(d.tasks.running, 0);
	ck_assert_uint_eq(published_to("jobs/") - before, 20);
	/* The late letter and mail/#'s are kept. */
	ck_assert_uint_eq(d.letters.count, 11);
	ck_assert(fake_logged("redrive task 1 for jobs/# done: 20 moved, 0 failed"));
	stop();
}
END_TEST

START_TEST(a_refused_publish_is_failed_and_the_letter_kept)
{
	start();
	for(int i = 0; i < 5; i++) engine_dead_letter(&d, "jobs/a", "p");
	struct dlq_redrive_task *t = start_task(NULL, "elsewhere/x", 1000);
	fake.fail_publishes = 2;
	dlq__tick(&d);
	ck_assert_uint_eq(t->state, DLQ_TASK_DONE);
	ck_assert_uint_eq(t->moved, 3);
	ck_assert_uint_eq(t->failed, 2);
	ck_assert_uint_eq(published_to("elsewhere/x"), 3);
	ck_assert_uint_eq(d.letters.count, 2);
	stop();
}
END_TEST

START_TEST(a_cancel_stops_a_task_and_one_per_policy_runs)
{
	start();
	for(int i = 0; i < 10; i++) engine_dead_letter(&d, "jobs/a", "p");
	struct dlq_redrive_task *t = start_task("jobs/#", NULL, 10);
	struct letter_store_asker who = { .client = "op" };
	struct dlq_letter_match m = { .filter = "jobs/#" };
	struct dlq_redrive_task *other;
	char err[256];
	ck_assert_int_eq(redrive_tasks__start(&d, &who, &m, NULL, 10, &other, err, sizeof(err)), EBUSY);
	ck_assert_msg(strstr(err, "a redrive task (1) is already running for this policy"), "%s", err);
	m.filter = NULL;
	ck_assert_int_eq(redrive_tasks__start(&d, &who, &m, NULL, 10, &other, err, sizeof(err)), EBUSY);
	run_for(300, 100);
	uint64_t moved = t->moved;
	ck_assert_uint_gt(moved, 0);
	ck_assert_int_eq(redrive_tasks__cancel(&d, 0, "jobs/#", "op", &other, err, sizeof(err)), 0);
	ck_assert_ptr_eq(other, t);
	ck_assert_uint_eq(t->state, DLQ_TASK_CANCELLED);
	ck_assert_uint_eq(t->left, 10 - moved);
	run_for(1000, 100);
	ck_assert_uint_eq(t->moved, moved);
	ck_assert_int_eq(redrive_tasks__cancel(&d, 1, NULL, "op", &other, err, sizeof(err)), ENOENT);
	ck_assert_str_eq(err, "no running redrive task 1");
	stop();
}
END_TEST

/* The letter a task is at leaves the store otherwise (an operator's
 * delete, here; a single redrive or a bound's drop alike): the task goes
 * on at the next newer letter. It ended at once, "done" with the letters
 * after it never tried, while the store moved its cursor past the newest
 * (letters__remove read the letter's next after unlinking it). */
START_TEST(a_task_goes_on_when_the_letter_it_is_at_leaves_the_store)
{
	start();
	for(int i = 0; i < 10; i++) engine_dead_letter(&d, "jobs/a", "p");
	fake.wall_ms += 10;
	struct dlq_redrive_task *t = start_task("jobs/#", NULL, 10);
	dlq__tick(&d);
	ck_assert_uint_eq(t->moved, 2);
	struct dlq_letter *at = t->cursor.at;
	ck_assert(at != NULL && at->newer != NULL);
	struct dlq_letter *next = at->newer;
	letter_store__delete(&d, at);
	ck_assert_ptr_eq(t->cursor.at, next);
	ck_assert_uint_eq(redrive_tasks__left(&d, t), 7);
	run_for(2000, 100);
	ck_assert_uint_eq(t->state, DLQ_TASK_DONE);
	ck_assert_uint_eq(t->moved, 9);
	ck_assert_uint_eq(d.letters.count, 0);
	stop();
}
END_TEST

/* ---- across a restart (a state file) ---- */

static char state_dir[64];
static char state_path[128];

/* Starts the engine with jobs/#, every NACK a dead letter, kept, and the
 * state file at path, its journal too with on_change
 * (state_save_on_change). */
static void start_on(const char *path, bool on_change)
{
	struct dlq_option opts[] = {
		{"policy", "jobs/# max_attempts=1 dead_letter=dead/jobs"},
		{"dead_letter_access", "control"},
		{"dead_letter_keep", "64MB"},
		{"state_file", path},
		{"state_save_on_change", on_change ? "true" : "false"},
	};
	engine_start(&d, &d_live, opts, ARRAY_LEN(opts), ENGINE_NO_SYS);
	ck_assert_msg(!fake_logged("damaged"), "the state file is damaged");
}

/* The same on a state file in a new private directory. */
static void start_saving(bool on_change)
{
	fake_reset();
	snprintf(state_dir, sizeof(state_dir), "/tmp/dlq-task-test-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(state_dir));
	snprintf(state_path, sizeof(state_path), "%s/state", state_dir);
	fake.now_ms = 1000;
	fake.wall_ms = 1790000000000LL;
	start_on(state_path, on_change);
}

/* Starts the engine again on the state file at path, both clocks moved
 * on: the monotonic one to a new base. */
static void start_again(const char *path, bool on_change)
{
	fake.now_ms = 90000000;
	fake.wall_ms += 5000;
	start_on(path, on_change);
}

static void copy_file(const char *from, const char *to)
{
	FILE *in = fopen(from, "rb");
	if(in == NULL) return; /* no journal yet */
	FILE *out = fopen(to, "wb");
	ck_assert_ptr_nonnull(out);
	char buf[4096];
	size_t n;
	while((n = fread(buf, 1, sizeof(buf), in)) > 0) ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
	fclose(in);
	ck_assert_int_eq(fclose(out), 0);
}

/* Stops the engine and removes the state directory with what is in it. */
static void stop_saving(void)
{
	engine_stop(&d, &d_live);
	DIR *dp = opendir(state_dir);
	if(dp){
		struct dirent *de;
		char p[400];
		while((de = readdir(dp)) != NULL){
			if(!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
			snprintf(p, sizeof(p), "%s/%s", state_dir, de->d_name);
			unlink(p);
		}
		closedir(dp);
	}
	rmdir(state_dir);
	fake_reset();
}

/* n letters of jobs/#, those of even number from jobs/bad (whose publish
 * the broker refuses from then on), the others from jobs/good. */
static void bad_and_good_letters(int n)
{
	for(int i = 0; i < n; i++) engine_dead_letter(&d, i % 2 ? "jobs/good" : "jobs/bad", "p");
	ck_assert_uint_eq(d.letters.count, (size_t)n);
	fake.fail_topic = "jobs/bad";
	fake.wall_ms += 10;
}

/* A task stopped by a restart (shutdown, snapshot, start) after it tried
 * four letters, two refused: it goes on after them with its counters, so
 * that each refused letter is tried once and counted in failed once, and
 * left counts only those it has not tried. Before places were saved, the
 * restarted task began again from the oldest letter: it tried the two
 * refused letters again and counted them twice (failed 7 of 10 letters,
 * moved + failed + left past the letters it had). */
START_TEST(a_restart_goes_on_after_the_letters_tried_and_counts_each_failure_once)
{
	enum { N = 10 };
	start_saving(false);
	bad_and_good_letters(N);
	struct dlq_redrive_task *t = start_task("jobs/#", NULL, 10);
	/* One burst of 2 at 10 a second, then one each 100 ms. */
	dlq__tick(&d);
	run_for(200, 100);
	ck_assert_uint_eq(t->moved, 2);
	ck_assert_uint_eq(t->failed, 2);
	ck_assert_uint_eq(redrive_tasks__left(&d, t), N - 4);
	ck_assert_uint_eq(fake.fail_topic_calls, 2);
	engine_stop(&d, &d_live);
	start_again(state_path, false);
	t = redrive_task__find(&d.tasks, 1);
	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(t->state, DLQ_TASK_RUNNING);
	ck_assert_uint_eq(t->moved, 2);
	ck_assert_uint_eq(t->failed, 2);
	ck_assert_uint_eq(redrive_tasks__left(&d, t), N - 4);
	ck_assert_uint_eq(d.letters.count, N - 2);
	run_for(2000, 100);
	ck_assert_uint_eq(t->state, DLQ_TASK_DONE);
	ck_assert_uint_eq(t->moved, N / 2);
	ck_assert_uint_eq(t->failed, N / 2);
	ck_assert_uint_eq(t->left, 0);
	/* Each refused letter tried once; they are the letters kept. */
	ck_assert_uint_eq(fake.fail_topic_calls, N / 2);
	ck_assert_uint_eq(d.letters.count, N / 2);
	for(struct dlq_letter *l = d.letters.oldest; l; l = l->newer) ck_assert_str_eq(l->env->origin_topic, "jobs/bad");
	ck_assert(fake_logged("redrive task 1 for jobs/# done: 5 moved, 5 failed (kept)"));
	/* And in the next snapshot an ended task has no place. */
	engine_stop(&d, &d_live);
	start_again(state_path, false);
	t = redrive_task__find(&d.tasks, 1);
	ck_assert(t && t->state == DLQ_TASK_DONE && !t->tracked && t->moved == N / 2 && t->failed == N / 2);
	stop_saving();
}
END_TEST

/* The same across a crash with the journal (state_save_on_change): the
 * files as they were, no shutdown. The task's progress is journaled at
 * most once a second, its place with it; the letters moved after that are
 * removed by the journal's later entries, which move the restored place on
 * past them, and a letter refused after it is tried again, its failure
 * then counted for the first time. */
START_TEST(a_crash_goes_on_from_the_journaled_place_and_counts_each_failure_once)
{
	enum { N = 20 };
	start_saving(true);
	bad_and_good_letters(N);
	struct dlq_redrive_task *t = start_task("jobs/#", NULL, 10);
	/* 2, then 10 in a second (progress journaled at its end), then one
	 * more, refused, not journaled. */
	dlq__tick(&d);
	run_for(1000, 100);
	ck_assert_uint_eq(t->moved + t->failed, 12);
	ck_assert_uint_eq(t->noted_ms, fake.now_ms);
	run_for(100, 100);
	ck_assert_uint_eq(t->failed, 7);
	ck_assert_uint_eq(t->moved, 6);
	char crash[100], from[160], to[120];
	snprintf(crash, sizeof(crash), "%s/crash", state_dir);
	copy_file(state_path, crash);
	snprintf(from, sizeof(from), "%s.journal", state_path);
	snprintf(to, sizeof(to), "%s.journal", crash);
	copy_file(from, to);
	engine_stop(&d, &d_live);
	start_again(crash, true);
	t = redrive_task__find(&d.tasks, 1);
	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(t->state, DLQ_TASK_RUNNING);
	/* As journaled: 12 tried; the 13th (refused) is tried again. */
	ck_assert_uint_eq(t->moved, 6);
	ck_assert_uint_eq(t->failed, 6);
	ck_assert_uint_eq(redrive_tasks__left(&d, t), N - 12);
	run_for(2000, 100);
	ck_assert_uint_eq(t->state, DLQ_TASK_DONE);
	ck_assert_uint_eq(t->moved, N / 2);
	ck_assert_uint_eq(t->failed, N / 2);
	ck_assert_uint_eq(d.letters.count, N / 2);
	/* 7 refused before the crash, the 13th again and the 3 after it. */
	ck_assert_uint_eq(fake.fail_topic_calls, 7 + 1 + 3);
	stop_saving();
}
END_TEST

/* Frees what the fake port recorded, so that it records again. */
static void forget_publishes(void)
{
	for(size_t i = 0; i < fake.publish_count; i++){
		struct fake_publish *p = &fake.publishes[i];
		free(p->client);
		free(p->topic);
		free(p->payload);
		free(p->headers);
	}
	fake.publish_count = 0;
}

/* The tick's cost with a task running and 100,000 letters kept (printed,
 * not asserted: figures for BENCHMARKS.md): a tick whose bucket has no
 * letter yet, a tick that moves one burst (21 at 200 a second, its
 * letters one in ten of those walked), a tick of a task whose filter
 * matches none of them (a walk of WALK_PER_TICK letters), and getStatus'
 * count of what a task has left. */
START_TEST(the_tick_cost_with_a_task_and_100000_letters_kept)
{
	enum { N = 100000, ROUNDS = 1000000, BURSTS = 100 };
	start_keeping("4GB");
	engine_dead_letter(&d, "jobs/a", "p");
	engine_dead_letter(&d, "mail/b", "p");
	/* Every tenth letter of mail/#, the others of jobs/#. */
	engine_keep_letters(&d, 2, N, 0);
	ck_assert_uint_eq(d.letters.count, N);
	forget_publishes();
	fake.wall_ms += 1000;
	struct dlq_redrive_task *t = start_task("mail/#", NULL, 200);
	ck_assert_uint_eq(t->left, N / 10);

	/* One burst, then ticks at the same time: nothing due. */
	dlq__tick(&d);
	ck_assert_uint_eq(t->moved, 21);
	forget_publishes();
	uint64_t c = test_clock_ns();
	for(int i = 0; i < ROUNDS; i++) dlq__tick(&d);
	double idle_ns = (double)(test_clock_ns() - c) / ROUNDS;
	ck_assert_uint_eq(t->moved, 21);

	/* A tick every 100 ms: 20 letters each. */
	double burst_ns = 0;
	for(int i = 0; i < BURSTS; i++){
		fake.now_ms += 100;
		c = test_clock_ns();
		dlq__tick(&d);
		burst_ns += (double)(test_clock_ns() - c);
		forget_publishes();
	}
	burst_ns /= BURSTS;
	ck_assert_uint_eq(t->moved, 21 + 20 * BURSTS);

	c = test_clock_ns();
	uint64_t left = redrive_tasks__left(&d, t);
	double left_ns = (double)(test_clock_ns() - c);
	ck_assert_uint_eq(left, N / 10 - 21 - 20 * BURSTS);

	/* A task whose filter matches none: each tick walks WALK_PER_TICK
	 * letters, to the end. */
	struct letter_store_asker who = { .client = "op" };
	struct dlq_letter_match none = { .filter = "jobs/#", .reason = "no such reason" };
	struct dlq_redrive_task *empty;
	char err[256];
	ck_assert_int_eq(redrive_tasks__start(&d, &who, &none, NULL, 200, &empty, err, sizeof(err)), 0);
	unsigned walks = 0;
	double walk_ns = 0;
	while(empty->state == DLQ_TASK_RUNNING){
		fake.now_ms += 100;
		c = test_clock_ns();
		dlq__tick(&d);
		walk_ns += (double)(test_clock_ns() - c);
		walks++;
		forget_publishes();
	}
	printf("redrive_task: %d letters kept, a task of mail/# (one in ten) at 200/s: a tick with no letter due %.1f ns; "
			"a tick that moves 20 letters %.1f us (%.0f ns a letter); getStatus' left of the task %.2f ms; a task "
			"matching none: %u ticks of %.2f ms (4096 letters walked each)\n", N, idle_ns, burst_ns / 1e3,
			burst_ns / 20, left_ns / 1e6, walks, walk_ns / walks / 1e6);
	stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("redrive_task");
	/* 100,000 letters made and a million ticks, on a busy machine. */
	check_add(s, check_timeout(tcase_create("core"), 120), CHECK_TESTS(a_burst_is_a_tenth_of_a_second_and_one,
			the_bucket_holds_the_rate_and_one_burst, a_first_refill_gives_one_burst, one_task_runs_per_policy,
			ended_tasks_go_past_the_bound_running_ones_stay, a_task_moves_its_letters_at_its_rate,
			a_refused_publish_is_failed_and_the_letter_kept, a_cancel_stops_a_task_and_one_per_policy_runs,
			a_task_goes_on_when_the_letter_it_is_at_leaves_the_store,
			a_restart_goes_on_after_the_letters_tried_and_counts_each_failure_once,
			a_crash_goes_on_from_the_journaled_place_and_counts_each_failure_once,
			the_tick_cost_with_a_task_and_100000_letters_kept));
	return check_run(s);
}
