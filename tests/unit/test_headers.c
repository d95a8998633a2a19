/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of headers.c: the flat, length-prefixed list that carries a
 * message's MQTT v5 properties through the core. Every kind must come back
 * from the buffer byte for byte, including empty and 65535-byte parts; a
 * malformed buffer must stop the walk instead of reading past its end; and
 * the plugin's reserved user property names must be told from look-alikes.
 */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "fake_port.h"
#include "mosquitto_dlq.h"
#include "test_util.h"
#include "util/headers.h"

/* Reads the next entry and checks its kind and its parts byte for byte,
 * including the NUL each part is promised to end with. b == NULL: the entry
 * must have no second part. */
static void expect_entry(const struct dlq_headers *h, size_t *pos, uint8_t kind,
		const void *a, size_t a_len, const void *b, size_t b_len)
{
	struct dlq_header e;
	ck_assert_msg(headers__next(h->data, h->len, pos, &e), "entry missing at %zu", *pos);
	ck_assert_uint_eq(e.kind, kind);
	ck_assert_uint_eq(e.a_len, a_len);
	ck_assert_ptr_nonnull(e.a);
	if(a_len) ck_assert_mem_eq(e.a, a, a_len);
	ck_assert_int_eq(e.a[a_len], '\0');
	if(b == NULL){
		ck_assert_ptr_null(e.b);
		ck_assert_uint_eq(e.b_len, 0);
	}else{
		ck_assert_ptr_nonnull(e.b);
		ck_assert_uint_eq(e.b_len, b_len);
		if(b_len) ck_assert_mem_eq(e.b, b, b_len);
		ck_assert_int_eq(e.b[b_len], '\0');
	}
}

static void expect_end(const struct dlq_headers *h, size_t pos)
{
	struct dlq_header e;
	size_t p = pos;
	ck_assert(!headers__next(h->data, h->len, &p, &e));
	ck_assert_uint_eq(p, pos);
	ck_assert_uint_eq(pos, h->len);
}

/* An entry of a list: added with headers__add (user: headers__add_user,
 * its kind DLQ_HDR_USER_PROPERTY), and what must be read back. */
struct entry {
	bool user;
	uint8_t kind;
	const void *a;
	size_t a_len;
	const void *b;
	size_t b_len;
};

/* Adds entries to an empty list in their order, then reads each back, byte
 * for byte, and nothing after them. */
static void expect_round_trip(const struct entry *entries, size_t n)
{
	struct dlq_headers h = {0};
	for(size_t i = 0; i < n; i++){
		const struct entry *e = &entries[i];
		if(e->user){
			ck_assert_int_eq(headers__add_user(&h, e->a, e->b), 0);
		}else{
			ck_assert_int_eq(headers__add(&h, e->kind, e->a, e->a_len, e->b, e->b_len), 0);
		}
	}
	size_t pos = 0;
	for(size_t i = 0; i < n; i++){
		expect_entry(&h, &pos, entries[i].kind, entries[i].a, entries[i].a_len, entries[i].b, entries[i].b_len);
	}
	expect_end(&h, pos);
	headers__free(&h);
}

START_TEST(every_kind_round_trips_in_order)
{
	static const uint8_t format = 1;
	static const char corr[] = {'\0', 'a', '\0', '\xff', 'b'};
	const struct entry entries[] = {
		{false, DLQ_HDR_PAYLOAD_FORMAT, &format, 1, NULL, 0},
		{false, DLQ_HDR_CONTENT_TYPE, "application/json", 16, NULL, 0},
		{false, DLQ_HDR_RESPONSE_TOPIC, "replies/sub1", 12, NULL, 0},
		{false, DLQ_HDR_CORRELATION_DATA, corr, sizeof(corr), NULL, 0},
		{false, DLQ_HDR_USER_PROPERTY, "trace", 5, "abc-123", 7},
		{true, DLQ_HDR_USER_PROPERTY, "tenant", 6, "acme", 4},
	};
	expect_round_trip(entries, ARRAY_LEN(entries));
}
END_TEST

