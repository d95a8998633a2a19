/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The growth suite (issue 23, part 2; opt-in: --only growth): what grows
 * with the number of messages the plugin keeps NACKable. What was decided:
 *   - Kept messages are records in the plugin's ledger: every broker here
 *     has nack_window 1h and max_pending_bytes 2GiB (1,000,000 records of
 *     the 200-byte payload take some 300 MB), so none expires or is
 *     evicted while the suite runs.
 *   - Filling: for each N (0, 1,000, 100,000, 1,000,000; --quick 0, 1,000,
 *     10,000) a native plugin broker with plugin_opt_state_file receives N
 *     tracked messages (QoS 1, one publisher to one subscriber) and is
 *     stopped with SIGTERM, when the plugin saves its state file. Every
 *     measured broker then starts from a fresh copy of that file (a
 *     restored record is in the ledger, so NACKable; the plugin's log says
 *     how many it restored, which is checked against N). The files live in
 *     a directory of the suite's own under /tmp, which 2.1's root shares
 *     (scripts/brokers.sh mount 2.1 binds /tmp), and are removed at the end.
 *   - Memory: VmRSS of the filling broker after minus before its N, less
 *     the same for a bare broker that passed the same N, per record; and
 *     the RSS of a broker just started from the file.
 *   - Start: from the fork of a native broker to its "running" log line
 *     (polled every 10 ms) with the file of N records; the plugin restores
 *     the file, then saves a fresh snapshot before the broker goes on
 *     (persist__start), so this includes one save. Save: from SIGTERM to
 *     the broker's exit, which is the plugin's snapshot of N records plus
 *     the broker's own shutdown (N = 0 shows the latter). Median of
 *     GROWTH_TIMING_RUNS runs each.
 *   - Instructions (growth_callgrind.c): as the callgrind suite, the
 *     difference of a small and a large workload (200 and 2,000 messages;
 *     --quick 20 and 200), here on one broker per N under callgrind,
 *     restored from the file of N records. Restoring 1,000,000 records
 *     under callgrind takes minutes, so one broker runs all four
 *     workloads, and callgrind_control (the root's, on 2.1) zeroes its
 *     counts once it runs and dumps them after each workload: each dump
 *     holds that workload alone, and neither the restore nor the shutdown
 *     save (which the broker is killed before) is counted. Workloads:
 *     tracked messages (per message), then the NACK storm of the other
 *     suites (every delivery NACKed until dead-lettered: per NACK, 3 per
 *     message, each NACK looking its record up among the N kept). The 2,200
 *     tracked messages before the storm add to N, which matters at N = 0
 *     only. plugin_opt_state_save_interval 1d, so no interval save falls in
 *     a run; no $SYS publishing.
 *   - Latency: on a native plugin broker with no state file, 1,000 NACK
 *     round trips (--quick 200) one at a time, from the NACK's publish to
 *     its retry copy's arrival (growth_latency.c); then 10,000 tracked
 *     messages (--quick 1,000) are NACKed with delay-ms of an hour, and the
 *     same round trips are measured again.
 * Nothing is asserted: only a broker or a phase that fails fails the run.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "growth.h"
#include "suite.h"

#define GROWTH_NACK_WINDOW "1h"
#define GROWTH_MAX_PENDING "2GiB"
#define FILL_WINDOW 100
#define FILL_TIMEOUT_MS 1200000
#define NATIVE_READY_MS 120000
#define LAT_DELAYED 10000
#define LAT_DELAYED_QUICK 1000
#define LAT_NACKS 1000
#define LAT_NACKS_QUICK 200

void growth__plugin_broker(const struct bench_config *cfg, const char *state_file, struct gbroker *g)
{
	memset(g, 0, sizeof(*g));
	int n = 0;
	if(state_file){
		snprintf(g->state_opt, sizeof(g->state_opt), "state_file %s", state_file);
		g->suite[n++] = g->state_opt;
	}
	g->suite[n++] = GROWTH_SAVE_INTERVAL;
	g->suite[n] = NULL;
	g->bo.kind = BROKER_PLUGIN;
	g->bo.plugin_path = cfg->plugin_path;
	g->bo.mosquitto_bin = cfg->mosquitto_bin;
	g->bo.tcp = cfg->tcp;
	g->bo.cpu = cfg->broker_cpu;
	g->bo.nack_window = GROWTH_NACK_WINDOW;
	g->bo.max_pending = GROWTH_MAX_PENDING;
	g->bo.plugin_opts = cfg->plugin_opts;
	g->bo.suite_opts = g->suite;
	g->bo.ready_timeout_ms = NATIVE_READY_MS;
}

static int copy_file(const char *from, const char *to)
{
	char buf[1 << 16];
	int in = open(from, O_RDONLY | O_CLOEXEC);
	if(in < 0) return -1;
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int rc = out < 0 ? -1 : 0;
	ssize_t r;
	while(rc == 0 && (r = read(in, buf, sizeof(buf))) != 0){
		if(r < 0 || write(out, buf, (size_t)r) != r) rc = -1;
	}
	/* On disk before a broker starts from it, as a state file a broker
	 * left is: its writeback would otherwise go on under the broker. */
	if(rc == 0 && fsync(out)) rc = -1;
	if(out >= 0 && close(out)) rc = -1;
	close(in);
	if(rc) fprintf(stderr, "dlq_bench: growth: cannot copy %s to %s: %s\n", from, to, strerror(errno));
	return rc;
}

int growth__fresh_state(const struct gsize *gs, const char *run)
{
	char journal[300];
	snprintf(journal, sizeof(journal), "%s.journal", run);
	unlink(journal);
	return copy_file(gs->state, run);
}

/* The number after "restored " in the broker's log of this start, or -1. */
static long long restored_count(const struct broker *b)
{
	char line[1024];
	long long n = -1;
	FILE *f = fopen(b->log_path, "r");
	if(f == NULL) return -1;
	if(b->log_offset > 0) fseek(f, b->log_offset, SEEK_SET);
	while(fgets(line, sizeof(line), f)){
		const char *p = strstr(line, ": restored ");
		if(p && sscanf(p, ": restored %lld NACKable", &n) != 1) n = -1;
	}
	fclose(f);
	return n;
}

int growth__restored_check(const struct broker *b, uint64_t n)
{
	long long got = restored_count(b);
	if(got == (long long)n) return 0;
	fprintf(stderr, "dlq_bench: growth: the broker restored %lld records, not %llu\n", got, (unsigned long long)n);
	broker__print_log(b);
	return -1;
}

int growth__pass_messages(const struct bench_config *cfg, struct broker *b, enum load_kind kind, uint64_t n,
		double *kib)
{
	struct load_opts o = {
		.target = { { .broker = b, .kind = kind } }, .targets = 1, .qos = 1, .pairs = 1,
		.payload_len = BENCH_PAYLOAD, .window = FILL_WINDOW, .count = n, .timeout_ms = FILL_TIMEOUT_MS,
		.label = "growth",
	};
	struct load_result res;
	(void)cfg;
	long rss0 = broker__rss_kib(b);
	if(n && load__run(&o, &res)) return -1;
	long rss1 = broker__rss_kib(b);
	if(n && (res.untagged || res.unfinished)){
		fprintf(stderr, "dlq_bench: growth: %llu untagged, %llu unfinished\n", (unsigned long long)res.untagged,
				(unsigned long long)res.unfinished);
		return -1;
	}
	*kib = rss0 >= 0 && rss1 >= 0 ? (double)(rss1 - rss0) : -1;
	return 0;
}

int growth__fill_state(const struct bench_config *cfg, const char *dir, struct gsize *gs)
{
	struct gbroker g;
	struct broker b;
	struct stat st;

	snprintf(gs->state, sizeof(gs->state), "%s/fill-%llu.state", dir, (unsigned long long)gs->n);
	growth__plugin_broker(cfg, gs->state, &g);
	fprintf(stderr, "growth: filling a broker with %llu tracked messages\n", (unsigned long long)gs->n);
	if(broker__start(&b, &g.bo)) return -1;
	if(growth__pass_messages(cfg, &b, LOAD_TRACKED, gs->n, &gs->plugin_kib)){
		broker__stop(&b);
		return -1;
	}
	broker__halt(&b, SIGTERM);
	gs->fill_save_ms = b.stop_ms;
	broker__remove_dir(&b);
	if(stat(gs->state, &st)){
		fprintf(stderr, "dlq_bench: growth: no state file %s after SIGTERM\n", gs->state);
		return -1;
	}
	gs->state_bytes = (long long)st.st_size;
	gs->filled = true;
	return 0;
}

/* The file of gs->n records, and the memory figures of filling it: the
 * filling broker's RSS growth and a bare broker's over as many messages. */
static int fill(const struct bench_config *cfg, const char *dir, struct gsize *gs)
{
	struct gbroker g;
	struct broker b;

	if(growth__fill_state(cfg, dir, gs)) return -1;
	growth__plugin_broker(cfg, NULL, &g);
	struct broker_opts bare = g.bo;
	bare.kind = BROKER_BARE;
	if(gs->n && broker__start(&b, &bare) == 0){
		gs->rss_ok = growth__pass_messages(cfg, &b, LOAD_PLAIN, gs->n, &gs->bare_kib) == 0 && gs->plugin_kib >= 0
				&& gs->bare_kib >= 0;
		broker__stop(&b);
	}
	return 0;
}

/* One native start from the file and one stop: the times, and the RSS. */
static int time_restore(const struct bench_config *cfg, const char *run, struct gsize *gs)
{
	struct gbroker g;
	struct broker b;

	growth__plugin_broker(cfg, run, &g);
	if(growth__fresh_state(gs, run)) return -1;
	uint64_t t0 = bench__now_ns();
	if(broker__start(&b, &g.bo)) return -1;
	double start_ms = (double)(bench__now_ns() - t0) / 1e6;
	long rss = broker__rss_kib(&b);
	int rc = growth__restored_check(&b, gs->n);
	broker__halt(&b, SIGTERM);
	broker__remove_dir(&b);
	if(rc) return -1;
	gs->start_ms[gs->timed] = start_ms;
	gs->save_ms[gs->timed] = b.stop_ms;
	gs->timed++;
	gs->restored_kib = rss;
	return 0;
}

static double median_of(const double *v, int n)
{
	double tmp[GROWTH_TIMING_RUNS];
	memcpy(tmp, v, (size_t)n * sizeof(*v));
	return stats__median(tmp, (size_t)n);
}

static void print_tables(const struct bench_config *cfg, const struct gsize *gs, int nsizes)
{
	uint64_t n1 = cfg->callgrind_count, n0 = n1 / 10;
	printf("\n#### Instructions with N messages kept NACKable (callgrind, %llu minus %llu messages, restored from a "
			"state file of N records)\n\n", (unsigned long long)n1, (unsigned long long)n0);
	printf("| kept N | tracked: broker Ir/msg | adapter__message Ir/msg | adapter__tick Ir/msg | storm: broker Ir/NACK "
			"| adapter__control Ir/NACK | adapter__tick Ir/NACK |\n|---|---|---|---|---|---|---|\n");
	for(int i = 0; i < nsizes; i++){
		const struct gsize *g = &gs[i];
		printf("| %llu |", (unsigned long long)g->n);
		for(int l = 0; l < NGLOAD; l++){
			if(!g->cg_ok[l]){
				printf(" %s | | |", cfg->no_valgrind ? "skipped (--no-callgrind)" : "failed");
				continue;
			}
			printf(" %.0f | %.0f | %.0f |", g->per[l][FN_TOTAL], g->per[l][l == G_STORM ? FN_CONTROL : FN_MESSAGE],
					g->per[l][FN_TICK]);
		}
		printf("\n");
	}
	printf("\nPer NACK: the storm's broker total per published message over its %d NACKs (each with the delivery "
			"it NACKs; the last one's dead letter too). One pair of runs per cell.\n", BENCH_MAX_ATTEMPTS);

	printf("\n#### Memory, start and save with N messages kept NACKable (native)\n\n");
	printf("| kept N | RSS growth plugin − bare, B/record | RSS started from the file, MiB | state file, MB "
			"| start with the file, ms | save (SIGTERM to exit), ms | filling broker's save, ms |\n"
			"|---|---|---|---|---|---|---|\n");
	for(int i = 0; i < nsizes; i++){
		const struct gsize *g = &gs[i];
		char rss[32] = "", start[32] = "failed", save[32] = "failed";
		if(!g->filled){
			printf("| %llu | failed | | | | | |\n", (unsigned long long)g->n);
			continue;
		}
		if(g->n && g->rss_ok) snprintf(rss, sizeof(rss), "%.0f", (g->plugin_kib - g->bare_kib) * 1024.0 / (double)g->n);
		if(g->timed){
			snprintf(start, sizeof(start), "%.0f", median_of(g->start_ms, g->timed));
			snprintf(save, sizeof(save), "%.0f", median_of(g->save_ms, g->timed));
		}
		printf("| %llu | %s | %.1f | %.1f | %s | %s | %.0f |\n", (unsigned long long)g->n, rss,
				g->restored_kib > 0 ? (double)g->restored_kib / 1024.0 : 0.0, (double)g->state_bytes / 1e6, start, save,
				g->fill_save_ms);
	}
	printf("\nStart: from fork to the broker's \"running\" line, polled every 10 ms, restoring the file and saving it "
			"again; save: the plugin's shutdown snapshot and the broker's exit; median of %d runs each. RSS growth: "
			"over the N messages, the filling broker's less a bare broker's (RSS grows in pages: at 1,000 records a few "
			"pages of allocator slack dominate); %d B payloads.\n",
			GROWTH_TIMING_RUNS, BENCH_PAYLOAD);
}

static void print_latency(const struct growth_latency *lat, bool ok)
{
	printf("\n#### One NACK's latency, from its publish to its retry copy's arrival (native, one in flight)\n\n");
	printf("| delayed retry copies pending | NACKs | p50 µs | p99 µs | max µs |\n|---|---|---|---|---|\n");
	for(int i = 0; i < 2; i++){
		if(!ok){
			printf("| %s | failed | | | |\n", i ? "the delayed ones" : "0");
			continue;
		}
		printf("| %llu | %zu | %.0f | %.0f | %.0f |\n", (unsigned long long)lat[i].pending, lat[i].nacks, lat[i].p50_us,
				lat[i].p99_us, lat[i].max_us);
	}
}

static int latency(const struct bench_config *cfg, struct growth_latency lat[2])
{
	struct gbroker g;
	struct broker b;
	growth__plugin_broker(cfg, NULL, &g);
	fprintf(stderr, "growth: NACK latency\n");
	if(broker__start(&b, &g.bo)) return -1;
	int rc = growth__nack_latency(&b, cfg->quick ? LAT_DELAYED_QUICK : LAT_DELAYED, cfg->quick ? LAT_NACKS_QUICK
			: LAT_NACKS, &lat[0], &lat[1]);
	if(rc && !bench__interrupted()) broker__print_log(&b);
	broker__stop(&b);
	return rc;
}

int suite__growth(const struct bench_config *cfg)
{
	static const uint64_t sizes[] = { 0, 1000, 100000, 1000000 };
	static const uint64_t quick_sizes[] = { 0, 1000, 10000 };
	const uint64_t *want = cfg->quick ? quick_sizes : sizes;
	int nsizes = cfg->quick ? 3 : 4;
	struct gsize gs[GROWTH_MAX_SIZES];
	struct growth_latency lat[2];
	char dir[128], run[192];
	int rc = 0;

	memset(gs, 0, sizeof(gs));
	snprintf(dir, sizeof(dir), "/tmp/dlq-bench-growth-XXXXXX");
	if(mkdtemp(dir) == NULL){
		perror("dlq_bench: mkdtemp");
		return -1;
	}
	snprintf(run, sizeof(run), "%s/run.state", dir);
	printf("\n### Growth: what grows with the messages kept NACKable (QoS 1, 1→1, %d B payloads, %d policies, "
			"nack_window %s, max_pending_bytes %s)\n", BENCH_PAYLOAD, BENCH_POLICIES, GROWTH_NACK_WINDOW,
			GROWTH_MAX_PENDING);
	for(int i = 0; i < nsizes && !bench__interrupted(); i++){
		gs[i].n = want[i];
		if(fill(cfg, dir, &gs[i])){
			rc = -1;
			continue;
		}
		for(int k = 0; k < GROWTH_TIMING_RUNS && !bench__interrupted(); k++){
			fprintf(stderr, "growth: start and save with %llu records, run %d of %d\n", (unsigned long long)gs[i].n,
					k + 1, GROWTH_TIMING_RUNS);
			if(time_restore(cfg, run, &gs[i])) rc = -1;
		}
	}
	bool lat_ok = !bench__interrupted() && latency(cfg, lat) == 0;
	if(!lat_ok) rc = -1;
	for(int i = 0; i < nsizes && !bench__interrupted(); i++){
		if(gs[i].filled && !cfg->no_valgrind && growth__callgrind(cfg, dir, run, &gs[i])) rc = -1;
	}
	print_tables(cfg, gs, nsizes);
	print_latency(lat, lat_ok);
	for(int i = 0; i < nsizes; i++){
		if(gs[i].filled) unlink(gs[i].state);
	}
	unlink(run);
	printf("\ncallgrind profiles kept in %s (callgrind.growth.N.1 to .4: tracked %llu and %llu messages, "
			"storm %llu and %llu).\n", dir, (unsigned long long)(cfg->callgrind_count / 10),
			(unsigned long long)cfg->callgrind_count, (unsigned long long)(cfg->callgrind_count / 10),
			(unsigned long long)cfg->callgrind_count);
	return rc;
}
