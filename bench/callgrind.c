/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The callgrind suite (see bench.h, callgrind.h): instruction counts, which
 * do not depend on how busy the machine is. Each case runs the broker under
 * `valgrind --tool=callgrind` twice, with a small and a large fixed workload
 * (QoS 1, one publisher and one or four subscribers of its topic), and takes
 * the difference, so that startup, connections and shutdown cancel out. The
 * cases: bare, untracked (100 and 10,000 policies), tracked (delivery-count
 * as the plugin has it, and turned off where the plugin knows the option),
 * the NACK storm, and bare, untracked and tracked again with four
 * subscribers. On 2.1 the broker and valgrind are the root's (--valgrind-root).
 * Then a few cases run once more collecting inside the plugin's per-message
 * callbacks only, for the profiles.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "callgrind.h"

#define CG_WINDOW 50
#define CG_TIMEOUT_MS 300000
/* 10,000 policies are parsed at startup some 50 times slower than natively. */
#define CG_READY_TIMEOUT_MS 180000
#define PROBE_READY_TIMEOUT_MS 20000
/* The option the count21 work adds on 2.1 (on by default): the tracked
 * cases run with it off too, where the plugin knows it. */
#define DELIVERY_COUNT_ALWAYS "delivery_count always"

/* The per-message callbacks, and a 2.1 per-send one (adapter__message_*).
 * TICK's work is driven by time, and under callgrind the broker runs some
 * 50 times slower, so per message it would be overstated there; the table
 * shows it, the profiles leave it out. */
static const char *const profile_toggle[] = { "adapter__message*", "adapter__control", NULL };
/* The NACK callback alone: the plugin's own work per NACK is what it
 * collects less the broker's functions it calls. */
static const char *const control_toggle[] = { "adapter__control", NULL };

static const struct cg_case cases[] = {
	{ "bare", "bare", BROKER_BARE, LOAD_PLAIN, 1, 0, NULL, false, false },
	{ "untracked", "untracked", BROKER_PLUGIN, LOAD_PLAIN, 1, 0, NULL, false, false },
	{ "untracked-10k", "untracked, 10,000 policies", BROKER_PLUGIN, LOAD_PLAIN, 1, BENCH_POLICIES_LARGE, NULL, false, false },
	{ "tracked", "tracked", BROKER_PLUGIN, LOAD_TRACKED, 1, 0, NULL, true, false },
	{ "tracked-dc-always", "tracked, delivery_count always", BROKER_PLUGIN, LOAD_TRACKED, 1, 0, DELIVERY_COUNT_ALWAYS,
		false, false },
	{ "storm", "storm", BROKER_PLUGIN, LOAD_STORM, 1, 0, NULL, true, false },
	{ "bare-1to4", "bare", BROKER_BARE, LOAD_PLAIN, 4, 0, NULL, false, false },
	{ "untracked-1to4", "untracked", BROKER_PLUGIN, LOAD_PLAIN, 4, 0, NULL, false, false },
	{ "tracked-1to4", "tracked", BROKER_PLUGIN, LOAD_TRACKED, 4, 0, NULL, true, false },
	{ "tracked-dc-always-1to4", "tracked, delivery_count always", BROKER_PLUGIN, LOAD_TRACKED, 4, 0,
		DELIVERY_COUNT_ALWAYS, false, false },
	/* What the broker's API costs any plugin that keeps each tracked
	 * message and stamps it with an unguessable id (and, on 2.1 with
	 * always, gives each send its delivery-count): the floor under the
	 * tracked budgets. */
	{ "floor-hosting", "floor: a MESSAGE and a TICK callback that return", BROKER_PLUGIN, LOAD_PLAIN, 1, 0,
		"floor hosting", false, true },
	{ "floor", "floor: keep, random id, stamp", BROKER_PLUGIN, LOAD_TRACKED, 1, 0, NULL, false, true },
	{ "floor-dc-always", "floor, delivery_count always", BROKER_PLUGIN, LOAD_TRACKED, 1, 0, DELIVERY_COUNT_ALWAYS, false,
		true },
	{ "floor-1to4", "floor: keep, random id, stamp", BROKER_PLUGIN, LOAD_TRACKED, 4, 0, NULL, false, true },
	{ "floor-dc-always-1to4", "floor, delivery_count always", BROKER_PLUGIN, LOAD_TRACKED, 4, 0, DELIVERY_COUNT_ALWAYS,
		false, true },
};
enum { NCASES = sizeof(cases) / sizeof(cases[0]) };

