/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of props.c: MQTT v5 property lists, built with libmosquitto as
 * the broker builds them, to the plugin's header lists and back. A copy or
 * dead letter carries payload format, content type, response topic,
 * correlation data and user properties, in the publisher's order, without
 * the plugin's reserved names and without one-hop properties. Each test
 * runs with a reader of 2.0's semantics and one of 2.1.2's (NULL for empty
 * strings): an empty value stays an empty value.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <mosquitto.h>
#include <mqtt_protocol.h>

#include "broker/props.h"
#include "check_suite.h"
#include "fake_port.h"
#include "fake_reader.h"
#include "mosquitto_dlq.h"
#include "util/headers.h"

/* Every test runs with both readers: 2.0's "" and 2.1's NULL for an
 * empty string must give the same results. */
#define R (fake_readers[_i])

static const char corr[] = {'\0', 'i', 'd', '\0', '\x7f', '\xff'};

static mosquitto_property *props;
static mosquitto_property *back;
static struct dlq_headers h;

/* A publisher's property list, mixed with what must not travel. */
static void build_publish_properties(void)
{
	ck_assert_int_eq(mosquitto_property_add_byte(&props, MQTT_PROP_PAYLOAD_FORMAT_INDICATOR, 1), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_int32(&props, MQTT_PROP_MESSAGE_EXPIRY_INTERVAL, 60), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_string(&props, MQTT_PROP_CONTENT_TYPE, "application/json"), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, "a", "1"), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_string(&props, MQTT_PROP_RESPONSE_TOPIC, "replies/sub1"), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, DLQ_PROP_ID, "AAAAAAAAAAAAAAAA"), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_binary(&props, MQTT_PROP_CORRELATION_DATA, corr, sizeof(corr)), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_int16(&props, MQTT_PROP_TOPIC_ALIAS, 3), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, "b", ""), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, DLQ_PROP_DEAD_LETTER_REASON, "forged"), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, DLQ_PROP_RETRY_COUNT, "99"), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_varint(&props, MQTT_PROP_SUBSCRIPTION_IDENTIFIER, 7), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, "dlq-idx", "kept"), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, "a", "3"), MOSQ_ERR_SUCCESS);
}

static void expect_hdr(size_t *pos, uint8_t kind, const void *a, size_t a_len, const char *b)
{
	struct dlq_header e;
	ck_assert_msg(headers__next(h.data, h.len, pos, &e), "header of kind %u missing", kind);
	ck_assert_uint_eq(e.kind, kind);
	ck_assert_uint_eq(e.a_len, a_len);
	ck_assert_mem_eq(e.a, a, a_len);
	if(b){
		ck_assert_ptr_nonnull(e.b);
		ck_assert_str_eq(e.b, b);
	}else{
		ck_assert_ptr_null(e.b);
	}
}

static void expect_end(size_t pos)
{
	struct dlq_header e;
	ck_assert(!headers__next(h.data, h.len, &pos, &e));
	ck_assert_uint_eq(pos, h.len);
}

START_TEST(message_properties_become_headers_in_order)
{
	build_publish_properties();
	ck_assert_int_eq(props__to_headers(R, props, &h), 0);
	const uint8_t one = 1;
	size_t pos = 0;
	expect_hdr(&pos, DLQ_HDR_PAYLOAD_FORMAT, &one, 1, NULL);
	expect_hdr(&pos, DLQ_HDR_CONTENT_TYPE, "application/json", 16, NULL);
	expect_hdr(&pos, DLQ_HDR_USER_PROPERTY, "a", 1, "1");
	expect_hdr(&pos, DLQ_HDR_RESPONSE_TOPIC, "replies/sub1", 12, NULL);
	expect_hdr(&pos, DLQ_HDR_CORRELATION_DATA, corr, sizeof(corr), NULL);
	expect_hdr(&pos, DLQ_HDR_USER_PROPERTY, "b", 1, "");
	expect_hdr(&pos, DLQ_HDR_USER_PROPERTY, "dlq-idx", 7, "kept");
	expect_hdr(&pos, DLQ_HDR_USER_PROPERTY, "a", 1, "3");
	expect_end(pos);
}
END_TEST

