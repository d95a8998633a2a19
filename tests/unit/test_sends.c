/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of sends.c, exact counting as Mosquitto 2.1 shows it: every
 * PUBLISH written to a client (dlq__sent, from MESSAGE_OUT) is one attempt
 * of its record's chain for that client; READ checks carry the stored
 * message's dlq-id; at a reconnect check of a message already sent
 * max_attempts times the message leaves the session as a dead letter.
 * Against the fake broker port.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/status.h"
#include "check_suite.h"
#include "config/config.h"
#include "engine/dlq.h"
#include "engine/recount.h"
#include "engine_calls.h"
#include "fake_port.h"
#include "mosquitto_dlq.h"
#include "test_util.h"

static struct dlq d;

static void start_with(const char *mode)
{
	struct dlq_option opts[] = {
		{"policy", "jobs/# max_attempts=3 dead_letter=dead/jobs"},
		{"redelivery_tracking", mode},
	};
	fake_reset();
	engine_start(&d, NULL, opts, ARRAY_LEN(opts), ENGINE_NO_SYS | ENGINE_EXACT_COUNTING);
	ck_assert_ptr_nonnull(d.sends.slots);
}

static void stop(void)
{
	engine_stop(&d, NULL);
	fake_reset();
}

static void publish(char *payload, char id[DLQ_ID_LEN + 1])
{
	const struct dlq_policy *p = dlq__policy_for(&d, "jobs/a");
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(dlq__track(&d, p, "jobs/a", payload, (uint32_t)strlen(payload), 1, NULL, 0, id), 0);
}

/* One send; returns its attempt number (0: not tracked). */
static unsigned sent(const char *client, const char *id, const char *topic, const char *payload)
{
	struct dlq_send s;
	dlq__sent(&d, client, 0, id, strlen(id), topic, payload, (uint32_t)strlen(payload), &s);
	return s.attempt;
}

/* One send with the addresses and connection given as they are (the
 * broker's own); returns its attempt number (0: not tracked). */
static unsigned sent_at(const char *client, uintptr_t conn, const char *id, const char *topic, const char *payload)
{
	struct dlq_send s;
	dlq__sent(&d, client, conn, id, strlen(id), topic, payload, (uint32_t)strlen(payload), &s);
	return s.attempt;
}

static bool check_id(const char *client, uintptr_t conn, const char *topic, const char *payload, const char *id)
{
	struct dlq_read_check c = {
		.client = client, .conn = conn, .topic = topic,
		.payload = payload, .payload_len = (uint32_t)strlen(payload), .qos = 1, .id = id,
	};
	return dlq__read_check(&d, &c);
}

static size_t dead_letters(void)
{
	size_t n = 0;
	for(size_t i = 0; i < fake.publish_count; i++){
		if(!strcmp(fake.publishes[i].topic, "dead/jobs")) n++;
	}
	return n;
}

/* Each send to a client is one more attempt for it; another client counts
 * on its own; a forged id or other content is no record. */
START_TEST(sends_are_attempts_per_client)
{
	char id[DLQ_ID_LEN + 1];
	start_with("allow");
	publish("poison", id);
	ck_assert_uint_eq(sent("s", id, "jobs/a", "poison"), 1);
	ck_assert_uint_eq(sent("s", id, "jobs/a", "poison"), 2);
	ck_assert_uint_eq(sent("t", id, "jobs/a", "poison"), 1);
	ck_assert_uint_eq(sent("s", id, "jobs/a", "poison"), 3);
	ck_assert_uint_eq(sent("s", id, "jobs/a", "potion"), 0);
	ck_assert_uint_eq(sent("s", id, "jobs/b", "poison"), 0);
	ck_assert_uint_eq(sent("s", "AAAAAAAAAAAAAAAA", "jobs/a", "poison"), 0);
	ck_assert_uint_eq(sent("s", "short", "jobs/a", "poison"), 0);
	stop();
}
END_TEST

