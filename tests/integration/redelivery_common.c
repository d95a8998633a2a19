/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The helpers of redelivery_common.h: the tracking broker and its
 * observers, persistent raw subscribers, the crash loop, and the checks of
 * deliveries and dead letters that both redelivery suites make.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redelivery_common.h"

#define POLICY "plugin_opt_policy jobs/# max_attempts=3 dead_letter=dead/jobs"
#define REASON_PART "without acknowledgement"
/* How long the crash loop waits for a delivery before it reconnects. */
#define READ_TIMEOUT_MS 2000
/* More connections than any test needs: a loop that needs them is broken. */
#define MAX_CONNECTS 10

/* ---- brokers and observers ---- */

struct broker *tracking_broker(const char *label, const char *mode, bool window1)
{
	struct broker *b = broker_new(label);
	broker_plugin(b);
	broker_conf(b, POLICY);
	if(mode){
		broker_conf(b, "plugin_opt_" OPTION " %s", mode);
	}
	if(window1){
		broker_conf(b, "max_inflight_messages 1");
	}
	return b;
}

void scene_start_at(const char *file, int line, struct scene *s, struct broker *b)
{
	s->b = b;
	broker_start_at(file, line, b);
	s->watch = client_new(b, "watch", MQTT_PROTOCOL_V5);
	s->pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	client_subscribe(s->watch, "dead/#", 1);
	client_subscribe(s->watch, FILTER, 1);
}

const char *original_id(struct scene *s, const char *payload, size_t k)
{
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	const struct it_msg *m;
	while(!(m = client_find_payload(s->watch, FILTER, payload, k)) && it_now_ms() < deadline){
		client_wait(s->watch, FILTER, client_count(s->watch, FILTER) + 1, 50);
	}
	ck_assert_msg(m != NULL, "the watcher did not receive \"%s\" on " FILTER, payload);
	return expect_original(m);
}

struct raw *persistent(struct broker *b, const char *id, int protocol, const char *username)
{
	struct raw_options o = { .id = id, .protocol = protocol, .clean = false,
		.expiry_s = protocol == MQTT_PROTOCOL_V5 ? 3600 : 0, .username = username };
	return raw_new(b, &o);
}

void join_at(const char *file, int line, struct raw *r, const char *filter)
{
	raw_connect_at(file, line, r);
	unsigned granted = raw_subscribe_at(file, line, r, filter, 1);
	if(granted != 1){
		fail_here(file, line, "raw client %s: subscription to %s granted 0x%02x, expected QoS 1",
				raw_id(r), filter, granted);
	}
}

/* ---- the subscriber that dies before PUBACK ---- */

void crash_loop_at(const char *file, int line, struct crash_loop *cl)
{
	struct raw *r = cl->r;
	for(;;){
		if(raw_closed(r)){
			if(cl->connects == MAX_CONNECTS){
				raw_dump(r);
				fail_here(file, line, "raw client %s: still looping after %u reconnections "
						"(%u crashes, %u closes by the broker, %u timeouts)", raw_id(r),
						cl->connects, cl->crashes, cl->closed_by_broker, cl->timeouts);
			}
			if(!raw_connect_at(file, line, r)){
				fail_here(file, line, "raw client %s: reconnection %u found no session",
						raw_id(r), cl->connects + 1);
			}
			cl->connects++;
		}
		const struct raw_msg *m = NULL;
		enum raw_event e = raw_next_at(file, line, r, READ_TIMEOUT_MS, &m);
		if(e == RAW_CLOSED){
			cl->closed_by_broker++;
			continue;
		}
		if(e == RAW_TIMEOUT){
			cl->timeouts++;
			raw_close(r);
			continue;
		}
		if(!strcmp(m->payload, cl->crash_on)){
			const char *id = raw_user(m, DLQ_PROP_ID);
			if(cl->dlq_id && (!id || strcmp(id, cl->dlq_id))){
				fail_here(file, line, "raw client %s: \"%s\" carries dlq-id %s, expected %s",
						raw_id(r), cl->crash_on, id ? id : "(none)", cl->dlq_id);
			}
			cl->crashes++;
			raw_close(r);
			if(!cl->stop_after && cl->crashes == cl->max_crashes){
				return;
			}
			continue;
		}
		raw_puback(r, m->mid); /* the broker may have closed it meanwhile */
		cl->acked++;
		if(cl->stop_after && !strcmp(m->payload, cl->stop_after)){
			return;
		}
	}
}

/* ---- assertions ---- */

void expect_received_at(const char *file, int line, struct raw *r, const char *payload, size_t n)
{
	size_t got = raw_count(r, TOPIC, payload);
	if(got != n){
		raw_dump(r);
		fail_here(file, line, "raw client %s received \"%s\" %zu time(s), expected %zu",
				raw_id(r), payload, got, n);
	}
}

void expect_tracking_dead_letter_at(const char *file, int line, const struct it_msg *m,
		const char *payload, const char *origin_id, const char *client)
{
	if(strcmp(m->topic, DEAD) || strcmp(m->payload, payload)){
		fail_here(file, line, "dead letter on %s, payload \"%s\"; expected \"%s\" on " DEAD,
				m->topic, m->payload, payload);
	}
	expect_dead_letter_at(file, line, m, TOPIC, origin_id, MAX_ATTEMPTS, client, FILTER, NULL);
	const char *why = msg_user(m, DLQ_PROP_DEAD_LETTER_REASON);
	if(!strstr(why, REASON_PART)){
		fail_here(file, line, "dead letter \"%s\": reason \"%s\" does not contain \"" REASON_PART "\"",
				m->payload, why);
	}
}

void expect_dead_letters_at(const char *file, int line, struct scene *s, size_t n)
{
	clients_settle_at(file, line, s->pub, s->watch, (struct client *)NULL);
	client_expect_exactly_at(file, line, s->watch, "dead/#", n);
}

size_t broker_log_lines(const struct broker *b, const char *needle)
{
	char *log = broker_log(b);
	size_t n = lines_with(log, needle);
	free(log);
	return n;
}

size_t lines_with(const char *text, const char *needle)
{
	size_t n = 0;
	for(const char *p = text; p && *p;){
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		n += memmem(p, len, needle, strlen(needle)) != NULL;
		p = eol ? eol + 1 : NULL;
	}
	return n;
}
