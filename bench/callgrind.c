/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The callgrind suite (see bench.h): instruction counts, which do not
 * depend on how busy the machine is. Each case runs the broker under
 * `valgrind --tool=callgrind` twice, with a small and a large fixed
 * workload (QoS 1, one publisher, one subscriber), and takes the difference,
 * so that startup, connections and shutdown cancel out. Reported per
 * message: the broker's whole instruction count, and the inclusive cost of
 * the plugin's callbacks adapter__message, adapter__control and
 * adapter__tick (from callgrind_annotate --inclusive=yes).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"

#define CG_WINDOW 50
#define CG_TIMEOUT_MS 300000
#define TOP_FUNCTIONS 20
/* The per-message callbacks. TICK's work is driven by time, and under
 * callgrind the broker runs some 50 times slower, so per message it would
 * be overstated there; the table shows it, the profiles leave it out. */
static const char *const profile_toggle[] = { "adapter__message", "adapter__control", NULL };

enum cg_fn { FN_TOTAL, FN_MESSAGE, FN_CONTROL, FN_TICK, NFN };
static const char *const fn_names[NFN] = { "PROGRAM TOTALS", "adapter__message", "adapter__control", "adapter__tick" };

struct cg_case {
	const char *name;
	enum broker_kind broker;
	enum load_kind load;
};

/* Parses "1,234,567 (12.3%)  file:function [object]" lines. */
static void parse_annotate(const char *file, double ir[NFN])
{
	char cmd[512], line[2048];
	memset(ir, 0, sizeof(double) * NFN);
	snprintf(cmd, sizeof(cmd), "callgrind_annotate --auto=no --inclusive=yes --threshold=100 '%s' 2>/dev/null", file);
	FILE *p = popen(cmd, "r");
	if(p == NULL) return;
	while(fgets(line, sizeof(line), p)){
		char digits[64];
		size_t nd = 0;
		const char *s = line;
		while(*s == ' ') s++;
		while((*s >= '0' && *s <= '9') || *s == ','){
			if(*s != ',' && nd < sizeof(digits) - 1) digits[nd++] = *s;
			s++;
		}
		if(nd == 0) continue;
		digits[nd] = '\0';
		double v = strtod(digits, NULL);
		const char *name = strstr(s, "  ");
		if(name == NULL) continue;
		name += 2;
		if(!strncmp(name, fn_names[FN_TOTAL], strlen(fn_names[FN_TOTAL]))){
			ir[FN_TOTAL] = v;
			continue;
		}
		const char *colon = strchr(name, ':');
		if(colon == NULL) continue;
		for(int f = FN_MESSAGE; f < NFN; f++){
			size_t n = strlen(fn_names[f]);
			char after = colon[1 + n];
			/* A function can be listed twice, with and without its
			 * file: the same cost, so keep the largest. */
			if(!strncmp(colon + 1, fn_names[f], n) && (after == ' ' || after == '\n' || after == '\0') && v > ir[f]){
				ir[f] = v;
			}
		}
	}
	pclose(p);
}

/* The broker's frames that lead to the callbacks: in an inclusive
 * profile of the callbacks they only repeat the total. */
static bool is_caller_frame(const char *line)
{
	static const char *const frames[] = {
		":(below main)", ":__libc_start_main", ":main ", ":mosquitto_main_loop ", ":mux__handle ",
		":mux_epoll__handle ", ":packet__read ", ":handle__packet ", ":handle__publish ",
		":plugin__handle_message ", ":plugin__handle_tick ", ":control__process ", "ld-linux",
	};
	for(size_t i = 0; i < sizeof(frames) / sizeof(frames[0]); i++){
		if(strstr(line, frames[i])) return true;
	}
	return false;
}

/* Prints the costliest functions of a profile collected inside the
 * plugin's callbacks only, per unit (message or NACK), inclusive or self.
 * callgrind_annotate may list a function twice (with and without its
 * file); the first, larger, entry is shown. */
