/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Dead letters as dlqctl sees them (see dlqctl.h): a received message
 * copied with the plugin's user properties picked out, the property list a
 * redriven message (or a letter put back) carries, and the text shown for
 * its age and payload, and for any text a publisher wrote (letter__printable,
 * also used for the plugin's replies about its dead-letter store). A message that is not a dead letter of the plugin
 * decodes all the same, with the missing properties NULL; nothing in it is
 * trusted to be well formed.
 *
 * An empty string property is "" from 2.0's libmosquitto but NULL from
 * 2.1's (its mosquitto_property_read_string and _read_string_pair,
 * libcommon/property_common.c, allocate only a non-empty string), and a
 * client may send one in any property: every string read here goes
 * through or_empty before it is used.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mqtt_protocol.h>

#include "dlqctl.h"
#include "mosquitto_dlq.h"

/* A string a property reader gave: NULL (2.1, an empty string) is "". */
static const char *or_empty(const char *s)
{
	return s ? s : "";
}

/* The plugin's user properties, which a redriven message must not carry
 * (the plugin stamps it afresh), and dlqctl's own. */
static bool reserved_name(const char *name)
{
	static const char *const names[] = {
		DLQ_PROP_ID, DLQ_PROP_RETRY_COUNT, DLQ_PROP_ORIGIN_TOPIC, DLQ_PROP_ORIGIN_ID,
		DLQ_PROP_FIRST_NACK_TIME, DLQCTL_PROP_KEPT, DLQCTL_PROP_REDRIVEN,
	};
	for(size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++){
		if(!strcmp(name, names[i])) return true;
	}
	return !strncmp(name, "dead-letter-", strlen("dead-letter-"));
}

/* The first value of each user property we look at; later duplicates are
 * ignored, as the plugin writes each once. */
static int pick(struct letter *l, const char *name, const char *value)
{
	struct {
		const char *name;
		char **slot;
	} map[] = {
		{ DLQ_PROP_ORIGIN_TOPIC, &l->origin_topic },
		{ DLQ_PROP_ORIGIN_ID, &l->origin_id },
		{ DLQ_PROP_RETRY_COUNT, &l->retry_count },
		{ DLQ_PROP_DEAD_LETTER_REASON, &l->reason },
		{ DLQ_PROP_DEAD_LETTER_CLIENT, &l->client },
		{ DLQ_PROP_DEAD_LETTER_FILTER, &l->filter },
		{ DLQ_PROP_DEAD_LETTER_TIME, &l->time },
		{ DLQ_PROP_DEAD_LETTER_BROKER, &l->broker },
		{ DLQCTL_PROP_KEPT, &l->kept },
		{ DLQCTL_PROP_REDRIVEN, &l->redriven },
	};
	for(size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++){
		if(!strcmp(name, map[i].name)){
			if(*map[i].slot) return 0;
			*map[i].slot = strdup(value);
			return *map[i].slot ? 0 : ENOMEM;
		}
	}
	return 0;
}

int letter__decode(struct letter *l, const struct mosquitto_message *m, const mosquitto_property *props)
{
	memset(l, 0, sizeof(*l));
	l->topic = strdup(m->topic ? m->topic : "");
	l->payloadlen = m->payloadlen > 0 ? m->payloadlen : 0;
	l->payload = malloc((size_t)l->payloadlen + 1);
	l->qos = m->qos;
	if(l->topic == NULL || l->payload == NULL) goto error;
	if(l->payloadlen) memcpy(l->payload, m->payload, (size_t)l->payloadlen);
	((char *)l->payload)[l->payloadlen] = '\0';
	if(props && mosquitto_property_copy_all(&l->props, props) != MOSQ_ERR_SUCCESS) goto error;

	for(const mosquitto_property *p = props; p; p = mosquitto_property_next(p)){
		if(mosquitto_property_identifier(p) != MQTT_PROP_USER_PROPERTY) continue;
		char *name = NULL, *value = NULL;
		/* Reads this property itself (skip_first false starts at p). */
		if(mosquitto_property_read_string_pair(p, MQTT_PROP_USER_PROPERTY, &name, &value, false) == NULL){
			goto error;
		}
		int rc = pick(l, or_empty(name), or_empty(value));
		free(name);
		free(value);
		if(rc) goto error;
	}
	return 0;
error:
	letter__free(l);
	return ENOMEM;
}

