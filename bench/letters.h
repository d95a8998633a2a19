/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The dead-letter store suite's own declarations (issue 24), shared by its
 * files: letters.c (brokers, memory, listing, save and restart),
 * letters_client.c (the one client that makes dead letters and sends the
 * store's commands), letters_trace.c (a stop under strace) and
 * letters_report.c (the tables). Not used outside the suite.
 */
#ifndef DLQ_BENCH_LETTERS_H
#define DLQ_BENCH_LETTERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <mosquitto.h>

#include "bench.h"
#include "link.h"

/* The policy, and the topic every original goes to. */
#define LETTERS_POLICY "jobs/# max_attempts=1 dead_letter=dead/jobs"
#define LETTERS_DEAD_LETTER "dead/jobs"
#define LETTERS_TOPIC "jobs/bench"

/* Fresh brokers per (payload size, kind); tracked messages only
 * acknowledged before the first reading; letters per listDeadLetters page;
 * getDeadLetter commands timed; restarts per broker; the state file's name
 * in the broker's directory. */
#define LETTERS_RUNS 3
#define LETTERS_WARMUP 1000
#define LETTERS_PAGE 100
#define LETTERS_GETS 100
#define LETTERS_RESTARTS 3
#define LETTERS_STATE "dlq.state"

/* The store on (the default bound), and off (dead_letter_keep 0). */
enum lkind { K_ON, K_OFF, NKIND };

/* One broker's figures (letters.c fills them). */
struct lrun {
	bool ok;
	long rss0, rss1;              /* KiB: before and after the N */
	double kept, kept_bytes;      /* getStatus totals after the N */
	double fill_s;
	double fill_save_ms;          /* SIGTERM to exit after the N */
	long long state_bytes;
	long restored_kib;            /* RSS of the first restart */
	int timed, saves;             /* restarts timed; their stops timed (not the traced one) */
	double start_ms[LETTERS_RESTARTS], save_ms[LETTERS_RESTARTS];
	/* The first restart's stop under strace (letters__trace_stop): from the
	 * broker's receipt of SIGTERM to its opening the new file, from that
	 * to its rename (write and fsync), and from the rename to the exit;
	 * ms, -1 when not traced. */
	double tr_encode, tr_write, tr_exit;
	/* The listing (store on) */
	bool listed;
	double list_ms;
	size_t pages, page_bytes;     /* bytes: all pages' replies */
};

/* One payload size: its brokers' figures, the dead letter as published,
 * and the listing's samples (owned). */
struct lcase {
	size_t payload;
	struct lrun run[NKIND][LETTERS_RUNS];
	size_t dl_topic, dl_payload, dl_props;
	int dl_nprops;
	struct bench_samples page_ns, get_ns;
	/* Pages listed again after a restart: with the default access check
	 * (the first restart), and with dead_letter_access control (the
	 * second). */
	struct bench_samples page_rchk_ns, page_ctl_ns;
	double list_rchk_ms[LETTERS_RUNS], list_ctl_ms[LETTERS_RUNS];
	int list_rchk_runs, list_ctl_runs;
	double first_get_us;
};

/* Stops b with SIGTERM under strace and reads the save's times (struct
 * lrun's tr_*) from the trace (letters_trace.c). Returns 0, or -1 when it
 * could not be traced (no strace, or no save seen; b is stopped either
 * way). */
int letters__trace_stop(struct broker *b, struct lrun *r);
/* Prints the suite's tables (letters_report.c). */
void letters__print(const struct lcase *cases, int ncases, int runs, uint64_t n);

enum letters_mode {
	LMODE_ACK,   /* deliveries are acknowledged only (libmosquitto's PUBACK) */
	LMODE_NACK,  /* every delivery is NACKed: with max_attempts=1, a dead letter */
};

/* One MQTT v5 libmosquitto client without a thread of its own: subscribed
 * to LETTERS_TOPIC's policy filter, to the dead-letter topic and to its
 * own reply topic, it publishes originals, NACKs what it receives, counts
 * the dead letters that come back, and sends $CONTROL/dlq/v1 commands. */
struct letters_client {
	struct link link;            /* first: the callbacks' userdata */
	struct mosquitto *m;
	enum letters_mode mode;
	uint64_t deliveries;         /* originals received on LETTERS_TOPIC */
	uint64_t dead;               /* dead letters received */
	uint64_t dead_with_id;       /* of them, with a dead-letter-id */
	/* The first dead letter received, as published: topic and payload
	 * lengths, and its properties' names and values (key and value bytes
	 * of each user property, value bytes of the others). */
	size_t dl_topic, dl_payload, dl_props;
	int dl_nprops;
	char reply_topic[64];
	char *reply;                 /* owned: the last reply's payload, NUL-terminated */
	size_t reply_len;
	bool got_reply;
	uint8_t *payload;            /* owned: what the originals carry */
	size_t payload_len;
};

/* Connects c to b (client id label-<pid>) and subscribes. Returns 0, or -1
 * (logged; call letters_client__close anyway). */
int letters_client__open(struct letters_client *c, const struct broker *b, const char *label);
void letters_client__close(struct letters_client *c);

/* Publishes n originals of payload_len bytes (QoS 1) to LETTERS_TOPIC, at
 * most a window at a time, and waits for each to be done: in LMODE_ACK its
 * delivery, in LMODE_NACK its dead letter. Returns 0, or -1 (logged) on a
 * failure or a timeout. */
int letters_client__pass(struct letters_client *c, enum letters_mode mode, uint64_t n, size_t payload_len);

/* Sends one command (cmd, a JSON object's text without the braces, e.g.
 * "\"command\":\"getStatus\"") on $CONTROL/dlq/v1 with the client's reply
 * topic, and waits for the reply. *data is its one response's "data"
 * (inside *reply, which the caller frees with cJSON_Delete), ns the time
 * from the publish to the reply's arrival, bytes the reply's size.
 * Returns 0, or -1 (logged) on a failure, a timeout or an error response. */
int letters_client__command(struct letters_client *c, const char *cmd, cJSON **reply, const cJSON **data,
		uint64_t *ns, size_t *bytes);

/* A number member of o, or -1 when absent. */
double letters__number(const cJSON *o, const char *name);

#endif
