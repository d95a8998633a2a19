/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The two engine calls most unit suites make, with Check assertions:
 * track a publish on a topic that must match a policy, and NACK an id.
 */
#ifndef DLQ_TEST_ENGINE_CALLS_H
#define DLQ_TEST_ENGINE_CALLS_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/dlq.h"
#include "util/headers.h"

/* Tracks payload on topic at qos with the encoded properties h (or none)
 * and writes its dlq-id to id; fails the test unless a policy matches and
 * the engine takes it. */
void engine_track(struct dlq *d, const char *topic, const char *payload, uint8_t qos,
		const struct dlq_headers *h, char id[DLQ_ID_LEN + 1]);

/* NACKs id for client (whose session persists or not); the status. */
enum dlq_nack_status engine_nack(struct dlq *d, const char *id, const char *client, bool persists);

#endif
