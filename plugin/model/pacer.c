/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The token bucket of pacer.h, in the virtual-scheduling form: exact in
 * integers.
 */
#include "model/pacer.h"

void pacer__advance(struct dlq_pacer *p, uint32_t rate, uint64_t now)
{
	p->now = now * rate;
	p->ahead = (uint64_t)(pacer__burst(rate) - 1) * 1000;
	/* Behind the clock: the bucket is full (no more than one burst). */
	if(p->tat < p->now) p->tat = p->now;
}

bool pacer__ready(const struct dlq_pacer *p)
{
	return p->tat <= p->now + p->ahead;
}

bool pacer__take(struct dlq_pacer *p)
{
	if(!pacer__ready(p)) return false;
	p->tat += 1000;
	return true;
}
