/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * plugin_opt_collect's filters (see collect_filters.h): parsed one line at
 * a time, checked as a whole against the policies once they are known.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config/collect_filters.h"
#include "util/errtext.h"
#include "util/topic.h"

int collect_filters__add(struct dlq_collect_filters *f, unsigned number, const char *value, char *err, size_t errlen)
{
	if(!topic__valid_filter(value) || value[0] == '$'){
		errtext__set(err, errlen, "plugin_opt_collect #%u " QFMT ": not a topic filter outside '$' (one filter a "
				"line, e.g. plugin_opt_collect fleet/+/dead/#; a bridge carries no '$' topic)", number, Q(value));
		return EINVAL;
	}
	for(size_t i = 0; i < f->count; i++){
		if(!strcmp(f->items[i], value)){
			errtext__set(err, errlen, "plugin_opt_collect #%u " QFMT ": given twice", number, Q(value));
			return EINVAL;
		}
	}
	char **items = realloc(f->items, (f->count + 1) * sizeof(*items));
	if(items == NULL) goto nomem;
	f->items = items;
	if((f->items[f->count] = strdup(value)) == NULL) goto nomem;
	f->count++;
	return 0;

nomem:
	errtext__set(err, errlen, "out of memory");
	return ENOMEM;
}

int collect_filters__check(const struct dlq_collect_filters *f, const struct dlq_policy_table *t, uint64_t keep,
		char *err, size_t errlen)
{
	if(f->count && keep == 0){
		errtext__set(err, errlen, "plugin_opt_collect " QFMT " needs the dead-letter store, and "
				"plugin_opt_dead_letter_keep 0 turns it off", Q(f->items[0]));
		return EINVAL;
	}
	for(size_t i = 0; i < f->count; i++){
		const char *c = f->items[i];
		const struct dlq_policy *p;
		switch(policy__takes(t, c, &p)){
			case POLICY_TAKES_FILTER:
				errtext__set(err, errlen, "plugin_opt_collect " QFMT " overlaps the filter " QFMT " of %s: a message "
						"on both would be tracked and collected; collect other brokers' dead-letter topics "
						"(e.g. fleet/+/dead/#), apart from every policy", Q(c), Q(p->filter), p->source ? p->source : "a policy");
				return EINVAL;
			case POLICY_TAKES_DEAD_LETTER:
				errtext__set(err, errlen, "plugin_opt_collect " QFMT " takes " QFMT ", the dead-letter topic of %s: "
						"this broker keeps its own letters already; bridge other brokers' letters in under "
						"another prefix (e.g. fleet/<broker>/dead/#)", Q(c), Q(p->dead_letter), p->source ? p->source : "a policy");
				return EINVAL;
			case POLICY_TAKES_NOTHING:
				break;
		}
	}
	return 0;
}

long collect_filters__index(const struct dlq_collect_filters *f, const char *topic)
{
	for(size_t i = 0; i < f->count; i++){
		if(topic__matches(f->items[i], topic)) return (long)i;
	}
	return -1;
}

bool collect_filters__match(const struct dlq_collect_filters *f, const char *topic)
{
	return collect_filters__index(f, topic) >= 0;
}

void collect_filters__free(struct dlq_collect_filters *f)
{
	for(size_t i = 0; i < f->count; i++) free(f->items[i]);
	free(f->items);
	f->items = NULL;
	f->count = 0;
}
