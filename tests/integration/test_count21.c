/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Exact counting on Mosquitto 2.1 (issue 13, points 1, 2, 3b and 5): every
 * PUBLISH the broker writes to a subscriber (MESSAGE_OUT) is one attempt for
 * it, and each but a subscriber's first carries its number in a
 * delivery-count user property (MQTT v5 receivers; "absent means 1"; the
 * first too with plugin_opt_delivery_count always). The cases: the measured one (a v3.1.1 persistent
 * subscriber with a window of 10 that never acknowledges and reconnects 4
 * times: each of 5 messages is delivered exactly max_attempts times, then
 * dead-lettered once); delivery-count on the original (always only), on
 * the retry copy after a NACK and on a resend after a reconnect, and its
 * absence with plugin_opt_delivery_count off and for v3.1.1; a Maximum Packet Size the
 * stamp would pass (the send goes out without it, counted). What the
 * in-flight slot of a diverted message does on 2.1 (point 5) is
 * test_redelivery.c's window-1 case, which runs on every line. On 2.0,
 * which keeps its own counting (test_redelivery.c), the whole suite is
 * skipped: main() exits with HARNESS_EXIT_SKIP, which meson reports as SKIP.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "harness.h"
#include "raw.h"
#include "redelivery_common.h"

#define REPLY_TOPIC "count21/reply"

static double total(struct client *c, const char *name)
{
	cJSON *doc;
	double v = json_num(cJSON_GetObjectItemCaseSensitive(status_get(c, REPLY_TOPIC, &doc), "totals"), name);
	cJSON_Delete(doc);
	return v;
}

/* Fails unless m carries delivery-count want (NULL: none). */
#define expect_count(m, want) expect_count_at(__FILE__, __LINE__, (m), (want))
static void expect_count_at(const char *file, int line, const struct raw_msg *m, const char *want)
{
	size_t n = 0;
	const char *got = NULL;
	for(size_t i = 0; i < m->nusers; i++){
		if(!strcmp(m->users[i].name, DLQ_PROP_DELIVERY_COUNT)){
			n++;
			got = m->users[i].value;
		}
	}
	if(want == NULL && n == 0) return;
	if(want && n == 1 && !strcmp(got, want)) return;
	fail_here(file, line, "\"%s\" on %s (connection %u) carries %zu delivery-count (last %s), expected %s",
			m->payload, m->topic, m->connection, n, got ? got : "none", want ? want : "none");
}

/* ---- 1. the measured case ---- */

#define BATCH 5

/* Reads one connection's deliveries: n, each of "m1".."m5" once, none
 * acknowledged; then nothing more. */
static void read_batch(struct raw *r, unsigned connection, size_t n)
{
	bool seen[BATCH] = {false};
	for(size_t i = 0; i < n; i++){
		const struct raw_msg *m = raw_expect(r);
		int k = m->payload[0] == 'm' ? m->payload[1] - '1' : -1;
		ck_assert_msg(k >= 0 && k < BATCH && !seen[k] && !strcmp(m->topic, TOPIC),
				"connection %u: unexpected \"%s\" on %s", connection, m->payload, m->topic);
		seen[k] = true;
	}
	const struct raw_msg *m = NULL;
	enum raw_event e = raw_next(r, HARNESS_SETTLE_MS, &m);
	ck_assert_msg(e != RAW_PUBLISH, "connection %u: one more delivery, \"%s\"", connection, m ? m->payload : "");
}

/* v3.1.1, clean_session false, max_inflight_messages 10, never a PUBACK,
 * 4 reconnections, 5 QoS 1 messages, max_attempts 3: each is delivered
 * exactly 3 times, then dead-lettered once (retry-count 3); nothing else
 * arrives. (2.0 and 2.1 without exact counting: the first message is
 * counted, the other four are delivered on and on.) */
