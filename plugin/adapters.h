/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The plugin instance and the broker callbacks: each adapter unpacks one
 * mosquitto_evt_* struct into plain arguments for the engine.
 */
#ifndef DLQ_ADAPTERS_H
#define DLQ_ADAPTERS_H

#include <mosquitto_broker.h>
#include <mosquitto_plugin.h>

#include "dlq.h"

/* One per loaded instance, passed to every callback as userdata. */
struct dlq_plugin {
	mosquitto_plugin_id_t *identifier; /* borrowed from the broker */
	struct dlq engine;                 /* owned */
	uint64_t last_tick_ms;             /* 0 until the first TICK */
	bool warned_no_tick;
	struct dlq_option *options;        /* owned deep copy of the plugin's options, for reloads */
	size_t option_count;
	/* The broker's own access check (src/security.c), which Debian's 2.0.11
	 * exports though the plugin API does not declare it; NULL if absent.
	 * NACKs are checked against it (a client may NACK only what it may
	 * read). */
	int (*acl_check)(struct mosquitto *client, const char *topic, uint32_t payloadlen, void *payload,
			uint8_t qos, bool retain, int access);
	bool own_check;                    /* acl_check is running for the plugin: ignore the callback */
};

/* Looks up the broker's access check (dlsym); NULL if it is not exported. */
void adapter__find_acl_check(struct dlq_plugin *pl);

int adapter__message(int event, void *event_data, void *userdata);
int adapter__control(int event, void *event_data, void *userdata);
int adapter__tick(int event, void *event_data, void *userdata);
int adapter__disconnect(int event, void *event_data, void *userdata);
int adapter__reload(int event, void *event_data, void *userdata);
/* Registered only with plugin_opt_redelivery_tracking defer or allow. */
int adapter__acl_check(int event, void *event_data, void *userdata);

#endif
