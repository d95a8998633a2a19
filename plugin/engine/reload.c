/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Live policy reload (see dlq__reload in dlq.h). Mosquitto 2.0 does not pass
 * plugin options again on SIGHUP, so the plugin parses the options it was
 * started with once more, which re-reads plugin_opt_policy_file. The new
 * table is validated in full before anything changes; then chains in flight
 * follow the new policy of their filter, and chains whose filter is gone
 * keep the policy they started with (its table is kept while they use it).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/recount.h"
#include "engine/dlq.h"
#include "engine/engine.h"
#include "util/port.h"

struct filter_map {
	const char *filter;             /* borrowed from the old table */
	const struct dlq_policy *to;    /* borrowed from the new table */
};

/* The new policy of an old one: the same filter in the new table, or the
 * old one itself. map is the old table's mapping. */
static const struct dlq_policy *relink(const struct dlq_policy *p, const struct dlq_policy_table *old,
		const struct filter_map *map)
{
	long i = policy__index_in(old, p);
	if(i < 0) return p;
	return map[i].to ? map[i].to : p;
}

static void relink_list(struct dlq_envelope_list *l, const struct dlq_policy_table *old, const struct filter_map *map)
{
	for(struct dlq_envelope *e = l->head; e; e = e->next){
		e->policy = relink(e->policy, old, map);
	}
}

static bool in_table(const struct dlq_policy_table *t, const struct dlq_policy *p)
{
	return policy__index_in(t, p) >= 0;
}

static bool list_uses(const struct dlq_envelope_list *l, const struct dlq_policy_table *t)
{
	for(const struct dlq_envelope *e = l->head; e; e = e->next){
		if(in_table(t, e->policy)) return true;
	}
	return false;
}

/* Whether any record or envelope still points into t. */
static bool table_in_use(const struct dlq *d, const struct dlq_policy_table *t)
{
	for(const struct dlq_record *r = d->ledger.oldest; r; r = r->newer){
		if(in_table(t, r->policy)) return true;
	}
	for(size_t i = 0; i < d->delayed.count; i++){
		if(in_table(t, d->delayed.heap[i]->policy)) return true;
	}
	return list_uses(&d->outbox.owed, t) || list_uses(&d->outbox.sent, t) || list_uses(&d->outbox.settling, t);
}

/* Frees the retired tables nothing uses any more, so that reloads do not
 * accumulate memory: one pass over what the engine holds per reload. */
static void free_unused_retired(struct dlq *d)
{
	size_t kept = 0;
	for(size_t i = 0; i < d->retired_count; i++){
		if(table_in_use(d, &d->retired[i])){
			d->retired[kept++] = d->retired[i];
		}else{
			policy__table_free(&d->retired[i]);
		}
	}
	d->retired_count = kept;
}

/* After the records follow their new policies: the deliveries of those
 * whose policy has no ack_timeout any more are forgotten. */
static void drop_deadlines_without_timeout(struct dlq *d)
{
	struct dlq_deadlines *ds = &d->deadlines;
	for(size_t k = 0; ds->count && k < chains__count(&ds->table); k++){
		struct dlq_deadline *e = chains__chain(&ds->table, k);
		while(e){
			struct dlq_deadline *next = e->hnext;
			if(e->record->policy->ack_timeout_ms == 0) deadlines__remove(ds, e);
			e = next;
		}
	}
}

int dlq__reload(struct dlq *d, const struct dlq_option *opts, size_t count, char *err, size_t errlen)
{
	struct dlq_config fresh;
	d->tick_quiet = false;
	int rc = config__parse(opts, count, &fresh, err, errlen);
	if(rc) return rc;
	rc = config__check_deadlines(&fresh, d->broker.exact_counting, err, errlen);
	if(rc){
		config__free(&fresh);
		return rc;
	}

	struct dlq_policy_table *old = &d->cfg.policies;
	size_t n = fresh.policies.count;
	struct filter_map *map = calloc(old->count ? old->count : 1, sizeof(*map));
	struct dlq_counters *counters = calloc(n ? n : 1, sizeof(*counters));
	struct dlq_history *history = calloc(n ? n : 1, sizeof(*history));
	struct dlq_gauges *gauges = calloc(n ? n : 1, sizeof(*gauges));
	struct dlq_policy_table *retired = realloc(d->retired, (d->retired_count + 1) * sizeof(*retired));
	if(map == NULL || counters == NULL || history == NULL || gauges == NULL || retired == NULL){
		free(map);
		free(counters);
		free(history);
		free(gauges);
		if(retired) d->retired = retired;
		config__free(&fresh);
		snprintf(err, errlen, "out of memory");
		return ENOMEM;
	}
	d->retired = retired;

	/* Old filter -> new policy, by name; counters and rate history follow
	 * their filter. */
	for(size_t i = 0; i < old->count; i++){
		map[i].filter = old->items[i].filter;
		for(size_t k = 0; k < n; k++){
			if(!strcmp(fresh.policies.items[k].filter, old->items[i].filter)){
				map[i].to = &fresh.policies.items[k];
				counters[k] = d->policy_counters[i];
				history[k] = d->policy_history[i];
				break;
			}
		}
	}

	for(struct dlq_record *r = d->ledger.oldest; r; r = r->newer){
		r->policy = relink(r->policy, old, map);
	}
	relink_list(&d->outbox.owed, old, map);
	relink_list(&d->outbox.sent, old, map);
	relink_list(&d->outbox.settling, old, map);
	for(size_t i = 0; i < d->delayed.count; i++){
		d->delayed.heap[i]->policy = relink(d->delayed.heap[i]->policy, old, map);
	}

	/* A policy that no longer has an ack_timeout holds no delivery to one:
	 * those awaiting settlement under it wait no more. */
	drop_deadlines_without_timeout(d);

	/* Swap: the old table is kept for the chains that still use it. */
	d->retired[d->retired_count++] = *old;
	*old = fresh.policies;
	memset(&fresh.policies, 0, sizeof(fresh.policies));
	config__free(&fresh);
	free(d->policy_counters);
	d->policy_counters = counters;
	free(d->policy_history);
	d->policy_history = history;
	/* Records and envelopes now belong to other policies: the running
	 * gauges are counted afresh, once per reload (which walks them all
	 * anyway). */
	gauges__replace(&d->gauges, gauges, n);
	recount__gauges(d, d->gauges.per, &d->gauges.total);
	/* Kept letters are tallied by their filter's place in the new table. */
	if(letters__retable(&d->letters, &d->cfg.policies)){
		port__log(DLQ_LOG_ERR, "out of memory: kept dead letters are not counted per policy until the next reload");
	}
	/* Their age bounds may have changed with their policies: the next
	 * tick looks (letter_store__expire). */
	d->letters_due_ms = 0;
	free(map);
	free_unused_retired(d);
	d->any_deadlines = config__has_deadlines(&d->cfg);
	d->redelivery.every_qos = d->any_deadlines;
	d->policy_generation++;
	return 0;
}
