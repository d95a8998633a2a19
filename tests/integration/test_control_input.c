/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Hostile control input against the real broker (issue 11, items 5-7): a
 * NACK whose v5 response topic is not a topic name ("", "#", "+", "a/#")
 * is answered on the default reply topic, saying why, and nothing is
 * published on the bad name; an unknown command of multibyte characters is
 * echoed as valid UTF-8; a "delay" of "5ms\u0000" is refused naming the
 * member, and the message stays NACKable. Brokers from 2.0.20 on (2.1
 * too) refuse such a response topic themselves before the plugin sees it:
 * there the tests show the broker's refusal and that the plugin lost
 * nothing by it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "harness.h"
#include "raw.h"
#include "test_util.h"

/* Publishes payload to topic at QoS 1 with a v5 response topic (NULL:
 * none) and correlation data. */
static void send_with(struct client *c, const char *topic, const char *payload, const char *response_topic)
{
	mosquitto_property *p = NULL;
	if(response_topic){
		ck_assert_int_eq(mosquitto_property_add_string(&p, MQTT_PROP_RESPONSE_TOPIC, response_topic), 0);
		ck_assert_int_eq(mosquitto_property_add_binary(&p, MQTT_PROP_CORRELATION_DATA, "k1", 2), 0);
	}
	int rc = client_publish(c, topic, payload, (int)strlen(payload), 1, p);
	mosquitto_property_free_all(&p);
	ck_assert_msg(rc < 0x80, "the broker refused a publish to %s: %s", topic, mosquitto_reason_string(rc));
}

/* Mosquitto 2.0.20 and later, 2.1 included, check a PUBLISH's response
 * topic as they read the packet (ChangeLog 2.0.20: "Don't allow invalid
 * response topic values"; 2.1.2's mosquitto_property_check_all applies
 * mosquitto_pub_topic_check to it): an empty one or one with a wildcard
 * is a protocol error, the broker closes the connection and no plugin
 * sees the message. Their client libraries refuse to send one at all
 * (MOSQ_ERR_PROTOCOL). The plugin's own check answers on older brokers,
 * such as Debian 12's 2.0.11. */
static bool broker_checks_response_topics(void)
{
	return broker_version() >= 2000020;
}

/* Sends payload to topic at QoS 1 from r, with its response topic, and
 * expects the broker to close the connection for it, sending r nothing. */
static void expect_refused(struct raw *r, const char *topic, const char *payload)
{
	size_t before = raw_count(r, NULL, NULL);
	ck_assert(raw_send_publish(r, topic, payload, strlen(payload), 1));
	const struct raw_msg *m = NULL;
	enum raw_event e = raw_next(r, HARNESS_WAIT_MS, &m);
	ck_assert_msg(e == RAW_CLOSED, "mosquitto %d took a PUBLISH to %s with an invalid response topic: %s%s%s",
			broker_version(), topic, raw_event_name(e), m ? " on " : "", m ? m->topic : "");
	ck_assert_uint_eq(raw_count(r, NULL, NULL), before);
}

/* A strict check, by the client library's own rules (not the plugin's):
 * the whole payload is UTF-8 an MQTT peer and a strict JSON parser take. */
static void expect_utf8(const struct it_msg *m)
{
	ck_assert_msg(mosquitto_validate_utf8(m->payload, m->payloadlen) == MOSQ_ERR_SUCCESS,
			"reply is not valid UTF-8: %s", m->payload);
}

