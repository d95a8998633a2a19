/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The harness's own tests, against the bare broker (no plugin): that it
 * starts and stops mosquitto, that its clients see what a v5 or v3.1.1
 * subscriber sees, and that a refused configuration is reported. When the
 * plugin suites fail, this suite tells whether the harness is to blame.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check_suite.h"
#include "harness.h"
#include "raw.h"

START_TEST(test_roundtrip_v5_properties)
{
	struct broker *b = broker_new(__func__);
	broker_start(b);
	struct client *sub = client_new(b, "sub", MQTT_PROTOCOL_V5);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	client_subscribe(sub, "t/#", 2);

	mosquitto_property *props = NULL;
	ck_assert_int_eq(mosquitto_property_add_string(&props, MQTT_PROP_CONTENT_TYPE, "text/plain"), 0);
	ck_assert_int_eq(mosquitto_property_add_binary(&props, MQTT_PROP_CORRELATION_DATA, "c\0d", 3), 0);
	ck_assert_int_eq(mosquitto_property_add_string(&props, MQTT_PROP_RESPONSE_TOPIC, "r/1"), 0);
	ck_assert_int_eq(mosquitto_property_add_byte(&props, MQTT_PROP_PAYLOAD_FORMAT_INDICATOR, 1), 0);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, "a", "1"), 0);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, "b", "2"), 0);
	client_publish(pub, "t/x", "hello", 5, 1, props);
	mosquitto_property_free_all(&props);

	const struct it_msg *m = client_expect(sub, "t/#", 1);
	ck_assert_str_eq(m->topic, "t/x");
	ck_assert_str_eq(m->payload, "hello");
	ck_assert_int_eq(m->qos, 1);
	ck_assert_str_eq(m->content_type, "text/plain");
	ck_assert_int_eq(m->correlation_len, 3);
	ck_assert_mem_eq(m->correlation, "c\0d", 3);
	ck_assert_str_eq(m->response_topic, "r/1");
	ck_assert_int_eq(m->payload_format, 1);
	ck_assert_uint_eq(m->nusers, 2);
	ck_assert_str_eq(m->users[0].name, "a");
	ck_assert_str_eq(m->users[1].value, "2");
	ck_assert_ptr_null(msg_user(m, "dlq-id"));

	clients_expect_totals(sub, 1, pub, 0);
}
END_TEST

START_TEST(test_v311_client)
{
	struct broker *b = broker_new(__func__);
	broker_start(b);
	struct client *sub = client_subscribed(b, "sub5", "legacy");
	struct client *old = client_new(b, "old", MQTT_PROTOCOL_V311);
	client_subscribe(old, "legacy", 1);
	client_publish_str(old, "legacy", "from 3.1.1", 1);
	ck_assert_str_eq(client_expect(sub, "legacy", 1)->payload, "from 3.1.1");
	ck_assert_str_eq(client_expect(old, "legacy", 1)->payload, "from 3.1.1");
	clients_expect_totals(sub, 1, old, 1);
	ck_assert_uint_eq(client_disconnects(old), 0);
	ck_assert(client_connected(old));
}
END_TEST

START_TEST(test_refusal_reported)
{
	struct broker *b = broker_new(__func__);
	broker_conf(b, "no_such_option 1");
	char *log = broker_expect_refusal(b);
	ck_assert_msg(strstr(log, "no_such_option") != NULL, "log does not name the option:\n%s", log);
	free(log);
}
END_TEST

START_TEST(test_two_brokers_are_private)
{
	struct broker *b1 = broker_new("first");
	struct broker *b2 = broker_new("second");
	broker_start(b1);
	broker_start(b2);
	ck_assert_str_ne(broker_socket(b1), broker_socket(b2));
	struct client *c1 = client_new(b1, "c", MQTT_PROTOCOL_V5);
	struct client *c2 = client_new(b2, "c", MQTT_PROTOCOL_V5);
	client_subscribe(c2, "x", 0);
	client_publish_str(c1, "x", "only on b1", 0);
	clients_settle(c1, c2);
	client_expect_exactly(c2, NULL, 0);
}
END_TEST

START_TEST(test_helpers)
{
	ck_assert(it_is_dlq_id("abcdEFGH0123-_xy"));
	ck_assert(!it_is_dlq_id("abcdEFGH0123-_x"));
	ck_assert(!it_is_dlq_id("abcdEFGH0123+/xy"));
	ck_assert(!it_is_dlq_id(NULL));
	ck_assert(!it_is_recent_rfc3339("2001-01-01T00:00:00Z", 5));
	ck_assert(!it_is_recent_rfc3339("garbage", 5));
	char now[64];
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%S.123Z", &tm);
	ck_assert(it_is_recent_rfc3339(now, 5));
	strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%S.123", &tm);
	ck_assert(!it_is_recent_rfc3339(now, 5));
}
END_TEST

