/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The retry and dead-letter flow against the real broker: the odd/even
 * demo, max_attempts=1, retry copies to the delivery topic (the NACKing
 * client only) or to a fixed retry topic (every subscriber), independent
 * chains, QoS levels, topics no policy covers, and a message too large to
 * track.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "harness.h"

/* The n-th (0-based) message on topic with this payload, failing if absent. */
static const struct it_msg *nth_with_payload(struct client *c, const char *topic, const char *payload, size_t k)
{
	const struct it_msg *m = client_find_payload(c, topic, payload, k);
	if(!m){
		client_dump(c, NULL);
	}
	ck_assert_msg(m != NULL, "client %s: no delivery #%zu of \"%s\" on %s", client_id(c), k + 1, payload, topic);
	return m;
}

START_TEST(test_odd_even)
{
	struct broker *b = dlq_broker("policy numbers max_attempts=3 dead_letter=dlq/numbers");
	struct client *worker = client_subscribed(b, "worker", "numbers");
	struct client *watcher = client_subscribed(b, "watcher", "dlq/#");
	struct client *pub = client_new(b, "publisher", MQTT_PROTOCOL_V5);
	client_subscribe(watcher, DLQ_RESPONSE_TOPIC, 1);

	for(int i = 1; i <= 6; i++){
		char p[8];
		snprintf(p, sizeof(p), "%d", i);
		client_publish_str(pub, "numbers", p, 1);
	}

	/* The worker processes even numbers and NACKs odd ones, every time. */
	size_t handled = 0;
	uint64_t deadline = it_now_ms() + 2 * HARNESS_WAIT_MS;
	while(client_count(watcher, "dlq/numbers") < 3){
		if(it_now_ms() > deadline){
			client_dump(worker, NULL);
			client_dump(watcher, NULL);
			ck_abort_msg("3 dead letters did not arrive within %d ms", 2 * HARNESS_WAIT_MS);
		}
		if(!client_wait(worker, "numbers", handled + 1, 50)){
			continue;
		}
		const struct it_msg *m = client_msg(worker, "numbers", handled++);
		const char *id = dlq_id_of(m);
		if(atoi(m->payload) % 2){
			client_nack(worker, id, NULL);
		}
	}
	clients_settle(worker, watcher, pub);

	client_expect_exactly(worker, "numbers", 3 * 1 + 3 * 3);
	client_expect_exactly(worker, NULL, 12);
	client_expect_exactly(watcher, "dlq/numbers", 3);
	client_expect_exactly(watcher, NULL, 3); /* no replies to compact NACKs */
	client_expect_exactly(pub, NULL, 0);

	for(int i = 1; i <= 6; i++){
		char p[8];
		snprintf(p, sizeof(p), "%d", i);
		const struct it_msg *first = nth_with_payload(worker, "numbers", p, 0);
		const char *origin = expect_original(first);
		if(i % 2 == 0){
			ck_assert_msg(client_find_payload(worker, "numbers", p, 1) == NULL, "even %d delivered twice", i);
			continue;
		}
		const char *prev = origin;
		for(unsigned k = 1; k < 3; k++){
			const struct it_msg *copy = nth_with_payload(worker, "numbers", p, k);
			const char *id = expect_retry_copy(copy, "numbers", origin, k);
			ck_assert_str_ne(id, prev);
			prev = id;
		}
		ck_assert_msg(client_find_payload(worker, "numbers", p, 3) == NULL, "odd %d delivered more than 3 times", i);
		const struct it_msg *dl = nth_with_payload(watcher, "dlq/numbers", p, 0);
		ck_assert_msg(client_find_payload(watcher, "dlq/numbers", p, 1) == NULL, "two dead letters of %d", i);
		expect_dead_letter(dl, "numbers", origin, 3, client_id(worker), "numbers", NULL);
	}

	/* Every delivery carried its own dlq-id. */
	for(size_t i = 0; i < 12; i++){
		const char *a = msg_user(client_msg(worker, "numbers", i), DLQ_PROP_ID);
		for(size_t k = i + 1; k < 12; k++){
			ck_assert_str_ne(a, msg_user(client_msg(worker, "numbers", k), DLQ_PROP_ID));
		}
	}
	ck_assert_uint_eq(client_disconnects(worker), 0);
}
END_TEST

