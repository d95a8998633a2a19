/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The fleet suite (issue 39; --only fleet, not part of the default run):
 * dead letters collected at a central broker from three edges. What was
 * decided:
 *   - Brokers: three edges, each the plugin with FLEET_POLICY
 *     (max_attempts=1: every NACK is a dead letter at once), its own
 *     plugin_opt_broker_name and an MQTT v5 bridge as docs/fleet.md gives
 *     it (cleansession false, QoS 1, dead/# out under fleet/edge-<n>/,
 *     Mosquitto's defaults otherwise: 20 messages in flight), to a centre
 *     on a loopback TCP port. The centre in three kinds, the same bridged
 *     traffic: bare (no plugin: the floor, what carrying the letters costs
 *     the broker), collecting (plugin_opt_collect FLEET_COLLECT, nothing
 *     saved) and collecting with docs/fleet.md's journal (state_file with
 *     state_save_on_change: each letter synced before its PUBACK). The
 *     centre queues without bound for its subscriber (max_queued_messages
 *     0): with Mosquitto's 1000, a collecting centre dropped letters bound
 *     for it (its log: "Outgoing messages are being dropped"; the store
 *     kept them all), and a pass waits for every letter. No broker is
 *     pinned: the four brokers and the load share the machine's cores.
 *   - Traffic (fleet_client.c): a worker on each edge publishes originals
 *     (QoS 1, BENCH_PAYLOAD bytes) and NACKs each as it is delivered; a
 *     subscriber of FLEET_COLLECT on the centre counts the letters. First
 *     FLEET_WARMUP letters per edge (the bridges connected, the tables
 *     grown), then the measured pass: FLEET_N per edge, each edge keeping
 *     FLEET_WINDOW letters not yet at the centre (as fast as the fleet
 *     goes, and no more than a bridge's queue holds), timed from the first
 *     publish to the last letter; then FLEET_LAT_N per edge one at a time
 *     (each edge's next original after its last letter arrived).
 *   - Figures: letters per second at the centre; the centre's CPU
 *     (/proc/PID/stat utime + stime, broker__cpu_ns) over the measured
 *     pass per 1,000 letters; the time from the worker's NACK (its publish
 *     call) to the letter's arrival at the centre's subscriber, which the
 *     broker sends it after the plugin's message callback returned, so
 *     after the letter was kept (and journaled); p50 / p90 / p99 of each
 *     pass. The collecting centres' getStatus keptDeadLetters after the
 *     run, against the letters sent. The 1-minute load average at each
 *     run's start: other work on the machine shows in every figure.
 *   - FLEET_RUNS runs (--quick 1), each every kind in turn with fresh
 *     brokers; each run a row, and the range over the runs.
 * Nothing is asserted: only a broker or a phase that fails fails the run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"
#include "letters.h"
#include "suite.h"

#define FLEET_RUNS 3
#define FLEET_WARMUP 300
#define FLEET_N 5000
#define FLEET_N_QUICK 1000
#define FLEET_WINDOW 100
#define FLEET_LAT_N 300
#define FLEET_LAT_N_QUICK 100
#define FLEET_READY_MS 60000
#define FLEET_BRIDGE_LINES 8

enum fkind { F_BARE, F_COLLECT, F_JOURNAL, NFKIND };

static const char *const kind_name[NFKIND] = {
	"bare (no plugin)", "collecting", "collecting, journaled (`state_save_on_change`)",
};

struct frun {
	bool ok;
	double load1;                  /* the 1-minute load average at the run's start */
	double rate;                   /* letters per second at the centre, the measured pass */
	double cpu_per_k;              /* the centre's CPU seconds per 1,000 of them */
	double lat[2][3];              /* ms: p50, p90, p99; [0] the measured pass, [1] one at a time */
	double kept;                   /* getStatus keptDeadLetters; -1: bare */
	uint64_t twice;
};

static double load_average(void)
{
	double v = -1;
	FILE *f = fopen("/proc/loadavg", "r");
	if(f){
		if(fscanf(f, "%lf", &v) != 1) v = -1;
		fclose(f);
	}
	return v;
}

/* The centre's subscriber must get every letter: no bound on what the
 * centre queues for it. */
static const char *const centre_conf[] = { "max_queued_messages 0", NULL };

static void centre_opts(const struct bench_config *cfg, enum fkind k, const char **suite, const char **policies,
		struct broker_opts *bo)
{
	int n = 0;
	suite[n++] = "broker_name centre";
	suite[n++] = "collect " FLEET_COLLECT;
	if(k == F_JOURNAL){
		suite[n++] = "state_file {dir}/dlq.state";
		suite[n++] = "state_save_on_change true";
	}
	suite[n] = NULL;
	policies[0] = NULL;
	memset(bo, 0, sizeof(*bo));
	bo->kind = k == F_BARE ? BROKER_BARE : BROKER_PLUGIN;
	bo->plugin_path = cfg->plugin_path;
	bo->mosquitto_bin = cfg->mosquitto_bin;
	bo->tcp = true;
	bo->cpu = -1;
	bo->plugin_opts = cfg->plugin_opts;
	bo->suite_opts = suite;
	bo->policies = policies;
	bo->ready_timeout_ms = FLEET_READY_MS;
	bo->broker_conf = centre_conf;
}

/* Starts edge n (1..FLEET_EDGES) with its bridge to port. */
static int edge_start(const struct bench_config *cfg, int n, int port, struct broker *b)
{
	char lines[FLEET_BRIDGE_LINES][96], name[48];
	const char *conf[FLEET_BRIDGE_LINES + 1], *suite[2], *policies[] = { FLEET_POLICY, NULL };
	snprintf(lines[0], sizeof(lines[0]), "connection edge-%d-centre", n);
	snprintf(lines[1], sizeof(lines[1]), "address 127.0.0.1:%d", port);
	snprintf(lines[2], sizeof(lines[2]), "remote_clientid edge-%d", n);
	snprintf(lines[3], sizeof(lines[3]), "bridge_protocol_version mqttv50");
	snprintf(lines[4], sizeof(lines[4]), "cleansession false");
	snprintf(lines[5], sizeof(lines[5]), "notifications false");
	snprintf(lines[6], sizeof(lines[6]), "restart_timeout 1");
	snprintf(lines[7], sizeof(lines[7]), "topic dead/# out 1 \"\" fleet/edge-%d/", n);
	for(int i = 0; i < FLEET_BRIDGE_LINES; i++) conf[i] = lines[i];
	conf[FLEET_BRIDGE_LINES] = NULL;
	snprintf(name, sizeof(name), "broker_name edge-%d", n);
	suite[0] = name;
	suite[1] = NULL;
	struct broker_opts bo = {
		.kind = BROKER_PLUGIN, .plugin_path = cfg->plugin_path, .mosquitto_bin = cfg->mosquitto_bin, .cpu = -1,
		.plugin_opts = cfg->plugin_opts, .suite_opts = suite, .policies = policies, .broker_conf = conf,
		.ready_timeout_ms = FLEET_READY_MS,
	};
	return broker__start(b, &bo);
}

static void percentiles(struct bench_samples *s, double out[3])
{
	static const double p[3] = { 50, 90, 99 };
	for(int i = 0; i < 3; i++) out[i] = s->n ? stats__percentile_u64(s->v, s->n, p[i]) / 1e6 : -1;
}

/* The centre's keptDeadLetters, or -1 (logged). */
static double kept_at(const struct broker *centre)
{
	struct letters_client ops;
	cJSON *reply = NULL;
	const cJSON *data = NULL;
	uint64_t ns;
	size_t bytes;
	double kept = -1;
	if(letters_client__open(&ops, centre, "fleet-ops") == 0
			&& letters_client__command(&ops, "\"command\":\"getStatus\"", &reply, &data, &ns, &bytes) == 0){
		kept = letters__number(cJSON_GetObjectItemCaseSensitive(data, "totals"), "keptDeadLetters");
	}
	cJSON_Delete(reply);
	letters_client__close(&ops);
	return kept;
}

/* One run of kind k: fresh brokers, the three passes, the figures in r. */
static int run_one(const struct bench_config *cfg, enum fkind k, struct frun *r)
{
	struct broker centre = { 0 }, edges[FLEET_EDGES] = { 0 };
	struct fleet_traffic t;
	struct fleet_pass warm, full, one;
	const char *suite[6], *policies[1];
	struct broker_opts bo;
	uint64_t n = cfg->quick ? FLEET_N_QUICK : FLEET_N, lat_n = cfg->quick ? FLEET_LAT_N_QUICK : FLEET_LAT_N;
	int rc = -1;

	memset(r, 0, sizeof(*r));
	memset(&t, 0, sizeof(t));
	r->load1 = load_average();
	centre_opts(cfg, k, suite, policies, &bo);
	if(broker__start(&centre, &bo)) return -1;
	for(int i = 0; i < FLEET_EDGES; i++){
		if(edge_start(cfg, i + 1, centre.port, &edges[i])) goto out;
	}
	fprintf(stderr, "dlq_bench: fleet: %s centre, %llu letters per edge\n", kind_name[k], (unsigned long long)n);
	if(fleet_traffic__open(&t, edges, &centre) || fleet_traffic__pass(&t, FLEET_WARMUP, FLEET_WINDOW, &warm)){
		goto out;
	}
	uint64_t cpu0 = broker__cpu_ns(&centre);
	if(fleet_traffic__pass(&t, n, FLEET_WINDOW, &full)) goto out;
	uint64_t cpu1 = broker__cpu_ns(&centre);
	percentiles(&t.lat, r->lat[0]);
	if(fleet_traffic__pass(&t, lat_n, 1, &one)) goto out;
	percentiles(&t.lat, r->lat[1]);
	r->rate = (double)full.letters / full.seconds;
	r->cpu_per_k = (double)(cpu1 - cpu0) / 1e9 / (double)full.letters * 1000.0;
	r->twice = warm.twice + full.twice + one.twice;
	r->kept = k == F_BARE ? -1 : kept_at(&centre);
	r->ok = true;
	rc = 0;
out:
	if(rc){
		broker__print_log(&centre);
		if(edges[0].pid) broker__print_log(&edges[0]);
	}
	fleet_traffic__close(&t);
	for(int i = 0; i < FLEET_EDGES; i++){
		if(edges[i].pid) broker__stop(&edges[i]);
	}
	broker__stop(&centre);
	return rc;
}

/* "median (min-max)" of one figure over the runs of a kind. */
static void range_cell(const struct frun *runs, int nruns, double (*f)(const struct frun *), const char *fmt,
		char *buf, size_t len)
{
	double v[FLEET_RUNS], lo, hi;
	int m = 0;
	for(int i = 0; i < nruns; i++){
		if(runs[i].ok) v[m++] = f(&runs[i]);
	}
	if(m == 0){
		snprintf(buf, len, "failed");
		return;
	}
	stats__range(v, (size_t)m, &lo, &hi);
	char a[32], b[32];
	snprintf(a, sizeof(a), fmt, lo);
	snprintf(b, sizeof(b), fmt, hi);
	snprintf(buf, len, "%s-%s", a, b);
}

static double f_rate(const struct frun *r) { return r->rate; }
static double f_cpu(const struct frun *r) { return r->cpu_per_k; }
static double f_p50(const struct frun *r) { return r->lat[0][0]; }
static double f_p99(const struct frun *r) { return r->lat[0][2]; }
static double f_one50(const struct frun *r) { return r->lat[1][0]; }
static double f_one99(const struct frun *r) { return r->lat[1][2]; }
static double f_load(const struct frun *r) { return r->load1; }

static void print(const struct bench_config *cfg, struct frun runs[NFKIND][FLEET_RUNS], int nruns)
{
	uint64_t n = cfg->quick ? FLEET_N_QUICK : FLEET_N, lat_n = cfg->quick ? FLEET_LAT_N_QUICK : FLEET_LAT_N;
	uint64_t sent = FLEET_EDGES * (FLEET_WARMUP + n + lat_n);
	printf("\n### A fleet: collecting at the centre (fleet)\n\n");
	printf("Three edges (the plugin, `%s`, a v5 QoS 1 bridge each) and a centre on loopback TCP; each edge's "
			"worker NACKs every original, %llu letters per edge measured with at most %d per edge not yet at the "
			"centre, then %llu per edge one at a time. Brokers not pinned.\n\n", FLEET_POLICY,
			(unsigned long long)n, FLEET_WINDOW, (unsigned long long)lat_n);
	printf("| centre | run | load (1 min) | letters/s at the centre | centre CPU s per 1,000 letters | NACK to "
			"centre p50 / p90 / p99, ms | one at a time: p50 / p90 / p99, ms | kept at the centre (of %llu) "
			"| delivered again |\n|---|---|---|---|---|---|---|---|---|\n", (unsigned long long)sent);
	for(int k = 0; k < NFKIND; k++){
		for(int i = 0; i < nruns; i++){
			const struct frun *r = &runs[k][i];
			if(!r->ok){
				printf("| %s | %d | %.2f | failed | | | | | |\n", kind_name[k], i + 1, r->load1);
				continue;
			}
			char kept[32] = "-";
			if(r->kept >= 0) snprintf(kept, sizeof(kept), "%.0f", r->kept);
			printf("| %s | %d | %.2f | %.0f | %.3f | %.1f / %.1f / %.1f | %.2f / %.2f / %.2f | %s | %llu |\n",
					kind_name[k], i + 1, r->load1, r->rate, r->cpu_per_k, r->lat[0][0], r->lat[0][1], r->lat[0][2],
					r->lat[1][0], r->lat[1][1], r->lat[1][2], kept, (unsigned long long)r->twice);
		}
	}
	printf("\n| centre | load (1 min) | letters/s | CPU s per 1,000 | NACK to centre p50, ms | p99, ms | one at a "
			"time p50, ms | p99, ms |\n|---|---|---|---|---|---|---|---|\n");
	for(int k = 0; k < NFKIND; k++){
		char c[7][48];
		range_cell(runs[k], nruns, f_load, "%.2f", c[0], sizeof(c[0]));
		range_cell(runs[k], nruns, f_rate, "%.0f", c[1], sizeof(c[1]));
		range_cell(runs[k], nruns, f_cpu, "%.3f", c[2], sizeof(c[2]));
		range_cell(runs[k], nruns, f_p50, "%.1f", c[3], sizeof(c[3]));
		range_cell(runs[k], nruns, f_p99, "%.1f", c[4], sizeof(c[4]));
		range_cell(runs[k], nruns, f_one50, "%.2f", c[5], sizeof(c[5]));
		range_cell(runs[k], nruns, f_one99, "%.2f", c[6], sizeof(c[6]));
		printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", kind_name[k], c[0], c[1], c[2], c[3], c[4], c[5], c[6]);
	}
	printf("\nRanges over %d runs (min-max), each run every centre in turn with fresh brokers. NACK to centre: "
			"from the worker's NACK publish on the edge to the letter's arrival at a subscriber of `%s` on the "
			"centre (sent after the plugin kept it). CPU: the centre's utime + stime over the measured pass.\n",
			nruns, FLEET_COLLECT);
}

int suite__fleet(const struct bench_config *cfg)
{
	static struct frun runs[NFKIND][FLEET_RUNS];
	int nruns = cfg->quick ? 1 : FLEET_RUNS, rc = 0;
	memset(runs, 0, sizeof(runs));
	for(int i = 0; i < nruns && !bench__interrupted(); i++){
		for(int k = 0; k < NFKIND && !bench__interrupted(); k++){
			if(run_one(cfg, (enum fkind)k, &runs[k][i])){
				fprintf(stderr, "dlq_bench: fleet: the %s run %d failed\n", kind_name[k], i + 1);
				rc = -1;
			}
		}
	}
	print(cfg, runs, nruns);
	return rc;
}
