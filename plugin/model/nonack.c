/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Subscribers that cannot NACK (see nonack.h): the bounded set of clients
 * warned about; the engine's answer to a subscription of a client without
 * MQTT 5 is engine/subscribers.c. A plain array: it holds the
 * connected old-protocol subscribers of tracked filters, a handful in any
 * sensible deployment, and a subscription is rare next to a publish.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/nonack.h"

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
