/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Tracking (see dlq.h): an inbound publish that matched a policy is
 * recorded in the ledger and gets its dlq-id; and the per-delivery checks
 * of redelivery tracking (READ access checks, connections seen and ended).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engine/dlq.h"
#include "engine/engine.h"
#include "engine/outbound.h"
#include "util/errtext.h"
#include "util/port.h"

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
	int rc = id__gen_next(&d->idgen, &id);
	if(rc){
		port__log(DLQ_LOG_ERR, "random source failed (%s): message on " QFMT " not tracked", strerror(rc), Q(topic));
		return rc;
	}
	/* Made and sized in one pass: every tracked message comes here. */
	size_t bytes;
	struct dlq_record *r = record__new_original(engine__original_part(d), &id, topic, payload, payload_len,
			headers, headers_len, policy, qos, port__now_ms(), &bytes);
	if(r == NULL){
		port__log(DLQ_LOG_ERR, "out of memory: message on " QFMT " not tracked", Q(topic));
		return ENOMEM;
	}
	rc = outbound__remember_sized(d, r, bytes);
	if(rc == ENOSPC){
		COUNT(d, policy, untracked_full, 1);
		return rc;
	}
	if(rc) return rc;
	store_port__record(&d->store, r);
	/* The payload is the broker's stored message: 2.0's READ checks carry
	 * it (2.1's carry the dlq-id instead). */
	if(d->cfg.redelivery != DLQ_REDELIVERY_OFF && !d->broker.exact_counting){
		redelivery__bind_payload(&d->redelivery, r, payload);
	}
	id__encode(&id, id_out);
	/* 2.1 stores the message at the addresses the publish came with: its
	 * sends are found by them. */
	if(d->broker.exact_counting) send_cache__remember(&d->sends, r, id_out, topic, payload);
	COUNT(d, policy, tracked, 1);
	return 0;
}

void dlq__client_active(struct dlq *d, const char *client, uintptr_t conn)
{
	redelivery__connected(&d->redelivery, client, conn);
	/* 2.0: the clock of its first delivery awaiting settlement may start. */
	if(d->deadlines.count) engine__note_deadline(d, deadlines__online(&d->deadlines, client, port__now_ms()));
}

/* A delivery whose clock a client's leaving started: saved. */
static void started_at_leave(void *ctx, const struct dlq_deadline *e)
{
	engine__note_deadline(ctx, e);
}

void dlq__client_left(struct dlq *d, const char *client, uintptr_t conn, bool clean)
{
	redelivery__disconnected(&d->redelivery, client, conn);
	/* 2.0: or back, resuming its session (deadlines__offline). */
	if(d->deadlines.count){
		engine__note_deadline(d, deadlines__offline(&d->deadlines, client, conn, clean, port__now_ms(),
				started_at_leave, d));
	}
}

/* 2.0's READ check with redelivery tracking, classified (v): whether the
 * message leaves the client's session (its redeliveries reached
 * max_attempts: dead-lettered). */
static bool read_check_counted(struct dlq *d, const struct dlq_read_check *c, const struct dlq_read_verdict *v)
{
	struct dlq_delivery *dv = v->delivery;
	if(dv == NULL) return false;
	/* Another copy (an overlapping subscription) of a message just removed
	 * from this session goes too: its dead letter is made. */
	if(dv->diverted) return v->in_burst;
	if(!v->redelivery){
		if(v->held_now) outbound__note_delivery(d, dv->record, c->client);
		return false;
	}

	/* A delivery its client settled (an ACK; a NACK or a deadline that ran
	 * out, into the retry copy or the dead letter of that attempt) is no
	 * attempt any more: the broker sends again what the session holds,
	 * but the chain went on, or ended, without it. Counted, it would be
	 * dead-lettered a second time. */
	if(ledger__has_settler(dv->record, c->client)) return false;
	const struct dlq_policy *p = dv->record->policy;
	unsigned delivered = record__attempt(dv->record) + dv->redeliveries;
	if(delivered < p->max_attempts || !outbound__divert_redelivered(d, dv->record, c->client, delivered)){
		dv->redeliveries++;
		COUNT(d, p, redeliveries, 1);
		outbound__note_delivery(d, dv->record, c->client);
		return false;
	}
	dv->diverted = true;
	outbound__note_delivery(d, dv->record, c->client);
	if(v->first_in_burst && redelivery__queue_kick(&d->redelivery, dv->client, c->conn)){
		port__log(DLQ_LOG_ERR, "out of memory: " QFMT " may receive nothing more until it reconnects", Q(c->client));
	}
	return true;
}

bool dlq__read_check(struct dlq *d, const struct dlq_read_check *c)
{
	struct dlq_read_verdict v;
	if(d->cfg.redelivery == DLQ_REDELIVERY_OFF) return false;
	d->tick_quiet = false; /* it may queue a kick */
	if(d->broker.exact_counting) return engine__read_check_exact(d, c);
	if(redelivery__read_check(&d->redelivery, &d->ledger, c, &v)){
		port__log(DLQ_LOG_ERR, "out of memory: a delivery on " QFMT " to " QFMT " is not counted", Q(c->topic), Q(c->client));
		return false;
	}
	bool removed = read_check_counted(d, c, &v);
	/* 2.0 shows where a message is routed, not when it is sent: the
	 * deadlines go by that (settle.c). */
	if(d->any_deadlines) engine__deadline_routed(d, c, &v, removed);
	return removed;
}
