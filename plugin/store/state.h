/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The plugin's durable state: a snapshot file holding the NACK ledger,
 * every envelope not yet taken by the broker (owed, delayed, or accepted but
 * not yet taken) and the kept dead letters (model/letters.h), and an
 * optional journal of their changes written on
 * every change between snapshots. Every entry carries a CRC, so a truncated
 * or damaged file restores what precedes the damage; an entry holding what
 * the plugin never writes (state_check.h) is damage too. Encoding and decoding
 * work on buffers; the file functions do the I/O (write, fsync, rename).
 */
#ifndef DLQ_STATE_H
#define DLQ_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/ledger.h"
#include "util/headers.h"

struct dlq_deadline;
struct dlq_deadlines;
struct dlq_envelope;
struct dlq_envelope_list;
struct dlq_history;
struct dlq_holds;
struct dlq_delivery_saved;
struct dlq_id;
struct dlq_letter;
struct dlq_letters;
struct dlq_outbox;
struct dlq_redrive_task;
struct dlq_redrive_tasks;
struct dlq_redelivery;
struct dlq_schedule;

/* What the state file holds, borrowed from its owner (the engine): the
 * writer and the reader see these parts, never the engine itself. */
struct state_view {
	struct dlq_ledger *ledger;          /* NACKable deliveries */
	struct dlq_outbox *outbox;          /* owed, sent and settling envelopes */
	struct dlq_schedule *delayed;       /* envelopes waiting for their delay */
	struct dlq_holds *holds;            /* retry copies held for clients */
	struct dlq_envelope_list *unsaved;  /* taken by the broker, not yet saved by it */
	struct dlq_redelivery *redelivery;  /* the deliveries' counts; NULL: none are kept */
	struct dlq_letters *letters;        /* the kept dead letters; NULL: none are kept (read, checked, dropped) */
	struct dlq_deadlines *deadlines;    /* deliveries awaiting settlement; NULL: none are kept (read, checked) */
	struct dlq_history **history;       /* the owner's array of each policy's rate history, by index of policies
	                                       (a reload replaces the array); NULL: none kept (read, checked) */
	struct dlq_redrive_tasks *tasks;    /* redrive tasks; NULL: none are kept (read, checked) */
	uint64_t *next_seq;                 /* envelope sequence numbers: restored ones are not reused */
	const struct dlq_policy_table *policies; /* a restored entry finds its policy here, by filter */
	uint64_t nack_window_ms;            /* records older than this are not restored */
	uint64_t journal_covers;            /* the last journal generation the snapshot holds (0: none): written
	                                       by state__encode_snapshot, set by state_read__decode_snapshot */
	uint8_t record_part;                /* what restored records are made with, besides what they need:
	                                       0, DLQ_RECORD_MORE or DLQ_RECORD_SENDS (record__make) */
	const char *broker_name;            /* borrowed: a dead letter saved without a broker (a file written before
	                                       broker names) is restored as this broker's; NULL: left without one */
};

/* What a decode found. */
struct state_report {
	size_t records;          /* ledger records restored */
	size_t records_skipped;  /* their policy is no longer configured, or they expired */
	size_t envelopes;        /* envelopes restored (after the journal: still live) */
	size_t letters;          /* kept dead letters restored (as envelopes: a journal's counted as added) */
	size_t journal_entries;  /* journal entries applied */
	uint64_t journal_generation; /* the journal's generation; 0: written before generations */
	bool journal_held;       /* the snapshot holds that generation already: nothing was applied */
	bool damaged;            /* the data ended in a damaged or truncated entry */
	size_t damaged_at;       /* its byte offset */
	char problem[160];       /* what was wrong and where, for the log ("checksum mismatch at byte N",
	                            "a NACKable delivery with a content type holding U+0000 at byte N") */
};

/* Encodes the whole state of v (ledger, every envelope not yet taken, then
 * the kept dead letters, oldest first) as a snapshot into out (appended).
 * Returns 0 or ENOMEM. */
int state__encode_snapshot(const struct state_view *v, uint64_t mono_now, int64_t wall_now, struct dlq_headers *out);

/* Takes len bytes of an encoded snapshot on their way out. Returns 0 or an
 * errno. */
typedef int state_flush_fn(void *ctx, const uint8_t *data, size_t len);

/* state__encode_snapshot in pieces: the entries go to flush whenever about
 * chunk bytes of them are ready, so that no more than that is held at once
 * (the background save writes them to its file as they come). Returns 0,
 * ENOMEM, or flush's error. */
int state__encode_snapshot_to(const struct state_view *v, uint64_t mono_now, int64_t wall_now, size_t chunk,
		state_flush_fn *flush, void *ctx);

/* Restores a snapshot into v, whose parts must be freshly initialised. Envelopes go to the schedule (delay still running) or to
 * "owed" (due, or never taken); kept dead letters to v->letters, oldest
 * first (letters__adopt, which does not make room: the owner trims them to
 * its bound). Returns 0, or ENOMEM; damage is not an
 * error: it is reported in rep and what came before it is kept. */
int state_read__decode_snapshot(struct state_view *v, const uint8_t *data, size_t len, uint64_t mono_now, int64_t wall_now,
		struct state_report *rep);

