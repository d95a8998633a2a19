/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What the files of dlqctl share: the parsed command line, the MQTT v5
 * connections it makes (conn.c), the plugin's $CONTROL commands sent over
 * them (control.c), dead letters decoded from a received message
 * (letter.c), the letters a run holds unsettled (hand.c), a small
 * text-table printer (table.c), and the entry points of the subcommands
 * (cmd_status.c, cmd_inspect.c, cmd_redrive.c, and cmd_store.c and
 * cmd_show.c for the plugin's dead-letter store).
 * dlqctl is an operator's tool on libmosquitto; it needs nothing from the
 * broker but the plugin's public contract, include/mosquitto_dlq.h.
 */
#ifndef DLQCTL_H
#define DLQCTL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <mosquitto.h>

/* Exit statuses, documented in the usage text. */
#define DLQCTL_EXIT_OK 0
#define DLQCTL_EXIT_FAIL 1   /* the broker, the plugin or the network did not do what was asked */
#define DLQCTL_EXIT_USAGE 2  /* the command line is wrong */

/* User property dlqctl puts on a dead letter it puts back into its
 * dead-letter topic because a redrive filter passed it over; the value
 * names the redrive run. Never carried to a redriven message. */
#define DLQCTL_PROP_KEPT "dlqctl-kept"

/* User property dlqctl puts on every message it redrives; the value names
 * the redrive run. The plugin carries it, as any publisher's property, to
 * the message's retry copies and dead letter, so a run that meets a dead
 * letter it redrove itself knows that its consumers still fail, and stops
 * instead of sending it round again. */
#define DLQCTL_PROP_REDRIVEN "dlqctl-redriven"

#define DLQCTL_DEFAULT_SESSION_EXPIRY_S (24u * 3600u)

struct dlqctl_opts {
	/* Connection (as mosquitto_sub spells them). */
	const char *host;
	int port;
	const char *unix_path;     /* non-NULL: connect to this unix socket */
	const char *id;            /* NULL: a default per subcommand */
	const char *username;
	const char *password;
	int keepalive;
	double timeout_s;          /* how long to wait for a reply or an acknowledgement */

	/* Subcommand and its arguments. */
	const char *command;
	const char *topic;
	bool json;
	bool follow;
	bool dry_run;
	bool persistent;           /* inspect -c: a session that outlives the connection */
	bool verbose;
	long max;                  /* -1: no limit */
	double rate;               /* redriven messages per second; 0: no limit */
	double idle_s;
	const char *reason_contains;
	const char *origin_filter;
	const char *to_prefix;
	uint32_t session_expiry_s;

	/* The dead-letter store's commands (cmd_store.c). */
	char *const *ids;          /* show, delete, redrive ID...: dead-letter ids, borrowed from argv */
	size_t nids;
	bool oldest;               /* list --order oldest */
	long limit;                /* list --limit; 0: not given */
	bool all;                  /* list: every page; purge: every letter */
	bool yes;                  /* purge: purge, not only count */
	bool cancel;               /* redrive --cancel: cancel a redrive task (--filter or --task) */
	long task_id;              /* redrive --cancel --task: the task's id; 0: not given */
	const char *policy_filter; /* list, purge --filter: a policy's filter */
	const char *dead_letter;   /* list --dead-letter */
	const char *reason;        /* list --reason */
	const char *cause;         /* list --cause: a word of DLQ_CAUSE_WORDS */
	const char *broker;        /* list --broker: the broker that made the letters (dead-letter-broker) */
	bool has_since, has_until;
	int64_t since_ms, until_ms; /* list --since, --until: ms since the epoch */
	const char *to;            /* redrive ID... --to */
	bool from_topic;           /* redrive --from-topic: the session form */
};

/* Set by SIGINT and SIGTERM; the loops check it between short waits. */
extern volatile sig_atomic_t dlqctl_stop;

/* ---- conn.c: MQTT v5 connections ---- */

/* A message handler: called on the thread that drives the connection, with
 * the message and its properties borrowed for the call only. */
typedef void (*conn_message_fn)(void *arg, const struct mosquitto_message *m, const mosquitto_property *props);

struct conn {
	struct mosquitto *mosq;
	bool manual;               /* writes happen only in conn__flush (see conn__open) */
	bool connack;
	int connack_rc;
	bool session_present;
	bool lost;                 /* the connection ended after CONNACK */
	int lost_rc;
	int sub_mid;
	bool subacked;
	int sub_granted;
	int pub_mid;
	bool pub_done;
	int pub_rc;
	conn_message_fn on_message;
	void *arg;
};

/* Connects as id (NULL: the broker assigns one) and waits for the CONNACK.
 * clean: a session that ends with the connection; otherwise one that
 * outlives it by expiry_s seconds. receive_max: how many QoS 1 messages the
 * broker may have in flight to us (0: libmosquitto's default).
 * manual: nothing is written to the socket except by conn__flush, so the
 * acknowledgement libmosquitto queues for each QoS 1 message we read leaves
 * only when we say so; such a connection is driven by conn__read_one.
 * filter (manual only; NULL: none): subscribed to at QoS 1 in the same
 * write as the CONNECT, so that no message of a resumed session is read
 * before it (conn__subscribe's flush would acknowledge those); its SUBACK
 * is read later, with the messages (c->subacked, c->sub_granted).
 * Returns 0, or DLQCTL_EXIT_FAIL after printing why. c is always set up
 * and must be closed with conn__close. */
int conn__open(struct conn *c, const struct dlqctl_opts *o, const char *id, bool clean, uint32_t expiry_s,
		int receive_max, bool manual, const char *filter, conn_message_fn on_message, void *arg);

/* An automatic connection: runs the network loop for up to timeout_ms.
 * Returns a MOSQ_ERR_* code. */
int conn__run(struct conn *c, int timeout_ms);

/* A manual connection: waits up to timeout_ms for data and reads it
 * (callbacks run inside): one MQTT packet with 2.0's libmosquitto, every
 * packet one recv() brought in with 2.1's, so the handler may be called
 * several times, and the acknowledgements of all those messages leave
 * together with the next conn__flush. Returns a MOSQ_ERR_* code. */
int conn__read_one(struct conn *c, int timeout_ms);

/* A manual connection: writes everything queued (the acknowledgements of
 * every message read so far included), waiting up to timeout_ms. Returns a
 * MOSQ_ERR_* code. */
int conn__flush(struct conn *c, int timeout_ms);

/* Subscribes and waits for the SUBACK (a manual connection: writes the
 * SUBSCRIBE, with every acknowledgement queued before it, and leaves the
 * SUBACK to conn__read_one). Returns 0, or DLQCTL_EXIT_FAIL after printing
 * why. */
int conn__subscribe(struct conn *c, const char *filter, int qos, int timeout_ms);

/* Publishes at QoS 1 and waits for the PUBACK; *reason gets its reason code.
 * props stay the caller's. Returns a MOSQ_ERR_* code (MOSQ_ERR_SUCCESS
 * also when the broker refused with a reason code >= 0x80). */
int conn__publish(struct conn *c, const char *topic, const void *payload, int len,
		const mosquitto_property *props, int timeout_ms, int *reason);

/* Ends the connection: with graceful, a DISCONNECT is sent first (on a
 * manual connection it would carry every queued acknowledgement with it);
 * otherwise the socket is just closed, and whatever we read but did not
 * acknowledge stays in our session. A manual connection then waits (up to
 * a second) for the broker to close its end, so that it has read what we
 * wrote last. Frees the client. */
void conn__close(struct conn *c, bool graceful);

/* Random bytes as lowercase hex, 2*n characters and a NUL into out. */
void conn__random_hex(char *out, size_t n);

/* Monotonic and wall-clock milliseconds. */
uint64_t dlqctl_now_ms(void);
int64_t dlqctl_wall_ms(void);

/* ---- control.c: the plugin's $CONTROL/dlq/v1 commands ---- */

struct cJSON;

/* A connection for commands, one after the other. */
struct control {
	const struct dlqctl_opts *o; /* borrowed */
	struct conn c;
	char response_topic[64];   /* this connection's, for every reply */
	char corr[33];             /* the command in flight's correlation data */
	bool got;
	struct cJSON *doc;         /* its reply, owned; NULL if it was not JSON */
};

/* Connects (a clean session; the client id -i, or one the broker gives).
 * Returns 0, or DLQCTL_EXIT_FAIL after printing why; ctl must be closed
 * with control__close either way. */
int control__open(struct control *ctl, const struct dlqctl_opts *o);

/* A command object {"command": name} for control__call, the caller's to
 * free with cJSON_Delete; NULL when out of memory. */
struct cJSON *control__command(const char *name);

/* Sends the command cmd (the caller's; its "correlationData" is set) and
 * waits up to --timeout for its reply. On success *doc is the reply, the
 * caller's to free with cJSON_Delete, and *data its entry's "data"
 * (borrowed from *doc; NULL when it has none). Returns 0, or
 * DLQCTL_EXIT_FAIL after printing why (an error the plugin answered, in its
 * words); *doc is then NULL. */
int control__call(struct control *ctl, struct cJSON *cmd, struct cJSON **doc, const struct cJSON **data);

/* Ends the connection. */
void control__close(struct control *ctl);

/* A command without members on a connection of its own: control__open,
 * control__call, control__close. Same returns as control__call. */
int control__run(const struct dlqctl_opts *o, const char *command, struct cJSON **doc, const struct cJSON **data);

/* Prints a JSON value, indented, and a newline. */
void control__print_json(const struct cJSON *data);

/* The string member name of o (borrowed from o), or NULL. */
const char *control__str(const struct cJSON *o, const char *name);

/* A JSON value as text: a string as it is, a whole number without a
 * fraction, NULL as "-", anything else as JSON. The caller frees it; NULL
 * when out of memory. */
char *control__value_text(const struct cJSON *v);

/* ---- letter.c: dead letters ---- */

struct letter {
	char *topic;               /* the dead-letter topic it arrived on */
	void *payload;
	int payloadlen;
	int qos;
	mosquitto_property *props; /* a copy of every property received */
	/* The plugin's user properties (NULL when absent). */
	char *origin_topic;
	char *origin_id;
	char *retry_count;
	char *reason;
	char *client;
	char *filter;
	char *time;
	char *broker;              /* dead-letter-broker: the broker that made it */
	char *kept;                /* DLQCTL_PROP_KEPT */
	char *redriven;            /* DLQCTL_PROP_REDRIVEN */
};

/* Copies a received message into l. Returns 0 or ENOMEM. */
int letter__decode(struct letter *l, const struct mosquitto_message *m, const mosquitto_property *props);
void letter__free(struct letter *l);

/* The properties a redriven message carries (put_back false): the dead
 * letter's own, without the plugin's (dlq-id, retry-count, origin-*,
 * dead-letter-*, first-nack-time), dlqctl's, and the per-hop ones, plus
 * DLQCTL_PROP_REDRIVEN = run. With put_back, the list for putting the
 * letter back into its dead-letter topic instead: everything kept, plus
 * DLQCTL_PROP_KEPT = run. Returns 0 or a MOSQ_ERR_* code; *out is the
 * caller's to free with mosquitto_property_free_all. */
int letter__republish_props(const struct letter *l, bool put_back, const char *run, mosquitto_property **out);

/* The age of the letter (now minus dead-letter-time) as "850ms", "12s",
 * "5m03s", "2h05m" or "3d04h", or "-" when the time is missing or not
 * RFC 3339 UTC. */
void letter__age(const struct letter *l, int64_t now_ms, char *out, size_t len);

/* The milliseconds since the epoch an RFC 3339 UTC time names
 * ("2025-11-30T03:12:45.123Z", milliseconds optional), or -1. */
int64_t letter__parse_time(const char *s);

/* A copy of s (NULL: "-") fit for a terminal: control characters (C0,
 * DEL, C1; with lines, not newline and tab) and bytes that are not UTF-8
 * become '.'. The caller frees it; NULL when out of memory. */
char *letter__printable(const char *s, bool lines);

/* Printable text of at most max bytes (plus a NUL) from data: bytes outside
 * printable ASCII become '.', and a cut is marked with "...". */
void letter__preview(const void *data, size_t len, size_t max, char *out, size_t outlen);

/* ---- hand.c: the letters in hand, oldest first ---- */

struct hand {
	struct letter *v;          /* v[first .. first + n - 1], owned */
	size_t first, n, cap;
};

/* Decodes a received message (letter__decode) onto the end. Returns 0 or
 * ENOMEM (then nothing was added). */
int hand__push(struct hand *h, const struct mosquitto_message *m, const mosquitto_property *props);
/* The oldest letter in hand (borrowed), or NULL when none is. */
struct letter *hand__first(struct hand *h);
/* Frees the oldest letter in hand. */
void hand__drop(struct hand *h);
/* Frees every letter in hand; h is empty and reusable after. */
void hand__free(struct hand *h);

/* ---- table.c: aligned text tables ---- */

struct table;

/* A table with these column titles (NULL-terminated). right[i] right-aligns
 * column i (numbers). */
struct table *table__new(const char *const *titles, const bool *right);
/* Adds a row of as many cells as titles; cells are copied (NULL: "-"). */
int table__add(struct table *t, const char *const *cells);
void table__print(const struct table *t, FILE *f);
void table__free(struct table *t);

/* ---- subcommands: each returns an exit status ---- */
int cmd__status(const struct dlqctl_opts *o);
int cmd__policies(const struct dlqctl_opts *o);
int cmd__reset_counters(const struct dlqctl_opts *o);
int cmd__inspect(const struct dlqctl_opts *o);
int cmd__redrive(const struct dlqctl_opts *o);
/* cmd_store.c and cmd_show.c: the plugin's dead-letter store. */
int cmd__list(const struct dlqctl_opts *o);
/* cmd_brokers.c: the kept letters by broker (listBrokers). */
int cmd__brokers(const struct dlqctl_opts *o);
int cmd__show(const struct dlqctl_opts *o);
int cmd__store_redrive(const struct dlqctl_opts *o);
int cmd__delete(const struct dlqctl_opts *o);
int cmd__purge(const struct dlqctl_opts *o);
/* redrive --all and redrive --cancel: a redrive task (cmd_task.c). */
int cmd__redrive_task(const struct dlqctl_opts *o);

/* Adds list's selection options (--filter, --dead-letter, --reason,
 * --cause, --broker, --since, --until) to cmd as the plugin's filter members
 * (cmd_store.c; list and redrive --all send them). Returns 0, or 1 when
 * out of memory. */
int store__add_selection(struct cJSON *cmd, const struct dlqctl_opts *o);

#endif
