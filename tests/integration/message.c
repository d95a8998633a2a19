/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Received messages: a message and its MQTT v5 properties decoded into a
 * struct it_msg the test can read without libmosquitto's property API, and
 * the small predicates tests apply to them (dlq-id shape, timestamps).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness_int.h"

void msg__users_free(struct it_user_prop *users, size_t n)
{
	for(size_t i = 0; i < n; i++){
		free(users[i].name);
		free(users[i].value);
	}
	free(users);
}

void msg__free(struct it_msg *m)
{
	if(!m){
		return;
	}
	free(m->topic);
	free(m->payload);
	msg__users_free(m->users, m->nusers);
	free(m->content_type);
	free(m->response_topic);
	free(m->correlation);
	free(m);
}

struct it_msg *msg__decode(const struct mosquitto_message *mm, const mosquitto_property *props)
{
	struct it_msg *m = calloc(1, sizeof(*m));
	if(!m){
		abort();
	}
	m->topic = harness__xstrdup(mm->topic);
	m->payloadlen = mm->payloadlen;
	m->payload = harness__xmalloc((size_t)mm->payloadlen + 1);
	if(mm->payloadlen > 0){
		memcpy(m->payload, mm->payload, (size_t)mm->payloadlen);
	}
	m->payload[mm->payloadlen] = '\0';
	m->qos = mm->qos;
	m->retain = mm->retain;
	m->payload_format = -1;
	m->at_ms = it_now_ms();
	/* The properties are decoded here rather than kept with
	 * mosquitto_property_copy_all: libmosquitto 2.0.11's copy_all crashes on
	 * a user property with an empty value (it strdup()s a NULL). An empty
	 * string is kept as "" whichever library read it: 2.0's readers give
	 * "", 2.1's NULL. */
	size_t nuser = 0;
	for(const mosquitto_property *p = props; p; p = mosquitto_property_next(p)){
		if(mosquitto_property_identifier(p) == MQTT_PROP_USER_PROPERTY){
			nuser++;
		}
	}
	m->users = calloc(nuser ? nuser : 1, sizeof(*m->users));
	if(!m->users){
		abort();
	}
	for(const mosquitto_property *p = props; p; p = mosquitto_property_next(p)){
		int id = mosquitto_property_identifier(p);
		char *name = NULL, *value = NULL;
		uint8_t byte;
		uint16_t len;
		void *bin = NULL;
		switch(id){
		case MQTT_PROP_USER_PROPERTY:
			mosquitto_property_read_string_pair(p, id, &name, &value, false);
			m->users[m->nusers].name = name ? name : harness__xstrdup("");
			m->users[m->nusers].value = value ? value : harness__xstrdup("");
			m->nusers++;
			break;
		case MQTT_PROP_CONTENT_TYPE:
			free(m->content_type);
			m->content_type = NULL;
			if(mosquitto_property_read_string(p, id, &m->content_type, false) && !m->content_type){
				m->content_type = harness__xstrdup("");
			}
			break;
		case MQTT_PROP_RESPONSE_TOPIC:
			free(m->response_topic);
			m->response_topic = NULL;
			if(mosquitto_property_read_string(p, id, &m->response_topic, false) && !m->response_topic){
				m->response_topic = harness__xstrdup("");
			}
			break;
		case MQTT_PROP_CORRELATION_DATA:
			free(m->correlation);
			m->correlation = NULL;
			if(mosquitto_property_read_binary(p, id, &bin, &len, false)){
				m->correlation = bin ? bin : harness__xmalloc(1);
				m->correlation_len = len;
			}
			break;
		case MQTT_PROP_PAYLOAD_FORMAT_INDICATOR:
			if(mosquitto_property_read_byte(p, id, &byte, false)){
				m->payload_format = byte;
			}
			break;
		case MQTT_PROP_SUBSCRIPTION_IDENTIFIER:
			if(m->nsub_ids < IT_MSG_SUB_IDS_MAX){
				uint32_t sid = 0;
				mosquitto_property_read_varint(p, id, &sid, false);
				m->sub_ids[m->nsub_ids++] = sid;
			}
			break;
		default:
			break;
		}
	}
	return m;
}

