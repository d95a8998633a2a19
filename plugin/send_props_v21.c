/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * One send's property list on Mosquitto 2.1 (see send_props_v21.h): the
 * stored list's properties followed by a delivery-count user property, for
 * MESSAGE_OUT to hand the broker in place of the stored list (the broker
 * writes it and frees it with mosquitto_property_free_all, which frees each
 * node and each of its strings with mosquitto_free: lib/send_publish.c).
 * Through the public API this is mosquitto_property_copy_all and
 * mosquitto_property_add_string_pair, which together cost the broker more
 * than the rest of a delivery's plugin work (strlen, strdup and a UTF-8
 * check of strings that were checked when the list was made). So the list
 * is built here in 2.1.2's node layout (libcommon/property_common.h,
 * struct mqtt5__property), with the broker's allocator, and only where a
 * list the broker built at startup reads back through the broker's own
 * accessors as that layout says (send_props_v21__check); elsewhere the
 * public API builds it.
 */
#include <stddef.h>
#include <string.h>

#include <mosquitto.h>
#include <mosquitto_broker.h>
#include <mqtt_protocol.h>

#include "mosquitto_dlq.h"
#include "send_props_v21.h"

/* 2.1.2's property value types (include/mosquitto/mqtt_protocol.h,
 * enum mqtt5_property_type); 2.0's headers do not have them. */
enum {
	PT_BYTE = 1,
	PT_INT16 = 2,
	PT_INT32 = 3,
	PT_VARINT = 4,
	PT_BINARY = 5,
	PT_STRING = 6,
	PT_STRING_PAIR = 7,
};

/* struct mqtt__string and struct mqtt5__property as 2.1.2 lays them out. */
struct v21_string {
	char *v;
	uint16_t len;
};

struct v21_property {
	struct v21_property *next;
	union {
		uint8_t i8;
		uint16_t i16;
		uint32_t i32;
		uint32_t varint;
		struct v21_string bin;
		struct v21_string s;
	} value;
	struct v21_string name;
	int32_t identifier;
	uint8_t property_type;
	bool client_generated;
};

#define PROBE_NAME "dlq-layout-probe"
#define PROBE_VALUE "1234"

bool send_props_v21__check(const struct broker_props_v21 *v)
{
	if(v->identifier == NULL || v->next == NULL || v->string_name == NULL || v->string_value == NULL
			|| v->string_name_length == NULL || v->string_value_length == NULL){
		return false;
	}
	mosquitto_property *list = NULL;
	if(mosquitto_property_add_int32(&list, MQTT_PROP_MESSAGE_EXPIRY_INTERVAL, 77)
			|| mosquitto_property_add_string_pair(&list, MQTT_PROP_USER_PROPERTY, PROBE_NAME, PROBE_VALUE)){
		mosquitto_property_free_all(&list);
		return false;
	}
	const struct v21_property *a = (const struct v21_property *)list;
	const struct v21_property *b = a->next;
	bool ok = (const void *)b == (const void *)v->next(list)
			&& a->identifier == MQTT_PROP_MESSAGE_EXPIRY_INTERVAL && a->property_type == PT_INT32
			&& a->value.i32 == 77
			&& b->identifier == MQTT_PROP_USER_PROPERTY && v->identifier((const mosquitto_property *)b) == b->identifier
			&& b->property_type == PT_STRING_PAIR && b->next == NULL
			&& b->name.v == v->string_name((const mosquitto_property *)b)
			&& b->name.len == v->string_name_length((const mosquitto_property *)b)
			&& b->name.len == sizeof(PROBE_NAME) - 1 && !memcmp(b->name.v, PROBE_NAME, sizeof(PROBE_NAME))
			&& b->value.s.v == v->string_value((const mosquitto_property *)b)
			&& b->value.s.len == v->string_value_length((const mosquitto_property *)b)
			&& b->value.s.len == sizeof(PROBE_VALUE) - 1 && !memcmp(b->value.s.v, PROBE_VALUE, sizeof(PROBE_VALUE));
	mosquitto_property_free_all(&list);
	return ok;
}

