/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The hash of a client id for the engine's tables keyed by client (held
 * copies, 2.1's sessions): FNV-1a, cheap and good enough for ids a table
 * also compares in full.
 */
#ifndef DLQ_HASH_H
#define DLQ_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline size_t hash__string(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for(; *s; s++){
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	return (size_t)h;
}

#endif
