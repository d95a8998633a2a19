/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The policy table: per topic filter, how many deliveries a message gets,
 * where its dead letter goes and where its retry copies go. A table is built
 * once, validated as a whole, and then only read; matching a topic against it
 * is on the path of every inbound publish, so it walks a trie of filter levels
 * instead of trying every filter.
 */
#ifndef DLQ_POLICY_H
#define DLQ_POLICY_H

#include <stdbool.h>
#include <stddef.h>

struct dlq_policy {
	char *filter;         /* owned; a valid subscription filter */
	char *dead_letter;    /* owned; a valid publish topic outside every filter */
	char *retry_to;       /* owned; a valid publish topic, or NULL: back to the delivery topic */
	unsigned max_attempts;/* DLQ_MAX_ATTEMPTS_MIN..DLQ_MAX_ATTEMPTS_MAX */
	unsigned index;       /* position in declaration order, set by policy__table_add */
	unsigned wildcards;   /* topic__wildcards(filter), set by policy__table_add */
	char *source;         /* owned; where it was declared, e.g. "plugin_opt_policy #2" or "policies.json: policies[3]" */
};

struct policy_trie;

struct dlq_policy_table {
	struct dlq_policy *items; /* owned array, count entries */
	size_t count;
	size_t capacity;
	struct policy_trie *trie; /* owned; built by policy__table_finish */
};

/* Moves *p into the table (the table owns its strings afterwards; *p is
 * zeroed). Returns 0, or ENOMEM. Does not validate across policies. */
int policy__table_add(struct dlq_policy_table *t, struct dlq_policy *p);

/* Validates the table as a whole and builds the match index. Rejects
 * duplicate filters and any dead-letter topic matched by any filter; on
 * failure writes a message naming both parties into err and returns EINVAL
 * (ENOMEM when out of memory). The table is unusable for matching until this
 * returned 0. */
int policy__table_finish(struct dlq_policy_table *t, char *err, size_t errlen);

/* The policy that applies to topic, or NULL. When several filters match, the
 * most specific wins: fewest wildcards, then the longest filter, then the
 * first declared. The returned pointer is borrowed from the table. */
const struct dlq_policy *policy__match(const struct dlq_policy_table *t, const char *topic);

/* Frees everything the table owns and zeroes it. */
void policy__table_free(struct dlq_policy_table *t);

/* Frees the strings of a policy that was never added to a table. */
void policy__free(struct dlq_policy *p);

#endif
