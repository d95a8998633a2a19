/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Running gauges (see gauges.h): O(1) updates, one array slot per policy of
 * the current table, found by the policy's address.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/gauges.h"
#include "model/policy.h"

int gauges__init(struct dlq_gauge_book *b, const struct dlq_policy_table *table)
{
	memset(b, 0, sizeof(*b));
	b->table = table;
	b->count = table->count;
	b->per = calloc(b->count ? b->count : 1, sizeof(*b->per));
	return b->per ? 0 : ENOMEM;
}

void gauges__cleanup(struct dlq_gauge_book *b)
{
	free(b->per);
	memset(b, 0, sizeof(*b));
}

/* The gauges of p, or NULL when p is not in the current table. */
static struct dlq_gauges *of(struct dlq_gauge_book *b, const struct dlq_policy *p)
{
	long i = policy__index_in(b->table, p);
	if(i < 0 || (size_t)i >= b->count) return NULL;
	return &b->per[i];
}

/* Adds or takes away n; unsigned arithmetic, so a gauge never leaves its
 * range as long as every take matches an add. */
static void step(uint64_t *g, int sign, uint64_t n)
{
	if(sign > 0){
		*g += n;
	}else{
		*g -= n;
	}
}

void gauges__record(struct dlq_gauge_book *b, const struct dlq_policy *p, int sign, uint64_t bytes)
{
	if(b == NULL) return;
	/* Written out rather than looped: every tracked message comes here. */
	step(&b->total.records, sign, 1);
	step(&b->total.ledger_bytes, sign, bytes);
	struct dlq_gauges *g = of(b, p);
	if(g == NULL) return;
	step(&g->records, sign, 1);
	step(&g->ledger_bytes, sign, bytes);
}

void gauges__record_bytes(struct dlq_gauge_book *b, const struct dlq_policy *p, int sign, uint64_t bytes)
{
	if(b == NULL) return;
	/* Written out, as gauges__record: 2.1 comes here for every delivery
	 * of a message to a subscriber but its first. */
	step(&b->total.ledger_bytes, sign, bytes);
	struct dlq_gauges *g = of(b, p);
	if(g) step(&g->ledger_bytes, sign, bytes);
}

void gauges__envelope(struct dlq_gauge_book *b, const struct dlq_policy *p, bool delayed, int sign, uint64_t bytes)
{
	if(b == NULL) return;
	struct dlq_gauges *g[2] = { &b->total, of(b, p) };
	for(int k = 0; k < 2; k++){
		if(g[k] == NULL) continue;
		step(delayed ? &g[k]->delayed : &g[k]->pending, sign, 1);
		step(&g[k]->owed_bytes, sign, bytes);
	}
}

void gauges__awaiting(struct dlq_gauge_book *b, const struct dlq_policy *p, int sign)
{
	if(b == NULL) return;
	step(&b->total.awaiting, sign, 1);
	struct dlq_gauges *g = of(b, p);
	if(g) step(&g->awaiting, sign, 1);
}

void gauges__replace(struct dlq_gauge_book *b, struct dlq_gauges *per, size_t count)
{
	free(b->per);
	b->per = per;
	b->count = count;
}
