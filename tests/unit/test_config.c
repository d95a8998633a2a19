/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of config.c: plugin_opt_policy lines, the JSON policy file (from
 * a string and from a temporary file), durations, sizes and the options as a
 * whole. Every refusal is checked for the option, the value and the reason
 * in its message, and for leaving nothing behind.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_suite.h"
#include "config/config.h"
#include "mosquitto_dlq.h"
#include "util/units.h"
#include "test_util.h"

static char err[1024];

/* Fails the test unless each of the texts, up to the first NULL or the
 * max-th, is in err; what (or NULL) names the case in the message. */
static void assert_err_has(const char *const *texts, size_t max, const char *what)
{
	for(size_t i = 0; i < max && texts[i]; i++){
		ck_assert_msg(strstr(err, texts[i]) != NULL, "%s%serror \"%s\" lacks \"%s\"",
				what ? what : "", what ? ": " : "", err, texts[i]);
	}
}
#define ERR_HAS(...) assert_err_has((const char *const []){__VA_ARGS__, NULL}, SIZE_MAX, NULL)

static bool is_zero(const void *p, size_t len)
{
	const unsigned char *b = p;

	for(size_t i = 0; i < len; i++){
		if(b[i]) return false;
	}
	return true;
}

/* Parses opts, expecting a refusal: *out must be left zeroed. */
static void parse_fails(const struct dlq_option *opts, size_t count)
{
	struct dlq_config c;

	memset(&c, 0xA5, sizeof(c));
	err[0] = '\0';
	ck_assert_int_eq(config__parse(opts, count, &c, err, sizeof(err)), EINVAL);
	ck_assert(is_zero(&c, sizeof(c)));
	ck_assert_msg(err[0] != '\0', "no message");
}

