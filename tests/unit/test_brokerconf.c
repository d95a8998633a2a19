/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of brokerconf.c through brokerconf__scan_text: what the plugin
 * learns from the broker's mosquitto.conf (persistence, per_listener_settings)
 * must be what Mosquitto 2.0.11 itself makes of the same text: the last
 * occurrence wins, '#' lines are comments, and a boolean is "true"/"false"
 * or "1"/"0" (src/conf.c, conf__parse_bool).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "brokerconf.h"

static struct broker_facts f;

static void scan(const char *text)
{
	memset(&f, 0, sizeof(f));
	brokerconf__scan_text(&f, text);
}

/* ------------------------------------------------------------------ */

START_TEST(defaults_are_false)
{
	scan("");
	ck_assert(!f.persistence);
	ck_assert(!f.per_listener_settings);
	scan("listener 1883\nallow_anonymous true\n");
	ck_assert(!f.persistence);
	ck_assert(!f.per_listener_settings);
	/* Scanning text says nothing of a file having been found. */
	ck_assert(!f.known);
}
END_TEST

START_TEST(persistence_true_and_false)
{
	scan("persistence true\n");
	ck_assert(f.persistence);
	ck_assert(!f.per_listener_settings);
	scan("persistence false\n");
	ck_assert(!f.persistence);
	/* No newline at the end, CRLF line ends, blanks around. */
	scan("persistence true");
	ck_assert(f.persistence);
	scan("listener 1883\r\npersistence true\r\n");
	ck_assert(f.persistence);
	scan("   persistence    true   \n");
	ck_assert(f.persistence);
}
END_TEST

START_TEST(the_last_occurrence_wins)
{
	scan("persistence true\npersistence false\n");
	ck_assert(!f.persistence);
	scan("persistence false\nlistener 1883\npersistence true\n");
	ck_assert(f.persistence);
	scan("per_listener_settings true\npersistence true\nper_listener_settings false\n");
	ck_assert(!f.per_listener_settings);
	ck_assert(f.persistence);
}
END_TEST

START_TEST(comments_and_similar_keys_are_ignored)
{
	scan("#persistence true\n# persistence true\n");
	ck_assert(!f.persistence);
	scan("persistence true\n#persistence false\n");
	ck_assert(f.persistence);
	/* Keys that merely start with the same letters. */
	scan("persistence_location /var/lib/mosquitto/\npersistence_file true\nautosave_on_changes true\n");
	ck_assert(!f.persistence);
	scan("per_listener_settingsx true\n");
	ck_assert(!f.per_listener_settings);
	/* An empty value is not true. */
	scan("persistence\n");
	ck_assert(!f.persistence);
}
END_TEST

START_TEST(per_listener_settings)
{
	scan("per_listener_settings true\nlistener 1883\n");
	ck_assert(f.per_listener_settings);
	ck_assert(!f.persistence);
	scan("per_listener_settings false\n");
	ck_assert(!f.per_listener_settings);
}
END_TEST

START_TEST(booleans_are_read_as_mosquitto_reads_them)
{
	/* Mosquitto 2.0.11 takes "1" for true and "0" for false
	 * (conf__parse_bool): a broker started with "persistence 1" keeps its
	 * sessions, and the plugin must know it. */
	scan("persistence 1\n");
	ck_assert_msg(f.persistence, "\"persistence 1\" read as false; Mosquitto reads it as true");
	scan("persistence true\npersistence 0\n");
	ck_assert(!f.persistence);
	scan("per_listener_settings 1\n");
	ck_assert_msg(f.per_listener_settings, "\"per_listener_settings 1\" read as false; Mosquitto reads it as true");
	/* Mosquitto reads the first word only. */
	scan("persistence true # sessions survive\n");
	ck_assert(f.persistence);
	scan("persistence true\npersistence false\textra\n");
	ck_assert(!f.persistence);
}
END_TEST

/* ------------------------------------------------------------------ */

static Suite *brokerconf_suite(void)
{
	Suite *s = suite_create("brokerconf");
	TCase *tc = tcase_create("scan_text");
	tcase_add_test(tc, defaults_are_false);
	tcase_add_test(tc, persistence_true_and_false);
	tcase_add_test(tc, the_last_occurrence_wins);
	tcase_add_test(tc, comments_and_similar_keys_are_ignored);
	tcase_add_test(tc, per_listener_settings);
	tcase_add_test(tc, booleans_are_read_as_mosquitto_reads_them);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(brokerconf_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
