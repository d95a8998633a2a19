/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The engine (see dlq.h): tracking inbound publishes, turning NACKs into
 * retry copies and dead letters, keeping what the broker has not accepted,
 * and holding the memory bound. Every outbound effect goes through port.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlq.h"
#include "envelope.h"
#include "headers.h"
#include "port.h"

/* At most one "evicting" warning per this many milliseconds. */
#define EVICT_LOG_INTERVAL_MS 60000

int dlq__init(struct dlq *d, struct dlq_config *cfg)
{
	memset(d, 0, sizeof(*d));
	d->cfg = *cfg;
	memset(cfg, 0, sizeof(*cfg));
	outbox__init(&d->outbox);
	idgen__init(&d->idgen);
	d->last_evict_log_ms = 0;
	return ledger__init(&d->ledger);
}

const struct dlq_policy *dlq__policy_for(const struct dlq *d, const char *topic)
{
	return policy__match(&d->cfg.policies, topic);
}

static const char *kind_text(const struct dlq_envelope *e)
{
	return e->kind == DLQ_ENV_DEAD_LETTER ? "dead letter" : "retry copy";
}

/* Makes room for bytes more in the ledger, oldest records first, without
 * touching what the outbox owes. */
static void make_room(struct dlq *d, size_t bytes)
{
	uint64_t max = d->cfg.max_pending_bytes;
	uint64_t used = d->ledger.bytes + d->outbox.bytes;
	if(used + bytes <= max) return;

	uint64_t target = 0;
	if(max > d->outbox.bytes + bytes) target = max - d->outbox.bytes - bytes;
	size_t n = ledger__evict_to(&d->ledger, target);
	d->counters.evicted += n;
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
	if(d->outbox.bytes + bytes > d->cfg.max_pending_bytes){
		record__free(r);
		return ENOSPC;
	}
	make_room(d, bytes);
	return ledger__insert(&d->ledger, r);
}

int dlq__track(struct dlq *d, const struct dlq_policy *policy, const char *topic,
		const void *payload, uint32_t payload_len, uint8_t qos,
		const uint8_t *headers, size_t headers_len, char id_out[DLQ_ID_LEN + 1])
{
	struct dlq_id id;

	if(payload_len > d->cfg.max_pending_bytes){
		d->counters.untracked_full++;
		return ENOSPC;
	}
	int rc = idgen__next(&d->idgen, &id);
	if(rc){
		port__log(DLQ_LOG_ERR, "random source failed (%s): message on \"%s\" not tracked", strerror(rc), topic);
		return rc;
	}
	struct dlq_record *r = record__new(&id, NULL, topic, NULL, payload, payload_len,
			headers, headers_len, policy, 1, qos, port__now_ms());
	if(r == NULL){
		port__log(DLQ_LOG_ERR, "out of memory: message on \"%s\" not tracked", topic);
		return ENOMEM;
	}
	rc = remember(d, r);
	if(rc == ENOSPC){
		d->counters.untracked_full++;
		return rc;
	}
	if(rc) return rc;
	id__encode(&id, id_out);
	d->counters.tracked++;
	return 0;
}

/* Hands e to the broker. Accepted: a targeted retry copy waits in "fresh"
 * until the next tick, anything else is done. Refused: e waits in "owed". */
static void send_envelope(struct dlq *d, struct dlq_envelope *e)
{
	struct dlq_headers h = {0};
	int rc = envelope__headers(e, &h);
	if(rc == 0){
		rc = port__publish(e->target_client, e->topic, envelope__qos(e), false,
				e->payload, e->payload_len, h.data, h.len);
	}
	headers__free(&h);

	if(rc == 0){
		if(e->kind == DLQ_ENV_DEAD_LETTER){
			char origin[DLQ_ID_LEN + 1];
			id__encode(&e->origin_id, origin);
			d->counters.dead_letters++;
			port__log(DLQ_LOG_NOTICE, "dead-lettered message from \"%s\" (origin-id %s) to \"%s\" after %u deliveries: %s",
					e->origin_topic, origin, e->topic, (unsigned)e->retry_count, e->reason);
		}else{
			d->counters.retry_copies++;
		}
		if(e->target_client){
			outbox__push(&d->outbox, &d->outbox.fresh, e);
		}else{
			envelope__free(e);
		}
		return;
	}

	d->counters.publish_failures++;
	if(e->failures++ == 0){
		port__log(DLQ_LOG_ERR, "failed to publish %s to \"%s\": %s; kept, retrying every tick",
				kind_text(e), e->topic, strerror(rc));
	}
	outbox__push(&d->outbox, &d->outbox.owed, e);
}

/* Owed envelopes are never evicted, so a new one is taken only while the
 * outbox, with it, stays within the bound. */
static bool fits_outbox(const struct dlq *d, const struct dlq_envelope *e)
{
	return d->outbox.bytes + e->bytes <= d->cfg.max_pending_bytes;
}