START_TEST(test_max_attempts_one)
{
	struct broker *b = dlq_broker("policy jobs max_attempts=1 dead_letter=dlq/jobs");
	struct client *worker = client_subscribed(b, "worker", "jobs");
	struct client *watcher = client_subscribed(b, "watcher", "dlq/#");
	client_subscribe(watcher, DLQ_RESPONSE_TOPIC, 1);
	client_publish_str(watcher, "jobs", "job-17", 1);

	const struct it_msg *m = client_expect(worker, "jobs", 1);
	ck_assert_str_eq(m->payload, "job-17");
	const char *id = expect_original(m);
	client_nack(worker, id, "cannot parse job-17");

	const struct it_msg *dl = client_expect(watcher, "dlq/jobs", 1);
	ck_assert_str_eq(dl->payload, "job-17");
	expect_dead_letter(dl, "jobs", id, 1, client_id(worker), "jobs", "cannot parse job-17");

	clients_expect_totals(worker, 1, watcher, 1);
}
END_TEST

/* With retry_to=delivery (given, or by default) a copy goes to the NACKing
 * subscriber only; another subscriber of the same topic gets nothing. */
START_TEST(test_retry_to_delivery_only_nacker)
{
	struct broker *b = dlq_broker(
			"policy orders max_attempts=2 dead_letter=dlq/orders retry_to=delivery",
			"policy invoices max_attempts=2 dead_letter=dlq/invoices");
	struct client *a = client_new(b, "a", MQTT_PROTOCOL_V5);
	struct client *other = client_new(b, "other", MQTT_PROTOCOL_V5);
	struct client *watcher = client_new(b, "watcher", MQTT_PROTOCOL_V5);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	const char *topics[] = { "orders", "invoices" };
	for(int t = 0; t < 2; t++){
		client_subscribe(a, topics[t], 1);
		client_subscribe(other, topics[t], 1);
	}
	client_subscribe(watcher, "dlq/#", 1);

	for(int t = 0; t < 2; t++){
		const char *topic = topics[t];
		char dlq[32];
		snprintf(dlq, sizeof(dlq), "dlq/%s", topic);
		client_publish_str(pub, topic, "payload-1", 1);
		const struct it_msg *ma = client_expect(a, topic, 1);
		const struct it_msg *mo = client_expect(other, topic, 1);
		const char *id = expect_original(ma);
		ck_assert_str_eq(expect_original(mo), id); /* every subscriber holds the same id */

		client_nack(a, id, NULL);
		const struct it_msg *copy = client_expect(a, topic, 2);
		ck_assert_str_eq(copy->topic, topic);
		ck_assert_str_eq(copy->payload, "payload-1");
		const char *copy_id = expect_retry_copy(copy, topic, id, 1);

		client_nack(a, copy_id, "still failing");
		const struct it_msg *dl = client_expect(watcher, dlq, 1);
		ck_assert_str_eq(dl->payload, "payload-1");
		expect_dead_letter(dl, topic, id, 2, client_id(a), topic, "still failing");

		clients_settle(a, other, watcher, pub);
		client_expect_exactly(a, topic, 2);
		client_expect_exactly(other, topic, 1);
		client_expect_exactly(watcher, dlq, 1);
	}
	client_expect_exactly(pub, NULL, 0);
}
END_TEST

/* With a fixed retry topic every subscriber of it gets each copy, and any of
 * them can NACK it; nothing goes back to the original topic. */
