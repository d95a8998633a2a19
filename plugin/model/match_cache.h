/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A bounded cache of policy matches by topic, in front of policy__match on
 * the path of every inbound publish. Most traffic repeats a modest set of
 * topics, and most of it matches no policy at all: a hit costs a hash of the
 * topic and one compare, whatever the number of policies, where the trie
 * walk costs levels times log(children) and grows with the table. The cache
 * is direct-mapped (a slot per hash bucket, a newcomer replaces the
 * incumbent), holds topics of up to DLQ_MATCH_TOPIC_MAX bytes in the slot
 * itself (longer ones are matched uncached), and forgets everything when the
 * policy generation it was filled under changes (a reload swapped the
 * table): what it answers is always what policy__match would answer.
 */
#ifndef DLQ_MATCH_CACHE_H
#define DLQ_MATCH_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "model/policy.h"

#define DLQ_MATCH_SLOT_BITS 10
#define DLQ_MATCH_SLOTS (1u << DLQ_MATCH_SLOT_BITS)
#define DLQ_MATCH_TOPIC_MAX 110   /* a slot is 128 bytes */

struct dlq_match_slot {
	uint64_t hash;
	const struct dlq_policy *policy; /* borrowed from the table; NULL: no policy matches */
	uint16_t len;                    /* 0: empty (the empty topic is never cached) */
	char topic[DLQ_MATCH_TOPIC_MAX]; /* len bytes, not terminated */
};

struct dlq_match_cache {
	struct dlq_match_slot *slots; /* owned, DLQ_MATCH_SLOTS; NULL: every lookup goes to the trie */
	unsigned generation;          /* the policy generation the slots were filled under */
	uint64_t hits;                /* for tests and profiles */
	uint64_t misses;
};

/* Returns 0 or ENOMEM (then the cache stays usable, uncached). */
int match_cache__init(struct dlq_match_cache *c, unsigned generation);
void match_cache__cleanup(struct dlq_match_cache *c);

/* The hash of topic (len bytes), read eight bytes at a time; it needs no
 * resistance to chosen collisions, since two topics in one slot only take
 * turns in it: a client that publishes on colliding topics costs the broker
 * what the trie costs, no more. In the header so that the lookup, on the
 * path of every inbound publish, is inlined into it. */
#define DLQ_MATCH_MUL1 0x9e3779b97f4a7c15ull
#define DLQ_MATCH_MUL2 0xbf58476d1ce4e5b9ull

static inline uint64_t match_cache__load64(const char *p)
{
	uint64_t w;
	memcpy(&w, p, sizeof(w));
	return w;
}

static inline uint64_t match_cache__mix(uint64_t h, uint64_t w)
{
	return (h ^ w) * DLQ_MATCH_MUL1;
}

/* The words are those from the start, then the eight bytes that end the
 * topic (overlapping the previous word, which is fine for a hash): a topic
 * of 8 to 16 bytes, most of them, is two loads. */
static inline uint64_t match_cache__hash(const char *topic, size_t len)
{
	uint64_t h = (uint64_t)len * DLQ_MATCH_MUL2;
	if(len < 8){
		uint64_t w = 0;
		for(size_t i = 0; i < len; i++) w = (w << 8) | (unsigned char)topic[i];
		return match_cache__mix(h, w);
	}
	h = match_cache__mix(h, match_cache__load64(topic));
	for(size_t i = 8; i + 8 < len; i += 8) h = match_cache__mix(h, match_cache__load64(topic + i));
	return match_cache__mix(h, match_cache__load64(topic + len - 8));
}

/* The slot of a hash: the top bits of a product, which depend on every bit
 * of the hash (multiplicative hashing), so the hash needs no finishing. */
static inline size_t match_cache__slot_of(uint64_t h)
{
	return (size_t)((h * DLQ_MATCH_MUL2) >> (64 - DLQ_MATCH_SLOT_BITS));
}

/* a and b (len bytes each, len > 0) are equal; as the hash reads them, in
 * words. memcmp is a call that costs as much as the whole lookup on short
 * topics. */
static inline bool match_cache__same(const char *a, const char *b, size_t len)
{
	if(len < 8){
		for(size_t i = 0; i < len; i++){
			if(a[i] != b[i]) return false;
		}
		return true;
	}
	bool same = match_cache__load64(a) == match_cache__load64(b)
			&& match_cache__load64(a + len - 8) == match_cache__load64(b + len - 8);
	for(size_t i = 8; same && i + 8 < len; i += 8){
		same = match_cache__load64(a + i) == match_cache__load64(b + i);
	}
	return same;
}

/* The hit path: whether the cache holds topic's answer for generation,
 * which is then in *policy. false: ask match_cache__match. Inline, for
 * the path of every inbound publish. */
static inline bool match_cache__hit(struct dlq_match_cache *c, unsigned generation, const char *topic,
		const struct dlq_policy **policy)
{
	if(c->slots == NULL || topic == NULL || c->generation != generation) return false;
	size_t len = strlen(topic);
	/* The empty topic and the longest ones are not cached. */
	if(len - 1 >= DLQ_MATCH_TOPIC_MAX) return false;
	uint64_t h = match_cache__hash(topic, len);
	const struct dlq_match_slot *s = &c->slots[match_cache__slot_of(h)];
	if(s->hash != h || s->len != len || !match_cache__same(s->topic, topic, len)) return false;
	c->hits++;
	*policy = s->policy;
	return true;
}

/* What match_cache__hit did not answer, out of line so that a hit pays
 * for none of its registers: the trie answers, and the answer takes the
 * topic's slot (after emptying the cache when the generation changed). */
const struct dlq_policy *match_cache__miss(struct dlq_match_cache *c, const struct dlq_policy_table *t,
		unsigned generation, const char *topic);

/* policy__match(t, topic), answered from the cache when it can be.
 * generation identifies t: a different value than the last call's empties
 * the cache first. The result is borrowed from t. */
static inline const struct dlq_policy *match_cache__match(struct dlq_match_cache *c,
		const struct dlq_policy_table *t, unsigned generation, const char *topic)
{
	const struct dlq_policy *p;
	return match_cache__hit(c, generation, topic, &p) ? p : match_cache__miss(c, t, generation, topic);
}

/* The slot the cache files topic (len bytes) in; exposed for tests that
 * need two topics in one slot. */
size_t match_cache__slot(const char *topic, size_t len);

#endif
