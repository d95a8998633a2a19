/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of slab.c, where a start's restored records are made: pieces
 * aligned and apart, a chunk given back with its last piece, the slab with
 * its last chunk after the seal, the prefaulter ahead of the filling; and
 * a record made in a slab is freed into it (record.c).
 */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "check_suite.h"
#include "model/record.h"
#include "util/slab.h"

static char *chunk_of(const void *p)
{
	return (char *)((uintptr_t)p & ~(uintptr_t)(SLAB_CHUNK - 1));
}

/* Whether the page at p is mapped (mincore says ENOMEM of an address
 * outside every mapping), and if so whether it is resident. */
static bool mapped(const void *p, bool *resident)
{
	unsigned char v = 0;
	if(mincore((void *)((uintptr_t)p & ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1)), 1, &v) != 0){
		ck_assert_int_eq(errno, ENOMEM);
		return false;
	}
	if(resident) *resident = v & 1;
	return true;
}

#define PIECES 20000

START_TEST(pieces_are_aligned_apart_and_keep_what_is_written)
{
	struct slab *s = slab__new((size_t)PIECES * 600);
	ck_assert_ptr_nonnull(s);
	static unsigned char *piece[PIECES];
	static size_t size[PIECES];
	for(size_t i = 0; i < PIECES; i++){
		size[i] = 1 + (i * 7919) % 600;
		piece[i] = slab__alloc(s, size[i]);
		ck_assert_ptr_nonnull(piece[i]);
		ck_assert_uint_eq((uintptr_t)piece[i] % 16, 0);
		memset(piece[i], (int)(i & 0xFF), size[i]);
	}
	/* 20,000 pieces of 300 bytes on average: about 3 chunks. */
	ck_assert_uint_ge(slab__chunks(s), 3);
	unsigned char want[600];
	for(size_t i = 0; i < PIECES; i++){
		memset(want, (int)(i & 0xFF), size[i]);
		ck_assert_msg(memcmp(piece[i], want, size[i]) == 0, "piece %zu was overwritten", i);
	}
	slab__seal(s);
	for(size_t i = 0; i < PIECES; i++) slab__free(piece[i]);
	ck_assert(!mapped(piece[0], NULL));
}
END_TEST

START_TEST(a_piece_above_the_most_comes_from_elsewhere)
{
	struct slab *s = slab__new(4 * SLAB_CHUNK);
	ck_assert_ptr_null(slab__alloc(s, SLAB_PIECE_MAX + 1));
	void *p = slab__alloc(s, SLAB_PIECE_MAX);
	ck_assert_ptr_nonnull(p);
	slab__seal(s);
	ck_assert_ptr_null(slab__alloc(s, 16));
	slab__free(p);
}
END_TEST

START_TEST(a_full_slab_says_null)
{
	struct slab *s = slab__new(SLAB_CHUNK);
	enum { MOST = 16 * (SLAB_CHUNK / 1000) };
	static void *piece[MOST];
	size_t n = 0;
	while(n < MOST && (piece[n] = slab__alloc(s, 1000)) != NULL) n++;
	ck_assert_uint_lt(n, MOST);
	/* What was asked for, and at most what was mapped for it. */
	ck_assert_uint_ge(n * 1000, SLAB_CHUNK);
	ck_assert_uint_le(slab__chunks(s), 3);
	ck_assert_ptr_null(slab__alloc(s, 1000));
	slab__seal(s);
	/* The slab stays mapped while a piece lives. */
	for(size_t i = 1; i < n; i++) slab__free(piece[i]);
	ck_assert(mapped(piece[0], NULL));
	slab__free(piece[0]);
	ck_assert(!mapped(piece[0], NULL));
}
END_TEST

