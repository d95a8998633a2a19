/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The table of sessions as the broker knows them (see sessions.h): entries
 * in a chained hash table by client id, each with a small array of its
 * subscriptions. Subscriptions are few per client and matched only when a
 * targeted retry copy is published, so a linear scan of them is enough.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "model/sessions.h"
#include "util/chains.h"
#include "util/hash.h"
#include "util/topic.h"

#define SESSIONS_INITIAL_SIZE 64

void sessions__init(struct dlq_sessions *s)
{
	memset(s, 0, sizeof(*s));
}

static void free_subs(struct dlq_session *e)
{
	for(size_t i = 0; i < e->sub_count; i++) free(e->subs[i].filter);
	free(e->subs);
	e->subs = NULL;
	e->sub_count = e->sub_capacity = 0;
}

void sessions__cleanup(struct dlq_sessions *s)
{
	for(size_t i = 0; i < s->size; i++){
		struct dlq_session *e = s->table[i];
		while(e){
			struct dlq_session *next = e->hnext;
			free_subs(e);
			free(e);
			e = next;
		}
	}
	free(s->table);
	memset(s, 0, sizeof(*s));
}

static struct dlq_session *find(const struct dlq_sessions *s, const char *client)
{
	if(s->size == 0) return NULL;
	for(struct dlq_session *e = s->table[hash__string(client) & (s->size - 1)]; e; e = e->hnext){
		if(!strcmp(e->client, client)) return e;
	}
	return NULL;
}

static uint64_t session_key(const void *item)
{
	return hash__string(((const struct dlq_session *)item)->client);
}

/* Doubles the table; on failure the old one stays (only slower). */
static void grow(struct dlq_sessions *s)
{
	size_t size = s->size ? s->size * 2 : SESSIONS_INITIAL_SIZE;
	struct dlq_session **table = calloc(size, sizeof(*table));
	if(table == NULL) return;
	chains__rehash((void **)s->table, s->size, (void **)table, size, offsetof(struct dlq_session, hnext), session_key);
	free(s->table);
	s->table = table;
	s->size = size;
}

/* The entry of client, made if need be; NULL with *rc ENOSPC or ENOMEM
 * (the client stays unknown). */
static struct dlq_session *entry_of(struct dlq_sessions *s, const char *client, int *rc)
{
	struct dlq_session *e = find(s, client);
	if(e) return e;
	size_t len = strlen(client);
	size_t bytes = sizeof(*e) + len + 1;
	if(s->bytes + bytes > SESSIONS_MAX_BYTES){
		*rc = ENOSPC;
		return NULL;
	}
	if(s->count >= s->size) grow(s);
	e = s->size ? calloc(1, bytes) : NULL;
	if(e == NULL){
		*rc = ENOMEM;
		return NULL;
	}
	memcpy(e->client, client, len + 1);
	e->bytes = bytes;
	size_t slot = hash__string(client) & (s->size - 1);
	e->hnext = s->table[slot];
	s->table[slot] = e;
	s->count++;
	s->bytes += bytes;
	return e;
}

static void forget_subs(struct dlq_sessions *s, struct dlq_session *e)
{
	for(size_t i = 0; i < e->sub_count; i++){
		size_t b = strlen(e->subs[i].filter) + 1 + sizeof(struct dlq_sub);
		e->bytes -= b;
		s->bytes -= b;
	}
	free_subs(e);
	e->subs_unknown = false;
}

int sessions__connected(struct dlq_sessions *s, const char *client, bool clean_start)
{
	int rc = 0;
	struct dlq_session *e = entry_of(s, client, &rc);
	if(e == NULL) return rc;
	bool resumed = e->ended && !clean_start && e->life == DLQ_SESSION_LASTS;
	if(e->ended && !resumed) clean_start = true;
	e->ended = false; /* stays on the ended list until the next settle */
	if(clean_start){
		e->life = DLQ_SESSION_UNKNOWN;
		forget_subs(s, e);
	}
	e->online = true;
	return 0;
}

int sessions__offline(struct dlq_sessions *s, const char *client)
{
	int rc = 0;
	struct dlq_session *e = entry_of(s, client, &rc);
	if(e == NULL) return rc;
	e->life = DLQ_SESSION_LASTS;
	e->online = false;
	e->ended = false;
	return 0;
}

/* Unlinks e from the table and frees it (not on the ended list). */
static void drop(struct dlq_sessions *s, struct dlq_session *e)
{
	struct dlq_session **p = &s->table[hash__string(e->client) & (s->size - 1)];
	while(*p != e) p = &(*p)->hnext;
	*p = e->hnext;
	forget_subs(s, e);
	s->bytes -= e->bytes;
	s->count--;
	free(e);
}

