/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What the two state-file targets (snapshot and journal) check once a
 * decode has run: see fuzz_state.c.
 */
#ifndef DLQ_FUZZ_STATE_H
#define DLQ_FUZZ_STATE_H

#include "fuzz.h"
#include "store/state.h"

/* The start of a state-file target's run: a copy of data (size bytes)
 * with the CRCs of its entries rewritten past a header of hdr bytes
 * (fuzz_fix_crcs), d a fresh engine (fuzz_engine_init), rep cleared.
 * Returns the copy, for the caller to free, or NULL when out of memory
 * (then d was not made). */
uint8_t *fuzz_state_begin(struct dlq *d, struct state_report *rep, const uint8_t *data, size_t size, size_t hdr);

/* Checks a decoded engine: its report agrees with its contents, it survives
 * a save and restore unchanged, every restored record can be NACKed, clients
 * leaving divert their copies, and everything owed is published in the end.
 * Frees the engine. */
void fuzz_state_exercise(struct dlq *d, const struct state_report *rep, size_t envelopes_before);

#endif
