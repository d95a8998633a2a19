/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of deadsubs.c: which subscriptions take in both a dead-letter
 * topic and a policy filter (`#`, `+/#`, shared ones too; not `dead/#`
 * alone, not the policy filter alone), the engine's count and its one
 * warning per client and filter, forgotten with the client's connection,
 * and the bound on the set of warnings.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "config/config.h"
#include "model/deadsubs.h"
#include "engine/dlq.h"
#include "engine_calls.h"
#include "fake_port.h"
#include "test_util.h"


static struct dlq_policy items[] = {
	{ .filter = "jobs/#", .dead_letter = "dead/jobs" },
	{ .filter = "sites/+/telemetry", .dead_letter = "archive/dead/telemetry" },
};
static const struct dlq_policy_table table = { .items = items, .count = ARRAY_LEN(items) };

static bool flagged(const char *filter, const char **dl, const char **pf)
{
	const char *a = NULL, *b = NULL;
	bool r = deadsubs__match(&table, filter, dl ? dl : &a, pf ? pf : &b);
	return r;
}

START_TEST(filters_that_take_in_dead_letters_and_work)
{
	const char *dl, *pf;
	ck_assert(flagged("#", &dl, &pf));
	ck_assert_str_eq(dl, "dead/jobs");
	ck_assert_str_eq(pf, "jobs/#");
	ck_assert(flagged("+/#", NULL, NULL));
	ck_assert(flagged("$share/g/#", NULL, NULL));
	ck_assert(!flagged("archive/#", &dl, &pf)); /* dead letters of telemetry only */
	ck_assert(!flagged("+/+/other", &dl, &pf));
	/* archive/dead/telemetry has three levels, as sites/x/telemetry. */
	ck_assert(flagged("+/+/telemetry", &dl, &pf));
	ck_assert_str_eq(dl, "archive/dead/telemetry");
	ck_assert_str_eq(pf, "jobs/#"); /* jobs/x/telemetry: the first declared that overlaps */
	ck_assert(flagged("+/dead/telemetry", &dl, &pf));
	ck_assert_str_eq(pf, "jobs/#");
	ck_assert(!flagged("archive/+/telemetry", &dl, &pf) && !flagged("sites/+/+", &dl, &pf));
	ck_assert(!flagged("dead/#", NULL, NULL));   /* an inspector */
	ck_assert(!flagged("dead/jobs", NULL, NULL));
	ck_assert(!flagged("jobs/#", NULL, NULL));   /* a worker */
	ck_assert(!flagged("$SYS/#", NULL, NULL));
	ck_assert(!flagged("$share/g", NULL, NULL));
	ck_assert(!flagged("a/#/b", NULL, NULL));
	ck_assert(!flagged(NULL, NULL, NULL));
}
END_TEST

static const struct dlq_option standard[] = {
	{"policy", "jobs/# max_attempts=3 dead_letter=dead/jobs"},
};

static size_t warnings(void)
{
	size_t n = 0;
	for(size_t i = 0; i < fake.log_count; i++){
		if(strstr(fake.logs[i], "which takes in the dead-letter topic")) n++;
	}
	return n;
}

START_TEST(logged_once_per_client_and_filter_and_counted)
{
	struct dlq d;
	fake_reset();
	engine_start(&d, NULL, standard, ARRAY_LEN(standard), ENGINE_NO_SYS);

	ck_assert(dlq__subscribed_to_dead_letters(&d, "c1", "#"));
	ck_assert(dlq__subscribed_to_dead_letters(&d, "c1", "#"));
	ck_assert(dlq__subscribed_to_dead_letters(&d, "c1", "+/#"));
	ck_assert(!dlq__subscribed_to_dead_letters(&d, "c2", "dead/#"));
	ck_assert_uint_eq(engine__totals(&d)->subscribers_of_dead_letters, 3);
	ck_assert_uint_eq(warnings(), 2);
	ck_assert(fake_logged("client \"c1\" subscribed to \"#\", which takes in the dead-letter topic \"dead/jobs\" "
			"as well as messages of policy \"jobs/#\": it receives dead letters as new deliveries"));
	/* The connection ends: a new one is warned about again. */
	dlq__client_gone(&d, "c1");
	ck_assert(dlq__subscribed_to_dead_letters(&d, "c1", "#"));
	ck_assert_uint_eq(warnings(), 3);

	/* The bound: past DEADSUBS_MAX pairs, one notice, then counting only. */
	char id[32];
	for(int i = 0; i < DEADSUBS_MAX + 10; i++){
		snprintf(id, sizeof(id), "many-%d", i);
		dlq__subscribed_to_dead_letters(&d, id, "#");
	}
	ck_assert_uint_eq(d.deadsubs.count, DEADSUBS_MAX);
	/* (The fake port keeps only the first FAKE_MAX_LOGS lines.) */
	ck_assert(d.deadsubs.full_noted);
	ck_assert_uint_eq(engine__totals(&d)->subscribers_of_dead_letters, 4 + DEADSUBS_MAX + 10);
	engine_stop(&d, NULL);
	fake_reset();
}
END_TEST

int main(void)
{
	return check_run(check_suite("deadsubs", tcase_create("deadsubs"),
			CHECK_TESTS(filters_that_take_in_dead_letters_and_work, logged_once_per_client_and_filter_and_counted)));
}
