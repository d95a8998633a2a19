/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A worker of the soak: an MQTT v5 subscriber with a persistent session
 * (clean_start=false, a session expiry interval), a member of the shared
 * subscription group "soak" on both policies' topics, so that each message
 * has one consumer. The fixed retry
 * topic has one consumer as well: worker 0, on an ordinary subscription
 * (with --share-retry, the group). Mosquitto 2.0.11 does not restore $share
 * subscriptions from its persistence file (fixed in 2.0.12): after a
 * restart the group is empty until its members subscribe again, and what is
 * published meanwhile reaches nobody. So workers subscribe on every
 * connection, the soak publishes nothing after a restart until they have,
 * and the retry copies the plugin publishes on its first tick after the
 * restart (those the old broker had not taken) go to worker 0's restored
 * session, where the broker keeps them. For each delivery a worker decides,
 * at random or because the message is a poison one:
 *
 * - process: PUBACK;
 * - NACK: publish the dlq-id to $CONTROL/dlq/v1/nack (QoS 1, user property
 *   reason "random" or "poison") and, once the broker acknowledged the
 *   NACK, PUBACK the delivery;
 * - crash: close the socket at once, acknowledging nothing (this delivery
 *   and everything else in flight on the connection come again), and
 *   reconnect after a pause.
 *
 * A delivery whose dlq-id this worker already NACKed (the broker redelivers
 * it when the PUBACK was lost) is acknowledged without a new decision, as a
 * consumer that remembers its NACKs does. Replies the plugin sends (only
 * for refused NACKs) are counted: "delivery already NACKed by this client"
 * is expected after a crash while a NACK awaited its PUBACK (the NACK is
 * sent again); anything else is a finding.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "mosquitto_dlq.h"
#include "soak.h"

#define SESSION_EXPIRY_S 3600
#define MAX_PENDING_NACKS 1024
/* Recent NACKs, to name the message of a refusal (which carries the id). */
#define RECENT_NACKS 4096

struct pending_nack {
	unsigned nack_mid;          /* the NACK's packet id */
	unsigned delivery_mid;      /* the delivery to PUBACK once it is acknowledged */
	uint32_t seq;
	char id[DLQ_ID_LEN + 1];
};

struct recent {
	char id[DLQ_ID_LEN + 1];
	uint32_t seq;
};

struct worker {
	struct soak *s;
	struct mq_conn c;
	int index;
	const char *const *filters;
	size_t nfilters;
	bool subscribed;            /* SUBACK came on this connection */
	uint64_t subscribed_ns;     /* when the latest SUBACK came */
	uint64_t reconnect_at;
	struct pending_nack pending[MAX_PENDING_NACKS];
	size_t npending;
	struct recent recent[RECENT_NACKS];
	size_t nrecent;
};

/* Every worker is a member of the group for the originals. The fixed retry
 * topic's copies have one consumer too: worker 0 on an ordinary
 * subscription, or, with --share-retry, the group. */
static const char *const filters_retry[] = {
	SOAK_SHARE SOAK_FILTER_DIRECT,
	SOAK_SHARE SOAK_FILTER_FIXED,
	SOAK_RETRY_TOPIC,
};
static const char *const filters_share_retry[] = {
	SOAK_SHARE SOAK_FILTER_DIRECT,
	SOAK_SHARE SOAK_FILTER_FIXED,
	SOAK_SHARE SOAK_RETRY_TOPIC,
};

static struct worker *of(struct mq_conn *c)
{
	return c->owner;
}

static uint64_t nacked_fp(const struct worker *w, const char *id)
{
	return fp_hash((uint64_t)w->index + 1, id, DLQ_ID_LEN);
}

static const char *user(const struct mq_msg *m, const char *name)
{
	for(size_t i = 0; i < m->nusers; i++){
		if(!strcmp(m->users[i].name, name)) return m->users[i].value;
	}
	return NULL;
}

