/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The fleet suite's traffic (see fleet.h): one worker per edge, which
 * publishes originals on FLEET_TOPIC and NACKs each one delivered to it on
 * $CONTROL/dlq/v1/nack (with max_attempts=1 a dead letter at once, which
 * the edge's bridge carries to the centre), and one subscriber of
 * FLEET_COLLECT on the centre, which counts the letters as they arrive.
 * An original's payload starts with its sequence number, which its dead
 * letter carries on: the subscriber matches each letter to its NACK's
 * time. All of them run in this thread on one ppoll loop.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fleet.h"
#include "load.h"
#include "mosquitto_dlq.h"

#define FLEET_WAIT_MS 60000
#define FLEET_READS_PER_PASS 64

/* The sequence number a payload starts with, or UINT64_MAX. */
static uint64_t payload_seq(const struct mosquitto_message *msg)
{
	char buf[24];
	size_t len = (size_t)msg->payloadlen < sizeof(buf) - 1 ? (size_t)msg->payloadlen : sizeof(buf) - 1;
	memcpy(buf, msg->payload, len);
	buf[len] = '\0';
	char *end;
	unsigned long long v = strtoull(buf, &end, 10);
	return end == buf ? UINT64_MAX : (uint64_t)v;
}

/* The centre's subscriber: a letter of edge n, from its topic
 * fleet/edge-<n>/dead/... */
static void on_letter(struct fleet_traffic *t, const struct mosquitto_message *msg)
{
	int n;
	uint64_t seq = payload_seq(msg);
	if(sscanf(msg->topic, "fleet/edge-%d/", &n) != 1 || n < 1 || n > FLEET_EDGES){
		fprintf(stderr, "dlq_bench: fleet: a message on %s at the centre\n", msg->topic);
		t->errors++;
		return;
	}
	struct fleet_edge_state *s = &t->st[n - 1];
	if(seq < s->base){
		s->twice++; /* a bridge's resend of an earlier pass's letter */
		return;
	}
	if(seq - s->base >= t->n || s->nack_ns[seq - s->base] == 0){
		fprintf(stderr, "dlq_bench: fleet: edge-%d's letter %llu was never NACKed in this pass\n", n,
				(unsigned long long)seq);
		t->errors++;
		return;
	}
	uint64_t k = seq - s->base;
	if(s->seen[k]){
		s->twice++;
		return;
	}
	s->seen[k] = 1;
	s->arrived++;
	uint64_t lat = bench__now_ns() - s->nack_ns[k];
	if(samples__append(&t->lat, &lat, 1)) t->errors++;
}

/* An edge's worker: NACKs each original delivered to it. */
static void on_original(struct fleet_client *c, const struct mosquitto_message *msg, const mosquitto_property *props)
{
	struct fleet_edge_state *s = &c->t->st[c->edge];
	char id[DLQ_ID_LEN + 1];
	bool is_copy;
	uint64_t seq = payload_seq(msg);
	if(!client__read_stamp(props, id, &is_copy) || is_copy || seq < s->base || seq - s->base >= c->t->n){
		fprintf(stderr, "dlq_bench: fleet: edge-%d: a delivery on %s that is not this pass's original\n",
				c->edge + 1, msg->topic);
		c->t->errors++;
		return;
	}
	s->nack_ns[seq - s->base] = bench__now_ns();
	if(mosquitto_publish_v5(c->m, NULL, DLQ_NACK_TOPIC, DLQ_ID_LEN, id, 1, false, NULL)){
		c->t->errors++;
		return;
	}
	s->nacked++;
}

static void on_message(struct mosquitto *m, void *ud, const struct mosquitto_message *msg,
		const mosquitto_property *props)
{
	struct fleet_client *c = ud;
	(void)m;
	if(c->edge < 0) on_letter(c->t, msg);
	else on_original(c, msg, props);
}

static struct fleet_client *client_at(struct fleet_traffic *t, int i)
{
	return i < FLEET_EDGES ? &t->edges[i] : &t->centre;
}

/* What loop waits for. */
enum fwait { FW_CONNECTED, FW_SUBSCRIBED, FW_PASS };

static bool reached(struct fleet_traffic *t, enum fwait w)
{
	for(int i = 0; i <= FLEET_EDGES; i++){
		const struct fleet_client *c = client_at(t, i);
		if(w == FW_CONNECTED && !c->link.connected) return false;
		if(w == FW_SUBSCRIBED && c->link.subscribed < 1) return false;
		if(w == FW_PASS && i < FLEET_EDGES && t->st[i].arrived < t->n) return false;
	}
	return true;
}

/* Publishes what each edge's window allows. */
static int publish_step(struct fleet_traffic *t, unsigned window, uint8_t *payload)
{
	for(int i = 0; i < FLEET_EDGES; i++){
		struct fleet_edge_state *s = &t->st[i];
		while(s->sent < t->n && s->sent - s->arrived < window){
			int len = snprintf((char *)payload, 24, "%llu", (unsigned long long)(s->base + s->sent));
			payload[len] = ' ';
			if(mosquitto_publish_v5(t->edges[i].m, NULL, FLEET_TOPIC, BENCH_PAYLOAD, payload, 1, false, NULL)){
				return -1;
			}
			s->sent++;
		}
	}
	return 0;
}

/* The letters of this pass that reached the centre, of all edges. */
static uint64_t arrived(const struct fleet_traffic *t)
{
	uint64_t n = 0;
	for(int i = 0; i < FLEET_EDGES; i++) n += t->st[i].arrived;
	return n;
}

/* Runs every client's network until w holds, publishing while a pass
 * runs, as long as a letter reaches the centre at least every
 * FLEET_WAIT_MS (a journaled centre on a busy machine takes minutes for a
 * pass, and goes on). Returns 0, or -1 (logged). */
static int loop(struct fleet_traffic *t, enum fwait w, unsigned window, uint8_t *payload)
{
	struct pollfd fds[FLEET_EDGES + 1];
	uint64_t deadline = bench__now_ns() + FLEET_WAIT_MS * 1000000ull, next_misc = 0, seen = arrived(t);
	while(!reached(t, w)){
		uint64_t now = bench__now_ns();
		if(arrived(t) != seen){
			seen = arrived(t);
			deadline = now + FLEET_WAIT_MS * 1000000ull;
		}
		for(int i = 0; i <= FLEET_EDGES; i++){
			if(client_at(t, i)->link.failed) return -1;
		}
		if(t->errors || bench__interrupted()) return -1;
		if(now > deadline){
			fprintf(stderr, "dlq_bench: fleet: timed out (%s)\n", w == FW_PASS ? "no letter reached the centre for a while"
					: "connecting");
			for(int i = 0; w == FW_PASS && i < FLEET_EDGES; i++){
				fprintf(stderr, "dlq_bench: fleet: edge-%d: %llu of %llu sent, %llu NACKed, %llu at the centre\n",
						i + 1, (unsigned long long)t->st[i].sent, (unsigned long long)t->n,
						(unsigned long long)t->st[i].nacked, (unsigned long long)t->st[i].arrived);
			}
			return -1;
		}
		if(w == FW_PASS && publish_step(t, window, payload)) return -1;
		for(int i = 0; i <= FLEET_EDGES; i++){
			struct mosquitto *m = client_at(t, i)->m;
			if(mosquitto_want_write(m)) mosquitto_loop_write(m, 1);
			fds[i].fd = mosquitto_socket(m);
			fds[i].events = POLLIN | (mosquitto_want_write(m) ? POLLOUT : 0);
			fds[i].revents = 0;
		}
		struct timespec ts = { .tv_sec = 0, .tv_nsec = 10000000 };
		int n = ppoll(fds, FLEET_EDGES + 1, &ts, NULL);
		if(n < 0 && errno != EINTR) return -1;
		for(int i = 0; n > 0 && i <= FLEET_EDGES; i++){
			struct fleet_client *c = client_at(t, i);
			if(fds[i].revents & (POLLIN | POLLHUP | POLLERR)){
				for(int k = 0; k < FLEET_READS_PER_PASS; k++){
					errno = 0;
					if(mosquitto_loop_read(c->m, 1)){
						c->link.failed = true;
						break;
					}
					if(errno == EAGAIN || errno == EWOULDBLOCK) break;
				}
			}
			if(fds[i].revents & POLLOUT) mosquitto_loop_write(c->m, 1);
		}
		if(now >= next_misc){
			for(int i = 0; i <= FLEET_EDGES; i++) mosquitto_loop_misc(client_at(t, i)->m);
			next_misc = now + 100000000ull;
		}
	}
	return 0;
}

static int client_open(struct fleet_traffic *t, struct fleet_client *c, int edge, const struct broker *b)
{
	static const char *const names[] = { "fleet worker 1", "fleet worker 2", "fleet worker 3", "fleet centre" };
	char id[64];
	c->t = t;
	c->edge = edge;
	c->link.name = names[edge < 0 ? FLEET_EDGES : edge];
	snprintf(id, sizeof(id), "fleet-%s-%d-%d", edge < 0 ? "centre" : "worker", edge + 1, (int)getpid());
	c->m = link__connect(c, id, b, "fleet", on_message);
	return c->m ? 0 : -1;
}

int fleet_traffic__open(struct fleet_traffic *t, const struct broker *edges, const struct broker *centre)
{
	memset(t, 0, sizeof(*t));
	for(int i = 0; i < FLEET_EDGES; i++){
		if(client_open(t, &t->edges[i], i, &edges[i])) return -1;
	}
	if(client_open(t, &t->centre, -1, centre) || loop(t, FW_CONNECTED, 0, NULL)) return -1;
	for(int i = 0; i <= FLEET_EDGES; i++){
		struct fleet_client *c = client_at(t, i);
		if(mosquitto_subscribe_v5(c->m, NULL, c->edge < 0 ? FLEET_COLLECT : "orders/#", 1, 0, NULL)) return -1;
	}
	return loop(t, FW_SUBSCRIBED, 0, NULL);
}

void fleet_traffic__close(struct fleet_traffic *t)
{
	for(int i = 0; i <= FLEET_EDGES; i++){
		struct fleet_client *c = client_at(t, i);
		if(c->m == NULL) continue;
		if(c->link.connected){
			mosquitto_disconnect_v5(c->m, 0, NULL);
			mosquitto_loop(c->m, 10, 1);
		}
		mosquitto_destroy(c->m);
	}
	for(int i = 0; i < FLEET_EDGES; i++){
		free(t->st[i].nack_ns);
		free(t->st[i].seen);
	}
	samples__free(&t->lat);
	memset(t, 0, sizeof(*t));
}

int fleet_traffic__pass(struct fleet_traffic *t, uint64_t n, unsigned window, struct fleet_pass *p)
{
	uint8_t payload[BENCH_PAYLOAD];
	memset(payload, 'x', sizeof(payload));
	memset(p, 0, sizeof(*p));
	t->lat.n = 0;
	t->n = n;
	for(int i = 0; i < FLEET_EDGES; i++){
		struct fleet_edge_state *s = &t->st[i];
		s->base += s->sent;
		s->sent = s->nacked = s->arrived = s->twice = 0;
		free(s->nack_ns);
		free(s->seen);
		s->nack_ns = calloc(n, sizeof(*s->nack_ns));
		s->seen = calloc(n, 1);
		if(s->nack_ns == NULL || s->seen == NULL) return -1;
	}
	uint64_t t0 = bench__now_ns();
	if(loop(t, FW_PASS, window, payload)) return -1;
	p->seconds = (double)(bench__now_ns() - t0) / 1e9;
	for(int i = 0; i < FLEET_EDGES; i++){
		p->letters += t->st[i].arrived;
		p->twice += t->st[i].twice;
	}
	return 0;
}
