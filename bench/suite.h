/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What the throughput suite (suite.c) measures per cell and round, and the
 * tables made of it (report.c); and the growth, letters, deadlines, saves
 * and fleet suites.
 */
#ifndef DLQ_BENCH_SUITE_H
#define DLQ_BENCH_SUITE_H

#include "bench.h"

enum variant { V_BARE, V_UNTRACKED, V_TRACKED, V_STORM, NVAR };
enum lat_variant { L_BARE, L_UNTRACKED, L_TRACKED, NLAT };

struct cell {
	int qos;
	int pairs;
	bool ok;
	int rounds;                            /* completed */
	double offered;                        /* latency phases, msg/s */
	double thr[NVAR][BENCH_MAX_ROUNDS];    /* delivered/s; storm: NACKs handled/s */
	double us[NVAR][BENCH_MAX_ROUNDS];     /* broker CPU per message (storm: per NACK) */
	double util[NVAR][BENCH_MAX_ROUNDS];
	double foreign[NVAR][BENCH_MAX_ROUNDS]; /* cores used by other processes meanwhile */
	double storm_delivered[BENCH_MAX_ROUNDS];
	double storm_copies[BENCH_MAX_ROUNDS];
	double storm_dead[BENCH_MAX_ROUNDS];
	double p50[NLAT][BENCH_MAX_ROUNDS];
	double p99[NLAT][BENCH_MAX_ROUNDS];
	double lat_rate[NLAT][BENCH_MAX_ROUNDS];
	double lat_foreign[BENCH_MAX_ROUNDS];
	struct bench_samples lat[NLAT][BENCH_MAX_ROUNDS]; /* owned */
	uint64_t untagged;
	uint64_t unfinished;
};

/* A phase counts only if the broker was busy (closed loop) and little else
 * ran on the machine meanwhile; see report.c. */
#define REPORT_FOREIGN_MAX 0.15
#define REPORT_UTIL_MIN 0.90

/* Whether a --plugin-opt sets a state_ option (with or without its
 * plugin_opt_ prefix), which the durability and saves suites compare
 * themselves: if so, says that suite name is skipped (stderr) and prints
 * a section titled title saying why (durability.c). */
bool suite__skipped_for_state_opt(const struct bench_config *cfg, const char *name, const char *title);

/* Prints the throughput, latency and NACK-storm tables (Markdown). */
void report__throughput(const struct cell *cells, int ncells);

/* The growth suite (growth.c, issue 23): instructions per tracked message
 * and per NACK, memory, start and save times with 0 to 1,000,000 messages
 * kept NACKable, and one NACK's latency while 10,000 delayed retry copies
 * are pending. Prints its tables to stdout (Markdown), progress to stderr;
 * returns 0, or -1 if a broker or a phase failed. */
int suite__growth(const struct bench_config *cfg);

/* The dead-letter store suite (letters.c, issue 24): memory per kept dead
 * letter, listing them all through listDeadLetters, getDeadLetter, and the
 * state file's save and restart with 10,000 kept (--quick 1,000). Prints
 * its tables to stdout (Markdown), progress to stderr; returns 0, or -1 if
 * a broker or a phase failed. */
int suite__letters(const struct bench_config *cfg);

/* The acknowledgement deadlines suite (deadlines.c, issue 35), under
 * callgrind only: a tracked message with ack_timeout off and on (ACKed),
 * what an ACK costs the plugin, the same with 1,000 and 100,000 deliveries
 * held unsettled, and a tick's cost with none and with 1,000 of them
 * running out. Prints its tables to stdout (Markdown), progress to stderr;
 * returns 0, or -1 if a broker or a phase failed. */
int suite__deadlines(const struct bench_config *cfg);

/* The saves suite (saves.c, issue 36): what a client sees while the state
 * is saved, with 100,000 and 1,000,000 records kept (--quick 10,000): the
 * bare broker, the plugin without and with a state file (and with
 * state_save_on_change), and the broker's own autosave of as many queued
 * messages, each under the same steady traffic. Prints its table to stdout
 * (Markdown), progress to stderr; returns 0, or -1 if a broker or a phase
 * failed. */
int suite__saves(const struct bench_config *cfg);

/* The fleet suite (fleet.c, issue 39): three edges NACKing every original
 * into dead letters, bridged (MQTT v5, QoS 1) to a centre that is bare,
 * collecting, or collecting with its journal: letters per second at the
 * centre, its CPU per 1,000 letters, and the time from a NACK at an edge
 * to the letter at the centre. Prints its tables to stdout (Markdown),
 * progress to stderr; returns 0, or -1 if a broker or a phase failed. */
int suite__fleet(const struct bench_config *cfg);

#endif
