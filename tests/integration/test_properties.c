/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What retry copies and dead letters carry: the original payload (binary,
 * empty) and MQTT v5 properties (content type, correlation data, response
 * topic, payload format, user properties in order), never a publisher's
 * spoof of the plugin's own property names; and messages from MQTT v3.1.1
 * publishers, stamped for v5 subscribers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "harness.h"
#include "test_util.h"

static const char corr[] = { 'c', 'o', 'r', 'r', '\0', '\x01', '\xff' };

/* The publisher's user properties, in the order it sent them. */
static const char *const user_names[] = { "trace", "tenant", "trace", "empty" };
static const char *const user_values[] = { "t-1", "acme", "t-2", "" };
#define NUSER ARRAY_LEN(user_names)

static mosquitto_property *publisher_props(void)
{
	mosquitto_property *p = NULL;
	ck_assert_int_eq(mosquitto_property_add_byte(&p, MQTT_PROP_PAYLOAD_FORMAT_INDICATOR, 1), 0);
	ck_assert_int_eq(mosquitto_property_add_string(&p, MQTT_PROP_CONTENT_TYPE, "application/json"), 0);
	ck_assert_int_eq(mosquitto_property_add_string(&p, MQTT_PROP_RESPONSE_TOPIC, "replies/props"), 0);
	ck_assert_int_eq(mosquitto_property_add_binary(&p, MQTT_PROP_CORRELATION_DATA, corr, sizeof(corr)), 0);
	for(size_t i = 0; i < NUSER; i++){
		ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, user_names[i], user_values[i]), 0);
	}
	return p;
}

/* m carries the publisher's properties: each once, user properties in the
 * order sent (the plugin's own may come anywhere around them). */
static void expect_publisher_props(const struct it_msg *m, const char *what)
{
	ck_assert_msg(m->payload_format == 1, "%s: payload format %d, expected 1", what, m->payload_format);
	ck_assert_msg(m->content_type && !strcmp(m->content_type, "application/json"),
			"%s: content type %s", what, m->content_type ? m->content_type : "(none)");
	ck_assert_msg(m->response_topic && !strcmp(m->response_topic, "replies/props"),
			"%s: response topic %s", what, m->response_topic ? m->response_topic : "(none)");
	ck_assert_msg(m->correlation && m->correlation_len == sizeof(corr) && !memcmp(m->correlation, corr, sizeof(corr)),
			"%s: correlation data missing or changed (%u bytes)", what, (unsigned)m->correlation_len);
	size_t k = 0;
	for(size_t i = 0; i < m->nusers; i++){
		const char *n = m->users[i].name;
		if(strcmp(n, "trace") && strcmp(n, "tenant") && strcmp(n, "empty")){
			continue;
		}
		ck_assert_msg(k < NUSER, "%s: more publisher user properties than sent", what);
		ck_assert_msg(!strcmp(n, user_names[k]) && !strcmp(m->users[i].value, user_values[k]),
				"%s: user property #%zu is %s=%s, expected %s=%s", what, k + 1,
				n, m->users[i].value, user_names[k], user_values[k]);
		k++;
	}
	ck_assert_msg(k == NUSER, "%s: %zu of %zu publisher user properties arrived", what, k, NUSER);
}

