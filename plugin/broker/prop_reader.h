/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The functions that read an MQTT v5 property list, as one record of
 * pointers. Upstream's broker does not promise to export them (2.0.21 does
 * not), so the plugin finds them at startup (broker_caps.c) in the broker or
 * in the client library, and the core reads properties only through this
 * record. Unit tests fill it with libmosquitto's functions or with a fake.
 *
 * Two broker lines hand over empty strings differently: 2.0.x's read
 * functions give an allocated "", 2.1.x's give NULL. Callers of this record
 * must treat a NULL string as "" (props.c does).
 */
#ifndef DLQ_PROP_READER_H
#define DLQ_PROP_READER_H

#include <stdbool.h>
#include <stdint.h>

#include <mosquitto.h>

struct dlq_prop_reader {
	int (*identifier)(const mosquitto_property *p);
	const mosquitto_property *(*next)(const mosquitto_property *p);
	/* Each returns the property found (NULL: none) and, for strings and
	 * binary data, an allocated copy through its pointer arguments, which
	 * the caller frees with free_copy below. */
	const mosquitto_property *(*read_byte)(const mosquitto_property *p, int id, uint8_t *value, bool skip_first);
	const mosquitto_property *(*read_string)(const mosquitto_property *p, int id, char **value, bool skip_first);
	const mosquitto_property *(*read_binary)(const mosquitto_property *p, int id, void **value, uint16_t *len,
			bool skip_first);
	const mosquitto_property *(*read_string_pair)(const mosquitto_property *p, int id, char **name, char **value,
			bool skip_first);
	/* Frees a copy made by the read functions, with the allocator that made
	 * it: mosquitto_free for the broker's functions, libc's free for
	 * libmosquitto's. */
	void (*free_copy)(void *p);
};

#endif
