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

#include "model/envelope.h"
#include "model/letters.h"
#include "model/outbox.h"
#include "model/schedule.h"
#include "store/persist.h"
#include "store/state.h"
#include "util/errtext.h"
#include "util/port.h"

static bool enabled(const struct dlq_persist *p)
{
	return p->opt.state_file != NULL;
}

/* Changes whenever anything a snapshot holds may have changed. */
static uint64_t marker(const struct dlq_persist *p)
{
	return *p->opt.changes + p->opt.totals->tracked + p->opt.totals->nacks + p->opt.totals->expired
			+ p->opt.totals->evicted;
}

/* Envelopes not yet taken by the broker: those a snapshot must hold. */
static size_t owed_count(const struct state_view *v)
{
	return v->outbox->owed.count + v->outbox->sent.count + v->outbox->settling.count + v->delayed->count;
}

/* The end of a log line saying how many dead letters are kept: "" when
 * the store is off. */
static void kept_letters(const struct dlq_persist *p, size_t n, char *out, size_t size)
{
	out[0] = '\0';
	if(p->view.letters) snprintf(out, size, ", %zu kept dead letters", n);
}

static void report_failure(struct dlq_persist *p, const char *what, const char *detail)
{
	if(!p->failing){
		port__log(DLQ_LOG_ERR, "state file problem: %s: %s; the state will be saved again at the next chance", what, detail);
	}
	p->failing = true;
}

