/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Durability of the engine (with plugin_opt_state_file): restoring the state
 * at startup, snapshots at an interval and at shutdown, and, with
 * plugin_opt_state_save_on_change, a journal of every change between
 * snapshots: each delivery tracked (synced before the broker acknowledges the
 * publish), each NACK with the envelope it makes (synced before the NACK is
 * acknowledged), each dead letter kept (synced: nothing else holds it), and
 * the envelopes the broker has taken and the kept letters gone (synced once
 * per tick, or by the next synced entry; losing those only republishes or
 * keeps a letter again, never loses).
 */
#ifndef DLQ_PERSIST_H
#define DLQ_PERSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/counters.h"
#include "store/state.h"
#include "store/store_port.h"

/* How the state is saved, and what says it changed: set once, by
 * persist__restore. */
struct persist_options {
	const char *state_file;  /* borrowed; NULL: nothing is saved, every call does nothing */
	uint64_t save_interval_ms;
	bool save_on_change;     /* journal every change (plugin_opt_state_save_on_change) */
	/* What says the state changed since the last snapshot (marker()):
	 * the owner's change count and its totals, borrowed. */
	const uint64_t *changes;
	const struct dlq_counters *totals;
};

struct dlq_persist {
	struct persist_options opt; /* opt.state_file NULL: nothing is saved */
	struct state_view view;  /* what is saved and restored */
	int journal_fd;          /* -1 when not journaling */
	char *journal_path;      /* owned */
	uint64_t last_save_ms;   /* monotonic time of the last snapshot */
	uint64_t saved_marker;   /* what the state looked like then (see marker()) */
	uint64_t *removed;       /* owned: seqs taken since the last tick, to journal */
	size_t removed_count;
	size_t removed_capacity;
	bool failing;            /* the last write failed (logged once until it works) */
};


/* Sets p up over view and restores the state file and its journal (if
 * configured and present) into view's parts. A damaged file is reported,
 * kept aside as <state_file>.damaged-<time>, and what came before the
 * damage is restored. Returns 0, or an errno when the state file cannot be
 * used at all (not readable): the broker should not start with durability
 * it was asked for but cannot have. Call persist__close whatever the
 * result. */
int persist__restore(struct dlq_persist *p, const struct persist_options *o, const struct state_view *view,
		char *err, size_t errlen);

/* After the owner settled what it restored: opens the journal (with
 * save_on_change) and writes a fresh snapshot, which proves the file can
 * be written and folds the journal in. Returns 0 or an errno with a
 * message in err. */
int persist__start(struct dlq_persist *p, char *err, size_t errlen);

/* The store port of p (store_port.h), journaling each change: ops NULL
 * when p keeps no journal, so that the engine's notes cost nothing. */
struct dlq_store_port persist__port(struct dlq_persist *p);

/* Once per tick (now: port__now_ms): journals what was taken, and saves a
 * snapshot when the interval has passed and anything changed. */
void persist__tick(struct dlq_persist *p, uint64_t now);

/* At shutdown: saves the final snapshot (everything not taken included)
 * and closes the journal. Returns how many envelopes are lost (not saved:
 * all of them without a state file, or when the snapshot failed). */
size_t persist__close(struct dlq_persist *p);

#endif
