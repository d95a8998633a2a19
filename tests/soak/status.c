/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The soak's status client: asks the plugin for getStatus on
 * $CONTROL/dlq/v1 (the reply comes to it alone, on
 * $CONTROL/dlq/v1/response) and keeps the totals of the latest answer, and
 * follows the broker's $SYS/broker/publish/messages/dropped (QoS 1
 * messages a full queue made the broker drop: they would be lost to the
 * tally). A clean session; it reconnects at once when the broker is back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "mosquitto_dlq.h"
#include "soak.h"

#define DROPPED_TOPIC "$SYS/broker/publish/messages/dropped"
/* An answer that does not come within this is asked for again. */
#define ANSWER_TIMEOUT_MS 10000

struct status_client {
	struct soak *s;
	struct mq_conn c;
	uint64_t retry_at;
	uint64_t next_ask;
	uint64_t asked_ns;          /* the outstanding request, 0: none */
	uint64_t answered_asked_ns; /* when the latest answer was asked for */
	struct plugin_status latest;
};

static const char *const filters[] = { DROPPED_TOPIC };

static struct status_client *of(struct mq_conn *c)
{
	return c->owner;
}

static double num(const cJSON *o, const char *name, bool *ok)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	if(!cJSON_IsNumber(v)){
		*ok = false;
		return 0;
	}
	return v->valuedouble;
}

static void on_answer(struct status_client *st, const struct mq_msg *m)
{
	cJSON *doc = cJSON_ParseWithLength((const char *)m->payload, m->payloadlen);
	const cJSON *responses = cJSON_GetObjectItemCaseSensitive(doc, "responses");
	const cJSON *e = cJSON_GetArrayItem(responses, 0);
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(e, "data");
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(data, "totals");
	struct plugin_status p = {0};
	bool ok = cJSON_IsObject(t);
	p.tracked = num(t, "tracked", &ok);
	p.untracked_full = num(t, "untrackedFull", &ok);
	p.nacks = num(t, "nacks", &ok);
	p.nacks_refused = num(t, "nacksRefused", &ok);
	p.retry_copies = num(t, "retryCopies", &ok);
	p.delayed_copies = num(t, "delayedCopies", &ok);
	p.dead_letters = num(t, "deadLetters", &ok);
	p.publish_failures = num(t, "publishFailures", &ok);
	p.expired = num(t, "expired", &ok);
	p.evicted = num(t, "evicted", &ok);
	p.redeliveries = num(t, "redeliveries", &ok);
	p.diverted = num(t, "diverted", &ok);
	p.unknown_ids = num(t, "unknownIds", &ok);
	p.records = num(t, "records", &ok);
	p.ledger_bytes = num(t, "ledgerBytes", &ok);
	p.pending = num(t, "pending", &ok);
	p.delayed = num(t, "delayed", &ok);
	p.owed_bytes = num(t, "owedBytes", &ok);
	cJSON_Delete(doc);
	if(!ok){
		fprintf(stderr, "dlq_soak: getStatus answered something else: %.*s\n", (int)m->payloadlen, m->payload);
		return;
	}
	p.valid = true;
	st->latest = p;
	st->answered_asked_ns = st->asked_ns;
	st->asked_ns = 0;
}

static void on_publish(struct mq_conn *c, const struct mq_msg *m)
{
	struct status_client *st = of(c);
	if(!strcmp(m->topic, DLQ_RESPONSE_TOPIC)){
		on_answer(st, m);
	}else if(!strcmp(m->topic, DROPPED_TOPIC)){
		char buf[32];
		size_t n = m->payloadlen < sizeof(buf) - 1 ? m->payloadlen : sizeof(buf) - 1;
		memcpy(buf, m->payload, n);
		buf[n] = '\0';
		st->s->sys_dropped = strtol(buf, NULL, 10);
	}
	if(m->qos > 0) mq_puback(c, m->mid);
}

static void on_connack(struct mq_conn *c, bool present)
{
	(void)present;
	mq_subscribe(c, mq_next_mid(c), filters, 1, 0);
	of(c)->asked_ns = 0; /* a request sent before the connection ended is lost */
}

static void on_closed(struct mq_conn *c, const char *why)
{
	struct status_client *st = of(c);
	(void)why;
	st->retry_at = st->s->now_ns;
	st->asked_ns = 0;
}

static const struct mq_handlers handlers = {
	.connack = on_connack,
	.publish = on_publish,
	.closed = on_closed,
};

struct status_client *status__new(struct soak *s)
{
	struct status_client *st = calloc(1, sizeof(*st));
	if(st == NULL) return NULL;
	st->s = s;
	mq_init(&st->c, "soak-status", s->socket_path, &handlers, st);
	st->c.clean_start = true;
	st->retry_at = s->now_ns;
	return st;
}

void status__ask(struct status_client *st)
{
	static const char request[] = "{\"commands\":[{\"command\":\"" DLQ_COMMAND_GET_STATUS "\"}]}";
	uint64_t now = st->s->now_ns;
	if(st->c.state != MQ_UP) return;
	if(st->asked_ns && now - st->asked_ns < soak__ms_to_ns(ANSWER_TIMEOUT_MS)) return;
	st->asked_ns = now;
	mq_publish(&st->c, 0, DLQ_CONTROL_TOPIC, request, sizeof(request) - 1, 0, false, NULL, NULL);
}

uint64_t status__step(struct status_client *st, unsigned interval_ms)
{
	uint64_t now = st->s->now_ns;
	if(st->c.state == MQ_DOWN){
		if(now < st->retry_at) return st->retry_at - now;
		if(mq_open(&st->c)) st->retry_at = now + soak__ms_to_ns(SOAK_RETRY_MS);
		return soak__ms_to_ns(SOAK_RETRY_MS);
	}
	if(st->c.state != MQ_UP) return soak__ms_to_ns(SOAK_RETRY_MS);
	if(now >= st->next_ask){
		status__ask(st);
		st->next_ask = now + soak__ms_to_ns(interval_ms);
	}
	return st->next_ask - now;
}

const struct plugin_status *status__latest(const struct status_client *st, uint64_t *asked_ns)
{
	if(asked_ns) *asked_ns = st->answered_asked_ns;
	return &st->latest;
}

struct mq_conn *status__conn(struct status_client *st)
{
	return &st->c;
}

void status__free(struct status_client *st)
{
	if(st == NULL) return;
	mq_free(&st->c);
	free(st);
}
