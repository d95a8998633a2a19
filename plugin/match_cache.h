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

#include <stddef.h>
#include <stdint.h>

#include "policy.h"

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

/* policy__match(t, topic), answered from the cache when it can be.
 * generation identifies t: a different value than the last call's empties
 * the cache first. The result is borrowed from t. */
const struct dlq_policy *match_cache__match(struct dlq_match_cache *c, const struct dlq_policy_table *t,
		unsigned generation, const char *topic);

/* The slot the cache files topic (len bytes) in; exposed for tests that
 * need two topics in one slot. */
size_t match_cache__slot(const char *topic, size_t len);

#endif