START_TEST(the_encoding_is_the_documented_one)
{
	/* kind | a_len (BE) | a | NUL [| b_len (BE) | b | NUL] */
	struct dlq_headers h = {0};
	ck_assert_int_eq(headers__add(&h, DLQ_HDR_CONTENT_TYPE, "ab", 2, NULL, 0), 0);
	ck_assert_int_eq(headers__add_user(&h, "k", "vw"), 0);
	const uint8_t want[] = {
		3, 0, 2, 'a', 'b', 0,
		38, 0, 1, 'k', 0, 0, 2, 'v', 'w', 0,
	};
	ck_assert_uint_eq(h.len, sizeof(want));
	ck_assert_mem_eq(h.data, want, sizeof(want));
	headers__free(&h);
}
END_TEST

START_TEST(empty_parts_round_trip)
{
	const struct entry entries[] = {
		{false, DLQ_HDR_CONTENT_TYPE, "", 0, NULL, 0},
		{false, DLQ_HDR_CORRELATION_DATA, NULL, 0, NULL, 0},
		{true, DLQ_HDR_USER_PROPERTY, "", 0, "", 0},
		{true, DLQ_HDR_USER_PROPERTY, "name-only", 9, "", 0},
		{true, DLQ_HDR_USER_PROPERTY, "", 0, "value-only", 10},
	};
	expect_round_trip(entries, ARRAY_LEN(entries));
}
END_TEST

START_TEST(parts_of_65535_bytes_round_trip)
{
	const size_t max = 65535;
	char *a = malloc(max);
	char *b = malloc(max);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	for(size_t i = 0; i < max; i++){
		a[i] = (char)('a' + i % 26);
		b[i] = (char)(i % 251); /* binary, with NULs */
	}
	struct dlq_headers h = {0};
	ck_assert_int_eq(headers__add(&h, DLQ_HDR_USER_PROPERTY, a, max, b, max), 0);
	ck_assert_int_eq(headers__add(&h, DLQ_HDR_CORRELATION_DATA, b, max, NULL, 0), 0);
	ck_assert_int_eq(headers__add(&h, DLQ_HDR_CONTENT_TYPE, a, max, NULL, 0), 0);

	size_t pos = 0;
	expect_entry(&h, &pos, DLQ_HDR_USER_PROPERTY, a, max, b, max);
	expect_entry(&h, &pos, DLQ_HDR_CORRELATION_DATA, b, max, NULL, 0);
	expect_entry(&h, &pos, DLQ_HDR_CONTENT_TYPE, a, max, NULL, 0);
	expect_end(&h, pos);
	headers__free(&h);
	free(a);
	free(b);
}
END_TEST

START_TEST(parts_over_65535_bytes_are_refused)
{
	const size_t over = 65536;
	char *big = calloc(1, over);
	ck_assert_ptr_nonnull(big);
	struct dlq_headers h = {0};
	ck_assert_int_eq(headers__add_user(&h, "before", "x"), 0);
	size_t len = h.len;

	ck_assert_int_eq(headers__add(&h, DLQ_HDR_CONTENT_TYPE, big, over, NULL, 0), EINVAL);
	ck_assert_int_eq(headers__add(&h, DLQ_HDR_CORRELATION_DATA, big, over, NULL, 0), EINVAL);
	ck_assert_int_eq(headers__add(&h, DLQ_HDR_USER_PROPERTY, big, over, "v", 1), EINVAL);
	ck_assert_int_eq(headers__add(&h, DLQ_HDR_USER_PROPERTY, "n", 1, big, over), EINVAL);
	/* A refused entry leaves the list as it was. */
	ck_assert_uint_eq(h.len, len);

	size_t pos = 0;
	expect_entry(&h, &pos, DLQ_HDR_USER_PROPERTY, "before", 6, "x", 1);
	expect_end(&h, pos);
	headers__free(&h);
	free(big);
}
END_TEST

START_TEST(many_entries_grow_the_buffer)
{
	struct dlq_headers h = {0};
	char name[32], value[32];
	for(int i = 0; i < 5000; i++){
		snprintf(name, sizeof(name), "name-%d", i);
		snprintf(value, sizeof(value), "value-%d", i * 7);
		ck_assert_int_eq(headers__add_user(&h, name, value), 0);
	}
	size_t pos = 0;
	for(int i = 0; i < 5000; i++){
		snprintf(name, sizeof(name), "name-%d", i);
		snprintf(value, sizeof(value), "value-%d", i * 7);
		expect_entry(&h, &pos, DLQ_HDR_USER_PROPERTY, name, strlen(name), value, strlen(value));
	}
	expect_end(&h, pos);
	headers__free(&h);
}
END_TEST

