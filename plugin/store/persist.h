/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Durability of the engine (with plugin_opt_state_file): restoring the state
 * at startup, snapshots at an interval and at shutdown, and, with
 * plugin_opt_state_save_on_change, a journal of every change between
 * snapshots: each delivery tracked (synced before the broker acknowledges the
 * publish), each NACK with the envelope it makes (synced before the NACK is
 * acknowledged), and the envelopes the broker has taken (synced once per
 * tick; losing those only republishes, never loses).
 */
#ifndef DLQ_PERSIST_H
#define DLQ_PERSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dlq;
struct dlq_envelope;

struct dlq_persist {
	int journal_fd;          /* -1 when not journaling */
	char *journal_path;      /* owned */
	uint64_t last_save_ms;   /* monotonic time of the last snapshot */
	uint64_t saved_marker;   /* what the state looked like then (see marker()) */
	uint64_t *removed;       /* owned: seqs taken since the last tick, to journal */
	size_t removed_count;
	size_t removed_capacity;
	bool failing;            /* the last write failed (logged once until it works) */
};

/* Restores the state file (if configured and present) into d, then writes a
 * fresh snapshot and opens the journal. A damaged file is reported, kept
 * aside as <state_file>.damaged-<time>, and what came before the damage is
 * restored. Returns 0, or an errno when the state file cannot be used at
 * all (not readable, directory not writable): the broker should not start
 * with durability it was asked for but cannot have. */
int persist__open(struct dlq *d, char *err, size_t errlen);

/* The engine took on e (it is owed until the broker takes it). sync: make
 * it durable now; otherwise the next synced entry does. */
void persist__note_add(struct dlq *d, const struct dlq_envelope *e, bool sync);

/* A delivery became NACKable (an inbound publish was tracked, or a retry
 * copy was published). Synced: the broker acknowledges the publish after. */
void persist__note_record(struct dlq *d, const struct dlq_record *r);

/* client NACKed r: the last entry of an accepted NACK, synced, so that the
 * NACK and its envelope are durable before the broker acknowledges it. */
void persist__note_nacker(struct dlq *d, const struct dlq_record *r, const char *client);

/* The retry copy r was taken by the broker for client, whose session does
 * not persist, and is held for it (holds.h). Not synced: the next synced
 * entry makes it durable, and until then the copy's record is the same
 * whether or not it is held. */
void persist__note_hold(struct dlq *d, const struct dlq_record *r, const char *client);

/* The broker took the envelope with seq (or it was replaced). */
void persist__note_remove(struct dlq *d, uint64_t seq);

/* Once per tick (now: port__now_ms): journals what was taken, and saves a
 * snapshot when the interval has passed and anything changed. */
void persist__tick(struct dlq *d, uint64_t now);

/* At shutdown: saves the final snapshot (everything not taken included)
 * and closes the journal. Returns how many envelopes it saved. */
size_t persist__close(struct dlq *d);

#endif
