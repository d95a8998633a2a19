/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What api/ and broker/ read of the engine, and the small notes the
 * adapters make per message (dlq.h, "Reads and notes"): struct dlq is
 * opaque outside engine/, so these are calls, which the build's link-time
 * optimisation inlines back into the adapters.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/dlq.h"
#include "engine/engine.h"

struct dlq *dlq__new(void)
{
	return calloc(1, sizeof(struct dlq));
}

void dlq__free(struct dlq *d)
{
	free(d);
}

const struct dlq_policy *dlq__policy_for(struct dlq *d, const char *topic)
{
	return match_cache__match(&d->matches, &d->cfg.policies, d->policy_generation, topic);
}

bool dlq__policy_cached(struct dlq *d, const char *topic, const struct dlq_policy **policy)
{
	return match_cache__hit(&d->matches, d->policy_generation, topic, policy);
}

const struct dlq_policy *dlq__policy_missed(struct dlq *d, const char *topic)
{
	return match_cache__miss(&d->matches, &d->cfg.policies, d->policy_generation, topic);
}

void dlq__event(struct dlq *d)
{
	redelivery__event(&d->redelivery);
	d->tick_quiet = false;
}

void dlq__quiet_event(struct dlq *d)
{
	redelivery__event(&d->redelivery);
}

const struct dlq_config *dlq__config(const struct dlq *d)
{
	return &d->cfg;
}

const struct dlq_broker *dlq__broker(const struct dlq *d)
{
	return &d->broker;
}

unsigned dlq__policy_generation(const struct dlq *d)
{
	return d->policy_generation;
}

bool dlq__tracks_nothing(const struct dlq *d)
{
	return d->ledger.count == 0;
}

bool dlq__session_lasts(const struct dlq *d, const char *client)
{
	return sessions__life(&d->sessions, client) == DLQ_SESSION_LASTS;
}

bool dlq__any_deadlines(const struct dlq *d)
{
	return d->any_deadlines;
}

void dlq__figures(const struct dlq *d, long policy, struct dlq_figures *out)
{
	if(policy < 0 || (size_t)policy >= d->cfg.policies.count){
		out->counters = d->counters;
		out->gauges = d->gauges.total;
		out->kept = (struct dlq_letter_tally){ .count = d->letters.count, .bytes = d->letters.bytes };
		return;
	}
	size_t i = (size_t)policy;
	memset(&out->counters, 0, sizeof(out->counters));
	if(d->policy_counters) out->counters = d->policy_counters[i];
	memset(&out->gauges, 0, sizeof(out->gauges));
	if(i < d->gauges.count) out->gauges = d->gauges.per[i];
	out->kept = letters__tally(&d->letters, i);
}

size_t dlq__history(const struct dlq *d, size_t policy, int64_t wall_ms,
		struct dlq_history_minute out[DLQ_HISTORY_MINUTES])
{
	if(policy >= d->cfg.policies.count || d->policy_history == NULL) return 0;
	return history__minutes(&d->policy_history[policy], wall_ms, out);
}

void dlq__reset_counters(struct dlq *d)
{
	memset(&d->counters, 0, sizeof(d->counters));
	if(d->policy_counters) memset(d->policy_counters, 0, d->cfg.policies.count * sizeof(*d->policy_counters));
}
