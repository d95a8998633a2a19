/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Chained hash tables that grow in steps, as redelivery tracking, the
 * acknowledgement deadlines and the dead-letter store keep them: every item
 * chains through a pointer field of its own, at offset next_off in it;
 * key() is an item's hash. A zeroed struct chains is an empty table.
 *
 * A table doubles when it holds as many items as it has chains, and its
 * chains move to the new table over the following inserts, a few each
 * (chains__grow): at a million items a doubling at once rehashed every
 * item while the broker waited (the ledger's, 175 ms at 131,072 records;
 * docs/design.md, "The tables double in steps"). While a doubling is under
 * way an item is in the table before it if its chain there is not yet
 * moved, else in the table: chains__first and the walks know which.
 */
#ifndef DLQ_CHAINS_H
#define DLQ_CHAINS_H

#include <stddef.h>
#include <stdint.h>

typedef uint64_t (*chains_key_fn)(const void *item);

#define CHAINS_NEXT(item, off) (*(void **)((char *)(item) + (off)))

struct chains {
	void **table;        /* owned; size chains, a power of two; NULL before the first item */
	size_t size;
	void **old;          /* owned: the table before a doubling under way, or NULL */
	size_t nold;
	size_t moved;        /* chains of old moved so far (the first ones) */
	size_t next_off;     /* as given to chains__grow */
	chains_key_fn key;
};

/* A 64-bit finaliser: the tables take the low bits of keys made from
 * pointers and sums. */
static inline uint64_t chains__mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* The head of the chain items of this key are in. c must have a table. */
static inline void **chains__head(const struct chains *c, uint64_t key)
{
	if(c->old){
		size_t k = (size_t)(key & (c->nold - 1));
		if(k >= c->moved) return &c->old[k];
	}
	return &c->table[key & (c->size - 1)];
}

/* The first item of the chain of this key, or NULL. */
static inline void *chains__first(const struct chains *c, uint64_t key)
{
	return c->table ? *chains__head(c, key) : NULL;
}

/* Before an insert, when the table holds count items: makes it (256
 * chains) if there is none, moves some chains of a doubling under way, or
 * starts a doubling when count reaches the chains. Returns 0, or ENOMEM
 * when there is no table yet: a full table that cannot grow only gets
 * slower. */
int chains__grow(struct chains *c, size_t count, size_t next_off, chains_key_fn key);

/* Puts item, of this key, first in its chain; after a chains__grow that
 * returned 0. */
void chains__link(struct chains *c, void *item, uint64_t key);

/* Unlinks item, filed under key, if it is in the table. */
void chains__unlink(struct chains *c, void *item, uint64_t key);

/* Moves every item of the n chains of from first into its chain of to, m
 * chains (a power of two), by key(item); next_off as for chains__grow. For
 * the smaller tables that double at once (the clients' holds, sessions and
 * packet limits), and for this file's doubling in steps. */
void chains__rehash(void **from, size_t n, void **to, size_t m, size_t next_off, chains_key_fn key);

/* Frees the tables (not the items) and zeroes c. */
void chains__free(struct chains *c);

/* A walk of every chain: chains__chain(c, i) for i below chains__count(c)
 * is each chain's first item or NULL. A walk may unlink and free items
 * (take the next one first), not insert. */
static inline size_t chains__count(const struct chains *c)
{
	return c->size + (c->old ? c->nold - c->moved : 0);
}
static inline void *chains__chain(const struct chains *c, size_t i)
{
	return i < c->size ? c->table[i] : c->old[c->moved + (i - c->size)];
}

#endif
