/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Acknowledgement deadlines (see deadlines.h): the deliveries in a table
 * by record, each in its client's list and, while its clock runs, in the
 * queue of its duration; the rules of when a clock starts, per mode.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/deadlines.h"
#include "model/gauges.h"
#include "util/chains.h"
#include "util/hash.h"

#define HNEXT offsetof(struct dlq_deadline, hnext)
#define CLIENT_HNEXT offsetof(struct dlq_deadline_client, hnext)

static uint64_t record_key(const struct dlq_record *r)
{
	return chains__mix((uint64_t)(uintptr_t)r);
}

static uint64_t entry_key(const void *item)
{
	return record_key(((const struct dlq_deadline *)item)->record);
}

static uint64_t client_key(const void *item)
{
	return hash__string(((const struct dlq_deadline_client *)item)->id);
}

void deadlines__init(struct dlq_deadlines *ds, enum dlq_deadline_mode mode)
{
	memset(ds, 0, sizeof(*ds));
	ds->mode = mode;
}

void deadlines__cleanup(struct dlq_deadlines *ds)
{
	for(size_t i = 0; i < chains__count(&ds->table); i++){
		struct dlq_deadline *e = chains__chain(&ds->table, i);
		while(e){
			struct dlq_deadline *next = e->hnext;
			free(e);
			e = next;
		}
	}
	for(size_t i = 0; i < chains__count(&ds->clients); i++){
		struct dlq_deadline_client *c = chains__chain(&ds->clients, i);
		while(c){
			struct dlq_deadline_client *next = c->hnext;
			free(c);
			c = next;
		}
	}
	chains__free(&ds->table);
	chains__free(&ds->clients);
	free(ds->queues);
	enum dlq_deadline_mode mode = ds->mode;
	memset(ds, 0, sizeof(*ds));
	ds->mode = mode;
}

/* ---- lookups ---- */

struct dlq_deadline *deadlines__find(const struct dlq_deadlines *ds, const struct dlq_record *r, const char *client)
{
	if(!deadlines__of(r)) return NULL;
	for(struct dlq_deadline *e = chains__first(&ds->table, record_key(r)); e; e = e->hnext){
		if(e->record == r && !strcmp(e->client->id, client)) return e;
	}
	return NULL;
}

struct dlq_deadline_client *deadlines__client(const struct dlq_deadlines *ds, const char *client)
{
	if(ds->client_count == 0) return NULL;
	for(struct dlq_deadline_client *c = chains__first(&ds->clients, hash__string(client)); c; c = c->hnext){
		if(!strcmp(c->id, client)) return c;
	}
	return NULL;
}

static struct dlq_deadline_client *client_get(struct dlq_deadlines *ds, const char *client)
{
	struct dlq_deadline_client *c = deadlines__client(ds, client);
	if(c) return c;
	if(chains__grow(&ds->clients, ds->client_count, CLIENT_HNEXT, client_key)) return NULL;
	size_t len = strlen(client);
	c = calloc(1, sizeof(*c) + len + 1);
	if(c == NULL) return NULL;
	memcpy(c->id, client, len + 1);
	chains__link(&ds->clients, c, hash__string(client));
	ds->client_count++;
	return c;
}

static void client_release(struct dlq_deadlines *ds, struct dlq_deadline_client *c)
{
	if(c->count) return;
	chains__unlink(&ds->clients, c, hash__string(c->id));
	ds->client_count--;
	free(c);
}

/* ---- queues ---- */

