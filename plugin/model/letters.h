/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The dead-letter store: every dead letter the broker accepted, kept (its
 * envelope: payload, the original properties, origin topic and id, reason,
 * client, filter, time, retry-count) until an operator takes it, so that
 * one made before anybody subscribed to the dead-letter topic is not lost.
 * Kept in the order the broker accepted them (the order they were made,
 * but for one the broker refused for a while), found by their id (the
 * envelope's id, published as dead-letter-id), and bounded (max_bytes):
 * the engine's store (engine/letter_store.c) drops the oldest to make room
 * (letters__oldest_of, letters__remove) and counts it, and those past
 * their age from each policy's oldest on (letters__oldest_unpoliced for
 * the letters of no policy). Per-policy
 * tallies are by the index of the letter's filter in the current policy
 * table, found again after a reload (letters__retable). The letters hold
 * no policy pointer: a reload may free the table. Per-broker tallies (the
 * letters, bytes and newest letter of each dead-letter-broker) are kept as
 * letters come and go, for a summary by broker (listBrokers) that does not
 * walk the store.
 */
#ifndef DLQ_LETTERS_H
#define DLQ_LETTERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/cause.h"
#include "model/envelope.h"
#include "util/chains.h"
#include "util/id.h"

struct dlq_policy_table;

/* Which letters a list or a redrive task takes: every member given must
 * match (letters__matches). The parser of these members is one, api's
 * letter_filter.c; a list (engine/letter_store.h) and a task
 * (model/redrive_task.h) both carry one. */
struct dlq_letter_match {
	const char *filter;      /* NULL: any, else the letter's policy filter exactly */
	const char *dead_letter; /* NULL: any, else the dead-letter topic exactly */
	const char *reason;      /* NULL: any, else a part of the reason */
	const char *broker;      /* NULL: any, else the broker that made the letter exactly (dead-letter-broker) */
	bool cause_given;        /* only the letters of cause (their dead-letter-cause) */
	enum dlq_cause cause;
	bool since_given, until_given;
	int64_t since, until;    /* ms since the epoch, both inclusive */
};

/* A place in the age list kept across removals: a walk that goes on from
 * one tick to the next (a redrive task) registers one (letters__track),
 * and when the letter it is at leaves the store it moves on to the next
 * newer one. at NULL: past the newest. */
struct dlq_letter_cursor {
	struct dlq_letter *at;            /* borrowed */
	struct dlq_letter_cursor *next;   /* the store's list of cursors */
};

struct dlq_letter {
	struct dlq_letter *hnext;  /* chain by id */
	struct dlq_letter *older;  /* age list */
	struct dlq_letter *newer;
	struct dlq_envelope *env;  /* owned: the dead letter as published (env->policy NULL) */
	uint64_t order;            /* increasing in the order kept: list cursors */
	long policy;               /* index of env->filter in the current table; -1: none */
	size_t bytes;              /* counted against the bound */
};

struct dlq_letter_tally {
	uint64_t count;
	uint64_t bytes;
	struct dlq_letter *oldest; /* borrowed: the policy's oldest letter, NULL when none */
};

/* The letters of one broker (their dead-letter-broker; "" for letters
 * without one): kept up to date as letters are kept and leave, so that a
 * summary by broker costs a line per broker, not a walk of the store. */
struct dlq_broker_tally {
	char *name;                /* owned */
	uint64_t count;
	uint64_t bytes;
	struct dlq_letter *newest; /* borrowed: the broker's newest kept letter */
};

struct dlq_letters {
	struct chains index;         /* of the letters, by id */
	size_t count;
	uint64_t bytes;              /* sum of the letters' bytes */
	uint64_t max_bytes;          /* the bound; 0: nothing is kept */
	uint64_t next_order;
	struct dlq_letter *oldest;
	struct dlq_letter *newest;
	struct dlq_letter_tally *per; /* owned: by policy index of the current table */
	size_t per_count;
	/* The letters of no policy of the current table (policy -1: their
	 * filter left it in a reload or before a restart), tallied apart so
	 * that their oldest is at hand too (the age bound's walk). */
	struct dlq_letter_tally unpoliced;
	/* Borrowed: the letter the last list page ended at
	 * (engine/letter_store.c), so that the next page starts there instead
	 * of walking to its cursor; NULL once it leaves the store. */
	struct dlq_letter *page_end;
	/* Borrowed: the cursors registered (letters__track). */
	struct dlq_letter_cursor *cursors;
	/* Owned: a tally per broker with kept letters, sorted by name
	 * (strcmp); brokers of them, room for brokers_cap. */
	struct dlq_broker_tally *brokers;
	size_t broker_count;
	size_t brokers_cap;
};

