/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The engine's gauges counted afresh, by a pass over what it keeps.
 */
#ifndef DLQ_RECOUNT_H
#define DLQ_RECOUNT_H

#include "engine/dlq.h"
#include "model/gauges.h"

/* Gauges per policy (per_policy[i] for policy i; cfg.policies.count
 * entries; may be NULL) and in total, counted by a pass over the ledger,
 * the outbox and the schedule: O(records). For a reload (records change
 * policy) and for tests that check the running gauges. */
void recount__gauges(const struct dlq *d, struct dlq_gauges *per_policy, struct dlq_gauges *total);

#endif
