/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The dead-letter store suite's client (see letters.h): one libmosquitto
 * client that is publisher, worker and operator at once. As a worker it
 * NACKs each original it receives on $CONTROL/dlq/v1/nack without a
 * response topic, as a worker would; with max_attempts=1 every NACK makes
 * a dead letter, which comes back to it on the dead-letter topic, so a
 * NACK the plugin refused shows as a dead letter that never comes (the
 * wait times out, and says so). As an operator it sends the store's
 * commands with a response topic of its own and times each reply.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mqtt_protocol.h>

#include "letters.h"
#include "load.h"
#include "mosquitto_dlq.h"

#define LETTERS_WINDOW 50
#define LETTERS_WAIT_MS 30000
#define LETTERS_CORRELATION "dlq-bench-letters"

/* Name and value bytes of a property list (see letters.h). */
static void measure_props(struct letters_client *c, const mosquitto_property *props)
{
	c->dl_props = 0;
	c->dl_nprops = 0;
	for(const mosquitto_property *p = props; p; p = mosquitto_property_next(p)){
		int id = mosquitto_property_identifier(p);
		char *name = NULL, *value = NULL;
		void *bin = NULL;
		uint16_t len = 0;
		c->dl_nprops++;
		if(id == MQTT_PROP_USER_PROPERTY && mosquitto_property_read_string_pair(p, id, &name, &value, false)){
			c->dl_props += strlen(name) + strlen(value);
			if(!strcmp(name, DLQ_PROP_DEAD_LETTER_ID)) c->dead_with_id++;
		}else if((id == MQTT_PROP_CONTENT_TYPE || id == MQTT_PROP_RESPONSE_TOPIC)
				&& mosquitto_property_read_string(p, id, &value, false)){
			c->dl_props += strlen(value);
		}else if(id == MQTT_PROP_CORRELATION_DATA && mosquitto_property_read_binary(p, id, &bin, &len, false)){
			c->dl_props += len;
		}else{
			c->dl_props += 1;
		}
		free(name);
		free(value);
		free(bin);
	}
}

static bool has_letter_id(const mosquitto_property *props)
{
	for(const mosquitto_property *p = props; p; p = mosquitto_property_next(p)){
		char *name = NULL, *value = NULL;
		if(mosquitto_property_identifier(p) != MQTT_PROP_USER_PROPERTY
				|| !mosquitto_property_read_string_pair(p, MQTT_PROP_USER_PROPERTY, &name, &value, false)){
			continue;
		}
		bool is = !strcmp(name, DLQ_PROP_DEAD_LETTER_ID);
		free(name);
		free(value);
		if(is) return true;
	}
	return false;
}

static void on_message(struct mosquitto *m, void *ud, const struct mosquitto_message *msg,
		const mosquitto_property *props)
{
	struct letters_client *c = ud;
	char id[DLQ_ID_LEN + 1];
	bool is_copy;

	if(!strcmp(msg->topic, c->reply_topic)){
		free(c->reply);
		c->reply = malloc((size_t)msg->payloadlen + 1);
		if(c->reply == NULL){
			c->link.failed = true;
			return;
		}
		memcpy(c->reply, msg->payload, (size_t)msg->payloadlen);
		c->reply[msg->payloadlen] = '\0';
		c->reply_len = (size_t)msg->payloadlen;
		c->got_reply = true;
		return;
	}
	if(!strcmp(msg->topic, LETTERS_DEAD_LETTER)){
		if(c->dead++ == 0){
			c->dl_topic = strlen(msg->topic);
			c->dl_payload = (size_t)msg->payloadlen;
			measure_props(c, props);
		}else if(has_letter_id(props)){
			c->dead_with_id++;
		}
		return;
	}
	if(!client__read_stamp(props, id, &is_copy) || is_copy){
		fprintf(stderr, "dlq_bench: letters: a delivery on %s %s\n", msg->topic,
				is_copy ? "that is a retry copy (max_attempts=1 makes none)" : "without a dlq-id");
		c->link.failed = true;
		return;
	}
	c->deliveries++;
	if(c->mode == LMODE_NACK && mosquitto_publish_v5(m, NULL, DLQ_NACK_TOPIC, DLQ_ID_LEN, id, 1, false, NULL)){
		c->link.failed = true;
	}
}

/* What pump waits for. */
enum lwait { LW_CONNECTED, LW_SUBSCRIBED, LW_DONE, LW_REPLY };

static bool reached(const struct letters_client *c, enum lwait w, uint64_t want)
{
	switch(w){
		case LW_CONNECTED: return c->link.connected;
		case LW_SUBSCRIBED: return (uint64_t)c->link.subscribed >= want;
		case LW_DONE: return (c->mode == LMODE_NACK ? c->dead : c->deliveries) >= want;
		case LW_REPLY: return c->got_reply;
	}
	return false;
}

/* Runs the client's loop until w reaches want, for at most LETTERS_WAIT_MS.
 * Returns 0, or -1 on a failure, a timeout or an interruption. */