/* Sets up an empty store for table with the bound max_bytes (0: off).
 * Returns 0 or ENOMEM. */
int letters__init(struct dlq_letters *s, const struct dlq_policy_table *table, uint64_t max_bytes);
/* Frees every letter. */
void letters__cleanup(struct dlq_letters *s);

/* Bytes a letter made of e would count against the bound. */
size_t letters__bytes_of(const struct dlq_envelope *e);

/* Whether bytes more would pass the bound (then drop the oldest first, or
 * keep nothing when the letter alone is larger than the bound). */
static inline bool letters__over(const struct dlq_letters *s, size_t bytes)
{
	return s->bytes + bytes > s->max_bytes;
}

/* Keeps e (a dead letter, taken: the engine's copy of what it published,
 * or the state file's restore; its id names the letter) as the newest
 * letter; table gives its policy index by filter. A letter of that id
 * already kept is left as it is (a dead letter published again after a
 * restart): *out is then the kept one, EEXIST returned and e freed.
 * Returns 0 (*out the new letter, borrowed), EEXIST, or ENOMEM (e freed).
 * Does not make room. */
int letters__adopt(struct dlq_letters *s, struct dlq_envelope *e, const struct dlq_policy_table *table,
		struct dlq_letter **out);

/* The index in table of the policy whose filter is filter exactly (a
 * letter's dead-letter-filter), or -1 (none, or filter NULL). */
long letters__policy_of(const struct dlq_policy_table *table, const char *filter);

/* The letter with this id, or NULL. */
struct dlq_letter *letters__find(const struct dlq_letters *s, const struct dlq_id *id);

/* Unlinks l from the store (its bytes and tally with it); the caller frees
 * it with letters__free. */
void letters__remove(struct dlq_letters *s, struct dlq_letter *l);
void letters__free(struct dlq_letter *l);

/* The tallies again after a reload put table in place. Returns 0 or
 * ENOMEM (then the tallies are all zero: status says 0 until the next
 * reload). */
int letters__retable(struct dlq_letters *s, const struct dlq_policy_table *table);

/* The oldest letter of the policy with index i, or NULL. */
struct dlq_letter *letters__oldest_of(const struct dlq_letters *s, size_t i);

/* The oldest letter of no policy of the current table, or NULL. */
static inline struct dlq_letter *letters__oldest_unpoliced(const struct dlq_letters *s)
{
	return s->unpoliced.oldest;
}

/* Whether e (a kept letter's envelope) is one m takes. */
bool letters__matches(const struct dlq_letter_match *m, const struct dlq_envelope *e);

/* Registers c (borrowed until letters__untrack), placed at the oldest
 * letter, and unregisters it. */
void letters__track(struct dlq_letters *s, struct dlq_letter_cursor *c);
void letters__untrack(struct dlq_letters *s, struct dlq_letter_cursor *c);
/* Registers c placed at at (a letter of s, borrowed; NULL: past the
 * newest): a walk restored where it was. */
void letters__track_at(struct dlq_letters *s, struct dlq_letter_cursor *c, struct dlq_letter *at);

/* The tallies by broker, sorted by name: *count of them (borrowed; valid
 * until the store changes). */
static inline const struct dlq_broker_tally *letters__brokers(const struct dlq_letters *s, size_t *count)
{
	*count = s->broker_count;
	return s->brokers;
}

/* The tally of the policy with index i (zero when out of range). */
struct dlq_letter_tally letters__tally(const struct dlq_letters *s, size_t i);

#endif
