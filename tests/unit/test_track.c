/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of the engine's tracking (track.c): policies found by topic, ids
 * stamped, the broker's READ access check on a NACK, the random source, and the
 * ledger's bound on what is tracked, against the fake broker port and the
 * engine fixture of fixtures.h: the topic, target client, QoS, payload and
 * properties of every publish, and that nothing else was published.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "engine/dlq.h"
#include "fake_port.h"
#include "fixtures.h"
#include "mosquitto_dlq.h"
#include "test_util.h"

/* The broker's access check, played: only "reader" may read "numbers". */
static int only_reader(void *ctx, const char *topic, const void *payload, uint32_t len, uint8_t qos)
{
	(void)payload;
	(void)len;
	(void)qos;
	return !strcmp((const char *)ctx, "reader") && !strcmp(topic, "numbers") ? 0 : EACCES;
}

static enum dlq_nack_status nack_checked(const char *id, const char *client)
{
	struct dlq_nack n = {.id = id, .id_len = strlen(id), .client = client,
		.may_read = only_reader, .may_read_ctx = (void *)client};
	struct dlq_nack_result res;
	dlq__nack(&d, &n, &res);
	return res.status;
}

START_TEST(policies_are_found_by_topic)
{
	start(standard, ARRAY_LEN(standard));
	const struct dlq_policy *p = dlq__policy_for(&d, "numbers");
	ck_assert_ptr_nonnull(p);
	ck_assert_str_eq(p->dead_letter, "dead/numbers");
	p = dlq__policy_for(&d, "devices/7/telemetry");
	ck_assert_ptr_nonnull(p);
	ck_assert_str_eq(p->filter, "devices/+/telemetry");
	ck_assert_ptr_null(dlq__policy_for(&d, "numbers/7"));
	ck_assert_ptr_null(dlq__policy_for(&d, "dead/numbers"));
	ck_assert_ptr_null(dlq__policy_for(&d, "elsewhere"));
}
END_TEST

/* A client the broker would not let read the message cannot NACK it, even
 * with its id: nothing is published, the refusal is counted, and a client
 * that may read it still can. */
START_TEST(a_nack_needs_read_access)
{
	char id[DLQ_ID_LEN + 1];
	start(standard, ARRAY_LEN(standard));
	track("numbers", "7", 1, id);
	ck_assert_int_eq(nack_checked(id, "stranger"), DLQ_NACK_NOT_PERMITTED);
	ck_assert_uint_eq(fake.publish_count, 0);
	ck_assert_uint_eq(engine__totals(&d)->nacks_refused, 1);
	ck_assert_uint_eq(engine__totals(&d)->nacks, 0);
	ck_assert_str_eq(dlq__nack_status_text(DLQ_NACK_NOT_PERMITTED), "refused: this client may not read the message");
	ck_assert_int_eq(nack_checked(id, "reader"), DLQ_NACK_RETRIED);
	expect_publish(0, "reader", "numbers", 1, "7");
	stop();
}
END_TEST

START_TEST(tracking_stamps_distinct_ids_and_publishes_nothing)
{
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1], c[DLQ_ID_LEN + 1];
	start_tracking("numbers", "1", 0, a);
	track("numbers", "2", 1, b);
	track("devices/7/telemetry", "3", 2, c);
	ck_assert_str_ne(a, b);
	ck_assert_str_ne(b, c);
	ck_assert_str_ne(a, c);
	ck_assert(known(a) && known(b) && known(c));
	ck_assert_uint_eq(engine__totals(&d)->tracked, 3);
	ck_assert_uint_eq(fake.publish_count, 0);
}
END_TEST

