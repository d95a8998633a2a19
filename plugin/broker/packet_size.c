/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The size of an outgoing PUBLISH as Mosquitto 2.1 counts it, and the table
 * of the Maximum Packet Sizes known per client (see packet_size.h).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "broker/packet_size.h"
#include "util/chains.h"

#define INITIAL_SIZE 64

unsigned packet_size__varint_bytes(uint32_t v)
{
	if(v < 128u) return 1;
	if(v < 16384u) return 2;
	if(v < 2097152u) return 3;
	if(v < 268435456u) return 4;
	return 5;
}

uint64_t packet_size__publish(size_t topic_len, uint32_t payload_len, uint8_t qos, uint64_t props_len)
{
	uint64_t remaining = 2u + (uint64_t)topic_len + payload_len + (qos > 0 ? 2u : 0u);
	remaining += props_len + packet_size__varint_bytes(props_len > UINT32_MAX ? UINT32_MAX : (uint32_t)props_len);
	return remaining + packet_size__varint_bytes(remaining > UINT32_MAX ? UINT32_MAX : (uint32_t)remaining);
}

static uint64_t hash_id(const char *id)
{
	uint64_t h = 14695981039346656037ull;
	for(const unsigned char *p = (const unsigned char *)id; *p; p++){
		h ^= *p;
		h *= 1099511628211ull;
	}
	return h;
}

static struct dlq_packet_limit **slot_of(const struct dlq_packet_limits *t, const char *client)
{
	struct dlq_packet_limit **pp = &t->table[hash_id(client) & (t->size - 1)];
	while(*pp && strcmp((*pp)->id, client)) pp = &(*pp)->next;
	return pp;
}

static uint64_t limit_key(const void *item)
{
	return hash_id(((const struct dlq_packet_limit *)item)->id);
}

/* Doubles the table when it is as full as it is long (a full table only
 * gets slower). */
static int grow(struct dlq_packet_limits *t)
{
	if(t->table && t->count < t->size) return 0;
	size_t n = t->table ? t->size * 2 : INITIAL_SIZE;
	struct dlq_packet_limit **nt = calloc(n, sizeof(*nt));
	if(nt == NULL) return t->table ? 0 : ENOMEM;
	if(t->table){
		chains__rehash((void **)t->table, t->size, (void **)nt, n, offsetof(struct dlq_packet_limit, next), limit_key);
	}
	free(t->table);
	t->table = nt;
	t->size = n;
	return 0;
}

int packet_size__limits_set(struct dlq_packet_limits *t, const char *client, uint32_t max)
{
	if(t->table){
		struct dlq_packet_limit **pp = slot_of(t, client);
		if(*pp){
			if(max){
				(*pp)->max = max;
				return 0;
			}
			struct dlq_packet_limit *e = *pp;
			*pp = e->next;
			free(e);
			t->count--;
			return 0;
		}
	}
	if(max == 0) return 0;
	if(grow(t)) return ENOMEM;
	size_t len = strlen(client);
	struct dlq_packet_limit *e = malloc(sizeof(*e) + len + 1);
	if(e == NULL) return ENOMEM;
	memcpy(e->id, client, len + 1);
	e->max = max;
	size_t k = hash_id(client) & (t->size - 1);
	e->next = t->table[k];
	t->table[k] = e;
	t->count++;
	return 0;
}

uint32_t packet_size__limits_get(const struct dlq_packet_limits *t, const char *client)
{
	if(t->count == 0) return 0;
	struct dlq_packet_limit *e = *slot_of(t, client);
	return e ? e->max : 0;
}

void packet_size__limits_cleanup(struct dlq_packet_limits *t)
{
	for(size_t i = 0; t->table && i < t->size; i++){
		struct dlq_packet_limit *e = t->table[i];
		while(e){
			struct dlq_packet_limit *next = e->next;
			free(e);
			e = next;
		}
	}
	free(t->table);
	memset(t, 0, sizeof(*t));
}
