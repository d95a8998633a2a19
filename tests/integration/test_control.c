/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The $CONTROL/dlq/v1 API against the real broker: JSON commands with
 * several ids and echoed correlationData, replies on a v5 response topic
 * with correlation data, garbage payloads (an error reply, the sender stays
 * connected, nothing is retried), duplicate NACKs, an expired NACK window,
 * and NACKs from a v3.1.1 client.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "harness.h"
#include "test_util.h"

/* Publishes payload to topic at QoS 1, with a v5 response topic and
 * correlation data when given. */
static void send_with(struct client *c, const char *topic, const char *payload,
		const char *response_topic, const void *corr, int corr_len)
{
	mosquitto_property *p = NULL;
	if(response_topic){
		ck_assert_int_eq(mosquitto_property_add_string(&p, MQTT_PROP_RESPONSE_TOPIC, response_topic), 0);
	}
	if(corr){
		ck_assert_int_eq(mosquitto_property_add_binary(&p, MQTT_PROP_CORRELATION_DATA, corr, (uint16_t)corr_len), 0);
	}
	int rc = client_publish(c, topic, payload, (int)strlen(payload), 1, p);
	mosquitto_property_free_all(&p);
	ck_assert_msg(rc < 0x80, "the broker refused a publish to %s: %s", topic, mosquitto_reason_string(rc));
}

/* {"commands":[{"command":"nack","id":ids[i],"reason":reasons[i],"correlationData":corrs[i]}...]},
 * leaving out NULL members. The caller frees the text. */
static char *nack_command(size_t n, const char *const *ids, const char *const *reasons, const char *const *corrs)
{
	cJSON *doc = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(doc, "commands");
	for(size_t i = 0; i < n; i++){
		cJSON *cmd = cJSON_CreateObject();
		cJSON_AddStringToObject(cmd, "command", DLQ_COMMAND_NACK);
		cJSON_AddStringToObject(cmd, "id", ids[i]);
		if(reasons && reasons[i]){
			cJSON_AddStringToObject(cmd, "reason", reasons[i]);
		}
		if(corrs && corrs[i]){
			cJSON_AddStringToObject(cmd, "correlationData", corrs[i]);
		}
		cJSON_AddItemToArray(arr, cmd);
	}
	char *text = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	ck_assert_ptr_nonnull(text);
	return text;
}

START_TEST(test_json_several_ids)
{
	struct broker *b = dlq_broker("policy batch max_attempts=2 dead_letter=dlq/batch");
	struct client *worker = client_subscribed(b, "worker", "batch");
	struct client *watcher = client_subscribed(b, "watcher", "dlq/#");
	client_subscribe(worker, DLQ_RESPONSE_TOPIC, 1);
	const char *payloads[] = { "m1", "m2", "m3" };
	const char *ids[3], *copies[3];
	for(int i = 0; i < 3; i++){
		client_publish_str(watcher, "batch", payloads[i], 1);
	}
	client_expect(worker, "batch", 3);
	for(int i = 0; i < 3; i++){
		const struct it_msg *m = client_find_payload(worker, "batch", payloads[i], 0);
		ck_assert_ptr_nonnull(m);
		ids[i] = expect_original(m);
	}

	const char *reasons1[] = { "r1", NULL, NULL };
	const char *corrs1[] = { "c1", "c2", NULL };
	char *cmd = nack_command(3, ids, reasons1, corrs1);
	send_with(worker, DLQ_CONTROL_TOPIC, cmd, NULL, NULL, 0);
	free(cmd);
	cJSON *doc = expect_reply(client_expect(worker, DLQ_RESPONSE_TOPIC, 1), 3);
	for(int i = 0; i < 3; i++){
		const cJSON *e = reply_entry(doc, i);
		expect_reply_ok(e, ids[i], "retried", 1, 2);
		const char *c = json_str(e, "correlationData");
		if(corrs1[i]){
			ck_assert_msg(c && !strcmp(c, corrs1[i]), "response %d: correlationData %s, expected %s",
					i, c ? c : "(none)", corrs1[i]);
		}else{
			ck_assert_msg(cJSON_GetObjectItemCaseSensitive(e, "correlationData") == NULL,
					"response %d: correlationData present though none was sent", i);
		}
	}
	cJSON_Delete(doc);

	client_expect(worker, "batch", 6);
	for(int i = 0; i < 3; i++){
		const struct it_msg *copy = client_find(worker, "batch", DLQ_PROP_ORIGIN_ID, ids[i]);
		ck_assert_msg(copy != NULL, "no retry copy of %s", payloads[i]);
		ck_assert_str_eq(copy->payload, payloads[i]);
		copies[i] = expect_retry_copy(copy, "batch", ids[i], 1);
	}

	const char *reasons2[] = { "final", NULL, "third" };
	const char *corrs2[] = { NULL, "d2", NULL };
	cmd = nack_command(3, copies, reasons2, corrs2);
	send_with(worker, DLQ_CONTROL_TOPIC, cmd, NULL, NULL, 0);
	free(cmd);
	doc = expect_reply(client_expect(worker, DLQ_RESPONSE_TOPIC, 2), 3);
	for(int i = 0; i < 3; i++){
		expect_reply_ok(reply_entry(doc, i), copies[i], "dead-lettered", 2, 2);
	}
	ck_assert_str_eq(json_str(reply_entry(doc, 1), "correlationData"), "d2");
	cJSON_Delete(doc);

	client_expect(watcher, "dlq/batch", 3);
	for(int i = 0; i < 3; i++){
		const struct it_msg *dl = client_find(watcher, "dlq/batch", DLQ_PROP_ORIGIN_ID, ids[i]);
		ck_assert_msg(dl != NULL, "no dead letter of %s", payloads[i]);
		ck_assert_str_eq(dl->payload, payloads[i]);
		expect_dead_letter(dl, "batch", ids[i], 2, client_id(worker), "batch", reasons2[i]);
	}

	clients_settle(worker, watcher);
	client_expect_exactly(worker, "batch", 6);
	client_expect_exactly(worker, DLQ_RESPONSE_TOPIC, 2);
	client_expect_exactly(watcher, NULL, 3);
}
END_TEST

