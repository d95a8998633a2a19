/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of brokerconf.c through brokerconf__scan_text: what the plugin
 * learns from the broker's mosquitto.conf (persistence, where and how often it
 * saves, per_listener_settings)
 * must be what Mosquitto 2.0.11 itself makes of the same text: the last
 * occurrence wins, '#' lines are comments, and a boolean is "true"/"false"
 * or "1"/"0" (src/conf.c, conf__parse_bool).
 */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/brokerconf.h"
#include "check_suite.h"
#include "test_util.h"

static struct broker_facts f;

static void scan(const char *text)
{
	memset(&f, 0, sizeof(f));
	brokerconf__scan_text(&f, text);
}

/* ------------------------------------------------------------------ */

/* What a scan of text must find: each flag true (YES), false (NO), or not
 * looked at (ANY). */
enum want { ANY, YES, NO };
struct scan_case {
	const char *text;
	enum want persistence, per_listener_settings;
};

static void expect_flag(const char *text, const char *name, bool got, enum want want)
{
	if(want == ANY) return;
	ck_assert_msg(got == (want == YES), "\"%s\": %s read as %s; Mosquitto reads it as %s", text, name,
			got ? "true" : "false", want == YES ? "true" : "false");
}

/* How Mosquitto 2.0.11 reads persistence and per_listener_settings: the
 * last occurrence wins, '#' lines are comments, a key must match whole, and
 * a boolean is "true"/"false" or "1"/"0" (conf__parse_bool). */
static const struct scan_case scans[] = {
	/* Both false by default. */
	{"", NO, NO},
	{"listener 1883\nallow_anonymous true\n", NO, NO},
	{"persistence true\n", YES, NO},
	{"persistence false\n", NO, ANY},
	/* No newline at the end, CRLF line ends, blanks around. */
	{"persistence true", YES, ANY},
	{"listener 1883\r\npersistence true\r\n", YES, ANY},
	{"   persistence    true   \n", YES, ANY},
	/* The last occurrence wins. */
	{"persistence true\npersistence false\n", NO, ANY},
	{"persistence false\nlistener 1883\npersistence true\n", YES, ANY},
	{"per_listener_settings true\npersistence true\nper_listener_settings false\n", YES, NO},
	/* Comments and keys that merely start with the same letters. */
	{"#persistence true\n# persistence true\n", NO, ANY},
	{"persistence true\n#persistence false\n", YES, ANY},
	{"persistence_location /var/lib/mosquitto/\npersistence_file true\nautosave_on_changes true\n", NO, ANY},
	{"per_listener_settingsx true\n", ANY, NO},
	/* An empty value is not true. */
	{"persistence\n", NO, ANY},
	{"per_listener_settings true\nlistener 1883\n", NO, YES},
	{"per_listener_settings false\n", ANY, NO},
	/* A broker started with "persistence 1" keeps its sessions, and the
	 * plugin must know it. */
	{"persistence 1\n", YES, ANY},
	{"persistence true\npersistence 0\n", NO, ANY},
	{"per_listener_settings 1\n", ANY, YES},
	/* Mosquitto reads the first word only. */
	{"persistence true # sessions survive\n", YES, ANY},
	{"persistence true\npersistence false\textra\n", NO, ANY},
};

/* Row _i of scans (a loop test over the table). */
START_TEST(a_scan_reads_what_mosquitto_reads)
{
	const struct scan_case *c = &scans[_i];
	scan(c->text);
	expect_flag(c->text, "persistence", f.persistence, c->persistence);
	expect_flag(c->text, "per_listener_settings", f.per_listener_settings, c->per_listener_settings);
	/* Scanning text says nothing of a file having been found. */
	ck_assert(!f.known);
}
END_TEST

/* ------------------------------------------------------------------ */

/* ---- plugin_opt_redelivery_tracking beside other ACL sources ---- */

/* Scans text as the broker's configuration file and checks mode against
 * it, this plugin at self among its plugins; the check's code, its
 * messages in err and warn (512 bytes each). */
