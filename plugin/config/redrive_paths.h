/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The two ends of a redrive home (issue 39, "Redrive home"): on a central
 * broker, plugin_opt_redrive_home, the topic on which a redrive of another
 * broker's collected letter publishes it (a template with %b for that
 * broker's name: fleet/%b/redrive), for the bridge of that broker to carry
 * it home; on an edge, plugin_opt_redrive_from, the topic on which such a
 * request arrives and the client id of the bridge that alone may bring
 * one. Both are checked against the policies and collect filters once
 * they are known: a request is never tracked, collected or a dead letter.
 */
#ifndef DLQ_REDRIVE_PATHS_H
#define DLQ_REDRIVE_PATHS_H

#include <stdbool.h>
#include <stddef.h>

#include "config/collect_filters.h"
#include "model/policy.h"
#include "mosquitto_dlq.h"

/* The longest plugin_opt_redrive_home template, and so the longest home
 * topic: the template with its one %b replaced by a broker's name. */
#define DLQ_REDRIVE_HOME_MAX 256
#define DLQ_HOME_TOPIC_MAX (DLQ_REDRIVE_HOME_MAX + DLQ_MAX_BROKER_NAME_LEN + 1)

struct dlq_redrive_paths {
	char *home;        /* owned; plugin_opt_redrive_home's template, or NULL: redrives publish here */
	char *from_topic;  /* owned; plugin_opt_redrive_from's topic, or NULL: no requests taken */
	char *from_client; /* owned; the client id requests must come from (the bridge's local client id) */
};

/* plugin_opt_redrive_home value: a topic with one whole level %b and no
 * other '%', not starting with '$', at most DLQ_REDRIVE_HOME_MAX bytes.
 * Returns 0, EINVAL with a message naming the option, the value and why,
 * or ENOMEM. */
int redrive_paths__set_home(struct dlq_redrive_paths *p, const char *value, char *err, size_t errlen);

/* plugin_opt_redrive_from value: "<topic> <client id>", a topic name
 * without wildcards outside '$', one space, a client id without spaces.
 * Returns 0, EINVAL with a message naming the option, the value and why,
 * or ENOMEM. */
int redrive_paths__set_from(struct dlq_redrive_paths *p, const char *value, char *err, size_t errlen);

/* Checks p against the finished policy table t and the collect filters c:
 * a home topic or a request topic that a policy's filter takes, that is a
 * policy's dead-letter topic or on a collect filter is refused (a request
 * would be tracked, kept as a dead letter or collected). Returns 0, or
 * EINVAL with a message naming both. */
int redrive_paths__check(const struct dlq_redrive_paths *p, const struct dlq_policy_table *t,
		const struct dlq_collect_filters *c, char *err, size_t errlen);

/* The home topic of broker (a valid broker name) into out
 * (DLQ_HOME_TOPIC_MAX bytes): p->home with %b replaced. */
void redrive_paths__home_topic(const struct dlq_redrive_paths *p, const char *broker, char out[DLQ_HOME_TOPIC_MAX]);

void redrive_paths__free(struct dlq_redrive_paths *p);

#endif
