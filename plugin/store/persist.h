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
 *
 * A snapshot is written in the background: a child process (fork) encodes
 * the state as it was at the fork, from its own copy-on-write view of the
 * memory, writes it (path.tmp, fsync, rename, fsync of the folder) and
 * says how it went through a pipe, while the broker goes on. With the
 * journal, the fork starts the journal's next generation
 * (<state_file>.journal); the one the snapshot holds is renamed
 * <state_file>.journal.<generation> and removed once the snapshot is in
 * place, so that a crash at any moment leaves a snapshot and the journals
 * it does not hold. At shutdown the snapshot is written in the foreground
 * (a background one still running is stopped), and so is the one at the
 * start that folds in a journal written before generations.
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
	uint64_t journal_sync_ms; /* 0: each change synced as written (what asks for it); else every change
	                          * written at once and the journal synced at the first tick this long after */
	/* What says the state changed since the last snapshot (marker()):
	 * the owner's change count and its totals, borrowed. */
	const uint64_t *changes;
	const struct dlq_counters *totals;
	bool foreground;         /* every snapshot in the foreground (unit tests of what is saved) */
	uint64_t save_pause_ms;  /* tests: a background save waits this long before it writes */
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
	bool journal_unsynced;   /* with opt.journal_sync_ms: written since the last sync */
	uint64_t journal_synced_ms; /* with opt.journal_sync_ms: when the journal was last synced */
	uint64_t generation;     /* the journal's current generation (>= 1); without one, the newest found */
	bool legacy_journal;     /* a journal written before generations was restored */
	bool restored_damaged;   /* a damaged file was set aside at the restore */
	bool snapshot_read;      /* the restore found a state file */
	uint64_t current_generation; /* restored: the generation of <state_file>.journal (0: none) */
	uint64_t *rotated;       /* owned: generations of <state_file>.journal.<g> files on disk */
	size_t rotated_count;
	size_t rotated_capacity;
	/* The background save, while one runs. */
	int saver_pid;           /* 0: none */
	int saver_fd;            /* the read end of the pipe its result comes through */
	uint64_t saver_covers;   /* the last journal generation its snapshot holds */
	uint64_t saver_marker;   /* marker() at its fork */
	uint64_t saver_started_ms;
	uint64_t saver_fork_us;  /* how long the fork held the broker */
	uint64_t saver_rotation_us; /* and the journal's rotation before it */
	char saver_msg[256];     /* what it said: "0" saved, "1<why>" not */
	size_t saver_msg_len;
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

/* After the owner settled what it restored: checks that the state file
 * can be written (its .tmp created and removed), opens the journal's next
 * generation (with save_on_change) and starts a snapshot in the background
 * that folds in what was restored (in the foreground for a journal written
 * before generations). Returns 0 or an errno with a message in err. */
int persist__start(struct dlq_persist *p, char *err, size_t errlen);

/* The store port of p (store_port.h), journaling each change: ops NULL
 * when p keeps no journal, so that the engine's notes cost nothing. */
struct dlq_store_port persist__port(struct dlq_persist *p);

/* Once per tick (now: port__now_ms): journals what was taken, collects
 * the result of a background save that ended, and starts one when the
 * interval has passed and anything changed. */
void persist__tick(struct dlq_persist *p, uint64_t now);

/* Whether a background save is running. */
bool persist__saving(const struct dlq_persist *p);

/* At shutdown: stops a background save, saves the final snapshot in the
 * foreground (everything not taken included; logged with how long it took)
 * and closes the journal. Returns how many envelopes are lost (not saved:
 * all of them without a state file, or when the snapshot failed). */
size_t persist__close(struct dlq_persist *p);

#endif
