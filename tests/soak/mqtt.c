/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The soak's non-blocking MQTT v5 connections (see mqtt.h). Packets are
 * built into the connection's output buffer and written as the socket takes
 * them; input is read into a buffer and every whole packet is reported to
 * the owner's handlers. A packet the broker may not send, or one that does
 * not parse, ends the connection like a broken socket (the owner's closed
 * handler says why), so the soak counts it and goes on.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "mqtt.h"

enum {
	PKT_CONNECT = 1, PKT_CONNACK = 2, PKT_PUBLISH = 3, PKT_PUBACK = 4,
	PKT_SUBSCRIBE = 8, PKT_SUBACK = 9, PKT_PINGRESP = 13, PKT_DISCONNECT = 14,
};

/* Bytes read per mq_read at most, so that one busy connection does not
 * starve the others of the poll loop. */
#define READ_BUDGET (256 * 1024)

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n);
	if(q == NULL){
		fprintf(stderr, "dlq_soak: out of memory\n");
		abort();
	}
	return q;
}

/* Makes room for n more bytes in *buf (length len, capacity *cap). */
static void reserve(unsigned char **buf, size_t len, size_t *cap, size_t n)
{
	if(*cap - len >= n) return;
	size_t want = *cap ? *cap : 4096;
	while(want - len < n){
		want *= 2;
	}
	*buf = xrealloc(*buf, want);
	*cap = want;
}

/* ---- building packets ---- */

/* One packet's body, built before its fixed header is known. */
struct body {
	unsigned char *b;
	size_t n, cap;
};

static void put_bytes(struct body *p, const void *data, size_t len)
{
	reserve(&p->b, p->n, &p->cap, len);
	if(len) memcpy(p->b + p->n, data, len);
	p->n += len;
}

#include "mqtt_wire.h"

/* The body being built; one at a time (the soak has one thread). */
static struct body scratch_body;

static struct body *body_new(void)
{
	scratch_body.n = 0;
	return &scratch_body;
}

static void fail(struct mq_conn *c, const char *why);

/* Appends the packet (fixed header, body) to the output and writes what the
 * socket takes. */
static bool emit(struct mq_conn *c, unsigned first, const struct body *body)
{
	if(c->fd < 0) return false;
	unsigned char hdr[5];
	size_t h = 0, len = body->n;
	hdr[h++] = (unsigned char)first;
	do{
		unsigned char d = len % 128;
		len /= 128;
		hdr[h++] = (unsigned char)(len ? d | 0x80 : d);
	}while(len);
	reserve(&c->out, c->outlen, &c->outcap, h + body->n);
	memcpy(c->out + c->outlen, hdr, h);
	if(body->n) memcpy(c->out + c->outlen + h, body->b, body->n);
	c->outlen += h + body->n;
	mq_flush(c);
	return c->fd >= 0;
}

/* ---- parsing ---- */

/* Copies bytes into the connection's scratch as a NUL-terminated string;
 * returns its offset (pointers are made once the scratch stops growing). */
static size_t keep_str(struct mq_conn *c, size_t *used, const unsigned char *s, size_t len)
{
	reserve((unsigned char **)&c->scratch, *used, &c->scratchcap, len + 1);
	size_t at = *used;
	if(len) memcpy(c->scratch + at, s, len);
	c->scratch[at + len] = '\0';
	*used += len + 1;
	return at;
}

/* What a property list says that the soak reads. Offsets into the scratch
 * for user properties. */
struct props {
	unsigned receive_max;       /* 0: absent */
	size_t user_name[MQ_MAX_USERS], user_value[MQ_MAX_USERS];
	size_t nusers;
};

/* Parses a v5 property list at *pos; false if malformed or unknown. */
static bool get_properties(struct mq_conn *c, const unsigned char *buf, size_t len, size_t *pos,
		struct props *out, size_t *used)
{
	size_t plen, id;
	if(get_varint(buf, len, pos, &plen) != 1 || *pos + plen > len) return false;
	size_t end = *pos + plen;
	while(*pos < end){
		const unsigned char *k, *v;
		size_t klen, vlen, n, fixed = 0;
		unsigned u16;
		if(get_varint(buf, end, pos, &id) != 1) return false;
		switch(id){
			case 0x01: case 0x17: case 0x19: case 0x24: case 0x25: case 0x28: case 0x29: case 0x2A:
				fixed = 1;
				break;
			case 0x21: /* receive maximum */
				if(!get16(buf, end, pos, &u16)) return false;
				out->receive_max = u16;
				break;
			case 0x13: case 0x22: case 0x23:
				fixed = 2;
				break;
			case 0x02: case 0x11: case 0x18: case 0x27:
				fixed = 4;
				break;
			case 0x0B:
				if(get_varint(buf, end, pos, &n) != 1) return false;
				break;
			case 0x03: case 0x08: case 0x09: case 0x12: case 0x15: case 0x16: case 0x1A: case 0x1C: case 0x1F:
				if(!get_str(buf, end, pos, &v, &vlen)) return false;
				break;
			case 0x26:
				if(!get_str(buf, end, pos, &k, &klen) || !get_str(buf, end, pos, &v, &vlen)) return false;
				if(out->nusers < MQ_MAX_USERS){
					out->user_name[out->nusers] = keep_str(c, used, k, klen);
					out->user_value[out->nusers] = keep_str(c, used, v, vlen);
					out->nusers++;
				}
				break;
			default:
				return false;
		}
		if(*pos + fixed > end) return false;
		*pos += fixed;
	}
	return true;
}