/* Pauses, then reconnects (worker__step). */
static void went_down(struct worker *w)
{
	const struct soak_cfg *cfg = w->s->cfg;
	unsigned span = cfg->reconnect_max_ms - cfg->reconnect_min_ms;
	unsigned pause = cfg->reconnect_min_ms + (unsigned)(soak__random(w->s) * span);
	w->reconnect_at = w->s->now_ns + soak__ms_to_ns(pause);
	for(size_t i = 0; i < w->npending; i++){
		struct seq_rec *r = ledger__rec(&w->s->ledger, w->pending[i].seq);
		if(r) r->flags |= SEQ_CRASH_AFTER_NACK;
	}
	w->npending = 0;
}

static void crash(struct worker *w, struct seq_rec *r)
{
	soak__trace(w->s, "w%d crash (%zu bytes unsent)", w->index, w->c.outlen);
	if(r && r->crashes < 255) r->crashes++;
	w->s->ledger.c.crashes++;
	w->s->ledger.c.dropped_out += w->c.outlen;
	mq_close(&w->c);
	went_down(w);
}

static void nack(struct worker *w, const struct mq_msg *m, uint32_t seq, const char *id, bool poison)
{
	if(w->npending == MAX_PENDING_NACKS){
		/* More than the receive maximum allows: cannot happen. */
		fprintf(stderr, "dlq_soak: worker %d: too many NACKs pending\n", w->index);
		abort();
	}
	struct pending_nack *pn = &w->pending[w->npending++];
	pn->nack_mid = mq_next_mid(&w->c);
	pn->delivery_mid = m->mid;
	pn->seq = seq;
	memcpy(pn->id, id, DLQ_ID_LEN + 1);
	struct recent *rc = &w->recent[w->nrecent++ % RECENT_NACKS];
	memcpy(rc->id, id, DLQ_ID_LEN + 1);
	rc->seq = seq;
	w->s->ledger.c.nacks_sent++;
	w->s->last_activity_ns = w->s->now_ns;
	mq_publish(&w->c, pn->nack_mid, DLQ_NACK_TOPIC, id, DLQ_ID_LEN, 1, false,
			DLQ_PROP_NACK_REASON, poison ? "poison" : "random");
}

/* A reply of the plugin: only refused compact NACKs get one. */
static void on_reply(struct worker *w, const struct mq_msg *m)
{
	struct ledger *l = &w->s->ledger;
	cJSON *doc = cJSON_ParseWithLength((const char *)m->payload, m->payloadlen);
	const cJSON *responses = cJSON_GetObjectItemCaseSensitive(doc, "responses");
	const cJSON *e;
	cJSON_ArrayForEach(e, responses){
		const cJSON *err = cJSON_GetObjectItemCaseSensitive(e, "error");
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
		if(!cJSON_IsString(err)){
			l->c.replies_other++;
			continue;
		}
		if(strstr(err->valuestring, "already NACKed")){
			l->c.nack_already++;
			continue;
		}
		l->c.nack_refused_other++;
		if(!l->refusal_sample[0]){
			snprintf(l->refusal_sample, sizeof(l->refusal_sample), "%s (worker %d, id %s)", err->valuestring,
					w->index, cJSON_IsString(id) ? id->valuestring : "?");
		}
		for(size_t k = 0; cJSON_IsString(id) && k < RECENT_NACKS && k < w->nrecent; k++){
			if(!strcmp(w->recent[k].id, id->valuestring)){
				struct seq_rec *r = ledger__rec(l, w->recent[k].seq);
				if(r) r->flags |= SEQ_NACK_REFUSED;
				break;
			}
		}
	}
	if(doc == NULL || !cJSON_IsArray(responses)) l->c.replies_other++;
	cJSON_Delete(doc);
}

