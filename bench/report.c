/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The throughput suite's tables (see suite.h).
 *
 * The machine is shared, so a phase is used only if it was clean: other
 * processes used at most REPORT_FOREIGN_MAX of a core meanwhile and, in a
 * closed-loop phase, the broker was busy at least REPORT_UTIL_MIN of the
 * time. Each table says how many rounds were clean; when none was, every
 * round is used and the row is marked "noisy".
 *
 * A variant's ratio in round r is taken against the clean bare runs just
 * before (round r) and just after (round r+1) it, so that a slow drift of
 * the machine cancels; the tables show the median over rounds with its
 * range. The throughput ratio is shown twice: delivered msg/s as measured,
 * and "CPU-normalized", the inverse ratio of the broker's CPU time per
 * message, which is what the saturated throughput ratio is when the broker
 * has its core to itself.
 */
#include <stdio.h>

#include "suite.h"

static bool phase_clean(const struct cell *c, int v, int r, bool closed_loop)
{
	return c->foreign[v][r] <= REPORT_FOREIGN_MAX && (!closed_loop || c->util[v][r] >= REPORT_UTIL_MIN);
}

/* Per-round ratios x/ref (or ref/x when inverse), ref being the bare runs
 * around round r, over the rounds where the variant and a reference were
 * clean (all rounds if strict finds none). Returns how many rounds it
 * used; sets the median and the range. */
static int sandwich(const struct cell *c, int v, const double *x, const double *bare, bool inverse,
		double *m, double *lo, double *hi)
{
	double ratios[BENCH_MAX_ROUNDS];
	int n = c->rounds;
	int used = 0;
	for(int pass = 0; pass < 2 && used == 0; pass++){
		bool strict = pass == 0;
		for(int r = 0; r < n; r++){
			double sum = 0;
			int k = 0;
			for(int b = r; b <= r + 1 && b < n; b++){
				if(bare[b] > 0 && (!strict || phase_clean(c, V_BARE, b, true))){
					sum += bare[b];
					k++;
				}
			}
			if(k == 0 || (strict && !phase_clean(c, v, r, true))) continue;
			double ref = sum / k;
			/* A phase the machine starved of all CPU has no figure. */
			if(ref <= 0 || x[r] <= 0) continue;
			ratios[used++] = inverse ? ref / x[r] : x[r] / ref;
		}
		if(used && !strict) used = -used;
	}
	int count = used < 0 ? -used : used;
	stats__range(ratios, (size_t)count, lo, hi);
	*m = stats__median(ratios, (size_t)count);
	return used;
}

/* Median of a variant's figure over its clean rounds (all if none). */
static double med(const struct cell *c, int v, const double *x)
{
	double vals[BENCH_MAX_ROUNDS];
	size_t n = 0;
	for(int r = 0; r < c->rounds; r++){
		if(phase_clean(c, v, r, true)) vals[n++] = x[r];
	}
	if(n == 0){
		for(int r = 0; r < c->rounds; r++){
			if(x[r] > 0) vals[n++] = x[r];
		}
	}
	return stats__median(vals, n);
}

static int pct(const struct cell *c, int v, const double *x, const double *bare, bool inverse)
{
	double m, lo, hi;
	int used = sandwich(c, v, x, bare, inverse, &m, &lo, &hi);
	printf(" %.1f%% [%.0f-%.0f] |", 100 * m, 100 * lo, 100 * hi);
	return used;
}

static void rounds_used(int used, int rounds)
{
	if(used < 0){
		printf(" 0/%d, noisy |\n", rounds);
	}else{
		printf(" %d/%d |\n", used, rounds);
	}
}