/* A reconnect check of a message sent fewer than max_attempts times, or
 * never sent (queued while away), keeps it; at max_attempts sends it is
 * diverted (dead letter, retry-count 3), the client is kicked once at the
 * next tick, and the message's other copy in the session goes too. */
START_TEST(diverted_at_max_attempts_sends)
{
	char id[DLQ_ID_LEN + 1], queued[DLQ_ID_LEN + 1];
	start_with("allow");
	publish("poison", id);
	publish("queued", queued);
	for(uintptr_t conn = 1; conn <= 3; conn++){
		ck_assert(!check_id("s", conn, "jobs/a", "queued", queued));
		ck_assert(!check_id("s", conn, "jobs/a", "poison", id));
		ck_assert_uint_eq(sent("s", id, "jobs/a", "poison"), (unsigned)conn);
		dlq__client_left(&d, "s", conn, false);
	}
	ck_assert_uint_eq(dead_letters(), 0);
	ck_assert(check_id("s", 4, "jobs/a", "poison", id));
	ck_assert(check_id("s", 4, "jobs/a", "poison", id));
	ck_assert(!check_id("s", 4, "jobs/a", "queued", queued));
	ck_assert(!check_id("t", 9, "jobs/a", "poison", id));
	ck_assert_uint_eq(dead_letters(), 1);
	ck_assert_uint_eq(engine__totals(&d)->diverted, 1);
	const struct fake_publish *dl = &fake.publishes[0];
	ck_assert_str_eq(fake_header_value(dl, DLQ_PROP_RETRY_COUNT), "3");
	ck_assert_ptr_nonnull(strstr(fake_header_value(dl, DLQ_PROP_DEAD_LETTER_REASON), "delivered 3 times"));
	ck_assert_str_eq(fake_header_value(dl, DLQ_PROP_DEAD_LETTER_CAUSE), DLQ_CAUSE_REDELIVERY_LIMIT);
	ck_assert_uint_eq(engine__totals(&d)->dead_letters_by_cause[DLQ_DEAD_REDELIVERY_LIMIT], 1);
	stop();
}
END_TEST

/* A check from the client's live connection (a retained message sent again
 * on a new subscription) is no reconnect: never diverted. */
START_TEST(live_connection_checks_do_not_divert)
{
	char id[DLQ_ID_LEN + 1];
	start_with("allow");
	publish("poison", id);
	dlq__client_active(&d, "s", 1);
	for(int i = 1; i <= 4; i++){
		ck_assert(!check_id("s", 1, "jobs/a", "poison", id));
		ck_assert_uint_eq(sent("s", id, "jobs/a", "poison"), (unsigned)i);
	}
	ck_assert(!check_id("s", 1, "jobs/a", "poison", id));
	ck_assert_uint_eq(dead_letters(), 0);
	/* The same client from a new connection: a reconnect. */
	ck_assert(check_id("s", 2, "jobs/a", "poison", id));
	ck_assert_uint_eq(dead_letters(), 1);
	stop();
}
END_TEST

/* A NACK's attempt is the sends so far; its retry copy starts at the
 * record's next attempt and counts its own sends from there. */
START_TEST(nack_and_copy_use_the_sends)
{
	char id[DLQ_ID_LEN + 1];
	start_with("off");
	publish("poison", id);
	ck_assert_uint_eq(sent("s", id, "jobs/a", "poison"), 1);
	ck_assert_uint_eq(sent("s", id, "jobs/a", "poison"), 2);
	struct dlq_nack_result res;
	struct dlq_nack n = {.id = id, .id_len = strlen(id), .client = "s", .client_persists = true};
	dlq__nack(&d, &n, &res);
	ck_assert_int_eq(res.status, DLQ_NACK_RETRIED);
	ck_assert_uint_eq(res.attempt, 2);
	const char *copy_id = fake_header_value(&fake.publishes[0], DLQ_PROP_ID);
	ck_assert_ptr_nonnull(copy_id);
	char copy[DLQ_ID_LEN + 1];
	snprintf(copy, sizeof(copy), "%s", copy_id);
	ck_assert_uint_eq(sent("s", copy, "jobs/a", "poison"), 3);
	/* Tracking off: counted, never removed from a session. */
	ck_assert(!check_id("s", 5, "jobs/a", "poison", copy));
	struct dlq_nack n2 = {.id = copy, .id_len = strlen(copy), .client = "s", .client_persists = true};
	dlq__nack(&d, &n2, &res);
	ck_assert_int_eq(res.status, DLQ_NACK_DEAD_LETTERED);
	ck_assert_uint_eq(res.attempt, 3);
	stop();
}
END_TEST