static void print_profile(const char *file, bool inclusive, double units, const char *unit)
{
	char cmd[512], line[2048];
	char shown_names[TOP_FUNCTIONS][128];
	int shown = 0;
	bool table = false;

	snprintf(cmd, sizeof(cmd), "callgrind_annotate --auto=no --inclusive=%s --threshold=99 '%s' 2>/dev/null",
			inclusive ? "yes" : "no", file);
	FILE *p = popen(cmd, "r");
	if(p == NULL) return;
	printf("\n%s cost per %s inside the plugin's callbacks:\n\n```\n", inclusive ? "Inclusive" : "Self", unit);
	while(fgets(line, sizeof(line), p) && shown < TOP_FUNCTIONS){
		if(strstr(line, "file:function")){
			table = true;
			continue;
		}
		if(!table || line[0] == '-' || line[0] == '\n' || is_caller_frame(line)) continue;
		char digits[64];
		size_t nd = 0;
		const char *s = line;
		while(*s == ' ') s++;
		while((*s >= '0' && *s <= '9') || *s == ','){
			if(*s != ',' && nd < sizeof(digits) - 1) digits[nd++] = *s;
			s++;
		}
		if(nd == 0) continue;
		digits[nd] = '\0';
		/* "(share)  file:function [object]": keep the share, the
		 * function and the object's base name. */
		const char *share = strchr(s, '(');
		const char *close = share ? strchr(share, ')') : NULL;
		const char *colon = close ? strchr(close, ':') : NULL;
		if(colon == NULL) continue;
		char fn[128];
		snprintf(fn, sizeof(fn), "%.*s", (int)strcspn(colon + 1, " \n"), colon + 1);
		bool seen = false;
		for(int i = 0; i < shown && !seen; i++){
			seen = !strcmp(shown_names[i], fn);
		}
		if(seen) continue;
		snprintf(shown_names[shown++], sizeof(shown_names[0]), "%s", fn);
		char obj[128] = "";
		const char *open = strchr(colon, '[');
		if(open){
			size_t n = strcspn(open + 1, "]\n");
			const char *base = open + 1;
			for(const char *q = open + 1; q < open + 1 + n; q++){
				if(*q == '/') base = q + 1;
			}
			snprintf(obj, sizeof(obj), " [%.*s]", (int)(open + 1 + n - base), base);
		}
		printf("%9.0f %.*s  %s%s\n", strtod(digits, NULL) / units, (int)(close - share + 1), share, fn, obj);
	}
	printf("```\n");
	pclose(p);
}

/* Runs the broker under callgrind for one workload. toggle: collect only
 * inside these functions (a profile of the plugin), else everything and
 * ir is filled from the annotation. */
static int run_one(const struct bench_config *cfg, const struct cg_case *cc, uint64_t count,
		const char *out, const char *const *toggle, double ir[NFN])
{
	struct broker b;
	struct broker_opts bo = {
		.kind = cc->broker, .plugin_path = cfg->plugin_path, .mosquitto_bin = cfg->mosquitto_bin,
		.tcp = cfg->tcp, .cpu = cfg->broker_cpu, .valgrind_out = out, .valgrind_toggle = toggle,
		.no_sys_topics = true, .plugin_opts = cfg->plugin_opts, .ready_timeout_ms = 60000,
	};
	struct load_opts o = {
		.target = { { .broker = &b, .kind = cc->load } }, .targets = 1, .qos = 1, .pairs = 1,
		.payload_len = BENCH_PAYLOAD,
		.window = CG_WINDOW, .count = count, .timeout_ms = CG_TIMEOUT_MS, .label = cc->name,
	};
	struct load_result res;

	if(broker__start(&b, &bo)) return -1;
	int rc = load__run(&o, &res);
	if(rc == 0 && (res.untagged || res.unfinished)){
		fprintf(stderr, "dlq_bench: %s under callgrind: %llu untagged, %llu unfinished\n", cc->name,
				(unsigned long long)res.untagged, (unsigned long long)res.unfinished);
		rc = -1;
	}
	if(rc && !bench__interrupted()) broker__print_log(&b);
	int status = broker__stop(&b);
	if(rc) return -1;
	if(status != 0){
		fprintf(stderr, "dlq_bench: broker under callgrind exited with status 0x%x\n", status);
		return -1;
	}
	if(toggle) return 0;
	parse_annotate(out, ir);
	return ir[FN_TOTAL] > 0 ? 0 : -1;
}

