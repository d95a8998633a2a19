/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A redrive request on an edge (issue 39, "Redrive home"): a dead letter
 * this broker made, kept at a central broker and redriven there, that the
 * centre published on this broker's home topic and this broker's bridge
 * carried in on plugin_opt_redrive_from's topic. It is read back as a
 * collected letter is (model/collected.h) and redriven here as a local
 * redrive is: to its origin topic, a new chain where a policy takes it,
 * and out of this broker's store if still kept. Only a request from the
 * configured client (the bridge's local client id) that is a dead letter
 * of this broker is taken; anything else is refused with a warning, and
 * nothing is published. The message itself goes on to its subscribers as
 * any other: the plugin changes nothing of who may read what.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engine/dlq.h"
#include "engine/engine.h"
#include "engine/letter_store.h"
#include "model/collected.h"
#include "util/errtext.h"
#include "util/port.h"

bool dlq__redrive_requested(const struct dlq *d, const char *topic)
{
	return d->cfg.redrive.from_topic && !strcmp(d->cfg.redrive.from_topic, topic);
}

static void refuse(const struct dlq_collected_msg *m, const char *why)
{
	port__log(DLQ_LOG_WARNING, "the redrive request on " QFMT " from " QFMT " is refused (plugin_opt_redrive_from): "
			"%s; nothing redriven", Q(m->topic), Q(m->client ? m->client : ""), why);
}

void dlq__redrive_request(struct dlq *d, const struct dlq_collected_msg *m)
{
	char why[512];
	const char *from = d->cfg.redrive.from_client;
	if(m->client == NULL || strcmp(m->client, from)){
		errtext__set(why, sizeof(why), "it does not come from " QFMT ", the bridge that carries requests in", Q(from));
		refuse(m, why);
		return;
	}
	struct dlq_envelope *e;
	int rc = collected__letter(m->topic, m->payload, m->payload_len, m->qos, m->headers, m->headers_len, &e, why,
			sizeof(why));
	if(rc == ENOMEM){
		port__log(DLQ_LOG_ERR, "out of memory: the redrive request on " QFMT " is not redriven", Q(m->topic));
		return;
	}
	if(rc){
		char no[600];
		errtext__set(no, sizeof(no), "no dead letter: %s", why);
		refuse(m, no);
		return;
	}
	char id[DLQ_ID_LEN + 1];
	id__encode(&e->id, id);
	if(strcmp(e->broker, d->cfg.broker_name)){
		errtext__set(why, sizeof(why), "the dead letter %s of broker \"%s\", not of this broker \"%s\"", id, e->broker,
				d->cfg.broker_name);
		refuse(m, why);
		envelope__free(e);
		return;
	}
	/* Still kept here: this broker's own copy goes, as a local redrive's. */
	struct dlq_letter *l = letter_store__find(d, &e->id);
	if(l && l->env->broker && strcmp(l->env->broker, d->cfg.broker_name)) l = NULL;
	struct dlq_redrive_result res;
	rc = l ? dlq__redrive_letter(d, l, NULL, m->client, false, &res) : dlq__redrive_envelope(d, e, m->client, &res);
	if(rc){
		port__log(DLQ_LOG_WARNING, "the redrive request on " QFMT " for dead letter %s is not redriven: %s", Q(m->topic),
				id, rc == EIO ? "the random source failed (no dlq-id)" : strerror(rc));
	}
	envelope__free(e);
}
