/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * MQTT v5 Maximum Packet Size, as far as the plugin can know it (Mosquitto
 * 2.1 only): the size the broker gives an outgoing PUBLISH, and, per client
 * id, the Maximum Packet Size the client asked for, where the broker shows
 * it (struct mosquitto_client.max_packet_size in the PERSIST_CLIENT_ADD and
 * _UPDATE events, sent for sessions the broker persists; see
 * docs/memory-and-limits.md). A send whose stamp would pass the limit goes
 * out without the plugin's properties instead of being dropped by the
 * broker.
 */
#ifndef DLQ_PACKET_SIZE_H
#define DLQ_PACKET_SIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The bytes an MQTT variable byte integer of value v takes (1 to 4; 5 for
 * values no packet can have). */
unsigned packet_size__varint_bytes(uint32_t v);

/* The size Mosquitto 2.1 compares with a client's Maximum Packet Size for
 * a PUBLISH of topic_len bytes of topic, payload_len of payload at qos, with
 * props_len bytes of properties (MQTT v5): remaining length plus its own
 * length (lib/send_publish.c, send__real_publish; lib/packet_mosq.c,
 * packet__check_oversize). Properties the broker adds per send that the
 * plugin does not see (message expiry, topic alias, subscription
 * identifier) are not in props_len. */
uint64_t packet_size__publish(size_t topic_len, uint32_t payload_len, uint8_t qos, uint64_t props_len);

/* The bytes one user property takes in a packet. */
static inline uint64_t packet_size__user_property_len(size_t name_len, size_t value_len)
{
	return 1u + 2u + name_len + 2u + value_len;
}

struct dlq_packet_limit {
	struct dlq_packet_limit *next;
	uint32_t max;   /* the client's Maximum Packet Size */
	char id[];
};

/* Client ids with a known Maximum Packet Size. Owned by the plugin
 * instance. */
struct dlq_packet_limits {
	struct dlq_packet_limit **table; /* owned; chains */
	size_t size;                     /* a power of two, or 0 */
	size_t count;
};

/* Records (max > 0) or forgets (max 0) client's Maximum Packet Size.
 * Returns 0 or ENOMEM (then the limit stays unknown: the broker decides). */
int packet_size__limits_set(struct dlq_packet_limits *t, const char *client, uint32_t max);
/* client's Maximum Packet Size, or 0 when unknown. */
uint32_t packet_size__limits_get(const struct dlq_packet_limits *t, const char *client);
void packet_size__limits_cleanup(struct dlq_packet_limits *t);

#endif
