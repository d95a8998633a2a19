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

#include "model/envelope.h"
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
	const char *broker;
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

/* Copies n bytes of s (its terminator included; n from str_size) to *p. */
static const char *put_str(char **p, const char *s, size_t n)
{
	if(s == NULL) return NULL;
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
	/* Each string's length is taken once: a NACK makes an envelope. */
	const char *str[8] = {
		pt->target_client, pt->topic, pt->origin_topic, pt->filter, pt->dead_letter, pt->reason, pt->client,
		pt->broker,
	};
	size_t len[8];
	size_t size = sizeof(struct dlq_envelope) + pt->payload_len + pt->headers_len;
	for(int i = 0; i < 8; i++){
		len[i] = str_size(str[i]);
		size += len[i];
	}
	struct dlq_envelope *e = calloc(1, size);
	if(e == NULL) return NULL;

	char *p = e->data;
	e->kind = kind;
	e->target_client = put_str(&p, str[0], len[0]);
	e->topic = put_str(&p, str[1], len[1]);
	e->origin_topic = put_str(&p, str[2], len[2]);
	e->filter = put_str(&p, str[3], len[3]);
	e->dead_letter = put_str(&p, str[4], len[4]);
	e->reason = put_str(&p, str[5], len[5]);
	e->client = put_str(&p, str[6], len[6]);
	e->broker = put_str(&p, str[7], len[7]);
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
		const char *client, const char *broker, const void *payload, uint32_t payload_len, const void *headers,
		uint32_t headers_len)
{
	struct parts pt = {
		.target_client = target_client,
		.topic = topic,
		.origin_topic = origin_topic,
		.filter = filter,
		.dead_letter = dead_letter,
		.reason = reason,
		.client = client,
		.broker = broker,
		.payload = payload,
		.payload_len = payload_len,
		.headers = headers,
		.headers_len = headers_len,
	};
	return envelope_new(kind, &pt);
}

