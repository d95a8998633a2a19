/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The engine: one struct per plugin instance holding the configuration, the
 * ledger and the outbox, and the operations the broker adapters call with
 * plain C arguments: track an inbound publish, NACK a delivery, tick, and a
 * client leaving.
 */
#ifndef DLQ_DLQ_H
#define DLQ_DLQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "id.h"
#include "ledger.h"
#include "outbox.h"

struct dlq_counters {
	uint64_t tracked;          /* inbound publishes stamped */
	uint64_t untracked_full;   /* matched a policy but did not fit the memory bound */
	uint64_t nacks;            /* NACKs accepted */
	uint64_t nacks_refused;    /* unknown/expired/malformed/duplicate/full */
	uint64_t retry_copies;     /* retry copies accepted by the broker */
	uint64_t dead_letters;     /* dead letters accepted by the broker */
	uint64_t publish_failures; /* broker refused a publish (kept and retried) */
	uint64_t expired;          /* records that left the NACK window */
	uint64_t evicted;          /* records evicted for the memory bound */
};

struct dlq {
	struct dlq_config cfg;    /* owned */
	struct dlq_ledger ledger; /* owned */
	struct dlq_outbox outbox; /* owned */
	struct dlq_idgen idgen;
	struct dlq_counters counters;
	uint64_t last_evict_log_ms; /* rate limit of the eviction warning */
};

/* Takes ownership of *cfg (zeroed on return, whatever the result). Returns 0
 * or ENOMEM. */
int dlq__init(struct dlq *d, struct dlq_config *cfg);

/* Logs what is still owed (it cannot be published any more), then frees
 * everything. */
void dlq__cleanup(struct dlq *d);

/* The policy for an inbound publish on topic, or NULL: then the message is
 * not tracked and nothing else need be done. Borrowed from the config. */
const struct dlq_policy *dlq__policy_for(const struct dlq *d, const char *topic);

/* Tracks an inbound publish that matched policy: records it in the ledger
 * and writes the dlq-id to stamp it with into id_out. headers are the
 * message's own properties, encoded (the caller's). Returns 0 (stamp it),
 * ENOSPC (larger than the memory bound allows: do not stamp) or ENOMEM. */
int dlq__track(struct dlq *d, const struct dlq_policy *policy, const char *topic,
		const void *payload, uint32_t payload_len, uint8_t qos,
		const uint8_t *headers, size_t headers_len, char id_out[DLQ_ID_LEN + 1]);

enum dlq_nack_status {
	DLQ_NACK_RETRIED,        /* a retry copy was made */
	DLQ_NACK_DEAD_LETTERED,  /* the chain ended in a dead letter */
	DLQ_NACK_MALFORMED_ID,   /* not 16 base64url characters */
	DLQ_NACK_UNKNOWN_ID,     /* never issued, expired or evicted */
	DLQ_NACK_DUPLICATE,      /* this client already NACKed this delivery */
	DLQ_NACK_FULL,           /* owed copies and dead letters fill the bound */
	DLQ_NACK_NOMEM,
	DLQ_NACK_RANDOM_FAILED,  /* no fresh dlq-id could be drawn */
};

struct dlq_nack {
	const char *id;          /* borrowed; id_len bytes, not NUL-terminated */
	size_t id_len;
	const char *reason;      /* borrowed, NUL-terminated, or NULL */
	const char *client;      /* borrowed: the NACKing client's id */
};

struct dlq_nack_result {
	enum dlq_nack_status status;
	unsigned attempt;        /* the delivery that was NACKed (1 = first) */
	unsigned max_attempts;
};

/* Handles one NACK: a retry copy or a dead letter when accepted. Publishing
 * failures do not fail the NACK: the envelope waits in the outbox. */
void dlq__nack(struct dlq *d, const struct dlq_nack *n, struct dlq_nack_result *res);

/* A stable, human-readable text for a status. */
const char *dlq__nack_status_text(enum dlq_nack_status s);

/* Once per broker loop pass: expires records, retries owed envelopes and
 * lets go of fresh retry copies the broker has now handed over. */
void dlq__tick(struct dlq *d);

/* A client's connection ended. When its session ended with it
 * (session_persists false), retry copies owed to it, or sent to it in this
 * loop pass, become dead letters. */
void dlq__client_gone(struct dlq *d, const char *client, bool session_persists);

#endif
