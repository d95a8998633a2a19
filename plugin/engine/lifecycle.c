/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * An engine's life (see dlq.h, dlq__init and dlq__cleanup): its parts set
 * up, the state file restored through the store (store/persist.h, over a
 * view of those parts) and settled, the store port set; at the end, the
 * state saved and everything freed. Also what happens when a record leaves
 * the ledger, which every part that points at records must hear of.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/dlq.h"
#include "engine/engine.h"
#include "engine/letter_store.h"
#include "engine/outbound.h"
#include "engine/redrive_tasks.h"
#include "util/port.h"

static void record_dropped(void *ctx, struct dlq_record *r, bool expired)
{
	struct dlq *d = ctx;
	/* A held copy whose record leaves is let go: past its NACK window the
	 * client had the time to NACK it (see holds.h). */
	holds__release(&d->holds, r);
	send_cache__forget(&d->sends, r);
	redelivery__record_gone(&d->redelivery, &d->ledger, r);
	/* Evicted for the memory bound while a delivery of it awaited
	 * settlement: its deadline goes with it (counted as evicted). */
	deadlines__record_gone(&d->deadlines, r);
	if(expired){
		COUNT(d, r->policy, expired, 1);
	}else{
		COUNT(d, r->policy, evicted, 1);
	}
}

/* A record a delivery of which awaits settlement stays past its NACK
 * window: its deadline needs it (and its subscriber may still NACK it). */
static bool record_kept(void *ctx, const struct dlq_record *r)
{
	(void)ctx;
	return deadlines__of(r);
}

/* Records restored from the state file have lost the stored payload they
 * were bound to: the broker restored its own copy of each message from its
 * persistence file, at another address. Indexed by content, as retry copies
 * are, they are found by the READ checks of the restored sessions, so that a
 * message still in a session across a restart is counted (and a poison one
 * diverted) instead of being redelivered forever. Oldest first: of equal
 * messages the newest is found, as for copies. */
static void index_restored(struct dlq *d)
{
	/* 2.1's READ checks carry the dlq-id: nothing to index. */
	if(d->cfg.redelivery == DLQ_REDELIVERY_OFF || d->broker.exact_counting) return;
	for(struct dlq_record *r = d->ledger.oldest; r; r = r->newer){
		/* Out of memory: the rest are not counted, which only counts less. */
		if(redelivery__note_copy(&d->redelivery, &d->ledger, r, NULL)) break;
	}
}

