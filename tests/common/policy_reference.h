/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The reference the policy trie is checked against, by the unit tests
 * (test_policy.c) and the engine's fuzz target (fuzz_engine.c): every
 * policy tried with topic__matches, precedence as policy.h states it.
 */
#ifndef DLQ_TEST_POLICY_REFERENCE_H
#define DLQ_TEST_POLICY_REFERENCE_H

#include <stddef.h>
#include <string.h>

#include "model/policy.h"
#include "util/topic.h"

/* The policy of t that applies to topic: fewest wildcards, then the longest
 * filter, then the first declared (a tie on both keeps the earlier). NULL
 * when none matches. */
static inline const struct dlq_policy *policy_reference__match(const struct dlq_policy_table *t, const char *topic)
{
	const struct dlq_policy *best = NULL;
	for(size_t i = 0; i < t->count; i++){
		const struct dlq_policy *p = &t->items[i];
		if(!topic__matches(p->filter, topic)) continue;
		if(best == NULL || p->wildcards < best->wildcards
				|| (p->wildcards == best->wildcards && strlen(p->filter) > strlen(best->filter))){
			best = p;
		}
	}
	return best;
}

#endif
