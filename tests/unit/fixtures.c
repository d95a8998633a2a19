/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The engine tests' fixture (see fixtures.h): the engine they share, and
 * the calls and assertions each of them makes on it.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "model/envelope.h"

struct dlq d;
bool d_live;
struct dlq_headers original; /* a publisher's properties */

/* No $SYS publishes among the ones counted here. */
void start(const struct dlq_option *opts, size_t count)
{
	engine_start(&d, &d_live, opts, count, ENGINE_NO_SYS);
}

void stop(void)
{
	engine_stop(&d, &d_live);
}

void track_with(const char *topic, const char *payload, uint8_t qos, const struct dlq_headers *h,
		char id[DLQ_ID_LEN + 1])
{
	const struct dlq_policy *p = dlq__policy_for(&d, topic);
	ck_assert_ptr_nonnull(p);
	int rc = dlq__track(&d, p, topic, payload, (uint32_t)strlen(payload), qos,
			h ? h->data : NULL, h ? h->len : 0, id);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(strlen(id), DLQ_ID_LEN);
	struct dlq_id parsed;
	ck_assert(id__decode(id, DLQ_ID_LEN, &parsed));
}

void track(const char *topic, const char *payload, uint8_t qos, char id[DLQ_ID_LEN + 1])
{
	track_with(topic, payload, qos, NULL, id);
}

enum dlq_nack_status nack_full(const char *id, const char *client, const char *reason, struct dlq_nack_result *res)
{
	struct dlq_nack n = {.id = id, .id_len = strlen(id), .reason = reason, .client = client};
	dlq__nack(&d, &n, res);
	return res->status;
}

/* A NACK with the session flag and, when requested_ms is not negative, a
 * delay of its own. */
enum dlq_nack_status nack_with(const char *id, const char *client, bool persists, int64_t requested_ms,
		struct dlq_nack_result *res)
{
	struct dlq_nack n = {
		.id = id,
		.id_len = strlen(id),
		.client = client,
		.client_persists = persists,
		.delay_requested = requested_ms >= 0,
		.delay_ms = requested_ms >= 0 ? (uint64_t)requested_ms : 0,
	};
	dlq__nack(&d, &n, res);
	return res->status;
}

enum dlq_nack_status nack(const char *id, const char *client)
{
	struct dlq_nack_result res;
	return nack_full(id, client, NULL, &res);
}

bool known(const char *id)
{
	struct dlq_id parsed;
	ck_assert(id__decode(id, strlen(id), &parsed));
	return ledger__find(&d.ledger, &parsed) != NULL;
}

const struct fake_publish *pub(size_t i)
{
	ck_assert_msg(i < fake.publish_count, "publish #%zu missing (%zu made)", i, fake.publish_count);
	return &fake.publishes[i];
}

void expect_publish(size_t i, const char *client, const char *topic, uint8_t qos, const char *payload)
{
	const struct fake_publish *p = pub(i);
	if(client == NULL){
		ck_assert_msg(p->client == NULL, "publish #%zu targeted at %s", i, p->client);
	}else{
		ck_assert_ptr_nonnull(p->client);
		ck_assert_str_eq(p->client, client);
	}
	ck_assert_str_eq(p->topic, topic);
	ck_assert_uint_eq(p->qos, qos);
	ck_assert(!p->retain);
	ck_assert_uint_eq(p->payload_len, strlen(payload));
	ck_assert_mem_eq(p->payload, payload, p->payload_len);
}

const char *hdr(size_t i, const char *name)
{
	return fake_header_value(pub(i), name);
}

void expect_hdr(size_t i, const char *name, const char *value)
{
	const char *v = hdr(i, name);
	ck_assert_msg(v != NULL, "publish #%zu has no %s", i, name);
	ck_assert_str_eq(v, value);
}

/* The exact list of user property names of publish i, in order. */
void expect_user_names(size_t i, const char *const *names, size_t count)
{
	const struct fake_publish *p = pub(i);
	size_t pos = 0, n = 0;
	struct dlq_header e;
	while(headers__next(p->headers, p->headers_len, &pos, &e)){
		if(e.kind != DLQ_HDR_USER_PROPERTY) continue;
		ck_assert_msg(n < count, "publish #%zu: unexpected user property %s", i, e.a);
		ck_assert_str_eq(e.a, names[n]);
		n++;
	}
	ck_assert_uint_eq(pos, p->headers_len);
	ck_assert_uint_eq(n, count);
}

