/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Clocks and the few statistics the benchmark reports (see bench.h):
 * medians and ranges over rounds, percentiles over latency samples.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

static volatile sig_atomic_t interrupted;

void bench__interrupt(void)
{
	interrupted = 1;
}

bool bench__interrupted(void)
{
	return interrupted != 0;
}

uint64_t bench__now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t bench__machine_busy_ns(void)
{
	unsigned long long v[8] = {0};
	FILE *f = fopen("/proc/stat", "r");
	if(f == NULL) return 0;
	/* cpu user nice system idle iowait irq softirq steal */
	int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu",
			&v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	if(n < 7) return 0;
	unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
	long hz = sysconf(_SC_CLK_TCK);
	return busy * (1000000000ull / (unsigned long long)(hz > 0 ? hz : 100));
}

uint64_t bench__self_cpu_ns(void)
{
	struct timespec ts;
	if(clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)) return 0;
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

int samples__append(struct bench_samples *s, const uint64_t *v, size_t n)
{
	if(n == 0) return 0;
	if(s->n + n > s->cap){
		size_t cap = s->cap ? s->cap : 65536;
		while(cap < s->n + n){
			cap *= 2;
		}
		uint64_t *nv = realloc(s->v, cap * sizeof(*nv));
		if(nv == NULL) return -1;
		s->v = nv;
		s->cap = cap;
	}
	memcpy(s->v + s->n, v, n * sizeof(*v));
	s->n += n;
	return 0;
}

void samples__free(struct bench_samples *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}

void stats__range(const double *v, size_t n, double *lo, double *hi)
{
	*lo = *hi = n ? v[0] : 0;
	for(size_t i = 1; i < n; i++){
		if(v[i] < *lo) *lo = v[i];
		if(v[i] > *hi) *hi = v[i];
	}
}
