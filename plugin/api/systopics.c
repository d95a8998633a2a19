/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * $SYS/broker/dlq/... (see systopics.h). Topics, all retained:
 *   $SYS/broker/dlq/<name>                       totals
 *   $SYS/broker/dlq/policies/<index>/filter      the policy's filter
 *   $SYS/broker/dlq/policies/<index>/<name>      that policy's values
 * where <name> is one of the names below, or dead_letters_by_cause/<cause>
 * for each dead-letter cause (model/cause.h). Policy indexes count from 0
 * in declaration order (listPolicies shows the same order). A name holds
 * only [a-z0-9_] and '/': the common $SYS-to-Prometheus exporters
 * (sapcc/mosquitto-exporter) make a metric name of the topic by dropping
 * "$SYS/" and turning each '/' into '_', and a '-' would make an invalid
 * one; "_by_cause" keeps those of the causes apart from the other names
 * (dead_letters_dropped, dead_letters_expired).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/status.h"
#include "api/systopics.h"
#include "engine/dlq.h"
#include "model/cause.h"
#include "mosquitto_dlq.h"
#include "util/port.h"

#define SYS_PREFIX DLQ_SYS_TOPIC_PREFIX

static const char *const names[] = {
	"tracked", "nacks", "nacks_refused", "retry_copies", "delayed_copies", "dead_letters",
	"publish_failures", "expired", "evicted", "untracked_full", "redeliveries", "diverted",
	"subscribers_without_nack", "subscribers_of_dead_letters", "sent_without_stamp",
	"records", "ledger_bytes", "pending", "delayed", "owed_bytes",
	"redriven", "dead_letters_dropped", "dead_letters_expired", "kept_dead_letters", "kept_dead_letter_bytes",
	"acks", "acks_refused", "progress", "ack_timeouts", "final_nacks", "awaiting_ack",
	"collected", "collected_duplicates", "collected_refused",
};
#define FIXED_COUNT (sizeof(names) / sizeof(names[0]))
#define NAME_COUNT (FIXED_COUNT + DLQ_DEAD_CAUSES)
#define CAUSE_PREFIX "dead_letters_by_cause/"

/* The name of value i: names[i], then the causes'. */
static void name_of(size_t i, char *out, size_t size)
{
	if(i < FIXED_COUNT){
		snprintf(out, size, "%s", names[i]);
	}else{
		snprintf(out, size, CAUSE_PREFIX "%s", cause__name((unsigned)(i - FIXED_COUNT)));
	}
}

static void values_of(const struct dlq_figures *f, uint64_t v[NAME_COUNT])
{
	const struct dlq_counters *c = &f->counters;
	const struct dlq_gauges *g = &f->gauges;
	const struct dlq_letter_tally kept = f->kept;
	uint64_t all[FIXED_COUNT] = {
		c->tracked, c->nacks, c->nacks_refused, c->retry_copies, c->delayed, c->dead_letters,
		c->publish_failures, c->expired, c->evicted, c->untracked_full, c->redeliveries, c->diverted,
		c->subscribers_without_nack, c->subscribers_of_dead_letters, c->sent_without_stamp,
		g->records, g->ledger_bytes, g->pending, g->delayed, g->owed_bytes,
		c->redriven, c->dead_letters_dropped, c->dead_letters_expired, kept.count, kept.bytes,
		c->acks, c->acks_refused, c->progress, c->ack_timeouts, c->final_nacks, g->awaiting,
		c->collected, c->collected_duplicates, c->collected_refused,
	};
	memcpy(v, all, sizeof(all));
	for(size_t i = 0; i < DLQ_DEAD_CAUSES; i++){
		v[FIXED_COUNT + i] = c->dead_letters_by_cause[i];
	}
}

static void publish_value(const char *topic, const char *text)
{
	int rc = port__publish(NULL, topic, 0, true, text, (uint32_t)strlen(text), NULL, 0);
	if(rc) port__log(DLQ_LOG_WARNING, "could not publish %s: %s", topic, strerror(rc));
}

/* Publishes the values of one group (totals, or one policy) that changed. */
static void publish_group(struct dlq_sys *s, size_t slot, const char *prefix, const uint64_t v[NAME_COUNT], bool first)
{
	char topic[256];
	char name[64];
	char text[32];
	for(size_t i = 0; i < NAME_COUNT; i++){
		uint64_t *last = &s->last_values[slot * NAME_COUNT + i];
		if(!first && *last == v[i]) continue;
		*last = v[i];
		name_of(i, name, sizeof(name));
		snprintf(topic, sizeof(topic), "%s%s", prefix, name);
		snprintf(text, sizeof(text), "%" PRIu64, v[i]);
		publish_value(topic, text);
	}
}

void systopics__tick(struct dlq_sys *s, const struct dlq *d, uint64_t now)
{
	const struct dlq_config *cfg = dlq__config(d);
	if(cfg->sys_interval_ms == 0) return;
	if(s->last_ms && now - s->last_ms < cfg->sys_interval_ms) return;

	size_t policies = cfg->policies.count < DLQ_SYS_MAX_POLICIES ? cfg->policies.count : DLQ_SYS_MAX_POLICIES;
	size_t needed = (1 + policies) * NAME_COUNT;
	/* After a reload every topic is published again (an index may now
	 * name another filter), and those of indexes that no longer exist are
	 * cleared: an empty retained message removes a retained one. */
	bool first = s->last_ms == 0 || s->value_count != needed || s->generation != dlq__policy_generation(d);
	for(size_t i = policies; first && i < s->policies_published; i++){
		char topic[128];
		snprintf(topic, sizeof(topic), SYS_PREFIX "policies/%zu/filter", i);
		publish_value(topic, "");
		for(size_t k = 0; k < NAME_COUNT; k++){
			char name[64];
			name_of(k, name, sizeof(name));
			snprintf(topic, sizeof(topic), SYS_PREFIX "policies/%zu/%s", i, name);
			publish_value(topic, "");
		}
	}
	if(s->value_count != needed){
		uint64_t *v = realloc(s->last_values, needed * sizeof(*v));
		if(v == NULL) return;
		s->last_values = v;
		s->value_count = needed;
	}
	struct dlq_figures f;
	uint64_t v[NAME_COUNT];
	dlq__figures(d, -1, &f);
	values_of(&f, v);
	publish_group(s, 0, SYS_PREFIX, v, first);
	for(size_t i = 0; i < policies; i++){
		char prefix[96];
		snprintf(prefix, sizeof(prefix), SYS_PREFIX "policies/%zu/", i);
		if(first){
			char topic[128];
			snprintf(topic, sizeof(topic), "%sfilter", prefix);
			publish_value(topic, cfg->policies.items[i].filter);
		}
		dlq__figures(d, (long)i, &f);
		values_of(&f, v);
		publish_group(s, 1 + i, prefix, v, first);
	}
	s->last_ms = now ? now : 1;
	s->policies_published = policies;
	s->generation = dlq__policy_generation(d);
}

void systopics__cleanup(struct dlq_sys *s)
{
	free(s->last_values);
	memset(s, 0, sizeof(*s));
}