static void throughput_table(const struct cell *cells, int ncells)
{
	printf("\n### Throughput, closed loop (msg/s delivered, median of clean rounds; ratios: median [min-max])\n\n");
	printf("| QoS | pubs→subs | bare msg/s | untracked msg/s | ÷ bare | tracked msg/s | ÷ bare "
			"| broker µs/msg bare · untracked · tracked | CPU-normalized untracked ÷ bare "
			"| CPU-normalized tracked ÷ bare | clean rounds |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
	for(int i = 0; i < ncells; i++){
		const struct cell *c = &cells[i];
		if(c->rounds == 0) continue;
		printf("| %d | %d→%d | %.0f | %.0f |", c->qos, c->pairs, c->pairs, med(c, V_BARE, c->thr[V_BARE]),
				med(c, V_UNTRACKED, c->thr[V_UNTRACKED]));
		pct(c, V_UNTRACKED, c->thr[V_UNTRACKED], c->thr[V_BARE], false);
		printf(" %.0f |", med(c, V_TRACKED, c->thr[V_TRACKED]));
		int used = pct(c, V_TRACKED, c->thr[V_TRACKED], c->thr[V_BARE], false);
		printf(" %.2f · %.2f · %.2f |", med(c, V_BARE, c->us[V_BARE]), med(c, V_UNTRACKED, c->us[V_UNTRACKED]),
				med(c, V_TRACKED, c->us[V_TRACKED]));
		pct(c, V_UNTRACKED, c->us[V_UNTRACKED], c->us[V_BARE], true);
		pct(c, V_TRACKED, c->us[V_TRACKED], c->us[V_BARE], true);
		rounds_used(used, c->rounds);
	}
}

/* Percentiles of every sample of a variant over the clean latency rounds
 * (all if none): the variants take turns of milliseconds within a round,
 * so each is exposed alike to what else runs on the machine. */
static int pooled(const struct cell *c, int v, double out[3], size_t *count)
{
	static const double ps[3] = { 50, 90, 99 };
	struct bench_samples all = {0};
	int used = 0;
	for(int pass = 0; pass < 2 && used == 0; pass++){
		for(int r = 0; r < c->rounds; r++){
			if(c->lat[v][r].n == 0) continue; /* no latency phase that round */
			if(pass == 0 && c->lat_foreign[r] > REPORT_FOREIGN_MAX) continue;
			if(samples__append(&all, c->lat[v][r].v, c->lat[v][r].n) == 0) used++;
		}
		if(used && pass == 1) used = -used;
	}
	for(int i = 0; i < 3; i++){
		out[i] = all.n ? stats__percentile_u64(all.v, all.n, ps[i]) / 1e3 : 0;
	}
	*count = all.n;
	samples__free(&all);
	return used;
}

static void latency_table(const struct cell *cells, int ncells)
{
	printf("\n### Latency at a fixed offered load (end to end, µs: p50 / p90 / p99 of the clean rounds' samples)\n\n");
	printf("| QoS | pubs→subs | offered msg/s | samples per variant | bare | untracked | tracked "
			"| untracked p99 ÷ bare | tracked p99 ÷ bare | clean rounds |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|\n");
	for(int i = 0; i < ncells; i++){
		const struct cell *c = &cells[i];
		if(c->rounds == 0) continue;
		double q[NLAT][3];
		size_t n = 0;
		int used = 0;
		for(int v = 0; v < NLAT; v++){
			used = pooled(c, v, q[v], &n);
		}
		printf("| %d | %d→%d | %.0f | %zu |", c->qos, c->pairs, c->pairs, c->offered, n);
		for(int v = 0; v < NLAT; v++){
			printf(" %.0f / %.0f / %.0f |", q[v][0], q[v][1], q[v][2]);
		}
		printf(" %.2fx | %.2fx |", q[L_BARE][2] > 0 ? q[L_UNTRACKED][2] / q[L_BARE][2] : 0,
				q[L_BARE][2] > 0 ? q[L_TRACKED][2] / q[L_BARE][2] : 0);
		rounds_used(used, c->rounds);
	}
}

static void storm_table(const struct cell *cells, int ncells)
{
	printf("\n### NACK storm: every delivery NACKed until dead-lettered (max_attempts=%d)\n\n", BENCH_MAX_ATTEMPTS);
	printf("| QoS | pubs→subs | NACKs handled/s | retry copies/s | dead letters/s | NACKs/s ÷ bare delivered/s "
			"| broker µs per NACK | CPU-normalized NACKs/s ÷ bare delivered/s | storm deliveries/s ÷ bare "
			"| clean rounds |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|\n");
	for(int i = 0; i < ncells; i++){
		const struct cell *c = &cells[i];
		if(c->rounds == 0) continue;
		printf("| %d | %d→%d | %.0f | %.0f | %.0f |", c->qos, c->pairs, c->pairs, med(c, V_STORM, c->thr[V_STORM]),
				med(c, V_STORM, c->storm_copies), med(c, V_STORM, c->storm_dead));
		int used = pct(c, V_STORM, c->thr[V_STORM], c->thr[V_BARE], false);
		printf(" %.2f |", med(c, V_STORM, c->us[V_STORM]));
		pct(c, V_STORM, c->us[V_STORM], c->us[V_BARE], true);
		pct(c, V_STORM, c->storm_delivered, c->thr[V_BARE], false);
		rounds_used(used, c->rounds);
	}
}

void report__throughput(const struct cell *cells, int ncells)
{
	throughput_table(cells, ncells);
	latency_table(cells, ncells);
	storm_table(cells, ncells);
	printf("\nA phase is clean when other processes used at most %.2f of a core meanwhile and, in a closed-loop "
			"phase, the broker was busy at least %.0f%% of the time.\n", REPORT_FOREIGN_MAX, 100 * REPORT_UTIL_MIN);
	for(int i = 0; i < ncells; i++){
		const struct cell *c = &cells[i];
		if(c->untagged || c->unfinished || !c->ok){
			printf("Warning: QoS %d %d→%d: %llu tracked deliveries without a dlq-id, %llu messages unfinished%s.\n",
					c->qos, c->pairs, c->pairs, (unsigned long long)c->untagged,
					(unsigned long long)c->unfinished, c->ok ? "" : ", a phase failed");
		}
	}
}
