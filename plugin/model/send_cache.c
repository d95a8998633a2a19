/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Which record a send is of (see send_cache.h): a slot per 12-bit id
 * prefix.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/send_cache.h"

int send_cache__init(struct dlq_send_cache *c)
{
	c->slots = calloc(SEND_CACHE_SLOTS, sizeof(*c->slots));
	return c->slots ? 0 : ENOMEM;
}

void send_cache__cleanup(struct dlq_send_cache *c)
{
	free(c->slots);
	c->slots = NULL;
}

void send_cache__remember(struct dlq_send_cache *c, struct dlq_record *r, const char *id, const void *topic,
		const void *payload)
{
	if(c->slots == NULL) return;
	struct dlq_send_slot *s = &c->slots[id__prefix12(&r->id)];
	s->record = r;
	s->topic = topic;
	s->payload = payload;
	memcpy(s->id, id, DLQ_ID_LEN);
}
