/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The saves suite (issue 36; opt-in: --only saves): what a client sees
 * while the state is saved, the plugin's saves beside the broker's own
 * autosave. What was decided:
 *   - For each N (100,000 and 1,000,000; --quick 10,000), five brokers one
 *     after the other, each with the same steady traffic: QoS 1, one
 *     publisher to one subscriber, BENCH_PAYLOAD bytes, paced at
 *     SAVES_RATE msg/s for SAVES_TRAFFIC_S seconds (--quick: fewer), long
 *     enough for three saves every SAVES_INTERVAL_S seconds; tracked
 *     topics on the plugin brokers, untracked on the bare ones. Every
 *     plugin broker has growth's options (nack_window 1h,
 *     max_pending_bytes 2GiB: nothing leaves), so the traffic adds to what
 *     is kept, as it adds to the autosave broker's queue:
 *       1. bare: no plugin, no persistence, the reference;
 *       2. the plugin without a state file, holding N records (N tracked
 *          messages passed first, as growth fills);
 *       3. plugin_opt_state_file, started from a fresh copy of growth's
 *          file of N records (the log's "restored N" checked),
 *          plugin_opt_state_save_interval SAVES_INTERVAL_S (a start from
 *          a sound file writes no snapshot, so the traffic starts at once);
 *       4. as 3, with plugin_opt_state_save_on_change true;
 *       4b. as 4, with plugin_opt_state_journal_sync 100ms;
 *       5. bare with the broker's persistence, autosave_interval
 *          SAVES_INTERVAL_S and max_queued_messages 0: a persistent
 *          session (clean session false) subscribed at QoS 1 to the
 *          traffic's topic and left, N messages were passed, and the broker
 *          was stopped (saving its database) and started again from it.
 *   - Latency: end to end (the load driver's send time in the payload,
 *     with each arrival's time recorded), per 1-second window of arrival:
 *     the worst window's max and p99.9, and p50 / p99 of all samples.
 *   - Saves: the plugin's info line "saved in the background in N ms (the
 *     broker paused N us: R for the journal's rotation, F for the fork)" counted in the run, the longest of
 *     each; the broker logs no duration of its autosave, so its temporary
 *     mosquitto.db.new is watched (saves_probe.c).
 *   - CPU: the broker's over the traffic (broker__cpu_ns), and its
 *     children's, the savers it reaped (cutime + cstime).
 *   - Memory: Pss of the broker before the traffic, and the peak of the
 *     broker's and its children's summed Pss and RSS, sampled while the
 *     traffic runs (saves_probe.c).
 *   - Start: fork to "running" (broker__start); stop: SIGTERM to exit,
 *     with the plugin's save at shutdown (its "state saved to" line).
 * Nothing is asserted: only a broker or a phase that fails fails the run.
 * For a focused rerun, DLQ_BENCH_SAVES_N=<N> measures that one size and
 * DLQ_BENCH_SAVES_KINDS=<digits> only those rows (0 bare ... 5 autosave).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "growth.h"
#include "saves.h"
#include "suite.h"

#define SAVES_RATE 1000.0
#define SAVES_INTERVAL_S 10
#define SAVES_TRAFFIC_S 35.0
#define SAVES_INTERVAL_QUICK_S 3
#define SAVES_TRAFFIC_QUICK_S 11.0
#define SAVES_MAX_SIZES 2
/* The load's first untracked pair publishes here. */
#define QUEUE_TOPIC BENCH_TOPIC_PLAIN "0"

struct saves_ctx {
	const struct bench_config *cfg;
	const char *dir;
	struct gsize gs;             /* growth's file of N records */
	int interval_s;
	double traffic_s;
};

static long log_size(const struct broker *b)
{
	struct stat st;
	return stat(b->log_path, &st) == 0 ? (long)st.st_size : 0;
}

/* The state file a run of kind starts from: its own, so that no journal of
 * another run is found beside it. */
static void run_path(const struct saves_ctx *x, enum saves_kind kind, char *out, size_t len)
{
	snprintf(out, len, "%s/run-%llu-%d.state", x->dir, (unsigned long long)x->gs.n, (int)kind);
}

static int timed_start(struct broker *b, const struct broker_opts *o, struct saves_run *r)
{
	uint64_t t0 = bench__now_ns();
	if(broker__start(b, o)) return -1;
	r->start_ms = (double)(bench__now_ns() - t0) / 1e6;
	return 0;
}

/* The autosave broker: a persistent session's queue of N messages, saved
 * at SIGTERM and restored by a timed restart. */
static int prepare_autosave(const struct saves_ctx *x, struct broker *b, const struct broker_opts *o,
		struct saves_run *r)
{
	double kib;
	if(broker__start(b, o)) return -1;
	if(saves_queue__subscribe(b, QUEUE_TOPIC) || growth__pass_messages(x->cfg, b, LOAD_PLAIN, x->gs.n, &kib)){
		broker__stop(b);
		return -1;
	}
	broker__halt(b, SIGTERM);
	uint64_t t0 = bench__now_ns();
	if(broker__restart(b, o)){
		broker__remove_dir(b);
		return -1;
	}
	r->start_ms = (double)(bench__now_ns() - t0) / 1e6;
	return 0;
}

/* Starts the broker of r->kind holding N, and times its start. */
static int prepare(const struct saves_ctx *x, struct broker *b, struct saves_run *r)
{
	struct gbroker g;
	char run[192], interval[64];
	const char *opts[5] = { NULL };
	bool restored = r->kind == SK_STATE || r->kind == SK_CHANGE || r->kind == SK_BATCHED;
	double kib;

	run_path(x, r->kind, run, sizeof(run));
	growth__plugin_broker(x->cfg, restored ? run : NULL, &g);
	if(r->kind == SK_BARE || r->kind == SK_AUTOSAVE) g.bo.kind = BROKER_BARE;
	if(r->kind == SK_AUTOSAVE){
		char autosave[64];
		const char *conf[] = { autosave, "max_queued_messages 0", NULL };
		snprintf(autosave, sizeof(autosave), "autosave_interval %d", x->interval_s);
		g.bo.persistence = true;
		g.bo.broker_conf = conf;
		return prepare_autosave(x, b, &g.bo, r);
	}
	if(restored){
		snprintf(interval, sizeof(interval), "state_save_interval %ds", x->interval_s);
		opts[0] = g.state_opt;
		opts[1] = interval;
		opts[2] = r->kind == SK_CHANGE || r->kind == SK_BATCHED ? "state_save_on_change true" : NULL;
		opts[3] = r->kind == SK_BATCHED ? "state_journal_sync 100ms" : NULL;
		g.bo.suite_opts = opts;
		if(growth__fresh_state(&x->gs, run)) return -1;
	}
	if(timed_start(b, &g.bo, r)) return -1;
	int rc = 0;
	if(r->kind == SK_PLUGIN) rc = growth__pass_messages(x->cfg, b, LOAD_TRACKED, x->gs.n, &kib);
	if(restored && growth__restored_check(b, x->gs.n)) rc = -1;
	if(rc) broker__stop(b);
	return rc;
}

/* The steady traffic on a prepared broker, and what it saw meanwhile. */
static int measure(const struct saves_ctx *x, struct broker *b, struct saves_run *r)
{
	bool plugin = r->kind != SK_BARE && r->kind != SK_AUTOSAVE;
	struct load_opts o = {
		.target = { { .broker = b, .kind = plugin ? LOAD_TRACKED : LOAD_PLAIN } }, .targets = 1, .qos = 1,
		.pairs = 1, .payload_len = BENCH_PAYLOAD, .rate = SAVES_RATE, .measure_s = x->traffic_s,
		.record_latency = true, .record_arrival = true, .label = "saves",
	};
	struct load_result res;
	struct saves_probe *probe;
	char db_new[256];

	snprintf(db_new, sizeof(db_new), "%s/mosquitto.db.new", b->dir);
	r->steady_pss_kib = saves_probe__pss_kib(b->pid);
	r->steady_rss_kib = broker__rss_kib(b);
	long from = log_size(b);
	uint64_t cpu0 = broker__cpu_ns(b), kids0 = broker__children_cpu_ns(b);
	if(saves_probe__start(b->pid, r->kind == SK_AUTOSAVE ? db_new : NULL, &probe)) return -1;
	int rc = load__run(&o, &res);
	saves_probe__stop(probe, &r->mem);
	if(rc) return -1;
	r->cpu_s = (double)(broker__cpu_ns(b) - cpu0) / 1e9;
	r->children_cpu_s = (double)(broker__children_cpu_ns(b) - kids0) / 1e9;
	long to = log_size(b);
	saves_log__scan(b->log_path, from, to, &r->log);
	r->delivered_per_s = res.delivered_per_s;
	r->unfinished = res.unfinished;
	rc = saves_report__windows(&res, r);
	load__result_free(&res);

	struct saves_log tail;
	broker__halt(b, SIGTERM);
	r->stop_ms = b->stop_ms;
	saves_log__scan(b->log_path, to, -1, &tail);
	r->log.stop_save_ms = tail.stop_save_ms;
	return rc;
}

static const char *const kind_labels[NSAVES_KINDS] = { "bare", "plugin", "state_file", "save_on_change", "journal_sync",
	"autosave" };

static int run_one(const struct saves_ctx *x, struct saves_run *r)
{
	struct broker b;
	fprintf(stderr, "saves: %s with %llu kept\n", kind_labels[r->kind], (unsigned long long)r->n);
	if(prepare(x, &b, r)) return -1;
	int rc = measure(x, &b, r);
	if(b.running) broker__halt(&b, SIGTERM);
	if(rc) broker__print_log(&b);
	broker__remove_dir(&b);
	r->ok = rc == 0;
	return rc;
}

int suite__saves(const struct bench_config *cfg)
{
	static const uint64_t sizes[] = { 100000, 1000000 }, sizes_quick[] = { 10000 };
	const uint64_t *want = cfg->quick ? sizes_quick : sizes;
	int nsizes = cfg->quick ? 1 : SAVES_MAX_SIZES;
	uint64_t only_n[1];
	const char *env_n = getenv("DLQ_BENCH_SAVES_N"), *env_kinds = getenv("DLQ_BENCH_SAVES_KINDS");
	if(env_n && *env_n){
		only_n[0] = strtoull(env_n, NULL, 10);
		want = only_n;
		nsizes = 1;
	}
	struct saves_run runs[SAVES_MAX_SIZES * NSAVES_KINDS];
	struct saves_ctx x = {
		.cfg = cfg,
		.interval_s = cfg->quick ? SAVES_INTERVAL_QUICK_S : SAVES_INTERVAL_S,
		.traffic_s = cfg->quick ? SAVES_TRAFFIC_QUICK_S : SAVES_TRAFFIC_S,
	};
	char dir[128], run[192];
	int nruns = 0, rc = 0;

	if(suite__skipped_for_state_opt(cfg, "saves", "Saves")) return 0;
	memset(runs, 0, sizeof(runs));
	snprintf(dir, sizeof(dir), "/tmp/dlq-bench-saves-XXXXXX");
	if(mkdtemp(dir) == NULL){
		perror("dlq_bench: mkdtemp");
		return -1;
	}
	x.dir = dir;
	printf("\n### Saves: what a client sees while the state is saved (issue 36; %d policies, nack_window 1h, "
			"max_pending_bytes 2GiB)\n", BENCH_POLICIES);
	for(int i = 0; i < nsizes && !bench__interrupted(); i++){
		memset(&x.gs, 0, sizeof(x.gs));
		x.gs.n = want[i];
		if(growth__fill_state(cfg, dir, &x.gs)) rc = -1;
		for(int k = 0; k < NSAVES_KINDS && !bench__interrupted(); k++){
			if(env_kinds && *env_kinds && !strchr(env_kinds, '0' + k)) continue;
			struct saves_run *r = &runs[nruns++];
			r->kind = (enum saves_kind)k;
			r->n = want[i];
			bool needs_file = r->kind == SK_STATE || r->kind == SK_CHANGE || r->kind == SK_BATCHED;
			if((needs_file && !x.gs.filled) || run_one(&x, r)) rc = -1;
			run_path(&x, r->kind, run, sizeof(run));
			unlink(run);
			strncat(run, ".journal", sizeof(run) - strlen(run) - 1);
			unlink(run);
		}
		if(x.gs.filled) unlink(x.gs.state);
	}
	saves_report__table(cfg, runs, nruns, x.interval_s, x.traffic_s, SAVES_RATE);
	if(rmdir(dir)) fprintf(stderr, "dlq_bench: saves: files left in %s\n", dir);
	return rc;
}