static struct dlq_deadline_queue *queue_for(struct dlq_deadlines *ds, uint64_t duration)
{
	for(size_t i = 0; i < ds->queue_count; i++){
		if(ds->queues[i].duration_ms == duration) return &ds->queues[i];
	}
	/* A queue left empty by a reload is taken for the new duration. */
	for(size_t i = 0; i < ds->queue_count; i++){
		if(ds->queues[i].count == 0){
			ds->queues[i].duration_ms = duration;
			return &ds->queues[i];
		}
	}
	struct dlq_deadline_queue *q = realloc(ds->queues, (ds->queue_count + 1) * sizeof(*q));
	if(q == NULL) return NULL;
	/* The entries point at their queue: moved with the array. */
	for(size_t i = 0; i < ds->queue_count; i++){
		for(struct dlq_deadline *e = q[i].head; e; e = e->qnext) e->queue = &q[i];
	}
	ds->queues = q;
	q = &ds->queues[ds->queue_count++];
	memset(q, 0, sizeof(*q));
	q->duration_ms = duration;
	return q;
}

static void queue_unlink(struct dlq_deadlines *ds, struct dlq_deadline *e)
{
	struct dlq_deadline_queue *q = e->queue;
	if(q == NULL) return;
	if(e->qprev) e->qprev->qnext = e->qnext;
	else q->head = e->qnext;
	if(e->qnext) e->qnext->qprev = e->qprev;
	else q->tail = e->qprev;
	e->qprev = e->qnext = NULL;
	e->queue = NULL;
	q->count--;
	ds->running--;
}

static void queue_append(struct dlq_deadlines *ds, struct dlq_deadline_queue *q, struct dlq_deadline *e)
{
	e->queue = q;
	e->qnext = NULL;
	e->qprev = q->tail;
	if(q->tail) q->tail->qnext = e;
	else q->head = e;
	q->tail = e;
	q->count++;
	ds->running++;
}

/* ---- deliveries ---- */

struct dlq_deadline *deadlines__add(struct dlq_deadlines *ds, struct dlq_record *r, const char *client)
{
	if(chains__grow(&ds->table, ds->count, HNEXT, entry_key)) return NULL;
	struct dlq_deadline_client *c = client_get(ds, client);
	if(c == NULL) return NULL;
	struct dlq_deadline *e = calloc(1, sizeof(*e));
	if(e == NULL){
		client_release(ds, c);
		return NULL;
	}
	e->record = r;
	e->client = c;
	chains__link(&ds->table, e, record_key(r));
	e->cprev = c->tail;
	if(c->tail) c->tail->cnext = e;
	else c->head = e;
	c->tail = e;
	c->count++;
	ds->count++;
	r->flags |= DLQ_RECORD_CLOCKED;
	if(ds->ledger) ledger__adjust_bytes(ds->ledger, r, +1, (uint32_t)DLQ_DEADLINE_BYTES);
	gauges__awaiting(ds->book, r->policy, +1);
	return e;
}

void deadlines__start(struct dlq_deadlines *ds, struct dlq_deadline *e, uint64_t now)
{
	uint64_t duration = e->record->policy->ack_timeout_ms;
	struct dlq_deadline_queue *q = e->queue && e->queue->duration_ms == duration ? e->queue : NULL;
	queue_unlink(ds, e);
	if(q == NULL) q = queue_for(ds, duration);
	/* No memory for a queue of a new duration (a reload's): the clock
	 * does not run, and the delivery waits as if not yet sent. */
	if(q == NULL) return;
	e->due_ms = now + duration;
	queue_append(ds, q, e);
}

void deadlines__remove(struct dlq_deadlines *ds, struct dlq_deadline *e)
{
	struct dlq_record *r = e->record;
	struct dlq_deadline_client *c = e->client;
	queue_unlink(ds, e);
	if(e->cprev) e->cprev->cnext = e->cnext;
	else c->head = e->cnext;
	if(e->cnext) e->cnext->cprev = e->cprev;
	else c->tail = e->cprev;
	c->count--;
	bool others = false;
	for(struct dlq_deadline **pe = (struct dlq_deadline **)chains__head(&ds->table, record_key(r)); *pe; ){
		if(*pe == e){
			*pe = e->hnext;
			continue;
		}
		if((*pe)->record == r) others = true;
		pe = &(*pe)->hnext;
	}
	if(!others) r->flags &= (uint8_t)~DLQ_RECORD_CLOCKED;
	ds->count--;
	if(ds->ledger) ledger__adjust_bytes(ds->ledger, r, -1, (uint32_t)DLQ_DEADLINE_BYTES);
	gauges__awaiting(ds->book, r->policy, -1);
	free(e);
	client_release(ds, c);
}

