/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The load driver (see bench.h and load.h). Every client of a phase
 * (publishers, subscribers, the dead-letter consumer) runs in this one
 * thread on one ppoll loop, with libmosquitto's non-threaded API: on a
 * two-core machine the broker gets one core and the load the other, and no
 * client pays for thread hand-offs. Publisher i sends to its own topic,
 * which subscriber i alone receives (with a fan-out, each of pair i's
 * subscribers: a message is done when all of them have it). A phase may load several targets
 * (brokers, or kinds of traffic), each with its own pairs, taking turns of
 * a few milliseconds.
 * The payload starts with the send time (CLOCK_MONOTONIC, ns), the pair
 * index and a sequence number, so latency is measured end to end on one
 * clock. Flow control is a window per pair: messages (in a NACK storm,
 * chains) sent and not yet done, kept below what the broker queues per
 * client (max_queued_messages 1000), so no message is ever dropped.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mosquitto.h>

#include "load.h"

#define SETUP_TIMEOUT_MS 10000
#define DRAIN_TIMEOUT_MS 10000
#define MISC_INTERVAL_NS 500000000ull
/* A paced publisher that falls this far behind starts again from now
 * rather than sending a burst. */
#define PACE_SLACK_NS 100000000ull
/* Messages of pair p sent and not yet delivered to all its subscribers. */
static uint64_t open_msgs(const struct load *L, const struct pair *p)
{
	uint64_t want = p->sent * (uint64_t)L->fanout;
	return want > p->done ? (want - p->done + (uint64_t)L->fanout - 1) / (uint64_t)L->fanout : 0;
}

/* Published per pair per loop pass at most, so that pairs take turns. */
#define BURST 32
/* A paced run never has more than this in flight per pair, so a broker
 * that cannot keep up does not make it drop messages. */
#define PACED_CAP 900
#define READS_PER_PASS 4096

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
		L->clients[i].link.failed = true;
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
	if(L->ntargets > 1 && L->o->slice_s > 0){
		uint64_t slice = (uint64_t)(L->o->slice_s * 1e9);
		int active = (int)(((now - L->start_ns) / slice) % (uint64_t)L->ntargets);
		if(active != L->active){
			/* A target's turn starts now, not with the backlog of
			 * the turns it sat out. */
			L->active = active;
			for(int i = 0; i < L->npairs; i++){
				if(L->pairs[i].target == active) L->pairs[i].next_ns = now;
			}
		}
		uint64_t left = slice - (now - L->start_ns) % slice;
		if(left < wait) wait = left;
	}
	for(int i = 0; i < L->npairs; i++){
		struct pair *p = &L->pairs[i];
		if(L->o->count && p->quota == 0) continue;
		if(L->ntargets > 1 && L->o->slice_s > 0 && p->target != L->active) continue;
		if(L->o->rate > 0){
			if(now > p->next_ns + PACE_SLACK_NS) p->next_ns = now;
			int n = 0;
			while(p->next_ns <= now && open_msgs(L, p) < PACED_CAP && n++ < BURST){
				publish_one(L, i);
				p->next_ns += p->gap_ns;
			}
			if(p->next_ns > now && p->next_ns - now < wait) wait = p->next_ns - now;
			if(p->next_ns <= now) wait = 0;
		}else{
			int n = 0;
			while(open_msgs(L, p) < L->o->window && n++ < BURST && (!L->o->count || p->quota)){
				publish_one(L, i);
			}
			if(open_msgs(L, p) < L->o->window && (!L->o->count || p->quota)) wait = 0;
		}
	}
	return wait;
}

static bool any_failed(const struct load *L)
{
	for(int i = 0; i < L->nclients; i++){
		if(L->clients[i].link.failed) return true;
	}
	return L->errors > 0;
}

enum until { UNTIL_CONNECTED, UNTIL_SUBSCRIBED, UNTIL_DEADLINE, UNTIL_DRAINED };

static bool reached(const struct load *L, enum until u)
{
	for(int i = 0; i < L->nclients; i++){
		const struct client *c = &L->clients[i];
		if(u == UNTIL_CONNECTED && !c->link.connected) return false;
		if(u == UNTIL_SUBSCRIBED && c->role != ROLE_PUB && !c->link.subscribed) return false;
	}
	if(u == UNTIL_DRAINED){
		for(int i = 0; i < L->npairs; i++){
			if(open_msgs(L, &L->pairs[i]) || L->pairs[i].quota) return false;
		}
	}
	return u != UNTIL_DEADLINE;
}

/* Runs the loop until the condition holds or the deadline passes. Returns
 * 0 if the condition held (or, for UNTIL_DEADLINE, the time ran out
 * without error), -1 on a client error or a missed deadline. */
