/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Fuzz target: the property paths a publisher and a NACK reach
 * (props__to_headers, props__user_value, props__last_user_value,
 * props__user_copy), with both semantics of the broker's read functions:
 * 2.0's "" and 2.1.2's NULL for an empty string, name or binary value
 * (tests/unit/fake_reader.c).
 *
 * The input is a list of properties, each a kind byte and length-prefixed
 * parts (one byte of length, then the bytes; empty parts included):
 *
 *   'f' <1 byte>            payload format indicator
 *   'c' <part>              content type
 *   'r' <part>              response topic
 *   'd' <part>              correlation data
 *   'u' <name> <value>      user property
 *   'e' <4 bytes>           message expiry interval (a one-hop property)
 *   'q' <name>              a lookup: props__user_value, _last and _copy of name
 *
 * Strings that are not valid UTF-8 are refused by libmosquitto's add
 * functions, as the broker refuses them from a client; they are skipped.
 *
 * Checks: both readers give the same headers, byte for byte; the headers
 * decode in full and build a property list again, which gives the same
 * headers once more; every lookup finds the same value with both readers,
 * and finds one exactly when the list has a user property of that name.
 */
#include <stdlib.h>
#include <string.h>

#include <mosquitto.h>
#include <mqtt_protocol.h>

#include "broker/props.h"
#include "fake_reader.h"
#include "fuzz.h"
#include "util/headers.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

/* One length-prefixed part as a NUL-terminated string in out (256 bytes),
 * or false at the end of the input. */
static bool take_part(const uint8_t *data, size_t size, size_t *pos, char out[256], size_t *len)
{
	if(*pos >= size) return false;
	size_t n = data[(*pos)++];
	if(n > size - *pos) n = size - *pos;
	memcpy(out, data + *pos, n);
	out[n] = '\0';
	*pos += n;
	*len = n;
	return true;
}

struct lookup {
	char name[256];
	bool present;
};

