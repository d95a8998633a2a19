/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Text helpers (see errtext.h). The UTF-8 rules are MQTT's (section 1.5.4):
 * no U+0000, no surrogates, no overlong forms.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/errtext.h"

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

size_t errtext__utf8_char(const unsigned char *s, size_t n, enum errtext_char *kind)
{
	size_t len;
	uint32_t cp;

	*kind = ERRTEXT_CHAR_TEXT;
	if(s[0] == 0){
		return 0;
	}else if(s[0] < 0x80){
		len = 1;
		cp = s[0];
	}else if(s[0] >= 0xC2 && s[0] <= 0xDF){
		len = 2;
		cp = s[0] & 0x1F;
	}else if((s[0] & 0xF0) == 0xE0){
		len = 3;
		cp = s[0] & 0x0F;
	}else if(s[0] >= 0xF0 && s[0] <= 0xF4){
		len = 4;
		cp = s[0] & 0x07;
	}else{
		return 0;
	}
	if(len > n) return 0;
	for(size_t i = 1; i < len; i++){
		if((s[i] & 0xC0) != 0x80) return 0;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	if((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
	if(cp >= 0xD800 && cp <= 0xDFFF) return 0;
	if((cp >= 0xFDD0 && cp <= 0xFDEF) || (cp & 0xFFFF) >= 0xFFFE){
		*kind = ERRTEXT_CHAR_NONCHAR;
	}else if(cp <= 0x1F || (cp >= 0x7F && cp <= 0x9F)){
		*kind = ERRTEXT_CHAR_CONTROL;
	}
	return len;
}

size_t errtext__utf8_check(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;
	while(i < len){
		enum errtext_char kind;
		size_t n = u[i] < 0x80 && u[i] ? 1 : errtext__utf8_char(u + i, len - i, &kind);
		if(n == 0) return i;
		i += n;
	}
	return len;
}

size_t errtext__clean(const char *in, size_t len, char *out, size_t max)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t o = 0;
	size_t i = 0;
	while(i < len){
		enum errtext_char kind;
		size_t n = errtext__utf8_char(s + i, len - i, &kind);
		if(n == 0 || kind != ERRTEXT_CHAR_TEXT){
			if(o + 1 > max) break;
			out[o++] = kind == ERRTEXT_CHAR_CONTROL ? ' ' : '?';
			i += n ? n : 1;
		}else{
			if(o + n > max) break;
			memcpy(out + o, s + i, n);
			o += n;
			i += n;
		}
	}
	out[o] = '\0';
	return i;
}
