/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Fuzz target: the MESSAGE_OUT adapter of Mosquitto 2.1
 * (adapter__message_out_v21, message_out_v21.c): a PUBLISH the broker is
 * about to write, with any property list a publisher can give (dlq-id user
 * properties of any value, empty ones that 2.1.2 reads as NULL, several,
 * near-miss names), any topic, payload, QoS, receiver protocol and Maximum
 * Packet Size. The broker is faked: a client is a struct of this file, the
 * 2.1 property accessors (struct broker_props_v21) read libmosquitto lists
 * as 2.1.2 does (NULL for an empty value). Each input is a binary script
 * (fuzz_input.h) on a fresh plugin instance, at most MAX_OPS operations:
 *
 *   0 track     topic byte, payload byte
 *   1 send      client byte, protocol byte, QoS byte, content byte, count
 *               byte, then that many properties (kind byte, strings)
 *   2 limit     client byte, Maximum Packet Size (4 bytes; 0 forgets)
 *   3 tick
 *
 * Checked: no crash, leak, double free or undefined behaviour (the adapter
 * either leaves the stored list alone or puts a list of its own in its
 * place, which the broker frees after the send, as here); a replaced list
 * is the stored one plus one delivery-count (a number no larger than the
 * sends shown to that client; at least 2 with plugin_opt_delivery_count on,
 * none with off: the mode comes from the input's length), or a list without the plugin's properties
 * that fits the client's Maximum Packet Size; an untracked message, an MQTT
 * 3 receiver or a forged id get no change.
 */
#include <string.h>

#include <mosquitto.h>
#include <mqtt_protocol.h>

#include "broker/adapters.h"
#include "broker/broker_v21.h"
#include "broker/packet_size.h"
#include "config/config.h"
#include "fake_port.h"
#include "fake_reader.h"
#include "fuzz.h"
#include "fuzz_input.h"
#include "mosquitto_dlq.h"
#include "test_util.h"

#define MAX_OPS 64
#define RING 4

/* The broker's client, as far as the adapter looks at it. */
struct mosquitto {
	const char *id;
	int protocol;
};

const char *mosquitto_client_id(const struct mosquitto *client)
{
	return client->id;
}

int mosquitto_client_protocol_version(const struct mosquitto *client)
{
	return client->protocol;
}

/* Every fake client's session lasts (a policy with an ack_timeout asks, for
 * the retry copy its clock running out makes). */
bool mosquitto_client_clean_session(const struct mosquitto *client)
{
	(void)client;
	return false;
}

/* Strings the accessors hand out, borrowed from the property as 2.1's are;
 * freed at the end of each input. */
static char **arena;
static size_t arena_count, arena_cap;

static const char *keep(char *s)
{
	if(s == NULL) return NULL;
	if(arena_count == arena_cap){
		arena_cap = arena_cap ? arena_cap * 2 : 256;
		arena = realloc(arena, arena_cap * sizeof(*arena));
		FUZZ_CHECK(arena != NULL, "out of memory");
	}
	arena[arena_count++] = s;
	return s;
}

static void arena_free(void)
{
	for(size_t i = 0; i < arena_count; i++) free(arena[i]);
	arena_count = 0;
}

static int v_identifier(const mosquitto_property *p)
{
	return mosquitto_property_identifier(p);
}

static mosquitto_property *v_next(const mosquitto_property *p)
{
	return (mosquitto_property *)mosquitto_property_next(p);
}

static void pair(const mosquitto_property *p, const char **name, const char **value)
{
	char *n = NULL, *v = NULL;
	*name = *value = NULL;
	if(mosquitto_property_identifier(p) != MQTT_PROP_USER_PROPERTY) return;
	if(mosquitto_property_read_string_pair(p, MQTT_PROP_USER_PROPERTY, &n, &v, false) == NULL) return;
	/* 2.1.2 (libcommon/property_common.c): NULL for an empty string. */
	if(n && n[0] == '\0'){ free(n); n = NULL; }
	if(v && v[0] == '\0'){ free(v); v = NULL; }
	*name = keep(n);
	*value = keep(v);
}

static const char *v_string_name(const mosquitto_property *p)
{
	const char *n, *v;
	pair(p, &n, &v);
	return n;
}

static uint16_t v_string_name_length(const mosquitto_property *p)
{
	const char *n, *v;
	pair(p, &n, &v);
	return n ? (uint16_t)strlen(n) : 0;
}

static const char *v_string_value(const mosquitto_property *p)
{
	const char *n, *v;
	pair(p, &n, &v);
	return v;
}

static uint16_t v_string_value_length(const mosquitto_property *p)
{
	const char *n, *v;
	pair(p, &n, &v);
	return v ? (uint16_t)strlen(v) : 0;
}

/* 2.1.2's copy (libcommon/property_common.c) takes a string property
 * with no value (libmosquitto makes one for ""); 2.0.11's
 * mosquitto_property_copy_all, the only one here, calls strdup(NULL) on
 * it. So the copy is made property by property, of the kinds this target
 * makes. */
static int v_copy_all(mosquitto_property **dest, const mosquitto_property *src)
{
	*dest = NULL;
	for(const mosquitto_property *p = src; p; p = mosquitto_property_next(p)){
		int id = mosquitto_property_identifier(p), rc;
		if(id == MQTT_PROP_USER_PROPERTY){
			char *n = NULL, *v = NULL;
			mosquitto_property_read_string_pair(p, id, &n, &v, false);
			rc = mosquitto_property_add_string_pair(dest, id, n ? n : "", v ? v : "");
			free(n);
			free(v);
		}else if(id == MQTT_PROP_CONTENT_TYPE){
			char *v = NULL;
			mosquitto_property_read_string(p, id, &v, false);
			rc = mosquitto_property_add_string(dest, id, v ? v : "");
			free(v);
		}else if(id == MQTT_PROP_PAYLOAD_FORMAT_INDICATOR){
			uint8_t v = 0;
			mosquitto_property_read_byte(p, id, &v, false);
			rc = mosquitto_property_add_byte(dest, id, v);
		}else{
			uint32_t v = 0;
			mosquitto_property_read_int32(p, id, &v, false);
			rc = mosquitto_property_add_int32(dest, id, v);
		}
		if(rc != MOSQ_ERR_SUCCESS){
			mosquitto_property_free_all(dest);
			return rc;
		}
	}
	return MOSQ_ERR_SUCCESS;
}

/* The encoded length of the kinds of property this target makes. */
static unsigned v_get_length_all(const mosquitto_property *props)
{
	unsigned len = 0;
	for(const mosquitto_property *p = props; p; p = mosquitto_property_next(p)){
		int id = mosquitto_property_identifier(p);
		if(id == MQTT_PROP_USER_PROPERTY){
			char *n = NULL, *v = NULL;
			mosquitto_property_read_string_pair(p, id, &n, &v, false);
			len += 1u + 2u + (n ? (unsigned)strlen(n) : 0u) + 2u + (v ? (unsigned)strlen(v) : 0u);
			free(n);
			free(v);
		}else if(id == MQTT_PROP_CONTENT_TYPE){
			char *s = NULL;
			mosquitto_property_read_string(p, id, &s, false);
			len += 1u + 2u + (s ? (unsigned)strlen(s) : 0u);
			free(s);
		}else if(id == MQTT_PROP_PAYLOAD_FORMAT_INDICATOR){
			len += 2u;
		}else{
			len += 5u; /* message expiry interval */
		}
	}
	return len;
}

static const char *const clients[] = {"w1", "w2", "", "long/client/id/with/more/bytes"};
static const char *const topics[] = {"orders/1", "once", "fanout", "untracked"};
static const char *const payloads[] = {"", "poison", "a larger payload of some forty-odd bytes...."};
static const char *const names[] = {DLQ_PROP_ID, "dlq-idx", "dlq-i", "DLQ-ID", DLQ_PROP_RETRY_COUNT,
		DLQ_PROP_DELIVERY_COUNT, "k", DLQ_PROP_ORIGIN_TOPIC};

struct known {
	char id[DLQ_ID_LEN + 1];
	const char *topic;
	const char *payload;
};

struct run {
	struct dlq_plugin pl;
	struct dlq engine;         /* pl.engine's */
	struct known ring[RING];
	size_t n;
	unsigned sends[ARRAY_LEN(clients)];
};

static void start(struct run *r)
{
	memset(r, 0, sizeof(*r));
	fake_reset();
	fake.record_sys = true;
	r->pl.engine = &r->engine;
	fuzz_engine_start(r->pl.engine, fuzz_standard_options, fuzz_standard_count,
			ENGINE_EXACT_COUNTING | ENGINE_DELIVERY_COUNT);
	r->pl.caps.props = fake_reader_v21;
	r->pl.caps.v21 = (struct broker_props_v21){
		.identifier = v_identifier,
		.next = v_next,
		.string_name = v_string_name,
		.string_name_length = v_string_name_length,
		.string_value = v_string_value,
		.string_value_length = v_string_value_length,
		.copy_all = v_copy_all,
		.get_length_all = v_get_length_all,
	};
}

/* A string that libmosquitto takes as a property value: valid UTF-8 of at
 * most 65535 bytes (a publisher can send no other). */
static char *prop_string(struct fuzz_input *in)
{
	char *s = fuzz_input_string(in);
	if(s == NULL) s = strdup("");
	FUZZ_CHECK(s != NULL, "out of memory");
	size_t n = strlen(s);
	if(n > 65535) s[n = 65535] = '\0';
	if(mosquitto_validate_utf8(s, (int)n) != MOSQ_ERR_SUCCESS){
		for(size_t i = 0; i < n; i++){
			uint8_t v = (uint8_t)s[i] & 0x7F;
			s[i] = (char)(v == 0 ? 'u' : v);
		}
	}
	return s;
}

static void add_property(struct run *r, struct fuzz_input *in, mosquitto_property **props)
{
	uint8_t kind = fuzz_input_byte(in);
	switch(kind & 7){
	case 0: /* a dlq-id of a tracked message */
		if(r->n){
			FUZZ_CHECK(mosquitto_property_add_string_pair(props, MQTT_PROP_USER_PROPERTY, DLQ_PROP_ID,
					r->ring[(kind >> 3) % r->n].id) == MOSQ_ERR_SUCCESS, "add");
		}
		break;
	case 1: { /* a user property of a fixed name, any value */
		char *v = prop_string(in);
		mosquitto_property_add_string_pair(props, MQTT_PROP_USER_PROPERTY, names[(kind >> 3) % 8], v);
		free(v);
		break;
	}
	case 2: { /* any name, any value */
		char *n = prop_string(in), *v = prop_string(in);
		mosquitto_property_add_string_pair(props, MQTT_PROP_USER_PROPERTY, n, v);
		free(n);
		free(v);
		break;
	}
	case 3: {
		char *v = prop_string(in);
		mosquitto_property_add_string(props, MQTT_PROP_CONTENT_TYPE, v);
		free(v);
		break;
	}
	case 4:
		mosquitto_property_add_byte(props, MQTT_PROP_PAYLOAD_FORMAT_INDICATOR, kind >> 7);
		break;
	default:
		mosquitto_property_add_int32(props, MQTT_PROP_MESSAGE_EXPIRY_INTERVAL, fuzz_input_u32(in));
		break;
	}
}

static size_t count_props(const mosquitto_property *p)
{
	size_t n = 0;
	for(; p; p = mosquitto_property_next(p)) n++;
	return n;
}

static bool has_dlq_id(const mosquitto_property *props)
{
	for(const mosquitto_property *p = props; p; p = mosquitto_property_next(p)){
		const char *n, *v;
		pair(p, &n, &v);
		if(n && !strcmp(n, DLQ_PROP_ID)) return true;
	}
	return false;
}

static void send_one(struct run *r, struct fuzz_input *in)
{
	uint8_t c = fuzz_input_byte(in) % 4;
	struct mosquitto client = {clients[c], fuzz_input_byte(in) & 1 ? 5 : 4};
	uint8_t qos = fuzz_input_byte(in) % 3;
	uint8_t content = fuzz_input_byte(in);
	const char *topic = topics[content % 4];
	const char *payload = payloads[(content >> 2) % 3];
	if((content & 0x80) && r->n){
		topic = r->ring[(content >> 4) % r->n].topic;
		payload = r->ring[(content >> 4) % r->n].payload;
	}
	mosquitto_property *props = NULL;
	unsigned count = fuzz_input_byte(in) % 8;
	for(unsigned i = 0; i < count; i++) add_property(r, in, &props);

	struct mosquitto_evt_message ed;
	memset(&ed, 0, sizeof(ed));
	ed.client = &client;
	ed.topic = (char *)topic;
	ed.payload = (void *)payload;
	ed.payloadlen = (uint32_t)strlen(payload);
	ed.qos = qos;
	ed.properties = props;
	uint64_t stripped = engine__totals(r->pl.engine)->sent_without_stamp;
	if(has_dlq_id(props)) r->sends[c]++;

	int rc = adapter__message_out_v21(DLQ_MOSQ_EVT_MESSAGE_OUT, &ed, &r->pl);
	FUZZ_CHECK(rc == MOSQ_ERR_SUCCESS, "adapter: %d", rc);
	if(ed.properties != props){
		FUZZ_CHECK(client.protocol == 5, "an MQTT 3 receiver's properties changed");
		FUZZ_CHECK(has_dlq_id(props), "a message without a dlq-id changed");
		if(engine__totals(r->pl.engine)->sent_without_stamp > stripped){
			FUZZ_CHECK(!has_dlq_id(ed.properties), "a stripped send keeps its dlq-id");
			uint32_t limit = packet_size__limits_get(&r->pl.limits, clients[c]);
			FUZZ_CHECK(limit && packet_size__publish(strlen(topic), ed.payloadlen, qos, v_get_length_all(ed.properties))
					<= limit, "a stripped send does not fit %u", limit);
		}else{
			FUZZ_CHECK(count_props(ed.properties) == count_props(props) + 1, "%zu properties, stored %zu",
					count_props(ed.properties), count_props(props));
			const mosquitto_property *p = ed.properties;
			while(mosquitto_property_next(p)) p = mosquitto_property_next(p);
			const char *n, *v;
			pair(p, &n, &v);
			FUZZ_CHECK(n && !strcmp(n, DLQ_PROP_DELIVERY_COUNT) && v, "the last property is not delivery-count");
			enum dlq_delivery_count mode = r->pl.engine->cfg.delivery_count;
			FUZZ_CHECK(mode != DLQ_DELIVERY_COUNT_OFF, "a delivery-count with plugin_opt_delivery_count off");
			/* on: a subscriber's first delivery carries none. */
			unsigned long attempt = strtoul(v, NULL, 10), least = mode == DLQ_DELIVERY_COUNT_ON ? 2 : 1;
			FUZZ_CHECK(attempt >= least && attempt <= r->sends[c], "delivery-count %lu after %u sends (%s)", attempt,
					r->sends[c], config__delivery_count_name(mode));
		}
		mosquitto_property_free_all(&ed.properties);
	}
	mosquitto_property_free_all(&props);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct run r;
	struct fuzz_input in = {data, size, 0};
	start(&r);
	/* Each of plugin_opt_delivery_count's modes, by the input's length. */
	r.pl.engine->cfg.delivery_count = (enum dlq_delivery_count)(size % 3);
	for(int op = 0; op < MAX_OPS && fuzz_input_more(&in); op++){
		switch(fuzz_input_byte(&in) % 4){
		case 0: {
			const char *topic = topics[fuzz_input_byte(&in) % 3];
			const char *payload = payloads[fuzz_input_byte(&in) % 3];
			const struct dlq_policy *p = dlq__policy_for(r.pl.engine, topic);
			char id[DLQ_ID_LEN + 1];
			if(p && dlq__track(r.pl.engine, p, topic, payload, (uint32_t)strlen(payload), 1, NULL, 0, id) == 0){
				if(r.n == RING){
					memmove(&r.ring[0], &r.ring[1], sizeof(r.ring[0]) * (RING - 1));
					r.n--;
				}
				memcpy(r.ring[r.n].id, id, sizeof(id));
				r.ring[r.n].topic = topic;
				r.ring[r.n].payload = payload;
				r.n++;
			}
			break;
		}
		case 1:
			send_one(&r, &in);
			break;
		case 2: {
			uint8_t c = fuzz_input_byte(&in) % 4;
			FUZZ_CHECK(packet_size__limits_set(&r.pl.limits, clients[c], fuzz_input_u32(&in)) == 0, "limits");
			break;
		}
		default:
			dlq__tick(r.pl.engine);
			fuzz_port_clear();
			break;
		}
	}
	dlq__cleanup(r.pl.engine);
	packet_size__limits_cleanup(&r.pl.limits);
	arena_free();
	fake_reset();
	return 0;
}
