/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The policy match cache (see match_cache.h, which holds the hash and the
 * hit path, inlined into the path of every inbound publish): the slots'
 * lifetime, and the lookup's rarer paths.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "model/match_cache.h"

size_t match_cache__slot(const char *topic, size_t len)
{
	return match_cache__slot_of(match_cache__hash(topic, len));
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

const struct dlq_policy *match_cache__miss(struct dlq_match_cache *c, const struct dlq_policy_table *t,
		unsigned generation, const char *topic)
{
	if(c->slots == NULL || topic == NULL) return policy__match(t, topic);
	if(c->generation != generation){
		/* The table changed under the slots: their policies point into
		 * the old one. */
		memset(c->slots, 0, DLQ_MATCH_SLOTS * sizeof(*c->slots));
		c->generation = generation;
	}
	size_t len = strlen(topic);
	if(len - 1 >= DLQ_MATCH_TOPIC_MAX) return policy__match(t, topic);
	uint64_t h = match_cache__hash(topic, len);
	struct dlq_match_slot *s = &c->slots[match_cache__slot_of(h)];
	c->misses++;
	const struct dlq_policy *p = policy__match(t, topic);
	s->hash = h;
	s->len = (uint16_t)len;
	s->policy = p;
	memcpy(s->topic, topic, len);
	return p;
}
