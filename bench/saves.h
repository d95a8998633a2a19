/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The saves suite's own declarations (issue 36), shared by its four files:
 * saves.c (the brokers, their filling and the runs), saves_probe.c (a
 * thread sampling the broker's and its children's memory while the
 * traffic runs), saves_queue.c (the persistent session whose queue the
 * autosave broker keeps) and saves_report.c (the broker's log, latency
 * per second, the table). Not used outside the suite.
 */
#ifndef DLQ_BENCH_SAVES_H
#define DLQ_BENCH_SAVES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bench.h"

/* The brokers compared, each with the same steady traffic. */
enum saves_kind {
	SK_BARE,      /* no plugin, no persistence: the reference */
	SK_PLUGIN,    /* the plugin without a state file, holding N records */
	SK_STATE,     /* plugin_opt_state_file, restored from N records */
	SK_CHANGE,    /* the same and plugin_opt_state_save_on_change */
	SK_BATCHED,   /* the same and plugin_opt_state_journal_sync 100ms */
	SK_AUTOSAVE,  /* no plugin; the broker's persistence with N queued messages */
	NSAVES_KINDS
};

/* What the probe saw while it ran (saves_probe.c). KiB; -1: never read. */
struct saves_mem {
	long peak_rss_kib;     /* the broker's and its children's VmRSS summed, the highest sample */
	long peak_pss_kib;     /* their Pss (smaps_rollup) summed, the highest sample */
	int children;          /* children seen (the plugin's savers) */
	double longest_file_ms; /* the watched file's longest presence, sampled */
	int samples;
};

struct saves_probe;

/* Starts a thread that samples pid and its children every
 * SAVES_PROBE_MS until saves_probe__stop, and watch_path's presence if
 * not NULL. Returns 0 and the probe in *out, or -1 (logged). */
int saves_probe__start(pid_t pid, const char *watch_path, struct saves_probe **out);
/* Stops and frees the probe; its figures go to *mem. */
void saves_probe__stop(struct saves_probe *p, struct saves_mem *mem);
/* The Pss of pid (smaps_rollup) in KiB, or -1. */
long saves_probe__pss_kib(pid_t pid);

/* Connects a client with a persistent session (MQTT 3.1.1, clean session
 * false) to b, subscribes it to topic at QoS 1 and disconnects it, so
 * that the broker queues what is published there for it. Returns 0, or
 * -1 (logged) if it failed or timed out. */
int saves_queue__subscribe(const struct broker *b, const char *topic);

/* What the broker's log says between two offsets (saves_report.c). */
struct saves_log {
	int saves;             /* the plugin's background saves that ended */
	int failed;            /* "state file problem" lines */
	int autosaves;         /* the broker's own "Saving in-memory database" lines */
	double longest_ms;     /* the longest background save */
	double longest_fork_us; /* the longest pause of the broker for a save (rotation and fork) */
	double stop_save_ms;   /* the plugin's save at shutdown ("state saved to"), -1: none */
};

/* Reads path from byte from to byte to (-1: its end) into *log. */
void saves_log__scan(const char *path, long from, long to, struct saves_log *log);

/* One broker's run. */
struct saves_run {
	enum saves_kind kind;
	uint64_t n;
	bool ok;
	double start_ms;              /* fork to "running" */
	double stop_ms;               /* SIGTERM to exit, after the traffic */
	long steady_pss_kib, steady_rss_kib; /* before the traffic */
	struct saves_mem mem;
	struct saves_log log;
	double cpu_s, children_cpu_s; /* over the traffic: the broker's, and its savers' */
	double delivered_per_s;
	size_t samples;
	int windows;
	double worst_max_ms, worst_p999_ms; /* of the 1-second windows */
	double p50_us, p99_us;              /* all samples */
	uint64_t unfinished;
};

/* Latency per 1-second window of arrival from res (target 0, recorded
 * with record_arrival) into r. Returns 0, or -1 when out of memory. */
int saves_report__windows(const struct load_result *res, struct saves_run *r);
/* Prints the table of runs (Markdown), rows in the order given. */
void saves_report__table(const struct bench_config *cfg, const struct saves_run *runs, int nruns, double interval_s,
		double traffic_s, double rate);

#endif
