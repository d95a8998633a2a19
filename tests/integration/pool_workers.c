/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The pool suite's supervised worker group (see pool_workers.h): starting
 * the example workers as processes, starting them again when they exit,
 * and parsing their lines into events.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool_workers.h"

const char *const pool_lang_names[POOL_LANGS] = { "python", "node" };
const char *const pool_kind_names[POOL_KINDS] = { "good", "poison", "crash" };

enum pool_kind pool_job_kind(unsigned i)
{
	switch(i % 10){
		case 3: return POOL_POISON;
		case 7: return POOL_CRASH;
		default: return POOL_GOOD;
	}
}

void pool_job_payload(unsigned i, char *buf, size_t size)
{
	snprintf(buf, size, "%s-%03u", pool_kind_names[pool_job_kind(i)], i);
}

int pool_job_parse(const char *payload, unsigned njobs)
{
	const char *dash = strrchr(payload, '-');
	if(!dash || dash[1] < '0' || dash[1] > '9'){
		return -1;
	}
	char *end;
	unsigned long i = strtoul(dash + 1, &end, 10);
	if(*end != '\0' || i >= njobs){
		return -1;
	}
	char want[64];
	pool_job_payload((unsigned)i, want, sizeof(want));
	return strcmp(want, payload) ? -1 : (int)i;
}

/* Starts member k's process, as the worker's usage line says. */
static void spawn(struct pool *pl, unsigned k)
{
	struct pool_member *m = &pl->members[k];
	char port[16], script[4096];
	const char *argv[16];
	size_t n = 0;

	snprintf(port, sizeof(port), "%d", pl->port);
	proc_example_command(pl->lang == POOL_PYTHON ? "python/pool_worker.py" : "node/pool_worker.js", script,
			sizeof(script), argv, &n);
	argv[n++] = "--host";
	argv[n++] = "127.0.0.1";
	argv[n++] = "--port";
	argv[n++] = port;
	argv[n++] = "--id";
	argv[n++] = m->id;
	argv[n++] = "--group";
	argv[n++] = POOL_GROUP;
	argv[n++] = "--filter";
	argv[n++] = POOL_FILTER;
	argv[n] = NULL;
	m->p = proc_spawn(argv);
	m->out_used = m->err_used = 0;
	m->starts++;
}

/* One stdout line of member k: "received PAYLOAD delivery-count=N|- dlq-id=ID|-"
 * or "processed PAYLOAD". */
static void stdout_line(struct pool *pl, unsigned k, char *line)
{
	struct pool_event e = { .member = k, .delivery_count = -1, .phase = pl->phase };
	char payload[64], count[16], id[DLQ_ID_LEN + 1];
	int job = -1;

	if(sscanf(line, "received %63s delivery-count=%15s dlq-id=%16s", payload, count, id) == 3){
		job = pool_job_parse(payload, pl->njobs);
		if(strcmp(count, "-")){
			e.delivery_count = atoi(count);
		}
		snprintf(e.dlq_id, sizeof(e.dlq_id), "%s", strcmp(id, "-") ? id : "");
	}else if(sscanf(line, "processed %63s", payload) == 1){
		job = pool_job_parse(payload, pl->njobs);
		e.processed = true;
	}
	if(job < 0 || pl->nevents == POOL_MAX_EVENTS){
		fprintf(stderr, "pool: %s wrote an unexpected line: %s\n", pl->members[k].id, line);
		pl->bad_lines++;
		return;
	}
	e.job = (unsigned)job;
	pl->events[pl->nevents++] = e;
	pl->progress_ms = it_now_ms();
	if(!e.processed){
		pl->members[k].last_received = job;
		if(pool_job_kind(e.job) == POOL_CRASH){
			pl->crash_seq++;
			pl->last_crash = job;
		}
	}
}

/* One stderr line: subscriptions are counted, connection news is quiet,
 * anything else (a refused NACK, a traceback) is passed on. */
static void stderr_line(struct pool *pl, unsigned k, char *line)
{
	static const char *const quiet[] = {
		"connected (", "connection lost", "cannot connect", "connection error",
		"cannot subscribe: Connection closed", /* MQTT.js: the connection ended before the SUBACK */
	};
	if(strstr(line, "subscribed to " POOL_SUBSCRIPTION)){
		pl->members[k].subscribed++;
		return;
	}
	for(size_t i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++){
		if(strstr(line, quiet[i])){
			return;
		}
	}
	fprintf(stderr, "pool: %s said: %s\n", pl->members[k].id, line);
	pl->notes++;
}

/* Parses the complete lines of text after *used. */
static void read_lines(struct pool *pl, unsigned k, const char *text, size_t *used,
		void (*handle)(struct pool *, unsigned, char *))
{
	for(;;){
		const char *s = text + *used;
		const char *eol = strchr(s, '\n');
		if(!eol){
			return;
		}
		char line[1024];
		size_t len = (size_t)(eol - s) < sizeof(line) - 1 ? (size_t)(eol - s) : sizeof(line) - 1;
		memcpy(line, s, len);
		line[len] = '\0';
		*used += (size_t)(eol - s) + 1;
		handle(pl, k, line);
	}
}

