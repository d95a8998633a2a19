/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Redelivery tracking (see redelivery.h): which client holds which tracked
 * record, whether it held it while connected, and which READ checks come
 * from a reconnecting session.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "redelivery.h"

/* Redelivery tracking's fields of a record live in its more part
 * (ledger.h), which every record has while tracking is on: tracked ones
 * are made with it, retry copies always have it. The indexes chain records
 * through it, at a fixed offset from the record. */
#define MORE(r) record__more(r)
#define MORE_OFFSET(field) (sizeof(struct dlq_record) + offsetof(struct dlq_record_more, field))

#define INITIAL_SIZE 256

/* ---- hashing ---- */

static uint64_t fnv(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;
	for(size_t i = 0; i < len; i++){
		h ^= p[i];
		h *= 1099511628211ull;
	}
	return h;
}
#define FNV_START 14695981039346656037ull

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static uint64_t hash_client_id(const char *id)
{
	return hash__string(id);
}

static uint64_t hash_pair(const struct dlq_record *r, const struct dlq_rclient *c)
{
	return mix((uint64_t)(uintptr_t)r * 31u + (uint64_t)(uintptr_t)c);
}

/* Retry copies are indexed by topic, length and up to CONTENT_EDGE bytes at
 * each end of the payload: hashing every payload the broker checks would
 * cost as much as the delivery. Candidates are then compared byte for
 * byte, so payloads that differ only in the middle share a chain (slower,
 * still right). */
#define CONTENT_EDGE 64

static uint64_t hash_content(const char *topic, const void *payload, uint32_t len)
{
	uint64_t h = fnv(FNV_START, topic, strlen(topic) + 1);
	h = fnv(h, &len, sizeof(len));
	if(len <= 2 * CONTENT_EDGE){
		h = fnv(h, payload, len);
	}else{
		h = fnv(h, payload, CONTENT_EDGE);
		h = fnv(h, (const char *)payload + len - CONTENT_EDGE, CONTENT_EDGE);
	}
	h = mix(h);
	return h ? h : 1; /* 0 means "not indexed" */
}

/* ---- chained tables that grow ----
 * Every table here chains through a pointer field of its items; next_off is
 * that field's offset, key() an item's hash. */

typedef uint64_t (*key_fn)(const void *item);

#define NEXT(item, off) (*(void **)((char *)(item) + (off)))

static int table_grow(void ***table, size_t *size, size_t count, size_t next_off, key_fn key)
{
	if(*table && count < *size) return 0;
	size_t n = *table ? *size * 2 : INITIAL_SIZE;
	void **t = calloc(n, sizeof(*t));
	if(t == NULL) return *table ? 0 : ENOMEM; /* a full table only gets slower */
	for(size_t i = 0; *table && i < *size; i++){
		void *item = (*table)[i];
		while(item){
			void *next = NEXT(item, next_off);
			size_t k = (size_t)(key(item) & (n - 1));
			NEXT(item, next_off) = t[k];
			t[k] = item;
			item = next;
		}
	}
	free(*table);
	*table = t;
	*size = n;
	return 0;
}

static void table_unlink(void **table, size_t size, void *item, size_t next_off, uint64_t key)
{
	if(table == NULL) return;
	void **pp = &table[key & (size - 1)];
	while(*pp && *pp != item) pp = &NEXT(*pp, next_off);
	if(*pp) *pp = NEXT(item, next_off);
}

/* A delivery is filed under (record, client); the head of the list of a
 * record with the sends part under (record, no client), so that it is
 * found from the record alone. */
static uint64_t delivery_key(const void *item)
{
	const struct dlq_delivery *d = item;
	return hash_pair(d->record, d->heads_list ? NULL : d->client);
}

static uint64_t client_key(const void *item)
{
	return hash_client_id(((const struct dlq_rclient *)item)->id);
}

static uint64_t payload_key(const void *item)
{
	return mix(MORE((const struct dlq_record *)item)->payload_ref);
}

static uint64_t content_key(const void *item)
{
	return MORE((const struct dlq_record *)item)->content_hash;
}

/* ---- lifetime ---- */

