/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The members of a $CONTROL command that say which kept dead letters it
 * takes ("filter", "deadLetter", "reason", "broker", "cause", "since",
 * "until"):
 * parsed once here for every command that takes them (listDeadLetters,
 * startRedriveTask), into model/letters.h's struct dlq_letter_match.
 */
#ifndef DLQ_LETTER_FILTER_H
#define DLQ_LETTER_FILTER_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "model/letters.h"

/* The string member name of cmd into *out (borrowed from cmd; NULL when
 * absent or null). Returns 0, or EINVAL with the reason in err. */
int letter_filter__string(const cJSON *cmd, const char *name, const char **out, char *err, size_t errlen);

/* The filter members of cmd into *m (its strings borrowed from cmd).
 * Returns 0, or EINVAL with the member and the reason in err. */
int letter_filter__parse(const cJSON *cmd, struct dlq_letter_match *m, char *err, size_t errlen);

#endif
