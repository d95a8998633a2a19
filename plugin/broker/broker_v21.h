/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The few Mosquitto 2.1 constants the plugin uses at run time though it is
 * built against 2.0's headers (Debian 12). Values from 2.1.2's
 * include/mosquitto/broker.h and defs.h; they are enums there, so they are
 * defined under the plugin's own names, taken from the headers when those
 * are 2.1's.
 */
#ifndef DLQ_BROKER_V21_H
#define DLQ_BROKER_V21_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <mosquitto.h>

#if LIBMOSQUITTO_VERSION_NUMBER >= 2001000
#  define DLQ_MOSQ_ERR_PLUGIN_IGNORE MOSQ_ERR_PLUGIN_IGNORE
#  define DLQ_MOSQ_EVT_CONNECT MOSQ_EVT_CONNECT
#  define DLQ_MOSQ_EVT_SUBSCRIBE MOSQ_EVT_SUBSCRIBE
#  define DLQ_MOSQ_EVT_UNSUBSCRIBE MOSQ_EVT_UNSUBSCRIBE
#  define DLQ_MOSQ_EVT_MESSAGE_OUT MOSQ_EVT_MESSAGE_OUT
#  define DLQ_MOSQ_EVT_CLIENT_OFFLINE MOSQ_EVT_CLIENT_OFFLINE
#  define DLQ_MOSQ_ERR_SESSION_TAKEN_OVER MOSQ_ERR_SESSION_TAKEN_OVER
#else
/* A callback's "count me as absent" answer to an access check
 * (src/plugin_acl_check.c). Never return it to a 2.0 broker: 2.0 reads an
 * unknown answer as a refusal. */
#  define DLQ_MOSQ_ERR_PLUGIN_IGNORE 32
#  define DLQ_MOSQ_EVT_CONNECT 11
#  define DLQ_MOSQ_EVT_SUBSCRIBE 12
#  define DLQ_MOSQ_EVT_UNSUBSCRIBE 13
#  define DLQ_MOSQ_EVT_MESSAGE_OUT 27
#  define DLQ_MOSQ_EVT_CLIENT_OFFLINE 28
/* DISCONNECT's reason when another connection took the client's id
 * (src/handle_connect.c): 2.1 marks that session clean whatever comes
 * next; the next CONNECT says whether it goes on. */
#  define DLQ_MOSQ_ERR_SESSION_TAKEN_OVER 142
#endif

/* MOSQ_EVT_CLIENT_OFFLINE's data, as 2.1.2's broker.h lays it out (struct
 * mosquitto_evt_client_offline): a client whose session outlives its
 * connection went offline. 2.1 sends it instead of DISCONNECT then. */
struct dlq_evt_client_offline {
	void *future;
	struct mosquitto *client;
	int reason;
	void *future2[4];
};

/* MOSQ_EVT_CONNECT's data, as 2.1.2's broker.h lays it out (struct
 * mosquitto_evt_connect): a client's connect was accepted, its session
 * resumed or made, after its session's pending messages were checked and
 * written (src/handle_connect.c, connect__on_authorised). */
struct dlq_evt_connect {
	void *future;
	struct mosquitto *client;
	void *future2[4];
};

/* The options byte of a subscription (MQTT 5, 3.8.3.1): the granted QoS in
 * its low two bits (2.1.2's MQTT_SUB_OPT_GET_QOS). */
#define DLQ_SUB_OPT_QOS(options) ((uint8_t)((options) & 0x03))

/* MOSQ_EVT_SUBSCRIBE's data, as 2.1.2's broker.h lays it out (struct
 * mosquitto_evt_subscribe holding a struct mosquitto_subscription): one
 * filter of a SUBSCRIBE the broker allowed, before it adds it
 * (src/plugin_subscribe.c). topic_filter is the client's, with any
 * "$share/<group>/" prefix and the listener's mount point; a plugin may
 * replace it, which this one does not. */
struct dlq_subscription {
	char *clientid;
	char *topic_filter;
	void *properties;
	uint32_t identifier;
	uint8_t options;
	uint8_t padding[3];
	void *future2[8];
};

struct dlq_evt_subscribe {
	void *future;
	struct mosquitto *client;
	struct dlq_subscription data;
	void *future2[8];
};

/* MOSQ_EVT_UNSUBSCRIBE's data (struct mosquitto_evt_unsubscribe): laid
 * out as SUBSCRIBE's; only data.topic_filter is set, the filter as the
 * client sent it (src/handle_unsubscribe.c, before the broker removes it). */
struct dlq_evt_unsubscribe {
	void *future;
	struct mosquitto *client;
	struct dlq_subscription data;
	void *future2[8];
};

/* Events of 2.1's persistence interface (include/mosquitto/broker.h). */
#define DLQ_MOSQ_EVT_PERSIST_CLIENT_ADD 19
#define DLQ_MOSQ_EVT_PERSIST_CLIENT_DELETE 20
#define DLQ_MOSQ_EVT_PERSIST_CLIENT_UPDATE 21

/* struct mosquitto_client and struct mosquitto_evt_persist_client as
 * 2.1.2's broker.h lays them out: a session the broker persists (session
 * expiry interval not 0), sent at CONNECT (after the session's pending
 * messages were written), and on updates. max_packet_size is the client's
 * MQTT v5 Maximum Packet Size (0: none). 2.1 refuses these events to a
 * plugin while `persistence true` is set (src/plugin_callbacks.c). */
struct dlq_persist_client {
	char *clientid;
	char *username;
	char *auth_method;
	time_t will_delay_time;
	time_t session_expiry_time;
	uint32_t will_delay_interval;
	uint32_t session_expiry_interval;
	uint32_t max_packet_size;
	uint16_t listener_port;
	uint8_t max_qos;
	bool retain_available;
	void *future2[8];
};

struct dlq_evt_persist_client {
	void *future;
	struct dlq_persist_client data;
	void *future2[8];
};

#endif
