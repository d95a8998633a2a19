/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A slab: one mapping of whole 2 MiB chunks, asked of the kernel as huge
 * pages, carved front to back for many pieces made at once and freed one
 * by one afterwards (a start's restored records). A chunk goes back to the
 * system when its last piece is freed, and the slab when its last chunk
 * does.
 *
 * Why (docs/design.md, "A start from a million records"): a start from
 * 1,000,000 records allocated 280 MiB piece by piece, and the kernel's
 * first touch of each 4 KiB page took half of the start on this machine;
 * one touch per 2 MiB takes a few milliseconds. Where the kernel gives no
 * huge pages, the pages come as malloc's would.
 *
 * Not thread-safe: one thread makes and frees (the broker's); the only
 * other is the slab's own prefaulter, until the seal.
 */
#ifndef DLQ_SLAB_H
#define DLQ_SLAB_H

#include <stdbool.h>
#include <stddef.h>

#define SLAB_CHUNK ((size_t)2 << 20)
/* Pieces above this come from malloc (slab__alloc says NULL), so that a
 * chunk never wastes more than an eighth at its end. */
#define SLAB_PIECE_MAX (SLAB_CHUNK / 8)

struct slab;

/* Reserves room for about bytes of pieces (address space only: a chunk
 * takes memory when first written). NULL when the mapping is refused. */
struct slab *slab__new(size_t bytes);

/* A piece of n bytes, aligned as malloc's, or NULL: n above
 * SLAB_PIECE_MAX, the slab full or sealed. Free it with slab__free. */
void *slab__alloc(struct slab *s, size_t n);

/* Starts a thread that has the kernel populate the chunks a little ahead
 * of those filled, so that their pages are zeroed on another core (what
 * made the first touch costly). Until slab__seal, no piece may be freed
 * but in the chunk being filled. false: no thread (the slab works the
 * same, touched page by page). */
bool slab__prefault(struct slab *s);

/* Ends the making (and the prefaulter): the room never used goes back, and from now on the
 * slab belongs to its pieces (gone with the last, at once if none). s may
 * be NULL. */
void slab__seal(struct slab *s);

/* Frees a piece slab__alloc gave. */
void slab__free(void *piece);

/* Chunks of s that hold a piece or are being filled (for tests). */
size_t slab__chunks(const struct slab *s);

#endif
