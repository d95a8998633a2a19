/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What a kept dead letter shows in a reply (listDeadLetters,
 * getDeadLetter): its summary, and in full its payload (text, or base64
 * when it is not UTF-8 an MQTT client accepts: without NUL, U+007F-U+009F
 * or noncharacters; cut at DLQ_MAX_LETTER_PAYLOAD_REPLY)
 * and every property it was published with.
 */
#ifndef DLQ_LETTER_VIEW_H
#define DLQ_LETTER_VIEW_H

#include <cjson/cJSON.h>

#include "model/letters.h"

/* {"id","deadLetter","originTopic","originId","reason","client","filter",
 * "cause","broker","time","timeMs","retryCount","qos","payloadBytes"}
 * ("broker" "" for a letter without one); NULL when out of
 * memory. Owned by the caller. */
cJSON *letter_view__summary(const struct dlq_letter *l);

/* The summary with "payload", "payloadEncoding", "payloadTruncated" (when
 * cut) and "properties" (the publisher's up to DLQ_MAX_LETTER_PAYLOAD_REPLY
 * bytes of them, then "propertiesTruncated"; the plugin's always); NULL
 * when out of memory. */
cJSON *letter_view__full(const struct dlq_letter *l);

#endif