/* The dlq-id a retry copy was stamped with, copied out. */
void copy_id(size_t i, char out[DLQ_ID_LEN + 1])
{
	const char *v = hdr(i, DLQ_PROP_ID);
	ck_assert_ptr_nonnull(v);
	ck_assert_uint_eq(strlen(v), DLQ_ID_LEN);
	memcpy(out, v, DLQ_ID_LEN + 1);
}

void expect_message(size_t i, const struct want *w)
{
	const struct {
		const char *name, *value;
	} props[] = {
		{DLQ_PROP_RETRY_COUNT, w->retry_count},
		{DLQ_PROP_ORIGIN_TOPIC, w->origin_topic},
		{DLQ_PROP_ORIGIN_ID, w->origin_id},
		{DLQ_PROP_FIRST_NACK_TIME, w->first_nack_time},
		{DLQ_PROP_DEAD_LETTER_REASON, w->dl_reason},
		{DLQ_PROP_DEAD_LETTER_CLIENT, w->dl_client},
		{DLQ_PROP_DEAD_LETTER_FILTER, w->dl_filter},
		{DLQ_PROP_DEAD_LETTER_TIME, w->dl_time},
		{DLQ_PROP_DEAD_LETTER_CAUSE, w->dl_cause},
	};

	expect_publish(i, w->to, w->topic, w->qos, w->payload);
	if(w->names) expect_user_names(i, w->names, w->names_count);
	for(size_t k = 0; k < ARRAY_LEN(props); k++){
		if(props[k].value) expect_hdr(i, props[k].name, props[k].value);
	}
}

size_t logs_containing(const char *text)
{
	size_t n = 0;
	for(size_t i = 0; i < fake.log_count; i++){
		if(strstr(fake.logs[i], text)) n++;
	}
	return n;
}

const char *log_containing(const char *text)
{
	for(size_t i = 0; i < fake.log_count; i++){
		if(strstr(fake.logs[i], text)) return fake.logs[i];
	}
	return NULL;
}

void now_time(char out[32])
{
	envelope__format_time(fake.wall_ms, out);
}

/* The standard policies started, "42" tracked on "numbers" at QoS 1 (its
 * dlq-id in id0) and NACKed once by sub1: a retry copy is made for sub1. */
void start_tracking(const char *topic, const char *payload, uint8_t qos, char id[DLQ_ID_LEN + 1])
{
	start(standard, ARRAY_LEN(standard));
	track(topic, payload, qos, id);
}

void start_with_a_copy_for_sub1(char id0[DLQ_ID_LEN + 1])
{
	start_tracking("numbers", "42", 1, id0);
	ck_assert_int_eq(nack(id0, "sub1"), DLQ_NACK_RETRIED);
}

uint64_t start_with_a_delayed_copy(const char *topic, const char *payload, uint8_t qos, const struct dlq_headers *h,
		bool persists, char id[DLQ_ID_LEN + 1])
{
	struct dlq_nack_result res;

	start(delayed, ARRAY_LEN(delayed));
	track_with(topic, payload, qos, h, id);
	uint64_t t = fake.now_ms;
	ck_assert_int_eq(nack_with(id, "sub1", persists, -1, &res), DLQ_NACK_RETRIED);
	return t;
}

int start_filled_to_the_bound(char (*ids)[DLQ_ID_LEN + 1])
{
	int tracked = 0;

	start(small, ARRAY_LEN(small));
	while(tracked < FILL_MOST && engine__totals(&d)->evicted == 0){
		track("once", "", 0, ids[tracked]);
		tracked++;
	}
	fake.fail_publishes = 1000000;
	return tracked;
}

int no_session(void *ctx, const char *client)
{
	(void)ctx;
	(void)client;
	return 0;
}

/* Ticks at t - 1 (nothing new may go out) and at t (exactly one). */
void expect_due_at(uint64_t t, size_t published_before)
{
	fake.now_ms = t - 1;
	dlq__tick(&d);
	ck_assert_msg(fake.publish_count == published_before, "published before it was due (at %llu)",
			(unsigned long long)(t - 1));
	fake.now_ms = t;
	dlq__tick(&d);
	ck_assert_msg(fake.publish_count == published_before + 1, "%zu publishes when due, expected 1",
			fake.publish_count - published_before);
}

void setup(void)
{
	fake_reset();
	memset(&original, 0, sizeof(original));
	ck_assert_int_eq(headers__add(&original, DLQ_HDR_CONTENT_TYPE, "text/plain", 10, NULL, 0), 0);
	ck_assert_int_eq(headers__add_user(&original, "trace", "t-1"), 0);
}

void teardown(void)
{
	stop();
	headers__free(&original);
	fake_reset();
}
