/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What the plugin reports about itself: its policies, and per policy and in
 * total its counters and gauges (records kept, bytes, what is owed and
 * delayed). Used by the listPolicies/getStatus/resetCounters commands and by
 * the $SYS topics; nothing here touches the broker.
 */
#ifndef DLQ_STATUS_H
#define DLQ_STATUS_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "engine/dlq.h"
#include "model/gauges.h"

/* Gauges per policy (out[i] for policy i; cfg.policies.count entries) and
 * in total, from the running gauges (gauges.h): O(policies). */
void status__gauges(const struct dlq *d, struct dlq_gauges *per_policy, struct dlq_gauges *total);

/* {"policies":[{"filter":…,"maxAttempts":…,…}]}-style array of the policies. */
cJSON *status__policies(const struct dlq *d);

/* {"totals":{…},"policies":[{"filter":…,counters and gauges…}], "maxPendingBytes":…,…}. */
cJSON *status__report(const struct dlq *d);

/* Zeroes every counter (totals and per policy); gauges are not counters. */
void status__reset_counters(struct dlq *d);

#endif