/* A request with a v5 response topic gets its reply there, with its
 * correlation data, and nothing on the shared response topic. */
START_TEST(test_response_topic_and_correlation)
{
	struct broker *b = dlq_broker("policy rt max_attempts=3 dead_letter=dlq/rt");
	struct client *worker = client_subscribed(b, "worker", "rt");
	struct client *watcher = client_subscribed(b, "watcher", DLQ_RESPONSE_TOPIC);
	client_subscribe(worker, "replies/worker", 1);
	client_subscribe(watcher, "dlq/#", 1);
	client_publish_str(watcher, "rt", "job", 1);
	const char *id = expect_original(client_expect(worker, "rt", 1));

	/* Compact NACK: a reply only because it asked for one. */
	const char corr1[] = { 'a', 'b', 'c', '\0' };
	send_with(worker, DLQ_NACK_TOPIC, id, "replies/worker", corr1, sizeof(corr1));
	const struct it_msg *r = client_expect(worker, "replies/worker", 1);
	ck_assert_msg(r->correlation && r->correlation_len == sizeof(corr1) && !memcmp(r->correlation, corr1, sizeof(corr1)),
			"reply lacks the request's correlation data");
	cJSON *doc = expect_reply(r, 1);
	expect_reply_ok(reply_entry(doc, 0), id, "retried", 1, 3);
	cJSON_Delete(doc);
	const char *copy1 = expect_retry_copy(client_expect(worker, "rt", 2), "rt", id, 1);

	/* JSON command. */
	const char *ids[] = { copy1 };
	char *cmd = nack_command(1, ids, NULL, NULL);
	send_with(worker, DLQ_CONTROL_TOPIC, cmd, "replies/worker", "xyz", 3);
	free(cmd);
	r = client_expect(worker, "replies/worker", 2);
	ck_assert_msg(r->correlation && r->correlation_len == 3 && !memcmp(r->correlation, "xyz", 3),
			"reply lacks the request's correlation data");
	doc = expect_reply(r, 1);
	expect_reply_ok(reply_entry(doc, 0), copy1, "retried", 2, 3);
	cJSON_Delete(doc);
	expect_retry_copy(client_expect(worker, "rt", 3), "rt", id, 2);

	/* An error goes to the response topic too. */
	send_with(worker, DLQ_NACK_TOPIC, "AAAAAAAAAAAAAAAA", "replies/worker", "err", 3);
	r = client_expect(worker, "replies/worker", 3);
	ck_assert_msg(r->correlation && r->correlation_len == 3 && !memcmp(r->correlation, "err", 3),
			"error reply lacks the request's correlation data");
	doc = expect_reply(r, 1);
	expect_reply_error(reply_entry(doc, 0), "unknown or expired");
	cJSON_Delete(doc);

	/* Without correlation data, the reply has none (not an empty one). */
	send_with(worker, DLQ_NACK_TOPIC, "AAAAAAAAAAAAAAAA", "replies/worker", NULL, 0);
	r = client_expect(worker, "replies/worker", 4);
	ck_assert_msg(r->correlation == NULL, "a reply to a request without correlation data has %u bytes of it",
			(unsigned)r->correlation_len);
	doc = expect_reply(r, 1);
	expect_reply_error(reply_entry(doc, 0), "unknown or expired");
	cJSON_Delete(doc);

	clients_settle(worker, watcher);
	client_expect_exactly(worker, "replies/worker", 4);
	client_expect_exactly(worker, "rt", 3);
	client_expect_exactly(watcher, NULL, 0);
}
END_TEST

