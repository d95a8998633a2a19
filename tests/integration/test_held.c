/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Nothing lost when the client a retry copy is for goes away (issue 11,
 * items 1, 2 and 4; docs/design.md, "A targeted copy whose subscriber has
 * gone"). With retry_to=delivery the copy is published for the NACKing
 * client alone, and Mosquitto throws it away with that client's session:
 *
 * - a NACK followed promptly by a disconnect: 2.0.11 reads one packet per
 *   connection per loop pass, so the DISCONNECT arrives after the broker has
 *   handed the copy to the session that ends with it. The plugin holds the
 *   copy until the client NACKs it or its window ends, and dead-letters it
 *   when the client leaves first: docs/nack-protocol.md's `mosquitto_pub` NACK (a
 *   client that sends the NACK and goes), and a subscriber that NACKs,
 *   receives its copy and leaves;
 * - a QoS 0 message NACKed by a persistent MQTT 3.1.1 session that is away
 *   when its delayed copy is due: the broker drops QoS 0 for an offline
 *   session, so the copy goes out at QoS 1 and waits in the session;
 * - a copy larger than the subscriber's Maximum Packet Size: the broker
 *   drops it ("Dropping too large outgoing PUBLISH") and nothing tells the
 *   plugin; the subscriber gets nothing more, and the dead letter is made
 *   when it leaves (what docs/memory-and-limits.md says).
 *
 * Each dead letter says what became of the copy, as far as the plugin can
 * know: not yet taken by the broker (test_session.c makes that case
 * deterministic); taken and, on 2.1, which shows the plugin every send
 * (MESSAGE_OUT), sent to the client or not (queued behind its in-flight
 * window); taken, on 2.0, which shows no sends: "it may have received it".
 * A v5 client whose session lasts (2.1's CLIENT_OFFLINE) keeps its QoS 1
 * copies; its QoS 0 copy, received, is dead-lettered saying it was sent.
 *
 * The clients that matter speak MQTT through raw sockets (raw.h), so that a
 * test decides exactly what is written when.
 */
#include <stdio.h>
#include <string.h>

#include "check_suite.h"
#include "harness.h"
#include "raw.h"

#define POLICY "policy jobs max_attempts=3 dead_letter=dlq/jobs"
/* The reasons of a copy's dead letter when its client leaves without a
 * session (gone.c): the broker had not taken the copy; it had sent it to
 * the client (2.1); it had taken it and not sent it (2.1); it had taken it
 * (2.0, which shows no sends). */
#define SENT_REASON(client) "subscriber \"" client "\" left without a session after its retry copy was sent to it, " \
	"without NACKing or confirming it (it may have processed it, unless the broker dropped the copy as too large " \
	"for it)"
#define NOT_SENT_REASON(client) "subscriber \"" client "\" left without a session before the broker sent it its " \
	"retry copy (the broker had taken it)"
#define HELD_REASON(client) "subscriber \"" client "\" left without a session before confirming its retry copy " \
	"(it may have received it)"
/* What the dead letter of a copy the broker took says on this line, sent
 * or not (2.0 cannot tell). */
#define TAKEN_REASON(client, sent) (!BROKER_IS_21() ? HELD_REASON(client) : (sent) ? SENT_REASON(client) \
	: NOT_SENT_REASON(client))

/* How the one-shot NACKer ends its connection after the NACK. */
enum nack_exit {
	EXIT_SAME_WRITE,   /* DISCONNECT right behind the NACK, before any answer */
	EXIT_AFTER_PUBACK, /* DISCONNECT once the NACK's PUBACK came */
	EXIT_RESET,        /* the socket closed once the PUBACK came, no DISCONNECT */
};

struct scene {
	struct broker *b;
	struct client *watcher;  /* subscribed to dlq/# */
	struct client *sub;      /* subscribed to jobs: receives the originals */
};

