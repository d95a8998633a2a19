/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The saves suite's probe (see saves.h): a thread that, while the traffic
 * runs, samples the broker's memory and that of its children (the
 * plugin's savers, found in /proc/PID/task/PID/children: the broker is one
 * thread) every SAVES_PROBE_MS: VmRSS at every sample, Pss (smaps_rollup)
 * at every other one, since a forked saver shares its pages with the
 * broker and the sum of their RSS counts those twice. It can also watch a
 * file's presence: the database the broker's own autosave writes under a
 * temporary name. It runs on the load's CPU, which it takes a little of.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "saves.h"

#define SAVES_PROBE_MS 25
#define MAX_CHILDREN 8

struct saves_probe {
	pthread_t thread;
	pid_t pid;
	const char *watch_path;     /* borrowed from the caller, or NULL */
	atomic_bool stop;
	pid_t seen[MAX_CHILDREN];
	struct saves_mem mem;
};

static long rss_kib(pid_t pid)
{
	return broker__proc_kib(pid, "status", "VmRSS:");
}

long saves_probe__pss_kib(pid_t pid)
{
	return broker__proc_kib(pid, "smaps_rollup", "Pss:");
}

/* The broker's children now, at most max; returns how many. */
static int children_of(pid_t pid, pid_t *out, int max)
{
	char path[80];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	FILE *f = fopen(path, "r");
	if(f == NULL) return 0;
	int n = 0, c;
	while(n < max && fscanf(f, "%d", &c) == 1){
		out[n++] = (pid_t)c;
	}
	fclose(f);
	return n;
}

static void note_child(struct saves_probe *p, pid_t c)
{
	for(int i = 0; i < MAX_CHILDREN; i++){
		if(p->seen[i] == c) return;
		if(p->seen[i] == 0){
			p->seen[i] = c;
			p->mem.children++;
			return;
		}
	}
}

static void sample(struct saves_probe *p, bool with_pss)
{
	pid_t kids[MAX_CHILDREN];
	int nk = children_of(p->pid, kids, MAX_CHILDREN);
	long rss = rss_kib(p->pid), pss = with_pss ? saves_probe__pss_kib(p->pid) : -1;
	for(int i = 0; i < nk; i++){
		note_child(p, kids[i]);
		long r = rss_kib(kids[i]);
		if(rss >= 0 && r > 0) rss += r;
		long s = with_pss && pss >= 0 ? saves_probe__pss_kib(kids[i]) : -1;
		if(pss >= 0 && s > 0) pss += s;
	}
	if(rss > p->mem.peak_rss_kib) p->mem.peak_rss_kib = rss;
	if(pss > p->mem.peak_pss_kib) p->mem.peak_pss_kib = pss;
	p->mem.samples++;
}

static void *run(void *arg)
{
	struct saves_probe *p = arg;
	uint64_t file_since = 0;
	for(unsigned k = 0; !atomic_load(&p->stop); k++){
		sample(p, k % 2 == 0);
		if(p->watch_path){
			struct stat st;
			uint64_t now = bench__now_ns();
			if(stat(p->watch_path, &st) == 0){
				if(file_since == 0) file_since = now;
				double ms = (double)(now - file_since) / 1e6;
				if(ms > p->mem.longest_file_ms) p->mem.longest_file_ms = ms;
			}else{
				file_since = 0;
			}
		}
		bench__sleep_ms(SAVES_PROBE_MS);
	}
	return NULL;
}

int saves_probe__start(pid_t pid, const char *watch_path, struct saves_probe **out)
{
	struct saves_probe *p = calloc(1, sizeof(*p));
	if(p == NULL) return -1;
	p->pid = pid;
	p->watch_path = watch_path;
	p->mem.peak_rss_kib = -1;
	p->mem.peak_pss_kib = -1;
	int rc = pthread_create(&p->thread, NULL, run, p);
	if(rc){
		fprintf(stderr, "dlq_bench: saves: cannot start the probe: %s\n", strerror(rc));
		free(p);
		return -1;
	}
	*out = p;
	return 0;
}

void saves_probe__stop(struct saves_probe *p, struct saves_mem *mem)
{
	atomic_store(&p->stop, true);
	pthread_join(p->thread, NULL);
	*mem = p->mem;
	free(p);
}
