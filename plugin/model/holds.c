/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The table of held retry copies (see holds.h): holders in a chained hash
 * table by client id, each with a doubly linked list of the records it
 * holds, threaded through the records themselves.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/holds.h"
#include "util/chains.h"
#include "util/hash.h"

#define HOLDS_INITIAL_SIZE 64

int holds__init(struct dlq_holds *h)
{
	memset(h, 0, sizeof(*h));
	h->table = calloc(HOLDS_INITIAL_SIZE, sizeof(*h->table));
	if(h->table == NULL) return ENOMEM;
	h->size = HOLDS_INITIAL_SIZE;
	return 0;
}

void holds__cleanup(struct dlq_holds *h)
{
	for(size_t i = 0; i < h->size; i++){
		struct dlq_holder *k = h->table[i];
		while(k){
			struct dlq_holder *next = k->hnext;
			for(struct dlq_record *r = k->records; r; r = record__more(r)->hold_next){
				record__more(r)->holder = NULL;
			}
			free(k);
			k = next;
		}
	}
	free(h->table);
	memset(h, 0, sizeof(*h));
}

struct dlq_holder *holds__find(const struct dlq_holds *h, const char *client)
{
	if(h->size == 0) return NULL;
	for(struct dlq_holder *k = h->table[hash__string(client) & (h->size - 1)]; k; k = k->hnext){
		if(!strcmp(k->client, client)) return k;
	}
	return NULL;
}

static uint64_t holder_key(const void *item)
{
	return hash__string(((const struct dlq_holder *)item)->client);
}

/* Doubles the table; a failed allocation keeps the old one (longer chains,
 * nothing lost). */
static void grow(struct dlq_holds *h)
{
	size_t size = h->size * 2;
	struct dlq_holder **table = calloc(size, sizeof(*table));
	if(table == NULL) return;
	chains__rehash((void **)h->table, h->size, (void **)table, size, offsetof(struct dlq_holder, hnext), holder_key);
	free(h->table);
	h->table = table;
	h->size = size;
}

int holds__add(struct dlq_holds *h, struct dlq_record *r, const char *client)
{
	struct dlq_record_more *m = record__more(r);
	/* Only retry copies are held, and they have the more part. */
	if(m == NULL) return EINVAL;
	struct dlq_holder *k = holds__find(h, client);
	if(k == NULL){
		size_t n = strlen(client) + 1;
		k = malloc(sizeof(*k) + n);
		if(k == NULL) return ENOMEM;
		memcpy(k->client, client, n);
		k->records = NULL;
		k->count = 0;
		if(h->holders >= h->size) grow(h);
		size_t b = hash__string(client) & (h->size - 1);
		k->hnext = h->table[b];
		h->table[b] = k;
		h->holders++;
	}
	m->holder = k;
	m->hold_prev = NULL;
	m->hold_next = k->records;
	if(k->records) record__more(k->records)->hold_prev = r;
	k->records = r;
	k->count++;
	h->records++;
	return 0;
}

void holds__release(struct dlq_holds *h, struct dlq_record *r)
{
	struct dlq_record_more *m = record__more(r);
	struct dlq_holder *k = m ? m->holder : NULL;
	if(k == NULL) return;
	if(m->hold_prev){
		record__more(m->hold_prev)->hold_next = m->hold_next;
	}else{
		k->records = m->hold_next;
	}
	if(m->hold_next) record__more(m->hold_next)->hold_prev = m->hold_prev;
	m->holder = NULL;
	m->hold_next = NULL;
	m->hold_prev = NULL;
	k->count--;
	h->records--;
	if(k->count) return;

	struct dlq_holder **pp = &h->table[hash__string(k->client) & (h->size - 1)];
	while(*pp != k){
		pp = &(*pp)->hnext;
	}
	*pp = k->hnext;
	h->holders--;
	free(k);
}