int redelivery__init(struct dlq_redelivery *t)
{
	memset(t, 0, sizeof(*t));
	return 0;
}

void redelivery__cleanup(struct dlq_redelivery *t, struct dlq_ledger *l)
{
	for(struct dlq_record *r = l ? l->oldest : NULL; r; r = r->newer){
		struct dlq_record_sends *sp = record__sends(r);
		if(sp){
			/* Before the table goes: its bytes are counted from it. */
			ledger__adjust_bytes(l, r, -1, (uint32_t)redelivery__table_bytes(t, r));
			memset(sp, 0, sizeof(*sp));
			r->flags &= (uint8_t)~(DLQ_RECORD_SPILLED | DLQ_RECORD_FIRST_DIVERTED);
			continue;
		}
		if(MORE(r) == NULL) continue;
		ledger__adjust_bytes(l, r, -1, MORE(r)->extra_bytes);
		MORE(r)->extra_bytes = 0;
		MORE(r)->deliveries = NULL;
		MORE(r)->payload_next = NULL;
		MORE(r)->content_next = NULL;
		MORE(r)->payload_ref = 0;
		MORE(r)->content_hash = 0;
	}
	for(size_t i = 0; t->table && i < t->table_size; i++){
		struct dlq_delivery *d = t->table[i];
		while(d){
			struct dlq_delivery *next = d->hnext;
			free(d);
			d = next;
		}
	}
	for(size_t i = 0; t->clients && i < t->clients_size; i++){
		struct dlq_rclient *c = t->clients[i];
		while(c){
			struct dlq_rclient *next = c->hnext;
			free(c);
			c = next;
		}
	}
	struct dlq_kick *k = t->kicks;
	while(k){
		struct dlq_kick *next = k->next;
		free(k);
		k = next;
	}
	t->last_head = NULL;
	free(t->table);
	free(t->clients);
	free(t->numbered);
	free(t->free_numbers);
	free(t->by_payload);
	free(t->by_content);
	memset(t, 0, sizeof(*t));
}

/* ---- clients ---- */

static struct dlq_rclient *client_find(const struct dlq_redelivery *t, const char *id)
{
	if(t->clients == NULL) return NULL;
	for(struct dlq_rclient *c = t->clients[hash_client_id(id) & (t->clients_size - 1)]; c; c = c->hnext){
		if(!strcmp(c->id, id)) return c;
	}
	return NULL;
}

static struct dlq_rclient *client_get(struct dlq_redelivery *t, const char *id)
{
	struct dlq_rclient *c = client_find(t, id);
	if(c) return c;
	if(table_grow((void ***)&t->clients, &t->clients_size, t->client_count, offsetof(struct dlq_rclient, hnext), client_key)){
		return NULL;
	}
	size_t len = strlen(id);
	c = calloc(1, sizeof(*c) + len + 1);
	if(c == NULL) return NULL;
	memcpy(c->id, id, len + 1);
	size_t k = hash_client_id(id) & (t->clients_size - 1);
	c->hnext = t->clients[k];
	t->clients[k] = c;
	t->client_count++;
	return c;
}

/* c's number, given now if it has none; 0 when all 65535 are taken (or
 * out of memory): then its sends go to the table. A number is given back
 * only when the client is forgotten, which no record naming it allows. */
static uint16_t client_number(struct dlq_redelivery *t, struct dlq_rclient *c)
{
	if(c->number) return c->number;
	size_t n;
	if(t->free_count){
		n = t->free_numbers[--t->free_count];
	}else{
		n = t->next_number ? t->next_number : 1;
		if(n > UINT16_MAX) return 0;
		if(n >= t->numbered_size){
			/* Both arrays have an entry per number: giving one back
			 * never needs memory. */
			size_t size = t->numbered_size ? t->numbered_size * 2 : 64;
			if(size > (size_t)UINT16_MAX + 1) size = (size_t)UINT16_MAX + 1;
			struct dlq_rclient **numbered = realloc(t->numbered, size * sizeof(*numbered));
			if(numbered == NULL) return 0;
			t->numbered = numbered;
			uint16_t *free_numbers = realloc(t->free_numbers, size * sizeof(*free_numbers));
			if(free_numbers == NULL) return 0;
			t->free_numbers = free_numbers;
			t->numbered_size = size;
		}
		t->next_number = n + 1;
	}
	t->numbered[n] = c;
	c->number = (uint16_t)n;
	return c->number;
}

