/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Durability of the engine (see persist.h), built on the state file format
 * of state.c. Without plugin_opt_state_file every function does nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/dlq.h"
#include "model/envelope.h"
#include "store/persist.h"
#include "store/state.h"
#include "util/errtext.h"
#include "util/port.h"

static bool enabled(const struct dlq *d)
{
	return d->cfg.state_file != NULL;
}

/* Changes whenever anything a snapshot holds may have changed. */
static uint64_t marker(const struct dlq *d)
{
	return d->changes + d->counters.tracked + d->counters.nacks + d->counters.expired + d->counters.evicted;
}

static void report_failure(struct dlq *d, const char *what, const char *detail)
{
	if(!d->persist.failing){
		port__log(DLQ_LOG_ERR, "state file problem: %s: %s; the state will be saved again at the next chance", what, detail);
	}
	d->persist.failing = true;
}

static int save_snapshot(struct dlq *d)
{
	char err[256];
	struct dlq_headers buf = {0};
	uint64_t now = port__now_ms();
	int rc = state__encode_snapshot(d, now, port__wall_ms(), &buf);
	if(rc == 0) rc = state__write_file(d->cfg.state_file, buf.data, buf.len, err, sizeof(err));
	else snprintf(err, sizeof(err), "out of memory");
	headers__free(&buf);
	if(rc){
		report_failure(d, "snapshot not saved", err);
		return rc;
	}
	/* The snapshot holds everything the journal said: start it afresh. */
	if(d->persist.journal_fd >= 0){
		struct dlq_headers h = {0};
		if(ftruncate(d->persist.journal_fd, 0) || lseek(d->persist.journal_fd, 0, SEEK_SET) < 0
				|| state__encode_journal_header(&h)
				|| state__append(d->persist.journal_fd, h.data, h.len)){
			report_failure(d, "journal not restarted", strerror(errno ? errno : EIO));
		}
		headers__free(&h);
	}
	d->persist.last_save_ms = now;
	d->persist.saved_marker = marker(d);
	if(d->persist.failing){
		port__log(DLQ_LOG_NOTICE, "state file saved again: %s", d->cfg.state_file);
	}
	d->persist.failing = false;
	return 0;
}

/* Keeps a damaged file for inspection beside the new one. */
static void keep_aside(const char *path, const char *what)
{
	char aside[4096];
	snprintf(aside, sizeof(aside), "%s.damaged-%" PRId64, path, port__wall_ms());
	if(rename(path, aside) == 0){
		port__log(DLQ_LOG_ERR, "%s %s kept for inspection as %s", what, path, aside);
	}
}

static int restore_file(struct dlq *d, const char *path, bool journal, char *err, size_t errlen)
{
	uint8_t *data = NULL;
	size_t len = 0;
	int rc = state__read_file(path, &data, &len, err, errlen);
	if(rc || data == NULL) return rc;

	struct state_report rep;
	memset(&rep, 0, sizeof(rep));
	if(journal){
		rc = state__decode_journal(d, data, len, port__now_ms(), port__wall_ms(), &rep);
	}else{
		rc = state__decode_snapshot(d, data, len, port__now_ms(), port__wall_ms(), &rep);
	}
	free(data);
	if(rc){
		snprintf(err, errlen, "out of memory restoring \"%s\"", path);
		return rc;
	}
	if(journal){
		port__log(DLQ_LOG_NOTICE, "state journal %s: %zu entries applied", path, rep.journal_entries);
	}else{
		port__log(DLQ_LOG_NOTICE, "state file %s: restored %zu NACKable deliveries (%zu expired or without their policy "
				"skipped) and %zu retry copies or dead letters", path, rep.records, rep.records_skipped, rep.envelopes);
	}
	if(rep.damaged){
		port__log(DLQ_LOG_ERR, "state file problem: %s is damaged (%s): what came before it was restored, the rest is lost",
				path, rep.problem);
		keep_aside(path, journal ? "damaged state journal" : "damaged state file");
	}
	return 0;
}

