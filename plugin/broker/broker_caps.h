/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What the running broker offers this plugin, found once at startup and kept
 * in the plugin instance (struct dlq_plugin). One .so built against 2.0's
 * headers runs on 2.0.11, 2.0.21 and 2.1.x: it calls directly only the
 * functions upstream's src/linker.syms promises (tests/symbols checks this),
 * and looks up everything else here.
 */
#ifndef DLQ_BROKER_CAPS_H
#define DLQ_BROKER_CAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mosquitto_broker.h>
#include <mosquitto_plugin.h>

#include "broker/prop_reader.h"

enum broker_line {
	BROKER_LINE_20, /* RELOAD..DISCONNECT only, no set_info, TICK not with per_listener_settings */
	BROKER_LINE_21, /* PLUGIN_IGNORE, READ checks carry properties, TICK always */
};

enum broker_prop_source {
	BROKER_PROPS_BROKER,       /* the broker executable's own functions; copies freed with mosquitto_free */
	BROKER_PROPS_LIBMOSQUITTO, /* libmosquitto.so.1 2.0.x, opened RTLD_LOCAL; copies freed with libc's free */
};

/* mosquitto_acl_check as 2.0 defines it (src/security.c) and as 2.1 does,
 * with the message's properties before access. */
typedef int (*broker_acl_check_v20_fn)(struct mosquitto *client, const char *topic, uint32_t payloadlen,
		void *payload, uint8_t qos, bool retain, int access);
typedef int (*broker_acl_check_v21_fn)(struct mosquitto *client, const char *topic, uint32_t payloadlen,
		void *payload, uint8_t qos, bool retain, mosquitto_property *properties, int access);
typedef int (*broker_set_info_fn)(mosquitto_plugin_id_t *identifier, const char *name, const char *version);

/* 2.1's property functions that read without copying, and the list
 * helpers 2.0.21 does not export: the MESSAGE_OUT path runs on every send,
 * so it allocates nothing to find the dlq-id. All NULL on 2.0. */
struct broker_props_v21 {
	int (*identifier)(const mosquitto_property *p);
	mosquitto_property *(*next)(const mosquitto_property *p);
	const char *(*string_name)(const mosquitto_property *p);
	uint16_t (*string_name_length)(const mosquitto_property *p);
	const char *(*string_value)(const mosquitto_property *p);
	uint16_t (*string_value_length)(const mosquitto_property *p);
	int (*copy_all)(mosquitto_property **dest, const mosquitto_property *src);
	unsigned int (*get_length_all)(const mosquitto_property *p);
};

struct broker_caps {
	enum broker_line line;
	/* 2.1 events mosquitto_callback_register accepted (2.0 refuses them). */
	bool evt_connect;
	bool evt_message_out;
	bool evt_client_offline;
	bool evt_subscribe;
	/* In the broker executable, or NULL. The broker's access check, which
	 * the plugin API does not declare (2.0.11 and 2.1 export it, 2.0.21
	 * does not): NACKs are checked against it. Its signature is the
	 * line's: call it through broker_caps__acl_check. */
	void *acl_check;
	broker_set_info_fn set_info;
	/* 2.1's mosquitto_client (the session of a client id, connected or
	 * not), or NULL. */
	struct mosquitto *(*client_by_id)(const char *clientid);
	/* Complete (every pointer set) or all NULL; on 2.1 only. */
	struct broker_props_v21 v21;
	enum broker_prop_source prop_source;
	struct dlq_prop_reader props;
	void *libmosquitto;                /* owned dlopen handle with BROKER_PROPS_LIBMOSQUITTO, else NULL */
	char libmosquitto_version[24];     /* "2.0.11" with BROKER_PROPS_LIBMOSQUITTO */
};

/* Fills *c for the broker running this plugin (identifier is this plugin's,
 * for the event probes, which register and unregister a no-op callback).
 * Returns 0, or ENOENT when no property reader was found (the broker lacks
 * the read functions and libmosquitto.so.1 2.0.x is not installed), with
 * the reason in err; *c needs broker_caps__cleanup either way. */
int broker_caps__probe(struct broker_caps *c, mosquitto_plugin_id_t *identifier, char *err, size_t errlen);

/* One line for the startup log: the broker line guessed and why, the
 * property source, acl_check, the 2.1 events found. */
void broker_caps__describe(const struct broker_caps *c, char *buf, size_t size);

/* The broker's access check for client on topic (properties NULL), with
 * the signature of the running line. c->acl_check must not be NULL.
 * Returns the broker's answer (MOSQ_ERR_SUCCESS: allowed). */
int broker_caps__acl_check(const struct broker_caps *c, struct mosquitto *client, const char *topic,
		uint32_t payloadlen, void *payload, uint8_t qos, bool retain, int access);

/* Closes libmosquitto if it was opened. */
void broker_caps__cleanup(struct broker_caps *c);

#endif
