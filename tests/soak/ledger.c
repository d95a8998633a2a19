/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What happened to each message of the soak, and the tally at the end.
 *
 * Every sequence number the publishers handed out ends in exactly one row:
 *
 * - processed: a worker PUBACKed a delivery of it without NACKing it (once);
 * - dead-lettered: the inspector received one dead letter of it (and no
 *   worker processed it), by why it was made;
 * - duplicate: more than one of those (processed twice, processed and
 *   dead-lettered, dead-lettered twice): at-least-once delivery allows
 *   them, so they are accounted for, and each is explained by what the
 *   ledger saw happen to it;
 * - pending: none of those, while the plugin's getStatus still reports
 *   copies or dead letters owed or held back (as many as it reports);
 * - UNACCOUNTED: none of those and nothing pending: a loss.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soak.h"

#define SAMPLES 10

uint32_t ledger__next(struct ledger *l)
{
	if(l->n == l->cap){
		size_t cap = l->cap ? l->cap * 2 : 1 << 16;
		struct seq_rec *recs = realloc(l->recs, cap * sizeof(*recs));
		if(recs == NULL){
			fprintf(stderr, "dlq_soak: out of memory\n");
			abort();
		}
		l->recs = recs;
		l->cap = cap;
	}
	memset(&l->recs[l->n], 0, sizeof(l->recs[0]));
	return (uint32_t)l->n++;
}

struct seq_rec *ledger__rec(struct ledger *l, uint64_t seq)
{
	return seq < l->n ? &l->recs[seq] : NULL;
}

void ledger__touch(struct ledger *l, struct seq_rec *r)
{
	r->flags |= l->restarted ? SEQ_AFTER_RESTART : SEQ_BEFORE_RESTART;
}

struct seq_rec *ledger__from_payload(struct ledger *l, const unsigned char *payload, size_t len,
		size_t want_len, uint64_t *seq)
{
	static const char prefix[] = SOAK_PAYLOAD_PREFIX;
	char num[24];
	size_t p = sizeof(prefix) - 1, k = 0;
	if(len != want_len || memcmp(payload, prefix, p)){
		l->c.corrupt++;
		return NULL;
	}
	while(p < len && payload[p] >= '0' && payload[p] <= '9' && k < sizeof(num) - 1){
		num[k++] = (char)payload[p++];
	}
	num[k] = '\0';
	if(k == 0 || p >= len || payload[p++] != ' '){
		l->c.corrupt++;
		return NULL;
	}
	for(; p < len; p++){
		if(payload[p] != '.'){
			l->c.corrupt++;
			return NULL;
		}
	}
	*seq = strtoull(num, NULL, 10);
	struct seq_rec *r = ledger__rec(l, *seq);
	if(r == NULL || r->sent == 0) l->c.unknown_seq++;
	return r && r->sent ? r : NULL;
}

/* ---- the tally ---- */

enum row {
	ROW_PROCESSED_FIRST,        /* at its first delivery */
	ROW_PROCESSED_AFTER_CRASH,  /* on a redelivery after crashes, no retry copy */
	ROW_PROCESSED_COPY2,        /* on a retry copy with retry-count 1 */
	ROW_PROCESSED_COPY3,        /* on a retry copy with retry-count 2 (or more) */
	ROW_DEAD_NACKED,
	ROW_DEAD_DIVERTED,
	ROW_DEAD_LEFT,
	ROW_DEAD_RESTART,
	ROW_DEAD_OTHER,
	ROW_DUP_PROCESSED_TWICE,
	ROW_DUP_PROCESSED_AND_DEAD,
	ROW_DUP_DEAD_TWICE,
	ROW_PENDING,
	ROW_UNACKED,                /* the broker never acknowledged its publish */
	ROW_UNACCOUNTED,
	ROW_COUNT,
};

