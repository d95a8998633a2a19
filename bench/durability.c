/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The durability suite (issue 4: the cost of save on change "measured by
 * the benchmark"). Three plugin brokers with the same 100 policies, side by
 * side with the bare broker for the whole suite:
 *   - no state file;
 *   - plugin_opt_state_file (a snapshot every state_save_interval, 60 s by
 *     default, and on shutdown);
 *   - plugin_opt_state_file and plugin_opt_state_save_on_change true (a
 *     journal appended and synced with fdatasync for every tracked message
 *     and every NACK);
 *   - the same with plugin_opt_state_journal_sync 100ms (issue 36: every
 *     change written at once, the journal synced by the tick at least every
 *     100 ms).
 * The state files go in the brokers' private directories under /tmp. Each
 * cell (QoS 0 and 1, 1→1) runs rounds of: the bare broker (untracked
 * topics, the reference), then the tracked phase on each plugin broker,
 * then the NACK storm on each, the plugin brokers in an order that rotates
 * from round to round. Ratios are taken against the no-state-file broker
 * of the same round and against the bare runs around it (as in report.c).
 * Then strace counts the fdatasync calls of each plugin broker over a fixed
 * number of tracked messages and of NACK chains (QoS 1), and stopping the
 * brokers times the snapshot the plugin saves on shutdown, the same work an
 * interval save does.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "suite.h"

#define STATE_NAME "dlq.state"
#define JOURNAL_NAME "dlq.state.journal"
#define STRACE_ATTACH_MS 5000
#define STRACE_DETACH_MS 5000
#define SYNC_WINDOW 50
#define SYNC_TIMEOUT_MS 60000
#define PROBE_SYNCS 200
/* In flight with save_on_change: messages, NACK chains (see run_round). */
#define CHANGE_WINDOW 50
#define CHANGE_STORM_WINDOW 16

enum dvar { D_NONE, D_INTERVAL, D_CHANGE, D_BATCHED, NDVAR };
enum dphase { DP_TRACKED, DP_STORM, NDPHASE };

static const char *const var_names[NDVAR] = { "no state file", "state_file", "state_file + save_on_change",
	"save_on_change + journal_sync 100ms" };
static const char *const var_labels[NDVAR] = { "nostate", "interval", "onchange", "batched" };
static const char *const var_opts[NDVAR][4] = {
	{ NULL },
	{ "state_file {dir}/" STATE_NAME, NULL },
	{ "state_file {dir}/" STATE_NAME, "state_save_on_change true", NULL },
	{ "state_file {dir}/" STATE_NAME, "state_save_on_change true", "state_journal_sync 100ms", NULL },
};
static const char *const phase_names[NDPHASE] = { "tracked", "NACK storm" };

struct dcell {
	int qos, pairs;
	int rounds;                      /* completed */
	bool ok;
	double bare[BENCH_MAX_ROUNDS], bare_us[BENCH_MAX_ROUNDS];
	double bare_util[BENCH_MAX_ROUNDS], bare_foreign[BENCH_MAX_ROUNDS];
	/* tracked: delivered/s; storm: NACKs handled/s (retry copies + dead letters) */
	double thr[NDPHASE][NDVAR][BENCH_MAX_ROUNDS];
	double us[NDPHASE][NDVAR][BENCH_MAX_ROUNDS];  /* broker CPU per message / per NACK */
	double util[NDPHASE][NDVAR][BENCH_MAX_ROUNDS];
	double foreign[NDPHASE][NDVAR][BENCH_MAX_ROUNDS];
	bool snapshot[NDPHASE][NDVAR][BENCH_MAX_ROUNDS]; /* a snapshot was written during the phase */
	uint64_t untagged, unfinished;
};

/* A broker that saves on change waits for the disk, not for its CPU, and so
 * does one saving a snapshot: such phases count whatever the broker's CPU
 * use; the others only if the broker kept its CPU busy. */
static bool clean(double foreign, double util, bool cpu_bound)
{
	return foreign <= REPORT_FOREIGN_MAX && (!cpu_bound || util >= REPORT_UTIL_MIN);
}

static bool var_clean(const struct dcell *c, int p, int v, int r)
{
	return clean(c->foreign[p][v][r], c->util[p][v][r], v != D_CHANGE && !c->snapshot[p][v][r]);
}

static bool bare_clean(const struct dcell *c, int r)
{
	return clean(c->bare_foreign[r], c->bare_util[r], true);
}

/* Identity of the state file: each save writes a new file and renames it
 * over the old one, so a new inode means a snapshot was written. */
static void state_id(const struct broker *b, ino_t *ino, long *nsec)
{
	char path[256];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", b->dir, STATE_NAME);
	*ino = 0;
	*nsec = 0;
	if(stat(path, &st) == 0){
		*ino = st.st_ino;
		*nsec = st.st_mtim.tv_nsec;
	}
}

static long long file_size(const struct broker *b, const char *name)
{
	char path[256];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", b->dir, name);
	return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static int run_phase(const struct bench_config *cfg, const struct broker *b, struct dcell *c, enum load_kind kind,
		unsigned window, bool spin, const char *label, double *thr, double *us, double *util, double *foreign, bool *snapshot)
{
	struct load_result res;
	ino_t ino0, ino1;
	long ns0, ns1;
	state_id(b, &ino0, &ns0);
	if(suite__closed_phase(cfg, b, c->qos, c->pairs, kind, window, spin, label, &res)) return -1;
	state_id(b, &ino1, &ns1);
	*snapshot = ino0 != ino1 || ns0 != ns1;
	if(kind == LOAD_STORM){
		*thr = res.copies_per_s + res.dead_letters_per_s;
		*us = res.broker_us_per_nack;
	}else{
		*thr = res.delivered_per_s;
		*us = res.broker_us_per_msg;
	}
	*util = res.broker_cpu_util;
	*foreign = res.foreign_cpu;
	c->untagged += kind == LOAD_PLAIN ? 0 : res.untagged;
	c->unfinished += res.unfinished;
	load__result_free(&res);
	fprintf(stderr, "    %-18s %9.0f %s  broker %.2f us each, %3.0f%% CPU; other load %.2f cores%s\n", label, *thr, kind == LOAD_STORM ? "NACKs/s" : "msg/s  ", *us, 100 * *util, *foreign,
			*snapshot ? "; a snapshot was saved meanwhile" : "");
	return 0;
}

static int run_round(const struct bench_config *cfg, const struct broker *bare, const struct broker *plugin[NDVAR],
		struct dcell *c, int r)
{
	char label[64];
	bool snap;
	fprintf(stderr, "  round %d\n", r + 1);
	if(run_phase(cfg, bare, c, LOAD_PLAIN, 0, true, "bare", &c->bare[r], &c->bare_us[r], &c->bare_util[r],
			&c->bare_foreign[r], &snap)){
		return -1;
	}
	for(int p = 0; p < NDPHASE; p++){
		for(int i = 0; i < NDVAR; i++){
			/* The order rotates, so that no variant always follows the
			 * disk work of another. */
			int v = (i + r) % NDVAR;
			snprintf(label, sizeof(label), "%s-%s", p == DP_TRACKED ? "tracked" : "storm", var_labels[v]);
			/* Saving on change, the broker waits for the disk: the
			 * load does not spin (the disk's interrupts may come to
			 * the load's CPU, and a load spinning there delays each
			 * fdatasync), and fewer messages are in flight, enough to
			 * keep the broker busy and drain in bounded time. */
			bool sync = v == D_CHANGE;
			unsigned window = !sync ? 0 : p == DP_TRACKED ? CHANGE_WINDOW : CHANGE_STORM_WINDOW;
			if(run_phase(cfg, plugin[v], c, p == DP_TRACKED ? LOAD_TRACKED : LOAD_STORM, window, !sync, label,
					&c->thr[p][v][r], &c->us[p][v][r], &c->util[p][v][r], &c->foreign[p][v][r], &snap)){
				return -1;
			}
			c->snapshot[p][v][r] = snap;
		}
	}
	return 0;
}

/* ---- the table ---- */

struct ratio {
	double m, lo, hi;
	int used;       /* rounds; negative: none was clean, all were used */
};

/* Median [range] over rounds of x[r] / ref, ref being ref[r] (same round)
 * or, with sandwich, the mean of ref[r] and ref[r+1]; over the rounds where
 * x and a reference were clean, else over all rounds. */
static struct ratio ratio_of(const struct dcell *c, const double *x, const bool *xclean, const double *ref,
		const bool *refclean, bool sandwich)
{
	struct ratio out = {0};
	double v[BENCH_MAX_ROUNDS];
	int n = c->rounds, used = 0;
	for(int pass = 0; pass < 2 && used == 0; pass++){
		bool strict = pass == 0;
		for(int r = 0; r < n; r++){
			if(strict && !xclean[r]) continue;
			double sum = 0;
			int k = 0;
			for(int b = r; b <= (sandwich ? r + 1 : r) && b < n; b++){
				if(ref[b] > 0 && (!strict || refclean[b])){
					sum += ref[b];
					k++;
				}
			}
			if(k == 0 || x[r] <= 0) continue;
			v[used++] = x[r] / (sum / k);
		}
		if(used && !strict) out.used = -used;
		else out.used = used;
	}
	stats__range(v, (size_t)used, &out.lo, &out.hi);
	out.m = stats__median(v, (size_t)used);
	return out;
}

static void print_ratio(struct ratio q)
{
	if(q.used == 0){
		printf(" – |");
	}else{
		printf(" %.1f%% [%.0f-%.0f]%s |", 100 * q.m, 100 * q.lo, 100 * q.hi, q.used < 0 ? " noisy" : "");
	}
}

/* Median of x over the clean rounds (all when none was); sets *used. */
static double med_of(const struct dcell *c, const double *x, const bool *ok, int *used)
{
	double v[BENCH_MAX_ROUNDS];
	size_t n = 0;
	for(int r = 0; r < c->rounds; r++){
		if(ok[r] && x[r] > 0) v[n++] = x[r];
	}
	*used = (int)n;
	if(n == 0){
		for(int r = 0; r < c->rounds; r++){
			if(x[r] > 0) v[n++] = x[r];
		}
		*used = -(int)n;
	}
	return stats__median(v, n);
}

static void print_used(int used, int rounds)
{
	if(used < 0 || (used == 0 && rounds > 0)) printf(" 0/%d, noisy |\n", rounds);
	else printf(" %d/%d |\n", used, rounds);
}

static void table(const struct dcell *cells, int ncells)
{
	printf("\n### Durability: no state file, `state_file` (snapshots every 60 s), `state_file` + "
			"`state_save_on_change`, and with `state_journal_sync 100ms` (closed loop, 1→1)\n\n");
	printf("| QoS | phase | plugin broker | msg/s (storm: NACKs handled/s) | ÷ no state file | ÷ bare "
			"| broker CPU busy | broker CPU µs per message (storm: per NACK) | clean rounds |\n");
	printf("|---|---|---|---|---|---|---|---|---|\n");
	for(int i = 0; i < ncells; i++){
		const struct dcell *c = &cells[i];
		if(c->rounds == 0) continue;
		bool bok[BENCH_MAX_ROUNDS];
		for(int r = 0; r < c->rounds; r++){
			bok[r] = bare_clean(c, r);
		}
		int used;
		double thr = med_of(c, c->bare, bok, &used);
		printf("| %d | untracked | bare broker (reference) | %.0f | | 100%% | %.0f%% | %.2f |", c->qos, thr,
				100 * med_of(c, c->bare_util, bok, &(int){0}), med_of(c, c->bare_us, bok, &(int){0}));
		print_used(used, c->rounds);
		for(int p = 0; p < NDPHASE; p++){
			bool nok[BENCH_MAX_ROUNDS];
			for(int r = 0; r < c->rounds; r++){
				nok[r] = var_clean(c, p, D_NONE, r);
			}
			for(int v = 0; v < NDVAR; v++){
				bool ok[BENCH_MAX_ROUNDS];
				for(int r = 0; r < c->rounds; r++){
					ok[r] = var_clean(c, p, v, r);
				}
				thr = med_of(c, c->thr[p][v], ok, &used);
				printf("| %d | %s | %s | %.0f |", c->qos, phase_names[p], var_names[v], thr);
				if(v == D_NONE) printf(" 100%% |");
				else print_ratio(ratio_of(c, c->thr[p][v], ok, c->thr[p][D_NONE], nok, false));
				print_ratio(ratio_of(c, c->thr[p][v], ok, c->bare, bok, true));
				printf(" %.0f%% | %.2f |", 100 * med_of(c, c->util[p][v], ok, &(int){0}),
						med_of(c, c->us[p][v], ok, &(int){0}));
				print_used(used, c->rounds);
			}
		}
	}
	printf("\nA phase is clean when other processes used at most %.2f of a core meanwhile and, except with "
			"save_on_change or while a snapshot was saved (the broker then waits for the disk), the broker was busy "
			"at least %.0f%% of the time. "
			"÷ no state file: against the broker without a state file in the same round; ÷ bare: against the bare "
			"broker's delivered msg/s in the rounds around it; median [min-max].\n",
			REPORT_FOREIGN_MAX, 100 * REPORT_UTIL_MIN);
	int snaps[NDVAR] = {0};
	for(int i = 0; i < ncells; i++){
		for(int p = 0; p < NDPHASE; p++){
			for(int v = 0; v < NDVAR; v++){
				for(int r = 0; r < cells[i].rounds; r++){
					snaps[v] += cells[i].snapshot[p][v][r];
				}
			}
		}
		const struct dcell *c = &cells[i];
		if(c->untagged || c->unfinished || !c->ok){
			printf("Warning: durability QoS %d %d→%d: %llu tracked deliveries without a dlq-id, %llu messages "
					"unfinished%s.\n", c->qos, c->pairs, c->pairs, (unsigned long long)c->untagged,
					(unsigned long long)c->unfinished, c->ok ? "" : ", a phase failed");
		}
	}
	printf("Phases during which an interval snapshot was saved (counted like the others): %d of the state_file "
			"broker's, %d of the save_on_change broker's, %d of the journal_sync 100ms broker's.\n",
			snaps[D_INTERVAL], snaps[D_CHANGE], snaps[D_BATCHED]);
}

/* ---- fdatasync: what the disk costs, how many the plugin makes ---- */

/* The median time of a 100-byte append and fdatasync in dir, in µs. */
static double probe_fdatasync(const char *dir)
{
	char path[256];
	double t[PROBE_SYNCS];
	char buf[100];
	snprintf(path, sizeof(path), "%s/fdatasync-probe", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if(fd < 0) return -1;
	memset(buf, 'p', sizeof(buf));
	size_t n = 0;
	for(; n < PROBE_SYNCS; n++){
		uint64_t t0 = bench__now_ns();
		if(write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf) || fdatasync(fd)) break;
		t[n] = (double)(bench__now_ns() - t0) / 1e3;
	}
	close(fd);
	unlink(path);
	return n ? stats__median(t, n) : -1;
}

static const char *fs_name(const char *dir)
{
	struct statfs s;
	if(statfs(dir, &s)) return "unknown";
	switch((unsigned long)s.f_type){
		case 0xEF53: return "ext4";
		case 0x01021994: return "tmpfs (fdatasync costs nothing there)";
		case 0x58465342: return "xfs";
		case 0x9123683E: return "btrfs";
		case 0x794c7630: return "overlayfs";
		default: return "other";
	}
}

static bool file_contains(const char *path, const char *needle)
{
	char buf[4096];
	FILE *f = fopen(path, "r");
	if(f == NULL) return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, needle) != NULL;
}

static bool have_strace(void)
{
	return system("command -v strace >/dev/null 2>&1") == 0;
}

/* Attaches strace -c to the broker, counting its fdatasync and fsync calls. */
static pid_t strace_attach(const struct broker *b, char *out, size_t outlen)
{
	char err[256], pid_arg[32];
	snprintf(out, outlen, "%s/strace.out", b->dir);
	snprintf(err, sizeof(err), "%s/strace.err", b->dir);
	snprintf(pid_arg, sizeof(pid_arg), "%d", (int)b->pid);
	unlink(err);
	pid_t pid = fork();
	if(pid < 0) return -1;
	if(pid == 0){
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if(fd >= 0){
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
			close(fd);
		}
		execlp("strace", "strace", "-f", "-c", "-e", "trace=fdatasync,fsync", "-o", out, "-p", pid_arg, (char *)NULL);
		_exit(127);
	}
	uint64_t deadline = bench__now_ns() + STRACE_ATTACH_MS * 1000000ull;
	while(bench__now_ns() < deadline && !bench__interrupted()){
		if(file_contains(err, "attached")) return pid;
		if(waitpid(pid, NULL, WNOHANG) == pid){
			fprintf(stderr, "dlq_bench: strace could not attach to the broker\n");
			return -1;
		}
		bench__sleep_ms(5);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

/* Detaches strace and reads how many fdatasync and fsync calls it counted,
 * or -1. */
static long strace_detach(pid_t pid, const char *out)
{
	kill(pid, SIGINT);
	uint64_t deadline = bench__now_ns() + STRACE_DETACH_MS * 1000000ull;
	bool reaped = false;
	while(!reaped && bench__now_ns() < deadline){
		if(waitpid(pid, NULL, WNOHANG) == pid) reaped = true;
		else bench__sleep_ms(2);
	}
	if(!reaped){
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	/* "% time seconds usecs/call calls [errors] syscall" rows, then a
	 * total row; no fdatasync row when there was none. */
	FILE *f = fopen(out, "r");
	if(f == NULL) return -1;
	char line[512];
	/* strace writes nothing at all when it saw no call. */
	long calls = 0;
	while(fgets(line, sizeof(line), f)){
		double pct, secs;
		long usecs, n;
		char name[64];
		if(sscanf(line, "%lf %lf %ld %ld %63s", &pct, &secs, &usecs, &n, name) == 5
				&& (strstr(line, " fdatasync\n") || strstr(line, " fsync\n"))){
			calls += n;
		}
	}
	fclose(f);
	unlink(out);
	return calls;
}

struct sync_figures {
	double per_msg, per_nack, journal_per_msg; /* < 0: not measured */
};

/* strace attached over one fixed workload (QoS 1, 1→1): fdatasync calls,
 * and the journal's growth (-1 if a snapshot restarted it meanwhile). */
static int count_syncs(const struct broker *b, enum load_kind kind, uint64_t n, long *calls, long long *growth)
{
	struct load_opts o = {
		.target = { { .broker = b, .kind = kind } }, .targets = 1, .qos = 1, .pairs = 1,
		.payload_len = BENCH_PAYLOAD, .window = SYNC_WINDOW, .count = n, .timeout_ms = SYNC_TIMEOUT_MS,
		.label = kind == LOAD_STORM ? "sync-storm" : "sync-tracked",
	};
	struct load_result res;
	char out[256];
	long long j0 = file_size(b, JOURNAL_NAME);
	pid_t st = strace_attach(b, out, sizeof(out));
	if(st < 0) return -1;
	int rc = load__run(&o, &res);
	uint64_t unfinished = rc == 0 ? res.unfinished : 0;
	if(rc == 0) load__result_free(&res);
	/* What was settled at the end is journaled at the broker's next tick. */
	bench__sleep_ms(200);
	*calls = strace_detach(st, out);
	long long j1 = file_size(b, JOURNAL_NAME);
	*growth = j0 >= 0 && j1 >= j0 ? j1 - j0 : -1;
	return rc == 0 && unfinished == 0 && *calls >= 0 ? 0 : -1;
}

static void sync_counts(const struct bench_config *cfg, const struct broker *plugin[NDVAR], struct sync_figures f[NDVAR])
{
	uint64_t n_msg = cfg->sync_count, n_chain = cfg->sync_count / 4;
	for(int v = 0; v < NDVAR && !bench__interrupted(); v++){
		long t_calls, s_calls;
		long long t_growth, s_growth;
		f[v].per_msg = f[v].per_nack = f[v].journal_per_msg = -1;
		fprintf(stderr, "durability: fdatasync calls of the %s broker (strace, %llu tracked messages, "
				"%llu NACK chains)\n", var_names[v], (unsigned long long)n_msg, (unsigned long long)n_chain);
		if(count_syncs(plugin[v], LOAD_TRACKED, n_msg, &t_calls, &t_growth)) continue;
		f[v].per_msg = (double)t_calls / (double)n_msg;
		if(t_growth >= 0 && (v == D_CHANGE || v == D_BATCHED)) f[v].journal_per_msg = (double)t_growth / (double)n_msg;
		if(count_syncs(plugin[v], LOAD_STORM, n_chain, &s_calls, &s_growth)) continue;
		/* A chain: the original (a tracked message), then
		 * BENCH_MAX_ATTEMPTS NACKs, each with its retry copy or dead
		 * letter. */
		double nack = ((double)s_calls - (double)n_chain * f[v].per_msg) / (double)(n_chain * BENCH_MAX_ATTEMPTS);
		f[v].per_nack = nack > 0 ? nack : 0;
	}
}

bool suite__skipped_for_state_opt(const struct bench_config *cfg, const char *name, const char *title)
{
	for(int i = 0; cfg->plugin_opts[i]; i++){
		const char *o = cfg->plugin_opts[i];
		if(!strncmp(o, "plugin_opt_", 11)) o += 11;
		if(strncmp(o, "state_", 6)) continue;
		fprintf(stderr, "dlq_bench: %s suite skipped: --plugin-opt %s sets what it compares\n", name, cfg->plugin_opts[i]);
		printf("\n### %s\n\nSkipped: `--plugin-opt %s` sets what this suite compares.\n", title, cfg->plugin_opts[i]);
		return true;
	}
	return false;
}

int suite__durability(const struct bench_config *cfg)
{
	struct broker bare, brokers[NDVAR];
	const struct broker *plugin[NDVAR];
	struct broker_opts bo = {
		.kind = BROKER_BARE, .plugin_path = cfg->plugin_path, .mosquitto_bin = cfg->mosquitto_bin,
		.tcp = cfg->tcp, .cpu = cfg->broker_cpu, .plugin_opts = cfg->plugin_opts, .ready_timeout_ms = 10000,
	};
	struct dcell cells[] = { { .qos = 0, .pairs = 1 }, { .qos = 1, .pairs = 1 } };
	int ncells = (int)(sizeof(cells) / sizeof(cells[0]));
	int started = 0, rc = 0;

	if(suite__skipped_for_state_opt(cfg, "durability", "Durability")) return 0;
	if(broker__start(&bare, &bo)) return -1;
	for(; started < NDVAR; started++){
		struct broker_opts po = bo;
		po.kind = BROKER_PLUGIN;
		po.suite_opts = var_opts[started];
		if(broker__start(&brokers[started], &po)){
			rc = -1;
			goto done;
		}
		if(started != D_NONE) snprintf(brokers[started].watch_file, sizeof(brokers[started].watch_file), STATE_NAME);
		plugin[started] = &brokers[started];
	}
	double probe = probe_fdatasync(bare.dir);
	fprintf(stderr, "durability: fdatasync of a 100-byte append under /tmp: %.0f us (median of %d)\n", probe,
			PROBE_SYNCS);

	for(int i = 0; i < ncells && !bench__interrupted(); i++){
		struct dcell *c = &cells[i];
		c->ok = true;
		fprintf(stderr, "durability: QoS %d, %d→%d\n", c->qos, c->pairs, c->pairs);
		for(int r = 0; r < cfg->durability_rounds && !bench__interrupted(); r++){
			if(run_round(cfg, &bare, plugin, c, r)){
				c->ok = false;
				rc = -1;
				break;
			}
			c->rounds = r + 1;
		}
	}
	table(cells, ncells);

	struct sync_figures f[NDVAR];
	bool counted = false;
	if(!bench__interrupted() && rc == 0){
		if(have_strace()){
			sync_counts(cfg, plugin, f);
			counted = true;
		}else{
			fprintf(stderr, "durability: strace not found: fdatasync calls not counted\n");
		}
	}
	printf("\n#### fdatasync per tracked message and per NACK (strace -c -e trace=fdatasync,fsync attached to each "
			"plugin broker; QoS 1, 1→1, %llu tracked messages, then %llu NACK chains)\n\n",
			(unsigned long long)cfg->sync_count, (unsigned long long)cfg->sync_count / 4);
	if(counted){
		printf("| plugin broker | fdatasync + fsync per tracked message | fdatasync + fsync per NACK (with its retry "
				"copy or dead letter) | journal bytes per tracked message |\n|---|---|---|---|\n");
		for(int v = 0; v < NDVAR; v++){
			printf("| %s |", var_names[v]);
			if(f[v].per_msg >= 0) printf(" %.2f |", f[v].per_msg); else printf(" failed |");
			if(f[v].per_nack >= 0) printf(" %.2f |", f[v].per_nack); else printf(" failed |");
			if(f[v].journal_per_msg >= 0) printf(" %.0f |\n", f[v].journal_per_msg); else printf(" – |\n");
		}
	}else{
		printf("Not counted (strace missing, or a phase failed).\n");
	}
	printf("\nState files in the brokers' directories under /tmp, on %s; a 100-byte append + fdatasync there "
			"took %.0f µs (median of %d, measured before the rounds).\n", fs_name(bare.dir), probe, PROBE_SYNCS);

done:
	/* Stopping times the snapshot each broker with a state file saves on
	 * SIGTERM: the same work as an interval save, during which the broker
	 * serves nobody. */
	for(int v = started - 1; v >= 0; v--){
		broker__stop(&brokers[v]);
	}
	broker__stop(&bare);
	if(started == NDVAR && rc == 0){
		printf("Stopping the brokers (SIGTERM to exit; with a state file the plugin saves a last snapshot first, "
				"the same work as an interval save): bare %.0f ms, no state file %.0f ms", bare.stop_ms,
				brokers[D_NONE].stop_ms);
		for(int v = D_INTERVAL; v < NDVAR; v++){
			printf(", %s %.0f ms (state file %.1f MiB)", var_names[v], brokers[v].stop_ms,
					(double)brokers[v].watch_bytes / 1048576.0);
		}
		printf(".\n");
	}
	return rc;
}
