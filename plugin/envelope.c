/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Building retry copies and dead letters (see envelope.h). An envelope is
 * one allocation: the struct, then its strings, payload and headers.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "envelope.h"
#include "mosquitto_dlq.h"

/* The parts an envelope is made of; NULL strings stay NULL. */
struct parts {
	const char *target_client;
	const char *topic;
	const char *origin_topic;
	const char *filter;
	const char *dead_letter;
	const char *reason;
	const char *client;
	const struct dlq_policy *policy;
	const uint8_t *payload;
	uint32_t payload_len;
	const uint8_t *headers;
	uint32_t headers_len;
};

static size_t str_size(const char *s)
{
	return s ? strlen(s) + 1 : 0;
}

static const char *put_str(char **p, const char *s)
{
	if(s == NULL) return NULL;
	size_t n = strlen(s) + 1;
	char *dst = *p;
	memcpy(dst, s, n);
	*p += n;
	return dst;
}

static const uint8_t *put_bytes(char **p, const uint8_t *b, size_t n)
{
	uint8_t *dst = (uint8_t *)*p;
	if(n) memcpy(dst, b, n);
	*p += n;
	return dst;
}

static struct dlq_envelope *envelope_new(enum dlq_envelope_kind kind, const struct parts *pt)
{
	size_t size = sizeof(struct dlq_envelope) + str_size(pt->target_client) + str_size(pt->topic)
			+ str_size(pt->origin_topic) + str_size(pt->filter) + str_size(pt->dead_letter)
			+ str_size(pt->reason) + str_size(pt->client) + pt->payload_len + pt->headers_len;
	struct dlq_envelope *e = calloc(1, size);
	if(e == NULL) return NULL;

	char *p = e->data;
	e->kind = kind;
	e->target_client = put_str(&p, pt->target_client);
	e->topic = put_str(&p, pt->topic);
	e->origin_topic = put_str(&p, pt->origin_topic);
	e->filter = put_str(&p, pt->filter);
	e->dead_letter = put_str(&p, pt->dead_letter);
	e->reason = put_str(&p, pt->reason);
	e->client = put_str(&p, pt->client);
	e->payload = put_bytes(&p, pt->payload, pt->payload_len);
	e->payload_len = pt->payload_len;
	e->headers = put_bytes(&p, pt->headers, pt->headers_len);
	e->headers_len = pt->headers_len;
	e->policy = pt->policy;
	e->bytes = size;
	return e;
}

struct dlq_envelope *envelope__new(enum dlq_envelope_kind kind, const char *target_client, const char *topic,
		const char *origin_topic, const char *filter, const char *dead_letter, const char *reason,
		const char *client, const void *payload, uint32_t payload_len, const void *headers, uint32_t headers_len)
{
	struct parts pt = {
		.target_client = target_client,
		.topic = topic,
		.origin_topic = origin_topic,
		.filter = filter,
		.dead_letter = dead_letter,
		.reason = reason,
		.client = client,
		.payload = payload,
		.payload_len = payload_len,
		.headers = headers,
		.headers_len = headers_len,
	};
	return envelope_new(kind, &pt);
}

static void parts_from_record(struct parts *pt, const struct dlq_record *r, const char *nacking_client)
{
	memset(pt, 0, sizeof(*pt));
	pt->origin_topic = record__origin_topic(r);
	pt->filter = r->policy->filter;
	pt->policy = r->policy;
	pt->dead_letter = r->policy->dead_letter;
	pt->client = nacking_client;
	pt->payload = record__payload(r);
	pt->payload_len = r->payload_len;
	pt->headers = record__headers(r);
	pt->headers_len = r->headers_len;
}

/* An envelope of r's message, with the fields every kind takes from it. */
static struct dlq_envelope *from_record(enum dlq_envelope_kind kind, const struct parts *pt,
		const struct dlq_record *r, const struct dlq_id *id, int64_t now_ms)
{
	struct dlq_envelope *e = envelope_new(kind, pt);
	if(e == NULL) return NULL;
	e->id = *id;
	e->origin_id = r->origin_id;
	e->time_ms = now_ms;
	e->first_nack_ms = r->first_nack_ms ? r->first_nack_ms : now_ms;
	e->retry_count = r->attempt;
	e->qos = r->qos;
	return e;
}

