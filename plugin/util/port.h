/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The broker port: every outbound effect of the core (publishing, logging,
 * clocks, random bytes) goes through these functions. The plugin links
 * port_mosquitto.c; unit tests link a fake with the same symbols.
 */
#ifndef DLQ_PORT_H
#define DLQ_PORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/headers.h"

enum dlq_log_level {
	DLQ_LOG_ERR,
	DLQ_LOG_WARNING,
	DLQ_LOG_NOTICE,
	DLQ_LOG_INFO,
	DLQ_LOG_DEBUG,
};

/* Queues a publish with the broker. client == NULL routes it normally;
 * otherwise it goes to that client only. headers is an encoded header list
 * (headers.h) turned into MQTT v5 properties. The port copies payload and
 * headers: they stay the caller's whatever the result. Returns 0, or an
 * errno-style error (the broker refused it, or memory ran out). */
int port__publish(const char *client, const char *topic, uint8_t qos, bool retain,
		const void *payload, uint32_t payload_len, const uint8_t *headers, size_t headers_len);

/* port__publish with more user properties after the encoded headers, each
 * given by its strings (borrowed for the call), so that the plugin's own
 * properties of a retry copy or dead letter go to the broker's property
 * list without an encoded copy of them first. */
int port__publish_with(const char *client, const char *topic, uint8_t qos, bool retain,
		const void *payload, uint32_t payload_len, const uint8_t *headers, size_t headers_len,
		const struct dlq_user_prop *extra, size_t extra_count);

/* Disconnects a client (its session stays). Returns 0, or ENOENT when no
 * client has that id. */
int port__kick(const char *client);

/* Logs one line, prefixed "dlq: ", formatted once. */
void port__log(enum dlq_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 2, 3)))
#endif
	;

/* The line each dead letter logs, at notice level, when the broker has
 * accepted it: origin topic, origin-id, dead-letter topic, deliveries,
 * reason. */
#define DLQ_LOG_DEAD_LETTER_FMT "dead-lettered message from \"%s\" (origin-id %s) to \"%s\" after %u deliveries: %s"

/* Logs DLQ_LOG_DEAD_LETTER_FMT with these values, prefixed "dlq: ". Apart
 * from port__log because it is the one line logged per message in a NACK
 * storm: the broker formats it directly, once, where port__log formats
 * first and the broker then copies. */
void port__log_dead_letter(const char *origin_topic, const char *origin_id, const char *topic,
		unsigned deliveries, const char *reason);

/* Monotonic milliseconds, for windows and ages. */
uint64_t port__now_ms(void);

/* Wall-clock milliseconds since the Unix epoch, for timestamps. */
int64_t port__wall_ms(void);

/* Fills buf with len bytes from the OS's random source. Returns 0 or an
 * errno-style error. */
int port__random(void *buf, size_t len);

#endif