int suite__callgrind(const struct bench_config *cfg)
{
	static const struct cg_case cases[] = {
		{ "bare", BROKER_BARE, LOAD_PLAIN },
		{ "untracked", BROKER_PLUGIN, LOAD_PLAIN },
		{ "tracked", BROKER_PLUGIN, LOAD_TRACKED },
		{ "storm", BROKER_PLUGIN, LOAD_STORM },
	};
	enum { NCASES = sizeof(cases) / sizeof(cases[0]) };
	double per[NCASES][NFN];
	bool ok[NCASES] = {false};
	char dir[192];
	char out[NCASES][2][320];
	uint64_t n1 = cfg->callgrind_count, n0 = n1 / 10;
	int rc = 0;

	/* The profiles are kept for callgrind_annotate: in the directory asked
	 * for (run-bench.sh: build-bench/callgrind, replaced by each run), else
	 * in a new one under /tmp. */
	if(cfg->callgrind_dir){
		if(strlen(cfg->callgrind_dir) >= sizeof(dir)){
			fprintf(stderr, "dlq_bench: --callgrind-dir is too long\n");
			return -1;
		}
		snprintf(dir, sizeof(dir), "%s", cfg->callgrind_dir);
		if(mkdir(dir, 0755) && errno != EEXIST){
			fprintf(stderr, "dlq_bench: mkdir %s: %s\n", dir, strerror(errno));
			return -1;
		}
	}else{
		snprintf(dir, sizeof(dir), "/tmp/dlq-bench-callgrind-XXXXXX");
		if(mkdtemp(dir) == NULL){
			perror("dlq_bench: mkdtemp");
			return -1;
		}
	}
	for(int i = 0; i < NCASES && !bench__interrupted(); i++){
		double a[NFN], b[NFN];
		snprintf(out[i][0], sizeof(out[i][0]), "%s/callgrind.%s.%llu", dir, cases[i].name, (unsigned long long)n0);
		snprintf(out[i][1], sizeof(out[i][1]), "%s/callgrind.%s.%llu", dir, cases[i].name, (unsigned long long)n1);
		fprintf(stderr, "callgrind: %s (%llu and %llu messages)\n", cases[i].name,
				(unsigned long long)n0, (unsigned long long)n1);
		if(run_one(cfg, &cases[i], n0, out[i][0], NULL, a) || run_one(cfg, &cases[i], n1, out[i][1], NULL, b)){
			rc = -1;
			continue;
		}
		for(int f = 0; f < NFN; f++){
			per[i][f] = (b[f] - a[f]) / (double)(n1 - n0);
		}
		ok[i] = true;
	}

	printf("\n### Instructions (callgrind), QoS 1, 1→1, %d B, per message "
			"(difference of %llu- and %llu-message runs)\n\n", BENCH_PAYLOAD, (unsigned long long)n1, (unsigned long long)n0);
	printf("| case | broker Ir per published message | vs bare | adapter__message | adapter__control | adapter__tick "
			"| plugin callbacks ÷ broker |\n");
	printf("|---|---|---|---|---|---|---|\n");
	for(int i = 0; i < NCASES; i++){
		if(!ok[i]){
			printf("| %s | failed | | | | | |\n", cases[i].name);
			continue;
		}
		double plugin = per[i][FN_MESSAGE] + per[i][FN_CONTROL] + per[i][FN_TICK];
		printf("| %s | %.0f | %s%.2fx | %.0f | %.0f | %.0f | %.1f%% |\n", cases[i].name, per[i][FN_TOTAL],
				ok[0] ? "" : "?", ok[0] ? per[i][FN_TOTAL] / per[0][FN_TOTAL] : 0,
				per[i][FN_MESSAGE], per[i][FN_CONTROL], per[i][FN_TICK], 100 * plugin / per[i][FN_TOTAL]);
	}
	printf("\nBrokers here run with sys_interval 0 and plugin_opt_sys_interval 0s: under callgrind the broker is "
			"some 50 times slower, and work driven by time would be counted against messages.\n");
	if(ok[NCASES - 1]){
		double *s = per[NCASES - 1];
		int nacks = BENCH_MAX_ATTEMPTS;
		printf("\nStorm, per NACK (%d per published message: %d retry copies and 1 dead letter): broker %.0f Ir, "
				"adapter__control %.0f Ir, adapter__tick %.0f Ir", nacks, nacks - 1, s[FN_TOTAL] / nacks,
				s[FN_CONTROL] / nacks, s[FN_TICK] / nacks);
		if(ok[0]){
			printf("; a NACK costs the broker %.2fx a bare delivery (%.0f Ir)", s[FN_TOTAL] / nacks / per[0][FN_TOTAL],
					per[0][FN_TOTAL]);
		}
		printf(".\n");
	}
	/* Profiles of the plugin alone: collected inside its callbacks only. */
	for(int i = 2; i < NCASES && !bench__interrupted(); i++){
		char prof[320];
		bool storm = cases[i].load == LOAD_STORM;
		snprintf(prof, sizeof(prof), "%s/callgrind.%s.plugin-only", dir, cases[i].name);
		fprintf(stderr, "callgrind: %s, plugin callbacks only\n", cases[i].name);
		if(run_one(cfg, &cases[i], n1, prof, profile_toggle, NULL)){
			rc = -1;
			continue;
		}
		double units = (double)n1 * (storm ? BENCH_MAX_ATTEMPTS : 1);
		printf("\n#### Profile: %s (%llu messages%s; callgrind --toggle-collect=adapter__message "
				"--toggle-collect=adapter__control)\n",
				cases[i].name, (unsigned long long)n1, storm ? ", every delivery NACKed" : "");
		print_profile(prof, true, units, storm ? "NACK" : "message");
		print_profile(prof, false, units, storm ? "NACK" : "message");
	}
	printf("\ncallgrind output kept in %s (callgrind_annotate --inclusive=yes FILE).\n", dir);
	return rc;
}
