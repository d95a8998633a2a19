/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Redelivery tracking's clients and deliveries (structs in redelivery.h),
 * in the tracker's tables, for their two users: 2.0's heuristic
 * (redelivery.c) and 2.1's exact counting (redelivery__sent and
 * redelivery__sent_to, in deliveries.c, for sends.c). Internal to the
 * tracker: the rest of the plugin uses redelivery.h.
 */
#ifndef DLQ_DELIVERIES_H
#define DLQ_DELIVERIES_H

#include "model/redelivery.h"

/* The client with this id, or NULL. Borrowed. */
struct dlq_rclient *deliveries__client_find(const struct dlq_redelivery *t, const char *id);
/* The client with this id, made if new; NULL when out of memory. Borrowed. */
struct dlq_rclient *deliveries__client_get(struct dlq_redelivery *t, const char *id);
/* Forgets c (frees it) unless deliveries reference it or it is known to
 * be connected. */
void deliveries__client_release(struct dlq_redelivery *t, struct dlq_rclient *c);

/* The delivery of r to c in the table, or NULL (a record with the sends
 * part keeps its first client's elsewhere: redelivery__sent_to). */
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

#endif
