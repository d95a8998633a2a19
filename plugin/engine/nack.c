/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * NACKs (see dlq.h, dlq__nack): a NACK of a tracked delivery becomes a
 * retry copy, at once or after a delay, or, at its last attempt, a dead
 * letter; everything else is refused with a status the reply names.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/dlq.h"
#include "engine/outbound.h"
#include "model/envelope.h"
#include "util/port.h"

/* Deliveries of r's chain to client so far: r's attempt, plus the
 * redeliveries to that client counted since (2.0), or the sends to it
 * after the first (2.1, counted exactly: exact_counting.c). */
static unsigned attempts_of(struct dlq *d, struct dlq_record *r, const char *client)
{
	if(d->broker.exact_counting){
		struct dlq_sent_to st;
		bool sent = client && redelivery__sent_to(&d->redelivery, r, client, &st);
		return engine__attempt_of(r, sent ? redelivery__sends(&st) : 0u);
	}
	const struct dlq_delivery *dv = client ? redelivery__find(&d->redelivery, r, client) : NULL;
	return record__attempt(r) + (dv ? dv->redeliveries : 0u);
}

static void nack_retry(struct dlq *d, struct dlq_record *r, const struct dlq_nack *n, struct dlq_nack_result *res)
{
	struct dlq_id copy_id;
	double jitter = 0.0;
	const struct dlq_policy *p = r->policy;
	const char *target = p->retry_to ? NULL : n->client;

	if(idgen__next(&d->idgen, &copy_id) || (p->retry_jitter > 0.0 && idgen__fraction(&d->idgen, &jitter))){
		res->status = DLQ_NACK_RANDOM_FAILED;
		return;
	}
	struct dlq_envelope *e = envelope__retry_copy(r, &copy_id, p->retry_to, target, n->client, port__wall_ms());
	if(e == NULL){
		res->status = DLQ_NACK_NOMEM;
		return;
	}
	if(!engine__fits_owed(d, e)){
		envelope__free(e);
		res->status = DLQ_NACK_FULL;
		return;
	}
	e->seq = d->next_seq++;
	e->retry_count = (uint16_t)res->attempt;
	/* Its QoS is decided when it is published (engine__copy_qos). */
	e->target_persists = target && n->client_persists;
	int64_t requested = n->delay_requested ? (int64_t)(n->delay_ms > INT64_MAX ? INT64_MAX : n->delay_ms) : -1;
	e->delay_ms = policy__retry_delay_ms(p, res->attempt, requested, jitter);
	res->delay_ms = e->delay_ms;
	if(e->delay_ms == 0){
		res->status = DLQ_NACK_RETRIED;
		store_port__add(&d->store, e, false);
		engine__send(d, e);
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

static void nack_dead_letter(struct dlq *d, struct dlq_record *r, const struct dlq_nack *n, struct dlq_nack_result *res)
{
	int rc = engine__dead_letter_of(d, r, n->client, n->reason, res->attempt, true);
	res->status = rc == 0 ? DLQ_NACK_DEAD_LETTERED : rc == ENOSPC ? DLQ_NACK_FULL : DLQ_NACK_NOMEM;
}

void dlq__nack(struct dlq *d, const struct dlq_nack *n, struct dlq_nack_result *res)
{
	struct dlq_id id;
	const struct dlq_policy *policy = NULL;

	memset(res, 0, sizeof(*res));
	if(!id__decode(n->id, n->id_len, &id)){
		res->status = DLQ_NACK_MALFORMED_ID;
		goto refused;
	}
	struct dlq_record *r = ledger__find(&d->ledger, &id);
	if(r == NULL){
		res->status = DLQ_NACK_UNKNOWN_ID;
		d->counters.unknown_ids++;
		goto refused;
	}
	policy = r->policy;
	/* A retry copy for the delivery topic goes to this client alone, and
	 * the broker makes no read check on such a publish: a client may NACK
	 * only what it may read, whoever gave it the id. */
	if(n->may_read && n->may_read(n->may_read_ctx, record__topic(r), record__payload(r), r->payload_len, r->qos)){
		res->status = DLQ_NACK_NOT_PERMITTED;
		goto refused;
	}
	res->attempt = attempts_of(d, r, n->client);
	res->max_attempts = r->policy->max_attempts;
	if(dlq__owed_bytes(d) >= d->cfg.max_pending_bytes){
		res->status = DLQ_NACK_FULL;
		goto refused;
	}
	int rc = ledger__add_nacker(&d->ledger, r, n->client);
	if(rc == EEXIST){
		res->status = DLQ_NACK_DUPLICATE;
		goto refused;
	}else if(rc){
		res->status = DLQ_NACK_NOMEM;
		goto refused;
	}

	/* On failure nothing was published or recorded, so r is still there
	 * and the nacker is undone: the NACK may be made again. */
	if(res->attempt < r->policy->max_attempts){
		nack_retry(d, r, n, res);
	}else{
		nack_dead_letter(d, r, n, res);
	}
	if(res->status != DLQ_NACK_RETRIED && res->status != DLQ_NACK_DEAD_LETTERED){
		ledger__drop_last_nacker(&d->ledger, r);
		goto refused;
	}
	store_port__nacker(&d->store, r, n->client);
	engine__nacked(d, r, n->client);
	COUNT(d, policy, nacks, 1);
	/* The envelope and the nacker took room: the ledger gives it back. */
	engine__make_room(d, 0);
	return;

refused:
	COUNT(d, policy, nacks_refused, 1);
}

const char *dlq__nack_status_text(enum dlq_nack_status s)
{
	switch(s){
		case DLQ_NACK_RETRIED: return "retried";
		case DLQ_NACK_DEAD_LETTERED: return "dead-lettered";
		case DLQ_NACK_MALFORMED_ID: return "malformed dlq-id: expected 16 base64url characters";
		case DLQ_NACK_UNKNOWN_ID: return "unknown or expired dlq-id";
		case DLQ_NACK_DUPLICATE: return "delivery already NACKed by this client";
		case DLQ_NACK_FULL: return "refused: retry copies and dead letters not yet published fill max_pending_bytes";
		case DLQ_NACK_NOMEM: return "out of memory";
		case DLQ_NACK_RANDOM_FAILED: return "the random source failed: no dlq-id for the retry copy";
		case DLQ_NACK_NOT_PERMITTED: return "refused: this client may not read the message";
	}
	return "unknown status";
}
