/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of redelivery.c through the engine (dlq__read_check and the
 * connection signals), against the fake broker port. The broker's behaviour
 * is played as Mosquitto 2.0.11 shows it (shared/MOSQUITTO-NOTES.md): a READ
 * check when a message is routed to a subscriber, from the live connection
 * or from the session object an offline client left behind; and, when a
 * persistent session reconnects, one uninterrupted run of READ checks from
 * the new connection: in-flight messages first, then queued ones. A
 * connection is a number here (the broker's context pointer).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "config/config.h"
#include "engine/dlq.h"
#include "engine_calls.h"
#include "fake_port.h"
#include "mosquitto_dlq.h"
#include "test_util.h"

static struct dlq d;
static bool d_live;

/* The broker's stored payloads: their addresses identify the messages. */
static char poison[] = "poison";
static char next_msg[] = "next";
static char other[] = "other";

static void start_with(const char *mode, const char *extra_key, const char *extra_value)
{
	struct dlq_option opts[] = {
		{"policy", "jobs/# max_attempts=3 dead_letter=dead/jobs"},
		{"redelivery_tracking", mode},
		{extra_key ? extra_key : "nack_window", extra_value ? extra_value : "300s"},
	};
	fake_reset();
	engine_start(&d, &d_live, opts, ARRAY_LEN(opts), ENGINE_NO_SYS);
}

static void start(void)
{
	start_with("allow", NULL, NULL);
}

static void stop(void)
{
	engine_stop(&d, &d_live);
	fake_reset();
}

/* A client publishes payload (the broker's stored buffer) on topic. */
static void publish_qos(const char *topic, char *payload, uint8_t qos, char id[DLQ_ID_LEN + 1])
{
	dlq__event(&d);
	const struct dlq_policy *p = dlq__policy_for(&d, topic);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(dlq__track(&d, p, topic, payload, (uint32_t)strlen(payload), qos, NULL, 0, id), 0);
}

static void publish(const char *topic, char *payload, char id[DLQ_ID_LEN + 1])
{
	publish_qos(topic, payload, 1, id);
}

/* One READ check; true when the plugin denies it (removes the message). */
static bool check_qos(const char *client, uintptr_t conn, const char *topic, const char *payload, uint8_t qos)
{
	struct dlq_read_check c = {
		.client = client, .conn = conn, .topic = topic,
		.payload = payload, .payload_len = (uint32_t)strlen(payload), .qos = qos,
	};
	return dlq__read_check(&d, &c);
}

static bool check(const char *client, uintptr_t conn, const char *payload)
{
	return check_qos(client, conn, "jobs/a", payload, 1);
}

static void subscribe(const char *client, uintptr_t conn)
{
	dlq__client_active(&d, client, conn);
}

static void leave(const char *client, uintptr_t conn)
{
	dlq__event(&d);
	dlq__client_left(&d, client, conn, false);
	dlq__client_gone(&d, client);
}

/* The common start: tracking on, "s" subscribed on connection 1, and
 * "poison" published and routed to it there. */
static void deliver_poison(char id[DLQ_ID_LEN + 1])
{
	start();
	subscribe("s", 1);
	publish("jobs/a", poison, id);
	ck_assert(!check("s", 1, poison));
}

static size_t dead_letters(const char *payload)
{
	size_t n = 0;
	for(size_t i = 0; i < fake.publish_count; i++){
		const struct fake_publish *p = &fake.publishes[i];
		if(!strcmp(p->topic, "dead/jobs") && p->payload_len == strlen(payload)
				&& !memcmp(p->payload, payload, p->payload_len)){
			n++;
		}
	}
	return n;
}

static const struct fake_publish *dead_letter(const char *payload)
{
	for(size_t i = 0; i < fake.publish_count; i++){
		const struct fake_publish *p = &fake.publishes[i];
		if(!strcmp(p->topic, "dead/jobs") && p->payload_len == strlen(payload)
				&& !memcmp(p->payload, payload, p->payload_len)){
			return p;
		}
	}
	ck_abort_msg("no dead letter for %s", payload);
	return NULL;
}

/* ------------------------------------------------------------------ */

/* Window 1: poison is sent, the client dies without PUBACK and comes back
 * three times; the fourth delivery is diverted, "next" (queued behind it)
 * is never counted, and the client is disconnected once at the next tick. */
START_TEST(window_one_crash_loop)
{
	char id[DLQ_ID_LEN + 1], id2[DLQ_ID_LEN + 1];
	deliver_poison(id);
	publish("jobs/a", next_msg, id2);
	ck_assert(!check("s", 1, next_msg));
	leave("s", 1);

	for(uintptr_t conn = 2; conn <= 3; conn++){
		ck_assert(!check("s", conn, poison));
		ck_assert(!check("s", conn, next_msg));
		leave("s", conn);
	}
	ck_assert_uint_eq(engine__totals(&d)->redeliveries, 2);
	ck_assert_uint_eq(dead_letters("poison"), 0);

	ck_assert(check("s", 4, poison));
	ck_assert(!check("s", 4, next_msg));
	ck_assert_uint_eq(engine__totals(&d)->diverted, 1);
	ck_assert_uint_eq(dead_letters("poison"), 1);
	ck_assert_uint_eq(dead_letters("next"), 0);
	const struct fake_publish *p = dead_letter("poison");
	ck_assert_str_eq(fake_header_value(p, DLQ_PROP_RETRY_COUNT), "3");
	ck_assert_str_eq(fake_header_value(p, DLQ_PROP_ORIGIN_ID), id);
	ck_assert_str_eq(fake_header_value(p, DLQ_PROP_DEAD_LETTER_CLIENT), "s");
	ck_assert_ptr_nonnull(strstr(fake_header_value(p, DLQ_PROP_DEAD_LETTER_REASON), "without acknowledgement"));

	ck_assert_uint_eq(fake.kick_count, 0);
	dlq__event(&d);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.kick_count, 1);
	ck_assert_str_eq(fake.kicks[0], "s");

	/* The reconnect the kick causes counts nothing: "next" was never
	 * sent (the broker's window was stuck). Then it is sent, and counts
	 * from the reconnect after. */
	leave("s", 4);
	ck_assert(!check("s", 5, next_msg));
	ck_assert_uint_eq(engine__totals(&d)->redeliveries, 2);
	leave("s", 5);
	ck_assert(!check("s", 6, next_msg));
	ck_assert_uint_eq(engine__totals(&d)->redeliveries, 3);
	stop();
}
END_TEST