struct dlq_envelope *envelope__copy(const struct dlq_envelope *e)
{
	struct dlq_envelope *c = envelope__new(e->kind, e->target_client, e->topic, e->origin_topic, e->filter,
			e->dead_letter, e->reason, e->client, e->broker, e->payload, e->payload_len, e->headers, e->headers_len);
	if(c == NULL) return NULL;
	c->id = e->id;
	c->origin_id = e->origin_id;
	c->time_ms = e->time_ms;
	c->retry_count = e->retry_count;
	c->qos = e->qos;
	c->seq = e->seq;
	c->first_nack_ms = e->first_nack_ms;
	c->delay_ms = e->delay_ms;
	c->target_persists = e->target_persists;
	c->recorded = e->recorded;
	c->final = e->final;
	c->cause = e->cause;
	c->target_settles = e->target_settles;
	return c;
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
	e->origin_id = *record__origin_id(r);
	e->time_ms = now_ms;
	e->first_nack_ms = record__first_nack_ms(r) ? record__first_nack_ms(r) : now_ms;
	e->retry_count = (uint16_t)record__attempt(r);
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

struct dlq_envelope *envelope__dead_letter(const struct dlq_record *r, const char *nacking_client, const char *broker,
		enum dlq_cause cause, const char *reason, int64_t now_ms)
{
	char ran_out[96];
	struct parts pt;
	parts_from_record(&pt, r, nacking_client);
	pt.topic = r->policy->dead_letter;
	if(reason == NULL || reason[0] == '\0'){
		/* "max_attempts (N) reached", without snprintf: it cost a dead
		 * letter more than the rest of its envelope. */
		static const char pre[] = "max_attempts (", post[] = ") reached";
		char digits[10];
		size_t len = 0;
		unsigned n = r->policy->max_attempts;
		do{
			digits[len++] = (char)('0' + n % 10u);
			n /= 10u;
		}while(n);
		char *o = ran_out;
		memcpy(o, pre, sizeof(pre) - 1);
		o += sizeof(pre) - 1;
		while(len) *o++ = digits[--len];
		memcpy(o, post, sizeof(post));
		reason = ran_out;
	}
	pt.reason = reason;
	pt.broker = broker;
	/* No id yet: a dead letter's is its name in the dead-letter store,
	 * drawn by the engine (letter_store__name). */
	static const struct dlq_id unnamed;
	struct dlq_envelope *e = from_record(DLQ_ENV_DEAD_LETTER, &pt, r, &unnamed, now_ms);
	if(e) e->cause = (uint8_t)cause;
	return e;
}

struct dlq_envelope *envelope__dead_letter_from_copy(const struct dlq_envelope *c, const char *broker,
		enum dlq_cause cause, const char *reason, int64_t now_ms)
{
	struct parts pt = {
		.topic = c->dead_letter,
		.origin_topic = c->origin_topic,
		.filter = c->filter,
		.dead_letter = c->dead_letter,
		.reason = reason,
		.client = c->target_client ? c->target_client : c->client,
		.broker = broker,
		.payload = c->payload,
		.payload_len = c->payload_len,
		.headers = c->headers,
		.headers_len = c->headers_len,
		.policy = c->policy,
	};
	struct dlq_envelope *e = envelope_new(DLQ_ENV_DEAD_LETTER, &pt);
	if(e == NULL) return NULL;
	/* Not the copy's dlq-id: a dead letter's id is its name in the
	 * dead-letter store, drawn by the engine (letter_store__name). */
	memset(e->id.raw, 0, sizeof(e->id.raw));
	e->origin_id = c->origin_id;
	e->time_ms = now_ms;
	e->first_nack_ms = c->first_nack_ms;
	/* The copy was never delivered: the count stays what it said. */
	e->retry_count = c->retry_count;
	e->qos = c->qos;
	e->cause = (uint8_t)cause;
	return e;
}

/* Writes n as exactly width decimal digits. */
static void put_digits(char *out, unsigned n, int width)
{
	for(int i = width - 1; i >= 0; i--){
		out[i] = (char)('0' + n % 10);
		n /= 10;
	}
}

/* The civil date of a day count since 1970-01-01 (proleptic Gregorian),
 * by eras of 400 years (H. Hinnant's days_from_civil, inverted): strftime
 * and gmtime_r cost ten times as much, and a dead letter is stamped with
 * one. */
static void civil_of(int64_t days, int64_t *y, unsigned *m, unsigned *d)
{
	days += 719468;
	int64_t era = (days >= 0 ? days : days - 146096) / 146097;
	unsigned doe = (unsigned)(days - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned mp = (5 * doy + 2) / 153;
	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int64_t)yoe + era * 400 + (*m <= 2);
}

void envelope__format_time(int64_t ms, char out[32])
{
	int64_t s = ms / 1000;
	int frac = (int)(ms % 1000);
	if(frac < 0){
		frac += 1000;
		s -= 1;
	}
	int64_t days = s / 86400;
	int64_t sec = s % 86400;
	if(sec < 0){
		sec += 86400;
		days -= 1;
	}
	int64_t year;
	unsigned month, day;
	civil_of(days, &year, &month, &day);
	if(year < 1000 || year > 9999){
		time_t t = (time_t)s;
		struct tm tm;
		gmtime_r(&t, &tm);
		size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(out + n, 32 - n, ".%03dZ", frac);
		return;
	}
	/* YYYY-MM-DDTHH:MM:SS.mmmZ */
	put_digits(out, (unsigned)year, 4);
	out[4] = '-';
	put_digits(out + 5, month, 2);
	out[7] = '-';
	put_digits(out + 8, day, 2);
	out[10] = 'T';
	put_digits(out + 11, (unsigned)(sec / 3600), 2);
	out[13] = ':';
	put_digits(out + 14, (unsigned)(sec / 60 % 60), 2);
	out[16] = ':';
	put_digits(out + 17, (unsigned)(sec % 60), 2);
	out[19] = '.';
	put_digits(out + 20, (unsigned)frac, 3);
	out[23] = 'Z';
	out[24] = '\0';
}

bool envelope__parse_time(const char *s, int64_t *out)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	int y, mo, da, h, mi, se, used = 0;
	if(sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &da, &h, &mi, &se, &used) != 6 || used != 19) return false;
	const char *p = s + used;
	int64_t ms = 0;
	if(*p == '.'){
		int digits = 0;
		for(p++; *p >= '0' && *p <= '9'; p++, digits++){
			if(digits < 3) ms = ms * 10 + (*p - '0');
		}
		if(digits == 0) return false;
		for(; digits < 3; digits++) ms *= 10;
	}
	if(strcmp(p, "Z") || mo < 1 || mo > 12 || da < 1 || da > 31 || h > 23 || mi > 59 || se > 60) return false;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = da;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = se;
	time_t t = timegm(&tm);
	*out = (int64_t)t * 1000 + ms;
	return true;
}