/* Journal entries: an envelope added, the envelope with seq removed, a
 * ledger record added, a client that NACKed a record, or a record held for
 * a client. Appended to out. Each returns 0 or ENOMEM. A journal begins
 * with state__encode_journal_start (its header and generation, >= 1);
 * state__encode_journal_header writes the header alone, as files written
 * before generations have it. */
int state__encode_journal_start(uint64_t generation, struct dlq_headers *out);
int state__encode_journal_header(struct dlq_headers *out);
int state__encode_add(const struct dlq_envelope *e, uint64_t mono_now, int64_t wall_now, struct dlq_headers *out);
int state__encode_remove(uint64_t seq, struct dlq_headers *out);
int state__encode_record(const struct dlq_record *r, uint64_t mono_now, int64_t wall_now, struct dlq_headers *out);
/* client settled its delivery of r, how (enum dlq_settled_how). */
int state__encode_settler(const struct dlq_record *r, const char *client, uint8_t how, struct dlq_headers *out);
/* The retry copy r is held for client (holds.h); in a snapshot, after r. */
int state__encode_hold(const struct dlq_record *r, const char *client, struct dlq_headers *out);
/* The counts of the delivery of r to s->client (model/deliveries.h); in a
 * snapshot, after r. */
int state__encode_delivery(const struct dlq_record *r, const struct dlq_delivery_saved *s, struct dlq_headers *out);
/* A delivery awaiting settlement (model/deadlines.h): its record's id, its
 * client, and when its clock runs out (wall clock; 0: no clock yet); in a
 * snapshot, after every record, each client's in their order. */
int state__encode_deadline(const struct dlq_deadline *e, uint64_t mono_now, int64_t wall_now, struct dlq_headers *out);
/* A kept dead letter (model/letters.h): its envelope, written as
 * state__encode_add writes one; in a snapshot, after the envelopes. */
int state__encode_letter(const struct dlq_letter *l, uint64_t mono_now, int64_t wall_now, struct dlq_headers *out);
/* The rate history h of the policy filter (model/history.h): its minutes
 * in the hour up to wall_now that hold anything; nothing when none do.
 * In a snapshot, after the kept dead letters. Returns 0 or ENOMEM. */
int state__encode_history(const struct dlq_history *h, const char *filter, int64_t wall_now, struct dlq_headers *out);
/* The kept dead letter with id left the store (journal only). */
int state__encode_letter_gone(const struct dlq_id *id, struct dlq_headers *out);

/* A redrive task (model/redrive_task.h): its filter, target, rate,
 * state and counters; in a snapshot after the kept letters, oldest first;
 * journaled when it starts, ends or makes progress, a later entry
 * replacing an earlier one of its id. */
int state__encode_task(const struct dlq_redrive_task *t, struct dlq_headers *out);

/* Applies a journal to v after its snapshot: adds envelopes, records and
 * kept dead letters not yet there, removes the envelopes and letters named,
 * adds settlers, sets deliveries' counts. Same damage rules
 * as the snapshot, except that a journal has no end: it is cut anywhere.
 * A journal whose generation is v->journal_covers or older is not applied
 * (rep->journal_held). */
int state_read__decode_journal(struct state_view *v, const uint8_t *data, size_t len, uint64_t mono_now, int64_t wall_now,
		struct state_report *rep);

/* Writes data to path atomically: path.tmp, fsync, rename, fsync of the
 * directory. Returns 0 or an errno with a message in err. */
int state_file__write(const char *path, const uint8_t *data, size_t len, char *err, size_t errlen);

/* Writes what fill writes to fd (returning 0 or an errno) to path,
 * atomically as state_file__write does. */
typedef int state_fill_fn(void *ctx, int fd);
int state_file__write_with(const char *path, state_fill_fn *fill, void *ctx, char *err, size_t errlen);

/* Writes all of data to fd (EINTR and short writes handled). Returns 0 or
 * an errno. */
int state_file__write_fd(int fd, const uint8_t *data, size_t len);

/* Syncs the directory of path (fsync): a file created, renamed or removed
 * in it is durable then. Best effort. */
void state_file__sync_dir(const char *path);

/* Reads a whole file into a malloc'd buffer. A missing file is *data NULL
 * and returns 0. Returns an errno with a message in err otherwise. */
int state_file__read(const char *path, uint8_t **data, size_t *len, char *err, size_t errlen);

/* A whole file to read once: mapped (a start reads 300 MB at 1,000,000
 * records without copying it into the heap), or read into the heap where
 * it cannot be mapped (empty, not a regular file). */
struct state_bytes {
	const uint8_t *data;         /* NULL: no such file */
	size_t len;
	void *map;                   /* the mapping, or NULL */
	uint8_t *heap;               /* the buffer read, or NULL */
};

/* Opens path into b as state_file__read reads it: 0 (a missing file is
 * b->data NULL), or an errno with a message in err. Release with
 * state_file__unload. */
int state_file__load(const char *path, struct state_bytes *b, char *err, size_t errlen);
void state_file__unload(struct state_bytes *b);

/* Appends data to an open journal and syncs it (fdatasync). Returns 0 or
 * an errno. */
int state_file__append(int fd, const uint8_t *data, size_t len);

/* The same without the sync (the next synced append covers it). */
int state_file__append_nosync(int fd, const uint8_t *data, size_t len);

/* CRC-32 (IEEE) of data, as the entries carry it. */
uint32_t state__crc32(const uint8_t *data, size_t len);

#endif
