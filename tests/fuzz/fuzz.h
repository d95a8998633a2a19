/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What the fuzz targets share: a fresh engine with one fixed configuration on
 * the fake broker port, a way to clear what the fake recorded without
 * resetting its clocks or its random sequence, and the checks that turn a
 * broken invariant into an abort, so that libFuzzer (or the replay driver,
 * replay.c) reports it as a crash with the input that caused it.
 */
#ifndef DLQ_FUZZ_H
#define DLQ_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "config/config.h"
#include "engine/dlq.h"
#include "engine_fixture.h"
#include "util/headers.h"

/* Aborts with the location and a message when cond is false. */
#define FUZZ_CHECK(cond, ...) do{ \
		if(!(cond)){ \
			fprintf(stderr, "fuzz check failed at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
			abort(); \
		} \
	}while(0)

/* Findings handed to the lead and not yet fixed in plugin/. While a flag is
 * 1 the targets step around its case (see where it is used), so that a run
 * goes on to find new things; set it to 0 once the code is fixed, and the
 * input kept under tests/fuzz/regressions/ checks the fix. (UBSan reports
 * are stepped over in tests/fuzz/ubsan.supp instead.) */

/* state.c decodes fields the plugin never writes without refusing them: a
 * retry copy without a dead-letter topic (diverting it makes a dead letter
 * with a NULL topic: regressions/state_journal/copy-without-dead-letter), a
 * topic with invalid UTF-8 or wildcards, a record's empty topic, a QoS above
 * 2 in a record, strings that are not valid UTF-8 in what becomes a
 * property. The broker refuses what is made of them (it stays owed and is
 * retried on every tick for ever) or sends it to subscribers that must then
 * drop their connection. (A header list that is not well formed is refused
 * since aba6eb6: regressions/state_journal/malformed-headers; header strings
 * and envelope strings that are not MQTT text since state_check.c:
 * the regressions named record-... under state_snapshot and ...-copy-... under state_journal.) */
#define FUZZ_KNOWN_STATE_NOT_VALIDATED 0

/* state.c decodes an empty origin topic, reason, client or filter of an
 * envelope as NULL; envelope__headers then calls strlen(NULL) when the
 * envelope is published (dlq__tick): a SIGSEGV of the broker
 * (regressions/state_snapshot/dead-letter-empty-*). */
#define FUZZ_KNOWN_NULL_HEADER_FIELD 0

/* state.c decode_envelope: next_seq = seq + 1 wraps to 0 for an envelope
 * whose seq is UINT64_MAX; envelopes made afterwards reuse the sequence
 * numbers of restored ones, which the journal uses as keys
 * (regressions/state_snapshot/seq-max-wraps-next-seq). */
#define FUZZ_KNOWN_SEQ_WRAPS 0

/* The libFuzzer entry points every target defines (replay.c calls them). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The configuration every engine-based target uses: policies with and
 * without delays, with retry_to, a small memory bound so that evictions and
 * "full" refusals are reachable. The state seeds are written with it. */
extern const struct dlq_option fuzz_standard_options[];
extern const size_t fuzz_standard_count;

/* Starts *d from the count options with flags (engine_fixture.h); aborts
 * with the refusal's message on failure. */
void fuzz_engine_start(struct dlq *d, const struct dlq_option *opts, size_t count, unsigned flags);

/* Initialises *d from the standard configuration (no state file); aborts on
 * failure. Resets the fake port first. */
void fuzz_engine_init(struct dlq *d);

/* Frees the engine and what the fake port recorded. */
void fuzz_engine_fini(struct dlq *d);

/* Frees the publishes and log lines the fake port recorded, keeping its
 * clocks and its random sequence (so that ids stay distinct). */
void fuzz_port_clear(void);

/* Envelopes the engine still owes: outbox "owed" and the delayed ones. */
size_t fuzz_owed_count(const struct dlq *d);

/* A snapshot of an engine that has records, an owed retry copy, an owed
 * dead letter and delayed copies, made with the standard configuration at
 * the fake port's reset clocks. *out is the caller's (headers__free). */
void fuzz_make_snapshot(struct dlq_headers *out);

/* A journal for the snapshot above: adds and removes. */
void fuzz_make_journal(struct dlq_headers *out);

/* Rewrites the CRC of every whole entry after a header of hdr bytes, so that
 * mutations reach the entry decoders instead of stopping at the checksum. */
void fuzz_fix_crcs(uint8_t *data, size_t len, size_t hdr);

/* True if the broker (or the real port) would refuse this publish; see
 * fuzz_port.c, which aborts on such a publish. */
bool fuzz_port_would_refuse(const char *topic, uint8_t qos, const uint8_t *headers, size_t headers_len);

/* Publishes every envelope the engine owes: advances the clocks past the
 * latest due time and ticks, clearing the fake port in between. Returns how
 * many envelopes were published. */
size_t fuzz_flush(struct dlq *d);

/* Checks that policy__match agrees with a plain walk over the table (every
 * filter tried with topic__matches, the most specific one chosen as policy.h
 * says) for topics made from each filter and dead-letter topic. */
void fuzz_check_matching(const struct dlq_policy_table *t);

/* Finishes t (policy__table_finish) and checks the outcome: an accepted
 * table with fuzz_check_matching, a refused one for EINVAL and a message.
 * t is still the caller's to free. */
void fuzz_check_finish(struct dlq_policy_table *t);

#endif
