/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The dead-letter store (see letters.h): letters in a hash table by id and
 * in an age list, with a tally per policy of the current table.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/letters.h"
#include "model/policy.h"
#include "util/chains.h"

static uint64_t id_hash(const struct dlq_id *id)
{
	uint64_t h;
	memcpy(&h, id->raw, sizeof(h));
	return chains__mix(h);
}

static uint64_t letter_key(const void *item)
{
	return id_hash(&((const struct dlq_letter *)item)->env->id);
}

/* The index of the policy whose filter is filter in table, or -1. */
long letters__policy_of(const struct dlq_policy_table *table, const char *filter)
{
	if(table == NULL || filter == NULL) return -1;
	for(size_t i = 0; i < table->count; i++){
		if(!strcmp(table->items[i].filter, filter)) return (long)i;
	}
	return -1;
}

/* Counts l in (sign +1) or out of (-1) its policy's tally. A letter
 * counted in is the policy's newest (it is kept, or the tallies are made
 * again oldest first); one counted out, when it was the policy's oldest,
 * hands that on to the next of its policy, found forward from it (l still
 * linked): the walks of a run of removals of a policy's oldest go forward
 * and add up to one walk of the store. */
static void tally(struct dlq_letters *s, struct dlq_letter *l, int sign)
{
	if(l->policy >= 0 && (size_t)l->policy >= s->per_count) return;
	struct dlq_letter_tally *t = l->policy < 0 ? &s->unpoliced : &s->per[l->policy];
	if(sign > 0){
		if(t->count++ == 0) t->oldest = l;
		t->bytes += l->bytes;
		return;
	}
	t->count--;
	t->bytes -= l->bytes;
	if(t->oldest != l) return;
	if(t->count == 0){
		/* Its last letter: nothing to walk to. */
		t->oldest = NULL;
		return;
	}
	struct dlq_letter *n = l->newer;
	while(n && n->policy != l->policy) n = n->newer;
	t->oldest = n;
}

/* The broker name l is tallied under: "" for a letter without one. */
static const char *broker_of(const struct dlq_letter *l)
{
	return l->env->broker ? l->env->broker : "";
}

/* The index of the tally of broker name, or where it would go (*found
 * false): a binary search of the sorted tallies. */
static size_t broker_slot(const struct dlq_letters *s, const char *name, bool *found)
{
	size_t lo = 0, hi = s->broker_count;
	while(lo < hi){
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(s->brokers[mid].name, name);
		if(c == 0){
			*found = true;
			return mid;
		}
		if(c < 0) lo = mid + 1;
		else hi = mid;
	}
	*found = false;
	return lo;
}

/* The tally of broker name, made (empty) when there is none. Returns it,
 * or NULL when out of memory (the store is left as it was). */
static struct dlq_broker_tally *broker_tally(struct dlq_letters *s, const char *name)
{
	bool found;
	size_t i = broker_slot(s, name, &found);
	if(found) return &s->brokers[i];
	if(s->broker_count == s->brokers_cap){
		size_t cap = s->brokers_cap ? s->brokers_cap * 2 : 8;
		struct dlq_broker_tally *b = realloc(s->brokers, cap * sizeof(*b));
		if(b == NULL) return NULL;
		s->brokers = b;
		s->brokers_cap = cap;
	}
	char *copy = strdup(name);
	if(copy == NULL) return NULL;
	memmove(&s->brokers[i + 1], &s->brokers[i], (s->broker_count - i) * sizeof(*s->brokers));
	s->broker_count++;
	s->brokers[i] = (struct dlq_broker_tally){ .name = copy };
	return &s->brokers[i];
}

/* Counts l (still linked) out of its broker's tally. The tally of a
 * broker's last letter goes; when l was its broker's newest, the next one
 * is found older from it: only a letter deleted by id or redriven can be
 * a broker's newest with older ones left (the bounds drop the oldest), so
 * the walk is an operator's, as a list is. */
static void broker_out(struct dlq_letters *s, struct dlq_letter *l)
{
	bool found;
	const char *name = broker_of(l);
	size_t i = broker_slot(s, name, &found);
	if(!found) return;
	struct dlq_broker_tally *t = &s->brokers[i];
	t->count--;
	t->bytes -= l->bytes;
	if(t->count == 0){
		free(t->name);
		memmove(t, t + 1, (s->broker_count - i - 1) * sizeof(*t));
		s->broker_count--;
		return;
	}
	if(t->newest != l) return;
	struct dlq_letter *o = l->older;
	while(o && strcmp(broker_of(o), name)) o = o->older;
	t->newest = o;
}

static int tallies_for(struct dlq_letters *s, const struct dlq_policy_table *table)
{
	free(s->per);
	s->per = NULL;
	s->per_count = 0;
	s->unpoliced = (struct dlq_letter_tally){ 0, 0, NULL };
	size_t n = table ? table->count : 0;
	if(n == 0) return 0;
	s->per = calloc(n, sizeof(*s->per));
	if(s->per == NULL) return ENOMEM;
	s->per_count = n;
	return 0;
}

int letters__init(struct dlq_letters *s, const struct dlq_policy_table *table, uint64_t max_bytes)
{
	memset(s, 0, sizeof(*s));
	s->max_bytes = max_bytes;
	s->next_order = 1;
	return tallies_for(s, table);
}

