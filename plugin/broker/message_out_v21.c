/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The MESSAGE_OUT adapter (Mosquitto 2.1): the broker is about to write a
 * PUBLISH to a client (lib/send_publish.c, send__publish), a first send or
 * a resend. A tracked message is known by the plugin's dlq-id stamp, the
 * last dlq-id user property of the stored properties; the engine counts
 * the send as one attempt (exact_counting.c). For an MQTT v5 receiver, this one send
 * then gets a copy of the property list with a delivery-count user property
 * (plugin_opt_delivery_count: by default on every send but the receiver's
 * first, whose absence means 1, so the first delivery, the one nearly every
 * message gets, costs no copy), never a change of the stored list: the
 * broker frees a replaced list after the send. Where the receiver's Maximum
 * Packet Size is known (packet_size.h) and the plugin's properties would
 * pass it, the send goes out without them, counted (sentWithoutStamp),
 * instead of being dropped by the broker. This runs on every send, so an
 * untracked message costs a look at its property list and nothing more.
 */
#include <string.h>

#include <mosquitto.h>
#include <mosquitto_broker.h>
#include <mqtt_protocol.h>

#include "broker/adapters.h"
#include "broker/session_life.h"
#include "broker/packet_size.h"
#include "broker/props.h"
#include "config/config.h"
#include "mosquitto_dlq.h"
#include "util/errtext.h"
#include "util/headers.h"
#include "util/port.h"

/* Bytes the broker may add to a send that the plugin does not see: message
 * expiry (5), topic alias (3), a subscription identifier (up to 5). Counted
 * as if present, so a stamped send that might not fit is stripped. */
#define UNSEEN_PROPS_MAX 13u

#define ID_NAME_LEN (sizeof(DLQ_PROP_ID) - 1)

/* The value of the last dlq-id user property of props (borrowed), or NULL. */
static const char *last_dlq_id(const struct broker_props_v21 *v, const mosquitto_property *props, size_t *len)
{
	const char *found = NULL;
	for(const mosquitto_property *p = props; p; p = v->next(p)){
		if(v->identifier(p) != MQTT_PROP_USER_PROPERTY) continue;
		if(v->string_name_length(p) != ID_NAME_LEN) continue;
		const char *name = v->string_name(p);
		if(name == NULL || memcmp(name, DLQ_PROP_ID, ID_NAME_LEN)) continue;
		found = v->string_value(p);
		*len = v->string_value_length(p);
	}
	if(found == NULL) *len = 0;
	return found;
}

/* n in decimal into out (NUL-terminated); returns its length. snprintf
 * costs a send more than the rest of the counting does. */
static size_t decimal(unsigned n, char out[12])
{
	char tmp[12];
	size_t len = 0;
	do{
		tmp[len++] = (char)('0' + n % 10u);
		n /= 10u;
	}while(n);
	for(size_t i = 0; i < len; i++) out[i] = tmp[len - 1 - i];
	out[len] = '\0';
	return len;
}

static bool fits(const struct mosquitto_evt_message *ed, uint64_t props_len, uint32_t limit, uint64_t slack)
{
	size_t topic_len = ed->topic ? strlen(ed->topic) : 0;
	return packet_size__publish(topic_len, ed->payloadlen, ed->qos, props_len) + slack <= limit;
}

/* This send without the plugin's properties (reserved names: dlq-id,
 * retry-count, origin-*, dead-letter-*), when that fits: a copy of the
 * publisher's own ones. */
static void send_without_stamp(struct dlq_plugin *pl, struct mosquitto_evt_message *ed, const struct dlq_send *s,
		const char *client, uint32_t limit)
{
	struct dlq_headers h = {0};
	mosquitto_property *bare = NULL;
	if(props__to_headers(&pl->caps.props, ed->properties, &h) || props__from_headers(h.data, h.len, &bare)){
		headers__free(&h);
		port__log(DLQ_LOG_ERR, "out of memory: a send on " QFMT " to " QFMT " keeps its stamp and may be too "
				"large for it", Q(ed->topic), Q(client));
		return;
	}
	headers__free(&h);
	if(!fits(ed, pl->caps.v21.get_length_all(bare), limit, 0)){
		/* Too large even without the stamp: the broker's own decision. */
		mosquitto_property_free_all(&bare);
		return;
	}
	ed->properties = bare; /* freed by the broker after the send */
	dlq__sent_without_stamp(pl->engine, s->policy);
}

