/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The plugin's counters and gauges on $SYS/broker/dlq/..., retained, so that
 * the dashboards that read Mosquitto's own $SYS tree pick them up. Published
 * from the tick every plugin_opt_sys_interval, only the values that changed.
 */
#ifndef DLQ_SYSTOPICS_H
#define DLQ_SYSTOPICS_H

#include <stddef.h>
#include <stdint.h>

struct dlq;

/* At most this many policies get topics of their own. */
#define DLQ_SYS_MAX_POLICIES 100

struct dlq_sys {
	uint64_t last_ms;      /* when values were last published (0: never) */
	uint64_t *last_values; /* owned: what was published, to send only changes */
	size_t value_count;
	size_t policies_published;   /* how many policy groups the retained topics hold */
	unsigned generation;         /* the policy generation they describe */
};

/* Publishes what changed in d's counters and gauges when the interval has
 * passed (now: port__now_ms). Called from the broker adapter's tick, after
 * the engine's. */
void systopics__tick(struct dlq_sys *s, const struct dlq *d, uint64_t now);

void systopics__cleanup(struct dlq_sys *s);

#endif
