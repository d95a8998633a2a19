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

#include "harness.h"

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

	clients_settle(pub, sub);
	client_expect_exactly(sub, NULL, 1);
	client_expect_exactly(pub, NULL, 0);
}
END_TEST

START_TEST(test_v311_client)
{
	struct broker *b = broker_new(__func__);
	broker_start(b);
	struct client *sub = client_new(b, "sub5", MQTT_PROTOCOL_V5);
	struct client *old = client_new(b, "old", MQTT_PROTOCOL_V311);
	client_subscribe(sub, "legacy", 1);
	client_subscribe(old, "legacy", 1);
	client_publish_str(old, "legacy", "from 3.1.1", 1);
	ck_assert_str_eq(client_expect(sub, "legacy", 1)->payload, "from 3.1.1");
	ck_assert_str_eq(client_expect(old, "legacy", 1)->payload, "from 3.1.1");
	clients_settle(old, sub);
	client_expect_exactly(sub, NULL, 1);
	client_expect_exactly(old, NULL, 1);
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

static Suite *harness_suite(void)
{
	Suite *s = suite_create("harness");
	TCase *tc = harness_tcase("bare broker");
	tcase_add_test(tc, test_roundtrip_v5_properties);
	tcase_add_test(tc, test_v311_client);
	tcase_add_test(tc, test_refusal_reported);
	tcase_add_test(tc, test_two_brokers_are_private);
	tcase_add_test(tc, test_helpers);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(harness_suite());
	harness_init(sr);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	failed += harness_finish();
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