/* A client is kept while deliveries reference it or while it is known to
 * be connected (a sign worth keeping); otherwise it is forgotten. */
static void client_release_if_unused(struct dlq_redelivery *t, struct dlq_rclient *c)
{
	if(c->deliveries || c->online || c->skip_next_burst) return;
	table_unlink((void **)t->clients, t->clients_size, c, offsetof(struct dlq_rclient, hnext), hash_client_id(c->id));
	t->client_count--;
	if(c->number){
		t->numbered[c->number] = NULL;
		t->free_numbers[t->free_count++] = c->number;
	}
	free(c);
}

void redelivery__connected(struct dlq_redelivery *t, const char *client, uintptr_t conn)
{
	t->event++;
	struct dlq_rclient *c = client_find(t, client);
	/* The connection that just ended is still checked for its will. */
	if(c && c->offline == conn) return;
	if(c == NULL) c = client_get(t, client);
	if(c == NULL) return; /* out of memory: the client stays unknown, which only counts less */
	c->online = conn;
	c->offline = 0;
}

/* The connection a queued kick was for has ended: the kick must not reach
 * the session it left (see redelivery__queue_kick). */
static void drop_kick(struct dlq_redelivery *t, const char *client, uintptr_t conn)
{
	for(struct dlq_kick **pk = &t->kicks; *pk; pk = &(*pk)->next){
		struct dlq_kick *k = *pk;
		if(k->conn == conn && !strcmp(k->client, client)){
			*pk = k->next;
			free(k);
			return;
		}
	}
}

void redelivery__disconnected(struct dlq_redelivery *t, const char *client, uintptr_t conn)
{
	t->event++;
	drop_kick(t, client, conn);
	struct dlq_rclient *c = client_find(t, client);
	if(c == NULL) return;
	/* A DISCONNECT for an older connection than the one known (a takeover
	 * reports the old one after the new one was seen) changes nothing. */
	if(c->online && c->online != conn) return;
	c->online = 0;
	c->offline = conn;
	client_release_if_unused(t, c);
}

/* ---- deliveries ---- */

static struct dlq_delivery *delivery_find(const struct dlq_redelivery *t, const struct dlq_record *r,
		const struct dlq_rclient *c)
{
	if(t->table == NULL) return NULL;
	for(struct dlq_delivery *d = t->table[hash_pair(r, c) & (t->table_size - 1)]; d; d = d->hnext){
		if(d->record == r && d->client == c) return d;
	}
	return NULL;
}

struct dlq_delivery *redelivery__find(const struct dlq_redelivery *t, const struct dlq_record *r, const char *client)
{
	struct dlq_rclient *c = client_find(t, client);
	return c ? delivery_find(t, r, c) : NULL;
}

/* A delivery of r to c in the table (filed as the head of r's list when
 * head is true), its bytes accounted; not yet in r's list. */
static struct dlq_delivery *delivery_alloc(struct dlq_redelivery *t, struct dlq_ledger *l, struct dlq_record *r,
		struct dlq_rclient *c, bool head)
{
	if(table_grow((void ***)&t->table, &t->table_size, t->count, offsetof(struct dlq_delivery, hnext), delivery_key)){
		return NULL;
	}
	struct dlq_delivery *d = calloc(1, sizeof(*d));
	if(d == NULL) return NULL;
	d->record = r;
	d->client = c;
	d->heads_list = head;
	size_t k = delivery_key(d) & (t->table_size - 1);
	d->hnext = t->table[k];
	t->table[k] = d;
	if(MORE(r)) MORE(r)->extra_bytes += DLQ_DELIVERY_BYTES;
	ledger__adjust_bytes(l, r, +1, DLQ_DELIVERY_BYTES);
	c->deliveries++;
	t->count++;
	return d;
}