START_TEST(properties_are_appended_to_the_list)
{
	ck_assert_int_eq(headers__add_user(&h, "first", "x"), 0);
	ck_assert_int_eq(mosquitto_property_add_string(&props, MQTT_PROP_CONTENT_TYPE, "text/plain"), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(props__to_headers(R, props, &h), 0);
	size_t pos = 0;
	expect_hdr(&pos, DLQ_HDR_USER_PROPERTY, "first", 5, "x");
	expect_hdr(&pos, DLQ_HDR_CONTENT_TYPE, "text/plain", 10, NULL);
	expect_end(pos);
}
END_TEST

START_TEST(reserved_names_and_one_hop_properties_are_not_carried)
{
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, DLQ_PROP_ID, "x"), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, DLQ_PROP_ORIGIN_TOPIC, "x"), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, DLQ_PROP_ORIGIN_ID, "x"), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, DLQ_PROP_DEAD_LETTER_TIME, "x"), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_int32(&props, MQTT_PROP_MESSAGE_EXPIRY_INTERVAL, 1), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_int16(&props, MQTT_PROP_TOPIC_ALIAS, 1), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_varint(&props, MQTT_PROP_SUBSCRIPTION_IDENTIFIER, 1), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(props__to_headers(R, props, &h), 0);
	ck_assert_uint_eq(h.len, 0);
}
END_TEST

START_TEST(no_properties_make_no_headers)
{
	ck_assert_int_eq(props__to_headers(R, NULL, &h), 0);
	ck_assert_uint_eq(h.len, 0);
}
END_TEST

/* The rebuilt list is read back with the libmosquitto the tests link:
 * 2.0's gives "" for an empty string, 2.1's NULL (a string of length 0;
 * MQTT has no absent name or value in a pair). */
static const char *or_empty(const char *s)
{
	return s ? s : "";
}

