/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Retry copies and dead letters: what the plugin owes the broker after a
 * NACK. An envelope holds everything needed to publish it (and, for a
 * targeted retry copy, to turn it into a dead letter if its subscriber has
 * gone), in one allocation; envelope__headers writes the properties it goes
 * out with: the original headers plus the plugin's own.
 */
#ifndef DLQ_ENVELOPE_H
#define DLQ_ENVELOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/cause.h"
#include "model/record.h"
#include "util/headers.h"
#include "util/id.h"

enum dlq_envelope_kind {
	DLQ_ENV_RETRY_COPY,
	DLQ_ENV_DEAD_LETTER,
};

struct dlq_envelope {
	struct dlq_envelope *next;  /* outbox list */
	struct dlq_envelope *prev;
	enum dlq_envelope_kind kind;
	const char *target_client;  /* into data; NULL: an ordinary publish */
	const char *topic;          /* into data: where it is published */
	const char *origin_topic;   /* into data */
	const char *filter;         /* into data: the policy filter */
	const char *dead_letter;    /* into data: the policy's dead-letter topic */
	const char *reason;         /* into data; dead letters only, else NULL */
	const char *client;         /* into data: the client that NACKed */
	const char *broker;         /* into data; dead letters: the broker that made it (dead-letter-broker), else NULL */
	const uint8_t *payload;     /* into data */
	const uint8_t *headers;     /* into data: the original headers */
	struct dlq_id id;           /* retry copies: the copy's fresh dlq-id */
	struct dlq_id origin_id;
	int64_t time_ms;            /* wall clock when it was made */
	uint32_t payload_len;
	uint32_t headers_len;
	uint16_t retry_count;       /* deliveries so far */
	uint8_t qos;
	unsigned failures;          /* failed publish attempts so far */
	size_t bytes;               /* accounted size */
	const struct dlq_policy *policy; /* borrowed; the chain's policy (NULL once its table is gone) */
	uint64_t seq;               /* order of creation, unique per instance: the state file's key */
	uint64_t due_ms;            /* delayed retry copies: monotonic time it is due */
	size_t heap_index;          /* slot in the schedule while delayed */
	int64_t first_nack_ms;      /* wall clock of the chain's first NACK */
	uint64_t delay_ms;          /* retry copies: how long it was held back (0: not at all) */
	uint64_t broker_saves;      /* taken by the broker: its database saves seen by then (unsaved.h) */
	bool target_persists;       /* the target client's session outlives its connection */
	bool recorded;              /* retry copies: its ledger record was made */
	bool redriven;              /* a kept dead letter published again (engine/redrive.c): counted as such */
	bool final;                 /* dead letters: made by a final NACK (dead-letter-final) */
	uint8_t cause;              /* dead letters: why it was made (enum dlq_cause, dead-letter-cause) */
	bool target_settles;        /* targeted retry copies: the target reads dlq-ids (MQTT v5), so its delivery
	                               of the copy is held to the policy's ack_timeout */
	char data[];
};

/* A retry copy of r: published to retry_topic (ordinary publish) or, when
 * target_client is not NULL, to r's topic for that client only. Returns NULL
 * when out of memory. */
struct dlq_envelope *envelope__retry_copy(const struct dlq_record *r, const struct dlq_id *copy_id,
		const char *retry_topic, const char *target_client, const char *nacking_client, int64_t now_ms);

/* Allocates an envelope from its parts: strings may be NULL (left NULL),
 * payload and headers are copied. Numeric fields are zero. Used by the state
 * file to rebuild what was saved. Returns NULL when out of memory. */
struct dlq_envelope *envelope__new(enum dlq_envelope_kind kind, const char *target_client, const char *topic,
		const char *origin_topic, const char *filter, const char *dead_letter, const char *reason,
		const char *client, const char *broker, const void *payload, uint32_t payload_len, const void *headers,
		uint32_t headers_len);

/* A copy of e with every field (ids, times, counts), out of any list,
 * without a policy; NULL when out of memory. */
struct dlq_envelope *envelope__copy(const struct dlq_envelope *e);

/* The dead letter of r, to its policy's dead-letter topic, for cause, made
 * by the broker named broker (copied). reason NULL means attempts ran out. */
struct dlq_envelope *envelope__dead_letter(const struct dlq_record *r, const char *nacking_client, const char *broker,
		enum dlq_cause cause, const char *reason, int64_t now_ms);

/* The dead letter that replaces retry copy e (which the caller still owns
 * and frees), for the given cause and reason, made by the broker named
 * broker (copied). */
struct dlq_envelope *envelope__dead_letter_from_copy(const struct dlq_envelope *e, const char *broker,
		enum dlq_cause cause, const char *reason, int64_t now_ms);

#define DLQ_ENVELOPE_PROPS_MAX 11

/* The plugin's own user properties of an envelope, in the order they go
 * out, with the texts they need: names are constants, values point into
 * the envelope or into this struct (so it must outlive the publish). */
struct dlq_envelope_props {
	struct dlq_user_prop items[DLQ_ENVELOPE_PROPS_MAX];
	size_t count;
	char id[DLQ_ID_LEN + 1];
	char origin_id[DLQ_ID_LEN + 1];
	char retry_count[8];
	char when[32];
};

/* Fills out with the properties the plugin adds to e: for a retry copy
 * dlq-id, retry-count, origin-topic, origin-id, and for a retry copy that
 * was held back also first-nack-time; for a dead letter retry-count,
 * origin-topic, origin-id, dead-letter-reason, dead-letter-client,
 * dead-letter-filter, dead-letter-time, dead-letter-cause,
 * dead-letter-broker (when it has a broker), once named
 * dead-letter-id (the letter's id in the dead-letter store), and for a
 * final NACK's dead-letter-final. They follow e's original headers.
 * Cannot fail. */
void envelope__props(const struct dlq_envelope *e, struct dlq_envelope_props *out);

/* Writes every property e is published with into h: the original headers,
 * then envelope__props. Returns 0, or ENOMEM (also for a part over 65535
 * bytes, which headers cannot hold). For tests and the state file's checks; publishing hands
 * the parts to port__publish_with instead. */
int envelope__headers(const struct dlq_envelope *e, struct dlq_headers *h);

/* QoS a dead letter is published with: at least 1. */
uint8_t envelope__qos(const struct dlq_envelope *e);

void envelope__free(struct dlq_envelope *e);

/* RFC 3339 UTC with milliseconds, e.g. 2026-11-30T03:12:45.123Z. Years
 * outside 1000-9999 are written as strftime's %Y writes them (unpadded). */
void envelope__format_time(int64_t ms, char out[32]);

/* RFC 3339 UTC ("2026-12-02T10:00:00Z", fraction optional, cut to
 * milliseconds) into ms since the epoch in *out: what format_time writes
 * and the letter filters' since and until read. False when s is no such
 * text. */
bool envelope__parse_time(const char *s, int64_t *out);

#endif