/* Unlinks d from the table and frees it; the caller unlinks it from its
 * record's list and takes its bytes away. */
static void delivery_free(struct dlq_redelivery *t, struct dlq_delivery *d)
{
	table_unlink((void **)t->table, t->table_size, d, offsetof(struct dlq_delivery, hnext), delivery_key(d));
	t->count--;
	d->client->deliveries--;
	client_release_if_unused(t, d->client);
	if(t->last_head == d) t->last_head = NULL;
	free(d);
}

static struct dlq_delivery *head_find(const struct dlq_redelivery *t, const struct dlq_record *r)
{
	if(t->table == NULL) return NULL;
	for(struct dlq_delivery *d = t->table[hash_pair(r, NULL) & (t->table_size - 1)]; d; d = d->hnext){
		if(d->record == r && d->heads_list) return d;
	}
	return NULL;
}

/* The head of the table's list of r, a record with the sends part, or
 * NULL (none yet: no client but the first was sent it). The broker writes
 * a message to its subscribers one after the other: the last head found
 * is asked for again at once. */
static struct dlq_delivery *sends_head(struct dlq_redelivery *t, const struct dlq_record *r)
{
	if(!(r->flags & DLQ_RECORD_SPILLED)) return NULL;
	if(t->last_head == NULL || t->last_head->record != r) t->last_head = head_find(t, r);
	return t->last_head;
}

/* The delivery of r, a record with the sends part, to c in the table, or
 * NULL. */
static struct dlq_delivery *sends_find(struct dlq_redelivery *t, const struct dlq_record *r, const struct dlq_rclient *c)
{
	struct dlq_delivery *head = sends_head(t, r);
	if(head == NULL) return NULL;
	if(head->client == c) return head;
	return delivery_find(t, r, c);
}

static struct dlq_delivery *delivery_new(struct dlq_redelivery *t, struct dlq_ledger *l, struct dlq_record *r,
		struct dlq_rclient *c)
{
	if(MORE(r)){
		struct dlq_delivery *d = delivery_alloc(t, l, r, c, false);
		if(d == NULL) return NULL;
		d->rnext = MORE(r)->deliveries;
		MORE(r)->deliveries = d;
		return d;
	}
	/* A record made without either part (neither redelivery tracking nor
	 * exact counting was on) has none. */
	if(record__sends(r) == NULL) return NULL;
	/* A record with the sends part keeps no list of its own: the first
	 * client sent it besides the one in its sends part heads it. */
	struct dlq_delivery *head = sends_head(t, r);
	struct dlq_delivery *d = delivery_alloc(t, l, r, c, head == NULL);
	if(d == NULL) return NULL;
	if(head){
		d->rnext = head->rnext;
		head->rnext = d;
	}else{
		r->flags |= DLQ_RECORD_SPILLED;
		t->last_head = d;
	}
	return d;
}

size_t redelivery__table_bytes(const struct dlq_redelivery *t, const struct dlq_record *r)
{
	size_t n = 0;
	if(record__sends(r) && (r->flags & DLQ_RECORD_SPILLED)){
		for(const struct dlq_delivery *d = head_find(t, r); d; d = d->rnext) n++;
	}
	return n * DLQ_DELIVERY_BYTES;
}

/* ---- the indexes ---- */

static void unbind_payload(struct dlq_redelivery *t, struct dlq_record *r)
{
	if(MORE(r)->payload_ref == 0) return;
	table_unlink((void **)t->by_payload, t->by_payload_size, r, MORE_OFFSET(payload_next), mix(MORE(r)->payload_ref));
	MORE(r)->payload_ref = 0;
	MORE(r)->payload_next = NULL;
	t->bound--;
}

static void unindex_content(struct dlq_redelivery *t, struct dlq_record *r)
{
	if(MORE(r)->content_hash == 0) return;
	table_unlink((void **)t->by_content, t->by_content_size, r, MORE_OFFSET(content_next), MORE(r)->content_hash);
	MORE(r)->content_hash = 0;
	MORE(r)->content_next = NULL;
	t->indexed--;
}

