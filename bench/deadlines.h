/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The acknowledgement deadlines suite's own declarations (issue 35), shared
 * by its files: deadlines.c (the brokers under callgrind, the phases, the
 * tables) and deadlines_client.c (the clients that hold deliveries without
 * settling them, and the one that publishes to them and asks getStatus).
 * Not used outside the suite.
 */
#ifndef DLQ_BENCH_DEADLINES_H
#define DLQ_BENCH_DEADLINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mosquitto.h>

#include "bench.h"
#include "link.h"

/* The holder's topic: matched by the tracked policy, so its deliveries
 * wait in the same queue (one per ack_timeout) as the measured ones. */
#define DL_HOLD_TOPIC BENCH_TOPIC_TRACKED "hold"
/* The short clients' topics, DL_SHORT_PREFIX<k>, and their policy's filter. */
#define DL_SHORT_PREFIX "bench/short/"
#define DL_SHORT_FILTER "bench/short/+"

enum dl_role { DL_PUB, DL_HOLDER, DL_SHORT };

struct dl_set;

/* One MQTT v5 client, without a thread of its own. */
struct dl_client {
	struct link link;            /* first: the callbacks' userdata */
	struct mosquitto *m;
	struct dl_set *set;
	enum dl_role role;
	int index;                   /* DL_SHORT: its topic's number */
	uint64_t received;           /* originals */
	uint64_t copies;             /* retry copies (they carry retry-count) */
};

/* Every client of a broker's deadlines phases: the publisher (who also
 * sends the control commands), the holder, and the short clients, all on
 * one ppoll loop. */
struct dl_set {
	const struct broker *b;
	struct dl_client *c;         /* owned */
	int n, cap;
	int pub, holder;             /* indices; -1: none */
	int first_short, shorts;
	uint64_t untagged;           /* deliveries without a dlq-id */
	char reply_topic[64];
	char *reply;                 /* owned: the last reply's payload, NUL-terminated */
	size_t reply_len;
	bool got_reply;
	uint64_t last_short_ns;      /* when a short client last received an original */
	uint8_t payload[BENCH_PAYLOAD];
};

/* Connects the publisher (subscribed to its reply topic) and, if holder,
 * the holder (subscribed to DL_HOLD_TOPIC). Returns 0, or -1 (logged; call
 * dl_set__close anyway). */
int dl_set__open(struct dl_set *s, const struct broker *b, const char *label, bool holder);
/* Connects n short clients, client k subscribed to DL_SHORT_PREFIX<k>
 * alone. Returns 0, or -1 (logged). */
int dl_set__add_shorts(struct dl_set *s, int n);
void dl_set__close(struct dl_set *s);

/* Publishes n tracked messages (QoS 1) to the holder's topic, a window at
 * a time, and waits until the holder has received them all. Returns 0, or
 * -1 (logged) on a failure or a timeout. */
int dl_set__fill_holder(struct dl_set *s, uint64_t n);
/* Publishes one tracked message (QoS 1) to each short client's topic and
 * waits until each has received it; *first_ns is when the first was
 * published. Returns 0, or -1 (logged). */
int dl_set__fill_shorts(struct dl_set *s, uint64_t *first_ns);
/* Runs the loop until the short clients have received `copies` retry
 * copies in all, for at most timeout_ms. Returns 0, or -1 (logged). */
int dl_set__wait_copies(struct dl_set *s, uint64_t copies, int timeout_ms);
/* Runs the loop for ms milliseconds (keeping the connections served). */
int dl_set__idle(struct dl_set *s, int ms);
/* Retry copies the short clients have received so far. */
uint64_t dl_set__short_copies(const struct dl_set *s);

/* getStatus's totals: the number members wanted, each -1 when absent.
 * Returns 0, or -1 (logged) on a failure, a timeout or an error reply. */
struct dl_status {
	double awaiting, acks, acks_refused, timeouts, retry_copies, dead_letters, records, evicted;
};
int dl_set__status(struct dl_set *s, struct dl_status *st);

#endif