/* ---- the raw client (raw.h) ---- */

/* A round trip on r's own connection: once its PUBACK is back, the broker
 * has handled everything r sent before (a PUBACK included). */
static void raw_round_trip(struct raw *r)
{
	ck_assert_uint_eq(raw_publish(r, "ping", "x", 1, 1), 0);
}

/* The broker resends an unacknowledged QoS 1 message, with DUP set and the
 * same packet id, to a persistent v3.1.1 session that comes back; once it
 * is acknowledged it is not sent again. */
START_TEST(test_raw_v311_redelivers_unacked)
{
	struct broker *b = broker_new(__func__);
	broker_start(b);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V311);
	struct raw_options o = { .id = "keeper", .protocol = MQTT_PROTOCOL_V311, .clean = false };
	struct raw *r = raw_new(b, &o);
	ck_assert(!raw_connect(r));
	ck_assert_uint_eq(raw_subscribe(r, "q/#", 1), 1);
	client_publish_str(pub, "q/1", "work", 1);

	const struct raw_msg *m = raw_expect(r);
	ck_assert_str_eq(m->topic, "q/1");
	ck_assert_str_eq(m->payload, "work");
	ck_assert_int_eq(m->qos, 1);
	ck_assert(!m->dup && !m->retain);
	ck_assert_uint_ne(m->mid, 0);
	ck_assert_uint_eq(m->connection, 1);
	unsigned mid = m->mid;
	raw_close(r); /* dies before PUBACK */

	ck_assert_msg(raw_connect(r), "no session present");
	m = raw_expect(r);
	ck_assert_str_eq(m->payload, "work");
	ck_assert_msg(m->dup, "a redelivery without DUP");
	ck_assert_uint_eq(m->mid, mid);
	ck_assert_uint_eq(m->connection, 2);
	ck_assert(raw_puback(r, m->mid));
	raw_round_trip(r);
	raw_close(r);

	ck_assert_msg(raw_connect(r), "no session present");
	const struct raw_msg *none = NULL;
	ck_assert_str_eq(raw_event_name(raw_next(r, HARNESS_SETTLE_MS, &none)), "timeout");
	ck_assert_uint_eq(raw_count(r, "q/1", "work"), 2);
	ck_assert_uint_eq(raw_count(r, NULL, NULL), 2);
	raw_free(r);
}
END_TEST

/* v5: session expiry, receive maximum 1 (one message in flight), user
 * properties and a binary payload; the unacknowledged second message comes
 * back with DUP after an abrupt close. */
START_TEST(test_raw_v5_window_and_properties)
{
	struct broker *b = broker_new(__func__);
	broker_start(b);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct raw_options o = { .id = "v5keeper", .protocol = MQTT_PROTOCOL_V5, .clean = false,
		.expiry_s = 3600, .receive_max = 1 };
	struct raw *r = raw_new(b, &o);
	ck_assert(!raw_connect(r));
	ck_assert_uint_eq(raw_subscribe(r, "q/#", 1), 1);

	mosquitto_property *props = NULL;
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, "a", "1"), 0);
	ck_assert_int_eq(mosquitto_property_add_string(&props, MQTT_PROP_CONTENT_TYPE, "bin"), 0);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY,
			DLQ_PROP_ID, "id-1"), 0);
	client_publish(pub, "q/1", "a\0b", 3, 1, props);
	client_publish(pub, "q/2", "second", 6, 1, props);
	mosquitto_property_free_all(&props);

	const struct raw_msg *m = raw_expect(r);
	ck_assert_str_eq(m->topic, "q/1");
	ck_assert_uint_eq(m->payloadlen, 3);
	ck_assert_mem_eq(m->payload, "a\0b", 3);
	ck_assert_uint_eq(m->nusers, 2);
	ck_assert_pstr_eq(raw_user(m, "a"), "1");
	ck_assert_pstr_eq(raw_user(m, DLQ_PROP_ID), "id-1");
	ck_assert_ptr_null(raw_user(m, "b"));
	const struct raw_msg *second = NULL;
	ck_assert_msg(raw_next(r, HARNESS_SETTLE_MS, &second) == RAW_TIMEOUT,
			"a second message in flight despite receive maximum 1");
	ck_assert(raw_puback(r, m->mid));
	second = raw_expect(r);
	ck_assert_str_eq(second->payload, "second");
	ck_assert(!second->dup);
	raw_close(r);

	ck_assert_msg(raw_connect(r), "no session present");
	m = raw_expect(r);
	ck_assert_str_eq(m->payload, "second");
	ck_assert(m->dup);
	ck_assert_pstr_eq(raw_user(m, "a"), "1");
	ck_assert(raw_puback(r, m->mid));
	ck_assert(raw_disconnect(r));
	ck_assert(raw_closed(r));
	ck_assert_uint_eq(raw_count(r, NULL, NULL), 3);
	raw_free(r);
}
END_TEST

