/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Allocation-failure injection for the fault-injection suite: the test
 * executable is linked with -Wl,--wrap=malloc,... (tests/faults/meson.build),
 * so every malloc, calloc, realloc, strdup, strndup and free of the core (and
 * of cJSON, through cJSON_InitHooks) goes through alloc_fail.c, which can fail
 * the N-th allocation of a scenario and keeps the set of live allocations, so
 * that a scenario can check it freed everything it allocated.
 */
#ifndef DLQ_ALLOC_FAIL_H
#define DLQ_ALLOC_FAIL_H

#include <stdbool.h>
#include <stddef.h>

/* Starts a scenario run: counts allocations from now on, fails the n-th
 * (n = 0: none) and records every allocation as live until it is freed. */
void alloc_fail_start(unsigned long n);

/* Ends the run: no more counting or failing; live allocations stay recorded
 * until alloc_fail_live() has been read. */
void alloc_fail_stop(void);

/* While paused, allocations are neither counted nor failed (but still
 * recorded as live): the test's own checks and the fake broker port. Nests. */
void alloc_fail_pause(void);
void alloc_fail_resume(void);

/* True once the n-th allocation has been failed in this run. */
bool alloc_fail_injected(void);

/* Allocations counted in this run so far. */
unsigned long alloc_fail_count(void);

/* Where the failed allocation was made: "function+offset" of the first frame
 * outside the allocator and cJSON, or "" (valid until the next start). */
const char *alloc_fail_site(void);

/* Allocations made since start and not freed; prints each (size and site)
 * to stderr. *in_cjson tells whether every one of them was allocated by
 * cJSON itself (a cJSON item built and then dropped). */
size_t alloc_fail_live(bool *in_cjson);

/* Routes cJSON's allocations through the wrappers. */
void alloc_fail_hook_cjson(void);

#endif
