/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The dead-letter store's operations (letter_store.c), over the container
 * of model/letters.h: a dead letter named when it is made, kept once the
 * broker accepted it, the bounds (the store's, a policy's) held by dropping
 * the oldest (counted, and warned of at most once a minute), the age bound
 * (the store's, a policy's) held by dropping those past it (counted
 * apart), a letter found
 * by id, a page of letters listed with filters and a cursor, a letter
 * deleted, a policy's letters purged, and who may read or redrive a letter.
 * The outbound path keeps letters through it, start-up bounds the restored
 * ones, api/ lists, gets and deletes through it; a redrive, which publishes,
 * is above the outbound path (redrive.c). It calls nothing of the engine's
 * but the ports. It needs no view of struct dlq (engine.h) to be included.
 */
#ifndef DLQ_LETTER_STORE_H
#define DLQ_LETTER_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/dlq.h"
#include "model/cause.h"
#include "model/envelope.h"
#include "model/letters.h"
#include "mosquitto_dlq.h"
#include "util/id.h"

/* Who asks for the store's letters: the client and the broker's access
 * answers for it (0: allowed). Consulted only with
 * plugin_opt_dead_letter_access check. */
struct letter_store_asker {
	const char *client;        /* borrowed */
	dlq_may_read_fn may_read;  /* NULL: the broker cannot check */
	dlq_may_read_fn may_write;
	void *ctx;                 /* for both */
};

/* Why the store does not answer an asker (letter_store__refusal). */
enum letter_store_refusal {
	LETTER_STORE_OPEN = 0,
	LETTER_STORE_OFF,       /* plugin_opt_dead_letter_keep 0: nothing is kept */
	LETTER_STORE_UNCHECKED, /* access check asked for, and the broker cannot check (no callbacks) */
};

/* Which letters a list shows, in which order, from where. */
struct letter_store_query {
	struct dlq_letter_match match; /* its strings borrowed */
	bool newest_first;
	size_t limit;            /* 1 to DLQ_MAX_LIST_LIMIT */
	bool cursor_given;       /* a later page: it starts after the letter of order cursor */
	uint64_t cursor;
};

/* A page of letters (letter_store__list). */
struct letter_store_page {
	const struct dlq_letter *letters[DLQ_MAX_LIST_LIMIT]; /* borrowed, in the order listed */
	size_t count;
	size_t matched; /* every letter the query matches that the asker may read; a first page only */
	bool more;      /* another page follows; its cursor is next */
	uint64_t next;
};

/* Draws the id a dead letter just made (e) is kept under in the store
 * (its dead-letter-id), before it is journaled, so that one published
 * again after a restart is known to the store. With the store off, or
 * when the random source fails, it has none (letter_store__keep draws one
 * then). */
void letter_store__name(struct dlq *d, struct dlq_envelope *e);

/* The broker accepted dead letter e: the store keeps a copy of it, the
 * oldest letters dropped first (letter_store__room) when it would pass
 * its policy's or the store's bound. One already kept (published again
 * after a restart) is left as it is, and makes no room. e stays the
 * caller's. Failures are logged: e was published, so the caller goes on. */
void letter_store__keep(struct dlq *d, const struct dlq_envelope *e);

/* What became of a letter collected from another broker. */
enum letter_store_collected {
	LETTER_STORE_COLLECTED_KEPT,
	LETTER_STORE_COLLECTED_DUPLICATE, /* the letter of that broker and id is kept already */
	LETTER_STORE_COLLECTED_CLASH,     /* another broker's letter of that id is kept: not kept */
	LETTER_STORE_COLLECTED_TOO_LARGE, /* larger than its bound: counted as dropped */
	LETTER_STORE_COLLECTED_OFF,       /* the store keeps nothing */
	LETTER_STORE_COLLECTED_NOMEM,
};

/* Keeps e (taken; a dead letter another broker's plugin made, read by
 * model/collected.h: its id the maker's dead-letter-id) as the newest
 * letter, of the policy of its filter here, if any, room made as for
 * the broker's own. The dedup key is the maker's name and its id: one of
 * that broker and id kept already is left as it is. Logs nothing (the
 * caller names the topic). */
