/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of id.c: dlq-ids are 96 random bits written as exactly 16
 * base64url characters. The text form must round-trip, anything else must be
 * refused, and ids must come from the random source and nowhere else: when it
 * fails, no id is made.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "fake_port.h"
#include "mosquitto_dlq.h"
#include "util/id.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static void expect_text_form(const char *s)
{
	ck_assert_uint_eq(strlen(s), DLQ_ID_LEN);
	for(size_t i = 0; i < DLQ_ID_LEN; i++){
		ck_assert_msg(strchr(alphabet, s[i]) != NULL, "'%c' in %s is not base64url", s[i], s);
	}
}

START_TEST(known_vectors_encode_as_rfc4648_base64url)
{
	struct dlq_id id;
	char text[DLQ_ID_LEN + 1];

	memset(id.raw, 0, sizeof(id.raw));
	id__encode(&id, text);
	ck_assert_str_eq(text, "AAAAAAAAAAAAAAAA");

	memset(id.raw, 0xff, sizeof(id.raw));
	id__encode(&id, text);
	ck_assert_str_eq(text, "________________");

	for(int i = 0; i < DLQ_ID_RAW_LEN; i++) id.raw[i] = (uint8_t)i;
	id__encode(&id, text);
	ck_assert_str_eq(text, "AAECAwQFBgcICQoL");

	/* The two characters that differ from standard base64: '-' and '_'. */
	const uint8_t raw[DLQ_ID_RAW_LEN] = {0xfb, 0xef, 0xbe, 0xff, 0xff, 0xff, 0x00, 0x10, 0x83, 0x10, 0x51, 0x87};
	memcpy(id.raw, raw, sizeof(raw));
	id__encode(&id, text);
	ck_assert_str_eq(text, "----____ABCDEFGH");
}
END_TEST

START_TEST(decode_inverts_encode)
{
	struct dlq_idgen g;
	id__gen_init(&g);
	for(int i = 0; i < 1000; i++){
		struct dlq_id id, back;
		char text[DLQ_ID_LEN + 1];
		ck_assert_int_eq(id__gen_next(&g, &id), 0);
		id__encode(&id, text);
		expect_text_form(text);
		ck_assert(id__decode(text, DLQ_ID_LEN, &back));
		ck_assert_mem_eq(back.raw, id.raw, sizeof(id.raw));
		ck_assert_uint_eq(id__hash(&back), id__hash(&id));
		ck_assert_uint_eq(id__prefix12_text(text), id__prefix12(&id));
		ck_assert_uint_eq(id__prefix12(&id), ((unsigned)id.raw[0] << 4) | (id.raw[1] >> 4));
	}
}
END_TEST

START_TEST(every_character_decodes_in_every_position)
{
	/* 16 characters carry exactly 96 bits: every base64url string of that
	 * length is an id, and encoding it gives the same string back. */
	for(size_t pos = 0; pos < DLQ_ID_LEN; pos++){
		for(size_t c = 0; c < 64; c++){
			char text[DLQ_ID_LEN + 1], again[DLQ_ID_LEN + 1];
			memset(text, 'Q', DLQ_ID_LEN);
			text[DLQ_ID_LEN] = '\0';
			text[pos] = alphabet[c];
			struct dlq_id id;
			ck_assert_msg(id__decode(text, DLQ_ID_LEN, &id), "%s refused", text);
			id__encode(&id, again);
			ck_assert_str_eq(again, text);
		}
	}
}
END_TEST

START_TEST(decode_refuses_wrong_lengths)
{
	struct dlq_id id;
	const char *s = "AAECAwQFBgcICQoLAAAA";
	ck_assert(!id__decode(s, 0, &id));
	ck_assert(!id__decode(s, 15, &id));
	ck_assert(!id__decode(s, 17, &id));
	ck_assert(!id__decode(s, 20, &id));
	ck_assert(!id__decode("", 0, &id));
	ck_assert(!id__decode(NULL, 0, &id));
	/* Only len bytes count: a longer string cut at 16 is an id. */
	ck_assert(id__decode(s, 16, &id));
	char text[DLQ_ID_LEN + 1];
	id__encode(&id, text);
	ck_assert_str_eq(text, "AAECAwQFBgcICQoL");
}
END_TEST

START_TEST(decode_refuses_characters_outside_base64url)
{
	const char bad[] = {'+', '/', '=', ' ', '\n', '\0', '.', '~', '*', '\x80', '\xff', '\x7f'};
	for(size_t pos = 0; pos < DLQ_ID_LEN; pos++){
		for(size_t i = 0; i < sizeof(bad); i++){
			char text[DLQ_ID_LEN];
			memset(text, 'A', sizeof(text));
			text[pos] = bad[i];
			struct dlq_id id;
			ck_assert_msg(!id__decode(text, DLQ_ID_LEN, &id),
					"0x%02x at %zu accepted", (unsigned char)bad[i], pos);
		}
	}
	/* Standard base64 of the same bytes as "----____ABCDEFGH". */
	struct dlq_id id;
	ck_assert(!id__decode("++++////ABCDEFGH", DLQ_ID_LEN, &id));
}
END_TEST

static int cmp_id(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct dlq_id));
}

