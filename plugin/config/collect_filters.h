/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * plugin_opt_collect (issue 39, "Collecting"): the topic filters on which a
 * central broker's plugin keeps the dead letters other brokers' plugins
 * made and their bridges carry in. Each line is one filter; the lines are
 * checked against each other and against the policy table once it is
 * finished, so that a collected message is never also tracked, and the
 * broker's own dead letters are never kept a second time.
 */
#ifndef DLQ_COLLECT_FILTERS_H
#define DLQ_COLLECT_FILTERS_H

#include <stddef.h>

#include "model/policy.h"

struct dlq_collect_filters {
	char **items; /* owned, each owned: valid subscription filters outside '$' */
	size_t count;
};

/* Adds the filter of plugin_opt_collect line number (1 for the first).
 * Returns 0, EINVAL with a message naming the line and value (not a
 * filter, a '$' topic, given twice), or ENOMEM. */
int collect_filters__add(struct dlq_collect_filters *f, unsigned number, const char *value, char *err, size_t errlen);

/* Checks f against the finished policy table t and the store's bound
 * (keep, plugin_opt_dead_letter_keep): refused when keep is 0 (nothing
 * would be kept), when a filter overlaps a policy's filter (a message
 * would be tracked and collected), or matches a policy's dead-letter topic
 * (the broker's own letters, kept already, would come back over a bridge
 * to be kept again). Returns 0, or EINVAL with a message naming both. */
int collect_filters__check(const struct dlq_collect_filters *f, const struct dlq_policy_table *t, uint64_t keep,
		char *err, size_t errlen);

/* Whether topic is on one of f's filters. */
bool collect_filters__match(const struct dlq_collect_filters *f, const char *topic);

/* The index of the first of f's filters topic is on, or -1. */
long collect_filters__index(const struct dlq_collect_filters *f, const char *topic);

void collect_filters__free(struct dlq_collect_filters *f);

#endif