int dlq__init(struct dlq *d, struct dlq_config *cfg, struct dlq_broker *broker, char *err, size_t errlen)
{
	memset(d, 0, sizeof(*d));
	d->cfg = *cfg;
	memset(cfg, 0, sizeof(*cfg));
	if(broker){
		d->broker = *broker;
		broker->db_path = NULL;
	}
	outbox__init(&d->outbox);
	unsaved__init(&d->unsaved);
	schedule__init(&d->delayed);
	id__gen_init(&d->idgen);
	d->next_seq = 1;
	d->persist.journal_fd = -1;
	sessions__init(&d->sessions);
	redrive_task__list_init(&d->tasks);
	d->policy_counters = calloc(d->cfg.policies.count ? d->cfg.policies.count : 1, sizeof(*d->policy_counters));
	d->policy_history = calloc(d->cfg.policies.count ? d->cfg.policies.count : 1, sizeof(*d->policy_history));
	if(d->policy_counters == NULL || d->policy_history == NULL || ledger__init(&d->ledger) || redelivery__init(&d->redelivery)
			|| holds__init(&d->holds) || letters__init(&d->letters, &d->cfg.policies, d->cfg.dead_letter_keep)){
		snprintf(err, errlen, "out of memory");
		return ENOMEM;
	}
	/* Without memory for it the cache answers every lookup from the trie:
	 * slower, not wrong. */
	(void)match_cache__init(&d->matches, d->policy_generation);
	/* Likewise: without it every send is found the long way. */
	if(d->broker.exact_counting) (void)send_cache__init(&d->sends);
	d->ledger.on_drop = record_dropped;
	d->ledger.keep = record_kept;
	d->ledger.on_drop_ctx = d;
	/* 2.1 shows every send; 2.0 only where a message is routed. */
	deadlines__init(&d->deadlines, d->broker.exact_counting ? DLQ_DEADLINES_PER_SEND : DLQ_DEADLINES_SEQUENTIAL);
	d->deadlines.ledger = &d->ledger;
	d->any_deadlines = config__has_deadlines(&d->cfg);
	/* 2.0's READ checks of QoS 0 messages are looked at too. */
	d->redelivery.every_qos = d->any_deadlines;
	if(gauges__init(&d->gauges, &d->cfg.policies)){
		snprintf(err, errlen, "out of memory");
		return ENOMEM;
	}
	d->ledger.book = d->outbox.book = d->delayed.book = d->deadlines.book = &d->gauges;
	struct state_view view = {
		.ledger = &d->ledger,
		.outbox = &d->outbox,
		.delayed = &d->delayed,
		.holds = &d->holds,
		.unsaved = &d->unsaved.list,
		.redelivery = &d->redelivery,
		.next_seq = &d->next_seq,
		.policies = &d->cfg.policies,
		.nack_window_ms = d->cfg.nack_window_ms,
		.record_part = engine__original_part(d),
		.broker_name = d->cfg.broker_name,
		.letters = d->cfg.dead_letter_keep ? &d->letters : NULL,
		.deadlines = &d->deadlines,
		.history = &d->policy_history,
		.tasks = d->cfg.dead_letter_keep ? &d->tasks : NULL,
	};
	struct persist_options po = {
		.state_file = d->cfg.state_file,
		.save_interval_ms = d->cfg.state_save_interval_ms,
		.save_on_change = d->cfg.state_save_on_change,
		.journal_sync_ms = d->cfg.state_journal_sync_ms,
		.foreground = d->cfg.state_save_foreground,
		.save_pause_ms = d->cfg.state_save_pause_ms,
		.changes = &d->changes,
		.totals = &d->counters,
	};
	int rc = persist__restore(&d->persist, &po, &view, err, errlen);
	if(rc) return rc;
	deadlines__restored(&d->deadlines);
	if(d->cfg.state_file) engine__settle_restored_copies(d);
	/* A smaller plugin_opt_dead_letter_keep than the saved letters take:
	 * the oldest go, counted, before the new snapshot. */
	if(d->letters.bytes > d->letters.max_bytes) letter_store__room(d, 0, -1);
	/* Saved letters that aged past their bound while the broker was down
	 * go now, counted, before the new snapshot; the pass also says when
	 * the tick's next one is due. */
	letter_store__expire(d, port__now_ms(), UINT_MAX);
	rc = persist__start(&d->persist, err, errlen);
	if(rc) return rc;
	d->store = persist__port(&d->persist);
	index_restored(d);
	engine__settle_restored_holds(d);
	return 0;
}

void dlq__cleanup(struct dlq *d)
{
	/* Publishing now would be in vain: Mosquitto 2.0 closes its message
	 * store before it unloads plugins, and never again processes what a
	 * plugin queues (src/mosquitto.c). So what is owed is saved, or, with
	 * no state file, reported. */
	/* What the broker took is in the database it saved before it unloads
	 * plugins (src/mosquitto.c): the final snapshot need not keep it. */
	unsaved__cleanup(&d->unsaved);
	size_t owed = persist__close(&d->persist);
	if(owed){
		port__log(DLQ_LOG_ERR, "%zu retry copies or dead letters the broker had not accepted are lost at shutdown", owed);
	}
	schedule__cleanup(&d->delayed);
	outbox__cleanup(&d->outbox);
	redelivery__cleanup(&d->redelivery, &d->ledger);
	deadlines__cleanup(&d->deadlines);
	holds__cleanup(&d->holds);
	ledger__cleanup(&d->ledger);
	redrive_tasks__detach(d);
	redrive_task__list_cleanup(&d->tasks);
	letters__cleanup(&d->letters);
	free(d->collect_warn);
	d->collect_warn = NULL;
	d->collect_warn_count = 0;
	gauges__cleanup(&d->gauges);
	free(d->policy_counters);
	d->policy_counters = NULL;
	free(d->policy_history);
	d->policy_history = NULL;
	nonack__free(&d->nonack);
	deadsubs__free(&d->deadsubs);
	sessions__cleanup(&d->sessions);
	match_cache__cleanup(&d->matches);
	send_cache__cleanup(&d->sends);
	for(size_t i = 0; i < d->retired_count; i++){
		policy__table_free(&d->retired[i]);
	}
	free(d->retired);
	d->retired = NULL;
	d->retired_count = 0;
	config__free(&d->cfg);
	free(d->broker.db_path);
	d->broker.db_path = NULL;
}