START_TEST(append_raw_concatenates_lists)
{
	struct dlq_headers a = {0}, b = {0};
	ck_assert_int_eq(headers__add(&a, DLQ_HDR_CONTENT_TYPE, "text/plain", 10, NULL, 0), 0);
	ck_assert_int_eq(headers__add_user(&a, "x", "1"), 0);
	ck_assert_int_eq(headers__add_user(&b, "y", "2"), 0);

	ck_assert_int_eq(headers__append_raw(&b, a.data, a.len), 0);
	ck_assert_int_eq(headers__append_raw(&b, NULL, 0), 0);
	ck_assert_int_eq(headers__add_user(&b, "z", "3"), 0);

	size_t pos = 0;
	expect_entry(&b, &pos, DLQ_HDR_USER_PROPERTY, "y", 1, "2", 1);
	expect_entry(&b, &pos, DLQ_HDR_CONTENT_TYPE, "text/plain", 10, NULL, 0);
	expect_entry(&b, &pos, DLQ_HDR_USER_PROPERTY, "x", 1, "1", 1);
	expect_entry(&b, &pos, DLQ_HDR_USER_PROPERTY, "z", 1, "3", 1);
	expect_end(&b, pos);

	/* Appending to an empty list copies the list. */
	struct dlq_headers c = {0};
	ck_assert_int_eq(headers__append_raw(&c, a.data, a.len), 0);
	ck_assert_uint_eq(c.len, a.len);
	ck_assert_mem_eq(c.data, a.data, a.len);

	headers__free(&a);
	headers__free(&b);
	headers__free(&c);
}
END_TEST

START_TEST(an_empty_list_has_no_entries)
{
	struct dlq_headers h = {0};
	struct dlq_header e;
	size_t pos = 0;
	ck_assert(!headers__next(h.data, h.len, &pos, &e));
	ck_assert(!headers__next(NULL, 0, &pos, &e));
	ck_assert_uint_eq(pos, 0);
	headers__free(&h); /* freeing an empty list is harmless */
	headers__free(&h);
	ck_assert_ptr_null(h.data);
	ck_assert_uint_eq(h.len, 0);
}
END_TEST

START_TEST(truncated_buffers_stop_the_walk)
{
	struct dlq_headers h = {0};
	ck_assert_int_eq(headers__add(&h, DLQ_HDR_CONTENT_TYPE, "text", 4, NULL, 0), 0);
	size_t first = h.len;
	ck_assert_int_eq(headers__add_user(&h, "name", "value"), 0);

	/* Every cut inside the second entry: the first is read, then the walk
	 * stops where the complete entries end, never reading past cut. */
	for(size_t cut = first + 1; cut < h.len; cut++){
		uint8_t *copy = malloc(cut); /* exact size: ASan sees any overread */
		memcpy(copy, h.data, cut);
		size_t pos = 0;
		struct dlq_header e;
		ck_assert(headers__next(copy, cut, &pos, &e));
		ck_assert_uint_eq(e.kind, DLQ_HDR_CONTENT_TYPE);
		ck_assert_uint_eq(pos, first);
		ck_assert_msg(!headers__next(copy, cut, &pos, &e), "cut at %zu read as an entry", cut);
		ck_assert_uint_eq(pos, first);
		free(copy);
	}
	/* Every cut inside the first entry: nothing at all. */
	for(size_t cut = 1; cut < first; cut++){
		uint8_t *copy = malloc(cut);
		memcpy(copy, h.data, cut);
		size_t pos = 0;
		struct dlq_header e;
		ck_assert_msg(!headers__next(copy, cut, &pos, &e), "cut at %zu read as an entry", cut);
		ck_assert_uint_eq(pos, 0);
		free(copy);
	}
	headers__free(&h);
}
END_TEST

START_TEST(an_overlong_length_stops_the_walk)
{
	/* Claims 0xffff bytes of content type, has three. */
	const uint8_t bad[] = {3, 0xff, 0xff, 'a', 'b', 'c', 0};
	size_t pos = 0;
	struct dlq_header e;
	ck_assert(!headers__next(bad, sizeof(bad), &pos, &e));
	ck_assert_uint_eq(pos, 0);

	/* A user property whose value length runs past the end. */
	const uint8_t bad2[] = {38, 0, 1, 'k', 0, 0, 9, 'v', 0};
	ck_assert(!headers__next(bad2, sizeof(bad2), &pos, &e));
	ck_assert_uint_eq(pos, 0);

	/* A lone kind byte. */
	const uint8_t bad3[] = {38};
	ck_assert(!headers__next(bad3, sizeof(bad3), &pos, &e));
	ck_assert_uint_eq(pos, 0);
}
END_TEST

