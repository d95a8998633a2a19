/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Conversions between the broker's MQTT v5 property lists and the plugin's
 * encoded header lists (headers.h). Uses only the public mosquitto_property_*
 * API, which the broker and libmosquitto both export.
 */
#ifndef DLQ_PROPS_H
#define DLQ_PROPS_H

#include <stddef.h>
#include <stdint.h>

#include <mosquitto.h>

#include "headers.h"

/* Appends to h the properties of props that a copy or dead letter carries:
 * payload format, content type, response topic, correlation data and user
 * properties other than the plugin's reserved names. Others (message expiry,
 * topic alias, subscription ids) are not carried. Returns 0 or ENOMEM. */
int props__to_headers(const mosquitto_property *props, struct dlq_headers *h);

/* Builds a property list from an encoded header list into *out (which must
 * be NULL on entry). Returns 0, or ENOMEM/EINVAL with *out freed and NULL. */
int props__from_headers(const uint8_t *data, size_t len, mosquitto_property **out);

/* The value of the first user property called name, borrowed, or NULL. The
 * value is copied into buf (bufsize bytes, truncated) so nothing is
 * allocated for the caller. */
const char *props__user_value(const mosquitto_property *props, const char *name, char *buf, size_t bufsize);

#endif
