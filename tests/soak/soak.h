/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The soak (issue 7): mixed traffic through the real broker with the
 * plugin for a while, with random NACKs and subscriber crashes, then an
 * account of every message published. Shared declarations of its files:
 * soak.c (options, the broker, the poll loop, the phases), publisher.c,
 * worker.c, inspector.c and status.c (the clients), ledger.c (what happened
 * to each message, and the tally), fpset.c (a set of 64-bit fingerprints).
 *
 * One thread runs every client on one poll loop (mqtt.h). A message is
 * numbered by its publisher ("seq N" at the start of its payload), and
 * everything that happens to it is recorded in its seq_rec: sent,
 * acknowledged by the broker, delivered to a worker, processed, NACKed,
 * crashed on, dead-lettered.
 */
#ifndef DLQ_SOAK_H
#define DLQ_SOAK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mqtt.h"

/* Topics. Even sequence numbers go to the delivery-topic policy, odd ones
 * to the fixed retry topic policy; <n> is the publisher's index. */
#define SOAK_TOPIC_DIRECT "soak/direct/"      /* + <n> */
#define SOAK_TOPIC_FIXED "soak/fixed/"        /* + <n> */
#define SOAK_FILTER_DIRECT "soak/direct/+"
#define SOAK_FILTER_FIXED "soak/fixed/+"
#define SOAK_RETRY_TOPIC "soak/retry/fixed"
#define SOAK_DEAD_DIRECT "dead/direct"
#define SOAK_DEAD_FIXED "dead/fixed"
#define SOAK_SHARE "$share/soak/"
#define SOAK_MAX_ATTEMPTS 3
#define SOAK_PAYLOAD_PREFIX "seq "

#define SOAK_MAX_WORKERS 64
#define SOAK_MAX_PUBLISHERS 16

struct soak_cfg {
	const char *plugin;
	const char *mosquitto;
	double duration_s;         /* publishing time */
	double rate;               /* offered msg/s, all publishers together */
	int publishers;
	int workers;
	unsigned inflight;         /* a worker's receive maximum */
	unsigned pub_window;       /* a publisher's unacknowledged messages at most */
	double p_nack;             /* per delivery */
	double p_crash;            /* per delivery */
	unsigned poison_nack;      /* every Nth message is always NACKed (0: none) */
	unsigned poison_crash;     /* every Nth message always crashes its worker (0: none) */
	unsigned reconnect_min_ms, reconnect_max_ms; /* a crashed worker's pause */
	double restart_at;         /* fraction of the duration; < 0: no restart */
	double settle_timeout_s;
	unsigned quiet_ms;         /* settled: nothing delivered for this long */
	size_t payload_len;
	uint64_t seed;
	bool keep;                 /* keep the broker's directory */
	bool share_retry;          /* the fixed retry topic in the $share group too */
	const char *trace;         /* a file for every event, or NULL */
	bool log_all;              /* the broker logs every packet */
	const char *nack_window, *max_pending, *save_interval; /* plugin options */
	const char *retry_delay_direct, *retry_delay_fixed;
};

/* ---- a set of 64-bit fingerprints (fpset.c) ---- */

struct fpset {
	uint64_t *slots;
	size_t cap, count;
};

uint64_t fp_hash(uint64_t seed, const void *data, size_t len);
/* Adds fp; returns false if it was already there. */
bool fpset_add(struct fpset *s, uint64_t fp);
bool fpset_has(const struct fpset *s, uint64_t fp);
void fpset_free(struct fpset *s);

/* ---- what happened to each message (ledger.c) ---- */

