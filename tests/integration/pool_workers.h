/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The supervised worker group of the pool suite (test_pool.c): POOL_MEMBERS
 * processes of examples/python/pool_worker.py or examples/node/pool_worker.js
 * on one shared subscription, each with a fixed client id, each started
 * again with the same id POOL_RESTART_PAUSE_MS after it exits, as a service
 * manager would; and what they print, parsed into one list of events: every
 * "received" and "processed" line with its job, member, delivery-count,
 * dlq-id, and whether it came before or after the broker's restart. Nothing
 * runs in the background: pool_tick supervises and reads, and every wait of
 * the suite calls it, so a worker's exit is seen within a tick.
 *
 * Jobs are named by their payload, "good-N", "poison-N" or "crash-N", the
 * kind following from N (pool_job_kind), so that every line names its job.
 */
#ifndef DLQ_IT_POOL_WORKERS_H
#define DLQ_IT_POOL_WORKERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"
#include "proc.h"

#define POOL_MEMBERS 4
#define POOL_MAX_JOBS 1000
#define POOL_MAX_EVENTS 16384
#define POOL_GROUP "workers"
#define POOL_FILTER "jobs/#"
#define POOL_SUBSCRIPTION "$share/" POOL_GROUP "/" POOL_FILTER
/* How long a member stays down after its process exited. */
#define POOL_RESTART_PAUSE_MS 200
/* The workers' exit status on a crash job. */
#define POOL_CRASH_STATUS 3

enum pool_lang { POOL_PYTHON, POOL_NODE, POOL_LANGS };

enum pool_kind { POOL_GOOD, POOL_POISON, POOL_CRASH, POOL_KINDS };

extern const char *const pool_lang_names[POOL_LANGS];
extern const char *const pool_kind_names[POOL_KINDS];

/* Job i's kind: 8 in 10 good, 1 in 10 poison, 1 in 10 crash, interleaved. */
enum pool_kind pool_job_kind(unsigned i);

/* Job i's payload, "<kind>-<i>", into buf. */
void pool_job_payload(unsigned i, char *buf, size_t size);

/* The job a payload names, or -1 if it names none of the first njobs. */
int pool_job_parse(const char *payload, unsigned njobs);

struct pool_event {
	unsigned job;
	unsigned member;
	bool processed;         /* a "processed" line; otherwise "received" */
	int delivery_count;     /* the delivery-count the worker saw, -1: none */
	char dlq_id[DLQ_ID_LEN + 1];
	unsigned phase;         /* pool.phase when it was read: 0 before the restart */
};

struct pool_member {
	char id[32];
	struct proc *p;         /* NULL while it is down */
	size_t out_used;        /* bytes of p's stdout and stderr parsed */
	size_t err_used;
	uint64_t start_at;      /* while down: when to start it again */
	bool frozen;            /* stopped by pool_freeze */
	unsigned starts;
	unsigned subscribed;    /* "subscribed to" lines, all its processes */
	int last_received;      /* job of its last "received" line, -1 */
};

struct pool {
	enum pool_lang lang;
	int port;
	unsigned njobs;
	bool supervising;       /* start members again when they exit */
	bool holding;           /* but not yet: see pool_hold */
	unsigned phase;
	struct pool_member members[POOL_MEMBERS];
	struct pool_event events[POOL_MAX_EVENTS];
	size_t nevents;
	unsigned crash_seq;     /* "received crash-" lines read so far */
	int last_crash;         /* the job of the latest of them, -1 */
	unsigned crashes;       /* exits with POOL_CRASH_STATUS after "received crash-" */
	unsigned bad_exits;     /* any other exit, or a failed SIGTERM */
	unsigned bad_lines;     /* stdout lines that are none of the two */
	unsigned notes;         /* stderr lines other than connection news */
	uint64_t progress_ms;   /* when an event was last read */
};

/* Starts the group of lang against the broker's TCP port, one member per
 * client id worker-1 ... worker-POOL_MEMBERS, and waits until each has
 * subscribed. */
void pool_start(struct pool *pl, enum pool_lang lang, int port, unsigned njobs);

/* Reads what the members wrote, notes those that exited, and starts those
 * whose pause is over. Never waits. */
void pool_tick(struct pool *pl);

/* Ticks until every member has subscribed more often than since[] says
 * (pool_subscriptions), or HARNESS_WAIT_MS passed; returns whether they did. */
bool pool_wait_subscribed(struct pool *pl, const unsigned since[POOL_MEMBERS]);

/* Each member's "subscribed to" count so far, into since[]. */
void pool_subscriptions(const struct pool *pl, unsigned since[POOL_MEMBERS]);

/* With on, a member that exits stays down; with off, members that are
 * down start again after the usual pause. */
void pool_hold(struct pool *pl, bool on);

/* Stops every running member (SIGSTOP) and holds those that are down;
 * pool_thaw lets them all go on (SIGCONT, and starts after the pause). */
void pool_freeze(struct pool *pl);
void pool_thaw(struct pool *pl);

/* Stops supervising and ends every running member with SIGTERM (status 0
 * expected), reading what it wrote last. */
void pool_stop(struct pool *pl);

#endif
