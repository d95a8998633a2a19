/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What a control message's client-controlled text must be before the
 * plugin acts on it or echoes it: a v5 response topic the reply can go to,
 * and a JSON payload that is UTF-8 and whose strings hold no U+0000 (cJSON
 * decodes "\u0000" and its strings then end there, so "5ms\u0000junk"
 * would read as "5ms"). Nothing here touches the broker.
 */
#ifndef DLQ_CONTROL_INPUT_H
#define DLQ_CONTROL_INPUT_H

#include <stdbool.h>
#include <stddef.h>

/* Why topic (a request's response topic, as the broker handed it over)
 * cannot be published to, as a phrase for a reply ("contains a wildcard
 * (+ or #)"), or NULL when it is a valid topic name: not empty, no '+' or
 * '#', well-formed UTF-8 without U+0000, at most 65535 bytes. MQTT forbids
 * a PUBLISH on anything else, and Mosquitto 2.0.11 would send it all the
 * same. */
const char *control_input__topic_problem(const char *topic);

/* Checks a JSON control payload before it is parsed. Returns true when it
 * may be parsed; false with the reason in err (for an error reply) when it
 * is not well-formed UTF-8, holds a NUL byte, or one of its strings has the
 * escape \u0000: err then names the member it is in ("delay", or the member
 * of a command whose value holds it, correlationData for instance). */
bool control_input__check_json(const char *payload, size_t len, char *err, size_t errlen);

#endif
