/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The saves suite's figures (see saves.h): what the broker's log says of
 * the saves (the plugin's background saves, its save at shutdown, its
 * failures, the broker's own autosaves), end-to-end latency per second of
 * arrival, and the table.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "saves.h"

#define SAVED_BG "saved in the background in "
#define SAVED_STOP "state saved to "
#define SAVE_PROBLEM "state file problem"
#define AUTOSAVE "Saving in-memory database"

static void scan_line(const char *line, struct saves_log *log)
{
	const char *p;
	double ms, us;
	/* DLQ_BENCH_SAVES_TRACE: each save's line, with the broker's time
	 * stamp, beside the windows (saves_report__windows). */
	if(getenv("DLQ_BENCH_SAVES_TRACE") && (strstr(line, SAVED_BG) || strstr(line, AUTOSAVE))){
		fprintf(stderr, "saves: log: %s", line);
	}
	if((p = strstr(line, SAVED_BG)) != NULL){
		if(sscanf(p + strlen(SAVED_BG), "%lf ms (the broker paused %lf us", &ms, &us) == 2){
			log->saves++;
			if(ms > log->longest_ms) log->longest_ms = ms;
			if(us > log->longest_fork_us) log->longest_fork_us = us;
		}
	}else if(strstr(line, SAVED_STOP) && (p = strstr(line, ", in ")) != NULL){
		/* The last ", in N ms": the file's name comes before it. */
		for(const char *q; (q = strstr(p + 1, ", in ")) != NULL;){
			p = q;
		}
		if(sscanf(p, ", in %lf ms", &ms) == 1) log->stop_save_ms = ms;
	}else if(strstr(line, SAVE_PROBLEM)){
		log->failed++;
	}else if(strstr(line, AUTOSAVE)){
		log->autosaves++;
	}
}

void saves_log__scan(const char *path, long from, long to, struct saves_log *log)
{
	char line[2048];
	memset(log, 0, sizeof(*log));
	log->stop_save_ms = -1;
	FILE *f = fopen(path, "r");
	if(f == NULL) return;
	if(from > 0) fseek(f, from, SEEK_SET);
	while((to < 0 || ftell(f) < to) && fgets(line, sizeof(line), f)){
		scan_line(line, log);
	}
	fclose(f);
}

int saves_report__windows(const struct load_result *res, struct saves_run *r)
{
	const uint64_t *lat = res->lat[0].v, *at = res->arrived[0].v;
	size_t n = res->lat[0].n;
	r->samples = n;
	r->p50_us = res->p50_us[0];
	r->p99_us = res->p99_us[0];
	if(n == 0 || at == NULL) return 0;
	uint64_t *win = malloc(n * sizeof(*win));
	if(win == NULL) return -1;
	/* DLQ_BENCH_SAVES_TRACE: each window whose max passes 20 ms, on
	 * stderr (when it came, in s from the start of the measure). */
	const bool trace = getenv("DLQ_BENCH_SAVES_TRACE") != NULL;
	/* The windows' wall-clock seconds, to read beside the log's stamps. */
	struct timespec mono, wall;
	clock_gettime(CLOCK_MONOTONIC, &mono);
	clock_gettime(CLOCK_REALTIME, &wall);
	double wall0 = (double)wall.tv_sec + wall.tv_nsec / 1e9
			- ((double)mono.tv_sec + mono.tv_nsec / 1e9 - (double)res->measure_start_ns / 1e9);
	/* The samples are in the order they arrived: a window is a run of them. */
	for(size_t i = 0; i < n;){
		uint64_t w = (at[i] - res->measure_start_ns) / 1000000000u;
		size_t k = 0;
		uint64_t max = 0;
		for(; i < n && (at[i] - res->measure_start_ns) / 1000000000u == w; i++){
			win[k++] = lat[i];
			if(lat[i] > max) max = lat[i];
		}
		double p999 = stats__percentile_u64(win, k, 99.9) / 1e6;
		if(trace && max > 20000000u){
			fprintf(stderr, "saves: window %llu s (%.0f): %zu samples, max %.1f ms, p99.9 %.1f ms\n", (unsigned long long)w,
					wall0 + (double)w, k, (double)max / 1e6, p999);
		}
		r->windows++;
		if((double)max / 1e6 > r->worst_max_ms) r->worst_max_ms = (double)max / 1e6;
		if(p999 > r->worst_p999_ms) r->worst_p999_ms = p999;
	}
	free(win);
	return 0;
}

static const char *const kind_names[NSAVES_KINDS] = {
	"bare", "plugin, no state file", "plugin, state_file", "plugin, state_file + save_on_change",
	"plugin, save_on_change + journal_sync 100ms",
	"bare, persistence (autosave)",
};

static double mib(long kib)
{
	return kib >= 0 ? (double)kib / 1024.0 : 0;
}

/* The save columns of a run: count, longest, pause (rotation + fork), at shutdown. */
static void save_cells(const struct saves_run *r, char *count, char *longest, char *fork, char *stop, size_t len)
{
	snprintf(count, len, "–");
	snprintf(longest, len, "–");
	snprintf(fork, len, "–");
	snprintf(stop, len, "%.0f", r->stop_ms);
	if(r->kind == SK_STATE || r->kind == SK_CHANGE || r->kind == SK_BATCHED){
		snprintf(count, len, "%d%s", r->log.saves, r->log.failed ? " (failed!)" : "");
		if(r->log.saves){
			snprintf(longest, len, "%.0f", r->log.longest_ms);
			snprintf(fork, len, "%.0f", r->log.longest_fork_us);
		}
		if(r->log.stop_save_ms >= 0) snprintf(stop, len, "%.0f (save %.0f)", r->stop_ms, r->log.stop_save_ms);
	}else if(r->kind == SK_AUTOSAVE){
		snprintf(count, len, "%d", r->log.autosaves);
		if(r->mem.longest_file_ms > 0) snprintf(longest, len, "≈%.0f", r->mem.longest_file_ms);
		else snprintf(longest, len, "< 25");
		snprintf(fork, len, "no fork");
	}
}

void saves_report__table(const struct bench_config *cfg, const struct saves_run *runs, int nruns, double interval_s,
		double traffic_s, double rate)
{
	printf("\n#### What a client sees while the state is saved (%s; QoS 1, 1→1, %d B, %.0f msg/s for %.0f s; "
			"saves every %.0f s)\n\n", cfg->broker_version[0] ? cfg->broker_version : "broker version unknown",
			BENCH_PAYLOAD, rate, traffic_s, interval_s);
	printf("| broker | kept N | start, ms | saves in the run | longest save, ms | longest pause for a save (rotation + fork), µs "
			"| worst 1-s window: max, ms | worst 1-s window: p99.9, ms | p50 / p99, µs | broker CPU, s "
			"| savers' CPU, s | before: Pss / RSS, MiB | peak Pss broker + savers, MiB | peak RSS sum, MiB | stop, ms |\n"
			"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	for(int i = 0; i < nruns; i++){
		const struct saves_run *r = &runs[i];
		if(!r->ok){
			printf("| %s | %llu | failed | | | | | | | | | | | | |\n", kind_names[r->kind], (unsigned long long)r->n);
			continue;
		}
		char count[32], longest[32], fork[32], stop[48];
		save_cells(r, count, longest, fork, stop, sizeof(count));
		printf("| %s | %llu | %.0f | %s | %s | %s | %.1f | %.1f | %.0f / %.0f | %.2f | %.2f | %.1f / %.1f | %.1f | %.1f "
				"| %s |\n", kind_names[r->kind], (unsigned long long)r->n, r->start_ms, count, longest, fork, r->worst_max_ms,
				r->worst_p999_ms, r->p50_us, r->p99_us, r->cpu_s, r->children_cpu_s, mib(r->steady_pss_kib),
				mib(r->steady_rss_kib), mib(r->mem.peak_pss_kib), mib(r->mem.peak_rss_kib), stop);
	}
	for(int i = 0; i < nruns; i++){
		const struct saves_run *r = &runs[i];
		if(r->ok && (r->delivered_per_s < rate * 0.95 || r->unfinished)){
			printf("\n%s, %llu kept: %.0f msg/s delivered of the %.0f offered, %llu still undelivered 10 s after the traffic "
					"ended.\n", kind_names[r->kind], (unsigned long long)r->n, r->delivered_per_s, rate,
					(unsigned long long)r->unfinished);
		}
	}
	printf("\nKept N: the records the plugin keeps, or the messages queued for the autosave broker's persistent "
			"session; the bare broker's row is the reference of the same run, holding nothing. "
			"Latency: publish to arrival at the subscriber, per 1-second window of arrival; the worst window's max "
			"and p99.9, and p50 / p99 of all samples. A paused broker also holds the publisher back (at most 900 in "
			"flight, and a publisher late by 100 ms starts again from now), so a pause shows as the max of its "
			"window, not as many late messages. Saves: the plugin's \"saved in the background\" log lines in the "
			"run, the longest, and the longest pause of the broker for one (its own figure: the journal's rotation, "
			"with save_on_change, and the fork); the broker's autosave logs no duration: ≈ is how long its "
			"mosquitto.db.new existed, sampled every 25 ms. Savers' CPU: the children the broker reaped in the run "
			"(cutime + cstime). Pss: broker + children (smaps_rollup, every 50 ms); RSS sum counts pages a saver "
			"shares twice. Start: fork to \"running\"; the plugin's includes restoring N records from its state "
			"file (a start from a sound file writes none), the autosave broker's restoring its database of N queued messages. Stop: SIGTERM to "
			"exit, with the plugin's save at shutdown.\n");
}
