/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Broker property lists to and from encoded header lists (see props.h).
 * Lists are read through a struct dlq_prop_reader, whose read functions
 * return copies freed with the allocator that made them, and which give
 * NULL for an empty string on 2.1 where 2.0 gave "": every string read here
 * goes through or_empty, so an empty value stays an empty value.
 */
#include <errno.h>
#include <string.h>

#include <mosquitto.h>
#include <mqtt_protocol.h>

#include "broker/prop_reader.h"
#include "broker/props.h"
#include "util/headers.h"

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

static int add_one(const struct dlq_prop_reader *r, const mosquitto_property *p, struct dlq_headers *h,
		bool keep_reserved)
{
	int id = r->identifier(p);
	int rc = 0;
	char *s = NULL;
	char *name = NULL;
	void *bin = NULL;
	uint16_t len = 0;
	uint8_t byte;

	switch(id){
		case MQTT_PROP_PAYLOAD_FORMAT_INDICATOR:
			if(r->read_byte(p, id, &byte, false)){
				rc = headers__add(h, DLQ_HDR_PAYLOAD_FORMAT, &byte, 1, NULL, 0);
			}
			break;
		case MQTT_PROP_CONTENT_TYPE:
		case MQTT_PROP_RESPONSE_TOPIC:
			if(r->read_string(p, id, &s, false)){
				rc = headers__add(h, (uint8_t)id, or_empty(s), strlen(or_empty(s)), NULL, 0);
			}
			break;
		case MQTT_PROP_CORRELATION_DATA:
			if(r->read_binary(p, id, &bin, &len, false)){
				rc = headers__add(h, DLQ_HDR_CORRELATION_DATA, bin ? bin : "", bin ? len : 0, NULL, 0);
			}
			break;
		case MQTT_PROP_USER_PROPERTY:
			if(r->read_string_pair(p, id, &name, &s, false)){
				const char *n = or_empty(name);
				const char *v = or_empty(s);
				if(keep_reserved || !headers__is_reserved(n, strlen(n))){
					rc = headers__add(h, DLQ_HDR_USER_PROPERTY, n, strlen(n), v, strlen(v));
				}
			}
			break;
		default:
			/* Message expiry, topic alias, subscription identifiers:
			 * they belong to one hop, not to the message. */
			break;
	}
	r->free_copy(s);
	r->free_copy(name);
	r->free_copy(bin);
	return rc;
}

static int to_headers(const struct dlq_prop_reader *r, const mosquitto_property *props, struct dlq_headers *h,
		bool keep_reserved)
{
	for(const mosquitto_property *p = props; p; p = r->next(p)){
		int rc = add_one(r, p, h, keep_reserved);
		if(rc) return rc;
	}
	return 0;
}

int props__to_headers(const struct dlq_prop_reader *r, const mosquitto_property *props, struct dlq_headers *h)
{
	return to_headers(r, props, h, false);
}

int props__all_to_headers(const struct dlq_prop_reader *r, const mosquitto_property *props, struct dlq_headers *h)
{
	return to_headers(r, props, h, true);
}

int props__from_headers(const uint8_t *data, size_t len, mosquitto_property **out)
{
	size_t pos = 0;
	struct dlq_header e;
	int rc = MOSQ_ERR_SUCCESS;

	while(rc == MOSQ_ERR_SUCCESS && headers__next(data, len, &pos, &e)){
		switch(e.kind){
			case DLQ_HDR_PAYLOAD_FORMAT:
				rc = mosquitto_property_add_byte(out, e.kind, e.a_len ? (uint8_t)e.a[0] : 0);
				break;
			case DLQ_HDR_CONTENT_TYPE:
			case DLQ_HDR_RESPONSE_TOPIC:
				rc = mosquitto_property_add_string(out, e.kind, e.a);
				break;
			case DLQ_HDR_CORRELATION_DATA:
				rc = mosquitto_property_add_binary(out, e.kind, e.a, e.a_len);
				break;
			case DLQ_HDR_USER_PROPERTY:
				rc = mosquitto_property_add_string_pair(out, e.kind, e.a, e.b);
				break;
			case DLQ_HDR_SUBSCRIPTION_ID:
				if(e.a_len != 4){
					rc = MOSQ_ERR_INVAL;
					break;
				}
				rc = mosquitto_property_add_varint(out, e.kind, (uint32_t)(uint8_t)e.a[0] << 24
						| (uint32_t)(uint8_t)e.a[1] << 16 | (uint32_t)(uint8_t)e.a[2] << 8 | (uint8_t)e.a[3]);
				break;
			default:
				rc = MOSQ_ERR_INVAL;
				break;
		}
	}
	if(rc == MOSQ_ERR_SUCCESS && pos != len) rc = MOSQ_ERR_INVAL;
	if(rc){
		mosquitto_property_free_all(out);
		return rc == MOSQ_ERR_NOMEM ? ENOMEM : EINVAL;
	}
	return 0;
}

/* The value of the first (or, with last, the last) user property called
 * name: the reader's copy in *value (NULL for an empty one on 2.1), to free
 * with r->free_copy. Returns whether there is one. */
static bool find_user(const struct dlq_prop_reader *r, const mosquitto_property *props, const char *name, bool last,
		char **value)
{
	char *n = NULL;
	char *v = NULL;
	bool found = false;

	*value = NULL;
	for(const mosquitto_property *p = props; p; p = r->next(p)){
		if(r->identifier(p) != MQTT_PROP_USER_PROPERTY) continue;
		if(!r->read_string_pair(p, MQTT_PROP_USER_PROPERTY, &n, &v, false)) continue;
		bool match = !strcmp(or_empty(n), name);
		r->free_copy(n);
		n = NULL;
		if(match){
			r->free_copy(*value);
			*value = v;
			found = true;
		}else{
			r->free_copy(v);
		}
		v = NULL;
		if(match && !last) break;
	}
	return found;
}

/* The value find_user finds, copied into buf (truncated). */
static const char *user_value(const struct dlq_prop_reader *r, const mosquitto_property *props, const char *name,
		char *buf, size_t bufsize, bool last)
{
	char *v;
	if(!find_user(r, props, name, last, &v) || bufsize == 0){
		r->free_copy(v);
		return NULL;
	}
	size_t l = strlen(or_empty(v));
	if(l >= bufsize) l = bufsize - 1;
	memcpy(buf, or_empty(v), l);
	buf[l] = '\0';
	r->free_copy(v);
	return buf;
}

bool props__user_copy(const struct dlq_prop_reader *r, const mosquitto_property *props, const char *name, char **out)
{
	return find_user(r, props, name, false, out);
}

const char *props__user_value(const struct dlq_prop_reader *r, const mosquitto_property *props, const char *name,
		char *buf, size_t bufsize)
{
	return user_value(r, props, name, buf, bufsize, false);
}

const char *props__last_user_value(const struct dlq_prop_reader *r, const mosquitto_property *props,
		const char *name, char *buf, size_t bufsize)
{
	return user_value(r, props, name, buf, bufsize, true);
}

bool props__string(const struct dlq_prop_reader *r, const mosquitto_property *props, int id, char **out)
{
	*out = NULL;
	return r->read_string(props, id, out, false) != NULL;
}

bool props__binary(const struct dlq_prop_reader *r, const mosquitto_property *props, int id, void **out,
		uint16_t *len)
{
	*out = NULL;
	*len = 0;
	return r->read_binary(props, id, out, len, false) != NULL;
}
