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
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Refusal warnings of one collect filter: at most COLLECT_WARN_BURST in a
 * window of COLLECT_WARN_WINDOW_MS, which starts at its first warning. */
#define COLLECT_WARN_BURST 10
#define COLLECT_WARN_WINDOW_MS 60000

/* The limiter of the collect filter topic is on (*filter its text), or
 * NULL when there is none to be had (out of memory: every refusal is
 * logged). Made at the first refusal, and again when the filters'
 * count changed. */
static struct dlq_collect_warn *warn_limiter(struct dlq *d, const char *topic, const char **filter)
{
	long i = collect_filters__index(&d->cfg.collect, topic);
	if(i < 0) return NULL;
	if(d->collect_warn_count != d->cfg.collect.count){
		free(d->collect_warn);
		d->collect_warn = calloc(d->cfg.collect.count, sizeof(*d->collect_warn));
		d->collect_warn_count = d->collect_warn ? d->cfg.collect.count : 0;
		if(d->collect_warn == NULL) return NULL;
	}
	*filter = d->cfg.collect.items[i];
	return &d->collect_warn[i];
}

/* The warning that the message m is no dead letter (why), unless its
 * filter's window has had COLLECT_WARN_BURST: then it is counted, and
 * said in the first warning of the next window. The last warning a
 * window logs says that the next ones are not. */
static void warn_refused(struct dlq *d, const struct dlq_collected_msg *m, const char *why)
{
	const char *filter = "";
	struct dlq_collect_warn *w = warn_limiter(d, m->topic, &filter);
	char unlogged[160] = "";
	if(w){
		uint64_t now = port__now_ms();
		if(w->logged == 0 || now - w->window_ms >= COLLECT_WARN_WINDOW_MS){
			if(w->unlogged){
				snprintf(unlogged, sizeof(unlogged), " (and %" PRIu64 " more refused on this filter since the "
						"last warning, not logged)", w->unlogged);
			}
			w->window_ms = now;
			w->logged = 0;
			w->unlogged = 0;
		}
		if(w->logged == COLLECT_WARN_BURST){
			w->unlogged++;
			return;
		}
		w->logged++;
	}
	port__log(DLQ_LOG_WARNING, "the message on " QFMT " from " QFMT " is no dead letter and is not kept "
			"(plugin_opt_collect): %s%s", Q(m->topic), Q(m->client ? m->client : ""), why, unlogged);
	if(w && w->logged == COLLECT_WARN_BURST){
		port__log(DLQ_LOG_WARNING, "%d messages on plugin_opt_collect " QFMT " refused within %d s: the next ones "
				"are counted (collectedRefused) and not logged for the rest of the %d s", COLLECT_WARN_BURST, Q(filter),
				COLLECT_WARN_WINDOW_MS / 1000, COLLECT_WARN_WINDOW_MS / 1000);
	}
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
		d->counters.collected_refused++;
		warn_refused(d, m, why);
		return;
	}
	char id[DLQ_ID_LEN + 1];
	char broker[DLQ_MAX_BROKER_NAME_LEN + 1];
	id__encode(&e->id, id);
	snprintf(broker, sizeof(broker), "%s", e->broker);
	switch(letter_store__keep_collected(d, e)){
		case LETTER_STORE_COLLECTED_KEPT:
			d->counters.collected++;
			port__log(DLQ_LOG_INFO, "kept the dead letter %s of broker \"%s\" collected on " QFMT, id, broker,
					Q(m->topic));
			break;
		case LETTER_STORE_COLLECTED_DUPLICATE:
			d->counters.collected_duplicates++;
			port__log(DLQ_LOG_INFO, "the dead letter %s of broker \"%s\" on " QFMT " is kept already (a bridge "
					"delivered it again): kept once", id, broker, Q(m->topic));
			break;
		case LETTER_STORE_COLLECTED_CLASH:
			d->counters.collected_refused++;
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
