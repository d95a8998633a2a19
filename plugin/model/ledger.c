/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The attempt ledger (see ledger.h): a chained hash table by dlq-id plus a
 * list by age, of records (record.c). Lookups are O(1); expiry and
 * eviction take from the old end.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/ledger.h"

#define LEDGER_INITIAL_BUCKETS 1024
/* Chains of a doubling moved per insert and per expiry pass (maybe_grow):
 * some 16 records an insert, some 2,000 a pass. All at once, the doubling
 * at 131,072 records stopped the broker for 175 ms (perf, the saves
 * benchmark), and it grows with the records. */
#define LEDGER_MOVE_PER_INSERT 8
#define LEDGER_MOVE_PER_PASS 1024

int ledger__init(struct dlq_ledger *l)
{
	memset(l, 0, sizeof(*l));
	l->buckets = calloc(LEDGER_INITIAL_BUCKETS, sizeof(*l->buckets));
	if(l->buckets == NULL) return ENOMEM;
	l->nbuckets = LEDGER_INITIAL_BUCKETS;
	return 0;
}

void ledger__cleanup(struct dlq_ledger *l)
{
	struct dlq_record *r = l->oldest;
	while(r){
		struct dlq_record *next = r->newer;
		record__free(r);
		r = next;
	}
	free(l->buckets);
	free(l->old);
	memset(l, 0, sizeof(*l));
}

const struct dlq_settler *ledger__settler(const struct dlq_record *r, const char *client)
{
	for(const struct dlq_settler *n = r->settlers; n; n = n->next){
		if(!strcmp(n->client, client)) return n;
	}
	return NULL;
}

int ledger__add_settler(struct dlq_ledger *l, struct dlq_record *r, const char *client, uint8_t how)
{
	if(ledger__has_settler(r, client)) return EEXIST;
	size_t len = strlen(client);
	struct dlq_settler *n = malloc(sizeof(*n) + len + 1);
	if(n == NULL) return ENOMEM;
	n->how = how;
	memcpy(n->client, client, len + 1);
	n->next = r->settlers;
	r->settlers = n;
	if(l && ledger__find(l, &r->id) == r){
		l->bytes += record__settler_bytes(n);
		gauges__record_bytes(l->book, r->policy, +1, record__settler_bytes(n));
	}
	return 0;
}

void ledger__drop_last_settler(struct dlq_ledger *l, struct dlq_record *r)
{
	struct dlq_settler *n = r->settlers;
	if(n == NULL) return;
	if(l && ledger__find(l, &r->id) == r){
		l->bytes -= record__settler_bytes(n);
		gauges__record_bytes(l->book, r->policy, -1, record__settler_bytes(n));
	}
	r->settlers = n->next;
	free(n);
}

/* The chain a record of id is filed in: in the table before a doubling
 * while its chain there is not yet moved, else in the table. */
static struct dlq_record **chain_of(const struct dlq_ledger *l, const struct dlq_id *id)
{
	uint64_t h = id__hash(id);
	if(l->old){
		size_t k = (size_t)(h & (l->nold - 1));
		if(k >= l->moved) return &l->old[k];
	}
	return &l->buckets[h & (l->nbuckets - 1)];
}

/* Moves up to chains chains of the table before a doubling into the
 * table, and frees it once all are. */
static void move_chains(struct dlq_ledger *l, size_t chains)
{
	if(l->old == NULL) return;
	size_t end = chains < l->nold - l->moved ? l->moved + chains : l->nold;
	for(size_t i = l->moved; i < end; i++){
		struct dlq_record *r = l->old[i];
		while(r){
			struct dlq_record *next = r->hnext;
			size_t k = (size_t)(id__hash(&r->id) & (l->nbuckets - 1));
			r->hnext = l->buckets[k];
			l->buckets[k] = r;
			r = next;
		}
		l->old[i] = NULL;
	}
	l->moved = end;
	if(l->moved == l->nold){
		free(l->old);
		l->old = NULL;
		l->nold = 0;
		l->moved = 0;
	}
}

/* Makes the table one of n buckets, the current one the table before,
 * none of it moved yet. Returns 0 or ENOMEM (nothing changed). */
static int start_doubling(struct dlq_ledger *l, size_t n)
{
	struct dlq_record **b = calloc(n, sizeof(*b));
	if(b == NULL) return ENOMEM;
	l->old = l->buckets;
	l->nold = l->nbuckets;
	l->moved = 0;
	l->buckets = b;
	l->nbuckets = n;
	return 0;
}