static void scene_start(struct scene *s, const char *label)
{
	s->b = dlq_broker_at(__FILE__, __LINE__, label, POLICY, (const char *)NULL);
	s->watcher = client_new(s->b, "watcher", MQTT_PROTOCOL_V5);
	s->sub = client_new(s->b, "sub", MQTT_PROTOCOL_V5);
	client_subscribe(s->watcher, "dlq/#", 1);
	client_subscribe(s->sub, "jobs", 1);
}

/* Publishes payload on jobs; returns the dlq-id sub received (owned by sub). */
static const char *publish_job(struct scene *s, const char *payload, size_t n)
{
	client_publish_str(s->watcher, "jobs", payload, 1);
	const struct it_msg *m = client_expect(s->sub, "jobs", n);
	ck_assert_str_eq(m->payload, payload);
	return expect_original(m);
}

/* docs/nack-protocol.md's `mosquitto_pub -V 5 -q 1 -t '$CONTROL/dlq/v1/nack' -m ID`:
 * a client of its own connects, NACKs and leaves. */
static void one_shot_nack(struct scene *s, const char *client, const char *id, enum nack_exit how)
{
	struct raw_options o = { .id = client, .protocol = MQTT_PROTOCOL_V5, .clean = true };
	struct raw *r = raw_new(s->b, &o);
	raw_connect(r);
	switch(how){
		case EXIT_SAME_WRITE:
			ck_assert(raw_send_publish(r, DLQ_NACK_TOPIC, id, strlen(id), 1));
			ck_assert(raw_disconnect(r));
			break;
		case EXIT_AFTER_PUBACK:
			ck_assert_uint_lt(raw_publish(r, DLQ_NACK_TOPIC, id, strlen(id), 1), 0x80);
			ck_assert(raw_disconnect(r));
			break;
		case EXIT_RESET:
			/* Closed right behind the NACK, the broker's PUBACK would fail
			 * on the closed socket in the NACK's own pass (test_session.c). */
			ck_assert_uint_lt(raw_publish(r, DLQ_NACK_TOPIC, id, strlen(id), 1), 0x80);
			raw_close(r);
			break;
	}
	raw_free(r);
}

/* The reason of the dead letter of a retry copy the broker took for
 * client, which then left without a session: on 2.1 the plugin saw the
 * copy sent to it; 2.0 cannot see sends. */
static void held_left_reason(char *reason, size_t size, const char *client)
{
	if(BROKER_IS_21()){
		snprintf(reason, size, "subscriber \"%s\" left without a session after its retry copy was sent "
				"to it, without NACKing or confirming it (it may have processed it, unless the broker dropped the copy "
				"as too large for it)", client);
	}else{
		snprintf(reason, size, "subscriber \"%s\" left without a session before confirming its retry "
				"copy (it may have received it)", client);
	}
}

/* Five one-shot NACKs, each followed by its exit: five dead letters, one per
 * message, each naming the NACKer, and nothing else anywhere. */
static void one_shot_nacks_dead_letter(const char *label, enum nack_exit how)
{
	struct scene s;
	scene_start(&s, label);
	enum { ROUNDS = 5 };
	char ids[ROUNDS][DLQ_ID_LEN + 1];
	for(int i = 0; i < ROUNDS; i++){
		char payload[32], client[32];
		snprintf(payload, sizeof(payload), "job-%d", i);
		snprintf(client, sizeof(client), "nacker-%d", i);
		snprintf(ids[i], sizeof(ids[i]), "%s", publish_job(&s, payload, (size_t)i + 1));
		one_shot_nack(&s, client, ids[i], how);
		const struct it_msg *dl = client_expect(s.watcher, "dlq/jobs", (size_t)i + 1);
		ck_assert_str_eq(dl->payload, payload);
		char reason[320];
		/* A dead letter made before the broker took the copy (the
		 * DISCONNECT read in the NACK's own pass) says it was not
		 * delivered; once taken, 2.0 says the NACKer may have received
		 * it, 2.1 that it was sent to it (nothing else is in flight to
		 * the NACKer: the broker writes the copy at once). All are dead
		 * letters of the copy, retry-count 1. */
		const char *got = msg_user(dl, DLQ_PROP_DEAD_LETTER_REASON);
		ck_assert_ptr_nonnull(got);
		if(strstr(got, "before its retry copy was delivered")){
			snprintf(reason, sizeof(reason), "subscriber \"%s\" left without a session before its retry copy "
					"was delivered", client);
		}else{
			held_left_reason(reason, sizeof(reason), client);
		}
		expect_dead_letter(dl, "jobs", ids[i], 1, client, "jobs", reason);
	}
	clients_settle(s.watcher, s.sub);
	client_expect_exactly(s.watcher, NULL, ROUNDS);
	client_expect_exactly(s.sub, NULL, ROUNDS); /* the originals: the copies were for the NACKers */
}

