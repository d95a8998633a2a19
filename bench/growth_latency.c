/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * One NACK's latency while delayed retry copies are pending (see growth.h):
 * a single libmosquitto client without a thread of its own, subscribed to
 * one tracked topic, which publishes, NACKs what it receives on
 * $CONTROL/dlq/v1/nack and times each round trip. The delayed NACKs carry
 * a response topic, so that the plugin answers every one of them and the
 * client knows each copy was scheduled (result "retried", with delayMs)
 * rather than refused; the measured NACKs carry none, as a worker's would,
 * and a refusal is still answered, on $CONTROL/dlq/v1/response.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mosquitto.h>
#include <mqtt_protocol.h>

#include "growth.h"
#include "load.h"
#include "mosquitto_dlq.h"

#define LAT_TOPIC BENCH_TOPIC_TRACKED "growth"
#define LAT_REPLY_TOPIC "bench/growth/reply"
/* An hour, the policy's default retry_max_delay: none falls due during the
 * suite. */
#define LAT_DELAY_MS "3600000"
/* Delayed NACKs whose reply has not come yet, at most. */
#define LAT_DELAY_WINDOW 100
#define LAT_WAIT_MS 10000

enum lat_mode { MODE_DELAY, MODE_MEASURE };

struct lat_client {
	struct link link;            /* first: the callbacks' userdata */
	struct mosquitto *m;
	enum lat_mode mode;
	uint64_t originals, copies, retried, refused;
	uint64_t nack_ns;            /* MODE_MEASURE: when the NACK went out; 0: none out */
	uint64_t *samples;
	uint64_t nsamples, cap;
};

/* NACKs id on the client's connection: with a delay and a response topic
 * (MODE_DELAY), or bare (MODE_MEASURE). */
static void send_nack(struct lat_client *c, const char *id)
{
	mosquitto_property *props = NULL;
	if(c->mode == MODE_DELAY && (mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY,
			DLQ_PROP_NACK_DELAY_MS, LAT_DELAY_MS)
			|| mosquitto_property_add_string(&props, MQTT_PROP_RESPONSE_TOPIC, LAT_REPLY_TOPIC))){
		c->link.failed = true;
		mosquitto_property_free_all(&props);
		return;
	}
	if(c->mode == MODE_MEASURE) c->nack_ns = bench__now_ns();
	if(mosquitto_publish_v5(c->m, NULL, DLQ_NACK_TOPIC, DLQ_ID_LEN, id, 1, false, props)) c->link.failed = true;
	mosquitto_property_free_all(&props);
}

static void on_reply(struct lat_client *c, const struct mosquitto_message *msg)
{
	/* One NACK per reply, so one entry: "retried" with its delayMs, or an
	 * error. */
	char text[512];
	int len = msg->payloadlen < (int)sizeof(text) - 1 ? msg->payloadlen : (int)sizeof(text) - 1;
	memcpy(text, msg->payload, (size_t)len);
	text[len] = '\0';
	if(c->mode == MODE_DELAY && strstr(text, "\"result\":\"retried\"") && strstr(text, "\"delayMs\"")){
		c->retried++;
		return;
	}
	if(c->refused++ == 0) fprintf(stderr, "dlq_bench: growth: a NACK was refused: %s\n", text);
}

static void on_message(struct mosquitto *m, void *ud, const struct mosquitto_message *msg,
		const mosquitto_property *props)
{
	struct lat_client *c = ud;
	char id[DLQ_ID_LEN + 1];
	bool is_copy;
	(void)m;

	if(strcmp(msg->topic, LAT_TOPIC)){
		on_reply(c, msg);
		return;
	}
	if(!client__read_stamp(props, id, &is_copy)){
		fprintf(stderr, "dlq_bench: growth: a delivery without a dlq-id\n");
		c->link.failed = true;
		return;
	}
	if(is_copy){
		c->copies++;
		if(c->mode != MODE_MEASURE || c->nack_ns == 0){
			fprintf(stderr, "dlq_bench: growth: a retry copy nobody waited for (a delayed one fell due?)\n");
			c->link.failed = true;
			return;
		}
		if(c->nsamples < c->cap) c->samples[c->nsamples++] = bench__now_ns() - c->nack_ns;
		c->nack_ns = 0;
		return;
	}
	c->originals++;
	send_nack(c, id);
}

/* What loop_until waits for: want or more of a count. */
enum lat_wait { WAIT_CONNECTED, WAIT_SUBSCRIBED, WAIT_SAMPLES, WAIT_RETRIED };

static bool reached(const struct lat_client *c, enum lat_wait w, uint64_t want)
{
	switch(w){
		case WAIT_CONNECTED: return c->link.connected;
		case WAIT_SUBSCRIBED: return c->link.subscribed;
		case WAIT_SAMPLES: return c->nsamples >= want;
		case WAIT_RETRIED: return c->retried >= want;
	}
	return false;
}