START_TEST(headers_become_the_same_properties_again)
{
	build_publish_properties();
	ck_assert_int_eq(props__to_headers(R, props, &h), 0);
	ck_assert_int_eq(props__from_headers(h.data, h.len, &back), 0);
	ck_assert_ptr_nonnull(back);

	/* Walk the rebuilt list: identifiers and values, in order. */
	const mosquitto_property *p = back;
	uint8_t byte = 0;
	char *s = NULL, *name = NULL;
	void *bin = NULL;
	uint16_t len = 0;

	ck_assert_int_eq(mosquitto_property_identifier(p), MQTT_PROP_PAYLOAD_FORMAT_INDICATOR);
	ck_assert_ptr_nonnull(mosquitto_property_read_byte(p, MQTT_PROP_PAYLOAD_FORMAT_INDICATOR, &byte, false));
	ck_assert_uint_eq(byte, 1);

	p = mosquitto_property_next(p);
	ck_assert_int_eq(mosquitto_property_identifier(p), MQTT_PROP_CONTENT_TYPE);
	ck_assert_ptr_nonnull(mosquitto_property_read_string(p, MQTT_PROP_CONTENT_TYPE, &s, false));
	ck_assert_str_eq(s, "application/json");
	free(s);

	const char *const users1[][2] = {{"a", "1"}};
	p = mosquitto_property_next(p);
	ck_assert_int_eq(mosquitto_property_identifier(p), MQTT_PROP_USER_PROPERTY);
	ck_assert_ptr_nonnull(mosquitto_property_read_string_pair(p, MQTT_PROP_USER_PROPERTY, &name, &s, false));
	ck_assert_str_eq(name, users1[0][0]);
	ck_assert_str_eq(s, users1[0][1]);
	free(name);
	free(s);

	p = mosquitto_property_next(p);
	ck_assert_int_eq(mosquitto_property_identifier(p), MQTT_PROP_RESPONSE_TOPIC);
	ck_assert_ptr_nonnull(mosquitto_property_read_string(p, MQTT_PROP_RESPONSE_TOPIC, &s, false));
	ck_assert_str_eq(s, "replies/sub1");
	free(s);

	p = mosquitto_property_next(p);
	ck_assert_int_eq(mosquitto_property_identifier(p), MQTT_PROP_CORRELATION_DATA);
	ck_assert_ptr_nonnull(mosquitto_property_read_binary(p, MQTT_PROP_CORRELATION_DATA, &bin, &len, false));
	ck_assert_uint_eq(len, sizeof(corr));
	ck_assert_mem_eq(bin, corr, sizeof(corr));
	free(bin);

	const char *const users2[][2] = {{"b", ""}, {"dlq-idx", "kept"}, {"a", "3"}};
	for(size_t i = 0; i < 3; i++){
		p = mosquitto_property_next(p);
		ck_assert_ptr_nonnull(p);
		ck_assert_int_eq(mosquitto_property_identifier(p), MQTT_PROP_USER_PROPERTY);
		ck_assert_ptr_nonnull(mosquitto_property_read_string_pair(p, MQTT_PROP_USER_PROPERTY, &name, &s, false));
		ck_assert_str_eq(or_empty(name), users2[i][0]);
		ck_assert_str_eq(or_empty(s), users2[i][1]);
		free(name);
		free(s);
	}
	ck_assert_ptr_null(mosquitto_property_next(p));

	/* And to headers once more: the same bytes. */
	struct dlq_headers again = {0};
	ck_assert_int_eq(props__to_headers(R, back, &again), 0);
	ck_assert_uint_eq(again.len, h.len);
	ck_assert_mem_eq(again.data, h.data, h.len);
	headers__free(&again);
}
END_TEST

START_TEST(the_plugins_own_headers_become_user_properties)
{
	/* What a retry copy goes out with: from_headers does not filter. */
	ck_assert_int_eq(headers__add_user(&h, DLQ_PROP_ID, "AAECAwQFBgcICQoL"), 0);
	ck_assert_int_eq(headers__add_user(&h, DLQ_PROP_RETRY_COUNT, "2"), 0);
	ck_assert_int_eq(props__from_headers(h.data, h.len, &back), 0);
	char buf[32];
	ck_assert_str_eq(props__user_value(R, back, DLQ_PROP_ID, buf, sizeof(buf)), "AAECAwQFBgcICQoL");
	ck_assert_str_eq(props__user_value(R, back, DLQ_PROP_RETRY_COUNT, buf, sizeof(buf)), "2");
}
END_TEST

START_TEST(an_empty_header_list_makes_no_properties)
{
	ck_assert_int_eq(props__from_headers(NULL, 0, &back), 0);
	ck_assert_ptr_null(back);
}
END_TEST

START_TEST(a_malformed_header_list_makes_no_properties)
{
	ck_assert_int_eq(headers__add_user(&h, "a", "1"), 0);
	size_t first = h.len;
	ck_assert_int_eq(headers__add_user(&h, "b", "2"), 0);
	/* Cut inside the second entry: refused, and the first (already
	 * built) is freed, not returned. */
	ck_assert_int_eq(props__from_headers(h.data, first + 3, &back), EINVAL);
	ck_assert_ptr_null(back);

	/* A kind that is not one of ours (2: message expiry). */
	const uint8_t alien[] = {2, 0, 1, 'x', 0};
	ck_assert_int_eq(props__from_headers(alien, sizeof(alien), &back), EINVAL);
	ck_assert_ptr_null(back);
}
END_TEST

