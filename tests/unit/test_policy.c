/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of policy.c: building and validating a table (duplicates, dead
 * letters inside a filter), and matching with precedence, '$' topics, empty
 * levels and the parent level of '#'. The trie is held to a brute-force
 * reference built on topic__matches, and to a 10,000-policy table.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "topic.h"

static char *xstrdup(const char *s)
{
	char *d = s ? strdup(s) : NULL;

	if(s) ck_assert_ptr_nonnull(d);
	return d;
}

static void add(struct dlq_policy_table *t, const char *filter, const char *dead_letter, const char *source)
{
	struct dlq_policy p = {0};
	policy__set_defaults(&p);
	char src[64];

	if(source == NULL){
		snprintf(src, sizeof(src), "plugin_opt_policy #%zu", t->count + 1);
		source = src;
	}
	p.filter = xstrdup(filter);
	p.dead_letter = xstrdup(dead_letter);
	p.max_attempts = 3;
	p.source = xstrdup(source);
	ck_assert_int_eq(policy__table_add(t, &p), 0);
	ck_assert_ptr_null(p.filter); /* moved */
}

static const char *match(const struct dlq_policy_table *t, const char *topic)
{
	const struct dlq_policy *p = policy__match(t, topic);

	return p ? p->filter : NULL;
}

START_TEST(test_add_sets_index_and_wildcards)
{
	struct dlq_policy_table t = {0};

	add(&t, "a/b", "dead/1", NULL);
	add(&t, "+/+/#", "dead1", NULL);
	ck_assert_uint_eq(t.count, 2);
	ck_assert_uint_eq(t.items[0].index, 0);
	ck_assert_uint_eq(t.items[1].index, 1);
	ck_assert_uint_eq(t.items[0].wildcards, 0);
	ck_assert_uint_eq(t.items[1].wildcards, 3);
	ck_assert_str_eq(t.items[1].source, "plugin_opt_policy #2");
	policy__table_free(&t);
	ck_assert_ptr_null(t.items);
	ck_assert_uint_eq(t.count, 0);
}
END_TEST

START_TEST(test_precedence)
{
	struct dlq_policy_table t = {0};
	char err[512];

	add(&t, "a/+/c", "dead/1", NULL);
	add(&t, "a/#", "dead/2", NULL);
	add(&t, "a/b/c", "dead/3", NULL);
	add(&t, "+/+/+", "dead/4/x/y", NULL);
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), 0);
	ck_assert_str_eq(match(&t, "a/b/c"), "a/b/c");   /* no wildcards */
	ck_assert_str_eq(match(&t, "a/x/c"), "a/+/c");   /* 1 wildcard, longer than a/# */
	ck_assert_str_eq(match(&t, "a/x/d"), "a/#");     /* 1 wildcard beats 3 */
	ck_assert_str_eq(match(&t, "b/x/d"), "+/+/+");
	ck_assert_str_eq(match(&t, "a"), "a/#");         /* parent level of '#' */
	ck_assert_str_eq(match(&t, "a/b/c/d"), "a/#");
	ck_assert_ptr_null(match(&t, "b/c"));
	ck_assert_ptr_null(match(&t, "b"));
	policy__table_free(&t);
}
END_TEST

START_TEST(test_precedence_length_then_order)
{
	struct dlq_policy_table t = {0};
	char err[512];

	/* Both one wildcard and five bytes: the first declared wins. */
	add(&t, "a/+/c", "dead/1", NULL);
	add(&t, "+/b/c", "dead/2", NULL);
	add(&t, "+/bb/c", "dead/3", NULL);
	add(&t, "aa/+/c", "dead/4", NULL);
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), 0);
	ck_assert_str_eq(match(&t, "a/b/c"), "a/+/c");
	ck_assert_uint_eq(policy__match(&t, "a/b/c")->index, 0);
	/* "+/bb/c" and "aa/+/c" tie on length too: declaration order. */
	ck_assert_str_eq(match(&t, "aa/bb/c"), "+/bb/c");
	ck_assert_str_eq(match(&t, "x/bb/c"), "+/bb/c");
	policy__table_free(&t);

	memset(&t, 0, sizeof(t));
	add(&t, "+/b/c", "dead/2", NULL);
	add(&t, "a/+/c", "dead/1", NULL);
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), 0);
	ck_assert_str_eq(match(&t, "a/b/c"), "+/b/c");
	policy__table_free(&t);

	/* Same wildcard count, different length: the longer wins whatever
	 * the order. */
	memset(&t, 0, sizeof(t));
	add(&t, "a/#", "dead/1", NULL);
	add(&t, "a/b/#", "dead/2", NULL);
	add(&t, "+/b/cc", "dead/3", NULL);
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), 0);
	ck_assert_str_eq(match(&t, "a/b/x"), "a/b/#");
	ck_assert_str_eq(match(&t, "a/b/cc"), "+/b/cc");
	ck_assert_str_eq(match(&t, "a/x"), "a/#");
	policy__table_free(&t);
}
END_TEST

