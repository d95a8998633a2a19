/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A slab (see slab.h): a mapping aligned to its chunks; each chunk starts
 * with a header that counts its live pieces, so that a piece finds its
 * chunk by its address alone. The chunk being filled holds one count of
 * its own until the next is opened or the slab is sealed.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "util/slab.h"

struct slab_chunk {
	struct slab *slab;
	size_t live;       /* pieces, plus one while it is being filled */
};

#define PIECE_ALIGN 16u
#define HEADER_SIZE ((sizeof(struct slab_chunk) + PIECE_ALIGN - 1) & ~(size_t)(PIECE_ALIGN - 1))

struct slab {
	char *base;        /* the mapping, SLAB_CHUNK-aligned */
	size_t mapped;     /* its length */
	struct slab_chunk *open; /* being filled, or NULL */
	char *next;        /* the next piece in it */
	char *end;         /* the end of the chunks opened so far (base if none); read by the
	                      prefaulter, with atomic loads */
	size_t chunks;     /* chunks opened and not yet given back */
	bool sealed;
	/* The prefaulter (slab__prefault): */
	pthread_t thread;
	bool prefaulting;
	bool stop;         /* atomic: the thread is asked to end */
};

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
/* How far ahead of the chunks opened the prefaulter goes. */
#define PREFAULT_AHEAD (16 * SLAB_CHUNK)

struct slab *slab__new(size_t bytes)
{
	/* An eighth more for the ends of chunks, and one chunk for the last. */
	size_t want = bytes + bytes / 8 + SLAB_CHUNK;
	if(want < bytes) return NULL;
	size_t mapped = (want + SLAB_CHUNK - 1) & ~(SLAB_CHUNK - 1);
	struct slab *s = calloc(1, sizeof(*s));
	if(s == NULL) return NULL;
	char *raw = mmap(NULL, mapped + SLAB_CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if(raw == MAP_FAILED){
		free(s);
		return NULL;
	}
	char *base = (char *)(((uintptr_t)raw + SLAB_CHUNK - 1) & ~(uintptr_t)(SLAB_CHUNK - 1));
	if(base > raw) munmap(raw, (size_t)(base - raw));
	char *tail = base + mapped, *raw_end = raw + mapped + SLAB_CHUNK;
	if(raw_end > tail) munmap(tail, (size_t)(raw_end - tail));
	/* Refused where the kernel has no transparent huge pages: the
	 * pages then come one by one, as malloc's do. */
	(void)madvise(base, mapped, MADV_HUGEPAGE);
	s->base = base;
	s->mapped = mapped;
	s->next = s->end = base;
	return s;
}

static void destroy(struct slab *s)
{
	if(s->mapped) munmap(s->base, s->mapped);
	free(s);
}

/* A chunk's last piece is gone. Returns true when the slab went with it. */
static bool chunk_gone(struct slab_chunk *c)
{
	struct slab *s = c->slab;
	(void)madvise(c, SLAB_CHUNK, MADV_DONTNEED);
	s->chunks--;
	if(!s->sealed || s->chunks) return false;
	destroy(s);
	return true;
}

void *slab__alloc(struct slab *s, size_t n)
{
	if(s->sealed || n > SLAB_PIECE_MAX) return NULL;
	n = (n + PIECE_ALIGN - 1) & ~(size_t)(PIECE_ALIGN - 1);
	if(s->open == NULL || n > (size_t)(s->end - s->next)){
		if(s->mapped - (size_t)(s->end - s->base) < SLAB_CHUNK) return NULL;
		struct slab_chunk *c = (struct slab_chunk *)s->end;
		c->slab = s;
		c->live = 1;
		s->chunks++;
		struct slab_chunk *was = s->open;
		s->open = c;
		s->next = s->end + HEADER_SIZE;
		__atomic_store_n(&s->end, s->end + SLAB_CHUNK, __ATOMIC_RELAXED);
		/* The new chunk holds the slab: this cannot be its last. */
		if(was && --was->live == 0) (void)chunk_gone(was);
	}
	void *p = s->next;
	s->next += n;
	s->open->live++;
	return p;
}

/* The prefaulter: asks the kernel for the chunks ahead of those opened,
 * a few at a time, so that their pages are zeroed on another core while
 * the broker's thread fills the ones before. It only populates (the
 * contents stay zero, as a first touch would leave them) and never goes
 * past the mapping. */
static void *prefault_run(void *arg)
{
	struct slab *s = arg;
	char *limit = s->base + s->mapped;
	for(char *p = s->base; p < limit && !__atomic_load_n(&s->stop, __ATOMIC_RELAXED);){
		char *end = __atomic_load_n(&s->end, __ATOMIC_RELAXED);
		/* Behind the filling: those were touched by their pieces. */
		if(p < end) p = end;
		if(p >= end + PREFAULT_AHEAD){
			struct timespec t = { 0, 200 * 1000 };
			nanosleep(&t, NULL);
			continue;
		}
		if(p >= limit || madvise(p, SLAB_CHUNK, MADV_POPULATE_WRITE) != 0) break; /* an older kernel, or no memory */
		p += SLAB_CHUNK;
	}
	return NULL;
}

bool slab__prefault(struct slab *s)
{
	if(s->prefaulting || s->sealed) return false;
	s->prefaulting = pthread_create(&s->thread, NULL, prefault_run, s) == 0;
	return s->prefaulting;
}

void slab__seal(struct slab *s)
{
	if(s == NULL || s->sealed) return;
	if(s->prefaulting){
		__atomic_store_n(&s->stop, true, __ATOMIC_RELAXED);
		pthread_join(s->thread, NULL);
		s->prefaulting = false;
	}
	s->sealed = true;
	size_t used = (size_t)(s->end - s->base);
	if(used < s->mapped) munmap(s->base + used, s->mapped - used);
	s->mapped = used;
	struct slab_chunk *c = s->open;
	s->open = NULL;
	if(c && --c->live == 0){
		(void)chunk_gone(c);
		return;
	}
	if(s->chunks == 0) destroy(s);
}

void slab__free(void *piece)
{
	struct slab_chunk *c = (struct slab_chunk *)((uintptr_t)piece & ~(uintptr_t)(SLAB_CHUNK - 1));
	if(--c->live == 0) (void)chunk_gone(c);
}

size_t slab__chunks(const struct slab *s)
{
	return s->chunks;
}
