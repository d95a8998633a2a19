/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * dlq-ids: 96 random bits from the operating system, written as 16
 * characters of base64url. Random bytes are drawn in blocks so that stamping
 * a message does not cost a system call.
 */
#ifndef DLQ_ID_H
#define DLQ_ID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mosquitto_dlq.h"

#define DLQ_ID_RAW_LEN (DLQ_ID_RANDOM_BITS / 8)

struct dlq_id {
	uint8_t raw[DLQ_ID_RAW_LEN];
};

struct dlq_idgen {
	uint8_t pool[64 * DLQ_ID_RAW_LEN];
	size_t pos; /* next unused byte; sizeof(pool) when empty */
};

void id__gen_init(struct dlq_idgen *g);

/* Fills the pool from the random source: 0, or the port's error. */
int id__gen_refill(struct dlq_idgen *g);

/* Draws a fresh id. Returns 0, or the port's error if the random source
 * failed (no id is made from anything but the OS's random bytes). Inline:
 * every tracked message draws one. */
static inline int id__gen_next(struct dlq_idgen *g, struct dlq_id *out)
{
	if(g->pos + DLQ_ID_RAW_LEN > sizeof(g->pool)){
		int rc = id__gen_refill(g);
		if(rc) return rc;
	}
	memcpy(out->raw, g->pool + g->pos, DLQ_ID_RAW_LEN);
	/* Used bytes are wiped so the pool never holds an issued id twice. */
	memset(g->pool + g->pos, 0, DLQ_ID_RAW_LEN);
	g->pos += DLQ_ID_RAW_LEN;
	return 0;
}

/* Whether id is all zero: no id drawn (a dead letter not yet named, a
 * copy no policy tracks). */
static inline bool id__is_zero(const struct dlq_id *id)
{
	static const struct dlq_id zero;
	return !memcmp(id->raw, zero.raw, DLQ_ID_RAW_LEN);
}

/* A uniform draw from [0, 1) for jitter, from the same random pool.
 * Returns 0 or the port's error. */
int id__gen_fraction(struct dlq_idgen *g, double *out);

/* The first 12 bits of the id whose text is s (DLQ_ID_LEN characters),
 * from its first two characters; any value below 4096 for text that is no
 * id. id__prefix12 gives the same from the id itself. */
uint16_t id__prefix12_text(const char *s);
static inline uint16_t id__prefix12(const struct dlq_id *id)
{
	return (uint16_t)(((unsigned)id->raw[0] << 4) | (id->raw[1] >> 4));
}

/* Writes the 16-character text form and a NUL. */
void id__encode(const struct dlq_id *id, char out[DLQ_ID_LEN + 1]);

/* Parses the text form; false unless s is exactly 16 base64url characters. */
bool id__decode(const char *s, size_t len, struct dlq_id *out);

/* A hash of the id for table lookups (the bits are random already). */
static inline uint64_t id__hash(const struct dlq_id *id)
{
	/* The first eight bytes as they lie in memory: in one load. */
	uint64_t h;
	memcpy(&h, id->raw, sizeof(h));
	return h;
}

/* Whether two ids are the same, in two loads each. */
_Static_assert(DLQ_ID_RAW_LEN == 12, "id__equal reads 8 + 4 bytes");
static inline bool id__equal(const struct dlq_id *a, const struct dlq_id *b)
{
	uint64_t a0, b0;
	uint32_t a1, b1;
	memcpy(&a0, a->raw, 8);
	memcpy(&b0, b->raw, 8);
	memcpy(&a1, a->raw + 8, 4);
	memcpy(&b1, b->raw + 8, 4);
	return a0 == b0 && a1 == b1;
}

/* Whether the n hashes (id__hash) are all distinct, so ids that have them
 * are: sorts hashes (a radix sort, in n more of scratch). For a restore
 * that looks no id up when every one is new. */
bool id__hashes_distinct(uint64_t *hashes, uint64_t *scratch, size_t n);

#endif