static void bind(struct dlq_redelivery *t, struct dlq_record *r, uintptr_t ref)
{
	if(ref == 0 || MORE(r) == NULL) return;
	/* The broker frees stored messages and reuses their addresses: a newer
	 * message at the same address replaces the older binding. */
	if(t->by_payload){
		for(struct dlq_record *o = t->by_payload[mix(ref) & (t->by_payload_size - 1)]; o; o = MORE(o)->payload_next){
			if(MORE(o)->payload_ref == ref){
				unbind_payload(t, o);
				break;
			}
		}
	}
	unbind_payload(t, r);
	if(table_grow((void ***)&t->by_payload, &t->by_payload_size, t->bound, MORE_OFFSET(payload_next), payload_key)){
		return;
	}
	MORE(r)->payload_ref = ref;
	size_t k = mix(ref) & (t->by_payload_size - 1);
	MORE(r)->payload_next = t->by_payload[k];
	t->by_payload[k] = r;
	t->bound++;
}

void redelivery__bind_payload(struct dlq_redelivery *t, struct dlq_record *r, const void *payload)
{
	t->event++;
	/* An empty payload has no address (the broker stores NULL): such
	 * messages are not counted. */
	bind(t, r, (uintptr_t)payload);
}

/* Whether r is the message the broker stored with this topic and payload. */
static bool same_message(const struct dlq_record *r, const char *topic, const void *payload, uint32_t len)
{
	return r->payload_len == len && !strcmp(record__topic(r), topic)
			&& (len == 0 || !memcmp(record__payload(r), payload, len));
}

static struct dlq_record *by_content(const struct dlq_redelivery *t, const char *topic, const void *payload, uint32_t len)
{
	if(t->by_content == NULL) return NULL;
	uint64_t h = hash_content(topic, payload, len);
	for(struct dlq_record *r = t->by_content[h & (t->by_content_size - 1)]; r; r = MORE(r)->content_next){
		if(MORE(r)->content_hash == h && same_message(r, topic, payload, len)) return r;
	}
	return NULL;
}

int redelivery__note_copy(struct dlq_redelivery *t, struct dlq_ledger *l, struct dlq_record *r, const char *client)
{
	t->event++;
	/* No address to find it by later; or an original made for 2.1's
	 * exact counting, which finds messages by their dlq-id. */
	if(r->payload_len == 0 || MORE(r) == NULL) return 0;
	uint64_t h = hash_content(record__topic(r), record__payload(r), r->payload_len);
	/* The newest copy with this content is the one the broker will store
	 * next: it replaces an older one in the index. */
	struct dlq_record *old = by_content(t, record__topic(r), record__payload(r), r->payload_len);
	if(old) unindex_content(t, old);
	if(table_grow((void ***)&t->by_content, &t->by_content_size, t->indexed, MORE_OFFSET(content_next), content_key)){
		return ENOMEM;
	}
	MORE(r)->content_hash = h;
	size_t k = h & (t->by_content_size - 1);
	MORE(r)->content_next = t->by_content[k];
	t->by_content[k] = r;
	t->indexed++;

	if(client == NULL) return 0;
	/* A copy for one client gets no READ check when the broker hands it
	 * over, so its delivery is made now. */
	struct dlq_rclient *c = client_get(t, client);
	if(c == NULL) return ENOMEM;
	struct dlq_delivery *d = delivery_find(t, r, c);
	if(d == NULL) d = delivery_new(t, l, r, c);
	if(d == NULL){
		client_release_if_unused(t, c);
		return ENOMEM;
	}
	d->held_connected = c->online != 0;
	return 0;
}

