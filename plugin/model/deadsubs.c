/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Subscribers of dead letters (see deadsubs.h): the matching of a
 * subscription against the policy table, the bounded set of (client,
 * filter) pairs already logged; the engine's answer to a subscription is
 * engine/subscribers.c. A plain array, as in nonack.c: such
 * subscriptions are mistakes, a handful at most, and a subscription is rare
 * next to a publish.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/deadsubs.h"
#include "util/topic.h"

bool deadsubs__match(const struct dlq_policy_table *t, const char *filter, const char **dead_letter,
		const char **policy_filter)
{
	const char *applied = filter ? topic__shared_filter(filter) : NULL;
	if(applied == NULL || !topic__valid_filter(applied)) return false;
	const char *dl = NULL, *pf = NULL;
	for(size_t i = 0; i < t->count && (dl == NULL || pf == NULL); i++){
		const struct dlq_policy *p = &t->items[i];
		if(dl == NULL && p->dead_letter && topic__matches(applied, p->dead_letter)) dl = p->dead_letter;
		if(pf == NULL && topic__filters_overlap(p->filter, applied)) pf = p->filter;
	}
	if(dl == NULL || pf == NULL) return false;
	*dead_letter = dl;
	*policy_filter = pf;
	return true;
}

bool deadsubs__known(const struct dlq_deadsubs *s, const char *client, const char *filter)
{
	for(size_t i = 0; i < s->count; i++){
		if(!strcmp(s->items[i].client, client) && !strcmp(s->items[i].filter, filter)) return true;
	}
	return false;
}

int deadsubs__add(struct dlq_deadsubs *s, const char *client, const char *filter)
{
	if(s->count >= DEADSUBS_MAX) return ENOSPC;
	if(s->count == s->capacity){
		size_t cap = s->capacity ? s->capacity * 2 : 8;
		struct dlq_deadsub *items = realloc(s->items, cap * sizeof(*items));
		if(items == NULL) return ENOMEM;
		s->items = items;
		s->capacity = cap;
	}
	char *c = strdup(client);
	char *f = strdup(filter);
	if(c == NULL || f == NULL){
		free(c);
		free(f);
		return ENOMEM;
	}
	s->items[s->count++] = (struct dlq_deadsub){ .client = c, .filter = f };
	return 0;
}

void deadsubs__forget(struct dlq_deadsubs *s, const char *client)
{
	size_t i = 0;
	while(i < s->count){
		if(strcmp(s->items[i].client, client)){
			i++;
			continue;
		}
		free(s->items[i].client);
		free(s->items[i].filter);
		s->items[i] = s->items[--s->count];
		s->full_noted = false;
	}
}

void deadsubs__free(struct dlq_deadsubs *s)
{
	for(size_t i = 0; i < s->count; i++){
		free(s->items[i].client);
		free(s->items[i].filter);
	}
	free(s->items);
	memset(s, 0, sizeof(*s));
}
