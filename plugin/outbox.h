/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The outbox: retry copies and dead letters the plugin owes. An envelope the
 * broker refused waits in "owed" and is tried again on every tick. A retry
 * copy for one client that the broker accepted waits in "fresh" until the
 * broker has handed it to that client's session (the next loop pass), because
 * the broker drops a message for a client id that has gone in between. The
 * outbox is never evicted; its bytes count against the memory bound.
 */
#ifndef DLQ_OUTBOX_H
#define DLQ_OUTBOX_H

#include <stddef.h>
#include <stdint.h>

#include "envelope.h"

struct dlq_envelope_list {
	struct dlq_envelope *head;
	struct dlq_envelope *tail;
	size_t count;
};

struct dlq_outbox {
	struct dlq_envelope_list owed;
	struct dlq_envelope_list fresh;
	uint64_t bytes; /* both lists */
};

void outbox__init(struct dlq_outbox *o);
/* Frees every envelope. */
void outbox__cleanup(struct dlq_outbox *o);

/* Takes ownership of e, appending it to the list. */
void outbox__push(struct dlq_outbox *o, struct dlq_envelope_list *list, struct dlq_envelope *e);
/* Unlinks e from the list; the caller owns it again. */
void outbox__unlink(struct dlq_outbox *o, struct dlq_envelope_list *list, struct dlq_envelope *e);

#endif
