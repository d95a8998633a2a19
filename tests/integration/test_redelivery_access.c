/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Redelivery tracking (issue 5, plugin_opt_redelivery_tracking) and access
 * control. Counting needs the broker's read check, so the option says how
 * the plugin answers checks it has no opinion on: with defer, acl_file or
 * Debian's dynamic-security plugin still decides (denied stays denied)
 * while a subscriber that dies before PUBACK is counted as in
 * test_redelivery.c; allow beside an acl_file or another plugin, defer with
 * nothing else to decide, and a bad value are refused at startup, naming
 * the option; and the startup log says the mode in exactly one line.
 */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_suite.h"
#include "harness.h"
#include "raw.h"
#include "redelivery_common.h"

/* ---- defer: another access control decides ---- */

/* The crash loop with window 1 for the subscriber w (already joined),
 * checked as crash_on_poison in test_redelivery.c checks it. */
static void crash_checks(struct scene *s, struct raw *w)
{
	client_publish_str(s->pub, TOPIC, "poison", 1);
	client_publish_str(s->pub, TOPIC, "next", 1);
	const char *id = original_id(s, "poison", 0);
	struct crash_loop cl = { .r = w, .crash_on = "poison", .stop_after = "next" };
	crash_loop(&cl);
	expect_tracking_dead_letter(client_expect(s->watch, DEAD, 1), "poison", id, raw_id(w));
	expect_dead_letters(s, 1);
	raw_drain(w, HARNESS_SETTLE_MS);
	expect_received(w, "poison", MAX_ATTEMPTS);
	expect_received(w, "next", 1);
}

/* acl_file: anonymous clients (the observers) may publish on jobs/# and
 * secret/#, read jobs/# and dead/#; alice reads and writes jobs/# only; bob
 * may only read jobs/#. */
START_TEST(test_acl_file_defer)
{
	struct broker *b = tracking_broker(__func__, "defer", true);
	const char *acl = broker_file(b, "acl",
			"topic readwrite jobs/#\n"
			"topic write secret/#\n"
			"topic read dead/#\n"
			"pattern readwrite harness/sync/%c\n"
			"\n"
			"user alice\n"
			"topic readwrite jobs/#\n"
			"\n"
			"user bob\n"
			"topic read jobs/#\n");
	broker_conf(b, "acl_file %s", acl);
	struct scene s;
	scene_start(&s, b);
	struct raw *alice = persistent(b, "alice-1", MQTT_PROTOCOL_V311, "alice");
	struct raw_options ob = { .id = "bob-1", .protocol = MQTT_PROTOCOL_V5, .clean = true, .username = "bob" };
	struct raw *bob = raw_new(b, &ob);
	join(alice, FILTER);
	ck_assert_uint_lt(raw_subscribe(alice, "secret/#", 1), 0x80); /* acl_file checks reads, not this */
	raw_connect(bob);

	/* Denied stays denied. */
	ck_assert_uint_eq(raw_publish(bob, TOPIC, "from bob", 8, 1), 0x87);
	client_publish_str(s.pub, "secret/x", "hidden", 1);

	crash_checks(&s, alice);
	ck_assert_uint_eq(raw_count(alice, "secret/x", NULL), 0);
	ck_assert_uint_eq(raw_count(alice, TOPIC, "from bob"), 0);
	ck_assert_ptr_null(client_find_payload(s.watch, NULL, "from bob", 0));
	raw_free(alice);
	raw_free(bob);
}
END_TEST

/* Debian's dynamic-security plugin, or NULL. */
static const char *dynsec_path(void)
{
	static char path[512];
	glob_t g;
	if(glob("/usr/lib/*/mosquitto_dynamic_security.so", 0, NULL, &g) == 0 && g.gl_pathc > 0){
		snprintf(path, sizeof(path), "%s", g.gl_pathv[0]);
		globfree(&g);
		return path;
	}
	globfree(&g);
	return access("/usr/lib/mosquitto_dynamic_security.so", R_OK) == 0 ? "/usr/lib/mosquitto_dynamic_security.so" : NULL;
}

/* Anonymous clients: may publish on jobs/#, secret/# and their sync topics
 * (nothing else: the default denies publishClientSend), subscribe to
 * jobs/#, dead/#, secret/# and sync topics, and receive anything but
 * secret/#. */