static int run_until(struct load *L, enum until u, uint64_t deadline)
{
	struct pollfd fds[MAX_CLIENTS];
	uint64_t next_misc = bench__now_ns() + MISC_INTERVAL_NS;

	for(;;){
		if(any_failed(L) || bench__interrupted()) return -1;
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
						if(c->link.connected || u == UNTIL_CONNECTED) c->link.failed = true;
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

static uint64_t ns_from_s(double s)
{
	return (uint64_t)(s * 1e9);
}

static int setup(struct load *L)
{
	const struct load_opts *o = L->o;
	bool storm = false;
	for(int i = 0; i < L->npairs; i++){
		struct pair *p = &L->pairs[i];
		/* Pairs of different targets on one broker need topics of their
		 * own: number them across targets. */
		const char *prefix = p->t->kind == LOAD_PLAIN ? BENCH_TOPIC_PLAIN : BENCH_TOPIC_TRACKED;
		snprintf(p->topic, sizeof(p->topic), "%s%d", prefix, i);
		if(o->rate > 0) p->gap_ns = (uint64_t)(1e9 * o->pairs / o->rate);
		storm = storm || p->t->kind == LOAD_STORM;
	}
	/* Publishers first: client i is publisher i. */
	for(int i = 0; i < L->npairs; i++){
		if(client__open(L, ROLE_PUB, i)) return -1;
	}
	for(int i = 0; i < L->npairs; i++){
		for(int k = 0; k < L->fanout; k++){
			if(client__open(L, ROLE_SUB, i)) return -1;
		}
	}
	if(storm && client__open(L, ROLE_DEAD, 0)) return -1;
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

/* CPU figures at one instant: the brokers', this process's, the machine's. */
struct cpu_snap {
	uint64_t broker[BENCH_MAX_TARGETS]; /* per target; 0 for a broker already counted */
	uint64_t self, machine;
};

static void cpu_snap(const struct load *L, struct cpu_snap *s)
{
	memset(s, 0, sizeof(*s));
	for(int t = 0; t < L->ntargets; t++){
		bool seen = false;
		for(int k = 0; k < t; k++){
			seen = seen || L->o->target[k].broker == L->o->target[t].broker;
		}
		if(!seen) s->broker[t] = broker__cpu_ns(L->o->target[t].broker);
	}
	s->self = bench__self_cpu_ns();
	s->machine = bench__machine_busy_ns();
}

static void result_from(struct load *L, const struct counters *a, const struct counters *b,
		const struct cpu_snap *s0, const struct cpu_snap *s1, double secs, struct load_result *res)
{
	uint64_t cpu0 = s0->broker[0], cpu1 = s1->broker[0];
	double d = secs > 0 ? secs : 1e-9;
	res->delivered_per_s = (double)(b->delivered - a->delivered) / d;
	res->copies_per_s = (double)(b->copies - a->copies) / d;
	res->dead_letters_per_s = (double)(b->dead_letters - a->dead_letters) / d;
	double cpu_s = (double)(cpu1 - cpu0) / 1e9;
	res->broker_cpu_util = cpu_s / d;
	uint64_t delivered = b->delivered - a->delivered + b->dead_letters - a->dead_letters;
	res->broker_us_per_msg = delivered ? cpu_s * 1e6 / (double)delivered : 0;
	uint64_t handled = b->copies - a->copies + b->dead_letters - a->dead_letters;
	res->broker_us_per_nack = handled ? cpu_s * 1e6 / (double)handled : 0;
	res->untagged = L->c.untagged;
	/* Everything else that ran on the machine meanwhile. */
	double ours = (double)(s1->self - s0->self);
	for(int t = 0; t < L->ntargets; t++){
		ours += (double)(s1->broker[t] - s0->broker[t]);
	}
	double foreign = ((double)(s1->machine - s0->machine) - ours) / 1e9 / d;
	res->foreign_cpu = foreign > 0 ? foreign : 0;
	for(int t = 0; t < L->ntargets; t++){
		res->target_delivered_per_s[t] = (double)L->target_delivered[t] / d;
		if(L->nlat[t] == 0) continue;
		/* With arrival times the samples stay in arrival order, parallel
		 * to them: the percentiles sort a copy. */
		uint64_t *sorted = L->lat[t];
		if(L->arrived[t]) sorted = malloc(L->nlat[t] * sizeof(*sorted));
		if(sorted){
			if(sorted != L->lat[t]) memcpy(sorted, L->lat[t], L->nlat[t] * sizeof(*sorted));
			res->p50_us[t] = stats__percentile_u64(sorted, L->nlat[t], 50) / 1e3;
			res->p99_us[t] = stats__percentile_u64(sorted, L->nlat[t], 99) / 1e3;
			if(sorted != L->lat[t]) free(sorted);
		}
		/* The samples go to the caller. */
		res->lat[t].v = L->lat[t];
		res->lat[t].n = L->nlat[t];
		res->lat[t].cap = L->caplat;
		L->lat[t] = NULL;
		res->arrived[t].v = L->arrived[t];
		res->arrived[t].n = L->arrived[t] ? L->nlat[t] : 0;
		res->arrived[t].cap = L->arrived[t] ? L->caplat : 0;
		L->arrived[t] = NULL;
	}
}

void load__result_free(struct load_result *res)
{
	for(int t = 0; t < BENCH_MAX_TARGETS; t++){
		samples__free(&res->lat[t]);
		samples__free(&res->arrived[t]);
	}
}

/* Lays out the pairs: o->pairs for each target, numbered across targets. */
static int make_pairs(struct load *L)
{
	const struct load_opts *o = L->o;
	L->ntargets = o->targets > 0 ? o->targets : 1;
	L->fanout = o->fanout > 0 ? o->fanout : 1;
	if(L->ntargets > BENCH_MAX_TARGETS || o->pairs < 1 || o->pairs > BENCH_MAX_PAIRS || L->fanout > BENCH_MAX_FANOUT){
		return -1;
	}
	for(int t = 0; t < L->ntargets; t++){
		/* A storm's chain is done at its dead letter, whatever the
		 * number of subscribers: it has one of each. */
		bool storm = o->target[t].kind == LOAD_STORM;
		if(o->target[t].broker == NULL || (storm && (L->ntargets > 1 || L->fanout > 1))) return -1;
		for(int k = 0; k < o->pairs; k++){
			struct pair *p = &L->pairs[L->npairs++];
			p->target = t;
			p->t = &o->target[t];
		}
	}
	/* Count mode spreads the originals over all pairs. */
	for(int i = 0; i < L->npairs && o->count; i++){
		L->pairs[i].quota = o->count / (uint64_t)L->npairs + ((uint64_t)i < o->count % (uint64_t)L->npairs);
	}
	return 0;
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
	if(make_pairs(L)){
		fprintf(stderr, "dlq_bench: phase %s: bad targets or pairs\n", o->label);
		goto done;
	}
	if(o->record_latency){
		/* A target publishes at most o->rate while it has its turn. */
		L->caplat = (size_t)((o->rate > 0 ? o->rate : 200000) * (o->measure_s + 1));
		for(int t = 0; t < L->ntargets; t++){
			L->lat[t] = malloc(L->caplat * sizeof(*L->lat[t]));
			if(L->lat[t] == NULL) goto done;
			if(o->record_arrival){
				L->arrived[t] = malloc(L->caplat * sizeof(*L->arrived[t]));
				if(L->arrived[t] == NULL) goto done;
			}
		}
	}
	if(setup(L)) goto done;

	L->publishing = true;
	uint64_t now = bench__now_ns();
	L->start_ns = now;
	L->active = 0;
	for(int i = 0; i < L->npairs; i++){
		L->pairs[i].next_ns = now;
	}
	struct counters c0, c1;
	struct cpu_snap s0, s1;
	uint64_t t0, t1;
	if(o->count){
		c0 = L->c;
		cpu_snap(L, &s0);
		t0 = bench__now_ns();
		res->measure_start_ns = t0;
		L->measuring = true;
		if(run_until(L, UNTIL_DRAINED, t0 + (uint64_t)o->timeout_ms * 1000000u)) goto done;
	}else{
		if(run_until(L, UNTIL_DEADLINE, now + ns_from_s(o->warmup_s))) goto done;
		c0 = L->c;
		cpu_snap(L, &s0);
		t0 = bench__now_ns();
		res->measure_start_ns = t0;
		L->measuring = true;
		if(run_until(L, UNTIL_DEADLINE, t0 + ns_from_s(o->measure_s))) goto done;
	}
	L->measuring = false;
	c1 = L->c;
	cpu_snap(L, &s1);
	t1 = bench__now_ns();
	result_from(L, &c0, &c1, &s0, &s1, (double)(t1 - t0) / 1e9, res);

	L->publishing = false;
	if(!o->count && run_until(L, UNTIL_DRAINED, bench__now_ns() + DRAIN_TIMEOUT_MS * 1000000ull)){
		if(any_failed(L)) goto done;
	}
	for(int i = 0; i < L->npairs; i++){
		res->unfinished += open_msgs(L, &L->pairs[i]);
	}
	rc = 0;

done:
	if(rc){
		load__result_free(res);
	}
	if(rc && L->nclients){
		fprintf(stderr, "dlq_bench: phase %s failed (errors %llu)\n", o->label, (unsigned long long)L->errors);
	}
	client__close_all(L);
	for(int t = 0; t < BENCH_MAX_TARGETS; t++){
		free(L->lat[t]);
		free(L->arrived[t]);
	}
	free(L->payload);
	free(L);
	return rc;
}

