/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Conversions between the broker's MQTT v5 property lists and the plugin's
 * encoded header lists (headers.h). Lists are read through the reader the
 * plugin found at startup (prop_reader.h), since the broker need not export
 * the read functions; they are built with the mosquitto_property_add_*
 * functions every 2.0 and 2.1 broker exports. A NULL string from the reader
 * (2.1's empty string) is read as "".
 */
#ifndef DLQ_PROPS_H
#define DLQ_PROPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mosquitto.h>

#include "broker/prop_reader.h"
#include "util/headers.h"

/* Appends to h the properties of props that a copy or dead letter carries:
 * payload format, content type, response topic, correlation data and user
 * properties other than the plugin's reserved names (empty names and values
 * kept as empty). Others (message expiry, topic alias, subscription ids)
 * are not carried. Returns 0 or ENOMEM. */
int props__to_headers(const struct dlq_prop_reader *r, const mosquitto_property *props, struct dlq_headers *h);

/* The same with the plugin's reserved names kept too: a collected dead
 * letter's (plugin_opt_collect), whose dead-letter-* properties are what
 * it is. */
int props__all_to_headers(const struct dlq_prop_reader *r, const mosquitto_property *props, struct dlq_headers *h);

/* Builds a property list from an encoded header list into *out (which must
 * be NULL on entry). Returns 0, or ENOMEM/EINVAL with *out freed and NULL. */
int props__from_headers(const uint8_t *data, size_t len, mosquitto_property **out);

/* The value of the first user property called name, or NULL when there is
 * none. The value is copied into buf (bufsize bytes, truncated; an empty
 * value is "") so nothing is allocated for the caller. */
const char *props__user_value(const struct dlq_prop_reader *r, const mosquitto_property *props, const char *name,
		char *buf, size_t bufsize);

/* The value of the first user property called name, whole: *out is the
 * reader's copy, to free with r->free_copy, or NULL for an empty value on
 * 2.1 (read it as ""). Returns whether there is one (*out NULL when not).
 * For values whose meaning a cut would change: cut to a buffer, "0…05000"
 * reads as 5, and "0…0500x" as 500 where it is no number at all. */
bool props__user_copy(const struct dlq_prop_reader *r, const mosquitto_property *props, const char *name, char **out);

/* The same for the last user property called name: the one the plugin
 * appended, when a publisher sent its own of that name before it. */
const char *props__last_user_value(const struct dlq_prop_reader *r, const mosquitto_property *props,
		const char *name, char *buf, size_t bufsize);

/* Whether props has a string property id (content type, response topic).
 * *out is then the reader's copy, to free with r->free_copy, or NULL for an
 * empty string on 2.1 (read it as ""); NULL when absent. */
bool props__string(const struct dlq_prop_reader *r, const mosquitto_property *props, int id, char **out);

/* The same for a binary property (correlation data): *out may be NULL with
 * *len 0 for empty data. */
bool props__binary(const struct dlq_prop_reader *r, const mosquitto_property *props, int id, void **out,
		uint16_t *len);

#endif
