/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The attempt ledger (see ledger.h): a chained hash table by dlq-id plus a
 * list by age. Lookups are O(1); expiry and eviction take from the old end.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "model/ledger.h"

#define LEDGER_INITIAL_BUCKETS 1024
/* Chains of a doubling moved per insert and per expiry pass (maybe_grow):
 * some 16 records an insert, some 2,000 a pass. All at once, the doubling
 * at 131,072 records stopped the broker for 175 ms (perf, the saves
 * benchmark), and it grows with the records. */
#define LEDGER_MOVE_PER_INSERT 8
#define LEDGER_MOVE_PER_PASS 1024

int ledger__init(struct dlq_ledger *l)
{
	memset(l, 0, sizeof(*l));
	l->buckets = calloc(LEDGER_INITIAL_BUCKETS, sizeof(*l->buckets));
	if(l->buckets == NULL) return ENOMEM;
	l->nbuckets = LEDGER_INITIAL_BUCKETS;
	return 0;
}

void ledger__cleanup(struct dlq_ledger *l)
{
	struct dlq_record *r = l->oldest;
	while(r){
		struct dlq_record *next = r->newer;
		record__free(r);
		r = next;
	}
	free(l->buckets);
	free(l->old);
	memset(l, 0, sizeof(*l));
}

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

/* What a record is made with: the more part, or the sends part for one
 * that would not get the more part. */
enum record_parts { PARTS_NEEDED, PARTS_MORE, PARTS_COUNTING };

static struct dlq_record *record_alloc(enum record_parts parts, const struct dlq_id *id, const struct dlq_id *origin_id,
		const char *topic, const char *origin_topic,
		const void *payload, uint32_t payload_len,
		const uint8_t *headers, size_t headers_len,
		const struct dlq_policy *policy, uint16_t attempt, uint8_t qos, uint64_t now_ms)
{
	size_t topic_len = strlen(topic);
	size_t origin_len = 0;
	if(origin_topic && strcmp(origin_topic, topic)){
		origin_len = strlen(origin_topic);
	}
	if(topic_len > UINT16_MAX || origin_len > UINT16_MAX || headers_len > UINT32_MAX) return NULL;
	/* A retry copy: its chain's origin differs from its own id. It, and
	 * whatever else has a chain behind it, keeps the chain in the more
	 * part. */
	bool copy = origin_id && !id__equal(origin_id, id);
	bool more = parts == PARTS_MORE || copy || attempt != 1 || origin_len;
	uint8_t flags = more ? DLQ_RECORD_MORE : parts == PARTS_COUNTING ? DLQ_RECORD_SENDS : 0;

	size_t size = DLQ_RECORD_HEAD(flags) + topic_len + 1 + (origin_len ? origin_len + 1 : 0) + payload_len + headers_len;
	if(size < sizeof(struct dlq_record)) size = sizeof(struct dlq_record);
	struct dlq_record *r = malloc(size);
	if(r == NULL) return NULL;

	fill_head(r, flags, id, policy, now_ms, topic_len, payload_len, headers_len, qos);
	struct dlq_record_more *m = record__more(r);
	if(m){
		memset(m, 0, sizeof(*m));
		m->origin_id = origin_id ? *origin_id : *id;
		m->attempt = attempt;
		m->origin_topic_len = (uint16_t)origin_len;
	}
	struct dlq_record_sends *s = record__sends(r);
	if(s) memset(s, 0, sizeof(*s));

	char *p = (char *)record__data(r);
	memcpy(p, topic, topic_len + 1);
	p += topic_len + 1;
	if(origin_len){
		memcpy(p, origin_topic, origin_len + 1);
		p += origin_len + 1;
	}
	if(payload_len) memcpy(p, payload, payload_len);
	p += payload_len;
	if(headers_len) memcpy(p, headers, headers_len);
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

struct dlq_record *record__new(const struct dlq_id *id, const struct dlq_id *origin_id,
		const char *topic, const char *origin_topic,
		const void *payload, uint32_t payload_len,
		const uint8_t *headers, size_t headers_len,
		const struct dlq_policy *policy, uint16_t attempt, uint8_t qos, uint64_t now_ms)
{
	return record_alloc(PARTS_NEEDED, id, origin_id, topic, origin_topic, payload, payload_len, headers, headers_len,
			policy, attempt, qos, now_ms);
}

struct dlq_record *record__new_more(const struct dlq_id *id, const struct dlq_id *origin_id,
		const char *topic, const char *origin_topic,
		const void *payload, uint32_t payload_len,
		const uint8_t *headers, size_t headers_len,
		const struct dlq_policy *policy, uint16_t attempt, uint8_t qos, uint64_t now_ms)
{
	return record_alloc(PARTS_MORE, id, origin_id, topic, origin_topic, payload, payload_len, headers, headers_len,
			policy, attempt, qos, now_ms);
}

struct dlq_record *record__new_counting(const struct dlq_id *id, const struct dlq_id *origin_id,
		const char *topic, const char *origin_topic,
		const void *payload, uint32_t payload_len,
		const uint8_t *headers, size_t headers_len,
		const struct dlq_policy *policy, uint16_t attempt, uint8_t qos, uint64_t now_ms)
{
	return record_alloc(PARTS_COUNTING, id, origin_id, topic, origin_topic, payload, payload_len, headers, headers_len,
			policy, attempt, qos, now_ms);
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
	free(r);
}

static size_t settler_bytes(const struct dlq_settler *n)
{
	return sizeof(*n) + strlen(n->client) + 1;
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
		bytes += settler_bytes(n);
	}
	return bytes;
}