/* Runs the client's loop until w reaches want, for at most LAT_WAIT_MS.
 * Returns 0, or -1 on a failure, a refused NACK, a timeout or an
 * interruption. */
static int loop_until(struct lat_client *c, enum lat_wait w, uint64_t want, const char *what)
{
	uint64_t deadline = bench__now_ns() + LAT_WAIT_MS * 1000000ull;
	while(!reached(c, w, want)){
		if(c->link.failed || c->refused || bench__interrupted()) return -1;
		if(bench__now_ns() > deadline){
			fprintf(stderr, "dlq_bench: growth: timed out waiting for %s\n", what);
			return -1;
		}
		int rc = mosquitto_loop(c->m, 10, 1);
		if(rc){
			fprintf(stderr, "dlq_bench: growth: %s\n", mosquitto_strerror(rc));
			return -1;
		}
	}
	return c->link.failed || c->refused ? -1 : 0;
}

static int publish_original(struct lat_client *c)
{
	static const char payload[BENCH_PAYLOAD] = "growth";
	return mosquitto_publish_v5(c->m, NULL, LAT_TOPIC, BENCH_PAYLOAD, payload, 1, false, NULL) ? -1 : 0;
}

/* nacks round trips, one at a time. */
static int measure(struct lat_client *c, size_t nacks, uint64_t pending, struct growth_latency *out)
{
	c->mode = MODE_MEASURE;
	c->nsamples = 0;
	for(size_t i = 0; i < nacks; i++){
		if(publish_original(c) || loop_until(c, WAIT_SAMPLES, i + 1, "a retry copy")) return -1;
	}
	out->pending = pending;
	out->nacks = c->nsamples;
	out->p50_us = stats__percentile_u64(c->samples, c->nsamples, 50) / 1e3;
	out->p99_us = stats__percentile_u64(c->samples, c->nsamples, 99) / 1e3;
	out->max_us = stats__percentile_u64(c->samples, c->nsamples, 100) / 1e3;
	return 0;
}

/* delayed tracked messages NACKed with a delay as they arrive, a window at
 * a time, each confirmed by its reply. */
static int schedule_delayed(struct lat_client *c, uint64_t delayed)
{
	uint64_t base = c->originals, sent = 0;
	c->mode = MODE_DELAY;
	while(c->retried < delayed){
		while(sent < delayed && sent - c->retried < LAT_DELAY_WINDOW){
			if(publish_original(c)) return -1;
			sent++;
		}
		if(loop_until(c, WAIT_RETRIED, c->retried + 1, "the reply to a delayed NACK")) return -1;
	}
	return c->originals - base == delayed ? 0 : -1;
}

int growth__nack_latency(const struct broker *b, uint64_t delayed, size_t nacks, struct growth_latency *before,
		struct growth_latency *after)
{
	struct lat_client c = { .link.name = "growth latency client" };
	char id[64];
	int rc = -1;

	c.samples = malloc((nacks ? nacks : 1) * sizeof(*c.samples));
	c.cap = nacks;
	snprintf(id, sizeof(id), "growth-lat-%d", (int)getpid());
	c.m = mosquitto_new(id, true, &c);
	if(c.samples == NULL || c.m == NULL) goto done;
	mosquitto_int_option(c.m, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
	link__callbacks_set(c.m);
	mosquitto_message_v5_callback_set(c.m, on_message);
	if(mosquitto_connect(c.m, b->host, b->port, 60)){
		fprintf(stderr, "dlq_bench: growth: cannot connect to %s: %s\n", b->host, strerror(errno));
		goto done;
	}
	if(loop_until(&c, WAIT_CONNECTED, 1, "the connection")) goto done;
	if(mosquitto_subscribe_v5(c.m, NULL, LAT_TOPIC, 1, 0, NULL) || loop_until(&c, WAIT_SUBSCRIBED, 1, "the subscription")){
		goto done;
	}
	if(measure(&c, nacks, 0, before) || schedule_delayed(&c, delayed) || measure(&c, nacks, delayed, after)) goto done;
	rc = c.refused || c.link.failed ? -1 : 0;

done:
	if(rc && !bench__interrupted()){
		fprintf(stderr, "dlq_bench: growth: NACK latency failed (%llu originals, %llu copies, %llu retried, "
				"%llu refused)\n", (unsigned long long)c.originals, (unsigned long long)c.copies,
				(unsigned long long)c.retried, (unsigned long long)c.refused);
	}
	if(c.m){
		if(c.link.connected) mosquitto_disconnect_v5(c.m, 0, NULL);
		mosquitto_destroy(c.m);
	}
	free(c.samples);
	return rc;
}
