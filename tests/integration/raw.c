/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The raw MQTT client of raw.h: packets built and parsed by hand over a
 * blocking unix socket, read with poll() deadlines. Only what tests need:
 * CONNECT, SUBSCRIBE, PUBLISH at QoS 0/1, PUBACK and DISCONNECT going out;
 * CONNACK, SUBACK, PUBLISH, PUBACK and DISCONNECT coming in. A packet a
 * server may never send, or one that does not parse, fails the test.
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

/* MQTT control packet types (the high nibble of the first byte). */
enum {
	PKT_CONNECT = 1, PKT_CONNACK = 2, PKT_PUBLISH = 3, PKT_PUBACK = 4,
	PKT_SUBSCRIBE = 8, PKT_SUBACK = 9, PKT_UNSUBSCRIBE = 10, PKT_PINGREQ = 12,
	PKT_DISCONNECT = 14,
};

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
};

/* A received packet; body points into r->in until the next read. */
struct packet {
	unsigned type, flags;
	const unsigned char *body;
	size_t len;
};

enum read_result { READ_PACKET, READ_TIMEOUT, READ_CLOSED };

#define fail_raw(file, line, r, fmt, ...) \
	fail_at((file), (line), "raw client %s: " fmt, (r)->o.id, __VA_ARGS__)

/* ---- building packets ---- */

struct body {
	unsigned char b[4096];
	size_t n;
};

static void put8(struct body *p, unsigned v)
{
	ck_assert_msg(p->n < sizeof(p->b), "raw client: packet too large");
	p->b[p->n++] = (unsigned char)v;
}

static void put16(struct body *p, unsigned v)
{
	put8(p, (v >> 8) & 0xFF);
	put8(p, v & 0xFF);
}

static void put32(struct body *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p, v & 0xFFFF);
}

static void put_bytes(struct body *p, const void *data, size_t len)
{
	ck_assert_msg(p->n + len <= sizeof(p->b), "raw client: packet too large");
	if(len){
		memcpy(p->b + p->n, data, len);
	}
	p->n += len;
}

static void put_str(struct body *p, const char *s)
{
	put16(p, (unsigned)strlen(s));
	put_bytes(p, s, strlen(s));
}

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
	unsigned char pkt[sizeof(body->b) + 5];
	size_t n = 0, len = body->n;
	if(r->fd < 0){
		return false;
	}
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

/* ---- parsing ---- */

/* A variable byte integer at *pos in buf[0..len): 1 read, 0 incomplete,
 * -1 malformed (more than four bytes). */
static int get_varint(const unsigned char *buf, size_t len, size_t *pos, size_t *value)
{
	size_t v = 0;
	for(unsigned shift = 0; shift < 28; shift += 7){
		if(*pos >= len){
			return 0;
		}
		unsigned char d = buf[(*pos)++];
		v |= (size_t)(d & 0x7F) << shift;
		if(!(d & 0x80)){
			*value = v;
			return 1;
		}
	}
	return -1;
}

static bool get16(const unsigned char *buf, size_t len, size_t *pos, unsigned *v)
{
	if(*pos + 2 > len){
		return false;
	}
	*v = (unsigned)buf[*pos] << 8 | buf[*pos + 1];
	*pos += 2;
	return true;
}

/* A length-prefixed string or binary datum, borrowed from buf. */
static bool get_str(const unsigned char *buf, size_t len, size_t *pos, const unsigned char **s, size_t *slen)
{
	unsigned n;
	if(!get16(buf, len, pos, &n) || *pos + n > len){
		return false;
	}
	*s = buf + *pos;
	*slen = n;
	*pos += n;
	return true;
}

static char *dup_bytes(const unsigned char *s, size_t len)
{
	char *d = harness__xmalloc(len + 1);
	if(len){
		memcpy(d, s, len);
	}
	d[len] = '\0';
	return d;
}

/* Skips a v5 property list at *pos, copying user properties into m (NULL:
 * dropped). False if malformed or of an unknown property. */
