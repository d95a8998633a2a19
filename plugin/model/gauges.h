/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Running gauges: how many NACKable deliveries the ledger keeps and their
 * bytes, and how many retry copies and dead letters are owed or delayed and
 * their bytes, per policy and in total. The ledger, the outbox and the
 * schedule update them wherever a record or an envelope comes or goes, so
 * that a status report costs O(policies), not O(records): a getStatus
 * walking 200,000 records took some 4 ms, and one control message may hold
 * a thousand of them. Records and envelopes of a policy no longer in the
 * table (a reload removed its filter) count in the totals only, as they
 * always did. After a reload moves records to other policies, the engine
 * recounts once (recount__gauges).
 */
#ifndef DLQ_GAUGES_H
#define DLQ_GAUGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dlq_policy;
struct dlq_policy_table;

struct dlq_gauges {
	uint64_t records;       /* NACKable deliveries kept */
	uint64_t ledger_bytes;  /* their bytes in the bound */
	uint64_t pending;       /* retry copies and dead letters the broker has not taken */
	uint64_t delayed;       /* retry copies waiting for their delay */
	uint64_t owed_bytes;    /* bytes of both */
	uint64_t awaiting;      /* deliveries awaiting settlement within an ack_timeout (deadlines.h) */
};

struct dlq_gauge_book {
	const struct dlq_policy_table *table; /* borrowed: the engine's current table */
	struct dlq_gauges *per;  /* owned: one per policy of table, by index */
	size_t count;            /* entries of per */
	struct dlq_gauges total;
};

/* Sets up a book for table, every gauge zero. Returns 0 or ENOMEM. */
int gauges__init(struct dlq_gauge_book *b, const struct dlq_policy_table *table);
void gauges__cleanup(struct dlq_gauge_book *b);

/* The updates. b may be NULL (a ledger, outbox or schedule without a book,
 * in their own unit tests): nothing is counted. sign is +1 or -1. */
void gauges__record(struct dlq_gauge_book *b, const struct dlq_policy *p, int sign, uint64_t bytes);
void gauges__record_bytes(struct dlq_gauge_book *b, const struct dlq_policy *p, int sign, uint64_t bytes);
void gauges__envelope(struct dlq_gauge_book *b, const struct dlq_policy *p, bool delayed, int sign, uint64_t bytes);
void gauges__awaiting(struct dlq_gauge_book *b, const struct dlq_policy *p, int sign);

/* Replaces the book's per-policy array by per (count entries, taken; the
 * caller then fills it, see recount__gauges). */
void gauges__replace(struct dlq_gauge_book *b, struct dlq_gauges *per, size_t count);

#endif
