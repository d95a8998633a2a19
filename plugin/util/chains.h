/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Chained hash tables that grow, as redelivery tracking keeps them (its
 * clients, its deliveries, its indexes of records): every item chains
 * through a pointer field of its own, at offset next_off in it; key() is
 * an item's hash. The table is an array of chain heads, a power of two
 * long, owned by whoever holds the pointer.
 */
#ifndef DLQ_CHAINS_H
#define DLQ_CHAINS_H

#include <stddef.h>
#include <stdint.h>

typedef uint64_t (*chains_key_fn)(const void *item);

#define CHAINS_NEXT(item, off) (*(void **)((char *)(item) + (off)))

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

/* Makes *table (256 chains) if there is none, or doubles it when it holds
 * count items, as many as it has chains. Returns 0, or ENOMEM when there is
 * no table yet: a full table that cannot grow only gets slower. */
int chains__grow(void ***table, size_t *size, size_t count, size_t next_off, chains_key_fn key);

/* Unlinks item, filed under key, if it is in the table. */
void chains__unlink(void **table, size_t size, void *item, size_t next_off, uint64_t key);

#endif