enum seq_flag {
	SEQ_RESENT = 1,            /* the publisher sent it again after a reconnect */
	SEQ_SAME_PROCESSED = 2,    /* a delivery (a dlq-id) already processed came again */
	SEQ_DUP_SEEN = 4,          /* a delivery of it carried DUP (a redelivery) */
	SEQ_BEFORE_RESTART = 8,    /* something happened to it before the broker restart */
	SEQ_AFTER_RESTART = 16,    /* and after it */
	SEQ_NACK_REFUSED = 32,     /* a NACK of it was refused (not "already NACKed") */
	SEQ_CRASH_AFTER_NACK = 64, /* its worker crashed while its NACK awaited PUBACK */
	SEQ_UNTAGGED = 128,        /* delivered without a dlq-id */
};

/* Why a dead letter was made, from its dead-letter-reason. */
enum dead_kind {
	DEAD_NACKED = 1,           /* the last attempt was NACKed */
	DEAD_DIVERTED = 2,         /* redelivery tracking: delivered max_attempts times without PUBACK */
	DEAD_LEFT = 4,             /* the subscriber of a retry copy had no session */
	DEAD_RESTART = 8,          /* restored after a restart with no session to go to */
	DEAD_OTHER = 16,
};

struct seq_rec {
	uint8_t sent;              /* PUBLISHes of it (resends included) */
	uint8_t acked;             /* PUBACKs the publisher got */
	uint8_t deliveries;        /* to workers: originals, copies, redeliveries */
	uint8_t processed;         /* PUBACKed after processing */
	uint8_t nacks;             /* NACKs the broker acknowledged */
	uint8_t crashes;           /* workers that crashed on it */
	uint8_t dead;              /* distinct dead letters */
	uint8_t dead_kinds;        /* enum dead_kind bits */
	uint8_t max_attempt;       /* highest retry-count + 1 of a delivery */
	uint8_t processed_attempt; /* retry-count + 1 of the delivery processed (the last one) */
	uint8_t dead_retry_count;  /* retry-count of the (last) dead letter */
	uint8_t flags;             /* enum seq_flag */
};

/* Counts over the whole run. */
struct soak_counts {
	uint64_t published, resent, pub_acked, pub_refused;
	uint64_t deliveries, copies, redeliveries, untagged;
	uint64_t processed, nacks_sent, nacks_acked, crashes, redelivered_after_nack;
	uint64_t nack_already, nack_refused_other;
	uint64_t dead_letters, dead_redelivered;
	uint64_t corrupt, unknown_seq;
	uint64_t worker_reconnects, broker_closes, pub_reconnects, inspector_reconnects;
	uint64_t dropped_out;      /* bytes a crash discarded before they were written */
	uint64_t replies_other;    /* control replies that were not NACK refusals */
};

struct ledger {
	struct seq_rec *recs;
	size_t n, cap;             /* sequence numbers 0 .. n-1 were handed out */
	struct soak_counts c;
	struct fpset processed_ids;  /* dlq-ids processed */
	struct fpset dead_seen;      /* dead letters, by origin-id, retry-count, client, time */
	bool restarted;             /* the broker restart happened */
	char refusal_sample[256];   /* the first refusal other than "already NACKed" */
};

/* A new sequence number, its record zeroed. */
uint32_t ledger__next(struct ledger *l);
/* The record of seq, or NULL if it was never handed out. */
struct seq_rec *ledger__rec(struct ledger *l, uint64_t seq);
/* Marks the record as touched before or after the restart. */
void ledger__touch(struct ledger *l, struct seq_rec *r);
/* Parses "seq N ..." and checks the padding; returns the record or NULL
 * (counted as corrupt or unknown). */
struct seq_rec *ledger__from_payload(struct ledger *l, const unsigned char *payload, size_t len,
		size_t want_len, uint64_t *seq);

/* The plugin's counters and gauges, from getStatus. */
struct plugin_status {
	bool valid;
	double tracked, untracked_full, nacks, nacks_refused, retry_copies, delayed_copies, dead_letters,
			publish_failures, expired, evicted, redeliveries, diverted, unknown_ids;
	double records, ledger_bytes, pending, delayed, owed_bytes;
};

