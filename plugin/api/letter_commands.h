/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The dead-letter store's commands on $CONTROL/dlq/v1 (listDeadLetters,
 * getDeadLetter, redriveDeadLetters, deleteDeadLetters, purgeDeadLetters,
 * listBrokers, and the redrive task commands, api/task_commands.h, run behind the same
 * refusals):
 * each checks its members, calls the dead-letter store (engine/letter_store.h,
 * which asks the broker's access control per letter with
 * plugin_opt_dead_letter_access check) and returns its reply's "data".
 */
#ifndef DLQ_LETTER_COMMANDS_H
#define DLQ_LETTER_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "engine/dlq.h"
#include "engine/letter_store.h"

/* Whether name is one of the store's commands. */
bool letter_commands__is(const char *name);

/* The store's i-th command name (from 0, static), NULL past the last: for
 * the list of known commands an unknown one is answered with. */
const char *letter_commands__name(size_t i);

/* Runs the store command name (letter_commands__is) of cmd for who, the
 * asking client.
 * Returns 0 with *data (owned), EINVAL with the error's text in err, or
 * ENOMEM. */
int letter_commands__run(struct dlq *d, const struct letter_store_asker *who, const char *name, const cJSON *cmd,
		cJSON **data, char *err, size_t errlen);

#endif
