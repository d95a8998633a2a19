/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The schedule's binary min-heap (see schedule.h). Each envelope knows its
 * slot (heap_index), so any one can be removed without a search.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/schedule.h"

void schedule__init(struct dlq_schedule *s)
{
	memset(s, 0, sizeof(*s));
}

void schedule__cleanup(struct dlq_schedule *s)
{
	for(size_t i = 0; i < s->count; i++){
		envelope__free(s->heap[i]);
	}
	free(s->heap);
	memset(s, 0, sizeof(*s));
}

/* Earlier due first; equal due times keep their order of arrival. */
static int before(const struct dlq_envelope *a, const struct dlq_envelope *b)
{
	if(a->due_ms != b->due_ms) return a->due_ms < b->due_ms;
	return a->seq < b->seq;
}

static void place(struct dlq_schedule *s, size_t i, struct dlq_envelope *e)
{
	s->heap[i] = e;
	e->heap_index = i;
}

static void sift_up(struct dlq_schedule *s, size_t i)
{
	struct dlq_envelope *e = s->heap[i];
	while(i > 0){
		size_t parent = (i - 1) / 2;
		if(!before(e, s->heap[parent])) break;
		place(s, i, s->heap[parent]);
		i = parent;
	}
	place(s, i, e);
}

static void sift_down(struct dlq_schedule *s, size_t i)
{
	struct dlq_envelope *e = s->heap[i];
	for(;;){
		size_t child = 2 * i + 1;
		if(child >= s->count) break;
		if(child + 1 < s->count && before(s->heap[child + 1], s->heap[child])) child++;
		if(!before(s->heap[child], e)) break;
		place(s, i, s->heap[child]);
		i = child;
	}
	place(s, i, e);
}

int schedule__push(struct dlq_schedule *s, struct dlq_envelope *e)
{
	if(s->count == s->capacity){
		size_t cap = s->capacity ? s->capacity * 2 : 64;
		struct dlq_envelope **h = realloc(s->heap, cap * sizeof(*h));
		if(h == NULL) return ENOMEM;
		s->heap = h;
		s->capacity = cap;
	}
	place(s, s->count++, e);
	sift_up(s, s->count - 1);
	s->bytes += e->bytes;
	gauges__envelope(s->book, e->policy, true, +1, e->bytes);
	return 0;
}

struct dlq_envelope *schedule__peek(const struct dlq_schedule *s)
{
	return s->count ? s->heap[0] : NULL;
}

void schedule__remove(struct dlq_schedule *s, struct dlq_envelope *e)
{
	size_t i = e->heap_index;
	struct dlq_envelope *last = s->heap[--s->count];
	s->bytes -= e->bytes;
	gauges__envelope(s->book, e->policy, true, -1, e->bytes);
	if(i < s->count){
		place(s, i, last);
		/* The moved one may belong above or below its new slot. */
		sift_up(s, i);
		sift_down(s, last->heap_index);
	}
}
