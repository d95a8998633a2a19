/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The engine's outbound path (see outbound.h), beneath every event handler:
 * what the engine hands to the broker and keeps until the broker took it.
 * A retry copy or dead letter is sent here; a copy that cannot reach its
 * client becomes its dead letter here, which is sent here in turn: the
 * recursion send -> unreachable -> dead letter -> send stays in this file.
 * The memory bound is held here too (room made in the ledger, what is owed
 * kept within it). A dead letter the broker accepted goes to the
 * dead-letter store (letter_store.h), which keeps and bounds it. Nothing
 * here calls an event handler; every outbound effect goes through
 * util/port.h, every change through the store port.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/letter_store.h"
#include "engine/outbound.h"
#include "model/envelope.h"
#include "util/errtext.h"
#include "util/headers.h"
#include "util/port.h"

/* At most one "evicting" warning per this many milliseconds. */
#define EVICT_LOG_INTERVAL_MS 60000

static const char *kind_text(const struct dlq_envelope *e)
{
	return e->kind == DLQ_ENV_DEAD_LETTER ? "dead letter" : "retry copy";
}

/* Makes room for bytes more in the ledger, oldest records first, without
 * touching what is owed. */
void outbound__evict_for(struct dlq *d, size_t bytes)
{
	if(d->evict_held) return;
	uint64_t max = d->cfg.max_pending_bytes;
	uint64_t owed = engine__owed_bytes(d);

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
int outbound__remember(struct dlq *d, struct dlq_record *r)
{
	return outbound__remember_sized(d, r, record__bytes(r));
}


int outbound__copy_qos(const struct dlq *d, const struct dlq_envelope *e, struct dlq_sub_match *m)
{
	memset(m, 0, sizeof(*m));
	int qos = envelope__qos(e);
	if(e->kind != DLQ_ENV_RETRY_COPY || e->target_client == NULL) return qos;
	/* The broker drops a publish for a client id it has no session for,
	 * silently (src/loop.c, queue_plugin_msgs). */
	if(d->broker.has_session && !d->broker.has_session(d->broker.ctx, e->target_client)){
		return OUTBOUND_COPY_NO_SESSION;
	}
	if(sessions__match(&d->sessions, e->target_client, e->topic, m)){
		/* MQTT 5 (3.8.4): the lower of the message's QoS and the granted
		 * QoS; one message for overlapping subscriptions takes the
		 * highest granted and carries every identifier. */
		if(m->qos < qos) qos = m->qos;
		/* The broker keeps no QoS 0 message for an offline session
		 * (src/database.c, db__message_insert_outgoing; unless
		 * queue_qos0_messages): neither would it keep this copy. */
		if(qos == 0 && !d->broker.queue_qos0_messages && sessions__offline_known(&d->sessions, e->target_client)){
			return OUTBOUND_COPY_QOS0_OFFLINE;
		}
		return qos;
	}
	/* Nothing known of the subscription (2.0; a session restored after a
	 * restart that did not subscribe again): a copy that is to wait for a
	 * persistent session goes out at QoS 1, or the broker would drop it
	 * while the session is offline and when it reconnects. */
	if(e->target_persists && qos < 1) qos = 1;
	return qos;
}

static int add_sub_ids(struct dlq_headers *h, const struct dlq_sub_match *m)
{
	for(size_t i = 0; i < m->id_count; i++){
		uint8_t v[4] = { (uint8_t)(m->ids[i] >> 24), (uint8_t)(m->ids[i] >> 16), (uint8_t)(m->ids[i] >> 8),
				(uint8_t)m->ids[i] };
		if(headers__add(h, DLQ_HDR_SUBSCRIPTION_ID, v, sizeof(v), NULL, 0)) return ENOMEM;
	}
	return 0;
}

/* The record that makes a retry copy NACKable once the broker accepts it,
 * allocated before the copy is handed over: a copy must not go out that
 * could not be NACKed for want of memory. NULL when out of memory. */
static struct dlq_record *copy_record_new(const struct dlq_envelope *e, uint8_t qos)
{
	const struct dlq_record_init in = {
		.id = &e->id, .origin_id = &e->origin_id, .topic = e->topic, .origin_topic = e->origin_topic,
		.payload = e->payload, .payload_len = e->payload_len, .headers = e->headers, .headers_len = e->headers_len,
		.policy = e->policy, .attempt = (uint16_t)(e->retry_count + 1), .qos = qos, .now_ms = port__now_ms(),
	};
	struct dlq_record *copy = record__make(&in, 0, NULL);
	if(copy) record__set_first_nack_ms(copy, e->first_nack_ms);
	return copy;
}

void outbound__hold(struct dlq *d, const struct dlq_envelope *e, struct dlq_record *copy)
{
	if(holds__add(&d->holds, copy, e->target_client)){
		port__log(DLQ_LOG_ERR, "out of memory: the retry copy on " QFMT " for " QFMT " is lost if that client "
				"leaves before it is delivered", Q(e->topic), Q(e->target_client));
		return;
	}
	record__more(copy)->hold_lasting = e->target_persists;
	store_port__hold(&d->store, copy, e->target_client);
}

/* A retry copy the broker has accepted becomes NACKable in turn. Its
 * record is made now, not at the NACK, so that a delay does not eat its
 * NACK window. Takes copy. */
static void record_copy(struct dlq *d, struct dlq_envelope *e, struct dlq_record *copy)
{
	e->recorded = true;
	copy->created_ms = port__now_ms();
	if(outbound__remember(d, copy)){
		port__log(DLQ_LOG_WARNING, "retry copy on " QFMT " does not fit max_pending_bytes: it is sent, "
				"but it cannot be NACKed", Q(e->topic));
		return;
	}
	store_port__record(&d->store, copy);
	/* 2.1 shows sends and the end of a lasting session: a copy for one
	 * is held too, so that one never sent when the session ends (queued
	 * behind a hung in-flight window) is dead-lettered, not lost. */
	if(e->target_client && (!e->target_persists || d->broker.exact_counting)) outbound__hold(d, e, copy);
	/* 2.0 makes no READ check of a publish to one client: the copy is
	 * routed to its client now, and its deadline goes by that. (2.1
	 * shows its send, MESSAGE_OUT.) */
	if(e->target_client && e->target_settles && e->policy->ack_timeout_ms && !d->broker.exact_counting){
		struct dlq_deadline *made;
		if(deadlines__routed(&d->deadlines, copy, e->target_client,
				redelivery__online(&d->redelivery, e->target_client), port__now_ms(), &made)){
			port__log(DLQ_LOG_ERR, "out of memory: the retry copy on " QFMT " for " QFMT " is not held to its "
					"ack_timeout", Q(e->topic), Q(e->target_client));
		}else{
			made->client->persists = e->target_persists;
			engine__note_deadline(d, made);
		}
	}
	if(d->cfg.redelivery != DLQ_REDELIVERY_OFF){
		if(redelivery__note_copy(&d->redelivery, &d->ledger, copy, e->target_client)){
			port__log(DLQ_LOG_ERR, "out of memory: redeliveries of the retry copy on " QFMT " are not counted", Q(e->topic));
		}else if(e->target_client){
			outbound__note_delivery(d, copy, e->target_client);
		}
	}
}

void outbound__note_delivery(struct dlq *d, const struct dlq_record *r, const char *client)
{
	d->changes++;
	struct dlq_delivery_saved s;
	if(store_port__on(&d->store) && deliveries__saved(&d->redelivery, r, client, &s)){
		store_port__delivery(&d->store, r, &s);
	}
}

/* A retry copy published again after a restart (it was owed: the broker
 * may not have taken it) that did reach its client before: the broker
 * wrote it to the client (2.1's MESSAGE_OUT), or the client settled it.
 * That delivery makes the chain's next step (its settlement, or its
 * deadline), so when the broker has no session for the client any more
 * the copy is dropped: its dead letter would be a second one for the
 * chain. */
static bool reached_its_client(struct dlq *d, const struct dlq_envelope *e)
{
	if(!e->recorded) return false;
	struct dlq_record *r = ledger__find(&d->ledger, &e->id);
	if(r == NULL) return false;
	if(ledger__has_settler(r, e->target_client)) return true;
	struct dlq_sent_to st;
	return deliveries__sent_to(&d->redelivery, r, e->target_client, &st) && deliveries__sends(&st) > 0;
}

int outbound__publish(struct dlq *d, struct dlq_envelope *e)
{
	struct dlq_envelope_props props;
	struct dlq_headers h = {0};
	struct dlq_record *copy = NULL;
	struct dlq_sub_match m;
	int rc = 0;
	int qos = outbound__copy_qos(d, e, &m);
	if(qos == OUTBOUND_COPY_NO_SESSION && reached_its_client(d, e)){
		store_port__remove(&d->store, e->seq);
		envelope__free(e);
		d->changes++;
		return -1;
	}
	if(qos < 0){
		outbound__copy_unreachable(d, e, qos);
		return -1;
	}
	if(e->kind == DLQ_ENV_RETRY_COPY && !e->recorded && e->policy){
		copy = copy_record_new(e, (uint8_t)qos);
		if(copy == NULL) rc = ENOMEM;
	}
	if(rc == 0){
		/* The plugin's properties go to the port as strings, after the
		 * original's encoded headers: no encoded copy of them is made,
		 * except to add the subscription identifiers of a targeted copy
		 * (2.1, outbound__copy_qos). */
		const uint8_t *hdr = e->headers;
		size_t hdr_len = e->headers_len;
		if(m.id_count){
			rc = headers__append_raw(&h, e->headers, e->headers_len);
			if(rc == 0) rc = add_sub_ids(&h, &m);
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
			/* Counted by cause where it is counted at all: the causes
			 * add up to dead_letters. */
			unsigned cause = e->cause < DLQ_DEAD_CAUSES ? e->cause : DLQ_DEAD_UNKNOWN;
			COUNT(d, e->policy, dead_letters, 1);
			COUNT(d, e->policy, dead_letters_by_cause[cause], 1);
			engine__note_minute(d, e->policy, DLQ_HISTORY_DEAD_LETTER, cause);
			port__log_dead_letter(e->origin_topic, props.origin_id, e->topic, (unsigned)e->retry_count, e->reason);
			letter_store__keep(d, e);
		}else{
			if(e->redriven){
				COUNT(d, e->policy, redriven, 1);
				engine__note_minute(d, e->policy, DLQ_HISTORY_REDRIVE, 0);
			}else{
				COUNT(d, e->policy, retry_copies, 1);
			}
			if(copy) record_copy(d, e, copy);
			else e->recorded = true;
		}
		outbox__push(&d->outbox, &d->outbox.sent, e);
		return 0;
	}
	record__free(copy);
	return rc;
}

void outbound__send(struct dlq *d, struct dlq_envelope *e)
{
	int rc = outbound__publish(d, e);
	if(rc <= 0) return;
	COUNT(d, e->policy, publish_failures, 1);
	if(e->failures++ == 0){
		port__log(DLQ_LOG_ERR, "failed to publish %s to " QFMT ": %s; kept, retrying every tick",
				kind_text(e), Q(e->topic), strerror(rc));
	}
	outbox__push(&d->outbox, &d->outbox.owed, e);
}

int outbound__dead_letter_of(struct dlq *d, struct dlq_record *r, const char *client, enum dlq_cause cause,
		const char *reason, unsigned delivered, bool bounded)
{
	struct dlq_envelope *e = envelope__dead_letter(r, client, d->cfg.broker_name, cause, reason, port__wall_ms());
	if(e == NULL || (bounded && !engine__fits_owed(d, e))){
		int rc = e ? ENOSPC : ENOMEM;
		envelope__free(e);
		return rc;
	}
	e->final = cause == DLQ_DEAD_FINAL;
	e->seq = d->next_seq++;
	letter_store__name(d, e);
	e->retry_count = (uint16_t)delivered;
	store_port__add(&d->store, e, false);
	outbound__send(d, e);
	return 0;
}

bool outbound__divert_copy(struct dlq *d, const struct dlq_envelope *e, enum dlq_cause cause, const char *reason)
{
	struct dlq_envelope *dl = envelope__dead_letter_from_copy(e, d->cfg.broker_name, cause, reason, port__wall_ms());
	if(dl == NULL){
		port__log(DLQ_LOG_ERR, "out of memory: retry copy for " QFMT " on " QFMT " may be lost with its session",
				Q(e->target_client), Q(e->topic));
		return false;
	}
	dl->seq = d->next_seq++;
	letter_store__name(d, dl);
	store_port__add(&d->store, dl, true);
	store_port__remove(&d->store, e->seq);
	outbound__send(d, dl);
	return true;
}

void outbound__copy_unreachable(struct dlq *d, struct dlq_envelope *e, int why)
{
	char reason[512];
	enum dlq_cause cause = why == OUTBOUND_COPY_NO_SESSION ? DLQ_DEAD_NO_SESSION : DLQ_DEAD_OFFLINE_QOS0;
	if(why == OUTBOUND_COPY_NO_SESSION){
		snprintf(reason, sizeof(reason), "subscriber " QFMT " has no session at the broker when its retry copy is "
				"due (it left without one, or the broker restarted without it)", Q(e->target_client));
	}else{
		snprintf(reason, sizeof(reason), "subscriber " QFMT " is offline and its subscription to " QFMT " is QoS 0: "
				"the broker keeps no QoS 0 message for an offline session", Q(e->target_client), Q(e->topic));
	}
	if(outbound__divert_copy(d, e, cause, reason)){
		envelope__free(e);
	}else{
		outbox__push(&d->outbox, &d->outbox.owed, e);
	}
}
/* Dead-letters a message redelivered once too often to client, as a NACK
 * at its last allowed attempt would. Returns whether the dead letter was
 * made (if not, the message must stay in the session). */
bool outbound__divert_redelivered(struct dlq *d, struct dlq_record *r, const char *client, unsigned delivered)
{
	char reason[512];
	snprintf(reason, sizeof(reason), "delivered %u times to " QFMT " without acknowledgement (max_attempts %u): "
			"removed from its session", delivered, Q(client), (unsigned)r->policy->max_attempts);
	/* Settled by client, as a deadline at the last attempt settles it: a
	 * NACK, an ACK or a deadline of a delivery of it that comes later (a
	 * retained message sent again on a new subscription) makes no second
	 * dead letter. Without the memory for it the dead letter is made all
	 * the same. */
	bool settled = ledger__add_settler(&d->ledger, r, client, DLQ_SETTLED_DIVERTED) == 0;
	int rc = outbound__dead_letter_of(d, r, client, DLQ_DEAD_REDELIVERY_LIMIT, reason, delivered, true);
	if(rc && settled) ledger__drop_last_settler(&d->ledger, r);
	if(rc == 0 && settled) store_port__settler(&d->store, r, client, DLQ_SETTLED_DIVERTED);
	if(rc){
		port__log(DLQ_LOG_ERR, "message on " QFMT " delivered %u times to " QFMT " is redelivered once more: "
				"its dead letter %s", Q(record__topic(r)), delivered, Q(client),
				rc == ENOSPC ? "does not fit max_pending_bytes" : "could not be made (out of memory)");
		return false;
	}
	COUNT(d, r->policy, diverted, 1);
	return true;
}

int outbound__send_home(struct dlq *d, const struct dlq_envelope *l, const char *topic)
{
	struct dlq_envelope_props props;
	envelope__props(l, &props);
	d->changes++;
	return port__publish_with(NULL, topic, 1, false, l->payload, l->payload_len, l->headers, l->headers_len,
			props.items, props.count);
}
