/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The raw MQTT client of raw.h: its connections over a blocking unix
 * socket, read with poll() deadlines, and what it received. Packets are
 * built and parsed by raw_packet.c; only what tests need goes out (CONNECT,
 * SUBSCRIBE, PUBLISH at QoS 0/1, PUBACK and DISCONNECT) and is awaited
 * (CONNACK, SUBACK, PUBACK; PUBLISH and DISCONNECT are taken at any time).
 * A packet a server may never send, or one that does not parse, fails the
 * test.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness_int.h"
#include "raw.h"
#include "raw_packet.h"

struct raw {
	struct broker *broker;
	struct raw_options o;       /* id and username point to our copies */
	int fd;                     /* -1: not open */
	bool eof;                   /* the broker closed the connection */
	unsigned connections;       /* sockets opened so far */
	uint16_t last_mid;
	unsigned char *in;          /* bytes read and not yet consumed */
	size_t inlen, incap;
	size_t consumed;            /* length of the packet read_packet last returned */
	struct raw_msg **msgs;      /* every PUBLISH received */
	size_t nmsgs, capmsgs;
	size_t next;                /* the first one raw_next has not handed out */
	const char *response_topic; /* borrowed: what v5 publishes carry, or NULL */
	bool retain;                /* its publishes are retained (raw_set_retain) */
};

enum read_result { READ_PACKET, READ_TIMEOUT, READ_CLOSED };

#define fail_raw(file, line, r, fmt, ...) fail_raw_id((file), (line), (r)->o.id, fmt, __VA_ARGS__)

/* ---- sending ---- */

static uint16_t next_mid(struct raw *r)
{
	if(++r->last_mid == 0){
		r->last_mid = 1;
	}
	return r->last_mid;
}