/* The broker options of a case: the user's --plugin-opt, then the case's
 * own option in suite (two entries). */
static void case_opts(const struct bench_config *cfg, const struct cg_case *cc, const char *suite[2],
		struct broker_opts *bo)
{
	suite[0] = cc->opt;
	suite[1] = NULL;
	memset(bo, 0, sizeof(*bo));
	bo->kind = cc->broker;
	bo->plugin_path = cc->floor ? cfg->floor_plugin_path : cfg->plugin_path;
	bo->mosquitto_bin = cfg->mosquitto_bin;
	bo->tcp = cfg->tcp;
	bo->cpu = cfg->broker_cpu;
	bo->no_sys_topics = true;
	bo->plugin_opts = cfg->plugin_opts;
	bo->suite_opts = suite;
	bo->policy_count = cc->policies;
	bo->ready_timeout_ms = CG_READY_TIMEOUT_MS;
}

/* Whether --cases names the case (every case without --cases). */
static bool case_wanted(const struct bench_config *cfg, const struct cg_case *cc)
{
	if(cfg->callgrind_cases == NULL) return true;
	size_t len = strlen(cc->name);
	for(const char *s = cfg->callgrind_cases; *s;){
		size_t n = strcspn(s, ",");
		if(n == len && !strncmp(s, cc->name, len)) return true;
		s += n;
		if(*s == ',') s++;
	}
	return false;
}

/* Whether the plugin starts with the case's option: a broker is started
 * natively with it and stopped. The plugin refuses options it does not
 * know, and the broker then exits at startup. */
static bool option_accepted(const struct bench_config *cfg, const struct cg_case *cc)
{
	const char *suite[2];
	struct broker_opts bo;
	struct broker b;
	case_opts(cfg, cc, suite, &bo);
	bo.ready_timeout_ms = PROBE_READY_TIMEOUT_MS;
	fprintf(stderr, "callgrind: does the plugin take plugin_opt_%s? (a refusal and its log below are expected "
			"where it does not)\n", cc->opt);
	if(broker__start(&b, &bo)) return false;
	broker__stop(&b);
	return true;
}

/* Runs the broker under callgrind for one workload. toggle: collect only
 * inside these functions (a profile of the plugin), else everything and
 * ir is filled from the annotation. */
