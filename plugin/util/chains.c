/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Chained hash tables that grow (see chains.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "util/chains.h"

#define INITIAL_SIZE 256

int chains__grow(void ***table, size_t *size, size_t count, size_t next_off, chains_key_fn key)
{
	if(*table && count < *size) return 0;
	size_t n = *table ? *size * 2 : INITIAL_SIZE;
	void **t = calloc(n, sizeof(*t));
	if(t == NULL) return *table ? 0 : ENOMEM; /* a full table only gets slower */
	for(size_t i = 0; *table && i < *size; i++){
		void *item = (*table)[i];
		while(item){
			void *next = CHAINS_NEXT(item, next_off);
			size_t k = (size_t)(key(item) & (n - 1));
			CHAINS_NEXT(item, next_off) = t[k];
			t[k] = item;
			item = next;
		}
	}
	free(*table);
	*table = t;
	*size = n;
	return 0;
}

void chains__unlink(void **table, size_t size, void *item, size_t next_off, uint64_t key)
{
	if(table == NULL) return;
	void **pp = &table[key & (size - 1)];
	while(*pp && *pp != item) pp = &CHAINS_NEXT(*pp, next_off);
	if(*pp) *pp = CHAINS_NEXT(item, next_off);
}
