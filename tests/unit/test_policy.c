/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of policy.c: building and validating a table (duplicates, dead
 * letters inside a filter), and matching with precedence, '$' topics, empty
 * levels and the parent level of '#'. The trie is held to a brute-force
 * reference built on topic__matches, and to a 10,000-policy table, whose
 * cost to build from a policy file and to match is printed.
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "check_suite.h"
#include "config/config.h"
#include "model/policy.h"
#include "mosquitto_dlq.h"
#include "policy_reference.h"
#include "test_util.h"
#include "util/topic.h"

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

/* A topic and the filter of the policy it must match (NULL: none). */
struct match_row {
	const char *topic;
	const char *want;
};

/* Fails the test, naming the caller's line and the row, unless every topic
 * of rows matches its policy. */
#define expect_matches(t, rows) expect_matches_at(__LINE__, (t), (rows), ARRAY_LEN(rows))
static void expect_matches_at(int line, const struct dlq_policy_table *t, const struct match_row *rows, size_t n)
{
	for(size_t i = 0; i < n; i++){
		const char *got = match(t, rows[i].topic);
		bool ok = rows[i].want ? got != NULL && !strcmp(got, rows[i].want) : got == NULL;
		ck_assert_msg(ok, "line %d, topic \"%s\": matched %s, expected %s", line,
				rows[i].topic ? rows[i].topic : "(null)", got ? got : "nothing", rows[i].want ? rows[i].want : "nothing");
	}
}

/* A policy a test table is built from (source NULL: "plugin_opt_policy #N",
 * N its place in the table). */
struct policy_row {
	const char *filter;
	const char *dead_letter;
	const char *source;
};

static void add_rows(struct dlq_policy_table *t, const struct policy_row *policies, size_t n)
{
	memset(t, 0, sizeof(*t));
	for(size_t i = 0; i < n; i++){
		add(t, policies[i].filter, policies[i].dead_letter, policies[i].source);
	}
}

/* Builds t from policies and finishes it; fails the test, naming the
 * caller's line, unless the finish accepts the table. */
#define build(t, policies) build_at(__LINE__, (t), (policies), ARRAY_LEN(policies))
static void build_at(int line, struct dlq_policy_table *t, const struct policy_row *policies, size_t n)
{
	char err[512] = "";

	add_rows(t, policies, n);
	int rc = policy__table_finish(t, err, sizeof(err));
	ck_assert_msg(rc == 0, "line %d: the finish returned %d: %s", line, rc, err);
}

/* Builds t from policies; fails the test, naming the caller's line, unless
 * the finish refuses the table with EINVAL and leaves it without a trie. Its
 * message is left in err. */
#define refuse(t, policies, err) refuse_at(__LINE__, (t), (policies), ARRAY_LEN(policies), (err), sizeof(err))
static void refuse_at(int line, struct dlq_policy_table *t, const struct policy_row *policies, size_t n, char *err,
		size_t err_size)
{
	add_rows(t, policies, n);
	int rc = policy__table_finish(t, err, err_size);
	ck_assert_msg(rc == EINVAL, "line %d: the finish returned %d, expected EINVAL", line, rc);
	ck_assert_ptr_null(t->trie);
}

/* Builds a table of policies, which the finish must accept, and checks that
 * every topic of rows matches its policy. */
#define expect_table_matches(policies, rows) \
	expect_table_matches_at(__LINE__, (policies), ARRAY_LEN(policies), (rows), ARRAY_LEN(rows))