START_TEST(test_dollar_topics)
{
	struct dlq_policy_table t = {0};
	char err[512];

	add(&t, "+/x", "dead/1", NULL);
	add(&t, "+/+/+/#", "dead/2", NULL);
	add(&t, "+", "dead/3", NULL);
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), 0);
	ck_assert_ptr_null(match(&t, "$SYS/x"));
	ck_assert_ptr_null(match(&t, "$SYS/x/y"));
	ck_assert_ptr_null(match(&t, "$SYS/x/y/z"));
	ck_assert_ptr_null(match(&t, "$SYS"));
	ck_assert_str_eq(match(&t, "SYS/x"), "+/x");
	ck_assert_str_eq(match(&t, "SYS"), "+");
	ck_assert_str_eq(match(&t, "a/$x/b"), "+/+/+/#");
	policy__table_free(&t);

	memset(&t, 0, sizeof(t));
	add(&t, "$SYS/#", "dead/1", NULL);
	add(&t, "$SYS/+", "dead/2", NULL);
	add(&t, "+/x", "dead/3/q", NULL);
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), 0);
	/* One wildcard and six bytes each: the first declared wins. */
	ck_assert_str_eq(match(&t, "$SYS/x"), "$SYS/#");
	ck_assert_str_eq(match(&t, "$SYS/x/y"), "$SYS/#");
	ck_assert_str_eq(match(&t, "$SYS"), "$SYS/#");
	policy__table_free(&t);
}
END_TEST

START_TEST(test_empty_levels)
{
	struct dlq_policy_table t = {0};
	char err[512];

	add(&t, "a//b", "dead/1", NULL);
	add(&t, "+/b", "dead/2/q", NULL);
	add(&t, "a/+", "dead/3/q", NULL);
	add(&t, "/#", "dead/4", NULL);
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), 0);
	ck_assert_str_eq(match(&t, "a//b"), "a//b");
	ck_assert_str_eq(match(&t, "/b"), "+/b");   /* "/#" is 1 wildcard, 2 bytes; "+/b" 3 bytes */
	ck_assert_str_eq(match(&t, "a/"), "a/+");
	ck_assert_str_eq(match(&t, "/"), "/#");
	ck_assert_str_eq(match(&t, "//x"), "/#");
	ck_assert_ptr_null(match(&t, "a/b/c"));
	ck_assert_ptr_null(match(&t, "a"));
	ck_assert_ptr_null(match(&t, ""));
	ck_assert_ptr_null(match(&t, NULL));
	policy__table_free(&t);
}
END_TEST

START_TEST(test_duplicate_filters)
{
	struct dlq_policy_table t = {0};
	char err[512];

	add(&t, "a/+", "dead/1/q", NULL);
	add(&t, "b/#", "dead/2", NULL);
	add(&t, "b/#", "dead/3", "policies.json: policies[0]");
	add(&t, "a/+", "dead/4/q", NULL);
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), EINVAL);
	/* The earliest repeat is reported, with the one it repeats. */
	ck_assert_str_eq(err, "duplicate policy filter \"b/#\": policies.json: policies[0] repeats plugin_opt_policy #2");
	ck_assert_ptr_null(t.trie);
	ck_assert_ptr_null(policy__match(&t, "b/x"));
	policy__table_free(&t);
}
END_TEST

START_TEST(test_dead_letter_inside_filter)
{
	struct dlq_policy_table t = {0};
	char err[512];

	add(&t, "dead/#", "other/d", NULL);
	add(&t, "sensors/#", "dead/x", NULL);
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), EINVAL);
	ck_assert_str_eq(err, "dead-letter topic \"dead/x\" of policy \"sensors/#\" (plugin_opt_policy #2) is matched by "
			"policy filter \"dead/#\" (plugin_opt_policy #1): dead letters must lie outside every tracked filter");
	ck_assert_ptr_null(t.trie);
	policy__table_free(&t);

	/* "#" tracks every dead letter, its own included. */
	memset(&t, 0, sizeof(t));
	add(&t, "#", "dead/all", NULL);
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "dead-letter topic \"dead/all\" of policy \"#\" (plugin_opt_policy #1)"));
	ck_assert_ptr_nonnull(strstr(err, "matched by policy filter \"#\" (plugin_opt_policy #1)"));
	policy__table_free(&t);

	/* Matched through '+' and through the parent level of '#'. */
	memset(&t, 0, sizeof(t));
	add(&t, "jobs/+", "dlq/jobs", NULL);
	add(&t, "dlq/jobs/#", "x/y", "p.json: policies[4]");
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "\"dlq/jobs\" of policy \"jobs/+\" (plugin_opt_policy #1)"));
	ck_assert_ptr_nonnull(strstr(err, "filter \"dlq/jobs/#\" (p.json: policies[4])"));
	policy__table_free(&t);
}
END_TEST

