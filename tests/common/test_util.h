/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Small helpers every kind of test shares (unit, fault, fuzz, integration
 * and soak tests): each suite's meson.build puts tests/common on the
 * include path. Nothing here knows the plugin.
 */
#ifndef DLQ_TEST_UTIL_H
#define DLQ_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* The number of elements of array a (an array, not a pointer to one). */
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* The monotonic clock in nanoseconds, for figures a test prints. */
static inline uint64_t test_clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