static const char DYNSEC_JSON[] =
	"{\n"
	"  \"defaultACLAccess\": {\"publishClientSend\": false, \"publishClientReceive\": true,\n"
	"                        \"subscribe\": false, \"unsubscribe\": true},\n"
	"  \"clients\": [],\n"
	"  \"groups\": [{\"groupname\": \"anon\", \"roles\": [{\"rolename\": \"worker\"}], \"clients\": []}],\n"
	"  \"anonymousGroup\": \"anon\",\n"
	"  \"roles\": [{\"rolename\": \"worker\", \"acls\": [\n"
	"    {\"acltype\": \"publishClientSend\", \"topic\": \"jobs/#\", \"allow\": true},\n"
	"    {\"acltype\": \"publishClientSend\", \"topic\": \"secret/#\", \"allow\": true},\n"
	"    {\"acltype\": \"publishClientSend\", \"topic\": \"harness/sync/#\", \"allow\": true},\n"
	"    {\"acltype\": \"publishClientReceive\", \"topic\": \"secret/#\", \"allow\": false},\n"
	"    {\"acltype\": \"subscribePattern\", \"topic\": \"jobs/#\", \"allow\": true},\n"
	"    {\"acltype\": \"subscribePattern\", \"topic\": \"dead/#\", \"allow\": true},\n"
	"    {\"acltype\": \"subscribePattern\", \"topic\": \"secret/#\", \"allow\": true},\n"
	"    {\"acltype\": \"subscribePattern\", \"topic\": \"harness/sync/#\", \"allow\": true}\n"
	"  ]}]\n"
	"}\n";

START_TEST(test_dynsec_defer)
{
	const char *dynsec = dynsec_path();
	ck_assert_msg(dynsec != NULL, "mosquitto_dynamic_security.so not found (Debian package mosquitto)");
	struct broker *b = tracking_broker(__func__, "defer", true);
	/* After the dlq plugin and its options: plugin_opt_ lines belong to the
	 * plugin line above them. */
	broker_conf(b, "plugin %s", dynsec);
	broker_conf(b, "plugin_opt_config_file %s", broker_file(b, "dynsec.json", DYNSEC_JSON));
	struct scene s;
	scene_start(&s, b);
	struct raw *w = persistent(b, "worker", MQTT_PROTOCOL_V311, NULL);
	struct raw_options on = { .id = "nosy", .protocol = MQTT_PROTOCOL_V5, .clean = true };
	struct raw *nosy = raw_new(b, &on);
	join(w, FILTER);
	raw_connect(nosy);
	ck_assert_uint_eq(raw_subscribe(nosy, "secret/#", 1), 1);

	/* Denied stays denied. */
	ck_assert_uint_eq(raw_publish(nosy, "forbidden/x", "no", 2, 1), 0x87);
	client_publish_str(s.pub, "secret/x", "hidden", 1);

	crash_checks(&s, w);
	raw_drain(nosy, 0);
	ck_assert_uint_eq(raw_count(nosy, NULL, NULL), 0);
	raw_free(w);
	raw_free(nosy);
}
END_TEST

/* ---- startup ---- */

/* Starts b expecting a refusal that names the option, as one the plugin
 * knows (a plugin without the feature refuses it as unknown). */
#define expect_refusal(b) expect_refusal_at(__FILE__, __LINE__, (b))
static void expect_refusal_at(const char *file, int line, struct broker *b)
{
	char *log = broker_expect_refusal_at(file, line, b);
	bool named = strstr(log, OPTION) != NULL && strstr(log, "unknown option") == NULL;
	if(!named){
		fprintf(stderr, "%s\n", log);
	}
	free(log);
	if(!named){
		fail_here(file, line, "the refusal does not name " OPTION ", or calls it unknown (log above)");
	}
}

/* On Mosquitto 2.1 the plugin answers access checks with
 * MOSQ_ERR_PLUGIN_IGNORE, so nothing is refused: the broker starts and
 * its other ACL source still decides (a publish to topic is denied, 0x87)
 * or, alone, everything is allowed as without the plugin. */
static void expect_decided_by_others(struct broker *b, const char *topic)
{
	broker_start(b);
	struct raw_options o = { .id = "other", .protocol = MQTT_PROTOCOL_V5, .clean = true };
	struct raw *r = raw_new(b, &o);
	raw_connect(r);
	unsigned rc = raw_publish(r, topic, "x", 1, 1);
	raw_free(r);
	ck_assert_msg(rc == 0x87, "a publish to %s the other ACL source denies got reason 0x%x, not 0x87", topic, rc);
}

static void expect_all_allowed(struct broker *b)
{
	broker_start(b);
	struct client *c = client_subscribed(b, "c", FILTER);
	client_publish_str(c, TOPIC, "through", 1);
	ck_assert_str_eq(client_expect(c, FILTER, 1)->payload, "through");
}

