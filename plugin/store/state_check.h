/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What a restored state entry may hold (the reader, store/state_read.c,
 * checks it). A state file whose CRCs are
 * right can still hold what the plugin never writes: a hostile or foreign
 * file, or one written by a build with a bug. Whatever of it would later go
 * out as an MQTT v5 property must be text the broker's property functions
 * accept and every subscriber's packet reader takes, else the copy or dead
 * letter made from it is refused by the broker on every tick for ever, or
 * makes its subscribers drop their connection. These checks say what is
 * wrong, so that the decoder can name it in the damage it reports.
 */
#ifndef DLQ_STATE_CHECK_H
#define DLQ_STATE_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* NULL if s (len bytes) is a string MQTT lets a property carry, as
 * mosquitto_validate_utf8 checks it: well-formed UTF-8 without U+0000,
 * control characters or non-characters (an empty string is one); else what
 * it holds instead, as a phrase ("ill-formed UTF-8"). */
const char *state_check__text(const char *s, size_t len);

/* The same for a NUL-terminated string; NULL (an empty string the decoder
 * left out) is one too. */
const char *state_check__text_or_null(const char *s);

/* Whether an encoded header list (headers.h) a copy or dead letter would be
 * published with is what the plugin writes: entries of the five kinds it
 * carries, each whole; strings that are MQTT text; a payload format
 * indicator of 0 or 1; a response topic without wildcards; no kind but user
 * properties twice; no user property of the plugin's own names (it never
 * copies those from a publisher). data may be NULL when len is 0. When it
 * is not, what is wrong is written into why ("a content type holding
 * U+0000") and false returned. */
bool state_check__headers(const uint8_t *data, uint32_t len, char *why, size_t whylen);

#endif
