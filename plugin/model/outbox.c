/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The outbox's two lists (see outbox.h) and their byte count. What moves
 * between them, and when, is the engine's decision (engine/outbound.c, engine/tick.c).
 */
#include <string.h>

#include "model/outbox.h"

void outbox__init(struct dlq_outbox *o)
{
	memset(o, 0, sizeof(*o));
}

void outbox__free_list(struct dlq_outbox *o, struct dlq_envelope_list *list)
{
	struct dlq_envelope *e = list->head;
	while(e){
		struct dlq_envelope *next = e->next;
		o->bytes -= e->bytes;
		gauges__envelope(o->book, e->policy, false, -1, e->bytes);
		envelope__free(e);
		e = next;
	}
	memset(list, 0, sizeof(*list));
}

void outbox__move_all(struct dlq_envelope_list *to, struct dlq_envelope_list *from)
{
	if(from->head == NULL) return;
	if(to->tail){
		to->tail->next = from->head;
		from->head->prev = to->tail;
	}else{
		to->head = from->head;
	}
	to->tail = from->tail;
	to->count += from->count;
	memset(from, 0, sizeof(*from));
}

void outbox__cleanup(struct dlq_outbox *o)
{
	outbox__free_list(o, &o->owed);
	outbox__free_list(o, &o->sent);
	outbox__free_list(o, &o->settling);
	o->bytes = 0;
}

void outbox__push(struct dlq_outbox *o, struct dlq_envelope_list *list, struct dlq_envelope *e)
{
	e->next = NULL;
	e->prev = list->tail;
	if(list->tail){
		list->tail->next = e;
	}else{
		list->head = e;
	}
	list->tail = e;
	list->count++;
	o->bytes += e->bytes;
	gauges__envelope(o->book, e->policy, false, +1, e->bytes);
}

void outbox__unlink(struct dlq_outbox *o, struct dlq_envelope_list *list, struct dlq_envelope *e)
{
	if(e->prev){
		e->prev->next = e->next;
	}else{
		list->head = e->next;
	}
	if(e->next){
		e->next->prev = e->prev;
	}else{
		list->tail = e->prev;
	}
	e->next = NULL;
	e->prev = NULL;
	list->count--;
	o->bytes -= e->bytes;
	gauges__envelope(o->book, e->policy, false, -1, e->bytes);
}