/* A v5 subscriber's tracked message and the garbage to throw at the API. */
struct garbage {
	const char *topic;
	const char *payload;
	const char *error; /* text the error must contain, or NULL: any */
};

static const struct garbage garbage[] = {
	{ DLQ_CONTROL_TOPIC, "this is not json", NULL },
	{ DLQ_CONTROL_TOPIC, "", NULL },
	{ DLQ_CONTROL_TOPIC, "{\"commands\":\"nack\"}", NULL },
	{ DLQ_CONTROL_TOPIC, "{\"commands\":[\"nack\"]}", NULL },
	{ DLQ_CONTROL_TOPIC, "[]", NULL },
	{ DLQ_CONTROL_TOPIC, "{}", NULL },
	{ DLQ_CONTROL_TOPIC, "{\"commands\":[{\"command\":\"frobnicate\",\"id\":\"AAAAAAAAAAAAAAAA\"}]}", NULL },
	{ DLQ_CONTROL_TOPIC, "{\"commands\":[{\"command\":\"nack\"}]}", NULL },
	{ DLQ_CONTROL_TOPIC, "{\"commands\":[{\"command\":\"nack\",\"id\":42}]}", NULL },
	{ DLQ_CONTROL_TOPIC, "{\"commands\":[{\"command\":\"nack\",\"id\":\"short\"}]}", NULL },
	{ DLQ_CONTROL_TOPIC, "{\"commands\":[{\"command\":\"nack\",\"id\":\"AAAAAAAAAAAAAAA!\"}]}", NULL },
	{ DLQ_CONTROL_TOPIC, "{\"commands\":[{\"command\":\"nack\",\"id\":\"AAAAAAAAAAAAAAAA\"}]}", "unknown or expired" },
	{ DLQ_NACK_TOPIC, "short", NULL },
	{ DLQ_NACK_TOPIC, "", NULL },
	{ DLQ_NACK_TOPIC, "AAAAAAAAAAAAAAAAA", NULL },
	{ DLQ_NACK_TOPIC, "AAAAAAAAAAAAAAA!", NULL },
	{ DLQ_NACK_TOPIC, "{\"commands\":[]}", NULL },
	{ DLQ_NACK_TOPIC, "AAAAAAAAAAAAAAAA", "unknown or expired" },
};
#define NGARBAGE ARRAY_LEN(garbage)

START_TEST(test_garbage_payloads)
{
	struct broker *b = dlq_broker("policy g max_attempts=2 dead_letter=dlq/g");
	struct client *worker = client_subscribed(b, "worker", "g");
	struct client *watcher = client_subscribed(b, "watcher", "#");
	client_subscribe(worker, DLQ_RESPONSE_TOPIC, 1);
	client_publish_str(watcher, "g", "real", 1);
	client_expect(worker, "g", 1);

	for(size_t i = 0; i < NGARBAGE; i++){
		send_with(worker, garbage[i].topic, garbage[i].payload, NULL, NULL, 0);
		const struct it_msg *r = client_expect(worker, DLQ_RESPONSE_TOPIC, i + 1);
		cJSON *doc = msg_json(r);
		ck_assert_msg(doc != NULL, "reply to \"%s\" on %s is not JSON: %s", garbage[i].payload, garbage[i].topic, r->payload);
		const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, "responses");
		ck_assert_msg(cJSON_IsArray(arr) && cJSON_GetArraySize(arr) >= 1,
				"reply to \"%s\" on %s has no responses: %s", garbage[i].payload, garbage[i].topic, r->payload);
		expect_reply_error(cJSON_GetArrayItem(arr, 0), garbage[i].error);
		cJSON_Delete(doc);
		ck_assert_msg(client_connected(worker) && client_disconnects(worker) == 0,
				"the broker disconnected the sender of \"%s\" on %s", garbage[i].payload, garbage[i].topic);
	}
	clients_settle(worker, watcher);
	client_expect_exactly(worker, DLQ_RESPONSE_TOPIC, NGARBAGE);
	client_expect_exactly(worker, "g", 1);
	client_expect_exactly(watcher, NULL, 1);
	ck_assert_uint_eq(client_disconnects(worker), 0);

	/* The sender still publishes and receives, and the plugin still works. */
	const char *id = expect_original(client_msg(worker, "g", 0));
	client_nack(worker, id, NULL);
	expect_retry_copy(client_expect(worker, "g", 2), "g", id, 1);
	clients_settle(worker, watcher);
	client_expect_exactly(worker, DLQ_RESPONSE_TOPIC, NGARBAGE);
	client_expect_exactly(watcher, NULL, 1);
	ck_assert_uint_eq(client_disconnects(worker), 0);
}
END_TEST