static bool get_properties(const unsigned char *buf, size_t len, size_t *pos, struct raw_msg *m)
{
	size_t plen, id;
	if(get_varint(buf, len, pos, &plen) != 1 || *pos + plen > len){
		return false;
	}
	size_t end = *pos + plen;
	while(*pos < end){
		const unsigned char *k, *v;
		size_t klen, vlen, n, fixed = 0;
		if(get_varint(buf, end, pos, &id) != 1){
			return false;
		}
		switch(id){
			case 0x01: case 0x17: case 0x19: case 0x24: case 0x25: case 0x28: case 0x29: case 0x2A:
				fixed = 1;
				break;
			case 0x13: case 0x21: case 0x22: case 0x23:
				fixed = 2;
				break;
			case 0x02: case 0x11: case 0x18: case 0x27:
				fixed = 4;
				break;
			case 0x0B: /* subscription identifier */
				if(get_varint(buf, end, pos, &n) != 1){
					return false;
				}
				break;
			case 0x03: case 0x08: case 0x09: case 0x12: case 0x15: case 0x16: case 0x1A: case 0x1C: case 0x1F:
				if(!get_str(buf, end, pos, &v, &vlen)){
					return false;
				}
				break;
			case 0x26: /* user property */
				if(!get_str(buf, end, pos, &k, &klen) || !get_str(buf, end, pos, &v, &vlen)){
					return false;
				}
				if(m){
					m->users = realloc(m->users, (m->nusers + 1) * sizeof(*m->users));
					ck_assert_ptr_nonnull(m->users);
					m->users[m->nusers].name = dup_bytes(k, klen);
					m->users[m->nusers].value = dup_bytes(v, vlen);
					m->nusers++;
				}
				break;
			default:
				return false;
		}
		if(*pos + fixed > end){
			return false;
		}
		*pos += fixed;
	}
	return true;
}

static void msg_free(struct raw_msg *m)
{
	free(m->topic);
	free(m->payload);
	for(size_t i = 0; i < m->nusers; i++){
		free(m->users[i].name);
		free(m->users[i].value);
	}
	free(m->users);
	free(m);
}

/* Decodes a PUBLISH and keeps it. */
static void record_publish(const char *file, int line, struct raw *r, const struct packet *p)
{
	struct raw_msg *m = calloc(1, sizeof(*m));
	ck_assert_ptr_nonnull(m);
	m->qos = (int)(p->flags >> 1) & 3;
	m->dup = p->flags & 8;
	m->retain = p->flags & 1;
	m->connection = r->connections;
	const unsigned char *topic;
	size_t tlen, pos = 0;
	if(!get_str(p->body, p->len, &pos, &topic, &tlen) || tlen == 0 || m->qos == 3){
		fail_raw(file, line, r, "malformed PUBLISH (flags 0x%x, %zu bytes)", p->flags, p->len);
	}
	if(m->qos == 0 && m->dup){
		fail_raw(file, line, r, "PUBLISH at QoS 0 with DUP set on %.*s", (int)tlen, topic);
	}
	m->topic = dup_bytes(topic, tlen);
	if(m->qos > 0 && (!get16(p->body, p->len, &pos, &m->mid) || m->mid == 0)){
		fail_raw(file, line, r, "PUBLISH on %s without a packet id", m->topic);
	}
	if(r->o.protocol == MQTT_PROTOCOL_V5 && !get_properties(p->body, p->len, &pos, m)){
		fail_raw(file, line, r, "PUBLISH on %s with malformed properties", m->topic);
	}
	m->payloadlen = p->len - pos;
	m->payload = dup_bytes(p->body + pos, m->payloadlen);
	if(r->nmsgs == r->capmsgs){
		r->capmsgs = r->capmsgs ? r->capmsgs * 2 : 16;
		r->msgs = realloc(r->msgs, r->capmsgs * sizeof(*r->msgs));
		ck_assert_ptr_nonnull(r->msgs);
	}
	r->msgs[r->nmsgs++] = m;
}