static int run_one(const struct bench_config *cfg, const struct cg_case *cc, uint64_t count,
		const char *out, const char *const *toggle, double ir[NFN])
{
	struct broker b;
	const char *suite[2];
	struct broker_opts bo;
	case_opts(cfg, cc, suite, &bo);
	bo.valgrind_out = out;
	bo.valgrind_toggle = toggle;
	bo.valgrind_root = cfg->valgrind_root;
	struct load_opts o = {
		.target = { { .broker = &b, .kind = cc->load } }, .targets = 1, .qos = 1, .pairs = 1, .fanout = cc->fanout,
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
	cg__parse(out, ir);
	return ir[FN_TOTAL] > 0 ? 0 : -1;
}

/* The directory the profiles are kept in, for callgrind_annotate: the one
 * asked for (run-bench.sh: build-bench/callgrind, replaced by each run),
 * else a new one under /tmp. */
static int profile_dir(const struct bench_config *cfg, char *dir, size_t len)
{
	if(cfg->callgrind_dir){
		if(strlen(cfg->callgrind_dir) >= len){
			fprintf(stderr, "dlq_bench: --callgrind-dir is too long\n");
			return -1;
		}
		snprintf(dir, len, "%s", cfg->callgrind_dir);
		if(mkdir(dir, 0755) && errno != EEXIST){
			fprintf(stderr, "dlq_bench: mkdir %s: %s\n", dir, strerror(errno));
			return -1;
		}
		return 0;
	}
	snprintf(dir, len, "/tmp/dlq-bench-callgrind-XXXXXX");
	if(mkdtemp(dir) == NULL){
		perror("dlq_bench: mkdtemp");
		return -1;
	}
	return 0;
}

int suite__callgrind(const struct bench_config *cfg)
{
	struct cg_result res[NCASES];
	char dir[192];
	uint64_t n1 = cfg->callgrind_count, n0 = n1 / 10;
	int pairs_wanted = cfg->callgrind_pairs < 1 ? 1 : cfg->callgrind_pairs > CG_PAIRS_MAX ? CG_PAIRS_MAX
			: cfg->callgrind_pairs;
	int rc = 0;

	memset(res, 0, sizeof(res));
	if(profile_dir(cfg, dir, sizeof(dir))) return -1;
	for(int i = 0; i < NCASES && !bench__interrupted(); i++){
		const struct cg_case *cc = &cases[i];
		char out0[320], out1[320];
		double a[NFN], b[NFN];
		if(!case_wanted(cfg, cc)){
			res[i].skipped = true;
			continue;
		}
		if(cc->floor && cfg->floor_plugin_path == NULL){
			fprintf(stderr, "callgrind: %s: skipped, no --floor-plugin\n", cc->name);
			res[i].na = true;
			continue;
		}
		if(cc->opt && !cc->floor && !option_accepted(cfg, cc)){
			fprintf(stderr, "callgrind: %s: n/a, the plugin does not take plugin_opt_%s\n", cc->name, cc->opt);
			res[i].na = true;
			continue;
		}
		double per[CG_PAIRS_MAX][NFN];
		int pairs = 0;
		for(int k = 0; k < pairs_wanted && !bench__interrupted(); k++){
			/* The first pair keeps the plain names, for callgrind_annotate. */
			char tail[16] = "";
			if(k) snprintf(tail, sizeof(tail), ".%d", k + 1);
			snprintf(out0, sizeof(out0), "%s/callgrind.%s.%llu%s", dir, cc->name, (unsigned long long)n0, tail);
			snprintf(out1, sizeof(out1), "%s/callgrind.%s.%llu%s", dir, cc->name, (unsigned long long)n1, tail);
			fprintf(stderr, "callgrind: %s (%llu and %llu messages, pair %d of %d)\n", cc->name,
					(unsigned long long)n0, (unsigned long long)n1, k + 1, pairs_wanted);
			if(run_one(cfg, cc, n0, out0, NULL, a) || run_one(cfg, cc, n1, out1, NULL, b)) break;
			for(int f = 0; f < NFN; f++) per[pairs][f] = (b[f] - a[f]) / (double)(n1 - n0);
			pairs++;
		}
		if(pairs < pairs_wanted){
			rc = -1;
			continue;
		}
		cg__median(per, pairs, &res[i]);
		res[i].ok = true;
		if(cc->load == LOAD_STORM && !cc->floor){
			char ctl[320];
			snprintf(ctl, sizeof(ctl), "%s/callgrind.%s.control-only", dir, cc->name);
			fprintf(stderr, "callgrind: %s, the NACK callback only\n", cc->name);
			if(run_one(cfg, cc, n1, ctl, control_toggle, NULL)
					|| cg__split_broker_calls(ctl, &res[i].control_total, &res[i].control_calls)){
				fprintf(stderr, "callgrind: %s: the NACK callback's profile could not be read\n", cc->name);
				res[i].control_total = 0;
			}
		}
	}
	cg__print_tables(cases, res, NCASES, n0, n1, cfg->broker_version);

	/* Profiles of the plugin alone: collected inside its callbacks only. */
	for(int i = 0; i < NCASES && !bench__interrupted(); i++){
		const struct cg_case *cc = &cases[i];
		if(!cc->profile || !res[i].ok) continue;
		char prof[320];
		bool storm = cc->load == LOAD_STORM;
		snprintf(prof, sizeof(prof), "%s/callgrind.%s.plugin-only", dir, cc->name);
		fprintf(stderr, "callgrind: %s, plugin callbacks only\n", cc->name);
		if(run_one(cfg, cc, n1, prof, profile_toggle, NULL)){
			rc = -1;
			continue;
		}
		double units = (double)n1 * (storm ? BENCH_MAX_ATTEMPTS : 1);
		printf("\n#### Profile: %s, 1→%d (%llu messages%s; callgrind --toggle-collect=adapter__message* "
				"--toggle-collect=adapter__control)\n",
				cc->label, cc->fanout, (unsigned long long)n1, storm ? ", every delivery NACKed" : "");
		cg__print_profile(prof, true, units, storm ? "NACK" : "published message");
		cg__print_profile(prof, false, units, storm ? "NACK" : "published message");
	}
	printf("\ncallgrind output kept in %s (callgrind_annotate --inclusive=yes FILE).\n", dir);
	return rc;
}