START_TEST(test_retry_to_fixed_topic)
{
	struct broker *b = dlq_broker("policy tasks max_attempts=3 dead_letter=dlq/tasks retry_to=tasks/retry");
	struct client *a = client_subscribed(b, "a", "tasks");
	struct client *bb = client_subscribed(b, "b", "tasks");
	struct client *c = client_subscribed(b, "c", "tasks/retry");
	struct client *watcher = client_subscribed(b, "watcher", "dlq/#");
	client_subscribe(a, "tasks/retry", 1);
	client_subscribe(bb, "tasks/retry", 1);

	client_publish_str(watcher, "tasks", "task-9", 1);
	const char *id = expect_original(client_expect(a, "tasks", 1));
	ck_assert_str_eq(expect_original(client_expect(bb, "tasks", 1)), id);

	client_nack(a, id, NULL);
	const struct it_msg *ca = client_expect(a, "tasks/retry", 1);
	const struct it_msg *cb = client_expect(bb, "tasks/retry", 1);
	const struct it_msg *cc = client_expect(c, "tasks/retry", 1);
	ck_assert_str_eq(ca->payload, "task-9");
	const char *copy1 = expect_retry_copy(ca, "tasks", id, 1);
	ck_assert_str_eq(expect_retry_copy(cb, "tasks", id, 1), copy1);
	ck_assert_str_eq(expect_retry_copy(cc, "tasks", id, 1), copy1);

	client_nack(bb, copy1, NULL);
	ca = client_expect(a, "tasks/retry", 2);
	cb = client_expect(bb, "tasks/retry", 2);
	cc = client_expect(c, "tasks/retry", 2);
	const char *copy2 = expect_retry_copy(cc, "tasks", id, 2);
	ck_assert_str_ne(copy2, copy1);
	ck_assert_str_eq(expect_retry_copy(ca, "tasks", id, 2), copy2);
	ck_assert_str_eq(expect_retry_copy(cb, "tasks", id, 2), copy2);

	client_nack(c, copy2, "gave up");
	const struct it_msg *dl = client_expect(watcher, "dlq/tasks", 1);
	ck_assert_str_eq(dl->payload, "task-9");
	expect_dead_letter(dl, "tasks", id, 3, client_id(c), "tasks", "gave up");

	clients_settle(c, bb, a, watcher);
	client_expect_exactly(a, "tasks", 1);
	client_expect_exactly(a, "tasks/retry", 2);
	client_expect_exactly(bb, "tasks", 1);
	client_expect_exactly(bb, "tasks/retry", 2);
	client_expect_exactly(c, NULL, 2);
	client_expect_exactly(watcher, "dlq/#", 1);
	client_expect_exactly(watcher, "tasks", 0);
}
END_TEST

/* Two subscribers that both NACK the original start two chains. */
START_TEST(test_independent_chains)
{
	struct broker *b = dlq_broker("policy jobs max_attempts=2 dead_letter=dlq/jobs");
	struct client *a = client_subscribed(b, "a", "jobs");
	struct client *bb = client_subscribed(b, "b", "jobs");
	struct client *watcher = client_subscribed(b, "watcher", "dlq/#");
	client_publish_str(watcher, "jobs", "shared", 1);

	const char *id = expect_original(client_expect(a, "jobs", 1));
	ck_assert_str_eq(expect_original(client_expect(bb, "jobs", 1)), id);
	client_nack(a, id, NULL);
	client_nack(bb, id, NULL);
	const char *ca = expect_retry_copy(client_expect(a, "jobs", 2), "jobs", id, 1);
	const char *cb = expect_retry_copy(client_expect(bb, "jobs", 2), "jobs", id, 1);
	ck_assert_str_ne(ca, cb);

	client_nack(a, ca, "a failed");
	client_nack(bb, cb, "b failed");
	client_expect(watcher, "dlq/jobs", 2);
	const struct it_msg *da = client_find(watcher, "dlq/jobs", DLQ_PROP_DEAD_LETTER_CLIENT, client_id(a));
	const struct it_msg *db = client_find(watcher, "dlq/jobs", DLQ_PROP_DEAD_LETTER_CLIENT, client_id(bb));
	ck_assert_ptr_nonnull(da);
	ck_assert_ptr_nonnull(db);
	expect_dead_letter(da, "jobs", id, 2, client_id(a), "jobs", "a failed");
	expect_dead_letter(db, "jobs", id, 2, client_id(bb), "jobs", "b failed");
	ck_assert_str_eq(da->payload, "shared");
	ck_assert_str_eq(db->payload, "shared");

	clients_settle(a, bb, watcher);
	client_expect_exactly(a, NULL, 2);
	client_expect_exactly(bb, NULL, 2);
	client_expect_exactly(watcher, NULL, 2);
}
END_TEST