/* deliver_poison, then "s" dies on it and comes back on connections 2
 * and 3, and at 4 the plugin removes it from the session (diverted). */
static void divert_poison(char id[DLQ_ID_LEN + 1])
{
	deliver_poison(id);
	leave("s", 1);
	for(uintptr_t conn = 2; conn <= 3; conn++){
		ck_assert(!check("s", conn, poison));
		leave("s", conn);
	}
	ck_assert(check("s", 4, poison));
}

/* A message redelivery tracking dead-lettered is settled for its client,
 * as one a deadline dead-lettered is: a NACK of it afterwards is refused,
 * saying so, and makes no second dead letter (issue 45: one dead letter
 * per message, whichever ends its chain first). */
START_TEST(a_diverted_delivery_is_settled)
{
	char id[DLQ_ID_LEN + 1];
	divert_poison(id);
	ck_assert_uint_eq(dead_letters("poison"), 1);
	dlq__event(&d);
	ck_assert_int_eq(engine_nack(&d, id, "s", true), DLQ_NACK_DIVERTED);
	ck_assert_uint_eq(dead_letters("poison"), 1);
	ck_assert_uint_eq(engine__totals(&d)->diverted, 1);
	stop();
}
END_TEST

/* A client whose connection ends between the divert and the next tick is
 * not kicked: 2.0.11 would "disconnect" its offline session a second time,
 * putting it on the session expiry list twice, and later free it with one
 * entry left (a use-after-free the soak found). The DISCONNECT of an older
 * connection of the same client (a takeover reports it late) does not
 * cancel the kick. */