void letter__free(struct letter *l)
{
	free(l->topic);
	free(l->payload);
	mosquitto_property_free_all(&l->props);
	free(l->origin_topic);
	free(l->origin_id);
	free(l->retry_count);
	free(l->reason);
	free(l->client);
	free(l->filter);
	free(l->time);
	free(l->broker);
	free(l->kept);
	free(l->redriven);
	memset(l, 0, sizeof(*l));
}

/* Appends property p (read from a received list) to *out, unless it is
 * one that belongs to a single hop or a name we drop. */
static int copy_prop(const mosquitto_property *p, mosquitto_property **out)
{
	int id = mosquitto_property_identifier(p);
	int rc = MOSQ_ERR_SUCCESS;
	switch(id){
		case MQTT_PROP_PAYLOAD_FORMAT_INDICATOR: {
			uint8_t v;
			if(mosquitto_property_read_byte(p, id, &v, false)) rc = mosquitto_property_add_byte(out, id, v);
			break;
		}
		case MQTT_PROP_MESSAGE_EXPIRY_INTERVAL: {
			uint32_t v;
			if(mosquitto_property_read_int32(p, id, &v, false)) rc = mosquitto_property_add_int32(out, id, v);
			break;
		}
		case MQTT_PROP_CONTENT_TYPE:
		case MQTT_PROP_RESPONSE_TOPIC: {
			char *v = NULL;
			if(mosquitto_property_read_string(p, id, &v, false)) rc = mosquitto_property_add_string(out, id, or_empty(v));
			free(v);
			break;
		}
		case MQTT_PROP_CORRELATION_DATA: {
			void *v = NULL;
			uint16_t len = 0;
			if(mosquitto_property_read_binary(p, id, &v, &len, false)) rc = mosquitto_property_add_binary(out, id, v, len);
			free(v);
			break;
		}
		case MQTT_PROP_USER_PROPERTY: {
			char *name = NULL, *value = NULL;
			if(mosquitto_property_read_string_pair(p, id, &name, &value, false) && !reserved_name(or_empty(name))){
				rc = mosquitto_property_add_string_pair(out, id, or_empty(name), or_empty(value));
			}
			free(name);
			free(value);
			break;
		}
		default:
			/* Subscription identifiers and topic aliases belong to the
			 * hop from the broker to us. */
			break;
	}
	return rc;
}

/* Appends every property of the letter, as received. */
static int copy_all_kept(const struct letter *l, const char *kept_run, mosquitto_property **out)
{
	for(const mosquitto_property *p = l->props; p; p = mosquitto_property_next(p)){
		int id = mosquitto_property_identifier(p);
		if(id == MQTT_PROP_USER_PROPERTY){
			char *name = NULL, *value = NULL;
			int rc = MOSQ_ERR_SUCCESS;
			if(mosquitto_property_read_string_pair(p, id, &name, &value, false) && strcmp(or_empty(name), DLQCTL_PROP_KEPT)){
				rc = mosquitto_property_add_string_pair(out, id, or_empty(name), or_empty(value));
			}
			free(name);
			free(value);
			if(rc) return rc;
		}else{
			int rc = copy_prop(p, out);
			if(rc) return rc;
		}
	}
	return mosquitto_property_add_string_pair(out, MQTT_PROP_USER_PROPERTY, DLQCTL_PROP_KEPT, kept_run);
}

int letter__republish_props(const struct letter *l, bool put_back, const char *run, mosquitto_property **out)
{
	int rc = MOSQ_ERR_SUCCESS;
	*out = NULL;
	if(put_back){
		rc = copy_all_kept(l, run, out);
	}else{
		for(const mosquitto_property *p = l->props; p && rc == MOSQ_ERR_SUCCESS; p = mosquitto_property_next(p)){
			rc = copy_prop(p, out);
		}
		if(rc == MOSQ_ERR_SUCCESS){
			rc = mosquitto_property_add_string_pair(out, MQTT_PROP_USER_PROPERTY, DLQCTL_PROP_REDRIVEN, run);
		}
	}
	if(rc) mosquitto_property_free_all(out);
	return rc;
}

