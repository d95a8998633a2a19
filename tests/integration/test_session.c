/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A retry copy whose subscriber loses its session before the broker has
 * handed the copy over (docs/design.md, "A targeted copy whose subscriber has
 * gone"). The broker takes a plugin's publishes at the top of its next loop
 * pass and drops one addressed to a client id it no longer knows, so the
 * client must leave in the same pass as its NACK. Two ways make that
 * deterministic, with the broker frozen (SIGSTOP) while the client acts and
 * thawed (SIGCONT) after, so that it reads everything in one pass:
 *
 * - a session takeover: "w" NACKs on connection 1, and connection 2, already
 *   accepted, sends a CONNECT with the same client id. epoll reports the two
 *   sockets in the order they became readable: the NACK is read first, then
 *   the CONNECT, which disconnects connection 1's session in the same pass.
 * - a NACK then a closed socket: the broker reads the NACK and its PUBACK
 *   fails to reach the closed socket, which disconnects "w" in the same pass.
 *   Nothing called "w" is left to take the copy: without the plugin's dead
 *   letter it would be lost.
 *
 * "w" speaks MQTT through a raw socket (raw.h): the harness's libmosquitto
 * clients reconnect on their own and wait for every acknowledgement, and a
 * frozen broker sends none. A v3.1.1 "w" receives no properties, so it NACKs
 * the dlq-id a v5 observer of the same message received (the plugin takes a
 * NACK of a known id from any client). Controls: a v3.1.1 client with a
 * persistent session keeps the copy in its session and gets no dead letter.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "check_suite.h"
#include "harness.h"
#include "raw.h"

#define POLICY "policy jobs max_attempts=2 dead_letter=dlq/jobs"
#define CLIENT "w"
#define GONE_REASON "subscriber \"" CLIENT "\" left without a session before its retry copy was delivered"

/* ---- freezing the broker ---- */

/* The broker's PID, from the file the harness writes into its directory. */
static pid_t broker_pid(struct broker *b)
{
	FILE *f = fopen(broker_path(b, "pid"), "r");
	ck_assert_msg(f != NULL, "the broker's pid file: %s", strerror(errno));
	long pid = 0;
	int n = fscanf(f, "%ld", &pid);
	fclose(f);
	ck_assert_msg(n == 1 && pid > 0, "the broker's pid file holds no PID");
	return (pid_t)pid;
}

/* The state letter of /proc/<pid>/stat, or '?'. */
static char proc_state(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	FILE *f = fopen(path, "r");
	if(!f){
		return '?';
	}
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/* Stops the broker and waits until it is stopped: kill() returns before the
 * signal takes effect, and a broker still returning from epoll_wait could
 * otherwise see only the first of the writes that follow. */
static void freeze(pid_t pid)
{
	ck_assert_msg(kill(pid, SIGSTOP) == 0, "SIGSTOP to the broker: %s", strerror(errno));
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	char st;
	while((st = proc_state(pid)) != 'T' && st != 't'){
		if(it_now_ms() > deadline){
			kill(pid, SIGCONT);
			ck_abort_msg("the broker did not stop within %d ms (state %c)", HARNESS_WAIT_MS, st);
		}
		it_sleep_ms(1);
	}
}

static void thaw(pid_t pid)
{
	ck_assert_msg(kill(pid, SIGCONT) == 0, "SIGCONT to the broker: %s", strerror(errno));
}

/* ---- the scenario ---- */

struct scene {
	struct broker *b;
	pid_t pid;
	struct client *watcher;     /* subscribed to dlq/# */
	struct client *observer;    /* subscribed to jobs: sees the dlq-id a v3.1.1 "w" cannot */
	struct raw *w;              /* connection 1 of "w", subscribed to jobs */
	struct raw *w2;             /* connection 2 of "w", accepted, no CONNECT yet (takeover only) */
	const char *id;             /* the original's dlq-id, which "w" NACKs */
};

/* A broker labelled after the test; "w" (protocol, clean) and the observer
 * receive a tracked message. With second, a second connection is opened and
 * accepted by the broker. */
static void scene_start(struct scene *s, const char *label, int protocol, bool clean, bool second)
{
	memset(s, 0, sizeof(*s));
	s->b = dlq_broker_at(__FILE__, __LINE__, label, POLICY, (const char *)NULL);
	s->pid = broker_pid(s->b);
	s->watcher = client_new(s->b, "watcher", MQTT_PROTOCOL_V5);
	s->observer = client_new(s->b, "observer", MQTT_PROTOCOL_V5);
	client_subscribe(s->watcher, "dlq/#", 1);
	client_subscribe(s->observer, "jobs", 1);

	struct raw_options o = { .id = CLIENT, .protocol = protocol, .clean = clean };
	s->w = raw_new(s->b, &o);
	raw_connect(s->w);
	if(second){
		/* Accepted in the broker's next pass; the subscription's round trip
		 * below takes a later one. */
		s->w2 = raw_new(s->b, &o);
		raw_open(s->w2);
	}
	unsigned granted = raw_subscribe(s->w, "jobs", 1);
	ck_assert_msg(granted < 0x80, "subscription to jobs refused (0x%02x)", granted);

	client_publish_str(s->watcher, "jobs", "job-1", 1);
	s->id = expect_original(client_expect(s->observer, "jobs", 1));
	const struct raw_msg *orig = raw_expect(s->w);
	ck_assert_str_eq(orig->topic, "jobs");
	ck_assert_str_eq(orig->payload, "job-1");
	if(protocol == MQTT_PROTOCOL_V5){
		ck_assert_pstr_eq(raw_user(orig, DLQ_PROP_ID), s->id);
	}else{
		ck_assert_uint_eq(orig->nusers, 0); /* v3.1.1 gets no properties */
	}
	/* The broker reads one packet per connection per loop pass: the PUBACK
	 * must be behind it before the scenes below, which need the NACK read
	 * in the same pass as what follows it. A round trip on the same
	 * connection proves that it is. */
	ck_assert_msg(raw_puback(s->w, orig->mid), "sending PUBACK: %s", strerror(errno));
	ck_assert_uint_lt(raw_publish(s->w, "ping", "x", 1, 1), 0x80); /* v5: 0x10, no subscribers */
	raw_drain(s->w, 0); /* nothing left unread: see scene_nack_and_close */
}

/* With the broker frozen, "w" NACKs on connection 1 and connection 2 sends
 * a CONNECT with the same client id. Returns whether the broker reported a
 * session present. */
static bool scene_nack_and_takeover(struct scene *s)
{
	freeze(s->pid);
	bool nacked = raw_send_publish(s->w, DLQ_NACK_TOPIC, s->id, strlen(s->id), 1);
	bool connected = raw_send_connect(s->w2);
	thaw(s->pid);
	ck_assert_msg(nacked && connected, "writing the NACK or the CONNECT failed");
	bool present;
	unsigned code = raw_read_connack(s->w2, &present);
	ck_assert_msg(code == 0, "the broker refused the takeover (CONNACK code 0x%02x)", code);

	/* The takeover closes connection 1. It must not have been handed the
	 * copy first: that would mean the CONNECT was read in a later pass than
	 * the NACK, and the scenario did not happen. */
	raw_drain(s->w, HARNESS_WAIT_MS);
	ck_assert_msg(raw_closed(s->w), "the takeover did not close connection 1 within %d ms", HARNESS_WAIT_MS);
	ck_assert_msg(raw_count(s->w, "jobs", NULL) == 1,
			"connection 1 received the retry copy before the takeover: the NACK and the CONNECT "
			"were not read in the same loop pass");
	return present;
}

/* With the broker frozen, "w" NACKs and closes its socket. The broker reads
 * the NACK; its PUBACK then fails on the closed socket, and the client is
 * disconnected in that pass (2.0.11 logs it as "disconnected due to out of
 * memory": the failed write comes back as 1). Connection 1 has nothing
 * unread: a unix socket closed with unread data resets its peer. */
static void scene_nack_and_close(struct scene *s)
{
	freeze(s->pid);
	bool nacked = raw_send_publish(s->w, DLQ_NACK_TOPIC, s->id, strlen(s->id), 1);
	raw_close(s->w);
	thaw(s->pid);
	ck_assert_msg(nacked, "writing the NACK failed");
}

static void expect_gone_dead_letter(struct scene *s)
{
	const struct it_msg *dl = client_expect(s->watcher, "dlq/jobs", 1);
	ck_assert_str_eq(dl->payload, "job-1");
	expect_dead_letter(dl, "jobs", s->id, 1, CLIENT, "jobs", GONE_REASON);
	clients_settle(s->watcher, s->observer);
	client_expect_exactly(s->watcher, NULL, 1);
	client_expect_exactly(s->observer, NULL, 1); /* the copy was for "w" only */
}

static void scene_free(struct scene *s)
{
	raw_free(s->w);
	raw_free(s->w2);
}

/* ---- tests ---- */

/* An MQTT v5 session never counts as persisting (its expiry is invisible to
 * the plugin). The new connection "w" is also handed the copy, by client id,
 * in the next pass: a duplicate docs/semantics.md documents, not asserted here. */
START_TEST(test_takeover_v5_dead_letters)
{
	struct scene s;
	scene_start(&s, __func__, MQTT_PROTOCOL_V5, true, true);
	ck_assert_msg(!scene_nack_and_takeover(&s), "session present after a clean start");
	expect_gone_dead_letter(&s);
	scene_free(&s);
}
END_TEST

START_TEST(test_takeover_v311_clean_dead_letters)
{
	struct scene s;
	scene_start(&s, __func__, MQTT_PROTOCOL_V311, true, true);
	ck_assert_msg(!scene_nack_and_takeover(&s), "session present after clean_session=1");
	expect_gone_dead_letter(&s);
	scene_free(&s);
}
END_TEST

/* No client "w" is left: the broker drops the copy, and only the dead
 * letter keeps the message. */
START_TEST(test_close_after_nack_v5_dead_letters)
{
	struct scene s;
	scene_start(&s, __func__, MQTT_PROTOCOL_V5, true, false);
	scene_nack_and_close(&s);
	expect_gone_dead_letter(&s);
	scene_free(&s);
}
END_TEST

/* A v5 client that asks for clean_start=false without a session expiry
 * interval loses its session with its connection (expiry 0), and 2.0.11 does
 * not tell the plugin the interval: the copy must still be dead-lettered. */
START_TEST(test_close_after_nack_v5_no_clean_start_dead_letters)
{
	struct scene s;
	scene_start(&s, __func__, MQTT_PROTOCOL_V5, false, false);
	scene_nack_and_close(&s);
	expect_gone_dead_letter(&s);
	scene_free(&s);
}
END_TEST

/* Control: a persistent v3.1.1 session taken over by itself keeps the copy,
 * which reaches the new connection; no dead letter. */
START_TEST(test_takeover_v311_persistent_keeps_copy)
{
	struct scene s;
	scene_start(&s, __func__, MQTT_PROTOCOL_V311, false, true);
	ck_assert_msg(scene_nack_and_takeover(&s), "no session present after taking over a persistent session");
	const struct raw_msg *copy = raw_expect(s.w2);
	ck_assert_str_eq(copy->topic, "jobs");
	ck_assert_str_eq(copy->payload, "job-1");
	ck_assert_int_eq(copy->qos, 1);
	ck_assert(raw_puback(s.w2, copy->mid));
	clients_settle(s.watcher, s.observer);
	raw_drain(s.w2, HARNESS_SETTLE_MS);
	client_expect_exactly(s.watcher, NULL, 0);
	client_expect_exactly(s.observer, NULL, 1);
	ck_assert_uint_eq(raw_count(s.w2, NULL, NULL), 1);
	scene_free(&s);
}
END_TEST

/* Control: a persistent v3.1.1 session whose socket closes keeps the copy,
 * which arrives when "w" reconnects; no dead letter. */
START_TEST(test_close_after_nack_v311_persistent_keeps_copy)
{
	struct scene s;
	scene_start(&s, __func__, MQTT_PROTOCOL_V311, false, false);
	scene_nack_and_close(&s);
	clients_settle(s.watcher, s.observer);
	client_expect_exactly(s.watcher, NULL, 0);

	struct raw_options o = { .id = CLIENT, .protocol = MQTT_PROTOCOL_V311, .clean = false };
	struct raw *again = raw_new(s.b, &o);
	ck_assert_msg(raw_connect(again), "no session present on reconnecting a persistent session");
	const struct raw_msg *copy = raw_expect(again);
	ck_assert_str_eq(copy->topic, "jobs");
	ck_assert_str_eq(copy->payload, "job-1");
	ck_assert_int_eq(copy->qos, 1);
	ck_assert(raw_puback(again, copy->mid));
	clients_settle(s.watcher, s.observer);
	raw_drain(again, HARNESS_SETTLE_MS);
	client_expect_exactly(s.watcher, NULL, 0);
	client_expect_exactly(s.observer, NULL, 1);
	ck_assert_uint_eq(raw_count(again, NULL, NULL), 1);
	raw_free(again);
	scene_free(&s);
}
END_TEST

int main(void)
{
	return harness_run(check_suite("session", harness_tcase("session"), CHECK_TESTS(test_takeover_v5_dead_letters,
			test_takeover_v311_clean_dead_letters, test_close_after_nack_v5_dead_letters,
			test_close_after_nack_v5_no_clean_start_dead_letters, test_takeover_v311_persistent_keeps_copy,
			test_close_after_nack_v311_persistent_keeps_copy)));
}
