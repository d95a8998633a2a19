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
#include <stdint.h>

/* dead_letter_keep not given: only plugin_opt_dead_letter_keep bounds the policy. */
#define DLQ_KEEP_UNSET UINT64_MAX
/* dead_letter_keep_for not given: plugin_opt_dead_letter_keep_for ages the
 * policy's letters. */
#define DLQ_KEEP_FOR_UNSET UINT64_MAX

struct dlq_policy {
	char *filter;         /* owned; a valid subscription filter */
	char *dead_letter;    /* owned; a valid publish topic outside every filter */
	char *retry_to;       /* owned; a valid publish topic, or NULL: back to the delivery topic */
	unsigned max_attempts;/* DLQ_MAX_ATTEMPTS_MIN..DLQ_MAX_ATTEMPTS_MAX */
	uint64_t retry_delay_ms;     /* delay before the first retry copy; 0: at once */
	uint64_t retry_max_delay_ms; /* cap of computed and requested delays */
	double retry_backoff;        /* multiplier per further retry, 1..DLQ_RETRY_BACKOFF_MAX */
	double retry_jitter;         /* 0..1: a delay d is drawn from [d*(1-jitter), d] */
	uint64_t dead_letter_keep;   /* its own bound of kept dead letters (bytes); DLQ_KEEP_UNSET: the global one alone */
	uint64_t dead_letter_keep_for_ms; /* its kept dead letters' age bound; 0: none ("forever"); DLQ_KEEP_FOR_UNSET: the store's */
	uint64_t ack_timeout_ms;     /* how long a delivery may go unsettled (deadlines.h); 0: no deadline */
	char *ack_timeout;           /* owned: ack_timeout as configured ("30s"), for dead letters' reasons; NULL when 0 */
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

/* What a policy of t says of filter, a topic filter an option gives for
 * messages of another kind (a collect filter, a redrive request's topic):
 * POLICY_TAKES_FILTER, it overlaps the policy's filter (a message on it
 * would be tracked too); POLICY_TAKES_DEAD_LETTER, it takes the policy's
 * dead-letter topic; *by is then that policy, the first in t. */
enum policy_takes { POLICY_TAKES_NOTHING, POLICY_TAKES_FILTER, POLICY_TAKES_DEAD_LETTER };
enum policy_takes policy__takes(const struct dlq_policy_table *t, const char *filter, const struct dlq_policy **by);

/* The position of p in t's array, or -1 when p is NULL or belongs to
 * another table (one a reload replaced). Inline: every counter and gauge
 * update of a tracked message asks. */
static inline long policy__index_in(const struct dlq_policy_table *t, const struct dlq_policy *p)
{
	/* A policy's index is its place in its own table, which stays while
	 * anything uses it (retired tables, reload.c): p is t's if t holds it
	 * there. No division, as a pointer difference would take. */
	if(p == NULL || p->index >= t->count || &t->items[p->index] != p) return -1;
	return (long)p->index;
}

/* Frees everything the table owns and zeroes it. */
void policy__table_free(struct dlq_policy_table *t);

/* Sets the defaults of the optional fields (no delay, backoff 1, jitter 0,
 * retry_max_delay DLQ_DEFAULT_RETRY_MAX_DELAY_MS, the store's bounds
 * unset: DLQ_KEEP_UNSET, DLQ_KEEP_FOR_UNSET) and nothing else. */
void policy__set_defaults(struct dlq_policy *p);

/* The delay before the retry copy of delivery attempt (1 = the first):
 * retry_delay * retry_backoff^(attempt-1), capped by retry_max_delay, then
 * jittered with random (a uniform draw from [0, 1)). When requested_ms is
 * not negative, it replaces the computed delay (capped, not jittered). */
uint64_t policy__retry_delay_ms(const struct dlq_policy *p, unsigned attempt, int64_t requested_ms, double random);

/* Frees the strings of a policy that was never added to a table. */
void policy__free(struct dlq_policy *p);

#endif