static bool digits(const char *s, int n, int *out)
{
	int v = 0;
	for(int i = 0; i < n; i++){
		if(s[i] < '0' || s[i] > '9') return false;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return true;
}

int64_t letter__parse_time(const char *s)
{
	int y, mo, d, h, mi, sec, ms = 0;
	if(s == NULL || strlen(s) < 20) return -1;
	if(!digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' || !digits(s + 8, 2, &d)
			|| s[10] != 'T' || !digits(s + 11, 2, &h) || s[13] != ':' || !digits(s + 14, 2, &mi)
			|| s[16] != ':' || !digits(s + 17, 2, &sec)){
		return -1;
	}
	const char *p = s + 19;
	if(*p == '.'){
		p++;
		int n = 0;
		int frac = 0;
		while(*p >= '0' && *p <= '9'){
			if(n < 3){
				frac = frac * 10 + (*p - '0');
			}
			n++;
			p++;
		}
		if(n == 0) return -1;
		for(int k = n; k < 3; k++) frac *= 10;
		ms = frac;
	}
	if(strcmp(p, "Z") || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return -1;
	struct tm tm = {
		.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d,
		.tm_hour = h, .tm_min = mi, .tm_sec = sec,
	};
	time_t t = timegm(&tm);
	if(t == (time_t)-1) return -1;
	return (int64_t)t * 1000 + ms;
}

void letter__age(const struct letter *l, int64_t now_ms, char *out, size_t len)
{
	int64_t t = letter__parse_time(l->time);
	if(t < 0){
		snprintf(out, len, "-");
		return;
	}
	int64_t age = now_ms > t ? now_ms - t : 0;
	int64_t s = age / 1000;
	if(age < 1000){
		snprintf(out, len, "%lldms", (long long)age);
	}else if(s < 60){
		snprintf(out, len, "%llds", (long long)s);
	}else if(s < 3600){
		snprintf(out, len, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
	}else if(s < 86400){
		snprintf(out, len, "%lldh%02lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
	}else{
		snprintf(out, len, "%lldd%02lldh", (long long)(s / 86400), (long long)(s % 86400 / 3600));
	}
}

void letter__preview(const void *data, size_t len, size_t max, char *out, size_t outlen)
{
	const unsigned char *s = data;
	size_t o = 0;
	if(outlen == 0) return;
	if(max + 1 > outlen) max = outlen - 1;
	bool cut = len > max;
	size_t n = cut ? (max > 3 ? max - 3 : 0) : len;
	for(size_t i = 0; i < n; i++){
		out[o++] = (s[i] >= 0x20 && s[i] < 0x7f) ? (char)s[i] : '.';
	}
	if(cut){
		for(int k = 0; k < 3 && o < max; k++){
			out[o++] = '.';
		}
	}
	out[o] = '\0';
}

/* The length of the UTF-8 sequence at s (n bytes left), or 0 when it is
 * not one (overlong, a surrogate, past U+10FFFF, cut short). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xBF;
	size_t len;
	if(c < 0x80) return 1;
	if(c >= 0xC2 && c <= 0xDF){
		len = 2;
	}else if(c >= 0xE0 && c <= 0xEF){
		len = 3;
		if(c == 0xE0) lo = 0xA0;
		if(c == 0xED) hi = 0x9F;
	}else if(c >= 0xF0 && c <= 0xF4){
		len = 4;
		if(c == 0xF0) lo = 0x90;
		if(c == 0xF4) hi = 0x8F;
	}else{
		return 0;
	}
	if(n < len || s[1] < lo || s[1] > hi) return 0;
	for(size_t k = 2; k < len; k++){
		if((s[k] & 0xC0) != 0x80) return 0;
	}
	return len;
}

char *letter__printable(const char *s, bool lines)
{
	if(s == NULL) s = "-";
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), o = 0;
	char *out = malloc(n + 1);
	if(out == NULL) return NULL;
	for(size_t i = 0; i < n; ){
		size_t len = utf8_len(p + i, n - i);
		if(len == 0){
			out[o++] = '.';
			i++;
			continue;
		}
		if(len == 1){
			bool ok = (p[i] >= 0x20 && p[i] != 0x7f) || (lines && (p[i] == '\n' || p[i] == '\t'));
			out[o++] = ok ? (char)p[i] : '.';
		}else if(len == 2 && p[i] == 0xC2 && p[i + 1] < 0xA0){
			out[o++] = '.';
		}else{
			memcpy(out + o, p + i, len);
			o += len;
		}
		i += len;
	}
	out[o] = '\0';
	return out;
}
