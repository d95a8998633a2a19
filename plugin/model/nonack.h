/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Subscribers that cannot NACK: an MQTT 3.1 or 3.1.1 client has no user
 * properties, so it receives tracked messages without their dlq-id and can
 * never NACK them; retries and dead letters never happen for it. Where the
 * broker tells the plugin about subscriptions (2.1's SUBSCRIBE event), the
 * engine warns about such a client once per connection and counts its
 * subscriptions. The set of clients already warned about is bounded: a
 * client leaves it when its connection ends, and past NONACK_MAX clients
 * the warnings stop (one notice says so) while the counting goes on.
 */
#ifndef DLQ_NONACK_H
#define DLQ_NONACK_H

#include <stdbool.h>
#include <stddef.h>

#define NONACK_MAX 1024

struct dlq_nonack {
	char **ids;      /* owned array of owned client ids, count entries */
	size_t count;
	size_t capacity;
	bool full_noted; /* the "no more warnings" notice was logged since the set was last full */
};

/* Whether client is in the set. */
bool nonack__known(const struct dlq_nonack *s, const char *client);

/* Adds client (not in the set). Returns 0, ENOSPC (NONACK_MAX clients are
 * in it) or ENOMEM. */
int nonack__add(struct dlq_nonack *s, const char *client);

/* Removes client if it is in the set. */
void nonack__forget(struct dlq_nonack *s, const char *client);

/* Frees everything and zeroes *s. */
void nonack__free(struct dlq_nonack *s);

#endif
