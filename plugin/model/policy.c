/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The policy table (see policy.h): collecting policies, validating them as a
 * whole, and the match index. The index is a trie over filter levels: a node
 * keeps its literal children in an array sorted by level for binary search,
 * one '+' child, the policy whose filter ends at the node and the policy whose
 * filter is the node's path followed by '#'. Matching a topic walks the levels
 * of the topic, trying the literal child and the '+' child, so it costs about
 * levels * log(children) (times the few '+' branches that match) and
 * allocates nothing.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/policy.h"
#include "mosquitto_dlq.h"
#include "util/errtext.h"
#include "util/topic.h"

#define NONE SIZE_MAX

/* Nodes live in one array and name each other by index, so that growing the
 * array moves nothing that is pointed at, and freeing needs no recursion: a
 * filter may have tens of thousands of levels. */
struct trie_node {
	const char *level;  /* borrowed from a policy's filter, not terminated */
	size_t level_len;
	size_t *children;   /* owned; literal children, sorted by level */
	size_t child_count;
	size_t child_cap;
	size_t plus;        /* the '+' child, or NONE */
	size_t parent;      /* NONE for the root, node 0 */
	size_t exact;       /* policy whose filter ends here, or NONE */
	size_t hash;        /* policy whose filter is this path + "/#", or NONE */
};

struct policy_trie {
	struct trie_node *nodes; /* owned */
	size_t count;
	size_t cap;
	size_t *filter_len;      /* owned; strlen of each policy's filter */
};

static void trie_free(struct policy_trie *trie)
{
	if(trie == NULL) return;
	for(size_t i = 0; i < trie->count; i++){
		free(trie->nodes[i].children);
	}
	free(trie->nodes);
	free(trie->filter_len);
	free(trie);
}

/* Appends a node; returns its index or NONE when out of memory. */
static size_t node_new(struct policy_trie *trie, size_t parent, const char *level, size_t level_len)
{
	struct trie_node *n;

	if(trie->count == trie->cap){
		size_t cap = trie->cap ? trie->cap * 2 : 64;
		n = realloc(trie->nodes, cap * sizeof(*n));
		if(n == NULL) return NONE;
		trie->nodes = n;
		trie->cap = cap;
	}
	n = &trie->nodes[trie->count];
	memset(n, 0, sizeof(*n));
	n->level = level;
	n->level_len = level_len;
	n->plus = NONE;
	n->parent = parent;
	n->exact = NONE;
	n->hash = NONE;
	return trie->count++;
}

static int level_cmp(const struct trie_node *n, const char *level, size_t len)
{
	int c = memcmp(n->level, level, n->level_len < len ? n->level_len : len);

	if(c) return c;
	return (n->level_len > len) - (n->level_len < len);
}

/* Position in node's children of the child with this level, or where it
 * would go (*found false). */
static size_t child_search(const struct policy_trie *trie, size_t node, const char *level, size_t len, bool *found)
{
	const struct trie_node *n = &trie->nodes[node];
	size_t lo = 0;
	size_t hi = n->child_count;

	while(lo < hi){
		size_t mid = lo + (hi - lo) / 2;
		int c = level_cmp(&trie->nodes[n->children[mid]], level, len);
		if(c == 0){
			*found = true;
			return mid;
		}
		if(c < 0){
			lo = mid + 1;
		}else{
			hi = mid;
		}
	}
	*found = false;
	return lo;
}

/* The child of node for this level ('+' included), created if missing;
 * NONE when out of memory. */
static size_t child_get(struct policy_trie *trie, size_t node, const char *level, size_t len)
{
	bool found;
	size_t at;
	size_t c;

	if(len == 1 && level[0] == '+'){
		if(trie->nodes[node].plus == NONE){
			c = node_new(trie, node, level, len);
			if(c == NONE) return NONE;
			trie->nodes[node].plus = c;
		}
		return trie->nodes[node].plus;
	}
	at = child_search(trie, node, level, len, &found);
	if(found) return trie->nodes[node].children[at];

	struct trie_node *n = &trie->nodes[node];
	if(n->child_count == n->child_cap){
		size_t cap = n->child_cap ? n->child_cap * 2 : 2;
		size_t *ch = realloc(n->children, cap * sizeof(*ch));
		if(ch == NULL) return NONE;
		n->children = ch;
		n->child_cap = cap;
	}
	c = node_new(trie, node, level, len);
	if(c == NONE) return NONE;
	n = &trie->nodes[node]; /* node_new may have moved the array */
	memmove(&n->children[at+1], &n->children[at], (n->child_count - at) * sizeof(*n->children));
	n->children[at] = c;
	n->child_count++;
	return c;
}

