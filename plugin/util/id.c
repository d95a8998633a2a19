/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * dlq-id generation and text form (see id.h). Random bytes come from the
 * port in blocks of 64 ids; a failed read yields no id at all.
 */
#include <string.h>

#include "util/id.h"
#include "util/port.h"

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

void id__gen_init(struct dlq_idgen *g)
{
	memset(g, 0, sizeof(*g));
	g->pos = sizeof(g->pool);
}

int id__gen_refill(struct dlq_idgen *g)
{
	int rc = port__random(g->pool, sizeof(g->pool));
	if(rc) return rc;
	g->pos = 0;
	return 0;
}

int id__gen_fraction(struct dlq_idgen *g, double *out)
{
	struct dlq_id id;
	int rc = id__gen_next(g, &id);
	if(rc) return rc;
	uint32_t v = ((uint32_t)id.raw[0] << 24) | ((uint32_t)id.raw[1] << 16) | ((uint32_t)id.raw[2] << 8) | id.raw[3];
	*out = v / 4294967296.0;
	return 0;
}

/* Two base64url characters for each 12-bit value, filled on first use:
 * encoding an id is then eight lookups instead of sixteen shifts and
 * lookups (every tracked message and every retry copy is stamped). */
static uint16_t pairs[4096];
static bool pairs_ready;

static void fill_pairs(void)
{
	for(unsigned v = 0; v < 4096; v++){
		char two[2] = { b64url[v >> 6], b64url[v & 63] };
		memcpy(&pairs[v], two, 2);
	}
	pairs_ready = true;
}

void id__encode(const struct dlq_id *id, char out[DLQ_ID_LEN + 1])
{
	if(!pairs_ready) fill_pairs();
	/* 12 bytes are exactly 16 base64 characters: no padding. */
	const uint8_t *r = id->raw;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	/* The 96 bits as one 64-bit and one 32-bit big-endian word, cut into
	 * eight 12-bit values, written as two 8-byte words (little-endian: the
	 * first pair lowest). */
	uint64_t hi;
	uint32_t lo;
	memcpy(&hi, r, 8);
	memcpy(&lo, r + 8, 4);
	hi = __builtin_bswap64(hi);
	lo = __builtin_bswap32(lo);
	uint64_t a = (uint64_t)pairs[hi >> 52] | (uint64_t)pairs[(hi >> 40) & 4095] << 16
			| (uint64_t)pairs[(hi >> 28) & 4095] << 32 | (uint64_t)pairs[(hi >> 16) & 4095] << 48;
	uint64_t b = (uint64_t)pairs[(hi >> 4) & 4095] | (uint64_t)pairs[((hi & 15) << 8) | (lo >> 24)] << 16
			| (uint64_t)pairs[(lo >> 12) & 4095] << 32 | (uint64_t)pairs[lo & 4095] << 48;
	memcpy(out, &a, 8);
	memcpy(out + 8, &b, 8);
	out += 16;
#else
	for(size_t i = 0; i < DLQ_ID_RAW_LEN; i += 3){
		uint32_t v = ((uint32_t)r[i] << 16) | ((uint32_t)r[i + 1] << 8) | r[i + 2];
		memcpy(out, &pairs[v >> 12], 2);
		memcpy(out + 2, &pairs[v & 4095], 2);
		out += 4;
	}
#endif
	*out = '\0';
}

/* The value of each byte as a base64url digit, or -1; filled on first use
 * (every NACK decodes an id). */
static int8_t digit_of[256];
static bool digits_ready;

static void fill_digits(void)
{
	memset(digit_of, -1, sizeof(digit_of));
	for(int v = 0; v < 64; v++){
		digit_of[(unsigned char)b64url[v]] = (int8_t)v;
	}
	digits_ready = true;
}

uint16_t id__prefix12_text(const char *s)
{
	if(!digits_ready) fill_digits();
	unsigned hi = (unsigned)digit_of[(unsigned char)s[0]] & 0x3fu;
	unsigned lo = (unsigned)digit_of[(unsigned char)s[1]] & 0x3fu;
	return (uint16_t)((hi << 6) | lo);
}

bool id__decode(const char *s, size_t len, struct dlq_id *out)
{
	if(s == NULL || len != DLQ_ID_LEN) return false;
	if(!digits_ready) fill_digits();
	/* No branch per character: a character outside base64url makes its
	 * digit -1, which sets the sign bit of bad; the id is refused once,
	 * at the end (2.1 decodes an id at nearly every send). */
	const unsigned char *u = (const unsigned char *)s;
	int bad = 0;
	uint8_t *o = out->raw;
	for(size_t i = 0; i < DLQ_ID_LEN; i += 4, o += 3){
		int d0 = digit_of[u[i]], d1 = digit_of[u[i + 1]], d2 = digit_of[u[i + 2]], d3 = digit_of[u[i + 3]];
		bad |= d0 | d1 | d2 | d3;
		uint32_t v = ((uint32_t)(d0 & 63) << 18) | ((uint32_t)(d1 & 63) << 12) | ((uint32_t)(d2 & 63) << 6)
				| (uint32_t)(d3 & 63);
		o[0] = (uint8_t)(v >> 16);
		o[1] = (uint8_t)(v >> 8);
		o[2] = (uint8_t)v;
	}
	return bad >= 0;
}

bool id__hashes_distinct(uint64_t *hashes, uint64_t *scratch, size_t n)
{
	/* Eight passes of a byte, least significant first. */
	size_t count[256];
	uint64_t *from = hashes, *to = scratch;
	for(unsigned shift = 0; shift < 64; shift += 8){
		memset(count, 0, sizeof(count));
		for(size_t i = 0; i < n; i++) count[(from[i] >> shift) & 0xFF]++;
		size_t at = 0;
		for(size_t d = 0; d < 256; d++){
			size_t c = count[d];
			count[d] = at;
			at += c;
		}
		for(size_t i = 0; i < n; i++) to[count[(from[i] >> shift) & 0xFF]++] = from[i];
		uint64_t *t = from;
		from = to;
		to = t;
	}
	/* An even number of passes: sorted back into hashes. */
	for(size_t i = 1; i < n; i++){
		if(hashes[i] == hashes[i - 1]) return false;
	}
	return true;
}