/* The ledger's bytes equal a recount of its records' (recount__gauges). */
static void expect_bytes_recounted(void)
{
	struct dlq_gauges total;
	recount__gauges(&d, NULL, &total);
	ck_assert_uint_eq(total.ledger_bytes, d.ledger.bytes);
	ck_assert_uint_eq(d.gauges.total.ledger_bytes, d.ledger.bytes);
}

/* An original's sends to its first client are kept in the record: no
 * allocation, no bytes. Each further client's go to a delivery in the
 * table, its bytes counted in the ledger's. All of them leave with the
 * record, and so do the clients. */
START_TEST(sends_leave_with_their_record)
{
	char id[DLQ_ID_LEN + 1];
	start_with("allow");
	publish("poison", id);
	struct dlq_record *r = d.ledger.newest;
	ck_assert_ptr_nonnull(record__sends(r));
	ck_assert_ptr_null(record__more(r));
	uint64_t bytes = d.ledger.bytes;
	ck_assert_uint_eq(bytes, record__bytes(r));
	ck_assert_uint_eq(sent("s", id, "jobs/a", "poison"), 1);
	ck_assert_uint_eq(sent("s", id, "jobs/a", "poison"), 2);
	ck_assert_uint_eq(d.ledger.bytes, bytes);
	ck_assert_uint_eq(d.redelivery.count, 0);
	ck_assert_uint_eq(record__sends(r)->sends, 2);
	expect_bytes_recounted();

	ck_assert_uint_eq(sent("t", id, "jobs/a", "poison"), 1);
	ck_assert_uint_eq(d.redelivery.count, 1);
	ck_assert_uint_eq(d.ledger.bytes, bytes + DLQ_DELIVERY_BYTES);
	ck_assert_uint_eq(sent("u", id, "jobs/a", "poison"), 1);
	ck_assert_uint_eq(sent("t", id, "jobs/a", "poison"), 2);
	ck_assert_uint_eq(sent("s", id, "jobs/a", "poison"), 3);
	ck_assert_uint_eq(sent("u", id, "jobs/a", "poison"), 2);
	ck_assert_uint_eq(sent("t", id, "jobs/a", "poison"), 3);
	ck_assert_uint_eq(d.redelivery.count, 2);
	ck_assert_uint_eq(d.ledger.bytes, bytes + 2 * DLQ_DELIVERY_BYTES);
	ck_assert_uint_eq(deliveries__table_bytes(&d.redelivery, r), 2 * DLQ_DELIVERY_BYTES);
	expect_bytes_recounted();

	fake.now_ms += 400000;
	dlq__tick(&d);
	ck_assert_uint_eq(d.ledger.count, 0);
	ck_assert_uint_eq(d.ledger.bytes, 0);
	ck_assert_uint_eq(d.gauges.total.ledger_bytes, 0);
	ck_assert_uint_eq(d.redelivery.count, 0);
	ck_assert_uint_eq(d.redelivery.client_count, 0);
	ck_assert_uint_eq(sent("s", id, "jobs/a", "poison"), 0);
	stop();
}
END_TEST

/* A client forgotten with its records gives its number back; the next
 * record's first client may be another. Records to many clients each keep
 * their own first client. */
