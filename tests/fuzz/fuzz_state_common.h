/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What the two state-file targets (snapshot and journal) check once a
 * decode has run: see fuzz_state.c.
 */
#ifndef DLQ_FUZZ_STATE_H
#define DLQ_FUZZ_STATE_H

#include "fuzz.h"
#include "store/state.h"

/* Checks a decoded engine: its report agrees with its contents, it survives
 * a save and restore unchanged, every restored record can be NACKed, clients
 * leaving divert their copies, and everything owed is published in the end.
 * Frees the engine. */
void fuzz_state_exercise(struct dlq *d, const struct state_report *rep, size_t envelopes_before);

#endif
