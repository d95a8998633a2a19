/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The callgrind suite's tables (see callgrind.h): the broker's instructions
 * per published and per delivered message for each case, against the bare
 * broker with as many subscribers in the same run; what a NACK costs; and
 * the budgets of issue 14, each with the figure it is judged on and
 * whether it is met. A case that failed or does not apply is shown as such,
 * never left out.
 */
#include <stdio.h>
#include <string.h>

#include "callgrind.h"

#define BUDGET_UNTRACKED 1.02
#define BUDGET_LARGE 1.05
#define BUDGET_TRACKED 1.15
#define BUDGET_NACK_IR 4000.0
#define BUDGET_TRACKED_21 1.25

static int find_case(const struct cg_case *cases, const struct cg_result *res, int n, enum broker_kind broker,
		enum load_kind load, int fanout, int policies, bool with_opt, bool floor)
{
	for(int i = 0; i < n; i++){
		const struct cg_case *c = &cases[i];
		if(c->broker == broker && c->load == load && c->fanout == fanout && c->policies == policies
				&& (c->opt != NULL) == with_opt && c->floor == floor){
			return res[i].ok ? i : -1;
		}
	}
	return -1;
}

/* A case of the plugin (or the bare broker), not of the floor plugin. */
static int find(const struct cg_case *cases, const struct cg_result *res, int n, enum broker_kind broker,
		enum load_kind load, int fanout, int policies, bool with_opt)
{
	return find_case(cases, res, n, broker, load, fanout, policies, with_opt, false);
}

/* A floor case: tracked, fanout subscribers, delivery_count always or not. */
static int find_floor(const struct cg_case *cases, const struct cg_result *res, int n, int fanout, bool dc_always)
{
	return find_case(cases, res, n, BROKER_PLUGIN, LOAD_TRACKED, fanout, 0, dc_always, true);
}

/* The bare case with the same number of subscribers, or -1. */
static int bare_for(const struct cg_case *cases, const struct cg_result *res, int n, int fanout)
{
	return find(cases, res, n, BROKER_BARE, LOAD_PLAIN, fanout, 0, false);
}

void cg__median(double per[][NFN], int pairs, struct cg_result *res)
{
	for(int f = 0; f < NFN; f++){
		double v[CG_PAIRS_MAX];
		for(int k = 0; k < pairs; k++) v[k] = per[k][f];
		res->per[f] = stats__median(v, (size_t)pairs);
	}
	res->total_lo = res->total_hi = per[0][FN_TOTAL];
	for(int k = 1; k < pairs; k++){
		if(per[k][FN_TOTAL] < res->total_lo) res->total_lo = per[k][FN_TOTAL];
		if(per[k][FN_TOTAL] > res->total_hi) res->total_hi = per[k][FN_TOTAL];
	}
	res->pairs = pairs;
}

/* How far the pairs of runs of each case were apart: the budgets' ratios
 * are judged on medians, and this says how much a single pair moves. */
static void print_spread(const struct cg_case *cases, const struct cg_result *res, int n)
{
	int pairs = 0;
	for(int i = 0; i < n; i++){
		if(res[i].ok && res[i].pairs > pairs) pairs = res[i].pairs;
	}
	if(pairs < 2) return;
	printf("\nEach figure is the median of %d pairs of runs per case; the range of the broker's Ir per published "
			"message over the pairs:", pairs);
	for(int i = 0; i < n; i++){
		if(!res[i].ok) continue;
		printf("%s %s 1→%d %.0f-%.0f", i ? ";" : "", cases[i].label, cases[i].fanout, res[i].total_lo,
				res[i].total_hi);
	}
	printf(".\n");
}