static void on_publish(struct mq_conn *c, unsigned flags, const unsigned char *b, size_t len)
{
	struct mq_msg m;
	struct props pr = {0};
	size_t pos = 0, used = 0, tlen;
	const unsigned char *topic;

	memset(&m, 0, sizeof(m));
	m.qos = (int)(flags >> 1) & 3;
	m.dup = flags & 8;
	if(!get_str(b, len, &pos, &topic, &tlen) || tlen == 0 || m.qos == 3){
		fail(c, "malformed PUBLISH");
		return;
	}
	size_t topic_at = keep_str(c, &used, topic, tlen);
	if(m.qos > 0 && (!get16(b, len, &pos, &m.mid) || m.mid == 0)){
		fail(c, "PUBLISH without a packet id");
		return;
	}
	if(!get_properties(c, b, len, &pos, &pr, &used)){
		fail(c, "PUBLISH with malformed properties");
		return;
	}
	m.topic = c->scratch + topic_at;
	for(size_t i = 0; i < pr.nusers; i++){
		m.users[i].name = c->scratch + pr.user_name[i];
		m.users[i].value = c->scratch + pr.user_value[i];
	}
	m.nusers = pr.nusers;
	m.payload = b + pos;
	m.payloadlen = len - pos;
	if(c->h->publish) c->h->publish(c, &m);
}

static void on_packet(struct mq_conn *c, unsigned type, unsigned flags, const unsigned char *b, size_t len)
{
	size_t pos = 0, used = 0;
	unsigned mid;
	struct props pr = {0};

	switch(type){
		case PKT_CONNACK:
			if(c->state != MQ_CONNECTING || len < 2 || (b[0] & 0xFE)){
				fail(c, "unexpected or malformed CONNACK");
				return;
			}
			pos = 2;
			if(b[1] != 0){
				fail(c, "connection refused (CONNACK reason code not 0)");
				return;
			}
			if(!get_properties(c, b, len, &pos, &pr, &used)){
				fail(c, "CONNACK with malformed properties");
				return;
			}
			c->server_receive_max = pr.receive_max ? (uint16_t)pr.receive_max : 65535;
			c->state = MQ_UP;
			if(c->h->connack) c->h->connack(c, b[0] & 1);
			break;
		case PKT_PUBLISH:
			on_publish(c, flags, b, len);
			break;
		case PKT_PUBACK:
			if(!get16(b, len, &pos, &mid)){
				fail(c, "malformed PUBACK");
				return;
			}
			if(c->h->puback) c->h->puback(c, mid, pos < len ? b[pos] : 0);
			break;
		case PKT_SUBACK:
			if(!get16(b, len, &pos, &mid) || !get_properties(c, b, len, &pos, &pr, &used)){
				fail(c, "malformed SUBACK");
				return;
			}
			if(c->h->suback) c->h->suback(c, mid, b + pos, len - pos);
			break;
		case PKT_PINGRESP:
			break;
		case PKT_DISCONNECT:
			fail(c, "DISCONNECT from the broker");
			break;
		default:
			fail(c, "a packet type the broker may not send");
			break;
	}
}

/* Reports every whole packet in the input buffer. */
static void parse(struct mq_conn *c)
{
	size_t at = 0;
	uint64_t opens = c->opens;
	while(c->fd >= 0 && c->opens == opens){
		size_t pos = at + 1, len = 0;
		if(c->inlen - at < 2) break;
		int v = get_varint(c->in, c->inlen, &pos, &len);
		if(v < 0){
			fail(c, "malformed packet length");
			return;
		}
		if(v == 0 || pos + len > c->inlen) break;
		unsigned first = c->in[at];
		at = pos + len;
		on_packet(c, first >> 4, first & 0x0F, c->in + pos, len);
	}
	if(c->fd < 0 || c->opens != opens) return; /* closed meanwhile: the buffer was reset */
	if(at){
		memmove(c->in, c->in + at, c->inlen - at);
		c->inlen -= at;
	}
}

/* ---- the connection ---- */

void mq_init(struct mq_conn *c, const char *id, const char *path, const struct mq_handlers *h, void *owner)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->id, sizeof(c->id), "%s", id);
	c->path = path;
	c->h = h;
	c->owner = owner;
	c->fd = -1;
	c->state = MQ_DOWN;
}