const struct dlq_settler *ledger__settler(const struct dlq_record *r, const char *client)
{
	for(const struct dlq_settler *n = r->settlers; n; n = n->next){
		if(!strcmp(n->client, client)) return n;
	}
	return NULL;
}

int ledger__add_settler(struct dlq_ledger *l, struct dlq_record *r, const char *client, uint8_t how)
{
	if(ledger__has_settler(r, client)) return EEXIST;
	size_t len = strlen(client);
	struct dlq_settler *n = malloc(sizeof(*n) + len + 1);
	if(n == NULL) return ENOMEM;
	n->how = how;
	memcpy(n->client, client, len + 1);
	n->next = r->settlers;
	r->settlers = n;
	if(l && ledger__find(l, &r->id) == r){
		l->bytes += settler_bytes(n);
		gauges__record_bytes(l->book, r->policy, +1, settler_bytes(n));
	}
	return 0;
}

void ledger__drop_last_settler(struct dlq_ledger *l, struct dlq_record *r)
{
	struct dlq_settler *n = r->settlers;
	if(n == NULL) return;
	if(l && ledger__find(l, &r->id) == r){
		l->bytes -= settler_bytes(n);
		gauges__record_bytes(l->book, r->policy, -1, settler_bytes(n));
	}
	r->settlers = n->next;
	free(n);
}

/* The chain a record of id is filed in: in the table before a doubling
 * while its chain there is not yet moved, else in the table. */
static struct dlq_record **chain_of(const struct dlq_ledger *l, const struct dlq_id *id)
{
	uint64_t h = id__hash(id);
	if(l->old){
		size_t k = (size_t)(h & (l->nold - 1));
		if(k >= l->moved) return &l->old[k];
	}
	return &l->buckets[h & (l->nbuckets - 1)];
}

/* Moves up to chains chains of the table before a doubling into the
 * table, and frees it once all are. */
static void move_chains(struct dlq_ledger *l, size_t chains)
{
	if(l->old == NULL) return;
	size_t end = l->moved + chains < l->nold ? l->moved + chains : l->nold;
	for(size_t i = l->moved; i < end; i++){
		struct dlq_record *r = l->old[i];
		while(r){
			struct dlq_record *next = r->hnext;
			size_t k = (size_t)(id__hash(&r->id) & (l->nbuckets - 1));
			r->hnext = l->buckets[k];
			l->buckets[k] = r;
			r = next;
		}
		l->old[i] = NULL;
	}
	l->moved = end;
	if(l->moved == l->nold){
		free(l->old);
		l->old = NULL;
		l->nold = 0;
		l->moved = 0;
	}
}

