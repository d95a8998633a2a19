/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Pacing at a rate, for redrive tasks (model/redrive_task.h): a token
 * bucket of rate letters a second holding at most one burst (pacer__burst),
 * set to the monotonic clock at each tick and drawn from letter by letter.
 */
#ifndef DLQ_PACER_H
#define DLQ_PACER_H

#include <stdbool.h>
#include <stdint.h>

/* A token bucket kept as its theoretical arrival time (GCRA, the
 * "virtual scheduling" form of a token bucket): time counts in
 * thousandths of a letter (ms times the rate), a letter costs 1000, and
 * one may go while the schedule runs at most burst - 1 letters ahead of
 * the clock. Exact in integers, nothing lost to rounding: in any window of
 * T seconds at most rate * T + burst letters go, and over a long run the
 * rate itself. */
struct dlq_pacer {
	uint64_t now;     /* the clock (ms * rate), set by pacer__advance */
	uint64_t tat;     /* when the next letter is due on that clock */
	uint64_t ahead;   /* how far ahead of the clock it may be: (burst - 1) * 1000 */
};

/* Letters a task of rate may move at once: a tenth of a second's worth
 * (the broker ticks about ten times a second when idle), rounded up, and
 * one more, so that a tick that comes late loses nothing of the rate. */
static inline uint32_t pacer__burst(uint32_t rate)
{
	return (rate + 9) / 10 + 1;
}

/* Sets the bucket's clock to now (the monotonic clock, ms) for rate. A
 * first call (or after a pause) finds the bucket full: one burst. */
void pacer__advance(struct dlq_pacer *p, uint32_t rate, uint64_t now);

/* Whether a letter may go now; pacer__take takes it (true) or says no. */
bool pacer__ready(const struct dlq_pacer *p);
bool pacer__take(struct dlq_pacer *p);

#endif
