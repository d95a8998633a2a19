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

#include "dlq.h"

struct dlq_gauges {
	uint64_t records;       /* NACKable deliveries kept */
	uint64_t ledger_bytes;  /* their bytes in the bound */
	uint64_t pending;       /* retry copies and dead letters the broker has not taken */
	uint64_t delayed;       /* retry copies waiting for their delay */
	uint64_t owed_bytes;    /* bytes of both */
};

/* Gauges per policy (out[i] for policy i; cfg.policies.count entries) and
 * in total. One pass over the ledger and the outbox: O(records). */
void status__gauges(const struct dlq *d, struct dlq_gauges *per_policy, struct dlq_gauges *total);

/* {"policies":[{"filter":…,"maxAttempts":…,…}]}-style array of the policies. */
cJSON *status__policies(const struct dlq *d);

/* {"totals":{…},"policies":[{"filter":…,counters and gauges…}], "maxPendingBytes":…,…}. */
cJSON *status__report(const struct dlq *d);

/* Zeroes every counter (totals and per policy); gauges are not counters. */
void status__reset_counters(struct dlq *d);

#endif
