/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Subscribers of dead letters (see deadsubs.h): the matching of a
 * subscription against the policy table, the bounded set of (client,
 * filter) pairs already logged, and the engine's answer to a subscription
 * (dlq__subscribed_to_dead_letters). A plain array, as in nonack.c: such
 * subscriptions are mistakes, a handful at most, and a subscription is rare
 * next to a publish.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/deadsubs.h"
#include "engine/dlq.h"
#include "engine/engine.h"
#include "util/errtext.h"
#include "util/port.h"
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

bool dlq__subscribed_to_dead_letters(struct dlq *d, const char *client, const char *filter)
{
	const char *dl, *pf;
	if(client == NULL || filter == NULL) return false;
	if(!deadsubs__match(&d->cfg.policies, filter, &dl, &pf)) return false;
	d->counters.subscribers_of_dead_letters++;
	if(deadsubs__known(&d->deadsubs, client, filter)) return true;

	int rc = deadsubs__add(&d->deadsubs, client, filter);
	if(rc == ENOSPC){
		if(!d->deadsubs.full_noted){
			port__log(DLQ_LOG_WARNING, "%d subscriptions that take in dead letters and tracked messages are "
					"logged: further ones are counted in getStatus (subscribersOfDeadLetters) but not logged",
					DEADSUBS_MAX);
			d->deadsubs.full_noted = true;
		}
		return true;
	}
	/* Added, or out of memory for it: warned all the same (then perhaps
	 * again at the next such subscription). */
	port__log(DLQ_LOG_WARNING, "client " QFMT " subscribed to " QFMT ", which takes in the dead-letter topic "
			QFMT " as well as messages of policy " QFMT ": it receives dead letters as new deliveries",
			Q(client), Q(filter), Q(dl), Q(pf));
	return true;
}