static void on_publish(struct mq_conn *c, const struct mq_msg *m)
{
	struct worker *w = of(c);
	struct soak *s = w->s;
	struct ledger *l = &s->ledger;

	if(!strncmp(m->topic, "$CONTROL/", 9)){
		on_reply(w, m);
		if(m->qos > 0) mq_puback(c, m->mid);
		return;
	}
	s->last_activity_ns = s->now_ns;
	uint64_t seq;
	struct seq_rec *r = ledger__from_payload(l, m->payload, m->payloadlen, s->cfg->payload_len, &seq);
	if(r == NULL){
		if(m->qos > 0) mq_puback(c, m->mid);
		return;
	}
	ledger__touch(l, r);
	l->c.deliveries++;
	if(r->deliveries < 255) r->deliveries++;
	const char *id = user(m, DLQ_PROP_ID);
	const char *rc = user(m, DLQ_PROP_RETRY_COUNT);
	unsigned attempt = rc ? (unsigned)strtoul(rc, NULL, 10) + 1 : 1;
	if(rc) l->c.copies++;
	if(attempt > r->max_attempt) r->max_attempt = (uint8_t)(attempt < 255 ? attempt : 255);
	if(m->dup){
		l->c.redeliveries++;
		r->flags |= SEQ_DUP_SEEN;
	}
	if(id == NULL || strlen(id) != DLQ_ID_LEN){
		/* Cannot be NACKed: processed. The tally reports these. */
		l->c.untagged++;
		r->flags |= SEQ_UNTAGGED;
		id = NULL;
	}
	/* A delivery this worker processed comes again: the broker did not get
	 * its PUBACK (the connection ended first: a crash, a kick, the
	 * restart). Whatever is decided now, the message was processed. */
	if(id && fpset_has(&l->processed_ids, fp_hash(0, id, DLQ_ID_LEN))) r->flags |= SEQ_SAME_PROCESSED;
	if(id && fpset_has(&s->nacked, nacked_fp(w, id))){
		/* NACKed already; its PUBACK was lost. */
		soak__trace(s, "w%d deliver seq %llu id %s dup %d mid %u: NACKed before, PUBACK", w->index,
				(unsigned long long)seq, id, m->dup, m->mid);
		l->c.redelivered_after_nack++;
		mq_puback(c, m->mid);
		return;
	}

	const struct soak_cfg *cfg = s->cfg;
	bool poison_nack = cfg->poison_nack && seq % cfg->poison_nack == 1;
	bool poison_crash = !poison_nack && cfg->poison_crash && seq % cfg->poison_crash == 2;
	double x = soak__random(s);
	bool do_crash = poison_crash || x < cfg->p_crash;
	bool do_nack = !do_crash && id && (poison_nack || x < cfg->p_crash + cfg->p_nack);
	soak__trace(s, "w%d deliver seq %llu topic %s id %s retry-count %s dup %d mid %u: %s", w->index,
			(unsigned long long)seq, m->topic, id ? id : "-", rc ? rc : "-", m->dup, m->mid,
			do_crash ? "crash" : do_nack ? "nack" : "process");
	if(do_crash){
		crash(w, r);
	}else if(do_nack){
		nack(w, m, (uint32_t)seq, id, poison_nack);
	}else{
		if(id) fpset_add(&l->processed_ids, fp_hash(0, id, DLQ_ID_LEN));
		if(r->processed < 255) r->processed++;
		r->processed_attempt = (uint8_t)(attempt < 255 ? attempt : 255);
		l->c.processed++;
		mq_puback(c, m->mid);
	}
}

static void on_puback(struct mq_conn *c, unsigned mid, unsigned reason)
{
	struct worker *w = of(c);
	for(size_t i = 0; i < w->npending; i++){
		struct pending_nack *pn = &w->pending[i];
		if(pn->nack_mid != mid) continue;
		struct seq_rec *r = ledger__rec(&w->s->ledger, pn->seq);
		unsigned delivery = pn->delivery_mid;
		soak__trace(w->s, "w%d nack seq %u id %s acknowledged (reason 0x%02x)", w->index, pn->seq, pn->id, reason);
		if(reason < 0x80){
			fpset_add(&w->s->nacked, nacked_fp(w, pn->id));
			if(r && r->nacks < 255) r->nacks++;
			w->s->ledger.c.nacks_acked++;
		}else{
			w->s->ledger.c.nack_refused_other++;
			if(r) r->flags |= SEQ_NACK_REFUSED;
		}
		*pn = w->pending[--w->npending];
		mq_puback(c, delivery);
		return;
	}
}

