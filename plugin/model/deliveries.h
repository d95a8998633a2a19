/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Redelivery tracking's clients and deliveries (structs in tracker.h),
 * in the tracker's tables, for their two users: 2.0's heuristic
 * (redelivery.c) and 2.1's exact counting (deliveries__sent and
 * deliveries__sent_to, in deliveries.c, for exact_counting.c). Internal to the
 * tracker: the rest of the plugin uses redelivery.h.
 */
#ifndef DLQ_DELIVERIES_H
#define DLQ_DELIVERIES_H

#include "model/ledger.h"
#include "model/tracker.h"

/* The client with this id, or NULL. Borrowed. */
struct dlq_rclient *deliveries__client_find(const struct dlq_redelivery *t, const char *id);
/* The client with this id, made if new; NULL when out of memory. Borrowed. */
struct dlq_rclient *deliveries__client_get(struct dlq_redelivery *t, const char *id);
/* Forgets c (frees it) unless deliveries reference it or it is known to
 * be connected. */
void deliveries__client_release(struct dlq_redelivery *t, struct dlq_rclient *c);

/* The delivery of r to c in the table, or NULL (a record with the sends
 * part keeps its first client's elsewhere: deliveries__sent_to). */
struct dlq_delivery *deliveries__find(const struct dlq_redelivery *t, const struct dlq_record *r,
		const struct dlq_rclient *c);
/* A new delivery of r to c, in r's list and the table, its bytes
 * accounted; NULL when out of memory or when r has neither the more nor
 * the sends part. */
struct dlq_delivery *deliveries__new(struct dlq_redelivery *t, struct dlq_ledger *l, struct dlq_record *r,
		struct dlq_rclient *c);

/* Frees r's deliveries (r leaves the ledger) and takes their bytes away. */
void deliveries__record_gone(struct dlq_redelivery *t, struct dlq_ledger *l, struct dlq_record *r);

/* Frees every delivery and client; the records' lists and sends parts are
 * emptied, their bytes taken away. */
void deliveries__cleanup(struct dlq_redelivery *t, struct dlq_ledger *l);

/* 2.1: the sends of one record to one client, wherever they are kept: in
 * the record's sends part (its first client) or in a delivery of the
 * table. Borrowed pointers, valid until the record leaves the ledger. */
struct dlq_sent_to {
	struct dlq_record *record;
	struct dlq_rclient *client;
	struct dlq_delivery *delivery; /* NULL: the record's sends part */
};

static inline unsigned deliveries__sends(const struct dlq_sent_to *s)
{
	return s->delivery ? s->delivery->sends : record__sends(s->record)->sends;
}
static inline bool deliveries__diverted(const struct dlq_sent_to *s)
{
	return s->delivery ? s->delivery->diverted : (s->record->flags & DLQ_RECORD_FIRST_DIVERTED) != 0;
}
/* The message was removed from the client's session and dead-lettered. */
static inline void deliveries__set_diverted(struct dlq_sent_to *s)
{
	if(s->delivery){
		s->delivery->diverted = true;
	}else{
		s->record->flags |= DLQ_RECORD_FIRST_DIVERTED;
	}
}

/* 2.1: the broker writes r to client (MESSAGE_OUT) on connection conn (0:
 * not known): one more send of r to client, counted where out says. A
 * client on the connection it was last seen connected on is found by the
 * connection and the address of the client string (the broker's own, the
 * same for the connection's life). Returns 0, or ENOMEM (nothing counted).
 * The first client of a record with the sends part costs no allocation;
 * others get a delivery each in the table (accounted in the ledger's
 * bytes; see deliveries__table_bytes). */
int deliveries__sent(struct dlq_redelivery *t, struct dlq_ledger *l, struct dlq_record *r, const char *client,
		uintptr_t conn, struct dlq_sent_to *out);

/* 2.1: where the sends of r to client are kept; false: r was never sent to
 * client (nor counted). */
bool deliveries__sent_to(struct dlq_redelivery *t, struct dlq_record *r, const char *client,
		struct dlq_sent_to *out);

/* Bytes of r's deliveries kept in the table for a record with the sends
 * part (accounted in the ledger's bytes and gauges, not in record__bytes);
 * 0 for any other record. */
size_t deliveries__table_bytes(const struct dlq_redelivery *t, const struct dlq_record *r);

/* The delivery of r to client, or NULL. */
struct dlq_delivery *deliveries__find_for(const struct dlq_redelivery *t, const struct dlq_record *r, const char *client);

/* ---- what outlives a restart ----
 * The counts of a delivery, as the state file keeps them (store/state.h):
 * written after their record in a snapshot and journaled as they change,
 * then given back after a restart, so that a message still in a session
 * across it goes on from the count it had, instead of from its record's
 * attempt. */
struct dlq_delivery_saved {
	const char *client;       /* borrowed */
	uint16_t redeliveries;    /* 2.0's heuristic: counted so far */
	uint16_t sends;           /* 2.1: PUBLISHes of it written to the client */
	bool held_connected;      /* 2.0: the client held it while connected */
	bool diverted;            /* removed from the client's session and dead-lettered */
};

/* The connection a client restored from the state file is taken to have
 * left behind: no connection of the new broker has it, so its first READ
 * check after the restart starts a burst (redelivery.c), and the resend
 * the broker makes right after CONNACK is counted. */
#define DLQ_CONN_BEFORE_RESTART ((uintptr_t)1)

/* What is kept of the delivery of r to client in *out (out->client
 * borrowed from the tracker); false: nothing worth keeping (never
 * delivered, or delivered with nothing counted). */
bool deliveries__saved(const struct dlq_redelivery *t, const struct dlq_record *r, const char *client,
		struct dlq_delivery_saved *out);

/* Calls fn for each delivery of r worth keeping; returns fn's first
 * non-zero return, or 0. */
typedef int dlq_delivery_saved_fn(void *ctx, const struct dlq_record *r, const struct dlq_delivery_saved *s);
int deliveries__each_saved(const struct dlq_redelivery *t, const struct dlq_record *r, dlq_delivery_saved_fn *fn,
		void *ctx);

/* Gives the delivery of r to s->client the counts in s (set, not added: a
 * journal's later entry replaces an earlier one). A client the tracker
 * does not know connected is taken as offline since before the restart
 * (DLQ_CONN_BEFORE_RESTART). A record kept without either part (tracking
 * off when it was made) takes nothing. Returns 0 or ENOMEM. */
int deliveries__restore(struct dlq_redelivery *t, struct dlq_ledger *l, struct dlq_record *r,
		const struct dlq_delivery_saved *s);

#endif
