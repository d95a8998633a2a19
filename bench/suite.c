/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The throughput, latency and NACK-storm suite (see bench.h). Two brokers
 * run side by side for the whole suite: the bare broker (the reference) and
 * the plugin broker with BENCH_POLICIES policies, its ledger first filled to
 * its bound. Each cell (QoS, pairs) runs rounds of: bare, untracked,
 * tracked, storm (closed loop, one after the other), then one latency phase
 * at a fixed offered load in which bare, untracked and tracked take turns
 * of LATENCY_SLICE_S. report.c turns the rounds into ratios.
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "suite.h"

/* Each latency target publishes for this long, then the next. */
#define LATENCY_SLICE_S 0.02

int suite__closed_phase(const struct bench_config *cfg, const struct broker *b, int qos, int pairs,
		enum load_kind kind, unsigned window, bool spin, const char *label, struct load_result *res)
{
	struct load_opts o = {
		.target = { { .broker = b, .kind = kind } },
		.targets = 1,
		.qos = qos,
		.pairs = pairs,
		.payload_len = BENCH_PAYLOAD,
		.window = cfg->window / (unsigned)pairs,
		.warmup_s = cfg->warmup_s,
		.measure_s = cfg->measure_s,
		.spin = spin,
		.label = label,
	};
	if(kind == LOAD_STORM){
		/* A chain ends with its dead letter on the one consumer of the
		 * dead-letter topic: keep all chains within its queue. */
		o.window = (cfg->window < 800 ? cfg->window : 800) / (unsigned)pairs;
	}
	if(window) o.window = window / (unsigned)pairs ? window / (unsigned)pairs : 1;
	return load__run(&o, res);
}

/* One closed-loop phase against one broker. */
static int run_closed(const struct bench_config *cfg, const struct broker *b, struct cell *c,
		enum load_kind kind, const char *label, struct load_result *res)
{
	if(suite__closed_phase(cfg, b, c->qos, c->pairs, kind, 0, true, label, res)) return -1;
	c->untagged += kind == LOAD_PLAIN ? 0 : res->untagged;
	c->unfinished += res->unfinished;
	return 0;
}

/* The latency phase: bare, untracked and tracked at the same offered load,
 * taking turns of LATENCY_SLICE_S for LATENCY_TURNS times measure_s. */
static int run_latency(const struct bench_config *cfg, const struct broker *bare, const struct broker *plugin,
		struct cell *c, struct load_result *res)
{
	struct load_opts o = {
		.target = {
			[L_BARE] = { .broker = bare, .kind = LOAD_PLAIN },
			[L_UNTRACKED] = { .broker = plugin, .kind = LOAD_PLAIN },
			[L_TRACKED] = { .broker = plugin, .kind = LOAD_TRACKED },
		},
		.targets = NLAT,
		.slice_s = LATENCY_SLICE_S,
		.qos = c->qos,
		.pairs = c->pairs,
		.payload_len = BENCH_PAYLOAD,
		.window = cfg->window / (unsigned)c->pairs,
		.rate = c->offered,
		.warmup_s = cfg->warmup_s,
		.measure_s = NLAT * cfg->measure_s,
		.record_latency = true,
		.spin = true,
		.label = "latency",
	};
	if(load__run(&o, res)) return -1;
	c->untagged += res->untagged;
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
		if(run_closed(cfg, b, c, thr[i].kind, thr[i].label, &res)) return -1;
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
		c->foreign[thr[i].v][r] = res.foreign_cpu;
		fprintf(stderr, "  round %d %-9s %9.0f msg/s  broker %.2f us/msg, %3.0f%% CPU; other load %.2f cores\n",
				r + 1, thr[i].label, thr[i].v == V_STORM ? c->storm_delivered[r] : res.delivered_per_s,
				thr[i].v == V_STORM ? res.broker_us_per_msg : c->us[thr[i].v][r], 100 * res.broker_cpu_util,
				res.foreign_cpu);
		load__result_free(&res);
	}
	if(c->offered <= 0 && c->us[V_BARE][r] > 0){
		/* What the bare broker would deliver with a core of its own,
		 * from its CPU time per message in the first round that has
		 * it: unlike msg/s, that figure does not drop when the machine
		 * pauses the broker. */
		c->offered = cfg->latency_load * 1e6 / c->us[V_BARE][r];
	}
	if(c->offered <= 0){
		fprintf(stderr, "  round %d latency: skipped, the bare broker delivered nothing yet\n", r + 1);
		return 0;
	}
	if(run_latency(cfg, bare, plugin, c, &res)) return -1;
	static const char *const names[NLAT] = { "bare", "untracked", "tracked" };
	c->lat_foreign[r] = res.foreign_cpu;
	fprintf(stderr, "  round %d latency: other load %.2f cores\n", r + 1, res.foreign_cpu);
	for(int v = 0; v < NLAT; v++){
		c->p50[v][r] = res.p50_us[v];
		c->p99[v][r] = res.p99_us[v];
		c->lat_rate[v][r] = res.target_delivered_per_s[v] * NLAT;
		c->lat[v][r] = res.lat[v]; /* the cell takes the samples */
		memset(&res.lat[v], 0, sizeof(res.lat[v]));
		fprintf(stderr, "  round %d latency %-9s %7.0f msg/s in its turns  p50 %7.1f us  p99 %7.1f us\n", r + 1,
				names[v], c->lat_rate[v][r], res.p50_us[v], res.p99_us[v]);
	}
	return 0;
}

/* Sends enough tracked messages for the ledger to reach max_pending_bytes,
 * so that every measured round runs in the steady state where each new
 * record evicts the oldest. */
static int prefill(const struct bench_config *cfg, const struct broker *plugin)
{
	if(cfg->prefill == 0) return 0;
	struct load_opts o = {
		.target = { { .broker = plugin, .kind = LOAD_TRACKED } }, .targets = 1, .qos = 0, .pairs = 1,
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
		.tcp = cfg->tcp, .cpu = cfg->broker_cpu, .plugin_opts = cfg->plugin_opts, .ready_timeout_ms = 10000,
	};
	struct broker_opts po = bo;
	po.kind = BROKER_PLUGIN;
	/* The plugin's defaults: nack_window 300s, max_pending_bytes 64MiB. */

	struct cell cells[] = {
		{ .qos = 0, .pairs = 1 }, { .qos = 0, .pairs = 4 },
		{ .qos = 1, .pairs = 1 }, { .qos = 1, .pairs = 4 },
	};
	int ncells = (int)(sizeof(cells) / sizeof(cells[0]));
	int rc = 0;

	if(broker__start(&bare, &bo)) return -1;
	if(broker__start(&plugin, &po)){
		broker__stop(&bare);
		return -1;
	}
	if(prefill(cfg, &plugin)){
		rc = -1;
		goto done;
	}
	for(int i = 0; i < ncells && !bench__interrupted(); i++){
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
	report__throughput(cells, ncells);
	for(int i = 0; i < ncells; i++){
		for(int v = 0; v < NLAT; v++){
			for(int r = 0; r < BENCH_MAX_ROUNDS; r++){
				samples__free(&cells[i].lat[v][r]);
			}
		}
	}
	printf("Plugin broker at the end: RSS %ld KiB (bare: %ld KiB).\n",
			broker__rss_kib(&plugin), broker__rss_kib(&bare));

done:
	if(rc && !bench__interrupted()){
		broker__print_log(&plugin);
	}
	broker__stop(&plugin);
	broker__stop(&bare);
	return rc;
}
