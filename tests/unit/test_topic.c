/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of topic.c: which filters and publish topics are valid, how many
 * wildcards a filter has, and matching under MQTT rules ('$' topics, '#' and
 * its parent level, empty levels, the 65535-byte limit), whether two filters
 * overlap, and the filter of a shared subscription.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "test_util.h"
#include "util/topic.h"

/* A string of len bytes of 'a' (caller frees). */
static char *long_topic(size_t len)
{
	char *s = malloc(len + 1);

	ck_assert_ptr_nonnull(s);
	memset(s, 'a', len);
	s[len] = '\0';
	return s;
}

START_TEST(test_valid_filter_accepts)
{
	static const char *const good[] = {
		"a", "#", "+", "a/#", "a/+/b", "+/+", "+/#", "/", "//", "a//b", "/#", "a/",
		"$SYS/#", "$SYS/+/x", "a b/c", "caf\xc3\xa9/+", "\xf0\x9f\x98\x80/#", "a=b", NULL
	};

	for(size_t i = 0; good[i]; i++){
		ck_assert_msg(topic__valid_filter(good[i]), "refused \"%s\"", good[i]);
	}
}
END_TEST

START_TEST(test_valid_filter_refuses)
{
	static const char *const bad[] = {
		"", "a/b#", "a+/b", "a/#/b", "#/a", "a/b+", "++", "##", "+a", "a#", "#+", "a/++/b",
		"\xff", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc3",
		"a\x01" "b", "a\x7f", "\xc2\x85", "\xef\xbf\xbf", "\xef\xb7\x90", NULL
	};

	ck_assert(!topic__valid_filter(NULL));
	for(size_t i = 0; bad[i]; i++){
		ck_assert_msg(!topic__valid_filter(bad[i]), "accepted bad[%zu]", i);
	}
}
END_TEST

START_TEST(test_valid_length_limit)
{
	char *max = long_topic(65535);
	char *over = long_topic(65536);

	ck_assert(topic__valid_filter(max));
	ck_assert(topic__valid_publish(max));
	ck_assert(!topic__valid_filter(over));
	ck_assert(!topic__valid_publish(over));
	/* A two-byte character that ends at the limit, and one past it. */
	max[65533] = '\xc3';
	max[65534] = '\xa9';
	ck_assert(topic__valid_publish(max));
	over[65534] = '\xc3';
	over[65535] = '\xa9';
	ck_assert(!topic__valid_publish(over));
	/* A lead byte with no continuation. */
	max[65534] = '\0';
	ck_assert(!topic__valid_publish(max));
	ck_assert(topic__matches("#", over) == false);
	free(max);
	free(over);
}
END_TEST

START_TEST(test_valid_publish)
{
	static const char *const good[] = {"a", "/", "a//b", "$SYS/x", "a b", "caf\xc3\xa9", "a=b", "dead/letters", NULL};
	static const char *const bad[] = {"", "+", "#", "a/+", "a/#", "a+b", "a#", "+/a", "\x7f", "\xfe", NULL};

	for(size_t i = 0; good[i]; i++){
		ck_assert_msg(topic__valid_publish(good[i]), "refused \"%s\"", good[i]);
	}
	for(size_t i = 0; bad[i]; i++){
		ck_assert_msg(!topic__valid_publish(bad[i]), "accepted bad[%zu]", i);
	}
	ck_assert(!topic__valid_publish(NULL));
}
END_TEST

struct match_case {
	const char *filter;
	const char *topic;
	bool match;
};

START_TEST(test_matches)
{
	static const struct match_case cases[] = {
		{"a", "a", true},
		{"a", "b", false},
		{"a", "a/b", false},
		{"a/b", "a", false},
		{"a/b", "a/b", true},
		{"a/b", "a/bc", false},
		{"a/bc", "a/b", false},
		{"#", "a", true},
		{"#", "a/b/c", true},
		{"#", "/", true},
		{"a/#", "a", true},          /* '#' stands for its parent level too */
		{"a/#", "a/", true},
		{"a/#", "a/b/c", true},
		{"a/#", "ab", false},
		{"a/#", "b/a", false},
		{"a/b/#", "a", false},
		{"+", "a", true},
		{"+", "a/b", false},
		{"+", "/", false},
		{"+", "", false},
		{"+/+", "/", true},           /* two empty levels */
		{"+/b", "/b", true},
		{"a/+", "a/", true},
		{"a/+", "a", false},
		{"a/+/c", "a/b/c", true},
		{"a/+/c", "a//c", true},
		{"a/+/c", "a/b/d", false},
		{"a/+/+", "a/b", false},
		{"+/#", "a", true},
		{"+/#", "a/b", true},
		{"a//b", "a//b", true},
		{"a//b", "a/b", false},
		{"a//b", "a/x/b", false},
		{"/a", "/a", true},
		{"/a", "a", false},
		{"/#", "/a", true},
		{"/#", "a", false},
		{"$SYS/x", "$SYS/x", true},
		{"#", "$SYS/x", false},       /* wildcard-first filters skip '$' topics */
		{"+/x", "$SYS/x", false},
		{"+/#", "$SYS/x", false},
		{"+", "$SYS", false},
		{"$SYS/#", "$SYS/x", true},
		{"$SYS/#", "$SYS", true},
		{"$SYS/+", "$SYS/x", true},
		{"a/$b", "a/$b", true},
		{"a/+", "a/$b", true},        /* '$' only matters in the first level */
		{"a/#", "a/$b", true},
		{"A", "a", false},            /* case-sensitive */
		{"a/b#", "a/b#", false},      /* invalid filter */
		{"a/#", "a/+", false},        /* invalid topic */
		{"", "", false},
	};

	for(size_t i = 0; i < ARRAY_LEN(cases); i++){
		ck_assert_msg(topic__matches(cases[i].filter, cases[i].topic) == cases[i].match,
				"filter \"%s\" topic \"%s\": expected %d", cases[i].filter, cases[i].topic, cases[i].match);
		/* Checked once, matched as often as a table needs. */
		if(topic__valid_filter(cases[i].filter) && topic__valid_publish(cases[i].topic)){
			ck_assert_msg(topic__matches_valid(cases[i].filter, cases[i].topic) == cases[i].match,
					"valid filter \"%s\" topic \"%s\"", cases[i].filter, cases[i].topic);
		}
	}
	ck_assert(!topic__matches(NULL, "a"));
	ck_assert(!topic__matches("a", NULL));
}
END_TEST

