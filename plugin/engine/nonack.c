/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Subscribers that cannot NACK (see nonack.h): the bounded set of clients
 * warned about, and the engine's answer to a subscription of a client
 * without MQTT 5 (dlq__subscribed_without_nack). A plain array: it holds the
 * connected old-protocol subscribers of tracked filters, a handful in any
 * sensible deployment, and a subscription is rare next to a publish.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/dlq.h"
#include "engine/engine.h"
#include "engine/nonack.h"
#include "util/errtext.h"
#include "util/port.h"
#include "util/topic.h"

bool nonack__known(const struct dlq_nonack *s, const char *client)
{
	for(size_t i = 0; i < s->count; i++){
		if(strcmp(s->ids[i], client) == 0) return true;
	}
	return false;
}

int nonack__add(struct dlq_nonack *s, const char *client)
{
	if(s->count >= NONACK_MAX) return ENOSPC;
	if(s->count == s->capacity){
		size_t cap = s->capacity ? s->capacity * 2 : 8;
		char **ids = realloc(s->ids, cap * sizeof(*ids));
		if(ids == NULL) return ENOMEM;
		s->ids = ids;
		s->capacity = cap;
	}
	char *copy = strdup(client);
	if(copy == NULL) return ENOMEM;
	s->ids[s->count++] = copy;
	return 0;
}

void nonack__forget(struct dlq_nonack *s, const char *client)
{
	for(size_t i = 0; i < s->count; i++){
		if(strcmp(s->ids[i], client)) continue;
		free(s->ids[i]);
		s->ids[i] = s->ids[--s->count];
		s->full_noted = false;
		return;
	}
}

void nonack__free(struct dlq_nonack *s)
{
	for(size_t i = 0; i < s->count; i++) free(s->ids[i]);
	free(s->ids);
	memset(s, 0, sizeof(*s));
}

/* The first declared policy whose filter can deliver to filter, or NULL. */
static const struct dlq_policy *overlapping_policy(const struct dlq *d, const char *filter)
{
	for(size_t i = 0; i < d->cfg.policies.count; i++){
		const struct dlq_policy *p = &d->cfg.policies.items[i];
		if(topic__filters_overlap(p->filter, filter)) return p;
	}
	return NULL;
}

static const char *protocol_name(int protocol)
{
	return protocol == 3 ? "MQTT 3.1" : "MQTT 3.1.1";
}

const struct dlq_policy *dlq__subscribed_without_nack(struct dlq *d, const char *client, const char *filter,
		int protocol)
{
	if(client == NULL || filter == NULL) return NULL;
	const char *applied = topic__shared_filter(filter);
	const struct dlq_policy *p = applied ? overlapping_policy(d, applied) : NULL;
	if(p == NULL) return NULL;
	COUNT(d, p, subscribers_without_nack, 1);
	if(nonack__known(&d->nonack, client)) return p;

	int rc = nonack__add(&d->nonack, client);
	if(rc == ENOSPC){
		if(!d->nonack.full_noted){
			port__log(DLQ_LOG_WARNING, "%d clients without MQTT 5 subscribed to tracked filters are "
					"connected: further ones are counted in getStatus (subscribersWithoutNack) but not logged",
					NONACK_MAX);
			d->nonack.full_noted = true;
		}
		return p;
	}
	/* Added, or out of memory for it: warned all the same (then perhaps
	 * again at the next subscription). */
	port__log(DLQ_LOG_WARNING, "client " QFMT " subscribed to " QFMT " with %s: it receives tracked "
			"messages without a dlq-id and cannot NACK them (policy " QFMT ")",
			Q(client), Q(filter), protocol_name(protocol), Q(p->filter));
	return p;
}
