/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Clocks and the few statistics the benchmark reports (see bench.h):
 * medians and ranges over rounds, percentiles over latency samples.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

uint64_t bench__now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void bench__sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
	while(nanosleep(&ts, &ts) == -1 && errno == EINTR){
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

double stats__median(double *v, size_t n)
{
	if(n == 0) return 0;
	double *s = malloc(n * sizeof(*s));
	if(s == NULL) return v[0];
	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_double);
	double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	free(s);
	return m;
}

/* Sorts v in place; nearest-rank percentile. */
double stats__percentile_u64(uint64_t *v, size_t n, double p)
{
	if(n == 0) return 0;
	qsort(v, n, sizeof(*v), cmp_u64);
	size_t rank = (size_t)(p / 100.0 * (double)n + 0.999999);
	if(rank < 1) rank = 1;
	if(rank > n) rank = n;
	return (double)v[rank - 1];
}

void stats__range(const double *v, size_t n, double *lo, double *hi)
{
	*lo = *hi = n ? v[0] : 0;
	for(size_t i = 1; i < n; i++){
		if(v[i] < *lo) *lo = v[i];
		if(v[i] > *hi) *hi = v[i];
	}
}