/* In one JSON message, a good command is carried out and a bad one gets an
 * error entry, each in its place. */
START_TEST(test_json_mixed_good_and_bad)
{
	struct broker *b = dlq_broker("policy mix max_attempts=2 dead_letter=dlq/mix");
	struct client *worker = client_subscribed(b, "worker", "mix");
	client_subscribe(worker, DLQ_RESPONSE_TOPIC, 1);
	client_publish_str(worker, "mix", "m", 1);
	const char *id = expect_original(client_expect(worker, "mix", 1));
	char cmd[512];
	snprintf(cmd, sizeof(cmd),
			"{\"commands\":[{\"command\":\"nack\",\"id\":\"bad\",\"correlationData\":\"k1\"},"
			"{\"command\":\"nack\",\"id\":\"%s\",\"correlationData\":\"k2\"},"
			"{\"command\":\"nack\",\"id\":\"AAAAAAAAAAAAAAAA\",\"correlationData\":\"k3\"}]}", id);
	send_with(worker, DLQ_CONTROL_TOPIC, cmd, NULL, NULL, 0);
	cJSON *doc = expect_reply(client_expect(worker, DLQ_RESPONSE_TOPIC, 1), 3);
	expect_reply_error(reply_entry(doc, 0), NULL);
	expect_reply_ok(reply_entry(doc, 1), id, "retried", 1, 2);
	expect_reply_error(reply_entry(doc, 2), "unknown or expired");
	const char *k[] = { "k1", "k2", "k3" };
	for(int i = 0; i < 3; i++){
		const char *c = json_str(reply_entry(doc, i), "correlationData");
		ck_assert_msg(c && !strcmp(c, k[i]), "response %d: correlationData %s, expected %s", i, c ? c : "(none)", k[i]);
	}
	cJSON_Delete(doc);
	expect_retry_copy(client_expect(worker, "mix", 2), "mix", id, 1);
	clients_settle(worker);
	client_expect_exactly(worker, "mix", 2);
	client_expect_exactly(worker, DLQ_RESPONSE_TOPIC, 1);
}
END_TEST

/* A client NACKs a delivery once; a second NACK is refused and changes
 * nothing, in separate messages or in one. */
START_TEST(test_duplicate_nack)
{
	struct broker *b = dlq_broker("policy dup max_attempts=3 dead_letter=dlq/dup");
	struct client *worker = client_subscribed(b, "worker", "dup");
	struct client *watcher = client_subscribed(b, "watcher", "dlq/#");
	client_subscribe(worker, DLQ_RESPONSE_TOPIC, 1);

	client_publish_str(watcher, "dup", "once", 1);
	const char *id = expect_original(client_expect(worker, "dup", 1));
	client_nack(worker, id, NULL);
	expect_retry_copy(client_expect(worker, "dup", 2), "dup", id, 1);
	client_nack(worker, id, NULL);
	cJSON *doc = expect_reply(client_expect(worker, DLQ_RESPONSE_TOPIC, 1), 1);
	expect_reply_error(reply_entry(doc, 0), NULL);
	cJSON_Delete(doc);

	client_publish_str(watcher, "dup", "twice", 1);
	const struct it_msg *m = client_expect(worker, "dup", 3);
	ck_assert_str_eq(m->payload, "twice");
	const char *id2 = expect_original(m);
	const char *ids[] = { id2, id2 };
	char *cmd = nack_command(2, ids, NULL, NULL);
	send_with(worker, DLQ_CONTROL_TOPIC, cmd, NULL, NULL, 0);
	free(cmd);
	doc = expect_reply(client_expect(worker, DLQ_RESPONSE_TOPIC, 2), 2);
	expect_reply_ok(reply_entry(doc, 0), id2, "retried", 1, 3);
	expect_reply_error(reply_entry(doc, 1), NULL);
	cJSON_Delete(doc);
	expect_retry_copy(client_expect(worker, "dup", 4), "dup", id2, 1);

	clients_settle(worker, watcher);
	client_expect_exactly(worker, "dup", 4);
	client_expect_exactly(worker, DLQ_RESPONSE_TOPIC, 2);
	client_expect_exactly(watcher, NULL, 0);
	ck_assert_uint_eq(client_disconnects(worker), 0);
	ck_assert(client_connected(worker));
}
END_TEST