/* Writes one packet; false if the socket is closed or refuses it. */
static bool send_packet(struct raw *r, unsigned first, const struct body *body)
{
	unsigned char pkt[PACKET_MAX];
	if(r->fd < 0){
		return false;
	}
	size_t n = packet__frame(first, body, pkt);
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

/* ---- reading ---- */

/* Decodes a PUBLISH and keeps it. */
static void record_publish(const char *file, int line, struct raw *r, const struct packet *p)
{
	struct raw_msg *m = packet__decode_publish(file, line, r->o.id, r->o.protocol == MQTT_PROTOCOL_V5, p);
	m->connection = r->connections;
	if(r->nmsgs == r->capmsgs){
		r->capmsgs = r->capmsgs ? r->capmsgs * 2 : 16;
		r->msgs = realloc(r->msgs, r->capmsgs * sizeof(*r->msgs));
		ck_assert_ptr_nonnull(r->msgs);
	}
	r->msgs[r->nmsgs++] = m;
}

/* Reads the next whole packet, waiting until deadline (monotonic ms). */
static enum read_result read_packet(const char *file, int line, struct raw *r, uint64_t deadline, struct packet *p)
{
	if(r->consumed){
		memmove(r->in, r->in + r->consumed, r->inlen - r->consumed);
		r->inlen -= r->consumed;
		r->consumed = 0;
	}
	for(;;){
		if(r->fd < 0){
			return READ_CLOSED;
		}
		int v = packet__unframe(r->in, r->inlen, p, &r->consumed);
		if(v < 0){
			fail_raw(file, line, r, "malformed packet length (first byte 0x%02x)", r->in[0]);
		}
		if(v > 0){
			return READ_PACKET;
		}
		if(r->eof){
			return READ_CLOSED;
		}
		uint64_t now = it_now_ms();
		struct pollfd pfd = { .fd = r->fd, .events = POLLIN };
		int n = poll(&pfd, 1, now < deadline ? (int)(deadline - now) : 0);
		if(n < 0 && errno == EINTR){
			continue;
		}
		if(n < 0){
			fail_raw(file, line, r, "poll: %s", strerror(errno));
		}
		if(n == 0){
			return READ_TIMEOUT;
		}
		if(r->inlen == r->incap){
			r->incap = r->incap ? r->incap * 2 : 8192;
			r->in = realloc(r->in, r->incap);
			ck_assert_ptr_nonnull(r->in);
		}
		ssize_t got = recv(r->fd, r->in + r->inlen, r->incap - r->inlen, 0);
		if(got < 0 && errno == EINTR){
			continue;
		}
		if(got <= 0){
			r->eof = true; /* end of stream, or reset */
		}else{
			r->inlen += (size_t)got;
		}
	}
}

/* read_packet, keeping every PUBLISH and ending at a DISCONNECT. Returns
 * PUBLISHes and the packets a caller may wait for. */
static enum read_result pump(const char *file, int line, struct raw *r, uint64_t deadline, struct packet *p)
{
	enum read_result res = read_packet(file, line, r, deadline, p);
	if(res != READ_PACKET){
		return res;
	}
	switch(p->type){
		case PKT_PUBLISH:
			record_publish(file, line, r, p);
			break;
		case PKT_DISCONNECT:
			r->eof = true;
			return READ_CLOSED;
		case 0: case PKT_CONNECT: case PKT_SUBSCRIBE: case PKT_UNSUBSCRIBE: case PKT_PINGREQ:
			fail_raw(file, line, r, "the broker sent a packet of type %u, which only clients send", p->type);
			break;
		default:
			break;
	}
	return READ_PACKET;
}

static const char *why_not(enum read_result res)
{
	return res == READ_CLOSED ? "the connection was closed by the broker" : "timed out";
}

/* ---- the API ---- */

struct raw *raw_new(struct broker *b, const struct raw_options *o)
{
	struct raw *r = calloc(1, sizeof(*r));
	ck_assert_ptr_nonnull(r);
	ck_assert_msg(o->id && (o->protocol == MQTT_PROTOCOL_V311 || o->protocol == MQTT_PROTOCOL_V5),
			"raw_new: an id and MQTT_PROTOCOL_V311 or MQTT_PROTOCOL_V5 are needed");
	r->broker = b;
	r->o = *o;
	r->o.id = harness__xstrdup(o->id);
	r->o.username = o->username ? harness__xstrdup(o->username) : NULL;
	r->fd = -1;
	return r;
}

void raw_free(struct raw *r)
{
	if(!r){
		return;
	}
	raw_close(r);
	for(size_t i = 0; i < r->nmsgs; i++){
		packet__msg_free(r->msgs[i]);
	}
	free(r->msgs);
	free(r->in);
	free((char *)r->o.id);
	free((char *)r->o.username);
	free(r);
}

const char *raw_id(const struct raw *r)
{
	return r->o.id;
}

void raw_open_at(const char *file, int line, struct raw *r)
{
	raw_close(r);
	r->eof = false;
	r->inlen = r->consumed = 0;
	r->connections++;
	const char *path = broker_socket(r->broker);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if(strlen(path) >= sizeof(sa.sun_path)){
		fail_raw(file, line, r, "socket path too long: %s", path);
	}
	strcpy(sa.sun_path, path);
	r->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if(r->fd < 0 || connect(r->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0){
		fail_raw(file, line, r, "connecting to %s: %s", path, strerror(errno));
	}
}

bool raw_send_connect(struct raw *r)
{
	struct body p = {0};
	packet__connect(&p, &r->o);
	return send_packet(r, 0x10, &p);
}

unsigned raw_read_connack_at(const char *file, int line, struct raw *r, bool *present)
{
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	struct packet p;
	enum read_result res;
	while((res = pump(file, line, r, deadline, &p)) == READ_PACKET && p.type != PKT_CONNACK){
	}
	if(res != READ_PACKET){
		fail_raw(file, line, r, "no CONNACK: %s", why_not(res));
	}
	if(p.len < 2 || (p.body[0] & 0xFE)){
		fail_raw(file, line, r, "malformed CONNACK (%zu bytes)", p.len);
	}
	if(present){
		*present = p.body[0] & 1;
	}
	return p.body[1];
}

bool raw_connect_at(const char *file, int line, struct raw *r)
{
	bool present;
	raw_open_at(file, line, r);
	if(!raw_send_connect(r)){
		fail_raw(file, line, r, "sending CONNECT: %s", strerror(errno));
	}
	unsigned code = raw_read_connack_at(file, line, r, &present);
	if(code != 0){
		fail_raw(file, line, r, "the broker refused the connection (CONNACK code 0x%02x)", code);
	}
	return present;
}

unsigned raw_subscribe_at(const char *file, int line, struct raw *r, const char *filter, int qos)
{
	struct body p = {0};
	unsigned mid = next_mid(r), got_mid = 0;
	packet__subscribe(&p, r->o.protocol == MQTT_PROTOCOL_V5, mid, filter, qos);
	if(!send_packet(r, 0x82, &p)){
		fail_raw(file, line, r, "sending SUBSCRIBE %s: %s", filter, strerror(errno));
	}
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	struct packet k;
	enum read_result res;
	size_t pos = 0;
	while((res = pump(file, line, r, deadline, &k)) == READ_PACKET){
		pos = 0;
		if(k.type == PKT_SUBACK && packet__get16(k.body, k.len, &pos, &got_mid) && got_mid == mid){
			break;
		}
	}
	if(res != READ_PACKET){
		fail_raw(file, line, r, "no SUBACK for %s: %s", filter, why_not(res));
	}
	if(r->o.protocol == MQTT_PROTOCOL_V5 && !packet__get_properties(k.body, k.len, &pos, NULL)){
		fail_raw(file, line, r, "SUBACK for %s with malformed properties", filter);
	}
	if(k.len - pos != 1){
		fail_raw(file, line, r, "SUBACK for %s has %zu codes, expected 1", filter, k.len - pos);
	}
	return k.body[pos];
}

enum raw_event raw_next_at(const char *file, int line, struct raw *r, int timeout_ms, const struct raw_msg **m)
{
	uint64_t deadline = it_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
	struct packet p;
	while(r->next == r->nmsgs){
		enum read_result res = pump(file, line, r, deadline, &p);
		if(res != READ_PACKET){
			return res == READ_CLOSED ? RAW_CLOSED : RAW_TIMEOUT;
		}
	}
	*m = r->msgs[r->next++];
	return RAW_PUBLISH;
}

const struct raw_msg *raw_expect_at(const char *file, int line, struct raw *r)
{
	const struct raw_msg *m = NULL;
	enum raw_event e = raw_next_at(file, line, r, HARNESS_WAIT_MS, &m);
	if(e != RAW_PUBLISH){
		raw_dump(r);
		fail_raw(file, line, r, "expected a PUBLISH within %d ms: %s", HARNESS_WAIT_MS,
				e == RAW_CLOSED ? "the connection was closed" : "none came");
	}
	return m;
}

void raw_drain_at(const char *file, int line, struct raw *r, int ms)
{
	uint64_t deadline = it_now_ms() + (uint64_t)(ms > 0 ? ms : 0);
	struct packet p;
	while(pump(file, line, r, deadline, &p) == READ_PACKET){
	}
}

bool raw_puback(struct raw *r, unsigned mid)
{
	struct body p = {0};
	packet__puback(&p, mid);
	return send_packet(r, 0x40, &p);
}

/* Sends a PUBLISH with packet id mid (ignored at QoS 0). */
static bool send_publish(struct raw *r, const char *topic, const void *payload, size_t len, int qos, unsigned mid,
		const void *props, size_t props_len)
{
	struct body p = {0};
	uint8_t rt[3 + 65535];
	if(props == NULL && r->response_topic){
		/* The response topic set with raw_set_response_topic: one
		 * property, identifier 8, any bytes ("" too). */
		size_t n = strlen(r->response_topic);
		ck_assert_msg(n <= 65535, "raw client: response topic too long");
		rt[0] = MQTT_PROP_RESPONSE_TOPIC;
		rt[1] = (uint8_t)(n >> 8);
		rt[2] = (uint8_t)(n & 0xff);
		memcpy(rt + 3, r->response_topic, n);
		props = rt;
		props_len = 3 + n;
	}
	packet__publish(&p, r->o.protocol == MQTT_PROTOCOL_V5, topic, payload, len, qos, mid, props, props_len);
	return send_packet(r, 0x30 | (unsigned)qos << 1 | (r->retain ? 1u : 0u), &p);
}

bool raw_send_publish(struct raw *r, const char *topic, const void *payload, size_t len, int qos)
{
	return send_publish(r, topic, payload, len, qos, qos > 0 ? next_mid(r) : 0, NULL, 0);
}

bool raw_send_publish_props(struct raw *r, const char *topic, const void *payload, size_t len, int qos,
		const void *props, size_t props_len)
{
	return send_publish(r, topic, payload, len, qos, qos > 0 ? next_mid(r) : 0, props, props_len);
}

unsigned raw_publish_at(const char *file, int line, struct raw *r, const char *topic,
		const void *payload, size_t len, int qos)
{
	if(qos != 0 && qos != 1){
		fail_raw(file, line, r, "raw_publish supports QoS 0 and 1, not %d", qos);
	}
	unsigned mid = qos > 0 ? next_mid(r) : 0, got_mid = 0;
	if(!send_publish(r, topic, payload, len, qos, mid, NULL, 0)){
		fail_raw(file, line, r, "sending PUBLISH to %s: %s", topic, strerror(errno));
	}
	if(qos == 0){
		return 0;
	}
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	struct packet p;
	enum read_result res;
	size_t pos = 0;
	while((res = pump(file, line, r, deadline, &p)) == READ_PACKET){
		pos = 0;
		if(p.type == PKT_PUBACK && packet__get16(p.body, p.len, &pos, &got_mid) && got_mid == mid){
			break;
		}
	}
	if(res != READ_PACKET){
		fail_raw(file, line, r, "no PUBACK for the PUBLISH to %s: %s", topic, why_not(res));
	}
	return pos < p.len ? p.body[pos] : 0; /* v5 omits a success code */
}

void raw_set_retain(struct raw *r, bool retain)
{
	r->retain = retain;
}

void raw_set_response_topic(struct raw *r, const char *topic)
{
	r->response_topic = topic;
}

bool raw_ping_at(const char *file, int line, struct raw *r, int timeout_ms)
{
	struct body b = {0};
	if(!send_packet(r, 0xC0, &b)){
		return false;
	}
	uint64_t deadline = it_now_ms() + (uint64_t)timeout_ms;
	struct packet p;
	enum read_result res;
	while((res = pump(file, line, r, deadline, &p)) == READ_PACKET && p.type != PKT_PINGRESP){
	}
	return res == READ_PACKET;
}

void raw_close(struct raw *r)
{
	if(r->fd >= 0){
		close(r->fd);
		r->fd = -1;
	}
}

bool raw_disconnect(struct raw *r)
{
	struct body p = {0};
	bool sent = send_packet(r, 0xE0, &p);
	raw_close(r);
	return sent;
}

bool raw_disconnect_expiry(struct raw *r, uint32_t expiry_s)
{
	struct body p = {0};
	/* Reason code 0, then the properties: Session Expiry Interval. */
	const unsigned char b[] = { 0x00, 0x05, 0x11, (unsigned char)(expiry_s >> 24), (unsigned char)(expiry_s >> 16),
			(unsigned char)(expiry_s >> 8), (unsigned char)expiry_s };
	memcpy(p.b, b, sizeof(b));
	p.n = sizeof(b);
	bool sent = send_packet(r, 0xE0, &p);
	raw_close(r);
	return sent;
}

bool raw_closed(const struct raw *r)
{
	return r->fd < 0 || r->eof;
}

size_t raw_count(const struct raw *r, const char *topic, const char *payload)
{
	size_t n = 0;
	for(size_t i = 0; i < r->nmsgs; i++){
		const struct raw_msg *m = r->msgs[i];
		n += (!topic || !strcmp(m->topic, topic))
				&& (!payload || (m->payloadlen == strlen(payload) && !memcmp(m->payload, payload, m->payloadlen)));
	}
	return n;
}

const struct raw_msg *raw_received(const struct raw *r, size_t i)
{
	return i < r->nmsgs ? r->msgs[i] : NULL;
}

const char *raw_event_name(enum raw_event e)
{
	return e == RAW_PUBLISH ? "publish" : e == RAW_TIMEOUT ? "timeout" : "closed";
}

void raw_dump(const struct raw *r)
{
	fprintf(stderr, "---- raw client %s received %zu PUBLISH(es) over %u connection(s) ----\n",
			r->o.id, r->nmsgs, r->connections);
	for(size_t i = 0; i < r->nmsgs; i++){
		const struct raw_msg *m = r->msgs[i];
		fprintf(stderr, "%3zu conn %u %s qos %d%s%s mid %u \"%.60s\"", i, m->connection, m->topic, m->qos,
				m->dup ? " dup" : "", m->retain ? " retain" : "", m->mid, m->payload);
		for(size_t k = 0; k < m->nusers; k++){
			fprintf(stderr, " %s=%s", m->users[k].name, m->users[k].value);
		}
		fputc('\n', stderr);
	}
	fprintf(stderr, "---- end of raw client %s ----\n", r->o.id);
}
