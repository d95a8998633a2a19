/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A failed attempt (see engine.h, engine__attempt_failed): a delivery of a
 * tracked message that its subscriber NACKed (nack.c), or whose
 * ack_timeout ran out before it was settled (engine__deadlines_tick, from
 * the tick), becomes a retry copy, at once or after a delay, or, at its
 * last attempt or on a final NACK, a dead letter; either way the
 * subscriber has settled it, once. Also what a settlement command refused
 * for an earlier one says (engine__settled_before). Beneath nack.c,
 * settle.c and tick.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/outbound.h"
#include "model/envelope.h"
#include "util/errtext.h"
#include "util/port.h"

/* At most one "could not retry" error per this many milliseconds. */
#define TIMEOUT_LOG_INTERVAL_MS 60000

/* Deliveries of r's chain to client so far: r's attempt, plus the
 * redeliveries to that client counted since (2.0), or the sends to it
 * after the first (2.1, counted exactly: exact_counting.c). */
unsigned engine__attempts_of(struct dlq *d, struct dlq_record *r, const char *client)
{
	if(d->broker.exact_counting){
		struct dlq_sent_to st;
		bool sent = client && deliveries__sent_to(&d->redelivery, r, client, &st);
		return engine__attempt_of(r, sent ? deliveries__sends(&st) : 0u);
	}
	const struct dlq_delivery *dv = client ? deliveries__find_for(&d->redelivery, r, client) : NULL;
	return record__attempt(r) + (dv ? dv->redeliveries : 0u);
}

void engine__deadline_done(struct dlq *d, struct dlq_record *r, const char *client)
{
	struct dlq_deadline *e = deadlines__find(&d->deadlines, r, client);
	if(e) engine__note_deadline(d, deadlines__done(&d->deadlines, e, port__now_ms()));
}

static void retry(struct dlq *d, struct dlq_record *r, const struct dlq_failure *f, struct dlq_nack_result *res)
{
	struct dlq_id copy_id;
	double jitter = 0.0;
	const struct dlq_policy *p = r->policy;
	const char *target = p->retry_to ? NULL : f->client;

	if(id__gen_next(&d->idgen, &copy_id) || (p->retry_jitter > 0.0 && id__gen_fraction(&d->idgen, &jitter))){
		res->status = DLQ_NACK_RANDOM_FAILED;
		return;
	}
	struct dlq_envelope *e = envelope__retry_copy(r, &copy_id, p->retry_to, target, f->client, port__wall_ms());
	if(e == NULL){
		res->status = DLQ_NACK_NOMEM;
		return;
	}
	if(f->bounded && !engine__fits_owed(d, e)){
		envelope__free(e);
		res->status = DLQ_NACK_FULL;
		return;
	}
	e->seq = d->next_seq++;
	e->retry_count = (uint16_t)res->attempt;
	/* Its QoS is decided when it is published (outbound__copy_qos). */
	e->target_persists = target && f->client_persists;
	e->target_settles = target && f->client_settles;
	int64_t requested = f->delay_requested ? (int64_t)(f->delay_ms > INT64_MAX ? INT64_MAX : f->delay_ms) : -1;
	e->delay_ms = policy__retry_delay_ms(p, res->attempt, requested, jitter);
	res->delay_ms = e->delay_ms;
	if(target && f->client_gone){
		/* 2.0 has no session for the client any more (a deadline ran
		 * out after it left), and would drop a copy published for it
		 * alone in silence: its dead letter, as 2.1 makes one when it
		 * says so (outbound__copy_qos). Not delayed: nothing it waits
		 * for can bring the session back. */
		res->status = DLQ_NACK_RETRIED;
		store_port__add(&d->store, e, false);
		outbound__copy_unreachable(d, e, OUTBOUND_COPY_NO_SESSION);
		return;
	}
	if(e->delay_ms == 0){
		res->status = DLQ_NACK_RETRIED;
		store_port__add(&d->store, e, false);
		outbound__send(d, e);
		return;
	}
	e->due_ms = port__now_ms() + e->delay_ms;
	if(schedule__push(&d->delayed, e)){
		envelope__free(e);
		res->status = DLQ_NACK_NOMEM;
		return;
	}
	d->changes++;
	COUNT(d, p, delayed, 1);
	store_port__add(&d->store, e, false);
	res->status = DLQ_NACK_RETRIED;
}