/* Puts policy i into the trie. Returns 0, ENOMEM, or EEXIST with *other set
 * to the policy that already has the same filter. */
static int trie_insert(struct policy_trie *trie, const struct dlq_policy_table *t, size_t i, size_t *other)
{
	const char *f = t->items[i].filter;
	size_t node = 0;
	size_t *slot;

	for(;;){
		size_t len = strcspn(f, "/");
		if(len == 1 && f[0] == '#'){
			slot = &trie->nodes[node].hash;
			break;
		}
		node = child_get(trie, node, f, len);
		if(node == NONE) return ENOMEM;
		if(f[len] == '\0'){
			slot = &trie->nodes[node].exact;
			break;
		}
		f += len + 1;
	}
	if(*slot != NONE){
		*other = *slot;
		return EEXIST;
	}
	*slot = i;
	return 0;
}

struct insert_order {
	const char *filter; /* borrowed from the table */
	size_t index;
};

/* Orders filters level by level, as the trie orders children: a level ends
 * ('/' or the end of the string) before any byte that would continue it.
 * Equal filters stay in declaration order. */
static int order_cmp(const void *va, const void *vb)
{
	const struct insert_order *a = va;
	const struct insert_order *b = vb;
	const unsigned char *x = (const unsigned char *)a->filter;
	const unsigned char *y = (const unsigned char *)b->filter;

	while(*x && *x == *y){
		x++;
		y++;
	}
	if(*x != *y){
		unsigned kx = *x == '\0' ? 0u : *x == '/' ? 1u : *x + 2u;
		unsigned ky = *y == '\0' ? 0u : *y == '/' ? 1u : *y + 2u;
		return kx < ky ? -1 : 1;
	}
	return (a->index > b->index) - (a->index < b->index);
}

/* True if policy a takes precedence over policy b (NONE: no policy yet). */
static bool better(const struct dlq_policy_table *t, size_t a, size_t b)
{
	if(b == NONE) return true;
	const struct dlq_policy *pa = &t->items[a];
	const struct dlq_policy *pb = &t->items[b];
	const size_t *len = t->trie->filter_len;

	if(pa->wildcards != pb->wildcards) return pa->wildcards < pb->wildcards;
	if(len[a] != len[b]) return len[a] > len[b];
	return pa->index < pb->index;
}

/* The start of the level after the one at level, or NULL if it is the last. */
static const char *level_next(const char *level, const char *end)
{
	const char *slash = memchr(level, '/', (size_t)(end - level));

	return slash ? slash + 1 : NULL;
}

/* The inverse of level_next: the start of the level before next (NULL: the
 * level before the end). */
static const char *level_prev(const char *next, const char *topic, const char *end)
{
	const char *p = next ? next - 1 : end;

	while(p > topic && p[-1] != '/') p--;
	return p;
}

int policy__table_add(struct dlq_policy_table *t, struct dlq_policy *p)
{
	if(t->count == t->capacity){
		size_t cap = t->capacity ? t->capacity * 2 : 8;
		if(cap > UINT_MAX) return ENOMEM; /* index is an unsigned */
		struct dlq_policy *items = realloc(t->items, cap * sizeof(*items));
		if(items == NULL) return ENOMEM;
		t->items = items;
		t->capacity = cap;
	}
	/* A table that changed must be finished again before it matches. */
	trie_free(t->trie);
	t->trie = NULL;

	p->index = (unsigned)t->count;
	p->wildcards = topic__wildcards(p->filter);
	t->items[t->count++] = *p;
	memset(p, 0, sizeof(*p));
	return 0;
}

static const char *source_of(const struct dlq_policy *p)
{
	return p->source ? p->source : "policy";
}

/* Each policy on its own: the parsers check this already, but the trie
 * relies on it, so a table built by hand is checked too. */
