/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What the broker gives back of a `$share` subscription, measured on the
 * line the tests run on (docs/durable-state.md, "What the broker
 * restores"). A member of a shared subscription and a plain subscriber of
 * the same topics, both MQTT v5 with a persistent session (clean_start
 * false, session expiry 3600 s), both connected:
 *
 * - the broker restarted (SIGTERM, persistence true), both connect again
 *   and resume their sessions, neither subscribes again: the message the
 *   member held unacknowledged comes again (the session and its messages
 *   are restored), a message published after the restart reaches the plain
 *   subscriber and not the member (every line: the broker's database never
 *   holds a `$share` subscription, src/persist_write.c persist__subs_save
 *   walks each topic node's plain subscribers and not the node's shared
 *   groups); once the member subscribes again it receives the next one;
 * - without a restart, the member disconnects and connects again: every
 *   line keeps its shared subscription. Upstream's 2.0.11 dropped it at the
 *   reconnect (src/handle_connect.c moved a resumed session's plain
 *   subscriptions to the new connection and not its shared ones, which went
 *   with the old one; fixed in 2.0.12 by commit 32af599c, "Fix $share
 *   subscriptions not being recovered for durable clients that reconnect");
 *   Debian 12's 2.0.11, the one these tests run, keeps it too (its package
 *   2.0.11-1.2+deb12u1 backported the fix of CVE-2021-34434, made in that
 *   same commit), so an upstream 2.0.11 built from source fails this test;
 *
 * on a bare broker and on one configured as README.md's worker-pool recipe
 * (the plugin with a policy, redelivery tracking, its state file). Each
 * test asserts what the running line does (broker_version()) and prints it,
 * so that a broker that changes its behaviour fails the test. The clients
 * speak MQTT through raw sockets (raw.h), so that nothing is sent but what
 * the test writes: no SUBSCRIBE on a reconnect unless the test sends it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "raw.h"

#define MEMBER "member"
#define PLAIN "plain"
#define EXPIRY_S 3600
#define SHARED_FILTER "$share/workers/jobs/#"
#define PLAIN_FILTER "jobs/#"
#define TOPIC "jobs/x"

/* Which configuration the broker runs. */
enum setup {
	SETUP_BARE,   /* persistence true, nothing else */
	SETUP_RECIPE, /* README.md's worker-pool broker configuration */
};

struct scene {
	struct broker *b;
	struct raw *member;      /* subscribed to SHARED_FILTER */
	struct raw *plain;       /* subscribed to PLAIN_FILTER */
	struct client *pub;
	enum setup setup;
};

static const char *setup_name(enum setup s)
{
	return s == SETUP_BARE ? "bare broker" : "worker-pool recipe";
}

static void scene_start(struct scene *s, const char *label, enum setup setup)
{
	memset(s, 0, sizeof(*s));
	s->setup = setup;
	s->b = broker_new(label);
	broker_conf(s->b, "persistence true");
	broker_conf(s->b, "persistence_location %s", broker_path(s->b, ""));
	if(setup == SETUP_RECIPE){
		broker_conf(s->b, "autosave_interval 10");
		broker_conf(s->b, "max_inflight_messages 1");
		broker_plugin(s->b);
		broker_conf(s->b, "plugin_opt_policy jobs/# max_attempts=3 dead_letter=dead/jobs");
		broker_conf(s->b, "plugin_opt_state_file %s", broker_path(s->b, "dlq.state"));
		broker_conf(s->b, "plugin_opt_state_save_on_change true");
		broker_conf(s->b, "plugin_opt_redelivery_tracking allow");
		if(!BROKER_IS_21()) broker_conf(s->b, "plugin_opt_v5_sessions_persist true");
	}
	broker_start(s->b);
	struct raw_options m = { .id = MEMBER, .protocol = MQTT_PROTOCOL_V5, .clean = false, .expiry_s = EXPIRY_S };
	struct raw_options p = { .id = PLAIN, .protocol = MQTT_PROTOCOL_V5, .clean = false, .expiry_s = EXPIRY_S };
	s->member = raw_new(s->b, &m);
	s->plain = raw_new(s->b, &p);
	raw_connect(s->member);
	raw_connect(s->plain);
	ck_assert_uint_eq(raw_subscribe(s->member, SHARED_FILTER, 1), 1);
	ck_assert_uint_eq(raw_subscribe(s->plain, PLAIN_FILTER, 1), 1);
	s->pub = client_new(s->b, "pub", MQTT_PROTOCOL_V5);
}

static void scene_free(struct scene *s)
{
	raw_free(s->member);
	raw_free(s->plain);
}

/* Whether r received payload on TOPIC by now: what the broker wrote to it
 * before it answered a PINGREQ sent after the publisher's PUBACK (the
 * broker routes a publish to every connected subscriber before it
 * acknowledges it, and writes to a connection in order), and whatever came
 * in a settling period after. Acknowledges what arrived. */
static bool received(struct raw *r, const char *payload)
{
	ck_assert_msg(raw_ping(r, HARNESS_WAIT_MS), "%s: no PINGRESP", raw_id(r));
	raw_drain(r, HARNESS_SETTLE_MS);
	const struct raw_msg *m;
	while(raw_next(r, 0, &m) == RAW_PUBLISH){
		if(m->qos > 0) raw_puback(r, m->mid);
	}
	size_t n = raw_count(r, TOPIC, payload);
	ck_assert_msg(n <= 1, "%s received \"%s\" %zu times", raw_id(r), payload, n);
	return n == 1;
}

/* Publishes payload on TOPIC at QoS 1 and waits for its PUBACK. */
static void publish(struct scene *s, const char *payload)
{
	ck_assert_uint_lt(client_publish_str(s->pub, TOPIC, payload, 1), 0x80);
}

/* The broker's "Restored N subscriptions" line since its last start, if
 * any (2.1 logs one; 2.0 logs no counts), into buf. */
static const char *restored_line(struct broker *b, char *buf, size_t size)
{
	char *log = broker_log_since_start(b);
	const char *p = strstr(log, "Restored ");
	for(; p; p = strstr(p + 1, "Restored ")){
		const char *end = strchr(p, '\n');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		if(n > 14 && !strncmp(p + n - 13, "subscriptions", 13)){
			snprintf(buf, size, "%.*s", (int)n, p);
			free(log);
			return buf;
		}
	}
	free(log);
	snprintf(buf, size, "(no \"Restored ... subscriptions\" line)");
	return buf;
}

/* The restart: see the comment at the top. */
static void restart_case(const char *label, enum setup setup)
{
	struct scene s;
	scene_start(&s, label, setup);
	publish(&s, "before");
	ck_assert_msg(received(s.member, "before"), "before the restart, the only member got nothing");
	ck_assert_msg(received(s.plain, "before"), "before the restart, the plain subscriber got nothing");
	/* One message the member holds unacknowledged when the broker stops:
	 * its session keeps it. */
	publish(&s, "in flight");
	const struct raw_msg *held = raw_expect(s.member);
	ck_assert_str_eq(held->payload, "in flight");
	ck_assert_msg(received(s.plain, "in flight"), "the plain subscriber did not get \"in flight\"");

	client_free(s.pub);
	broker_shutdown(s.b);
	broker_start(s.b);
	char line[128];
	restored_line(s.b, line, sizeof(line));
	bool member_present = raw_connect(s.member);
	bool plain_present = raw_connect(s.plain);
	s.pub = client_new(s.b, "pub", MQTT_PROTOCOL_V5);
	publish(&s, "after restart");
	bool plain_got = received(s.plain, "after restart");
	bool member_got = received(s.member, "after restart");
	/* received() acknowledged the resend. */
	bool member_resent = raw_count(s.member, TOPIC, "in flight") == 2;

	ck_assert_uint_eq(raw_subscribe(s.member, SHARED_FILTER, 1), 1);
	publish(&s, "after subscribing again");
	bool member_again = received(s.member, "after subscribing again");
	bool plain_again = received(s.plain, "after subscribing again");

	fprintf(stderr, "share-restore: mosquitto %d.%d.%d, %s, restart (SIGTERM): %s; sessions present: member %s, "
			"plain %s; the member's unacknowledged message %s; a message after the restart, nobody subscribing "
			"again: plain subscriber %s, $share member %s; the member subscribes again: the next message %s to it "
			"(plain: %s)\n",
			broker_version() / 1000000, broker_version() / 1000 % 1000, broker_version() % 1000, setup_name(setup),
			line, member_present ? "yes" : "no", plain_present ? "yes" : "no",
			member_resent ? "was sent again at its reconnect" : "did not come again",
			plain_got ? "received it" : "received nothing", member_got ? "received it" : "received nothing",
			member_again ? "came" : "did not come", plain_again ? "came" : "did not come");

	/* Every line: both sessions come back, the plain subscription with
	 * its session, the shared one not at all (never saved). */
	ck_assert_msg(member_present && plain_present, "the broker did not restore both sessions");
	ck_assert_msg(member_resent, "the member's session lost the message it held unacknowledged");
	ck_assert_msg(plain_got, "the plain persistent subscriber got nothing after the restart");
	ck_assert_msg(!member_got, "the $share member received a message after the restart without subscribing "
			"again: this broker restores shared subscriptions (docs/durable-state.md says it does not)");
	ck_assert_msg(member_again, "the member got nothing after subscribing again");
	ck_assert_msg(plain_again, "the plain subscriber got nothing after the member subscribed again");
	if(BROKER_IS_21()){
		/* 2.1 counts what it restored: the plain subscription only. */
		ck_assert_str_eq(line, "Restored 1 subscriptions");
	}
	scene_free(&s);
}

/* A reconnect without a restart: see the comment at the top. */
static void reconnect_case(const char *label, enum setup setup)
{
	struct scene s;
	scene_start(&s, label, setup);
	publish(&s, "before");
	ck_assert(received(s.member, "before"));
	ck_assert(received(s.plain, "before")); /* acknowledged: a window of 1 is free again */

	ck_assert(raw_disconnect(s.member));
	bool present = raw_connect(s.member);
	publish(&s, "after reconnect");
	bool member_got = received(s.member, "after reconnect");
	bool plain_got = received(s.plain, "after reconnect");

	ck_assert_uint_eq(raw_subscribe(s.member, SHARED_FILTER, 1), 1);
	publish(&s, "after subscribing again");
	bool member_again = received(s.member, "after subscribing again");
	/* Subscribing again to a filter the session still holds replaces
	 * that subscription: the member receives each message once (received()
	 * fails the test on a second copy). */

	fprintf(stderr, "share-restore: mosquitto %d.%d.%d, %s, reconnect without a restart: session present %s; "
			"a message after the reconnect, nobody subscribing again: $share member %s (plain subscriber %s); "
			"the member subscribes again: the next message %s to it\n",
			broker_version() / 1000000, broker_version() / 1000 % 1000, broker_version() % 1000, setup_name(setup),
			present ? "yes" : "no", member_got ? "received it" : "received nothing",
			plain_got ? "received it" : "received nothing", member_again ? "came" : "did not come");

	ck_assert_msg(present, "the broker did not resume the member's session");
	ck_assert_msg(plain_got, "the plain subscriber got nothing");
	ck_assert_msg(member_again, "the member got nothing after subscribing again");
	/* 2.0.12 and later, and Debian 12's 2.0.11 (see the top). */
	ck_assert_msg(member_got, "the $share member lost its subscription at a reconnect without a restart "
			"(an upstream 2.0.11 without Debian's backport of 32af599c does; docs/durable-state.md)");
	scene_free(&s);
}

START_TEST(test_restart_bare)
{
	restart_case(__func__, SETUP_BARE);
}
END_TEST

START_TEST(test_restart_recipe)
{
	restart_case(__func__, SETUP_RECIPE);
}
END_TEST

START_TEST(test_reconnect_bare)
{
	reconnect_case(__func__, SETUP_BARE);
}
END_TEST

START_TEST(test_reconnect_recipe)
{
	reconnect_case(__func__, SETUP_RECIPE);
}
END_TEST

static Suite *share_restore_suite(void)
{
	Suite *s = suite_create("share_restore");
	TCase *tc = harness_tcase("share_restore");
	tcase_add_test(tc, test_restart_bare);
	tcase_add_test(tc, test_restart_recipe);
	tcase_add_test(tc, test_reconnect_bare);
	tcase_add_test(tc, test_reconnect_recipe);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return harness_run(share_restore_suite());
}
