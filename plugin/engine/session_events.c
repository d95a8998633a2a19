/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The engine's answers to what Mosquitto 2.1 says about sessions (see
 * sessions.h): a connect, a subscription made or taken back, and the end
 * of a connection whose session the broker keeps; and how a targeted retry
 * copy honours the subscriptions of its client (QoS and subscription
 * identifiers, as the broker's own deliveries do). On 2.0 none of these
 * events come, the table stays empty, and copies go as they always did.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engine/dlq.h"
#include "engine/engine.h"
#include "engine/outbound.h"
#include "util/errtext.h"
#include "util/port.h"

/* The table is full or memory is short: the client stays unknown, which
 * only means 2.0's behaviour for it. Logged once per instance. */
static void note_unknown(struct dlq *d, int rc, const char *client)
{
	if(rc == 0 || rc == EINVAL || d->sessions_full_noted) return;
	d->sessions_full_noted = true;
	port__log(rc == ENOMEM ? DLQ_LOG_ERR : DLQ_LOG_WARNING, "%s: the sessions of " QFMT " and of further clients "
			"are not followed; their retry copies go as on Mosquitto 2.0 (docs/design.md, \"Sessions on 2.1\")",
			rc == ENOMEM ? "out of memory" : "the table of sessions is full", Q(client));
}

void dlq__client_connected(struct dlq *d, const char *client, bool clean_start)
{
	if(client == NULL) return;
	note_unknown(d, sessions__connected(&d->sessions, client, clean_start), client);
	if(clean_start) engine__lasting_session_ended(d, client);
}

void dlq__subscribed(struct dlq *d, const char *client, const char *filter, uint8_t qos, uint32_t identifier)
{
	if(client == NULL || filter == NULL) return;
	note_unknown(d, sessions__subscribe(&d->sessions, client, filter, qos, identifier), client);
	dlq__subscribed_to_dead_letters(d, client, filter);
}

void dlq__unsubscribed(struct dlq *d, const char *client, const char *filter)
{
	if(client == NULL || filter == NULL) return;
	sessions__unsubscribe(&d->sessions, client, filter);
}

/* A copy for client that left whose session lasts: it now waits for the
 * session, under a new sequence number so that a journal replay sees the
 * change (a replay ignores an envelope it already has). */
static void now_lasting(struct dlq *d, struct dlq_envelope *e)
{
	uint64_t old = e->seq;
	e->target_persists = true;
	e->seq = d->next_seq++;
	store_port__add(&d->store, e, false);
	store_port__remove(&d->store, old);
	d->changes++;
}

static bool copy_for(const struct dlq_envelope *e, const char *client)
{
	return e->kind == DLQ_ENV_RETRY_COPY && e->target_client && !e->target_persists
			&& !strcmp(e->target_client, client);
}

void dlq__client_offline(struct dlq *d, const char *client)
{
	if(client == NULL) return;
	note_unknown(d, sessions__offline(&d->sessions, client), client);
	nonack__forget(&d->nonack, client);
	deadsubs__forget(&d->deadsubs, client);
	for(struct dlq_envelope *e = d->outbox.owed.head; e; e = e->next){
		if(copy_for(e, client)) now_lasting(d, e);
	}
	/* The heap is ordered by due time only: changing a sequence number
	 * keeps it in order. */
	for(size_t i = 0; i < d->delayed.count; i++){
		if(copy_for(d->delayed.heap[i], client)) now_lasting(d, d->delayed.heap[i]);
	}
	/* Copies already handed to the broker: it keeps those of QoS 1 and 2
	 * in the session (held ones are let go to it), and drops those of
	 * QoS 0, which become dead letters (unless queue_qos0_messages). */
	engine__gone_qos0(d, client);
}