void letters__free(struct dlq_letter *l)
{
	if(l == NULL) return;
	envelope__free(l->env);
	free(l);
}

void letters__cleanup(struct dlq_letters *s)
{
	struct dlq_letter *l = s->oldest;
	while(l){
		struct dlq_letter *next = l->newer;
		letters__free(l);
		l = next;
	}
	chains__free(&s->index);
	free(s->per);
	for(size_t i = 0; i < s->broker_count; i++){
		free(s->brokers[i].name);
	}
	free(s->brokers);
	memset(s, 0, sizeof(*s));
}

size_t letters__bytes_of(const struct dlq_envelope *e)
{
	/* The envelope, the letter and its slot in the table. */
	return e->bytes + sizeof(struct dlq_letter) + sizeof(struct dlq_letter *);
}

struct dlq_letter *letters__find(const struct dlq_letters *s, const struct dlq_id *id)
{
	for(struct dlq_letter *l = chains__first(&s->index, id_hash(id)); l; l = l->hnext){
		if(!memcmp(l->env->id.raw, id->raw, DLQ_ID_RAW_LEN)) return l;
	}
	return NULL;
}

int letters__adopt(struct dlq_letters *s, struct dlq_envelope *e, const struct dlq_policy_table *table,
		struct dlq_letter **out)
{
	struct dlq_letter *old = letters__find(s, &e->id);
	if(old){
		envelope__free(e);
		*out = old;
		return EEXIST;
	}
	struct dlq_letter *l = calloc(1, sizeof(*l));
	struct dlq_broker_tally *b = NULL;
	if(l == NULL || chains__grow(&s->index, s->count, offsetof(struct dlq_letter, hnext), letter_key)
			|| (b = broker_tally(s, e->broker ? e->broker : "")) == NULL){
		free(l);
		envelope__free(e);
		return ENOMEM;
	}
	e->next = e->prev = NULL;
	e->policy = NULL;
	l->env = e;
	l->order = s->next_order++;
	l->policy = letters__policy_of(table, e->filter);
	l->bytes = letters__bytes_of(e);
	chains__link(&s->index, l, letter_key(l));
	l->older = s->newest;
	if(s->newest) s->newest->newer = l;
	else s->oldest = l;
	s->newest = l;
	s->count++;
	s->bytes += l->bytes;
	tally(s, l, +1);
	b->count++;
	b->bytes += l->bytes;
	b->newest = l;
	*out = l;
	return 0;
}

void letters__remove(struct dlq_letters *s, struct dlq_letter *l)
{
	/* While l is linked: its policy's next oldest is found from it. */
	tally(s, l, -1);
	broker_out(s, l);
	/* A walk at l goes on at the next newer letter: while l still
	 * knows it. */
	for(struct dlq_letter_cursor *c = s->cursors; c; c = c->next){
		if(c->at == l) c->at = l->newer;
	}
	chains__unlink(&s->index, l, letter_key(l));
	if(l->older) l->older->newer = l->newer;
	else s->oldest = l->newer;
	if(l->newer) l->newer->older = l->older;
	else s->newest = l->older;
	l->older = l->newer = l->hnext = NULL;
	if(s->page_end == l) s->page_end = NULL;
	s->count--;
	s->bytes -= l->bytes;
}

int letters__retable(struct dlq_letters *s, const struct dlq_policy_table *table)
{
	int rc = tallies_for(s, table);
	for(struct dlq_letter *l = s->oldest; l; l = l->newer){
		l->policy = rc ? -1 : letters__policy_of(table, l->env->filter);
		tally(s, l, +1);
	}
	return rc;
}

struct dlq_letter_tally letters__tally(const struct dlq_letters *s, size_t i)
{
	if(i >= s->per_count) return (struct dlq_letter_tally){ 0, 0, NULL };
	return s->per[i];
}

struct dlq_letter *letters__oldest_of(const struct dlq_letters *s, size_t i)
{
	return i < s->per_count ? s->per[i].oldest : NULL;
}

bool letters__matches(const struct dlq_letter_match *m, const struct dlq_envelope *e)
{
	if(m->filter && strcmp(m->filter, e->filter ? e->filter : "")) return false;
	if(m->dead_letter && strcmp(m->dead_letter, e->topic)) return false;
	if(m->reason && (e->reason == NULL || strstr(e->reason, m->reason) == NULL)) return false;
	if(m->broker && (e->broker == NULL || strcmp(m->broker, e->broker))) return false;
	if(m->cause_given && e->cause != m->cause) return false;
	if(m->since_given && e->time_ms < m->since) return false;
	if(m->until_given && e->time_ms > m->until) return false;
	return true;
}

void letters__track(struct dlq_letters *s, struct dlq_letter_cursor *c)
{
	letters__track_at(s, c, s->oldest);
}

void letters__track_at(struct dlq_letters *s, struct dlq_letter_cursor *c, struct dlq_letter *at)
{
	c->at = at;
	c->next = s->cursors;
	s->cursors = c;
}

void letters__untrack(struct dlq_letters *s, struct dlq_letter_cursor *c)
{
	for(struct dlq_letter_cursor **p = &s->cursors; *p; p = &(*p)->next){
		if(*p == c){
			*p = c->next;
			break;
		}
	}
	c->next = NULL;
	c->at = NULL;
}
