/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Records for the model's unit tests (test_ledger.c, test_envelope.c,
 * test_holds.c, test_send_cache.c, test_deadlines.c), made by the one
 * constructor the plugin has, record__make, from the fields a test names:
 * record_fixture__make(0, .id = &id, .topic = "jobs", ...).
 */
#ifndef DLQ_TEST_RECORD_FIXTURE_H
#define DLQ_TEST_RECORD_FIXTURE_H

#include "model/record.h"

/* A record (not in a slab) of part (0, DLQ_RECORD_MORE or
 * DLQ_RECORD_SENDS) made of the fields of a struct dlq_record_init given as
 * designated initializers; a field not given is 0 or NULL (so .attempt is
 * always given: 1 for an original). NULL as record__make. */
#define record_fixture__make(part, ...) \
	record__make(&(const struct dlq_record_init){__VA_ARGS__}, (part), NULL)

#endif
