/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Numbers with units, as an operator writes them in mosquitto.conf, a
 * policy or a NACK: durations ("500ms", "30s", "10m", "1h", "1d") and sizes
 * ("65536", "512KiB", "64MiB", also kB/MB/GB as powers of 1000). Plain text
 * in, a number or the exact problem out, so that each caller words its own
 * message (config.c names the option, policy_parse.c the policy key).
 */
#ifndef DLQ_UNITS_H
#define DLQ_UNITS_H

#include <stdint.h>

enum units_problem {
	UNITS_OK,
	UNITS_SYNTAX,   /* not a whole number of ASCII digits */
	UNITS_NO_UNIT,  /* a number without the unit it needs */
	UNITS_BAD_UNIT, /* a unit not in the list */
	UNITS_ZERO,     /* zero (*out is not set) */
	UNITS_OVERFLOW, /* larger than 64 bits hold */
};

/* Parses s, a whole number followed by a duration unit, into milliseconds
 * in *out. *unit points into s where the unit starts (for messages). */
enum units_problem units__duration(const char *s, uint64_t *out, const char **unit);

/* Parses s, a whole number with an optional size unit, into bytes. */
enum units_problem units__size(const char *s, uint64_t *out, const char **unit);

/* "500ms", "30s", "10m", "1h", "1d" to milliseconds. A bare number, an
 * unknown unit, zero or an overflow is refused with EINVAL. */
int units__parse_duration_ms(const char *s, uint64_t *out);

/* As units__parse_duration_ms, but zero ("0s", "0ms") is a valid delay. */
int units__parse_delay_ms(const char *s, uint64_t *out);

/* "65536", "512KiB", "64MiB", "1GiB" (also kB/MB/GB as powers of 1000) to
 * bytes. Zero or an overflow is refused with EINVAL. */
int units__parse_size(const char *s, uint64_t *out);

#endif