static int check_one(const struct dlq_policy *p, char *err, size_t errlen)
{
	const char *src = source_of(p);

	if(!topic__valid_filter(p->filter)){
		errtext__set(err, errlen, "%s: \"%s\" is not a valid topic filter", src, p->filter ? p->filter : "");
		return EINVAL;
	}
	if(!topic__valid_publish(p->dead_letter) || p->dead_letter[0] == '$'){
		errtext__set(err, errlen, "%s: dead_letter \"%s\" is not a valid topic outside '$'", src, p->dead_letter ? p->dead_letter : "");
		return EINVAL;
	}
	if(p->retry_to && (!topic__valid_publish(p->retry_to) || p->retry_to[0] == '$')){
		errtext__set(err, errlen, "%s: retry_to \"%s\" is not a valid topic outside '$'", src, p->retry_to);
		return EINVAL;
	}
	if(p->max_attempts < DLQ_MAX_ATTEMPTS_MIN || p->max_attempts > DLQ_MAX_ATTEMPTS_MAX){
		errtext__set(err, errlen, "%s: max_attempts must be an integer from %d to %d, got %u",
				src, DLQ_MAX_ATTEMPTS_MIN, DLQ_MAX_ATTEMPTS_MAX, p->max_attempts);
		return EINVAL;
	}
	if(!(p->retry_backoff >= 1.0 && p->retry_backoff <= DLQ_RETRY_BACKOFF_MAX)){
		errtext__set(err, errlen, "%s: retry_backoff must be a number from 1 to %g, got %g", src, DLQ_RETRY_BACKOFF_MAX, p->retry_backoff);
		return EINVAL;
	}
	if(!(p->retry_jitter >= 0.0 && p->retry_jitter <= 1.0)){
		errtext__set(err, errlen, "%s: retry_jitter must be a number from 0 to 1, got %g", src, p->retry_jitter);
		return EINVAL;
	}
	if(p->retry_max_delay_ms == 0 || p->retry_delay_ms > p->retry_max_delay_ms){
		errtext__set(err, errlen, "%s: retry_delay (%llu ms) must not exceed retry_max_delay (%llu ms), which must not be zero",
				src, (unsigned long long)p->retry_delay_ms, (unsigned long long)p->retry_max_delay_ms);
		return EINVAL;
	}
	return 0;
}

void policy__set_defaults(struct dlq_policy *p)
{
	p->retry_delay_ms = 0;
	p->retry_max_delay_ms = DLQ_DEFAULT_RETRY_MAX_DELAY_MS;
	p->retry_backoff = 1.0;
	p->retry_jitter = 0.0;
	p->dead_letter_keep = DLQ_KEEP_UNSET;
	p->dead_letter_keep_for_ms = DLQ_KEEP_FOR_UNSET;
}

uint64_t policy__retry_delay_ms(const struct dlq_policy *p, unsigned attempt, int64_t requested_ms, double random)
{
	uint64_t cap = p->retry_max_delay_ms;
	if(requested_ms >= 0){
		return (uint64_t)requested_ms < cap ? (uint64_t)requested_ms : cap;
	}
	if(p->retry_delay_ms == 0) return 0;
	/* Multiplying step by step stops at the cap, so a large attempt
	 * cannot overflow; the result is clamped in integers, since a double
	 * near 2^64 does not round-trip. */
	double d = (double)p->retry_delay_ms;
	for(unsigned i = 1; i < attempt && d < (double)cap; i++){
		d *= p->retry_backoff;
	}
	if(d > (double)cap) d = (double)cap;
	d -= d * p->retry_jitter * random;
	if(!(d < (double)cap)) return cap;
	return d > 0 ? (uint64_t)d : 0;
}

int policy__table_finish(struct dlq_policy_table *t, char *err, size_t errlen)
{
	struct policy_trie *trie = NULL;
	struct insert_order *order = NULL;
	size_t dup = NONE;
	size_t dup_of = NONE;
	int rc;

	trie_free(t->trie);
	t->trie = NULL;
	for(size_t i = 0; i < t->count; i++){
		rc = check_one(&t->items[i], err, errlen);
		if(rc) return rc;
	}

	trie = calloc(1, sizeof(*trie));
	if(trie == NULL || node_new(trie, NONE, "", 0) == NONE) goto oom;
	trie->filter_len = malloc((t->count ? t->count : 1) * sizeof(*trie->filter_len));
	if(trie->filter_len == NULL) goto oom;

	/* Inserting in level order appends each new child at the end of its
	 * parent's array instead of shifting it, which matters with thousands
	 * of siblings. Of several duplicates, the one declared first after its
	 * original is reported. */
	order = malloc((t->count ? t->count : 1) * sizeof(*order));
	if(order == NULL) goto oom;
	for(size_t i = 0; i < t->count; i++){
		order[i].filter = t->items[i].filter;
		order[i].index = i;
		trie->filter_len[i] = strlen(t->items[i].filter);
	}
	qsort(order, t->count, sizeof(*order), order_cmp);
	for(size_t k = 0; k < t->count; k++){
		size_t i = order[k].index;
		size_t other;
		rc = trie_insert(trie, t, i, &other);
		if(rc == ENOMEM) goto oom;
		if(rc == EEXIST && (dup == NONE || i < dup)){
			dup = i;
			dup_of = other;
		}
	}
	free(order);
	order = NULL;
	if(dup != NONE){
		errtext__set(err, errlen, "duplicate policy filter \"%s\": %s repeats %s",
				t->items[dup].filter, source_of(&t->items[dup]), source_of(&t->items[dup_of]));
		trie_free(trie);
		return EINVAL;
	}
	t->trie = trie;

	/* A dead letter that a policy tracked could be NACKed into a chain of
	 * its own; the index answers "is it matched" for each in log time. */
	for(size_t i = 0; i < t->count; i++){
		const struct dlq_policy *p = &t->items[i];
		const struct dlq_policy *m = policy__match(t, p->dead_letter);
		if(m){
			errtext__set(err, errlen, "dead-letter topic \"%s\" of policy \"%s\" (%s) is matched by policy filter \"%s\" (%s): "
					"dead letters must lie outside every tracked filter",
					p->dead_letter, p->filter, source_of(p), m->filter, source_of(m));
			trie_free(t->trie);
			t->trie = NULL;
			return EINVAL;
		}
	}
	return 0;

oom:
	free(order);
	trie_free(trie);
	errtext__set(err, errlen, "out of memory");
	return ENOMEM;
}

