/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * MQTT's wire encodings, for the test clients that write packets by hand
 * (the integration tests' raw client, raw_packet.c, and the soak's
 * connections, soak/mqtt.c): big-endian integers, length-prefixed strings
 * and variable byte integers, read from a buffer and written to a packet
 * body. Each of them keeps its own body (a fixed one that fails the test
 * when full, a growing one): it defines struct body and
 *   static void put_bytes(struct body *p, const void *data, size_t len);
 * before it includes this file, and the writers below append through it.
 */
#ifndef DLQ_MQTT_WIRE_H
#define DLQ_MQTT_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void put8(struct body *p, unsigned v)
{
	unsigned char c = (unsigned char)v;
	put_bytes(p, &c, 1);
}

static inline void put16(struct body *p, unsigned v)
{
	put8(p, (v >> 8) & 0xFF);
	put8(p, v & 0xFF);
}

static inline void put32(struct body *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p, v & 0xFFFF);
}

static inline void put_str(struct body *p, const char *s)
{
	put16(p, (unsigned)strlen(s));
	put_bytes(p, s, strlen(s));
}

static inline void put_varint(struct body *p, size_t len)
{
	do{
		unsigned char d = len % 128;
		len /= 128;
		put8(p, len ? d | 0x80 : d);
	}while(len);
}

/* CONNECT's Session Expiry Interval and Receive Maximum properties, each
 * only when not 0 (the broker's defaults: no expiry, 65,535). */
static inline void put_session_props(struct body *props, uint32_t expiry_s, unsigned receive_max)
{
	if(expiry_s){
		put8(props, 0x11);
		put32(props, expiry_s);
	}
	if(receive_max){
		put8(props, 0x21);
		put16(props, receive_max);
	}
}

/* A variable byte integer at *pos in buf[0..len): 1 read, 0 incomplete,
 * -1 malformed (more than four bytes). */
static inline int get_varint(const unsigned char *buf, size_t len, size_t *pos, size_t *value)
{
	size_t v = 0;
	for(unsigned shift = 0; shift < 28; shift += 7){
		if(*pos >= len){
			return 0;
		}
		unsigned char d = buf[(*pos)++];
		v |= (size_t)(d & 0x7F) << shift;
		if(!(d & 0x80)){
			*value = v;
			return 1;
		}
	}
	return -1;
}

/* A two-byte integer at *pos: false when buf ends first. */
static inline bool get16(const unsigned char *buf, size_t len, size_t *pos, unsigned *v)
{
	if(*pos + 2 > len){
		return false;
	}
	*v = (unsigned)buf[*pos] << 8 | buf[*pos + 1];
	*pos += 2;
	return true;
}

/* A length-prefixed string or binary datum, borrowed from buf. */
static inline bool get_str(const unsigned char *buf, size_t len, size_t *pos, const unsigned char **s, size_t *slen)
{
	unsigned n;
	if(!get16(buf, len, pos, &n) || *pos + n > len){
		return false;
	}
	*s = buf + *pos;
	*slen = n;
	*pos += n;
	return true;
}

#endif
