/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Retry copies and dead letters the broker has taken but not yet saved.
 * Mosquitto keeps a message it queued for a session only in memory until its
 * next autosave (autosave_interval): a SIGKILL before then loses it (a
 * plain client's 100 QoS 1 messages for a persistent session that had not
 * acknowledged them: none came back, on 2.0.11 and 2.0.21 alike). Past a
 * client's in-flight window (max_inflight_messages, 20) what the broker took
 * waits in that queue: 2.0.21 answers a burst of NACKs many per loop pass,
 * 2.0.11 one per connection per pass, so on 2.0.21 the copies piled up there
 * (19-33 of 150 acknowledged NACKs lost their successors at a SIGKILL). So,
 * with plugin_opt_state_save_on_change and a broker that autosaves, an
 * envelope the broker took stays here, and in the state file, until the
 * broker's database file was replaced after the tick that saw it taken: the
 * broker writes that file whole and renames it into place from its single
 * main loop, so a newer file holds every message it had queued by then.
 * After a SIGKILL the state file gives them back as owed and they are
 * published again: a duplicate where the broker had saved or delivered one,
 * never a loss. A copy held for a session that does not persist (holds.h)
 * is not kept: no broker save can carry it. Kept envelopes count against no
 * gauge (the broker has them); their bytes are bounded by
 * max_pending_bytes, past which the oldest are let go with a warning.
 */
#ifndef DLQ_UNSAVED_H
#define DLQ_UNSAVED_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "model/outbox.h"

struct dlq_unsaved {
	struct dlq_envelope_list list; /* oldest first; broker_saves never decreases along it */
	uint64_t bytes;
	/* What the broker's database file looked like at the last look. */
	bool present;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	uint64_t saves;         /* changes of the file seen so far */
	uint64_t warned_ms;     /* rate limit of the warning when the bound is reached */
};

void unsaved__init(struct dlq_unsaved *u);
/* Frees every kept envelope. */
void unsaved__cleanup(struct dlq_unsaved *u);

/* Whether the file at path differs from the last look (a save replaced
 * it); records what it looks like now. A file that cannot be read counts
 * as absent: its appearance is a save, its disappearance is not. */
bool unsaved__file_changed(struct dlq_unsaved *u, const char *path);

/* Appends e, newest last. Takes e. */
void unsaved__push(struct dlq_unsaved *u, struct dlq_envelope *e);

#endif
