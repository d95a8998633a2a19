/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The load driver (see bench.h). Every client of a phase (publishers,
 * subscribers, the dead-letter consumer) runs in this one thread on one
 * ppoll loop, with libmosquitto's non-threaded API: on a two-core machine
 * the broker gets one core and the load the other, and no client pays for
 * thread hand-offs. Publisher i sends to its own topic, which subscriber i
 * alone receives. The payload starts with the send time (CLOCK_MONOTONIC,
 * ns), the pair index and a sequence number, so latency is measured end to
 * end on one clock. Flow control is a window per pair: messages (in a NACK
 * storm, chains) sent and not yet done, kept below what the broker queues
 * per client (max_queued_messages 1000), so no message is ever dropped.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mosquitto.h>
#include <mqtt_protocol.h>

#include "bench.h"
#include "mosquitto_dlq.h"

#define SETUP_TIMEOUT_MS 10000
#define DRAIN_TIMEOUT_MS 10000
#define MISC_INTERVAL_NS 500000000ull
/* A paced publisher that falls this far behind starts again from now
 * rather than sending a burst. */
#define PACE_SLACK_NS 100000000ull
/* Published per pair per loop pass at most, so that pairs take turns. */
#define BURST 32
/* A paced run never has more than this in flight per pair, so a broker
 * that cannot keep up does not make it drop messages. */
#define PACED_CAP 900
#define READS_PER_PASS 4096

enum role { ROLE_PUB, ROLE_SUB, ROLE_DEAD };

struct client {
	struct mosquitto *mosq;
	struct load *load;
	enum role role;
	int index;
	bool connected;
	bool subscribed;
	bool failed;
};

struct pair {
	uint64_t sent;
	uint64_t done;         /* delivered (or dead-lettered, in a storm) */
	uint64_t quota;        /* count mode: originals this pair still sends */
	uint64_t next_ns;      /* paced: when the next one is due */
	uint64_t gap_ns;
	uint32_t seq;
	char topic[64];
};

struct counters {
	uint64_t delivered, originals, nacks, copies, dead_letters, untagged;
};

struct load {
	const struct load_opts *o;
	struct client clients[2 * BENCH_MAX_PAIRS + 1];
	int nclients;
	struct pair pairs[BENCH_MAX_PAIRS];
	struct counters c;
	bool publishing;
	bool measuring;
	uint64_t *lat;         /* latency samples, ns */
	size_t nlat, caplat;
	uint8_t *payload;
	uint64_t errors;
};

static void on_connect(struct mosquitto *m, void *ud, int rc, int flags, const mosquitto_property *props)
{
	struct client *c = ud;
	(void)m;
	(void)flags;
	(void)props;
	if(rc == 0){
		c->connected = true;
	}else{
		c->failed = true;
		fprintf(stderr, "dlq_bench: connection refused: %s\n", mosquitto_reason_string(rc));
	}
}

static void on_subscribe(struct mosquitto *m, void *ud, int mid, int count, const int *granted,
		const mosquitto_property *props)
{
	struct client *c = ud;
	(void)m;
	(void)mid;
	(void)props;
	if(count == 1 && granted[0] < 0x80){
		c->subscribed = true;
	}else{
		c->failed = true;
		fprintf(stderr, "dlq_bench: subscription refused\n");
	}
}

static void on_disconnect(struct mosquitto *m, void *ud, int rc, const mosquitto_property *props)
{
	struct client *c = ud;
	(void)m;
	(void)props;
	if(c->connected && rc != 0){
		fprintf(stderr, "dlq_bench: client %s lost its connection: %s\n",
				c->role == ROLE_PUB ? "publisher" : "subscriber", mosquitto_reason_string(rc));
		c->failed = true;
	}
	c->connected = false;
}

