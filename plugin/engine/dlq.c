/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The engine (see dlq.h): tracking inbound publishes, handing retry copies
 * and dead letters to the broker and keeping what it has not taken, holding
 * the memory bound, and the per-delivery checks of redelivery tracking.
 * NACKs are nack.c, ticks tick.c. Every outbound effect goes through
 * port.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/dlq.h"
#include "engine/engine.h"
#include "model/envelope.h"
#include "util/errtext.h"
#include "util/headers.h"
#include "util/port.h"

/* At most one "evicting" warning per this many milliseconds. */
#define EVICT_LOG_INTERVAL_MS 60000

static void record_dropped(void *ctx, struct dlq_record *r, bool expired)
{
	struct dlq *d = ctx;
	/* A held copy whose record leaves is let go: past its NACK window the
	 * client had the time to NACK it (see holds.h). */
	holds__release(&d->holds, r);
	if(d->recent_sends[r->id.raw[0]].record == r) d->recent_sends[r->id.raw[0]].record = NULL;
	redelivery__record_gone(&d->redelivery, &d->ledger, r);
	if(expired){
		COUNT(d, r->policy, expired, 1);
	}else{
		COUNT(d, r->policy, evicted, 1);
	}
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
	if(d->cfg.redelivery == DLQ_REDELIVERY_OFF || d->cfg.exact_counting) return;
	for(struct dlq_record *r = d->ledger.oldest; r; r = r->newer){
		/* Out of memory: the rest are not counted, which only counts less. */
		if(redelivery__note_copy(&d->redelivery, &d->ledger, r, NULL)) break;
	}
}

int dlq__init(struct dlq *d, struct dlq_config *cfg, char *err, size_t errlen)
{
	memset(d, 0, sizeof(*d));
	d->cfg = *cfg;
	memset(cfg, 0, sizeof(*cfg));
	outbox__init(&d->outbox);
	unsaved__init(&d->unsaved);
	schedule__init(&d->delayed);
	idgen__init(&d->idgen);
	d->next_seq = 1;
	d->persist.journal_fd = -1;
	sessions__init(&d->sessions);
	d->policy_counters = calloc(d->cfg.policies.count ? d->cfg.policies.count : 1, sizeof(*d->policy_counters));
	if(d->policy_counters == NULL || ledger__init(&d->ledger) || redelivery__init(&d->redelivery)
			|| holds__init(&d->holds)){
		snprintf(err, errlen, "out of memory");
		return ENOMEM;
	}
	/* Without memory for it the cache answers every lookup from the trie:
	 * slower, not wrong. */
	(void)match_cache__init(&d->matches, d->policy_generation);
	d->ledger.on_drop = record_dropped;
	d->ledger.on_drop_ctx = d;
	if(gauges__init(&d->gauges, &d->cfg.policies)){
		snprintf(err, errlen, "out of memory");
		return ENOMEM;
	}
	d->ledger.book = d->outbox.book = d->delayed.book = &d->gauges;
	int rc = persist__open(d, err, errlen);
	if(rc == 0){
		index_restored(d);
		engine__settle_restored_holds(d);
	}
	return rc;
}

static const char *kind_text(const struct dlq_envelope *e)
{
	return e->kind == DLQ_ENV_DEAD_LETTER ? "dead letter" : "retry copy";
}

/* Makes room for bytes more in the ledger, oldest records first, without
 * touching what is owed. */
void engine__make_room(struct dlq *d, size_t bytes)
{
	uint64_t max = d->cfg.max_pending_bytes;
	uint64_t owed = dlq__owed_bytes(d);
	if(d->ledger.bytes + owed + bytes <= max) return;

	uint64_t target = 0;
	if(max > owed + bytes) target = max - owed - bytes;
	size_t n = ledger__evict_to(&d->ledger, target);
	uint64_t now = port__now_ms();
	if(n && (d->last_evict_log_ms == 0 || now - d->last_evict_log_ms >= EVICT_LOG_INTERVAL_MS)){
		d->last_evict_log_ms = now;
		port__log(DLQ_LOG_WARNING, "max_pending_bytes (%" PRIu64 ") reached: evicting the oldest NACKable "
				"deliveries before their nack_window ends (%" PRIu64 " evicted so far)",
				max, d->counters.evicted);
	}
}

/* Records a delivery in the ledger if it fits. Takes r either way. */
static int remember(struct dlq *d, struct dlq_record *r)
{
	size_t bytes = record__bytes(r);
	if(dlq__owed_bytes(d) + bytes > d->cfg.max_pending_bytes){
		record__free(r);
		return ENOSPC;
	}
	engine__make_room(d, bytes);
	return ledger__insert(&d->ledger, r);
}