START_TEST(test_properties_preserved)
{
	struct broker *b = dlq_broker("policy props max_attempts=2 dead_letter=dlq/props");
	struct client *worker = client_subscribed(b, "worker", "props");
	struct client *watcher = client_subscribed(b, "watcher", "dlq/#");

	mosquitto_property *p = publisher_props();
	const char payload[] = "{\"order\":42}";
	client_publish(watcher, "props", payload, (int)strlen(payload), 1, p);
	mosquitto_property_free_all(&p);

	const struct it_msg *orig = client_expect(worker, "props", 1);
	ck_assert_str_eq(orig->payload, payload);
	expect_publisher_props(orig, "original");
	const char *id = expect_original(orig);

	client_nack(worker, id, "first failure");
	const struct it_msg *copy = client_expect(worker, "props", 2);
	ck_assert_str_eq(copy->payload, payload);
	expect_publisher_props(copy, "retry copy");
	const char *copy_id = expect_retry_copy(copy, "props", id, 1);
	ck_assert_uint_eq(copy->nusers, NUSER + 4 + IT_PER_SEND_PROPS);

	client_nack(worker, copy_id, "schema mismatch");
	const struct it_msg *dl = client_expect(watcher, "dlq/props", 1);
	ck_assert_str_eq(dl->payload, payload);
	expect_publisher_props(dl, "dead letter");
	expect_dead_letter(dl, "props", id, 2, client_id(worker), "props", "schema mismatch");
	/* The publisher's, then the plugin's ten: retry-count, origin-topic,
	 * origin-id, dead-letter-reason, -client, -filter, -time, -cause,
	 * -broker and -id. */
	ck_assert_uint_eq(dl->nusers, NUSER + 10);
	ck_assert_str_eq(msg_user(dl, DLQ_PROP_DEAD_LETTER_BROKER), it_host_name());
	ck_assert_str_eq(msg_user(dl, DLQ_PROP_DEAD_LETTER_CAUSE), DLQ_CAUSE_NACK);

	clients_expect_totals(worker, 2, watcher, 1);
}
END_TEST

/* A publisher cannot forge the plugin's properties on copies and dead
 * letters: its own retry-count, origin-* and dead-letter-* are not carried. */
START_TEST(test_reserved_names_not_carried)
{
	struct broker *b = dlq_broker("policy spoof max_attempts=2 dead_letter=dlq/spoof");
	struct client *worker = client_subscribed(b, "worker", "spoof");
	struct client *watcher = client_subscribed(b, "watcher", "dlq/#");

	mosquitto_property *p = NULL;
	ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, "keep", "me"), 0);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, DLQ_PROP_RETRY_COUNT, "99"), 0);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, DLQ_PROP_ORIGIN_TOPIC, "forged"), 0);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, DLQ_PROP_ORIGIN_ID, "AAAAAAAAAAAAAAAA"), 0);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, DLQ_PROP_DEAD_LETTER_REASON, "forged"), 0);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, DLQ_PROP_DEAD_LETTER_CLIENT, "forged"), 0);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, DLQ_PROP_DEAD_LETTER_CAUSE, "forged"), 0);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, DLQ_PROP_DEAD_LETTER_BROKER, "forged"), 0);
	client_publish(watcher, "spoof", "x", 1, 1, p);
	mosquitto_property_free_all(&p);

	const struct it_msg *orig = client_expect(worker, "spoof", 1);
	const char *id = dlq_id_of(orig);
	client_nack(worker, id, NULL);
	const struct it_msg *copy = client_expect(worker, "spoof", 2);
	const char *copy_id = expect_retry_copy(copy, "spoof", id, 1);
	ck_assert_str_eq(msg_user(copy, "keep"), "me");
	ck_assert_uint_eq(copy->nusers, 5 + IT_PER_SEND_PROPS);

	client_nack(worker, copy_id, NULL);
	const struct it_msg *dl = client_expect(watcher, "dlq/spoof", 1);
	expect_dead_letter(dl, "spoof", id, 2, client_id(worker), "spoof", NULL);
	ck_assert_str_eq(msg_user(dl, "keep"), "me");
	ck_assert_uint_eq(dl->nusers, 11);
	ck_assert_str_eq(msg_user(dl, DLQ_PROP_DEAD_LETTER_BROKER), it_host_name());

	clients_expect_totals(worker, 2, watcher, 1);
}
END_TEST