/* ---- item 1: a NACK followed promptly by a disconnect ---- */

START_TEST(test_nack_and_disconnect_in_one_write_dead_letters)
{
	one_shot_nacks_dead_letter(__func__, EXIT_SAME_WRITE);
}
END_TEST

START_TEST(test_nack_then_disconnect_after_puback_dead_letters)
{
	one_shot_nacks_dead_letter(__func__, EXIT_AFTER_PUBACK);
}
END_TEST

START_TEST(test_nack_then_reset_dead_letters)
{
	one_shot_nacks_dead_letter(__func__, EXIT_RESET);
}
END_TEST

/* A subscriber that NACKs, receives its copy (libmosquitto acknowledges it)
 * and leaves within the copy's window: the plugin cannot know it processed
 * the copy, so the copy is dead-lettered (at least once), saying that it
 * was sent to it (2.1) or that it may have received it (2.0). A subscriber
 * that stays connected gets no dead letter. */
START_TEST(test_subscriber_that_leaves_after_its_copy_dead_letters)
{
	struct scene s;
	scene_start(&s, __func__);
	struct client *stays = client_new(s.b, "stays", MQTT_PROTOCOL_V5);
	client_subscribe(stays, "jobs", 1);
	char id[DLQ_ID_LEN + 1];
	snprintf(id, sizeof(id), "%s", publish_job(&s, "job-1", 1)); /* sub's, which leaves */
	client_expect(stays, "jobs", 1);

	client_nack(s.sub, id, NULL);
	client_nack(stays, id, NULL);
	const struct it_msg *copy = client_expect(s.sub, "jobs", 2);
	expect_retry_copy(copy, "jobs", id, 1);
	expect_retry_copy(client_expect(stays, "jobs", 2), "jobs", id, 1);
	clients_settle(s.watcher, s.sub, stays);
	client_expect_exactly(s.watcher, NULL, 0);

	char sub_id[64];
	snprintf(sub_id, sizeof(sub_id), "%s", client_id(s.sub));
	client_free(s.sub);
	const struct it_msg *dl = client_expect(s.watcher, "dlq/jobs", 1);
	char reason[320];
	held_left_reason(reason, sizeof(reason), sub_id);
	expect_dead_letter(dl, "jobs", id, 1, sub_id, "jobs", reason);
	clients_settle(s.watcher, stays);
	client_expect_exactly(s.watcher, NULL, 1);
	client_expect_exactly(stays, NULL, 2);
}
END_TEST

/* A copy the broker took and could not send yet: with an in-flight window
 * of 1 (max_inflight_messages 1) and the original still unacknowledged,
 * the NACKer's copy waits in its session behind the original. The NACKer
 * leaves (the copy never reached it): on 2.1 the dead letter says the
 * broker had not sent it the copy; 2.0 cannot see sends, and says it may
 * have received it. */