START_TEST(a_failing_random_source_tracks_nothing)
{
	start(standard, ARRAY_LEN(standard));
	const struct dlq_policy *p = dlq__policy_for(&d, "numbers");
	char id[DLQ_ID_LEN + 1] = "untouched";
	fake.fail_random = 1;
	int rc = dlq__track(&d, p, "numbers", "42", 2, 1, NULL, 0, id);
	ck_assert_int_ne(rc, 0);
	ck_assert_int_ne(rc, ENOSPC);
	ck_assert_str_eq(id, "untouched");
	ck_assert_uint_eq(d.ledger.count, 0);
	ck_assert_uint_eq(engine__totals(&d)->tracked, 0);
	ck_assert(fake_logged("random"));
	ck_assert_uint_eq(fake.publish_count, 0);
	/* It recovers with the source. */
	track("numbers", "42", 1, id);
	ck_assert_uint_eq(engine__totals(&d)->tracked, 1);
}
END_TEST

START_TEST(the_bound_evicts_the_oldest_records_first)
{
	start(small, ARRAY_LEN(small));
	ck_assert_uint_eq(d.cfg.max_pending_bytes, 1024);
	enum { N = 20 };
	char ids[N][DLQ_ID_LEN + 1];
	char payload[101];
	memset(payload, 'p', 100);
	payload[100] = '\0';
	for(int i = 0; i < N; i++){
		track("numbers", payload, 1, ids[i]);
		ck_assert_uint_le(d.ledger.bytes + d.outbox.bytes, 1024);
	}
	ck_assert_uint_eq(engine__totals(&d)->tracked, N);
	/* A prefix of the oldest is gone, the newest are all there. */
	int first_known = 0;
	while(first_known < N && !known(ids[first_known])) first_known++;
	ck_assert_int_gt(first_known, 0);
	ck_assert_int_lt(first_known, N);
	for(int i = first_known; i < N; i++){
		ck_assert_msg(known(ids[i]), "record %d evicted before an older one", i);
	}
	ck_assert_uint_eq(engine__totals(&d)->evicted, (uint64_t)first_known);
	ck_assert_uint_eq(d.ledger.count, (size_t)(N - first_known));
	ck_assert(fake_logged("max_pending_bytes"));

	ck_assert_int_eq(nack(ids[0], "sub1"), DLQ_NACK_UNKNOWN_ID);
	ck_assert_int_eq(nack(ids[N - 1], "sub1"), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(fake.publish_count, 1);
	expect_publish(0, "sub1", "numbers", 1, payload);
}
END_TEST

START_TEST(a_message_larger_than_the_bound_is_not_tracked)
{
	start(small, ARRAY_LEN(small));
	char a[DLQ_ID_LEN + 1];
	track("numbers", "small", 1, a);
	const struct dlq_policy *p = dlq__policy_for(&d, "numbers");

	static char big[2048];
	memset(big, 'x', sizeof(big));
	char id[DLQ_ID_LEN + 1] = "untouched";
	ck_assert_int_eq(dlq__track(&d, p, "numbers", big, sizeof(big), 1, NULL, 0, id), ENOSPC);
	/* Within the bound as payload, over it as a record. */
	ck_assert_int_eq(dlq__track(&d, p, "numbers", big, 1020, 1, NULL, 0, id), ENOSPC);
	ck_assert_uint_eq(engine__totals(&d)->untracked_full, 2);
	ck_assert_uint_eq(engine__totals(&d)->tracked, 1);
	/* Refusing it evicted nothing. */
	ck_assert(known(a));
	ck_assert_uint_eq(d.ledger.count, 1);
	ck_assert_uint_eq(engine__totals(&d)->evicted, 0);
	ck_assert_uint_eq(fake.publish_count, 0);
}
END_TEST

int main(void)
{
	return check_run(check_suite("track", check_fixture(tcase_create("track"), setup, teardown),
			CHECK_TESTS(policies_are_found_by_topic, a_nack_needs_read_access,
			tracking_stamps_distinct_ids_and_publishes_nothing, a_failing_random_source_tracks_nothing,
			the_bound_evicts_the_oldest_records_first, a_message_larger_than_the_bound_is_not_tracked)));
}