/* A restored retry copy for one client can only reach it if its session
 * survived the restart; otherwise the broker would drop it silently. 2.1
 * says which sessions it restored (the broker reads its database before it
 * loads plugins): a copy for one of them waits for it, whatever was
 * thought of the session when it NACKed; one for another client, with
 * broker persistence, waits too, and is dead-lettered when it falls due if
 * the broker has no session for the client by then (engine__copy_qos). */
static bool unreachable(const struct dlq *d, struct dlq_envelope *e)
{
	if(e->kind != DLQ_ENV_RETRY_COPY || e->target_client == NULL) return false;
	if(d->cfg.broker_has_session){
		if(d->cfg.broker_has_session(d->cfg.broker_ctx, e->target_client)){
			e->target_persists = true;
			return false;
		}
		return !d->cfg.broker_persistence;
	}
	return !(d->cfg.broker_persistence && e->target_persists);
}

static void settle_restored_copies(struct dlq *d)
{
	char reason[512];

	/* Delayed ones that cannot be delivered need not wait: to owed. */
	size_t n = 0;
	for(size_t i = 0; i < d->delayed.count; i++){
		if(unreachable(d, d->delayed.heap[i])) n++;
	}
	struct dlq_envelope **found = n ? malloc(n * sizeof(*found)) : NULL;
	if(found){
		n = 0;
		for(size_t i = 0; i < d->delayed.count; i++){
			if(unreachable(d, d->delayed.heap[i])) found[n++] = d->delayed.heap[i];
		}
		for(size_t i = 0; i < n; i++){
			schedule__remove(&d->delayed, found[i]);
			found[i]->due_ms = 0;
			outbox__push(&d->outbox, &d->outbox.owed, found[i]);
		}
		free(found);
	}

	struct dlq_envelope *e = d->outbox.owed.head;
	while(e){
		struct dlq_envelope *next = e->next;
		if(unreachable(d, e)){
			snprintf(reason, sizeof(reason), d->cfg.broker_persistence
					? "the broker restarted and subscriber " QFMT " had no session that survives it"
					: "the broker restarted without persistence, so subscriber " QFMT " has no session to receive its retry copy",
					Q(e->target_client));
			struct dlq_envelope *dl = envelope__dead_letter_from_copy(e, reason, port__wall_ms());
			if(dl){
				dl->seq = d->next_seq++;
				outbox__unlink(&d->outbox, &d->outbox.owed, e);
				envelope__free(e);
				outbox__push(&d->outbox, &d->outbox.owed, dl);
			}
		}
		e = next;
	}
}

