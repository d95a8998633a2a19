/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A retry copy whose subscriber loses its session before the broker has
 * handed the copy over (docs/design.md, "A targeted copy whose subscriber has
 * gone"). The broker takes a plugin's publishes at the top of its next loop
 * pass and drops one addressed to a client id it no longer knows, so the
 * client must leave in the same pass as its NACK. Two ways make that
 * deterministic, with the broker frozen (SIGSTOP) while the client acts and
 * thawed (SIGCONT) after, so that it reads everything in one pass:
 *
 * - a session takeover: "w" NACKs on connection 1, and connection 2, already
 *   accepted, sends a CONNECT with the same client id. epoll reports the two
 *   sockets in the order they became readable: the NACK is read first, then
 *   the CONNECT, which disconnects connection 1's session in the same pass.
 * - a NACK then a closed socket: the broker reads the NACK and its PUBACK
 *   fails to reach the closed socket, which disconnects "w" in the same pass.
 *   Nothing called "w" is left to take the copy: without the plugin's dead
 *   letter it would be lost.
 *
 * "w" speaks MQTT through a raw socket (below): the harness's libmosquitto
 * clients reconnect on their own and wait for every acknowledgement, and a
 * frozen broker sends none. A v3.1.1 "w" receives no properties, so it NACKs
 * the dlq-id a v5 observer of the same message received (the plugin takes a
 * NACK of a known id from any client). Controls: a v3.1.1 client with a
 * persistent session keeps the copy in its session and gets no dead letter.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"

#define POLICY "policy jobs max_attempts=2 dead_letter=dlq/jobs"
#define CLIENT "w"
#define GONE_REASON "subscriber \"" CLIENT "\" left without a session before its retry copy was delivered"

/* ---- a raw MQTT connection (v3.1.1 or v5), enough for these tests ---- */

#define RAW_MAX_PUBLISHES 16

struct raw_publish {
	char topic[128];
	char payload[128];
	int qos;
	char dlq_id[64];            /* "" when the message had no dlq-id */
};

struct raw {
	int fd;
	int protocol;               /* MQTT_PROTOCOL_V5 or MQTT_PROTOCOL_V311 */
	uint16_t last_mid;
	unsigned char in[8192];     /* bytes read and not yet parsed */
	size_t inlen;
	bool eof;
	struct raw_publish pubs[RAW_MAX_PUBLISHES];
	size_t npubs;
};

/* A packet's body under construction. */
struct raw_body {
	unsigned char b[512];
	size_t n;
};

static void put8(struct raw_body *p, unsigned v)
{
	ck_assert_uint_lt(p->n, sizeof(p->b));
	p->b[p->n++] = (unsigned char)v;
}

static void put16(struct raw_body *p, unsigned v)
{
	put8(p, (v >> 8) & 0xFF);
	put8(p, v & 0xFF);
}

static void put_bytes(struct raw_body *p, const void *data, size_t len)
{
	ck_assert_uint_le(p->n + len, sizeof(p->b));
	memcpy(p->b + p->n, data, len);
	p->n += len;
}

static void put_str(struct raw_body *p, const char *s)
{
	put16(p, (unsigned)strlen(s));
	put_bytes(p, s, strlen(s));
}

/* Writes one packet. No test assertion: it runs while the broker is
 * frozen, and a failed test must not leave it stopped. */
static bool raw_send(struct raw *r, unsigned first, const struct raw_body *body)
{
	unsigned char pkt[sizeof(body->b) + 5];
	size_t n = 0, len = body->n;
	pkt[n++] = (unsigned char)first;
	do{
		unsigned char d = len % 128;
		len /= 128;
		pkt[n++] = (unsigned char)(len ? d | 0x80 : d);
	}while(len);
	memcpy(pkt + n, body->b, body->n);
	n += body->n;
	for(size_t off = 0; off < n;){
		ssize_t w = send(r->fd, pkt + off, n - off, MSG_NOSIGNAL);
		if(w < 0 && errno == EINTR){
			continue;
		}
		if(w <= 0){
			return false;
		}
		off += (size_t)w;
	}
	return true;
}

static struct raw *raw_open(struct broker *b, int protocol)
{
	struct raw *r = calloc(1, sizeof(*r));
	ck_assert_ptr_nonnull(r);
	r->protocol = protocol;
	r->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_msg(r->fd >= 0, "socket: %s", strerror(errno));
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	ck_assert_uint_lt(strlen(broker_socket(b)), sizeof(sa.sun_path));
	strcpy(sa.sun_path, broker_socket(b));
	ck_assert_msg(connect(r->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
			"connecting to %s: %s", broker_socket(b), strerror(errno));
	return r;
}

static void raw_free(struct raw *r)
{
	if(r->fd >= 0){
		close(r->fd);
	}
	free(r);
}

static bool raw_send_connect(struct raw *r, const char *id, bool clean)
{
	struct raw_body p = {0};
	put_str(&p, "MQTT");
	put8(&p, r->protocol == MQTT_PROTOCOL_V5 ? 5 : 4);
	put8(&p, clean ? 0x02 : 0x00);
	put16(&p, 60);
	if(r->protocol == MQTT_PROTOCOL_V5){
		put8(&p, 0); /* no properties */
	}
	put_str(&p, id);
	return raw_send(r, 0x10, &p);
}

/* A QoS 1 compact NACK: the dlq-id as payload. */
static bool raw_send_nack(struct raw *r, const char *dlq_id)
{
	struct raw_body p = {0};
	put_str(&p, DLQ_NACK_TOPIC);
	put16(&p, ++r->last_mid);
	if(r->protocol == MQTT_PROTOCOL_V5){
		put8(&p, 0);
	}
	put_bytes(&p, dlq_id, strlen(dlq_id));
	return raw_send(r, 0x32, &p);
}

static bool raw_send_puback(struct raw *r, unsigned mid)
{
	struct raw_body p = {0};
	put16(&p, mid);
	return raw_send(r, 0x40, &p);
}

/* Reads a variable byte integer at *pos in buf[0..len); false if incomplete
 * or malformed. */
static bool get_varint(const unsigned char *buf, size_t len, size_t *pos, size_t *value)
{
	size_t v = 0;
	for(unsigned shift = 0; shift < 28; shift += 7){
		if(*pos >= len){
			return false;
		}
		unsigned char d = buf[(*pos)++];
		v |= (size_t)(d & 0x7F) << shift;
		if(!(d & 0x80)){
			*value = v;
			return true;
		}
	}
	return false;
}

static bool get_str(const unsigned char *buf, size_t len, size_t *pos, const unsigned char **s, size_t *slen)
{
	if(*pos + 2 > len){
		return false;
	}
	*slen = (size_t)buf[*pos] << 8 | buf[*pos + 1];
	*pos += 2;
	if(*pos + *slen > len){
		return false;
	}
	*s = buf + *pos;
	*pos += *slen;
	return true;
}

/* Walks v5 properties in buf[pos..end), copying a dlq-id user property into
 * dlq_id. False if malformed. */
static bool scan_properties(const unsigned char *buf, size_t pos, size_t end, char *dlq_id, size_t idsize)
{
	while(pos < end){
		size_t id, skip = 0, n;
		const unsigned char *k, *v;
		size_t klen, vlen;
		if(!get_varint(buf, end, &pos, &id)){
			return false;
		}
		switch(id){
			case 0x01: case 0x17: case 0x19: case 0x24: case 0x25: case 0x28: case 0x29: case 0x2A:
				skip = 1; break;
			case 0x13: case 0x21: case 0x22: case 0x23:
				skip = 2; break;
			case 0x02: case 0x11: case 0x18: case 0x27:
				skip = 4; break;
			case 0x0B:
				if(!get_varint(buf, end, &pos, &n)) return false;
				break;
			case 0x26:
				if(!get_str(buf, end, &pos, &k, &klen) || !get_str(buf, end, &pos, &v, &vlen)) return false;
				if(klen == strlen(DLQ_PROP_ID) && !memcmp(k, DLQ_PROP_ID, klen) && vlen < idsize){
					memcpy(dlq_id, v, vlen);
					dlq_id[vlen] = '\0';
				}
				break;
			default: /* strings and binary data */
				if(!get_str(buf, end, &pos, &v, &vlen)) return false;
				break;
		}
		pos += skip;
	}
	return pos == end;
}

static void raw_record_publish(struct raw *r, unsigned first, const unsigned char *body, size_t len)
{
	struct raw_publish pub = { .qos = (first >> 1) & 3 };
	const unsigned char *topic;
	size_t tlen, pos = 0, plen = 0;
	unsigned mid = 0;
	ck_assert_msg(get_str(body, len, &pos, &topic, &tlen) && tlen < sizeof(pub.topic), "malformed PUBLISH");
	memcpy(pub.topic, topic, tlen);
	if(pub.qos > 0){
		ck_assert_msg(pos + 2 <= len, "malformed PUBLISH");
		mid = (unsigned)body[pos] << 8 | body[pos + 1];
		pos += 2;
	}
	if(r->protocol == MQTT_PROTOCOL_V5){
		ck_assert_msg(get_varint(body, len, &pos, &plen) && pos + plen <= len
				&& scan_properties(body, pos, pos + plen, pub.dlq_id, sizeof(pub.dlq_id)),
				"malformed PUBLISH properties");
		pos += plen;
	}
	ck_assert_msg(len - pos < sizeof(pub.payload), "PUBLISH payload too long for this test");
	memcpy(pub.payload, body + pos, len - pos);
	ck_assert_uint_lt(r->npubs, RAW_MAX_PUBLISHES);
	r->pubs[r->npubs++] = pub;
	if(pub.qos == 1){
		raw_send_puback(r, mid); /* a closed connection just fails */
	}
}

/* Reads packets until one whose type is want (0: none) arrives, the
 * connection ends, or timeout_ms pass. PUBLISHes are recorded (and
 * acknowledged); other packets are ignored. Returns the wanted packet's body
 * (the caller frees it) with its first byte and length, or NULL. */
static unsigned char *raw_pump(struct raw *r, unsigned want, int timeout_ms, unsigned *first_out, size_t *len_out)
{
	uint64_t deadline = it_now_ms() + (uint64_t)timeout_ms;
	for(;;){
		size_t pos = 1, len;
		if(r->inlen >= 2 && get_varint(r->in, r->inlen, &pos, &len) && pos + len <= r->inlen){
			unsigned first = r->in[0];
			unsigned char *body = malloc(len ? len : 1);
			ck_assert_ptr_nonnull(body);
			memcpy(body, r->in + pos, len);
			memmove(r->in, r->in + pos + len, r->inlen - pos - len);
			r->inlen -= pos + len;
			if(want && first >> 4 == want){
				*first_out = first;
				*len_out = len;
				return body;
			}
			if(first >> 4 == 3){
				raw_record_publish(r, first, body, len);
			}
			free(body);
			continue;
		}
		if(r->eof){
			return NULL;
		}
		uint64_t now = it_now_ms();
		struct pollfd pfd = { .fd = r->fd, .events = POLLIN };
		int n = poll(&pfd, 1, now < deadline ? (int)(deadline - now) : 0);
		if(n < 0 && errno == EINTR){
			continue;
		}
		ck_assert_msg(n >= 0, "poll: %s", strerror(errno));
		if(n == 0){
			return NULL; /* timed out */
		}
		ck_assert_msg(r->inlen < sizeof(r->in), "raw connection: receive buffer full");
		ssize_t got = recv(r->fd, r->in + r->inlen, sizeof(r->in) - r->inlen, 0);
		if(got < 0 && errno == EINTR){
			continue;
		}
		if(got <= 0){
			r->eof = true;
		}else{
			r->inlen += (size_t)got;
		}
	}
}

/* Waits for a CONNACK and fails the test unless it accepts the connection.
 * Returns its session-present flag. */
static bool raw_expect_connack(struct raw *r)
{
	unsigned first;
	size_t len;
	unsigned char *body = raw_pump(r, 2, HARNESS_WAIT_MS, &first, &len);
	ck_assert_msg(body != NULL, "raw client: no CONNACK within %d ms", HARNESS_WAIT_MS);
	ck_assert_uint_ge(len, 2);
	bool present = body[0] & 1;
	unsigned code = body[1];
	free(body);
	ck_assert_msg(code == 0, "raw client: CONNACK refused the connection (0x%02x)", code);
	return present;
}

static void raw_connect(struct raw *r, const char *id, bool clean)
{
	ck_assert_msg(raw_send_connect(r, id, clean), "raw client: sending CONNECT: %s", strerror(errno));
	raw_expect_connack(r);
}

static void raw_subscribe(struct raw *r, const char *filter, unsigned qos)
{
	struct raw_body p = {0};
	put16(&p, ++r->last_mid);
	if(r->protocol == MQTT_PROTOCOL_V5){
		put8(&p, 0);
	}
	put_str(&p, filter);
	put8(&p, qos);
	ck_assert_msg(raw_send(r, 0x82, &p), "raw client: sending SUBSCRIBE: %s", strerror(errno));
	unsigned first;
	size_t len;
	unsigned char *body = raw_pump(r, 9, HARNESS_WAIT_MS, &first, &len);
	ck_assert_msg(body != NULL, "raw client: no SUBACK within %d ms", HARNESS_WAIT_MS);
	unsigned code = len ? body[len - 1] : 0x80;
	free(body);
	ck_assert_msg(code < 0x80, "raw client: subscription to %s refused (0x%02x)", filter, code);
}

/* Waits until n PUBLISHes arrived; returns the n-th. */
static const struct raw_publish *raw_expect_publish(struct raw *r, size_t n)
{
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	while(r->npubs < n && !r->eof && it_now_ms() < deadline){
		unsigned first;
		size_t len;
		free(raw_pump(r, 0, 50, &first, &len));
	}
	ck_assert_msg(r->npubs >= n, "raw client: %zu PUBLISH(es) within %d ms, expected %zu",
			r->npubs, HARNESS_WAIT_MS, n);
	return &r->pubs[n - 1];
}

/* Records what arrives for ms milliseconds or until the connection ends. */
static void raw_drain(struct raw *r, int ms)
{
	unsigned first;
	size_t len;
	free(raw_pump(r, 0, ms, &first, &len));
}

/* How many recorded PUBLISHes were on topic. */
static size_t raw_count(const struct raw *r, const char *topic)
{
	size_t n = 0;
	for(size_t i = 0; i < r->npubs; i++){
		n += !strcmp(r->pubs[i].topic, topic);
	}
	return n;
}

/* ---- freezing the broker ---- */

/* The broker's PID, from the file the harness writes into its directory. */
static pid_t broker_pid(struct broker *b)
{
	FILE *f = fopen(broker_path(b, "pid"), "r");
	ck_assert_msg(f != NULL, "the broker's pid file: %s", strerror(errno));
	long pid = 0;
	int n = fscanf(f, "%ld", &pid);
	fclose(f);
	ck_assert_msg(n == 1 && pid > 0, "the broker's pid file holds no PID");
	return (pid_t)pid;
}

/* The state letter of /proc/<pid>/stat, or '?'. */
static char proc_state(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	FILE *f = fopen(path, "r");
	if(!f){
		return '?';
	}
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/* Stops the broker and waits until it is stopped: kill() returns before the
 * signal takes effect, and a broker still returning from epoll_wait could
 * otherwise see only the first of the writes that follow. */
static void freeze(pid_t pid)
{
	ck_assert_msg(kill(pid, SIGSTOP) == 0, "SIGSTOP to the broker: %s", strerror(errno));
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	char st;
	while((st = proc_state(pid)) != 'T' && st != 't'){
		if(it_now_ms() > deadline){
			kill(pid, SIGCONT);
			ck_abort_msg("the broker did not stop within %d ms (state %c)", HARNESS_WAIT_MS, st);
		}
		it_sleep_ms(1);
	}
}

static void thaw(pid_t pid)
{
	ck_assert_msg(kill(pid, SIGCONT) == 0, "SIGCONT to the broker: %s", strerror(errno));
}

/* ---- the scenario ---- */

struct scene {
	struct broker *b;
	pid_t pid;
	struct client *watcher;     /* subscribed to dlq/# */
	struct client *observer;    /* subscribed to jobs: sees the dlq-id a v3.1.1 "w" cannot */
	struct raw *w;              /* connection 1 of "w", subscribed to jobs */
	struct raw *w2;             /* connection 2 of "w", accepted, no CONNECT yet (takeover only) */
	const char *id;             /* the original's dlq-id, which "w" NACKs */
};

/* A broker labelled after the test; "w" (protocol, clean) and the observer
 * receive a tracked message. With second, a second connection is opened and
 * accepted by the broker. */
static void scene_start(struct scene *s, const char *label, int protocol, bool clean, bool second)
{
	memset(s, 0, sizeof(*s));
	s->b = dlq_broker_at(__FILE__, __LINE__, label, POLICY, (const char *)NULL);
	s->pid = broker_pid(s->b);
	s->watcher = client_new(s->b, "watcher", MQTT_PROTOCOL_V5);
	s->observer = client_new(s->b, "observer", MQTT_PROTOCOL_V5);
	client_subscribe(s->watcher, "dlq/#", 1);
	client_subscribe(s->observer, "jobs", 1);

	s->w = raw_open(s->b, protocol);
	raw_connect(s->w, CLIENT, clean);
	if(second){
		/* Accepted in the broker's next pass; the subscription's round trip
		 * below takes a later one. */
		s->w2 = raw_open(s->b, protocol);
	}
	raw_subscribe(s->w, "jobs", 1);

	client_publish_str(s->watcher, "jobs", "job-1", 1);
	s->id = expect_original(client_expect(s->observer, "jobs", 1));
	const struct raw_publish *orig = raw_expect_publish(s->w, 1);
	ck_assert_str_eq(orig->topic, "jobs");
	ck_assert_str_eq(orig->payload, "job-1");
	if(protocol == MQTT_PROTOCOL_V5){
		ck_assert_str_eq(orig->dlq_id, s->id);
	}else{
		ck_assert_str_eq(orig->dlq_id, ""); /* v3.1.1 gets no properties */
	}
	raw_drain(s->w, 0); /* nothing left unread: see scene_nack_and_close */
}

/* With the broker frozen, "w" NACKs on connection 1 and connection 2 sends
 * a CONNECT with the same client id. Returns whether the broker reported a
 * session present. */
static bool scene_nack_and_takeover(struct scene *s, bool clean)
{
	freeze(s->pid);
	bool nacked = raw_send_nack(s->w, s->id);
	bool connected = raw_send_connect(s->w2, CLIENT, clean);
	thaw(s->pid);
	ck_assert_msg(nacked && connected, "writing the NACK or the CONNECT failed");
	bool present = raw_expect_connack(s->w2);

	/* The takeover closes connection 1. It must not have been handed the
	 * copy first: that would mean the CONNECT was read in a later pass than
	 * the NACK, and the scenario did not happen. */
	raw_drain(s->w, HARNESS_WAIT_MS);
	ck_assert_msg(s->w->eof, "the takeover did not close connection 1 within %d ms", HARNESS_WAIT_MS);
	ck_assert_msg(raw_count(s->w, "jobs") == 1,
			"connection 1 received the retry copy before the takeover: the NACK and the CONNECT "
			"were not read in the same loop pass");
	return present;
}

/* With the broker frozen, "w" NACKs and closes its socket. The broker reads
 * the NACK; its PUBACK then fails on the closed socket, and the client is
 * disconnected in that pass (2.0.11 logs it as "disconnected due to out of
 * memory": the failed write comes back as 1). Connection 1 has nothing
 * unread: a unix socket closed with unread data resets its peer. */
static void scene_nack_and_close(struct scene *s)
{
	freeze(s->pid);
	bool nacked = raw_send_nack(s->w, s->id);
	close(s->w->fd);
	s->w->fd = -1;
	thaw(s->pid);
	ck_assert_msg(nacked, "writing the NACK failed");
}

static void expect_gone_dead_letter(struct scene *s)
{
	const struct it_msg *dl = client_expect(s->watcher, "dlq/jobs", 1);
	ck_assert_str_eq(dl->payload, "job-1");
	expect_dead_letter(dl, "jobs", s->id, 1, CLIENT, "jobs", GONE_REASON);
	clients_settle(s->watcher, s->observer);
	client_expect_exactly(s->watcher, NULL, 1);
	client_expect_exactly(s->observer, NULL, 1); /* the copy was for "w" only */
}

static void scene_free(struct scene *s)
{
	raw_free(s->w);
	if(s->w2){
		raw_free(s->w2);
	}
}

/* ---- tests ---- */

/* An MQTT v5 session never counts as persisting (its expiry is invisible to
 * the plugin). The new connection "w" is also handed the copy, by client id,
 * in the next pass: a duplicate the README documents, not asserted here. */
START_TEST(test_takeover_v5_dead_letters)
{
	struct scene s;
	scene_start(&s, __func__, MQTT_PROTOCOL_V5, true, true);
	ck_assert_msg(!scene_nack_and_takeover(&s, true), "session present after a clean start");
	expect_gone_dead_letter(&s);
	scene_free(&s);
}
END_TEST

START_TEST(test_takeover_v311_clean_dead_letters)
{
	struct scene s;
	scene_start(&s, __func__, MQTT_PROTOCOL_V311, true, true);
	ck_assert_msg(!scene_nack_and_takeover(&s, true), "session present after clean_session=1");
	expect_gone_dead_letter(&s);
	scene_free(&s);
}
END_TEST

/* No client "w" is left: the broker drops the copy, and only the dead
 * letter keeps the message. */
START_TEST(test_close_after_nack_v5_dead_letters)
{
	struct scene s;
	scene_start(&s, __func__, MQTT_PROTOCOL_V5, true, false);
	scene_nack_and_close(&s);
	expect_gone_dead_letter(&s);
	scene_free(&s);
}
END_TEST

/* A v5 client that asks for clean_start=false without a session expiry
 * interval loses its session with its connection (expiry 0), and 2.0.11 does
 * not tell the plugin the interval: the copy must still be dead-lettered. */
START_TEST(test_close_after_nack_v5_no_clean_start_dead_letters)
{
	struct scene s;
	scene_start(&s, __func__, MQTT_PROTOCOL_V5, false, false);
	scene_nack_and_close(&s);
	expect_gone_dead_letter(&s);
	scene_free(&s);
}
END_TEST

/* Control: a persistent v3.1.1 session taken over by itself keeps the copy,
 * which reaches the new connection; no dead letter. */
START_TEST(test_takeover_v311_persistent_keeps_copy)
{
	struct scene s;
	scene_start(&s, __func__, MQTT_PROTOCOL_V311, false, true);
	ck_assert_msg(scene_nack_and_takeover(&s, false), "no session present after taking over a persistent session");
	const struct raw_publish *copy = raw_expect_publish(s.w2, 1);
	ck_assert_str_eq(copy->topic, "jobs");
	ck_assert_str_eq(copy->payload, "job-1");
	ck_assert_int_eq(copy->qos, 1);
	clients_settle(s.watcher, s.observer);
	raw_drain(s.w2, HARNESS_SETTLE_MS);
	client_expect_exactly(s.watcher, NULL, 0);
	client_expect_exactly(s.observer, NULL, 1);
	ck_assert_uint_eq(s.w2->npubs, 1);
	scene_free(&s);
}
END_TEST

/* Control: a persistent v3.1.1 session whose socket closes keeps the copy,
 * which arrives when "w" reconnects; no dead letter. */
START_TEST(test_close_after_nack_v311_persistent_keeps_copy)
{
	struct scene s;
	scene_start(&s, __func__, MQTT_PROTOCOL_V311, false, false);
	scene_nack_and_close(&s);
	clients_settle(s.watcher, s.observer);
	client_expect_exactly(s.watcher, NULL, 0);

	struct raw *again = raw_open(s.b, MQTT_PROTOCOL_V311);
	ck_assert_msg(raw_send_connect(again, CLIENT, false), "sending CONNECT: %s", strerror(errno));
	ck_assert_msg(raw_expect_connack(again), "no session present on reconnecting a persistent session");
	const struct raw_publish *copy = raw_expect_publish(again, 1);
	ck_assert_str_eq(copy->topic, "jobs");
	ck_assert_str_eq(copy->payload, "job-1");
	ck_assert_int_eq(copy->qos, 1);
	clients_settle(s.watcher, s.observer);
	raw_drain(again, HARNESS_SETTLE_MS);
	client_expect_exactly(s.watcher, NULL, 0);
	client_expect_exactly(s.observer, NULL, 1);
	ck_assert_uint_eq(again->npubs, 1);
	raw_free(again);
	scene_free(&s);
}
END_TEST

static Suite *session_suite(void)
{
	Suite *s = suite_create("session");
	TCase *tc = harness_tcase("session");
	tcase_add_test(tc, test_takeover_v5_dead_letters);
	tcase_add_test(tc, test_takeover_v311_clean_dead_letters);
	tcase_add_test(tc, test_close_after_nack_v5_dead_letters);
	tcase_add_test(tc, test_close_after_nack_v5_no_clean_start_dead_letters);
	tcase_add_test(tc, test_takeover_v311_persistent_keeps_copy);
	tcase_add_test(tc, test_close_after_nack_v311_persistent_keeps_copy);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(session_suite());
	harness_init(sr);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	failed += harness_finish();
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
