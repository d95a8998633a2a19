/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The soak's dead-letter inspector: a persistent session subscribed to
 * dead/# at QoS 1, as docs/semantics.md advises, that records each dead letter
 * against its message (the payload is the original's) and acknowledges it.
 * A dead letter is recognised by its origin-id, retry-count,
 * dead-letter-client and dead-letter-time: one that comes again with all
 * four equal is the broker redelivering the same dead letter (its PUBACK
 * was lost), not a second dead letter of the message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mosquitto_dlq.h"
#include "soak.h"
#include "test_util.h"

#define SESSION_EXPIRY_S 3600

struct inspector {
	struct soak *s;
	struct mq_conn c;
	bool subscribed;
	uint64_t retry_at;
};

static const char *const filters[] = { "dead/#" };

static struct inspector *of(struct mq_conn *c)
{
	return c->owner;
}

static const char *user(const struct mq_msg *m, const char *name)
{
	for(size_t i = 0; i < m->nusers; i++){
		if(!strcmp(m->users[i].name, name)) return m->users[i].value;
	}
	return NULL;
}

static enum dead_kind kind_of(const char *reason)
{
	if(reason == NULL) return DEAD_OTHER;
	if(!strcmp(reason, "random") || !strcmp(reason, "poison")) return DEAD_NACKED;
	if(strstr(reason, "without acknowledgement")) return DEAD_DIVERTED;
	if(strstr(reason, "left without a session")) return DEAD_LEFT;
	if(strstr(reason, "restarted")) return DEAD_RESTART;
	return DEAD_OTHER;
}

static uint64_t fingerprint(const struct mq_msg *m)
{
	const char *names[] = { DLQ_PROP_ORIGIN_ID, DLQ_PROP_RETRY_COUNT, DLQ_PROP_DEAD_LETTER_CLIENT,
			DLQ_PROP_DEAD_LETTER_TIME };
	uint64_t h = 0;
	for(size_t i = 0; i < ARRAY_LEN(names); i++){
		const char *v = user(m, names[i]);
		h = fp_hash(h, v ? v : "", v ? strlen(v) + 1 : 0);
	}
	return h;
}

static void on_publish(struct mq_conn *c, const struct mq_msg *m)
{
	struct inspector *in = of(c);
	struct soak *s = in->s;
	struct ledger *l = &s->ledger;
	uint64_t seq;

	s->last_activity_ns = s->now_ns;
	struct seq_rec *r = ledger__from_payload(l, m->payload, m->payloadlen, s->cfg->payload_len, &seq);
	soak__trace(s, "dead letter seq %llu origin-id %s retry-count %s client %s dup %d: %s", (unsigned long long)seq,
			user(m, DLQ_PROP_ORIGIN_ID) ? user(m, DLQ_PROP_ORIGIN_ID) : "-",
			user(m, DLQ_PROP_RETRY_COUNT) ? user(m, DLQ_PROP_RETRY_COUNT) : "-",
			user(m, DLQ_PROP_DEAD_LETTER_CLIENT) ? user(m, DLQ_PROP_DEAD_LETTER_CLIENT) : "-", m->dup,
			user(m, DLQ_PROP_DEAD_LETTER_REASON) ? user(m, DLQ_PROP_DEAD_LETTER_REASON) : "-");
	if(r){
		if(!fpset_add(&l->dead_seen, fingerprint(m))){
			l->c.dead_redelivered++;
		}else{
			ledger__touch(l, r);
			l->c.dead_letters++;
			if(r->dead < 255) r->dead++;
			r->dead_kinds |= (uint8_t)kind_of(user(m, DLQ_PROP_DEAD_LETTER_REASON));
			const char *rc = user(m, DLQ_PROP_RETRY_COUNT);
			unsigned n = rc ? (unsigned)strtoul(rc, NULL, 10) : 0;
			r->dead_retry_count = (uint8_t)(n < 255 ? n : 255);
		}
	}
	if(m->qos > 0) mq_puback(c, m->mid);
}

static void on_suback(struct mq_conn *c, unsigned mid, const unsigned char *codes, size_t n)
{
	(void)mid;
	if(n != 1 || codes[0] >= 0x80){
		fprintf(stderr, "dlq_soak: inspector: subscription refused\n");
		abort();
	}
	of(c)->subscribed = true;
}

static void on_connack(struct mq_conn *c, bool present)
{
	struct inspector *in = of(c);
	if(!present || !in->subscribed){
		in->subscribed = false;
		mq_subscribe(c, mq_next_mid(c), filters, 1, 1);
	}
}

static void on_closed(struct mq_conn *c, const char *why)
{
	struct inspector *in = of(c);
	(void)why;
	in->retry_at = in->s->now_ns;
	in->s->ledger.c.inspector_reconnects++;
}

static const struct mq_handlers handlers = {
	.connack = on_connack,
	.publish = on_publish,
	.suback = on_suback,
	.closed = on_closed,
};

struct inspector *inspector__new(struct soak *s)
{
	struct inspector *in = calloc(1, sizeof(*in));
	if(in == NULL) return NULL;
	in->s = s;
	mq_init(&in->c, "soak-inspector", s->socket_path, &handlers, in);
	/* clean_start=false from the first connection: Mosquitto 2.0.11 saves in
	 * its persistence file only the sessions whose latest connection said so,
	 * whatever their session expiry interval. */
	in->c.clean_start = false;
	in->c.expiry_s = SESSION_EXPIRY_S;
	in->retry_at = s->now_ns;
	return in;
}

uint64_t inspector__step(struct inspector *in)
{
	uint64_t now = in->s->now_ns;
	if(in->c.state != MQ_DOWN) return soak__ms_to_ns(1000);
	if(now < in->retry_at) return in->retry_at - now;
	if(mq_open(&in->c)){
		in->retry_at = now + soak__ms_to_ns(SOAK_RETRY_MS);
		return in->retry_at - now;
	}
	return soak__ms_to_ns(1000);
}

bool inspector__ready(const struct inspector *in)
{
	return in->c.state == MQ_UP && in->subscribed;
}

void inspector__reconnect(struct inspector *in)
{
	if(in->c.fd < 0) return;
	mq_disconnect(&in->c);
	in->retry_at = in->s->now_ns;
}

struct mq_conn *inspector__conn(struct inspector *in)
{
	return &in->c;
}

void inspector__free(struct inspector *in)
{
	if(in == NULL) return;
	mq_free(&in->c);
	free(in);
}
