/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A reader of binary fuzz scripts (fuzz_sessions.c, fuzz_sends.c): bytes,
 * numbers and strings taken from the front of the input, zeros once it runs
 * out, so that every input is a valid script and a mutation changes what
 * one operation does rather than making the rest unreadable. Strings come
 * as a client can send them and as each broker hands them over: NUL-free
 * bytes of any length, empty, huge (past an MQTT string's 65535 bytes), or
 * NULL where Mosquitto 2.1.2 gives NULL for an empty or missing value.
 */
#ifndef DLQ_FUZZ_INPUT_H
#define DLQ_FUZZ_INPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

/* A string of this many bytes and more is "huge": built, not read. */
#define FUZZ_HUGE_LEN 70000u

struct fuzz_input {
	const uint8_t *data;
	size_t len;
	size_t pos;
};

static inline bool fuzz_input_more(const struct fuzz_input *in)
{
	return in->pos < in->len;
}

static inline uint8_t fuzz_input_byte(struct fuzz_input *in)
{
	return in->pos < in->len ? in->data[in->pos++] : 0;
}

static inline uint32_t fuzz_input_u32(struct fuzz_input *in)
{
	uint32_t v = 0;
	for(int i = 0; i < 4; i++) v = (v << 8) | fuzz_input_byte(in);
	return v;
}

/* A string, owned by the caller (free), or NULL. The length byte L says
 * which: 0xFF NULL; 0xFE a huge string (FUZZ_HUGE_LEN bytes plus a 16-bit
 * extra, of the next byte and '/' repeated); otherwise L bytes of input,
 * cut at the first NUL (a C string handed over by the broker has none). */
static inline char *fuzz_input_string(struct fuzz_input *in)
{
	uint8_t l = fuzz_input_byte(in);
	if(l == 0xFF) return NULL;
	if(l == 0xFE){
		size_t n = FUZZ_HUGE_LEN + ((size_t)fuzz_input_byte(in) << 8) + fuzz_input_byte(in);
		char c = (char)fuzz_input_byte(in);
		if(c == '\0') c = 'h';
		char *s = malloc(n + 1);
		FUZZ_CHECK(s != NULL, "out of memory");
		for(size_t i = 0; i < n; i++) s[i] = (i % 97 == 96) ? '/' : c;
		s[n] = '\0';
		return s;
	}
	size_t n = l;
	if(n > in->len - in->pos) n = in->len - in->pos;
	const uint8_t *p = in->data + in->pos;
	in->pos += n;
	const uint8_t *nul = memchr(p, 0, n);
	if(nul) n = (size_t)(nul - p);
	char *s = malloc(n + 1);
	FUZZ_CHECK(s != NULL, "out of memory");
	if(n) memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

#endif