/* ---- reading ---- */

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
		size_t pos = 1, len = 0;
		int v = r->inlen >= 2 ? get_varint(r->in, r->inlen, &pos, &len) : 0;
		if(v < 0){
			fail_raw(file, line, r, "malformed packet length (first byte 0x%02x)", r->in[0]);
		}
		if(v > 0 && pos + len <= r->inlen){
			p->type = r->in[0] >> 4;
			p->flags = r->in[0] & 0x0F;
			p->body = r->in + pos;
			p->len = len;
			r->consumed = pos + len;
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
		msg_free(r->msgs[i]);
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
	bool v5 = r->o.protocol == MQTT_PROTOCOL_V5;
	put_str(&p, "MQTT");
	put8(&p, v5 ? 5 : 4);
	put8(&p, (r->o.username ? 0x80 : 0) | (r->o.clean ? 0x02 : 0));
	put16(&p, 60); /* keep alive */
	if(v5){
		struct body props = {0};
		if(r->o.expiry_s){
			put8(&props, 0x11);
			put32(&props, r->o.expiry_s);
		}
		if(r->o.receive_max){
			put8(&props, 0x21);
			put16(&props, r->o.receive_max);
		}
		put8(&p, (unsigned)props.n); /* fits one byte */
		put_bytes(&p, props.b, props.n);
	}
	put_str(&p, r->o.id);
	if(r->o.username){
		put_str(&p, r->o.username);
	}
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
	put16(&p, mid);
	if(r->o.protocol == MQTT_PROTOCOL_V5){
		put8(&p, 0);
	}
	put_str(&p, filter);
	put8(&p, (unsigned)qos);
	if(!send_packet(r, 0x82, &p)){
		fail_raw(file, line, r, "sending SUBSCRIBE %s: %s", filter, strerror(errno));
	}
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	struct packet k;
	enum read_result res;
	size_t pos = 0;
	while((res = pump(file, line, r, deadline, &k)) == READ_PACKET){
		pos = 0;
		if(k.type == PKT_SUBACK && get16(k.body, k.len, &pos, &got_mid) && got_mid == mid){
			break;
		}
	}
	if(res != READ_PACKET){
		fail_raw(file, line, r, "no SUBACK for %s: %s", filter, why_not(res));
	}
	if(r->o.protocol == MQTT_PROTOCOL_V5 && !get_properties(k.body, k.len, &pos, NULL)){
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
	put16(&p, mid);
	return send_packet(r, 0x40, &p);
}

/* Sends a PUBLISH with packet id mid (ignored at QoS 0). */
static bool send_publish(struct raw *r, const char *topic, const void *payload, size_t len, int qos, unsigned mid)
{
	struct body p = {0};
	put_str(&p, topic);
	if(qos > 0){
		put16(&p, mid);
	}
	if(r->o.protocol == MQTT_PROTOCOL_V5){
		put8(&p, 0);
	}
	put_bytes(&p, payload, len);
	return send_packet(r, 0x30 | (unsigned)qos << 1, &p);
}

bool raw_send_publish(struct raw *r, const char *topic, const void *payload, size_t len, int qos)
{
	return send_publish(r, topic, payload, len, qos, qos > 0 ? next_mid(r) : 0);
}

unsigned raw_publish_at(const char *file, int line, struct raw *r, const char *topic,
		const void *payload, size_t len, int qos)
{
	if(qos != 0 && qos != 1){
		fail_raw(file, line, r, "raw_publish supports QoS 0 and 1, not %d", qos);
	}
	unsigned mid = qos > 0 ? next_mid(r) : 0, got_mid = 0;
	if(!send_publish(r, topic, payload, len, qos, mid)){
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
		if(p.type == PKT_PUBACK && get16(p.body, p.len, &pos, &got_mid) && got_mid == mid){
			break;
		}
	}
	if(res != READ_PACKET){
		fail_raw(file, line, r, "no PUBACK for the PUBLISH to %s: %s", topic, why_not(res));
	}
	return pos < p.len ? p.body[pos] : 0; /* v5 omits a success code */
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

const char *raw_user(const struct raw_msg *m, const char *name)
{
	for(size_t i = 0; i < m->nusers; i++){
		if(!strcmp(m->users[i].name, name)){
			return m->users[i].value;
		}
	}
	return NULL;
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
