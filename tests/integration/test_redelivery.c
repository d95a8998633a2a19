/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Redelivery tracking (issue 5, plugin_opt_redelivery_tracking), the
 * counting: a policy's max_attempts also counts the deliveries the broker
 * repeats because a subscriber with a persistent session came back without
 * having sent PUBACK. The subscriber that "dies before PUBACK" is a raw
 * client (raw.h): it reads a message and closes its socket without
 * acknowledging it, then reconnects to the same session, as a consumer that
 * crashes on a poison message does. With max_attempts=3 it must see the
 * message three times; the fourth delivery becomes a dead letter (reason
 * "... without acknowledgement ...") and the messages behind it flow again.
 * Also: v3.1.1 and v5, the broker's default window, another subscriber of
 * the same message, a connection gone before the plugin's kick, messages
 * queued offline, a NACK and redeliveries in one chain, a $share group, and
 * the option off. test_redelivery_access.c has the modes' access control.
 *
 * The plugin can count only the message in flight at each reconnect, so the
 * exact tests run the broker with max_inflight_messages 1. Mosquitto 2.0.x
 * leaks an in-flight slot when the plugin removes a message at reconnect;
 * the plugin then closes the connection once ("recounts its in-flight
 * window") and the subscriber reconnects. The crash loop
 * (redelivery_common.h) treats a close by the broker, and a silence, as
 * reasons to reconnect.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "check_suite.h"
#include "harness.h"
#include "proc.h"
#include "raw.h"
#include "redelivery_common.h"

#define RECOUNT_LOG "recounts its in-flight window"

#define expect_log(b, needle) expect_log_at(__FILE__, __LINE__, (b), (needle))
static void expect_log_at(const char *file, int line, struct broker *b, const char *needle)
{
	if(broker_log_lines(b, needle) == 0){
		fail_here(file, line, "the broker log has no line containing \"%s\"", needle);
	}
}

/* ---- one crashing subscriber ---- */

/* "worker" (w) dies on "poison" until it is a dead letter (original id),
 * then acknowledges "next"; it received "poison" MAX_ATTEMPTS times, and
 * one dead letter came. *cl says what the crash loop saw. */
static void poison_to_dead_letter(struct scene *s, struct raw *w, const char *id, int protocol, struct crash_loop *cl)
{
	*cl = (struct crash_loop){ .r = w, .crash_on = "poison", .stop_after = "next",
		.dlq_id = protocol == MQTT_PROTOCOL_V5 ? id : NULL };
	crash_loop(cl);
	expect_tracking_dead_letter(client_expect(s->watch, DEAD, 1), "poison", id, "worker");
	expect_dead_letters(s, 1);
	raw_drain(w, HARNESS_SETTLE_MS);
	expect_received(w, "poison", MAX_ATTEMPTS);
}

/* "poison" then "next"; the subscriber dies on "poison" every time. */
static void crash_on_poison(const char *label, int protocol, bool window1)
{
	struct scene s;
	scene_start(&s, tracking_broker(label, "allow", window1));
	struct raw *w = persistent(s.b, "worker", protocol, NULL);
	join(w, FILTER);
	client_publish_str(s.pub, TOPIC, "poison", 1);
	client_publish_str(s.pub, TOPIC, "next", 1);
	const char *id = original_id(&s, "poison", 0);

	struct crash_loop cl;
	poison_to_dead_letter(&s, w, id, protocol, &cl);
	if(window1){
		/* Exact: the diverted slot is recovered by one close, no silence.
		 * 2.1.2 keeps the slot too (src/database.c,
		 * db__client_messages_check_acl): without that one kick "next"
		 * does not come on that connection. */
		expect_received(w, "next", 1);
		ck_assert_msg(cl.closed_by_broker == 1 && cl.timeouts == 0,
				"expected one close by the broker and no timeout, got %u and %u",
				cl.closed_by_broker, cl.timeouts);
		expect_log(s.b, RECOUNT_LOG);
		ck_assert_uint_eq(broker_log_lines(s.b, RECOUNT_LOG), 1);
	}else{
		ck_assert_uint_ge(raw_count(w, TOPIC, "next"), 1);
	}
	raw_free(w);
}

START_TEST(test_window1_v311)
{
	crash_on_poison(__func__, MQTT_PROTOCOL_V311, true);
}
END_TEST

START_TEST(test_window1_v5)
{
	crash_on_poison(__func__, MQTT_PROTOCOL_V5, true);
}
END_TEST

/* The broker's default window (20): "next" is in flight beside "poison" and
 * comes back with it, but is never counted past what was delivered. On 2.1
 * every send is counted (sends.c): "next" was written to the subscriber with
 * "poison" each time, unread behind it, so both reach max_attempts at once
 * and both are dead-lettered at the fourth connection. */
START_TEST(test_default_window_v311)
{
	if(!BROKER_IS_21()){
		crash_on_poison(__func__, MQTT_PROTOCOL_V311, false);
		return;
	}
	struct scene s;
	scene_start(&s, tracking_broker(__func__, "allow", false));
	struct raw *w = persistent(s.b, "worker", MQTT_PROTOCOL_V311, NULL);
	join(w, FILTER);
	client_publish_str(s.pub, TOPIC, "poison", 1);
	client_publish_str(s.pub, TOPIC, "next", 1);
	const char *id = original_id(&s, "poison", 0);
	const char *next_id = original_id(&s, "next", 0);
	struct crash_loop cl = { .r = w, .crash_on = "poison", .max_crashes = MAX_ATTEMPTS };
	crash_loop(&cl);
	ck_assert_msg(raw_connect(w), "the worker found no session");
	client_expect(s.watch, DEAD, 2);
	expect_tracking_dead_letter(client_find_payload(s.watch, DEAD, "poison", 0), "poison", id, "worker");
	expect_tracking_dead_letter(client_find_payload(s.watch, DEAD, "next", 0), "next", next_id, "worker");
	expect_dead_letters(&s, 2);
	raw_drain(w, HARNESS_SETTLE_MS);
	expect_received(w, "poison", MAX_ATTEMPTS);
	expect_received(w, "next", 0);
	raw_free(w);
}
END_TEST

/* ---- another subscriber of the same message ---- */

/* The broker writes a message to its subscribers in the order they
 * subscribed: on 2.1 the first one's sends are kept in the record, the
 * other's in a delivery of its own; the worker is diverted either way. */
static void other_subscriber(const char *name, bool worker_first)
{
	struct scene s;
	scene_start(&s, tracking_broker(name, "allow", true));
	struct raw *w = persistent(s.b, "worker", MQTT_PROTOCOL_V311, NULL);
	struct raw *good = persistent(s.b, "good", MQTT_PROTOCOL_V311, NULL);
	join(worker_first ? w : good, FILTER);
	join(worker_first ? good : w, FILTER);
	client_publish_str(s.pub, TOPIC, "poison", 1);
	client_publish_str(s.pub, TOPIC, "next", 1);
	const char *id = original_id(&s, "poison", 0);
	for(int i = 0; i < 2; i++){
		const struct raw_msg *m = raw_expect(good);
		ck_assert_str_eq(m->payload, i == 0 ? "poison" : "next");
		ck_assert(raw_puback(good, m->mid));
	}

	struct crash_loop cl = { .r = w, .crash_on = "poison", .stop_after = "next" };
	crash_loop(&cl);
	expect_tracking_dead_letter(client_expect(s.watch, DEAD, 1), "poison", id, "worker");

	/* "good" comes back too: its session holds nothing. */
	ck_assert(raw_disconnect(good));
	ck_assert_msg(raw_connect(good), "\"good\" found no session");
	expect_dead_letters(&s, 1);
	raw_drain(good, HARNESS_SETTLE_MS);
	raw_drain(w, 0);
	expect_received(good, "poison", 1);
	expect_received(good, "next", 1);
	expect_received(w, "poison", MAX_ATTEMPTS);
	expect_received(w, "next", 1);
	raw_free(w);
	raw_free(good);
}

START_TEST(test_other_subscriber_unaffected)
{
	other_subscriber(__func__, true);
}
END_TEST

START_TEST(test_other_subscriber_first)
{
	other_subscriber(__func__, false);
}
END_TEST

/* ---- gone before the kick ---- */

/* The reconnection that diverts "poison" ends before the broker's next tick:
 * the subscriber sent CONNECT and closed its socket at once (the broker,
 * stopped meanwhile, finds the CONNECT and then a closed socket when it
 * answers). The plugin must not kick the session left behind: Mosquitto
 * 2.0.11 would "disconnect" the offline session again, put it on its
 * session expiry list a second time, and later free it with an entry still
 * there (the soak found this as a crash at shutdown; valgrind shows the
 * use-after-free). The subscriber then comes back and gets "next". */
START_TEST(test_gone_before_the_kick)
{
	struct scene s;
	scene_start(&s, tracking_broker(__func__, "allow", true));
	struct raw *w = persistent(s.b, "worker", MQTT_PROTOCOL_V5, NULL);
	join(w, FILTER);
	client_publish_str(s.pub, TOPIC, "poison", 1);
	client_publish_str(s.pub, TOPIC, "next", 1);
	const char *id = original_id(&s, "poison", 0);
	struct crash_loop cl = { .r = w, .crash_on = "poison", .max_crashes = MAX_ATTEMPTS, .dlq_id = id };
	crash_loop(&cl);

	it_signal_broker(s.b, SIGSTOP);
	raw_open(w);
	bool sent = raw_send_connect(w);
	raw_close(w);
	it_signal_broker(s.b, SIGCONT);
	ck_assert(sent);
	expect_tracking_dead_letter(client_expect(s.watch, DEAD, 1), "poison", id, "worker");
	expect_dead_letters(&s, 1);

	/* It comes back (taking over the session left behind), gets "next",
	 * and leaves again: with the session listed twice for expiry, the
	 * takeover frees it while one entry still points to it. */
	ck_assert_msg(raw_connect(w), "the worker found no session");
	const struct raw_msg *m = raw_expect(w);
	ck_assert_str_eq(m->payload, "next");
	ck_assert(raw_puback(w, m->mid));
	ck_assert(raw_disconnect(w));
	ck_assert_msg(raw_connect(w), "the worker found no session");
	ck_assert(raw_disconnect(w));
	expect_dead_letters(&s, 1);
	expect_received(w, "poison", MAX_ATTEMPTS);
	expect_received(w, "next", 1);
	char *log = broker_log(s.b);
	size_t kicks = lines_with(log, RECOUNT_LOG);
	free(log);
	ck_assert_msg(kicks == 0, "the plugin disconnected a client whose connection had already ended");
	raw_free(w);
}
END_TEST

/* ---- queued, never sent, never counted ---- */

/* m1..m3 wait in the session of an offline subscriber (window 1); it then
 * crashes on m1 only. Every reconnect checks all three, but m2 and m3 were
 * never delivered: they must arrive, once each, after m1 is diverted. */
START_TEST(test_queued_messages_not_counted)
{
	struct scene s;
	scene_start(&s, tracking_broker(__func__, "allow", true));
	struct raw *w = persistent(s.b, "worker", MQTT_PROTOCOL_V311, NULL);
	join(w, FILTER);
	ck_assert(raw_disconnect(w));
	client_publish_str(s.pub, TOPIC, "m1", 1);
	client_publish_str(s.pub, TOPIC, "m2", 1);
	client_publish_str(s.pub, TOPIC, "m3", 1);
	const char *id = original_id(&s, "m1", 0);

	struct crash_loop cl = { .r = w, .crash_on = "m1", .stop_after = "m3" };
	crash_loop(&cl);
	expect_tracking_dead_letter(client_expect(s.watch, DEAD, 1), "m1", id, "worker");
	expect_dead_letters(&s, 1);
	raw_drain(w, HARNESS_SETTLE_MS);
	expect_received(w, "m1", MAX_ATTEMPTS);
	expect_received(w, "m2", 1);
	expect_received(w, "m3", 1);
	raw_free(w);
}
END_TEST

/* ---- a NACK and redeliveries in one chain ---- */

/* Attempt 1: the original, NACKed (then acknowledged). Attempt 2: the retry
 * copy, to the same client on the same topic; it dies on it. Attempt 3: the
 * copy again, after a reconnect; it dies again. Attempt 4 would exceed
 * max_attempts: the copy is dead-lettered with retry-count 3. */
START_TEST(test_nack_then_redeliveries)
{
	struct scene s;
	struct broker *b = tracking_broker(__func__, "allow", true);
	/* The worker's v5 session persists: said so, its copy is the session's
	 * (otherwise the plugin holds it and dead-letters it at the first
	 * crash, docs/semantics.md, "A retry copy whose subscriber has gone"). */
	broker_conf(b, "plugin_opt_v5_sessions_persist true");
	scene_start(&s, b);
	struct raw *w = persistent(s.b, "worker", MQTT_PROTOCOL_V5, NULL);
	join(w, FILTER);
	client_publish_str(s.pub, TOPIC, "poison", 1);
	const char *id = original_id(&s, "poison", 0);

	const struct raw_msg *m = raw_expect(w);
	ck_assert_str_eq(m->payload, "poison");
	ck_assert_pstr_eq(raw_user(m, DLQ_PROP_ID), id);
	ck_assert_ptr_null(raw_user(m, DLQ_PROP_RETRY_COUNT));
	unsigned reason = raw_publish(w, DLQ_NACK_TOPIC, id, strlen(id), 1);
	ck_assert_msg(reason < 0x80, "the broker refused the NACK (0x%02x)", reason);
	ck_assert(raw_puback(w, m->mid));

	m = raw_expect(w);
	ck_assert_str_eq(m->topic, TOPIC);
	ck_assert_str_eq(m->payload, "poison");
	ck_assert_pstr_eq(raw_user(m, DLQ_PROP_RETRY_COUNT), "1");
	ck_assert_pstr_eq(raw_user(m, DLQ_PROP_ORIGIN_ID), id);
	const char *copy_id = raw_user(m, DLQ_PROP_ID);
	ck_assert_msg(it_is_dlq_id(copy_id) && strcmp(copy_id, id), "the retry copy has no fresh dlq-id");
	raw_close(w); /* dies on the copy: attempt 2 */

	struct crash_loop cl = { .r = w, .crash_on = "poison", .max_crashes = 1, .dlq_id = copy_id };
	crash_loop(&cl); /* attempt 3 */
	/* Attempt 4 is diverted when the session comes back. */
	ck_assert_msg(raw_connect(w), "no session present");
	expect_tracking_dead_letter(client_expect(s.watch, DEAD, 1), "poison", id, "worker");

	/* The session goes on: a later message arrives (after the broker's one
	 * close, if it comes). */
	client_publish_str(s.pub, TOPIC, "next", 1);
	struct crash_loop rest = { .r = w, .crash_on = "poison", .stop_after = "next" };
	crash_loop(&rest);
	expect_dead_letters(&s, 1);
	raw_drain(w, HARNESS_SETTLE_MS);
	expect_received(w, "poison", MAX_ATTEMPTS);
	expect_received(w, "next", 1);
	raw_free(w);
}
END_TEST

/* ---- a $share group ---- */

/* Two members of $share/g/jobs/#; "poison" goes to one of them, which dies
 * on it. Its three deliveries all go to that member's session; the fourth is
 * diverted: the group's message is then in dead/jobs, not lost. */
START_TEST(test_shared_subscription)
{
	struct scene s;
	scene_start(&s, tracking_broker(__func__, "allow", true));
	struct raw *a = persistent(s.b, "member-a", MQTT_PROTOCOL_V311, NULL);
	struct raw *b = persistent(s.b, "member-b", MQTT_PROTOCOL_V311, NULL);
	join(a, "$share/g/" FILTER);
	join(b, "$share/g/" FILTER);
	client_publish_str(s.pub, TOPIC, "poison", 1);
	const char *id = original_id(&s, "poison", 0);

	/* Who got it? */
	struct raw *victim = NULL, *other = NULL;
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	while(!victim && it_now_ms() < deadline){
		const struct raw_msg *m = NULL;
		if(raw_next(a, 50, &m) == RAW_PUBLISH){
			victim = a;
			other = b;
		}else if(raw_next(b, 50, &m) == RAW_PUBLISH){
			victim = b;
			other = a;
		}
		ck_assert_msg(!m || !strcmp(m->payload, "poison"), "unexpected \"%s\"", m->payload);
	}
	ck_assert_msg(victim != NULL, "no member of $share/g received \"poison\"");
	raw_close(victim); /* attempt 1 */

	struct crash_loop cl = { .r = victim, .crash_on = "poison", .max_crashes = MAX_ATTEMPTS - 1 };
	crash_loop(&cl); /* attempts 2 and 3 */
	ck_assert_msg(raw_connect(victim), "no session present");
	expect_tracking_dead_letter(client_expect(s.watch, DEAD, 1), "poison", id, raw_id(victim));
	expect_dead_letters(&s, 1);

	/* Nothing more for anyone; the other member acknowledges whatever it
	 * got. */
	const struct raw_msg *m = NULL;
	enum raw_event e;
	for(int closes = 0; (e = raw_next(victim, HARNESS_SETTLE_MS, &m)) != RAW_TIMEOUT;){
		if(e == RAW_CLOSED){
			ck_assert_msg(++closes == 1, "the broker closed %s's connection again", raw_id(victim));
			raw_connect(victim); /* the broker's one close */
		}else{
			raw_puback(victim, m->mid);
		}
	}
	while(raw_next(other, 0, &m) == RAW_PUBLISH){
		raw_puback(other, m->mid);
	}
	expect_received(victim, "poison", MAX_ATTEMPTS);
	expect_received(other, "poison", 0);
	raw_free(a);
	raw_free(b);
}
END_TEST

/* ---- off ---- */

/* Without tracking, the broker redelivers forever: a subscriber that dies
 * on "poison" sees it again at every reconnect, "next" stays behind it
 * (window 1), and nothing is dead-lettered. This is what the tests above
 * would see without the feature. */
static void crash_without_tracking(const char *label, const char *mode, int protocol)
{
	struct scene s;
	scene_start(&s, tracking_broker(label, mode, true));
	struct raw *w = persistent(s.b, "worker", protocol, NULL);
	join(w, FILTER);
	client_publish_str(s.pub, TOPIC, "poison", 1);
	client_publish_str(s.pub, TOPIC, "next", 1);
	struct crash_loop cl = { .r = w, .crash_on = "poison", .max_crashes = 5 };
	crash_loop(&cl);
	ck_assert_uint_eq(cl.closed_by_broker, 0);
	ck_assert_uint_eq(cl.timeouts, 0);
	expect_dead_letters(&s, 0);
	expect_received(w, "poison", 5);
	expect_received(w, "next", 0);
	raw_free(w);
}

START_TEST(test_off_by_default)
{
	crash_without_tracking(__func__, NULL, MQTT_PROTOCOL_V311);
}
END_TEST

START_TEST(test_off_v5)
{
	crash_without_tracking(__func__, "off", MQTT_PROTOCOL_V5);
}
END_TEST

/* ---- a restart while the poison message is in flight ---- */

/* Waits until the broker has saved its database after now (autosave). */
static void wait_broker_save(struct broker *b, const char *db)
{
	struct timespec t0;
	clock_gettime(CLOCK_REALTIME, &t0);
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	for(;;){
		struct stat st;
		if(stat(db, &st) == 0 && (st.st_mtim.tv_sec > t0.tv_sec
				|| (st.st_mtim.tv_sec == t0.tv_sec && st.st_mtim.tv_nsec > t0.tv_nsec))){
			return;
		}
		ck_assert_msg(it_now_ms() < deadline, "the broker did not save %s (autosave_interval 1)", db);
		it_sleep_ms(50);
	}
	(void)b;
}

/* The subscriber has received "poison" once (attempt 1) and still holds it,
 * connected, when the broker stops: SIGTERM, or SIGKILL with
 * plugin_opt_state_save_on_change once the broker's autosave has saved the
 * session. After the restart the broker resends it right after CONNACK,
 * before the subscriber does anything else: attempt 2; one crash later
 * attempt 3; at the next reconnection it is a dead letter. 3 deliveries in
 * all, retry-count 3 (before the counts were saved: 5 on 2.0.11, 4 on
 * 2.1.2, the count started again after the restart). On 2.1 a v5
 * subscriber's deliveries carry delivery-count none (1), 2, 3. */
static void restart_in_flight(const char *label, int protocol, bool kill)
{
	struct broker *b = tracking_broker(label, "allow", true);
	broker_conf(b, "persistence true");
	broker_conf(b, "persistence_location %s", broker_path(b, ""));
	broker_conf(b, "autosave_interval 1");
	broker_conf(b, "plugin_opt_state_file %s", broker_path(b, "dlq.state"));
	if(kill) broker_conf(b, "plugin_opt_state_save_on_change true");
	if(!BROKER_IS_21() && protocol == MQTT_PROTOCOL_V5) broker_conf(b, "plugin_opt_v5_sessions_persist true");
	struct scene s;
	scene_start(&s, b);
	struct raw *w = persistent(b, "worker", protocol, NULL);
	join(w, FILTER);
	client_publish_str(s.pub, TOPIC, "poison", 1);
	client_publish_str(s.pub, TOPIC, "next", 1);
	char id[64];
	snprintf(id, sizeof(id), "%s", original_id(&s, "poison", 0));
	const struct raw_msg *m = raw_expect(w);
	ck_assert_str_eq(m->payload, "poison");
	client_free(s.watch);
	client_free(s.pub);
	if(kill){
		wait_broker_save(b, broker_path(b, "mosquitto.db"));
		broker_kill(b);
	}else{
		broker_shutdown(b);
	}
	raw_close(w);
	broker_start(b);
	s.watch = client_new(b, "watch", MQTT_PROTOCOL_V5);
	s.pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	client_subscribe(s.watch, "dead/#", 1);

	struct crash_loop cl;
	poison_to_dead_letter(&s, w, id, protocol, &cl);
	ck_assert_uint_ge(raw_count(w, TOPIC, "next"), 1);
	if(BROKER_IS_21() && protocol == MQTT_PROTOCOL_V5){
		/* delivery-count goes on across the restart: none on the first
		 * delivery (absent means 1), then 2, 3. */
		unsigned n = 0;
		for(size_t i = 0; (m = raw_received(w, i)) != NULL; i++){
			if(strcmp(m->topic, TOPIC) || strcmp(m->payload, "poison")) continue;
			char want[8];
			snprintf(want, sizeof(want), "%u", ++n);
			const char *dc = raw_user(m, "delivery-count");
			ck_assert_msg(n == 1 ? dc == NULL : dc && !strcmp(dc, want), "delivery %u of \"poison\" carries "
					"delivery-count %s", n, dc ? dc : "(none)");
		}
	}
	raw_free(w);
}

START_TEST(test_restart_in_flight_v311_sigterm)
{
	restart_in_flight(__func__, MQTT_PROTOCOL_V311, false);
}
END_TEST

START_TEST(test_restart_in_flight_v5_sigterm)
{
	restart_in_flight(__func__, MQTT_PROTOCOL_V5, false);
}
END_TEST

START_TEST(test_restart_in_flight_v5_sigkill)
{
	restart_in_flight(__func__, MQTT_PROTOCOL_V5, true);
}
END_TEST

int main(void)
{
	return harness_run(check_suite("redelivery", check_timeout(harness_tcase("redelivery"), TEST_TIMEOUT),
			CHECK_TESTS(test_window1_v311, test_window1_v5, test_default_window_v311, test_other_subscriber_unaffected,
			test_other_subscriber_first, test_gone_before_the_kick, test_queued_messages_not_counted,
			test_nack_then_redeliveries, test_shared_subscription, test_off_by_default, test_off_v5,
			test_restart_in_flight_v311_sigterm, test_restart_in_flight_v5_sigterm,
			test_restart_in_flight_v5_sigkill)));
}
