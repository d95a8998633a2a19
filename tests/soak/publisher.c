/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A publisher of the soak: QoS 1 messages numbered from the ledger, at its
 * share of the offered rate, alternately to the delivery-topic policy's
 * topic and the fixed-retry-topic policy's. It keeps a persistent session
 * and, as an MQTT client must, sends every message not yet acknowledged
 * again (DUP) when it reconnects: the broker then has it twice, which the
 * tally reports. A publisher that falls behind its pace (the broker slow,
 * its window full, the broker restarting) does not send a burst to catch
 * up: the achieved rate is reported instead.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soak.h"

#define SESSION_EXPIRY_S 3600
/* A paced publisher this far behind starts again from now. */
#define PACE_SLACK_NS 100000000ull
#define BURST 64

struct publisher {
	struct soak *s;
	struct mq_conn c;
	int index;
	char topic_direct[64], topic_fixed[64];
	uint64_t gap_ns, next_ns;
	uint64_t retry_at;          /* when to try connecting again */
	uint32_t *mid_seq;          /* packet id -> seq + 1 of a message not yet acknowledged */
	bool resend;                /* connected again: what is unacknowledged goes again */
	uint64_t inflight;
	unsigned char *payload;
};

static struct publisher *of(struct mq_conn *c)
{
	return c->owner;
}

static void send_seq(struct publisher *p, unsigned mid, uint32_t seq, bool dup)
{
	const struct soak_cfg *cfg = p->s->cfg;
	int n = snprintf((char *)p->payload, cfg->payload_len + 1, SOAK_PAYLOAD_PREFIX "%u ", seq);
	memset(p->payload + n, '.', cfg->payload_len - (size_t)n);
	mq_publish(&p->c, mid, seq % 2 ? p->topic_fixed : p->topic_direct, p->payload, cfg->payload_len,
			1, dup, NULL, NULL);
}

/* Sends again what the broker has not acknowledged, as QoS 1 requires. */
static void resend(struct publisher *p)
{
	p->resend = false;
	for(unsigned mid = 1; mid <= 65535 && p->c.fd >= 0; mid++){
		if(p->mid_seq[mid] == 0) continue;
		uint32_t seq = p->mid_seq[mid] - 1;
		struct seq_rec *r = ledger__rec(&p->s->ledger, seq);
		if(r->sent < 255) r->sent++;
		r->flags |= SEQ_RESENT;
		p->s->ledger.c.resent++;
		soak__trace(p->s, "p%d resend seq %u mid %u", p->index, seq, mid);
		send_seq(p, mid, seq, true);
	}
}

static void on_connack(struct mq_conn *c, bool present)
{
	struct publisher *p = of(c);
	(void)present;
	/* When the soak allows publishing (publisher__step). */
	p->resend = true;
}

static void on_puback(struct mq_conn *c, unsigned mid, unsigned reason)
{
	struct publisher *p = of(c);
	if(p->mid_seq[mid] == 0) return; /* a late second PUBACK */
	struct seq_rec *r = ledger__rec(&p->s->ledger, p->mid_seq[mid] - 1);
	p->mid_seq[mid] = 0;
	p->inflight--;
	if(reason >= 0x80){
		p->s->ledger.c.pub_refused++;
		return;
	}
	if(r->acked < 255) r->acked++;
	p->s->ledger.c.pub_acked++;
}

static void on_closed(struct mq_conn *c, const char *why)
{
	struct publisher *p = of(c);
	(void)why;
	p->retry_at = p->s->now_ns;
	p->s->ledger.c.pub_reconnects++;
}

static const struct mq_handlers handlers = {
	.connack = on_connack,
	.puback = on_puback,
	.closed = on_closed,
};

struct publisher *publisher__new(struct soak *s, int index)
{
	struct publisher *p = calloc(1, sizeof(*p));
	char id[64];
	if(p == NULL) return NULL;
	p->s = s;
	p->index = index;
	p->mid_seq = calloc(65536, sizeof(*p->mid_seq));
	p->payload = malloc(s->cfg->payload_len + 1);
	if(p->mid_seq == NULL || p->payload == NULL){
		publisher__free(p);
		return NULL;
	}
	snprintf(p->topic_direct, sizeof(p->topic_direct), SOAK_TOPIC_DIRECT "%d", index);
	snprintf(p->topic_fixed, sizeof(p->topic_fixed), SOAK_TOPIC_FIXED "%d", index);
	snprintf(id, sizeof(id), "soak-pub-%d", index);
	mq_init(&p->c, id, s->socket_path, &handlers, p);
	/* clean_start=false from the first connection: Mosquitto 2.0.11 saves in
	 * its persistence file only the sessions whose latest connection said so,
	 * whatever their session expiry interval. */
	p->c.clean_start = false;
	p->c.expiry_s = SESSION_EXPIRY_S;
	p->gap_ns = (uint64_t)(1e9 * s->cfg->publishers / s->cfg->rate);
	p->next_ns = s->now_ns;
	p->retry_at = s->now_ns;
	return p;
}

uint64_t publisher__step(struct publisher *p)
{
	struct soak *s = p->s;
	uint64_t now = s->now_ns;
	if(p->c.state == MQ_DOWN){
		if(now < p->retry_at) return p->retry_at - now;
		if(mq_open(&p->c)){
			p->retry_at = now + soak__ms_to_ns(SOAK_RETRY_MS);
			return p->retry_at - now;
		}
		return soak__ms_to_ns(SOAK_RETRY_MS);
	}
	if(p->c.state != MQ_UP || s->hold_publishing) return soak__ms_to_ns(SOAK_RETRY_MS);
	if(p->resend) resend(p);
	if(!s->publishing || p->c.fd < 0) return soak__ms_to_ns(SOAK_RETRY_MS);
	if(now > p->next_ns + PACE_SLACK_NS) p->next_ns = now;
	uint64_t window = s->cfg->pub_window < p->c.server_receive_max ? s->cfg->pub_window : p->c.server_receive_max;
	for(int n = 0; n < BURST && p->next_ns <= now && p->inflight < window && p->c.fd >= 0; n++){
		unsigned mid = mq_next_mid(&p->c);
		if(p->mid_seq[mid]) break; /* 65535 in flight: cannot happen below the window */
		uint32_t seq = ledger__next(&s->ledger);
		struct seq_rec *r = ledger__rec(&s->ledger, seq);
		r->sent = 1;
		ledger__touch(&s->ledger, r);
		p->mid_seq[mid] = seq + 1;
		p->inflight++;
		s->ledger.c.published++;
		send_seq(p, mid, seq, false);
		p->next_ns += p->gap_ns;
	}
	if(p->inflight >= window) return soak__ms_to_ns(1);
	return p->next_ns > now ? p->next_ns - now : 0;
}

uint64_t publisher__inflight(const struct publisher *p)
{
	return p->inflight;
}

struct mq_conn *publisher__conn(struct publisher *p)
{
	return &p->c;
}

void publisher__free(struct publisher *p)
{
	if(p == NULL) return;
	mq_free(&p->c);
	free(p->mid_seq);
	free(p->payload);
	free(p);
}
