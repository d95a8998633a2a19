/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The redrive task commands on $CONTROL/dlq/v1 (startRedriveTask,
 * cancelRedriveTask) and the tasks' entries in getStatus ("redriveTasks"):
 * members checked (the filter by api/letter_filter.h, as listDeadLetters
 * checks it) and turned into calls of engine/redrive_tasks.h. Run as the
 * dead-letter store's commands are (letter_commands.c: the store's
 * refusals first).
 */
#ifndef DLQ_TASK_COMMANDS_H
#define DLQ_TASK_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "engine/dlq.h"
#include "engine/letter_store.h"

/* Whether name is one of the task commands. */
bool task_commands__is(const char *name);

/* Runs the task command name of cmd for who. Returns 0 with *data
 * (owned), EINVAL with the error's text in err, or ENOMEM. */
int task_commands__run(struct dlq *d, const struct letter_store_asker *who, const char *name, const cJSON *cmd,
		cJSON **data, char *err, size_t errlen);

/* getStatus' "redriveTasks": every task kept, newest first. NULL when
 * out of memory. */
cJSON *task_commands__status(const struct dlq *d);

#endif