static void print_case_table(const struct cg_case *cases, const struct cg_result *res, int n, uint64_t n0,
		uint64_t n1)
{
	printf("\n### Instructions (callgrind), QoS 1, %d B, per message "
			"(difference of %llu- and %llu-message runs)\n\n", BENCH_PAYLOAD, (unsigned long long)n1,
			(unsigned long long)n0);
	printf("| case | pubs→subs | broker Ir per published message | broker Ir per delivered message "
			"| vs bare (same subscribers) | adapter__message | adapter__control | adapter__tick "
			"| plugin callbacks ÷ broker |\n");
	printf("|---|---|---|---|---|---|---|---|---|\n");
	for(int i = 0; i < n; i++){
		const struct cg_case *c = &cases[i];
		const double *p = res[i].per;
		if(res[i].skipped){
			printf("| %s | 1→%d | skipped: not among --cases | | | | | | |\n", c->label, c->fanout);
			continue;
		}
		if(res[i].na && c->floor){
			printf("| %s | 1→%d | skipped: no --floor-plugin | | | | | | |\n", c->label, c->fanout);
			continue;
		}
		if(res[i].na){
			printf("| %s | 1→%d | n/a: the plugin refused `plugin_opt_%s` | | | | | | |\n", c->label, c->fanout, c->opt);
			continue;
		}
		if(!res[i].ok){
			printf("| %s | 1→%d | failed | | | | | | |\n", c->label, c->fanout);
			continue;
		}
		int b = bare_for(cases, res, n, c->fanout);
		char vs[32] = "?", per_delivery[32] = "–";
		if(b >= 0) snprintf(vs, sizeof(vs), "%.2fx", p[FN_TOTAL] / res[b].per[FN_TOTAL]);
		/* A storm's deliveries include its retry copies: per NACK below. */
		if(c->load != LOAD_STORM) snprintf(per_delivery, sizeof(per_delivery), "%.0f", p[FN_TOTAL] / c->fanout);
		printf("| %s | 1→%d | %.0f | %s | %s | %.0f | %.0f | %.0f | %.1f%% |\n", c->label, c->fanout, p[FN_TOTAL],
				per_delivery, vs, p[FN_MESSAGE], p[FN_CONTROL], p[FN_TICK], 100 * p[FN_PLUGIN] / p[FN_TOTAL]);
	}
	print_spread(cases, res, n);
	printf("\nBrokers here run with sys_interval 0 and plugin_opt_sys_interval 0s: under callgrind the broker is "
			"some 50 times slower, and work driven by time would be counted against messages. "
			"Plugin callbacks: every adapter__* function, inclusive.\n");
	int s = find(cases, res, n, BROKER_PLUGIN, LOAD_STORM, 1, 0, false);
	if(s >= 0){
		const double *p = res[s].per;
		int nacks = BENCH_MAX_ATTEMPTS;
		int b = bare_for(cases, res, n, 1);
		printf("\nStorm, per NACK (%d per published message: %d retry copies and 1 dead letter): broker %.0f Ir, "
				"adapter__control %.0f Ir, adapter__tick %.0f Ir", nacks, nacks - 1, p[FN_TOTAL] / nacks,
				p[FN_CONTROL] / nacks, p[FN_TICK] / nacks);
		if(b >= 0){
			printf("; a NACK costs the broker %.2fx a bare delivery (%.0f Ir)", p[FN_TOTAL] / nacks / res[b].per[FN_TOTAL],
					res[b].per[FN_TOTAL]);
		}
		printf(".\n");
	}
}

/* One row: a ratio (or, with count, Ir) against its limit, and the floor
 * plugin's figure on the same basis where there is one. figure < 0: not
 * measured; floor < 0: no floor case for this path. na: the verdict when
 * the budget does not apply here. */
static void budget_row(const char *path, const char *budget, double figure, double floor, double limit, bool count,
		const char *basis, const char *na)
{
	char fig[64], flo[64] = "–";
	if(figure < 0){
		snprintf(fig, sizeof(fig), "not measured");
	}else{
		snprintf(fig, sizeof(fig), count ? "%.0f Ir" : "%.3fx", figure);
	}
	if(floor >= 0) snprintf(flo, sizeof(flo), "%.3fx", floor);
	const char *verdict = na ? na : figure < 0 ? "–" : figure <= limit ? "met" : "**missed**";
	printf("| %s | %s | %s | %s | %s | %s |\n", path, budget, fig, flo, basis, verdict);
}