/* A depth-first walk of every trie node whose path matches a prefix of the
 * topic's levels, literal child before '+' child, without recursion or
 * allocation: a node's parent index and the topic itself tell where to go
 * back to. A branch with more '+' levels than the best match so far cannot
 * win and is not entered. */
const struct dlq_policy *policy__match(const struct dlq_policy_table *t, const char *topic)
{
	enum { ENTER, TRY_PLUS, LEAVE } step = ENTER;
	const struct trie_node *nodes;
	const char *end;
	const char *next;   /* the level the current node's children match, or NULL */
	size_t cur = 0;
	size_t best = NONE;
	unsigned plus = 0;  /* '+' levels on the path to cur */
	bool dollar;

	if(t == NULL || t->trie == NULL || t->trie->count == 0 || topic == NULL || topic[0] == '\0') return NULL;
	nodes = t->trie->nodes;
	end = topic + strlen(topic);
	next = topic;
	/* A filter starting with a wildcard matches no topic starting with '$'. */
	dollar = topic[0] == '$';

	for(;;){
		const struct trie_node *n = &nodes[cur];
		bool wild_ok = !(cur == 0 && dollar);

		if(step == ENTER){
			step = TRY_PLUS;
			if(best != NONE && plus > t->items[best].wildcards){
				step = LEAVE;
				continue;
			}
			/* "a/#" matches "a" and everything below it. */
			if(wild_ok && n->hash != NONE && better(t, n->hash, best)) best = n->hash;
			if(next == NULL){
				if(n->exact != NONE && better(t, n->exact, best)) best = n->exact;
				step = LEAVE;
				continue;
			}
			const char *after = level_next(next, end);
			size_t len = (size_t)((after ? after - 1 : end) - next);
			bool found;
			size_t at = child_search(t->trie, cur, next, len, &found);
			if(found){
				cur = n->children[at];
				next = after;
				step = ENTER;
			}
		}else if(step == TRY_PLUS){
			step = LEAVE;
			if(wild_ok && n->plus != NONE){
				cur = n->plus;
				next = level_next(next, end);
				plus++;
				step = ENTER;
			}
		}else{
			if(cur == 0) break;
			next = level_prev(next, topic, end);
			/* Back from the literal child, the '+' child is still to try. */
			step = nodes[n->parent].plus == cur ? LEAVE : TRY_PLUS;
			if(step == LEAVE) plus--;
			cur = n->parent;
		}
	}
	return best == NONE ? NULL : &t->items[best];
}

void policy__free(struct dlq_policy *p)
{
	if(p == NULL) return;
	free(p->filter);
	free(p->dead_letter);
	free(p->retry_to);
	free(p->ack_timeout);
	free(p->source);
	memset(p, 0, sizeof(*p));
}

enum policy_takes policy__takes(const struct dlq_policy_table *t, const char *filter, const struct dlq_policy **by)
{
	for(size_t k = 0; k < t->count; k++){
		*by = &t->items[k];
		if(topic__filters_overlap(filter, t->items[k].filter)) return POLICY_TAKES_FILTER;
		if(topic__matches(filter, t->items[k].dead_letter)) return POLICY_TAKES_DEAD_LETTER;
	}
	*by = NULL;
	return POLICY_TAKES_NOTHING;
}

void policy__table_free(struct dlq_policy_table *t)
{
	if(t == NULL) return;
	trie_free(t->trie);
	for(size_t i = 0; i < t->count; i++){
		policy__free(&t->items[i]);
	}
	free(t->items);
	memset(t, 0, sizeof(*t));
}
