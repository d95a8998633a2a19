/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The floor plugin (the callgrind suite's "floor" cases, BENCHMARKS.md):
 * the least any plugin doing mosquitto-dlq's job must make the broker do
 * for a tracked message, and nothing else, so that the budgets of issue 14
 * can be set beside what the broker's own API costs. Per inbound publish on
 * the benchmark's tracked topics it keeps a copy of the topic and payload
 * (a NACK must be able to make a retry copy or a dead letter of it: one
 * allocation, kept until the broker stops, as a record is kept for its
 * NACK window) and stamps the message with an unguessable dlq-id: 96
 * bits, 12 bytes of a buffer getrandom fills 64 ids at a time, as 16
 * base64url characters, through mosquitto_property_add_string_pair (the
 * subscriber must be able to name it, and no one else to guess it). Where
 * the broker has MESSAGE_OUT (2.1) and plugin_opt_delivery_count is
 * always, each send of a stamped message gets its own property list with a
 * delivery-count (mosquitto_property_copy_all, then add_string_pair; the
 * broker frees it after the send); with on, the default, a first delivery
 * carries none, and the benchmark's deliveries are all first ones, so
 * there is no per-send work to make. Any other message costs it a compare
 * of the topic's start; with plugin_opt_floor hosting, every message only
 * a callback that returns at once (what the broker charges for calling a
 * MESSAGE callback at all). It has a TICK callback that returns, as any
 * plugin with timers has. Nothing is looked up, counted or logged: what it
 * costs is the id, the copy and the broker's work for the stamp. Never for
 * production.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <mosquitto.h>
#include <mosquitto_broker.h>
#include <mosquitto_plugin.h>
#include <mqtt_protocol.h>

#include "bench.h"
#include "broker/broker_v21.h"

/* A dlq-id: 12 random bytes as 16 base64url characters (DLQ_ID_LEN). */
#define ID_BYTES 12
#define ID_CHARS 16
#define IDS_PER_FILL 64

struct kept {
	struct kept *next;
	size_t payload_len;
	char data[]; /* topic NUL payload */
};

struct floor_state {
	mosquitto_plugin_id_t *id;
	struct kept *kept;
	int (*copy_all)(mosquitto_property **dest, const mosquitto_property *src);
	int delivery_count;
	int hosting;     /* plugin_opt_floor hosting: the callbacks return at once */
	int message_out; /* registered */
	uint8_t random[ID_BYTES * IDS_PER_FILL];
	size_t random_used; /* bytes of random handed out */
};

static struct floor_state state;

static int tracked_topic(const char *topic)
{
	return topic && !strncmp(topic, BENCH_TOPIC_TRACKED, sizeof(BENCH_TOPIC_TRACKED) - 1);
}

/* The next id into out (ID_CHARS + 1 bytes); false if getrandom failed. */
static int next_id(struct floor_state *s, char *out)
{
	static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	if(s->random_used == sizeof(s->random)){
		size_t got = 0;
		while(got < sizeof(s->random)){
			ssize_t n = getrandom(s->random + got, sizeof(s->random) - got, 0);
			if(n <= 0) return 0;
			got += (size_t)n;
		}
		s->random_used = 0;
	}
	const uint8_t *b = s->random + s->random_used;
	s->random_used += ID_BYTES;
	for(int i = 0, o = 0; i < ID_BYTES; i += 3){
		uint32_t v = (uint32_t)b[i] << 16 | (uint32_t)b[i + 1] << 8 | b[i + 2];
		out[o++] = alphabet[v >> 18];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = alphabet[(v >> 6) & 63];
		out[o++] = alphabet[v & 63];
	}
	out[ID_CHARS] = '\0';
	return 1;
}

static int on_message(int event, void *event_data, void *userdata)
{
	struct mosquitto_evt_message *ed = event_data;
	struct floor_state *s = userdata;
	(void)event;
	if(s->hosting || !tracked_topic(ed->topic)) return MOSQ_ERR_SUCCESS;
	char id[ID_CHARS + 1];
	if(!next_id(s, id)) return MOSQ_ERR_SUCCESS;
	size_t topic_len = strlen(ed->topic);
	struct kept *k = malloc(sizeof(*k) + topic_len + 1 + ed->payloadlen);
	if(k == NULL) return MOSQ_ERR_SUCCESS;
	memcpy(k->data, ed->topic, topic_len + 1);
	if(ed->payloadlen) memcpy(k->data + topic_len + 1, ed->payload, ed->payloadlen);
	k->payload_len = ed->payloadlen;
	k->next = s->kept;
	s->kept = k;
	mosquitto_property_add_string_pair(&ed->properties, MQTT_PROP_USER_PROPERTY, "dlq-id", id);
	return MOSQ_ERR_SUCCESS;
}

static int on_tick(int event, void *event_data, void *userdata)
{
	(void)event;
	(void)event_data;
	(void)userdata;
	return MOSQ_ERR_SUCCESS;
}

static int on_message_out(int event, void *event_data, void *userdata)
{
	struct mosquitto_evt_message *ed = event_data;
	struct floor_state *s = userdata;
	(void)event;
	if(ed->properties == NULL || !tracked_topic(ed->topic)) return MOSQ_ERR_SUCCESS;
	if(mosquitto_client_protocol_version(ed->client) != 5) return MOSQ_ERR_SUCCESS;
	mosquitto_property *copy = NULL;
	if(s->copy_all(&copy, ed->properties) != MOSQ_ERR_SUCCESS
			|| mosquitto_property_add_string_pair(&copy, MQTT_PROP_USER_PROPERTY, "delivery-count", "1")
			!= MOSQ_ERR_SUCCESS){
		mosquitto_property_free_all(&copy);
		return MOSQ_ERR_SUCCESS;
	}
	ed->properties = copy; /* the broker frees it after the send */
	return MOSQ_ERR_SUCCESS;
}

int mosquitto_plugin_version(int supported_version_count, const int *supported_versions)
{
	for(int i = 0; i < supported_version_count; i++){
		if(supported_versions[i] == 5) return 5;
	}
	return -1;
}

int mosquitto_plugin_init(mosquitto_plugin_id_t *identifier, void **userdata, struct mosquitto_opt *options,
		int option_count)
{
	memset(&state, 0, sizeof(state));
	state.id = identifier;
	state.random_used = sizeof(state.random); /* filled at the first id */
	/* The benchmark's policy lines and the like are the real plugin's. */
	for(int i = 0; i < option_count; i++){
		if(!strcmp(options[i].key, "delivery_count")) state.delivery_count = !strcmp(options[i].value, "always");
		if(!strcmp(options[i].key, "floor") && !strcmp(options[i].value, "hosting")) state.hosting = 1;
	}
	*userdata = &state;
	int rc = mosquitto_callback_register(identifier, MOSQ_EVT_MESSAGE, on_message, NULL, &state);
	if(rc == MOSQ_ERR_SUCCESS) rc = mosquitto_callback_register(identifier, MOSQ_EVT_TICK, on_tick, NULL, &state);
	if(rc) return rc;
	*(void **)&state.copy_all = dlsym(RTLD_DEFAULT, "mosquitto_property_copy_all");
	if(state.delivery_count && state.copy_all && !state.hosting){
		/* Refused by 2.0, which has no such event: then there is no
		 * per-send work to make. Only with always: with on, the default,
		 * the benchmark's deliveries (all first ones) carry none. */
		state.message_out = mosquitto_callback_register(identifier, DLQ_MOSQ_EVT_MESSAGE_OUT, on_message_out,
				NULL, &state) == MOSQ_ERR_SUCCESS;
	}
	mosquitto_log_printf(MOSQ_LOG_NOTICE, "dlq floor plugin: %s", state.hosting ? "callbacks that return"
			: state.message_out ? "random id, stamp, and delivery-count per send" : "random id and stamp");
	return MOSQ_ERR_SUCCESS;
}

int mosquitto_plugin_cleanup(void *userdata, struct mosquitto_opt *options, int option_count)
{
	struct floor_state *s = userdata;
	(void)options;
	(void)option_count;
	mosquitto_callback_unregister(s->id, MOSQ_EVT_MESSAGE, on_message, NULL);
	mosquitto_callback_unregister(s->id, MOSQ_EVT_TICK, on_tick, NULL);
	if(s->message_out) mosquitto_callback_unregister(s->id, DLQ_MOSQ_EVT_MESSAGE_OUT, on_message_out, NULL);
	while(s->kept){
		struct kept *next = s->kept->next;
		free(s->kept);
		s->kept = next;
	}
	return MOSQ_ERR_SUCCESS;
}