START_TEST(test_measured_case)
{
	struct scene s;
	struct broker *b = tracking_broker(__func__, "allow", false);
	broker_conf(b, "max_inflight_messages 10");
	scene_start(&s, b);
	struct raw *w = persistent(s.b, "worker", MQTT_PROTOCOL_V311, NULL);
	join(w, FILTER);
	char payload[4];
	for(int i = 0; i < BATCH; i++){
		snprintf(payload, sizeof(payload), "m%d", i + 1);
		client_publish_str(s.pub, TOPIC, payload, 1);
	}
	for(unsigned connection = 1; connection <= 5; connection++){
		if(connection > 1) ck_assert_msg(raw_connect(w), "reconnection %u found no session", connection - 1);
		read_batch(w, connection, connection <= MAX_ATTEMPTS ? BATCH : 0);
		raw_close(w);
	}
	client_expect(s.watch, DEAD, BATCH);
	for(size_t i = 0; i < BATCH; i++){
		const struct it_msg *m = client_msg(s.watch, DEAD, i);
		snprintf(payload, sizeof(payload), "%s", m->payload);
		const char *id = original_id(&s, payload, 0);
		expect_tracking_dead_letter(m, payload, id, "worker");
		ck_assert_str_eq(msg_user(m, DLQ_PROP_RETRY_COUNT), "3");
	}
	expect_dead_letters(&s, BATCH);
	for(int i = 0; i < BATCH; i++){
		snprintf(payload, sizeof(payload), "m%d", i + 1);
		expect_received(w, payload, MAX_ATTEMPTS);
	}
	ck_assert_uint_eq(raw_count(w, NULL, NULL), BATCH * MAX_ATTEMPTS);
	raw_free(w);
}
END_TEST

/* ---- 2. delivery-count ---- */

/* A v5 broker of its own: jobs/# with retry copies to the delivery topic,
 * redelivery tracking off (counting needs none on 2.1). */
static struct broker *count_broker(const char *label, const char *delivery_count)
{
	struct broker *b = tracking_broker(label, NULL, false);
	if(delivery_count) broker_conf(b, "plugin_opt_delivery_count %s", delivery_count);
	return b;
}

/* What delivery-count the delivery that is attempt n to its subscriber
 * carries with plugin_opt_delivery_count option (NULL: the default, on):
 * none on a first delivery but with always, none at all with off. */
static const char *count_of(const char *option, unsigned n)
{
	static const char *const numbers[] = {"0", "1", "2", "3", "4"};
	if(option && !strcmp(option, "off")) return NULL;
	if(n == 1 && !(option && !strcmp(option, "always"))) return NULL;
	return numbers[n];
}

/* The original (1), its retry copy after a NACK (2), that copy resent after
 * a reconnect of the persistent session (3); another original (1) resent
 * after a reconnect (2); a v3.1.1 subscriber of the same messages gets no
 * properties at all. On (the default): the first deliveries carry none,
 * "absent means 1"; always: they carry "1"; off: none anywhere. */