/* Any delivery of r, or NULL. */
static struct dlq_deadline *any_of(const struct dlq_deadlines *ds, const struct dlq_record *r)
{
	for(struct dlq_deadline *e = chains__first(&ds->table, record_key(r)); e; e = e->hnext){
		if(e->record == r) return e;
	}
	return NULL;
}

void deadlines__record_gone(struct dlq_deadlines *ds, struct dlq_record *r)
{
	if(!deadlines__of(r) || ds->table.table == NULL) return;
	struct dlq_deadline *e;
	while((e = any_of(ds, r)) != NULL){
		deadlines__remove(ds, e);
	}
	/* Flagged with none (a restore that failed halfway): no longer. */
	r->flags &= (uint8_t)~DLQ_RECORD_CLOCKED;
}

struct dlq_deadline *deadlines__expired(const struct dlq_deadlines *ds, uint64_t now)
{
	struct dlq_deadline *first = NULL;
	for(size_t i = 0; i < ds->queue_count; i++){
		struct dlq_deadline *h = ds->queues[i].head;
		if(h && h->due_ms <= now && (first == NULL || h->due_ms < first->due_ms)) first = h;
	}
	return first;
}

uint64_t deadlines__next_due(const struct dlq_deadlines *ds)
{
	uint64_t due = UINT64_MAX;
	for(size_t i = 0; i < ds->queue_count; i++){
		struct dlq_deadline *h = ds->queues[i].head;
		if(h && h->due_ms < due) due = h->due_ms;
	}
	return due;
}

/* ---- the rules ---- */

struct dlq_deadline *deadlines__sent(struct dlq_deadlines *ds, struct dlq_record *r, const char *client, uint64_t now)
{
	struct dlq_deadline *e = deadlines__find(ds, r, client);
	if(e == NULL) e = deadlines__add(ds, r, client);
	if(e) deadlines__start(ds, e, now);
	return e;
}

int deadlines__routed(struct dlq_deadlines *ds, struct dlq_record *r, const char *client, bool online,
		uint64_t now, struct dlq_deadline **made)
{
	struct dlq_deadline *e = deadlines__add(ds, r, client);
	*made = e;
	if(e == NULL) return ENOMEM;
	if(online){
		e->client->online = true;
		e->client->left_on = 0;
		e->client->resumable = false;
	}
	if(e->client->head == e && e->client->online) deadlines__start(ds, e, now);
	return 0;
}

/* SEQUENTIAL: the client's first delivery, waiting, starts its clock when
 * the client is online. */
static struct dlq_deadline *start_head(struct dlq_deadlines *ds, struct dlq_deadline_client *c, uint64_t now)
{
	struct dlq_deadline *h = c->head;
	if(h == NULL || h->queue || !c->online) return NULL;
	deadlines__start(ds, h, now);
	return h;
}

struct dlq_deadline *deadlines__done(struct dlq_deadlines *ds, struct dlq_deadline *e, uint64_t now)
{
	struct dlq_deadline_client *c = e->client;
	bool was_head = c->head == e;
	bool last = c->count == 1; /* the client goes with its last delivery */
	deadlines__remove(ds, e);
	if(ds->mode != DLQ_DEADLINES_SEQUENTIAL || !was_head || last) return NULL;
	return start_head(ds, c, now);
}