START_TEST(test_finish_checks_each_policy)
{
	struct dlq_policy_table t = {0};
	char err[512];

	add(&t, "a/b#", "dead", NULL);
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "plugin_opt_policy #1: \"a/b#\" is not a valid topic filter"));
	policy__table_free(&t);

	memset(&t, 0, sizeof(t));
	add(&t, "a/b", "$dead", NULL);
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "dead_letter \"$dead\""));
	policy__table_free(&t);

	memset(&t, 0, sizeof(t));
	add(&t, "a/b", "dead", NULL);
	t.items[0].max_attempts = 0;
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "max_attempts must be an integer from 1 to 1000, got 0"));
	policy__table_free(&t);
}
END_TEST

START_TEST(test_add_after_finish_needs_finish)
{
	struct dlq_policy_table t = {0};
	char err[512];

	add(&t, "a", "dead", NULL);
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), 0);
	ck_assert_str_eq(match(&t, "a"), "a");
	add(&t, "b", "dead2", NULL);
	ck_assert_ptr_null(match(&t, "a"));
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), 0);
	ck_assert_str_eq(match(&t, "a"), "a");
	ck_assert_str_eq(match(&t, "b"), "b");
	/* Finishing twice rebuilds the index without leaking. */
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), 0);
	ck_assert_str_eq(match(&t, "b"), "b");
	policy__table_free(&t);
}
END_TEST

START_TEST(test_empty_table)
{
	struct dlq_policy_table t = {0};
	char err[64];

	ck_assert_ptr_null(policy__match(&t, "a"));
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), 0);
	ck_assert_ptr_null(policy__match(&t, "a"));
	policy__table_free(&t);
}
END_TEST

START_TEST(test_ten_thousand_policies)
{
	struct dlq_policy_table t = {0};
	char err[512];
	char filter[64], dead[64], topic[64];
	const struct dlq_policy *p;

	/* Three shapes, interleaved so that siblings arrive out of order. */
	for(unsigned i = 0; i < 10000; i++){
		unsigned k = (i * 7919) % 10000;
		switch(i % 3){
			case 0: snprintf(filter, sizeof(filter), "site/%u/#", k); break;
			case 1: snprintf(filter, sizeof(filter), "site/%u/+/temp", k); break;
			default: snprintf(filter, sizeof(filter), "+/%u/x/y", k); break;
		}
		snprintf(dead, sizeof(dead), "dead/%u", i);
		add(&t, filter, dead, NULL);
	}
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), 0);
	for(unsigned i = 0; i < 10000; i++){
		unsigned k = (i * 7919) % 10000;
		switch(i % 3){
			case 0:
				snprintf(topic, sizeof(topic), "site/%u/a/b", k);
				break;
			case 1:
				snprintf(topic, sizeof(topic), "site/%u/room/temp", k);
				break;
			default:
				snprintf(topic, sizeof(topic), "other/%u/x/y", k);
				break;
		}
		p = policy__match(&t, topic);
		ck_assert_msg(p != NULL && p->index == i, "topic %s matched %s", topic, p ? p->filter : "nothing");
	}
	ck_assert_ptr_null(policy__match(&t, "site/10000/a"));
	ck_assert_ptr_null(policy__match(&t, "dead/5"));
	ck_assert_ptr_null(policy__match(&t, "$site/0/a"));
	policy__table_free(&t);
}
END_TEST

START_TEST(test_deep_filters)
{
	struct dlq_policy_table t = {0};
	char err[512];
	size_t levels = 32768;
	char *exact = malloc(2 * levels);
	char *hash = malloc(2 * levels);
	char *topic = malloc(2 * levels + 2);

	/* "a/a/.../a": 32768 levels, 65535 bytes, the longest filter there is;
	 * "a/.../a/#" one level shorter; no recursion on the way. */
	ck_assert_ptr_nonnull(exact);
	ck_assert_ptr_nonnull(hash);
	ck_assert_ptr_nonnull(topic);
	for(size_t i = 0; i < levels; i++){
		memcpy(exact + 2 * i, "a/", 2);
	}
	exact[2 * levels - 1] = '\0';
	memcpy(hash, exact, 2 * levels);
	hash[2 * levels - 2] = '#';
	add(&t, exact, "dead/1", NULL);
	add(&t, hash, "dead/2", NULL);
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), 0);
	ck_assert_ptr_eq(policy__match(&t, exact), &t.items[0]);
	memcpy(topic, exact, 2 * levels);
	topic[2 * levels - 2] = 'b';
	ck_assert_ptr_eq(policy__match(&t, topic), &t.items[1]);
	topic[2 * levels - 3] = '\0'; /* the parent level of the '#' */
	ck_assert_ptr_eq(policy__match(&t, topic), &t.items[1]);
	topic[2 * levels - 5] = '\0'; /* one level short of it */
	ck_assert_ptr_null(policy__match(&t, topic));
	policy__table_free(&t);
	free(exact);
	free(hash);
	free(topic);
}
END_TEST

