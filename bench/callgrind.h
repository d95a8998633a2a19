/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The callgrind suite's own declarations, shared by its three files:
 * callgrind.c (the cases and the broker runs), cg_annotate.c (reading
 * callgrind_annotate's output) and cg_report.c (the tables: per case, and
 * against the budgets of issue 14). Outside the suite, the growth suite
 * (growth.c) reads its profiles with cg__parse, and it and the deadlines
 * suite drive long-lived brokers under callgrind with cg_control.c.
 */
#ifndef DLQ_BENCH_CALLGRIND_H
#define DLQ_BENCH_CALLGRIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bench.h"

/* What is read from a profile: the broker's whole count, the inclusive
 * cost of three of the plugin's callbacks, and of every adapter__*
 * function together (2.1 registers more callbacks than these three). */
enum cg_fn { FN_TOTAL, FN_MESSAGE, FN_CONTROL, FN_TICK, FN_PLUGIN, NFN };

struct cg_case {
	const char *name;            /* file names and progress */
	const char *label;           /* the table's first column */
	enum broker_kind broker;
	enum load_kind load;
	int fanout;                  /* subscribers of the one topic */
	int policies;                /* 0: BENCH_POLICIES */
	const char *opt;             /* one more plugin option, or NULL */
	bool profile;                /* also a profile of the plugin's callbacks alone */
	bool floor;                  /* the floor plugin (bench/floor_plugin.c) instead of the plugin */
};

/* The broker's functions the plugin's code calls, in a profile collected
 * inside the plugin's callbacks only (callgrind_annotate --tree=calling):
 * their inclusive cost in all, and by function. */
#define CG_BROKER_CALLS_MAX 24
struct cg_broker_calls {
	double ir;
	char name[CG_BROKER_CALLS_MAX][96];
	double by_name[CG_BROKER_CALLS_MAX];
	int n;
};
#define CG_PAIRS_MAX CG_PAIRS_LIMIT

struct cg_result {
	bool ok;
	bool na;                     /* the plugin refused the case's option */
	bool skipped;                /* not among --cases */
	double per[NFN];             /* Ir per published message: the median of the pairs */
	int pairs;                   /* pairs of runs measured */
	double total_lo, total_hi;   /* the range of per[FN_TOTAL] over the pairs */
	/* The storm: a run collected inside adapter__control only, split
	 * into the broker's functions it calls and the rest (the plugin's
	 * own work); control_total 0: not measured. */
	double control_total;
	struct cg_broker_calls control_calls;
};

/* res's per[] as the median of each figure over pairs (per pair: the
 * difference of the large and the small run, per message), and the range
 * of the totals. */
void cg__median(double per[][NFN], int pairs, struct cg_result *res);
/* Fills ir from `callgrind_annotate --inclusive=yes FILE` (zeros for what
 * is not found). */
void cg__parse(const char *file, double ir[NFN]);
/* From `callgrind_annotate --inclusive=yes FILE`: the inclusive Ir of each
 * of the n functions named (0 for one not found), the profile's total and
 * every adapter__* function's together (the plugin's callbacks). */
void cg__parse_named(const char *file, const char *const *names, int n, double *ir, double *total, double *plugin);
/* How many times the function fn was called in the profile (the "calls="
 * lines of its callers), 0 when never, -1 when the file cannot be read. */
long long cg__calls(const char *file, const char *fn);
/* Fills *total (everything the profile collected) and out; 0, or -1 when
 * the profile could not be read. */
int cg__split_broker_calls(const char *file, double *total, struct cg_broker_calls *out);
/* Prints the costliest functions of a profile collected inside the
 * plugin's callbacks only, per unit, inclusive or self. */
void cg__print_profile(const char *file, bool inclusive, double units, const char *unit);
/* A broker under callgrind driven from outside (cg_control.c).
 * callgrind_control (chroot valgrind_root callgrind_control, when not NULL)
 * with arg on pid: "-z" zeroes the counts, "-d" dumps them, "--instr=on"
 * and "--instr=off" turn the instrumentation on and off.
 * Returns 0, or -1 (logged) if it failed. */
int cg__control(const char *valgrind_root, pid_t pid, const char *arg);
/* Dumps pid's counts since its last dump or zeroing as part `part` of the
 * profile out (the file out.part, its name in path), and waits until the
 * file is complete. Returns 0, or -1 (logged). */
int cg__dump_part(const char *valgrind_root, pid_t pid, const char *out, int part, char *path, size_t len);
/* Removes /tmp/vgdb-pipe-*-PID-by-*: valgrind's gdb server leaves them
 * behind when it is killed. */
void cg__remove_vgdb_files(pid_t pid);

/* The per-case table, the NACK paragraph and the budget table. line: the
 * broker's version ("2.1.2"), which decides whether 2.1's budget applies. */
void cg__print_tables(const struct cg_case *cases, const struct cg_result *res, int n, uint64_t n0, uint64_t n1,
		const char *line);

#endif
