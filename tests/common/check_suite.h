/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Building and running a Check suite from lists of tests, so that each test
 * file names its tests once, in a list, instead of repeating the same
 * tcase_add_test, suite_add_tcase and SRunner lines as every other file.
 * Unit, fault and integration tests share it (integration tests run their
 * suite through harness_run, which adds the harness' own bookkeeping).
 */
#ifndef DLQ_CHECK_SUITE_H
#define DLQ_CHECK_SUITE_H

#include <check.h>
#include <stdlib.h>

/* A null-terminated list of Check tests (the names START_TEST defines). */
#define CHECK_TESTS(...) ((const TTest *const[]){__VA_ARGS__, NULL})

/* Adds tests to tc in their order and returns tc. */
static inline TCase *check_tests(TCase *tc, const TTest *const *tests)
{
	for(; *tests; tests++){
		tcase_add_test(tc, *tests);
	}
	return tc;
}

/* Adds tests to tc in their order, each a loop test run with _i from start
 * to end - 1, and returns tc. */
static inline TCase *check_loops(TCase *tc, int start, int end, const TTest *const *tests)
{
	for(; *tests; tests++){
		tcase_add_loop_test(tc, *tests, start, end);
	}
	return tc;
}

/* Adds tests to tc in their order, adds tc to s and returns tc (still the
 * caller's to give fixtures or a timeout; s owns it). */
static inline TCase *check_add(Suite *s, TCase *tc, const TTest *const *tests)
{
	suite_add_tcase(s, check_tests(tc, tests));
	return tc;
}

/* tc with the checked fixture setup and teardown, for a call of check_add. */
static inline TCase *check_fixture(TCase *tc, SFun setup, SFun teardown)
{
	tcase_add_checked_fixture(tc, setup, teardown);
	return tc;
}

/* tc with a timeout of seconds instead of Check's default, for a call of
 * check_add. */
static inline TCase *check_timeout(TCase *tc, double seconds)
{
	tcase_set_timeout(tc, seconds);
	return tc;
}

/* A suite named name of the one test case tc, holding tests. */
static inline Suite *check_suite(const char *name, TCase *tc, const TTest *const *tests)
{
	Suite *s = suite_create(name);
	check_add(s, tc, tests);
	return s;
}

/* Runs every test of s (and frees it): EXIT_SUCCESS when all passed. */
static inline int check_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
