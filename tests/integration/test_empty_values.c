/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Empty property values, which Mosquitto 2.1.2 hands a plugin as NULL where
 * 2.0 gave "": a tracked publish with an empty content type, user
 * property value or name, and compact NACKs with an empty reason,
 * delay-ms or user property name (of a real id and of a garbage one). Each
 * once crashed a 2.1.2 broker. The broker must stay up, an empty value must
 * reach the dead letter as an empty value, and a NACK must be answered as
 * it would be with the value absent or malformed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "harness.h"
#include "raw.h"

/* The value of the user property called name on m, or NULL; unlike
 * msg_user, an empty name is a name. */
static const char *user_named(const struct it_msg *m, const char *name, size_t *count)
{
	const char *v = NULL;
	*count = 0;
	for(size_t i = 0; i < m->nusers; i++){
		if(!strcmp(m->users[i].name, name)){
			if(v == NULL) v = m->users[i].value;
			(*count)++;
		}
	}
	return v;
}

static void expect_user(const struct it_msg *m, const char *what, const char *name, const char *value)
{
	size_t n = 0;
	const char *v = user_named(m, name, &n);
	ck_assert_msg(n == 1 && !strcmp(v, value), "%s: user property \"%s\" is %s%s%s (%zu times), expected \"%s\"",
			what, name, v ? "\"" : "", v ? v : "absent", v ? "\"" : "", n, value);
}

static void expect_empty_props(const struct it_msg *m, const char *what)
{
	ck_assert_msg(m->content_type && m->content_type[0] == '\0', "%s: content type %s, expected \"\"", what,
			m->content_type ? m->content_type : "absent");
	ck_assert_msg(m->correlation_len == 0, "%s: %u bytes of correlation data, expected 0", what,
			(unsigned)m->correlation_len);
	expect_user(m, what, "k", "");
	expect_user(m, what, "", "v");
	expect_user(m, what, "both", "");
}

/* Encoded v5 properties, as a hostile publisher sends them (raw: 2.0.11's
 * libmosquitto crashes copying an empty content type or name). */
struct props_buf {
	unsigned char b[256];
	size_t n;
};

static void put_str(struct props_buf *p, const char *s)
{
	size_t len = strlen(s);
	p->b[p->n++] = (unsigned char)(len >> 8);
	p->b[p->n++] = (unsigned char)len;
	memcpy(p->b + p->n, s, len);
	p->n += len;
}

static void put_prop(struct props_buf *p, unsigned id, const char *a, const char *b)
{
	p->b[p->n++] = (unsigned char)id;
	put_str(p, a);
	if(b) put_str(p, b);
}

static struct props_buf empty_props(void)
{
	struct props_buf p = {0};
	put_prop(&p, MQTT_PROP_CONTENT_TYPE, "", NULL);
	put_prop(&p, MQTT_PROP_CORRELATION_DATA, "", NULL);
	put_prop(&p, MQTT_PROP_USER_PROPERTY, "k", "");
	put_prop(&p, MQTT_PROP_USER_PROPERTY, "", "v");
	put_prop(&p, MQTT_PROP_USER_PROPERTY, "both", "");
	return p;
}

START_TEST(test_empty_values_reach_the_dead_letter)
{
	struct broker *b = dlq_broker("policy empty max_attempts=2 dead_letter=dlq/empty");
	struct client *worker = client_subscribed(b, "worker", "empty");
	struct client *watcher = client_subscribed(b, "watcher", "dlq/#");

	struct raw_options o = { .id = "hostile", .protocol = MQTT_PROTOCOL_V5, .clean = true };
	struct raw *pub = raw_new(b, &o);
	raw_connect(pub);
	struct props_buf p = empty_props();
	ck_assert(raw_send_publish_props(pub, "empty", "x", 1, 1, p.b, p.n));

	const struct it_msg *orig = client_expect(worker, "empty", 1);
	const char *id = expect_original(orig);
	client_nack(worker, id, NULL);
	const struct it_msg *copy = client_expect(worker, "empty", 2);
	expect_empty_props(copy, "retry copy");
	client_nack(worker, expect_retry_copy(copy, "empty", id, 1), NULL);
	const struct it_msg *dl = client_expect(watcher, "dlq/empty", 1);
	ck_assert_str_eq(dl->payload, "x");
	expect_empty_props(dl, "dead letter");
	expect_dead_letter(dl, "empty", id, 2, client_id(worker), "empty", NULL);

	clients_expect_totals(worker, 2, watcher, 1);
	raw_free(pub);
}
END_TEST

/* A compact NACK of id with one user property name=value. */
static void nack_with(struct client *c, const char *id, const char *name, const char *value)
{
	mosquitto_property *p = NULL;
	ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, name, value), 0);
	int rc = client_publish(c, DLQ_NACK_TOPIC, id, (int)strlen(id), 1, p);
	mosquitto_property_free_all(&p);
	ck_assert_msg(rc < 0x80, "the broker refused a NACK with %s=\"%s\": %s", name, value, mosquitto_reason_string(rc));
}

START_TEST(test_nacks_with_empty_values)
{
	struct broker *b = dlq_broker("policy jobs max_attempts=2 dead_letter=dlq/jobs");
	struct client *w = client_subscribed(b, "worker", "jobs");
	struct client *watcher = client_subscribed(b, "watcher", "dlq/#");

	/* A garbage id: each is answered (unknown id or bad delay), none
	 * takes the broker down. */
	const char *const names[] = { DLQ_PROP_NACK_REASON, DLQ_PROP_NACK_DELAY_MS, "", "" };
	const char *const values[] = { "", "", "x", "" };
	size_t replies = 0;
	for(size_t i = 0; i < 4; i++){
		nack_with(w, "garbage", names[i], values[i]);
		client_expect(w, DLQ_RESPONSE_TOPIC, ++replies);
	}

	client_publish_str(watcher, "jobs", "job", 1);
	const char *id = expect_original(client_expect(w, "jobs", 1));
	char kept[32];
	snprintf(kept, sizeof(kept), "%s", id);

	/* An empty delay-ms is malformed: refused, nothing recorded. */
	nack_with(w, kept, DLQ_PROP_NACK_DELAY_MS, "");
	cJSON *doc = expect_reply(client_expect(w, DLQ_RESPONSE_TOPIC, ++replies), 1);
	expect_reply_error(reply_entry(doc, 0), "\"" DLQ_PROP_NACK_DELAY_MS "\" must be a whole number");
	cJSON_Delete(doc);

	/* An empty-named property is no reason; an empty reason is none. */
	nack_with(w, kept, "", "");
	const struct it_msg *copy = client_expect(w, "jobs", 2);
	const char *copy_id = expect_retry_copy(copy, "jobs", kept, 1);
	nack_with(w, copy_id, DLQ_PROP_NACK_REASON, "");
	const struct it_msg *dl = client_expect(watcher, "dlq/jobs", 1);
	expect_dead_letter(dl, "jobs", kept, 2, client_id(w), "jobs", NULL);

	clients_settle(w, watcher);
	client_expect_exactly(w, "jobs", 2);
	client_expect_exactly(watcher, "dlq/jobs", 1);
}
END_TEST

int main(void)
{
	return harness_run(check_suite("empty_values", harness_tcase("empty_values"),
			CHECK_TESTS(test_empty_values_reach_the_dead_letter, test_nacks_with_empty_values)));
}