/* allow would answer before acl_file and bypass it (2.0). */
START_TEST(test_refuse_allow_with_acl_file)
{
	struct broker *b = tracking_broker(__func__, "allow", false);
	if(BROKER_IS_21()){
		broker_conf(b, "acl_file %s", broker_file(b, "acl", "topic read #\npattern readwrite harness/sync/%c\n"));
		expect_decided_by_others(b, TOPIC);
		return;
	}
	broker_conf(b, "acl_file %s", broker_file(b, "acl", "topic readwrite #\n"));
	expect_refusal(b);
}
END_TEST

/* allow would answer before a later plugin and bypass it, whichever
 * keyword loads it. */
START_TEST(test_refuse_allow_with_other_plugin)
{
	const char *dynsec = dynsec_path();
	ck_assert_msg(dynsec != NULL, "mosquitto_dynamic_security.so not found (Debian package mosquitto)");
	static const char *const keywords[] = { "plugin", "auth_plugin" };
	for(size_t i = 0; i < 2; i++){
		char label[128];
		snprintf(label, sizeof(label), "%s (%s)", __func__, keywords[i]);
		struct broker *b = tracking_broker(label, "allow", false);
		broker_conf(b, "%s %s", keywords[i], dynsec);
		broker_conf(b, "plugin_opt_config_file %s", broker_file(b, "dynsec.json", DYNSEC_JSON));
		if(BROKER_IS_21()){
			expect_decided_by_others(b, "other/x");
			continue;
		}
		expect_refusal(b);
	}
}
END_TEST

/* defer with nothing else to decide: the broker would deny everything
 * (2.0). */
START_TEST(test_refuse_defer_alone)
{
	if(BROKER_IS_21()){
		expect_all_allowed(tracking_broker(__func__, "defer", false));
		return;
	}
	expect_refusal(tracking_broker(__func__, "defer", false));
}
END_TEST

START_TEST(test_refuse_bad_value)
{
	struct broker *b = tracking_broker(__func__, "maybe", false);
	char *log = broker_expect_refusal(b);
	bool named = strstr(log, OPTION) && strstr(log, "maybe");
	if(!named){
		fprintf(stderr, "%s\n", log);
	}
	free(log);
	ck_assert_msg(named, "the refusal does not name " OPTION " and \"maybe\" (log above)");
}
END_TEST

/* Exactly one line says the mode, whichever it is. On 2.1 allow and defer
 * are the same, "on". */
static void expect_mode_line(struct broker *b, const char *mode)
{
	char want[64];
	if(BROKER_IS_21() && strcmp(mode, "off")){
		snprintf(want, sizeof(want), "redelivery tracking: on (%s", mode);
	}else{
		snprintf(want, sizeof(want), "redelivery tracking: %s", mode);
	}
	char *log = broker_log(b);
	size_t all = lines_with(log, "redelivery tracking: ");
	size_t exact = lines_with(log, want);
	if(all != 1 || exact != 1){
		fprintf(stderr, "%s\n", log);
	}
	free(log);
	ck_assert_msg(all == 1 && exact == 1, "expected exactly one \"redelivery tracking: \" line, saying \"%s\" "
			"(%zu such lines, %zu saying it; log above)", want, all, exact);
}

START_TEST(test_startup_lines)
{
	struct broker *b = tracking_broker("default", NULL, false);
	broker_start(b);
	expect_mode_line(b, "off");

	b = tracking_broker("off", "off", false);
	broker_start(b);
	expect_mode_line(b, "off");

	b = tracking_broker("allow", "allow", false);
	broker_start(b);
	expect_mode_line(b, "allow");
	/* allow lets the traffic through that it answers for. */
	struct client *c = client_subscribed(b, "c", FILTER);
	client_publish_str(c, TOPIC, "through", 1);
	ck_assert_str_eq(client_expect(c, FILTER, 1)->payload, "through");

	b = tracking_broker("defer", "defer", false);
	broker_conf(b, "acl_file %s", broker_file(b, "acl", "topic readwrite #\n"));
	broker_start(b);
	expect_mode_line(b, "defer");
}
END_TEST

int main(void)
{
	return harness_run(check_suite("redelivery_access", check_timeout(harness_tcase("redelivery_access"), TEST_TIMEOUT),
			CHECK_TESTS(test_acl_file_defer, test_dynsec_defer, test_refuse_allow_with_acl_file,
			test_refuse_allow_with_other_plugin, test_refuse_defer_alone, test_refuse_bad_value, test_startup_lines)));
}
