/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The hash of a client id for the engine's tables keyed by client (held
 * copies, 2.1's sessions, the clients deliveries are counted for): read
 * eight bytes at a time, since 2.1 looks a client up on every send; good
 * enough for ids a table also compares in full (an id crafted to collide
 * costs its own lookups a longer chain, as with any unkeyed hash).
 */
#ifndef DLQ_HASH_H
#define DLQ_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline size_t hash__string(const char *s)
{
	const uint64_t mul = 0x9e3779b97f4a7c15ull;
	size_t len = strlen(s);
	uint64_t h = (uint64_t)len * mul, w;
	if(len >= 8){
		size_t i = 0;
		for(; i + 8 <= len; i += 8){
			memcpy(&w, s + i, sizeof(w));
			h = (h ^ w) * mul;
		}
		/* The last, partial, word as the eight bytes that end the id:
		 * they overlap the previous word, which is fine for a hash. */
		if(i < len){
			memcpy(&w, s + len - 8, sizeof(w));
			h = (h ^ w) * mul;
		}
	}else{
		w = 0;
		for(size_t i = 0; i < len; i++){
			w = (w << 8) | (unsigned char)s[i];
		}
		h = (h ^ w) * mul;
	}
	/* The tables take the low bits: fold the high ones in. */
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	return (size_t)(h ^ (h >> 32));
}

#endif
