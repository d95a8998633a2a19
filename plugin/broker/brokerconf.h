/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What the plugin needs to know of the broker's own configuration and cannot
 * ask the 2.0.11 plugin API: whether sessions survive a restart (persistence),
 * where and how often the broker saves its database (persistence_location,
 * persistence_file, autosave_interval), and whether the broker sends plugins
 * TICK events (not with per_listener_settings). Read from the configuration file the broker was
 * started with (-c on its command line), following include_dir.
 */
#ifndef DLQ_BROKERCONF_H
#define DLQ_BROKERCONF_H

#include <stdbool.h>
#include <stddef.h>

#define BROKERCONF_MAX_PLUGINS 16

struct broker_facts {
	bool known;                 /* a configuration file was found and read */
	bool persistence;
	bool per_listener_settings;
	bool queue_qos0_messages;   /* the broker queues QoS 0 messages for offline sessions */
	char persistence_location[4096]; /* "" when not set */
	char persistence_file[1024];     /* "" when not set: mosquitto.db */
	long autosave_interval;     /* seconds (or changes, with autosave_on_changes); 0: only at shutdown */
	bool acl_file;              /* an acl_file line, or 2.1's acl-file plugin: the broker's own ACL check */
	unsigned plugin_count;      /* plugin and auth_plugin lines, this plugin's included */
	char plugins[BROKERCONF_MAX_PLUGINS][1024]; /* their paths, in load order (the first ones) */
	char path[4096];            /* the file, for messages */
};

#include "config/config.h"

/* Whether plugin_opt_redelivery_tracking (mode) can run safely with the
 * broker's other access-control sources: `allow` answers every access check
 * first, so it is refused beside acl_file or any other plugin; `defer`
 * leaves every decision to them, so it is refused without any (the broker
 * would deny everything). self is the index of this plugin among
 * f->plugins (-1: not found). Returns 0, or EINVAL with the reason in err.
 * A plugin loaded before this one is reported in warn (it sees the checks
 * first, and when it answers, this plugin counts nothing), warn[0] == '\0'
 * otherwise. */
int brokerconf__check_redelivery(enum dlq_redelivery_mode mode, const struct broker_facts *f, int self,
		char *err, size_t errlen, char *warn, size_t warnlen);

/* The same on Mosquitto 2.1, where the plugin answers access checks with
 * MOSQ_ERR_PLUGIN_IGNORE and so changes no decision whatever else is
 * loaded: nothing is refused. A plugin loaded before this one that may
 * answer access checks (any but 2.1's password-file plugin) is reported in
 * warn, warn[0] == '\0' otherwise. */
void brokerconf__check_redelivery_v21(const struct broker_facts *f, int self, char *warn, size_t warnlen);

/* Whether a plugin path names 2.1's acl-file plugin (an ACL source, reading
 * the file acl_file named in 2.0) or its password-file plugin
 * (authentication only). */
bool brokerconf__is_acl_file_plugin(const char *path);
bool brokerconf__is_password_file_plugin(const char *path);

/* The index among f->plugins of the module at path (compared after
 * resolving both), or -1. */
int brokerconf__plugin_index(const struct broker_facts *f, const char *path);

/* The broker's database file, as Mosquitto joins persistence_location and
 * persistence_file ("<location>/<file>", or the file alone), into out.
 * Returns false when the broker does not persist or the path does not fit. */
bool brokerconf__db_path(const struct broker_facts *f, char *out, size_t size);

/* Fills *f from the running broker's configuration. Never fails: when the
 * file cannot be found, known is false and the facts are the broker's
 * defaults (no persistence, autosave_interval 1800). */
void brokerconf__read(struct broker_facts *f);

/* Reads the facts from one configuration text, include_dir not followed
 * (for tests). */
void brokerconf__scan_text(struct broker_facts *f, const char *text);

#endif
