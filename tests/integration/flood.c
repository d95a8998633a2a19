/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The flooding client (see flood.h): libmosquitto's network thread counts
 * every message under the flooder's mutex; the test's thread queues
 * publishes and waits with deadlines.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "flood.h"
#include "harness_int.h"

#define CORRELATION_KEY "\"correlationData\":\"f-"

struct flood {
	struct flood *next;     /* the test's list of flooders */
	struct mosquitto *mosq;
	char id[128];
	char marker_topic[192];
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool connack;
	int connack_rc;
	bool connected;
	unsigned disconnects;
	size_t received;
	const char *needles[FLOOD_MAX_NEEDLES]; /* borrowed */
	size_t hits[FLOOD_MAX_NEEDLES];
	size_t nneedles;
	unsigned char *seen;    /* owned; one byte per request number */
	size_t distinct;
	size_t queued;          /* publishes queued, the markers included */
	size_t published;       /* on_publish callbacks */
};

/* The current test's flooders, newest first. */
static struct flood *floods;
static unsigned flood_seq;

void flood__reset(void)
{
	floods = NULL;
}

void flood__free_all(void)
{
	while(floods){
		flood_free(floods);
	}
}

static void on_connect(struct mosquitto *mosq, void *obj, int rc, int flags, const mosquitto_property *props)
{
	(void)mosq;
	(void)flags;
	(void)props;
	struct flood *f = obj;
	pthread_mutex_lock(&f->lock);
	f->connack = true;
	f->connack_rc = rc;
	f->connected = rc == 0;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

static void on_disconnect(struct mosquitto *mosq, void *obj, int rc, const mosquitto_property *props)
{
	(void)mosq;
	(void)rc;
	(void)props;
	struct flood *f = obj;
	pthread_mutex_lock(&f->lock);
	if(f->connected){
		f->disconnects++;
	}
	f->connected = false;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

/* libmosquitto calls this once per publish: for QoS 0 when it is written
 * to the socket, for QoS 1 at its PUBACK. It is counted, not matched by
 * mid: QoS 0 publishes take mids too, and they wrap at 65535, so after
 * 65,535 queued publishes an unwritten QoS 0 one can carry the marker's
 * mid and would pass for its PUBACK (200,000 at QoS 0 then stopped after
 * some 69,000 on 2.1). */
static void on_publish(struct mosquitto *mosq, void *obj, int mid, int reason, const mosquitto_property *props)
{
	(void)mosq;
	(void)mid;
	(void)reason;
	(void)props;
	struct flood *f = obj;
	pthread_mutex_lock(&f->lock);
	f->published++;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

/* Called with f->lock held. */
static void note_correlations(struct flood *f, const char *text)
{
	for(const char *p = strstr(text, CORRELATION_KEY); p; p = strstr(p, CORRELATION_KEY)){
		p += strlen(CORRELATION_KEY);
		char *end;
		unsigned long n = strtoul(p, &end, 10);
		if(end != p && *end == '"' && n < FLOOD_MAX_REQUESTS && !f->seen[n]){
			f->seen[n] = 1;
			f->distinct++;
		}
	}
}

static void on_message(struct mosquitto *mosq, void *obj, const struct mosquitto_message *mm,
		const mosquitto_property *props)
{
	(void)mosq;
	(void)props;
	struct flood *f = obj;
	/* The payload as a string, for strstr. */
	char *text = harness__xmalloc((size_t)mm->payloadlen + 1);
	if(mm->payloadlen > 0){
		memcpy(text, mm->payload, (size_t)mm->payloadlen);
	}
	text[mm->payloadlen] = '\0';
	pthread_mutex_lock(&f->lock);
	f->received++;
	for(size_t i = 0; i < f->nneedles; i++){
		if(strstr(text, f->needles[i])){
			f->hits[i]++;
		}
	}
	note_correlations(f, text);
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	free(text);
}

/* Waits on f->cond until deadline (monotonic ms); false once it passed.
 * Called with f->lock held. */
static bool wait_until(struct flood *f, uint64_t deadline)
{
	return it__cond_wait_until(&f->cond, &f->lock, deadline);
}

struct flood *flood_new_at(const char *file, int line, struct broker *b, const char *name)
{
	struct flood *f = calloc(1, sizeof(*f));
	if(!f){
		abort();
	}
	f->seen = calloc(FLOOD_MAX_REQUESTS, 1);
	if(!f->seen){
		abort();
	}
	snprintf(f->id, sizeof(f->id), "%s-%ld-f%u", name, (long)getpid(), ++flood_seq);
	snprintf(f->marker_topic, sizeof(f->marker_topic), "harness/flood/%s", f->id);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&f->lock, NULL);
	f->next = floods;
	floods = f;

	f->mosq = mosquitto_new(f->id, true, f);
	if(!f->mosq){
		fail_at(file, line, "mosquitto_new(%s) failed", f->id);
	}
	mosquitto_int_option(f->mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
	mosquitto_connect_v5_callback_set(f->mosq, on_connect);
	mosquitto_disconnect_v5_callback_set(f->mosq, on_disconnect);
	mosquitto_publish_v5_callback_set(f->mosq, on_publish);
	mosquitto_message_v5_callback_set(f->mosq, on_message);
	int rc = mosquitto_connect_bind_v5(f->mosq, broker_socket(b), 0, 60, NULL, NULL);
	if(rc != MOSQ_ERR_SUCCESS){
		fail_at(file, line, "flooder %s: connecting to %s: %s", f->id, broker_socket(b), mosquitto_strerror(rc));
	}
	rc = mosquitto_loop_start(f->mosq);
	if(rc != MOSQ_ERR_SUCCESS){
		fail_at(file, line, "flooder %s: mosquitto_loop_start: %s", f->id, mosquitto_strerror(rc));
	}
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	pthread_mutex_lock(&f->lock);
	while(!f->connack && wait_until(f, deadline)){
	}
	bool got = f->connack;
	int connack_rc = f->connack_rc;
	pthread_mutex_unlock(&f->lock);
	if(!got || connack_rc != 0){
		fail_at(file, line, "flooder %s: %s", f->id, got ? mosquitto_reason_string(connack_rc) : "no CONNACK");
	}
	return f;
}

const char *flood_id(const struct flood *f)
{
	return f->id;
}

size_t flood_count(struct flood *f, const char *needle)
{
	pthread_mutex_lock(&f->lock);
	ck_assert_msg(f->nneedles < FLOOD_MAX_NEEDLES, "too many needles for one flooder");
	size_t slot = f->nneedles++;
	f->needles[slot] = needle;
	f->hits[slot] = 0;
	pthread_mutex_unlock(&f->lock);
	return slot;
}

void flood_publish_at(const char *file, int line, struct flood *f, const char *topic,
		const void *payload, int len, int qos)
{
	pthread_mutex_lock(&f->lock);
	int rc = mosquitto_publish_v5(f->mosq, NULL, topic, len, payload, qos, false, NULL);
	if(rc == MOSQ_ERR_SUCCESS){
		f->queued++;
	}
	pthread_mutex_unlock(&f->lock);
	if(rc != MOSQ_ERR_SUCCESS){
		fail_at(file, line, "flooder %s: publish to %s: %s", f->id, topic, mosquitto_strerror(rc));
	}
}

void flood_drain_at(const char *file, int line, struct flood *f, int timeout_ms)
{
	pthread_mutex_lock(&f->lock);
	/* Published under the lock, so no callback is counted before it. */
	int rc = mosquitto_publish_v5(f->mosq, NULL, f->marker_topic, 6, "marker", 1, false, NULL);
	if(rc == MOSQ_ERR_SUCCESS){
		f->queued++;
	}
	/* Every publish queued so far has had its callback, the marker's
	 * PUBACK the last of them: the broker reads a connection's packets in
	 * order, so it has handled every publish before the marker. */
	uint64_t deadline = it_now_ms() + (uint64_t)timeout_ms;
	while(rc == MOSQ_ERR_SUCCESS && f->published < f->queued && wait_until(f, deadline)){
	}
	size_t queued = f->queued, published = f->published;
	unsigned disconnects = f->disconnects;
	pthread_mutex_unlock(&f->lock);
	if(rc != MOSQ_ERR_SUCCESS){
		fail_at(file, line, "flooder %s: publishing the marker: %s", f->id, mosquitto_strerror(rc));
	}
	if(published < queued){
		fail_at(file, line, "flooder %s: %zu of %zu publishes (the marker last) not sent or not acknowledged "
				"within %d ms; connection lost %u times", f->id, queued - published, queued, timeout_ms, disconnects);
	}
}

bool flood_wait(struct flood *f, size_t n, int timeout_ms)
{
	uint64_t deadline = it_now_ms() + (uint64_t)timeout_ms;
	pthread_mutex_lock(&f->lock);
	while(f->received < n && wait_until(f, deadline)){
	}
	bool ok = f->received >= n;
	pthread_mutex_unlock(&f->lock);
	return ok;
}

size_t flood_received(struct flood *f)
{
	pthread_mutex_lock(&f->lock);
	size_t n = f->received;
	pthread_mutex_unlock(&f->lock);
	return n;
}

size_t flood_hits(struct flood *f, size_t slot)
{
	pthread_mutex_lock(&f->lock);
	size_t n = slot < f->nneedles ? f->hits[slot] : 0;
	pthread_mutex_unlock(&f->lock);
	return n;
}

size_t flood_seen(struct flood *f)
{
	pthread_mutex_lock(&f->lock);
	size_t n = f->distinct;
	pthread_mutex_unlock(&f->lock);
	return n;
}

bool flood_connected(struct flood *f)
{
	pthread_mutex_lock(&f->lock);
	bool r = f->connected;
	pthread_mutex_unlock(&f->lock);
	return r;
}

unsigned flood_disconnects(struct flood *f)
{
	pthread_mutex_lock(&f->lock);
	unsigned n = f->disconnects;
	pthread_mutex_unlock(&f->lock);
	return n;
}

bool flood_wait_disconnects(struct flood *f, unsigned n, int timeout_ms)
{
	uint64_t deadline = it_now_ms() + (uint64_t)timeout_ms;
	pthread_mutex_lock(&f->lock);
	while(f->disconnects < n && wait_until(f, deadline)){
	}
	bool ok = f->disconnects >= n;
	pthread_mutex_unlock(&f->lock);
	return ok;
}

void flood_free(struct flood *f)
{
	if(!f){
		return;
	}
	for(struct flood **pp = &floods; *pp; pp = &(*pp)->next){
		if(*pp == f){
			*pp = f->next;
			break;
		}
	}
	if(f->mosq){
		mosquitto_disconnect(f->mosq);
		mosquitto_loop_stop(f->mosq, false);
		mosquitto_destroy(f->mosq);
	}
	free(f->seen);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cond);
	free(f);
}