static void print_escaped(FILE *f, const char *s, size_t len, size_t max)
{
	for(size_t i = 0; i < len && i < max; i++){
		unsigned char ch = (unsigned char)s[i];
		if(ch >= 0x20 && ch < 0x7f && ch != '\\'){
			fputc(ch, f);
		}else{
			fprintf(f, "\\x%02x", ch);
		}
	}
	if(len > max){
		fputs("...", f);
	}
}

void msg__print(FILE *f, size_t index, const struct it_msg *m)
{
	fprintf(f, "  [%zu] %s qos=%d%s payload=\"", index, m->topic, m->qos, m->retain ? " retained" : "");
	print_escaped(f, m->payload, (size_t)m->payloadlen, 200);
	fputc('"', f);
	for(size_t k = 0; k < m->nusers; k++){
		fprintf(f, " %s=%s", m->users[k].name, m->users[k].value);
	}
	if(m->content_type){
		fprintf(f, " [content-type %s]", m->content_type);
	}
	if(m->response_topic){
		fprintf(f, " [response-topic %s]", m->response_topic);
	}
	if(m->correlation){
		fputs(" [correlation \"", f);
		print_escaped(f, m->correlation, m->correlation_len, 64);
		fputs("\"]", f);
	}
	if(m->payload_format >= 0){
		fprintf(f, " [payload-format %d]", m->payload_format);
	}
	fputc('\n', f);
}

const char *msg_user(const struct it_msg *m, const char *name)
{
	for(size_t i = 0; i < m->nusers; i++){
		if(!strcmp(m->users[i].name, name)){
			return m->users[i].value;
		}
	}
	return NULL;
}

const char *props_user(const mosquitto_property *props, const char *name, char *buf, size_t size)
{
	for(const mosquitto_property *p = props; p; p = mosquitto_property_next(p)){
		char *k = NULL, *v = NULL;
		if(mosquitto_property_identifier(p) != MQTT_PROP_USER_PROPERTY
				|| !mosquitto_property_read_string_pair(p, MQTT_PROP_USER_PROPERTY, &k, &v, false)){
			continue;
		}
		/* 2.1's libmosquitto gives NULL for an empty name or value. */
		bool match = !strcmp(k ? k : "", name);
		if(match) snprintf(buf, size, "%s", v ? v : "");
		free(k);
		free(v);
		if(match) return buf;
	}
	return NULL;
}

size_t msg_user_count(const struct it_msg *m, const char *name)
{
	size_t n = 0;
	for(size_t i = 0; i < m->nusers; i++){
		if(!strcmp(m->users[i].name, name)){
			n++;
		}
	}
	return n;
}

cJSON *msg_json(const struct it_msg *m)
{
	return cJSON_ParseWithLength(m->payload, (size_t)m->payloadlen);
}

const char *it_host_name(void)
{
	static char host[256];
	ck_assert_int_eq(gethostname(host, sizeof(host)), 0);
	host[sizeof(host) - 1] = '\0';
	return host;
}

bool it_is_dlq_id(const char *s)
{
	if(!s || strlen(s) != 16){
		return false;
	}
	for(const char *p = s; *p; p++){
		if(!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')
				|| *p == '-' || *p == '_')){
			return false;
		}
	}
	return true;
}

bool it_is_recent_rfc3339(const char *s, int slack_s)
{
	if(!s){
		return false;
	}
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	int consumed = 0;
	if(sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
				&tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6 || consumed != 19){
		return false;
	}
	const char *p = s + consumed;
	if(*p == '.'){
		p++;
		if(*p < '0' || *p > '9'){
			return false;
		}
		while(*p >= '0' && *p <= '9'){
			p++;
		}
	}
	if(strcmp(p, "Z")){
		return false;
	}
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	time_t t = timegm(&tm);
	time_t now = time(NULL);
	return t >= now - slack_s && t <= now + slack_s;
}

int64_t it_rfc3339_ms(const char *s)
{
	if(!s || strlen(s) != 24){
		return -1;
	}
	static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ";
	for(size_t i = 0; i < 24; i++){
		if(shape[i] == 'd' ? (s[i] < '0' || s[i] > '9') : s[i] != shape[i]){
			return -1;
		}
	}
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	int ms = 0;
	if(sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d.%3d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
				&tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7){
		return -1;
	}
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (int64_t)timegm(&tm) * 1000 + ms;
}