START_TEST(test_copy_queued_behind_the_window_dead_letters_when_its_client_leaves)
{
	struct scene s;
	s.b = broker_new(__func__);
	broker_conf(s.b, "max_inflight_messages 1");
	broker_plugin(s.b);
	broker_conf(s.b, "plugin_opt_" POLICY);
	broker_start(s.b);
	s.watcher = client_new(s.b, "watcher", MQTT_PROTOCOL_V5);
	s.sub = client_new(s.b, "sub", MQTT_PROTOCOL_V5);
	client_subscribe(s.watcher, "dlq/#", 1);
	client_subscribe(s.sub, "jobs", 1);
	struct raw_options o = { .id = "q", .protocol = MQTT_PROTOCOL_V5, .clean = true };
	struct raw *q = raw_new(s.b, &o);
	raw_connect(q);
	ck_assert_uint_eq(raw_subscribe(q, "jobs", 1), 1);

	const char *id = publish_job(&s, "job-1", 1);
	const struct raw_msg *orig = raw_expect(q);
	ck_assert_str_eq(orig->payload, "job-1");
	ck_assert_int_eq(orig->qos, 1);
	/* Not acknowledged: the window of 1 stays full. The NACK's PUBACK
	 * comes in its own loop pass; the broker takes the copy at the top of
	 * the next one, which two ping round trips (each read in a pass of its
	 * own) prove has come and gone. */
	ck_assert_uint_lt(raw_publish(q, DLQ_NACK_TOPIC, id, strlen(id), 1), 0x80);
	ck_assert(raw_ping(q, HARNESS_WAIT_MS));
	ck_assert(raw_ping(q, HARNESS_WAIT_MS));
	clients_settle(s.watcher, s.sub);
	raw_drain(q, HARNESS_SETTLE_MS);
	ck_assert_uint_eq(raw_count(q, "jobs", NULL), 1); /* the copy waits behind the original */
	client_expect_exactly(s.watcher, NULL, 0);

	ck_assert(raw_disconnect(q));
	const struct it_msg *dl = client_expect(s.watcher, "dlq/jobs", 1);
	ck_assert_str_eq(dl->payload, "job-1");
	expect_dead_letter(dl, "jobs", id, 1, "q", "jobs", TAKEN_REASON("q", false));
	clients_settle(s.watcher, s.sub);
	client_expect_exactly(s.watcher, NULL, 1);
	raw_free(q);
}
END_TEST

/* The case of issue 21: an MQTT v5 subscriber with a session that lasts
 * (clean start false, expiry 600 s) and a QoS 0 subscription NACKs on its
 * first connection (the plugin does not know yet that its session lasts),
 * receives its QoS 0 retry copy and goes offline without NACKing it. 2.1
 * reports the session as lasting (CLIENT_OFFLINE): it keeps no QoS 0
 * copy, so the copy is dead-lettered, saying that it was sent to the
 * subscriber. 2.0 sees a v5 session as ending at disconnect (without
 * plugin_opt_v5_sessions_persist): the copy is dead-lettered as one the
 * subscriber may have received. */
START_TEST(test_qos0_copy_received_before_going_offline_dead_letters)
{
	struct scene s;
	scene_start(&s, __func__);
	struct client *r = client_new_session(s.b, "r-s", MQTT_PROTOCOL_V5, 600);
	client_subscribe(r, "jobs", 0);
	const char *id = publish_job(&s, "job-1", 1);
	const struct it_msg *orig = client_expect(r, "jobs", 1);
	ck_assert_str_eq(orig->payload, "job-1");
	ck_assert_int_eq(orig->qos, 0);
	client_nack(r, id, NULL);
	const struct it_msg *copy = client_expect(r, "jobs", 2);
	expect_retry_copy(copy, "jobs", id, 1);
	if(BROKER_IS_21()) ck_assert_int_eq(copy->qos, 0);
	clients_settle(s.watcher, s.sub, r);
	client_expect_exactly(s.watcher, NULL, 0);

	client_free(r); /* DISCONNECT: the session lasts */
	const struct it_msg *dl = client_expect(s.watcher, "dlq/jobs", 1);
	ck_assert_str_eq(dl->payload, "job-1");
	expect_dead_letter(dl, "jobs", id, 1, "r-s", "jobs", BROKER_IS_21()
			? "subscriber \"r-s\" went offline after its QoS 0 retry copy was sent to it, without NACKing or "
			"confirming it (it may have processed it, unless the broker dropped the copy as too large for it)"
			: HELD_REASON("r-s"));
	clients_settle(s.watcher, s.sub);
	client_expect_exactly(s.watcher, NULL, 1);
}
END_TEST

