/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Configuration against the real broker: configurations the plugin must
 * refuse (the broker then exits non-zero and one line of its log names the
 * problem), and ones it accepts: the global options, a JSON policy file
 * beside plugin_opt_policy lines, and precedence between overlapping
 * filters.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "harness.h"
#include "test_util.h"

/* True if one line of log contains every string of the NULL-terminated
 * list. */
static bool log_line_has(const char *log, const char *const *needles)
{
	const char *p = log;
	while(*p){
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		char *line = strndup(p, len);
		bool all = line != NULL;
		for(size_t i = 0; all && needles[i]; i++){
			all = strstr(line, needles[i]) != NULL;
		}
		free(line);
		if(all){
			return true;
		}
		if(!eol){
			break;
		}
		p = eol + 1;
	}
	return false;
}

/* Runs b expecting a refusal; fails unless one log line has every needle. */
#define expect_refused(b, ...) expect_refused_at(__FILE__, __LINE__, (b), __VA_ARGS__, (const char *)NULL)
static void expect_refused_at(const char *file, int line, struct broker *b, ...)
{
	const char *needles[8];
	size_t n = 0;
	va_list ap;
	va_start(ap, b);
	const char *s;
	while((s = va_arg(ap, const char *)) != NULL && n < 7){
		needles[n++] = s;
	}
	va_end(ap);
	needles[n] = NULL;
	char *log = broker_expect_refusal_at(file, line, b);
	if(!log_line_has(log, needles)){
		char want[512] = "";
		for(size_t i = 0; i < n; i++){
			strncat(want, i ? "\", \"" : "\"", sizeof(want) - strlen(want) - 1);
			strncat(want, needles[i], sizeof(want) - strlen(want) - 1);
		}
		strncat(want, "\"", sizeof(want) - strlen(want) - 1);
		free(log);
		/* Its directory, log included, is printed after the summary. */
		_ck_assert_failed(file, line, "refusal", "the broker refused, but no log line names %s", want);
	}
	free(log);
}

/* A broker with the plugin and these plugin_opt_ lines, not started. */
static struct broker *with_options(const char *label, const char *const *opts)
{
	struct broker *b = broker_new(label);
	broker_plugin(b);
	for(size_t i = 0; opts[i]; i++){
		broker_conf(b, "plugin_opt_%s", opts[i]);
	}
	return b;
}

#define OPTS(...) ((const char *const[]){ __VA_ARGS__, NULL })

START_TEST(test_refuse_dead_letter_inside_filter)
{
	struct broker *b = with_options(__func__, OPTS("policy orders/# max_attempts=3 dead_letter=orders/dead"));
	expect_refused(b, "orders/#", "orders/dead");
}
END_TEST

START_TEST(test_refuse_dead_letter_inside_other_filter)
{
	struct broker *b = with_options(__func__, OPTS(
			"policy payments max_attempts=3 dead_letter=audit/payments-dead",
			"policy audit/+ max_attempts=2 dead_letter=dlq/audit"));
	expect_refused(b, "audit/+", "audit/payments-dead");
}
END_TEST

START_TEST(test_refuse_max_attempts_zero)
{
	struct broker *b = with_options(__func__, OPTS("policy jobs max_attempts=0 dead_letter=dlq/jobs"));
	expect_refused(b, "max_attempts", "0");
}
END_TEST

START_TEST(test_refuse_max_attempts_too_large)
{
	struct broker *b = with_options(__func__, OPTS("policy jobs max_attempts=1001 dead_letter=dlq/jobs"));
	expect_refused(b, "max_attempts", "1001");
}
END_TEST

START_TEST(test_refuse_unknown_option)
{
	struct broker *b = with_options(__func__, OPTS("policy jobs max_attempts=3 dead_letter=dlq/jobs", "frobnicate yes"));
	expect_refused(b, "frobnicate");
}
END_TEST

START_TEST(test_refuse_unknown_policy_key)
{
	struct broker *b = with_options(__func__, OPTS("policy jobs max_attempts=3 dead_letter=dlq/jobs colour=blue"));
	expect_refused(b, "colour");
}
END_TEST

START_TEST(test_refuse_bare_number_window)
{
	struct broker *b = with_options(__func__, OPTS("nack_window 300", "policy jobs max_attempts=3 dead_letter=dlq/jobs"));
	expect_refused(b, "nack_window", "300");
}
END_TEST

