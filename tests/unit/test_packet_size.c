/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of packet_size.c: the PUBLISH size Mosquitto 2.1 compares with
 * a client's Maximum Packet Size (remaining length plus its own length), and
 * the table of known limits per client.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "broker/packet_size.h"
#include "check_suite.h"

START_TEST(sizes_as_the_broker_counts_them)
{
	ck_assert_uint_eq(packet_size__varint_bytes(0), 1);
	ck_assert_uint_eq(packet_size__varint_bytes(127), 1);
	ck_assert_uint_eq(packet_size__varint_bytes(128), 2);
	ck_assert_uint_eq(packet_size__varint_bytes(16383), 2);
	ck_assert_uint_eq(packet_size__varint_bytes(16384), 3);
	ck_assert_uint_eq(packet_size__varint_bytes(2097152), 4);
	/* "jobs/x", 32 bytes, QoS 1, no properties: 2+6+2+32+1 = 43, +1. */
	ck_assert_uint_eq(packet_size__publish(6, 32, 1, 0), 44);
	/* QoS 0 has no packet id. */
	ck_assert_uint_eq(packet_size__publish(6, 32, 0, 0), 42);
	/* A dlq-id stamp: 1 + 2+6 + 2+16 = 27 bytes of property. */
	ck_assert_uint_eq(packet_size__user_property_len(6, 16), 27);
	ck_assert_uint_eq(packet_size__publish(6, 32, 1, 27), 71);
	/* Past 127 bytes the remaining length takes two. */
	ck_assert_uint_eq(packet_size__publish(6, 200, 1, 0), 213);
}
END_TEST

START_TEST(limits_per_client)
{
	struct dlq_packet_limits t = {0};
	ck_assert_uint_eq(packet_size__limits_get(&t, "a"), 0);
	ck_assert_int_eq(packet_size__limits_set(&t, "a", 64), 0);
	ck_assert_int_eq(packet_size__limits_set(&t, "b", 0), 0);
	ck_assert_uint_eq(packet_size__limits_get(&t, "a"), 64);
	ck_assert_uint_eq(packet_size__limits_get(&t, "b"), 0);
	ck_assert_int_eq(packet_size__limits_set(&t, "a", 128), 0);
	ck_assert_uint_eq(packet_size__limits_get(&t, "a"), 128);
	char id[16];
	for(int i = 0; i < 500; i++){
		snprintf(id, sizeof(id), "c%d", i);
		ck_assert_int_eq(packet_size__limits_set(&t, id, (uint32_t)(1000 + i)), 0);
	}
	ck_assert_uint_eq(t.count, 501);
	ck_assert_uint_eq(packet_size__limits_get(&t, "c499"), 1499);
	ck_assert_uint_eq(packet_size__limits_get(&t, "a"), 128);
	ck_assert_int_eq(packet_size__limits_set(&t, "a", 0), 0);
	ck_assert_uint_eq(packet_size__limits_get(&t, "a"), 0);
	ck_assert_uint_eq(t.count, 500);
	packet_size__limits_cleanup(&t);
	ck_assert_ptr_null(t.table);
}
END_TEST

int main(void)
{
	return check_run(check_suite("packet_size", tcase_create("core"), CHECK_TESTS(sizes_as_the_broker_counts_them,
			limits_per_client)));
}