struct dlq_deadline *deadlines__late(struct dlq_deadlines *ds, const char *client, uint64_t now)
{
	if(ds->mode != DLQ_DEADLINES_SEQUENTIAL) return NULL;
	struct dlq_deadline_client *c = deadlines__client(ds, client);
	if(c == NULL || c->head == NULL) return NULL;
	if(c->head->queue){
		deadlines__start(ds, c->head, now);
		return c->head;
	}
	return start_head(ds, c, now);
}

/* SEQUENTIAL: the client is connected: its first waiting delivery starts. */
static struct dlq_deadline *back_online(struct dlq_deadlines *ds, struct dlq_deadline_client *c, uint64_t now)
{
	c->online = true;
	c->left_on = 0;
	c->resumable = false;
	return start_head(ds, c, now);
}

struct dlq_deadline *deadlines__online(struct dlq_deadlines *ds, const char *client, uint64_t now)
{
	if(ds->mode != DLQ_DEADLINES_SEQUENTIAL) return NULL;
	struct dlq_deadline_client *c = deadlines__client(ds, client);
	if(c == NULL) return NULL;
	return back_online(ds, c, now);
}

struct dlq_deadline *deadlines__offline(struct dlq_deadlines *ds, const char *client, uintptr_t conn, bool clean,
		uint64_t now, void (*started)(void *ctx, const struct dlq_deadline *e), void *ctx)
{
	if(ds->mode != DLQ_DEADLINES_SEQUENTIAL) return NULL;
	struct dlq_deadline_client *c = deadlines__client(ds, client);
	if(c == NULL) return NULL;
	if(conn && c->left_on == conn && c->resumable && !c->online){
		/* 2.0 ends the session object conn left behind as a new
		 * connection takes it over: the client is back. */
		return back_online(ds, c, now);
	}
	c->online = false;
	c->left_on = conn;
	c->resumable = !clean;
	if(c->persists) return NULL;
	for(struct dlq_deadline *e = c->head; e; e = e->cnext){
		if(e->queue) continue;
		deadlines__start(ds, e, now);
		if(started) started(ctx, e);
	}
	return NULL;
}

/* ---- the state file ---- */

int deadlines__restore(struct dlq_deadlines *ds, struct dlq_record *r, const char *client, uint64_t due)
{
	struct dlq_deadline *e = deadlines__find(ds, r, client);
	if(e == NULL) e = deadlines__add(ds, r, client);
	if(e == NULL) return ENOMEM;
	queue_unlink(ds, e);
	if(due == 0) return 0;
	struct dlq_deadline_queue *q = queue_for(ds, r->policy->ack_timeout_ms);
	if(q == NULL) return ENOMEM;
	e->due_ms = due;
	queue_append(ds, q, e);
	return 0;
}

/* A list merge sort by due_ms, through qnext (qprev is set afterwards). */
static struct dlq_deadline *sort_by_due(struct dlq_deadline *list, size_t n)
{
	if(n < 2) return list;
	struct dlq_deadline *mid = list;
	for(size_t i = 1; i < n / 2; i++) mid = mid->qnext;
	struct dlq_deadline *right = mid->qnext;
	mid->qnext = NULL;
	struct dlq_deadline *a = sort_by_due(list, n / 2);
	struct dlq_deadline *b = sort_by_due(right, n - n / 2);
	struct dlq_deadline head = {0}, *t = &head;
	while(a && b){
		if(b->due_ms < a->due_ms){
			t->qnext = b;
			b = b->qnext;
		}else{
			t->qnext = a;
			a = a->qnext;
		}
		t = t->qnext;
	}
	t->qnext = a ? a : b;
	return head.qnext;
}

void deadlines__restored(struct dlq_deadlines *ds)
{
	for(size_t i = 0; i < ds->queue_count; i++){
		struct dlq_deadline_queue *q = &ds->queues[i];
		q->head = sort_by_due(q->head, q->count);
		struct dlq_deadline *prev = NULL;
		for(struct dlq_deadline *e = q->head; e; e = e->qnext){
			e->qprev = prev;
			prev = e;
		}
		q->tail = prev;
	}
}