static void expect_table_matches_at(int line, const struct policy_row *policies, size_t n_policies,
		const struct match_row *rows, size_t n_rows)
{
	struct dlq_policy_table t;

	build_at(line, &t, policies, n_policies);
	expect_matches_at(line, &t, rows, n_rows);
	policy__table_free(&t);
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

/* A policy is a table's at its own index only: not another table's at the
 * same index (a reload's old and new tables), not a copy, not NULL. */
START_TEST(test_index_in_finds_only_the_tables_own)
{
	struct dlq_policy_table t = {0}, u = {0};
	add(&t, "a/b", "dead/1", NULL);
	add(&t, "c/#", "dead/2", NULL);
	add(&u, "a/b", "dead/1", NULL);
	ck_assert_int_eq(policy__index_in(&t, &t.items[0]), 0);
	ck_assert_int_eq(policy__index_in(&t, &t.items[1]), 1);
	ck_assert_int_eq(policy__index_in(&u, &t.items[0]), -1);
	ck_assert_int_eq(policy__index_in(&u, &t.items[1]), -1);
	ck_assert_int_eq(policy__index_in(&t, &u.items[0]), -1);
	struct dlq_policy copy = t.items[1];
	ck_assert_int_eq(policy__index_in(&t, &copy), -1);
	ck_assert_int_eq(policy__index_in(&t, NULL), -1);
	struct dlq_policy_table empty = {0};
	ck_assert_int_eq(policy__index_in(&empty, &t.items[0]), -1);
	policy__table_free(&t);
	policy__table_free(&u);
}
END_TEST

START_TEST(test_precedence)
{
	static const struct policy_row policies[] = {
		{"a/+/c", "dead/1", NULL}, {"a/#", "dead/2", NULL}, {"a/b/c", "dead/3", NULL}, {"+/+/+", "dead/4/x/y", NULL},
	};
	static const struct match_row rows[] = {
		{"a/b/c", "a/b/c"},   /* no wildcards */
		{"a/x/c", "a/+/c"},   /* 1 wildcard, longer than a/# */
		{"a/x/d", "a/#"},     /* 1 wildcard beats 3 */
		{"b/x/d", "+/+/+"},
		{"a", "a/#"},         /* parent level of '#' */
		{"a/b/c/d", "a/#"},
		{"b/c", NULL},
		{"b", NULL},
	};
	expect_table_matches(policies, rows);
}
END_TEST

START_TEST(test_precedence_length_then_order)
{
	struct dlq_policy_table t;

	/* Both one wildcard and five bytes: the first declared wins. */
	static const struct policy_row first[] = {
		{"a/+/c", "dead/1", NULL}, {"+/b/c", "dead/2", NULL}, {"+/bb/c", "dead/3", NULL}, {"aa/+/c", "dead/4", NULL},
	};
	build(&t, first);
	ck_assert_str_eq(match(&t, "a/b/c"), "a/+/c");
	ck_assert_uint_eq(policy__match(&t, "a/b/c")->index, 0);
	/* "+/bb/c" and "aa/+/c" tie on length too: declaration order. */
	static const struct match_row tie[] = {{"aa/bb/c", "+/bb/c"}, {"x/bb/c", "+/bb/c"}};
	expect_matches(&t, tie);
	policy__table_free(&t);

	static const struct policy_row swapped[] = {{"+/b/c", "dead/2", NULL}, {"a/+/c", "dead/1", NULL}};
	static const struct match_row swapped_wins[] = {{"a/b/c", "+/b/c"}};
	expect_table_matches(swapped, swapped_wins);

	/* Same wildcard count, different length: the longer wins whatever
	 * the order. */
	static const struct policy_row lengths[] = {
		{"a/#", "dead/1", NULL}, {"a/b/#", "dead/2", NULL}, {"+/b/cc", "dead/3", NULL},
	};
	static const struct match_row longer[] = {{"a/b/x", "a/b/#"}, {"a/b/cc", "+/b/cc"}, {"a/x", "a/#"}};
	expect_table_matches(lengths, longer);
}
END_TEST

START_TEST(test_dollar_topics)
{
	static const struct policy_row wildcards[] = {
		{"+/x", "dead/1", NULL}, {"+/+/+/#", "dead/2", NULL}, {"+", "dead/3", NULL},
	};
	static const struct match_row wild[] = {
		{"$SYS/x", NULL},
		{"$SYS/x/y", NULL},
		{"$SYS/x/y/z", NULL},
		{"$SYS", NULL},
		{"SYS/x", "+/x"},
		{"SYS", "+"},
		{"a/$x/b", "+/+/+/#"},
	};
	expect_table_matches(wildcards, wild);

	static const struct policy_row dollar[] = {
		{"$SYS/#", "dead/1", NULL}, {"$SYS/+", "dead/2", NULL}, {"+/x", "dead/3/q", NULL},
	};
	/* One wildcard and six bytes each: the first declared wins. */
	static const struct match_row named[] = {{"$SYS/x", "$SYS/#"}, {"$SYS/x/y", "$SYS/#"}, {"$SYS", "$SYS/#"}};
	expect_table_matches(dollar, named);
}
END_TEST

START_TEST(test_empty_levels)
{
	static const struct policy_row policies[] = {
		{"a//b", "dead/1", NULL}, {"+/b", "dead/2/q", NULL}, {"a/+", "dead/3/q", NULL}, {"/#", "dead/4", NULL},
	};
	static const struct match_row rows[] = {
		{"a//b", "a//b"},
		{"/b", "+/b"},   /* "/#" is 1 wildcard, 2 bytes; "+/b" 3 bytes */
		{"a/", "a/+"},
		{"/", "/#"},
		{"//x", "/#"},
		{"a/b/c", NULL},
		{"a", NULL},
		{"", NULL},
		{NULL, NULL},
	};
	expect_table_matches(policies, rows);
}
END_TEST

START_TEST(test_duplicate_filters)
{
	struct dlq_policy_table t;
	char err[512];
	static const struct policy_row policies[] = {
		{"a/+", "dead/1/q", NULL},
		{"b/#", "dead/2", NULL},
		{"b/#", "dead/3", "policies.json: policies[0]"},
		{"a/+", "dead/4/q", NULL},
	};

	refuse(&t, policies, err);
	/* The earliest repeat is reported, with the one it repeats. */
	ck_assert_str_eq(err, "duplicate policy filter \"b/#\": policies.json: policies[0] repeats plugin_opt_policy #2");
	ck_assert_ptr_null(policy__match(&t, "b/x"));
	policy__table_free(&t);
}
END_TEST

START_TEST(test_dead_letter_inside_filter)
{
	struct dlq_policy_table t;
	char err[512];

	static const struct policy_row inside[] = {{"dead/#", "other/d", NULL}, {"sensors/#", "dead/x", NULL}};
	refuse(&t, inside, err);
	ck_assert_str_eq(err, "dead-letter topic \"dead/x\" of policy \"sensors/#\" (plugin_opt_policy #2) is matched by "
			"policy filter \"dead/#\" (plugin_opt_policy #1): dead letters must lie outside every tracked filter");
	policy__table_free(&t);

	/* "#" tracks every dead letter, its own included. */
	static const struct policy_row everything[] = {{"#", "dead/all", NULL}};
	refuse(&t, everything, err);
	ck_assert_ptr_nonnull(strstr(err, "dead-letter topic \"dead/all\" of policy \"#\" (plugin_opt_policy #1)"));
	ck_assert_ptr_nonnull(strstr(err, "matched by policy filter \"#\" (plugin_opt_policy #1)"));
	policy__table_free(&t);

	/* Matched through '+' and through the parent level of '#'. */
	static const struct policy_row parent[] = {
		{"jobs/+", "dlq/jobs", NULL}, {"dlq/jobs/#", "x/y", "p.json: policies[4]"},
	};
	refuse(&t, parent, err);
	ck_assert_ptr_nonnull(strstr(err, "\"dlq/jobs\" of policy \"jobs/+\" (plugin_opt_policy #1)"));
	ck_assert_ptr_nonnull(strstr(err, "filter \"dlq/jobs/#\" (p.json: policies[4])"));
	policy__table_free(&t);
}
END_TEST

START_TEST(test_finish_checks_each_policy)
{
	/* One policy each (add gives it max_attempts 3), refused by the finish. */
	static const struct {
		const char *filter, *dead_letter;
		unsigned max_attempts;
		const char *want;
	} bad[] = {
		{"a/b#", "dead", 3, "plugin_opt_policy #1: \"a/b#\" is not a valid topic filter"},
		{"a/b", "$dead", 3, "dead_letter \"$dead\""},
		{"a/b", "dead", 0, "max_attempts must be an integer from 1 to 1000, got 0"},
	};
	char err[512];

	for(size_t i = 0; i < ARRAY_LEN(bad); i++){
		struct dlq_policy_table t = {0};
		add(&t, bad[i].filter, bad[i].dead_letter, NULL);
		t.items[0].max_attempts = bad[i].max_attempts;
		ck_assert_msg(policy__table_finish(&t, err, sizeof(err)) == EINVAL, "case %zu: accepted", i);
		ck_assert_msg(strstr(err, bad[i].want) != NULL, "case %zu: \"%s\" lacks \"%s\"", i, err, bad[i].want);
		policy__table_free(&t);
	}
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

/* The i-th of the 10,000 policies of the large tables: three shapes,
 * interleaved so that siblings arrive out of order. */
static void thousands_filter(char *buf, size_t size, unsigned i)
{
	static const char *const shapes[] = {"site/%u/#", "site/%u/+/temp", "+/%u/x/y"};

	snprintf(buf, size, shapes[i % 3], (i * 7919) % 10000);
}

/* A topic that the i-th policy of thousands_filter matches, and no policy
 * before it. */
static void thousands_topic(char *buf, size_t size, unsigned i)
{
	static const char *const topics[] = {"site/%u/a/b", "site/%u/room/temp", "other/%u/x/y"};

	snprintf(buf, size, topics[i % 3], (i * 7919) % 10000);
}

START_TEST(test_ten_thousand_policies)
{
	struct dlq_policy_table t = {0};
	char err[512];
	char filter[64], dead[64], topic[64];
	const struct dlq_policy *p;

	for(unsigned i = 0; i < 10000; i++){
		thousands_filter(filter, sizeof(filter), i);
		snprintf(dead, sizeof(dead), "dead/%u", i);
		add(&t, filter, dead, NULL);
	}
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), 0);
	for(unsigned i = 0; i < 10000; i++){
		thousands_topic(topic, sizeof(topic), i);
		p = policy__match(&t, topic);
		ck_assert_msg(p != NULL && p->index == i, "topic %s matched %s", topic, p ? p->filter : "nothing");
	}
	ck_assert_ptr_null(policy__match(&t, "site/10000/a"));
	ck_assert_ptr_null(policy__match(&t, "dead/5"));
	ck_assert_ptr_null(policy__match(&t, "$site/0/a"));
	policy__table_free(&t);
}
END_TEST