void redelivery__record_gone(struct dlq_redelivery *t, struct dlq_ledger *l, struct dlq_record *r)
{
	struct dlq_record_sends *sp = record__sends(r);
	if(sp){
		/* The head of the table's list goes with the list. */
		struct dlq_delivery *d = sends_head(t, r);
		while(d){
			struct dlq_delivery *next = d->rnext;
			delivery_free(t, d);
			ledger__adjust_bytes(l, r, -1, DLQ_DELIVERY_BYTES);
			d = next;
		}
		if(sp->client){
			struct dlq_rclient *c = t->numbered[sp->client];
			c->deliveries--;
			client_release_if_unused(t, c);
		}
		memset(sp, 0, sizeof(*sp));
		r->flags &= (uint8_t)~(DLQ_RECORD_SPILLED | DLQ_RECORD_FIRST_DIVERTED);
		return;
	}
	/* An original made while tracking was off: nothing of it is here. */
	if(MORE(r) == NULL) return;
	unbind_payload(t, r);
	unindex_content(t, r);
	struct dlq_delivery *d = MORE(r)->deliveries;
	while(d){
		struct dlq_delivery *next = d->rnext;
		delivery_free(t, d);
		d = next;
	}
	MORE(r)->deliveries = NULL;
	ledger__adjust_bytes(l, r, -1, MORE(r)->extra_bytes);
	MORE(r)->extra_bytes = 0;
}

/* ---- READ checks ---- */

/* 2.1: the record whose dlq-id the stored message carries. The topic and
 * payload must match too: a publisher may put any dlq-id on an untracked
 * message (the plugin's own stamp comes last, and is the one read). */
struct dlq_record *redelivery__record_by_id(const struct dlq_ledger *l, const char *id, size_t id_len,
		const char *topic, const void *payload, uint32_t payload_len)
{
	struct dlq_id decoded;
	if(!id__decode(id, id_len, &decoded)) return NULL;
	struct dlq_record *r = ledger__find(l, &decoded);
	return r && same_message(r, topic, payload, payload_len) ? r : NULL;
}

bool redelivery__is_message(const struct dlq_record *r, const char *topic, const void *payload, uint32_t payload_len)
{
	return same_message(r, topic, payload, payload_len);
}

static struct dlq_record *find_by_id(const struct dlq_ledger *l, const struct dlq_read_check *c)
{
	return redelivery__record_by_id(l, c->id, strlen(c->id), c->topic, c->payload, c->payload_len);
}

int redelivery__sent(struct dlq_redelivery *t, struct dlq_ledger *l, struct dlq_record *r, const char *client,
		struct dlq_sent_to *out)
{
	struct dlq_rclient *c = client_get(t, client);
	if(c == NULL) return ENOMEM;
	*out = (struct dlq_sent_to){ .record = r, .client = c };
	struct dlq_record_sends *sp = record__sends(r);
	if(sp && sp->client == 0 && client_number(t, c)){
		/* The record's first client: kept in the record. */
		sp->client = c->number;
		c->deliveries++;
	}
	if(sp && sp->client && sp->client == c->number){
		if(sp->sends < UINT16_MAX) sp->sends++;
		return 0;
	}
	struct dlq_delivery *d = sp ? sends_find(t, r, c) : delivery_find(t, r, c);
	if(d == NULL) d = delivery_new(t, l, r, c);
	if(d == NULL){
		client_release_if_unused(t, c);
		return ENOMEM;
	}
	if(d->sends < UINT16_MAX) d->sends++;
	out->delivery = d;
	return 0;
}

bool redelivery__sent_to(struct dlq_redelivery *t, struct dlq_record *r, const char *client,
		struct dlq_sent_to *out)
{
	struct dlq_rclient *c = client_find(t, client);
	if(c == NULL) return false;
	*out = (struct dlq_sent_to){ .record = r, .client = c };
	const struct dlq_record_sends *sp = record__sends(r);
	if(sp && sp->client && sp->client == c->number) return true;
	out->delivery = sp ? sends_find(t, r, c) : delivery_find(t, r, c);
	return out->delivery != NULL;
}

static struct dlq_record *find_record(struct dlq_redelivery *t, const struct dlq_ledger *l,
		const struct dlq_read_check *c)
{
	if(c->id) return find_by_id(l, c);
	uintptr_t ref = (uintptr_t)c->payload;
	if(ref == 0 || c->payload_len == 0) return NULL;
	if(t->by_payload){
		for(struct dlq_record *r = t->by_payload[mix(ref) & (t->by_payload_size - 1)]; r; r = MORE(r)->payload_next){
			if(MORE(r)->payload_ref == ref){
				/* An address reused by a message not seen being tracked
				 * (a will, another plugin's publish) is not this record. */
				return same_message(r, c->topic, c->payload, c->payload_len) ? r : NULL;
			}
		}
	}
	/* A retry copy: the broker stored its own copy of our payload. */
	struct dlq_record *r = by_content(t, c->topic, c->payload, c->payload_len);
	if(r) bind(t, r, ref);
	return r;
}

