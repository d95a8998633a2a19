/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Acknowledgement deadlines (a policy's ack_timeout): the deliveries of
 * tracked messages to subscribers that must settle them (ACK or NACK)
 * before their clock runs out, or report progress to restart it. A
 * delivery here is one record sent to one client; its clock runs from
 * when it starts to when it runs out (due_ms), and the engine treats a
 * clock that ran out as a failed attempt (engine/settle.c).
 *
 * When a clock starts depends on what the broker shows (mode):
 * - DLQ_DEADLINES_PER_SEND (Mosquitto 2.1, which shows every PUBLISH it
 *   writes to a client): at each send; a resend after a reconnect starts
 *   it again. A delivery exists only while its clock runs.
 * - DLQ_DEADLINES_SEQUENTIAL (Mosquitto 2.0, which shows only when a
 *   message is routed to a subscriber, through the access check of
 *   redelivery tracking): each client's deliveries are kept in the order
 *   they were routed to it, and the client is taken to work through them
 *   one at a time, as a subscriber with an in-flight window of one does.
 *   Only the client's first delivery (its head) has a running clock; the
 *   clock of the next one starts when the head is settled or runs out,
 *   and only while the client is connected (a queue behind a message the
 *   broker has not sent yet never runs out). So a deadline on 2.0 may run
 *   later than the send, never earlier, for a subscriber that handles one
 *   delivery at a time and receives only tracked messages.
 *
 * Running clocks wait in queues, one per duration (a policy's
 * ack_timeout): in a queue, clocks started later run out later, so each
 * queue is a list in start order, a clock that starts again moves to its
 * tail, and what runs out first is at the head of some queue. Starting,
 * stopping and settling cost O(1); finding what ran out costs one look per
 * queue (a few: one per distinct ack_timeout). Nothing on a message's path
 * grows with the number of deliveries pending.
 *
 * A record with deliveries here carries DLQ_RECORD_CLOCKED (record.h), so
 * that a record without any is dropped without a lookup. Each delivery's
 * bytes are counted in its record's ledger bytes (the memory bound), and in
 * the awaiting gauge of its record's policy.
 */
#ifndef DLQ_DEADLINES_H
#define DLQ_DEADLINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/ledger.h"
#include "util/chains.h"

enum dlq_deadline_mode {
	DLQ_DEADLINES_PER_SEND,   /* 2.1: a clock starts at each send */
	DLQ_DEADLINES_SEQUENTIAL, /* 2.0: one delivery at a time per client, in the order routed */
};

struct dlq_deadline_client;
struct dlq_deadline_queue;

/* One delivery awaiting settlement. Owned by the table. */
struct dlq_deadline {
	struct dlq_deadline *hnext;   /* table chain, by record */
	struct dlq_deadline *cprev;   /* the client's deliveries, in the order they came */
	struct dlq_deadline *cnext;
	struct dlq_deadline *qprev;   /* its queue, while its clock runs */
	struct dlq_deadline *qnext;
	struct dlq_record *record;    /* borrowed: in the ledger while this exists */
	struct dlq_deadline_client *client; /* borrowed */
	struct dlq_deadline_queue *queue;   /* the queue its clock runs in; NULL: waiting (no clock yet) */
	uint64_t due_ms;              /* while running: when it runs out (monotonic) */
};

/* A client with deliveries awaiting settlement. */
struct dlq_deadline_client {
	struct dlq_deadline_client *hnext;
	struct dlq_deadline *head;    /* its deliveries, in the order they came */
	struct dlq_deadline *tail;
	size_t count;
	bool online;                  /* SEQUENTIAL: known to be connected */
	bool persists;                /* its session outlives its connection, as last known */
	bool resumable;               /* SEQUENTIAL: left_on ended a session it did not start clean */
	uintptr_t left_on;            /* SEQUENTIAL: the connection it was seen to leave on, until seen
	                                 connected again; 0: none */
	char id[];
};

/* Running clocks of one duration, oldest start first. */
struct dlq_deadline_queue {
	uint64_t duration_ms;
	struct dlq_deadline *head;
	struct dlq_deadline *tail;
	size_t count;
};

struct dlq_deadlines {
	enum dlq_deadline_mode mode;
	struct chains table;          /* of struct dlq_deadline, by record */
	size_t count;                 /* deliveries */
	size_t running;               /* of them with a running clock */
	struct chains clients;        /* of struct dlq_deadline_client, by id */
	size_t client_count;
	struct dlq_deadline_queue *queues; /* owned array */
	size_t queue_count;
	/* Borrowed, optional: where the deliveries' bytes are counted (their
	 * records' ledger) and their number per policy (the gauges). */
	struct dlq_ledger *ledger;
	struct dlq_gauge_book *book;
};

/* What one delivery adds to its record's accounted bytes. */
#define DLQ_DEADLINE_BYTES (sizeof(struct dlq_deadline) + sizeof(void *))

void deadlines__init(struct dlq_deadlines *ds, enum dlq_deadline_mode mode);
/* Frees every delivery, client and queue; records keep their flag. */
void deadlines__cleanup(struct dlq_deadlines *ds);

/* The delivery of r to client, or NULL. */
struct dlq_deadline *deadlines__find(const struct dlq_deadlines *ds, const struct dlq_record *r, const char *client);
/* The client, or NULL when it has no delivery here. */
struct dlq_deadline_client *deadlines__client(const struct dlq_deadlines *ds, const char *client);

/* A new delivery of r to client, waiting (no clock), after the client's
 * others; r has none to client yet. Returns it, or NULL when out of
 * memory. */
struct dlq_deadline *deadlines__add(struct dlq_deadlines *ds, struct dlq_record *r, const char *client);

/* Starts e's clock at now, or starts it again: it runs out ack_timeout
 * (its record's policy's) from now. */
void deadlines__start(struct dlq_deadlines *ds, struct dlq_deadline *e, uint64_t now);

/* Forgets e (its client with it, when that was its last). */
void deadlines__remove(struct dlq_deadlines *ds, struct dlq_deadline *e);

/* Forgets every delivery of r (it leaves the ledger). */
void deadlines__record_gone(struct dlq_deadlines *ds, struct dlq_record *r);

/* The delivery whose clock runs out first, if it ran out by now; else
 * NULL. */
struct dlq_deadline *deadlines__expired(const struct dlq_deadlines *ds, uint64_t now);
/* When the first clock runs out; UINT64_MAX when none runs. */
uint64_t deadlines__next_due(const struct dlq_deadlines *ds);

/* ---- the rules of each mode ----
 * Each returns the delivery whose clock it started (for the state file to
 * note), or NULL. */

/* PER_SEND: r was sent to client: its delivery (made if new) starts its
 * clock. NULL when out of memory. */
struct dlq_deadline *deadlines__sent(struct dlq_deadlines *ds, struct dlq_record *r, const char *client, uint64_t now);

/* SEQUENTIAL: r, which client has no delivery of here, was routed to it
 * (online: from its live connection): the new delivery goes after the
 * client's others, in *made, and starts its clock when it is the client's
 * first and the client is online. Returns 0 or ENOMEM. */
int deadlines__routed(struct dlq_deadlines *ds, struct dlq_record *r, const char *client, bool online,
		uint64_t now, struct dlq_deadline **made);

/* e was settled (ACK or NACK: settled true) or ran out (settled false): it
 * goes; SEQUENTIAL: when it was the client's first and the client is
 * online, the next one's clock starts. */
struct dlq_deadline *deadlines__done(struct dlq_deadlines *ds, struct dlq_deadline *e, uint64_t now);

/* SEQUENTIAL: client settled, late, a delivery whose clock had run out:
 * it was still working on it, and the broker sends it the next message
 * only now. Its first delivery's clock starts again (or starts, when the
 * client is online). PER_SEND: nothing. */
struct dlq_deadline *deadlines__late(struct dlq_deadlines *ds, const char *client, uint64_t now);

/* SEQUENTIAL: client is connected (a reconnect's first access check, or
 * any sign of a live connection): its first delivery, waiting, starts its
 * clock. */
struct dlq_deadline *deadlines__online(struct dlq_deadlines *ds, const char *client, uint64_t now);
/* SEQUENTIAL: client's connection conn ended; its session lasts or not (as
 * last known: persists), and the connection started it clean or not (clean).
 * A running clock runs on (the delivery was sent). When the session ends,
 * the broker drops what it queued for the client, and the plugin cannot
 * tell which of the client's waiting deliveries it had sent: their clocks
 * start now, so that each runs out, and its message is retried, rather
 * than waiting for a client that will not have it; each is passed to
 * started.
 *
 * Mosquitto 2.0 reports the end of a connection that already ended once
 * more when a new connection of the client takes over the session it left
 * (src/handle_connect.c, connect__on_authorised, the old session object's
 * do_disconnect): the only sign 2.0 gives a plugin at a connect. So a
 * second end of conn, the connection the client was seen to leave on,
 * from a session it did not start clean, says the client is back: as
 * deadlines__online, and its first delivery, when it starts its clock
 * then, is returned. Else NULL. */
struct dlq_deadline *deadlines__offline(struct dlq_deadlines *ds, const char *client, uintptr_t conn, bool clean,
		uint64_t now, void (*started)(void *ctx, const struct dlq_deadline *e), void *ctx);

/* SEQUENTIAL: whether c was seen to leave, from a session that does not
 * last, and has not been seen connected since: the broker has no session
 * for it (unless it came back, clean and unseen), and a retry copy
 * published for it alone would be dropped (mosquitto_broker_publish drops
 * a message for an unknown client id, silently). */
static inline bool deadlines__gone(const struct dlq_deadlines *ds, const struct dlq_deadline_client *c)
{
	return ds->mode == DLQ_DEADLINES_SEQUENTIAL && !c->online && !c->persists && c->left_on != 0;
}

/* Whether r has any delivery awaiting settlement. */
static inline bool deadlines__of(const struct dlq_record *r)
{
	return (r->flags & DLQ_RECORD_CLOCKED) != 0;
}

/* For the state file: restores a delivery of r to client, running until
 * due (monotonic) or waiting (due 0), after the client's others; one that
 * exists is set so. Call deadlines__restored once all are in. Returns 0 or
 * ENOMEM. */
int deadlines__restore(struct dlq_deadlines *ds, struct dlq_record *r, const char *client, uint64_t due);
/* Puts every queue in the order its clocks run out (a restore fills them
 * in the file's order). */
void deadlines__restored(struct dlq_deadlines *ds);

#endif
