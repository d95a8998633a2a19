/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Settling a delivery besides a NACK (see dlq.h): an ACK (processed), a
 * progress report (still being worked on: its clock starts again); and
 * when the clocks of deliveries start (deadlines.h), as each broker line
 * shows them: a send on 2.1 (dlq__deadline_sent), a routing on 2.0
 * (engine__deadline_routed). What a clock that ran out becomes is
 * attempts.c's.
 */
#include <string.h>

#include "engine/dlq.h"
#include "engine/engine.h"
#include "engine/outbound.h"
#include "util/errtext.h"
#include "util/port.h"

void dlq__settle(struct dlq *d, const struct dlq_settle *s, struct dlq_nack_result *res)
{
	const struct dlq_policy *policy;
	struct dlq_record *r = engine__record_to_settle(d, s->id, s->id_len, s->client, s->may_read, s->may_read_ctx,
			res, &policy);
	if(r == NULL) goto refused;
	uint64_t now = port__now_ms();
	struct dlq_deadline *e = deadlines__find(&d->deadlines, r, s->client);
	if(s->kind == DLQ_SETTLE_PROGRESS){
		if(e == NULL){
			res->status = DLQ_NACK_NO_DEADLINE;
			goto refused;
		}
		/* On 2.0 a delivery still waiting for its clock is being worked
		 * on, the report says: its clock starts. */
		deadlines__start(&d->deadlines, e, now);
		if(e->queue == NULL){
			res->status = DLQ_NACK_NOMEM;
			goto refused;
		}
		engine__note_deadline(d, e);
		res->delay_ms = e->due_ms - now;
		res->status = DLQ_NACK_EXTENDED;
		COUNT(d, policy, progress, 1);
		return;
	}
	/* An ACK settles the delivery whether or not a clock ran for it: a
	 * NACK of it by this client is refused from now on. */
	if(ledger__add_settler(&d->ledger, r, s->client, DLQ_SETTLED_ACK)){
		res->status = DLQ_NACK_NOMEM;
		goto refused;
	}
	store_port__settler(&d->store, r, s->client, DLQ_SETTLED_ACK);
	/* A retry copy held for a client whose session ends is its no more:
	 * processed, it is no dead letter when the client leaves. */
	engine__nacked(d, r, s->client);
	if(e) engine__note_deadline(d, deadlines__done(&d->deadlines, e, now));
	res->status = DLQ_NACK_ACKED;
	COUNT(d, policy, acks, 1);
	outbound__make_room(d, 0);
	return;

refused:
	COUNT(d, policy, acks_refused, 1);
}

void dlq__deadline_sent(struct dlq *d, const struct dlq_send *s, const char *client, bool persists)
{
	struct dlq_record *r = s->record;
	if(r == NULL || r->policy->ack_timeout_ms == 0 || ledger__has_settler(r, client)) return;
	d->tick_quiet = false;
	struct dlq_deadline *e = deadlines__sent(&d->deadlines, r, client, port__now_ms());
	if(e == NULL || e->queue == NULL){
		if(e) deadlines__remove(&d->deadlines, e);
		port__log(DLQ_LOG_ERR, "out of memory: a delivery on " QFMT " to " QFMT " is not held to its ack_timeout",
				Q(record__topic(r)), Q(client));
		return;
	}
	e->client->persists = persists;
	engine__note_deadline(d, e);
}

void engine__deadline_routed(struct dlq *d, const struct dlq_read_check *c, const struct dlq_read_verdict *v,
		bool removed)
{
	uint64_t now = port__now_ms();
	/* A reconnecting session: its first delivery waiting for a clock gets
	 * one (the broker sends what it holds). */
	if(v->burst_start && d->deadlines.count) engine__note_deadline(d, deadlines__online(&d->deadlines, c->client, now));
	struct dlq_record *r = v->record;
	if(r == NULL || r->policy->ack_timeout_ms == 0 || !c->settles) return;
	struct dlq_deadline *e = deadlines__find(&d->deadlines, r, c->client);
	if(removed){
		/* Out of the session and dead-lettered: nothing to wait for. */
		if(e) deadlines__remove(&d->deadlines, e);
		return;
	}
	if(e){
		/* The first message of a reconnect's run is the one in flight,
		 * sent again: its clock starts again (a new attempt, counted
		 * as a redelivery). */
		if(v->in_burst && e->client->head == e && e->queue){
			deadlines__start(&d->deadlines, e, now);
			engine__note_deadline(d, e);
		}
		return;
	}
	if(ledger__has_settler(r, c->client)) return;
	struct dlq_deadline *made;
	if(deadlines__routed(&d->deadlines, r, c->client, v->live, now, &made)){
		port__log(DLQ_LOG_ERR, "out of memory: a delivery on " QFMT " to " QFMT " is not held to its ack_timeout",
				Q(c->topic), Q(c->client));
		return;
	}
	made->client->persists = c->persists;
	/* Saved waiting or running: a restart keeps its place in line. */
	engine__note_deadline(d, made);
}