static int check_mode(const char *text, enum dlq_redelivery_mode mode, int self, char *err, char *warn)
{
	scan(text);
	f.known = true;
	snprintf(f.path, sizeof(f.path), "/etc/mosquitto/mosquitto.conf");
	return brokerconf__check_redelivery(mode, &f, self, err, 512, warn, 512);
}

/* Checks that defer is allowed beside text, this plugin at self, with a
 * warning that says what. */
static void expect_defer_warning(const char *text, int self, const char *what)
{
	char err[512], warn[512];
	ck_assert_int_eq(check_mode(text, DLQ_REDELIVERY_DEFER, self, err, warn), 0);
	ck_assert_msg(strstr(warn, what), "warning \"%s\" does not say \"%s\"", warn, what);
}

START_TEST(acl_file_and_plugin_lines_are_read)
{
	char err[512], warn[512];
	/* off needs nothing. */
	ck_assert_int_eq(check_mode("plugin /usr/lib/dlq.so\nacl_file /etc/mosquitto/acl\nauth_plugin /usr/lib/dynsec.so\n"
			"# plugin /x.so\n", DLQ_REDELIVERY_OFF, 0, err, warn), 0);
	ck_assert(f.acl_file);
	ck_assert_uint_eq(f.plugin_count, 2);
	ck_assert_str_eq(f.plugins[0], "/usr/lib/dlq.so");
	ck_assert_str_eq(f.plugins[1], "/usr/lib/dynsec.so");
}
END_TEST

START_TEST(allow_is_refused_beside_another_acl_source)
{
	char err[512], warn[512];
	ck_assert_int_eq(check_mode("plugin /usr/lib/dlq.so\n", DLQ_REDELIVERY_ALLOW, 0, err, warn), 0);
	ck_assert_str_eq(warn, "");

	ck_assert_int_eq(check_mode("plugin /usr/lib/dlq.so\nacl_file /etc/mosquitto/acl\n",
			DLQ_REDELIVERY_ALLOW, 0, err, warn), EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "acl_file"));
	ck_assert_ptr_nonnull(strstr(err, "redelivery_tracking defer"));

	ck_assert_int_eq(check_mode("plugin /usr/lib/dlq.so\nplugin /usr/lib/dynsec.so\n",
			DLQ_REDELIVERY_ALLOW, 0, err, warn), EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "other plugins"));
}
END_TEST

START_TEST(defer_is_refused_without_another_acl_source)
{
	char err[512], warn[512];
	ck_assert_int_eq(check_mode("plugin /usr/lib/dlq.so\n", DLQ_REDELIVERY_DEFER, 0, err, warn), EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "deny every publish"));

	ck_assert_int_eq(check_mode("plugin /usr/lib/dlq.so\nacl_file /etc/mosquitto/acl\n",
			DLQ_REDELIVERY_DEFER, 0, err, warn), 0);
	ck_assert_int_eq(check_mode("plugin /usr/lib/dlq.so\n"
			"plugin /usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so\n", DLQ_REDELIVERY_DEFER, 0, err, warn), 0);
	ck_assert_str_eq(warn, "");
	/* A plugin not known to answer access checks: allowed, with a warning. */
	expect_defer_warning("plugin /usr/lib/dlq.so\nplugin /usr/lib/auth-only.so\n", 0,
			"/usr/lib/auth-only.so only authenticates");
}
END_TEST

START_TEST(a_plugin_loaded_first_is_warned_about)
{
	expect_defer_warning("plugin /usr/lib/dynsec.so\nplugin /usr/lib/dlq.so\n", 1,
			"/usr/lib/dynsec.so is loaded before this one");
}
END_TEST

START_TEST(an_unread_configuration_is_refused)
{
	char err[512], warn[512];
	scan("");
	f.known = false;
	ck_assert_int_eq(brokerconf__check_redelivery(DLQ_REDELIVERY_ALLOW, &f, -1, err, sizeof(err), warn, sizeof(warn)), EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "could not be read"));
}
END_TEST

