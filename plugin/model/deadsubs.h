/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Subscribers of dead letters: a dead-letter topic lies outside every
 * policy filter (the configuration refuses one inside), so that no worker
 * receives spent messages as new deliveries. A subscriber's filter can
 * still take in both, `#` or `+/#` say: that client gets every dead letter
 * as if it were work. Where the broker shows subscriptions (2.1's SUBSCRIBE
 * event), the engine logs such a subscription once per client and filter
 * and counts each one (getStatus, subscribersOfDeadLetters). An inspector
 * of `dead/#` alone reads dead letters and no tracked message: not
 * flagged. The set of (client, filter) pairs logged is bounded: a client
 * leaves it when its connection ends, and past DEADSUBS_MAX pairs the
 * warnings stop (one notice says so) while the counting goes on.
 */
#ifndef DLQ_DEADSUBS_H
#define DLQ_DEADSUBS_H

#include <stdbool.h>
#include <stddef.h>

#include "model/policy.h"

#define DEADSUBS_MAX 1024

struct dlq_deadsub {
	char *client; /* owned */
	char *filter; /* owned: as subscribed */
};

struct dlq_deadsubs {
	struct dlq_deadsub *items; /* owned, count entries */
	size_t count;
	size_t capacity;
	bool full_noted; /* the "no more warnings" notice was logged since the set was last full */
};

/* Whether filter (a subscription's, "$share/<group>/" included) takes in
 * both a dead-letter topic of a policy of t and messages of a policy
 * filter of t: then true, with *dead_letter and *policy_filter borrowed
 * from t (the first such of each, in declaration order). */
bool deadsubs__match(const struct dlq_policy_table *t, const char *filter, const char **dead_letter,
		const char **policy_filter);

/* Whether (client, filter) is in the set. */
bool deadsubs__known(const struct dlq_deadsubs *s, const char *client, const char *filter);

/* Adds (client, filter), not in the set. Returns 0, ENOSPC (DEADSUBS_MAX
 * pairs are in it) or ENOMEM. */
int deadsubs__add(struct dlq_deadsubs *s, const char *client, const char *filter);

/* Removes every pair of client. */
void deadsubs__forget(struct dlq_deadsubs *s, const char *client);

/* Frees everything and zeroes *s. */
void deadsubs__free(struct dlq_deadsubs *s);

#endif
