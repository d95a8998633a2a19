/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Small text helpers shared by the configuration parsers (config.c,
 * policy_parse.c): error messages written into a caller's buffer, values
 * quoted and cut so that the reason after them still fits, and string
 * duplication with libc's allocator.
 */
#ifndef DLQ_ERRTEXT_H
#define DLQ_ERRTEXT_H

#include <stddef.h>
#include <string.h>

/* Values are quoted in messages, cut to this many bytes so that the reason
 * after them still fits. QFMT takes Q(s) as its three arguments. */
#define QUOTE_MAX 200
#define QFMT "\"%.*s%s\""
#define Q(s) errtext__quote_len(s), (s), (strlen(s) > QUOTE_MAX ? "..." : "")

/* How many bytes of s to quote: all of it, or QUOTE_MAX cut back to a
 * whole UTF-8 character. */
int errtext__quote_len(const char *s);

/* Writes a message into err; returns how many bytes it holds, so that a
 * caller can write a prefix and let a callee add the reason after it. */
size_t errtext__set(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 3, 4)))
#endif
	;

/* malloc'd copies; NULL when out of memory. */
char *errtext__dup_range(const char *s, size_t len);
char *errtext__dup_printf(const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 1, 2)))
#endif
	;

#endif