static double ratio(const struct cg_result *res, int a, int b, double div_a, double div_b)
{
	if(a < 0 || b < 0) return -1;
	return (res[a].per[FN_TOTAL] / div_a) / (res[b].per[FN_TOTAL] / div_b);
}

static void print_budgets(const struct cg_case *cases, const struct cg_result *res, int n, uint64_t n1,
		const char *line)
{
	int bare = bare_for(cases, res, n, 1), bare4 = bare_for(cases, res, n, 4);
	int untracked = find(cases, res, n, BROKER_PLUGIN, LOAD_PLAIN, 1, 0, false);
	int large = find(cases, res, n, BROKER_PLUGIN, LOAD_PLAIN, 1, BENCH_POLICIES_LARGE, false);
	int tracked = find(cases, res, n, BROKER_PLUGIN, LOAD_TRACKED, 1, 0, false);
	int tracked4 = find(cases, res, n, BROKER_PLUGIN, LOAD_TRACKED, 4, 0, false);
	int always = find(cases, res, n, BROKER_PLUGIN, LOAD_TRACKED, 1, 0, true);
	int always4 = find(cases, res, n, BROKER_PLUGIN, LOAD_TRACKED, 4, 0, true);
	int storm = find(cases, res, n, BROKER_PLUGIN, LOAD_STORM, 1, 0, false);
	int floor = find_floor(cases, res, n, 1, false), floor4 = find_floor(cases, res, n, 4, false);
	int floor_plain = find_case(cases, res, n, BROKER_PLUGIN, LOAD_PLAIN, 1, 0, true, true);
	int floor_always = find_floor(cases, res, n, 1, true), floor_always4 = find_floor(cases, res, n, 4, true);
	bool v21 = line && !strncmp(line, "2.1", 3);
	const char *not21 = v21 ? NULL : "n/a (2.1's budget)";
	char budget[64];

	printf("\n### Budgets (issue 14), broker %s: instructions\n\n", line ? line : "?");
	printf("| path | budget | measured | floor | from | met/missed |\n");
	printf("|---|---|---|---|---|---|\n");
	snprintf(budget, sizeof(budget), "≤ %.2fx bare", BUDGET_UNTRACKED);
	budget_row("untracked message, 100 policies", budget, ratio(res, untracked, bare, 1, 1),
			ratio(res, floor_plain, bare, 1, 1), BUDGET_UNTRACKED,
			false, "broker Ir per message ÷ bare, 1→1", NULL);
	budget_row("untracked message, 10,000 policies", "within 5% of the 100-policy figure",
			ratio(res, large, untracked, 1, 1), -1, BUDGET_LARGE, false,
			"broker Ir per message, 10,000 ÷ 100 policies, 1→1", NULL);
	snprintf(budget, sizeof(budget), "≤ %.2fx bare", BUDGET_TRACKED);
	budget_row("tracked message", budget, ratio(res, tracked, bare, 1, 1), ratio(res, floor, bare, 1, 1),
			BUDGET_TRACKED, false, "broker Ir per message ÷ bare, 1→1", NULL);
	double nacks = storm >= 0 ? (double)n1 * BENCH_MAX_ATTEMPTS : 0;
	bool split = storm >= 0 && res[storm].control_total > 0;
	budget_row("plugin's own work per NACK (retry copy or dead letter made)", "≤ 4,000 Ir",
			split ? (res[storm].control_total - res[storm].control_calls.ir) / nacks : -1, -1, BUDGET_NACK_IR, true,
			"adapter__control per NACK less the broker's functions it calls", NULL);
	/* 2.1's budget is per delivery, with delivery-count on (the
	 * plugin's default there: none on a first delivery, and the
	 * benchmark's are all first ones); the always cases show what a
	 * delivery-count on every send costs. */
	snprintf(budget, sizeof(budget), "≤ %.2fx bare 2.1", BUDGET_TRACKED_21);
	budget_row("2.1: tracked, delivery-count on (the default: none on a first delivery), 1→1", budget,
			ratio(res, tracked, bare, 1, 1), ratio(res, floor, bare, 1, 1), BUDGET_TRACKED_21, false,
			"broker Ir per delivery ÷ bare, 1→1", not21);
	budget_row("2.1: tracked, delivery-count on (the default: none on a first delivery), 1→4", budget,
			ratio(res, tracked4, bare4, 4, 4), ratio(res, floor4, bare4, 4, 4), BUDGET_TRACKED_21, false,
			"broker Ir per delivery ÷ bare, 1→4", not21);
	budget_row("tracked, delivery-count always, 1→1 (no budget)", "–", ratio(res, always, bare, 1, 1),
			ratio(res, floor_always, bare, 1, 1), 0, false, "broker Ir per delivery ÷ bare, 1→1",
			always >= 0 ? "–" : "n/a: option refused or failed");
	budget_row("tracked, delivery-count always, 1→4 (no budget)", "–", ratio(res, always4, bare4, 4, 4),
			ratio(res, floor_always4, bare4, 4, 4), 0, false, "broker Ir per delivery ÷ bare, 1→4",
			always4 >= 0 ? "–" : "n/a: option refused or failed");
	/* Issue 23's figure: the plugin beside the floor, default configuration. */
	budget_row("tracked ÷ floor, 1→1 (issue 23: ≤ 1.03x on 2.0, ≤ 1.05x on 2.1)", "–", ratio(res, tracked, floor, 1, 1),
			-1, 0, false, "broker Ir per delivery, plugin ÷ floor plugin, 1→1", floor >= 0 ? "–" : "n/a: no floor");
	budget_row("tracked ÷ floor, 1→4 (issue 23: ≤ 1.03x on 2.0, ≤ 1.05x on 2.1)", "–", ratio(res, tracked4, floor4, 4, 4),
			-1, 0, false, "broker Ir per delivery, plugin ÷ floor plugin, 1→4", floor4 >= 0 ? "–" : "n/a: no floor");
	if(split){
		const struct cg_broker_calls *bc = &res[storm].control_calls;
		printf("\nPer NACK (storm, adapter__control collected alone, %llu NACKs): the callback %.0f Ir, of which the "
				"broker's functions it calls %.0f Ir:", (unsigned long long)(n1 * BENCH_MAX_ATTEMPTS),
				res[storm].control_total / nacks, bc->ir / nacks);
		for(int i = 0; i < bc->n && i < 6; i++){
			printf("%s `%s` %.0f", i ? "," : "", bc->name[i], bc->by_name[i] / nacks);
		}
		printf("; the rest is the plugin's own work.\n");
	}
	printf("\nFloor: the floor plugin (bench/floor_plugin.c) in the same run, which only keeps a copy of each "
			"tracked message and stamps it with an unguessable id (96 bits from a getrandom buffer, 16 base64url "
			"characters) through the broker's API (and on 2.1, with delivery_count always, gives each send a "
			"delivery-count the same way): what any plugin doing this job costs the broker at least; for the "
			"untracked path, the same plugin with callbacks that return at once (the broker's cost of "
			"calling a plugin's MESSAGE and TICK callbacks at all).\n");
	printf("\nThe memory budget (≤ 96 B per kept record beyond payload + topic + properties) is in the memory "
			"suite's table.\n");
}

void cg__print_tables(const struct cg_case *cases, const struct cg_result *res, int n, uint64_t n0, uint64_t n1,
		const char *line)
{
	print_case_table(cases, res, n, n0, n1);
	print_budgets(cases, res, n, n1, line);
}
