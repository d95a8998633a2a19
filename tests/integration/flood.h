/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A flooding client for the abuse tests: an MQTT v5 libmosquitto client that
 * queues many publishes without waiting for each, and counts what comes
 * back instead of keeping it (ten thousand replies would make the harness's
 * recording clients slow to search). Replies to requests whose correlation
 * data (JSON "correlationData") is "f-<n>" are matched to n, so a test can
 * tell whether every request got its reply.
 */
#ifndef DLQ_IT_FLOOD_H
#define DLQ_IT_FLOOD_H

#include <stdbool.h>
#include <stddef.h>

#include "harness.h"

/* The highest request number flood_seen can follow, plus one. */
#define FLOOD_MAX_REQUESTS 100000
/* How many substrings one flooder can count. */
#define FLOOD_MAX_NEEDLES 8

/* A flooding client belongs to the test that made it: flood_free frees it,
 * and the checked fixture frees whatever the test left. */
struct flood;

/* Connects a client "<name>-<pid>" (MQTT v5, clean start) to b, subscribed
 * to nothing: the plugin's replies reach it without a subscription. */
#define flood_new(b, name) flood_new_at(__FILE__, __LINE__, (b), (name))
struct flood *flood_new_at(const char *file, int line, struct broker *b, const char *name);

const char *flood_id(const struct flood *f);

/* Counts, from now on, the messages whose payload contains needle (a
 * string the caller keeps); returns its slot for flood_hits. */
size_t flood_count(struct flood *f, const char *needle);

/* Queues one publish and returns at once (QoS 0 goes out as fast as the
 * socket takes it; QoS 1 and 2 as the broker's receive maximum allows). */
#define flood_publish(f, topic, payload, len, qos) \
	flood_publish_at(__FILE__, __LINE__, (f), (topic), (payload), (len), (qos))
void flood_publish_at(const char *file, int line, struct flood *f, const char *topic,
		const void *payload, int len, int qos);

/* Publishes a QoS 1 marker (to a topic of its own) after everything queued
 * so far and waits until every publish queued has been written (QoS 0) or
 * acknowledged (QoS 1 and 2), the marker included: the broker reads a
 * connection's packets in order, so it has then handled every publish
 * before the marker. Fails the test after timeout_ms, or when publishes
 * were lost with the connection (libmosquitto drops unsent QoS 0 ones). */
#define flood_drain(f, timeout_ms) flood_drain_at(__FILE__, __LINE__, (f), (timeout_ms))
void flood_drain_at(const char *file, int line, struct flood *f, int timeout_ms);

/* Waits until at least n messages arrived in all; returns whether they
 * did within timeout_ms. */
bool flood_wait(struct flood *f, size_t n, int timeout_ms);

/* Messages received, messages containing the needle of slot, and distinct
 * request numbers n seen in "correlationData":"f-<n>". */
size_t flood_received(struct flood *f);
size_t flood_hits(struct flood *f, size_t slot);
size_t flood_seen(struct flood *f);

/* Whether the connection is up, and how often it was lost (libmosquitto
 * connects again by itself). flood_wait_disconnects waits until it was
 * lost at least n times; returns whether it was within timeout_ms. */
bool flood_connected(struct flood *f);
unsigned flood_disconnects(struct flood *f);
bool flood_wait_disconnects(struct flood *f, unsigned n, int timeout_ms);

/* Disconnects and frees it. NULL is ignored. */
void flood_free(struct flood *f);

#endif
