/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The fleet suite's own declarations (issue 39; --only fleet), shared by
 * its files: fleet.c (the brokers, the runs and the tables) and
 * fleet_client.c (the edges' workers and the centre's subscriber, on one
 * poll loop). Not used outside the suite.
 */
#ifndef DLQ_BENCH_FLEET_H
#define DLQ_BENCH_FLEET_H

#include <stdbool.h>
#include <stdint.h>

#include <mosquitto.h>

#include "bench.h"
#include "link.h"

#define FLEET_EDGES 3
/* Each edge's policy (every NACK makes a dead letter at once), its
 * originals' topic, and the centre's collect filter; edge n's bridge
 * carries dead/# out as fleet/edge-<n>/dead/#. */
#define FLEET_POLICY "orders/# max_attempts=1 dead_letter=dead/orders"
#define FLEET_TOPIC "orders/bench"
#define FLEET_COLLECT "fleet/+/dead/#"

struct fleet_traffic;

/* One libmosquitto client: an edge's worker (publisher of the originals
 * and their NACKer) or the centre's subscriber of FLEET_COLLECT. */
struct fleet_client {
	struct link link;              /* first: the callbacks' userdata */
	struct mosquitto *m;
	struct fleet_traffic *t;
	int edge;                      /* 0..FLEET_EDGES-1; -1: the centre's subscriber */
};

/* What one edge did in the current pass. */
struct fleet_edge_state {
	uint64_t base;                 /* the pass's first sequence number */
	uint64_t sent, nacked, arrived, twice;
	uint64_t *nack_ns;             /* owned: when each original of the pass was NACKed, 0 not yet */
	uint8_t *seen;                 /* owned: whether its letter reached the centre */
};

/* The clients of one run, and the pass they are in. */
struct fleet_traffic {
	struct fleet_client edges[FLEET_EDGES];
	struct fleet_client centre;
	struct fleet_edge_state st[FLEET_EDGES];
	uint64_t n;                    /* originals per edge in this pass */
	struct bench_samples lat;      /* NACK to the letter at the centre, ns, this pass */
	uint64_t errors;
};

/* What a pass measured. */
struct fleet_pass {
	uint64_t letters;              /* distinct letters that reached the centre */
	uint64_t twice;                /* letters that reached it again */
	double seconds;                /* from the first publish to the last letter */
};

/* Connects a worker to each edge (subscribed to the policy's filter) and
 * the subscriber to the centre. Returns 0, or -1 (logged; call
 * fleet_traffic__close anyway). */
int fleet_traffic__open(struct fleet_traffic *t, const struct broker *edges, const struct broker *centre);
void fleet_traffic__close(struct fleet_traffic *t);

/* Each edge's worker publishes n originals (QoS 1, BENCH_PAYLOAD bytes),
 * keeping at most window of them whose letter has not reached the centre,
 * and NACKs each as it is delivered; the pass ends when every letter
 * reached the centre's subscriber. The NACK-to-centre times are in t->lat
 * (emptied first). Returns 0, or -1 (logged) on a failure or a timeout. */
int fleet_traffic__pass(struct fleet_traffic *t, uint64_t n, unsigned window, struct fleet_pass *p);

#endif
