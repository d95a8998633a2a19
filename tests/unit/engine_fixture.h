/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The engine fixture the unit, fault and fuzz tests share: an engine
 * started from a list of options (as the broker hands them over), with the
 * settings only the broker decides, and stopped again. It makes no
 * assertions of its own, so that the fuzz targets (no Check) and the
 * allocation-failure runs (Check paused) can use it; engine_calls.h adds
 * engine_start for the unit suites, which fails the test instead.
 */
#ifndef DLQ_TEST_ENGINE_FIXTURE_H
#define DLQ_TEST_ENGINE_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "engine/dlq.h"
#include "engine/engine.h" /* the engine's unit tests read its state */

/* What a start sets in the parsed configuration besides the options: what
 * the broker, not an option, decides, and the $SYS publishes a test would
 * otherwise find among the publishes it counts. Or'ed together. */
enum engine_flag {
	ENGINE_NO_SYS = 1u << 0,             /* sys_interval_ms 0: no $SYS publishes */
	ENGINE_BROKER_PERSISTENCE = 1u << 1, /* the broker has persistence on */
	ENGINE_EXACT_COUNTING = 1u << 2,     /* every send counted (2.1's MESSAGE_OUT) */
	ENGINE_DELIVERY_COUNT = 1u << 3,     /* delivery-count stamped on each send */
	ENGINE_BACKGROUND_SAVES = 1u << 4,   /* snapshots in the background (a fork), as the plugin writes them;
	                                        without it, in the foreground, so that a test sees each at once */
};

/* Parses the count options, applies flags (enum engine_flag) and starts d
 * on the result. Returns 0; or config__parse's error, with d untouched and
 * *live false; or dlq__init's, with *live true, since d must then be
 * stopped all the same (dlq.h). err (errlen bytes, or NULL) gets the
 * message, after the name of the step that refused. live may be NULL. */
int engine_try_start(struct dlq *d, bool *live, const struct dlq_option *opts, size_t count, unsigned flags,
		char *err, size_t errlen);

/* Stops d (dlq__cleanup) if *live, or always when live is NULL; then *live
 * is false. */
void engine_stop(struct dlq *d, bool *live);

#endif
