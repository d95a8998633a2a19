/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Numbers with units (see units.h): one parser of a whole number and a unit
 * from a table, for durations and for sizes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/units.h"

struct unit {
	const char *name;
	uint64_t factor;
};

static const struct unit duration_units[] = {
	{"ms", 1}, {"s", 1000}, {"m", 60 * 1000}, {"h", 60 * 60 * 1000}, {"d", 24 * 60 * 60 * 1000}, {NULL, 0}
};
static const struct unit size_units[] = {
	{"", 1}, {"B", 1}, {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30},
	{"kB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {NULL, 0}
};

/* A whole number (ASCII digits, no sign, no space) followed by one of units;
 * the unit "" is only allowed when units lists it. */
static enum units_problem parse_number(const char *s, const struct unit *units, uint64_t *out, const char **unit)
{
	char *end;
	unsigned long long v;

	*unit = "";
	if(s == NULL || s[0] < '0' || s[0] > '9') return UNITS_SYNTAX;
	errno = 0;
	v = strtoull(s, &end, 10);
	*unit = end;
	if(errno == ERANGE) return UNITS_OVERFLOW;
	for(const struct unit *u = units; u->name; u++){
		if(strcmp(end, u->name)) continue;
		if(v == 0) return UNITS_ZERO;
		if(v > UINT64_MAX / u->factor) return UNITS_OVERFLOW;
		*out = v * u->factor;
		return UNITS_OK;
	}
	return end[0] == '\0' ? UNITS_NO_UNIT : UNITS_BAD_UNIT;
}

enum units_problem units__duration(const char *s, uint64_t *out, const char **unit)
{
	return parse_number(s, duration_units, out, unit);
}

enum units_problem units__size(const char *s, uint64_t *out, const char **unit)
{
	return parse_number(s, size_units, out, unit);
}

int units__parse_duration_ms(const char *s, uint64_t *out)
{
	const char *unit;

	return units__duration(s, out, &unit) == UNITS_OK ? 0 : EINVAL;
}

int units__parse_delay_ms(const char *s, uint64_t *out)
{
	const char *unit;

	switch(units__duration(s, out, &unit)){
		case UNITS_OK:
			return 0;
		case UNITS_ZERO:
			*out = 0;
			return 0;
		default:
			return EINVAL;
	}
}

int units__parse_size(const char *s, uint64_t *out)
{
	const char *unit;

	return units__size(s, out, &unit) == UNITS_OK ? 0 : EINVAL;
}
