/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The schedule: retry copies waiting for their delay, in a binary min-heap
 * by due time, so that adding, taking the next due one and removing any one
 * cost O(log n), and a tick that finds nothing due costs O(1).
 */
#ifndef DLQ_SCHEDULE_H
#define DLQ_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "model/envelope.h"
#include "model/gauges.h"

struct dlq_schedule {
	struct dlq_envelope **heap; /* owned array; the envelopes are owned too */
	size_t count;
	size_t capacity;
	uint64_t bytes;             /* sum of the envelopes' bytes */
	struct dlq_gauge_book *book;/* borrowed, optional: running gauges (set after schedule__init) */
};

void schedule__init(struct dlq_schedule *s);
/* Frees every envelope and the heap. */
void schedule__cleanup(struct dlq_schedule *s);

/* Takes e, due at e->due_ms. Returns 0, or ENOMEM (e is still the caller's). */
int schedule__push(struct dlq_schedule *s, struct dlq_envelope *e);

/* The envelope due first, or NULL; borrowed. */
struct dlq_envelope *schedule__peek(const struct dlq_schedule *s);

/* Removes e (which must be in s) and gives it back to the caller. */
void schedule__remove(struct dlq_schedule *s, struct dlq_envelope *e);

#endif