/* A copy of a string of s->len bytes (NUL-terminated as the broker's are),
 * or "" for NULL as mosquitto_property_copy_all makes it. */
static bool copy_string(struct v21_string *to, const struct v21_string *from)
{
	to->len = from->len;
	to->v = mosquitto_malloc((size_t)from->len + 1);
	if(to->v == NULL) return false;
	if(from->v) memcpy(to->v, from->v, from->len);
	to->v[from->len] = '\0';
	return true;
}

static bool copy_node(struct v21_property *to, const struct v21_property *from)
{
	to->identifier = from->identifier;
	to->property_type = from->property_type;
	to->client_generated = from->client_generated;
	switch(from->property_type){
		case PT_BYTE: to->value.i8 = from->value.i8; return true;
		case PT_INT16: to->value.i16 = from->value.i16; return true;
		case PT_INT32: to->value.i32 = from->value.i32; return true;
		case PT_VARINT: to->value.varint = from->value.varint; return true;
		case PT_STRING: return copy_string(&to->value.s, &from->value.s);
		case PT_STRING_PAIR:
			return copy_string(&to->value.s, &from->value.s) && copy_string(&to->name, &from->name);
		case PT_BINARY:
			to->value.bin.len = from->value.bin.len;
			if(from->value.bin.len == 0) return true;
			to->value.bin.v = mosquitto_malloc(from->value.bin.len);
			if(to->value.bin.v == NULL) return false;
			memcpy(to->value.bin.v, from->value.bin.v, from->value.bin.len);
			return true;
		default:
			/* A type this layout does not know: no copy, so that the
			 * caller falls back to the public API. */
			to->property_type = PT_BYTE;
			return false;
	}
}

static int by_layout(const mosquitto_property *stored, const char *count, size_t count_len,
		mosquitto_property **out)
{
	static const struct v21_string name = { (char *)DLQ_PROP_DELIVERY_COUNT, sizeof(DLQ_PROP_DELIVERY_COUNT) - 1 };
	struct v21_property *head = NULL, **tail = &head;
	for(const struct v21_property *p = (const struct v21_property *)stored; p; p = p->next){
		struct v21_property *n = mosquitto_calloc(1, sizeof(*n));
		if(n == NULL) goto error;
		*tail = n;
		tail = &n->next;
		if(!copy_node(n, p)) goto error;
	}
	struct v21_property *dc = mosquitto_calloc(1, sizeof(*dc));
	if(dc == NULL) goto error;
	*tail = dc;
	dc->identifier = MQTT_PROP_USER_PROPERTY;
	dc->property_type = PT_STRING_PAIR;
	dc->client_generated = true;
	struct v21_string value = { (char *)count, (uint16_t)count_len };
	if(!copy_string(&dc->name, &name) || !copy_string(&dc->value.s, &value)) goto error;
	*out = (mosquitto_property *)head;
	return MOSQ_ERR_SUCCESS;
error:
	/* Every node is linked before it is filled, and calloc'd: the
	 * broker's free_all frees what was copied and skips what was not. */
	{
		mosquitto_property *all = (mosquitto_property *)head;
		mosquitto_property_free_all(&all);
	}
	return MOSQ_ERR_NOMEM;
}

int send_props_v21__with_count(const struct broker_props_v21 *v, const mosquitto_property *stored,
		const char *count, size_t count_len, mosquitto_property **out)
{
	*out = NULL;
	if(v->layout_ok && by_layout(stored, count, count_len, out) == MOSQ_ERR_SUCCESS) return MOSQ_ERR_SUCCESS;
	mosquitto_property *copy = NULL;
	int rc = v->copy_all(&copy, stored);
	if(rc == MOSQ_ERR_SUCCESS){
		rc = mosquitto_property_add_string_pair(&copy, MQTT_PROP_USER_PROPERTY, DLQ_PROP_DELIVERY_COUNT, count);
	}
	if(rc != MOSQ_ERR_SUCCESS){
		mosquitto_property_free_all(&copy);
		return rc;
	}
	*out = copy;
	return MOSQ_ERR_SUCCESS;
}
