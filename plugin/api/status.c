/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Status reports (see status.h), rendered with cJSON. The figures are the
 * engine's (dlq__figures): its counters, the running gauges (gauges.h;
 * recount__gauges, engine/recount.c, is the walk that checks them) and
 * the dead-letter store's tallies.
 */
#include <stdlib.h>

#include "api/status.h"
#include "api/task_commands.h"
#include "model/cause.h"

static bool add_num(cJSON *o, const char *name, double v)
{
	return cJSON_AddNumberToObject(o, name, v) != NULL;
}

static bool add_policy_fields(cJSON *o, const struct dlq_policy *p)
{
	return cJSON_AddStringToObject(o, "filter", p->filter)
			&& add_num(o, "maxAttempts", p->max_attempts)
			&& cJSON_AddStringToObject(o, "deadLetter", p->dead_letter)
			&& cJSON_AddStringToObject(o, "retryTo", p->retry_to ? p->retry_to : "delivery")
			&& add_num(o, "retryDelayMs", (double)p->retry_delay_ms)
			&& add_num(o, "retryBackoff", p->retry_backoff)
			&& add_num(o, "retryMaxDelayMs", (double)p->retry_max_delay_ms)
			&& add_num(o, "retryJitter", p->retry_jitter)
			&& cJSON_AddStringToObject(o, "source", p->source ? p->source : "")
			&& (p->dead_letter_keep == DLQ_KEEP_UNSET || add_num(o, "deadLetterKeepBytes", (double)p->dead_letter_keep))
			&& (p->dead_letter_keep_for_ms == DLQ_KEEP_FOR_UNSET
					|| add_num(o, "deadLetterKeepForMs", (double)p->dead_letter_keep_for_ms))
			&& (p->ack_timeout_ms == 0 || (add_num(o, "ackTimeoutMs", (double)p->ack_timeout_ms)
					&& cJSON_AddStringToObject(o, "ackTimeout", p->ack_timeout)));
}

/* "deadLettersByCause": {"<cause>": n, ...}, every cause, in the order
 * of model/cause.h; they add up to deadLetters. */
static bool add_causes(cJSON *o, const struct dlq_counters *c)
{
	cJSON *by = cJSON_AddObjectToObject(o, "deadLettersByCause");
	for(unsigned i = 0; by && i < DLQ_DEAD_CAUSES; i++){
		if(!add_num(by, cause__name(i), (double)c->dead_letters_by_cause[i])) return false;
	}
	return by != NULL;
}

static bool add_counters(cJSON *o, const struct dlq_counters *c)
{
	return add_num(o, "tracked", (double)c->tracked)
			&& add_num(o, "untrackedFull", (double)c->untracked_full)
			&& add_num(o, "nacks", (double)c->nacks)
			&& add_num(o, "nacksRefused", (double)c->nacks_refused)
			&& add_num(o, "retryCopies", (double)c->retry_copies)
			&& add_num(o, "delayedCopies", (double)c->delayed)
			&& add_num(o, "deadLetters", (double)c->dead_letters)
			&& add_causes(o, c)
			&& add_num(o, "publishFailures", (double)c->publish_failures)
			&& add_num(o, "expired", (double)c->expired)
			&& add_num(o, "evicted", (double)c->evicted)
			&& add_num(o, "redeliveries", (double)c->redeliveries)
			&& add_num(o, "diverted", (double)c->diverted)
			&& add_num(o, "subscribersWithoutNack", (double)c->subscribers_without_nack)
			&& add_num(o, "redriven", (double)c->redriven)
			&& add_num(o, "deadLettersDropped", (double)c->dead_letters_dropped)
			&& add_num(o, "deadLettersExpired", (double)c->dead_letters_expired)
			&& add_num(o, "sentWithoutStamp", (double)c->sent_without_stamp)
			&& add_num(o, "acks", (double)c->acks)
			&& add_num(o, "acksRefused", (double)c->acks_refused)
			&& add_num(o, "progress", (double)c->progress)
			&& add_num(o, "ackTimeouts", (double)c->ack_timeouts)
			&& add_num(o, "finalNacks", (double)c->final_nacks);
}

static bool add_kept(cJSON *o, struct dlq_letter_tally t)
{
	return add_num(o, "keptDeadLetters", (double)t.count) && add_num(o, "keptDeadLetterBytes", (double)t.bytes);
}

static bool add_gauges(cJSON *o, const struct dlq_gauges *g)
{
	return add_num(o, "records", (double)g->records)
			&& add_num(o, "ledgerBytes", (double)g->ledger_bytes)
			&& add_num(o, "pending", (double)g->pending)
			&& add_num(o, "delayed", (double)g->delayed)
			&& add_num(o, "owedBytes", (double)g->owed_bytes)
			&& add_num(o, "awaitingAck", (double)g->awaiting);
}

cJSON *status__policies(const struct dlq *d)
{
	const struct dlq_policy_table *t = &dlq__config(d)->policies;
	cJSON *list = cJSON_CreateArray();
	for(size_t i = 0; list && i < t->count; i++){
		cJSON *o = cJSON_CreateObject();
		if(o == NULL || !cJSON_AddItemToArray(list, o) || !add_policy_fields(o, &t->items[i])){
			cJSON_Delete(list);
			return NULL;
		}
	}
	return list;
}

cJSON *status__report(const struct dlq *d)
{
	const struct dlq_config *cfg = dlq__config(d);
	struct dlq_figures f;
	dlq__figures(d, -1, &f);
	cJSON *root = cJSON_CreateObject();
	cJSON *totals = root ? cJSON_AddObjectToObject(root, "totals") : NULL;
	cJSON *policies = root ? cJSON_AddArrayToObject(root, "policies") : NULL;
	bool ok = totals && policies
			&& add_counters(totals, &f.counters) && add_gauges(totals, &f.gauges)
			&& add_num(totals, "unknownIds", (double)f.counters.unknown_ids)
			&& add_num(totals, "subscribersOfDeadLetters", (double)f.counters.subscribers_of_dead_letters)
			&& add_num(totals, "collected", (double)f.counters.collected)
			&& add_num(totals, "collectedDuplicates", (double)f.counters.collected_duplicates)
			&& add_num(totals, "collectedRefused", (double)f.counters.collected_refused)
			&& add_kept(totals, f.kept)
			&& add_num(root, "maxPendingBytes", (double)cfg->max_pending_bytes)
			&& add_num(root, "deadLetterKeepBytes", (double)cfg->dead_letter_keep)
			&& add_num(root, "deadLetterKeepForMs", (double)cfg->dead_letter_keep_for_ms)
			&& add_num(root, "nackWindowMs", (double)cfg->nack_window_ms)
			&& cJSON_AddBoolToObject(root, "stateFile", cfg->state_file != NULL);
	for(size_t i = 0; ok && i < cfg->policies.count; i++){
		dlq__figures(d, (long)i, &f);
		cJSON *o = cJSON_CreateObject();
		ok = o && cJSON_AddItemToArray(policies, o)
				&& cJSON_AddStringToObject(o, "filter", cfg->policies.items[i].filter)
				&& add_counters(o, &f.counters) && add_gauges(o, &f.gauges)
				&& add_kept(o, f.kept);
	}
	cJSON *tasks = ok ? task_commands__status(d) : NULL;
	if(tasks) cJSON_AddItemToObjectCS(root, "redriveTasks", tasks);
	if(!ok || tasks == NULL){
		cJSON_Delete(root);
		return NULL;
	}
	return root;
}
