/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The soak's command line and broker (setup.c).
 */
#ifndef DLQ_SOAK_SETUP_H
#define DLQ_SOAK_SETUP_H

#include <stdio.h>

#include "bench.h"
#include "soak.h"

/* The defaults; the seed from the clock. */
void setup__defaults(struct soak_cfg *cfg);
/* Returns 0, or -1 for a bad command line (print setup__usage). */
int setup__parse_args(int argc, char **argv, struct soak_cfg *cfg);
void setup__usage(FILE *f);
/* Starts the broker with the plugin, as cfg says (persistence, the state
 * file, redelivery tracking, the two policies); bo keeps what
 * broker__restart needs. Returns 0 or -1 (logged). */
int setup__start_broker(const struct soak_cfg *cfg, struct broker *b, struct broker_opts *bo);
/* Counts the lines of the broker's log that contain each needle. */
void setup__count_log(const struct broker *b, const char *const *needles, uint64_t *counts, size_t n);

#endif
