/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Checks shared by the delay and restart suites: timed NACKs (compact and
 * JSON), their replies, and when a held-back copy may arrive.
 *
 * Timing. A copy may never arrive before it is due: its arrival (monotonic
 * clock, stamped by the client's network thread) must be at least the
 * delay after the NACK was sent, less EARLY_SLACK_MS for clock granularity;
 * the broker receives the NACK after it was sent, so this bound is strict.
 * The upper bound is generous (due + LATE_LIMIT_MS, counted from the
 * NACK's acknowledgement) so that a loaded machine does not fail a suite;
 * the measured lateness of every copy is printed ("lateness: ...").
 */
#ifndef DLQ_IT_DELAY_CHECKS_H
#define DLQ_IT_DELAY_CHECKS_H

#include <stdio.h>
#include <string.h>

#include "harness.h"

#define EARLY_SLACK_MS 50
/* Copies arrive within about 100 ms of due on a machine that is not busy
 * (the "lateness" lines); the limit is twenty times that, scaled like the
 * harness's deadlines for the runs that slow everything down. */
#define LATE_LIMIT_MS harness_deadline_ms(2000)

/* When a NACK was sent and when the broker acknowledged it. */
struct nack_at {
	uint64_t sent;         /* monotonic */
	uint64_t acked;
	int64_t wall_sent;     /* CLOCK_REALTIME */
	int64_t wall_acked;
};

/* A compact NACK with optional "delay-ms" and "reason" user properties and
 * an optional v5 response topic (then a reply comes even on success). */
static inline struct nack_at nack_compact(struct client *c, const char *id, const char *delay_ms,
		const char *response_topic)
{
	mosquitto_property *props = NULL;
	if(delay_ms){
		ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY,
				DLQ_PROP_NACK_DELAY_MS, delay_ms), 0);
	}
	if(response_topic){
		ck_assert_int_eq(mosquitto_property_add_string(&props, MQTT_PROP_RESPONSE_TOPIC, response_topic), 0);
	}
	struct nack_at at = { .sent = it_now_ms(), .wall_sent = it_wall_ms() };
	int rc = client_publish(c, DLQ_NACK_TOPIC, id, (int)strlen(id), 1, props);
	at.acked = it_now_ms();
	at.wall_acked = it_wall_ms();
	mosquitto_property_free_all(&props);
	ck_assert_msg(rc < 0x80, "the broker refused the NACK of %s: reason code 0x%02x", id, rc);
	return at;
}

/* A JSON NACK of id; delay is the raw JSON value of "delay" (NULL: none). */
static inline struct nack_at nack_json(struct client *c, const char *id, const char *delay)
{
	char doc[256];
	if(delay){
		snprintf(doc, sizeof(doc), "{\"commands\":[{\"command\":\"nack\",\"id\":\"%s\",\"delay\":%s}]}", id, delay);
	}else{
		snprintf(doc, sizeof(doc), "{\"commands\":[{\"command\":\"nack\",\"id\":\"%s\"}]}", id);
	}
	struct nack_at at = { .sent = it_now_ms(), .wall_sent = it_wall_ms() };
	int rc = client_publish_str(c, DLQ_CONTROL_TOPIC, doc, 1);
	at.acked = it_now_ms();
	at.wall_acked = it_wall_ms();
	ck_assert_msg(rc < 0x80, "the broker refused %s: reason code 0x%02x", doc, rc);
	return at;
}

/* The n-th (1-based) reply the client received on topic: one entry, a
 * success for id with this result, attempt and maxAttempts. Returns its
 * delayMs (-1 when absent). */
static inline long expect_ok_reply(struct client *c, const char *topic, size_t n, const char *id,
		const char *result, int attempt, int max_attempts)
{
	cJSON *doc = expect_reply(client_expect(c, topic, n), 1);
	const cJSON *e = reply_entry(doc, 0);
	expect_reply_ok(e, id, result, attempt, max_attempts);
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(e, "delayMs");
	long v = cJSON_IsNumber(d) ? (long)d->valuedouble : -1;
	cJSON_Delete(doc);
	return v;
}

/* The n-th (1-based) reply on topic: one error entry containing want. */
static inline void expect_error_reply(struct client *c, const char *topic, size_t n, const char *want)
{
	cJSON *doc = expect_reply(client_expect(c, topic, n), 1);
	expect_reply_error(reply_entry(doc, 0), want);
	cJSON_Delete(doc);
}

/* Fails unless m arrived no earlier than delay_ms after the NACK was sent
 * (less EARLY_SLACK_MS) and no later than LATE_LIMIT_MS after it was due;
 * prints how late it was. */
static inline void expect_due(const struct it_msg *m, const struct nack_at *at, uint64_t delay_ms, const char *what)
{
	int64_t late = (int64_t)m->at_ms - (int64_t)(at->sent + delay_ms);
	fprintf(stderr, "lateness: %s: delay %llu ms, arrived %lld ms after due\n",
			what, (unsigned long long)delay_ms, (long long)late);
	ck_assert_msg(late >= -EARLY_SLACK_MS, "%s: a copy delayed %llu ms arrived %lld ms before it was due",
			what, (unsigned long long)delay_ms, (long long)-late);
	ck_assert_msg(m->at_ms <= at->acked + delay_ms + LATE_LIMIT_MS,
			"%s: a copy delayed %llu ms arrived %lld ms after it was due (limit %d ms)",
			what, (unsigned long long)delay_ms, (long long)late, LATE_LIMIT_MS);
}

/* Fails unless m carries exactly one first-nack-time, RFC 3339 UTC with
 * milliseconds, naming a moment while the NACK at was under way. */
static inline void expect_first_nack_time(const struct it_msg *m, const struct nack_at *at)
{
	ck_assert_uint_eq(msg_user_count(m, DLQ_PROP_FIRST_NACK_TIME), 1);
	const char *v = msg_user(m, DLQ_PROP_FIRST_NACK_TIME);
	int64_t t = it_rfc3339_ms(v);
	ck_assert_msg(t >= 0, "%s \"%s\" is not RFC 3339 UTC with milliseconds", DLQ_PROP_FIRST_NACK_TIME, v);
	ck_assert_msg(t >= at->wall_sent - EARLY_SLACK_MS && t <= at->wall_acked + EARLY_SLACK_MS,
			"%s \"%s\" is %lld ms from the NACK (sent at wall %lld, acknowledged at %lld)",
			DLQ_PROP_FIRST_NACK_TIME, v, (long long)(t - at->wall_sent), (long long)at->wall_sent,
			(long long)at->wall_acked);
}

/* Sleeps until the monotonic time deadline (if it is still ahead). */
static inline void sleep_until(uint64_t deadline)
{
	uint64_t now = it_now_ms();
	if(deadline > now){
		it_sleep_ms((unsigned)(deadline - now));
	}
}

/* Copies a string that lives in a client's message list (freed with the
 * client) into buf. */
static inline const char *keep(char *buf, size_t size, const char *s)
{
	ck_assert_uint_lt(strlen(s), size);
	snprintf(buf, size, "%s", s);
	return buf;
}

#endif