static const char *const row_names[ROW_COUNT] = {
	[ROW_PROCESSED_FIRST] = "processed at its first delivery",
	[ROW_PROCESSED_AFTER_CRASH] = "processed when redelivered after a worker crash",
	[ROW_PROCESSED_COPY2] = "processed on a retry copy with retry-count 1",
	[ROW_PROCESSED_COPY3] = "processed on a retry copy with retry-count 2",
	[ROW_DEAD_NACKED] = "dead-lettered: NACKed at its last attempt",
	[ROW_DEAD_DIVERTED] = "dead-lettered: redelivered max_attempts times without PUBACK (diverted)",
	[ROW_DEAD_LEFT] = "dead-lettered: retry copy's subscriber left without a session",
	[ROW_DEAD_RESTART] = "dead-lettered: retry copy without a session after the restart",
	[ROW_DEAD_OTHER] = "dead-lettered: other reason",
	[ROW_DUP_PROCESSED_TWICE] = "duplicate: processed twice or more",
	[ROW_DUP_PROCESSED_AND_DEAD] = "duplicate: processed and dead-lettered",
	[ROW_DUP_DEAD_TWICE] = "duplicate: dead-lettered twice or more",
	[ROW_PENDING] = "pending in the plugin (owed or held back)",
	[ROW_UNACKED] = "publish never acknowledged by the broker",
	[ROW_UNACCOUNTED] = "UNACCOUNTED",
};

enum cause {
	CAUSE_RESENT,
	CAUSE_SAME_DELIVERY,
	CAUSE_CRASH_AFTER_NACK,
	CAUSE_RESTART,
	CAUSE_UNEXPLAINED,
	CAUSE_COUNT,
};

static const char *const cause_names[CAUSE_COUNT] = {
	[CAUSE_RESENT] = "the publisher sent it again after a reconnect (no PUBACK had come): the broker took it twice",
	[CAUSE_SAME_DELIVERY] = "a delivery already processed came again (its PUBACK was lost: the connection ended by a crash, "
			"the plugin's kick or the restart before the broker read it) and was handled again",
	[CAUSE_CRASH_AFTER_NACK] = "a worker crashed while its NACK awaited PUBACK: the NACK counted, and the redelivered message was handled again",
	[CAUSE_RESTART] = "handled before and after the broker restart (restored session or state)",
	[CAUSE_UNEXPLAINED] = "UNEXPLAINED",
};

static enum row classify(const struct seq_rec *r)
{
	unsigned terminal = (unsigned)r->processed + r->dead;
	if(terminal == 0) return r->acked ? ROW_UNACCOUNTED : ROW_UNACKED;
	if(terminal > 1){
		if(r->dead == 0) return ROW_DUP_PROCESSED_TWICE;
		if(r->processed == 0) return ROW_DUP_DEAD_TWICE;
		return ROW_DUP_PROCESSED_AND_DEAD;
	}
	if(r->processed){
		if(r->processed_attempt >= 3) return ROW_PROCESSED_COPY3;
		if(r->processed_attempt == 2) return ROW_PROCESSED_COPY2;
		return r->crashes ? ROW_PROCESSED_AFTER_CRASH : ROW_PROCESSED_FIRST;
	}
	switch(r->dead_kinds){
		case DEAD_NACKED: return ROW_DEAD_NACKED;
		case DEAD_DIVERTED: return ROW_DEAD_DIVERTED;
		case DEAD_LEFT: return ROW_DEAD_LEFT;
		case DEAD_RESTART: return ROW_DEAD_RESTART;
		default: return ROW_DEAD_OTHER;
	}
}

static enum cause cause_of(const struct seq_rec *r)
{
	if(r->flags & SEQ_RESENT) return CAUSE_RESENT;
	if(r->flags & SEQ_SAME_PROCESSED) return CAUSE_SAME_DELIVERY;
	if(r->flags & SEQ_CRASH_AFTER_NACK) return CAUSE_CRASH_AFTER_NACK;
	if((r->flags & SEQ_BEFORE_RESTART) && (r->flags & SEQ_AFTER_RESTART)) return CAUSE_RESTART;
	return CAUSE_UNEXPLAINED;
}

static void print_rec(uint64_t seq, const struct seq_rec *r)
{
	printf("    seq %llu: sent %u acked %u deliveries %u (max attempt %u) processed %u (attempt %u) nacks %u "
			"crashes %u dead %u (kinds 0x%x, retry-count %u) flags 0x%x\n",
			(unsigned long long)seq, r->sent, r->acked, r->deliveries, r->max_attempt, r->processed,
			r->processed_attempt, r->nacks, r->crashes, r->dead, r->dead_kinds, r->dead_retry_count, r->flags);
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0;
}

