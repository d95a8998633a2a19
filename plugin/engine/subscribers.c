/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Subscriptions the engine warns about (see dlq.h): a client without MQTT 5
 * subscribed to a tracked filter (it cannot NACK), and a subscription that
 * takes in dead letters as well as tracked messages. Each is counted, and
 * logged once per connection (per client, or per client and filter) while
 * the bounded sets of model/nonack.h and model/deadsubs.h have room.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/dlq.h"
#include "engine/engine.h"
#include "util/errtext.h"
#include "util/port.h"
#include "util/topic.h"

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