static void headers_of(const struct dlq_prop_reader *r, const mosquitto_property *props, struct dlq_headers *h)
{
	memset(h, 0, sizeof(*h));
	FUZZ_CHECK(props__to_headers(r, props, h) == 0, "props__to_headers failed");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	mosquitto_property *props = NULL;
	struct lookup lookups[8];
	size_t nlookups = 0;
	char a[256], b[256];
	size_t alen, blen;
	size_t pos = 0;

	while(pos < size){
		uint8_t kind = data[pos++];
		switch(kind){
			case 'f':
				if(pos < size) mosquitto_property_add_byte(&props, MQTT_PROP_PAYLOAD_FORMAT_INDICATOR, data[pos++]);
				break;
			case 'c':
			case 'r':
				if(take_part(data, size, &pos, a, &alen) && strlen(a) == alen){
					mosquitto_property_add_string(&props, kind == 'c' ? MQTT_PROP_CONTENT_TYPE : MQTT_PROP_RESPONSE_TOPIC, a);
				}
				break;
			case 'd':
				if(take_part(data, size, &pos, a, &alen)){
					mosquitto_property_add_binary(&props, MQTT_PROP_CORRELATION_DATA, a, (uint16_t)alen);
				}
				break;
			case 'u':
				if(take_part(data, size, &pos, a, &alen) && take_part(data, size, &pos, b, &blen)
						&& strlen(a) == alen && strlen(b) == blen){
					mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, a, b);
				}
				break;
			case 'e':
				if(size - pos >= 4){
					uint32_t v;
					memcpy(&v, data + pos, 4);
					pos += 4;
					mosquitto_property_add_int32(&props, MQTT_PROP_MESSAGE_EXPIRY_INTERVAL, v);
				}
				break;
			case 'q':
				if(nlookups < 8 && take_part(data, size, &pos, a, &alen) && strlen(a) == alen){
					memcpy(lookups[nlookups].name, a, alen + 1);
					lookups[nlookups].present = false;
					nlookups++;
				}
				break;
			default:
				break;
		}
	}

	/* Both semantics, the same headers. */
	struct dlq_headers h20, h21, again;
	headers_of(&fake_reader_v20, props, &h20);
	headers_of(&fake_reader_v21, props, &h21);
	FUZZ_CHECK(h20.len == h21.len && (h20.len == 0 || !memcmp(h20.data, h21.data, h20.len)),
			"the readers of 2.0 and 2.1 give different headers (%zu and %zu bytes)", h20.len, h21.len);

	/* The headers decode in full, and come back the same. */
	struct dlq_header e;
	size_t hp = 0;
	while(headers__next(h20.data, h20.len, &hp, &e)){
		if(e.kind == DLQ_HDR_USER_PROPERTY){
			for(size_t i = 0; i < nlookups; i++){
				if(e.a_len == strlen(lookups[i].name) && !memcmp(e.a, lookups[i].name, e.a_len)){
					lookups[i].present = true;
				}
			}
		}
	}
	FUZZ_CHECK(hp == h20.len, "headers decode to %zu of %zu bytes", hp, h20.len);
	mosquitto_property *back = NULL;
	FUZZ_CHECK(props__from_headers(h20.data, h20.len, &back) == 0, "headers built no property list");
	headers_of(&fake_reader_v21, back, &again);
	FUZZ_CHECK(again.len == h20.len && (h20.len == 0 || !memcmp(again.data, h20.data, h20.len)),
			"headers changed through a property list");

	/* Lookups agree; reserved names are not in the headers but are in the
	 * list, so presence is checked only for names that are not reserved. */
	for(size_t i = 0; i < nlookups; i++){
		char v20[64], v21[64], l20[64], l21[64];
		const char *name = lookups[i].name;
		const char *f20 = props__user_value(&fake_reader_v20, props, name, v20, sizeof(v20));
		const char *f21 = props__user_value(&fake_reader_v21, props, name, v21, sizeof(v21));
		const char *g20 = props__last_user_value(&fake_reader_v20, props, name, l20, sizeof(l20));
		const char *g21 = props__last_user_value(&fake_reader_v21, props, name, l21, sizeof(l21));
		FUZZ_CHECK((f20 == NULL) == (f21 == NULL) && (!f20 || !strcmp(f20, f21)), "user value of \"%s\" differs", name);
		FUZZ_CHECK((g20 == NULL) == (g21 == NULL) && (!g20 || !strcmp(g20, g21)), "last user value of \"%s\" differs", name);
		FUZZ_CHECK((f20 == NULL) == (g20 == NULL), "first and last of \"%s\" disagree on presence", name);
		/* Read whole (a compact NACK's properties): the same value, of
		 * which the buffer holds the start. */
		char *c20 = NULL, *c21 = NULL;
		bool w20 = props__user_copy(&fake_reader_v20, props, name, &c20);
		bool w21 = props__user_copy(&fake_reader_v21, props, name, &c21);
		const char *s20 = c20 ? c20 : "", *s21 = c21 ? c21 : "";
		FUZZ_CHECK(w20 == (f20 != NULL) && w21 == w20, "whole user value of \"%s\" found %d/%d, cut %d", name, w20,
				w21, f20 != NULL);
		FUZZ_CHECK(!w20 || (!strcmp(s20, s21) && !strncmp(s20, f20, sizeof(v20) - 1) && strlen(s20) >= strlen(f20)),
				"whole user value of \"%s\" differs from its cut or between lines", name);
		fake_reader_v20.free_copy(c20);
		fake_reader_v21.free_copy(c21);
		if(!headers__is_reserved(name, strlen(name))){
			FUZZ_CHECK((f20 != NULL) == lookups[i].present, "user value of \"%s\": found %d, in headers %d", name,
					f20 != NULL, lookups[i].present);
		}
	}

	headers__free(&h20);
	headers__free(&h21);
	headers__free(&again);
	mosquitto_property_free_all(&back);
	mosquitto_property_free_all(&props);
	return 0;
}