static int save_snapshot(struct dlq_persist *p)
{
	char err[256];
	struct dlq_headers buf = {0};
	uint64_t now = port__now_ms();
	int rc = state__encode_snapshot(&p->view, now, port__wall_ms(), &buf);
	if(rc == 0) rc = state__write_file(p->opt.state_file, buf.data, buf.len, err, sizeof(err));
	else snprintf(err, sizeof(err), "out of memory");
	headers__free(&buf);
	if(rc){
		report_failure(p, "snapshot not saved", err);
		return rc;
	}
	/* The snapshot holds everything the journal said: start it afresh. */
	if(p->journal_fd >= 0){
		struct dlq_headers h = {0};
		if(ftruncate(p->journal_fd, 0) || lseek(p->journal_fd, 0, SEEK_SET) < 0
				|| state__encode_journal_header(&h)
				|| state__append(p->journal_fd, h.data, h.len)){
			report_failure(p, "journal not restarted", strerror(errno ? errno : EIO));
		}
		headers__free(&h);
	}
	p->last_save_ms = now;
	p->saved_marker = marker(p);
	if(p->failing){
		port__log(DLQ_LOG_NOTICE, "state file saved again: %s", p->opt.state_file);
	}
	p->failing = false;
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

static int restore_file(struct dlq_persist *p, const char *path, bool journal, char *err, size_t errlen)
{
	uint8_t *data = NULL;
	size_t len = 0;
	int rc = state__read_file(path, &data, &len, err, errlen);
	if(rc || data == NULL) return rc;

	struct state_report rep;
	memset(&rep, 0, sizeof(rep));
	if(journal){
		rc = state__decode_journal(&p->view, data, len, port__now_ms(), port__wall_ms(), &rep);
	}else{
		rc = state__decode_snapshot(&p->view, data, len, port__now_ms(), port__wall_ms(), &rep);
	}
	free(data);
	if(rc){
		snprintf(err, errlen, "out of memory restoring \"%s\"", path);
		return rc;
	}
	if(journal){
		port__log(DLQ_LOG_NOTICE, "state journal %s: %zu entries applied", path, rep.journal_entries);
	}else{
		char kept[64];
		kept_letters(p, rep.letters, kept, sizeof(kept));
		port__log(DLQ_LOG_NOTICE, "state file %s: restored %zu NACKable deliveries (%zu expired or without their policy "
				"skipped) and %zu retry copies or dead letters%s", path, rep.records, rep.records_skipped,
				rep.envelopes, kept);
	}
	if(rep.damaged){
		port__log(DLQ_LOG_ERR, "state file problem: %s is damaged (%s): what came before it was restored, the rest is lost",
				path, rep.problem);
		keep_aside(path, journal ? "damaged state journal" : "damaged state file");
	}
	return 0;
}

int persist__restore(struct dlq_persist *p, const struct persist_options *o, const struct state_view *view,
		char *err, size_t errlen)
{
	memset(p, 0, sizeof(*p));
	p->journal_fd = -1;
	p->opt = *o;
	p->view = *view;
	if(!enabled(p)) return 0;

	size_t n = strlen(p->opt.state_file) + sizeof(".journal");
	p->journal_path = malloc(n);
	if(p->journal_path == NULL) return ENOMEM;
	snprintf(p->journal_path, n, "%s.journal", p->opt.state_file);

	int rc = restore_file(p, p->opt.state_file, false, err, errlen);
	if(rc == 0) rc = restore_file(p, p->journal_path, true, err, errlen);
	return rc;
}

int persist__start(struct dlq_persist *p, char *err, size_t errlen)
{
	int rc;

	if(!enabled(p)) return 0;
	if(p->opt.save_on_change){
		p->journal_fd = open(p->journal_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if(p->journal_fd < 0){
			rc = errno;
			snprintf(err, errlen, "cannot open \"%s\": %s", p->journal_path, strerror(rc));
			return rc;
		}
	}else{
		(void)unlink(p->journal_path);
	}
	/* A fresh snapshot proves the file can be written, and folds the
	 * journal in. */
	rc = save_snapshot(p);
	if(rc){
		snprintf(err, errlen, "cannot write the state file \"%s\": %s", p->opt.state_file, strerror(rc));
	}
	return rc;
}

/* Appends an encoded entry to the journal; sync says whether to fdatasync. */
static void journal_write(struct dlq_persist *p, struct dlq_headers *h, int rc, bool sync)
{
	if(rc == 0) rc = sync ? state__append(p->journal_fd, h->data, h->len)
			: state__append_nosync(p->journal_fd, h->data, h->len);
	if(rc) report_failure(p, "journal entry not written", strerror(rc));
}

static void note_add(void *ctx, const struct dlq_envelope *e, bool sync)
{
	struct dlq_persist *p = ctx;
	if(p->journal_fd < 0) return;
	struct dlq_headers h = {0};
	int rc = state__encode_add(e, port__now_ms(), port__wall_ms(), &h);
	journal_write(p, &h, rc, sync);
	headers__free(&h);
}

static void note_record(void *ctx, const struct dlq_record *r)
{
	struct dlq_persist *p = ctx;
	if(p->journal_fd < 0) return;
	struct dlq_headers h = {0};
	int rc = state__encode_record(r, port__now_ms(), port__wall_ms(), &h);
	journal_write(p, &h, rc, true);
	headers__free(&h);
}

static void note_settler(void *ctx, const struct dlq_record *r, const char *client, uint8_t how)
{
	struct dlq_persist *p = ctx;
	if(p->journal_fd < 0) return;
	struct dlq_headers h = {0};
	int rc = state__encode_settler(r, client, how, &h);
	journal_write(p, &h, rc, true);
	headers__free(&h);
}

static void note_hold(void *ctx, const struct dlq_record *r, const char *client)
{
	struct dlq_persist *p = ctx;
	if(p->journal_fd < 0) return;
	struct dlq_headers h = {0};
	int rc = state__encode_hold(r, client, &h);
	journal_write(p, &h, rc, false);
	headers__free(&h);
}

static void note_delivery(void *ctx, const struct dlq_record *r, const struct dlq_delivery_saved *saved)
{
	struct dlq_persist *p = ctx;
	if(p->journal_fd < 0) return;
	struct dlq_headers h = {0};
	int rc = state__encode_delivery(r, saved, &h);
	journal_write(p, &h, rc, false);
	headers__free(&h);
}

static void note_deadline(void *ctx, const struct dlq_deadline *e)
{
	struct dlq_persist *p = ctx;
	if(p->journal_fd < 0) return;
	struct dlq_headers h = {0};
	int rc = state__encode_deadline(e, port__now_ms(), port__wall_ms(), &h);
	journal_write(p, &h, rc, false);
	headers__free(&h);
}

static void note_letter(void *ctx, const struct dlq_letter *l)
{
	struct dlq_persist *p = ctx;
	if(p->journal_fd < 0) return;
	struct dlq_headers h = {0};
	int rc = state__encode_letter(l, port__now_ms(), port__wall_ms(), &h);
	journal_write(p, &h, rc, true);
	headers__free(&h);
}

static void note_letter_gone(void *ctx, const struct dlq_id *id)
{
	struct dlq_persist *p = ctx;
	if(p->journal_fd < 0) return;
	struct dlq_headers h = {0};
	int rc = state__encode_letter_gone(id, &h);
	journal_write(p, &h, rc, false);
	headers__free(&h);
}

static void note_remove(void *ctx, uint64_t seq)
{
	struct dlq_persist *p = ctx;
	if(p->journal_fd < 0) return;
	if(p->removed_count == p->removed_capacity){
		size_t cap = p->removed_capacity ? p->removed_capacity * 2 : 64;
		uint64_t *r = realloc(p->removed, cap * sizeof(*r));
		if(r == NULL){
			/* Not journaled: after a crash it would be published again,
			 * a duplicate, never a loss. */
			return;
		}
		p->removed = r;
		p->removed_capacity = cap;
	}
	p->removed[p->removed_count++] = seq;
}

void persist__tick(struct dlq_persist *p, uint64_t now)
{
	if(!enabled(p)) return;
	if(p->removed_count){
		struct dlq_headers h = {0};
		int rc = 0;
		for(size_t i = 0; rc == 0 && i < p->removed_count; i++){
			rc = state__encode_remove(p->removed[i], &h);
		}
		if(rc == 0) rc = state__append(p->journal_fd, h.data, h.len);
		headers__free(&h);
		if(rc) report_failure(p, "journal entry not written", strerror(rc));
		p->removed_count = 0;
	}
	if((now - p->last_save_ms >= p->opt.save_interval_ms && marker(p) != p->saved_marker)
			|| (p->failing && now - p->last_save_ms >= 1000)){
		if(save_snapshot(p)) p->last_save_ms = now;
	}
}

static const struct dlq_store_ops journal_ops = {
	.note_add = note_add,
	.note_record = note_record,
	.note_settler = note_settler,
	.note_hold = note_hold,
	.note_remove = note_remove,
	.note_delivery = note_delivery,
	.note_deadline = note_deadline,
	.note_letter = note_letter,
	.note_letter_gone = note_letter_gone,
};

struct dlq_store_port persist__port(struct dlq_persist *p)
{
	struct dlq_store_port port = { NULL, NULL };
	if(p->journal_fd >= 0){
		port.ops = &journal_ops;
		port.ctx = p;
	}
	return port;
}

size_t persist__close(struct dlq_persist *p)
{
	size_t owed = p->view.outbox ? owed_count(&p->view) : 0;
	if(enabled(p)){
		if(save_snapshot(p) == 0){
			char kept[64];
			kept_letters(p, p->view.letters ? p->view.letters->count : 0, kept, sizeof(kept));
			port__log(DLQ_LOG_NOTICE, "state saved to %s: %zu NACKable deliveries, %zu retry copies or dead letters%s",
					p->opt.state_file, p->view.ledger->count, owed, kept);
			owed = 0;
		}
	}
	if(p->journal_fd >= 0) close(p->journal_fd);
	p->journal_fd = -1;
	free(p->journal_path);
	free(p->removed);
	memset(p, 0, sizeof(*p));
	p->journal_fd = -1;
	return owed;
}