/* Payloads are carried byte for byte: all 256 byte values, and nothing. */
START_TEST(test_binary_and_empty_payloads)
{
	struct broker *b = dlq_broker("policy bin max_attempts=2 dead_letter=dlq/bin");
	struct client *worker = client_subscribed(b, "worker", "bin");
	struct client *watcher = client_subscribed(b, "watcher", "dlq/#");
	char bytes[256];
	for(int i = 0; i < 256; i++){
		bytes[i] = (char)i;
	}
	const int lens[] = { 256, 0 };
	for(int k = 0; k < 2; k++){
		client_publish(watcher, "bin", bytes, lens[k], 1, NULL);
		const struct it_msg *orig = client_expect(worker, "bin", (size_t)k * 2 + 1);
		ck_assert_int_eq(orig->payloadlen, lens[k]);
		const char *id = expect_original(orig);
		client_nack(worker, id, NULL);
		const struct it_msg *copy = client_expect(worker, "bin", (size_t)k * 2 + 2);
		ck_assert_int_eq(copy->payloadlen, lens[k]);
		ck_assert_mem_eq(copy->payload, bytes, (size_t)lens[k]);
		client_nack(worker, expect_retry_copy(copy, "bin", id, 1), NULL);
		const struct it_msg *dl = client_expect(watcher, "dlq/bin", (size_t)k + 1);
		ck_assert_int_eq(dl->payloadlen, lens[k]);
		ck_assert_mem_eq(dl->payload, bytes, (size_t)lens[k]);
		expect_dead_letter(dl, "bin", id, 2, client_id(worker), "bin", NULL);
	}
	clients_expect_totals(worker, 4, watcher, 2);
}
END_TEST

/* A v3.1.1 publisher's message is stamped for v5 subscribers and can be
 * NACKed; a v3.1.1 subscriber gets the payload and no copy. */
START_TEST(test_v311_publisher)
{
	struct broker *b = dlq_broker("policy legacy max_attempts=2 dead_letter=dlq/legacy");
	struct client *old_pub = client_new(b, "oldpub", MQTT_PROTOCOL_V311);
	struct client *old_sub = client_new(b, "oldsub", MQTT_PROTOCOL_V311);
	struct client *worker = client_subscribed(b, "worker", "legacy");
	struct client *watcher = client_subscribed(b, "watcher", "dlq/legacy");
	client_subscribe(old_sub, "legacy", 1);
	client_subscribe(old_sub, "dlq/legacy", 1);

	client_publish_str(old_pub, "legacy", "from 3.1.1", 1);
	const struct it_msg *orig = client_expect(worker, "legacy", 1);
	ck_assert_str_eq(orig->payload, "from 3.1.1");
	const char *id = expect_original(orig);
	ck_assert_uint_eq(orig->nusers, 1); /* its first delivery: the dlq-id only */
	ck_assert_str_eq(client_expect(old_sub, "legacy", 1)->payload, "from 3.1.1");

	client_nack(worker, id, NULL);
	const struct it_msg *copy = client_expect(worker, "legacy", 2);
	ck_assert_str_eq(copy->payload, "from 3.1.1");
	const char *copy_id = expect_retry_copy(copy, "legacy", id, 1);
	ck_assert_uint_eq(copy->nusers, 4 + IT_PER_SEND_PROPS);
	ck_assert_ptr_null(copy->content_type);

	client_nack(worker, copy_id, "v3 payload rejected");
	const struct it_msg *dl = client_expect(watcher, "dlq/legacy", 1);
	ck_assert_str_eq(dl->payload, "from 3.1.1");
	expect_dead_letter(dl, "legacy", id, 2, client_id(worker), "legacy", "v3 payload rejected");
	ck_assert_uint_eq(dl->nusers, 10);
	ck_assert_ptr_null(dl->content_type);
	ck_assert_ptr_null(dl->correlation);
	ck_assert_ptr_null(dl->response_topic);
	ck_assert_int_eq(dl->payload_format, -1);
	ck_assert_str_eq(client_expect(old_sub, "dlq/legacy", 1)->payload, "from 3.1.1");

	clients_settle(worker, watcher, old_sub, old_pub);
	client_expect_exactly(worker, NULL, 2);
	client_expect_exactly(watcher, NULL, 1);
	client_expect_exactly(old_sub, "legacy", 1);
	client_expect_exactly(old_sub, NULL, 2);
	client_expect_exactly(old_pub, NULL, 0);
}
END_TEST

int main(void)
{
	return harness_run(check_suite("properties", harness_tcase("properties"), CHECK_TESTS(test_properties_preserved,
			test_reserved_names_not_carried, test_binary_and_empty_payloads, test_v311_publisher)));
}