START_TEST(first_clients_per_record)
{
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	start_with("allow");
	publish("a", a);
	publish("b", b);
	ck_assert_uint_eq(sent("s", a, "jobs/a", "a"), 1);
	ck_assert_uint_eq(sent("t", b, "jobs/a", "b"), 1);
	ck_assert_uint_eq(sent("s", b, "jobs/a", "b"), 1);
	ck_assert_uint_eq(sent("t", a, "jobs/a", "a"), 1);
	ck_assert_uint_eq(sent("t", b, "jobs/a", "b"), 2);
	ck_assert_uint_eq(sent("s", a, "jobs/a", "a"), 2);
	ck_assert_uint_eq(d.redelivery.count, 2); /* the second client's of each */
	ck_assert_uint_ne(record__sends(d.ledger.oldest)->client, record__sends(d.ledger.newest)->client);
	fake.now_ms += 400000;
	dlq__tick(&d);
	ck_assert_uint_eq(d.redelivery.client_count, 0);
	ck_assert_uint_eq(d.redelivery.free_count, 2);
	publish("c", a);
	ck_assert_uint_eq(sent("u", a, "jobs/a", "c"), 1);
	ck_assert_uint_eq(d.redelivery.free_count, 1);
	ck_assert_uint_eq(d.redelivery.count, 0);
	stop();
}
END_TEST

/* Diverted is kept per client wherever its sends are: "t"'s delivery (in
 * the table, behind "u"'s, which heads the record's list) is diverted at
 * its reconnect, "u"'s and the first client's (in the record) not; the
 * first's later at its own. */
START_TEST(each_client_diverted_on_its_own)
{
	char id[DLQ_ID_LEN + 1];
	start_with("allow");
	publish("poison", id);
	ck_assert_uint_eq(sent("s", id, "jobs/a", "poison"), 1);
	ck_assert_uint_eq(sent("u", id, "jobs/a", "poison"), 1);
	for(uintptr_t conn = 11; conn <= 13; conn++){
		ck_assert(!check_id("t", conn, "jobs/a", "poison", id));
		ck_assert_uint_eq(sent("t", id, "jobs/a", "poison"), (unsigned)(conn - 10));
		dlq__client_left(&d, "t", conn, false);
	}
	ck_assert(check_id("t", 14, "jobs/a", "poison", id));
	ck_assert(check_id("t", 14, "jobs/a", "poison", id));
	ck_assert_uint_eq(engine__totals(&d)->diverted, 1);
	ck_assert(!check_id("u", 21, "jobs/a", "poison", id));
	ck_assert_uint_eq(sent("u", id, "jobs/a", "poison"), 2);
	ck_assert_uint_eq(record__sends(d.ledger.oldest)->sends, 1);
	ck_assert(!(d.ledger.oldest->flags & DLQ_RECORD_FIRST_DIVERTED));
	dlq__client_left(&d, "s", 1, false);
	ck_assert(!check_id("s", 2, "jobs/a", "poison", id));
	ck_assert_uint_eq(sent("s", id, "jobs/a", "poison"), 2);
	dlq__client_left(&d, "s", 2, false);
	ck_assert(!check_id("s", 3, "jobs/a", "poison", id));
	ck_assert_uint_eq(sent("s", id, "jobs/a", "poison"), 3);
	dlq__client_left(&d, "s", 3, false);
	ck_assert(check_id("s", 4, "jobs/a", "poison", id));
	ck_assert(d.ledger.oldest->flags & DLQ_RECORD_FIRST_DIVERTED);
	ck_assert_uint_eq(engine__totals(&d)->diverted, 2);
	ck_assert_uint_eq(dead_letters(), 2);
	stop();
}
END_TEST

/* Sends of many records interleaved (more than the recent-sends slots, so
 * records share slots and take turns in them): each counts its own. */
