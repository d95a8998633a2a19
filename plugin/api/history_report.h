/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The getHistory command's data: each policy's rate history (the minutes of
 * the last hour that hold anything: NACKs, ack timeouts, dead letters by
 * cause, redrives; model/history.h), as JSON. Nothing here touches the
 * broker.
 */
#ifndef DLQ_HISTORY_REPORT_H
#define DLQ_HISTORY_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "engine/dlq.h"

/* {"minute":…,"minutes":60,"policies":[{"filter":…,"minutes":[{"minute":…,
 * "nacks":…,"ackTimeouts":…,"deadLetters":…,"byCause":{…},"redrives":…}]}]}
 * for the hour up to wall_ms, of every policy, or of the one whose filter
 * is filter (not NULL). Returns 0 with *data (owned), EINVAL with the
 * error's text in err (no such policy), or ENOMEM. */
int history_report__json(const struct dlq *d, const char *filter, int64_t wall_ms, cJSON **data, char *err,
		size_t errlen);

#endif