/* The reference: every policy tried with topic__matches, precedence as
 * policy.h states it. */
static const struct dlq_policy *brute_match(const struct dlq_policy_table *t, const char *topic)
{
	const struct dlq_policy *best = NULL;

	for(size_t i = 0; i < t->count; i++){
		const struct dlq_policy *p = &t->items[i];
		if(!topic__matches(p->filter, topic)) continue;
		if(best == NULL || p->wildcards < best->wildcards
				|| (p->wildcards == best->wildcards && strlen(p->filter) > strlen(best->filter))){
			best = p; /* ties on both keep the earlier, declared first */
		}
	}
	return best;
}

static void random_path(char *buf, size_t size, unsigned *seed, bool filter)
{
	/* Filters draw from the first five and the wildcards; topics from the
	 * first six, so "c" is a level that only '+' and '#' match. */
	static const char *const levels[] = {"a", "b", "ab", "", "$x", "c"};
	unsigned n = 1 + (unsigned)rand_r(seed) % 4;
	size_t len = 0;

	buf[0] = '\0';
	for(unsigned i = 0; i < n; i++){
		unsigned pick = (unsigned)rand_r(seed) % (filter ? 16 : 6);
		const char *level;
		if(!filter){
			level = levels[pick];
		}else if(pick < 12){
			level = levels[pick % 5];
		}else if(pick < 15 || i + 1 < n){
			level = "+";
		}else{
			level = "#"; /* only last */
		}
		len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? "/" : "", level);
	}
}

START_TEST(test_matches_reference)
{
	struct dlq_policy_table t = {0};
	char err[512];
	char buf[64];
	unsigned seed = 12345;
	size_t matched = 0, unmatched = 0;

	for(int tries = 0; tries < 2000 && t.count < 100; tries++){
		random_path(buf, sizeof(buf), &seed, true);
		bool dup = false;
		for(size_t i = 0; i < t.count && !dup; i++){
			dup = !strcmp(t.items[i].filter, buf);
		}
		/* Dead letters have five levels, so only '#' filters can reach
		 * them: those must start with a literal level. */
		if(dup || !topic__valid_filter(buf) || topic__matches(buf, "z/z/z/z/z")) continue;
		add(&t, buf, "z/z/z/z/z", NULL);
	}
	ck_assert_uint_eq(t.count, 100);
	ck_assert_msg(policy__table_finish(&t, err, sizeof(err)) == 0, "%s", err);
	for(int i = 0; i < 20000; i++){
		random_path(buf, sizeof(buf), &seed, false);
		if(!topic__valid_publish(buf)) continue;
		const struct dlq_policy *want = brute_match(&t, buf);
		const struct dlq_policy *got = policy__match(&t, buf);
		ck_assert_msg(want == got, "topic \"%s\": want %s, got %s", buf,
				want ? want->filter : "nothing", got ? got->filter : "nothing");
		if(got){
			matched++;
		}else{
			unmatched++;
		}
	}
	/* Both outcomes were exercised, not just one. */
	ck_assert_uint_gt(matched, 1000);
	ck_assert_uint_gt(unmatched, 1000);
	policy__table_free(&t);
}
END_TEST

static Suite *policy_suite(void)
{
	Suite *s = suite_create("policy");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_add_sets_index_and_wildcards);
	tcase_add_test(tc, test_precedence);
	tcase_add_test(tc, test_precedence_length_then_order);
	tcase_add_test(tc, test_dollar_topics);
	tcase_add_test(tc, test_empty_levels);
	tcase_add_test(tc, test_duplicate_filters);
	tcase_add_test(tc, test_dead_letter_inside_filter);
	tcase_add_test(tc, test_finish_checks_each_policy);
	tcase_add_test(tc, test_add_after_finish_needs_finish);
	tcase_add_test(tc, test_empty_table);
	tcase_add_test(tc, test_ten_thousand_policies);
	tcase_add_test(tc, test_deep_filters);
	tcase_add_test(tc, test_matches_reference);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(policy_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