/* 2.1 sends a stored message with the addresses it was tracked with: a
 * send at them with the record's id is the record's (found in the send
 * cache, not decoded); the same id with equal content elsewhere is still
 * the record's (the long way, which then remembers those addresses); the
 * same addresses with another id are not; and once the record left the
 * ledger, nothing at those addresses is it. */
START_TEST(a_send_is_found_by_its_stored_addresses)
{
	char id[DLQ_ID_LEN + 1], other[DLQ_ID_LEN + 1];
	char topic[] = "jobs/a", payload[] = "poison";
	char topic2[] = "jobs/a", payload2[] = "poison";
	start_with("allow");
	const struct dlq_policy *p = dlq__policy_for(&d, topic);
	ck_assert_int_eq(dlq__track(&d, p, topic, payload, (uint32_t)strlen(payload), 1, NULL, 0, id), 0);
	struct dlq_record *r = d.ledger.newest;
	const struct dlq_send_slot *slot = &d.sends.slots[id__prefix12(&r->id)];
	ck_assert_ptr_eq(slot->record, r);
	ck_assert_ptr_eq(slot->topic, topic);
	ck_assert_ptr_eq(slot->payload, payload);
	ck_assert_ptr_eq(send_cache__find(&d.sends, id, topic, payload, (uint32_t)strlen(payload)), r);
	ck_assert_uint_eq(sent_at("s", 0, id, topic, payload), 1);
	ck_assert_uint_eq(sent_at("s", 0, id, topic, payload), 2);
	/* Equal content at other addresses: the long way, remembered. */
	ck_assert_ptr_null(send_cache__find(&d.sends, id, topic2, payload2, (uint32_t)strlen(payload2)));
	ck_assert_uint_eq(sent_at("s", 0, id, topic2, payload2), 3);
	ck_assert_ptr_eq(slot->topic, topic2);
	ck_assert_ptr_eq(send_cache__find(&d.sends, id, topic2, payload2, (uint32_t)strlen(payload2)), r);
	/* Another length at the same addresses is not this message. */
	ck_assert_ptr_null(send_cache__find(&d.sends, id, topic2, payload2, 3));
	/* The same addresses with another (valid) id: not this record. */
	memcpy(other, id, sizeof(other));
	other[DLQ_ID_LEN - 1] = other[DLQ_ID_LEN - 1] == 'A' ? 'B' : 'A';
	ck_assert_uint_eq(sent_at("s", 0, other, topic2, payload2), 0);
	ck_assert_uint_eq(record__sends(r)->sends, 3);
	/* The record leaves the ledger, and its slot with it. */
	fake.now_ms += 400000;
	dlq__tick(&d);
	ck_assert_uint_eq(d.ledger.count, 0);
	ck_assert_ptr_null(slot->record);
	ck_assert_uint_eq(sent_at("s", 0, id, topic2, payload2), 0);
	stop();
}
END_TEST

/* A client whose sends come on the connection it is known to be on is
 * found by the connection and the broker's id string; a client forgotten
 * leaves its connection's slot, so that another client the broker later
 * puts on the same connection object counts on its own (under ASan, a
 * slot left behind would be read after its client was freed). */
