/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Adapters for the events only Mosquitto 2.1 sends. CLIENT_OFFLINE: 2.1
 * fires DISCONNECT only for a client whose session ends with its
 * connection, and CLIENT_OFFLINE for one whose session outlives it
 * (src/loop.c, do_disconnect), where 2.0 fired DISCONNECT for both. To the
 * engine both are the end of a connection, and CLIENT_OFFLINE says the
 * session lasts. CONNECT (with its clean_start flag), SUBSCRIBE and
 * UNSUBSCRIBE: the sessions and subscriptions the engine follows
 * (sessions.h) for the QoS and subscription identifiers of targeted retry
 * copies; SUBSCRIBE is also where the plugin sees a subscriber that cannot
 * NACK, or one whose filter takes in dead letters. CONNECT also says the
 * connection is established (its reconnect access checks are over), a sign
 * exact counting uses (exact_counting.c).
 * PERSIST_CLIENT_ADD/_UPDATE/_DELETE: the one place 2.1 shows a client's
 * Maximum Packet Size (packet_size.h), for sessions it persists.
 */
#include <mosquitto.h>
#include <mosquitto_broker.h>

#include "broker/adapters.h"
#include "broker/broker_v21.h"
#include "util/errtext.h"
#include "util/port.h"

int adapter__client_offline_v21(int event, void *event_data, void *userdata)
{
	struct dlq_evt_client_offline *ed = event_data;
	(void)event;

	adapter__connection_ended(userdata, ed->client, ADAPTER_END_LASTS);
	return MOSQ_ERR_SUCCESS;
}

int adapter__broker_has_session(void *caps, const char *client)
{
	const struct broker_caps *c = caps;
	return client && c->client_by_id && c->client_by_id(client) ? 1 : 0;
}

int adapter__connect_v21(int event, void *event_data, void *userdata)
{
	struct dlq_evt_connect *ed = event_data;
	struct dlq_plugin *pl = userdata;
	(void)event;

	dlq__event(pl->engine);
	const char *client = mosquitto_client_id(ed->client);
	dlq__client_connected(pl->engine, client, mosquitto_client_clean_session(ed->client));
	if(client) dlq__client_active(pl->engine, client, (uintptr_t)ed->client);
	return MOSQ_ERR_SUCCESS;
}

int adapter__unsubscribe_v21(int event, void *event_data, void *userdata)
{
	struct dlq_evt_unsubscribe *ed = event_data;
	struct dlq_plugin *pl = userdata;
	(void)event;

	dlq__event(pl->engine);
	dlq__unsubscribed(pl->engine, mosquitto_client_id(ed->client), ed->data.topic_filter);
	return MOSQ_ERR_SUCCESS;
}

int adapter__subscribe_v21(int event, void *event_data, void *userdata)
{
	struct dlq_evt_subscribe *ed = event_data;
	struct dlq_plugin *pl = userdata;
	(void)event;

	dlq__event(pl->engine);
	const char *client = mosquitto_client_id(ed->client);
	dlq__subscribed(pl->engine, client, ed->data.topic_filter, DLQ_SUB_OPT_QOS(ed->data.options), ed->data.identifier);
	/* MQTT 5 clients read the dlq-id user property; 3.1 and 3.1.1 have no
	 * properties at all. */
	int protocol = mosquitto_client_protocol_version(ed->client);
	if(protocol == 5) return MOSQ_ERR_SUCCESS;
	dlq__subscribed_without_nack(pl->engine, client, ed->data.topic_filter, protocol);
	/* Anything else would refuse the subscription. */
	return MOSQ_ERR_SUCCESS;
}

int adapter__persist_client_v21(int event, void *event_data, void *userdata)
{
	struct dlq_evt_persist_client *ed = event_data;
	struct dlq_plugin *pl = userdata;

	dlq__event(pl->engine);
	if(ed->data.clientid == NULL) return MOSQ_ERR_SUCCESS;
	uint32_t max = event == DLQ_MOSQ_EVT_PERSIST_CLIENT_DELETE ? 0 : ed->data.max_packet_size;
	if(packet_size__limits_set(&pl->limits, ed->data.clientid, max)){
		port__log(DLQ_LOG_ERR, "out of memory: the Maximum Packet Size of " QFMT " is not known to the plugin",
				Q(ed->data.clientid));
	}
	/* A persistence callback's answer is not a decision. */
	return MOSQ_ERR_SUCCESS;
}
