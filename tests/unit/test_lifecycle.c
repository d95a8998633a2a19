/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of an engine's life (lifecycle.c): what is still owed at shutdown
 * is reported, not published, against the fake broker port and the engine
 * fixture of fixtures.h: the topic, target client, QoS, payload and properties
 * of every publish, and that nothing else was published.
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

START_TEST(what_is_owed_at_shutdown_is_reported_not_published)
{
	char id0[DLQ_ID_LEN + 1];
	start_tracking("numbers", "7", 1, id0);
	fake.fail_publishes = 1;
	ck_assert_int_eq(nack(id0, "sub1"), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(d.outbox.owed.count, 1);
	size_t calls = fake.publish_calls;
	stop();
	ck_assert_uint_eq(fake.publish_calls, calls);
	ck_assert_msg(log_containing("1 retry copies or dead letters the broker had not accepted are lost at shutdown") != NULL,
			"no shutdown report");
}
END_TEST

int main(void)
{
	return check_run(check_suite("lifecycle", check_fixture(tcase_create("lifecycle"), setup, teardown),
			CHECK_TESTS(what_is_owed_at_shutdown_is_reported_not_published)));
}