START_TEST(idgen_draws_distinct_ids)
{
	enum { N = 20000 };
	struct dlq_id *ids = malloc(N * sizeof(*ids));
	ck_assert_ptr_nonnull(ids);
	struct dlq_idgen g;
	id__gen_init(&g);
	for(int i = 0; i < N; i++){
		ck_assert_int_eq(id__gen_next(&g, &ids[i]), 0);
	}
	qsort(ids, N, sizeof(*ids), cmp_id);
	for(int i = 1; i < N; i++){
		ck_assert_msg(memcmp(&ids[i - 1], &ids[i], sizeof(*ids)) != 0, "an id was drawn twice");
	}
	free(ids);
}
END_TEST

START_TEST(idgen_draws_distinct_ids_from_the_os)
{
	fake.use_os_random = true;
	struct dlq_idgen g;
	id__gen_init(&g);
	struct dlq_id a, b;
	ck_assert_int_eq(id__gen_next(&g, &a), 0);
	for(int i = 0; i < 500; i++){
		ck_assert_int_eq(id__gen_next(&g, &b), 0);
		ck_assert(memcmp(&a, &b, sizeof(a)) != 0);
	}
}
END_TEST

START_TEST(ids_are_the_random_sources_bytes)
{
	/* The fake's random stream does not depend on how it is read, so the
	 * ids must be its bytes, 12 at a time, in order: nothing is mixed in. */
	enum { N = 200 };
	struct dlq_idgen g;
	id__gen_init(&g);
	struct dlq_id ids[N];
	for(int i = 0; i < N; i++){
		ck_assert_int_eq(id__gen_next(&g, &ids[i]), 0);
	}
	fake_reset();
	uint8_t stream[N * DLQ_ID_RAW_LEN];
	ck_assert_int_eq(port__random(stream, sizeof(stream)), 0);
	for(int i = 0; i < N; i++){
		ck_assert_mem_eq(ids[i].raw, stream + i * DLQ_ID_RAW_LEN, DLQ_ID_RAW_LEN);
	}
}
END_TEST

START_TEST(a_failing_random_source_makes_no_id)
{
	struct dlq_idgen g;
	id__gen_init(&g);
	struct dlq_id id;
	fake.fail_random = 1;
	ck_assert_int_ne(id__gen_next(&g, &id), 0);
	ck_assert_int_eq(fake.fail_random, 0); /* it did ask */
	/* Once the source works again, so does the generator. */
	ck_assert_int_eq(id__gen_next(&g, &id), 0);
}
END_TEST

START_TEST(a_failure_when_the_pool_runs_out_makes_no_id)
{
	struct dlq_idgen g;
	id__gen_init(&g);
	struct dlq_id first, id;
	ck_assert_int_eq(id__gen_next(&g, &first), 0);
	/* Exhaust the pool, counting draws that need no random call. */
	size_t calls = 0;
	int drawn = 1;
	fake.fail_random = 1000000;
	while(id__gen_next(&g, &id) == 0){
		drawn++;
		ck_assert_int_lt(drawn, 100000);
	}
	calls = 1000000 - (size_t)fake.fail_random;
	ck_assert_uint_eq(calls, 1);
	ck_assert_int_eq(drawn, (int)(sizeof(g.pool) / DLQ_ID_RAW_LEN));
	/* Every further draw fails while the source does: no id from an empty
	 * or reused pool. */
	for(int i = 0; i < 10; i++){
		ck_assert_int_ne(id__gen_next(&g, &id), 0);
	}
	fake.fail_random = 0;
	ck_assert_int_eq(id__gen_next(&g, &id), 0);
	ck_assert(memcmp(&id, &first, sizeof(id)) != 0);
}
END_TEST

static void setup(void)
{
	fake_reset();
}

static void teardown(void)
{
	fake_reset();
}

/* id__hashes_distinct sorts (least significant byte first, an even
 * number of passes: the sorted order ends in hashes) and says whether any
 * two are equal, wherever they are and whichever bytes they differ in. */
START_TEST(hashes_are_distinct_unless_two_are_equal)
{
	enum { N = 3000 };
	uint64_t *h = malloc(2 * N * sizeof(*h));
	ck_assert_ptr_nonnull(h);
	uint64_t x = 88172645463325252u;
	for(size_t i = 0; i < N; i++){
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		h[i] = x;
	}
	uint64_t keep[N];
	memcpy(keep, h, sizeof(keep));
	ck_assert(id__hashes_distinct(h, h + N, N));
	for(size_t i = 1; i < N; i++) ck_assert_uint_lt(h[i - 1], h[i]);
	/* Two equal that differ from their neighbours only in the top byte,
	 * far apart. */
	memcpy(h, keep, sizeof(keep));
	h[N - 1] = h[5] = 0xAB00000000000000u;
	h[6] = 0xAC00000000000000u;
	ck_assert(!id__hashes_distinct(h, h + N, N));
	ck_assert(id__hashes_distinct(h, h + N, 1));
	ck_assert(id__hashes_distinct(h, h + N, 0));
	free(h);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("id");
	check_add(s, check_fixture(tcase_create("text"), setup, teardown),
			CHECK_TESTS(known_vectors_encode_as_rfc4648_base64url, decode_inverts_encode,
			every_character_decodes_in_every_position, decode_refuses_wrong_lengths,
			decode_refuses_characters_outside_base64url));

	check_add(s, check_fixture(tcase_create("idgen"), setup, teardown), CHECK_TESTS(idgen_draws_distinct_ids,
			idgen_draws_distinct_ids_from_the_os, ids_are_the_random_sources_bytes, a_failing_random_source_makes_no_id,
			a_failure_when_the_pool_runs_out_makes_no_id, hashes_are_distinct_unless_two_are_equal));
	return check_run(s);
}