static void read_member(struct pool *pl, unsigned k)
{
	struct pool_member *m = &pl->members[k];
	read_lines(pl, k, proc_out(m->p), &m->out_used, stdout_line);
	read_lines(pl, k, proc_err(m->p), &m->err_used, stderr_line);
}

/* Member k's process ended with status st: a crash is exit status
 * POOL_CRASH_STATUS right after a "received crash-" line. */
static void note_exit(struct pool *pl, unsigned k, int st, bool stopping)
{
	struct pool_member *m = &pl->members[k];
	bool crash = st == POOL_CRASH_STATUS && m->last_received >= 0
			&& pool_job_kind((unsigned)m->last_received) == POOL_CRASH;
	if(crash && !stopping){
		pl->crashes++;
	}else if(!(stopping && st == 0)){
		pl->bad_exits++;
		fprintf(stderr, "pool: %s exited with status %d%s\n", m->id, st, stopping ? " on SIGTERM" : "");
		proc_dump(m->p);
	}
	proc_free(m->p);
	m->p = NULL;
	m->last_received = -1;
	m->start_at = it_now_ms() + POOL_RESTART_PAUSE_MS;
}

void pool_tick(struct pool *pl)
{
	for(unsigned k = 0; k < POOL_MEMBERS; k++){
		struct pool_member *m = &pl->members[k];
		if(m->p){
			bool ended = proc_ended(m->p);
			int st = 0;
			if(ended){
				st = proc_wait(m->p, HARNESS_WAIT_MS); /* reads what is left in the pipes */
			}else{
				proc_pump(m->p);
			}
			read_member(pl, k);
			if(ended){
				note_exit(pl, k, st, false);
			}
		}else if(pl->supervising && !pl->holding && it_now_ms() >= m->start_at){
			spawn(pl, k);
		}
	}
}

void pool_subscriptions(const struct pool *pl, unsigned since[POOL_MEMBERS])
{
	for(unsigned k = 0; k < POOL_MEMBERS; k++){
		since[k] = pl->members[k].subscribed;
	}
}

bool pool_wait_subscribed(struct pool *pl, const unsigned since[POOL_MEMBERS])
{
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	for(;;){
		pool_tick(pl);
		unsigned done = 0;
		for(unsigned k = 0; k < POOL_MEMBERS; k++){
			done += pl->members[k].subscribed > since[k];
		}
		if(done == POOL_MEMBERS){
			return true;
		}
		if(it_now_ms() > deadline){
			for(unsigned k = 0; k < POOL_MEMBERS; k++){
				if(pl->members[k].p && pl->members[k].subscribed <= since[k]){
					proc_dump(pl->members[k].p);
				}
			}
			return false;
		}
		it_sleep_ms(10);
	}
}

void pool_start(struct pool *pl, enum pool_lang lang, int port, unsigned njobs)
{
	ck_assert_uint_le(njobs, POOL_MAX_JOBS);
	memset(pl, 0, sizeof(*pl));
	pl->lang = lang;
	pl->port = port;
	pl->njobs = njobs;
	pl->last_crash = -1;
	pl->supervising = true;
	for(unsigned k = 0; k < POOL_MEMBERS; k++){
		snprintf(pl->members[k].id, sizeof(pl->members[k].id), "worker-%u", k + 1);
		pl->members[k].last_received = -1;
	}
	unsigned none[POOL_MEMBERS] = { 0 };
	ck_assert_msg(pool_wait_subscribed(pl, none), "the %s workers did not all subscribe to %s",
			pool_lang_names[lang], POOL_SUBSCRIPTION);
}

void pool_hold(struct pool *pl, bool on)
{
	pl->holding = on;
	for(unsigned k = 0; !on && k < POOL_MEMBERS; k++){
		pl->members[k].start_at = it_now_ms() + POOL_RESTART_PAUSE_MS;
	}
}

void pool_freeze(struct pool *pl)
{
	pool_hold(pl, true);
	for(unsigned k = 0; k < POOL_MEMBERS; k++){
		struct pool_member *m = &pl->members[k];
		if(m->p && !proc_ended(m->p)){
			proc_kill(m->p, SIGSTOP);
			m->frozen = true;
		}
	}
}

void pool_thaw(struct pool *pl)
{
	for(unsigned k = 0; k < POOL_MEMBERS; k++){
		struct pool_member *m = &pl->members[k];
		if(m->frozen && m->p){
			proc_kill(m->p, SIGCONT);
		}
		m->frozen = false;
	}
	pool_hold(pl, false);
}

void pool_stop(struct pool *pl)
{
	pool_tick(pl);
	pl->supervising = false;
	for(unsigned k = 0; k < POOL_MEMBERS; k++){
		struct pool_member *m = &pl->members[k];
		if(!m->p){
			continue;
		}
		if(proc_ended(m->p)){
			/* It ended on its own before the SIGTERM: as any exit. */
			int st = proc_wait(m->p, HARNESS_WAIT_MS);
			read_member(pl, k);
			note_exit(pl, k, st, false);
			continue;
		}
		proc_kill(m->p, SIGTERM);
		int st = proc_wait(m->p, HARNESS_WAIT_MS);
		read_member(pl, k);
		note_exit(pl, k, st, true);
	}
}
