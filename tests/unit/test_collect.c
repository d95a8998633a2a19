/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of engine/collect.c against the fake broker port: a dead
 * letter another broker made, on a plugin_opt_collect filter, is kept in
 * the store under its maker's id and name; delivered again (a QoS 1
 * bridge's resend) it is kept once, also when its first copy came back
 * from the state file (the key is the letter's id and broker, both kept);
 * another broker's letter of the same id is not kept, and said so; a
 * message that is no dead letter is not kept, and a warning names its
 * topic, at most 10 a minute a filter (the rest counted, and said); the
 * letters kept, again and refused are counted; the store's bound applies to collected letters as to its own; a
 * reload whose policies would overlap a collect filter is refused.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_suite.h"
#include "engine/dlq.h"
#include "engine/engine.h"
#include "engine/letter_store.h"
#include "engine_calls.h"
#include "fake_port.h"
#include "model/envelope.h"
#include "model/letters.h"
#include "mosquitto_dlq.h"
#include "test_util.h"
#include "util/headers.h"
#include "util/id.h"

static struct dlq d;
static bool d_live;

static void start(const char *keep)
{
	struct dlq_option opts[] = {
		{"policy", "jobs/# max_attempts=1 dead_letter=dead/jobs"},
		{"collect", "fleet/+/dead/#"},
		{"dead_letter_keep", keep},
	};
	fake_reset();
	engine_start(&d, &d_live, opts, ARRAY_LEN(opts), ENGINE_NO_SYS);
}

static void stop(void)
{
	engine_stop(&d, &d_live);
	fake_reset();
}

static size_t logged_count(const char *text)
{
	size_t n = 0;
	for(size_t i = 0; i < fake.log_count; i++) n += strstr(fake.logs[i], text) != NULL;
	return n;
}

/* Delivers on topic the dead letter broker made with id and payload, as
 * its bridge carries it in. */
static void deliver(const char *topic, const char *broker, const char *id, const char *payload)
{
	struct dlq_envelope *e = engine_edge_letter(broker, id, "edge failure", payload);
	struct dlq_headers h = {0};
	ck_assert_int_eq(envelope__headers(e, &h), 0);
	struct dlq_collected_msg m = {
		.topic = topic, .client = "edge-bridge", .payload = payload, .payload_len = (uint32_t)strlen(payload),
		.qos = 1, .headers = h.data, .headers_len = h.len,
	};
	dlq__collect(&d, &m);
	headers__free(&h);
	envelope__free(e);
}

START_TEST(a_collected_letter_is_kept_once_as_its_makers)
{
	start("1MiB");
	ck_assert(dlq__collects(&d, "fleet/edge-1/dead/orders"));
	ck_assert(!dlq__collects(&d, "dead/jobs"));
	ck_assert(!dlq__collects(&d, "jobs/1"));
	deliver("fleet/edge-1/dead/orders", "edge-1", "AAAAAAAAAAAAAAA1", "one");
	deliver("fleet/edge-2/dead/orders", "edge-2", "AAAAAAAAAAAAAAA2", "two");
	ck_assert_uint_eq(d.letters.count, 2);
	struct dlq_letter *l = engine_letter(&d, "AAAAAAAAAAAAAAA1");
	ck_assert_ptr_nonnull(l);
	ck_assert_str_eq(l->env->broker, "edge-1");
	ck_assert_str_eq(l->env->topic, "fleet/edge-1/dead/orders");
	ck_assert_str_eq(l->env->origin_topic, "orders/1");
	ck_assert_mem_eq(l->env->payload, "one", 3);
	ck_assert_uint_eq(logged_count("kept the dead letter AAAAAAAAAAAAAAA1 of broker \"edge-1\""), 1);

	/* The bridge delivers it again: kept once, and said so. */
	deliver("fleet/edge-1/dead/orders", "edge-1", "AAAAAAAAAAAAAAA1", "one");
	ck_assert_uint_eq(d.letters.count, 2);
	ck_assert_uint_eq(logged_count("AAAAAAAAAAAAAAA1 of broker \"edge-1\" on \"fleet/edge-1/dead/orders\" is kept already"), 1);

	/* Another broker's letter under the same id: not kept, with a warning. */
	deliver("fleet/edge-3/dead/orders", "edge-3", "AAAAAAAAAAAAAAA1", "three");
	ck_assert_uint_eq(d.letters.count, 2);
	ck_assert_str_eq(engine_letter(&d, "AAAAAAAAAAAAAAA1")->env->broker, "edge-1");
	ck_assert_uint_eq(logged_count("a letter of another broker is kept under the same id"), 1);
	stop();
}
END_TEST

START_TEST(no_dead_letter_is_refused_and_logged_with_its_topic)
{
	start("1MiB");
	struct dlq_collected_msg m = {
		.topic = "fleet/edge-1/dead/orders", .client = "intruder", .payload = "junk", .payload_len = 4, .qos = 0,
	};
	dlq__collect(&d, &m);
	ck_assert_uint_eq(d.letters.count, 0);
	ck_assert_msg(fake_logged("the message on \"fleet/edge-1/dead/orders\" from \"intruder\" is no dead letter and "
			"is not kept (plugin_opt_collect): user property dead-letter-id missing"), "no warning");
	stop();
}
END_TEST

/* A flood of garbage on a collect filter does not flood the log: 10
 * warnings in a minute, then one that says the rest are not logged; every
 * refusal counted (collectedRefused). The first warning of the next
 * minute says how many were not logged. A letter kept and one delivered
 * again are counted too. */
START_TEST(a_flood_of_garbage_logs_a_bounded_number_of_warnings)
{
	start("1MiB");
	fake.now_ms = 1000;
	struct dlq_collected_msg m = {
		.topic = "fleet/edge-1/dead/orders", .client = "flooder", .payload = "junk", .payload_len = 4, .qos = 1,
	};
	for(int i = 0; i < 100; i++){
		fake.now_ms += 100;
		dlq__collect(&d, &m);
	}
	ck_assert_uint_eq(d.counters.collected_refused, 100);
	ck_assert_uint_eq(logged_count("is no dead letter and is not kept"), 10);
	ck_assert_uint_eq(logged_count("10 messages on plugin_opt_collect \"fleet/+/dead/#\" refused within 60 s: the next "
			"ones are counted (collectedRefused) and not logged for the rest of the 60 s"), 1);
	/* A minute after the window's first warning: logged again, with the
	 * count of those that were not. */
	fake.now_ms = 1100 + 60000;
	dlq__collect(&d, &m);
	ck_assert_uint_eq(logged_count("is no dead letter and is not kept"), 11);
	ck_assert(fake_logged("(plugin_opt_collect): user property dead-letter-id missing (and 90 more refused on this "
			"filter since the last warning, not logged)"));
	deliver("fleet/edge-1/dead/orders", "edge-1", "AAAAAAAAAAAAAAA1", "one");
	deliver("fleet/edge-1/dead/orders", "edge-1", "AAAAAAAAAAAAAAA1", "one");
	ck_assert_uint_eq(d.counters.collected, 1);
	ck_assert_uint_eq(d.counters.collected_duplicates, 1);
	ck_assert_uint_eq(d.counters.collected_refused, 101);
	dlq__reset_counters(&d);
	ck_assert_uint_eq(d.counters.collected + d.counters.collected_duplicates + d.counters.collected_refused, 0);
	stop();
}
END_TEST

/* A collected letter counts against the store's bound: the oldest make
 * room, and a letter larger than the bound is not kept (counted as
 * dropped), with a warning naming it. */
START_TEST(the_bound_applies_to_collected_letters)
{
	start("2KiB");
	char big[1500];
	memset(big, 'b', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	deliver("fleet/edge-1/dead/orders", "edge-1", "AAAAAAAAAAAAAAA1", big);
	deliver("fleet/edge-1/dead/orders", "edge-1", "AAAAAAAAAAAAAAA2", big);
	ck_assert_uint_eq(d.letters.count, 1);
	ck_assert_ptr_nonnull(engine_letter(&d, "AAAAAAAAAAAAAAA2"));
	ck_assert_uint_eq(d.counters.dead_letters_dropped, 1);
	char huge[3000];
	memset(huge, 'h', sizeof(huge) - 1);
	huge[sizeof(huge) - 1] = '\0';
	deliver("fleet/edge-1/dead/orders", "edge-1", "AAAAAAAAAAAAAAA3", huge);
	ck_assert_ptr_null(engine_letter(&d, "AAAAAAAAAAAAAAA3"));
	ck_assert(fake_logged("the dead letter AAAAAAAAAAAAAAA3 of broker \"edge-1\" on \"fleet/edge-1/dead/orders\" is "
			"not kept: larger than"));
	stop();
}
END_TEST

/* A reload whose policy file would overlap a collect filter is refused,
 * naming both, and the policies and filters in use stay. */
START_TEST(a_reload_that_would_overlap_is_refused)
{
	char path[] = "/tmp/dlq-collect-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	FILE *f = fdopen(fd, "w");
	ck_assert_ptr_nonnull(f);
	fputs("{\"policies\":[{\"filter\":\"mail/#\",\"max_attempts\":2,\"dead_letter\":\"dead/mail\"}]}", f);
	fclose(f);
	struct dlq_option opts[] = {
		{"policy_file", path},
		{"collect", "fleet/+/dead/#"},
	};
	fake_reset();
	engine_start(&d, &d_live, opts, ARRAY_LEN(opts), ENGINE_NO_SYS);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("{\"policies\":[{\"filter\":\"fleet/#\",\"max_attempts\":2,\"dead_letter\":\"dead/fleet\"}]}", f);
	fclose(f);
	char err[512];
	ck_assert_int_eq(dlq__reload(&d, opts, ARRAY_LEN(opts), err, sizeof(err)), EINVAL);
	ck_assert_msg(strstr(err, "plugin_opt_collect \"fleet/+/dead/#\" overlaps the filter \"fleet/#\""), "%s", err);
	ck_assert_str_eq(d.cfg.policies.items[0].filter, "mail/#");
	ck_assert(dlq__collects(&d, "fleet/edge-1/dead/orders"));
	unlink(path);
	stop();
}
END_TEST

int main(void)
{
	return check_run(check_suite("collect", tcase_create("core"), CHECK_TESTS(
			a_collected_letter_is_kept_once_as_its_makers,
			no_dead_letter_is_refused_and_logged_with_its_topic, the_bound_applies_to_collected_letters,
			a_reload_that_would_overlap_is_refused, a_flood_of_garbage_logs_a_bounded_number_of_warnings)));
}