/* Reads the dlq-id (copied into id) and whether retry-count is present. */
static bool read_stamp(const mosquitto_property *props, char id[DLQ_ID_LEN + 1], bool *is_copy)
{
	bool found = false;
	*is_copy = false;
	for(const mosquitto_property *p = props; p; p = mosquitto_property_next(p)){
		if(mosquitto_property_identifier(p) != MQTT_PROP_USER_PROPERTY) continue;
		char *name = NULL, *value = NULL;
		if(mosquitto_property_read_string_pair(p, MQTT_PROP_USER_PROPERTY, &name, &value, false)){
			if(!strcmp(name, DLQ_PROP_ID) && strlen(value) == DLQ_ID_LEN){
				memcpy(id, value, DLQ_ID_LEN + 1);
				found = true;
			}else if(!strcmp(name, DLQ_PROP_RETRY_COUNT)){
				*is_copy = true;
			}
		}
		free(name);
		free(value);
	}
	return found;
}

static bool has_user_property(const mosquitto_property *props)
{
	for(const mosquitto_property *p = props; p; p = mosquitto_property_next(p)){
		if(mosquitto_property_identifier(p) == MQTT_PROP_USER_PROPERTY) return true;
	}
	return false;
}

static void on_message(struct mosquitto *m, void *ud, const struct mosquitto_message *msg,
		const mosquitto_property *props)
{
	struct client *c = ud;
	struct load *L = c->load;
	uint64_t sent_ns;
	uint32_t idx;

	if(msg->payloadlen < 16){
		L->errors++;
		return;
	}
	memcpy(&sent_ns, msg->payload, 8);
	memcpy(&idx, (const uint8_t *)msg->payload + 8, 4);
	if(idx >= (uint32_t)L->o->pairs){
		L->errors++;
		return;
	}
	if(c->role == ROLE_DEAD){
		L->c.dead_letters++;
		L->pairs[idx].done++;
		return;
	}

	bool is_copy = false;
	L->c.delivered++;
	if(L->o->kind == LOAD_STORM){
		char id[DLQ_ID_LEN + 1];
		if(read_stamp(props, id, &is_copy)){
			/* The NACK goes out on the subscriber's own connection. */
			if(mosquitto_publish_v5(m, NULL, DLQ_NACK_TOPIC, DLQ_ID_LEN, id, L->o->qos, false, NULL) == 0){
				L->c.nacks++;
			}else{
				L->errors++;
			}
		}else{
			L->c.untagged++;
		}
	}else if(L->o->kind == LOAD_TRACKED && !has_user_property(props)){
		L->c.untagged++;
	}
	if(is_copy){
		L->c.copies++;
		return;
	}
	L->c.originals++;
	if(L->o->kind != LOAD_STORM) L->pairs[idx].done++;
	if(L->measuring && L->o->record_latency && L->nlat < L->caplat){
		L->lat[L->nlat++] = bench__now_ns() - sent_ns;
	}
}