START_TEST(test_refuse_bad_size)
{
	struct broker *b = with_options(__func__, OPTS("max_pending_bytes lots", "policy jobs max_attempts=3 dead_letter=dlq/jobs"));
	expect_refused(b, "max_pending_bytes", "lots");
}
END_TEST

START_TEST(test_refuse_wildcard_dead_letter)
{
	struct broker *b = with_options(__func__, OPTS("policy jobs max_attempts=3 dead_letter=dlq/+"));
	expect_refused(b, "dlq/+");
}
END_TEST

START_TEST(test_refuse_duplicate_filter)
{
	struct broker *b = with_options(__func__, OPTS(
			"policy jobs max_attempts=3 dead_letter=dlq/jobs",
			"policy jobs max_attempts=2 dead_letter=dlq/jobs2"));
	expect_refused(b, "jobs");
}
END_TEST

/* The plugin line alone, as the Debian package's dlq.conf ships: the
 * broker starts, the plugin says it has no policies, and a message
 * published where a policy would usually be arrives as it was sent. */
START_TEST(test_no_policies_starts)
{
	struct broker *b = broker_new(__func__);
	broker_plugin(b);
	broker_start(b);
	char *log = broker_log(b);
	ck_assert_msg(log_line_has(log, (const char *const[]){"loaded: 0 policies", NULL}), "no \"loaded: 0 policies\" line");
	ck_assert_msg(log_line_has(log, (const char *const[]){"no policies: nothing is tracked", "plugin_opt_policy_file", NULL}),
			"no notice saying there are no policies");
	free(log);
	struct client *c = client_subscribed(b, "c", "jobs/#");
	client_publish_str(c, "jobs/1", "j", 1);
	const struct it_msg *m = client_expect(c, "jobs/1", 1);
	ck_assert_str_eq(m->payload, "j");
	ck_assert_uint_eq(m->nusers, 0);
	clients_settle(c);
	client_expect_exactly(c, NULL, 1);
}
END_TEST

START_TEST(test_refuse_missing_policy_file)
{
	struct broker *b = broker_new(__func__);
	const char *path = broker_path(b, "missing-policies.json");
	broker_plugin(b);
	broker_conf(b, "plugin_opt_policy_file %s", path);
	expect_refused(b, "missing-policies.json");
}
END_TEST

START_TEST(test_refuse_malformed_policy_file)
{
	struct broker *b = broker_new(__func__);
	const char *path = broker_file(b, "broken-policies.json", "{\"policies\":[{\"filter\":\"a\",");
	broker_plugin(b);
	broker_conf(b, "plugin_opt_policy_file %s", path);
	expect_refused(b, "broken-policies.json");
}
END_TEST

START_TEST(test_refuse_unknown_key_in_policy_file)
{
	struct broker *b = broker_new(__func__);
	const char *path = broker_file(b, "policies.json",
			"{\"policies\":[{\"filter\":\"a\",\"max_attempts\":2,\"dead_letter\":\"dlq/a\",\"colour\":\"blue\"}]}");
	broker_plugin(b);
	broker_conf(b, "plugin_opt_policy_file %s", path);
	expect_refused(b, "colour");
}
END_TEST

START_TEST(test_refuse_dead_letter_inside_filter_in_file)
{
	struct broker *b = broker_new(__func__);
	const char *path = broker_file(b, "policies.json",
			"{\"policies\":[{\"filter\":\"shop/#\",\"max_attempts\":2,\"dead_letter\":\"shop/dead\"}]}");
	broker_plugin(b);
	broker_conf(b, "plugin_opt_policy_file %s", path);
	expect_refused(b, "shop/#", "shop/dead");
}
END_TEST

/* The global options in their documented forms are accepted. */
START_TEST(test_global_options_accepted)
{
	struct broker *b = dlq_broker("nack_window 300s", "max_pending_bytes 64MiB",
			"policy jobs max_attempts=1 dead_letter=dlq/jobs");
	struct client *c = client_subscribed(b, "c", "jobs");
	client_subscribe(c, "dlq/jobs", 1);
	client_publish_str(c, "jobs", "j", 1);
	const char *id = expect_original(client_expect(c, "jobs", 1));
	client_nack(c, id, NULL);
	expect_dead_letter(client_expect(c, "dlq/jobs", 1), "jobs", id, 1, client_id(c), "jobs", NULL);
	clients_settle(c);
	client_expect_exactly(c, NULL, 2);
}
END_TEST

