/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The MQTT packets of the raw client (raw.h), built into and parsed from
 * plain buffers: what raw.c shares with raw_packet.c and tests do not see.
 * Nothing here touches a socket; raw.c sends and reads the bytes. A packet
 * that does not parse fails the test, naming the client.
 */
#ifndef DLQ_IT_RAW_PACKET_H
#define DLQ_IT_RAW_PACKET_H

#include <stdbool.h>
#include <stddef.h>

#include "harness_int.h"
#include "raw.h"

/* MQTT control packet types (the high nibble of the first byte). */
enum {
	PKT_CONNECT = 1, PKT_CONNACK = 2, PKT_PUBLISH = 3, PKT_PUBACK = 4,
	PKT_SUBSCRIBE = 8, PKT_SUBACK = 9, PKT_UNSUBSCRIBE = 10, PKT_PINGREQ = 12, PKT_PINGRESP = 13,
	PKT_DISCONNECT = 14,
};

/* The body of a packet being built: everything after the fixed header. */
struct body {
	unsigned char b[4096];
	size_t n;
};

/* The most bytes packet__frame writes: a fixed header of at most 5 bytes
 * and the body. */
#define PACKET_MAX (sizeof(((struct body *)0)->b) + 5)

/* A received packet; body points into the reader's buffer. */
struct packet {
	unsigned type, flags;
	const unsigned char *body;
	size_t len;
};

/* Fails the test at the caller's line, naming the raw client id. */
#define fail_raw_id(file, line, id, fmt, ...) \
	fail_at((file), (line), "raw client %s: " fmt, (id), __VA_ARGS__)

/* ---- building: bodies fail the test if they outgrow struct body ---- */

/* A CONNECT body with o's options. */
void packet__connect(struct body *p, const struct raw_options *o);
/* A SUBSCRIBE body: one filter at qos, packet id mid. */
void packet__subscribe(struct body *p, bool v5, unsigned mid, const char *filter, int qos);
/* A PUBLISH body with packet id mid (ignored at QoS 0) and, in v5, the
 * encoded properties props (props_len bytes, without their length). */
void packet__publish(struct body *p, bool v5, const char *topic, const void *payload, size_t len, int qos,
		unsigned mid, const void *props, size_t props_len);
/* A PUBACK body for packet id mid. */
void packet__puback(struct body *p, unsigned mid);

/* Writes the fixed header (first, the first byte, then the remaining
 * length) and the body to out, which has room for PACKET_MAX bytes.
 * Returns how many bytes it wrote. */
size_t packet__frame(unsigned first, const struct body *body, unsigned char *out);

/* ---- parsing ---- */

/* The first whole packet in buf[0..len): 1, with the packet in *p
 * (borrowing from buf) and its length with the fixed header in *size; 0 if
 * buf holds no whole packet yet; -1 if the packet's length is malformed. */
int packet__unframe(const unsigned char *buf, size_t len, struct packet *p, size_t *size);

/* A two-byte integer at *pos; false if buf ends first. */
bool packet__get16(const unsigned char *buf, size_t len, size_t *pos, unsigned *v);

/* Skips a v5 property list at *pos, copying user properties into m (NULL:
 * dropped). False if malformed or of an unknown property. */
bool packet__get_properties(const unsigned char *buf, size_t len, size_t *pos, struct raw_msg *m);

/* Decodes the PUBLISH p received by client id (v5: with properties) into
 * a new message, which the caller frees with packet__msg_free; fails the
 * test if p is malformed. Its connection is left 0. */
struct raw_msg *packet__decode_publish(const char *file, int line, const char *id, bool v5,
		const struct packet *p);
void packet__msg_free(struct raw_msg *m);

/* raw_user (raw.h), which reads a decoded message, is here too. */

#endif
