/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A set of 64-bit fingerprints (open addressing, linear probing), for what
 * the soak must recognise when it comes again: a dlq-id a worker NACKed, a
 * delivery already processed, a dead letter already seen. Fingerprints are
 * FNV-1a hashes; two different keys colliding in 64 bits over a few million
 * keys is a chance of about 10^-7, and would only make a duplicate look
 * like a redelivery.
 */
#include <stdio.h>
#include <stdlib.h>

#include "soak.h"

uint64_t fp_hash(uint64_t seed, const void *data, size_t len)
{
	uint64_t h = 1469598103934665603ull ^ (seed * 1099511628211ull);
	const unsigned char *p = data;
	for(size_t i = 0; i < len; i++){
		h ^= p[i];
		h *= 1099511628211ull;
	}
	return h ? h : 1; /* 0 marks an empty slot */
}

static void grow(struct fpset *s)
{
	size_t cap = s->cap ? s->cap * 2 : 1024;
	uint64_t *slots = calloc(cap, sizeof(*slots));
	if(slots == NULL){
		fprintf(stderr, "dlq_soak: out of memory\n");
		abort();
	}
	for(size_t i = 0; i < s->cap; i++){
		uint64_t fp = s->slots[i];
		if(fp == 0) continue;
		size_t k = fp & (cap - 1);
		while(slots[k]) k = (k + 1) & (cap - 1);
		slots[k] = fp;
	}
	free(s->slots);
	s->slots = slots;
	s->cap = cap;
}

bool fpset_add(struct fpset *s, uint64_t fp)
{
	if(fp == 0) fp = 1;
	if((s->count + 1) * 2 > s->cap) grow(s);
	size_t k = fp & (s->cap - 1);
	while(s->slots[k]){
		if(s->slots[k] == fp) return false;
		k = (k + 1) & (s->cap - 1);
	}
	s->slots[k] = fp;
	s->count++;
	return true;
}

bool fpset_has(const struct fpset *s, uint64_t fp)
{
	if(s->cap == 0) return false;
	if(fp == 0) fp = 1;
	size_t k = fp & (s->cap - 1);
	while(s->slots[k]){
		if(s->slots[k] == fp) return true;
		k = (k + 1) & (s->cap - 1);
	}
	return false;
}

void fpset_free(struct fpset *s)
{
	free(s->slots);
	s->slots = NULL;
	s->cap = s->count = 0;
}
