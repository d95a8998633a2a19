/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The fake broker port for unit tests: records every publish and log line,
 * lets a test set the clocks, the random bytes and publish failures (the
 * next N, or every one to a topic).
 */
#ifndef DLQ_FAKE_PORT_H
#define DLQ_FAKE_PORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/port.h"

#define FAKE_MAX_PUBLISHES 256
#define FAKE_MAX_LOGS 256

struct fake_publish {
	char *client;       /* NULL: ordinary publish */
	char *topic;
	uint8_t qos;
	bool retain;
	uint8_t *payload;
	uint32_t payload_len;
	uint8_t *headers;   /* encoded header list, as handed to the port */
	size_t headers_len;
};

struct fake_port {
	struct fake_publish publishes[FAKE_MAX_PUBLISHES];
	size_t publish_count;
	int fail_publishes;    /* the next N publishes fail with EIO */
	const char *fail_topic; /* borrowed; every publish to this topic fails with EIO (NULL: none) */
	size_t fail_topic_calls; /* publishes refused for fail_topic */
	size_t publish_calls;  /* failed ones included */
	char *logs[FAKE_MAX_LOGS];
	enum dlq_log_level log_levels[FAKE_MAX_LOGS];
	size_t log_count;
	uint64_t now_ms;
	int64_t wall_ms;
	int fail_random;       /* the next N random calls fail with EIO */
	bool use_os_random;    /* else a seeded generator: deterministic, distinct */
	bool record_sys;       /* record $SYS/... publishes too (else only counted) */
	size_t sys_publish_count;
	char *kicks[FAKE_MAX_LOGS]; /* clients disconnected, in order */
	size_t kick_count;
	uint64_t random_state;
	uint64_t random_word;
	unsigned random_used;
};

extern struct fake_port fake;

/* Frees what was recorded and resets every field. */
void fake_reset(void);

/* The value of the user property name in a recorded publish, or NULL
 * (borrowed from the record). */
const char *fake_header_value(const struct fake_publish *p, const char *name);

/* True if some log line contains text. */
bool fake_logged(const char *text);

#endif
