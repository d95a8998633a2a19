/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Redelivery tracking's clients and deliveries (see deliveries.h): a
 * client per id, with the 16-bit number a record's sends part names it
 * by; a delivery per (record, client) in a table, listed from its record
 * (the more part's list, or for an original with the sends part, from the
 * first of them, filed under (record, no client)); and 2.1's view of
 * where a record's sends to a client are kept.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "model/deliveries.h"
#include "util/chains.h"
#include "util/hash.h"

#define MORE(r) record__more(r)

static uint64_t hash_client_id(const char *id)
{
	return hash__string(id);
}

static uint64_t hash_pair(const struct dlq_record *r, const struct dlq_rclient *c)
{
	return chains__mix((uint64_t)(uintptr_t)r * 31u + (uint64_t)(uintptr_t)c);
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

/* ---- clients ---- */

static struct dlq_conn_slot *conn_slot(struct dlq_redelivery *t, uintptr_t conn)
{
	return &t->by_conn[chains__mix(conn) & (DLQ_CONN_SLOTS - 1)];
}

/* The client of a send on connection conn (0: unknown) whose id is the
 * broker's string id, made if new: from the connection's slot when it
 * knows that connection with that string and the client is still on it;
 * NULL when out of memory. Borrowed. */
static struct dlq_rclient *client_of_send(struct dlq_redelivery *t, const char *id, uintptr_t conn)
{
	struct dlq_conn_slot *s = conn ? conn_slot(t, conn) : NULL;
	if(s && s->conn == conn && s->id == id && s->client->online == conn) return s->client;
	struct dlq_rclient *c = deliveries__client_get(t, id);
	if(s && c && c->online == conn) *s = (struct dlq_conn_slot){ .conn = conn, .id = id, .client = c };
	return c;
}

struct dlq_rclient *deliveries__client_find(const struct dlq_redelivery *t, const char *id)
{
	for(struct dlq_rclient *c = chains__first(&t->clients, hash_client_id(id)); c; c = c->hnext){
		if(!strcmp(c->id, id)) return c;
	}
	return NULL;
}

struct dlq_rclient *deliveries__client_get(struct dlq_redelivery *t, const char *id)
{
	struct dlq_rclient *c = deliveries__client_find(t, id);
	if(c) return c;
	if(chains__grow(&t->clients, t->client_count, offsetof(struct dlq_rclient, hnext), client_key)){
		return NULL;
	}
	size_t len = strlen(id);
	c = calloc(1, sizeof(*c) + len + 1);
	if(c == NULL) return NULL;
	memcpy(c->id, id, len + 1);
	chains__link(&t->clients, c, hash_client_id(id));
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
void deliveries__client_release(struct dlq_redelivery *t, struct dlq_rclient *c)
{
	if(c->deliveries || c->online || c->skip_next_burst) return;
	chains__unlink(&t->clients, c, hash_client_id(c->id));
	t->client_count--;
	if(c->number){
		t->numbered[c->number] = NULL;
		t->free_numbers[t->free_count++] = c->number;
	}
	for(size_t i = 0; i < DLQ_CONN_SLOTS; i++){
		if(t->by_conn[i].client == c) t->by_conn[i] = (struct dlq_conn_slot){0};
	}
	free(c);
}

/* ---- deliveries ---- */

struct dlq_delivery *deliveries__find(const struct dlq_redelivery *t, const struct dlq_record *r,
		const struct dlq_rclient *c)
{
	for(struct dlq_delivery *d = chains__first(&t->table, hash_pair(r, c)); d; d = d->hnext){
		if(d->record == r && d->client == c) return d;
	}
	return NULL;
}

struct dlq_delivery *deliveries__find_for(const struct dlq_redelivery *t, const struct dlq_record *r, const char *client)
{
	struct dlq_rclient *c = deliveries__client_find(t, client);
	return c ? deliveries__find(t, r, c) : NULL;
}

/* A zeroed delivery from the slabs, a new slab when none is spare; NULL
 * when out of memory. */
static struct dlq_delivery *delivery_get(struct dlq_redelivery *t)
{
	if(t->spare == NULL){
		struct dlq_delivery_slab *slab = malloc(sizeof(*slab));
		if(slab == NULL) return NULL;
		slab->next = t->slabs;
		t->slabs = slab;
		for(size_t i = DLQ_DELIVERY_SLAB; i-- > 0;){
			slab->items[i].hnext = t->spare;
			t->spare = &slab->items[i];
		}
	}
	struct dlq_delivery *d = t->spare;
	t->spare = d->hnext;
	*d = (struct dlq_delivery){0};
	return d;
}

static void slabs_free(struct dlq_redelivery *t)
{
	while(t->slabs){
		struct dlq_delivery_slab *next = t->slabs->next;
		free(t->slabs);
		t->slabs = next;
	}
	t->spare = NULL;
}

/* d goes back to the slabs; when no delivery is left, the slabs go back
 * to the system, so that what a burst of deliveries took is not kept. */
static void delivery_put(struct dlq_redelivery *t, struct dlq_delivery *d)
{
	d->hnext = t->spare;
	t->spare = d;
	if(t->count == 0) slabs_free(t);
}

/* A delivery of r to c in the table (filed as the head of r's list when
 * head is true), its bytes accounted; not yet in r's list. */
static struct dlq_delivery *delivery_alloc(struct dlq_redelivery *t, struct dlq_ledger *l, struct dlq_record *r,
		struct dlq_rclient *c, bool head)
{
	if(chains__grow(&t->table, t->count, offsetof(struct dlq_delivery, hnext), delivery_key)){
		return NULL;
	}
	struct dlq_delivery *d = delivery_get(t);
	if(d == NULL) return NULL;
	d->record = r;
	d->client = c;
	d->heads_list = head;
	chains__link(&t->table, d, delivery_key(d));
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
	chains__unlink(&t->table, d, delivery_key(d));
	t->count--;
	d->client->deliveries--;
	deliveries__client_release(t, d->client);
	if(t->last_head == d) t->last_head = NULL;
	delivery_put(t, d);
}

static struct dlq_delivery *head_find(const struct dlq_redelivery *t, const struct dlq_record *r)
{
	for(struct dlq_delivery *d = chains__first(&t->table, hash_pair(r, NULL)); d; d = d->hnext){
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
	return deliveries__find(t, r, c);
}

struct dlq_delivery *deliveries__new(struct dlq_redelivery *t, struct dlq_ledger *l, struct dlq_record *r,
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

size_t deliveries__table_bytes(const struct dlq_redelivery *t, const struct dlq_record *r)
{
	size_t n = 0;
	if(record__sends(r) && (r->flags & DLQ_RECORD_SPILLED)){
		for(const struct dlq_delivery *d = head_find(t, r); d; d = d->rnext) n++;
	}
	return n * DLQ_DELIVERY_BYTES;
}

/* ---- 2.1: where a record's sends to a client are kept ---- */

/* Whether r's sends part (sp, or NULL) keeps the sends to c: c is the
 * record's first client, or becomes it now when the record has none yet
 * (and c can have a number). */
static bool kept_in_record(struct dlq_redelivery *t, struct dlq_record_sends *sp, struct dlq_rclient *c)
{
	if(sp == NULL) return false;
	if(sp->client == 0 && client_number(t, c)){
		sp->client = c->number;
		c->deliveries++;
	}
	return sp->client && sp->client == c->number;
}

/* The delivery of r to c in the table, made if there is none; NULL when
 * out of memory (or r has neither part), with c released. */
static struct dlq_delivery *table_delivery(struct dlq_redelivery *t, struct dlq_ledger *l, struct dlq_record *r,
		struct dlq_rclient *c)
{
	struct dlq_delivery *d = record__sends(r) ? sends_find(t, r, c) : deliveries__find(t, r, c);
	if(d == NULL) d = deliveries__new(t, l, r, c);
	if(d == NULL) deliveries__client_release(t, c);
	return d;
}

int deliveries__sent(struct dlq_redelivery *t, struct dlq_ledger *l, struct dlq_record *r, const char *client,
		uintptr_t conn, struct dlq_sent_to *out)
{
	struct dlq_rclient *c = client_of_send(t, client, conn);
	if(c == NULL) return ENOMEM;
	*out = (struct dlq_sent_to){ .record = r, .client = c };
	struct dlq_record_sends *sp = record__sends(r);
	if(kept_in_record(t, sp, c)){
		if(sp->sends < UINT16_MAX) sp->sends++;
		return 0;
	}
	struct dlq_delivery *d = table_delivery(t, l, r, c);
	if(d == NULL) return ENOMEM;
	if(d->sends < UINT16_MAX) d->sends++;
	out->delivery = d;
	return 0;
}

bool deliveries__sent_to(struct dlq_redelivery *t, struct dlq_record *r, const char *client,
		struct dlq_sent_to *out)
{
	struct dlq_rclient *c = deliveries__client_find(t, client);
	if(c == NULL) return false;
	*out = (struct dlq_sent_to){ .record = r, .client = c };
	const struct dlq_record_sends *sp = record__sends(r);
	if(sp && sp->client && sp->client == c->number) return true;
	out->delivery = sp ? sends_find(t, r, c) : deliveries__find(t, r, c);
	return out->delivery != NULL;
}

void deliveries__record_gone(struct dlq_redelivery *t, struct dlq_ledger *l, struct dlq_record *r)
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
			deliveries__client_release(t, c);
		}
		memset(sp, 0, sizeof(*sp));
		r->flags &= (uint8_t)~(DLQ_RECORD_SPILLED | DLQ_RECORD_FIRST_DIVERTED);
		return;
	}
	/* An original made while tracking was off: nothing of it is here. */
	if(MORE(r) == NULL) return;
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

void deliveries__cleanup(struct dlq_redelivery *t, struct dlq_ledger *l)
{
	/* No client was ever known: no record was sent to one, and nothing is
	 * to be undone in them (shutdown with many kept records comes here). */
	for(struct dlq_record *r = l && t->clients.table ? l->oldest : NULL; r; r = r->newer){
		struct dlq_record_sends *sp = record__sends(r);
		if(sp){
			/* Before the table goes: its bytes are counted from it. */
			ledger__adjust_bytes(l, r, -1, (uint32_t)deliveries__table_bytes(t, r));
			memset(sp, 0, sizeof(*sp));
			r->flags &= (uint8_t)~(DLQ_RECORD_SPILLED | DLQ_RECORD_FIRST_DIVERTED);
		}else if(MORE(r)){
			ledger__adjust_bytes(l, r, -1, MORE(r)->extra_bytes);
			MORE(r)->extra_bytes = 0;
			MORE(r)->deliveries = NULL;
		}
	}
	slabs_free(t);
	for(size_t i = 0; i < chains__count(&t->clients); i++){
		struct dlq_rclient *c = chains__chain(&t->clients, i);
		while(c){
			struct dlq_rclient *next = c->hnext;
			free(c);
			c = next;
		}
	}
	chains__free(&t->table);
	chains__free(&t->clients);
	free(t->numbered);
	free(t->free_numbers);
	t->numbered = NULL;
	t->free_numbers = NULL;
	t->numbered_size = 0;
	t->count = t->client_count = t->free_count = t->next_number = 0;
	t->last_head = NULL;
	memset(t->by_conn, 0, sizeof(t->by_conn));
}

/* ---- what outlives a restart ---- */

static bool worth_keeping(const struct dlq_delivery_saved *s)
{
	return s->redeliveries || s->sends || s->held_connected || s->diverted;
}

static void saved_of(const struct dlq_delivery *d, struct dlq_delivery_saved *out)
{
	*out = (struct dlq_delivery_saved){
		.client = d->client->id,
		.redeliveries = d->redeliveries,
		.sends = d->sends,
		.held_connected = d->held_connected,
		.diverted = d->diverted,
	};
}

/* The sends kept in r's sends part, for its first client. */
static bool first_saved(const struct dlq_redelivery *t, const struct dlq_record *r, struct dlq_delivery_saved *out)
{
	const struct dlq_record_sends *sp = record__sends(r);
	if(sp == NULL || sp->client == 0) return false;
	*out = (struct dlq_delivery_saved){
		.client = t->numbered[sp->client]->id,
		.sends = sp->sends,
		.diverted = (r->flags & DLQ_RECORD_FIRST_DIVERTED) != 0,
	};
	return true;
}

bool deliveries__saved(const struct dlq_redelivery *t, const struct dlq_record *r, const char *client,
		struct dlq_delivery_saved *out)
{
	const struct dlq_rclient *c = deliveries__client_find(t, client);
	if(c == NULL) return false;
	const struct dlq_record_sends *sp = record__sends(r);
	if(sp && sp->client && sp->client == c->number) return first_saved(t, r, out) && worth_keeping(out);
	const struct dlq_delivery *d;
	if(sp){
		d = (r->flags & DLQ_RECORD_SPILLED) ? head_find(t, r) : NULL;
		while(d && d->client != c) d = d->rnext;
	}else{
		d = deliveries__find(t, r, c);
	}
	if(d == NULL) return false;
	saved_of(d, out);
	return worth_keeping(out);
}

int deliveries__each_saved(const struct dlq_redelivery *t, const struct dlq_record *r, dlq_delivery_saved_fn *fn,
		void *ctx)
{
	struct dlq_delivery_saved s;
	const struct dlq_delivery *d = NULL;
	int rc;
	if(record__sends(r)){
		if(first_saved(t, r, &s) && worth_keeping(&s) && (rc = fn(ctx, r, &s))) return rc;
		if(r->flags & DLQ_RECORD_SPILLED) d = head_find(t, r);
	}else if(MORE(r)){
		d = MORE(r)->deliveries;
	}
	for(; d; d = d->rnext){
		saved_of(d, &s);
		if(worth_keeping(&s) && (rc = fn(ctx, r, &s))) return rc;
	}
	return 0;
}

int deliveries__restore(struct dlq_redelivery *t, struct dlq_ledger *l, struct dlq_record *r,
		const struct dlq_delivery_saved *s)
{
	struct dlq_record_sends *sp = record__sends(r);
	if(sp == NULL && MORE(r) == NULL) return 0;
	struct dlq_rclient *c = deliveries__client_get(t, s->client);
	if(c == NULL) return ENOMEM;
	if(c->online == 0 && c->offline == 0) c->offline = DLQ_CONN_BEFORE_RESTART;
	if(kept_in_record(t, sp, c)){
		sp->sends = s->sends;
		if(s->diverted) r->flags |= DLQ_RECORD_FIRST_DIVERTED;
		else r->flags &= (uint8_t)~DLQ_RECORD_FIRST_DIVERTED;
		return 0;
	}
	struct dlq_delivery *d = table_delivery(t, l, r, c);
	if(d == NULL) return ENOMEM;
	d->redeliveries = s->redeliveries;
	d->sends = s->sends;
	d->held_connected = s->held_connected;
	d->diverted = s->diverted;
	return 0;
}
