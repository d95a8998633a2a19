/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Collecting (issue 39): a message on a plugin_opt_collect filter, another
 * broker's dead letter carried in by a bridge, kept in this broker's
 * dead-letter store as that broker's (model/collected.h reads it,
 * letter_store__keep_collected keeps it once). The message itself goes on
 * to its subscribers as any other: the plugin keeps a copy and changes
 * nothing of who may read what. One that is no dead letter is not kept,
 * and a warning names its topic and why.
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

bool dlq__collects(const struct dlq *d, const char *topic)
{
	return d->cfg.collect.count && collect_filters__match(&d->cfg.collect, topic);
}

void dlq__collect(struct dlq *d, const struct dlq_collected_msg *m)
{
	char why[512];
	struct dlq_envelope *e;
	int rc = collected__letter(m->topic, m->payload, m->payload_len, m->qos, m->headers, m->headers_len, &e, why,
			sizeof(why));
	if(rc == ENOMEM){
		port__log(DLQ_LOG_ERR, "out of memory: the message on " QFMT " (plugin_opt_collect) is not kept", Q(m->topic));
		return;
	}
	if(rc){
		port__log(DLQ_LOG_WARNING, "the message on " QFMT " from " QFMT " is no dead letter and is not kept "
				"(plugin_opt_collect): %s", Q(m->topic), Q(m->client ? m->client : ""), why);
		return;
	}
	char id[DLQ_ID_LEN + 1];
	char broker[DLQ_MAX_BROKER_NAME_LEN + 1];
	id__encode(&e->id, id);
	snprintf(broker, sizeof(broker), "%s", e->broker);
	switch(letter_store__keep_collected(d, e)){
		case LETTER_STORE_COLLECTED_KEPT:
			port__log(DLQ_LOG_INFO, "kept the dead letter %s of broker \"%s\" collected on " QFMT, id, broker,
					Q(m->topic));
			break;
		case LETTER_STORE_COLLECTED_DUPLICATE:
			port__log(DLQ_LOG_INFO, "the dead letter %s of broker \"%s\" on " QFMT " is kept already (a bridge "
					"delivered it again): kept once", id, broker, Q(m->topic));
			break;
		case LETTER_STORE_COLLECTED_CLASH:
			port__log(DLQ_LOG_WARNING, "the dead letter %s of broker \"%s\" on " QFMT " is not kept: a letter of "
					"another broker is kept under the same id", id, broker, Q(m->topic));
			break;
		case LETTER_STORE_COLLECTED_TOO_LARGE:
			port__log(DLQ_LOG_WARNING, "the dead letter %s of broker \"%s\" on " QFMT " is not kept: larger than "
					"the dead-letter store's bound", id, broker, Q(m->topic));
			break;
		case LETTER_STORE_COLLECTED_OFF:
			break;
		case LETTER_STORE_COLLECTED_NOMEM:
		default:
			port__log(DLQ_LOG_ERR, "out of memory: the dead letter %s of broker \"%s\" on " QFMT " is not kept", id,
					broker, Q(m->topic));
			break;
	}
}
