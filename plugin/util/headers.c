/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Encoded header lists (see headers.h): building, appending and walking the
 * flat buffer that carries a message's MQTT v5 properties through the core.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mosquitto_dlq.h"
#include "util/headers.h"

static int reserve(struct dlq_headers *h, size_t extra)
{
	if(h->len + extra <= h->cap) return 0;
	size_t cap = h->cap ? h->cap : 64;
	while(cap < h->len + extra){
		cap *= 2;
	}
	uint8_t *data = realloc(h->data, cap);
	if(data == NULL) return ENOMEM;
	h->data = data;
	h->cap = cap;
	return 0;
}

static void put_part(struct dlq_headers *h, const void *p, size_t len)
{
	h->data[h->len++] = (uint8_t)(len >> 8);
	h->data[h->len++] = (uint8_t)(len & 0xff);
	if(len) memcpy(h->data + h->len, p, len);
	h->len += len;
	h->data[h->len++] = 0;
}

int headers__add(struct dlq_headers *h, uint8_t kind, const void *a, size_t a_len, const void *b, size_t b_len)
{
	bool pair = (kind == DLQ_HDR_USER_PROPERTY);
	if(a_len > UINT16_MAX || b_len > UINT16_MAX) return EINVAL;
	size_t need = 1 + 3 + a_len + (pair ? 3 + b_len : 0);
	if(reserve(h, need)) return ENOMEM;
	h->data[h->len++] = kind;
	put_part(h, a, a_len);
	if(pair) put_part(h, b, b_len);
	return 0;
}

int headers__add_user(struct dlq_headers *h, const char *name, const char *value)
{
	return headers__add(h, DLQ_HDR_USER_PROPERTY, name, strlen(name), value, strlen(value));
}

int headers__append_raw(struct dlq_headers *h, const uint8_t *data, size_t len)
{
	if(len == 0) return 0;
	if(reserve(h, len)) return ENOMEM;
	memcpy(h->data + h->len, data, len);
	h->len += len;
	return 0;
}

/* Reads one length-prefixed, NUL-terminated part at *pos. */
static bool get_part(const uint8_t *data, size_t len, size_t *pos, const char **p, uint16_t *plen)
{
	if(len - *pos < 2) return false;
	size_t n = ((size_t)data[*pos] << 8) | data[*pos + 1];
	if(len - *pos - 2 < n + 1) return false;
	if(data[*pos + 2 + n] != 0) return false;
	*p = (const char *)data + *pos + 2;
	*plen = (uint16_t)n;
	*pos += 2 + n + 1;
	return true;
}

bool headers__next(const uint8_t *data, size_t len, size_t *pos, struct dlq_header *out)
{
	if(data == NULL || *pos >= len) return false;
	size_t p = *pos;
	out->kind = data[p++];
	out->b = NULL;
	out->b_len = 0;
	if(!get_part(data, len, &p, &out->a, &out->a_len)) return false;
	if(out->kind == DLQ_HDR_USER_PROPERTY){
		if(!get_part(data, len, &p, &out->b, &out->b_len)) return false;
	}
	*pos = p;
	return true;
}

bool headers__is_reserved(const char *name, size_t len)
{
	static const char *const exact[] = {
		DLQ_PROP_ID, DLQ_PROP_RETRY_COUNT, DLQ_PROP_ORIGIN_TOPIC, DLQ_PROP_ORIGIN_ID,
	};
	static const char dl_prefix[] = "dead-letter-";

	for(size_t i = 0; i < sizeof(exact)/sizeof(exact[0]); i++){
		if(len == strlen(exact[i]) && !memcmp(name, exact[i], len)) return true;
	}
	return len >= sizeof(dl_prefix) - 1 && !memcmp(name, dl_prefix, sizeof(dl_prefix) - 1);
}

void headers__free(struct dlq_headers *h)
{
	free(h->data);
	h->data = NULL;
	h->len = 0;
	h->cap = 0;
}
