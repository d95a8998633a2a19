/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The dead-letter store's operations (letter_store.c), over the container
 * of model/letters.h: a dead letter named when it is made, kept once the
 * broker accepted it, the bounds (the store's, a policy's) held by dropping
 * the oldest (counted, and warned of at most once a minute), a letter found
 * by id, a letter deleted. The outbound path keeps letters through it,
 * start-up bounds the restored ones, api/ finds and deletes through it; a
 * redrive, which publishes, is above the outbound path (redrive.c). It
 * calls nothing of the engine's but the ports. It needs no view of struct
 * dlq to be included.
 */
#ifndef DLQ_LETTER_STORE_H
#define DLQ_LETTER_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/envelope.h"
#include "model/letters.h"
#include "util/id.h"

struct dlq;

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

/* Makes room for a letter of bytes (letters__bytes_of) of the policy with
 * index policy (-1: none): that policy's oldest letters dropped while its
 * own bound (dead_letter_keep=) needs it, then the store's oldest while
 * plugin_opt_dead_letter_keep does, each counted in dead_letters_dropped;
 * a letter larger than its bound is counted as dropped itself. Logs at
 * most once a minute. Returns how many were counted. With bytes 0 and
 * policy -1: the store brought within its bound (a smaller one at start). */
unsigned letter_store__room(struct dlq *d, size_t bytes, long policy);

/* The kept letter with id, or NULL (borrowed). */
struct dlq_letter *letter_store__find(const struct dlq *d, const struct dlq_id *id);

/* Removes l from the store and frees it, noted to the store port (an
 * operator's delete, a redrive once published, or the bound). */
void letter_store__delete(struct dlq *d, struct dlq_letter *l);

#endif