START_TEST(test_invalid_response_topics_get_the_default_reply_topic)
{
	struct broker *b = dlq_broker("policy jobs max_attempts=3 dead_letter=dlq/jobs");
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	/* A raw client: libmosquitto will not send an empty response topic,
	 * and a raw one shows exactly what the broker sends back. */
	struct raw_options o = { .id = "worker", .protocol = MQTT_PROTOCOL_V5, .clean = true };
	struct raw *w = raw_new(b, &o);
	raw_connect(w);
	ck_assert_uint_lt(raw_subscribe(w, "jobs", 1), 0x80);
	client_publish_str(pub, "jobs", "m1", 1);
	const struct raw_msg *orig = raw_expect(w);
	ck_assert_str_eq(orig->topic, "jobs");
	raw_puback(w, orig->mid);
	char id[DLQ_ID_LEN + 1];
	snprintf(id, sizeof(id), "%s", raw_user(orig, DLQ_PROP_ID));

	static const char *const bad[] = { "", "#", "+", "a/#" };
	const struct raw_msg *copy = NULL;
	if(broker_checks_response_topics()){
		/* The broker refuses each NACK, the real one too; the plugin
		 * never sees them, and the message stays the worker's. */
		for(size_t i = 0; i <= ARRAY_LEN(bad); i++){
			bool real = i == ARRAY_LEN(bad);
			raw_set_response_topic(w, real ? "a/#" : bad[i]);
			expect_refused(w, DLQ_NACK_TOPIC, real ? id : "AAAAAAAAAAAAAAAA");
			raw_connect(w);
		}
		ck_assert_uint_lt(raw_subscribe(w, "jobs", 1), 0x80);
		raw_set_response_topic(w, "replies/worker");
		ck_assert_uint_lt(raw_publish(w, DLQ_NACK_TOPIC, id, DLQ_ID_LEN, 1), 0x80);
		const struct raw_msg *m = raw_expect(w);
		if(!strcmp(m->topic, "jobs")){
			copy = m;
			raw_puback(w, m->mid);
			m = raw_expect(w);
		}
		ck_assert_msg(!strcmp(m->topic, "replies/worker"), "a reply on \"%s\"", m->topic);
		if(m->qos) raw_puback(w, m->mid);
		cJSON *doc = cJSON_Parse(m->payload);
		ck_assert_msg(doc != NULL, "%s", m->payload);
		ck_assert_msg(json_str(doc, "responseTopicError") == NULL, "%s", m->payload);
		expect_reply_ok(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "responses"), 0), id,
				"retried", 1, 3);
		cJSON_Delete(doc);
	}else{
		for(size_t i = 0; i <= ARRAY_LEN(bad); i++){
			/* docs/nack-protocol.md's compact NACK; an id never issued, so that each
			 * is answered, and last the real one. */
			bool real = i == ARRAY_LEN(bad);
			const char *topic = real ? "a/#" : bad[i];
			raw_set_response_topic(w, topic);
			ck_assert_uint_lt(raw_publish(w, DLQ_NACK_TOPIC, real ? id : "AAAAAAAAAAAAAAAA", DLQ_ID_LEN, 1), 0x80);
			const struct raw_msg *m = raw_expect(w);
			if(real && !strcmp(m->topic, "jobs")){
				copy = m; /* the retry copy may come before the reply */
				raw_puback(w, m->mid);
				m = raw_expect(w);
			}
			ck_assert_msg(!strcmp(m->topic, DLQ_RESPONSE_TOPIC), "a reply on \"%s\"", m->topic);
			if(m->qos) raw_puback(w, m->mid);
			cJSON *doc = cJSON_Parse(m->payload);
			ck_assert_msg(doc != NULL, "%s", m->payload);
			const char *why = json_str(doc, "responseTopicError");
			char want[64];
			snprintf(want, sizeof(want), "response topic \"%s\" ", topic);
			ck_assert_msg(why && strstr(why, want) && strstr(why, "replied on " DLQ_RESPONSE_TOPIC), "%s", m->payload);
			const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "responses"), 0);
			if(real){
				expect_reply_ok(e, id, "retried", 1, 3);
			}else{
				expect_reply_error(e, "unknown or expired dlq-id");
			}
			cJSON_Delete(doc);
		}
	}
	/* The NACK was carried out: the retry copy comes. */
	if(copy == NULL){
		copy = raw_expect(w);
		raw_puback(w, copy->mid);
	}
	ck_assert_str_eq(copy->topic, "jobs");
	ck_assert_str_eq(raw_user(copy, DLQ_PROP_ORIGIN_ID), id);
	raw_drain(w, HARNESS_SETTLE_MS);
	/* Nothing else came, on any topic, and the worker is still connected:
	 * the original, a reply to each NACK the plugin saw and the copy. */
	ck_assert_uint_eq(raw_count(w, NULL, NULL), broker_checks_response_topics() ? 3 : 7);
	ck_assert(!raw_closed(w));
	raw_free(w);
}
END_TEST

