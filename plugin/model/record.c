/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A ledger record (see record.h): made in one allocation, with the more or
 * the sends part it needs, its bytes counted as the memory bound counts
 * them, freed with its settlers.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "model/record.h"
#include "util/slab.h"

/* The fixed fields of a record just allocated, in no list yet. */
static inline void fill_head(struct dlq_record *r, uint8_t flags, const struct dlq_id *id,
		const struct dlq_policy *policy, uint64_t now_ms, size_t topic_len, uint32_t payload_len,
		size_t headers_len, uint8_t qos)
{
	r->hnext = NULL;
	r->newer = NULL;
	r->settlers = NULL;
	r->policy = policy;
	r->created_ms = now_ms;
	r->id = *id;
	r->payload_len = payload_len;
	r->headers_len = (uint32_t)headers_len;
	r->topic_len = (uint16_t)topic_len;
	r->qos = qos;
	r->flags = flags;
}

struct dlq_record *record__make(const struct dlq_record_init *in, uint8_t part, struct slab *slab)
{
	size_t topic_len = strlen(in->topic);
	size_t origin_len = 0;
	if(in->origin_topic && strcmp(in->origin_topic, in->topic)){
		origin_len = strlen(in->origin_topic);
	}
	if(topic_len > UINT16_MAX || origin_len > UINT16_MAX || in->headers_len > UINT32_MAX) return NULL;
	/* A retry copy: its chain's origin differs from its own id. It, and
	 * whatever else has a chain behind it, keeps the chain in the more
	 * part. */
	bool copy = in->origin_id && !id__equal(in->origin_id, in->id);
	bool more = part == DLQ_RECORD_MORE || copy || in->attempt != 1 || origin_len;
	uint8_t flags = more ? DLQ_RECORD_MORE : part == DLQ_RECORD_SENDS ? DLQ_RECORD_SENDS : 0;

	size_t size = DLQ_RECORD_HEAD(flags) + topic_len + 1 + (origin_len ? origin_len + 1 : 0) + in->payload_len
			+ in->headers_len;
	if(size < sizeof(struct dlq_record)) size = sizeof(struct dlq_record);
	struct dlq_record *r = slab ? slab__alloc(slab, size) : NULL;
	if(r){
		flags |= DLQ_RECORD_SLAB;
	}else{
		r = malloc(size);
		if(r == NULL) return NULL;
	}

	fill_head(r, flags, in->id, in->policy, in->now_ms, topic_len, in->payload_len, in->headers_len, in->qos);
	struct dlq_record_more *m = record__more(r);
	if(m){
		memset(m, 0, sizeof(*m));
		m->origin_id = in->origin_id ? *in->origin_id : *in->id;
		m->attempt = in->attempt;
		m->origin_topic_len = (uint16_t)origin_len;
	}
	struct dlq_record_sends *s = record__sends(r);
	if(s) memset(s, 0, sizeof(*s));

	char *p = (char *)record__data(r);
	memcpy(p, in->topic, topic_len + 1);
	p += topic_len + 1;
	if(origin_len){
		memcpy(p, in->origin_topic, origin_len + 1);
		p += origin_len + 1;
	}
	if(in->payload_len) memcpy(p, in->payload, in->payload_len);
	p += in->payload_len;
	if(in->headers_len) memcpy(p, in->headers, in->headers_len);
	return r;
}

struct dlq_record *record__new_original(uint8_t part, const struct dlq_id *id, const char *topic,
		const void *payload, uint32_t payload_len, const uint8_t *headers, size_t headers_len,
		const struct dlq_policy *policy, uint8_t qos, uint64_t now_ms, size_t *bytes)
{
	size_t topic_len = strlen(topic);
	if(topic_len > UINT16_MAX || headers_len > UINT32_MAX) return NULL;
	size_t head = DLQ_RECORD_HEAD(part);
	size_t size = head + topic_len + 1 + payload_len + headers_len;
	/* As record__bytes counts it: nothing else is attached yet. */
	*bytes = size + sizeof(struct dlq_record *);
	struct dlq_record *r = malloc(size < sizeof(struct dlq_record) ? sizeof(struct dlq_record) : size);
	if(r == NULL) return NULL;

	fill_head(r, part, id, policy, now_ms, topic_len, payload_len, headers_len, qos);
	if(part == DLQ_RECORD_MORE){
		struct dlq_record_more *m = record__more(r);
		memset(m, 0, sizeof(*m));
		m->origin_id = *id;
		m->attempt = 1;
	}else if(part == DLQ_RECORD_SENDS){
		memset(record__sends(r), 0, sizeof(struct dlq_record_sends));
	}
	char *p = (char *)r + head;
	memcpy(p, topic, topic_len + 1);
	p += topic_len + 1;
	if(payload_len) memcpy(p, payload, payload_len);
	if(headers_len) memcpy(p + payload_len, headers, headers_len);
	return r;
}

void record__free(struct dlq_record *r)
{
	if(r == NULL) return;
	struct dlq_settler *n = r->settlers;
	while(n){
		struct dlq_settler *next = n->next;
		free(n);
		n = next;
	}
	if(r->flags & DLQ_RECORD_SLAB) slab__free(r);
	else free(r);
}

size_t record__bytes(const struct dlq_record *r)
{
	/* The allocation, plus one hash bucket slot: the table keeps at most
	 * one bucket per record (between a half and one). */
	const struct dlq_record_more *m = record__more(r);
	size_t origin_len = record__origin_topic_len(r);
	size_t bytes = DLQ_RECORD_HEAD(r->flags) + (m ? m->extra_bytes : 0)
			+ r->topic_len + 1 + (origin_len ? origin_len + 1u : 0u)
			+ r->payload_len + r->headers_len + sizeof(struct dlq_record *);
	for(const struct dlq_settler *n = r->settlers; n; n = n->next){
		bytes += record__settler_bytes(n);
	}
	return bytes;
}
