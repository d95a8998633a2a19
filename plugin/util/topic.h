/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * MQTT topic names and filters, checked and matched without the broker: the
 * policy table uses these at configuration time and on every inbound publish.
 */
#ifndef DLQ_TOPIC_H
#define DLQ_TOPIC_H

#include <stdbool.h>
#include <stddef.h>

/* True if f is a valid subscription filter: non-empty, '+' and '#' occupy a
 * whole level, '#' only as the last level, at most 65535 bytes. */
bool topic__valid_filter(const char *f);

/* True if t is a valid topic to publish to: non-empty, no '+' or '#', at
 * most 65535 bytes. */
bool topic__valid_publish(const char *t);

/* True if topic matches filter under MQTT rules, including the rule that a
 * filter starting with a wildcard does not match a topic starting with '$'. */
bool topic__matches(const char *filter, const char *topic);

/* topic__matches for a filter that passed topic__valid_filter and a topic
 * that passed topic__valid_publish: for a table of checked filters, where
 * checking each again on every lookup would cost more than the match. */
bool topic__matches_valid(const char *filter, const char *topic);

/* True if some topic matches both filters a and b under topic__matches'
 * rules (wildcards on either side, '$' topics not matched by a leading
 * wildcard); false if either is not a valid filter. */
bool topic__filters_overlap(const char *a, const char *b);

/* The filter a subscription applies: f past its "$share/<group>/" prefix
 * (a shared subscription's messages are those of the filter after it), f
 * itself when it has none, NULL for a "$share/" without group or filter. */
const char *topic__shared_filter(const char *f);

/* Number of '+' and '#' levels in a valid filter. */
unsigned topic__wildcards(const char *filter);

/* Why s cannot be a broker's name (plugin_opt_broker_name, the
 * dead-letter-broker property), or NULL when it can: 1 to
 * DLQ_MAX_BROKER_NAME_LEN bytes of printable ASCII other than space, '/',
 * '+' and '#', so that it is one topic level and never a wildcard (a
 * fleet's bridge topics hold it), and reads as it is in a log line, a
 * table and the console. The reason is a constant phrase. */
const char *topic__broker_name_problem(const char *s);

#endif