/* 2.1 deprecates acl_file for its acl-file plugin: an ACL source all the
 * same, so defer beside it is not refused on 2.0's rules either. */
START_TEST(the_acl_file_plugin_is_an_acl_source)
{
	char err[512], warn[512];
	ck_assert_int_eq(check_mode("plugin /usr/lib/dlq.so\n"
			"plugin /usr/lib/x86_64-linux-gnu/mosquitto/mosquitto_acl_file.so\n", DLQ_REDELIVERY_DEFER, 0, err, warn), 0);
	ck_assert(f.acl_file);
	ck_assert_str_eq(warn, "");
	scan("plugin /usr/lib/dlq.so\nplugin /usr/lib/x86_64-linux-gnu/mosquitto/mosquitto_password_file.so\n");
	ck_assert(!f.acl_file);
}
END_TEST

/* On 2.1 nothing is refused; only a plugin before this one that may
 * answer access checks is warned about, not the password-file plugin. */
START_TEST(v21_warns_only_about_an_acl_plugin_before_this_one)
{
	char warn[512];
	scan("plugin /usr/lib/x86_64-linux-gnu/mosquitto/mosquitto_password_file.so\nplugin /usr/lib/dlq.so\n");
	brokerconf__check_redelivery_v21(&f, 1, warn, sizeof(warn));
	ck_assert_str_eq(warn, "");
	scan("plugin /usr/lib/x86_64-linux-gnu/mosquitto/mosquitto_acl_file.so\nplugin /usr/lib/dlq.so\n");
	brokerconf__check_redelivery_v21(&f, 1, warn, sizeof(warn));
	ck_assert_ptr_nonnull(strstr(warn, "mosquitto_acl_file.so is loaded before this one"));
	scan("plugin /usr/lib/dlq.so\n");
	brokerconf__check_redelivery_v21(&f, 0, warn, sizeof(warn));
	ck_assert_str_eq(warn, "");
}
END_TEST

START_TEST(where_and_how_often_the_broker_saves)
{
	char path[256];
	scan("");
	ck_assert_int_eq(f.autosave_interval, 1800);
	ck_assert(!brokerconf__db_path(&f, path, sizeof(path)));
	scan("persistence true\n");
	ck_assert(brokerconf__db_path(&f, path, sizeof(path)));
	ck_assert_str_eq(path, "mosquitto.db");
	/* Joined with a slash as 2.0.11, 2.0.21 and 2.1.2 join them. */
	scan("persistence true\npersistence_location /var/lib/mosquitto/\npersistence_file x.db\nautosave_interval 5\n");
	ck_assert(brokerconf__db_path(&f, path, sizeof(path)));
	ck_assert_str_eq(path, "/var/lib/mosquitto//x.db");
	ck_assert_int_eq(f.autosave_interval, 5);
	scan("persistence true\npersistence_location /data\n");
	ck_assert(brokerconf__db_path(&f, path, sizeof(path)));
	ck_assert_str_eq(path, "/data/mosquitto.db");
	/* 0 and negative: only at shutdown; not a number: left alone. */
	scan("autosave_interval 0\n");
	ck_assert_int_eq(f.autosave_interval, 0);
	scan("autosave_interval -3\n");
	ck_assert_int_eq(f.autosave_interval, 0);
	scan("autosave_interval 7\nautosave_interval x\n");
	ck_assert_int_eq(f.autosave_interval, 7);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("brokerconf");
	TCase *tc = check_add(s, tcase_create("scan_text"), CHECK_TESTS(where_and_how_often_the_broker_saves,
			acl_file_and_plugin_lines_are_read, allow_is_refused_beside_another_acl_source,
			defer_is_refused_without_another_acl_source, a_plugin_loaded_first_is_warned_about,
			an_unread_configuration_is_refused, the_acl_file_plugin_is_an_acl_source,
			v21_warns_only_about_an_acl_plugin_before_this_one));
	check_loops(tc, 0, (int)ARRAY_LEN(scans), CHECK_TESTS(a_scan_reads_what_mosquitto_reads));
	return check_run(s);
}
