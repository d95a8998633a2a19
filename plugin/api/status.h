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

/* {"policies":[{"filter":…,"maxAttempts":…,…}]}-style array of the policies. */
cJSON *status__policies(const struct dlq *d);

/* {"totals":{…},"policies":[{"filter":…,counters and gauges…}], "maxPendingBytes":…,…}. */
cJSON *status__report(const struct dlq *d);

#endif
