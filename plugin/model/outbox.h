/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The outbox: retry copies and dead letters the plugin owes. An envelope the
 * broker refused waits in "owed" and is tried again on every tick. One the
 * broker accepted is only queued: the broker takes it at the top of its next
 * loop pass. Until then it waits in "sent" (accepted since the last tick) and
 * then in "settling" (accepted before the last tick, taken at the top of this
 * pass): a retry copy in "sent" whose client leaves is made a dead letter,
 * because the broker drops a message for a client id that has gone (once
 * taken, a copy for a session that does not persist is held on its ledger
 * record instead, holds.h); and what
 * is still in either list when the broker stops was never taken, so it is
 * saved as owed. The outbox is never evicted; its bytes count against the
 * memory bound.
 */
#ifndef DLQ_OUTBOX_H
#define DLQ_OUTBOX_H

#include <stddef.h>
#include <stdint.h>

#include "model/envelope.h"
#include "model/gauges.h"

struct dlq_envelope_list {
	struct dlq_envelope *head;
	struct dlq_envelope *tail;
	size_t count;
};

struct dlq_outbox {
	struct dlq_envelope_list owed;
	struct dlq_envelope_list sent;
	struct dlq_envelope_list settling;
	uint64_t bytes; /* all three lists */
	/* Borrowed, optional: the running gauges envelopes coming and going
	 * are counted in (set after outbox__init). Moving between lists
	 * changes nothing there. */
	struct dlq_gauge_book *book;
};

void outbox__init(struct dlq_outbox *o);
/* Frees every envelope. */
void outbox__cleanup(struct dlq_outbox *o);

/* Takes ownership of e, appending it to the list. */
void outbox__push(struct dlq_outbox *o, struct dlq_envelope_list *list, struct dlq_envelope *e);
/* Unlinks e from the list; the caller owns it again. */
void outbox__unlink(struct dlq_outbox *o, struct dlq_envelope_list *list, struct dlq_envelope *e);

/* Frees every envelope of the list. */
void outbox__free_list(struct dlq_outbox *o, struct dlq_envelope_list *list);

/* Moves every envelope of from to the end of to. */
void outbox__move_all(struct dlq_envelope_list *to, struct dlq_envelope_list *from);

#endif
