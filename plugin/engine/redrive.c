/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A kept dead letter redriven by an operator: published again, tracked
 * again where a policy takes its topic, and only then let go of. The rest
 * of the dead-letter store (keep, bound, find, list, delete) is
 * letter_store.c, beneath the outbound path; a redrive publishes through
 * that path, which keeps dead letters in the store, so it sits above both
 * (a circle otherwise). Access is the caller's to check
 * (letter_store__may_read, letter_store__may_write).
 *
 * A letter another broker made, collected here, goes home instead when
 * plugin_opt_redrive_home is set and no topic is given: published as it
 * is kept on its home topic, for its broker's bridge to carry it to the
 * broker that made it (redrive_request.c there publishes it to its origin
 * topic). This broker cannot tell whether it arrived: it was sent.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engine/dlq.h"
#include "engine/engine.h"
#include "engine/letter_store.h"
#include "engine/outbound.h"
#include "util/errtext.h"
#include "util/port.h"

/* Whether a redrive of letter dl to topic (NULL: none given) sends it
 * home. */
static bool goes_home(const struct dlq *d, const struct dlq_envelope *dl, const char *topic)
{
	return topic == NULL && d->cfg.redrive.home && dl->broker && strcmp(dl->broker, d->cfg.broker_name);
}

const char *dlq__redrive_target(const struct dlq *d, const struct dlq_letter *l, const char *topic,
		char home[DLQ_HOME_TOPIC_MAX])
{
	if(topic) return topic;
	if(!goes_home(d, l->env, NULL)) return l->env->origin_topic;
	redrive_paths__home_topic(&d->cfg.redrive, l->env->broker, home);
	return home;
}

/* Publishes letter dl again to topic (NULL: its origin topic) as a new
 * chain (see dlq__redrive_letter); dl stays the caller's. */
static int publish_again(struct dlq *d, const struct dlq_envelope *dl, const char *topic, const char *client,
		bool quiet, struct dlq_redrive_result *res)
{
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
	return 0;
}

/* Sends l home (goes_home), then lets it go. */
static int send_home(struct dlq *d, struct dlq_letter *l, const char *client, bool quiet,
		struct dlq_redrive_result *res)
{
	char topic[DLQ_HOME_TOPIC_MAX];
	redrive_paths__home_topic(&d->cfg.redrive, l->env->broker, topic);
	int rc = outbound__send_home(d, l->env, topic);
	if(rc) return rc;
	res->home = true;
	snprintf(res->broker, sizeof(res->broker), "%s", l->env->broker);
	snprintf(res->topic, sizeof(res->topic), "%s", topic);
	char id[DLQ_ID_LEN + 1];
	id__encode(&l->env->id, id);
	port__log(quiet ? DLQ_LOG_DEBUG : DLQ_LOG_NOTICE, "dead letter %s sent home to \"%s\" on " QFMT " by " QFMT
			" (plugin_opt_redrive_home; sent, not known to have arrived)", id, res->broker, Q(topic), Q(client));
	letter_store__delete(d, l);
	return 0;
}

int dlq__redrive_letter(struct dlq *d, struct dlq_letter *l, const char *topic, const char *client, bool quiet,
		struct dlq_redrive_result *res)
{
	memset(res, 0, sizeof(*res));
	if(goes_home(d, l->env, topic)) return send_home(d, l, client, quiet, res);
	int rc = publish_again(d, l->env, topic, client, quiet, res);
	if(rc) return rc;
	letter_store__delete(d, l);
	return 0;
}

int dlq__redrive_envelope(struct dlq *d, const struct dlq_envelope *dl, const char *client,
		struct dlq_redrive_result *res)
{
	memset(res, 0, sizeof(*res));
	return publish_again(d, dl, NULL, client, false, res);
}
