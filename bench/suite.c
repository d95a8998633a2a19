/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The throughput, latency and NACK-storm suite (see bench.h). Two brokers
 * run side by side for the whole suite: the bare broker (the reference) and
 * the plugin broker with BENCH_POLICIES policies. Each cell (QoS, pairs)
 * runs rounds of: bare, untracked, tracked, storm (closed loop), then bare,
 * untracked, tracked at a fixed offered load (latency). A variant's ratio
 * in round r is taken against the mean of the bare runs just before it
 * (round r) and just after it (round r+1), so that drift of the machine
 * between rounds cancels; the table shows the median over rounds.
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"

enum variant { V_BARE, V_UNTRACKED, V_TRACKED, V_STORM, NVAR };
enum lat_variant { L_BARE, L_UNTRACKED, L_TRACKED, NLAT };

struct cell {
	int qos;
	int pairs;
	bool ok;
	int rounds;                            /* completed */
	double offered;                        /* latency phases, msg/s */
	double thr[NVAR][BENCH_MAX_ROUNDS];    /* delivered/s; storm: NACKs handled/s */
	double us[NVAR][BENCH_MAX_ROUNDS];     /* broker CPU per message (storm: per NACK) */
	double util[NVAR][BENCH_MAX_ROUNDS];
	double storm_delivered[BENCH_MAX_ROUNDS];
	double storm_copies[BENCH_MAX_ROUNDS];
	double storm_dead[BENCH_MAX_ROUNDS];
	double p50[NLAT][BENCH_MAX_ROUNDS];
	double p99[NLAT][BENCH_MAX_ROUNDS];
	double lat_rate[NLAT][BENCH_MAX_ROUNDS];
	uint64_t untagged;
	uint64_t unfinished;
};

static int run_phase(const struct bench_config *cfg, const struct broker *b, struct cell *c,
		enum load_kind kind, double rate, const char *label, struct load_result *res)
{
	struct load_opts o = {
		.broker = b,
		.kind = kind,
		.qos = c->qos,
		.pairs = c->pairs,
		.payload_len = BENCH_PAYLOAD,
		.window = cfg->window / (unsigned)c->pairs,
		.rate = rate,
		.warmup_s = cfg->warmup_s,
		.measure_s = cfg->measure_s,
		.record_latency = rate > 0,
		.spin = true,
		.label = label,
	};
	if(kind == LOAD_STORM){
		/* A chain ends with its dead letter on the one consumer of the
		 * dead-letter topic: keep all chains within its queue. */
		o.window = (cfg->window < 800 ? cfg->window : 800) / (unsigned)c->pairs;
	}
	if(load__run(&o, res)) return -1;
	c->untagged += kind == LOAD_PLAIN ? 0 : res->untagged;
	c->unfinished += res->unfinished;
	return 0;
}

static int run_round(const struct bench_config *cfg, const struct broker *bare, const struct broker *plugin,
		struct cell *c, int r)
{
	struct load_result res;
	static const struct { enum variant v; enum load_kind kind; const char *label; } thr[] = {
		{ V_BARE, LOAD_PLAIN, "bare" },
		{ V_UNTRACKED, LOAD_PLAIN, "untracked" },
		{ V_TRACKED, LOAD_TRACKED, "tracked" },
		{ V_STORM, LOAD_STORM, "storm" },
	};
	for(size_t i = 0; i < NVAR; i++){
		const struct broker *b = thr[i].v == V_BARE ? bare : plugin;
		if(run_phase(cfg, b, c, thr[i].kind, 0, thr[i].label, &res)) return -1;
		if(thr[i].v == V_STORM){
			c->thr[V_STORM][r] = res.copies_per_s + res.dead_letters_per_s;
			c->us[V_STORM][r] = res.broker_us_per_nack;
			c->storm_delivered[r] = res.delivered_per_s + res.dead_letters_per_s;
			c->storm_copies[r] = res.copies_per_s;
			c->storm_dead[r] = res.dead_letters_per_s;
		}else{
			c->thr[thr[i].v][r] = res.delivered_per_s;
			c->us[thr[i].v][r] = res.broker_us_per_msg;
		}
		c->util[thr[i].v][r] = res.broker_cpu_util;
		fprintf(stderr, "  round %d %-9s %9.0f msg/s  broker %.2f us/msg, %3.0f%% CPU\n", r + 1, thr[i].label,
				thr[i].v == V_STORM ? c->storm_delivered[r] : res.delivered_per_s,
				thr[i].v == V_STORM ? res.broker_us_per_msg : c->us[thr[i].v][r], 100 * res.broker_cpu_util);
	}
	if(r == 0){
		c->offered = cfg->latency_load * c->thr[V_BARE][0];
	}
	static const struct { enum lat_variant v; enum load_kind kind; const char *label; } lat[] = {
		{ L_BARE, LOAD_PLAIN, "bare-lat" },
		{ L_UNTRACKED, LOAD_PLAIN, "untracked-lat" },
		{ L_TRACKED, LOAD_TRACKED, "tracked-lat" },
	};
	for(size_t i = 0; i < NLAT; i++){
		const struct broker *b = lat[i].v == L_BARE ? bare : plugin;
		if(run_phase(cfg, b, c, lat[i].kind, c->offered, lat[i].label, &res)) return -1;
		c->p50[lat[i].v][r] = res.p50_us;
		c->p99[lat[i].v][r] = res.p99_us;
		c->lat_rate[lat[i].v][r] = res.delivered_per_s;
		fprintf(stderr, "  round %d %-13s %7.0f msg/s  p50 %7.1f us  p99 %7.1f us\n", r + 1, lat[i].label,
				res.delivered_per_s, res.p50_us, res.p99_us);
	}
	return 0;
}

