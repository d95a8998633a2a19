/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * NACKs (see dlq.h, dlq__nack): a NACK of a tracked delivery is a failed
 * attempt (attempts.c), a retry copy or, at its last attempt or when final,
 * a dead letter; everything else is refused with a status the reply names
 * (dlq__nack_status_text, the text of every settlement command's status).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/dlq.h"
#include "engine/engine.h"

void dlq__nack(struct dlq *d, const struct dlq_nack *n, struct dlq_nack_result *res)
{
	const struct dlq_policy *policy;
	struct dlq_record *r = engine__record_to_settle(d, n->id, n->id_len, n->client, n->may_read, n->may_read_ctx,
			res, &policy);
	if(r == NULL) goto refused;
	struct dlq_failure f = {
		.client = n->client,
		.reason = n->reason,
		.how = DLQ_SETTLED_NACK,
		.final = n->final,
		.client_persists = n->client_persists,
		.client_settles = n->client_settles,
		.bounded = true,
		.delay_requested = n->delay_requested,
		.delay_ms = n->delay_ms,
	};
	engine__attempt_failed(d, r, &f, res);
	if(res->status != DLQ_NACK_RETRIED && res->status != DLQ_NACK_DEAD_LETTERED) goto refused;
	COUNT(d, policy, nacks, 1);
	engine__note_minute(d, policy, DLQ_HISTORY_NACK, 0);
	if(n->final) COUNT(d, policy, final_nacks, 1);
	return;

refused:
	COUNT(d, policy, nacks_refused, 1);
}

const char *dlq__nack_status_text(enum dlq_nack_status s)
{
	switch(s){
		case DLQ_NACK_RETRIED: return "retried";
		case DLQ_NACK_DEAD_LETTERED: return "dead-lettered";
		case DLQ_NACK_ACKED: return "acked";
		case DLQ_NACK_EXTENDED: return "extended";
		case DLQ_NACK_MALFORMED_ID: return "malformed dlq-id: expected 16 base64url characters";
		case DLQ_NACK_UNKNOWN_ID: return "unknown or expired dlq-id";
		case DLQ_NACK_DUPLICATE: return "delivery already NACKed by this client";
		case DLQ_NACK_ALREADY_ACKED: return "delivery already ACKed by this client";
		case DLQ_NACK_TIMED_OUT: return "delivery timed out: its ack_timeout ran out first, and a retry copy was made";
		case DLQ_NACK_TIMED_OUT_DEAD: return "delivery timed out: its ack_timeout ran out first, at its last attempt, and it was dead-lettered";
		case DLQ_NACK_DIVERTED: return "delivery already dead-lettered: delivered max_attempts times without "
				"acknowledgement, and removed from its session";
		case DLQ_NACK_NO_DEADLINE: return "no ack_timeout runs for this client's delivery (its policy has none, or it was "
				"not sent to this client)";
		case DLQ_NACK_FULL: return "refused: retry copies and dead letters not yet published fill max_pending_bytes";
		case DLQ_NACK_NOMEM: return "out of memory";
		case DLQ_NACK_RANDOM_FAILED: return "the random source failed: no dlq-id for the retry copy";
		case DLQ_NACK_NOT_PERMITTED: return "refused: this client may not read the message";
	}
	return "unknown status";
}
