/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The checks of restored state entries (see state_check.h). The rules are
 * those Mosquitto applies to the properties of a PUBLISH it reads
 * (mosquitto_validate_utf8, mosquitto_property_check_all), so that what a
 * client could have sent is restored and nothing else is.
 */
#include <stdio.h>
#include <string.h>

#include "store/state_check.h"
#include "util/errtext.h"
#include "util/headers.h"

const char *state_check__text(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;
	while(i < len){
		enum errtext_char kind;
		size_t n = errtext__utf8_char(u + i, len - i, &kind);
		if(n == 0) return u[i] == 0 ? "U+0000" : "ill-formed UTF-8";
		if(kind == ERRTEXT_CHAR_CONTROL) return "a control character";
		if(kind == ERRTEXT_CHAR_NONCHAR) return "a non-character";
		i += n;
	}
	return NULL;
}

const char *state_check__text_or_null(const char *s)
{
	return s ? state_check__text(s, strlen(s)) : NULL;
}

static bool refuse(char *why, size_t whylen, const char *what, const char *holding)
{
	snprintf(why, whylen, "%s%s%s", what, holding ? " holding " : "", holding ? holding : "");
	return false;
}

/* A header part is length-prefixed and may hold a NUL before its end; the
 * broker's API would take the string only up to it (strlen), so that
 * subscribers would get another value: U+0000 is refused like any other
 * character MQTT forbids. */
bool state_check__headers(const uint8_t *data, uint32_t len, char *why, size_t whylen)
{
	size_t pos = 0;
	struct dlq_header e;
	const char *bad;
	unsigned seen = 0; /* one bit per kind that MQTT allows once */
	while(pos < len){
		if(!headers__next(data, len, &pos, &e)) return refuse(why, whylen, "a header list cut inside an entry", NULL);
		switch(e.kind){
			case DLQ_HDR_PAYLOAD_FORMAT:
				if(e.a_len != 1 || (uint8_t)e.a[0] > 1){
					return refuse(why, whylen, "a payload format indicator other than 0 or 1", NULL);
				}
				break;
			case DLQ_HDR_CONTENT_TYPE:
				if((bad = state_check__text(e.a, e.a_len))) return refuse(why, whylen, "a content type", bad);
				break;
			case DLQ_HDR_RESPONSE_TOPIC:
				if((bad = state_check__text(e.a, e.a_len))) return refuse(why, whylen, "a response topic", bad);
				if(memchr(e.a, '+', e.a_len) || memchr(e.a, '#', e.a_len)){
					return refuse(why, whylen, "a response topic", "a wildcard");
				}
				break;
			case DLQ_HDR_CORRELATION_DATA:
				break; /* binary: any bytes */
			case DLQ_HDR_USER_PROPERTY:
				if((bad = state_check__text(e.a, e.a_len))) return refuse(why, whylen, "a user property name", bad);
				if((bad = state_check__text(e.b, e.b_len))) return refuse(why, whylen, "a user property value", bad);
				if(headers__is_reserved(e.a, e.a_len)){
					return refuse(why, whylen, "a user property with one of the plugin's own names", NULL);
				}
				break;
			default:
				return refuse(why, whylen, "a header of a kind the plugin does not carry", NULL);
		}
		if(e.kind != DLQ_HDR_USER_PROPERTY){
			if(seen & (1u << e.kind)) return refuse(why, whylen, "a header that MQTT allows once, twice", NULL);
			seen |= 1u << e.kind;
		}
	}
	return true;
}