int persist__open(struct dlq *d, char *err, size_t errlen)
{
	d->persist.journal_fd = -1;
	if(!enabled(d)) return 0;

	size_t n = strlen(d->cfg.state_file) + sizeof(".journal");
	d->persist.journal_path = malloc(n);
	if(d->persist.journal_path == NULL) return ENOMEM;
	snprintf(d->persist.journal_path, n, "%s.journal", d->cfg.state_file);

	int rc = restore_file(d, d->cfg.state_file, false, err, errlen);
	if(rc == 0) rc = restore_file(d, d->persist.journal_path, true, err, errlen);
	if(rc) return rc;
	settle_restored_copies(d);

	if(d->cfg.state_save_on_change){
		d->persist.journal_fd = open(d->persist.journal_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if(d->persist.journal_fd < 0){
			rc = errno;
			snprintf(err, errlen, "cannot open \"%s\": %s", d->persist.journal_path, strerror(rc));
			return rc;
		}
	}else{
		(void)unlink(d->persist.journal_path);
	}
	/* A fresh snapshot proves the file can be written, and folds the
	 * journal in. */
	rc = save_snapshot(d);
	if(rc){
		snprintf(err, errlen, "cannot write the state file \"%s\": %s", d->cfg.state_file, strerror(rc));
	}
	return rc;
}

/* Appends an encoded entry to the journal; sync says whether to fdatasync. */
static void journal_write(struct dlq *d, struct dlq_headers *h, int rc, bool sync)
{
	if(rc == 0) rc = sync ? state__append(d->persist.journal_fd, h->data, h->len)
			: state__append_nosync(d->persist.journal_fd, h->data, h->len);
	if(rc) report_failure(d, "journal entry not written", strerror(rc));
}

void persist__note_add(struct dlq *d, const struct dlq_envelope *e, bool sync)
{
	if(d->persist.journal_fd < 0) return;
	struct dlq_headers h = {0};
	int rc = state__encode_add(e, port__now_ms(), port__wall_ms(), &h);
	journal_write(d, &h, rc, sync);
	headers__free(&h);
}

void persist__note_record(struct dlq *d, const struct dlq_record *r)
{
	if(d->persist.journal_fd < 0) return;
	struct dlq_headers h = {0};
	int rc = state__encode_record(r, port__now_ms(), port__wall_ms(), &h);
	journal_write(d, &h, rc, true);
	headers__free(&h);
}

void persist__note_nacker(struct dlq *d, const struct dlq_record *r, const char *client)
{
	if(d->persist.journal_fd < 0) return;
	struct dlq_headers h = {0};
	int rc = state__encode_nacker(r, client, &h);
	journal_write(d, &h, rc, true);
	headers__free(&h);
}

void persist__note_hold(struct dlq *d, const struct dlq_record *r, const char *client)
{
	if(d->persist.journal_fd < 0) return;
	struct dlq_headers h = {0};
	int rc = state__encode_hold(r, client, &h);
	journal_write(d, &h, rc, false);
	headers__free(&h);
}

void persist__note_remove(struct dlq *d, uint64_t seq)
{
	if(d->persist.journal_fd < 0) return;
	if(d->persist.removed_count == d->persist.removed_capacity){
		size_t cap = d->persist.removed_capacity ? d->persist.removed_capacity * 2 : 64;
		uint64_t *r = realloc(d->persist.removed, cap * sizeof(*r));
		if(r == NULL){
			/* Not journaled: after a crash it would be published again,
			 * a duplicate, never a loss. */
			return;
		}
		d->persist.removed = r;
		d->persist.removed_capacity = cap;
	}
	d->persist.removed[d->persist.removed_count++] = seq;
}

void persist__tick(struct dlq *d, uint64_t now)
{
	if(!enabled(d)) return;
	if(d->persist.removed_count){
		struct dlq_headers h = {0};
		int rc = 0;
		for(size_t i = 0; rc == 0 && i < d->persist.removed_count; i++){
			rc = state__encode_remove(d->persist.removed[i], &h);
		}
		if(rc == 0) rc = state__append(d->persist.journal_fd, h.data, h.len);
		headers__free(&h);
		if(rc) report_failure(d, "journal entry not written", strerror(rc));
		d->persist.removed_count = 0;
	}
	if((now - d->persist.last_save_ms >= d->cfg.state_save_interval_ms && marker(d) != d->persist.saved_marker)
			|| (d->persist.failing && now - d->persist.last_save_ms >= 1000)){
		if(save_snapshot(d)) d->persist.last_save_ms = now;
	}
}

size_t persist__close(struct dlq *d)
{
	size_t owed = dlq__owed_count(d);
	if(enabled(d)){
		if(save_snapshot(d) == 0){
			port__log(DLQ_LOG_NOTICE, "state saved to %s: %zu NACKable deliveries, %zu retry copies or dead letters",
					d->cfg.state_file, d->ledger.count, owed);
			owed = 0;
		}
	}
	if(d->persist.journal_fd >= 0) close(d->persist.journal_fd);
	d->persist.journal_fd = -1;
	free(d->persist.journal_path);
	free(d->persist.removed);
	memset(&d->persist, 0, sizeof(d->persist));
	d->persist.journal_fd = -1;
	return owed;
}
