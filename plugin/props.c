/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Broker property lists to and from encoded header lists (see props.h).
 * The mosquitto_property_read_* functions return copies; they are freed
 * through the port, with the allocator that made them.
 */
#include <errno.h>
#include <string.h>

#include <mosquitto.h>
#include <mqtt_protocol.h>

#include "headers.h"
#include "port.h"
#include "props.h"

static int add_one(const mosquitto_property *p, struct dlq_headers *h)
{
	int id = mosquitto_property_identifier(p);
	int rc = 0;
	char *s = NULL;
	char *name = NULL;
	void *bin = NULL;
	uint16_t len = 0;
	uint8_t byte;

	switch(id){
		case MQTT_PROP_PAYLOAD_FORMAT_INDICATOR:
			if(mosquitto_property_read_byte(p, id, &byte, false)){
				rc = headers__add(h, DLQ_HDR_PAYLOAD_FORMAT, &byte, 1, NULL, 0);
			}
			break;
		case MQTT_PROP_CONTENT_TYPE:
		case MQTT_PROP_RESPONSE_TOPIC:
			if(mosquitto_property_read_string(p, id, &s, false)){
				rc = headers__add(h, (uint8_t)id, s, strlen(s), NULL, 0);
			}
			break;
		case MQTT_PROP_CORRELATION_DATA:
			if(mosquitto_property_read_binary(p, id, &bin, &len, false)){
				rc = headers__add(h, DLQ_HDR_CORRELATION_DATA, bin, len, NULL, 0);
			}
			break;
		case MQTT_PROP_USER_PROPERTY:
			if(mosquitto_property_read_string_pair(p, id, &name, &s, false)){
				if(!headers__is_reserved(name, strlen(name))){
					rc = headers__add(h, DLQ_HDR_USER_PROPERTY, name, strlen(name), s, strlen(s));
				}
			}
			break;
		default:
			/* Message expiry, topic alias, subscription identifiers:
			 * they belong to one hop, not to the message. */
			break;
	}
	port__free(s);
	port__free(name);
	port__free(bin);
	return rc;
}

int props__to_headers(const mosquitto_property *props, struct dlq_headers *h)
{
	for(const mosquitto_property *p = props; p; p = mosquitto_property_next(p)){
		int rc = add_one(p, h);
		if(rc) return rc;
	}
	return 0;
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

const char *props__user_value(const mosquitto_property *props, const char *name, char *buf, size_t bufsize)
{
	char *n = NULL;
	char *v = NULL;
	const char *found = NULL;

	for(const mosquitto_property *p = props; p; p = mosquitto_property_next(p)){
		if(mosquitto_property_identifier(p) != MQTT_PROP_USER_PROPERTY) continue;
		if(!mosquitto_property_read_string_pair(p, MQTT_PROP_USER_PROPERTY, &n, &v, false)) continue;
		bool match = !strcmp(n, name);
		if(match && bufsize){
			size_t l = strlen(v);
			if(l >= bufsize) l = bufsize - 1;
			memcpy(buf, v, l);
			buf[l] = '\0';
			found = buf;
		}
		port__free(n);
		port__free(v);
		n = v = NULL;
		if(match) break;
	}
	return found;
}
