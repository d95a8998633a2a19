/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A kept dead letter redriven by an operator: published again, tracked
 * again where a policy takes its topic, and only then let go of. The rest
 * of the dead-letter store (keep, bound, find, list, delete) is
 * letter_store.c, beneath the outbound path; a redrive publishes through
 * that path, which keeps dead letters in the store, so it sits above both
 * (a circle otherwise). Access is the caller's to check
 * (letter_store__may_read, letter_store__may_write).
 */
#include <errno.h>
#include <string.h>

#include "engine/dlq.h"
#include "engine/engine.h"
#include "engine/letter_store.h"
#include "engine/outbound.h"
#include "util/errtext.h"
#include "util/port.h"

int dlq__redrive_letter(struct dlq *d, struct dlq_letter *l, const char *topic, const char *client, bool quiet,
		struct dlq_redrive_result *res)
{
	memset(res, 0, sizeof(*res));
	const struct dlq_envelope *dl = l->env;
	const char *to = topic ? topic : dl->origin_topic;
	const struct dlq_policy *p = dlq__policy_for(d, to);
	/* A topic no policy takes: published, not tracked; the envelope still
	 * names the letter's filter and dead-letter topic, which a state file
	 * needs of every envelope. */
	struct dlq_envelope *e = envelope__new(DLQ_ENV_RETRY_COPY, NULL, to, dl->origin_topic,
			p ? p->filter : dl->filter, p ? p->dead_letter : dl->dead_letter, NULL, client, NULL,
			dl->payload, dl->payload_len, dl->headers, dl->headers_len);
	if(e == NULL) return ENOMEM;
	if(p && id__gen_next(&d->idgen, &e->id)){
		envelope__free(e);
		return EIO;
	}
	e->origin_id = dl->origin_id;
	e->policy = p;
	e->qos = dl->qos;
	e->retry_count = 0; /* a new chain: the copy is its first delivery */
	e->time_ms = port__wall_ms();
	e->redriven = true;
	e->seq = d->next_seq++;
	int rc = outbound__publish(d, e);
	if(rc){
		/* Never a targeted copy, so never handed elsewhere: refused. */
		envelope__free(e);
		return rc;
	}
	/* Before the letter leaves: after a crash the copy is published again
	 * rather than lost, at worst beside the letter still kept. */
	store_port__add(&d->store, e, false);
	res->tracked = p != NULL;
	if(p) id__encode(&e->id, res->dlq_id);
	char id[DLQ_ID_LEN + 1];
	id__encode(&dl->id, id);
	port__log(quiet ? DLQ_LOG_DEBUG : DLQ_LOG_NOTICE, "dead letter %s redriven to " QFMT " by " QFMT "%s", id, Q(to), Q(client),
			p ? "" : " (no policy takes that topic: not tracked)");
	letter_store__delete(d, l);
	return 0;
}