int redelivery__read_check(struct dlq_redelivery *t, struct dlq_ledger *l, const struct dlq_read_check *c,
		struct dlq_read_verdict *v)
{
	memset(v, 0, sizeof(*v));
	uint64_t event = ++t->event;
	struct dlq_rclient *cl = client_find(t, c->client);

	/* The QoS is the stored message's. 2.0.11 stores a plugin's publish to
	 * one client with QoS 0 whatever it is delivered with (src/loop.c,
	 * single_publish), so a retry copy's own QoS is taken from its record.
	 * A copy's client is known to the tracker (redelivery__note_copy). */
	uint8_t qos = c->qos;
	struct dlq_record *r = NULL;
	if(qos > 0 || cl){
		r = find_record(t, l, c);
		if(qos == 0 && r) qos = r->qos;
	}

	if(cl && cl->offline && c->conn != cl->offline){
		/* A check from a connection other than the session object the
		 * client left behind: it has reconnected, and this is the first
		 * check of the run the broker makes for what its session holds. */
		cl->online = c->conn;
		cl->offline = 0;
		cl->burst_event = event;
		cl->burst_pos = 0;
		cl->burst_counts = !cl->skip_next_burst;
		cl->skip_next_burst = false;
		v->in_burst = true;
	}else if(cl && cl->burst_event && cl->burst_event == event - 1 && cl->online == c->conn){
		/* The run goes on: nothing else happened in between. */
		cl->burst_event = event;
		v->in_burst = true;
	}else if(cl){
		cl->burst_event = 0;
	}
	if(v->in_burst && qos > 0){
		v->first_in_burst = cl->burst_pos == 0 && cl->burst_counts;
		cl->burst_pos++;
	}

	if(qos == 0 || r == NULL) return 0; /* QoS 0 is never redelivered */
	if(cl == NULL){
		cl = client_get(t, c->client);
		if(cl == NULL) return ENOMEM;
		/* Nothing says whether this connection is live or a session
		 * left behind (restored at startup, or offline since before the
		 * client was known): taken as left behind, a reconnect from
		 * elsewhere is then seen, and nothing is counted that was not
		 * sent. */
		cl->offline = c->conn;
	}
	struct dlq_delivery *d = delivery_find(t, r, cl);
	if(d == NULL){
		d = delivery_new(t, l, r, cl);
		if(d == NULL){
			client_release_if_unused(t, cl);
			return ENOMEM;
		}
	}else if(v->first_in_burst && d->held_connected){
		/* The oldest message in flight when the client left, sent to it
		 * while connected: the broker is about to send it again. */
		v->redelivery = true;
	}
	/* In a reconnecting session, or routed to a client known to be on
	 * this connection, it is now held while connected. */
	if(v->in_burst || (cl->online && cl->online == c->conn)) d->held_connected = true;
	v->delivery = d;
	return 0;
}

/* ---- kicks ---- */

int redelivery__queue_kick(struct dlq_redelivery *t, struct dlq_rclient *c, uintptr_t conn)
{
	for(struct dlq_kick *k = t->kicks; k; k = k->next){
		if(!strcmp(k->client, c->id)) return 0;
	}
	size_t len = strlen(c->id);
	struct dlq_kick *k = malloc(sizeof(*k) + len + 1);
	if(k == NULL) return ENOMEM;
	k->conn = conn;
	memcpy(k->client, c->id, len + 1);
	k->next = t->kicks;
	t->kicks = k;
	c->skip_next_burst = true;
	return 0;
}

struct dlq_kick *redelivery__take_kicks(struct dlq_redelivery *t)
{
	struct dlq_kick *k = t->kicks;
	t->kicks = NULL;
	return k;
}
