/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The growth suite's instruction counts (see growth.c for what was
 * decided): one broker per number of kept records under callgrind, its
 * counts zeroed with callgrind_control once it has restored them and
 * dumped after each workload, so that each dump (a part of its profile,
 * OUT.1 to OUT.4) holds one workload alone. On 2.1 callgrind_control is
 * the root's, as valgrind is.
 */
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "growth.h"

#define CG_WINDOW 50
#define CG_LOAD_TIMEOUT_MS 600000
/* Restoring 1,000,000 records under callgrind, and saving them again
 * before the broker is ready, at some 50 times the native time. */
#define CG_GROWTH_READY_MS 1800000
#define CG_DUMP_TIMEOUT_MS 300000

/* Whether a callgrind profile is complete: its last line is "totals: N". */
static bool profile_written(const char *path)
{
	char tail[256];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if(fd < 0) return false;
	off_t end = lseek(fd, 0, SEEK_END);
	off_t from = end > (off_t)sizeof(tail) - 1 ? end - (off_t)sizeof(tail) + 1 : 0;
	ssize_t r = pread(fd, tail, sizeof(tail) - 1, from);
	close(fd);
	if(r <= 0) return false;
	tail[r] = '\0';
	char *last = tail[r - 1] == '\n' ? tail + r - 1 : NULL;
	if(last == NULL) return false;
	*last = '\0';
	char *start = strrchr(tail, '\n');
	return !strncmp(start ? start + 1 : tail, "totals:", 7);
}

/* Removes /tmp/vgdb-pipe-*-PID-by-*, the FIFOs and shared memory of
 * valgrind's gdb server for the process pid. */
static void remove_vgdb_files(pid_t pid)
{
	char pattern[64];
	glob_t g;
	snprintf(pattern, sizeof(pattern), "/tmp/vgdb-pipe-*-%d-by-*", (int)pid);
	if(glob(pattern, 0, NULL, &g) == 0){
		for(size_t i = 0; i < g.gl_pathc; i++) unlink(g.gl_pathv[i]);
	}
	globfree(&g);
}

/* Runs callgrind_control (the root's, for 2.1) with arg on the broker:
 * -z zeroes its counts, -d dumps them to a new part of its profile.
 * Returns 0, or -1 if it failed. */
static int cg_control(const struct bench_config *cfg, pid_t pid, const char *arg)
{
	char pidbuf[16];
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)pid);
	pid_t child = fork();
	if(child < 0) return -1;
	if(child == 0){
		int fd = open("/dev/null", O_WRONLY);
		if(fd >= 0){
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
			close(fd);
		}
		if(cfg->valgrind_root){
			execlp("chroot", "chroot", cfg->valgrind_root, "callgrind_control", arg, pidbuf, (char *)NULL);
		}else{
			execlp("callgrind_control", "callgrind_control", arg, pidbuf, (char *)NULL);
		}
		_exit(127);
	}
	int status;
	if(waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status)){
		fprintf(stderr, "dlq_bench: growth: callgrind_control %s %s failed\n", arg, pidbuf);
		return -1;
	}
	return 0;
}

/* Dumps the broker's counts since the last dump (or zeroing) as part
 * `part` of out, waits until it is written, and reads it. */
static int cg_dump(const struct bench_config *cfg, const struct broker *b, const char *out, int part, double ir[NFN])
{
	char path[340];
	snprintf(path, sizeof(path), "%s.%d", out, part);
	if(cg_control(cfg, b->pid, "-d")) return -1;
	uint64_t deadline = bench__now_ns() + CG_DUMP_TIMEOUT_MS * 1000000ull;
	while(!profile_written(path) && bench__now_ns() < deadline && !bench__interrupted()){
		bench__sleep_ms(20);
	}
	if(!profile_written(path)){
		fprintf(stderr, "dlq_bench: growth: no profile %s after callgrind_control -d\n", path);
		return -1;
	}
	cg__parse(path, ir);
	return ir[FN_TOTAL] > 0 ? 0 : -1;
}

int growth__callgrind(const struct bench_config *cfg, const char *dir, const char *run, struct gsize *gs)
{
	static const char *const names[NGLOAD] = { "tracked", "storm" };
	uint64_t n1 = cfg->callgrind_count, n0 = n1 / 10;
	char out[320];
	struct gbroker g;
	struct broker b;
	int part = 0;

	snprintf(out, sizeof(out), "%s/callgrind.growth.%llu", dir, (unsigned long long)gs->n);
	growth__plugin_broker(cfg, run, &g);
	g.bo.no_sys_topics = true;
	g.bo.valgrind_out = out;
	g.bo.valgrind_root = cfg->valgrind_root;
	g.bo.ready_timeout_ms = CG_GROWTH_READY_MS;
	fprintf(stderr, "growth: callgrind, a broker restoring %llu records\n", (unsigned long long)gs->n);
	if(growth__fresh_state(gs, run) || broker__start(&b, &g.bo)) return -1;
	int rc = growth__restored_check(&b, gs->n);
	if(rc == 0) rc = cg_control(cfg, b.pid, "-z");
	for(int l = 0; l < NGLOAD && rc == 0 && !bench__interrupted(); l++){
		double ir[2][NFN];
		for(int k = 0; k < 2 && rc == 0; k++){
			struct load_opts o = {
				.target = { { .broker = &b, .kind = l == G_STORM ? LOAD_STORM : LOAD_TRACKED } }, .targets = 1,
				.qos = 1, .pairs = 1, .payload_len = BENCH_PAYLOAD, .window = CG_WINDOW, .count = k ? n1 : n0,
				.timeout_ms = CG_LOAD_TIMEOUT_MS, .label = "growth-cg",
			};
			struct load_result res;
			fprintf(stderr, "growth: callgrind, %llu kept, %s, %llu messages\n", (unsigned long long)gs->n,
					names[l], (unsigned long long)o.count);
			rc = load__run(&o, &res);
			if(rc == 0 && (res.untagged || res.unfinished)){
				fprintf(stderr, "dlq_bench: growth: under callgrind: %llu untagged, %llu unfinished\n",
						(unsigned long long)res.untagged, (unsigned long long)res.unfinished);
				rc = -1;
			}
			if(rc == 0) rc = cg_dump(cfg, &b, out, ++part, ir[k]);
		}
		if(rc) break;
		/* A storm message is NACKed BENCH_MAX_ATTEMPTS times. */
		double units = (double)(n1 - n0) * (l == G_STORM ? BENCH_MAX_ATTEMPTS : 1);
		for(int f = 0; f < NFN; f++) gs->per[l][f] = (ir[1][f] - ir[0][f]) / units;
		gs->cg_ok[l] = true;
	}
	if(rc && !bench__interrupted()) broker__print_log(&b);
	/* The plugin's shutdown save is not waited for; valgrind, killed,
	 * leaves the FIFOs of its gdb server behind. */
	pid_t pid = b.pid;
	broker__halt(&b, SIGKILL);
	broker__remove_dir(&b);
	remove_vgdb_files(pid);
	return rc;
}