static double seconds_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The 10,000 policies of test_ten_thousand_policies as a policy file, read
 * and finished as at startup, then matched against topics of all of them
 * and against topics of none. The times are printed (a benchmark's
 * figures, not an assertion: the machine's load decides them). */
START_TEST(test_ten_thousand_policies_cost)
{
	enum { N = 10000, MATCHES = 200000 };
	size_t cap = N * 96 + 64, len = 0;
	char *json = malloc(cap);
	ck_assert_ptr_nonnull(json);
	len += (size_t)snprintf(json + len, cap - len, "{\"policies\":[");
	for(unsigned i = 0; i < N; i++){
		char filter[64];
		thousands_filter(filter, sizeof(filter), i);
		len += (size_t)snprintf(json + len, cap - len, "%s{\"filter\":\"%s\",\"max_attempts\":3,\"dead_letter\":\"dead/%u\"}",
				i ? "," : "", filter, i);
	}
	snprintf(json + len, cap - len, "]}");

	struct dlq_policy_table t = {0};
	char err[512];
	double t0 = seconds_now();
	ck_assert_msg(policy_parse__json(json, strlen(json), "policies.json", &t, err, sizeof(err)) == 0, "%s", err);
	double t1 = seconds_now();
	ck_assert_msg(policy__table_finish(&t, err, sizeof(err)) == 0, "%s", err);
	double t2 = seconds_now();
	ck_assert_uint_eq(t.count, N);

	char topic[64];
	size_t found = 0;
	double t3 = seconds_now();
	for(unsigned j = 0; j < MATCHES; j++){
		thousands_topic(topic, sizeof(topic), (j * 7u) % N);
		found += policy__match(&t, topic) != NULL;
	}
	double t4 = seconds_now();
	for(unsigned j = 0; j < MATCHES; j++){
		snprintf(topic, sizeof(topic), "elsewhere/%u/a/b", j % N);
		found += policy__match(&t, topic) != NULL;
	}
	double t5 = seconds_now();
	/* The same loop without the match: the cost of making the topics. */
	for(unsigned j = 0; j < MATCHES; j++){
		snprintf(topic, sizeof(topic), "elsewhere/%u/a/b", j % N);
		found += topic[0] == '\0';
	}
	double t6 = seconds_now();
	ck_assert_uint_eq(found, MATCHES);
	double base = (t6 - t5) / MATCHES;
	fprintf(stderr, "policy: %u policies from a %zu-byte policy file: parsed in %.1f ms, validated and indexed in %.1f ms; "
			"policy__match %.0f ns per matching topic, %.0f ns per topic no filter matches\n",
			N, strlen(json), (t1 - t0) * 1e3, (t2 - t1) * 1e3,
			((t4 - t3) / MATCHES - base) * 1e9, ((t5 - t4) / MATCHES - base) * 1e9);
	policy__table_free(&t);
	free(json);
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
		const struct dlq_policy *want = policy_reference__match(&t, buf);
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

/* ---- retry delays ---- */

static struct dlq_policy delays(uint64_t delay_ms, double backoff, uint64_t max_ms, double jitter)
{
	struct dlq_policy p;
	memset(&p, 0, sizeof(p));
	policy__set_defaults(&p);
	p.retry_delay_ms = delay_ms;
	p.retry_backoff = backoff;
	if(max_ms) p.retry_max_delay_ms = max_ms;
	p.retry_jitter = jitter;
	return p;
}

/* An attempt, the delay asked for (-1: none), the random draw, and the
 * delay the policy must give for them. */
struct delay_row {
	unsigned attempt;
	int64_t requested_ms;
	double random;
	uint64_t want;
};

/* Fails the test, naming the caller's line and the row, unless p gives
 * every row its delay. */
#define expect_delays(p, rows) expect_delays_at(__LINE__, (p), (rows), ARRAY_LEN(rows))
static void expect_delays_at(int line, const struct dlq_policy *p, const struct delay_row *rows, size_t n)
{
	for(size_t i = 0; i < n; i++){
		uint64_t got = policy__retry_delay_ms(p, rows[i].attempt, rows[i].requested_ms, rows[i].random);
		ck_assert_msg(got == rows[i].want, "line %d, attempt %u, asked %lld, random %g: %llu, expected %llu", line,
				rows[i].attempt, (long long)rows[i].requested_ms, rows[i].random, (unsigned long long)got,
				(unsigned long long)rows[i].want);
	}
}

START_TEST(test_set_defaults)
{
	struct dlq_policy p;
	memset(&p, 0x5A, sizeof(p));
	char *keep = (char *)"kept";
	p.filter = keep;
	p.max_attempts = 7;
	policy__set_defaults(&p);
	ck_assert_uint_eq(p.retry_delay_ms, 0);
	ck_assert_uint_eq(p.retry_max_delay_ms, DLQ_DEFAULT_RETRY_MAX_DELAY_MS);
	ck_assert_uint_eq(p.retry_max_delay_ms, 3600000);
	ck_assert(p.retry_backoff == 1.0);
	ck_assert(p.retry_jitter == 0.0);
	/* Nothing else. */
	ck_assert_ptr_eq(p.filter, keep);
	ck_assert_uint_eq(p.max_attempts, 7);
}
END_TEST

START_TEST(test_no_delay_is_zero_always)
{
	struct dlq_policy p = delays(0, 2.0, 0, 0.5);
	for(unsigned a = 1; a <= 1000; a++){
		ck_assert_uint_eq(policy__retry_delay_ms(&p, a, -1, 0.7), 0);
	}
}
END_TEST

START_TEST(test_fixed_delay)
{
	struct dlq_policy p = delays(1000, 1.0, 0, 0);
	for(unsigned a = 1; a <= 20; a++){
		ck_assert_uint_eq(policy__retry_delay_ms(&p, a, -1, 0), 1000);
	}
	/* The largest attempt the ledger can hold. */
	ck_assert_uint_eq(policy__retry_delay_ms(&p, UINT16_MAX, -1, 0), 1000);
}
END_TEST

START_TEST(test_backoff)
{
	struct dlq_policy p = delays(1000, 2.0, 0, 0);
	uint64_t want = 1000;
	for(unsigned a = 1; a <= 12; a++){
		ck_assert_msg(policy__retry_delay_ms(&p, a, -1, 0) == want, "attempt %u: %llu, expected %llu", a,
				(unsigned long long)policy__retry_delay_ms(&p, a, -1, 0), (unsigned long long)want);
		want *= 2;
	}
	/* 1000 * 2^12 = 4096000 > 1h: the default cap. */
	ck_assert_uint_eq(policy__retry_delay_ms(&p, 13, -1, 0), DLQ_DEFAULT_RETRY_MAX_DELAY_MS);

	p = delays(1000, 1.5, 0, 0);
	static const struct delay_row half[] = {{1, -1, 0, 1000}, {2, -1, 0, 1500}, {3, -1, 0, 2250}};
	expect_delays(&p, half);
}
END_TEST

START_TEST(test_max_delay_caps)
{
	struct dlq_policy p = delays(1000, 10.0, 30000, 0);
	static const struct delay_row tenfold[] = {{1, -1, 0, 1000}, {2, -1, 0, 10000}, {3, -1, 0, 30000}, {4, -1, 0, 30000}};
	expect_delays(&p, tenfold);
	/* A delay equal to the cap. */
	p = delays(30000, 2.0, 30000, 0);
	static const struct delay_row at_cap[] = {{1, -1, 0, 30000}, {9, -1, 0, 30000}};
	expect_delays(&p, at_cap);
}
END_TEST

START_TEST(test_huge_attempts_do_not_overflow)
{
	static const double backoffs[] = {1.0001, 1.5, 2.0, 100.0};
	static const uint64_t maxes[] = {1, 30000, DLQ_DEFAULT_RETRY_MAX_DELAY_MS, 7ull * 24 * 3600 * 1000, 1ull << 53};
	static const unsigned attempts[] = {64, 65, 1000, 1024, 1025, UINT16_MAX, UINT_MAX / 2, UINT_MAX};
	for(size_t b = 0; b < ARRAY_LEN(backoffs); b++){
		for(size_t m = 0; m < ARRAY_LEN(maxes); m++){
			struct dlq_policy p = delays(1, backoffs[b], maxes[m], 0);
			for(size_t a = 0; a < ARRAY_LEN(attempts); a++){
				uint64_t v = policy__retry_delay_ms(&p, attempts[a], -1, 0);
				ck_assert_msg(v >= 1 && v <= maxes[m], "backoff %g, max %llu, attempt %u: %llu",
						backoffs[b], (unsigned long long)maxes[m], attempts[a], (unsigned long long)v);
			}
		}
	}
	/* Doubling for 1000 attempts ends at the cap, exactly. */
	struct dlq_policy p = delays(1000, 2.0, 0, 0);
	ck_assert_uint_eq(policy__retry_delay_ms(&p, 1000, -1, 0), DLQ_DEFAULT_RETRY_MAX_DELAY_MS);
	ck_assert_uint_eq(policy__retry_delay_ms(&p, UINT_MAX, -1, 0), DLQ_DEFAULT_RETRY_MAX_DELAY_MS);
	p = delays(1000, 100.0, 0, 0);
	ck_assert_uint_eq(policy__retry_delay_ms(&p, UINT_MAX, -1, 0), DLQ_DEFAULT_RETRY_MAX_DELAY_MS);
}
END_TEST

START_TEST(test_a_huge_retry_max_delay_still_caps)
{
	/* The parser takes any retry_max_delay that fits in 64 bits of
	 * milliseconds ("18446744073709551615ms"); the computed delay must not
	 * pass it, nor wrap to 0 (which would send the copy at once). */
	static const uint64_t maxes[] = {(1ull << 53) + 1, UINT64_MAX / 2, UINT64_MAX - 1024, UINT64_MAX};
	for(size_t m = 0; m < ARRAY_LEN(maxes); m++){
		struct dlq_policy p = delays(1000, 100.0, maxes[m], 0);
		for(unsigned a = 1; a <= 64; a++){
			uint64_t v = policy__retry_delay_ms(&p, a, -1, 0);
			ck_assert_msg(v >= 1000 && v <= maxes[m], "retry_max_delay %llu ms, attempt %u: %llu",
					(unsigned long long)maxes[m], a, (unsigned long long)v);
		}
	}
}
END_TEST

START_TEST(test_jitter_bounds)
{
	/* A delay d is drawn from [d*(1-jitter), d]: random 0 gives d, random
	 * close to 1 gives close to d*(1-jitter). */
	struct dlq_policy p = delays(10000, 1.0, 0, 0.5);
	ck_assert_uint_eq(policy__retry_delay_ms(&p, 1, -1, 0.0), 10000);
	uint64_t v = policy__retry_delay_ms(&p, 1, -1, 0.999999);
	ck_assert_uint_ge(v, 5000);
	ck_assert_uint_le(v, 5001);
	ck_assert_uint_eq(policy__retry_delay_ms(&p, 1, -1, 0.5), 7500);
	for(int i = 0; i < 1000; i++){
		v = policy__retry_delay_ms(&p, 1, -1, i / 1000.0);
		ck_assert_uint_ge(v, 5000);
		ck_assert_uint_le(v, 10000);
	}
	/* Full jitter reaches down to nothing; none leaves the delay alone. */
	p = delays(10000, 1.0, 0, 1.0);
	ck_assert_uint_eq(policy__retry_delay_ms(&p, 1, -1, 0.0), 10000);
	ck_assert_uint_le(policy__retry_delay_ms(&p, 1, -1, 0.999999), 1);
	p = delays(10000, 1.0, 0, 0.0);
	ck_assert_uint_eq(policy__retry_delay_ms(&p, 1, -1, 0.999999), 10000);
	/* Jitter applies after the cap. */
	p = delays(1000, 10.0, 30000, 0.5);
	v = policy__retry_delay_ms(&p, 5, -1, 0.999999);
	ck_assert_uint_ge(v, 15000);
	ck_assert_uint_le(v, 15001);
}
END_TEST

START_TEST(test_requested_delay)
{
	struct dlq_policy p = delays(2000, 2.0, 30000, 0.5);
	static const struct delay_row asked[] = {
		/* It replaces the computed delay, and is not jittered. */
		{1, 500, 0.9, 500},
		{5, 500, 0.9, 500},
		{1, 25000, 0.9, 25000},
		/* Capped by retry_max_delay. */
		{1, 30000, 0, 30000},
		{1, 30001, 0, 30000},
		{1, INT64_MAX, 0, 30000},
		/* Zero is at once. */
		{1, 0, 0.9, 0},
	};
	expect_delays(&p, asked);
	/* A policy without a delay still honours one asked for. */
	p = delays(0, 1.0, 0, 0);
	static const struct delay_row undelayed[] = {{1, 3000, 0, 3000}, {1, 7200000, 0, DLQ_DEFAULT_RETRY_MAX_DELAY_MS}};
	expect_delays(&p, undelayed);
}
END_TEST

START_TEST(test_finish_checks_delays)
{
	/* One policy each, with these delays; want NULL: the finish accepts
	 * it, else it refuses it with a message holding want. */
	enum { DEF = DLQ_DEFAULT_RETRY_MAX_DELAY_MS };
	static const struct {
		uint64_t delay, max;
		double backoff, jitter;
		const char *want;
	} cases[] = {
		{0, DEF, 0.5, 0, "retry_backoff must be a number from 1 to 100, got 0.5"},
		{0, DEF, 100.5, 0, "retry_backoff must be a number from 1 to 100"},
		{0, DEF, NAN, 0, "retry_backoff"},
		{0, DEF, INFINITY, 0, "retry_backoff"},
		{0, DEF, 1, -0.1, "retry_jitter must be a number from 0 to 1"},
		{0, DEF, 1, 1.5, "retry_jitter must be a number from 0 to 1"},
		{0, DEF, 1, NAN, "retry_jitter"},
		{5000, 4000, 1, 0, "retry_delay (5000 ms) must not exceed retry_max_delay (4000 ms)"},
		{7200000, DEF, 1, 0, "retry_delay (7200000 ms) must not exceed retry_max_delay (3600000 ms)"},
		{0, 0, 1, 0, "must not be zero"},
		/* The edges are fine. */
		{3600000, DEF, 100, 1, NULL},
	};
	char err[512];
	for(size_t i = 0; i < ARRAY_LEN(cases); i++){
		struct dlq_policy_table t = {0};
		add(&t, "a", "dead", NULL);
		t.items[0].retry_delay_ms = cases[i].delay;
		t.items[0].retry_max_delay_ms = cases[i].max;
		t.items[0].retry_backoff = cases[i].backoff;
		t.items[0].retry_jitter = cases[i].jitter;
		err[0] = '\0';
		int rc = policy__table_finish(&t, err, sizeof(err));
		if(cases[i].want == NULL){
			ck_assert_msg(rc == 0, "case %zu: refused: %s", i, err);
		}else{
			ck_assert_msg(rc == EINVAL, "case %zu: returned %d, expected EINVAL", i, rc);
			ck_assert_msg(strstr(err, cases[i].want) != NULL, "case %zu: \"%s\" lacks \"%s\"", i, err, cases[i].want);
			ck_assert_msg(strstr(err, "plugin_opt_policy #1") != NULL, "case %zu: \"%s\" does not name the policy", i, err);
		}
		policy__table_free(&t);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("policy");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	check_add(s, tc, CHECK_TESTS(test_add_sets_index_and_wildcards, test_index_in_finds_only_the_tables_own,
			test_precedence, test_precedence_length_then_order, test_dollar_topics, test_empty_levels,
			test_duplicate_filters, test_dead_letter_inside_filter, test_finish_checks_each_policy,
			test_add_after_finish_needs_finish, test_empty_table, test_ten_thousand_policies,
			test_ten_thousand_policies_cost, test_deep_filters, test_matches_reference));

	check_add(s, tcase_create("delays"), CHECK_TESTS(test_set_defaults, test_no_delay_is_zero_always, test_fixed_delay,
			test_backoff, test_max_delay_caps, test_huge_attempts_do_not_overflow,
			test_a_huge_retry_max_delay_still_caps, test_jitter_bounds, test_requested_delay,
			test_finish_checks_delays));
	return check_run(s);
}
