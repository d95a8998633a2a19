/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What the redelivery tracking suites share (test_redelivery.c, the
 * counting; test_redelivery_access.c, the modes and access control): a
 * broker with the jobs/# policy and plugin_opt_redelivery_tracking, its
 * observers, raw subscribers (raw.h) with persistent sessions, the crash
 * loop of a subscriber that "dies before PUBACK", and the checks of what it
 * received and of the dead letter its last delivery became.
 *
 * Observers are libmosquitto clients with clean sessions (never counted):
 * "watch" reads dead/# and jobs/# (for the dlq-id a v3.1.1 subscriber does
 * not see), "pub" publishes. The crash loop treats a close by the broker,
 * and a silence, as reasons to reconnect: Mosquitto 2.0.x leaks an
 * in-flight slot when the plugin removes a message at reconnect, and the
 * plugin then closes the connection once.
 */
#ifndef DLQ_IT_REDELIVERY_COMMON_H
#define DLQ_IT_REDELIVERY_COMMON_H

#include <stdbool.h>
#include <stddef.h>

#include "harness.h"
#include "raw.h"

#define FILTER "jobs/#"
#define TOPIC "jobs/x"
#define DEAD "dead/jobs"
#define MAX_ATTEMPTS 3
#define OPTION "redelivery_tracking"
/* These tests reconnect often and start several brokers. */
#define TEST_TIMEOUT 180

#define fail_here(file, line, ...) _ck_assert_failed((file), (line), "redelivery", __VA_ARGS__)

/* ---- brokers and observers ---- */

struct scene {
	struct broker *b;
	struct client *watch;       /* dead/# and jobs/# */
	struct client *pub;
};

/* A broker with the jobs/# policy, redelivery tracking in mode (NULL: no
 * option line) and, with window1, max_inflight_messages 1. Not started. */
struct broker *tracking_broker(const char *label, const char *mode, bool window1);

/* Starts b and connects the observers. */
#define scene_start(s, b) scene_start_at(__FILE__, __LINE__, (s), (b))
void scene_start_at(const char *file, int line, struct scene *s, struct broker *b);

/* The dlq-id of the k-th (0-based) original with this payload that the
 * watcher received. */
const char *original_id(struct scene *s, const char *payload, size_t k);

/* A raw client with a persistent session: clean_session=false, or
 * clean_start=false with a session expiry of an hour. */
struct raw *persistent(struct broker *b, const char *id, int protocol, const char *username);

/* Connects r and subscribes it at QoS 1. */
#define join(r, filter) join_at(__FILE__, __LINE__, (r), (filter))
void join_at(const char *file, int line, struct raw *r, const char *filter);

/* ---- the subscriber that dies before PUBACK ---- */

struct crash_loop {
	struct raw *r;
	const char *crash_on;       /* payload it closes on, without PUBACK */
	const char *stop_after;     /* payload it acknowledges and stops at; NULL: see max_crashes */
	unsigned max_crashes;       /* with stop_after NULL: stop after this many crashes */
	const char *dlq_id;         /* v5: the dlq-id crash_on must carry (NULL: unchecked) */
	/* What happened. */
	unsigned connects;          /* reconnections made by the loop */
	unsigned crashes;
	unsigned closed_by_broker;
	unsigned timeouts;
	unsigned acked;
};

/* Reads r's deliveries: closes abruptly on crash_on, acknowledges anything
 * else. Reconnects (expecting the session to be there) after a crash, a
 * close by the broker, or READ_TIMEOUT_MS (redelivery_common.c) of silence.
 * r may start connected or not. */
#define crash_loop(cl) crash_loop_at(__FILE__, __LINE__, (cl))
void crash_loop_at(const char *file, int line, struct crash_loop *cl);

/* ---- assertions ---- */

/* Fails unless r received payload on TOPIC n times. */
#define expect_received(r, payload, n) expect_received_at(__FILE__, __LINE__, (r), (payload), (n))
void expect_received_at(const char *file, int line, struct raw *r, const char *payload, size_t n);

/* m is the dead letter of payload, first published to TOPIC with dlq-id
 * origin_id (NULL: unchecked), diverted from client after max_attempts
 * deliveries without acknowledgement: like a NACKed one, with its reason. */
#define expect_tracking_dead_letter(m, payload, origin_id, client) \
	expect_tracking_dead_letter_at(__FILE__, __LINE__, (m), (payload), (origin_id), (client))
void expect_tracking_dead_letter_at(const char *file, int line, const struct it_msg *m,
		const char *payload, const char *origin_id, const char *client);

/* After everything settled: exactly n dead letters arrived. */
#define expect_dead_letters(s, n) expect_dead_letters_at(__FILE__, __LINE__, (s), (n))
void expect_dead_letters_at(const char *file, int line, struct scene *s, size_t n);

/* How many lines of text contain needle. */
size_t lines_with(const char *text, const char *needle);

/* How many lines of b's whole log contain needle. */
size_t broker_log_lines(const struct broker *b, const char *needle);

#endif
