/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * plugin_opt_redrive_home and plugin_opt_redrive_from (see
 * redrive_paths.h): each parsed from its line, then checked as a whole
 * against the policies and collect filters.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config/redrive_paths.h"
#include "util/errtext.h"
#include "util/topic.h"

/* Inside a format: "%%b" prints "%b". */
#define HOME_EXAMPLE "(e.g. plugin_opt_redrive_home fleet/%%b/redrive)"

/* Where the one %b of template t is, a whole level; NULL when there is
 * none, more than one, or another '%'. */
static const char *the_b(const char *t)
{
	const char *b = NULL;
	for(const char *s = t; (s = strchr(s, '%')) != NULL; s++){
		if(s[1] != 'b' || b) return NULL;
		if((s != t && s[-1] != '/') || (s[2] != '\0' && s[2] != '/')) return NULL;
		b = s;
	}
	return b;
}

/* t with its %b (at b) replaced by name into out. */
static void fill(const char *t, const char *b, const char *name, char out[DLQ_HOME_TOPIC_MAX])
{
	size_t head = (size_t)(b - t), nlen = strlen(name), tail = strlen(b + 2);
	memcpy(out, t, head);
	memcpy(out + head, name, nlen);
	memcpy(out + head + nlen, b + 2, tail + 1);
}

static int dup_to(char **to, const char *s, size_t len, char *err, size_t errlen)
{
	if((*to = errtext__dup_range(s, len)) == NULL){
		errtext__set(err, errlen, "out of memory");
		return ENOMEM;
	}
	return 0;
}

int redrive_paths__set_home(struct dlq_redrive_paths *p, const char *value, char *err, size_t errlen)
{
	char sample[DLQ_HOME_TOPIC_MAX];
	const char *b = strlen(value) <= DLQ_REDRIVE_HOME_MAX ? the_b(value) : NULL;
	if(b) fill(value, b, "edge", sample);
	if(b == NULL || value[0] == '$' || !topic__valid_publish(sample)){
		errtext__set(err, errlen, "plugin_opt_redrive_home " QFMT ": not a topic of at most %d bytes outside '$' "
				"with one whole level %%b (the letter's broker) and no other '%%' " HOME_EXAMPLE, Q(value),
				DLQ_REDRIVE_HOME_MAX);
		return EINVAL;
	}
	return dup_to(&p->home, value, strlen(value), err, errlen);
}

int redrive_paths__set_from(struct dlq_redrive_paths *p, const char *value, char *err, size_t errlen)
{
	const char *sp = strchr(value, ' ');
	char *topic = sp ? errtext__dup_range(value, (size_t)(sp - value)) : NULL;
	if(sp && topic == NULL){
		errtext__set(err, errlen, "out of memory");
		return ENOMEM;
	}
	const char *why = NULL;
	if(sp == NULL || sp[1] == '\0' || strchr(sp + 1, ' ')){
		why = "not a topic and a client id, one space between (e.g. plugin_opt_redrive_from redrive local.edge-1)";
	}else if(topic[0] == '$' || !topic__valid_publish(topic)){
		why = "the topic is not a topic name without wildcards outside '$' (a bridge carries no '$' topic)";
	}
	if(why){
		errtext__set(err, errlen, "plugin_opt_redrive_from " QFMT ": %s", Q(value), why);
		free(topic);
		return EINVAL;
	}
	p->from_topic = topic;
	return dup_to(&p->from_client, sp + 1, strlen(sp + 1), err, errlen);
}

/* Whether a request on topic (a filter: the home topics' is one with '+'
 * for %b) would be more than a request here: EINVAL with a message naming
 * what (the option) and what takes it, else 0. */
static int clash(const char *what, const char *topic, const struct dlq_policy_table *t,
		const struct dlq_collect_filters *c, char *err, size_t errlen)
{
	const struct dlq_policy *p;
	switch(policy__takes(t, topic, &p)){
		case POLICY_TAKES_FILTER:
			errtext__set(err, errlen, "%s " QFMT " overlaps the filter " QFMT " of %s: a redrive request would be "
					"tracked as a message; give it a topic apart from every policy", what, Q(topic), Q(p->filter),
					p->source ? p->source : "a policy");
			return EINVAL;
		case POLICY_TAKES_DEAD_LETTER:
			errtext__set(err, errlen, "%s " QFMT " takes " QFMT ", the dead-letter topic of %s: a redrive request "
					"would be a dead letter; give it a topic of its own", what, Q(topic), Q(p->dead_letter),
					p->source ? p->source : "a policy");
			return EINVAL;
		case POLICY_TAKES_NOTHING:
			break;
	}
	for(size_t i = 0; i < c->count; i++){
		if(topic__filters_overlap(topic, c->items[i])){
			errtext__set(err, errlen, "%s " QFMT " overlaps plugin_opt_collect " QFMT ": a redrive request would be "
					"kept as a collected letter; give it a topic apart from every collect filter", what, Q(topic),
					Q(c->items[i]));
			return EINVAL;
		}
	}
	return 0;
}

int redrive_paths__check(const struct dlq_redrive_paths *p, const struct dlq_policy_table *t,
		const struct dlq_collect_filters *c, char *err, size_t errlen)
{
	if(p->home){
		char any[DLQ_HOME_TOPIC_MAX];
		fill(p->home, the_b(p->home), "+", any);
		if(clash("plugin_opt_redrive_home", any, t, c, err, errlen)) return EINVAL;
	}
	if(p->from_topic && clash("plugin_opt_redrive_from", p->from_topic, t, c, err, errlen)) return EINVAL;
	return 0;
}

void redrive_paths__home_topic(const struct dlq_redrive_paths *p, const char *broker, char out[DLQ_HOME_TOPIC_MAX])
{
	fill(p->home, the_b(p->home), broker, out);
}

void redrive_paths__free(struct dlq_redrive_paths *p)
{
	free(p->home);
	free(p->from_topic);
	free(p->from_client);
	memset(p, 0, sizeof(*p));
}