/* ---- item 2: a QoS 0 copy for an offline persistent session ---- */

/* An MQTT 3.1.1 client with clean_session=false NACKs a QoS 0 message with
 * a 300 ms delay and is away for 1 s. 2.0: on its return the copy is there
 * (at QoS 1, so that the broker kept it), and there is no dead letter. 2.1
 * shows the plugin the subscription, granted QoS 0: the copy would go at
 * QoS 0, which the broker keeps for no offline session, as it keeps none
 * of its own deliveries at QoS 0, so the copy is dead-lettered when due
 * and nothing comes on the client's return (docs/semantics.md). A v3.1.1
 * client receives no properties: it NACKs the id an observer received. */
START_TEST(test_qos0_copy_waits_for_an_offline_persistent_session)
{
	struct scene s;
	scene_start(&s, __func__);
	struct raw_options o = { .id = "w", .protocol = MQTT_PROTOCOL_V311, .clean = false };
	struct raw *w = raw_new(s.b, &o);
	raw_connect(w);
	ck_assert_uint_lt(raw_subscribe(w, "jobs", 0), 0x80);

	client_publish_str(s.watcher, "jobs", "job-0", 0);
	const char *id = expect_original(client_expect(s.sub, "jobs", 1));
	const struct raw_msg *orig = raw_expect(w);
	ck_assert_str_eq(orig->payload, "job-0");
	ck_assert_int_eq(orig->qos, 0);

	char nack[160];
	snprintf(nack, sizeof(nack), "{\"commands\":[{\"command\":\"nack\",\"id\":\"%s\",\"delay\":\"300ms\"}]}", id);
	ck_assert_uint_lt(raw_publish(w, DLQ_CONTROL_TOPIC, nack, strlen(nack), 1), 0x80);
	ck_assert(raw_disconnect(w));
	it_sleep_ms(1000); /* away for 1 s: the copy is due while the session is offline */

	if(BROKER_IS_21()){
		const struct it_msg *dl = client_expect(s.watcher, "dlq/jobs", 1);
		ck_assert_str_eq(dl->payload, "job-0");
		expect_dead_letter(dl, "jobs", id, 1, "w", "jobs", "subscriber \"w\" is offline and its subscription "
				"to \"jobs\" is QoS 0: the broker keeps no QoS 0 message for an offline session");
		ck_assert_msg(raw_connect(w), "no session present on returning to a persistent session");
		clients_settle(s.watcher, s.sub);
		raw_drain(w, HARNESS_SETTLE_MS);
		client_expect_exactly(s.watcher, NULL, 1);
		ck_assert_uint_eq(raw_count(w, "jobs", NULL), 1);
		raw_free(w);
		return;
	}
	ck_assert_msg(raw_connect(w), "no session present on returning to a persistent session");
	const struct raw_msg *copy = NULL;
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	while(copy == NULL && it_now_ms() < deadline){
		const struct raw_msg *m;
		if(raw_next(w, HARNESS_WAIT_MS, &m) != RAW_PUBLISH) break;
		if(m->qos > 0) ck_assert(raw_puback(w, m->mid));
		if(!strcmp(m->topic, "jobs")) copy = m; /* else the NACK's reply */
	}
	ck_assert_msg(copy != NULL, "the persistent session got no retry copy on its return");
	ck_assert_str_eq(copy->payload, "job-0");
	ck_assert_int_eq(copy->qos, 1);
	clients_settle(s.watcher, s.sub);
	raw_drain(w, HARNESS_SETTLE_MS);
	client_expect_exactly(s.watcher, NULL, 0);
	ck_assert_uint_eq(raw_count(w, "jobs", NULL), 2);
	raw_free(w);
}
END_TEST

