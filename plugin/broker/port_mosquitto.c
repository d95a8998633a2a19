/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The broker port on every supported Mosquitto line (see util/port.h):
 * mosquitto_broker_publish, logging through mosquitto_log_printf, clocks and
 * random bytes from the OS.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <mosquitto.h>
#include <mosquitto_broker.h>
#include <mqtt_protocol.h>

#include "broker/props.h"
#include "util/port.h"

#ifdef DLQ_TEST_HOOKS
/* Fault injection for tests, compiled into the test build of the module
 * only: DLQ_TEST_FAIL_PUBLISHES=N makes the first N publishes fail, as
 * if the broker had refused them. Every publish counts: replies and $SYS
 * topics too (tests that count set plugin_opt_sys_interval 0s). */
static bool fail_this_publish(void)
{
	static long remaining = -1;
	if(remaining < 0){
		const char *v = getenv("DLQ_TEST_FAIL_PUBLISHES");
		remaining = v ? strtol(v, NULL, 10) : 0;
		if(remaining < 0) remaining = 0;
	}
	if(remaining == 0) return false;
	remaining--;
	return true;
}
#endif

int port__kick(const char *client)
{
	return mosquitto_kick_client_by_clientid(client, false) == MOSQ_ERR_SUCCESS ? 0 : ENOENT;
}

int port__publish_with(const char *client, const char *topic, uint8_t qos, bool retain,
		const void *payload, uint32_t payload_len, const uint8_t *headers, size_t headers_len,
		const struct dlq_user_prop *extra, size_t extra_count)
{
	void *copy = NULL;
	mosquitto_property *props = NULL;

#ifdef DLQ_TEST_HOOKS
	if(fail_this_publish()) return EIO;
#endif

	if(payload_len > INT32_MAX) return EINVAL;
	if(payload_len){
		/* The broker frees the payload with its own allocator. */
		copy = mosquitto_malloc(payload_len);
		if(copy == NULL) return ENOMEM;
		memcpy(copy, payload, payload_len);
	}
	int rc = props__from_headers(headers, headers_len, &props);
	for(size_t i = 0; rc == 0 && i < extra_count; i++){
		rc = mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, extra[i].name, extra[i].value);
		if(rc) rc = rc == MOSQ_ERR_NOMEM ? ENOMEM : EINVAL;
	}
	if(rc){
		mosquitto_free(copy);
		mosquitto_property_free_all(&props);
		return rc;
	}
	/* On success the broker owns copy and props; on failure they are ours. */
	rc = mosquitto_broker_publish(client, topic, (int)payload_len, copy, qos, retain, props);
	if(rc != MOSQ_ERR_SUCCESS){
		mosquitto_free(copy);
		mosquitto_property_free_all(&props);
		return rc == MOSQ_ERR_NOMEM ? ENOMEM : EINVAL;
	}
	return 0;
}

int port__publish(const char *client, const char *topic, uint8_t qos, bool retain,
		const void *payload, uint32_t payload_len, const uint8_t *headers, size_t headers_len)
{
	return port__publish_with(client, topic, qos, retain, payload, payload_len, headers, headers_len, NULL, 0);
}

void port__log(enum dlq_log_level level, const char *fmt, ...)
{
	static const int levels[] = {
		[DLQ_LOG_ERR] = MOSQ_LOG_ERR,
		[DLQ_LOG_WARNING] = MOSQ_LOG_WARNING,
		[DLQ_LOG_NOTICE] = MOSQ_LOG_NOTICE,
		[DLQ_LOG_INFO] = MOSQ_LOG_INFO,
		[DLQ_LOG_DEBUG] = MOSQ_LOG_DEBUG,
	};
	char buf[1024] = "dlq: ";
	va_list ap;

	/* Formatted here once, prefix included: the broker's own formatting
	 * of "%s" is then a copy. */
	va_start(ap, fmt);
	vsnprintf(buf + 5, sizeof(buf) - 5, fmt, ap);
	va_end(ap);
	mosquitto_log_printf(levels[level], "%s", buf);
}

void port__log_dead_letter(const char *origin_topic, const char *origin_id, const char *topic,
		unsigned deliveries, const char *reason)
{
	mosquitto_log_printf(MOSQ_LOG_NOTICE, "dlq: " DLQ_LOG_DEAD_LETTER_FMT, origin_topic, origin_id, topic,
			deliveries, reason);
}

uint64_t port__now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int64_t port__wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int port__random(void *buf, size_t len)
{
	uint8_t *p = buf;
	while(len > 0){
		ssize_t n = getrandom(p, len, 0);
		if(n < 0){
			if(errno == EINTR) continue;
			return errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