static void dead_letter(struct dlq *d, struct dlq_record *r, const struct dlq_failure *f, struct dlq_nack_result *res)
{
	/* A final NACK at the last attempt is a final NACK's. */
	enum dlq_cause cause = f->final ? DLQ_DEAD_FINAL
			: f->how == DLQ_SETTLED_TIMEOUT ? DLQ_DEAD_ACK_TIMEOUT : DLQ_DEAD_NACK;
	int rc = outbound__dead_letter_of(d, r, f->client, cause, f->reason, res->attempt, f->bounded);
	res->status = rc == 0 ? DLQ_NACK_DEAD_LETTERED : rc == ENOSPC ? DLQ_NACK_FULL : DLQ_NACK_NOMEM;
}

void engine__attempt_failed(struct dlq *d, struct dlq_record *r, const struct dlq_failure *f,
		struct dlq_nack_result *res)
{
	res->attempt = engine__attempts_of(d, r, f->client);
	res->max_attempts = r->policy->max_attempts;
	bool last = f->final || res->attempt >= r->policy->max_attempts;
	uint8_t how = f->how == DLQ_SETTLED_TIMEOUT && last ? DLQ_SETTLED_TIMEOUT_DEAD : f->how;
	if(f->bounded && engine__owed_bytes(d) >= d->cfg.max_pending_bytes){
		res->status = DLQ_NACK_FULL;
		return;
	}
	int rc = ledger__add_settler(&d->ledger, r, f->client, how);
	if(rc){
		res->status = rc == EEXIST ? DLQ_NACK_DUPLICATE : DLQ_NACK_NOMEM;
		return;
	}

	/* On failure nothing was published or recorded, so r is still there
	 * and the settler is undone: the NACK may be made again, and a clock
	 * that ran out runs out again at the next tick. The retry copy's own
	 * record, taken in as the broker accepts the copy, makes no room
	 * meanwhile: that would evict the oldest records, r among them, while
	 * r is still used below. */
	d->evict_held = true;
	if(last){
		dead_letter(d, r, f, res);
	}else{
		retry(d, r, f, res);
	}
	d->evict_held = false;
	if(res->status != DLQ_NACK_RETRIED && res->status != DLQ_NACK_DEAD_LETTERED){
		ledger__drop_last_settler(&d->ledger, r);
		return;
	}
	store_port__settler(&d->store, r, f->client, how);
	engine__nacked(d, r, f->client);
	engine__deadline_done(d, r, f->client);
	/* The envelope, the settler and the copy's record took room: the
	 * ledger gives it back, r perhaps too (the caller must not use r). */
	outbound__make_room(d, 0);
}

/* A settlement command refused because client settled r before: how it
 * did. A late one after its clock ran out says the client was still
 * working on it (2.0: deadlines__late). */
static enum dlq_nack_status settled_before(struct dlq *d, const struct dlq_settler *s, const char *client)
{
	switch(s->how){
		case DLQ_SETTLED_ACK:
			return DLQ_NACK_ALREADY_ACKED;
		case DLQ_SETTLED_TIMEOUT:
		case DLQ_SETTLED_TIMEOUT_DEAD:
			engine__note_deadline(d, deadlines__late(&d->deadlines, client, port__now_ms()));
			return s->how == DLQ_SETTLED_TIMEOUT ? DLQ_NACK_TIMED_OUT : DLQ_NACK_TIMED_OUT_DEAD;
		case DLQ_SETTLED_DIVERTED:
			return DLQ_NACK_DIVERTED;
		default:
			return DLQ_NACK_DUPLICATE;
	}
}

/* The delivery e's clock ran out: a failed attempt of its client. Returns
 * false when it could not be carried out (out of memory, the random
 * source): the delivery stays, and the next tick tries again. */
