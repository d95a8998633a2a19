/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The plugin instance and the broker callbacks: each adapter unpacks one
 * mosquitto_evt_* struct into plain arguments for the engine.
 */
#ifndef DLQ_ADAPTERS_H
#define DLQ_ADAPTERS_H

#include <mosquitto_broker.h>
#include <mosquitto_plugin.h>

#include "broker/broker_caps.h"
#include "broker/packet_size.h"
#include "api/systopics.h"
#include "engine/dlq.h"

/* One per loaded instance, passed to every callback as userdata. */
struct dlq_plugin {
	mosquitto_plugin_id_t *identifier; /* borrowed from the broker */
	struct dlq *engine;                /* owned (dlq__new) */
	uint64_t ticks;                    /* TICK events so far */
	uint64_t ticks_seen;               /* ticks when a tracked message last looked */
	uint64_t ticks_seen_ms;            /* since when no tick came; 0: not known yet */
	bool warned_no_tick;
	struct dlq_option *options;        /* owned deep copy of the plugin's options, for reloads */
	size_t option_count;
	struct broker_caps caps;           /* what the broker offers; filled once at startup */
	bool own_check;                    /* acl_check is running for the plugin: ignore the callback */
	struct dlq_packet_limits limits;   /* owned: clients' Maximum Packet Sizes, where 2.1 shows them */
	struct dlq_sys sys;                /* owned: $SYS/broker/dlq/..., published from the tick */
	bool collecting;                   /* plugin_opt_collect gave filters, or plugin_opt_redrive_from a topic
	                                    * (read once: a reload keeps them) */
};

int adapter__message(int event, void *event_data, void *userdata);
/* Whether the broker holds a session for client (struct
 * dlq_broker.has_session, caps the instance's struct broker_caps);
 * 1 or 0. events_v21.c: only where broker_caps found 2.1's
 * mosquitto_client. */
int adapter__broker_has_session(void *caps, const char *client);
int adapter__control(int event, void *event_data, void *userdata);
int adapter__tick(int event, void *event_data, void *userdata);
/* How a connection ended, as the broker says it. */
enum adapter_end {
	ADAPTER_END_GONE,       /* its session ends, or nothing is known (2.0's DISCONNECT) */
	ADAPTER_END_LASTS,      /* its session outlives it (2.1's CLIENT_OFFLINE) */
	ADAPTER_END_TAKEN_OVER, /* another connection took its id (DISCONNECT, session taken over) */
};

/* A client's connection ended (2.0's DISCONNECT; 2.1's DISCONNECT or
 * CLIENT_OFFLINE): the engine is told, once, with the client's id. */
void adapter__connection_ended(struct dlq_plugin *pl, struct mosquitto *client, enum adapter_end how);
int adapter__disconnect(int event, void *event_data, void *userdata);
int adapter__reload(int event, void *event_data, void *userdata);
/* The notice a configuration without any policy gets, at startup and after
 * a reload: the plugin is loaded and does nothing. */
void adapter__log_no_policies(void);
/* Registered only with plugin_opt_redelivery_tracking defer or allow: the
 * one for the running broker's line (acl_v20.c, acl_v21.c). */
int adapter__acl_check_v20(int event, void *event_data, void *userdata);
int adapter__acl_check_v21(int event, void *event_data, void *userdata);
/* 2.1 only (events_v21.c): a client with a lasting session went offline. */
int adapter__client_offline_v21(int event, void *event_data, void *userdata);
/* 2.1 only (events_v21.c): a client subscribed (dlq__subscribed); one
 * without MQTT 5 to a tracked filter is reported
 * (dlq__subscribed_without_nack). */
int adapter__subscribe_v21(int event, void *event_data, void *userdata);
/* 2.1 only (events_v21.c): a client connected (its connection is
 * established), or unsubscribed. */
int adapter__connect_v21(int event, void *event_data, void *userdata);
int adapter__unsubscribe_v21(int event, void *event_data, void *userdata);
/* 2.1 only (message_out_v21.c): the broker writes a PUBLISH to a client:
 * counted (exact attempts) and stamped with delivery-count. */
int adapter__message_out_v21(int event, void *event_data, void *userdata);
/* 2.1 only (events_v21.c): a persisted session was added, updated or
 * deleted: its client's Maximum Packet Size. */
int adapter__persist_client_v21(int event, void *event_data, void *userdata);

#endif
