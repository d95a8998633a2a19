/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The packets of raw_packet.h: only what the raw client needs. Going out:
 * CONNECT, SUBSCRIBE, PUBLISH at QoS 0/1 and PUBACK bodies, and every
 * packet's fixed header. Coming in: whole packets cut from the bytes read,
 * two-byte integers, v5 properties, and PUBLISH packets decoded into the
 * messages of raw.h (with raw_user, which reads their user properties).
 */
#include <stdlib.h>
#include <string.h>

#include "harness_int.h"
#include "raw_packet.h"

/* ---- building packets ---- */

static void put_bytes(struct body *p, const void *data, size_t len)
{
	ck_assert_msg(p->n + len <= sizeof(p->b), "raw client: packet too large");
	if(len){
		memcpy(p->b + p->n, data, len);
	}
	p->n += len;
}

#include "mqtt_wire.h"

void packet__connect(struct body *p, const struct raw_options *o)
{
	bool v5 = o->protocol == MQTT_PROTOCOL_V5;
	put_str(p, "MQTT");
	put8(p, v5 ? 5 : 4);
	put8(p, (o->username ? 0x80 : 0) | (o->clean ? 0x02 : 0));
	put16(p, 60); /* keep alive */
	if(v5){
		struct body props = {0};
		put_session_props(&props, o->expiry_s, o->receive_max);
		if(o->max_packet_size){
			put8(&props, 0x27);
			put32(&props, o->max_packet_size);
		}
		put8(p, (unsigned)props.n); /* fits one byte */
		put_bytes(p, props.b, props.n);
	}
	put_str(p, o->id);
	if(o->username){
		put_str(p, o->username);
	}
}

void packet__subscribe(struct body *p, bool v5, unsigned mid, const char *filter, int qos)
{
	put16(p, mid);
	if(v5){
		put8(p, 0);
	}
	put_str(p, filter);
	put8(p, (unsigned)qos);
}

void packet__publish(struct body *p, bool v5, const char *topic, const void *payload, size_t len, int qos,
		unsigned mid, const void *props, size_t props_len)
{
	put_str(p, topic);
	if(qos > 0){
		put16(p, mid);
	}
	if(v5){
		/* The property length, a variable byte integer. */
		size_t n = props_len;
		do{
			unsigned d = n % 128;
			n /= 128;
			put8(p, n ? d | 0x80 : d);
		}while(n);
		put_bytes(p, props, props_len);
	}
	put_bytes(p, payload, len);
}

void packet__puback(struct body *p, unsigned mid)
{
	put16(p, mid);
}

size_t packet__frame(unsigned first, const struct body *body, unsigned char *out)
{
	size_t n = 0, len = body->n;
	out[n++] = (unsigned char)first;
	do{
		unsigned char d = len % 128;
		len /= 128;
		out[n++] = (unsigned char)(len ? d | 0x80 : d);
	}while(len);
	memcpy(out + n, body->b, body->n);
	return n + body->n;
}

/* ---- parsing ---- */

bool packet__get16(const unsigned char *buf, size_t len, size_t *pos, unsigned *v)
{
	return get16(buf, len, pos, v);
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
bool packet__get_properties(const unsigned char *buf, size_t len, size_t *pos, struct raw_msg *m)
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

void packet__msg_free(struct raw_msg *m)
{
	free(m->topic);
	free(m->payload);
	msg__users_free(m->users, m->nusers);
	free(m);
}

int packet__unframe(const unsigned char *buf, size_t len, struct packet *p, size_t *size)
{
	size_t pos = 1, plen = 0;
	int v = len >= 2 ? get_varint(buf, len, &pos, &plen) : 0;
	if(v < 0){
		return -1;
	}
	if(v == 0 || pos + plen > len){
		return 0;
	}
	p->type = buf[0] >> 4;
	p->flags = buf[0] & 0x0F;
	p->body = buf + pos;
	p->len = plen;
	*size = pos + plen;
	return 1;
}

struct raw_msg *packet__decode_publish(const char *file, int line, const char *id, bool v5,
		const struct packet *p)
{
	struct raw_msg *m = calloc(1, sizeof(*m));
	ck_assert_ptr_nonnull(m);
	m->qos = (int)(p->flags >> 1) & 3;
	m->dup = p->flags & 8;
	m->retain = p->flags & 1;
	const unsigned char *topic;
	size_t tlen, pos = 0;
	if(!get_str(p->body, p->len, &pos, &topic, &tlen) || tlen == 0 || m->qos == 3){
		fail_raw_id(file, line, id, "malformed PUBLISH (flags 0x%x, %zu bytes)", p->flags, p->len);
	}
	if(m->qos == 0 && m->dup){
		fail_raw_id(file, line, id, "PUBLISH at QoS 0 with DUP set on %.*s", (int)tlen, topic);
	}
	m->topic = dup_bytes(topic, tlen);
	if(m->qos > 0 && (!packet__get16(p->body, p->len, &pos, &m->mid) || m->mid == 0)){
		fail_raw_id(file, line, id, "PUBLISH on %s without a packet id", m->topic);
	}
	if(v5 && !packet__get_properties(p->body, p->len, &pos, m)){
		fail_raw_id(file, line, id, "PUBLISH on %s with malformed properties", m->topic);
	}
	m->payloadlen = p->len - pos;
	m->payload = dup_bytes(p->body + pos, m->payloadlen);
	return m;
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
