/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The engine calls most unit suites make, with Check assertions: start an
 * engine (the fixture of engine_fixture.h), track a publish on a topic that
 * must match a policy, and NACK an id.
 */
#ifndef DLQ_TEST_ENGINE_CALLS_H
#define DLQ_TEST_ENGINE_CALLS_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/dlq.h"
#include "engine_fixture.h"
#include "util/headers.h"

/* Starts d from the count options with flags (engine_try_start; live may
 * be NULL); fails the test with the refusal's message unless it started. */
void engine_start(struct dlq *d, bool *live, const struct dlq_option *opts, size_t count, unsigned flags);

/* Tracks payload on topic at qos with the encoded properties h (or none)
 * and writes its dlq-id to id; fails the test unless a policy matches and
 * the engine takes it. */
void engine_track(struct dlq *d, const char *topic, const char *payload, uint8_t qos,
		const struct dlq_headers *h, char id[DLQ_ID_LEN + 1]);

/* NACKs id for client (whose session persists or not); the status. */
enum dlq_nack_status engine_nack(struct dlq *d, const char *id, const char *client, bool persists);

/* A message of payload on topic (at QoS 1), NACKed once by "worker": its
 * dead letter, under a policy of max_attempts=1; fails the test unless it
 * is dead-lettered. */
void engine_dead_letter(struct dlq *d, const char *topic, const char *payload);

/* Keeps letters from, up to n, in the store of d, copies of the oldest
 * kept letter, but every tenth (by number) a copy of the newest, each
 * under a new id; with t0 not 0 letter i is of time t0 + i. For the cost
 * of walks over many letters. */
void engine_keep_letters(struct dlq *d, int from, int n, int64_t t0);

/* The kept letter of d whose dlq-id is the text id, or NULL; fails the
 * test unless id is a dlq-id. */
struct dlq_letter *engine_letter(struct dlq *d, const char *id);

/* The dead letter broker made with the dlq-id id of "orders/1" (filter
 * orders/#, dead letter topic dead/orders, its origin
 * OOOOOOOOOOOOOOOO), NACKed once by "worker" for reason, as a centre
 * collecting it reads it from its properties. The caller frees it
 * (envelope__free). For the suites of what crosses a fleet: collecting
 * and redriving home. */
struct dlq_envelope *engine_edge_letter(const char *broker, const char *id, const char *reason,
		const char *payload);

#endif