START_TEST(text_that_is_not_utf8_is_refused)
{
	/* A string property must be UTF-8: the broker would refuse the list. */
	ck_assert_int_eq(headers__add_user(&h, "ok", "1"), 0);
	ck_assert_int_eq(headers__add(&h, DLQ_HDR_CONTENT_TYPE, "bad\xff", 4, NULL, 0), 0);
	ck_assert_int_eq(props__from_headers(h.data, h.len, &back), EINVAL);
	ck_assert_ptr_null(back);
}
END_TEST

START_TEST(user_value_finds_the_first_property_of_a_name)
{
	build_publish_properties();
	char buf[64];
	const char *v = props__user_value(R, props, "a", buf, sizeof(buf));
	ck_assert_ptr_eq(v, buf);
	ck_assert_str_eq(v, "1");
	ck_assert_str_eq(props__user_value(R, props, "b", buf, sizeof(buf)), "");
	ck_assert_str_eq(props__user_value(R, props, "dlq-idx", buf, sizeof(buf)), "kept");
	/* It reads the raw list: nothing is filtered here. */
	ck_assert_str_eq(props__user_value(R, props, DLQ_PROP_ID, buf, sizeof(buf)), "AAAAAAAAAAAAAAAA");
	ck_assert_ptr_null(props__user_value(R, props, "missing", buf, sizeof(buf)));
	ck_assert_ptr_null(props__user_value(R, props, "A", buf, sizeof(buf)));
	ck_assert_ptr_null(props__user_value(R, props, "application/json", buf, sizeof(buf)));
	ck_assert_ptr_null(props__user_value(R, NULL, "a", buf, sizeof(buf)));
}
END_TEST

START_TEST(user_value_is_cut_to_the_buffer)
{
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, DLQ_PROP_NACK_REASON, "hello world"), MOSQ_ERR_SUCCESS);
	char buf[6];
	memset(buf, '#', sizeof(buf));
	ck_assert_str_eq(props__user_value(R, props, DLQ_PROP_NACK_REASON, buf, sizeof(buf)), "hello");
	char one[1];
	ck_assert_str_eq(props__user_value(R, props, DLQ_PROP_NACK_REASON, one, sizeof(one)), "");
}
END_TEST

START_TEST(the_fake_21_reader_gives_null_for_empties)
{
	/* The premise of the tests below: 2.1.2's semantics, faked. */
	char *n = NULL, *v = NULL;
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, "", ""), MOSQ_ERR_SUCCESS);
	ck_assert_ptr_nonnull(fake_reader_v21.read_string_pair(props, MQTT_PROP_USER_PROPERTY, &n, &v, false));
	ck_assert_ptr_null(n);
	ck_assert_ptr_null(v);
}
END_TEST

/* What a hostile publisher sends: every string and binary value empty. */
static void build_empty_properties(void)
{
	ck_assert_int_eq(mosquitto_property_add_string(&props, MQTT_PROP_CONTENT_TYPE, ""), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_string(&props, MQTT_PROP_RESPONSE_TOPIC, ""), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_binary(&props, MQTT_PROP_CORRELATION_DATA, "", 0), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, "k", ""), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, "", "v"), MOSQ_ERR_SUCCESS);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, "", ""), MOSQ_ERR_SUCCESS);
}

START_TEST(empty_values_are_carried_as_empty)
{
	build_empty_properties();
	ck_assert_int_eq(props__to_headers(R, props, &h), 0);
	size_t pos = 0;
	expect_hdr(&pos, DLQ_HDR_CONTENT_TYPE, "", 0, NULL);
	expect_hdr(&pos, DLQ_HDR_RESPONSE_TOPIC, "", 0, NULL);
	expect_hdr(&pos, DLQ_HDR_CORRELATION_DATA, "", 0, NULL);
	expect_hdr(&pos, DLQ_HDR_USER_PROPERTY, "k", 1, "");
	expect_hdr(&pos, DLQ_HDR_USER_PROPERTY, "", 0, "v");
	expect_hdr(&pos, DLQ_HDR_USER_PROPERTY, "", 0, "");
	expect_end(pos);

	/* And back to the same properties. */
	ck_assert_int_eq(props__from_headers(h.data, h.len, &back), 0);
	char buf[8];
	ck_assert_str_eq(props__user_value(R, back, "k", buf, sizeof(buf)), "");
	ck_assert_str_eq(props__user_value(R, back, "", buf, sizeof(buf)), "v");
}
END_TEST