/* Doubles the table when it holds twice as many records as buckets: chains
 * of one or two (ids are random), and 4 to 8 bytes of table per record
 * instead of 8 to 16. The records move over the following inserts,
 * LEDGER_MOVE_PER_INSERT chains each (and LEDGER_MOVE_PER_PASS at each
 * expiry pass): the count can at most double again before the next
 * doubling, by which time one chain per insert would have moved them all.
 * A failed allocation leaves the table working, only with longer chains. */
static void maybe_grow(struct dlq_ledger *l)
{
	if(l->old){
		move_chains(l, LEDGER_MOVE_PER_INSERT);
		return;
	}
	if(l->count < 2 * l->nbuckets) return;
	if(start_doubling(l, l->nbuckets * 2) == 0) move_chains(l, LEDGER_MOVE_PER_INSERT);
}

int ledger__reserve(struct dlq_ledger *l, size_t n)
{
	size_t want = l->nbuckets;
	while(want < n / 2) want *= 2;
	if(want == l->nbuckets) return 0;
	move_chains(l, SIZE_MAX);
	if(start_doubling(l, want)) return ENOMEM;
	move_chains(l, SIZE_MAX);
	return 0;
}

int ledger__insert(struct dlq_ledger *l, struct dlq_record *r)
{
	return ledger__insert_sized(l, r, record__bytes(r));
}

int ledger__insert_sized(struct dlq_ledger *l, struct dlq_record *r, size_t bytes)
{
	maybe_grow(l);
	struct dlq_record **chain = chain_of(l, &r->id);
	r->hnext = *chain;
	*chain = r;

	r->newer = NULL;
	if(l->newest){
		l->newest->newer = r;
	}else{
		l->oldest = r;
	}
	l->newest = r;
	l->count++;
	l->bytes += bytes;
	gauges__record(l->book, r->policy, +1, bytes);
	return 0;
}

void ledger__adjust_bytes(struct dlq_ledger *l, struct dlq_record *r, int sign, uint32_t bytes)
{
	if(sign > 0){
		l->bytes += bytes;
	}else{
		l->bytes -= bytes;
	}
	gauges__record_bytes(l->book, r->policy, sign, bytes);
}

struct dlq_record *ledger__find(const struct dlq_ledger *l, const struct dlq_id *id)
{
	for(struct dlq_record *r = *chain_of(l, id); r; r = r->hnext){
		if(id__equal(&r->id, id)) return r;
	}
	return NULL;
}

/* Unlinks the oldest record from both structures and frees it. */
static void drop_oldest(struct dlq_ledger *l, bool expired)
{
	struct dlq_record *r = l->oldest;
	if(l->on_drop) l->on_drop(l->on_drop_ctx, r, expired);
	struct dlq_record **pp = chain_of(l, &r->id);
	while(*pp != r){
		pp = &(*pp)->hnext;
	}
	*pp = r->hnext;

	l->oldest = r->newer;
	if(l->oldest == NULL) l->newest = NULL;
	l->count--;
	size_t bytes = record__bytes(r);
	l->bytes -= bytes;
	gauges__record(l->book, r->policy, -1, bytes);
	record__free(r);
}

/* Moves the oldest record to the newest end, created now (no newer
 * record can be younger than now). */
static void renew_oldest(struct dlq_ledger *l, uint64_t now_ms)
{
	struct dlq_record *r = l->oldest;
	if(r == l->newest){
		r->created_ms = now_ms;
		return;
	}
	l->oldest = r->newer;
	r->newer = NULL;
	l->newest->newer = r;
	l->newest = r;
	r->created_ms = now_ms;
}

size_t ledger__expire(struct dlq_ledger *l, uint64_t now_ms, uint64_t window_ms)
{
	move_chains(l, LEDGER_MOVE_PER_PASS);
	size_t n = 0;
	while(l->oldest && now_ms - l->oldest->created_ms > window_ms){
		if(l->keep && l->keep(l->on_drop_ctx, l->oldest)){
			renew_oldest(l, now_ms);
			continue;
		}
		drop_oldest(l, true);
		n++;
	}
	return n;
}

size_t ledger__evict_to(struct dlq_ledger *l, uint64_t target)
{
	size_t n = 0;
	while(l->oldest && l->bytes > target){
		drop_oldest(l, false);
		n++;
	}
	return n;
}