START_TEST(no_kick_after_the_connection_ended)
{
	char id[DLQ_ID_LEN + 1];
	divert_poison(id);
	ck_assert_uint_eq(engine__totals(&d)->diverted, 1);
	leave("s", 4);
	dlq__event(&d);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.kick_count, 0);

	/* Another client: diverted on connection 14; a DISCONNECT of its
	 * connection 13 reported again after that leaves the kick queued. */
	subscribe("t", 11);
	publish("jobs/a", other, id);
	ck_assert(!check("t", 11, other));
	leave("t", 11);
	ck_assert(!check("t", 12, other));
	leave("t", 12);
	ck_assert(!check("t", 13, other));
	leave("t", 13);
	ck_assert(check("t", 14, other));
	dlq__event(&d);
	dlq__client_left(&d, "t", 13, false);
	dlq__event(&d);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.kick_count, 1);
	ck_assert_str_eq(fake.kicks[0], "t");
	stop();
}
END_TEST

/* Messages routed to a session while its client is away were never sent:
 * at the reconnect they are checked like the rest but never counted. */
START_TEST(queued_while_offline_is_not_counted)
{
	char id[DLQ_ID_LEN + 1];
	start();
	subscribe("s", 1);
	leave("s", 1);
	publish("jobs/a", poison, id);
	ck_assert(!check("s", 1, poison)); /* the session object left behind */
	publish("jobs/a", next_msg, id);
	ck_assert(!check("s", 1, next_msg));

	/* First reconnect: poison was queued, never sent: not counted. */
	ck_assert(!check("s", 2, poison));
	ck_assert(!check("s", 2, next_msg));
	ck_assert_uint_eq(engine__totals(&d)->redeliveries, 0);
	leave("s", 2);
	/* From then on it was sent: two more reconnects are attempts 2, 3. */
	ck_assert(!check("s", 3, poison));
	ck_assert(!check("s", 3, next_msg));
	leave("s", 3);
	ck_assert(!check("s", 4, poison));
	ck_assert(!check("s", 4, next_msg));
	leave("s", 4);
	ck_assert_uint_eq(engine__totals(&d)->redeliveries, 2);
	ck_assert(check("s", 5, poison));
	ck_assert(!check("s", 5, next_msg));
	ck_assert_uint_eq(dead_letters("poison"), 1);
	ck_assert_uint_eq(dead_letters("next"), 0);
	stop();
}
END_TEST

/* A client the plugin never saw connect is not assumed connected: its
 * first reconnect counts nothing. */
START_TEST(unknown_client_is_not_assumed_connected)
{
	char id[DLQ_ID_LEN + 1];
	start();
	publish("jobs/a", poison, id);
	ck_assert(!check("s", 1, poison));
	ck_assert(!check("s", 2, poison));
	ck_assert_uint_eq(engine__totals(&d)->redeliveries, 0);
	stop();
}
END_TEST

/* Only the first QoS>0 message of a reconnect's run counts, even when
 * that one is not tracked; and the run ends at any other event. */
START_TEST(only_the_head_of_the_run_counts)
{
	char id[DLQ_ID_LEN + 1];
	deliver_poison(id);
	publish("jobs/a", next_msg, id);
	ck_assert(!check("s", 1, next_msg));
	leave("s", 1);

	/* An untracked message heads the run: nothing counts. */
	ck_assert(!check_qos("s", 2, "other/x", other, 1));
	ck_assert(!check("s", 2, poison));
	ck_assert_uint_eq(engine__totals(&d)->redeliveries, 0);
	leave("s", 2);

	/* A QoS 0 message first does not take the head's place. */
	ck_assert(!check_qos("s", 3, "other/x", other, 0));
	ck_assert(!check("s", 3, poison));
	ck_assert_uint_eq(engine__totals(&d)->redeliveries, 1);
	leave("s", 3);

	/* The run is broken by another event: "next" is then a live routing,
	 * not the reconnect, whatever it looks like. */
	ck_assert(!check("s", 4, poison));
	dlq__event(&d);
	ck_assert(!check("s", 4, next_msg));
	ck_assert_uint_eq(engine__totals(&d)->redeliveries, 2);
	stop();
}
END_TEST