START_TEST(test_wildcards)
{
	ck_assert_uint_eq(topic__wildcards("a/b"), 0);
	ck_assert_uint_eq(topic__wildcards("#"), 1);
	ck_assert_uint_eq(topic__wildcards("+"), 1);
	ck_assert_uint_eq(topic__wildcards("a/+/c"), 1);
	ck_assert_uint_eq(topic__wildcards("+/+/+"), 3);
	ck_assert_uint_eq(topic__wildcards("+/b/#"), 2);
	ck_assert_uint_eq(topic__wildcards("a//b"), 0);
}
END_TEST

START_TEST(test_filters_overlap)
{
	static const struct { const char *a, *b; bool overlap; } cases[] = {
		{"a/b", "a/b", true},
		{"a/b", "a/c", false},
		{"a/+", "a/b", true},         /* wildcard on one side */
		{"a/b", "+/b", true},         /* ... or the other */
		{"+/b", "a/+", true},         /* on both: "a/b" */
		{"a/+/c", "a/b/d", false},
		{"#", "a/b", true},
		{"a/#", "#", true},
		{"a/#", "a", true},           /* '#' stands for its parent too */
		{"a", "a/#", true},
		{"a/+", "a", false},          /* '+' needs a level */
		{"a", "a/b", false},
		{"a/+", "a/", true},          /* the empty level */
		{"+/+", "a/b/c", false},
		{"+/+/#", "a/b", true},
		{"a/#", "b/#", false},
		{"#", "$SYS/#", false},       /* MQTT-4.7.2-1 */
		{"$SYS/#", "#", false},
		{"+/x", "$SYS/x", false},
		{"$SYS/#", "$SYS/+", true},
		{"$SYS/broker", "$SYS/+", true},
		{"+/x", "#", true},           /* both leading wildcards: "a/x" */
		{"a/b#", "a/b#", false},      /* invalid filters */
		{"", "#", false},
	};

	for(size_t i = 0; i < ARRAY_LEN(cases); i++){
		ck_assert_msg(topic__filters_overlap(cases[i].a, cases[i].b) == cases[i].overlap,
				"\"%s\" and \"%s\": expected %d", cases[i].a, cases[i].b, cases[i].overlap);
		ck_assert_msg(topic__filters_overlap(cases[i].b, cases[i].a) == cases[i].overlap,
				"\"%s\" and \"%s\": expected %d", cases[i].b, cases[i].a, cases[i].overlap);
	}
	ck_assert(!topic__filters_overlap(NULL, "#"));
	ck_assert(!topic__filters_overlap("#", NULL));
}
END_TEST

START_TEST(test_shared_filter)
{
	ck_assert_str_eq(topic__shared_filter("a/b"), "a/b");
	ck_assert_str_eq(topic__shared_filter("$share/g/a/#"), "a/#");
	ck_assert_str_eq(topic__shared_filter("$share/g/#"), "#");
	ck_assert_str_eq(topic__shared_filter("$SYS/#"), "$SYS/#");
	ck_assert_str_eq(topic__shared_filter("$sharex/g/a"), "$sharex/g/a");
	ck_assert_ptr_null(topic__shared_filter("$share/g"));
	ck_assert_ptr_null(topic__shared_filter("$share/g/"));
	ck_assert_ptr_null(topic__shared_filter("$share//a"));
	ck_assert_ptr_null(topic__shared_filter(NULL));
	/* A shared subscription to "#" does not reach "$SYS" either. */
	ck_assert(!topic__filters_overlap(topic__shared_filter("$share/g/#"), "$SYS/#"));
	ck_assert(topic__filters_overlap(topic__shared_filter("$share/g/jobs/+"), "jobs/#"));
}
END_TEST

int main(void)
{
	return check_run(check_suite("topic", tcase_create("core"), CHECK_TESTS(test_valid_filter_accepts,
			test_valid_filter_refuses, test_valid_length_limit, test_valid_publish, test_matches, test_wildcards,
			test_filters_overlap, test_shared_filter)));
}