START_TEST(test_untracked_not_stamped)
{
	struct broker *b = dlq_broker("policy numbers max_attempts=3 dead_letter=dlq/numbers");
	struct client *sub = client_subscribed(b, "sub", "#");
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	const char *untracked[] = { "other", "numbers/sub", "numbersx", "dlq/numbers" };
	for(size_t i = 0; i < 4; i++){
		client_publish_str(pub, untracked[i], untracked[i], 1);
	}
	client_publish_str(pub, "numbers", "tracked", 1);
	client_expect(sub, NULL, 5);
	clients_settle(pub, sub);
	client_expect_exactly(sub, NULL, 5);
	for(size_t i = 0; i < 4; i++){
		const struct it_msg *m = client_find_payload(sub, untracked[i], untracked[i], 0);
		ck_assert_msg(m != NULL, "nothing arrived on %s", untracked[i]);
		ck_assert_uint_eq(m->nusers, 0);
	}
	expect_original(client_find_payload(sub, "numbers", "tracked", 0));
}
END_TEST

/* Messages at QoS 0, 1 and 2 are stamped and NACKable; copies keep the
 * original QoS and dead letters go out at QoS >= 1. */
START_TEST(test_qos_levels)
{
	struct broker *b = dlq_broker("policy q max_attempts=2 dead_letter=dlq/q");
	struct client *worker = client_new(b, "worker", MQTT_PROTOCOL_V5);
	struct client *watcher = client_new(b, "watcher", MQTT_PROTOCOL_V5);
	client_subscribe(worker, "q", 2);
	client_subscribe(watcher, "dlq/q", 2);
	const char *payloads[] = { "qos0", "qos1", "qos2" };
	for(int q = 0; q <= 2; q++){
		client_publish_str(watcher, "q", payloads[q], q);
		const struct it_msg *m = client_expect(worker, "q", (size_t)q * 2 + 1);
		ck_assert_str_eq(m->payload, payloads[q]);
		ck_assert_int_eq(m->qos, q);
		const char *id = expect_original(m);
		client_nack(worker, id, NULL);
		const struct it_msg *copy = client_expect(worker, "q", (size_t)q * 2 + 2);
		ck_assert_str_eq(copy->payload, payloads[q]);
		ck_assert_msg(copy->qos == q, "retry copy of a QoS %d message arrived at QoS %d", q, copy->qos);
		const char *cid = expect_retry_copy(copy, "q", id, 1);
		client_nack(worker, cid, NULL);
		const struct it_msg *dl = client_expect(watcher, "dlq/q", (size_t)q + 1);
		ck_assert_str_eq(dl->payload, payloads[q]);
		ck_assert_msg(dl->qos == (q < 1 ? 1 : q), "dead letter of a QoS %d message arrived at QoS %d", q, dl->qos);
		expect_dead_letter(dl, "q", id, 2, client_id(worker), "q", NULL);
	}
	clients_expect_totals(worker, 6, watcher, 3);
}
END_TEST

/* A message larger than max_pending_bytes is delivered, unstamped; smaller
 * ones on the same topic are still tracked. */
START_TEST(test_oversized_message_unstamped)
{
	struct broker *b = dlq_broker("max_pending_bytes 4KiB", "policy big max_attempts=1 dead_letter=dlq/big");
	struct client *worker = client_subscribed(b, "worker", "big");
	struct client *watcher = client_subscribed(b, "watcher", "dlq/#");
	static char large[16 * 1024];
	memset(large, 'x', sizeof(large));
	client_publish(watcher, "big", large, (int)sizeof(large), 1, NULL);
	const struct it_msg *m = client_expect(worker, "big", 1);
	ck_assert_int_eq(m->payloadlen, (int)sizeof(large));
	ck_assert_msg(msg_user(m, DLQ_PROP_ID) == NULL, "a message over max_pending_bytes was stamped");

	client_publish_str(watcher, "big", "small", 1);
	m = client_expect(worker, "big", 2);
	ck_assert_str_eq(m->payload, "small");
	const char *id = expect_original(m);
	client_nack(worker, id, NULL);
	const struct it_msg *dl = client_expect(watcher, "dlq/big", 1);
	ck_assert_str_eq(dl->payload, "small");
	expect_dead_letter(dl, "big", id, 1, client_id(worker), "big", NULL);

	clients_expect_totals(worker, 2, watcher, 1);
}
END_TEST

int main(void)
{
	return harness_run(check_suite("flow", harness_tcase("flow"), CHECK_TESTS(test_odd_even, test_max_attempts_one,
			test_retry_to_delivery_only_nacker, test_retry_to_fixed_topic, test_independent_chains,
			test_untracked_not_stamped, test_qos_levels, test_oversized_message_unstamped)));
}