/* Policies from a JSON file and from plugin_opt_policy lines all apply. */
START_TEST(test_policy_file)
{
	struct broker *b = broker_new(__func__);
	const char *path = broker_file(b, "policies.json",
			"{\"policies\":["
			"{\"filter\":\"files/a\",\"max_attempts\":1,\"dead_letter\":\"dlq/files-a\"},"
			"{\"filter\":\"files/b/+\",\"max_attempts\":2,\"dead_letter\":\"dlq/files-b\",\"retry_to\":\"files/retry\"}"
			"]}");
	broker_plugin(b);
	broker_conf(b, "plugin_opt_policy_file %s", path);
	broker_conf(b, "plugin_opt_policy lines max_attempts=1 dead_letter=dlq/lines");
	broker_start(b);
	struct client *w = client_subscribed(b, "worker", "files/#");
	struct client *watcher = client_subscribed(b, "watcher", "dlq/#");
	client_subscribe(w, "lines", 1);

	client_publish_str(watcher, "files/a", "A", 1);
	const char *ida = expect_original(client_expect(w, "files/a", 1));
	client_nack(w, ida, NULL);
	const struct it_msg *dla = client_expect(watcher, "dlq/files-a", 1);
	ck_assert_str_eq(dla->payload, "A");
	expect_dead_letter(dla, "files/a", ida, 1, client_id(w), "files/a", NULL);

	client_publish_str(watcher, "files/b/x", "B", 1);
	const char *idb = expect_original(client_expect(w, "files/b/x", 1));
	client_nack(w, idb, NULL);
	const struct it_msg *copy = client_expect(w, "files/retry", 1);
	ck_assert_str_eq(copy->payload, "B");
	const char *copy_id = expect_retry_copy(copy, "files/b/x", idb, 1);
	client_nack(w, copy_id, NULL);
	const struct it_msg *dlb = client_expect(watcher, "dlq/files-b", 1);
	ck_assert_str_eq(dlb->payload, "B");
	expect_dead_letter(dlb, "files/b/x", idb, 2, client_id(w), "files/b/+", NULL);

	client_publish_str(watcher, "lines", "L", 1);
	const char *idl = expect_original(client_expect(w, "lines", 1));
	client_nack(w, idl, NULL);
	expect_dead_letter(client_expect(watcher, "dlq/lines", 1), "lines", idl, 1, client_id(w), "lines", NULL);

	client_publish_str(watcher, "files/c", "untracked", 1);
	ck_assert_uint_eq(client_expect(w, "files/c", 1)->nusers, 0);

	clients_expect_totals(w, 5, watcher, 3);
}
END_TEST

/* When filters overlap, the most specific policy applies. */
START_TEST(test_policy_precedence)
{
	struct broker *b = dlq_broker(
			"policy sensors/# max_attempts=1 dead_letter=dlq/all",
			"policy sensors/temp max_attempts=2 dead_letter=dlq/temp");
	struct client *w = client_subscribed(b, "worker", "sensors/#");
	struct client *watcher = client_subscribed(b, "watcher", "dlq/#");

	client_publish_str(watcher, "sensors/temp", "21.5", 1);
	client_publish_str(watcher, "sensors/hum", "40", 1);
	const char *idt = expect_original(client_expect(w, "sensors/temp", 1));
	const char *idh = expect_original(client_expect(w, "sensors/hum", 1));

	client_nack(w, idh, NULL);
	expect_dead_letter(client_expect(watcher, "dlq/all", 1), "sensors/hum", idh, 1, client_id(w), "sensors/#", NULL);

	client_nack(w, idt, NULL);
	const char *copy = expect_retry_copy(client_expect(w, "sensors/temp", 2), "sensors/temp", idt, 1);
	client_nack(w, copy, NULL);
	expect_dead_letter(client_expect(watcher, "dlq/temp", 1), "sensors/temp", idt, 2, client_id(w), "sensors/temp", NULL);

	clients_settle(w, watcher);
	client_expect_exactly(w, NULL, 3);
	client_expect_exactly(watcher, "dlq/all", 1);
	client_expect_exactly(watcher, "dlq/temp", 1);
	client_expect_exactly(watcher, NULL, 2);
}
END_TEST

/* A bad ack_timeout (zero, negative, a bare number, garbage) stops the
 * broker with the option, the value and the reason. */
