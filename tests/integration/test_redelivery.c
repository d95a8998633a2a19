/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Redelivery tracking (issue 5, plugin_opt_redelivery_tracking): a policy's
 * max_attempts also counts the deliveries the broker repeats because a
 * subscriber with a persistent session came back without having sent
 * PUBACK. The subscriber that "dies before PUBACK" is a raw client (raw.h):
 * it reads a message and closes its socket without acknowledging it, then
 * reconnects to the same session, as a consumer that crashes on a poison
 * message does. With max_attempts=3 it must see the message three times;
 * the fourth delivery becomes a dead letter (reason "... without
 * acknowledgement ...") and the messages behind it flow again.
 *
 * The plugin can count only the message in flight at each reconnect, so the
 * exact tests run the broker with max_inflight_messages 1. Mosquitto 2.0.x
 * leaks an in-flight slot when the plugin removes a message at reconnect;
 * the plugin then closes the connection once ("recounts its in-flight
 * window") and the subscriber reconnects. The crash loop below treats a
 * close by the broker, and a silence, as reasons to reconnect.
 *
 * Observers are libmosquitto clients with clean sessions (never counted):
 * "watch" reads dead/# and jobs/# (for the dlq-id a v3.1.1 subscriber does
 * not see), "pub" publishes.
 */
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proc.h"
#include "raw.h"

#define POLICY "plugin_opt_policy jobs/# max_attempts=3 dead_letter=dead/jobs"
#define FILTER "jobs/#"
#define TOPIC "jobs/x"
#define DEAD "dead/jobs"
#define MAX_ATTEMPTS 3
#define REASON_PART "without acknowledgement"
#define RECOUNT_LOG "recounts its in-flight window"
#define OPTION "redelivery_tracking"
/* How long the crash loop waits for a delivery before it reconnects. */
#define READ_TIMEOUT_MS 2000
/* More connections than any test needs: a loop that needs them is broken. */
#define MAX_CONNECTS 10
/* These tests reconnect often and start several brokers. */
#define TEST_TIMEOUT 90

#define fail_here(file, line, ...) _ck_assert_failed((file), (line), "redelivery", __VA_ARGS__)

/* ---- brokers and observers ---- */

struct scene {
	struct broker *b;
	struct client *watch;       /* dead/# and jobs/# */
	struct client *pub;
};

/* A broker with the jobs/# policy, redelivery tracking in mode (NULL: no
 * option line) and, with window1, max_inflight_messages 1. Not started. */
static struct broker *tracking_broker(const char *label, const char *mode, bool window1)
{
	struct broker *b = broker_new(label);
	broker_plugin(b);
	broker_conf(b, POLICY);
	if(mode){
		broker_conf(b, "plugin_opt_" OPTION " %s", mode);
	}
	if(window1){
		broker_conf(b, "max_inflight_messages 1");
	}
	return b;
}

/* Starts b and connects the observers. */
#define scene_start(s, b) scene_start_at(__FILE__, __LINE__, (s), (b))
static void scene_start_at(const char *file, int line, struct scene *s, struct broker *b)
{
	s->b = b;
	broker_start_at(file, line, b);
	s->watch = client_new(b, "watch", MQTT_PROTOCOL_V5);
	s->pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	client_subscribe(s->watch, "dead/#", 1);
	client_subscribe(s->watch, FILTER, 1);
}

/* The dlq-id of the k-th (0-based) original with this payload that the
 * watcher received. */
static const char *original_id(struct scene *s, const char *payload, size_t k)
{
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	const struct it_msg *m;
	while(!(m = client_find_payload(s->watch, FILTER, payload, k)) && it_now_ms() < deadline){
		client_wait(s->watch, FILTER, client_count(s->watch, FILTER) + 1, 50);
	}
	ck_assert_msg(m != NULL, "the watcher did not receive \"%s\" on " FILTER, payload);
	return expect_original(m);
}

/* A raw client with a persistent session: clean_session=false, or
 * clean_start=false with a session expiry of an hour. */
static struct raw *persistent(struct broker *b, const char *id, int protocol, const char *username)
{
	struct raw_options o = { .id = id, .protocol = protocol, .clean = false,
		.expiry_s = protocol == MQTT_PROTOCOL_V5 ? 3600 : 0, .username = username };
	return raw_new(b, &o);
}

/* Connects r and subscribes it at QoS 1. */
#define join(r, filter) join_at(__FILE__, __LINE__, (r), (filter))
static void join_at(const char *file, int line, struct raw *r, const char *filter)
{
	raw_connect_at(file, line, r);
	unsigned granted = raw_subscribe_at(file, line, r, filter, 1);
	if(granted != 1){
		fail_here(file, line, "raw client %s: subscription to %s granted 0x%02x, expected QoS 1",
				raw_id(r), filter, granted);
	}
}

/* ---- the subscriber that dies before PUBACK ---- */

struct crash_loop {
	struct raw *r;
	const char *crash_on;       /* payload it closes on, without PUBACK */
	const char *stop_after;     /* payload it acknowledges and stops at; NULL: see max_crashes */
	unsigned max_crashes;       /* with stop_after NULL: stop after this many crashes */
	const char *dlq_id;         /* v5: the dlq-id crash_on must carry (NULL: unchecked) */
	/* What happened. */
	unsigned connects;          /* reconnections made by the loop */
	unsigned crashes;
	unsigned closed_by_broker;
	unsigned timeouts;
	unsigned acked;
};

/* Reads r's deliveries: closes abruptly on crash_on, acknowledges anything
 * else. Reconnects (expecting the session to be there) after a crash, a
 * close by the broker, or READ_TIMEOUT_MS of silence. r may start connected
 * or not. */
#define crash_loop(cl) crash_loop_at(__FILE__, __LINE__, (cl))
static void crash_loop_at(const char *file, int line, struct crash_loop *cl)
{
	struct raw *r = cl->r;
	for(;;){
		if(raw_closed(r)){
			if(cl->connects == MAX_CONNECTS){
				raw_dump(r);
				fail_here(file, line, "raw client %s: still looping after %u reconnections "
						"(%u crashes, %u closes by the broker, %u timeouts)", raw_id(r),
						cl->connects, cl->crashes, cl->closed_by_broker, cl->timeouts);
			}
			if(!raw_connect_at(file, line, r)){
				fail_here(file, line, "raw client %s: reconnection %u found no session",
						raw_id(r), cl->connects + 1);
			}
			cl->connects++;
		}
		const struct raw_msg *m = NULL;
		enum raw_event e = raw_next_at(file, line, r, READ_TIMEOUT_MS, &m);
		if(e == RAW_CLOSED){
			cl->closed_by_broker++;
			continue;
		}
		if(e == RAW_TIMEOUT){
			cl->timeouts++;
			raw_close(r);
			continue;
		}
		if(!strcmp(m->payload, cl->crash_on)){
			const char *id = raw_user(m, DLQ_PROP_ID);
			if(cl->dlq_id && (!id || strcmp(id, cl->dlq_id))){
				fail_here(file, line, "raw client %s: \"%s\" carries dlq-id %s, expected %s",
						raw_id(r), cl->crash_on, id ? id : "(none)", cl->dlq_id);
			}
			cl->crashes++;
			raw_close(r);
			if(!cl->stop_after && cl->crashes == cl->max_crashes){
				return;
			}
			continue;
		}
		raw_puback(r, m->mid); /* the broker may have closed it meanwhile */
		cl->acked++;
		if(cl->stop_after && !strcmp(m->payload, cl->stop_after)){
			return;
		}
	}
}

/* ---- assertions ---- */

#define expect_received(r, payload, n) expect_received_at(__FILE__, __LINE__, (r), (payload), (n))
static void expect_received_at(const char *file, int line, struct raw *r, const char *payload, size_t n)
{
	size_t got = raw_count(r, TOPIC, payload);
	if(got != n){
		raw_dump(r);
		fail_here(file, line, "raw client %s received \"%s\" %zu time(s), expected %zu",
				raw_id(r), payload, got, n);
	}
}

static void expect_user_at(const char *file, int line, const struct it_msg *m, const char *name, const char *value)
{
	size_t n = msg_user_count(m, name);
	const char *v = msg_user(m, name);
	if(n != 1 || (value && strcmp(v, value))){
		fail_here(file, line, "dead letter \"%s\": %zu %s propert%s (first \"%s\"), expected one \"%s\"",
				m->payload, n, name, n == 1 ? "y" : "ies", v ? v : "(none)", value ? value : "(any)");
	}
}

/* m is the dead letter of payload, first published to TOPIC with dlq-id
 * origin_id (NULL: unchecked), diverted from client after max_attempts
 * deliveries without acknowledgement: like a NACKed one, with its reason. */
#define expect_tracking_dead_letter(m, payload, origin_id, client) \
	expect_tracking_dead_letter_at(__FILE__, __LINE__, (m), (payload), (origin_id), (client))
static void expect_tracking_dead_letter_at(const char *file, int line, const struct it_msg *m,
		const char *payload, const char *origin_id, const char *client)
{
	char count[16];
	snprintf(count, sizeof(count), "%d", MAX_ATTEMPTS);
	if(strcmp(m->topic, DEAD) || strcmp(m->payload, payload) || m->qos < 1 || m->retain){
		fail_here(file, line, "dead letter on %s, payload \"%s\", QoS %d%s; expected \"%s\" on " DEAD
				" at QoS 1, not retained", m->topic, m->payload, m->qos, m->retain ? ", retained" : "", payload);
	}
	if(msg_user(m, DLQ_PROP_ID)){
		fail_here(file, line, "dead letter \"%s\" carries a dlq-id", m->payload);
	}
	expect_user_at(file, line, m, DLQ_PROP_RETRY_COUNT, count);
	expect_user_at(file, line, m, DLQ_PROP_ORIGIN_TOPIC, TOPIC);
	expect_user_at(file, line, m, DLQ_PROP_ORIGIN_ID, origin_id);
	expect_user_at(file, line, m, DLQ_PROP_DEAD_LETTER_CLIENT, client);
	expect_user_at(file, line, m, DLQ_PROP_DEAD_LETTER_FILTER, FILTER);
	expect_user_at(file, line, m, DLQ_PROP_DEAD_LETTER_REASON, NULL);
	expect_user_at(file, line, m, DLQ_PROP_DEAD_LETTER_TIME, NULL);
	const char *why = msg_user(m, DLQ_PROP_DEAD_LETTER_REASON);
	if(!strstr(why, REASON_PART)){
		fail_here(file, line, "dead letter \"%s\": reason \"%s\" does not contain \"" REASON_PART "\"",
				m->payload, why);
	}
	if(!it_is_recent_rfc3339(msg_user(m, DLQ_PROP_DEAD_LETTER_TIME), 60)){
		fail_here(file, line, "dead letter \"%s\": dead-letter-time \"%s\" is not now",
				m->payload, msg_user(m, DLQ_PROP_DEAD_LETTER_TIME));
	}
}

/* After everything settled: exactly n dead letters arrived. */
#define expect_dead_letters(s, n) expect_dead_letters_at(__FILE__, __LINE__, (s), (n))
static void expect_dead_letters_at(const char *file, int line, struct scene *s, size_t n)
{
	clients_settle_at(file, line, s->pub, s->watch, (struct client *)NULL);
	client_expect_exactly_at(file, line, s->watch, "dead/#", n);
}

/* How many lines of text contain needle. */
static size_t lines_with(const char *text, const char *needle)
{
	size_t n = 0;
	for(const char *p = text; p && *p;){
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		n += memmem(p, len, needle, strlen(needle)) != NULL;
		p = eol ? eol + 1 : NULL;
	}
	return n;
}

#define expect_log(b, needle) expect_log_at(__FILE__, __LINE__, (b), (needle))
static void expect_log_at(const char *file, int line, struct broker *b, const char *needle)
{
	char *log = broker_log(b);
	bool found = lines_with(log, needle) > 0;
	free(log);
	if(!found){
		fail_here(file, line, "the broker log has no line containing \"%s\"", needle);
	}
}

/* ---- 1, 2: one crashing subscriber ---- */

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

	struct crash_loop cl = { .r = w, .crash_on = "poison", .stop_after = "next",
		.dlq_id = protocol == MQTT_PROTOCOL_V5 ? id : NULL };
	crash_loop(&cl);
	expect_tracking_dead_letter(client_expect(s.watch, DEAD, 1), "poison", id, "worker");
	expect_dead_letters(&s, 1);
	raw_drain(w, HARNESS_SETTLE_MS);
	expect_received(w, "poison", MAX_ATTEMPTS);
	if(window1){
		/* Exact: the diverted slot is recovered by one close, no silence. */
		expect_received(w, "next", 1);
		ck_assert_msg(cl.closed_by_broker == 1 && cl.timeouts == 0,
				"expected one close by the broker and no timeout, got %u and %u",
				cl.closed_by_broker, cl.timeouts);
		expect_log(s.b, RECOUNT_LOG);
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
 * comes back with it, but is never counted past what was delivered. */
START_TEST(test_default_window_v311)
{
	crash_on_poison(__func__, MQTT_PROTOCOL_V311, false);
}
END_TEST

/* ---- 3: another subscriber of the same message ---- */

START_TEST(test_other_subscriber_unaffected)
{
	struct scene s;
	scene_start(&s, tracking_broker(__func__, "allow", true));
	struct raw *w = persistent(s.b, "worker", MQTT_PROTOCOL_V311, NULL);
	struct raw *good = persistent(s.b, "good", MQTT_PROTOCOL_V311, NULL);
	join(w, FILTER);
	join(good, FILTER);
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
END_TEST

/* ---- 3b: gone before the kick ---- */

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

/* ---- 4: queued, never sent, never counted ---- */

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

/* ---- 5: a NACK and redeliveries in one chain ---- */

/* Attempt 1: the original, NACKed (then acknowledged). Attempt 2: the retry
 * copy, to the same client on the same topic; it dies on it. Attempt 3: the
 * copy again, after a reconnect; it dies again. Attempt 4 would exceed
 * max_attempts: the copy is dead-lettered with retry-count 3. */
START_TEST(test_nack_then_redeliveries)
{
	struct scene s;
	scene_start(&s, tracking_broker(__func__, "allow", true));
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

/* ---- 6, 7: defer: another access control decides ---- */

/* The crash loop with window 1 for the subscriber w (already joined),
 * checked as in test 1. */
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

/* ---- 8: a $share group ---- */

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

/* ---- 9: startup ---- */

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

/* allow would answer before acl_file and bypass it. */
START_TEST(test_refuse_allow_with_acl_file)
{
	struct broker *b = tracking_broker(__func__, "allow", false);
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
		expect_refusal(b);
	}
}
END_TEST

/* defer with nothing else to decide: the broker would deny everything. */
START_TEST(test_refuse_defer_alone)
{
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

/* Exactly one line says the mode, whichever it is. */
static void expect_mode_line(struct broker *b, const char *mode)
{
	char want[64];
	snprintf(want, sizeof(want), "redelivery tracking: %s", mode);
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
	struct client *c = client_new(b, "c", MQTT_PROTOCOL_V5);
	client_subscribe(c, FILTER, 1);
	client_publish_str(c, TOPIC, "through", 1);
	ck_assert_str_eq(client_expect(c, FILTER, 1)->payload, "through");

	b = tracking_broker("defer", "defer", false);
	broker_conf(b, "acl_file %s", broker_file(b, "acl", "topic readwrite #\n"));
	broker_start(b);
	expect_mode_line(b, "defer");
}
END_TEST

/* ---- 10: off ---- */

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

static Suite *redelivery_suite(void)
{
	Suite *s = suite_create("redelivery");
	TCase *tc = harness_tcase("redelivery");
	tcase_set_timeout(tc, TEST_TIMEOUT);
	tcase_add_test(tc, test_window1_v311);
	tcase_add_test(tc, test_window1_v5);
	tcase_add_test(tc, test_default_window_v311);
	tcase_add_test(tc, test_other_subscriber_unaffected);
	tcase_add_test(tc, test_gone_before_the_kick);
	tcase_add_test(tc, test_queued_messages_not_counted);
	tcase_add_test(tc, test_nack_then_redeliveries);
	tcase_add_test(tc, test_acl_file_defer);
	tcase_add_test(tc, test_dynsec_defer);
	tcase_add_test(tc, test_shared_subscription);
	tcase_add_test(tc, test_refuse_allow_with_acl_file);
	tcase_add_test(tc, test_refuse_allow_with_other_plugin);
	tcase_add_test(tc, test_refuse_defer_alone);
	tcase_add_test(tc, test_refuse_bad_value);
	tcase_add_test(tc, test_startup_lines);
	tcase_add_test(tc, test_off_by_default);
	tcase_add_test(tc, test_off_v5);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(redelivery_suite());
	harness_init(sr);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	failed += harness_finish();
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
