/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Dead-letter causes: why a dead letter was made, one of a fixed set. Each
 * has a word (include/mosquitto_dlq.h, DLQ_CAUSE_*), which a dead letter
 * carries as its dead-letter-cause property and which names its counter
 * (counters.h) in getStatus and $SYS. The numbers are saved in the state
 * file (store/state_format.h): append, never renumber.
 */
#ifndef DLQ_CAUSE_H
#define DLQ_CAUSE_H

#include <stdbool.h>
#include <stddef.h>

enum dlq_cause {
	DLQ_DEAD_UNKNOWN = 0,        /* read from a state file written before causes */
	DLQ_DEAD_NACK = 1,           /* a NACK of the last allowed attempt */
	DLQ_DEAD_FINAL = 2,          /* a final NACK */
	DLQ_DEAD_ACK_TIMEOUT = 3,    /* the last allowed attempt's ack_timeout ran out */
	DLQ_DEAD_REDELIVERY_LIMIT = 4, /* redelivered max_attempts times unacknowledged */
	DLQ_DEAD_SUBSCRIBER_GONE = 5, /* a retry copy's subscriber left; its session ended */
	DLQ_DEAD_NO_SESSION = 6,     /* a retry copy due for a client the broker has no session for */
	DLQ_DEAD_OFFLINE_QOS0 = 7,   /* a QoS 0 retry copy for a subscriber gone offline */
	DLQ_DEAD_RESTART = 8,        /* the broker restarted without the copy's subscriber's session */
};
#define DLQ_DEAD_CAUSES 9

/* The word of cause c (a DLQ_CAUSE_* string); "unknown" for a value out
 * of range. Static storage. */
const char *cause__name(unsigned c);

/* The cause whose word is name, in *out; false when name is none. */
bool cause__parse(const char *name, enum dlq_cause *out);

/* Every cause's word, in the documented order (nack first, unknown last),
 * joined by ", " into buf (size bytes, always NUL-terminated, cut when too
 * small; DLQ_CAUSE_WORDS_LEN is enough): for an error that says what a
 * command may ask for. */
#define DLQ_CAUSE_WORDS_LEN 128
void cause__words(char *buf, size_t size);

#endif
