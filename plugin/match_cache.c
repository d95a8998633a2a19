/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The policy match cache (see match_cache.h). The hash reads the topic eight
 * bytes at a time; it needs no resistance to chosen collisions, since two
 * topics in one slot only take turns in it: a client that publishes on
 * colliding topics costs the broker what the trie costs, no more.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "match_cache.h"

#define MUL1 0x9e3779b97f4a7c15ull
#define MUL2 0xbf58476d1ce4e5b9ull

static inline uint64_t load64(const char *p)
{
	uint64_t w;
	memcpy(&w, p, sizeof(w));
	return w;
}

static inline uint64_t mix(uint64_t h, uint64_t w)
{
	return (h ^ w) * MUL1;
}

static inline uint64_t hash_of(const char *topic, size_t len)
{
	uint64_t h = (uint64_t)len * MUL2;
	size_t i = 0;

	if(len >= 8){
		for(; i + 8 <= len; i += 8){
			h = mix(h, load64(topic + i));
		}
		/* The last, partial, word is read as the eight bytes that end
		 * the topic: they overlap the previous word, which is fine for
		 * a hash. */
		if(i < len) h = mix(h, load64(topic + len - 8));
	}else{
		uint64_t w = 0;
		for(; i < len; i++){
			w = (w << 8) | (unsigned char)topic[i];
		}
		h = mix(h, w);
	}
	return h ^ (h >> 32);
}

/* The slot of a hash: the top bits of a product, which depend on every bit
 * of the hash (multiplicative hashing). */
static inline size_t slot_of(uint64_t h)
{
	return (size_t)((h * MUL2) >> (64 - DLQ_MATCH_SLOT_BITS));
}

size_t match_cache__slot(const char *topic, size_t len)
{
	return slot_of(hash_of(topic, len));
}

/* a and b (len bytes each) are equal; as the hash reads them, in words.
 * memcmp is a call that costs as much as the whole lookup on short topics. */
static inline bool same_bytes(const char *a, const char *b, size_t len)
{
	size_t i = 0;
	if(len >= 8){
		for(; i + 8 <= len; i += 8){
			if(load64(a + i) != load64(b + i)) return false;
		}
		return i == len || load64(a + len - 8) == load64(b + len - 8);
	}
	for(; i < len; i++){
		if(a[i] != b[i]) return false;
	}
	return true;
}

int match_cache__init(struct dlq_match_cache *c, unsigned generation)
{
	memset(c, 0, sizeof(*c));
	c->generation = generation;
	c->slots = calloc(DLQ_MATCH_SLOTS, sizeof(*c->slots));
	return c->slots ? 0 : ENOMEM;
}

void match_cache__cleanup(struct dlq_match_cache *c)
{
	free(c->slots);
	memset(c, 0, sizeof(*c));
}

/* A miss: the trie answers, and the answer takes the slot. Apart from the
 * lookup so that a hit pays for none of its registers. */
static __attribute__((noinline)) const struct dlq_policy *fill(struct dlq_match_cache *c,
		struct dlq_match_slot *s, uint64_t h, const struct dlq_policy_table *t, const char *topic, size_t len)
{
	c->misses++;
	const struct dlq_policy *p = policy__match(t, topic);
	s->hash = h;
	s->len = (uint16_t)len;
	s->policy = p;
	memcpy(s->topic, topic, len);
	return p;
}

/* The table changed under the slots: their policies point into the old one. */
static __attribute__((noinline)) void empty(struct dlq_match_cache *c, unsigned generation)
{
	memset(c->slots, 0, DLQ_MATCH_SLOTS * sizeof(*c->slots));
	c->generation = generation;
}

const struct dlq_policy *match_cache__match(struct dlq_match_cache *c, const struct dlq_policy_table *t,
		unsigned generation, const char *topic)
{
	if(c->slots == NULL || topic == NULL) return policy__match(t, topic);
	if(c->generation != generation) empty(c, generation);
	size_t len = strlen(topic);
	if(len == 0 || len > DLQ_MATCH_TOPIC_MAX) return policy__match(t, topic);

	uint64_t h = hash_of(topic, len);
	struct dlq_match_slot *s = &c->slots[slot_of(h)];
	if(s->hash == h && s->len == len && same_bytes(s->topic, topic, len)){
		c->hits++;
		return s->policy;
	}
	return fill(c, s, h, t, topic, len);
}
