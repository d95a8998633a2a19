/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What a kept dead letter shows in a reply (see letter_view.h).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/letter_view.h"
#include "model/cause.h"
#include "mosquitto_dlq.h"
#include "util/errtext.h"
#include "util/headers.h"
#include "util/id.h"

/* base64 (RFC 4648, padded) of n bytes; NULL when out of memory. */
static char *base64(const uint8_t *p, size_t n)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *out = malloc((n + 2) / 3 * 4 + 1);
	if(out == NULL) return NULL;
	size_t o = 0;
	for(size_t i = 0; i < n; i += 3){
		uint32_t v = (uint32_t)p[i] << 16;
		if(i + 1 < n) v |= (uint32_t)p[i + 1] << 8;
		if(i + 2 < n) v |= p[i + 2];
		out[o++] = abc[(v >> 18) & 63];
		out[o++] = abc[(v >> 12) & 63];
		out[o++] = i + 1 < n ? abc[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? abc[v & 63] : '=';
	}
	out[o] = '\0';
	return out;
}


static bool add_str(cJSON *o, const char *name, const char *v)
{
	return cJSON_AddStringToObject(o, name, v ? v : "") != NULL;
}

static bool add_num(cJSON *o, const char *name, double v)
{
	return cJSON_AddNumberToObject(o, name, v) != NULL;
}

cJSON *letter_view__summary(const struct dlq_letter *l)
{
	const struct dlq_envelope *e = l->env;
	char id[DLQ_ID_LEN + 1], origin[DLQ_ID_LEN + 1], when[32];
	id__encode(&e->id, id);
	id__encode(&e->origin_id, origin);
	envelope__format_time(e->time_ms, when);
	cJSON *o = cJSON_CreateObject();
	if(o == NULL) return NULL;
	if(!add_str(o, "id", id) || !add_str(o, "deadLetter", e->topic) || !add_str(o, "originTopic", e->origin_topic)
			|| !add_str(o, "originId", origin) || !add_str(o, "reason", e->reason) || !add_str(o, "client", e->client)
			|| !add_str(o, "filter", e->filter) || !add_str(o, "cause", cause__name(e->cause))
			|| !add_str(o, "broker", e->broker)
			|| !add_str(o, "time", when) || !add_num(o, "timeMs", (double)e->time_ms)
			|| !add_num(o, "retryCount", e->retry_count) || !add_num(o, "qos", envelope__qos(e))
			|| !add_num(o, "payloadBytes", e->payload_len)){
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* Text a reply can hold as it is: UTF-8 without NUL, and without what an
 * MQTT client may refuse in a UTF-8 string once cJSON writes it as it is:
 * U+007F-U+009F and the noncharacters (cJSON escapes U+0001-U+001F). */
static bool is_text(const void *p, size_t n)
{
	const unsigned char *u = p;
	size_t i = 0;
	while(i < n){
		enum errtext_char kind;
		size_t k = errtext__utf8_char(u + i, n - i, &kind);
		if(k == 0 || kind == ERRTEXT_CHAR_NONCHAR || (kind == ERRTEXT_CHAR_CONTROL && u[i] >= 0x20)) return false;
		i += k;
	}
	return true;
}

static bool add_text_or_base64(cJSON *o, const char *name, const uint8_t *p, size_t n)
{
	if(is_text(p, n)){
		char *s = errtext__dup_range((const char *)p, n);
		bool ok = s && cJSON_AddStringToObject(o, name, s);
		free(s);
		return ok;
	}
	char *b = base64(p, n);
	bool ok = b && cJSON_AddStringToObject(o, name, b);
	free(b);
	return ok;
}

static bool add_property(cJSON *list, const struct dlq_header *h)
{
	cJSON *p = cJSON_CreateObject();
	if(p == NULL || !cJSON_AddItemToArray(list, p)){
		cJSON_Delete(p);
		return false;
	}
	switch(h->kind){
	case DLQ_HDR_PAYLOAD_FORMAT:
		return add_str(p, "name", "payload-format-indicator") && add_num(p, "value", (uint8_t)h->a[0]);
	case DLQ_HDR_CONTENT_TYPE:
		return add_str(p, "name", "content-type") && add_text_or_base64(p, "value", (const uint8_t *)h->a, h->a_len);
	case DLQ_HDR_RESPONSE_TOPIC:
		return add_str(p, "name", "response-topic") && add_text_or_base64(p, "value", (const uint8_t *)h->a, h->a_len);
	case DLQ_HDR_CORRELATION_DATA: {
		char *b = base64((const uint8_t *)h->a, h->a_len);
		bool ok = b && add_str(p, "name", "correlation-data") && add_str(p, "value", b);
		free(b);
		return ok;
	}
	case DLQ_HDR_USER_PROPERTY:
		return add_str(p, "name", "user-property")
				&& add_text_or_base64(p, "key", (const uint8_t *)h->a, h->a_len)
				&& add_text_or_base64(p, "value", (const uint8_t *)h->b, h->b_len);
	default:
		return add_num(p, "identifier", h->kind);
	}
}

cJSON *letter_view__full(const struct dlq_letter *l)
{
	const struct dlq_envelope *e = l->env;
	cJSON *o = letter_view__summary(l);
	if(o == NULL) return NULL;
	size_t n = e->payload_len;
	bool cut = n > DLQ_MAX_LETTER_PAYLOAD_REPLY;
	if(cut){
		n = DLQ_MAX_LETTER_PAYLOAD_REPLY;
		/* Text is cut at a character boundary. */
		size_t ok = errtext__utf8_check((const char *)e->payload, n);
		if(ok + 4 > n && is_text(e->payload, ok)) n = ok;
	}
	bool text = is_text(e->payload, n);
	struct dlq_headers h = {0};
	cJSON *props = cJSON_AddArrayToObject(o, "properties");
	bool ok = props && add_text_or_base64(o, "payload", e->payload, n)
			&& add_str(o, "payloadEncoding", text ? "utf-8" : "base64")
			&& (!cut || cJSON_AddBoolToObject(o, "payloadTruncated", true))
			&& envelope__headers(e, &h) == 0;
	/* The publisher's properties may be large (MQTT allows 256 MB of
	 * them): those past DLQ_MAX_LETTER_PAYLOAD_REPLY bytes are left out,
	 * and said to be; the plugin's own are always there. */
	struct dlq_header hd;
	size_t budget = DLQ_MAX_LETTER_PAYLOAD_REPLY;
	bool props_cut = false;
	for(size_t pos = 0; ok && headers__next(h.data, h.len, &pos, &hd);){
		size_t cost = (size_t)hd.a_len + hd.b_len;
		bool own = hd.kind == DLQ_HDR_USER_PROPERTY && headers__is_reserved(hd.a, hd.a_len);
		if(!own && cost > budget){
			props_cut = true;
			continue;
		}
		if(!own) budget -= cost;
		ok = add_property(props, &hd);
	}
	if(ok && props_cut) ok = cJSON_AddBoolToObject(o, "propertiesTruncated", true) != NULL;
	headers__free(&h);
	if(!ok){
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