/* Ratio of x[r] to the bare runs around it, per round; returns the median
 * and sets the range. */
static double sandwich_ratio(const double *x, const double *bare, int rounds, double *lo, double *hi)
{
	double ratios[BENCH_MAX_ROUNDS];
	for(int r = 0; r < rounds; r++){
		double ref = r + 1 < rounds ? (bare[r] + bare[r + 1]) / 2 : bare[r];
		ratios[r] = ref > 0 ? x[r] / ref : 0;
	}
	stats__range(ratios, (size_t)rounds, lo, hi);
	return stats__median(ratios, (size_t)rounds);
}

static double med(double *v, int n)
{
	return stats__median(v, (size_t)n);
}

static void print_tables(struct cell *cells, int ncells)
{
	double lo, hi;

	printf("\n### Throughput, closed loop (msg/s delivered; median of rounds; ratio vs bare: median [min-max])\n\n");
	printf("| QoS | pubs→subs | bare msg/s | untracked msg/s | untracked/bare | tracked msg/s | tracked/bare "
			"| broker µs/msg bare · untracked · tracked | broker CPU bare |\n");
	printf("|---|---|---|---|---|---|---|---|---|\n");
	for(int i = 0; i < ncells; i++){
		struct cell *c = &cells[i];
		int n = c->rounds;
		if(n == 0) continue;
		printf("| %d | %d→%d | %.0f | %.0f |", c->qos, c->pairs, c->pairs, med(c->thr[V_BARE], n), med(c->thr[V_UNTRACKED], n));
		double ru = sandwich_ratio(c->thr[V_UNTRACKED], c->thr[V_BARE], n, &lo, &hi);
		printf(" %.1f%% [%.1f-%.1f] | %.0f |", 100 * ru, 100 * lo, 100 * hi, med(c->thr[V_TRACKED], n));
		double rt = sandwich_ratio(c->thr[V_TRACKED], c->thr[V_BARE], n, &lo, &hi);
		printf(" %.1f%% [%.1f-%.1f] | %.2f · %.2f · %.2f | %.0f%% |\n", 100 * rt, 100 * lo, 100 * hi,
				med(c->us[V_BARE], n), med(c->us[V_UNTRACKED], n), med(c->us[V_TRACKED], n),
				100 * med(c->util[V_BARE], n));
	}

	printf("\n### Latency at a fixed offered load (end to end, µs; median of rounds)\n\n");
	printf("| QoS | pubs→subs | offered msg/s | bare p50 / p99 | untracked p50 / p99 | tracked p50 / p99 "
			"| untracked p99/bare | tracked p99/bare |\n");
	printf("|---|---|---|---|---|---|---|---|\n");
	for(int i = 0; i < ncells; i++){
		struct cell *c = &cells[i];
		int n = c->rounds;
		if(n == 0) continue;
		printf("| %d | %d→%d | %.0f | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f |", c->qos, c->pairs, c->pairs, c->offered,
				med(c->p50[L_BARE], n), med(c->p99[L_BARE], n), med(c->p50[L_UNTRACKED], n), med(c->p99[L_UNTRACKED], n),
				med(c->p50[L_TRACKED], n), med(c->p99[L_TRACKED], n));
		double ru = sandwich_ratio(c->p99[L_UNTRACKED], c->p99[L_BARE], n, &lo, &hi);
		printf(" %.2fx [%.2f-%.2f] |", ru, lo, hi);
		double rt = sandwich_ratio(c->p99[L_TRACKED], c->p99[L_BARE], n, &lo, &hi);
		printf(" %.2fx [%.2f-%.2f] |\n", rt, lo, hi);
	}

	printf("\n### NACK storm: every delivery NACKed until dead-lettered (max_attempts=%d)\n\n", BENCH_MAX_ATTEMPTS);
	printf("| QoS | pubs→subs | NACKs handled/s | retry copies/s | dead letters/s | NACKs/s ÷ bare delivered/s "
			"| storm deliveries/s ÷ bare | broker µs per NACK | broker CPU |\n");
	printf("|---|---|---|---|---|---|---|---|---|\n");
	for(int i = 0; i < ncells; i++){
		struct cell *c = &cells[i];
		int n = c->rounds;
		if(n == 0) continue;
		printf("| %d | %d→%d | %.0f | %.0f | %.0f |", c->qos, c->pairs, c->pairs, med(c->thr[V_STORM], n),
				med(c->storm_copies, n), med(c->storm_dead, n));
		double rn = sandwich_ratio(c->thr[V_STORM], c->thr[V_BARE], n, &lo, &hi);
		printf(" %.1f%% [%.1f-%.1f] |", 100 * rn, 100 * lo, 100 * hi);
		double rd = sandwich_ratio(c->storm_delivered, c->thr[V_BARE], n, &lo, &hi);
		printf(" %.1f%% [%.1f-%.1f] | %.2f | %.0f%% |\n", 100 * rd, 100 * lo, 100 * hi, med(c->us[V_STORM], n),
				100 * med(c->util[V_STORM], n));
	}
	printf("\n");
	for(int i = 0; i < ncells; i++){
		if(cells[i].untagged || cells[i].unfinished || !cells[i].ok){
			printf("Warning: QoS %d %d→%d: %llu tracked deliveries without a dlq-id, %llu messages unfinished%s.\n",
					cells[i].qos, cells[i].pairs, cells[i].pairs, (unsigned long long)cells[i].untagged,
					(unsigned long long)cells[i].unfinished, cells[i].ok ? "" : ", a phase failed");
		}
	}
}