/* QoS 0 messages are never redelivered, so never counted. */
START_TEST(qos0_is_never_counted)
{
	char id[DLQ_ID_LEN + 1];
	start();
	subscribe("s", 1);
	publish_qos("jobs/a", poison, 0, id);
	ck_assert(!check_qos("s", 1, "jobs/a", poison, 0));
	for(uintptr_t conn = 1; conn < 8; conn++){
		leave("s", conn);
		ck_assert(!check_qos("s", conn + 1, "jobs/a", poison, 0));
	}
	ck_assert_uint_eq(engine__totals(&d)->redeliveries, 0);
	ck_assert_uint_eq(dead_letters("poison"), 0);
	stop();
}
END_TEST

/* Other subscribers of the same message keep their own count. */
START_TEST(other_subscribers_are_unaffected)
{
	char id[DLQ_ID_LEN + 1];
	start();
	subscribe("s", 1);
	subscribe("t", 11);
	publish("jobs/a", poison, id);
	ck_assert(!check("s", 1, poison));
	ck_assert(!check("t", 11, poison));
	for(uintptr_t conn = 2; conn <= 4; conn++){
		leave("s", conn - 1);
		(void)check("s", conn, poison);
	}
	ck_assert_uint_eq(dead_letters("poison"), 1);
	/* t reconnects once: its first redelivery, allowed. */
	leave("t", 11);
	ck_assert(!check("t", 12, poison));
	ck_assert_uint_eq(dead_letters("poison"), 1);
	stop();
}
END_TEST

/* A will's WRITE check comes from the connection that just ended: it is
 * no sign of the client being connected. */
START_TEST(a_will_after_disconnect_is_not_a_connection)
{
	char id[DLQ_ID_LEN + 1];
	deliver_poison(id);
	leave("s", 1);
	dlq__client_active(&d, "s", 1);
	ck_assert(!check("s", 2, poison));
	ck_assert_uint_eq(engine__totals(&d)->redeliveries, 1);
	stop();
}
END_TEST

/* Two copies of the message in one session (overlapping subscriptions):
 * both leave with the diversion, one dead letter is made. */
START_TEST(every_copy_in_the_run_goes_with_the_diverted_one)
{
	char id[DLQ_ID_LEN + 1];
	deliver_poison(id);
	ck_assert(!check("s", 1, poison));
	for(uintptr_t conn = 2; conn <= 3; conn++){
		leave("s", conn - 1);
		ck_assert(!check("s", conn, poison));
		ck_assert(!check("s", conn, poison));
	}
	leave("s", 3);
	ck_assert(check("s", 4, poison));
	ck_assert(check("s", 4, poison));
	ck_assert_uint_eq(dead_letters("poison"), 1);
	stop();
}
END_TEST

/* NACKs and redeliveries count toward one limit: the original is NACKed,
 * the retry copy (stored by the broker at another address) is redelivered
 * once, and its NACK then ends the chain at max_attempts. */
