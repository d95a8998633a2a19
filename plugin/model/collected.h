/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Collected dead letters (issue 39, "Collecting"): a message that reached a
 * central broker on a plugin_opt_collect filter, read back into the dead
 * letter another broker's plugin made of it, so that the central store keeps
 * it as that broker's, under that broker's name and letter id. Its
 * properties are the whole dead letter: the plugin's own (dead-letter-id,
 * dead-letter-broker, origin-topic, origin-id, retry-count,
 * dead-letter-time, dead-letter-cause, dead-letter-reason,
 * dead-letter-client, dead-letter-filter, dead-letter-final) become the
 * envelope's fields, the others its original headers. A message missing
 * one, with one twice or with a value no plugin writes is no dead letter,
 * and nothing of it is kept.
 */
#ifndef DLQ_COLLECTED_H
#define DLQ_COLLECTED_H

#include <stddef.h>
#include <stdint.h>

#include "model/envelope.h"

/* Reads the message on topic (payload, qos, and every property it came
 * with, the plugin's names included, as an encoded header list) into the
 * dead letter it carries: *out, a DLQ_ENV_DEAD_LETTER envelope whose topic
 * and dead_letter are topic, whose id is its dead-letter-id and broker its
 * dead-letter-broker (the caller's; envelope__free). Returns 0; EINVAL
 * when it is no dead letter, with why (whylen bytes) naming the property
 * and what is wrong with it; ENOMEM. */
int collected__letter(const char *topic, const void *payload, uint32_t payload_len, uint8_t qos,
		const uint8_t *headers, size_t headers_len, struct dlq_envelope **out, char *why, size_t whylen);

#endif