struct dlq_envelope *envelope__retry_copy(const struct dlq_record *r, const struct dlq_id *copy_id,
		const char *retry_topic, const char *target_client, const char *nacking_client, int64_t now_ms)
{
	struct parts pt;
	parts_from_record(&pt, r, nacking_client);
	pt.target_client = target_client;
	pt.topic = target_client ? record__topic(r) : retry_topic;
	return from_record(DLQ_ENV_RETRY_COPY, &pt, r, copy_id, now_ms);
}

struct dlq_envelope *envelope__dead_letter(const struct dlq_record *r, const char *nacking_client,
		const char *reason, int64_t now_ms)
{
	char ran_out[96];
	struct parts pt;
	parts_from_record(&pt, r, nacking_client);
	pt.topic = r->policy->dead_letter;
	if(reason == NULL || reason[0] == '\0'){
		snprintf(ran_out, sizeof(ran_out), "max_attempts (%u) reached", r->policy->max_attempts);
		reason = ran_out;
	}
	pt.reason = reason;
	return from_record(DLQ_ENV_DEAD_LETTER, &pt, r, &r->id, now_ms);
}

struct dlq_envelope *envelope__dead_letter_from_copy(const struct dlq_envelope *c, const char *reason, int64_t now_ms)
{
	struct parts pt = {
		.topic = c->dead_letter,
		.origin_topic = c->origin_topic,
		.filter = c->filter,
		.dead_letter = c->dead_letter,
		.reason = reason,
		.client = c->target_client ? c->target_client : c->client,
		.payload = c->payload,
		.payload_len = c->payload_len,
		.headers = c->headers,
		.headers_len = c->headers_len,
		.policy = c->policy,
	};
	struct dlq_envelope *e = envelope_new(DLQ_ENV_DEAD_LETTER, &pt);
	if(e == NULL) return NULL;
	e->id = c->id;
	e->origin_id = c->origin_id;
	e->time_ms = now_ms;
	e->first_nack_ms = c->first_nack_ms;
	/* The copy was never delivered: the count stays what it said. */
	e->retry_count = c->retry_count;
	e->qos = c->qos;
	return e;
}

void envelope__format_time(int64_t ms, char out[32])
{
	time_t s = (time_t)(ms / 1000);
	int frac = (int)(ms % 1000);
	if(frac < 0){
		frac += 1000;
		s -= 1;
	}
	struct tm tm;
	gmtime_r(&s, &tm);
	size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, 32 - n, ".%03dZ", frac);
}

int envelope__headers(const struct dlq_envelope *e, struct dlq_headers *h)
{
	char id[DLQ_ID_LEN + 1];
	char origin_id[DLQ_ID_LEN + 1];
	char count[16];
	char when[32];

	snprintf(count, sizeof(count), "%u", (unsigned)e->retry_count);
	id__encode(&e->origin_id, origin_id);

	if(headers__append_raw(h, e->headers, e->headers_len)) return ENOMEM;
	if(e->kind == DLQ_ENV_RETRY_COPY){
		id__encode(&e->id, id);
		if(headers__add_user(h, DLQ_PROP_ID, id)
				|| headers__add_user(h, DLQ_PROP_RETRY_COUNT, count)
				|| headers__add_user(h, DLQ_PROP_ORIGIN_TOPIC, e->origin_topic)
				|| headers__add_user(h, DLQ_PROP_ORIGIN_ID, origin_id)){
			return ENOMEM;
		}
		if(e->delay_ms){
			envelope__format_time(e->first_nack_ms, when);
			if(headers__add_user(h, DLQ_PROP_FIRST_NACK_TIME, when)) return ENOMEM;
		}
		return 0;
	}
	envelope__format_time(e->time_ms, when);
	if(headers__add_user(h, DLQ_PROP_RETRY_COUNT, count)
			|| headers__add_user(h, DLQ_PROP_ORIGIN_TOPIC, e->origin_topic)
			|| headers__add_user(h, DLQ_PROP_ORIGIN_ID, origin_id)
			|| headers__add_user(h, DLQ_PROP_DEAD_LETTER_REASON, e->reason)
			|| headers__add_user(h, DLQ_PROP_DEAD_LETTER_CLIENT, e->client)
			|| headers__add_user(h, DLQ_PROP_DEAD_LETTER_FILTER, e->filter)
			|| headers__add_user(h, DLQ_PROP_DEAD_LETTER_TIME, when)){
		return ENOMEM;
	}
	return 0;
}

uint8_t envelope__qos(const struct dlq_envelope *e)
{
	if(e->kind == DLQ_ENV_DEAD_LETTER && e->qos < 1) return 1;
	return e->qos;
}

void envelope__free(struct dlq_envelope *e)
{
	free(e);
}
