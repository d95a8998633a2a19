/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The letters in hand (see dlqctl.h): the dead letters a connection read
 * and its owner has not settled yet, oldest first. A queue rather than one
 * letter because one read of 2.1's libmosquitto hands over every packet a
 * recv() brought in (tools/cmd_redrive.c says why that matters).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dlqctl.h"

int hand__push(struct hand *h, const struct mosquitto_message *m, const mosquitto_property *props)
{
	if(h->first + h->n == h->cap){
		if(h->first > 0){
			/* Room at the front: the settled letters left it. */
			memmove(h->v, h->v + h->first, h->n * sizeof(*h->v));
			h->first = 0;
		}else{
			size_t cap = h->cap ? 2 * h->cap : 4;
			struct letter *grown = realloc(h->v, cap * sizeof(*grown));
			if(grown == NULL) return ENOMEM;
			h->v = grown;
			h->cap = cap;
		}
	}
	if(letter__decode(&h->v[h->first + h->n], m, props)) return ENOMEM;
	h->n++;
	return 0;
}

struct letter *hand__first(struct hand *h)
{
	return h->n ? &h->v[h->first] : NULL;
}

void hand__drop(struct hand *h)
{
	if(h->n == 0) return;
	letter__free(&h->v[h->first]);
	h->first++;
	h->n--;
	if(h->n == 0) h->first = 0;
}

void hand__free(struct hand *h)
{
	while(h->n) hand__drop(h);
	free(h->v);
	memset(h, 0, sizeof(*h));
}