int dlq__track(struct dlq *d, const struct dlq_policy *policy, const char *topic,
		const void *payload, uint32_t payload_len, uint8_t qos,
		const uint8_t *headers, size_t headers_len, char id_out[DLQ_ID_LEN + 1])
{
	struct dlq_id id;

	d->tick_quiet = false;
	if(payload_len > d->cfg.max_pending_bytes){
		COUNT(d, policy, untracked_full, 1);
		return ENOSPC;
	}
	int rc = idgen__next(&d->idgen, &id);
	if(rc){
		port__log(DLQ_LOG_ERR, "random source failed (%s): message on " QFMT " not tracked", strerror(rc), Q(topic));
		return rc;
	}
	struct dlq_record *r = engine__record_new_fn(d)(&id, NULL,
			topic, NULL, payload, payload_len, headers, headers_len, policy, 1, qos, port__now_ms());
	if(r == NULL){
		port__log(DLQ_LOG_ERR, "out of memory: message on " QFMT " not tracked", Q(topic));
		return ENOMEM;
	}
	rc = remember(d, r);
	if(rc == ENOSPC){
		COUNT(d, policy, untracked_full, 1);
		return rc;
	}
	if(rc) return rc;
	persist__note_record(d, r);
	/* The payload is the broker's stored message: 2.0's READ checks carry
	 * it (2.1's carry the dlq-id instead). */
	if(d->cfg.redelivery != DLQ_REDELIVERY_OFF && !d->cfg.exact_counting){
		redelivery__bind_payload(&d->redelivery, r, payload);
	}
	id__encode(&id, id_out);
	COUNT(d, policy, tracked, 1);
	return 0;
}

/* The record that makes a retry copy NACKable once the broker accepts it,
 * allocated before the copy is handed over: a copy must not go out that
 * could not be NACKed for want of memory. NULL when out of memory. */
static struct dlq_record *copy_record_new(const struct dlq_envelope *e, uint8_t qos)
{
	struct dlq_record *copy = record__new(&e->id, &e->origin_id, e->topic, e->origin_topic,
			e->payload, e->payload_len, e->headers, e->headers_len, e->policy,
			(uint16_t)(e->retry_count + 1), qos, port__now_ms());
	if(copy) record__set_first_nack_ms(copy, e->first_nack_ms);
	return copy;
}

/* A retry copy the broker has accepted becomes NACKable in turn. Its
 * record is made now, not at the NACK, so that a delay does not eat its
 * NACK window. Takes copy. */
static void record_copy(struct dlq *d, struct dlq_envelope *e, struct dlq_record *copy)
{
	e->recorded = true;
	copy->created_ms = port__now_ms();
	if(remember(d, copy)){
		port__log(DLQ_LOG_WARNING, "retry copy on " QFMT " does not fit max_pending_bytes: it is sent, "
				"but it cannot be NACKed", Q(e->topic));
		return;
	}
	persist__note_record(d, copy);
	if(e->target_client && !e->target_persists) engine__hold(d, e, copy);
	if(d->cfg.redelivery != DLQ_REDELIVERY_OFF
			&& redelivery__note_copy(&d->redelivery, &d->ledger, copy, e->target_client)){
		port__log(DLQ_LOG_ERR, "out of memory: redeliveries of the retry copy on " QFMT " are not counted", Q(e->topic));
	}
}

void engine__send(struct dlq *d, struct dlq_envelope *e)
{
	struct dlq_envelope_props props;
	struct dlq_headers h = {0};
	struct dlq_record *copy = NULL;
	struct dlq_sub_match m;
	int rc = 0;
	int qos = engine__copy_qos(d, e, &m);
	if(qos < 0){
		engine__copy_unreachable(d, e, qos);
		return;
	}
	if(e->kind == DLQ_ENV_RETRY_COPY && !e->recorded && e->policy){
		copy = copy_record_new(e, (uint8_t)qos);
		if(copy == NULL) rc = ENOMEM;
	}
	if(rc == 0){
		/* The plugin's properties go to the port as strings, after the
		 * original's encoded headers: no encoded copy of them is made,
		 * except to add the subscription identifiers of a targeted copy
		 * (2.1, engine__copy_qos). */
		const uint8_t *hdr = e->headers;
		size_t hdr_len = e->headers_len;
		if(m.id_count){
			rc = headers__append_raw(&h, e->headers, e->headers_len);
			if(rc == 0) rc = engine__add_sub_ids(&h, &m);
			hdr = h.data;
			hdr_len = h.len;
		}
		envelope__props(e, &props);
		if(rc == 0){
			rc = port__publish_with(e->target_client, e->topic, (uint8_t)qos, false,
					e->payload, e->payload_len, hdr, hdr_len, props.items, props.count);
		}
		headers__free(&h);
	}
	d->changes++;

	if(rc == 0){
		/* What the broker took: a session that goes offline keeps it
		 * only at QoS 1 or 2 (dlq__client_offline). */
		if(e->kind == DLQ_ENV_RETRY_COPY) e->qos = (uint8_t)qos;
		if(e->kind == DLQ_ENV_DEAD_LETTER){
			COUNT(d, e->policy, dead_letters, 1);
			port__log_dead_letter(e->origin_topic, props.origin_id, e->topic, (unsigned)e->retry_count, e->reason);
		}else{
			COUNT(d, e->policy, retry_copies, 1);
			if(copy) record_copy(d, e, copy);
			else e->recorded = true;
		}
		outbox__push(&d->outbox, &d->outbox.sent, e);
		return;
	}

	record__free(copy);
	COUNT(d, e->policy, publish_failures, 1);
	if(e->failures++ == 0){
		port__log(DLQ_LOG_ERR, "failed to publish %s to " QFMT ": %s; kept, retrying every tick",
				kind_text(e), Q(e->topic), strerror(rc));
	}
	outbox__push(&d->outbox, &d->outbox.owed, e);
}