static void on_suback(struct mq_conn *c, unsigned mid, const unsigned char *codes, size_t n)
{
	struct worker *w = of(c);
	(void)mid;
	bool ok = n == w->nfilters;
	for(size_t i = 0; ok && i < n; i++){
		ok = codes[i] < 0x80;
	}
	if(!ok){
		fprintf(stderr, "dlq_soak: worker %d: subscription refused\n", w->index);
		abort();
	}
	w->subscribed = true;
	w->subscribed_ns = w->s->now_ns;
}

/* Subscribes on every connection, as most clients do: a worker that trusted
 * "session present" would receive nothing after a restart (see above). */
static void on_connack(struct mq_conn *c, bool present)
{
	struct worker *w = of(c);
	soak__trace(w->s, "w%d connected (session present %d)", w->index, present);
	w->subscribed = false;
	mq_subscribe(c, mq_next_mid(c), w->filters, w->nfilters, 1);
}

static void on_closed(struct mq_conn *c, const char *why)
{
	struct worker *w = of(c);
	soak__trace(w->s, "w%d closed: %s", w->index, why);
	w->s->ledger.c.broker_closes++;
	went_down(w);
}

static const struct mq_handlers handlers = {
	.connack = on_connack,
	.publish = on_publish,
	.puback = on_puback,
	.suback = on_suback,
	.closed = on_closed,
};

struct worker *worker__new(struct soak *s, int index)
{
	struct worker *w = calloc(1, sizeof(*w));
	char id[64];
	if(w == NULL) return NULL;
	w->s = s;
	w->index = index;
	if(s->cfg->share_retry){
		w->filters = filters_share_retry;
		w->nfilters = 3;
	}else{
		w->filters = filters_retry;
		w->nfilters = index == 0 ? 3 : 2;
	}
	snprintf(id, sizeof(id), "soak-worker-%d", index);
	mq_init(&w->c, id, s->socket_path, &handlers, w);
	/* clean_start=false from the first connection: Mosquitto 2.0.11 saves in
	 * its persistence file only the sessions whose latest connection said so,
	 * whatever their session expiry interval. */
	w->c.clean_start = false;
	w->c.expiry_s = SESSION_EXPIRY_S;
	w->c.receive_max = (uint16_t)s->cfg->inflight;
	w->reconnect_at = s->now_ns;
	return w;
}

uint64_t worker__step(struct worker *w)
{
	uint64_t now = w->s->now_ns;
	if(w->c.state != MQ_DOWN) return soak__ms_to_ns(1000);
	if(now < w->reconnect_at) return w->reconnect_at - now;
	if(mq_open(&w->c)){
		w->reconnect_at = now + soak__ms_to_ns(SOAK_RETRY_MS);
		return w->reconnect_at - now;
	}
	w->s->ledger.c.worker_reconnects++;
	return soak__ms_to_ns(1000);
}

bool worker__ready(const struct worker *w)
{
	return w->c.state == MQ_UP && w->subscribed && w->npending == 0;
}

uint64_t worker__subscribed_ns(const struct worker *w)
{
	return w->subscribed_ns;
}

void worker__reconnect(struct worker *w)
{
	if(w->c.fd < 0) return;
	soak__trace(w->s, "w%d disconnects (final sweep)", w->index);
	mq_disconnect(&w->c);
	went_down(w);
}

struct mq_conn *worker__conn(struct worker *w)
{
	return &w->c;
}

void worker__free(struct worker *w)
{
	if(w == NULL) return;
	mq_free(&w->c);
	free(w);
}
