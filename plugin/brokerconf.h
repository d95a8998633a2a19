/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What the plugin needs to know of the broker's own configuration and cannot
 * ask the 2.0.11 plugin API: whether sessions survive a restart (persistence)
 * and whether the broker sends plugins TICK events (not with
 * per_listener_settings). Read from the configuration file the broker was
 * started with (-c on its command line), following include_dir.
 */
#ifndef DLQ_BROKERCONF_H
#define DLQ_BROKERCONF_H

#include <stdbool.h>

struct broker_facts {
	bool known;                 /* a configuration file was found and read */
	bool persistence;
	bool per_listener_settings;
	char path[4096];            /* the file, for messages */
};

/* Fills *f from the running broker's configuration. Never fails: when the
 * file cannot be found, known is false and the facts are the broker's
 * defaults (both false). */
void brokerconf__read(struct broker_facts *f);

/* Reads the facts from one configuration text, include_dir not followed
 * (for tests). */
void brokerconf__scan_text(struct broker_facts *f, const char *text);

#endif