void mq_free(struct mq_conn *c)
{
	mq_close(c);
	free(c->in);
	free(c->out);
	free(c->scratch);
	c->in = c->out = NULL;
	c->scratch = NULL;
}

static void reset(struct mq_conn *c)
{
	if(c->fd >= 0) close(c->fd);
	c->fd = -1;
	c->state = MQ_DOWN;
	c->inlen = 0;
	c->outlen = 0;
}

/* The connection broke or the broker ended it: closed, then reported. */
static void fail(struct mq_conn *c, const char *why)
{
	if(c->fd < 0) return;
	reset(c);
	if(c->h->closed) c->h->closed(c, why);
}

int mq_open(struct mq_conn *c)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	reset(c);
	if(strlen(c->path) >= sizeof(sa.sun_path)){
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(sa.sun_path, c->path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if(fd < 0) return -1;
	if(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0){
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	c->fd = fd;
	c->state = MQ_CONNECTING;
	c->opens++;

	struct body *p = body_new();
	put_str(p, "MQTT");
	put8(p, 5);
	put8(p, c->clean_start ? 0x02 : 0);
	put16(p, 0); /* keep alive off */
	struct body props = {0};
	put_session_props(&props, c->expiry_s, c->receive_max);
	put_varint(p, props.n);
	put_bytes(p, props.b, props.n);
	free(props.b);
	put_str(p, c->id);
	if(!emit(c, PKT_CONNECT << 4, p)){
		errno = ECONNRESET;
		return -1;
	}
	return 0;
}

void mq_close(struct mq_conn *c)
{
	c->dropped_out += c->outlen;
	reset(c);
}

void mq_disconnect(struct mq_conn *c)
{
	if(c->fd >= 0){
		struct body *p = body_new();
		emit(c, PKT_DISCONNECT << 4, p);
	}
	mq_close(c);
}

unsigned mq_next_mid(struct mq_conn *c)
{
	if(++c->last_mid == 0) c->last_mid = 1;
	return c->last_mid;
}

bool mq_subscribe(struct mq_conn *c, unsigned mid, const char *const *filters, size_t n, int qos)
{
	struct body *p = body_new();
	put16(p, mid);
	put8(p, 0); /* no properties */
	for(size_t i = 0; i < n; i++){
		put_str(p, filters[i]);
		put8(p, (unsigned)qos);
	}
	return emit(c, PKT_SUBSCRIBE << 4 | 0x02, p);
}

bool mq_publish(struct mq_conn *c, unsigned mid, const char *topic, const void *payload, size_t len,
		int qos, bool dup, const char *user_name, const char *user_value)
{
	struct body *p = body_new();
	put_str(p, topic);
	if(qos > 0) put16(p, mid);
	if(user_name){
		struct body props = {0};
		put8(&props, 0x26);
		put_str(&props, user_name);
		put_str(&props, user_value);
		put_varint(p, props.n);
		put_bytes(p, props.b, props.n);
		free(props.b);
	}else{
		put8(p, 0);
	}
	put_bytes(p, payload, len);
	return emit(c, PKT_PUBLISH << 4 | (dup && qos > 0 ? 0x08 : 0) | (unsigned)qos << 1, p);
}

bool mq_puback(struct mq_conn *c, unsigned mid)
{
	struct body *p = body_new();
	put16(p, mid);
	return emit(c, PKT_PUBACK << 4, p);
}

bool mq_want_write(const struct mq_conn *c)
{
	return c->fd >= 0 && c->outlen > 0;
}

void mq_flush(struct mq_conn *c)
{
	size_t off = 0;
	while(c->fd >= 0 && off < c->outlen){
		ssize_t w = send(c->fd, c->out + off, c->outlen - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if(w > 0){
			off += (size_t)w;
		}else if(w < 0 && errno == EINTR){
			continue;
		}else if(w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)){
			break;
		}else{
			fail(c, "the socket refused a write");
			return;
		}
	}
	if(c->fd >= 0 && off){
		memmove(c->out, c->out + off, c->outlen - off);
		c->outlen -= off;
	}
}

void mq_read(struct mq_conn *c)
{
	size_t budget = READ_BUDGET;
	while(c->fd >= 0 && budget > 0){
		reserve(&c->in, c->inlen, &c->incap, 65536);
		ssize_t got = recv(c->fd, c->in + c->inlen, c->incap - c->inlen, MSG_DONTWAIT);
		if(got < 0 && errno == EINTR) continue;
		if(got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
		if(got <= 0){
			/* What came before the end is still reported. */
			parse(c);
			fail(c, got == 0 ? "closed by the broker" : "the connection was reset");
			return;
		}
		c->inlen += (size_t)got;
		budget -= (size_t)got < budget ? (size_t)got : budget;
		parse(c);
	}
}
