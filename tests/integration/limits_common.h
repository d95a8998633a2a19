/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What the limits suites share (test_limits.c, sizes and counts;
 * test_limits_abuse.c, clients that flood the plugin or NACK ids they never
 * received): control commands and the figures of their replies, and one
 * full retry chain, timed.
 */
#ifndef DLQ_IT_LIMITS_COMMON_H
#define DLQ_IT_LIMITS_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "harness.h"

/* Sends {"commands":[{"command":name}]} with REPLY_TOPIC as response topic
 * and returns the "data" of its single reply entry, detached (the caller
 * frees it); *bytes gets the size of the reply. Fails on an error entry. */
cJSON *command(struct client *c, const char *name, size_t *bytes);

/* command(c, DLQ_COMMAND_GET_STATUS, NULL): the status data (the caller
 * frees it). */
cJSON *status(struct client *c);

/* The "totals" object of a status, borrowed from data; fails the test if
 * there is none. */
const cJSON *totals(const cJSON *data);

/* One full chain on topic for a policy with max_attempts=2: publish, NACK
 * the original, NACK the copy, the dead letter arrives. Returns how long it
 * took, in ms, and the original's dlq-id in *origin (owned by worker) when
 * origin is not NULL. worker subscribes to filter (which matches topic and
 * is what failure messages name: Check refuses a message of 64 KiB), dead
 * to the dead-letter topic; n is how many chains ran before on them. */
uint64_t one_chain(struct client *pub, struct client *worker, struct client *dead, const char *topic,
		const char *filter, const char *dead_topic, size_t n, const char **origin);

#endif
