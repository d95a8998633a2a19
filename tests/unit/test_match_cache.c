/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of match_cache.c: every answer is policy__match's, hit or miss;
 * a repeated topic is a hit; two topics in one slot take turns and neither
 * gets the other's answer; the cache stays within its slots however many
 * topics pass; topics too long for a slot bypass it; and a new policy
 * generation (a reload, also through the engine's dlq__reload) empties it,
 * so no answer comes from a table that was replaced.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_suite.h"
#include "config/config.h"
#include "engine/dlq.h"
#include "engine_calls.h"
#include "fake_port.h"
#include "model/match_cache.h"
#include "model/policy.h"
#include "test_util.h"

static void add(struct dlq_policy_table *t, const char *filter, const char *dead_letter)
{
	struct dlq_policy p = {0};
	policy__set_defaults(&p);
	p.filter = strdup(filter);
	p.dead_letter = strdup(dead_letter);
	p.max_attempts = 3;
	ck_assert_ptr_nonnull(p.filter);
	ck_assert_ptr_nonnull(p.dead_letter);
	ck_assert_int_eq(policy__table_add(t, &p), 0);
}

static void finish(struct dlq_policy_table *t)
{
	char err[256];
	ck_assert_int_eq(policy__table_finish(t, err, sizeof(err)), 0);
}

/* The benchmark's shapes: literal, '#' and '+' decoys, one tracked filter. */
static void bench_table(struct dlq_policy_table *t)
{
	char f[64];
	for(int i = 0; i < 33; i++){
		snprintf(f, sizeof(f), "bench/decoy%d/+", i);
		add(t, f, "dead/decoy");
		snprintf(f, sizeof(f), "site/%d/#", i);
		add(t, f, "dead/decoy");
		snprintf(f, sizeof(f), "+/alarm%d/+", i);
		add(t, f, "dead/decoy");
	}
	add(t, "bench/tracked/+", "dead/bench");
	finish(t);
}

/* The table and the cache under test: setup zeroes them (a test makes
 * them), teardown frees what they hold. */
static struct dlq_policy_table t;
static struct dlq_match_cache c;

static void setup(void)
{
	memset(&t, 0, sizeof(t));
	memset(&c, 0, sizeof(c));
}

static void teardown(void)
{
	match_cache__cleanup(&c);
	policy__table_free(&t);
}

START_TEST(answers_are_the_tries_hit_or_miss)
{
	bench_table(&t);
	ck_assert_int_eq(match_cache__init(&c, 0), 0);
	const char *topics[] = {
		"bench/plain/1", "bench/tracked/1", "site/7/a/b", "x/alarm3/y", "$SYS/alarm3/y",
		"bench/decoy5/z", "bench/decoy5", "", "b", "bench/tracked/", "bench/tracked/1/2",
	};
	/* (Chosen so that no two of them share a slot: then each is missed
	 * exactly once.) */
	for(size_t i = 0; i < ARRAY_LEN(topics); i++){
		for(size_t j = 0; j < i; j++){
			if(topics[i][0] && topics[j][0]){
				ck_assert_uint_ne(match_cache__slot(topics[i], strlen(topics[i])),
						match_cache__slot(topics[j], strlen(topics[j])));
			}
		}
	}
	size_t n = ARRAY_LEN(topics);
	for(int round = 0; round < 3; round++){
		for(size_t i = 0; i < n; i++){
			ck_assert_ptr_eq(match_cache__match(&c, &t, 0, topics[i]), policy__match(&t, topics[i]));
		}
	}
	/* Every topic but the empty one is cached: the first round missed, the
	 * others hit. */
	ck_assert_uint_eq(c.misses, n - 1);
	ck_assert_uint_eq(c.hits, 2 * (n - 1));
	ck_assert_ptr_null(match_cache__match(&c, &t, 0, NULL));
}
END_TEST

/* Two topics of equal length whose hashes pick the same slot. */
static void colliding_pair(char a[32], char b[32])
{
	static uint64_t owner[DLQ_MATCH_SLOTS];
	static int seen[DLQ_MATCH_SLOTS];
	memset(seen, 0, sizeof(seen));
	for(int i = 0; i < 100000; i++){
		char t[32];
		snprintf(t, sizeof(t), "jobs/%05d", i);
		size_t slot = match_cache__slot(t, strlen(t));
		if(seen[slot]){
			snprintf(a, 32, "jobs/%05d", (int)owner[slot]);
			snprintf(b, 32, "%s", t);
			return;
		}
		seen[slot] = 1;
		owner[slot] = (uint64_t)i;
	}
	ck_abort_msg("no two topics share a slot");
}

START_TEST(topics_in_one_slot_take_turns)
{
	char a[32], b[32];
	colliding_pair(a, b);
	/* a is tracked, b is not: a mix-up would show. */
	add(&t, a, "dead/a");
	finish(&t);
	ck_assert_int_eq(match_cache__init(&c, 0), 0);
	for(int i = 0; i < 4; i++){
		ck_assert_ptr_eq(match_cache__match(&c, &t, 0, a), &t.items[0]);
		ck_assert_ptr_null(match_cache__match(&c, &t, 0, b));
	}
	/* Each took the slot from the other every time. */
	ck_assert_uint_eq(c.hits, 0);
	ck_assert_uint_eq(c.misses, 8);
	ck_assert_ptr_null(match_cache__match(&c, &t, 0, b));
	ck_assert_uint_eq(c.hits, 1);
}
END_TEST

START_TEST(bounded_however_many_topics)
{
	bench_table(&t);
	ck_assert_int_eq(match_cache__init(&c, 0), 0);
	struct dlq_match_slot *slots = c.slots;
	char topic[64];
	size_t n = 20 * DLQ_MATCH_SLOTS;
	for(size_t i = 0; i < n; i++){
		snprintf(topic, sizeof(topic), i % 2 ? "bench/tracked/%zu" : "site/%zu/x", i);
		ck_assert_ptr_eq(match_cache__match(&c, &t, 0, topic), policy__match(&t, topic));
	}
	ck_assert_uint_eq(c.misses, n);
	/* The slots are the ones allocated at the start, and at most one per
	 * slot is kept: the occupied ones are at most DLQ_MATCH_SLOTS. */
	ck_assert_ptr_eq(c.slots, slots);
	size_t used = 0;
	for(size_t i = 0; i < DLQ_MATCH_SLOTS; i++){
		if(c.slots[i].len) used++;
	}
	ck_assert_uint_le(used, DLQ_MATCH_SLOTS);
	ck_assert_uint_gt(used, DLQ_MATCH_SLOTS / 2);
	/* The last topic is still there. */
	ck_assert_ptr_eq(match_cache__match(&c, &t, 0, topic), policy__match(&t, topic));
	ck_assert_uint_eq(c.hits, 1);
}
END_TEST

START_TEST(long_topics_bypass_the_cache)
{
	add(&t, "long/#", "dead/long");
	finish(&t);
	ck_assert_int_eq(match_cache__init(&c, 0), 0);
	char topic[DLQ_MATCH_TOPIC_MAX + 16];
	memset(topic, 'x', sizeof(topic) - 1);
	topic[sizeof(topic) - 1] = '\0';
	memcpy(topic, "long/", 5);
	for(int i = 0; i < 3; i++){
		ck_assert_ptr_eq(match_cache__match(&c, &t, 0, topic), &t.items[0]);
	}
	ck_assert_uint_eq(c.hits + c.misses, 0);
	/* One byte shorter than a slot's room is cached. */
	topic[DLQ_MATCH_TOPIC_MAX] = '\0';
	ck_assert_ptr_eq(match_cache__match(&c, &t, 0, topic), &t.items[0]);
	ck_assert_ptr_eq(match_cache__match(&c, &t, 0, topic), &t.items[0]);
	ck_assert_uint_eq(c.hits, 1);
}
END_TEST

START_TEST(a_new_generation_empties_the_cache)
{
	struct dlq_policy_table old = {0}, fresh = {0};
	struct dlq_match_cache c;
	add(&old, "jobs/+", "dead/jobs");
	finish(&old);
	add(&fresh, "other/#", "dead/other");
	add(&fresh, "jobs/#", "dead/jobs");
	finish(&fresh);
	ck_assert_int_eq(match_cache__init(&c, 7), 0);
	ck_assert_ptr_eq(match_cache__match(&c, &old, 7, "jobs/1"), &old.items[0]);
	ck_assert_ptr_null(match_cache__match(&c, &old, 7, "other/1"));
	ck_assert_ptr_eq(match_cache__match(&c, &old, 7, "jobs/1"), &old.items[0]);
	ck_assert_uint_eq(c.hits, 1);
	/* The same topics, under the next generation's table. */
	ck_assert_ptr_eq(match_cache__match(&c, &fresh, 8, "jobs/1"), &fresh.items[1]);
	ck_assert_ptr_eq(match_cache__match(&c, &fresh, 8, "other/1"), &fresh.items[0]);
	ck_assert_uint_eq(c.hits, 1);
	ck_assert_uint_eq(c.misses, 4);
	match_cache__cleanup(&c);
	/* Without memory for slots every answer still comes, from the trie. */
	memset(&c, 0, sizeof(c));
	ck_assert_ptr_eq(match_cache__match(&c, &fresh, 8, "jobs/1"), &fresh.items[1]);
	policy__table_free(&old);
	policy__table_free(&fresh);
}
END_TEST

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_ge(fputs(text, f), 0);
	ck_assert_int_eq(fclose(f), 0);
}