START_TEST(nacks_and_redeliveries_share_the_limit)
{
	char id[DLQ_ID_LEN + 1];
	deliver_poison(id);
	struct dlq_nack_result res;
	struct dlq_nack n = {.id = id, .id_len = strlen(id), .client = "s", .client_persists = true};
	dlq__event(&d);
	dlq__nack(&d, &n, &res);
	ck_assert_int_eq(res.status, DLQ_NACK_RETRIED);
	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert_str_eq(fake.publishes[0].client, "s");
	const char *copy_id = fake_header_value(&fake.publishes[0], DLQ_PROP_ID);
	ck_assert_ptr_nonnull(copy_id);
	char copy_id_buf[DLQ_ID_LEN + 1];
	snprintf(copy_id_buf, sizeof(copy_id_buf), "%s", copy_id);

	/* The broker's copy of the payload, elsewhere in memory, stored with
	 * QoS 0 as 2.0.11 stores every plugin publish to one client. */
	char stored_copy[] = "poison";
	leave("s", 1);
	ck_assert(!check_qos("s", 2, "jobs/a", stored_copy, 0));
	ck_assert_uint_eq(engine__totals(&d)->redeliveries, 1);

	struct dlq_nack n2 = {.id = copy_id_buf, .id_len = strlen(copy_id_buf), .client = "s", .client_persists = true};
	dlq__event(&d);
	dlq__nack(&d, &n2, &res);
	ck_assert_int_eq(res.status, DLQ_NACK_DEAD_LETTERED);
	ck_assert_uint_eq(res.attempt, 3);
	ck_assert_str_eq(fake_header_value(dead_letter("poison"), DLQ_PROP_RETRY_COUNT), "3");
	stop();
}
END_TEST

/* A dead letter that does not fit the memory bound is not made, and the
 * message stays in the session: it is delivered again, never dropped. */
START_TEST(kept_when_the_dead_letter_cannot_be_made)
{
	char id[DLQ_ID_LEN + 1];
	start_with("allow", "max_pending_bytes", "1KiB");
	subscribe("s", 1);
	/* The record fits; its dead letter (payload, headers, reason) does not. */
	char big[820];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	publish("jobs/a", big, id);
	ck_assert(!check("s", 1, big));
	for(uintptr_t conn = 2; conn <= 6; conn++){
		leave("s", conn - 1);
		ck_assert(!check("s", conn, big));
	}
	ck_assert_uint_eq(engine__totals(&d)->diverted, 0);
	ck_assert(fake_logged("is redelivered once more"));
	stop();
}
END_TEST

/* Deliveries leave with their record (NACK window): the bytes they took
 * are given back, and a later check finds nothing to count. */
START_TEST(deliveries_leave_with_their_record)
{
	char id[DLQ_ID_LEN + 1];
	start_with("allow", "nack_window", "10s");
	subscribe("s", 1);
	publish("jobs/a", poison, id);
	uint64_t bytes = d.ledger.bytes;
	ck_assert(!check("s", 1, poison));
	ck_assert(!check("t", 7, poison));
	ck_assert_uint_gt(d.ledger.bytes, bytes);
	ck_assert_uint_eq(d.redelivery.count, 2);
	fake.now_ms += 11000;
	dlq__tick(&d);
	ck_assert_uint_eq(d.ledger.count, 0);
	ck_assert_uint_eq(d.ledger.bytes, 0);
	ck_assert_uint_eq(d.redelivery.count, 0);
	ck_assert_uint_eq(d.redelivery.bound, 0);
	leave("s", 1);
	ck_assert(!check("s", 2, poison));
	ck_assert_uint_eq(engine__totals(&d)->redeliveries, 0);
	stop();
}
END_TEST

/* An address reused by a message the plugin did not see tracked is not
 * taken for the old record. */
START_TEST(a_reused_address_with_other_content_is_not_the_record)
{
	char id[DLQ_ID_LEN + 1];
	char buf[16] = "poison";
	start();
	subscribe("s", 1);
	publish("jobs/a", buf, id);
	ck_assert(!check("s", 1, buf));
	memcpy(buf, "potion", 7);
	leave("s", 1);
	ck_assert(!check("s", 2, buf));
	ck_assert_uint_eq(engine__totals(&d)->redeliveries, 0);
	stop();
}
END_TEST

/* A retry copy the broker stored at the address of a tracked message it
 * had freed (the address is bound to that message) is found by its
 * content all the same, and counted when it is redelivered. */