/* ---- item 4: a copy larger than the subscriber's Maximum Packet Size ---- */

/* The original fits the subscriber's Maximum Packet Size; its retry copy,
 * 64 bytes + the topic larger (retry-count, origin-topic, origin-id), does
 * not. The broker drops the copy for that subscriber and tells the plugin
 * nothing: the subscriber gets nothing more while connected. When it
 * leaves, the held copy becomes a dead letter. 2.1.2 shows the plugin the
 * send (MESSAGE_OUT) before it checks the size (lib/send_publish.c), and
 * the plugin knows this client's Maximum Packet Size only for a session the
 * broker persists (docs/memory-and-limits.md): the reason says the copy was
 * sent, unless the broker dropped it as too large. */
START_TEST(test_copy_over_the_maximum_packet_size_dead_letters_when_its_client_leaves)
{
	struct scene s;
	scene_start(&s, __func__);
	char payload[101];
	memset(payload, 'x', 100);
	payload[100] = '\0';
	/* The original: fixed header 1 + remaining-length 2, topic 2 + 4,
	 * packet id 2, properties 1 + 27 (dlq-id), payload 100: 139 bytes. Its
	 * copy adds 17 + 21 + 30 = 68: 207 bytes. */
	struct raw_options o = { .id = "small", .protocol = MQTT_PROTOCOL_V5, .clean = true, .max_packet_size = 160 };
	struct raw *small = raw_new(s.b, &o);
	raw_connect(small);
	ck_assert_uint_lt(raw_subscribe(small, "jobs", 1), 0x80);

	const char *id = publish_job(&s, payload, 1);
	const struct raw_msg *orig = raw_expect(small);
	ck_assert_str_eq(orig->payload, payload);
	ck_assert_pstr_eq(raw_user(orig, DLQ_PROP_ID), id);
	ck_assert(raw_puback(small, orig->mid));
	ck_assert_uint_lt(raw_publish(small, DLQ_NACK_TOPIC, id, strlen(id), 1), 0x80);

	clients_settle(s.watcher, s.sub);
	raw_drain(small, HARNESS_SETTLE_MS);
	ck_assert_uint_eq(raw_count(small, "jobs", NULL), 1); /* the copy never came */
	client_expect_exactly(s.watcher, NULL, 0);

	ck_assert(raw_disconnect(small));
	const struct it_msg *dl = client_expect(s.watcher, "dlq/jobs", 1);
	ck_assert_str_eq(dl->payload, payload);
	expect_dead_letter(dl, "jobs", id, 1, "small", "jobs", TAKEN_REASON("small", true));
	clients_settle(s.watcher, s.sub);
	client_expect_exactly(s.watcher, NULL, 1);
	raw_free(small);
}
END_TEST

int main(void)
{
	return harness_run(check_suite("held", harness_tcase("held"),
			CHECK_TESTS(test_nack_and_disconnect_in_one_write_dead_letters,
			test_nack_then_disconnect_after_puback_dead_letters, test_nack_then_reset_dead_letters,
			test_subscriber_that_leaves_after_its_copy_dead_letters,
			test_copy_queued_behind_the_window_dead_letters_when_its_client_leaves,
			test_qos0_copy_received_before_going_offline_dead_letters,
			test_qos0_copy_waits_for_an_offline_persistent_session,
			test_copy_over_the_maximum_packet_size_dead_letters_when_its_client_leaves)));
}