START_TEST(test_refuse_bad_ack_timeouts)
{
	static const struct {
		const char *value;
		const char *why;
	} bad[] = {
		{"0", "a deadline must be longer than zero"},
		{"-5s", "must be a duration with a unit"},
		{"30", "a unit is required"},
		{"whenever", "must be a duration with a unit"},
	};
	for(size_t i = 0; i < ARRAY_LEN(bad); i++){
		char label[64], opt[160], shown[64];
		snprintf(label, sizeof(label), "ack-timeout-%zu", i);
		snprintf(opt, sizeof(opt), "policy jobs/# max_attempts=3 dead_letter=dlq/jobs ack_timeout=%s", bad[i].value);
		snprintf(shown, sizeof(shown), "\"%s\"", bad[i].value);
		struct broker *b = with_options(label, OPTS(opt, "redelivery_tracking allow"));
		expect_refused(b, "plugin_opt_policy", "ack_timeout", shown, bad[i].why);
	}
}
END_TEST

/* On Mosquitto 2.0 an ack_timeout needs redelivery tracking, and the
 * refusal says what to add; 2.1, which shows every send, starts without. */
START_TEST(test_ack_timeout_needs_redelivery_tracking_on_20)
{
	struct broker *b = with_options(__func__, OPTS("policy jobs/# max_attempts=3 dead_letter=dlq/jobs ack_timeout=30s"));
	if(BROKER_IS_21()){
		broker_start(b);
		char *log = broker_log(b);
		ck_assert_ptr_nonnull(strstr(log, "mosquitto-dlq"));
		free(log);
		return;
	}
	expect_refused(b, "ack_timeout=30s", "plugin_opt_redelivery_tracking defer", "plugin_opt_redelivery_tracking allow");
}
END_TEST

/* A bad age bound of the dead-letter store, store-wide or a policy's, stops
 * the broker with the option (or key), the value and the reason. */
START_TEST(test_refuse_bad_dead_letter_keep_for)
{
	static const struct {
		const char *opt;
		const char *shown;
		const char *why;
	} bad[] = {
		{"dead_letter_keep_for 0", "plugin_opt_dead_letter_keep_for \"0\"", "an age of zero would keep nothing"},
		{"dead_letter_keep_for 14", "plugin_opt_dead_letter_keep_for \"14\"", "a unit is required"},
		{"dead_letter_keep_for 500ms", "plugin_opt_dead_letter_keep_for \"500ms\"", "out of range: from 1s to 3650d"},
		{"policy jobs/# max_attempts=3 dead_letter=dlq/jobs dead_letter_keep_for=3651d", "dead_letter_keep_for \"3651d\"",
			"out of range: from 1s to 3650d, or forever"},
		{"policy jobs/# max_attempts=3 dead_letter=dlq/jobs dead_letter_keep_for=never", "dead_letter_keep_for \"never\"",
			"expected a duration with a unit"},
	};
	for(size_t i = 0; i < ARRAY_LEN(bad); i++){
		char label[64];
		snprintf(label, sizeof(label), "keep-for-%zu", i);
		bool policy = !strncmp(bad[i].opt, "policy ", 7);
		struct broker *b = policy ? with_options(label, OPTS(bad[i].opt))
				: with_options(label, OPTS("policy jobs/# max_attempts=3 dead_letter=dlq/jobs", bad[i].opt));
		expect_refused(b, bad[i].shown, bad[i].why);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config");
	check_add(s, harness_tcase("refused"), CHECK_TESTS(test_refuse_dead_letter_inside_filter,
			test_refuse_dead_letter_inside_other_filter, test_refuse_max_attempts_zero,
			test_refuse_max_attempts_too_large, test_refuse_unknown_option, test_refuse_unknown_policy_key,
			test_refuse_bare_number_window, test_refuse_bad_size, test_refuse_wildcard_dead_letter,
			test_refuse_duplicate_filter, test_refuse_missing_policy_file, test_refuse_malformed_policy_file,
			test_refuse_unknown_key_in_policy_file, test_refuse_dead_letter_inside_filter_in_file,
			test_refuse_bad_ack_timeouts, test_ack_timeout_needs_redelivery_tracking_on_20,
			test_refuse_bad_dead_letter_keep_for));
	check_add(s, harness_tcase("accepted"), CHECK_TESTS(test_global_options_accepted, test_no_policies_starts,
			test_policy_file, test_policy_precedence));
	return harness_run(s);
}