START_TEST(the_engine_sees_a_reload_at_once)
{
	char dir[] = "/tmp/dlq-match-XXXXXX";
	char path[64];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/policies.json", dir);
	write_file(path, "{\"policies\":[{\"filter\":\"jobs/+\",\"max_attempts\":3,\"dead_letter\":\"dead/jobs\"}]}");
	struct dlq_option opts[] = {
		{"policy_file", path},
	};
	struct dlq d;
	char err[512];
	fake_reset();
	engine_start(&d, NULL, opts, ARRAY_LEN(opts), ENGINE_NO_SYS);
	const struct dlq_policy *p = dlq__policy_for(&d, "jobs/1");
	ck_assert_ptr_nonnull(p);
	ck_assert_str_eq(p->filter, "jobs/+");
	ck_assert_ptr_null(dlq__policy_for(&d, "files/1"));
	ck_assert_ptr_eq(dlq__policy_for(&d, "jobs/1"), p);
	ck_assert_uint_eq(d.matches.hits, 1);

	write_file(path, "{\"policies\":[{\"filter\":\"files/+\",\"max_attempts\":2,\"dead_letter\":\"dead/files\"}]}");
	ck_assert_msg(dlq__reload(&d, opts, 1, err, sizeof(err)) == 0, "%s", err);
	ck_assert_ptr_null(dlq__policy_for(&d, "jobs/1"));
	p = dlq__policy_for(&d, "files/1");
	ck_assert_ptr_nonnull(p);
	ck_assert_str_eq(p->filter, "files/+");
	ck_assert_ptr_eq(p, &d.cfg.policies.items[0]);

	/* A refused reload changes nothing, the cache included. */
	write_file(path, "{\"policies\":[{\"filter\":\"bad/#/x\",\"max_attempts\":2,\"dead_letter\":\"dead/x\"}]}");
	ck_assert_int_ne(dlq__reload(&d, opts, 1, err, sizeof(err)), 0);
	ck_assert_ptr_eq(dlq__policy_for(&d, "files/1"), p);
	engine_stop(&d, NULL);
	unlink(path);
	rmdir(dir);
}
END_TEST

int main(void)
{
	return check_run(check_suite("match_cache", check_fixture(tcase_create("cache"), setup, teardown),
			CHECK_TESTS(answers_are_the_tries_hit_or_miss, topics_in_one_slot_take_turns, bounded_however_many_topics,
			long_topics_bypass_the_cache, a_new_generation_empties_the_cache, the_engine_sees_a_reload_at_once)));
}