static bool timed_out(struct dlq *d, struct dlq_deadline *e)
{
	struct dlq_record *r = e->record;
	const struct dlq_policy *p = r->policy;
	/* The delivery, and its client's id with it, is freed as it is
	 * settled. */
	char *client = strdup(e->client->id);
	if(client == NULL) return false;
	char reason[512];
	snprintf(reason, sizeof(reason), "subscriber " QFMT " did not acknowledge it within %s", Q(client),
			p->ack_timeout ? p->ack_timeout : "its ack_timeout");
	struct dlq_failure f = {
		.client = client,
		.reason = reason,
		.how = DLQ_SETTLED_TIMEOUT,
		.client_persists = e->client->persists,
		.client_settles = true,
		.client_gone = deadlines__gone(&d->deadlines, e->client),
		.bounded = false,
	};
	struct dlq_nack_result res;
	memset(&res, 0, sizeof(res));
	if(ledger__has_settler(r, client)){
		/* Settled while its clock ran or it waited (a restored state, a
		 * held copy let go with its dead letter): nothing runs out, and
		 * on 2.0 the client's next delivery starts, as after any
		 * settlement. */
		engine__note_deadline(d, deadlines__done(&d->deadlines, e, port__now_ms()));
		free(client);
		return true;
	}
	engine__attempt_failed(d, r, &f, &res);
	bool done = res.status == DLQ_NACK_RETRIED || res.status == DLQ_NACK_DEAD_LETTERED;
	if(done){
		COUNT(d, p, ack_timeouts, 1);
		engine__note_minute(d, p, DLQ_HISTORY_ACK_TIMEOUT, 0);
	}else{
		uint64_t now = port__now_ms();
		if(d->last_timeout_log_ms == 0 || now - d->last_timeout_log_ms >= TIMEOUT_LOG_INTERVAL_MS){
			d->last_timeout_log_ms = now;
			port__log(DLQ_LOG_ERR, "the ack_timeout of a delivery on " QFMT " to " QFMT " ran out, and its %s could "
					"not be made (%s): tried again every tick", Q(record__topic(r)), Q(client),
					res.attempt >= p->max_attempts ? "dead letter" : "retry copy",
					res.status == DLQ_NACK_RANDOM_FAILED ? "the random source failed" : "out of memory");
		}
	}
	free(client);
	return done;
}

void engine__deadlines_tick(struct dlq *d, uint64_t now)
{
	struct dlq_deadline *e;
	while((e = deadlines__expired(&d->deadlines, now)) != NULL){
		if(!timed_out(d, e)) break;
	}
}

struct dlq_record *engine__record_to_settle(struct dlq *d, const char *id, size_t id_len, const char *client,
		dlq_may_read_fn may_read, void *ctx, struct dlq_nack_result *res, const struct dlq_policy **policy)
{
	struct dlq_id raw;
	memset(res, 0, sizeof(*res));
	*policy = NULL;
	if(!id__decode(id, id_len, &raw)){
		res->status = DLQ_NACK_MALFORMED_ID;
		return NULL;
	}
	struct dlq_record *r = ledger__find(&d->ledger, &raw);
	if(r == NULL){
		res->status = DLQ_NACK_UNKNOWN_ID;
		d->counters.unknown_ids++;
		return NULL;
	}
	*policy = r->policy;
	/* A retry copy for the delivery topic goes to this client alone, and
	 * the broker makes no read check on such a publish: a client settles
	 * only what it may read, whoever gave it the id. */
	if(may_read && may_read(ctx, record__topic(r), record__payload(r), r->payload_len, r->qos)){
		res->status = DLQ_NACK_NOT_PERMITTED;
		return NULL;
	}
	res->attempt = engine__attempts_of(d, r, client);
	res->max_attempts = r->policy->max_attempts;
	const struct dlq_settler *before = ledger__settler(r, client);
	if(before){
		res->status = settled_before(d, before, client);
		return NULL;
	}
	return r;
}
