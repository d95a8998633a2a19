/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The growth suite's own declarations, shared by its two files: growth.c
 * (filling brokers, memory, start and save times, the callgrind runs and
 * the tables) and growth_latency.c (one NACK's latency while delayed retry
 * copies are pending). Not used outside the suite.
 */
#ifndef DLQ_BENCH_GROWTH_H
#define DLQ_BENCH_GROWTH_H

#include <stddef.h>
#include <stdint.h>

#include "bench.h"

/* One phase of NACK round trips: each publishes a tracked message, waits
 * for it, NACKs it without a delay and waits for its retry copy; the time
 * is from the NACK's publish to the copy's arrival. */
struct growth_latency {
	uint64_t pending;            /* delayed retry copies pending meanwhile */
	size_t nacks;                /* round trips measured */
	double p50_us, p99_us, max_us;
};

/* On a plugin broker without delayed copies: a phase of nacks round trips
 * (before), then `delayed` tracked messages NACKed with a delay of an hour,
 * each confirmed "retried" by the plugin's reply, then the same phase
 * again (after). One client (MQTT v5, QoS 1) does it all, so only one
 * message is in flight at a time. Returns 0, or -1 (logged to stderr) if
 * the client failed, a reply refused a NACK, or a wait timed out. */
int growth__nack_latency(const struct broker *b, uint64_t delayed, size_t nacks, struct growth_latency *before,
		struct growth_latency *after);

#endif
