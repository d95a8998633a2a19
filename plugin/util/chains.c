/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Chained hash tables that grow in steps (see chains.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "util/chains.h"

#define INITIAL_SIZE 256
/* Chains of the table before a doubling moved per insert. A doubling
 * starts at as many items as the table before had chains, n; its n chains
 * have moved after n/8 inserts, long before the count reaches the new
 * table's 2n chains and the next doubling. */
#define MOVE_PER_INSERT 8

/* Moves up to chains chains of the table before a doubling into the table,
 * and frees it once all are. */
static void move_chains(struct chains *c, size_t chains)
{
	if(c->old == NULL) return;
	size_t end = chains < c->nold - c->moved ? c->moved + chains : c->nold;
	chains__rehash(c->old + c->moved, end - c->moved, c->table, c->size, c->next_off, c->key);
	for(size_t i = c->moved; i < end; i++) c->old[i] = NULL;
	c->moved = end;
	if(c->moved == c->nold){
		free(c->old);
		c->old = NULL;
		c->nold = 0;
		c->moved = 0;
	}
}

int chains__grow(struct chains *c, size_t count, size_t next_off, chains_key_fn key)
{
	if(c->table == NULL){
		c->table = calloc(INITIAL_SIZE, sizeof(*c->table));
		if(c->table == NULL) return ENOMEM;
		c->size = INITIAL_SIZE;
		c->next_off = next_off;
		c->key = key;
		return 0;
	}
	move_chains(c, MOVE_PER_INSERT);
	if(count < c->size) return 0;
	/* A doubling still under way here means inserts came faster than the
	 * moves (they cannot, see MOVE_PER_INSERT): it ends first. */
	move_chains(c, c->nold);
	void **t = calloc(c->size * 2, sizeof(*t));
	if(t == NULL) return 0; /* a full table only gets slower */
	c->old = c->table;
	c->nold = c->size;
	c->moved = 0;
	c->table = t;
	c->size *= 2;
	return 0;
}

void chains__link(struct chains *c, void *item, uint64_t key)
{
	void **head = chains__head(c, key);
	CHAINS_NEXT(item, c->next_off) = *head;
	*head = item;
}

void chains__unlink(struct chains *c, void *item, uint64_t key)
{
	if(c->table == NULL) return;
	void **pp = chains__head(c, key);
	while(*pp && *pp != item) pp = &CHAINS_NEXT(*pp, c->next_off);
	if(*pp) *pp = CHAINS_NEXT(item, c->next_off);
}

void chains__rehash(void **from, size_t n, void **to, size_t m, size_t next_off, chains_key_fn key)
{
	for(size_t i = 0; i < n; i++){
		void *item = from[i];
		while(item){
			void *next = CHAINS_NEXT(item, next_off);
			size_t k = (size_t)(key(item) & (m - 1));
			CHAINS_NEXT(item, next_off) = to[k];
			to[k] = item;
			item = next;
		}
	}
}

void chains__free(struct chains *c)
{
	free(c->table);
	free(c->old);
	*c = (struct chains){0};
}