void sessions__ended(struct dlq_sessions *s, const char *client)
{
	struct dlq_session *e = find(s, client);
	if(e == NULL || e->ended) return;
	bool listed = false;
	for(struct dlq_session *k = s->ended; k && !listed; k = k->ended_next) listed = k == e;
	e->ended = true;
	e->online = false;
	if(!listed){
		e->ended_next = s->ended;
		s->ended = e;
	}
}

void sessions__settle(struct dlq_sessions *s)
{
	struct dlq_session *e = s->ended;
	s->ended = NULL;
	while(e){
		struct dlq_session *next = e->ended_next;
		e->ended_next = NULL;
		if(e->ended) drop(s, e);
		e = next;
	}
}

enum dlq_session_life sessions__life(const struct dlq_sessions *s, const char *client)
{
	const struct dlq_session *e = find(s, client);
	/* Absent: not seen since the plugin started, ended, or did not fit. */
	return e && !e->ended ? e->life : DLQ_SESSION_UNKNOWN;
}

bool sessions__offline_known(const struct dlq_sessions *s, const char *client)
{
	const struct dlq_session *e = find(s, client);
	return e && !e->online && !e->ended;
}

static struct dlq_sub *sub_of(struct dlq_session *e, const char *filter)
{
	for(size_t i = 0; i < e->sub_count; i++){
		if(!strcmp(e->subs[i].filter, filter)) return &e->subs[i];
	}
	return NULL;
}

int sessions__subscribe(struct dlq_sessions *s, const char *client, const char *filter, uint8_t qos, uint32_t id)
{
	const char *applied_in = filter ? topic__shared_filter(filter) : NULL;
	if(applied_in == NULL || !topic__valid_filter(applied_in)) return EINVAL;
	int rc = 0;
	struct dlq_session *e = entry_of(s, client, &rc);
	if(e == NULL) return rc;
	e->online = true;
	struct dlq_sub *sub = sub_of(e, filter);
	if(sub){
		sub->qos = qos;
		sub->identifier = id;
		return 0;
	}
	if(e->subs_unknown) return ENOSPC;
	size_t len = strlen(filter);
	size_t bytes = len + 1 + sizeof(struct dlq_sub);
	if(e->sub_count >= SESSION_SUBS_MAX || s->bytes + bytes > SESSIONS_MAX_BYTES){
		e->subs_unknown = true;
		return ENOSPC;
	}
	if(e->sub_count == e->sub_capacity){
		size_t cap = e->sub_capacity ? e->sub_capacity * 2 : 4;
		struct dlq_sub *subs = realloc(e->subs, cap * sizeof(*subs));
		if(subs == NULL){
			e->subs_unknown = true;
			return ENOMEM;
		}
		e->subs = subs;
		e->sub_capacity = cap;
	}
	char *copy = malloc(len + 1);
	if(copy == NULL){
		e->subs_unknown = true;
		return ENOMEM;
	}
	memcpy(copy, filter, len + 1);
	e->subs[e->sub_count++] = (struct dlq_sub){
		.filter = copy,
		.applied = copy + (applied_in - filter),
		.identifier = id,
		.qos = qos,
	};
	e->bytes += bytes;
	s->bytes += bytes;
	return 0;
}

void sessions__unsubscribe(struct dlq_sessions *s, const char *client, const char *filter)
{
	struct dlq_session *e = filter ? find(s, client) : NULL;
	struct dlq_sub *sub = e ? sub_of(e, filter) : NULL;
	if(sub == NULL) return;
	size_t b = strlen(sub->filter) + 1 + sizeof(struct dlq_sub);
	e->bytes -= b;
	s->bytes -= b;
	free(sub->filter);
	*sub = e->subs[--e->sub_count];
}

static void add_id(struct dlq_sub_match *m, uint32_t id)
{
	if(id == 0) return;
	size_t i = 0;
	while(i < m->id_count && m->ids[i] < id) i++;
	if(i < m->id_count && m->ids[i] == id) return;
	if(m->id_count == SESSION_IDS_MAX) return;
	memmove(&m->ids[i + 1], &m->ids[i], (m->id_count - i) * sizeof(m->ids[0]));
	m->ids[i] = id;
	m->id_count++;
}

bool sessions__match(const struct dlq_sessions *s, const char *client, const char *topic, struct dlq_sub_match *m)
{
	/* ids[] is read up to id_count only. */
	m->qos = 0;
	m->id_count = 0;
	const struct dlq_session *e = find(s, client);
	if(e == NULL || e->subs_unknown || e->ended) return false;
	/* The filters were checked when they were added (sessions__subscribe),
	 * and the topic is the broker's or the configuration's. */
	bool any = false;
	for(size_t i = 0; i < e->sub_count; i++){
		const struct dlq_sub *sub = &e->subs[i];
		if(!topic__matches_valid(sub->applied, topic)) continue;
		if(!any || sub->qos > m->qos) m->qos = sub->qos;
		add_id(m, sub->identifier);
		any = true;
	}
	return any;
}