static int pump(struct letters_client *c, enum lwait w, uint64_t want, const char *what)
{
	uint64_t deadline = bench__now_ns() + LETTERS_WAIT_MS * 1000000ull;
	while(!reached(c, w, want)){
		if(c->link.failed || bench__interrupted()) return -1;
		if(bench__now_ns() > deadline){
			fprintf(stderr, "dlq_bench: letters: timed out waiting for %s (%llu deliveries, %llu dead letters)\n", what,
					(unsigned long long)c->deliveries, (unsigned long long)c->dead);
			return -1;
		}
		int rc = mosquitto_loop(c->m, 10, 1);
		if(rc){
			fprintf(stderr, "dlq_bench: letters: %s\n", mosquitto_strerror(rc));
			return -1;
		}
	}
	return c->link.failed ? -1 : 0;
}

int letters_client__open(struct letters_client *c, const struct broker *b, const char *label)
{
	char id[64];
	memset(c, 0, sizeof(*c));
	c->link.name = "letters client";
	snprintf(id, sizeof(id), "%s-%d", label, (int)getpid());
	snprintf(c->reply_topic, sizeof(c->reply_topic), "bench/letters/reply/%d", (int)getpid());
	c->m = link__connect(c, id, b, "letters", on_message);
	if(c->m == NULL) return -1;
	if(pump(c, LW_CONNECTED, 1, "the connection")) return -1;
	const char *topics[] = { "jobs/#", LETTERS_DEAD_LETTER, c->reply_topic };
	for(int i = 0; i < 3; i++){
		if(mosquitto_subscribe_v5(c->m, NULL, topics[i], 1, 0, NULL)
				|| pump(c, LW_SUBSCRIBED, (uint64_t)i + 1, "a subscription")){
			return -1;
		}
	}
	return 0;
}

void letters_client__close(struct letters_client *c)
{
	if(c->m){
		if(c->link.connected){
			mosquitto_disconnect_v5(c->m, 0, NULL);
			/* The DISCONNECT goes out before the socket closes. */
			mosquitto_loop(c->m, 10, 1);
		}
		mosquitto_destroy(c->m);
	}
	free(c->reply);
	free(c->payload);
	memset(c, 0, sizeof(*c));
}

int letters_client__pass(struct letters_client *c, enum letters_mode mode, uint64_t n, size_t payload_len)
{
	if(c->payload_len != payload_len){
		free(c->payload);
		c->payload = malloc(payload_len ? payload_len : 1);
		if(c->payload == NULL) return -1;
		/* Text, so getDeadLetter gives it as it is. */
		memset(c->payload, 'x', payload_len);
		c->payload_len = payload_len;
	}
	c->mode = mode;
	uint64_t base = mode == LMODE_NACK ? c->dead : c->deliveries, sent = 0;
	while(sent < n || (mode == LMODE_NACK ? c->dead : c->deliveries) - base < n){
		uint64_t done = (mode == LMODE_NACK ? c->dead : c->deliveries) - base;
		while(sent < n && sent - done < LETTERS_WINDOW){
			if(mosquitto_publish_v5(c->m, NULL, LETTERS_TOPIC, (int)payload_len, c->payload, 1, false, NULL)){
				c->link.failed = true;
				return -1;
			}
			sent++;
		}
		if(pump(c, LW_DONE, base + done + 1, mode == LMODE_NACK ? "a dead letter" : "a delivery")) return -1;
	}
	return 0;
}

double letters__number(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

int letters_client__command(struct letters_client *c, const char *cmd, cJSON **reply, const cJSON **data,
		uint64_t *ns, size_t *bytes)
{
	char *text = NULL;
	mosquitto_property *props = NULL;
	*reply = NULL;
	*data = NULL;
	if(asprintf(&text, "{\"commands\":[{%s,\"correlationData\":\"" LETTERS_CORRELATION "\"}]}", cmd) < 0) return -1;
	int rc = mosquitto_property_add_string(&props, MQTT_PROP_RESPONSE_TOPIC, c->reply_topic);
	c->got_reply = false;
	uint64_t t0 = bench__now_ns();
	if(rc == 0) rc = mosquitto_publish_v5(c->m, NULL, DLQ_CONTROL_TOPIC, (int)strlen(text), text, 1, false, props);
	mosquitto_property_free_all(&props);
	free(text);
	if(rc || pump(c, LW_REPLY, 1, "a command's reply")) return -1;
	*ns = bench__now_ns() - t0;
	*bytes = c->reply_len;
	*reply = cJSON_ParseWithLength(c->reply, c->reply_len);
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(*reply, "responses");
	const cJSON *first = cJSON_IsArray(list) ? cJSON_GetArrayItem(list, 0) : NULL;
	const cJSON *err = cJSON_GetObjectItemCaseSensitive(first, "error");
	*data = cJSON_GetObjectItemCaseSensitive(first, "data");
	if(err || !cJSON_IsObject(*data)){
		fprintf(stderr, "dlq_bench: letters: the command {%s} was answered %.300s\n", cmd, c->reply);
		cJSON_Delete(*reply);
		*reply = NULL;
		*data = NULL;
		return -1;
	}
	return 0;
}