static void nack_retry(struct dlq *d, struct dlq_record *r, const struct dlq_nack *n, struct dlq_nack_result *res)
{
	struct dlq_id copy_id;
	const struct dlq_policy *p = r->policy;
	const char *target = p->retry_to ? NULL : n->client;

	if(idgen__next(&d->idgen, &copy_id)){
		res->status = DLQ_NACK_RANDOM_FAILED;
		return;
	}
	struct dlq_envelope *e = envelope__retry_copy(r, &copy_id, p->retry_to, target, n->client, port__wall_ms());
	if(e == NULL){
		res->status = DLQ_NACK_NOMEM;
		return;
	}
	if(!fits_outbox(d, e)){
		envelope__free(e);
		res->status = DLQ_NACK_FULL;
		return;
	}
	/* The copy is NACKable in turn. Its record is built from the envelope:
	 * making room for it may evict r itself. */
	struct dlq_record *copy = record__new(&copy_id, &e->origin_id, e->topic, e->origin_topic,
			e->payload, e->payload_len, e->headers, e->headers_len, p,
			(uint16_t)(r->attempt + 1), e->qos, port__now_ms());
	if(copy == NULL){
		envelope__free(e);
		res->status = DLQ_NACK_NOMEM;
		return;
	}
	r = NULL;
	if(remember(d, copy)){
		port__log(DLQ_LOG_WARNING, "retry copy on \"%s\" does not fit max_pending_bytes: it is sent, "
				"but it cannot be NACKed", e->topic);
	}
	res->status = DLQ_NACK_RETRIED;
	send_envelope(d, e);
}

void dlq__nack(struct dlq *d, const struct dlq_nack *n, struct dlq_nack_result *res)
{
	struct dlq_id id;

	memset(res, 0, sizeof(*res));
	if(!id__decode(n->id, n->id_len, &id)){
		res->status = DLQ_NACK_MALFORMED_ID;
		goto refused;
	}
	struct dlq_record *r = ledger__find(&d->ledger, &id);
	if(r == NULL){
		res->status = DLQ_NACK_UNKNOWN_ID;
		goto refused;
	}
	res->attempt = r->attempt;
	res->max_attempts = r->policy->max_attempts;
	if(d->outbox.bytes >= d->cfg.max_pending_bytes){
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

	if(r->attempt < r->policy->max_attempts){
		/* nack_retry may evict r; the nacker is undone only on failure,
		 * and then r is still there (nothing was inserted). */
		struct dlq_record *keep = r;
		nack_retry(d, r, n, res);
		if(res->status != DLQ_NACK_RETRIED){
			ledger__drop_last_nacker(&d->ledger, keep);
			goto refused;
		}
	}else{
		struct dlq_envelope *e = envelope__dead_letter(r, n->client, n->reason, port__wall_ms());
		if(e == NULL || !fits_outbox(d, e)){
			res->status = e ? DLQ_NACK_FULL : DLQ_NACK_NOMEM;
			envelope__free(e);
			ledger__drop_last_nacker(&d->ledger, r);
			goto refused;
		}
		res->status = DLQ_NACK_DEAD_LETTERED;
		send_envelope(d, e);
	}
	d->counters.nacks++;
	/* The envelope and the nacker took room: the ledger gives it back. */
	make_room(d, 0);
	return;

refused:
	d->counters.nacks_refused++;
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
	}
	return "unknown status";
}

void dlq__tick(struct dlq *d)
{
	d->counters.expired += ledger__expire(&d->ledger, port__now_ms(), d->cfg.nack_window_ms);

	/* What was handed over before this tick reaches its session at the top
	 * of the next loop pass, before any client can leave: done with it. */
	while(d->outbox.fresh.head){
		struct dlq_envelope *e = d->outbox.fresh.head;
		outbox__unlink(&d->outbox, &d->outbox.fresh, e);
		envelope__free(e);
	}

	/* Try everything owed once; what fails again goes back in order. */
	size_t n = d->outbox.owed.count;
	while(n-- > 0){
		struct dlq_envelope *e = d->outbox.owed.head;
		outbox__unlink(&d->outbox, &d->outbox.owed, e);
		send_envelope(d, e);
	}
}

/* Replaces every retry copy for client in list with its dead letter. */
static void divert_copies(struct dlq *d, struct dlq_envelope_list *list, const char *client)
{
	char reason[256];
	snprintf(reason, sizeof(reason), "subscriber \"%s\" left without a session before its retry copy was delivered", client);

	struct dlq_envelope *e = list->head;
	while(e){
		struct dlq_envelope *next = e->next;
		if(e->kind == DLQ_ENV_RETRY_COPY && e->target_client && !strcmp(e->target_client, client)){
			struct dlq_envelope *dl = envelope__dead_letter_from_copy(e, reason, port__wall_ms());
			if(dl == NULL){
				port__log(DLQ_LOG_ERR, "out of memory: retry copy for \"%s\" on \"%s\" may be lost with its session",
						client, e->topic);
			}else{
				outbox__unlink(&d->outbox, list, e);
				envelope__free(e);
				send_envelope(d, dl);
			}
		}
		e = next;
	}
}

void dlq__client_gone(struct dlq *d, const char *client, bool session_persists)
{
	if(session_persists || client == NULL) return;
	divert_copies(d, &d->outbox.fresh, client);
	divert_copies(d, &d->outbox.owed, client);
}

void dlq__cleanup(struct dlq *d)
{
	/* Publishing now would be in vain: Mosquitto 2.0 closes its message
	 * store before it unloads plugins, and never again processes what a
	 * plugin queues (src/mosquitto.c). So what is owed is reported, once. */
	if(d->outbox.owed.count){
		port__log(DLQ_LOG_ERR, "%zu retry copies or dead letters the broker had not accepted are lost at shutdown",
				d->outbox.owed.count);
	}
	outbox__cleanup(&d->outbox);
	ledger__cleanup(&d->ledger);
	config__free(&d->cfg);
}