/* "Closed by the broker" and "timeout" are told apart: a takeover closes
 * the first connection (after a v5 DISCONNECT), and the session, with its
 * $share subscription, goes on on the second. */
START_TEST(test_raw_closed_by_broker_and_share)
{
	struct broker *b = broker_new(__func__);
	broker_start(b);
	struct raw_options o = { .id = "twice", .protocol = MQTT_PROTOCOL_V5, .clean = false, .expiry_s = 60 };
	struct raw *first = raw_new(b, &o);
	struct raw *second = raw_new(b, &o);
	raw_connect(first);
	ck_assert_uint_eq(raw_subscribe(first, "$share/g/t/#", 1), 1);
	const struct raw_msg *m = NULL;
	ck_assert_int_eq(raw_next(first, 100, &m), RAW_TIMEOUT);
	ck_assert(!raw_closed(first));

	ck_assert_msg(raw_connect(second), "no session present after a takeover");
	ck_assert_str_eq(raw_event_name(raw_next(first, HARNESS_WAIT_MS, &m)), "closed");
	ck_assert(raw_closed(first));

	ck_assert_uint_eq(raw_publish(second, "t/1", "to myself", 9, 1), 0);
	m = raw_expect(second);
	ck_assert_str_eq(m->topic, "t/1");
	ck_assert_str_eq(m->payload, "to myself");
	ck_assert(raw_puback(second, m->mid));
	ck_assert_uint_eq(raw_publish(second, "t/2", "qos 0", 5, 0), 0);
	m = raw_expect(second);
	ck_assert_int_eq(m->qos, 0);
	ck_assert_uint_eq(m->mid, 0);
	raw_free(first);
	raw_free(second);
}
END_TEST

/* A username reaches the broker: acl_file lets alice read a/# only, and
 * denies the unknown bob any publish (v5 PUBACK 0x87). */
START_TEST(test_raw_username)
{
	struct broker *b = broker_new(__func__);
	const char *acl = broker_file(b, "acl",
			"topic write a/#\n"
			"topic write b/#\n"
			"pattern readwrite harness/sync/%c\n"
			"user alice\n"
			"topic read a/#\n");
	broker_conf(b, "acl_file %s", acl);
	broker_start(b);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct raw_options oa = { .id = "alice-1", .protocol = MQTT_PROTOCOL_V311, .clean = true, .username = "alice" };
	struct raw_options ob = { .id = "bob-1", .protocol = MQTT_PROTOCOL_V5, .clean = true, .username = "bob" };
	struct raw *alice = raw_new(b, &oa);
	struct raw *bob = raw_new(b, &ob);
	raw_connect(alice);
	raw_connect(bob);
	ck_assert_uint_eq(raw_subscribe(alice, "a/#", 1), 1);
	ck_assert_uint_lt(raw_subscribe(alice, "b/#", 1), 0x80); /* granted; reads are checked per message */
	ck_assert_uint_eq(raw_publish(bob, "a/1", "bob", 3, 1), 0x87);
	client_publish_str(pub, "b/1", "hidden", 1);
	client_publish_str(pub, "a/1", "seen", 1);
	const struct raw_msg *m = raw_expect(alice);
	ck_assert_str_eq(m->topic, "a/1");
	ck_assert_str_eq(m->payload, "seen");
	raw_drain(alice, HARNESS_SETTLE_MS);
	ck_assert_uint_eq(raw_count(alice, NULL, NULL), 1);
	raw_free(alice);
	raw_free(bob);
}
END_TEST

int main(void)
{
	return harness_run(check_suite("harness", harness_tcase("bare broker"), CHECK_TESTS(test_roundtrip_v5_properties,
			test_v311_client, test_refusal_reported, test_two_brokers_are_private, test_helpers,
			test_raw_v311_redelivers_unacked, test_raw_v5_window_and_properties, test_raw_closed_by_broker_and_share,
			test_raw_username)));
}
