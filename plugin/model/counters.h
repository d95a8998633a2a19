/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The engine's counters: what happened, in total and per policy, as
 * getStatus and the $SYS topics report it. Plain numbers; the engine counts
 * (engine.h, COUNT), the status reports read them.
 */
#ifndef DLQ_COUNTERS_H
#define DLQ_COUNTERS_H

#include <stdint.h>

#include "model/cause.h"

struct dlq_counters {
	uint64_t tracked;          /* inbound publishes stamped */
	uint64_t untracked_full;   /* matched a policy but did not fit the memory bound */
	uint64_t nacks;            /* NACKs accepted */
	uint64_t nacks_refused;    /* unknown/expired/malformed/duplicate/full */
	uint64_t unknown_ids;      /* NACKs of ids never issued, expired or evicted (totals only) */
	uint64_t retry_copies;     /* retry copies accepted by the broker */
	uint64_t delayed;          /* retry copies held back for a delay */
	uint64_t dead_letters;     /* dead letters accepted by the broker */
	uint64_t dead_letters_by_cause[DLQ_DEAD_CAUSES]; /* the same, by cause (cause.h): they add up to dead_letters */
	uint64_t publish_failures; /* broker refused a publish (kept and retried) */
	uint64_t expired;          /* records that left the NACK window */
	uint64_t evicted;          /* records evicted for the memory bound */
	uint64_t redeliveries;     /* redeliveries after a reconnect counted as attempts */
	uint64_t diverted;         /* redelivered messages removed from a session and dead-lettered */
	uint64_t subscribers_without_nack; /* subscriptions to tracked filters by clients without MQTT 5 */
	uint64_t subscribers_of_dead_letters; /* subscriptions taking in dead letters and tracked messages (totals only) */
	uint64_t redriven;         /* kept dead letters republished by redriveDeadLetters */
	uint64_t dead_letters_dropped; /* kept dead letters dropped for the store's bound */
	uint64_t dead_letters_expired; /* kept dead letters dropped for their age (dead_letter_keep_for) */
	uint64_t sent_without_stamp; /* 2.1: sends stripped of the plugin's properties to fit a Maximum Packet Size */
	uint64_t acks;             /* ACKs accepted */
	uint64_t acks_refused;     /* ACKs and progress reports refused (unknown id, settled before, ...) */
	uint64_t progress;         /* progress reports accepted: a delivery's clock started again */
	uint64_t ack_timeouts;     /* deliveries whose ack_timeout ran out: each a failed attempt */
	uint64_t final_nacks;      /* final NACKs accepted (also counted in nacks) */
	/* Collecting (plugin_opt_collect; totals only): */
	uint64_t collected;            /* other brokers' dead letters kept */
	uint64_t collected_duplicates; /* ... already kept (a bridge's second delivery): kept once */
	uint64_t collected_refused;    /* messages not kept: no dead letter, or another broker's letter holds the id */
};

#endif