START_TEST(a_client_is_found_by_its_connection)
{
	char id[DLQ_ID_LEN + 1], id2[DLQ_ID_LEN + 1];
	char s_id[] = "s", t_id[] = "t";
	const uintptr_t conn = 0x1000;
	start_with("allow");
	publish("poison", id);
	dlq__client_active(&d, s_id, conn);
	ck_assert_uint_eq(sent_at(s_id, conn, id, "jobs/a", "poison"), 1);
	const struct dlq_conn_slot *slot = NULL;
	for(size_t i = 0; i < DLQ_CONN_SLOTS; i++){
		if(d.redelivery.by_conn[i].conn == conn) slot = &d.redelivery.by_conn[i];
	}
	ck_assert_ptr_nonnull(slot);
	ck_assert_ptr_eq(slot->id, s_id);
	ck_assert_str_eq(slot->client->id, "s");
	ck_assert_uint_eq(sent_at(s_id, conn, id, "jobs/a", "poison"), 2);
	/* Another string for the same connection: found by its id, counted
	 * for the same client. */
	ck_assert_uint_eq(sent_at("s", conn, id, "jobs/a", "poison"), 3);
	/* s leaves; its record too, and with both s is forgotten. */
	dlq__client_left(&d, s_id, conn, false);
	fake.now_ms += 400000;
	dlq__tick(&d);
	ck_assert_uint_eq(d.redelivery.client_count, 0);
	ck_assert_uint_eq(slot->conn, 0);
	ck_assert_ptr_null(slot->client);
	/* t on the same connection object: its own first send. */
	publish("poison", id2);
	dlq__client_active(&d, t_id, conn);
	ck_assert_uint_eq(sent_at(t_id, conn, id2, "jobs/a", "poison"), 1);
	ck_assert_uint_eq(sent_at(t_id, conn, id2, "jobs/a", "poison"), 2);
	ck_assert_uint_eq(sent_at(s_id, 0, id2, "jobs/a", "poison"), 1);
	stop();
}
END_TEST

/* Deliveries come from slabs of DLQ_DELIVERY_SLAB and go back to the
 * system once none is left: a record sent to more clients than a slab
 * holds takes two, and gives both back when it leaves. */
START_TEST(deliveries_come_from_slabs_and_go_back)
{
	char id[DLQ_ID_LEN + 1];
	start_with("allow");
	publish("poison", id);
	const unsigned clients = DLQ_DELIVERY_SLAB + 10;
	for(unsigned i = 0; i < clients; i++){
		char c[16];
		snprintf(c, sizeof(c), "c%u", i);
		ck_assert_uint_eq(sent(c, id, "jobs/a", "poison"), 1);
		ck_assert_uint_eq(sent(c, id, "jobs/a", "poison"), 2);
	}
	ck_assert_uint_eq(d.redelivery.count, clients - 1); /* the first client's are in the record */
	ck_assert_ptr_nonnull(d.redelivery.slabs);
	ck_assert_ptr_nonnull(d.redelivery.slabs->next);
	ck_assert_ptr_null(d.redelivery.slabs->next->next);
	expect_bytes_recounted();
	fake.now_ms += 400000;
	dlq__tick(&d);
	ck_assert_uint_eq(d.redelivery.count, 0);
	ck_assert_ptr_null(d.redelivery.slabs);
	ck_assert_ptr_null(d.redelivery.spare);
	stop();
}
END_TEST

START_TEST(interleaved_sends_count_per_record)
{
	enum { N = 600 };
	static char ids[N][DLQ_ID_LEN + 1];
	static char payloads[N][16];
	start_with("allow");
	for(int i = 0; i < N; i++){
		snprintf(payloads[i], sizeof(payloads[i]), "job %d", i);
		publish(payloads[i], ids[i]);
	}
	for(unsigned round = 1; round <= 3; round++){
		for(int i = 0; i < N; i++){
			ck_assert_uint_eq(sent("s", ids[i], "jobs/a", payloads[i]), round);
			ck_assert_uint_eq(sent("s", ids[i], "jobs/a", "other"), 0);
		}
	}
	ck_assert_uint_eq(sent("t", ids[N - 1], "jobs/a", payloads[N - 1]), 1);
	stop();
}
END_TEST

int main(void)
{
	return check_run(check_suite("sends", tcase_create("core"), CHECK_TESTS(sends_are_attempts_per_client,
			diverted_at_max_attempts_sends, live_connection_checks_do_not_divert, nack_and_copy_use_the_sends,
			sends_leave_with_their_record, first_clients_per_record, each_client_diverted_on_its_own,
			interleaved_sends_count_per_record, a_send_is_found_by_its_stored_addresses,
			a_client_is_found_by_its_connection, deliveries_come_from_slabs_and_go_back)));
}