START_TEST(a_chunk_goes_back_with_its_last_piece)
{
	struct slab *s = slab__new(8 * SLAB_CHUNK);
	enum { N = 3 * (SLAB_CHUNK / 4096) };
	static void *piece[N];
	for(size_t i = 0; i < N; i++){
		piece[i] = slab__alloc(s, 4000);
		memset(piece[i], 1, 4000);
	}
	size_t chunks = slab__chunks(s);
	ck_assert_uint_ge(chunks, 3);
	char *first = chunk_of(piece[0]);
	size_t i = 0;
	for(; i < N && chunk_of(piece[i]) == first; i++) slab__free(piece[i]);
	ck_assert_uint_eq(slab__chunks(s), chunks - 1);
	bool resident = true;
	ck_assert(mapped(first + SLAB_CHUNK / 2, &resident));
	ck_assert(!resident);
	/* The chunk being filled stays while it is filled, with no piece. */
	char *open = chunk_of(piece[N - 1]);
	size_t j = N;
	while(j > i && chunk_of(piece[j - 1]) == open) slab__free(piece[--j]);
	ck_assert_uint_eq(slab__chunks(s), chunks - 1);
	slab__seal(s);
	ck_assert_uint_eq(slab__chunks(s), chunks - 2);
	for(; i < j; i++) slab__free(piece[i]);
	ck_assert(!mapped(piece[N / 2], NULL));
}
END_TEST

START_TEST(a_slab_sealed_without_pieces_goes_at_once)
{
	struct slab *s = slab__new(4 * SLAB_CHUNK);
	void *p = slab__alloc(s, 100);
	slab__free(p);
	ck_assert(mapped(p, NULL));
	slab__seal(s);
	ck_assert(!mapped(p, NULL));
	slab__seal(NULL);
	slab__seal(slab__new(SLAB_CHUNK));
}
END_TEST

START_TEST(the_prefaulter_goes_ahead_of_the_filling)
{
	struct slab *s = slab__new(32 * SLAB_CHUNK);
	ck_assert(slab__prefault(s));
	ck_assert(!slab__prefault(s));
	char *p = slab__alloc(s, 100);
	memset(p, 7, 100);
	/* The fourth chunk on: nobody but the prefaulter touches it. */
	char *ahead = chunk_of(p) + 4 * SLAB_CHUNK + SLAB_CHUNK / 2;
	bool resident = false;
	for(int tries = 0; tries < 1000 && !resident; tries++){
		ck_assert(mapped(ahead, &resident));
		if(!resident){
			struct timespec t = { 0, 10 * 1000 * 1000 };
			nanosleep(&t, NULL);
		}
	}
	ck_assert_msg(resident, "the prefaulter did not populate the chunks ahead in 10 s");
	/* What it populated reads as zero, and the pieces made there keep
	 * what is written. */
	ck_assert_int_eq(*ahead, 0);
	slab__seal(s);
	/* The seal gives back the chunks never filled, populated or not. */
	ck_assert(!mapped(ahead, NULL));
	ck_assert_int_eq(p[99], 7);
	slab__free(p);
	ck_assert(!mapped(p, NULL));
}
END_TEST

START_TEST(a_record_made_in_a_slab_is_freed_into_it)
{
	struct dlq_policy policy = { .filter = (char *)"jobs/#" };
	struct dlq_id id = { { 1 } }, origin = { { 2 } };
	struct slab *s = slab__new(4 * SLAB_CHUNK);
	const struct dlq_record_init in = { &id, &origin, "jobs/retry", "jobs/1", "payload", 7, NULL, 0, &policy, 2, 1, 7 };
	struct dlq_record *r = record__make(&in, 0, s);
	ck_assert_ptr_nonnull(r);
	ck_assert(r->flags & DLQ_RECORD_SLAB);
	ck_assert(r->flags & DLQ_RECORD_MORE);
	ck_assert_str_eq(record__topic(r), "jobs/retry");
	ck_assert_uint_eq(record__more(r)->attempt, 2);
	struct dlq_record *m = record__make(&in, DLQ_RECORD_SENDS, NULL);
	ck_assert(!(m->flags & DLQ_RECORD_SLAB));
	ck_assert_uint_eq(record__bytes(m), record__bytes(r));
	record__free(m);
	slab__seal(s);
	ck_assert(mapped(r, NULL));
	record__free(r);
	ck_assert(!mapped(r, NULL));
}
END_TEST

int main(void)
{
	return check_run(check_suite("slab", check_timeout(tcase_create("slab"), 60), CHECK_TESTS(
			pieces_are_aligned_apart_and_keep_what_is_written, a_piece_above_the_most_comes_from_elsewhere,
			a_full_slab_says_null, a_chunk_goes_back_with_its_last_piece,
			a_slab_sealed_without_pieces_goes_at_once, the_prefaulter_goes_ahead_of_the_filling,
			a_record_made_in_a_slab_is_freed_into_it)));
}
