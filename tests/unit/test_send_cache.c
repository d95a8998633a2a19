/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of send_cache.c: a record is found from a send only when the
 * send's id text, its stored message's two addresses and its payload length
 * are all the ones remembered for it; a record with the same 12-bit prefix
 * takes the slot; a record forgotten leaves it, another's stays.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "fake_port.h"
#include "model/send_cache.h"
#include "record_fixture.h"
#include "util/id.h"

static struct dlq_policy policy = {
	.filter = "numbers",
	.dead_letter = "dead/numbers",
	.max_attempts = 3,
};

/* A record whose id has the 12-bit prefix given, with its text. */
static struct dlq_record *make_record(uint16_t prefix, uint8_t tail, const char *payload, char text[DLQ_ID_LEN + 1])
{
	struct dlq_id id;
	memset(id.raw, tail, sizeof(id.raw));
	id.raw[0] = (uint8_t)(prefix >> 4);
	id.raw[1] = (uint8_t)((prefix & 0xfu) << 4 | (tail & 0xfu));
	struct dlq_record *r = record_fixture__make(DLQ_RECORD_SENDS, .id = &id, .topic = "numbers",
			.payload = payload, .payload_len = (uint32_t)strlen(payload), .policy = &policy, .attempt = 1,
			.qos = 1, .now_ms = 0);
	ck_assert_ptr_nonnull(r);
	id__encode(&id, text);
	ck_assert_uint_eq(id__prefix12_text(text), prefix);
	return r;
}

START_TEST(a_send_is_known_only_by_all_it_was_remembered_with)
{
	struct dlq_send_cache c;
	char text[DLQ_ID_LEN + 1];
	char topic[] = "numbers", payload[] = "7";
	char other_topic[] = "numbers", other_payload[] = "7";
	ck_assert_int_eq(send_cache__init(&c), 0);
	struct dlq_record *r = make_record(0x123, 1, payload, text);
	ck_assert_ptr_null(send_cache__find(&c, text, topic, payload, 1));
	send_cache__remember(&c, r, text, topic, payload);
	ck_assert_ptr_eq(send_cache__find(&c, text, topic, payload, 1), r);
	ck_assert_ptr_null(send_cache__find(&c, text, other_topic, payload, 1));
	ck_assert_ptr_null(send_cache__find(&c, text, topic, other_payload, 1));
	ck_assert_ptr_null(send_cache__find(&c, text, topic, payload, 2));
	char forged[DLQ_ID_LEN + 1];
	memcpy(forged, text, sizeof(forged));
	forged[DLQ_ID_LEN - 1] = forged[DLQ_ID_LEN - 1] == 'A' ? 'B' : 'A';
	ck_assert_ptr_null(send_cache__find(&c, forged, topic, payload, 1));
	send_cache__forget(&c, r);
	ck_assert_ptr_null(send_cache__find(&c, text, topic, payload, 1));
	record__free(r);
	send_cache__cleanup(&c);
	ck_assert_ptr_null(c.slots);
}
END_TEST

START_TEST(a_record_with_the_same_prefix_takes_the_slot)
{
	struct dlq_send_cache c;
	char a_text[DLQ_ID_LEN + 1], b_text[DLQ_ID_LEN + 1];
	char topic[] = "numbers", a_payload[] = "1", b_payload[] = "2";
	ck_assert_int_eq(send_cache__init(&c), 0);
	struct dlq_record *a = make_record(0xabc, 1, a_payload, a_text);
	struct dlq_record *b = make_record(0xabc, 2, b_payload, b_text);
	send_cache__remember(&c, a, a_text, topic, a_payload);
	send_cache__remember(&c, b, b_text, topic, b_payload);
	ck_assert_ptr_null(send_cache__find(&c, a_text, topic, a_payload, 1));
	ck_assert_ptr_eq(send_cache__find(&c, b_text, topic, b_payload, 1), b);
	/* a is not in the slot: forgetting it leaves b there. */
	send_cache__forget(&c, a);
	ck_assert_ptr_eq(send_cache__find(&c, b_text, topic, b_payload, 1), b);
	send_cache__forget(&c, b);
	ck_assert_ptr_null(send_cache__find(&c, b_text, topic, b_payload, 1));
	record__free(a);
	record__free(b);
	send_cache__cleanup(&c);
}
END_TEST

/* Without memory for the slots there is no cache: nothing is found (every
 * send goes the long way), and nothing breaks. */
START_TEST(without_slots_nothing_is_found)
{
	struct dlq_send_cache c = { .slots = NULL };
	char text[DLQ_ID_LEN + 1];
	char topic[] = "numbers", payload[] = "7";
	struct dlq_record *r = make_record(0x001, 3, payload, text);
	send_cache__remember(&c, r, text, topic, payload);
	ck_assert_ptr_null(send_cache__find(&c, text, topic, payload, 1));
	send_cache__forget(&c, r);
	send_cache__cleanup(&c);
	record__free(r);
}
END_TEST

int main(void)
{
	return check_run(check_suite("send_cache", tcase_create("core"),
			CHECK_TESTS(a_send_is_known_only_by_all_it_was_remembered_with,
			a_record_with_the_same_prefix_takes_the_slot, without_slots_nothing_is_found)));
}