static int client_open(struct load *L, enum role role, int index)
{
	struct client *c = &L->clients[L->nclients];
	char id[96];
	static const char *names[] = { "pub", "sub", "dead" };

	memset(c, 0, sizeof(*c));
	c->load = L;
	c->role = role;
	c->index = index;
	snprintf(id, sizeof(id), "%s-%s%d-%d", L->o->label, names[role], index, (int)getpid());
	c->mosq = mosquitto_new(id, true, c);
	if(c->mosq == NULL) return -1;
	L->nclients++;
	mosquitto_int_option(c->mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
	mosquitto_connect_v5_callback_set(c->mosq, on_connect);
	mosquitto_subscribe_v5_callback_set(c->mosq, on_subscribe);
	mosquitto_disconnect_v5_callback_set(c->mosq, on_disconnect);
	mosquitto_message_v5_callback_set(c->mosq, on_message);
	const struct broker *b = L->o->broker;
	int rc = mosquitto_connect(c->mosq, b->host, b->port, 60);
	if(rc){
		fprintf(stderr, "dlq_bench: connect to %s: %s\n", b->host, mosquitto_strerror(rc));
		return -1;
	}
	int fd = mosquitto_socket(c->mosq);
	int fl = fcntl(fd, F_GETFL);
	if(fl >= 0 && !(fl & O_NONBLOCK)) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	return 0;
}

static void publish_one(struct load *L, int i)
{
	struct pair *p = &L->pairs[i];
	uint64_t now = bench__now_ns();
	uint32_t idx = (uint32_t)i;
	memcpy(L->payload, &now, 8);
	memcpy(L->payload + 8, &idx, 4);
	memcpy(L->payload + 12, &p->seq, 4);
	int rc = mosquitto_publish_v5(L->clients[i].mosq, NULL, p->topic, (int)L->o->payload_len,
			L->payload, L->o->qos, false, NULL);
	if(rc){
		L->errors++;
		L->clients[i].failed = true;
		return;
	}
	p->seq++;
	p->sent++;
	if(p->quota) p->quota--;
}

/* Publishes what the window, the quota and the pace allow. Returns the
 * nanoseconds until a paced publisher is next due (or a short wait). */
static uint64_t publish_step(struct load *L, uint64_t now)
{
	uint64_t wait = 10000000; /* 10 ms */
	for(int i = 0; i < L->o->pairs; i++){
		struct pair *p = &L->pairs[i];
		if(L->o->count && p->quota == 0) continue;
		if(L->o->rate > 0){
			if(now > p->next_ns + PACE_SLACK_NS) p->next_ns = now;
			int n = 0;
			while(p->next_ns <= now && p->sent - p->done < PACED_CAP && n++ < BURST){
				publish_one(L, i);
				p->next_ns += p->gap_ns;
			}
			if(p->next_ns > now && p->next_ns - now < wait) wait = p->next_ns - now;
			if(p->next_ns <= now) wait = 0;
		}else{
			int n = 0;
			while(p->sent - p->done < L->o->window && n++ < BURST && (!L->o->count || p->quota)){
				publish_one(L, i);
			}
			if(p->sent - p->done < L->o->window && (!L->o->count || p->quota)) wait = 0;
		}
	}
	return wait;
}

static bool any_failed(const struct load *L)
{
	for(int i = 0; i < L->nclients; i++){
		if(L->clients[i].failed) return true;
	}
	return L->errors > 0;
}

enum until { UNTIL_CONNECTED, UNTIL_SUBSCRIBED, UNTIL_DEADLINE, UNTIL_DRAINED };

static bool reached(const struct load *L, enum until u)
{
	for(int i = 0; i < L->nclients; i++){
		const struct client *c = &L->clients[i];
		if(u == UNTIL_CONNECTED && !c->connected) return false;
		if(u == UNTIL_SUBSCRIBED && c->role != ROLE_PUB && !c->subscribed) return false;
	}
	if(u == UNTIL_DRAINED){
		for(int i = 0; i < L->o->pairs; i++){
			if(L->pairs[i].done < L->pairs[i].sent || L->pairs[i].quota) return false;
		}
	}
	return u != UNTIL_DEADLINE;
}

/* Runs the loop until the condition holds or the deadline passes. Returns
 * 0 if the condition held (or, for UNTIL_DEADLINE, the time ran out
 * without error), -1 on a client error or a missed deadline. */
static int run_until(struct load *L, enum until u, uint64_t deadline)
{
	struct pollfd fds[2 * BENCH_MAX_PAIRS + 1];
	uint64_t next_misc = bench__now_ns() + MISC_INTERVAL_NS;

	for(;;){
		if(any_failed(L)) return -1;
		if(reached(L, u)) return 0;
		uint64_t now = bench__now_ns();
		if(now >= deadline) return u == UNTIL_DEADLINE ? 0 : -1;

		uint64_t wait = L->publishing ? publish_step(L, now) : 10000000;
		/* A spinning load never sleeps, so the broker never pays for
		 * waking it: with one core each, the broker is the bottleneck. */
		if(L->o->spin && (L->publishing || u == UNTIL_DRAINED)) wait = 0;
		if(deadline - now < wait) wait = deadline - now;
		for(int i = 0; i < L->nclients; i++){
			struct mosquitto *m = L->clients[i].mosq;
			if(mosquitto_want_write(m)) mosquitto_loop_write(m, 1);
			fds[i].fd = mosquitto_socket(m);
			fds[i].events = POLLIN | (mosquitto_want_write(m) ? POLLOUT : 0);
			fds[i].revents = 0;
		}
		struct timespec ts = { .tv_sec = (time_t)(wait / 1000000000u), .tv_nsec = (long)(wait % 1000000000u) };
		int n = ppoll(fds, (nfds_t)L->nclients, &ts, NULL);
		if(n < 0 && errno != EINTR) return -1;
		for(int i = 0; n > 0 && i < L->nclients; i++){
			struct client *c = &L->clients[i];
			if(fds[i].revents & (POLLIN | POLLHUP | POLLERR)){
				/* mosquitto_loop_read reads one packet per call for QoS 0
				 * traffic; errno EAGAIN after it means the socket is empty. */
				for(int k = 0; k < READS_PER_PASS; k++){
					errno = 0;
					int rc = mosquitto_loop_read(c->mosq, 1);
					if(rc){
						if(c->connected || u == UNTIL_CONNECTED) c->failed = true;
						break;
					}
					if(errno == EAGAIN || errno == EWOULDBLOCK) break;
				}
			}
			if(fds[i].revents & POLLOUT) mosquitto_loop_write(c->mosq, 1);
		}
		if(now >= next_misc){
			for(int i = 0; i < L->nclients; i++){
				mosquitto_loop_misc(L->clients[i].mosq);
			}
			next_misc = now + MISC_INTERVAL_NS;
		}
	}
}

static void close_all(struct load *L)
{
	for(int i = 0; i < L->nclients; i++){
		struct client *c = &L->clients[i];
		if(c->connected){
			c->connected = false;
			mosquitto_disconnect_v5(c->mosq, 0, NULL);
			for(int k = 0; k < 100 && mosquitto_want_write(c->mosq); k++){
				mosquitto_loop_write(c->mosq, 1);
			}
		}
		mosquitto_destroy(c->mosq);
	}
	L->nclients = 0;
}

static uint64_t ns_from_s(double s)
{
	return (uint64_t)(s * 1e9);
}

static int setup(struct load *L)
{
	const struct load_opts *o = L->o;
	const char *prefix = o->kind == LOAD_PLAIN ? BENCH_TOPIC_PLAIN : BENCH_TOPIC_TRACKED;
	for(int i = 0; i < o->pairs; i++){
		snprintf(L->pairs[i].topic, sizeof(L->pairs[i].topic), "%s%d", prefix, i);
		if(o->rate > 0) L->pairs[i].gap_ns = (uint64_t)(1e9 * o->pairs / o->rate);
	}
	/* Publishers first: client i is publisher i. */
	for(int i = 0; i < o->pairs; i++){
		if(client_open(L, ROLE_PUB, i)) return -1;
	}
	for(int i = 0; i < o->pairs; i++){
		if(client_open(L, ROLE_SUB, i)) return -1;
	}
	if(o->kind == LOAD_STORM && client_open(L, ROLE_DEAD, 0)) return -1;
	if(run_until(L, UNTIL_CONNECTED, bench__now_ns() + SETUP_TIMEOUT_MS * 1000000ull)){
		fprintf(stderr, "dlq_bench: clients did not connect within %d ms\n", SETUP_TIMEOUT_MS);
		return -1;
	}
	for(int i = 0; i < L->nclients; i++){
		struct client *c = &L->clients[i];
		const char *topic = c->role == ROLE_SUB ? L->pairs[c->index].topic : BENCH_DEAD_LETTER;
		if(c->role != ROLE_PUB && mosquitto_subscribe_v5(c->mosq, NULL, topic, o->qos, 0, NULL)) return -1;
	}
	if(run_until(L, UNTIL_SUBSCRIBED, bench__now_ns() + SETUP_TIMEOUT_MS * 1000000ull)){
		fprintf(stderr, "dlq_bench: subscriptions not granted within %d ms\n", SETUP_TIMEOUT_MS);
		return -1;
	}
	return 0;
}

static void result_from(struct load *L, const struct counters *a, const struct counters *b,
		uint64_t cpu0, uint64_t cpu1, double secs, struct load_result *res)
{
	double d = secs > 0 ? secs : 1e-9;
	res->seconds = secs;
	res->delivered_per_s = (double)(b->delivered - a->delivered) / d;
	res->originals_per_s = (double)(b->originals - a->originals) / d;
	res->nacks_sent_per_s = (double)(b->nacks - a->nacks) / d;
	res->copies_per_s = (double)(b->copies - a->copies) / d;
	res->dead_letters_per_s = (double)(b->dead_letters - a->dead_letters) / d;
	double cpu_s = (double)(cpu1 - cpu0) / 1e9;
	res->broker_cpu_util = cpu_s / d;
	uint64_t delivered = b->delivered - a->delivered + b->dead_letters - a->dead_letters;
	res->broker_us_per_msg = delivered ? cpu_s * 1e6 / (double)delivered : 0;
	uint64_t handled = b->copies - a->copies + b->dead_letters - a->dead_letters;
	res->broker_us_per_nack = handled ? cpu_s * 1e6 / (double)handled : 0;
	res->untagged = L->c.untagged;
	res->latency_samples = L->nlat;
	if(L->nlat){
		res->p50_us = stats__percentile_u64(L->lat, L->nlat, 50) / 1e3;
		res->p99_us = stats__percentile_u64(L->lat, L->nlat, 99) / 1e3;
	}
}

int load__run(const struct load_opts *o, struct load_result *res)
{
	struct load *L = calloc(1, sizeof(*L));
	int rc = -1;

	memset(res, 0, sizeof(*res));
	if(L == NULL) return -1;
	L->o = o;
	L->payload = malloc(o->payload_len < 16 ? 16 : o->payload_len);
	if(L->payload == NULL) goto done;
	memset(L->payload, 'x', o->payload_len);
	if(o->record_latency){
		double expect = (o->rate > 0 ? o->rate : 200000) * (o->measure_s + 1);
		L->caplat = (size_t)expect;
		L->lat = malloc(L->caplat * sizeof(*L->lat));
		if(L->lat == NULL) goto done;
	}
	for(int i = 0; i < o->pairs && o->count; i++){
		L->pairs[i].quota = o->count / (uint64_t)o->pairs + ((uint64_t)i < o->count % (uint64_t)o->pairs);
	}
	if(setup(L)) goto done;

	L->publishing = true;
	uint64_t now = bench__now_ns();
	for(int i = 0; i < o->pairs; i++){
		L->pairs[i].next_ns = now;
	}
	struct counters c0, c1;
	uint64_t cpu0, cpu1, t0, t1;
	if(o->count){
		c0 = L->c;
		cpu0 = broker__cpu_ns(o->broker);
		t0 = bench__now_ns();
		L->measuring = true;
		if(run_until(L, UNTIL_DRAINED, t0 + (uint64_t)o->timeout_ms * 1000000u)) goto done;
	}else{
		if(run_until(L, UNTIL_DEADLINE, now + ns_from_s(o->warmup_s))) goto done;
		c0 = L->c;
		cpu0 = broker__cpu_ns(o->broker);
		t0 = bench__now_ns();
		L->measuring = true;
		if(run_until(L, UNTIL_DEADLINE, t0 + ns_from_s(o->measure_s))) goto done;
	}
	L->measuring = false;
	c1 = L->c;
	cpu1 = broker__cpu_ns(o->broker);
	t1 = bench__now_ns();
	result_from(L, &c0, &c1, cpu0, cpu1, (double)(t1 - t0) / 1e9, res);

	L->publishing = false;
	if(!o->count && run_until(L, UNTIL_DRAINED, bench__now_ns() + DRAIN_TIMEOUT_MS * 1000000ull)){
		if(any_failed(L)) goto done;
	}
	for(int i = 0; i < o->pairs; i++){
		res->unfinished += L->pairs[i].sent - L->pairs[i].done;
	}
	res->ok = true;
	rc = 0;

done:
	if(rc && L->nclients){
		fprintf(stderr, "dlq_bench: phase %s failed (errors %llu)\n", o->label, (unsigned long long)L->errors);
	}
	close_all(L);
	free(L->lat);
	free(L->payload);
	free(L);
	return rc;
}