static void delivery_counts(const char *label, const char *option)
{
	struct scene s;
	scene_start(&s, count_broker(label, option));
	struct raw *w = persistent(s.b, "worker", MQTT_PROTOCOL_V5, NULL);
	struct raw *old = persistent(s.b, "old", MQTT_PROTOCOL_V311, NULL);
	join(w, FILTER);
	join(old, FILTER);
	client_publish_str(s.pub, TOPIC, "job", 1);

	const struct raw_msg *m = raw_expect(w);
	ck_assert_str_eq(m->payload, "job");
	expect_count(m, count_of(option, 1));
	const char *id = raw_user(m, DLQ_PROP_ID);
	ck_assert_ptr_nonnull(id);
	ck_assert(raw_puback(w, m->mid));
	ck_assert(raw_send_publish(w, DLQ_NACK_TOPIC, id, strlen(id), 0));

	m = raw_expect(w);
	ck_assert_str_eq(m->payload, "job");
	const char *copy_id = raw_user(m, DLQ_PROP_ID);
	ck_assert_ptr_nonnull(copy_id);
	ck_assert_str_ne(copy_id, id);
	ck_assert_str_eq(raw_user(m, DLQ_PROP_RETRY_COUNT), "1");
	expect_count(m, count_of(option, 2));

	/* Not acknowledged: the session sends it again after a reconnect. */
	raw_close(w);
	ck_assert_msg(raw_connect(w), "the worker found no session");
	m = raw_expect(w);
	ck_assert_str_eq(m->payload, "job");
	ck_assert_str_eq(raw_user(m, DLQ_PROP_ID), copy_id);
	expect_count(m, count_of(option, 3));
	ck_assert(raw_puback(w, m->mid));

	const struct raw_msg *o = raw_expect(old);
	ck_assert_str_eq(o->payload, "job");
	ck_assert_uint_eq(o->nusers, 0);
	ck_assert(raw_puback(old, o->mid));

	/* An original resent after a reconnect: its second delivery. */
	client_publish_str(s.pub, TOPIC, "again", 1);
	m = raw_expect(w);
	ck_assert_str_eq(m->payload, "again");
	expect_count(m, count_of(option, 1));
	raw_close(w);
	ck_assert_msg(raw_connect(w), "the worker found no session");
	m = raw_expect(w);
	ck_assert_str_eq(m->payload, "again");
	ck_assert(m->dup);
	expect_count(m, count_of(option, 2));
	ck_assert(raw_puback(w, m->mid));
	o = raw_expect(old);
	ck_assert_str_eq(o->payload, "again");
	ck_assert_uint_eq(o->nusers, 0);
	ck_assert(raw_puback(old, o->mid));

	raw_drain(w, HARNESS_SETTLE_MS);
	raw_drain(old, 0);
	expect_received(w, "again", 2);
	expect_received(old, "again", 1);
	expect_received(w, "job", 3);
	expect_received(old, "job", 1);
	/* The observer (v5, clean session) has its own count: "again" is its
	 * first delivery. */
	const struct it_msg *seen = client_expect(s.watch, FILTER, 2);
	ck_assert_uint_eq(msg_user_count(seen, DLQ_PROP_DELIVERY_COUNT), count_of(option, 1) ? 1 : 0);
	raw_free(w);
	raw_free(old);
}

START_TEST(test_delivery_count_on_by_default)
{
	delivery_counts(__func__, NULL);
}
END_TEST

START_TEST(test_delivery_count_always)
{
	delivery_counts(__func__, "always");
}
END_TEST

START_TEST(test_delivery_count_off)
{
	delivery_counts(__func__, "off");
}
END_TEST

/* The worker subscribes before the observer, so the broker writes each
 * message to it first: its sends are the ones an original keeps in the
 * record itself (the others' are deliveries of their own, as in
 * test_redelivery.c, where the observer comes first). Counted all the
 * same: no delivery-count (1), then 2, on the sends to one persistent session
 * across a reconnect, the third send, then at the next reconnect the
 * message is diverted (a dead letter after 3 deliveries) and "next",
 * behind it in the window of 1, arrives after the one kick. */
START_TEST(test_first_subscriber_counted)
{
	struct scene s = { .b = tracking_broker(__func__, "allow", true) };
	broker_start(s.b);
	struct raw *w = persistent(s.b, "worker", MQTT_PROTOCOL_V5, NULL);
	join(w, FILTER);
	s.watch = client_new(s.b, "watch", MQTT_PROTOCOL_V5);
	s.pub = client_new(s.b, "pub", MQTT_PROTOCOL_V5);
	client_subscribe(s.watch, DEAD, 1);
	client_subscribe(s.watch, FILTER, 1);
	client_publish_str(s.pub, TOPIC, "poison", 1);
	client_publish_str(s.pub, TOPIC, "next", 1);
	const char *id = original_id(&s, "poison", 0);
	for(int i = 1; i <= 2; i++){
		if(i > 1) ck_assert_msg(raw_connect(w), "the worker found no session");
		const struct raw_msg *m = raw_expect(w);
		ck_assert_str_eq(m->payload, "poison");
		ck_assert_str_eq(raw_user(m, DLQ_PROP_ID), id);
		expect_count(m, count_of(NULL, (unsigned)i));
		raw_close(w); /* no PUBACK */
	}
	struct crash_loop cl = { .r = w, .crash_on = "poison", .stop_after = "next", .dlq_id = id };
	crash_loop(&cl);
	expect_tracking_dead_letter(client_expect(s.watch, DEAD, 1), "poison", id, "worker");
	expect_dead_letters(&s, 1);
	raw_drain(w, HARNESS_SETTLE_MS);
	expect_received(w, "poison", MAX_ATTEMPTS);
	expect_received(w, "next", 1);
	ck_assert_uint_eq(total(s.watch, "diverted"), 1);
	raw_free(w);
}
END_TEST

