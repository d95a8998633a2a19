/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of chains.c, the growing hash tables of the deliveries, the
 * deadlines, the dead-letter store and 2.0's indexes: a doubling moves the
 * chains a few per insert, never all at once, and every item is found,
 * unlinked and walked exactly once at every moment of it.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "check_suite.h"
#include "util/chains.h"

struct item {
	uint64_t value;
	struct item *next;
	bool seen;
};

#define NEXT offsetof(struct item, next)

static uint64_t item_key(const void *p)
{
	return chains__mix(((const struct item *)p)->value);
}

/* The item of this value in the table, found as the users find theirs. */
static struct item *find(const struct chains *c, uint64_t value)
{
	for(struct item *i = chains__first(c, chains__mix(value)); i; i = i->next){
		if(i->value == value) return i;
	}
	return NULL;
}

static void insert(struct chains *c, size_t *count, struct item *it)
{
	ck_assert_int_eq(chains__grow(c, *count, NEXT, item_key), 0);
	chains__link(c, it, item_key(it));
	(*count)++;
}

/* Every item linked is walked exactly once, and the walk finds no other. */
static void expect_walk(const struct chains *c, struct item *items, size_t n, size_t linked_from)
{
	for(size_t i = 0; i < n; i++) items[i].seen = false;
	size_t walked = 0;
	for(size_t k = 0; k < chains__count(c); k++){
		for(struct item *i = chains__chain(c, k); i; i = i->next){
			ck_assert_msg(!i->seen, "item %llu walked twice", (unsigned long long)i->value);
			ck_assert_uint_ge(i->value, linked_from);
			i->seen = true;
			walked++;
		}
	}
	ck_assert_uint_eq(walked, n - linked_from);
}

START_TEST(an_empty_table_finds_nothing_and_unlinks_nothing)
{
	struct chains c = {0};
	struct item it = { .value = 7 };
	ck_assert_ptr_null(find(&c, 7));
	ck_assert_uint_eq(chains__count(&c), 0);
	chains__unlink(&c, &it, item_key(&it));
	chains__free(&c);
}

/* The insert that finds as many items as chains starts a doubling; the
 * chains then move 8 per insert, so the table before lives for size/8
 * inserts, and at every step each item is found and walked once. */
START_TEST(a_doubling_moves_chains_over_the_following_inserts)
{
	enum { N = 2000 };
	struct item *items = calloc(N, sizeof(*items));
	struct chains c = {0};
	size_t count = 0;
	for(size_t i = 0; i < 256; i++){
		items[i].value = i;
		insert(&c, &count, &items[i]);
	}
	ck_assert_uint_eq(c.size, 256);
	ck_assert_ptr_null(c.old);

	items[256].value = 256;
	insert(&c, &count, &items[256]);
	ck_assert_uint_eq(c.size, 512);
	ck_assert_ptr_nonnull(c.old);
	ck_assert_uint_eq(c.nold, 256);
	ck_assert_uint_eq(c.moved, 0);
	size_t inserts = 0;
	for(size_t i = 257; c.old; i++){
		for(size_t j = 0; j < i; j++) ck_assert_ptr_eq(find(&c, j), &items[j]);
		expect_walk(&c, items, i, 0);
		items[i].value = i;
		insert(&c, &count, &items[i]);
		inserts++;
	}
	/* 256 chains, 8 an insert. */
	ck_assert_uint_eq(inserts, 32);
	ck_assert_uint_eq(c.size, 512);

	for(size_t i = count; i < N; i++){
		items[i].value = i;
		insert(&c, &count, &items[i]);
	}
	ck_assert_uint_eq(c.size, 2048);
	for(size_t j = 0; j < N; j++) ck_assert_ptr_eq(find(&c, j), &items[j]);
	expect_walk(&c, items, N, 0);
	chains__free(&c);
	free(items);
}

/* Items unlinked in the middle of a doubling, from either table, are gone;
 * the others stay found; a walk may unlink as it goes. */
START_TEST(unlink_works_in_both_tables_of_a_doubling)
{
	enum { N = 600 };
	struct item *items = calloc(N, sizeof(*items));
	struct chains c = {0};
	size_t count = 0;
	for(size_t i = 0; i < 260; i++){
		items[i].value = i;
		insert(&c, &count, &items[i]);
	}
	ck_assert_ptr_nonnull(c.old);
	ck_assert_uint_gt(c.moved, 0);
	ck_assert_uint_lt(c.moved, c.nold);
	/* Half of the items, wherever their chains are. */
	for(size_t i = 0; i < 260; i += 2){
		chains__unlink(&c, &items[i], item_key(&items[i]));
		count--;
	}
	for(size_t i = 0; i < 260; i++){
		ck_assert_ptr_eq(find(&c, i), i % 2 ? &items[i] : NULL);
	}
	/* A walk that unlinks every item it meets below 100. */
	for(size_t k = 0; k < chains__count(&c); k++){
		struct item *i = chains__chain(&c, k);
		while(i){
			struct item *next = i->next;
			if(i->value < 100){
				chains__unlink(&c, i, item_key(i));
				count--;
			}
			i = next;
		}
	}
	for(size_t i = 0; i < 260; i++){
		ck_assert_ptr_eq(find(&c, i), i % 2 && i >= 100 ? &items[i] : NULL);
	}
	ck_assert_uint_eq(count, 80);
	chains__free(&c);
	ck_assert_ptr_null(c.table);
	ck_assert_ptr_null(c.old);
	free(items);
}

/* No doubling when the items come and go below the table's size, however
 * many pass through it. */
START_TEST(a_steady_count_never_doubles)
{
	struct item items[200];
	struct chains c = {0};
	size_t count = 0;
	for(int round = 0; round < 50; round++){
		for(size_t i = 0; i < 200; i++){
			items[i] = (struct item){ .value = (uint64_t)round * 1000 + i };
			insert(&c, &count, &items[i]);
		}
		for(size_t i = 0; i < 200; i++){
			chains__unlink(&c, &items[i], item_key(&items[i]));
			count--;
		}
	}
	ck_assert_uint_eq(c.size, 256);
	ck_assert_ptr_null(c.old);
	ck_assert_uint_eq(chains__count(&c), 256);
	chains__free(&c);
}

/* Freed in the middle of a doubling: both tables go (LeakSanitizer). */
START_TEST(free_in_a_doubling_frees_both_tables)
{
	struct item items[270];
	struct chains c = {0};
	size_t count = 0;
	for(size_t i = 0; i < 270; i++){
		items[i].value = i;
		insert(&c, &count, &items[i]);
	}
	ck_assert_ptr_nonnull(c.old);
	chains__free(&c);
	ck_assert_ptr_null(c.old);
	ck_assert_uint_eq(c.size, 0);
}

int main(void)
{
	return check_run(check_suite("chains", tcase_create("chains"),
			CHECK_TESTS(an_empty_table_finds_nothing_and_unlinks_nothing,
			a_doubling_moves_chains_over_the_following_inserts, unlink_works_in_both_tables_of_a_doubling,
			a_steady_count_never_doubles, free_in_a_doubling_frees_both_tables)));
}
