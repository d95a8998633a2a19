/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Text helpers for the configuration parsers (see errtext.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errtext.h"

int errtext__quote_len(const char *s)
{
	size_t n = strlen(s);

	if(n <= QUOTE_MAX) return (int)n;
	n = QUOTE_MAX;
	while(n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--; /* whole UTF-8 characters */
	return (int)n;
}

size_t errtext__set(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	int n;

	if(err == NULL || errlen == 0) return 0;
	va_start(ap, fmt);
	n = vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	if(n < 0){
		err[0] = '\0';
		return 0;
	}
	return (size_t)n < errlen ? (size_t)n : errlen - 1;
}

char *errtext__dup_range(const char *s, size_t len)
{
	char *d = malloc(len + 1);

	if(d == NULL) return NULL;
	memcpy(d, s, len);
	d[len] = '\0';
	return d;
}

char *errtext__dup_printf(const char *fmt, ...)
{
	va_list ap;
	int n;
	char *s;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if(n < 0) return NULL;
	s = malloc((size_t)n + 1);
	if(s == NULL) return NULL;
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}