START_TEST(empty_user_values_are_found_as_empty)
{
	build_empty_properties();
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, DLQ_PROP_NACK_REASON, ""), MOSQ_ERR_SUCCESS);
	char buf[8];
	/* Found, and empty: not the same as absent. */
	ck_assert_str_eq(props__user_value(R, props, DLQ_PROP_NACK_REASON, buf, sizeof(buf)), "");
	ck_assert_str_eq(props__user_value(R, props, "k", buf, sizeof(buf)), "");
	ck_assert_ptr_null(props__user_value(R, props, DLQ_PROP_NACK_DELAY_MS, buf, sizeof(buf)));
	ck_assert_str_eq(props__last_user_value(R, props, "", buf, sizeof(buf)), "");
}
END_TEST

START_TEST(empty_strings_are_present)
{
	build_empty_properties();
	char *s = NULL;
	void *bin = NULL;
	uint16_t len = 7;
	ck_assert(props__string(R, props, MQTT_PROP_RESPONSE_TOPIC, &s));
	ck_assert(s == NULL || s[0] == '\0');
	R->free_copy(s);
	ck_assert(props__binary(R, props, MQTT_PROP_CORRELATION_DATA, &bin, &len));
	ck_assert_uint_eq(len, 0);
	R->free_copy(bin);
	ck_assert(!props__string(R, NULL, MQTT_PROP_RESPONSE_TOPIC, &s));
	ck_assert_ptr_null(s);
}
END_TEST

START_TEST(last_user_value_finds_the_last_of_a_name)
{
	build_publish_properties();
	char buf[64];
	ck_assert_str_eq(props__last_user_value(R, props, "a", buf, sizeof(buf)), "3");
	ck_assert_str_eq(props__last_user_value(R, props, "b", buf, sizeof(buf)), "");
	ck_assert_ptr_null(props__last_user_value(R, props, "missing", buf, sizeof(buf)));
}
END_TEST

static void setup(void)
{
	fake_reset();
	props = NULL;
	back = NULL;
	memset(&h, 0, sizeof(h));
}

static void teardown(void)
{
	mosquitto_property_free_all(&props);
	mosquitto_property_free_all(&back);
	headers__free(&h);
	fake_reset();
}

int main(void)
{
	Suite *s = suite_create("props");
	suite_add_tcase(s, check_loops(check_fixture(tcase_create("to headers"), setup, teardown), 0, 2,
			CHECK_TESTS(message_properties_become_headers_in_order, properties_are_appended_to_the_list,
			reserved_names_and_one_hop_properties_are_not_carried, no_properties_make_no_headers)));
	suite_add_tcase(s, check_loops(check_fixture(tcase_create("from headers"), setup, teardown), 0, 2,
			CHECK_TESTS(headers_become_the_same_properties_again, the_plugins_own_headers_become_user_properties,
			an_empty_header_list_makes_no_properties, a_malformed_header_list_makes_no_properties,
			text_that_is_not_utf8_is_refused)));
	suite_add_tcase(s, check_loops(check_fixture(tcase_create("user value"), setup, teardown), 0, 2,
			CHECK_TESTS(user_value_finds_the_first_property_of_a_name, user_value_is_cut_to_the_buffer,
			last_user_value_finds_the_last_of_a_name)));
	TCase *tc = check_add(s, check_fixture(tcase_create("empty values"), setup, teardown),
			CHECK_TESTS(the_fake_21_reader_gives_null_for_empties));
	check_loops(tc, 0, 2, CHECK_TESTS(empty_values_are_carried_as_empty, empty_user_values_are_found_as_empty,
			empty_strings_are_present));
	return check_run(s);
}