static double per_s(uint64_t n, double s)
{
	return s > 0 ? (double)n / s : 0;
}

uint64_t ledger__tally(const struct ledger *l, const struct tally_context *t)
{
	uint64_t rows[ROW_COUNT] = {0}, causes[CAUSE_COUNT] = {0};
	uint64_t retried = 0, nacked_bad_count = 0;
	const struct soak_counts *c = &l->c;

	for(size_t i = 0; i < l->n; i++){
		const struct seq_rec *r = &l->recs[i];
		enum row row = classify(r);
		rows[row]++;
		if(r->max_attempt >= 2) retried++;
		if(row == ROW_DEAD_NACKED && r->dead_retry_count != SOAK_MAX_ATTEMPTS) nacked_bad_count++;
		if(row >= ROW_DUP_PROCESSED_TWICE && row <= ROW_DUP_DEAD_TWICE) causes[cause_of(r)]++;
	}
	/* As many of the unaccounted as the plugin still holds are pending. */
	uint64_t held = t->final && t->final->valid ? (uint64_t)(t->final->pending + t->final->delayed) : 0;
	uint64_t moved = rows[ROW_UNACCOUNTED] < held ? rows[ROW_UNACCOUNTED] : held;
	rows[ROW_PENDING] += moved;
	rows[ROW_UNACCOUNTED] -= moved;
	uint64_t unaccounted = rows[ROW_UNACCOUNTED] + rows[ROW_UNACKED];

	double ps = t->publish_s;
	printf("\n## Soak tally\n\n");
	printf("Published %llu messages (QoS 1, %zu-byte payloads) in %.0f s: %.0f msg/s offered, %.0f msg/s achieved; "
			"whole run %.0f s (settled: %s). Broker restarts (SIGTERM): %d%s.\n\n",
			(unsigned long long)l->n, t->cfg->payload_len, ps, t->cfg->rate, per_s(l->n, ps), t->total_s,
			t->settled ? "yes" : "NO", t->restarts,
			t->restarts ? "" : " (--restart-at off)");
	printf("| outcome | messages | share |\n|---|---:|---:|\n");
	for(int i = 0; i < ROW_COUNT; i++){
		printf("| %s | %llu | %.3f%% |\n", row_names[i], (unsigned long long)rows[i], pct(rows[i], l->n));
	}
	printf("| **total** | **%llu** | |\n", (unsigned long long)l->n);
	printf("\nOf these, %llu (%.2f%%) were retried at least once (a retry copy was delivered).\n",
			(unsigned long long)retried, pct(retried, l->n));

	uint64_t dups = rows[ROW_DUP_PROCESSED_TWICE] + rows[ROW_DUP_PROCESSED_AND_DEAD] + rows[ROW_DUP_DEAD_TWICE];
	printf("\n### Duplicates: %llu\n\n", (unsigned long long)dups);
	if(dups){
		printf("| cause (first that applies) | messages |\n|---|---:|\n");
		for(int i = 0; i < CAUSE_COUNT; i++){
			if(causes[i]) printf("| %s | %llu |\n", cause_names[i], (unsigned long long)causes[i]);
		}
	}
	printf("Also: %llu dead letters redelivered by the broker (the same dead letter again: its PUBACK was lost), "
			"%llu deliveries of an already-NACKed dlq-id acknowledged without a new decision.\n",
			(unsigned long long)c->dead_redelivered, (unsigned long long)c->redelivered_after_nack);

	printf("\n### Traffic\n\n| what | count | per second of publishing |\n|---|---:|---:|\n");
#define ROW(label, n) printf("| %s | %llu | %.1f |\n", (label), (unsigned long long)(n), per_s((n), ps))
	ROW("published (first sends)", c->published);
	ROW("publishes sent again after a reconnect", c->resent);
	ROW("deliveries to workers", c->deliveries);
	ROW("  of which retry copies", c->copies);
	ROW("  of which redeliveries (DUP)", c->redeliveries);
	ROW("processed (PUBACK)", c->processed);
	ROW("NACKs sent", c->nacks_sent);
	ROW("NACKs acknowledged by the broker", c->nacks_acked);
	ROW("worker crashes", c->crashes);
	ROW("worker connections (first ones included)", c->worker_reconnects);
	ROW("connections the broker closed", c->broker_closes);
	ROW("dead letters received", c->dead_letters);
#undef ROW
	printf("\nPublisher reconnections %llu, publishes the broker refused %llu; inspector reconnections %llu; "
			"bytes a crash discarded before they were written %llu; control replies other than NACK refusals %llu.\n",
			(unsigned long long)c->pub_reconnects, (unsigned long long)c->pub_refused,
			(unsigned long long)c->inspector_reconnects, (unsigned long long)c->dropped_out,
			(unsigned long long)c->replies_other);
	printf("\nFinal sweep (every subscriber reconnected once after everything had settled): %llu deliveries and "
			"%llu dead letters arrived only then.\n", (unsigned long long)t->sweep_deliveries,
			(unsigned long long)t->sweep_dead_letters);
	printf("\nNACK refusals: %llu \"already NACKed\" (expected after a crash while a NACK awaited its PUBACK), "
			"%llu other%s%s. Deliveries without a dlq-id: %llu. Corrupt payloads: %llu. Unknown sequence numbers: %llu. "
			"Dead letters by NACK whose retry-count is not %d: %llu.\n",
			(unsigned long long)c->nack_already, (unsigned long long)c->nack_refused_other,
			l->refusal_sample[0] ? ", first: " : "", l->refusal_sample, (unsigned long long)c->untagged,
			(unsigned long long)c->corrupt, (unsigned long long)c->unknown_seq, SOAK_MAX_ATTEMPTS,
			(unsigned long long)nacked_bad_count);
	printf("Broker: %s; its log has %llu \"dead-lettered message\" lines (the inspector received %llu distinct dead letters) "
			"and %llu \"recounts its in-flight window\" lines; $SYS dropped messages: %ld; CPU %.1f s; RSS at the end %ld KiB",
			t->restarts ? "restarted once" : "not restarted", (unsigned long long)t->log_dead_lines,
			(unsigned long long)c->dead_letters, (unsigned long long)t->log_recount_lines, t->dropped_sys,
			t->broker_cpu_s, t->broker_rss_kib);
	if(t->restarts){
		printf("; stopping it for the restart took %.0f ms, and publishing waited %.0f ms after it for every worker "
				"to subscribe again", t->restart_stop_ms, t->hold_ms);
	}
	printf(".\n");

	const struct plugin_status *s = t->summed, *f = t->final;
	if(s && s->valid){
		printf("\n### The plugin's counters (getStatus%s)\n\n", t->restarts ? ", summed over both broker runs; "
				"the first run's as of its last answer before the restart" : "");
		printf("tracked %.0f, nacks %.0f, nacksRefused %.0f, unknownIds %.0f, retryCopies %.0f, delayedCopies %.0f, "
				"deadLetters %.0f, redeliveries %.0f, diverted %.0f, publishFailures %.0f, expired %.0f, evicted %.0f, "
				"untrackedFull %.0f.\n", s->tracked, s->nacks, s->nacks_refused, s->unknown_ids, s->retry_copies,
				s->delayed_copies, s->dead_letters, s->redeliveries, s->diverted, s->publish_failures, s->expired,
				s->evicted, s->untracked_full);
	}
	if(f && f->valid){
		printf("At the end: records %.0f (%.1f MB), pending %.0f, delayed %.0f, owedBytes %.0f.\n",
				f->records, f->ledger_bytes / 1e6, f->pending, f->delayed, f->owed_bytes);
	}

	if(rows[ROW_UNACCOUNTED] || rows[ROW_UNACKED] || causes[CAUSE_UNEXPLAINED]){
		printf("\nFirst messages unaccounted for or duplicated without explanation:\n");
		int shown = 0;
		for(size_t i = 0; i < l->n && shown < SAMPLES; i++){
			const struct seq_rec *r = &l->recs[i];
			enum row row = classify(r);
			bool dup = row >= ROW_DUP_PROCESSED_TWICE && row <= ROW_DUP_DEAD_TWICE;
			if(row == ROW_UNACCOUNTED || row == ROW_UNACKED || (dup && cause_of(r) == CAUSE_UNEXPLAINED)){
				print_rec(i, r);
				shown++;
			}
		}
	}
	printf("\nUNACCOUNTED: %llu\n", (unsigned long long)unaccounted);
	return unaccounted;
}
