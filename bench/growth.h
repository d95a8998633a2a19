/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The growth suite's own declarations, shared by its three files: growth.c
 * (filling brokers, memory, start and save times, the tables),
 * growth_callgrind.c (instructions) and growth_latency.c (one NACK's
 * latency while delayed retry copies are pending). The saves suite
 * (saves.c) fills its brokers and state files with growth.c's functions
 * too.
 */
#ifndef DLQ_BENCH_GROWTH_H
#define DLQ_BENCH_GROWTH_H

#include <stddef.h>
#include <stdint.h>

#include "bench.h"
#include "callgrind.h"

#define GROWTH_MAX_SIZES 4
#define GROWTH_TIMING_RUNS 3
#define GROWTH_SAVE_INTERVAL "state_save_interval 1d"

enum gload { G_TRACKED, G_STORM, NGLOAD };

/* What is measured with one number of kept records. */
struct gsize {
	uint64_t n;
	bool filled;
	char state[256];             /* the file of n records */
	long long state_bytes;
	double fill_save_ms;         /* the filling broker's SIGTERM to exit */
	bool rss_ok;
	double plugin_kib, bare_kib; /* RSS growth over the n messages */
	long restored_kib;           /* RSS of a broker started from the file */
	int timed;
	double start_ms[GROWTH_TIMING_RUNS], save_ms[GROWTH_TIMING_RUNS];
	bool cg_ok[NGLOAD];
	double per[NGLOAD][NFN];     /* Ir per message (tracked) or per NACK (storm) */
};

/* A plugin broker's options here, and the buffers they point into. */
struct gbroker {
	struct broker_opts bo;
	char state_opt[320];
	const char *suite[3];
};

/* The options of every plugin broker here (growth.c): the state file, if
 * not NULL, and an interval save too long to happen. */
void growth__plugin_broker(const struct bench_config *cfg, const char *state_file, struct gbroker *g);
/* Fills gs->state, a file of gs->n records in dir: a plugin broker with
 * that state file receives gs->n tracked messages (QoS 1, 1→1) and is
 * stopped with SIGTERM, when the plugin saves it. Sets gs->plugin_kib (its
 * RSS growth over them), fill_save_ms, state_bytes and filled. Returns 0,
 * or -1 (logged) if the broker, the load or the file failed. */
int growth__fill_state(const struct bench_config *cfg, const char *dir, struct gsize *gs);
/* Passes n messages of kind (QoS 1, one publisher to one subscriber, in
 * count mode) through b, which the caller started; *kib gets b's RSS
 * growth over them (KiB), or -1 if it could not be read. Returns 0, or -1
 * (logged) if the load failed or a message was untagged or unfinished. */
int growth__pass_messages(const struct bench_config *cfg, struct broker *b, enum load_kind kind, uint64_t n,
		double *kib);
/* A fresh copy of gs's file as run (and no journal beside it), for a
 * broker to restore. Returns 0, or -1 (logged). */
int growth__fresh_state(const struct gsize *gs, const char *run);
/* Whether the broker's log says it restored n records: 0, or -1 (logged,
 * with the broker's log). */
int growth__restored_check(const struct broker *b, uint64_t n);
/* One broker under callgrind restored from run (a fresh copy of gs's
 * file), the tracked and storm workloads of cfg->callgrind_count and a
 * tenth of it; fills gs->per and gs->cg_ok. Profiles go in dir. Returns 0,
 * or -1 if the broker or a workload failed. */
int growth__callgrind(const struct bench_config *cfg, const char *dir, const char *run, struct gsize *gs);

/* One phase of NACK round trips: each publishes a tracked message, waits
 * for it, NACKs it without a delay and waits for its retry copy; the time
 * is from the NACK's publish to the copy's arrival. */
struct growth_latency {
	uint64_t pending;            /* delayed retry copies pending meanwhile */
	size_t nacks;                /* round trips measured */
	double p50_us, p99_us, max_us;
};

/* On a plugin broker without delayed copies: a phase of nacks round trips
 * (before), then `delayed` tracked messages NACKed with a delay of an hour,
 * each confirmed "retried" by the plugin's reply, then the same phase
 * again (after). One client (MQTT v5, QoS 1) does it all, so only one
 * message is in flight at a time. Returns 0, or -1 (logged to stderr) if
 * the client failed, a reply refused a NACK, or a wait timed out. */
int growth__nack_latency(const struct broker *b, uint64_t delayed, size_t nacks, struct growth_latency *before,
		struct growth_latency *after);

#endif