/* A retained tracked message is sent again each time the subscriber
 * subscribes: each send is one more delivery (delivery-count absent, then
 * 2..4), but
 * it was acknowledged each time, and the broker's check before each
 * retained send comes from the live connection, not from a reconnect:
 * nothing is diverted, no dead letter. */
START_TEST(test_retained_resubscribed)
{
	struct scene s;
	scene_start(&s, tracking_broker(__func__, "allow", false));
	struct raw_options po = { .id = "retainer", .protocol = MQTT_PROTOCOL_V5, .clean = true };
	struct raw *pub = raw_new(s.b, &po);
	raw_connect(pub);
	raw_set_retain(pub, true);
	ck_assert_uint_lt(raw_publish(pub, "jobs/retained", "kept", 4, 1), 0x80);
	struct raw *w = persistent(s.b, "worker", MQTT_PROTOCOL_V5, NULL);
	raw_connect(w);
	for(unsigned i = 1; i <= 4; i++){
		ck_assert_uint_eq(raw_subscribe(w, "jobs/retained", 1), 1);
		const struct raw_msg *m = raw_expect(w);
		ck_assert_str_eq(m->payload, "kept");
		ck_assert(m->retain);
		expect_count(m, count_of(NULL, i));
		ck_assert(raw_puback(w, m->mid));
	}
	raw_drain(w, HARNESS_SETTLE_MS);
	ck_assert_uint_eq(raw_count(w, NULL, NULL), 4);
	expect_dead_letters(&s, 0);
	raw_free(w);
	raw_free(pub);
}
END_TEST

/* ---- 3b. Maximum Packet Size ---- */

/* A v5 subscriber with a session the broker persists and Maximum Packet
 * Size 64 (the broker runs without `persistence true`, so 2.1 shows it):
 * a 32-byte tracked message fits without the stamp (44 bytes as the broker
 * counts them) but not with it (its dlq-id: 71). It arrives,
 * once, without the plugin's properties, and sentWithoutStamp counts it;
 * the broker drops nothing. */
START_TEST(test_max_packet_size)
{
	struct scene s;
	scene_start(&s, count_broker(__func__, NULL));
	struct raw_options o = { .id = "small", .protocol = MQTT_PROTOCOL_V5, .clean = false, .expiry_s = 3600,
		.max_packet_size = 64 };
	struct raw *w = raw_new(s.b, &o);
	join(w, FILTER);
	char big[33];
	memset(big, 'x', 32);
	big[32] = '\0';
	client_publish_str(s.pub, TOPIC, big, 1);
	const struct raw_msg *m = raw_expect(w);
	ck_assert_str_eq(m->payload, big);
	ck_assert_ptr_null(raw_user(m, DLQ_PROP_ID));
	expect_count(m, NULL);
	ck_assert(raw_puback(w, m->mid));

	raw_drain(w, HARNESS_SETTLE_MS);
	expect_received(w, big, 1);
	ck_assert_uint_eq(raw_count(w, NULL, NULL), 1);
	ck_assert_uint_eq(broker_log_lines(s.b, "Dropping too large outgoing PUBLISH"), 0);
	ck_assert_uint_eq(total(s.watch, "sentWithoutStamp"), 1);
	/* The observer, with no limit, got it with its stamp. */
	expect_original(client_expect(s.watch, FILTER, 1));
	raw_free(w);
}
END_TEST

int main(void)
{
	if(!harness_needs_21("count21", "exact counting needs 2.1's MESSAGE_OUT event")){
		return HARNESS_EXIT_SKIP;
	}
	return harness_run(check_suite("count21", check_timeout(harness_tcase("count21"), TEST_TIMEOUT),
			CHECK_TESTS(test_measured_case, test_delivery_count_on_by_default, test_delivery_count_always,
			test_delivery_count_off, test_first_subscriber_counted, test_retained_resubscribed,
			test_max_packet_size)));
}