/* n in decimal; n < 100000 (retry counts are uint16_t). */
static void put_count(char out[8], unsigned n)
{
	char tmp[8];
	int len = 0;
	do{
		tmp[len++] = (char)('0' + n % 10);
		n /= 10;
	}while(n && len < 7);
	for(int i = 0; i < len; i++){
		out[i] = tmp[len - 1 - i];
	}
	out[len] = '\0';
}

static void add_prop(struct dlq_envelope_props *p, const char *name, const char *value)
{
	p->items[p->count].name = name;
	p->items[p->count].value = value;
	p->count++;
}

void envelope__props(const struct dlq_envelope *e, struct dlq_envelope_props *out)
{
	out->count = 0;
	put_count(out->retry_count, e->retry_count);
	id__encode(&e->origin_id, out->origin_id);

	if(e->kind == DLQ_ENV_RETRY_COPY){
		/* A copy no policy tracks (a dead letter redriven to a topic no
		 * policy takes, engine/redrive.c) has no id to NACK it by. */
		id__encode(&e->id, out->id);
		if(!id__is_zero(&e->id)) add_prop(out, DLQ_PROP_ID, out->id);
		add_prop(out, DLQ_PROP_RETRY_COUNT, out->retry_count);
		add_prop(out, DLQ_PROP_ORIGIN_TOPIC, e->origin_topic);
		add_prop(out, DLQ_PROP_ORIGIN_ID, out->origin_id);
		if(e->delay_ms){
			envelope__format_time(e->first_nack_ms, out->when);
			add_prop(out, DLQ_PROP_FIRST_NACK_TIME, out->when);
		}
		return;
	}
	out->id[0] = '\0';
	envelope__format_time(e->time_ms, out->when);
	add_prop(out, DLQ_PROP_RETRY_COUNT, out->retry_count);
	add_prop(out, DLQ_PROP_ORIGIN_TOPIC, e->origin_topic);
	add_prop(out, DLQ_PROP_ORIGIN_ID, out->origin_id);
	add_prop(out, DLQ_PROP_DEAD_LETTER_REASON, e->reason);
	add_prop(out, DLQ_PROP_DEAD_LETTER_CLIENT, e->client);
	add_prop(out, DLQ_PROP_DEAD_LETTER_FILTER, e->filter);
	add_prop(out, DLQ_PROP_DEAD_LETTER_TIME, out->when);
	add_prop(out, DLQ_PROP_DEAD_LETTER_CAUSE, cause__name(e->cause));
	if(e->broker) add_prop(out, DLQ_PROP_DEAD_LETTER_BROKER, e->broker);
	/* A dead letter the store keeps is named by its id (letters.h); one
	 * made before it was named (an older state file) has none. */
	if(!id__is_zero(&e->id)){
		id__encode(&e->id, out->id);
		add_prop(out, DLQ_PROP_DEAD_LETTER_ID, out->id);
	}
	if(e->final) add_prop(out, DLQ_PROP_DEAD_LETTER_FINAL, "true");
}

int envelope__headers(const struct dlq_envelope *e, struct dlq_headers *h)
{
	struct dlq_envelope_props p;
	envelope__props(e, &p);
	if(headers__append_raw(h, e->headers, e->headers_len)) return ENOMEM;
	for(size_t i = 0; i < p.count; i++){
		if(headers__add_user(h, p.items[i].name, p.items[i].value)) return ENOMEM;
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