START_TEST(test_nack_window_expired)
{
	struct broker *b = dlq_broker("nack_window 500ms", "policy w max_attempts=3 dead_letter=dlq/w");
	struct client *worker = client_subscribed(b, "worker", "w");
	struct client *watcher = client_subscribed(b, "watcher", "dlq/#");
	client_subscribe(worker, DLQ_RESPONSE_TOPIC, 1);
	client_publish_str(watcher, "w", "early", 1);
	client_publish_str(watcher, "w", "late", 1);
	client_expect(worker, "w", 2);
	const char *early = expect_original(client_find_payload(worker, "w", "early", 0));
	const char *late = expect_original(client_find_payload(worker, "w", "late", 0));

	client_nack(worker, early, NULL);
	expect_retry_copy(client_expect(worker, "w", 3), "w", early, 1);

	it_sleep_ms(1500); /* let the 500 ms window pass */
	client_nack(worker, late, NULL);
	cJSON *doc = expect_reply(client_expect(worker, DLQ_RESPONSE_TOPIC, 1), 1);
	expect_reply_error(reply_entry(doc, 0), "unknown or expired");
	cJSON_Delete(doc);
	const char *ids[] = { late };
	char *cmd = nack_command(1, ids, NULL, NULL);
	send_with(worker, DLQ_CONTROL_TOPIC, cmd, NULL, NULL, 0);
	free(cmd);
	doc = expect_reply(client_expect(worker, DLQ_RESPONSE_TOPIC, 2), 1);
	expect_reply_error(reply_entry(doc, 0), "unknown or expired");
	cJSON_Delete(doc);

	clients_settle(worker, watcher);
	client_expect_exactly(worker, "w", 3);
	client_expect_exactly(worker, DLQ_RESPONSE_TOPIC, 2);
	client_expect_exactly(watcher, NULL, 0);
}
END_TEST

/* A v3.1.1 client can NACK an id a v5 client saw; its errors come back on
 * the shared response topic and do not disconnect it. */
START_TEST(test_nack_from_v311_client)
{
	struct broker *b = dlq_broker("policy legacy max_attempts=1 dead_letter=dlq/legacy");
	struct client *viewer = client_subscribed(b, "viewer", "legacy");
	struct client *old = client_new(b, "old", MQTT_PROTOCOL_V311);
	struct client *watcher = client_subscribed(b, "watcher", "dlq/#");
	client_subscribe(old, DLQ_RESPONSE_TOPIC, 1);
	client_publish_str(old, "legacy", "v3 job", 1);
	const char *id = expect_original(client_expect(viewer, "legacy", 1));

	client_publish_str(old, DLQ_NACK_TOPIC, "not an id", 1);
	cJSON *doc = expect_reply(client_expect(old, DLQ_RESPONSE_TOPIC, 1), 1);
	expect_reply_error(reply_entry(doc, 0), NULL);
	cJSON_Delete(doc);

	client_publish_str(old, DLQ_NACK_TOPIC, id, 1);
	const struct it_msg *dl = client_expect(watcher, "dlq/legacy", 1);
	ck_assert_str_eq(dl->payload, "v3 job");
	expect_dead_letter(dl, "legacy", id, 1, client_id(old), "legacy", NULL);

	clients_settle(old, viewer, watcher);
	client_expect_exactly(old, NULL, 1);
	client_expect_exactly(viewer, NULL, 1);
	client_expect_exactly(watcher, NULL, 1);
	ck_assert_uint_eq(client_disconnects(old), 0);
}
END_TEST

int main(void)
{
	return harness_run(check_suite("control", harness_tcase("control"), CHECK_TESTS(test_json_several_ids,
			test_response_topic_and_correlation, test_garbage_payloads, test_json_mixed_good_and_bad,
			test_duplicate_nack, test_nack_window_expired, test_nack_from_v311_client)));
}