START_TEST(a_part_without_its_nul_is_malformed)
{
	/* headers.h promises NUL-terminated parts that can be handed to the
	 * broker as strings; a buffer whose terminator is not NUL is malformed
	 * and must not be read as an entry. */
	const uint8_t bad_a[] = {3, 0, 2, 'a', 'b', 'X'};
	const uint8_t bad_b[] = {38, 0, 1, 'k', 0, 0, 1, 'v', 'X'};
	size_t pos = 0;
	struct dlq_header e;
	ck_assert_msg(!headers__next(bad_a, sizeof(bad_a), &pos, &e), "content type without NUL accepted");
	ck_assert_uint_eq(pos, 0);
	ck_assert_msg(!headers__next(bad_b, sizeof(bad_b), &pos, &e), "user property value without NUL accepted");
	ck_assert_uint_eq(pos, 0);
}
END_TEST

static bool reserved(const char *name)
{
	return headers__is_reserved(name, strlen(name));
}

START_TEST(the_plugins_names_are_reserved)
{
	ck_assert(reserved(DLQ_PROP_ID));
	ck_assert(reserved(DLQ_PROP_RETRY_COUNT));
	ck_assert(reserved(DLQ_PROP_ORIGIN_TOPIC));
	ck_assert(reserved(DLQ_PROP_ORIGIN_ID));
	ck_assert(reserved(DLQ_PROP_DEAD_LETTER_REASON));
	ck_assert(reserved(DLQ_PROP_DEAD_LETTER_CLIENT));
	ck_assert(reserved(DLQ_PROP_DEAD_LETTER_FILTER));
	ck_assert(reserved(DLQ_PROP_DEAD_LETTER_TIME));
	/* dead-letter-* is a reserved prefix, for names of later versions. */
	ck_assert(reserved("dead-letter-anything"));
	ck_assert(reserved("dead-letter-"));
}
END_TEST

START_TEST(look_alikes_are_not_reserved)
{
	/* Exact names only, except the dead-letter- prefix; case matters, as
	 * it does for MQTT user property names. */
	static const char *const names[] = {
		"dlq-idx", "dlq-i", "xdlq-id", "DLQ-ID", "retry-count2", "retry-coun",
		"origin-", "origin-topics", "origin", "dead-letter", "Dead-Letter-Reason",
		"xdead-letter-reason", DLQ_PROP_NACK_REASON, "",
	};
	for(size_t i = 0; i < ARRAY_LEN(names); i++){
		ck_assert_msg(!reserved(names[i]), "\"%s\" is reserved", names[i]);
	}
}
END_TEST

START_TEST(only_len_bytes_of_the_name_count)
{
	/* Names come out of the header buffer by length, not by NUL. */
	ck_assert(headers__is_reserved("dlq-idx", 6));
	ck_assert(!headers__is_reserved("dlq-id", 5));
	ck_assert(headers__is_reserved("retry-count-and-more", 11));
	ck_assert(!headers__is_reserved("dead-letter-reason", 11));
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

int main(void)
{
	Suite *s = suite_create("headers");
	check_add(s, check_fixture(tcase_create("encoding"), setup, teardown), CHECK_TESTS(every_kind_round_trips_in_order,
			the_encoding_is_the_documented_one, empty_parts_round_trip, parts_of_65535_bytes_round_trip,
			parts_over_65535_bytes_are_refused, many_entries_grow_the_buffer, append_raw_concatenates_lists));

	check_add(s, check_fixture(tcase_create("malformed"), setup, teardown), CHECK_TESTS(an_empty_list_has_no_entries,
			truncated_buffers_stop_the_walk, an_overlong_length_stops_the_walk, a_part_without_its_nul_is_malformed));

	check_add(s, tcase_create("reserved"), CHECK_TESTS(the_plugins_names_are_reserved, look_alikes_are_not_reserved,
			only_len_bytes_of_the_name_count));
	return check_run(s);
}
