/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The engine's tick (tick.c), once per pass of the broker's main loop.
 */
#ifndef DLQ_TICK_H
#define DLQ_TICK_H

#include <stdint.h>

#include "engine/engine.h"

/* Once per broker loop pass: lets go of what the broker has taken, expires
 * records, publishes the retry copies now due, and retries owed envelopes.
 * When nothing could be due it returns at once, without reading the clock
 * (the broker ticks about once per message under load); and when the last
 * tick found nothing at all to do and no event came since that could
 * change that (tick_quiet), in one load, inlined into the TICK callback.
 * Returns the time it read (port__now_ms), or 0 when it read none, so that
 * the caller's own timed work (the $SYS topics) need not read it again. */
uint64_t dlq__tick_awake(struct dlq *d);
static inline uint64_t dlq__tick(struct dlq *d)
{
	if(!d->tick_quiet || d->sessions.ended) return dlq__tick_awake(d);
	return 0;
}

#endif
