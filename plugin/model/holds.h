/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Held retry copies: a copy for one client (retry_to=delivery) whose session
 * does not persist stays the plugin's responsibility after the broker took
 * it, because nothing in Mosquitto 2.0 tells a plugin that the client
 * acknowledged it, and the broker throws the copy away with the session when
 * the client leaves. The copy's own ledger record is held for that client
 * until the client NACKs it, the record leaves the ledger (its NACK window
 * ends, or the memory bound evicts it), or the client leaves: then the
 * engine makes the record's dead letter. Holds are indexed by client, so a
 * disconnect costs what that client holds, not a walk of the ledger.
 */
#ifndef DLQ_HOLDS_H
#define DLQ_HOLDS_H

#include <stddef.h>

#include "model/record.h"

/* One client with held records. Owned by the table; each record it holds
 * points back at it (dlq_record.holder). */
struct dlq_holder {
	struct dlq_holder *hnext;   /* table chain */
	struct dlq_record *records; /* borrowed: through dlq_record.hold_next, newest first */
	size_t count;
	char client[];              /* NUL-terminated */
};

struct dlq_holds {
	struct dlq_holder **table;  /* owned */
	size_t size;                /* a power of two */
	size_t holders;
	size_t records;             /* held records, all clients */
};

int holds__init(struct dlq_holds *h);
/* Frees every holder; the records stay (no longer held). */
void holds__cleanup(struct dlq_holds *h);

/* Holds r for client. r must not be held already. Returns 0, ENOMEM, or
 * EINVAL when r is not a retry copy (it has no more part to hold it in). */
int holds__add(struct dlq_holds *h, struct dlq_record *r, const char *client);

/* Lets go of r, if held (its holder is freed with its last record). */
void holds__release(struct dlq_holds *h, struct dlq_record *r);

/* The client r is held for, or NULL. Borrowed. */
static inline const char *holds__client(const struct dlq_record *r)
{
	const struct dlq_record_more *m = record__more(r);
	return m && m->holder ? m->holder->client : NULL;
}

/* The holder of client, or NULL. Borrowed. */
struct dlq_holder *holds__find(const struct dlq_holds *h, const char *client);

#endif
