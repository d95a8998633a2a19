/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The growth suite's instruction counts (see growth.c for what was
 * decided): one broker per number of kept records under callgrind, its
 * counts zeroed with callgrind_control once it has restored them and
 * dumped after each workload, so that each dump (a part of its profile,
 * OUT.1 to OUT.4) holds one workload alone. On 2.1 callgrind_control is
 * the root's, as valgrind is (cg_control.c).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "growth.h"

#define CG_WINDOW 50
#define CG_LOAD_TIMEOUT_MS 600000
/* Restoring 1,000,000 records under callgrind, and saving them again
 * before the broker is ready, at some 50 times the native time. */
#define CG_GROWTH_READY_MS 1800000

/* Dumps the broker's counts since the last dump (or zeroing) as part
 * `part` of out, waits until it is written, and reads it. */
static int cg_dump(const struct bench_config *cfg, const struct broker *b, const char *out, int part, double ir[NFN])
{
	char path[340];
	if(cg__dump_part(cfg->valgrind_root, b->pid, out, part, path, sizeof(path))) return -1;
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
	if(rc == 0) rc = cg__control(cfg->valgrind_root, b.pid, "-z");
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
	cg__remove_vgdb_files(pid);
	return rc;
}