/* Prints the tally and returns the number of messages unaccounted for. */
struct tally_context {
	const struct soak_cfg *cfg;
	const struct plugin_status *final;     /* the last getStatus */
	const struct plugin_status *summed;    /* counters summed over broker runs */
	double publish_s;                      /* how long publishing lasted */
	double total_s;                        /* the whole run */
	uint64_t log_dead_lines;               /* "dead-lettered message" lines in the broker's log */
	uint64_t log_recount_lines;            /* "recounts its in-flight window" lines */
	long dropped_sys;                      /* $SYS/broker/publish/messages/dropped, or -1 */
	double broker_cpu_s;
	long broker_rss_kib;
	int restarts;
	double restart_stop_ms;
	double hold_ms;                        /* publishing held after the restart */
	uint64_t sweep_deliveries;             /* arrived only after the final reconnections */
	uint64_t sweep_dead_letters;
	bool settled;
};
uint64_t ledger__tally(const struct ledger *l, const struct tally_context *t);

/* ---- the clients ---- */

/* Everything the clients share: the configuration, the ledger, the clock. */
struct soak {
	const struct soak_cfg *cfg;
	const char *socket_path;
	struct ledger ledger;
	uint64_t now_ns;            /* the loop's clock, set once per pass */
	uint64_t rng;
	bool publishing;
	/* After a broker restart, nothing is published (nor sent again) until
	 * every worker has subscribed anew: see worker.c. */
	bool hold_publishing;
	uint64_t last_activity_ns;  /* the last delivery, dead letter or NACK */
	struct fpset nacked;        /* (worker, dlq-id) whose NACK was acknowledged */
	FILE *trace;                /* --trace: every event, one line each; or NULL */
	uint64_t start_ns;
	long sys_dropped;           /* the broker's $SYS dropped count, -1 until seen */
};

double soak__random(struct soak *s);          /* uniform in [0, 1) */
/* With --trace, one line "<ms> <what>" to the trace file. */
void soak__trace(struct soak *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
uint64_t soak__ms_to_ns(unsigned ms);

struct publisher;
struct worker;
struct inspector;
struct status_client;

struct publisher *publisher__new(struct soak *s, int index);
/* Publishes what the pace and the window allow; returns ns until the next
 * one is due (0: at once). */
uint64_t publisher__step(struct publisher *p);
uint64_t publisher__inflight(const struct publisher *p);
struct mq_conn *publisher__conn(struct publisher *p);
void publisher__free(struct publisher *p);

struct worker *worker__new(struct soak *s, int index);
/* Reconnects a worker whose pause is over; returns ns until it is due. */
uint64_t worker__step(struct worker *w);
/* Connected, with its subscriptions, and no NACK awaiting its PUBACK. */
bool worker__ready(const struct worker *w);
/* When its latest SUBACK came (0: never). */
uint64_t worker__subscribed_ns(const struct worker *w);
/* Disconnects cleanly (DISCONNECT: its session stays) and connects again
 * after the usual pause. */
void worker__reconnect(struct worker *w);
struct mq_conn *worker__conn(struct worker *w);
void worker__free(struct worker *w);

struct inspector *inspector__new(struct soak *s);
uint64_t inspector__step(struct inspector *i);
bool inspector__ready(const struct inspector *i);
void inspector__reconnect(struct inspector *i);
struct mq_conn *inspector__conn(struct inspector *i);
void inspector__free(struct inspector *i);

struct status_client *status__new(struct soak *s);
/* Asks for getStatus every interval_ms (when no request is outstanding). */
uint64_t status__step(struct status_client *st, unsigned interval_ms);
/* The latest answer, and when it was asked for (0: never). */
const struct plugin_status *status__latest(const struct status_client *st, uint64_t *asked_ns);
/* Asks now (unless a request is outstanding). */
void status__ask(struct status_client *st);
struct mq_conn *status__conn(struct status_client *st);
void status__free(struct status_client *st);

/* Connecting: every client retries mq_open on this pause while the broker
 * is away. */
#define SOAK_RETRY_MS 50

#endif
