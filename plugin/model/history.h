/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A policy's rate history: what happened in each of the last 60 minutes of
 * the wall clock (NACKs accepted, ack timeouts, dead letters by cause,
 * redrives), in a fixed ring of one slot per minute, so that the console
 * can draw the last hour as soon as it opens (getHistory). Each slot
 * carries the minute it counts, so that a gap (an idle or stopped broker)
 * needs no work: a slot whose minute is not the one asked for is empty.
 * Memory is fixed per policy (sizeof(struct dlq_history), 3,368 bytes).
 * The wall clock may jump: forward, the older slots simply fall out of the
 * hour; backward, the minutes after the new time are dropped at the next
 * count (they cannot be told apart from the minutes still to come), and a
 * read leaves them out.
 */
#ifndef DLQ_HISTORY_H
#define DLQ_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/cause.h"

#define DLQ_HISTORY_MINUTES 60

/* One minute's counts. */
struct dlq_history_minute {
	int64_t minute;          /* wall clock, Unix seconds of the minute's start (a multiple of 60) */
	uint32_t nacks;          /* NACKs accepted */
	uint32_t ack_timeouts;   /* deliveries whose ack_timeout ran out */
	uint32_t redrives;       /* kept dead letters redriven (published again) */
	uint32_t dead_letters[DLQ_DEAD_CAUSES]; /* dead letters the broker accepted, by cause (cause.h) */
};

/* A zeroed struct is an empty history. */
struct dlq_history {
	int64_t newest;          /* the latest minute counted in (Unix seconds); slots after it do not exist */
	struct dlq_history_minute slots[DLQ_HISTORY_MINUTES]; /* minute m is in slots[(m / 60) % 60] */
};

enum dlq_history_what {
	DLQ_HISTORY_NACK,
	DLQ_HISTORY_ACK_TIMEOUT,
	DLQ_HISTORY_REDRIVE,
	DLQ_HISTORY_DEAD_LETTER, /* with its cause */
};

/* The start of the minute holding wall_ms (Unix milliseconds; before 1970
 * counts as 1970's first minute), in Unix seconds. */
int64_t history__minute_of(int64_t wall_ms);

/* Counts one event of kind what (a dead letter's cause: cause, else
 * ignored; out of range: unknown) in the minute of wall_ms. */
void history__count(struct dlq_history *h, int64_t wall_ms, enum dlq_history_what what, unsigned cause);

/* The minutes of the hour up to the one of wall_ms (it included) that hold
 * anything, oldest first, copied into out (DLQ_HISTORY_MINUTES of them at
 * most); returns how many. Minutes after wall_ms's (a clock put back) are
 * left out. */
size_t history__minutes(const struct dlq_history *h, int64_t wall_ms, struct dlq_history_minute out[DLQ_HISTORY_MINUTES]);

/* Adds m's counts (a restored minute) into h, saturating, if m's minute is
 * within the hour up to wall_ms; returns whether it was. */
bool history__merge(struct dlq_history *h, const struct dlq_history_minute *m, int64_t wall_ms);

/* Whether m counts nothing. */
bool history__minute_empty(const struct dlq_history_minute *m);

/* The dead letters of m, every cause together. */
uint64_t history__dead_letters(const struct dlq_history_minute *m);

#endif
