/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The load driver's own state, shared by its two files: load.c (pairs,
 * pacing, the poll loop, results) and client.c (the libmosquitto clients
 * and what they do with each message). Not used outside the driver, but
 * for client__read_stamp, which growth_latency.c reads deliveries with.
 */
#ifndef DLQ_BENCH_LOAD_H
#define DLQ_BENCH_LOAD_H

#include <mosquitto.h>

#include "bench.h"
#include "link.h"
#include "mosquitto_dlq.h"

#define MAX_PAIRS (BENCH_MAX_PAIRS * BENCH_MAX_TARGETS)
/* A publisher and its subscribers per pair, and the dead-letter consumer. */
#define MAX_CLIENTS (MAX_PAIRS * (1 + BENCH_MAX_FANOUT) + 1)

enum role { ROLE_PUB, ROLE_SUB, ROLE_DEAD };

struct client {
	struct link link;            /* first: the callbacks' userdata */
	struct mosquitto *mosq;
	struct load *load;
	enum role role;
	int index;
};

struct pair {
	int target;
	const struct load_target *t; /* borrowed from the options */
	uint64_t sent;
	uint64_t done;         /* deliveries (or dead letters, in a storm): fanout per message */
	uint64_t quota;        /* count mode: originals this pair still sends */
	uint64_t next_ns;      /* paced: when the next one is due */
	uint64_t gap_ns;
	uint32_t seq;
	char topic[64];
};

struct counters {
	uint64_t delivered, copies, dead_letters, untagged;
};

struct load {
	const struct load_opts *o;
	struct client clients[MAX_CLIENTS];
	int nclients;
	struct pair pairs[MAX_PAIRS];
	int npairs;
	int ntargets;
	int fanout;            /* subscribers per pair, at least 1 */
	struct counters c;
	uint64_t target_delivered[BENCH_MAX_TARGETS];
	bool publishing;
	bool measuring;
	int active;            /* the target whose turn it is */
	uint64_t start_ns;     /* turns count from here */
	uint64_t *lat[BENCH_MAX_TARGETS]; /* latency samples, ns */
	uint64_t *arrived[BENCH_MAX_TARGETS]; /* record_arrival: when each sample came, ns; else NULL */
	size_t nlat[BENCH_MAX_TARGETS], caplat;
	uint8_t *payload;
	uint64_t errors;
};

/* Creates and connects the client for pair index (index 0 for the
 * dead-letter consumer) and appends it to L->clients. Returns 0 or -1. */
int client__open(struct load *L, enum role role, int index);
/* Reads a delivery's dlq-id (copied into id) and whether it is a retry
 * copy (it carries retry-count). Returns whether it has a dlq-id. */
bool client__read_stamp(const mosquitto_property *props, char id[DLQ_ID_LEN + 1], bool *is_copy);
/* Disconnects and frees every client of L. */
void client__close_all(struct load *L);

#endif
