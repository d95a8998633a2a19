/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Small text helpers: error messages written into a caller's buffer, values
 * quoted and cut so that the reason after them still fits, string
 * duplication with libc's allocator (the configuration parsers), and UTF-8:
 * checking a client's text and cleaning what of it is echoed in a reply, a
 * property or the log, so that every MQTT client and strict JSON parser
 * takes it (the control API).
 */
#ifndef DLQ_ERRTEXT_H
#define DLQ_ERRTEXT_H

#include <stdbool.h>
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

/* What errtext__utf8_char found. */
enum errtext_char {
	ERRTEXT_CHAR_TEXT,      /* a character of text */
	ERRTEXT_CHAR_CONTROL,   /* U+0001-U+001F, U+007F-U+009F */
	ERRTEXT_CHAR_NONCHAR,   /* U+FDD0-U+FDEF, U+xxFFFE, U+xxFFFF: well-formed, but MQTT strings may not hold them */
};

/* Length of the well-formed UTF-8 character at s (at most n bytes, n > 0),
 * and its kind; 0 when it is ill-formed (truncated, overlong, a surrogate,
 * beyond U+10FFFF) or U+0000. */
size_t errtext__utf8_char(const unsigned char *s, size_t n, enum errtext_char *kind);

/* The offset of the first byte of s (len bytes) that does not begin a
 * well-formed UTF-8 character (U+0000 included), or len when all do. */
size_t errtext__utf8_check(const char *s, size_t len);

/* Copies in (len bytes, NULL allowed when len is 0) into out, which holds
 * max + 1 bytes, as text any MQTT client and JSON parser accepts: an
 * ill-formed byte or a non-character becomes '?', a control character ' ',
 * and it is cut to at most max bytes at a character boundary. Always
 * NUL-terminates. Returns how many bytes of in went into out: less than len
 * when it was cut. */
size_t errtext__clean(const char *in, size_t len, char *out, size_t max);

/* White space between the words of a line or around a value: space, tab,
 * and the CR and LF a line or a payload may end with (the C locale's
 * isspace but for \v and \f, which no one types there). */
static inline bool errtext__is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

#endif
