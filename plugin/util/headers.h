/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A header list: the MQTT v5 properties a message carries from its original
 * to its retry copies and dead letter, kept in one flat buffer so that a
 * tracked message costs one allocation. Each entry is
 *   kind (1 byte) | a_len (2 bytes, big endian) | a bytes | NUL
 *                 [| b_len (2) | b bytes | NUL]   -- user properties only
 * so that strings can be handed to the broker's API without copying.
 */
#ifndef DLQ_HEADERS_H
#define DLQ_HEADERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The kinds carry the MQTT v5 property identifiers they stand for. */
enum dlq_header_kind {
	DLQ_HDR_PAYLOAD_FORMAT = 1,   /* a: one byte */
	DLQ_HDR_CONTENT_TYPE = 3,     /* a: UTF-8 string */
	DLQ_HDR_RESPONSE_TOPIC = 8,   /* a: UTF-8 string */
	DLQ_HDR_CORRELATION_DATA = 9, /* a: binary */
	DLQ_HDR_SUBSCRIPTION_ID = 11, /* a: 4 bytes, big endian; added at publish time only, never stored */
	DLQ_HDR_USER_PROPERTY = 38,   /* a: name, b: value */
};

struct dlq_headers {
	uint8_t *data; /* owned (malloc) */
	size_t len;
	size_t cap;
};

struct dlq_header {
	uint8_t kind;
	const char *a;  /* borrowed from the buffer, NUL-terminated */
	uint16_t a_len;
	const char *b;  /* user properties only; NULL otherwise */
	uint16_t b_len;
};

/* A user property by its two strings, both borrowed and NUL-terminated:
 * what the plugin adds to a retry copy or dead letter, handed to the port
 * as it is, without an encoded copy. */
struct dlq_user_prop {
	const char *name;
	const char *value;
};

/* Appends an entry. b is used for DLQ_HDR_USER_PROPERTY only. Returns 0,
 * EINVAL (a part over 65535 bytes) or ENOMEM. */
int headers__add(struct dlq_headers *h, uint8_t kind, const void *a, size_t a_len, const void *b, size_t b_len);

/* Appends a user property from two NUL-terminated strings. */
int headers__add_user(struct dlq_headers *h, const char *name, const char *value);

/* Appends every entry of another encoded list. */
int headers__append_raw(struct dlq_headers *h, const uint8_t *data, size_t len);

/* Reads the entry at *pos of an encoded list and advances *pos. Returns false
 * at the end or on a malformed buffer. */
bool headers__next(const uint8_t *data, size_t len, size_t *pos, struct dlq_header *out);

/* True if name (len bytes) is a user property name the plugin writes itself
 * (dlq-id, retry-count, origin-*, dead-letter-*): such properties from a
 * publisher are not carried to copies and dead letters. */
bool headers__is_reserved(const char *name, size_t len);

void headers__free(struct dlq_headers *h);

#endif
