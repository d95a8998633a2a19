/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The gauges counted afresh (see recount.h): a walk over the ledger, the
 * outbox and the schedule, which a reload needs (records change policy) and
 * tests use to check the running totals of model/gauges.c.
 */
#include <string.h>

#include "engine/engine.h"
#include "engine/recount.h"

/* The index of a policy of the current table, or -1. */
static long policy_index(const struct dlq *d, const struct dlq_policy *p)
{
	return policy__index_in(&d->cfg.policies, p);
}

static void add_envelope(const struct dlq *d, const struct dlq_envelope *e, bool delayed,
		struct dlq_gauges *per_policy, struct dlq_gauges *total)
{
	long i = policy_index(d, e->policy);
	struct dlq_gauges *g[2] = { total, i >= 0 && per_policy ? &per_policy[i] : NULL };
	for(int k = 0; k < 2; k++){
		if(g[k] == NULL) continue;
		if(delayed){
			g[k]->delayed++;
		}else{
			g[k]->pending++;
		}
		g[k]->owed_bytes += e->bytes;
	}
}

static void add_list(const struct dlq *d, const struct dlq_envelope_list *l,
		struct dlq_gauges *per_policy, struct dlq_gauges *total)
{
	for(const struct dlq_envelope *e = l->head; e; e = e->next){
		add_envelope(d, e, false, per_policy, total);
	}
}

void recount__gauges(const struct dlq *d, struct dlq_gauges *per_policy, struct dlq_gauges *total)
{
	memset(total, 0, sizeof(*total));
	if(per_policy) memset(per_policy, 0, d->cfg.policies.count * sizeof(*per_policy));
	for(const struct dlq_record *r = d->ledger.oldest; r; r = r->newer){
		long i = policy_index(d, r->policy);
		size_t bytes = record__bytes(r) + deliveries__table_bytes(&d->redelivery, r);
		total->records++;
		total->ledger_bytes += bytes;
		if(i >= 0 && per_policy){
			per_policy[i].records++;
			per_policy[i].ledger_bytes += bytes;
		}
	}
	add_list(d, &d->outbox.owed, per_policy, total);
	add_list(d, &d->outbox.sent, per_policy, total);
	add_list(d, &d->outbox.settling, per_policy, total);
	for(size_t i = 0; i < d->delayed.count; i++){
		add_envelope(d, d->delayed.heap[i], true, per_policy, total);
	}
	/* Deliveries awaiting settlement: their number, and their bytes in
	 * their records' (deadlines.h). */
	const struct dlq_deadlines *ds = &d->deadlines;
	for(size_t k = 0; k < chains__count(&ds->table); k++){
		for(const struct dlq_deadline *e = chains__chain(&ds->table, k); e; e = e->hnext){
			long i = policy_index(d, e->record->policy);
			total->awaiting++;
			total->ledger_bytes += DLQ_DEADLINE_BYTES;
			if(i >= 0 && per_policy){
				per_policy[i].awaiting++;
				per_policy[i].ledger_bytes += DLQ_DEADLINE_BYTES;
			}
		}
	}
}