/* Sends enough tracked messages for the ledger to reach max_pending_bytes,
 * so that every measured round runs in the steady state where each new
 * record evicts the oldest. */
static int prefill(const struct bench_config *cfg, const struct broker *plugin)
{
	if(cfg->prefill == 0) return 0;
	struct load_opts o = {
		.broker = plugin, .kind = LOAD_TRACKED, .qos = 0, .pairs = 1,
		.payload_len = BENCH_PAYLOAD, .window = 800, .count = cfg->prefill,
		.timeout_ms = 120000, .label = "prefill",
	};
	struct load_result res;
	uint64_t t0 = bench__now_ns();
	int rc = load__run(&o, &res);
	fprintf(stderr, "prefill: %llu tracked messages in %.1f s\n", (unsigned long long)cfg->prefill,
			(double)(bench__now_ns() - t0) / 1e9);
	return rc;
}

int suite__throughput(const struct bench_config *cfg)
{
	struct broker bare, plugin;
	struct broker_opts bo = {
		.kind = BROKER_BARE, .plugin_path = cfg->plugin_path, .mosquitto_bin = cfg->mosquitto_bin,
		.tcp = cfg->tcp, .ready_timeout_ms = 10000,
	};
	struct broker_opts po = bo;
	po.kind = BROKER_PLUGIN;
	po.nack_window = cfg->nack_window;
	po.max_pending = cfg->max_pending;

	static struct cell cells[] = {
		{ .qos = 0, .pairs = 1 }, { .qos = 0, .pairs = 4 },
		{ .qos = 1, .pairs = 1 }, { .qos = 1, .pairs = 4 },
	};
	int ncells = (int)(sizeof(cells) / sizeof(cells[0]));
	int rc = 0;

	if(broker__start(&bare, &bo)) return -1;
	if(broker__start(&plugin, &po)){
		broker__stop(&bare, false);
		return -1;
	}
	if(prefill(cfg, &plugin)){
		rc = -1;
		goto done;
	}
	for(int i = 0; i < ncells; i++){
		struct cell *c = &cells[i];
		c->ok = true;
		fprintf(stderr, "cell QoS %d, %d→%d\n", c->qos, c->pairs, c->pairs);
		for(int r = 0; r < cfg->rounds; r++){
			if(run_round(cfg, &bare, &plugin, c, r)){
				c->ok = false;
				rc = -1;
				break;
			}
			c->rounds = r + 1;
		}
	}
	print_tables(cells, ncells);
	printf("Plugin broker at the end: RSS %ld KiB (bare: %ld KiB).\n",
			broker__rss_kib(&plugin), broker__rss_kib(&bare));

done:
	if(rc){
		broker__print_log(&plugin);
	}
	broker__stop(&plugin, false);
	broker__stop(&bare, false);
	return rc;
}