int adapter__message_out_v21(int event, void *event_data, void *userdata)
{
	struct mosquitto_evt_message *ed = event_data;
	struct dlq_plugin *pl = userdata;
	const struct broker_props_v21 *v = &pl->caps.v21;
	(void)event;

	/* Nothing tracked, or no properties: not the plugin's message. */
	if(dlq__tracks_nothing(pl->engine) || ed->properties == NULL || ed->topic == NULL) return MOSQ_ERR_SUCCESS;
	size_t id_len;
	const char *id = last_dlq_id(v, ed->properties, &id_len);
	if(id == NULL) return MOSQ_ERR_SUCCESS;
	const char *client = mosquitto_client_id(ed->client);
	if(client == NULL) return MOSQ_ERR_SUCCESS;
	struct dlq_send s;
	dlq__sent(pl->engine, client, (uintptr_t)ed->client, id, id_len, ed->topic, ed->payload, ed->payloadlen, &s);
	if(s.attempt == 0) return MOSQ_ERR_SUCCESS;
	/* A policy with an ack_timeout: the clock of this delivery starts now,
	 * for a receiver that can settle it (one without MQTT 5 never sees the
	 * dlq-id, and is not held to it). */
	int protocol = 0;
	if(s.policy->ack_timeout_ms){
		protocol = mosquitto_client_protocol_version(ed->client);
		if(protocol == 5) dlq__deadline_sent(pl->engine, &s, client, session_life__persists(pl->caps.line, pl->engine, ed->client));
	}

	char count[12];
	size_t count_len = config__stamps_delivery_count(dlq__config(pl->engine)->delivery_count, s.attempt) ? decimal(s.attempt, count) : 0;
	uint32_t limit = packet_size__limits_get(&pl->limits, client);
	/* Nothing to add and no limit to keep to (a first delivery, nearly
	 * every send): the send goes as it is, whatever the protocol. */
	if(count_len == 0 && limit == 0) return MOSQ_ERR_SUCCESS;
	/* MQTT 3.1 and 3.1.1 receivers get no properties at all. */
	if(protocol == 0) protocol = mosquitto_client_protocol_version(ed->client);
	if(protocol != 5) return MOSQ_ERR_SUCCESS;
	if(limit){
		uint64_t props_len = v->get_length_all(ed->properties);
		if(count_len) props_len += packet_size__user_property_len(sizeof(DLQ_PROP_DELIVERY_COUNT) - 1, count_len);
		if(!fits(ed, props_len, limit, UNSEEN_PROPS_MAX)){
			send_without_stamp(pl, ed, &s, client, limit);
			return MOSQ_ERR_SUCCESS;
		}
	}
	if(count_len == 0) return MOSQ_ERR_SUCCESS;

	/* Only through the broker's public functions: its property lists are
	 * its own structures, whose layout is no contract. */
	mosquitto_property *copy = NULL;
	if(v->copy_all(&copy, ed->properties) != MOSQ_ERR_SUCCESS
			|| mosquitto_property_add_string_pair(&copy, MQTT_PROP_USER_PROPERTY, DLQ_PROP_DELIVERY_COUNT, count)
			!= MOSQ_ERR_SUCCESS){
		mosquitto_property_free_all(&copy);
		port__log(DLQ_LOG_ERR, "out of memory: a send on " QFMT " to " QFMT " goes without its delivery-count",
				Q(ed->topic), Q(client));
		return MOSQ_ERR_SUCCESS;
	}
	ed->properties = copy; /* freed by the broker after the send (lib/send_publish.c) */
	return MOSQ_ERR_SUCCESS;
}
