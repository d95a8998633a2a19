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
 * on a bare broker and on one configured as docs/worker-pool.md's recipe
 * for the line (the plugin with a policy, redelivery tracking, its state
 * file; workers with Receive Maximum 1). And the recipe's retries to any
 * member: a policy with retry_to=jobs/retry, which the group's filter takes
 * in, sends each retry copy to one member of the group, and the third NACK
 * makes the dead letter. Each
 * test asserts what the running line does (broker_version()) and prints it,
 * so that a broker that changes its behaviour fails the test. The clients
 * speak MQTT through raw sockets (raw.h), so that nothing is sent but what
 * the test writes: no SUBSCRIBE on a reconnect unless the test sends it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
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
	SETUP_RECIPE, /* docs/worker-pool.md's broker configuration */
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

/* docs/worker-pool.md's configuration for the line the tests run
 * ("A worker pool on a shared subscription"), with policy as its policy
 * line, the broker's and the plugin's files in b's directory. */
static void recipe_conf(struct broker *b, const char *policy)
{
	broker_conf(b, "persistence true");
	broker_conf(b, "persistence_location %s", broker_path(b, ""));
	broker_conf(b, "autosave_interval 10");
	if(broker_version() < 2000013) broker_conf(b, "max_inflight_messages 1"); /* 2.0.13 fixed Receive Maximum */
	broker_plugin(b);
	broker_conf(b, "plugin_opt_%s", policy);
	broker_conf(b, "plugin_opt_state_file %s", broker_path(b, "dlq.state"));
	broker_conf(b, "plugin_opt_state_save_on_change true");
	broker_conf(b, "plugin_opt_redelivery_tracking allow");
	if(!BROKER_IS_21()) broker_conf(b, "plugin_opt_v5_sessions_persist true");
}

/* A worker as the recipe sets it up: MQTT v5, a fixed id, clean start
 * false, session expiry 3600 s, Receive Maximum 1. */
static struct raw *worker_new(struct broker *b, const char *id)
{
	struct raw_options o = { .id = id, .protocol = MQTT_PROTOCOL_V5, .clean = false, .expiry_s = EXPIRY_S,
			.receive_max = 1 };
	return raw_new(b, &o);
}