START_TEST(a_copy_at_a_freed_address_is_found_by_its_content)
{
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	char buf[16] = "alpha";
	char bravo[] = "bravo";
	start();
	subscribe("s", 1);
	publish("jobs/a", buf, a);
	ck_assert(!check("s", 1, buf));
	publish("jobs/a", bravo, b);
	ck_assert(!check("s", 1, bravo));
	ck_assert_int_eq(engine_nack(&d, b, "s", true), DLQ_NACK_RETRIED);
	/* "alpha" was acknowledged and freed; the copy of "bravo" is stored
	 * where it was. */
	memcpy(buf, "bravo", 6);
	leave("s", 1);
	ck_assert(!check("s", 2, buf));
	ck_assert_uint_eq(engine__totals(&d)->redeliveries, 1);
	stop();
}
END_TEST

/* A READ check as 2.1 gives it: with the stored message's dlq-id. */
static bool check_id(const char *client, uintptr_t conn, const char *payload, const char *id)
{
	struct dlq_read_check c = {
		.client = client, .conn = conn, .topic = "jobs/a",
		.payload = payload, .payload_len = (uint32_t)strlen(payload), .qos = 1, .id = id,
	};
	return dlq__read_check(&d, &c);
}

/* 2.1: the message is its dlq-id, wherever its payload lives; without one
 * it is not the plugin's, even at a tracked payload's address; a forged id
 * on other content is not the record. */
START_TEST(found_by_dlq_id_on_21)
{
	char id[DLQ_ID_LEN + 1];
	char elsewhere[] = "poison";
	start();
	subscribe("s", 1);
	publish("jobs/a", poison, id);
	ck_assert(!check_id("s", 1, elsewhere, id));
	leave("s", 1);
	ck_assert(!check_id("s", 2, poison, ""));
	ck_assert_uint_eq(engine__totals(&d)->redeliveries, 0);
	ck_assert(!check_id("s", 2, other, id));
	ck_assert_uint_eq(engine__totals(&d)->redeliveries, 0);
	leave("s", 2);
	for(uintptr_t conn = 3; conn <= 4; conn++){
		ck_assert(!check_id("s", conn, elsewhere, id));
		leave("s", conn);
	}
	ck_assert_uint_eq(engine__totals(&d)->redeliveries, 2);
	ck_assert(check_id("s", 5, elsewhere, id));
	ck_assert_uint_eq(engine__totals(&d)->diverted, 1);
	ck_assert_uint_eq(dead_letters("poison"), 1);
	stop();
}
END_TEST

/* With tracking off the engine answers nothing and records nothing. */
START_TEST(off_records_nothing)
{
	char id[DLQ_ID_LEN + 1];
	start_with("off", NULL, NULL);
	subscribe("s", 1);
	publish("jobs/a", poison, id);
	for(uintptr_t conn = 1; conn < 6; conn++){
		ck_assert(!check("s", conn, poison));
		leave("s", conn);
	}
	ck_assert_uint_eq(d.redelivery.count, 0);
	ck_assert_uint_eq(engine__totals(&d)->redeliveries, 0);
	stop();
}
END_TEST

int main(void)
{
	return check_run(check_suite("redelivery", tcase_create("core"), CHECK_TESTS(window_one_crash_loop,
			a_diverted_delivery_is_settled, no_kick_after_the_connection_ended, queued_while_offline_is_not_counted,
			unknown_client_is_not_assumed_connected, only_the_head_of_the_run_counts, qos0_is_never_counted,
			other_subscribers_are_unaffected, a_will_after_disconnect_is_not_a_connection,
			every_copy_in_the_run_goes_with_the_diverted_one, nacks_and_redeliveries_share_the_limit,
			kept_when_the_dead_letter_cannot_be_made, deliveries_leave_with_their_record,
			a_reused_address_with_other_content_is_not_the_record, a_copy_at_a_freed_address_is_found_by_its_content,
			off_records_nothing, found_by_dlq_id_on_21)));
}