void dlq__client_active(struct dlq *d, const char *client, uintptr_t conn)
{
	redelivery__connected(&d->redelivery, client, conn);
}

void dlq__client_left(struct dlq *d, const char *client, uintptr_t conn)
{
	redelivery__disconnected(&d->redelivery, client, conn);
}

/* Dead-letters a message redelivered once too often to client, as a NACK
 * at its last allowed attempt would. Returns whether the dead letter was
 * made (if not, the message must stay in the session). */
bool engine__divert_redelivered(struct dlq *d, struct dlq_record *r, const char *client, unsigned delivered)
{
	char reason[512];
	snprintf(reason, sizeof(reason), "delivered %u times to " QFMT " without acknowledgement (max_attempts %u): "
			"removed from its session", delivered, Q(client), (unsigned)r->policy->max_attempts);
	int rc = engine__dead_letter_of(d, r, client, reason, delivered, true);
	if(rc){
		port__log(DLQ_LOG_ERR, "message on " QFMT " delivered %u times to " QFMT " is redelivered once more: "
				"its dead letter %s", Q(record__topic(r)), delivered, Q(client),
				rc == ENOSPC ? "does not fit max_pending_bytes" : "could not be made (out of memory)");
		return false;
	}
	COUNT(d, r->policy, diverted, 1);
	return true;
}

bool dlq__read_check(struct dlq *d, const struct dlq_read_check *c)
{
	struct dlq_read_verdict v;
	if(d->cfg.redelivery == DLQ_REDELIVERY_OFF) return false;
	d->tick_quiet = false; /* it may queue a kick */
	if(d->cfg.exact_counting) return engine__read_check_exact(d, c);
	if(redelivery__read_check(&d->redelivery, &d->ledger, c, &v)){
		port__log(DLQ_LOG_ERR, "out of memory: a delivery on " QFMT " to " QFMT " is not counted", Q(c->topic), Q(c->client));
		return false;
	}
	struct dlq_delivery *dv = v.delivery;
	if(dv == NULL) return false;
	/* Another copy (an overlapping subscription) of a message just removed
	 * from this session goes too: its dead letter is made. */
	if(dv->diverted) return v.in_burst;
	if(!v.redelivery) return false;

	const struct dlq_policy *p = dv->record->policy;
	unsigned delivered = record__attempt(dv->record) + dv->redeliveries;
	if(delivered < p->max_attempts || !engine__divert_redelivered(d, dv->record, c->client, delivered)){
		dv->redeliveries++;
		COUNT(d, p, redeliveries, 1);
		return false;
	}
	dv->diverted = true;
	if(v.first_in_burst && redelivery__queue_kick(&d->redelivery, dv->client, c->conn)){
		port__log(DLQ_LOG_ERR, "out of memory: " QFMT " may receive nothing more until it reconnects", Q(c->client));
	}
	return true;
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
	size_t owed = persist__close(d);
	if(owed){
		port__log(DLQ_LOG_ERR, "%zu retry copies or dead letters the broker had not accepted are lost at shutdown", owed);
	}
	schedule__cleanup(&d->delayed);
	outbox__cleanup(&d->outbox);
	redelivery__cleanup(&d->redelivery, &d->ledger);
	holds__cleanup(&d->holds);
	ledger__cleanup(&d->ledger);
	gauges__cleanup(&d->gauges);
	free(d->policy_counters);
	d->policy_counters = NULL;
	nonack__free(&d->nonack);
	deadsubs__free(&d->deadsubs);
	sessions__cleanup(&d->sessions);
	match_cache__cleanup(&d->matches);
	systopics__cleanup(&d->sys);
	for(size_t i = 0; i < d->retired_count; i++){
		policy__table_free(&d->retired[i]);
	}
	free(d->retired);
	d->retired = NULL;
	d->retired_count = 0;
	config__free(&d->cfg);
}