/* A temporary file holding text; returns its path (caller unlinks, frees). */
static char *temp_file(const char *text)
{
	char *path = strdup("/tmp/dlq-test-XXXXXX");
	int fd;

	ck_assert_ptr_nonnull(path);
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

/* ---- plugin_opt_policy lines ---- */

START_TEST(test_line_good)
{
	struct dlq_policy p;

	ck_assert_int_eq(policy_parse__line("sensors/# max_attempts=5 dead_letter=dead/sensors", &p, err, sizeof(err)), 0);
	ck_assert_str_eq(p.filter, "sensors/#");
	ck_assert_uint_eq(p.max_attempts, 5);
	ck_assert_str_eq(p.dead_letter, "dead/sensors");
	ck_assert_ptr_null(p.retry_to);
	policy__free(&p);

	/* Tabs, extra spaces, any order of keys. */
	ck_assert_int_eq(policy_parse__line("\t a/+/c \tretry_to=retry/a  dead_letter=dlq/a\tmax_attempts=1000 ", &p, err, sizeof(err)), 0);
	ck_assert_str_eq(p.filter, "a/+/c");
	ck_assert_uint_eq(p.max_attempts, 1000);
	ck_assert_str_eq(p.dead_letter, "dlq/a");
	ck_assert_str_eq(p.retry_to, "retry/a");
	policy__free(&p);

	ck_assert_int_eq(policy_parse__line("a max_attempts=1 dead_letter=d retry_to=delivery", &p, err, sizeof(err)), 0);
	ck_assert_uint_eq(p.max_attempts, 1);
	ck_assert_ptr_null(p.retry_to);
	policy__free(&p);

	/* '=' may appear in a filter and in a topic value. */
	ck_assert_int_eq(policy_parse__line("a=b max_attempts=2 dead_letter=x=y", &p, err, sizeof(err)), 0);
	ck_assert_str_eq(p.filter, "a=b");
	ck_assert_str_eq(p.dead_letter, "x=y");
	policy__free(&p);
}
END_TEST

/* A policy line policy_parse__line must refuse, and what its
 * message must say. */
struct bad_line {
	const char *line;
	const char *want[3];
};

/* Fails the test unless c's line is refused with each of its texts in the
 * message, and the policy left zeroed. */
static void expect_line_refused(const struct bad_line *c)
{
	struct dlq_policy p;
	char what[512];

	memset(&p, 0xA5, sizeof(p));
	err[0] = '\0';
	ck_assert_msg(policy_parse__line(c->line, &p, err, sizeof(err)) == EINVAL, "accepted \"%s\"", c->line);
	ck_assert(is_zero(&p, sizeof(p)));
	snprintf(what, sizeof(what), "line \"%s\"", c->line);
	assert_err_has(c->want, ARRAY_LEN(c->want), what);
}

START_TEST(test_line_bad)
{
	static const struct bad_line cases[] = {
		{"", {"missing filter"}},
		{"  \t ", {"missing filter"}},
		{"max_attempts=3 dead_letter=d", {"missing filter", "\"max_attempts=3\""}},
		{"dead_letter=d max_attempts=3", {"missing filter", "\"dead_letter=d\""}},
		{"a/b# max_attempts=3 dead_letter=d", {"filter \"a/b#\"", "not a valid topic filter", "whole level"}},
		{"a+/b max_attempts=3 dead_letter=d", {"filter \"a+/b\"", "not a valid topic filter"}},
		{"a/\x01 max_attempts=3 dead_letter=d", {"not a valid topic filter", "UTF-8"}},
		{"a max_attempts=0 dead_letter=d", {"max_attempts must be an integer from 1 to 1000, got \"0\""}},
		{"a max_attempts=1001 dead_letter=d", {"from 1 to 1000", "got \"1001\""}},
		{"a max_attempts=-1 dead_letter=d", {"from 1 to 1000", "got \"-1\""}},
		{"a max_attempts=+5 dead_letter=d", {"from 1 to 1000", "got \"+5\""}},
		{"a max_attempts=5x dead_letter=d", {"got \"5x\""}},
		{"a max_attempts=1.5 dead_letter=d", {"got \"1.5\""}},
		{"a max_attempts=0x10 dead_letter=d", {"got \"0x10\""}},
		{"a max_attempts=99999999999999999999999 dead_letter=d", {"got \"99999999999999999999999\""}},
		{"a max_attempts=three dead_letter=d", {"got \"three\""}},
		{"a max_attempts= 5 dead_letter=d", {"max_attempts has an empty value"}},
		{"a max_attempts=3", {"dead_letter is required"}},
		{"a dead_letter=d", {"max_attempts is required"}},
		{"a", {"max_attempts is required"}},
		{"a max_attempts=3 dead_letter=d foo=bar", {"unknown key \"foo\""}},
		{"a max_attempts=3 dead_letter=d Max_Attempts=3", {"unknown key \"Max_Attempts\""}},
		{"a max_attempts=3 max_attempts=4 dead_letter=d", {"max_attempts given twice"}},
		{"a max_attempts=3 dead_letter=d dead_letter=e", {"dead_letter given twice"}},
		{"a max_attempts=3 dead_letter=d retry_to=r retry_to=s", {"retry_to given twice"}},
		{"a max_attempts=3 dead_letter", {"expected key=value", "\"dead_letter\""}},
		{"a b max_attempts=3 dead_letter=d", {"expected key=value", "got \"b\""}},
		{"a max_attempts=3 =x dead_letter=d", {"expected key=value", "\"=x\""}},
		{"a max_attempts=3 dead_letter=", {"dead_letter has an empty value"}},
		{"a max_attempts=3 dead_letter=d retry_to=", {"retry_to has an empty value"}},
		{"a max_attempts=3 dead_letter=d/+", {"dead_letter \"d/+\" is not a valid topic", "'+' or '#'"}},
		{"a max_attempts=3 dead_letter=d/#", {"dead_letter \"d/#\" is not a valid topic"}},
		{"a max_attempts=3 dead_letter=$SYS/d", {"dead_letter \"$SYS/d\" must not start with '$'"}},
		{"a max_attempts=3 dead_letter=d retry_to=r/#", {"retry_to \"r/#\" is not a valid topic"}},
		{"a max_attempts=3 dead_letter=d retry_to=$r", {"retry_to \"$r\" must not start with '$'"}},
		{"a max_attempts=3 dead_letter=d retry_to=Delivery/+", {"retry_to \"Delivery/+\""}},
	};

	for(size_t i = 0; i < ARRAY_LEN(cases); i++){
		expect_line_refused(&cases[i]);
	}
}
END_TEST

/* ---- durations and sizes ---- */

START_TEST(test_duration)
{
	static const struct {
		const char *s;
		uint64_t ms;
	} good[] = {
		{"500ms", 500}, {"30s", 30000}, {"10m", 600000}, {"1h", 3600000}, {"1d", 86400000},
		{"7d", 604800000}, {"0100ms", 100},
	};
	static const char *const bad[] = {
		"300", "0s", "0ms", "s", "", "-5s", "+5s", " 5s", "5 s", "5s ", "5S", "5sec", "1w", "1.5s",
		"18446744073709551615d", "99999999999999999999999ms", "5ms5",
	};
	uint64_t v;

	for(size_t i = 0; i < ARRAY_LEN(good); i++){
		v = 0;
		ck_assert_int_eq(units__parse_duration_ms(good[i].s, &v), 0);
		ck_assert_uint_eq(v, good[i].ms);
	}
	for(size_t i = 0; i < ARRAY_LEN(bad); i++){
		ck_assert_msg(units__parse_duration_ms(bad[i], &v) == EINVAL, "accepted \"%s\"", bad[i]);
	}
	ck_assert_int_eq(units__parse_duration_ms(NULL, &v), EINVAL);
}
END_TEST

START_TEST(test_size)
{
	static const struct {
		const char *s;
		uint64_t bytes;
	} good[] = {
		{"65536", 65536}, {"1B", 1}, {"512KiB", 512 * 1024}, {"64MiB", 64ull << 20}, {"1GiB", 1ull << 30},
		{"3kB", 3000}, {"2MB", 2000000}, {"5GB", 5000000000ull}, {"17179869183GiB", 17179869183ull << 30}, {"18446744073GB", 18446744073000000000ull},
	};
	static const char *const bad[] = {
		"0", "0B", "0KiB", "", "B", "-1", "+1", " 1", "1 KiB", "1KB", "1kib", "1K", "1b", "1.5MiB",
		"18446744074GB", "18446744073709551616", "17179869184GiB", "17179869185GiB",
	};
	uint64_t v;

	for(size_t i = 0; i < ARRAY_LEN(good); i++){
		v = 0;
		ck_assert_msg(units__parse_size(good[i].s, &v) == 0, "refused \"%s\"", good[i].s);
		ck_assert_uint_eq(v, good[i].bytes);
	}
	for(size_t i = 0; i < ARRAY_LEN(bad); i++){
		ck_assert_msg(units__parse_size(bad[i], &v) == EINVAL, "accepted \"%s\"", bad[i]);
	}
}
END_TEST

/* ---- the options as a whole ---- */

START_TEST(test_parse_good)
{
	const struct dlq_option opts[] = {
		{"policy", "sensors/# max_attempts=5 dead_letter=dead/sensors"},
		{"nack_window", "30s"},
		{"policy", "jobs/+ max_attempts=2 dead_letter=dead/jobs retry_to=jobs-retry"},
		{"max_pending_bytes", "1MiB"},
	};
	struct dlq_config c;

	ck_assert_int_eq(config__parse(opts, ARRAY_LEN(opts), &c, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.nack_window_ms, 30000);
	ck_assert_uint_eq(c.max_pending_bytes, 1024 * 1024);
	ck_assert_ptr_null(c.policy_file);
	ck_assert_uint_eq(c.policies.count, 2);
	ck_assert_str_eq(c.policies.items[0].filter, "sensors/#");
	ck_assert_str_eq(c.policies.items[0].source, "plugin_opt_policy #1");
	ck_assert_uint_eq(c.policies.items[0].max_attempts, 5);
	ck_assert_str_eq(c.policies.items[1].source, "plugin_opt_policy #2");
	ck_assert_str_eq(c.policies.items[1].retry_to, "jobs-retry");
	ck_assert_uint_eq(c.policies.items[1].index, 1);
	/* The table is finished: it matches. */
	ck_assert_ptr_eq(policy__match(&c.policies, "jobs/7"), &c.policies.items[1]);
	ck_assert_ptr_eq(policy__match(&c.policies, "sensors"), &c.policies.items[0]);
	ck_assert_ptr_null(policy__match(&c.policies, "dead/jobs"));
	config__free(&c);
	ck_assert(is_zero(&c, sizeof(c)));
}
END_TEST

START_TEST(test_parse_defaults_and_limits)
{
	struct dlq_option opts[] = {
		{"policy", "a max_attempts=3 dead_letter=d"},
		{"nack_window", "100ms"},
		{"max_pending_bytes", "1024"},
	};
	struct dlq_config c;

	ck_assert_int_eq(config__parse(opts, 1, &c, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.nack_window_ms, DLQ_DEFAULT_NACK_WINDOW_MS);
	ck_assert_uint_eq(c.nack_window_ms, 300000);
	ck_assert_uint_eq(c.max_pending_bytes, DLQ_DEFAULT_MAX_PENDING_BYTES);
	ck_assert_uint_eq(c.max_pending_bytes, 64ull << 20);
	config__free(&c);

	ck_assert_int_eq(config__parse(opts, 3, &c, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.nack_window_ms, 100);
	ck_assert_uint_eq(c.max_pending_bytes, 1024);
	config__free(&c);

	opts[1].value = "7d";
	opts[2].value = "1KiB";
	ck_assert_int_eq(config__parse(opts, 3, &c, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.nack_window_ms, 7ull * 86400000);
	ck_assert_uint_eq(c.max_pending_bytes, 1024);
	config__free(&c);
}
END_TEST

START_TEST(test_parse_policy_error_message)
{
	const struct dlq_option opts[] = {
		{"policy", "sensors/# max_attempts=5 dead_letter=dead/s"},
		{"policy", "meters/# max_attempts=0 dead_letter=dead/m"},
	};

	parse_fails(opts, ARRAY_LEN(opts));
	ck_assert_str_eq(err, "plugin_opt_policy #2 \"meters/# max_attempts=0 dead_letter=dead/m\": "
			"max_attempts must be an integer from 1 to 1000, got \"0\"");
}
END_TEST

START_TEST(test_parse_unknown_and_twice)
{
	const struct dlq_option unknown[] = {{"policy", "a max_attempts=3 dead_letter=d"}, {"foo", "1"}};
	const struct dlq_option window2[] = {
		{"nack_window", "30s"}, {"policy", "a max_attempts=3 dead_letter=d"}, {"nack_window", "60s"},
	};
	const struct dlq_option bytes2[] = {
		{"max_pending_bytes", "1MiB"}, {"max_pending_bytes", "2MiB"}, {"policy", "a max_attempts=3 dead_letter=d"},
	};
	const struct dlq_option prefixed[] = {{"plugin_opt_policy", "a max_attempts=3 dead_letter=d"}};

	parse_fails(unknown, ARRAY_LEN(unknown));
	ck_assert_str_eq(err, "unknown option plugin_opt_foo");
	parse_fails(window2, ARRAY_LEN(window2));
	ERR_HAS("plugin_opt_nack_window \"60s\"", "given twice", "first \"30s\"");
	parse_fails(bytes2, ARRAY_LEN(bytes2));
	ERR_HAS("plugin_opt_max_pending_bytes \"2MiB\"", "given twice", "first \"1MiB\"");
	parse_fails(prefixed, ARRAY_LEN(prefixed));
	ck_assert_str_eq(err, "unknown option plugin_opt_plugin_opt_policy");
}
END_TEST

/* No policy at all (the Debian package's dlq.conf as shipped): accepted,
 * with an empty table that matches nothing and the other options read. */
START_TEST(test_parse_no_policies)
{
	const struct dlq_option none[] = {{"nack_window", "30s"}};
	struct dlq_config c;

	ck_assert_int_eq(config__parse(none, ARRAY_LEN(none), &c, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.policies.count, 0);
	ck_assert_uint_eq(c.nack_window_ms, 30000);
	ck_assert_ptr_null(policy__match(&c.policies, "jobs"));
	ck_assert_ptr_null(policy__match(&c.policies, "a/b/c"));
	config__free(&c);

	ck_assert_int_eq(config__parse(NULL, 0, &c, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.policies.count, 0);
	ck_assert_uint_eq(c.nack_window_ms, DLQ_DEFAULT_NACK_WINDOW_MS);
	ck_assert_ptr_null(policy__match(&c.policies, "jobs"));
	config__free(&c);
}
END_TEST

/* An option that, after one good policy line, config__parse must refuse,
 * and what its message must say. */
struct bad_option {
	const char *key;
	const char *value;
	const char *want[3];
};

/* Fails the test unless c's option is refused (parse_fails) with each of
 * its texts in the message. */
static void expect_option_refused(const struct bad_option *c)
{
	const struct dlq_option opts[2] = {{"policy", "z max_attempts=3 dead_letter=d"}, {c->key, c->value}};
	char what[512];

	parse_fails(opts, 2);
	snprintf(what, sizeof(what), "%s=\"%s\"", c->key, c->value);
	assert_err_has(c->want, ARRAY_LEN(c->want), what);
}

START_TEST(test_parse_bad_values)
{
	static const struct bad_option cases[] = {
		{"nack_window", "300", {"plugin_opt_nack_window \"300\"", "a unit is required", "\"300s\""}},
		{"nack_window", "50ms", {"plugin_opt_nack_window \"50ms\"", "from 100ms to 7d"}},
		{"nack_window", "99ms", {"\"99ms\"", "from 100ms to 7d"}},
		{"nack_window", "8d", {"\"8d\"", "from 100ms to 7d"}},
		{"nack_window", "169h", {"\"169h\"", "from 100ms to 7d"}},
		{"nack_window", "0s", {"\"0s\"", "from 100ms to 7d"}},
		{"nack_window", "99999999999999999999999s", {"from 100ms to 7d"}},
		{"nack_window", "5w", {"\"5w\"", "unknown unit \"w\"", "ms, s, m, h, d"}},
		{"nack_window", "5 s", {"\"5 s\"", "unknown unit \" s\""}},
		{"nack_window", "-5s", {"\"-5s\"", "whole number and a unit"}},
		{"nack_window", "", {"plugin_opt_nack_window \"\"", "whole number and a unit"}},
		{"max_pending_bytes", "1023", {"plugin_opt_max_pending_bytes \"1023\"", "at least 1KiB"}},
		{"max_pending_bytes", "1kB", {"\"1kB\"", "at least 1KiB"}},
		{"max_pending_bytes", "0", {"\"0\"", "at least 1KiB"}},
		{"max_pending_bytes", "5XB", {"\"5XB\"", "unknown unit \"XB\"", "KiB"}},
		{"max_pending_bytes", "1KB", {"\"1KB\"", "unknown unit \"KB\""}},
		{"max_pending_bytes", "99999999999999999999", {"\"99999999999999999999\"", "too large"}},
		{"max_pending_bytes", "18446744074GB", {"too large"}},
		{"max_pending_bytes", "-1", {"\"-1\"", "whole number of bytes"}},
		{"max_pending_bytes", "", {"plugin_opt_max_pending_bytes \"\"", "whole number of bytes"}},
		{"dead_letter_keep", "1023", {"plugin_opt_dead_letter_keep \"1023\"", "at least 1KiB", "or 0"}},
		{"dead_letter_keep", "lots", {"plugin_opt_dead_letter_keep \"lots\"", "whole number of bytes"}},
		{"dead_letter_keep", "5XB", {"\"5XB\"", "unknown unit \"XB\""}},
		{"dead_letter_keep_for", "0", {"plugin_opt_dead_letter_keep_for \"0\"", "an age of zero would keep nothing"}},
		{"dead_letter_keep_for", "30", {"plugin_opt_dead_letter_keep_for \"30\"", "a unit is required"}},
		{"dead_letter_keep_for", "500ms", {"plugin_opt_dead_letter_keep_for \"500ms\"", "from 1s to 3650d"}},
		{"dead_letter_keep_for", "Forever", {"plugin_opt_dead_letter_keep_for \"Forever\"", "expected a duration"}},
		{"dead_letter_keep_for", "", {"plugin_opt_dead_letter_keep_for \"\"", "expected a duration"}},
		{"dead_letter_access", "open", {"plugin_opt_dead_letter_access \"open\"", "expected check or control"}},
		{"dead_letter_access", "", {"plugin_opt_dead_letter_access \"\"", "expected check or control"}},
		{"policy", "", {"plugin_opt_policy #2 \"\"", "missing filter"}},
		{"policy_file", "", {"plugin_opt_policy_file \"\"", "path is empty"}},
	};

	for(size_t i = 0; i < ARRAY_LEN(cases); i++){
		expect_option_refused(&cases[i]);
	}
}
END_TEST

START_TEST(test_parse_table_errors)
{
	const struct dlq_option dup[] = {
		{"policy", "a/# max_attempts=3 dead_letter=d/1"},
		{"policy", "b max_attempts=3 dead_letter=d/2"},
		{"policy", "a/# max_attempts=4 dead_letter=d/3"},
	};
	const struct dlq_option inside[] = {
		{"policy", "dead/# max_attempts=3 dead_letter=other/d"},
		{"policy", "sensors/# max_attempts=3 dead_letter=dead/x"},
	};

	parse_fails(dup, ARRAY_LEN(dup));
	ck_assert_str_eq(err, "duplicate policy filter \"a/#\": plugin_opt_policy #3 repeats plugin_opt_policy #1");
	parse_fails(inside, ARRAY_LEN(inside));
	ck_assert_str_eq(err, "dead-letter topic \"dead/x\" of policy \"sensors/#\" (plugin_opt_policy #2) is matched by "
			"policy filter \"dead/#\" (plugin_opt_policy #1): dead letters must lie outside every tracked filter");
}
END_TEST

START_TEST(test_long_value_is_cut)
{
	char line[2000];
	struct dlq_option opts[1] = {{"policy", line}};

	memset(line, 'a', 1500);
	strcpy(line + 1500, " dead_letter=d");
	parse_fails(opts, 1);
	/* The value is cut in the message so that the reason still shows. */
	ERR_HAS("plugin_opt_policy #1 \"aaaa", "...\": ", "max_attempts is required");
}
END_TEST

/* ---- the JSON policy document ---- */

START_TEST(test_json_good)
{
	static const char doc[] =
		"{\"policies\":[\n"
		"  {\"filter\":\"sensors/#\",\"max_attempts\":5,\"dead_letter\":\"dead/sensors\"},\n"
		"  {\"filter\":\"jobs/+\",\"max_attempts\":1000,\"dead_letter\":\"dead/jobs\",\"retry_to\":\"jobs/retry\"},\n"
		"  {\"retry_to\":\"delivery\",\"dead_letter\":\"dead/m\",\"max_attempts\":1.0,\"filter\":\"m\"}\n"
		"]}";
	struct dlq_policy_table t = {0};

	ck_assert_int_eq(policy_parse__json(doc, strlen(doc), "p.json", &t, err, sizeof(err)), 0);
	ck_assert_uint_eq(t.count, 3);
	ck_assert_str_eq(t.items[0].filter, "sensors/#");
	ck_assert_uint_eq(t.items[0].max_attempts, 5);
	ck_assert_str_eq(t.items[0].dead_letter, "dead/sensors");
	ck_assert_ptr_null(t.items[0].retry_to);
	ck_assert_str_eq(t.items[0].source, "p.json: policies[0]");
	ck_assert_str_eq(t.items[1].retry_to, "jobs/retry");
	ck_assert_uint_eq(t.items[1].max_attempts, 1000);
	ck_assert_str_eq(t.items[2].filter, "m");
	ck_assert_uint_eq(t.items[2].max_attempts, 1);
	ck_assert_ptr_null(t.items[2].retry_to);
	ck_assert_str_eq(t.items[2].source, "p.json: policies[2]");
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), 0);
	ck_assert_ptr_eq(policy__match(&t, "jobs/x"), &t.items[1]);
	policy__table_free(&t);

	/* Only len bytes are read: no terminator needed. */
	static const char cut[] = "{\"policies\":[]}garbage";
	ck_assert_int_eq(policy_parse__json(cut, 15, "p.json", &t, err, sizeof(err)), 0);
	ck_assert_uint_eq(t.count, 0);
	policy__table_free(&t);
}
END_TEST

/* A policy document policy_parse__json must refuse, and what its
 * message must say. */
struct bad_json {
	const char *doc;
	const char *want[3];
};

/* Fails the test unless err has each of c's texts. */
static void expect_json_message(const struct bad_json *c)
{
	char what[512];

	snprintf(what, sizeof(what), "doc %s", c->doc);
	assert_err_has(c->want, ARRAY_LEN(c->want), what);
}

START_TEST(test_json_bad)
{
	static const struct bad_json cases[] = {
		{"", {"p.json: not valid JSON"}},
		{"{\"policies\":[}", {"p.json: not valid JSON", "line 1, column 14"}},
		{"{\n\"policies\": [\n  {\"filter\": }\n]}", {"not valid JSON", "line 3"}},
		{"[]", {"p.json: the document must be an object", "got an array"}},
		{"{}", {"p.json: policies must be an array, got nothing"}},
		{"{\"policies\":{}}", {"policies must be an array, got an object"}},
		{"{\"policies\":[],\"extra\":1}", {"p.json: unknown key \"extra\""}},
		{"{\"Policies\":[]}", {"unknown key \"Policies\""}},
		{"{\"policies\":[],\"policies\":[]}", {"policies given twice"}},
		{"{\"policies\":[5]}", {"p.json: policies[0]: must be an object, got a number"}},
		{"{\"policies\":[{\"filter\":\"a\",\"max_attempts\":3,\"dead_letter\":\"d\",\"maxAttempts\":3}]}",
			{"p.json: policies[0]: unknown key \"maxAttempts\""}},
		{"{\"policies\":[{\"filter\":\"a\",\"max_attempts\":3,\"dead_letter\":\"d\",\"filter\":\"b\"}]}",
			{"policies[0]: filter given twice"}},
		{"{\"policies\":[{\"max_attempts\":3,\"dead_letter\":\"d\"}]}", {"policies[0]: filter is required"}},
		{"{\"policies\":[{\"filter\":\"a\",\"dead_letter\":\"d\"}]}", {"policies[0]: max_attempts is required"}},
		{"{\"policies\":[{\"filter\":\"a\",\"max_attempts\":3}]}", {"policies[0]: dead_letter is required"}},
		{"{\"policies\":[{\"filter\":7,\"max_attempts\":3,\"dead_letter\":\"d\"}]}", {"filter must be a string, got a number"}},
		{"{\"policies\":[{\"filter\":\"a\",\"max_attempts\":3,\"dead_letter\":null}]}", {"dead_letter must be a string, got null"}},
		{"{\"policies\":[{\"filter\":\"a\",\"max_attempts\":3,\"dead_letter\":\"d\",\"retry_to\":true}]}",
			{"retry_to must be a string, got a boolean"}},
		{"{\"policies\":[{\"filter\":\"a\",\"max_attempts\":\"3\",\"dead_letter\":\"d\"}]}",
			{"max_attempts must be an integer from 1 to 1000, got a string"}},
		{"{\"policies\":[{\"filter\":\"a\",\"max_attempts\":2.5,\"dead_letter\":\"d\"}]}", {"from 1 to 1000, got 2.5"}},
		{"{\"policies\":[{\"filter\":\"a\",\"max_attempts\":0,\"dead_letter\":\"d\"}]}", {"from 1 to 1000, got 0"}},
		{"{\"policies\":[{\"filter\":\"a\",\"max_attempts\":1001,\"dead_letter\":\"d\"}]}", {"from 1 to 1000, got 1001"}},
		{"{\"policies\":[{\"filter\":\"a\",\"max_attempts\":-3,\"dead_letter\":\"d\"}]}", {"from 1 to 1000, got -3"}},
		{"{\"policies\":[{\"filter\":\"a\",\"max_attempts\":1e300,\"dead_letter\":\"d\"}]}", {"from 1 to 1000, got 1e+300"}},
		{"{\"policies\":[{\"filter\":\"a/b#\",\"max_attempts\":3,\"dead_letter\":\"d\"}]}",
			{"policies[0]: filter \"a/b#\" is not a valid topic filter"}},
		{"{\"policies\":[{\"filter\":\"\",\"max_attempts\":3,\"dead_letter\":\"d\"}]}", {"filter \"\" is not a valid topic filter", "empty"}},
		{"{\"policies\":[{\"filter\":\"a\\u0000b\",\"max_attempts\":3,\"dead_letter\":\"d\"}]}", {"p.json: a string holds \\u0000", "line 1, column 26"}},
		{"{\"policies\":[{\"filter\":\"a\",\"max_attempts\":3,\"dead_letter\":\"$d\"}]}", {"dead_letter \"$d\" must not start with '$'"}},
		{"{\"policies\":[{\"filter\":\"a\",\"max_attempts\":3,\"dead_letter\":\"d/+\"}]}", {"dead_letter \"d/+\" is not a valid topic"}},
		{"{\"policies\":[{\"filter\":\"a\",\"max_attempts\":3,\"dead_letter\":\"d\",\"retry_to\":\"r/#\"}]}",
			{"retry_to \"r/#\" is not a valid topic"}},
		{"{\"policies\":[{\"filter\":\"a\",\"max_attempts\":3,\"dead_letter\":\"d\"},"
			"{\"filter\":\"b\",\"max_attempts\":3,\"dead_letter\":\"d\",\"x\":1}]}", {"p.json: policies[1]: unknown key \"x\""}},
	};

	for(size_t i = 0; i < ARRAY_LEN(cases); i++){
		struct dlq_policy_table t = {0};
		struct dlq_policy keep = {0};

		/* A policy already in the table stays; nothing of the document does. */
		keep.filter = strdup("kept");
		keep.dead_letter = strdup("dead/kept");
		keep.max_attempts = 1;
		ck_assert_int_eq(policy__table_add(&t, &keep), 0);
		err[0] = '\0';
		ck_assert_msg(policy_parse__json(cases[i].doc, strlen(cases[i].doc), "p.json", &t, err, sizeof(err)) == EINVAL,
				"accepted %s", cases[i].doc);
		ck_assert_uint_eq(t.count, 1);
		ck_assert_str_eq(t.items[0].filter, "kept");
		expect_json_message(&cases[i]);
		policy__table_free(&t);
	}
}
END_TEST

/* ---- plugin_opt_policy_file ---- */

START_TEST(test_policy_file)
{
	char *path = temp_file(
		"{\"policies\":[{\"filter\":\"f/a\",\"max_attempts\":4,\"dead_letter\":\"dead/fa\"},"
		"{\"filter\":\"f/b/+\",\"max_attempts\":2,\"dead_letter\":\"dead/fb\",\"retry_to\":\"retry/fb\"}]}");
	const struct dlq_option opts[] = {
		{"policy", "l/1 max_attempts=3 dead_letter=dead/l1"},
		{"policy_file", path},
		{"policy", "l/2 max_attempts=3 dead_letter=dead/l2"},
	};
	struct dlq_config c;
	char src[128];

	ck_assert_int_eq(config__parse(opts, ARRAY_LEN(opts), &c, err, sizeof(err)), 0);
	ck_assert_str_eq(c.policy_file, path);
	ck_assert_uint_eq(c.policies.count, 4);
	/* Declaration order is the order of the options. */
	ck_assert_str_eq(c.policies.items[0].filter, "l/1");
	ck_assert_str_eq(c.policies.items[1].filter, "f/a");
	ck_assert_str_eq(c.policies.items[2].filter, "f/b/+");
	ck_assert_str_eq(c.policies.items[3].filter, "l/2");
	ck_assert_str_eq(c.policies.items[0].source, "plugin_opt_policy #1");
	snprintf(src, sizeof(src), "%s: policies[1]", path);
	ck_assert_str_eq(c.policies.items[2].source, src);
	ck_assert_str_eq(c.policies.items[2].retry_to, "retry/fb");
	ck_assert_uint_eq(c.policies.items[2].max_attempts, 2);
	ck_assert_str_eq(c.policies.items[3].source, "plugin_opt_policy #2");
	ck_assert_ptr_eq(policy__match(&c.policies, "f/b/9"), &c.policies.items[2]);
	config__free(&c);

	/* The file alone is enough. */
	ck_assert_int_eq(config__parse(&opts[1], 1, &c, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.policies.count, 2);
	config__free(&c);
	unlink(path);
	free(path);
}
END_TEST

START_TEST(test_policy_file_errors)
{
	char *bad = temp_file("{\"policies\":[{\"filter\":\"a\",\"max_attempts\":0,\"dead_letter\":\"d\"}]}");
	char *dup = temp_file("{\"policies\":[{\"filter\":\"l/1\",\"max_attempts\":3,\"dead_letter\":\"d\"}]}");
	char *empty = temp_file("{\"policies\":[]}");
	char dir[] = "/tmp/dlq-test-dir-XXXXXX";
	struct dlq_option opts[2] = {{"policy", "l/1 max_attempts=3 dead_letter=dead/l1"}, {"policy_file", NULL}};
	const struct dlq_option twice[] = {{"policy_file", empty}, {"policy_file", bad}};

	opts[1].value = "/nonexistent/dlq-policies.json";
	parse_fails(opts, 2);
	ck_assert_str_eq(err, "plugin_opt_policy_file \"/nonexistent/dlq-policies.json\": cannot open: No such file or directory");

	ck_assert_ptr_nonnull(mkdtemp(dir));
	opts[1].value = dir;
	parse_fails(opts, 2);
	ERR_HAS("plugin_opt_policy_file \"/tmp/dlq-test-dir-", "cannot read: Is a directory");
	rmdir(dir);

	opts[1].value = bad;
	parse_fails(opts, 2);
	ERR_HAS("plugin_opt_policy_file: ", bad, ": policies[0]: max_attempts must be an integer from 1 to 1000, got 0");

	opts[1].value = dup;
	parse_fails(opts, 2);
	ERR_HAS("duplicate policy filter \"l/1\"", ": policies[0] repeats plugin_opt_policy #1", dup);

	/* A file with no policies, and no lines: accepted, nothing to track. */
	struct dlq_config c;
	opts[1].value = empty;
	ck_assert_int_eq(config__parse(&opts[1], 1, &c, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.policies.count, 0);
	config__free(&c);

	parse_fails(twice, ARRAY_LEN(twice));
	ERR_HAS("plugin_opt_policy_file \"", bad, "given twice", empty);

	unlink(bad);
	unlink(dup);
	unlink(empty);
	free(bad);
	free(dup);
	free(empty);
}
END_TEST

/* ---- retry delays in policies ---- */

START_TEST(test_line_delays_good)
{
	struct dlq_policy p;

	/* Not given: no delay, backoff 1, no jitter, a 1 h cap. */
	ck_assert_int_eq(policy_parse__line("a max_attempts=3 dead_letter=d", &p, err, sizeof(err)), 0);
	ck_assert_uint_eq(p.retry_delay_ms, 0);
	ck_assert(p.retry_backoff == 1.0);
	ck_assert_uint_eq(p.retry_max_delay_ms, DLQ_DEFAULT_RETRY_MAX_DELAY_MS);
	ck_assert(p.retry_jitter == 0.0);
	policy__free(&p);

	/* A retry_delay alone. */
	static const struct {
		const char *line;
		uint64_t ms;
	} alone[] = {
		{"a max_attempts=3 dead_letter=d retry_delay=0s", 0},
		{"a max_attempts=3 dead_letter=d retry_delay=0ms", 0},
		{"a max_attempts=3 dead_letter=d retry_delay=30s", 30000},
		{"a max_attempts=3 dead_letter=d retry_delay=500ms", 500},
	};
	for(size_t i = 0; i < ARRAY_LEN(alone); i++){
		ck_assert_msg(policy_parse__line(alone[i].line, &p, err, sizeof(err)) == 0, "refused \"%s\": %s",
				alone[i].line, err);
		ck_assert_msg(p.retry_delay_ms == alone[i].ms, "\"%s\": %llu ms, expected %llu", alone[i].line,
				(unsigned long long)p.retry_delay_ms, (unsigned long long)alone[i].ms);
		policy__free(&p);
	}

	ck_assert_int_eq(policy_parse__line("a retry_jitter=0.25 retry_max_delay=2h max_attempts=3 retry_backoff=2.5 "
			"dead_letter=d retry_delay=5m", &p, err, sizeof(err)), 0);
	ck_assert_uint_eq(p.retry_delay_ms, 300000);
	ck_assert_uint_eq(p.retry_max_delay_ms, 7200000);
	ck_assert(p.retry_backoff == 2.5);
	ck_assert(p.retry_jitter == 0.25);
	policy__free(&p);

	/* The edges: backoff 1 and 100, jitter 0 and 1, delay equal to the cap. */
	ck_assert_int_eq(policy_parse__line("a max_attempts=3 dead_letter=d retry_backoff=1 retry_jitter=0 "
			"retry_delay=1h", &p, err, sizeof(err)), 0);
	ck_assert(p.retry_backoff == 1.0);
	ck_assert_uint_eq(p.retry_delay_ms, 3600000);
	policy__free(&p);
	ck_assert_int_eq(policy_parse__line("a max_attempts=3 dead_letter=d retry_backoff=100 retry_jitter=1 "
			"retry_delay=10s retry_max_delay=10s", &p, err, sizeof(err)), 0);
	ck_assert(p.retry_backoff == 100.0);
	ck_assert(p.retry_jitter == 1.0);
	policy__free(&p);
	ck_assert_int_eq(policy_parse__line("a max_attempts=3 dead_letter=d retry_backoff=1.0 retry_jitter=.5",
			&p, err, sizeof(err)), 0);
	ck_assert(p.retry_jitter == 0.5);
	policy__free(&p);
}
END_TEST

START_TEST(test_line_delays_bad)
{
	static const struct bad_line cases[] = {
		{"a max_attempts=3 dead_letter=d retry_delay=30", {"retry_delay \"30\"", "a unit is required", "\"30s\""}},
		{"a max_attempts=3 dead_letter=d retry_delay=0", {"retry_delay \"0\"", "a unit is required"}},
		{"a max_attempts=3 dead_letter=d retry_delay=abc", {"retry_delay must be a duration with a unit", "got \"abc\""}},
		{"a max_attempts=3 dead_letter=d retry_delay=-1s", {"retry_delay must be a duration", "\"-1s\""}},
		{"a max_attempts=3 dead_letter=d retry_delay=1.5s", {"retry_delay must be a duration", "\"1.5s\""}},
		{"a max_attempts=3 dead_letter=d retry_delay=5w", {"retry_delay must be a duration", "\"5w\""}},
		{"a max_attempts=3 dead_letter=d retry_max_delay=60", {"retry_max_delay \"60\"", "a unit is required"}},
		{"a max_attempts=3 dead_letter=d retry_max_delay=0s", {"retry_max_delay must be a duration", "\"0s\""}},
		{"a max_attempts=3 dead_letter=d retry_backoff=0.5", {"retry_backoff must be a number from 1 to 100, got \"0.5\""}},
		{"a max_attempts=3 dead_letter=d retry_backoff=0", {"retry_backoff must be a number from 1 to 100, got \"0\""}},
		{"a max_attempts=3 dead_letter=d retry_backoff=101", {"retry_backoff must be a number from 1 to 100, got \"101\""}},
		{"a max_attempts=3 dead_letter=d retry_backoff=100.01", {"from 1 to 100", "\"100.01\""}},
		{"a max_attempts=3 dead_letter=d retry_backoff=abc", {"retry_backoff must be a number", "\"abc\""}},
		{"a max_attempts=3 dead_letter=d retry_backoff=nan", {"retry_backoff must be a number", "\"nan\""}},
		{"a max_attempts=3 dead_letter=d retry_backoff=NaN", {"retry_backoff", "\"NaN\""}},
		{"a max_attempts=3 dead_letter=d retry_backoff=inf", {"retry_backoff must be a number", "\"inf\""}},
		{"a max_attempts=3 dead_letter=d retry_backoff=infinity", {"retry_backoff", "\"infinity\""}},
		{"a max_attempts=3 dead_letter=d retry_backoff=-2", {"retry_backoff", "\"-2\""}},
		{"a max_attempts=3 dead_letter=d retry_backoff=+2", {"retry_backoff", "\"+2\""}},
		{"a max_attempts=3 dead_letter=d retry_backoff=0x2", {"retry_backoff", "\"0x2\""}},
		{"a max_attempts=3 dead_letter=d retry_backoff=2x", {"retry_backoff", "\"2x\""}},
		{"a max_attempts=3 dead_letter=d retry_backoff=1e3", {"retry_backoff", "\"1e3\""}},
		{"a max_attempts=3 dead_letter=d retry_jitter=1.5", {"retry_jitter must be a number from 0 to 1, got \"1.5\""}},
		{"a max_attempts=3 dead_letter=d retry_jitter=-0.1", {"retry_jitter", "\"-0.1\""}},
		{"a max_attempts=3 dead_letter=d retry_jitter=nan", {"retry_jitter", "\"nan\""}},
		{"a max_attempts=3 dead_letter=d retry_jitter=half", {"retry_jitter", "\"half\""}},
		{"a max_attempts=3 dead_letter=d retry_delay=2h", {"retry_delay (7200000 ms) exceeds retry_max_delay (3600000 ms, the default)"}},
		{"a max_attempts=3 dead_letter=d retry_delay=10s retry_max_delay=5s", {"retry_delay (10000 ms) exceeds retry_max_delay (5000 ms)"}},
		{"a max_attempts=3 dead_letter=d retry_delay=1s retry_delay=2s", {"retry_delay given twice"}},
		{"a max_attempts=3 dead_letter=d retry_backoff=2 retry_backoff=2", {"retry_backoff given twice"}},
		{"a max_attempts=3 dead_letter=d retry_max_delay=1m retry_max_delay=2m", {"retry_max_delay given twice"}},
		{"a max_attempts=3 dead_letter=d retry_jitter=0 retry_jitter=0", {"retry_jitter given twice"}},
		{"a max_attempts=3 dead_letter=d retry_delay=", {"retry_delay has an empty value"}},
		{"a max_attempts=3 dead_letter=d delay=1s", {"unknown key \"delay\" (known: max_attempts, dead_letter, retry_to, "
			"retry_delay, retry_backoff, retry_max_delay, retry_jitter, dead_letter_keep, dead_letter_keep_for, "
			"ack_timeout)"}},
		{"a max_attempts=3 dead_letter=d dead_letter_keep=lots", {"dead_letter_keep must be a size such as \"16MiB\""}},
		{"a max_attempts=3 dead_letter=d retry_delay_ms=1000", {"unknown key \"retry_delay_ms\"", "retry_delay, retry_backoff"}},
	};

	for(size_t i = 0; i < ARRAY_LEN(cases); i++){
		expect_line_refused(&cases[i]);
	}
}
END_TEST

START_TEST(test_json_delays_good)
{
	static const char doc[] =
		"{\"policies\":[\n"
		"  {\"filter\":\"a\",\"max_attempts\":3,\"dead_letter\":\"d/a\",\"retry_delay\":\"30s\",\"retry_backoff\":2,"
		"\"retry_max_delay\":\"10m\",\"retry_jitter\":0.5},\n"
		"  {\"filter\":\"b\",\"max_attempts\":3,\"dead_letter\":\"d/b\",\"retry_delay\":\"0s\",\"retry_backoff\":1.5},\n"
		"  {\"filter\":\"c\",\"max_attempts\":3,\"dead_letter\":\"d/c\"}\n"
		"]}";
	struct dlq_policy_table t = {0};

	ck_assert_int_eq(policy_parse__json(doc, strlen(doc), "p.json", &t, err, sizeof(err)), 0);
	ck_assert_uint_eq(t.count, 3);
	ck_assert_uint_eq(t.items[0].retry_delay_ms, 30000);
	ck_assert(t.items[0].retry_backoff == 2.0);
	ck_assert_uint_eq(t.items[0].retry_max_delay_ms, 600000);
	ck_assert(t.items[0].retry_jitter == 0.5);
	ck_assert_uint_eq(t.items[1].retry_delay_ms, 0);
	ck_assert(t.items[1].retry_backoff == 1.5);
	ck_assert_uint_eq(t.items[1].retry_max_delay_ms, DLQ_DEFAULT_RETRY_MAX_DELAY_MS);
	ck_assert_uint_eq(t.items[2].retry_delay_ms, 0);
	ck_assert(t.items[2].retry_backoff == 1.0);
	ck_assert(t.items[2].retry_jitter == 0.0);
	ck_assert_uint_eq(t.items[2].retry_max_delay_ms, DLQ_DEFAULT_RETRY_MAX_DELAY_MS);
	ck_assert_int_eq(policy__table_finish(&t, err, sizeof(err)), 0);
	policy__table_free(&t);
}
END_TEST

#define JPOL(extra) "{\"policies\":[{\"filter\":\"a\",\"max_attempts\":3,\"dead_letter\":\"d\"," extra "}]}"

START_TEST(test_json_delays_bad)
{
	static const struct bad_json cases[] = {
		{JPOL("\"retry_delay\":30"), {"policies[0]: retry_delay must be a string with a unit, e.g. \"30s\", got the number 30"}},
		{JPOL("\"retry_max_delay\":60"), {"retry_max_delay must be a string with a unit", "got the number 60"}},
		{JPOL("\"retry_delay\":\"30\""), {"retry_delay \"30\"", "a unit is required"}},
		{JPOL("\"retry_delay\":\"abc\""), {"retry_delay must be a duration with a unit", "\"abc\""}},
		{JPOL("\"retry_delay\":null"), {"retry_delay must be a string, got null"}},
		{JPOL("\"retry_delay\":true"), {"retry_delay must be a string, got a boolean"}},
		{JPOL("\"retry_max_delay\":\"0s\""), {"retry_max_delay must be a duration", "\"0s\""}},
		{JPOL("\"retry_backoff\":\"2\""), {"retry_backoff must be a number, got a string"}},
		{JPOL("\"retry_backoff\":0.5"), {"retry_backoff must be a number from 1 to 100, got 0.5"}},
		{JPOL("\"retry_backoff\":101"), {"retry_backoff must be a number from 1 to 100, got 101"}},
		{JPOL("\"retry_backoff\":1e300"), {"retry_backoff must be a number from 1 to 100"}},
		{JPOL("\"retry_jitter\":1.5"), {"retry_jitter must be a number from 0 to 1, got 1.5"}},
		{JPOL("\"retry_jitter\":-1"), {"retry_jitter must be a number from 0 to 1, got -1"}},
		{JPOL("\"retry_jitter\":\"0.5\""), {"retry_jitter must be a number, got a string"}},
		{JPOL("\"retry_jitter\":[]"), {"retry_jitter must be a number, got an array"}},
		{JPOL("\"retry_delay\":\"2h\""), {"retry_delay (7200000 ms) exceeds retry_max_delay (3600000 ms, the default)"}},
		{JPOL("\"retry_delay\":\"10s\",\"retry_max_delay\":\"5s\""), {"retry_delay (10000 ms) exceeds retry_max_delay (5000 ms)"}},
		{JPOL("\"retry_delay\":\"1s\",\"retry_delay\":\"2s\""), {"retry_delay given twice"}},
		{JPOL("\"retryDelay\":\"1s\""), {"unknown key \"retryDelay\" (known: filter, max_attempts, dead_letter, retry_to, "
			"retry_delay, retry_backoff, retry_max_delay, retry_jitter, dead_letter_keep, dead_letter_keep_for, "
			"ack_timeout)"}},
		{JPOL("\"dead_letter_keep\":true"), {"dead_letter_keep must be a string, got"}},
	};

	for(size_t i = 0; i < ARRAY_LEN(cases); i++){
		struct dlq_policy_table t = {0};
		err[0] = '\0';
		ck_assert_msg(policy_parse__json(cases[i].doc, strlen(cases[i].doc), "p.json", &t, err, sizeof(err)) == EINVAL,
				"accepted %s", cases[i].doc);
		ck_assert_uint_eq(t.count, 0);
		expect_json_message(&cases[i]);
		policy__table_free(&t);
	}
}
END_TEST

START_TEST(test_delay_ms)
{
	static const struct {
		const char *s;
		uint64_t ms;
	} good[] = {{"0s", 0}, {"0ms", 0}, {"0m", 0}, {"500ms", 500}, {"30s", 30000}, {"2h", 7200000}, {"1d", 86400000}};
	static const char *const bad[] = {"0", "30", "", "s", "-1s", "+1s", " 1s", "1s ", "1.5s", "1w", "99999999999999999999999ms"};
	uint64_t v;

	for(size_t i = 0; i < ARRAY_LEN(good); i++){
		v = 12345;
		ck_assert_msg(units__parse_delay_ms(good[i].s, &v) == 0, "refused \"%s\"", good[i].s);
		ck_assert_uint_eq(v, good[i].ms);
	}
	for(size_t i = 0; i < ARRAY_LEN(bad); i++){
		ck_assert_msg(units__parse_delay_ms(bad[i], &v) == EINVAL, "accepted \"%s\"", bad[i]);
	}
	ck_assert_int_eq(units__parse_delay_ms(NULL, &v), EINVAL);
}
END_TEST

/* ---- durable state options ---- */

START_TEST(test_state_options)
{
	const struct dlq_option opts[] = {
		{"policy", "a max_attempts=3 dead_letter=d"},
		{"state_file", "/var/lib/mosquitto/dlq.state"},
		{"state_save_interval", "5m"},
		{"state_save_on_change", "true"},
	};
	struct dlq_config c;

	/* Defaults: no state file, 60 s, no journal. */
	ck_assert_int_eq(config__parse(opts, 1, &c, err, sizeof(err)), 0);
	ck_assert_ptr_null(c.state_file);
	ck_assert_uint_eq(c.state_save_interval_ms, DLQ_DEFAULT_STATE_SAVE_INTERVAL_MS);
	ck_assert_uint_eq(c.state_save_interval_ms, 60000);
	ck_assert(!c.state_save_on_change);
	config__free(&c);

	ck_assert_int_eq(config__parse(opts, ARRAY_LEN(opts), &c, err, sizeof(err)), 0);
	ck_assert_str_eq(c.state_file, "/var/lib/mosquitto/dlq.state");
	ck_assert_uint_eq(c.state_save_interval_ms, 300000);
	ck_assert(c.state_save_on_change);
	config__free(&c);
	ck_assert(is_zero(&c, sizeof(c)));

	/* The least interval; false needs no state file. */
	const struct dlq_option edge[] = {
		{"policy", "a max_attempts=3 dead_letter=d"},
		{"state_save_interval", "1s"},
		{"state_save_on_change", "false"},
	};
	ck_assert_int_eq(config__parse(edge, ARRAY_LEN(edge), &c, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.state_save_interval_ms, 1000);
	ck_assert(!c.state_save_on_change);
	config__free(&c);

	/* The journal's sync: always by default, or at least every so long. */
	ck_assert_int_eq(config__parse(opts, ARRAY_LEN(opts), &c, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.state_journal_sync_ms, 0);
	config__free(&c);
	static const struct {
		const char *v;
		uint64_t ms;
	} syncs[] = { {"always", 0}, {"250ms", 250}, {"1ms", 1}, {"10s", 10000} };
	for(size_t i = 0; i < ARRAY_LEN(syncs); i++){
		const struct dlq_option with_sync[] = {
			{"policy", "a max_attempts=3 dead_letter=d"},
			{"state_file", "/var/lib/mosquitto/dlq.state"},
			{"state_save_on_change", "true"},
			{"state_journal_sync", syncs[i].v},
		};
		ck_assert_msg(config__parse(with_sync, ARRAY_LEN(with_sync), &c, err, sizeof(err)) == 0, "%s: %s",
				syncs[i].v, err);
		ck_assert_uint_eq(c.state_journal_sync_ms, syncs[i].ms);
		config__free(&c);
	}
}
END_TEST

START_TEST(test_state_options_bad)
{
	static const struct bad_option cases[] = {
		{"state_file", "", {"plugin_opt_state_file \"\"", "path is empty"}},
		{"state_save_interval", "60", {"plugin_opt_state_save_interval \"60\"", "with its unit", "\"60s\""}},
		{"state_save_interval", "999ms", {"plugin_opt_state_save_interval \"999ms\"", "at least 1s"}},
		{"state_save_interval", "0s", {"plugin_opt_state_save_interval \"0s\""}},
		{"state_save_interval", "abc", {"plugin_opt_state_save_interval \"abc\"", "with its unit"}},
		{"state_save_interval", "", {"plugin_opt_state_save_interval \"\""}},
		{"state_save_on_change", "yes", {"plugin_opt_state_save_on_change \"yes\"", "expected true or false"}},
		{"state_save_on_change", "TRUE", {"plugin_opt_state_save_on_change \"TRUE\"", "expected true or false"}},
		{"state_save_on_change", "", {"plugin_opt_state_save_on_change \"\"", "expected true or false"}},
		{"state_journal_sync", "0ms", {"plugin_opt_state_journal_sync \"0ms\"", "expected always", "from 1ms to 10s"}},
		{"state_journal_sync", "11s", {"plugin_opt_state_journal_sync \"11s\"", "from 1ms to 10s"}},
		{"state_journal_sync", "100", {"plugin_opt_state_journal_sync \"100\"", "\"100ms\""}},
		{"state_journal_sync", "sometimes", {"plugin_opt_state_journal_sync \"sometimes\"", "expected always"}},
		{"state_journal_sync", "", {"plugin_opt_state_journal_sync \"\"", "expected always"}},
	};

	for(size_t i = 0; i < ARRAY_LEN(cases); i++){
		expect_option_refused(&cases[i]);
	}

	/* A journal needs a state file. */
	const struct dlq_option journal_alone[] = {{"policy", "a max_attempts=3 dead_letter=d"}, {"state_save_on_change", "true"}};
	parse_fails(journal_alone, ARRAY_LEN(journal_alone));
	ck_assert_str_eq(err, "plugin_opt_state_save_on_change true needs plugin_opt_state_file");

	/* A journal's sync interval needs a journal; its default, always, may be written alone. */
	const struct dlq_option always_alone[] = {{"policy", "a max_attempts=3 dead_letter=d"},
		{"state_file", "/tmp/a"}, {"state_journal_sync", "always"}};
	struct dlq_config ac;
	ck_assert_int_eq(config__parse(always_alone, ARRAY_LEN(always_alone), &ac, err, sizeof(err)), 0);
	ck_assert_uint_eq(ac.state_journal_sync_ms, 0);
	config__free(&ac);

	const struct dlq_option sync_alone[] = {{"policy", "a max_attempts=3 dead_letter=d"},
		{"state_file", "/tmp/a"}, {"state_journal_sync", "100ms"}};
	parse_fails(sync_alone, ARRAY_LEN(sync_alone));
	ck_assert_str_eq(err, "plugin_opt_state_journal_sync needs plugin_opt_state_save_on_change true "
			"(without it there is no journal to sync)");

	/* Each may be given once. */
	static const struct {
		const char *key, *first, *second;
	} twice[] = {
		{"state_file", "/tmp/a", "/tmp/b"},
		{"state_save_interval", "10s", "20s"},
		{"state_save_on_change", "false", "true"},
	};
	for(size_t i = 0; i < ARRAY_LEN(twice); i++){
		struct dlq_option list[4];
		size_t n = 0;
		list[n++] = (struct dlq_option){"policy", "a max_attempts=3 dead_letter=d"};
		if(strcmp(twice[i].key, "state_file")) list[n++] = (struct dlq_option){"state_file", "/tmp/x"};
		list[n++] = (struct dlq_option){twice[i].key, twice[i].first};
		list[n++] = (struct dlq_option){twice[i].key, twice[i].second};
		parse_fails(list, n);
		char want[128];
		snprintf(want, sizeof(want), "plugin_opt_%s \"%s\": given twice (first \"%s\")", twice[i].key, twice[i].second, twice[i].first);
		ck_assert_msg(strstr(err, want) != NULL, "error \"%s\" lacks \"%s\"", err, want);
	}
}
END_TEST

/* plugin_opt_delivery_count: on by default, on, always or off, once; on
 * stamps every delivery but a subscriber's first, always every one. */
START_TEST(test_delivery_count_option)
{
	struct dlq_config c;
	struct dlq_option opts[3] = {{"policy", "a max_attempts=3 dead_letter=d"}, {"delivery_count", "off"},
		{"delivery_count", "on"}};

	ck_assert_int_eq(config__parse(opts, 1, &c, err, sizeof(err)), 0);
	ck_assert_int_eq(c.delivery_count, DLQ_DELIVERY_COUNT_ON);
	ck_assert(!c.delivery_count_given);
	config__free(&c);
	ck_assert_int_eq(config__parse(opts, 2, &c, err, sizeof(err)), 0);
	ck_assert_int_eq(c.delivery_count, DLQ_DELIVERY_COUNT_OFF);
	ck_assert(c.delivery_count_given);
	config__free(&c);
	opts[1].value = "on";
	ck_assert_int_eq(config__parse(opts, 2, &c, err, sizeof(err)), 0);
	ck_assert_int_eq(c.delivery_count, DLQ_DELIVERY_COUNT_ON);
	config__free(&c);
	opts[1].value = "always";
	ck_assert_int_eq(config__parse(opts, 2, &c, err, sizeof(err)), 0);
	ck_assert_int_eq(c.delivery_count, DLQ_DELIVERY_COUNT_ALWAYS);
	ck_assert_str_eq(config__delivery_count_name(c.delivery_count), "always");
	config__free(&c);

	/* Which attempts carry it. */
	ck_assert(!config__stamps_delivery_count(DLQ_DELIVERY_COUNT_ON, 1));
	ck_assert(config__stamps_delivery_count(DLQ_DELIVERY_COUNT_ON, 2));
	ck_assert(config__stamps_delivery_count(DLQ_DELIVERY_COUNT_ALWAYS, 1));
	ck_assert(config__stamps_delivery_count(DLQ_DELIVERY_COUNT_ALWAYS, 7));
	ck_assert(!config__stamps_delivery_count(DLQ_DELIVERY_COUNT_OFF, 1));
	ck_assert(!config__stamps_delivery_count(DLQ_DELIVERY_COUNT_OFF, 2));

	static const char *const bad[] = {"true", "false", "ON", "", "1", "Always"};
	for(size_t i = 0; i < ARRAY_LEN(bad); i++){
		opts[1].value = bad[i];
		parse_fails(opts, 2);
		char want[64];
		snprintf(want, sizeof(want), "plugin_opt_delivery_count \"%s\": expected on", bad[i]);
		ck_assert_msg(strstr(err, want) != NULL, "error \"%s\" lacks \"%s\"", err, want);
	}
	opts[1].value = "off";
	parse_fails(opts, 3);
	ck_assert_msg(strstr(err, "plugin_opt_delivery_count \"on\": given twice (first \"off\")") != NULL, "%s", err);
}
END_TEST

/* ---- acknowledgement deadlines ---- */

START_TEST(test_ack_timeout_good)
{
	struct dlq_policy p;
	ck_assert_int_eq(policy_parse__line("a max_attempts=3 dead_letter=d", &p, err, sizeof(err)), 0);
	ck_assert_uint_eq(p.ack_timeout_ms, 0);
	ck_assert_ptr_null(p.ack_timeout);
	policy__free(&p);
	static const struct {
		const char *value;
		uint64_t ms;
	} good[] = { {"100ms", 100}, {"30s", 30000}, {"5m", 300000}, {"2h", 7200000}, {"7d", 7ull * 86400000} };
	for(size_t i = 0; i < ARRAY_LEN(good); i++){
		char line[128];
		snprintf(line, sizeof(line), "a max_attempts=3 dead_letter=d ack_timeout=%s", good[i].value);
		ck_assert_msg(policy_parse__line(line, &p, err, sizeof(err)) == 0, "refused %s: %s", line, err);
		ck_assert_uint_eq(p.ack_timeout_ms, good[i].ms);
		ck_assert_str_eq(p.ack_timeout, good[i].value); /* as configured, for the dead letters' reason */
		policy__free(&p);
	}
	static const char doc[] = "{\"policies\":[{\"filter\":\"a\",\"max_attempts\":3,\"dead_letter\":\"d\","
			"\"ack_timeout\":\"45s\"}]}";
	struct dlq_policy_table t = {0};
	ck_assert_int_eq(policy_parse__json(doc, strlen(doc), "p.json", &t, err, sizeof(err)), 0);
	ck_assert_uint_eq(t.items[0].ack_timeout_ms, 45000);
	ck_assert_str_eq(t.items[0].ack_timeout, "45s");
	policy__table_free(&t);
}
END_TEST

START_TEST(test_ack_timeout_bad)
{
	static const struct bad_line cases[] = {
		{"a max_attempts=3 dead_letter=d ack_timeout=0", {"ack_timeout \"0\"", "longer than zero"}},
		{"a max_attempts=3 dead_letter=d ack_timeout=0s", {"ack_timeout \"0s\"", "longer than zero"}},
		{"a max_attempts=3 dead_letter=d ack_timeout=-5s", {"ack_timeout must be a duration", "\"-5s\""}},
		{"a max_attempts=3 dead_letter=d ack_timeout=30", {"ack_timeout \"30\"", "a unit is required", "\"30s\""}},
		{"a max_attempts=3 dead_letter=d ack_timeout=soon", {"ack_timeout must be a duration", "\"soon\""}},
		{"a max_attempts=3 dead_letter=d ack_timeout=1.5s", {"ack_timeout must be a duration", "\"1.5s\""}},
		{"a max_attempts=3 dead_letter=d ack_timeout=99ms", {"ack_timeout \"99ms\" is out of range", "100ms", "7d"}},
		{"a max_attempts=3 dead_letter=d ack_timeout=8d", {"ack_timeout \"8d\" is out of range"}},
		{"a max_attempts=3 dead_letter=d ack_timeout=99999999999999999999s", {"ack_timeout must be a duration"}},
		{"a max_attempts=3 dead_letter=d ack_timeout=1s ack_timeout=2s", {"ack_timeout given twice"}},
		{"a max_attempts=3 dead_letter=d ack_timeout=", {"ack_timeout has an empty value"}},
	};
	for(size_t i = 0; i < ARRAY_LEN(cases); i++){
		expect_line_refused(&cases[i]);
	}
	static const char number[] = "{\"policies\":[{\"filter\":\"a\",\"max_attempts\":3,\"dead_letter\":\"d\","
			"\"ack_timeout\":30}]}";
	struct dlq_policy_table t = {0};
	ck_assert_int_eq(policy_parse__json(number, strlen(number), "p.json", &t, err, sizeof(err)), EINVAL);
	ERR_HAS("p.json: policies[0]: ack_timeout must be a string with a unit, e.g. \"30s\", got the number 30");
	ck_assert_uint_eq(t.count, 0);
}
END_TEST

/* On a broker that does not show each send (2.0), ack_timeout needs
 * redelivery tracking, and the refusal says what to add. */
START_TEST(test_ack_timeout_needs_a_send_signal)
{
	const struct dlq_option opts[] = {
		{"policy", "plain max_attempts=3 dead_letter=d/plain"},
		{"policy", "jobs/# max_attempts=3 dead_letter=d/jobs ack_timeout=30s"},
	};
	struct dlq_config c;
	ck_assert_int_eq(config__parse(opts, ARRAY_LEN(opts), &c, err, sizeof(err)), 0);
	ck_assert(config__has_deadlines(&c));
	ck_assert_int_eq(config__check_deadlines(&c, true, err, sizeof(err)), 0);
	ck_assert_int_eq(config__check_deadlines(&c, false, err, sizeof(err)), EINVAL);
	ERR_HAS("policy \"jobs/#\" (plugin_opt_policy #2) has ack_timeout=30s", "plugin_opt_redelivery_tracking defer",
			"plugin_opt_redelivery_tracking allow");
	c.redelivery = DLQ_REDELIVERY_DEFER;
	ck_assert_int_eq(config__check_deadlines(&c, false, err, sizeof(err)), 0);
	config__free(&c);
	ck_assert_int_eq(config__parse(opts, 1, &c, err, sizeof(err)), 0);
	ck_assert(!config__has_deadlines(&c));
	ck_assert_int_eq(config__check_deadlines(&c, false, err, sizeof(err)), 0);
	config__free(&c);
}
END_TEST

/* ---- the dead letters' age bound ---- */

/* plugin_opt_dead_letter_keep_for and a policy's dead_letter_keep_for=: a
 * duration from 1s to 3650d, or forever; absent, the store's is forever
 * and a policy's unset (the store's applies). */
START_TEST(test_keep_for_good)
{
	static const struct {
		const char *value;
		uint64_t ms;
	} good[] = { {"1s", 1000}, {"1000ms", 1000}, {"90m", 5400000}, {"14d", 14ull * 86400000},
		{"3650d", 3650ull * 86400000}, {"forever", 0} };
	for(size_t i = 0; i < ARRAY_LEN(good); i++){
		const struct dlq_option opts[] = {
			{"policy", "a max_attempts=3 dead_letter=d"},
			{"dead_letter_keep_for", good[i].value},
		};
		struct dlq_config c;
		ck_assert_msg(config__parse(opts, 2, &c, err, sizeof(err)) == 0, "refused %s: %s", good[i].value, err);
		ck_assert_uint_eq(c.dead_letter_keep_for_ms, good[i].ms);
		ck_assert_uint_eq(c.policies.items[0].dead_letter_keep_for_ms, DLQ_KEEP_FOR_UNSET);
		config__free(&c);
		char line[128];
		snprintf(line, sizeof(line), "a max_attempts=3 dead_letter=d dead_letter_keep_for=%s", good[i].value);
		struct dlq_policy p;
		ck_assert_msg(policy_parse__line(line, &p, err, sizeof(err)) == 0, "refused %s: %s", line, err);
		ck_assert_uint_eq(p.dead_letter_keep_for_ms, good[i].ms);
		policy__free(&p);
	}
	const struct dlq_option none[] = {{"policy", "a max_attempts=3 dead_letter=d"}};
	struct dlq_config c;
	ck_assert_int_eq(config__parse(none, 1, &c, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.dead_letter_keep_for_ms, 0);
	config__free(&c);
	static const char doc[] = "{\"policies\":[{\"filter\":\"a\",\"max_attempts\":3,\"dead_letter\":\"d\","
			"\"dead_letter_keep_for\":\"14d\"},{\"filter\":\"b\",\"max_attempts\":3,\"dead_letter\":\"e\","
			"\"dead_letter_keep_for\":\"forever\"}]}";
	struct dlq_policy_table t = {0};
	ck_assert_int_eq(policy_parse__json(doc, strlen(doc), "p.json", &t, err, sizeof(err)), 0);
	ck_assert_uint_eq(t.items[0].dead_letter_keep_for_ms, 14ull * 86400000);
	ck_assert_uint_eq(t.items[1].dead_letter_keep_for_ms, 0);
	policy__table_free(&t);
}
END_TEST

/* Bad ages are refused with the key, the value and the reason, in the
 * line and the JSON file (the store-wide option's in
 * test_parse_bad_values). */
START_TEST(test_keep_for_bad)
{
	static const struct bad_line lines[] = {
		{"a max_attempts=3 dead_letter=d dead_letter_keep_for=0", {"dead_letter_keep_for \"0\"",
			"an age of zero would keep nothing", "forever"}},
		{"a max_attempts=3 dead_letter=d dead_letter_keep_for=0s", {"dead_letter_keep_for \"0s\"", "zero"}},
		{"a max_attempts=3 dead_letter=d dead_letter_keep_for=14", {"dead_letter_keep_for \"14\"",
			"a unit is required", "\"14d\""}},
		{"a max_attempts=3 dead_letter=d dead_letter_keep_for=999ms", {"dead_letter_keep_for \"999ms\"",
			"out of range: from 1s to 3650d, or forever"}},
		{"a max_attempts=3 dead_letter=d dead_letter_keep_for=3651d", {"\"3651d\"", "out of range"}},
		{"a max_attempts=3 dead_letter=d dead_letter_keep_for=2w", {"dead_letter_keep_for \"2w\"",
			"expected a duration with a unit", "or forever"}},
		{"a max_attempts=3 dead_letter=d dead_letter_keep_for=never", {"\"never\"", "expected a duration"}},
		{"a max_attempts=3 dead_letter=d dead_letter_keep_for=99999999999999999999d", {"out of range"}},
		{"a max_attempts=3 dead_letter=d dead_letter_keep_for=1d dead_letter_keep_for=2d",
			{"dead_letter_keep_for given twice"}},
		{"a max_attempts=3 dead_letter=d dead_letter_keep_for=", {"dead_letter_keep_for has an empty value"}},
	};
	for(size_t i = 0; i < ARRAY_LEN(lines); i++){
		expect_line_refused(&lines[i]);
	}
	static const struct bad_json docs[] = {
		{JPOL("\"dead_letter_keep_for\":14"), {"policies[0]: dead_letter_keep_for must be a string with a unit, "
			"e.g. \"30s\", got the number 14"}},
		{JPOL("\"dead_letter_keep_for\":\"0s\""), {"policies[0]: dead_letter_keep_for \"0s\": an age of zero"}},
	};
	for(size_t i = 0; i < ARRAY_LEN(docs); i++){
		struct dlq_policy_table t = {0};
		err[0] = '\0';
		ck_assert_int_eq(policy_parse__json(docs[i].doc, strlen(docs[i].doc), "p.json", &t, err, sizeof(err)), EINVAL);
		ck_assert_uint_eq(t.count, 0);
		expect_json_message(&docs[i]);
	}
}
END_TEST

/* ---- plugin_opt_broker_name (issue 39) ---- */

/* A name is one topic level of printable ASCII, 1 to 64 bytes; given, it
 * is kept as it is and the host name is not looked at. */
START_TEST(test_broker_name_good)
{
	static const char *const names[] = {
		"edge-1", "plant_7.lyon", "a", "EU:west:3", "$edge", "x@y=z~!",
		"1234567890123456789012345678901234567890123456789012345678901234",
	};
	for(size_t i = 0; i < ARRAY_LEN(names); i++){
		struct dlq_option opts[] = {
			{"policy", "a max_attempts=3 dead_letter=d"},
			{"broker_name", names[i]},
		};
		struct dlq_config c;
		ck_assert_msg(config__parse(opts, 2, &c, err, sizeof(err)) == 0, "%s: %s", names[i], err);
		ck_assert_str_eq(c.broker_name, names[i]);
		ck_assert_int_eq(config__name_broker(&c, "the-host", err, sizeof(err)), 0);
		ck_assert_str_eq(c.broker_name, names[i]);
		config__free(&c);
	}
}
END_TEST

/* Refused with the option, the value and why: empty, a wildcard or a
 * level separator, a space or a control character, a byte outside
 * printable ASCII, longer than 64 bytes; and given twice. */
START_TEST(test_broker_name_bad)
{
	static const struct bad_option cases[] = {
		{"broker_name", "", {"plugin_opt_broker_name \"\"", "it is empty", "1 to 64 bytes"}},
		{"broker_name", "site/7", {"plugin_opt_broker_name \"site/7\"", "'/', '+' or '#'"}},
		{"broker_name", "edge+", {"\"edge+\"", "'/', '+' or '#'"}},
		{"broker_name", "#", {"\"#\"", "never a wildcard"}},
		{"broker_name", "edge 1", {"\"edge 1\"", "a space, a control character"}},
		{"broker_name", "edge\t1", {"plugin_opt_broker_name", "a space, a control character"}},
		{"broker_name", "edge\x7f", {"plugin_opt_broker_name", "outside printable ASCII"}},
		{"broker_name", "usine-\xc3\xa9", {"plugin_opt_broker_name", "outside printable ASCII"}},
		{"broker_name", "12345678901234567890123456789012345678901234567890123456789012345",
			{"plugin_opt_broker_name", "longer than 64 bytes"}},
	};
	for(size_t i = 0; i < ARRAY_LEN(cases); i++){
		expect_option_refused(&cases[i]);
	}
	const struct dlq_option twice[] = {
		{"policy", "a max_attempts=3 dead_letter=d"},
		{"broker_name", "edge-1"},
		{"broker_name", "edge-2"},
	};
	parse_fails(twice, ARRAY_LEN(twice));
	ERR_HAS("plugin_opt_broker_name \"edge-2\"", "given twice", "\"edge-1\"");
}
END_TEST

/* Left out, the parser gives none (config_probe prints "-") and
 * config__name_broker gives the host name; a host name that cannot be a
 * broker's name, or none at all, is refused saying to set the option. */
START_TEST(test_broker_name_default)
{
	const struct dlq_option opts[] = {{"policy", "a max_attempts=3 dead_letter=d"}};
	struct dlq_config c;
	ck_assert_int_eq(config__parse(opts, 1, &c, err, sizeof(err)), 0);
	ck_assert_ptr_null(c.broker_name);
	ck_assert_int_eq(config__name_broker(&c, "gw-3.example.org", err, sizeof(err)), 0);
	ck_assert_str_eq(c.broker_name, "gw-3.example.org");
	config__free(&c);

	static const struct {
		const char *host;
		const char *want;
	} bad[] = {
		{NULL, "the host name cannot be read"},
		{"", "it is empty"},
		{"my host", "a space"},
		{"a/b", "'/', '+' or '#'"},
	};
	for(size_t i = 0; i < ARRAY_LEN(bad); i++){
		ck_assert_int_eq(config__parse(opts, 1, &c, err, sizeof(err)), 0);
		err[0] = '\0';
		ck_assert_int_eq(config__name_broker(&c, bad[i].host, err, sizeof(err)), EINVAL);
		ck_assert_ptr_null(c.broker_name);
		ERR_HAS(bad[i].want, "set plugin_opt_broker_name");
		config__free(&c);
	}
}
END_TEST

/* ---- plugin_opt_collect (issue 39, "Collecting") ---- */

/* One filter a line, kept in order; collecting beside policies of other
 * topics. */
START_TEST(test_collect_good)
{
	const struct dlq_option opts[] = {
		{"policy", "orders/# max_attempts=3 dead_letter=dead/orders"},
		{"collect", "fleet/+/dead/#"},
		{"collect", "plant-7/dead/orders"},
	};
	struct dlq_config c;
	ck_assert_msg(config__parse(opts, ARRAY_LEN(opts), &c, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(c.collect.count, 2);
	ck_assert_str_eq(c.collect.items[0], "fleet/+/dead/#");
	ck_assert_str_eq(c.collect.items[1], "plant-7/dead/orders");
	ck_assert(collect_filters__match(&c.collect, "fleet/edge-1/dead/orders"));
	ck_assert(!collect_filters__match(&c.collect, "orders/1"));
	ck_assert(!collect_filters__match(&c.collect, "dead/orders"));
	config__free(&c);

	/* None given: nothing collected. */
	struct dlq_config none;
	ck_assert_int_eq(config__parse(opts, 1, &none, err, sizeof(err)), 0);
	ck_assert_uint_eq(none.collect.count, 0);
	config__free(&none);
}
END_TEST

/* Refused at start, naming the line, the filter and what it would do: not
 * a filter, a '$' filter, twice, overlapping a policy's filter (tracked
 * and collected), taking a policy's own dead-letter topic (kept twice),
 * or with the store off. */
START_TEST(test_collect_bad)
{
	static const struct bad_option cases[] = {
		{"collect", "", {"plugin_opt_collect #1 \"\"", "not a topic filter"}},
		{"collect", "fleet/#/x", {"plugin_opt_collect #1 \"fleet/#/x\"", "not a topic filter"}},
		{"collect", "$SYS/#", {"\"$SYS/#\"", "outside '$'"}},
		/* The test policy is z max_attempts=3 dead_letter=d. */
		{"collect", "#", {"plugin_opt_collect \"#\" overlaps the filter \"z\"", "tracked and collected"}},
		{"collect", "+", {"\"+\" overlaps the filter \"z\"", "plugin_opt_policy #1"}},
	};
	for(size_t i = 0; i < ARRAY_LEN(cases); i++){
		expect_option_refused(&cases[i]);
	}
	const struct dlq_option dead[] = {
		{"policy", "orders/# max_attempts=3 dead_letter=fleet/here/dead/orders"},
		{"collect", "fleet/+/dead/#"},
	};
	parse_fails(dead, ARRAY_LEN(dead));
	ERR_HAS("plugin_opt_collect \"fleet/+/dead/#\" takes \"fleet/here/dead/orders\"", "dead-letter topic",
			"plugin_opt_policy #1", "keeps its own letters");
	const struct dlq_option overlap[] = {
		{"policy", "fleet/+/dead/urgent max_attempts=3 dead_letter=dead/urgent"},
		{"collect", "fleet/edge-1/#"},
	};
	parse_fails(overlap, ARRAY_LEN(overlap));
	ERR_HAS("\"fleet/edge-1/#\" overlaps the filter \"fleet/+/dead/urgent\"");
	const struct dlq_option twice[] = {
		{"collect", "fleet/+/dead/#"},
		{"collect", "fleet/+/dead/#"},
	};
	parse_fails(twice, ARRAY_LEN(twice));
	ERR_HAS("plugin_opt_collect #2 \"fleet/+/dead/#\"", "given twice");
	const struct dlq_option off[] = {
		{"collect", "fleet/+/dead/#"},
		{"dead_letter_keep", "0"},
	};
	parse_fails(off, ARRAY_LEN(off));
	ERR_HAS("plugin_opt_collect \"fleet/+/dead/#\"", "plugin_opt_dead_letter_keep 0");
}
END_TEST

/* ---- plugin_opt_redrive_home and plugin_opt_redrive_from (issue 39,
 * "Redrive home") ---- */

START_TEST(test_redrive_paths_good)
{
	const struct dlq_option opts[] = {
		{"policy", "orders/# max_attempts=3 dead_letter=dead/orders"},
		{"collect", "fleet/+/dead/#"},
		{"redrive_home", "fleet/%b/redrive"},
		{"redrive_from", "redrive local.edge-1"},
	};
	struct dlq_config c;
	ck_assert_msg(config__parse(opts, ARRAY_LEN(opts), &c, err, sizeof(err)) == 0, "%s", err);
	ck_assert_str_eq(c.redrive.home, "fleet/%b/redrive");
	ck_assert_str_eq(c.redrive.from_topic, "redrive");
	ck_assert_str_eq(c.redrive.from_client, "local.edge-1");
	char topic[DLQ_HOME_TOPIC_MAX];
	redrive_paths__home_topic(&c.redrive, "edge-7", topic);
	ck_assert_str_eq(topic, "fleet/edge-7/redrive");
	config__free(&c);
	const struct dlq_option last[] = {{"redrive_home", "home/%b"}};
	ck_assert_int_eq(config__parse(last, 1, &c, err, sizeof(err)), 0);
	redrive_paths__home_topic(&c.redrive, "e", topic);
	ck_assert_str_eq(topic, "home/e");
	config__free(&c);
}
END_TEST

/* Refused at start, naming the option, the value and why: no %b, a %b
 * inside a level, two, another '%', a '$' topic, wildcards; a request
 * topic and client that are not two words; a topic a policy or a collect
 * filter takes, or a policy's dead-letter topic. */
START_TEST(test_redrive_paths_bad)
{
	static const struct bad_option cases[] = {
		{"redrive_home", "fleet/redrive", {"plugin_opt_redrive_home \"fleet/redrive\"", "one whole level %b", "(e.g. plugin_opt_redrive_home fleet/%b/redrive)"}},
		{"redrive_home", "fleet/x%b/redrive", {"\"fleet/x%b/redrive\"", "one whole level %b"}},
		{"redrive_home", "%b/%b", {"\"%b/%b\"", "one whole level %b"}},
		{"redrive_home", "%b/%c", {"no other '%'"}},
		{"redrive_home", "$fleet/%b", {"outside '$'"}},
		{"redrive_home", "fleet/%b/#", {"\"fleet/%b/#\"", "one whole level %b"}},
		{"redrive_from", "redrive", {"plugin_opt_redrive_from \"redrive\"", "a topic and a client id"}},
		{"redrive_from", "redrive a b", {"\"redrive a b\"", "a topic and a client id"}},
		{"redrive_from", "redrive/+ local.edge-1", {"\"redrive/+ local.edge-1\"", "without wildcards"}},
		{"redrive_from", "$redrive local.edge-1", {"outside '$'"}},
		/* The test policy is z max_attempts=3 dead_letter=d. */
		{"redrive_from", "z local.edge-1", {"plugin_opt_redrive_from \"z\" overlaps the filter \"z\"",
				"tracked"}},
		{"redrive_from", "d local.edge-1", {"plugin_opt_redrive_from \"d\" takes \"d\"", "dead-letter topic"}},
		{"redrive_home", "%b", {"plugin_opt_redrive_home \"+\" overlaps the filter \"z\""}},
	};
	for(size_t i = 0; i < ARRAY_LEN(cases); i++){
		expect_option_refused(&cases[i]);
	}
	const struct dlq_option collected[] = {
		{"collect", "fleet/#"},
		{"redrive_home", "fleet/%b/redrive"},
	};
	parse_fails(collected, ARRAY_LEN(collected));
	ERR_HAS("plugin_opt_redrive_home \"fleet/+/redrive\" overlaps plugin_opt_collect \"fleet/#\"",
			"kept as a collected letter");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config");
	check_add(s, tcase_create("core"), CHECK_TESTS(test_line_good, test_line_bad, test_duration, test_size,
			test_parse_good, test_parse_defaults_and_limits, test_parse_policy_error_message,
			test_parse_unknown_and_twice, test_parse_no_policies, test_parse_bad_values, test_parse_table_errors,
			test_long_value_is_cut, test_json_good, test_json_bad, test_policy_file, test_policy_file_errors));

	check_add(s, tcase_create("delays and state"), CHECK_TESTS(test_line_delays_good, test_line_delays_bad,
			test_json_delays_good, test_json_delays_bad, test_delay_ms, test_state_options, test_state_options_bad,
			test_delivery_count_option));

	check_add(s, tcase_create("deadlines"), CHECK_TESTS(test_ack_timeout_good, test_ack_timeout_bad,
			test_ack_timeout_needs_a_send_signal));

	check_add(s, tcase_create("broker name"), CHECK_TESTS(test_broker_name_good, test_broker_name_bad,
			test_broker_name_default, test_collect_good, test_collect_bad));

	check_add(s, tcase_create("age bound"), CHECK_TESTS(test_keep_for_good, test_keep_for_bad));
	check_add(s, tcase_create("redrive home"), CHECK_TESTS(test_redrive_paths_good, test_redrive_paths_bad));
	return check_run(s);
}
