/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The attempt ledger: every tracked delivery (an original or a retry copy),
 * kept so that it can be NACKed by its dlq-id. Records live in a hash table
 * by id and in a list by age; the oldest leave first, when the NACK window
 * has passed or when the memory bound needs room. The records themselves,
 * what they hold and how they are made, are record.h's.
 */
#ifndef DLQ_LEDGER_H
#define DLQ_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/gauges.h"
#include "model/record.h"
#include "util/id.h"

struct dlq_ledger {
	struct dlq_record **buckets; /* owned */
	size_t nbuckets;             /* a power of two */
	/* While the table doubles: the table before (owned), whose chains from
	 * moved on are still to be moved into buckets, a few at each insert
	 * and more at each expiry pass (a tick), so that no single call pays
	 * for all the records at once (at 1,000,000 records, a second and
	 * more). A record whose chain in old is not yet moved is in old.
	 * NULL when no doubling is under way. */
	struct dlq_record **old;
	size_t nold;
	size_t moved;
	size_t count;
	uint64_t bytes;              /* sum of record__bytes */
	struct dlq_record *oldest;
	struct dlq_record *newest;
	/* Called for each record expiry or eviction drops, before it is freed
	 * (optional; the engine counts them per policy). */
	void (*on_drop)(void *ctx, struct dlq_record *r, bool expired);
	/* Asked (optional) before a record leaves for its NACK window: true
	 * keeps it, as the newest, its window started again (a delivery of it
	 * awaits settlement: deadlines.h). The memory bound evicts it all the
	 * same. */
	bool (*keep)(void *ctx, const struct dlq_record *r);
	void *on_drop_ctx;
	/* Borrowed, optional: the running gauges every change of records or
	 * bytes here is counted in (set after ledger__init). */
	struct dlq_gauge_book *book;
};

int ledger__init(struct dlq_ledger *l);
/* Frees every record. */
void ledger__cleanup(struct dlq_ledger *l);

/* Records that client settled its delivery of r, how (enum
 * dlq_settled_how). Returns 0, EEXIST if it already had (how unchanged),
 * or ENOMEM. Updates the ledger's byte count when r is in l. */
int ledger__add_settler(struct dlq_ledger *l, struct dlq_record *r, const char *client, uint8_t how);
/* How client settled r, or NULL when it has not. Borrowed from r. */
const struct dlq_settler *ledger__settler(const struct dlq_record *r, const char *client);
/* Whether client has settled r. */
static inline bool ledger__has_settler(const struct dlq_record *r, const char *client)
{
	return ledger__settler(r, client) != NULL;
}

/* Forgets the most recent settler of r (the undo of a successful
 * ledger__add_settler when the settlement could not be carried out). */
void ledger__drop_last_settler(struct dlq_ledger *l, struct dlq_record *r);

/* Adds (sign +1) or takes away (-1) bytes of r's accounted size that
 * live outside the record (redelivery tracking's deliveries: for a record
 * with the more part also counted in its extra_bytes, which the caller
 * changes; for one with the sends part, counted by the tracker); r is in
 * l. */
void ledger__adjust_bytes(struct dlq_ledger *l, struct dlq_record *r, int sign, uint32_t bytes);

/* Takes ownership of r; r must be the newest (created_ms not older than any
 * record already in). Returns 0 or ENOMEM (then r is still the caller's). */
int ledger__insert(struct dlq_ledger *l, struct dlq_record *r);
/* ledger__insert with r's record__bytes, which the caller has. */
int ledger__insert_sized(struct dlq_ledger *l, struct dlq_record *r, size_t bytes);

/* Sizes the table for n records at once (a restore that knows how many
 * come), so that they go in without a doubling; a doubling under way is
 * finished. Returns 0 or ENOMEM (then the table works as it was). */
int ledger__reserve(struct dlq_ledger *l, size_t n);

/* Borrowed pointer to the record with this id, or NULL. */
struct dlq_record *ledger__find(const struct dlq_ledger *l, const struct dlq_id *id);

/* Frees records created more than window_ms before now_ms, but those keep
 * keeps (then the newest, created now). Returns how many it freed. Moves
 * on a doubling of the table under way (struct dlq_ledger's old). */
size_t ledger__expire(struct dlq_ledger *l, uint64_t now_ms, uint64_t window_ms);

/* Frees the oldest records until bytes <= target. Returns how many. */
size_t ledger__evict_to(struct dlq_ledger *l, uint64_t target);

#endif