enum letter_store_collected letter_store__keep_collected(struct dlq *d, struct dlq_envelope *e);

/* Makes room for a letter of bytes (letters__bytes_of) of the policy with
 * index policy (-1: none): that policy's oldest letters dropped while its
 * own bound (dead_letter_keep=) needs it, then the store's oldest while
 * plugin_opt_dead_letter_keep does, each counted in dead_letters_dropped;
 * a letter larger than its bound is counted as dropped itself. Logs at
 * most once a minute. Returns how many were counted. With bytes 0 and
 * policy -1: the store brought within its bound (a smaller one at start). */
unsigned letter_store__room(struct dlq *d, size_t bytes, long policy);

/* The age bound of the kept letters of the policy with index policy (-1:
 * none): its own dead_letter_keep_for=, else plugin_opt_dead_letter_keep_for;
 * 0: none. */
uint64_t letter_store__keep_for(const struct dlq *d, long policy);

/* Drops every kept letter whose dead-letter time (the wall clock) is
 * further back than its age bound (letter_store__keep_for): from each
 * policy's oldest on, so that a pass looks at the letters it drops and one
 * more per policy. Each is counted in dead_letters_expired (not
 * dead_letters_dropped); logged at most once a minute. Sets when the next
 * pass is due (d->letters_due_ms: the first letter's time, or in a minute
 * at the latest, so that a wall clock set forward is followed). now is
 * port__now_ms(). Drops at most limit: at the limit the next pass is due at
 * once. Returns how many were dropped. The tick calls it when due (a reload
 * makes it due at once) with LETTER_STORE_EXPIRE_PER_TICK, and start-up
 * after the restore with no limit (UINT_MAX). */
unsigned letter_store__expire(struct dlq *d, uint64_t now, unsigned limit);

/* Letters a tick's pass drops at most: some 2 ms at about 450 ns a letter
 * (BENCHMARKS.md, "The age bound's tick"). A bound shortened by a reload
 * over 89,100 letters took 40 ms in one pass; it now takes 22 ticks. */
#define LETTER_STORE_EXPIRE_PER_TICK 4096u

/* The kept letter with id, or NULL (borrowed). */
struct dlq_letter *letter_store__find(const struct dlq *d, const struct dlq_id *id);

/* Removes l from the store and frees it, noted to the store port (an
 * operator's delete, a redrive once published, or the bound). */
void letter_store__delete(struct dlq *d, struct dlq_letter *l);

/* Whether the store answers who at all (LETTER_STORE_OPEN), or why not. */
enum letter_store_refusal letter_store__refusal(const struct dlq *d, const struct letter_store_asker *who);

/* Whether who may read l (a READ check on its dead-letter topic with its
 * payload and QoS), and write it to topic (a redrive's target). Always
 * with plugin_opt_dead_letter_access control. */
bool letter_store__may_read(const struct dlq *d, const struct letter_store_asker *who, const struct dlq_letter *l);
bool letter_store__may_write(const struct dlq *d, const struct letter_store_asker *who, const struct dlq_letter *l,
		const char *topic);

/* Fills page with the letters q matches that who may read: a walk of the
 * store in q's order, from q's cursor; a page ends after q->limit letters
 * or near DLQ_MAX_LIST_REPLY_BYTES of reply. A first page counts every
 * match; a later one stops after its last letter plus one, and starts
 * where the previous page ended when its cursor is that page's next. */
void letter_store__list(struct dlq *d, const struct letter_store_query *q, const struct letter_store_asker *who,
		struct letter_store_page *page);

/* The kept letters by broker, sorted by name: *count tallies (borrowed,
 * valid until the store changes), kept up to date as letters come and go
 * (model/letters.h), so this costs nothing with many letters. Every kept
 * letter is counted, as getStatus' keptDeadLetters counts them, whoever
 * asks. */
const struct dlq_broker_tally *letter_store__brokers(const struct dlq *d, size_t *count);

/* Deletes every letter of the policy filter (NULL: every letter) that who
 * may read: *purged of them, *refused left for want of permission. */
void letter_store__purge(struct dlq *d, const struct letter_store_asker *who, const char *filter, size_t *purged,
		size_t *refused);

#endif