/* Doubles the table when it holds twice as many records as buckets: chains
 * of one or two (ids are random), and 4 to 8 bytes of table per record
 * instead of 8 to 16. The records move over the following inserts,
 * LEDGER_MOVE_PER_INSERT chains each (and LEDGER_MOVE_PER_PASS at each
 * expiry pass): the count can at most double again before the next
 * doubling, by which time one chain per insert would have moved them all.
 * A failed allocation leaves the table working, only with longer chains. */
static void maybe_grow(struct dlq_ledger *l)
{
	if(l->old){
		move_chains(l, LEDGER_MOVE_PER_INSERT);
		return;
	}
	if(l->count < 2 * l->nbuckets) return;
	size_t n = l->nbuckets * 2;
	struct dlq_record **b = calloc(n, sizeof(*b));
	if(b == NULL) return;
	l->old = l->buckets;
	l->nold = l->nbuckets;
	l->moved = 0;
	l->buckets = b;
	l->nbuckets = n;
	move_chains(l, LEDGER_MOVE_PER_INSERT);
}

int ledger__insert(struct dlq_ledger *l, struct dlq_record *r)
{
	return ledger__insert_sized(l, r, record__bytes(r));
}

int ledger__insert_sized(struct dlq_ledger *l, struct dlq_record *r, size_t bytes)
{
	maybe_grow(l);
	struct dlq_record **chain = chain_of(l, &r->id);
	r->hnext = *chain;
	*chain = r;

	r->newer = NULL;
	if(l->newest){
		l->newest->newer = r;
	}else{
		l->oldest = r;
	}
	l->newest = r;
	l->count++;
	l->bytes += bytes;
	gauges__record(l->book, r->policy, +1, bytes);
	return 0;
}

void ledger__adjust_bytes(struct dlq_ledger *l, struct dlq_record *r, int sign, uint32_t bytes)
{
	if(sign > 0){
		l->bytes += bytes;
	}else{
		l->bytes -= bytes;
	}
	gauges__record_bytes(l->book, r->policy, sign, bytes);
}

struct dlq_record *ledger__find(const struct dlq_ledger *l, const struct dlq_id *id)
{
	for(struct dlq_record *r = *chain_of(l, id); r; r = r->hnext){
		if(id__equal(&r->id, id)) return r;
	}
	return NULL;
}

/* Unlinks the oldest record from both structures and frees it. */
static void drop_oldest(struct dlq_ledger *l, bool expired)
{
	struct dlq_record *r = l->oldest;
	if(l->on_drop) l->on_drop(l->on_drop_ctx, r, expired);
	struct dlq_record **pp = chain_of(l, &r->id);
	while(*pp != r){
		pp = &(*pp)->hnext;
	}
	*pp = r->hnext;

	l->oldest = r->newer;
	if(l->oldest == NULL) l->newest = NULL;
	l->count--;
	size_t bytes = record__bytes(r);
	l->bytes -= bytes;
	gauges__record(l->book, r->policy, -1, bytes);
	record__free(r);
}

/* Moves the oldest record to the newest end, created now (no newer
 * record can be younger than now). */
static void renew_oldest(struct dlq_ledger *l, uint64_t now_ms)
{
	struct dlq_record *r = l->oldest;
	if(r == l->newest){
		r->created_ms = now_ms;
		return;
	}
	l->oldest = r->newer;
	r->newer = NULL;
	l->newest->newer = r;
	l->newest = r;
	r->created_ms = now_ms;
}

size_t ledger__expire(struct dlq_ledger *l, uint64_t now_ms, uint64_t window_ms)
{
	move_chains(l, LEDGER_MOVE_PER_PASS);
	size_t n = 0;
	while(l->oldest && now_ms - l->oldest->created_ms > window_ms){
		if(l->keep && l->keep(l->on_drop_ctx, l->oldest)){
			renew_oldest(l, now_ms);
			continue;
		}
		drop_oldest(l, true);
		n++;
	}
	return n;
}

size_t ledger__evict_to(struct dlq_ledger *l, uint64_t target)
{
	size_t n = 0;
	while(l->oldest && l->bytes > target){
		drop_oldest(l, false);
		n++;
	}
	return n;
}