static void scene_start(struct scene *s, const char *label, enum setup setup)
{
	memset(s, 0, sizeof(*s));
	s->setup = setup;
	s->b = broker_new(label);
	if(setup == SETUP_RECIPE){
		recipe_conf(s->b, "policy jobs/# max_attempts=3 dead_letter=dead/jobs");
	}else{
		broker_conf(s->b, "persistence true");
		broker_conf(s->b, "persistence_location %s", broker_path(s->b, ""));
	}
	broker_start(s->b);
	struct raw_options m = { .id = MEMBER, .protocol = MQTT_PROTOCOL_V5, .clean = false, .expiry_s = EXPIRY_S,
			.receive_max = setup == SETUP_RECIPE ? 1 : 0 };
	struct raw_options p = { .id = PLAIN, .protocol = MQTT_PROTOCOL_V5, .clean = false, .expiry_s = EXPIRY_S,
			.receive_max = setup == SETUP_RECIPE ? 1 : 0 };
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

/* The next message on topic to any of the n workers, within
 * HARNESS_WAIT_MS; *who is the worker it came to. Every message handed
 * out on the way is acknowledged (a worker with Receive Maximum 1 gets
 * nothing more until it does). */
static const struct raw_msg *next_to_any(struct raw **w, size_t n, const char *topic, struct raw **who)
{
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	const struct raw_msg *found = NULL;
	while(found == NULL && it_now_ms() < deadline){
		for(size_t i = 0; i < n; i++){
			const struct raw_msg *m;
			while(raw_next(w[i], 20, &m) == RAW_PUBLISH){
				if(m->qos > 0) raw_puback(w[i], m->mid);
				if(found == NULL && !strcmp(m->topic, topic)){
					found = m;
					*who = w[i];
				}
			}
		}
	}
	ck_assert_msg(found != NULL, "no message on %s came to any worker", topic);
	return found;
}

/* The recipe's retries to any member: with retry_to=jobs/retry, each retry
 * copy is an ordinary publish to jobs/retry, which the group's
 * $share/workers/jobs/# takes in: the broker gives it to one member, and
 * the third NACK, by whichever member gets the copy, makes the dead
 * letter (retry-count 3, origin-topic jobs/x). Nothing else arrives. */
START_TEST(test_retries_to_any_member)
{
	struct broker *b = broker_new(__func__);
	recipe_conf(b, "policy jobs/# max_attempts=3 dead_letter=dead/jobs retry_to=jobs/retry");
	broker_start(b);
	struct raw *w[2] = { worker_new(b, "worker-1"), worker_new(b, "worker-2") };
	for(size_t i = 0; i < 2; i++){
		raw_connect(w[i]);
		ck_assert_uint_eq(raw_subscribe(w[i], SHARED_FILTER, 1), 1);
	}
	struct client *watcher = client_subscribed(b, "watcher", "dead/#");
	ck_assert_uint_lt(client_publish_str(watcher, TOPIC, "job", 1), 0x80);

	struct raw *who;
	const struct raw_msg *m = next_to_any(w, 2, TOPIC, &who);
	char origin[DLQ_ID_LEN + 1];
	ck_assert_ptr_nonnull(raw_user(m, DLQ_PROP_ID));
	snprintf(origin, sizeof(origin), "%s", raw_user(m, DLQ_PROP_ID));
	fprintf(stderr, "share-restore: mosquitto %d.%d.%d, retries to any member: the job went to %s",
			broker_version() / 1000000, broker_version() / 1000 % 1000, broker_version() % 1000, raw_id(who));
	const char *id = origin;
	for(unsigned attempt = 1; attempt < 3; attempt++){
		ck_assert_uint_lt(raw_publish(who, DLQ_NACK_TOPIC, id, strlen(id), 1), 0x80);
		m = next_to_any(w, 2, "jobs/retry", &who);
		fprintf(stderr, ", copy %u to %s", attempt, raw_id(who));
		ck_assert_str_eq(m->payload, "job");
		char want[8];
		snprintf(want, sizeof(want), "%u", attempt);
		ck_assert_pstr_eq(raw_user(m, DLQ_PROP_RETRY_COUNT), want);
		ck_assert_pstr_eq(raw_user(m, DLQ_PROP_ORIGIN_TOPIC), TOPIC);
		ck_assert_pstr_eq(raw_user(m, DLQ_PROP_ORIGIN_ID), origin);
		id = raw_user(m, DLQ_PROP_ID);
		ck_assert_ptr_nonnull(id);
	}
	fprintf(stderr, "\n");
	char last[64];
	snprintf(last, sizeof(last), "%s", raw_id(who));
	ck_assert_uint_lt(raw_publish(who, DLQ_NACK_TOPIC, id, strlen(id), 1), 0x80);
	const struct it_msg *dl = client_expect(watcher, "dead/jobs", 1);
	expect_dead_letter(dl, TOPIC, origin, 3, last, "jobs/#", NULL);

	clients_settle(watcher);
	for(size_t i = 0; i < 2; i++){
		ck_assert(raw_ping(w[i], HARNESS_WAIT_MS));
		raw_drain(w[i], HARNESS_SETTLE_MS);
	}
	ck_assert_uint_eq(raw_count(w[0], TOPIC, NULL) + raw_count(w[1], TOPIC, NULL), 1);
	ck_assert_uint_eq(raw_count(w[0], "jobs/retry", NULL) + raw_count(w[1], "jobs/retry", NULL), 2);
	ck_assert_uint_eq(raw_count(w[0], NULL, NULL) + raw_count(w[1], NULL, NULL), 3);
	client_expect_exactly(watcher, NULL, 1);
	raw_free(w[0]);
	raw_free(w[1]);
}
END_TEST

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

int main(void)
{
	return harness_run(check_suite("share_restore", harness_tcase("share_restore"), CHECK_TESTS(test_restart_bare,
			test_restart_recipe, test_reconnect_bare, test_reconnect_recipe, test_retries_to_any_member)));
}
