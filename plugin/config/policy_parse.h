/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Policies as an operator writes them (policy_parse.c): one
 * plugin_opt_policy line, or the JSON policy file, parsed into the policy
 * table's entries; config.c puts them in order and validates the table.
 */
#ifndef DLQ_POLICY_PARSE_H
#define DLQ_POLICY_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "model/policy.h"

/* Parses one plugin_opt_policy value, "<filter> key=value ...", into *out
 * (keys: max_attempts, dead_letter, retry_to). Returns 0 or EINVAL/ENOMEM with
 * a message in err. On failure *out holds nothing. */
int policy_parse__line(const char *line, struct dlq_policy *out, char *err, size_t errlen);

/* Parses a JSON policy document, {"policies":[{"filter":...,"max_attempts":...,
 * "dead_letter":...,"retry_to":...}]}, appending its policies to t (not
 * finished). source names the document in messages. Returns 0 or
 * EINVAL/ENOMEM with a message in err. */
int policy_parse__json(const char *text, size_t len, const char *source, struct dlq_policy_table *t, char *err, size_t errlen);

/* An age bound of kept dead letters, as plugin_opt_dead_letter_keep_for
 * and a policy's dead_letter_keep_for= take it: a duration with its unit
 * from DLQ_KEEP_FOR_MIN_MS to DLQ_KEEP_FOR_MAX_MS, or "forever" (*ms 0: no
 * age bound). Zero is refused: "keep for no time" would read as "keep
 * none", which dead_letter_keep 0 says. Returns 0, or EINVAL with a message
 * that starts with name and the value. */
int policy_parse__keep_for(const char *name, const char *v, uint64_t *ms, char *err, size_t errlen);

#endif