START_TEST(test_an_unknown_command_is_echoed_as_valid_utf8)
{
	struct broker *b = dlq_broker("policy jobs max_attempts=3 dead_letter=dlq/jobs");
	struct client *ops = client_new(b, "ops", MQTT_PROTOCOL_V5);
	/* The issue's exact input. */
	send_with(ops, DLQ_CONTROL_TOPIC, "{\"commands\":[{\"command\":\"a\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
			"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
			"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
			"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"}]}", NULL);
	const struct it_msg *m = client_expect(ops, DLQ_RESPONSE_TOPIC, 1);
	expect_utf8(m);
	cJSON *doc = expect_reply(m, 1);
	const char *err = json_str(reply_entry(doc, 0), "error");
	ck_assert_msg(err && strstr(err, "unknown command \"a\xc3\xa9") && strstr(err, "\xc3\xa9...\""), "%s", m->payload);
	cJSON_Delete(doc);
	/* A response topic of multibyte characters that is refused is echoed
	 * cut the same way. A raw client sends it: the client libraries of
	 * 2.0.20 and later will not. */
	char topic[256] = "r/";
	for(int i = 0; i < 40; i++) strcat(topic, "\xe2\x82\xac");
	strcat(topic, "/#");
	struct raw_options o = { .id = "ops-raw", .protocol = MQTT_PROTOCOL_V5, .clean = true };
	struct raw *r = raw_new(b, &o);
	raw_connect(r);
	raw_set_response_topic(r, topic);
	static const char empty[] = "{\"commands\":[]}";
	if(broker_checks_response_topics()){
		expect_refused(r, DLQ_CONTROL_TOPIC, empty);
	}else{
		ck_assert_uint_lt(raw_publish(r, DLQ_CONTROL_TOPIC, empty, strlen(empty), 1), 0x80);
		const struct raw_msg *reply = raw_expect(r);
		ck_assert_str_eq(reply->topic, DLQ_RESPONSE_TOPIC);
		ck_assert_msg(mosquitto_validate_utf8(reply->payload, (int)reply->payloadlen) == MOSQ_ERR_SUCCESS,
				"reply is not valid UTF-8: %s", reply->payload);
		cJSON *d = cJSON_Parse(reply->payload);
		ck_assert_msg(d != NULL, "%s", reply->payload);
		const char *why = json_str(d, "responseTopicError");
		ck_assert_msg(why && strstr(why, "response topic \"r/\xe2\x82\xac") && strstr(why, "\xe2\x82\xac...\""),
				"%s", reply->payload);
		cJSON_Delete(d);
	}
	raw_free(r);
	/* Nothing else reached the libmosquitto client. */
	clients_settle(ops);
	client_expect_exactly(ops, DLQ_RESPONSE_TOPIC, 1);
}
END_TEST

START_TEST(test_a_delay_holding_u0000_is_refused)
{
	struct broker *b = dlq_broker("policy jobs max_attempts=3 dead_letter=dlq/jobs");
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *worker = client_subscribed(b, "worker", "jobs");
	client_publish_str(pub, "jobs", "m1", 1);
	const char *id = expect_original(client_expect(worker, "jobs", 1));

	char cmd[256];
	snprintf(cmd, sizeof(cmd), "{\"commands\":[{\"command\":\"nack\",\"id\":\"%s\",\"delay\":\"5ms\\u0000\"}]}", id);
	send_with(worker, DLQ_CONTROL_TOPIC, cmd, NULL);
	cJSON *doc = expect_reply(client_expect(worker, DLQ_RESPONSE_TOPIC, 1), 1);
	ck_assert_str_eq(json_str(reply_entry(doc, 0), "error"), "\"delay\" must not contain a NUL character (\\u0000)");
	cJSON_Delete(doc);
	clients_settle(worker, pub);
	client_expect_exactly(worker, "jobs", 1); /* no retry copy */

	/* The message is still the worker's to NACK. */
	snprintf(cmd, sizeof(cmd), "{\"commands\":[{\"command\":\"nack\",\"id\":\"%s\",\"delay\":\"5ms\"}]}", id);
	send_with(worker, DLQ_CONTROL_TOPIC, cmd, NULL);
	doc = expect_reply(client_expect(worker, DLQ_RESPONSE_TOPIC, 2), 1);
	expect_reply_ok(reply_entry(doc, 0), id, "retried", 1, 3);
	cJSON_Delete(doc);
	expect_retry_copy(client_expect(worker, "jobs", 2), "jobs", id, 1);
}
END_TEST

int main(void)
{
	return harness_run(check_suite("control_input", harness_tcase("control_input"),
			CHECK_TESTS(test_invalid_response_topics_get_the_default_reply_topic,
			test_an_unknown_command_is_echoed_as_valid_utf8, test_a_delay_holding_u0000_is_refused)));
}
