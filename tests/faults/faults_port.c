/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The fake broker port of the unit tests (tests/unit/fake_port.c) for the
 * fault-injection suite: what the fake allocates to record a publish or a
 * log line is the test's, not the plugin's, so it is neither counted nor
 * failed (alloc_fail_pause). The plugin's own allocations around the call
 * still are.
 */
#define port__publish fake_port__publish
#define port__publish_with fake_port__publish_with
#define port__log fake_port__log
#define port__log_dead_letter fake_port__log_dead_letter
#include "../unit/fake_port.c"
#undef port__publish
#undef port__publish_with
#undef port__log
#undef port__log_dead_letter

#include "alloc_fail.h"

int port__publish(const char *client, const char *topic, uint8_t qos, bool retain,
		const void *payload, uint32_t payload_len, const uint8_t *headers, size_t headers_len)
{
	alloc_fail_pause();
	int rc = fake_port__publish(client, topic, qos, retain, payload, payload_len, headers, headers_len);
	alloc_fail_resume();
	return rc;
}

/* What the fake allocates to encode the extra properties is the test's too:
 * the real port hands them to the broker's property list, whose
 * allocations the suite does not fail either. */
int port__publish_with(const char *client, const char *topic, uint8_t qos, bool retain,
		const void *payload, uint32_t payload_len, const uint8_t *headers, size_t headers_len,
		const struct dlq_user_prop *extra, size_t extra_count)
{
	alloc_fail_pause();
	int rc = fake_port__publish_with(client, topic, qos, retain, payload, payload_len, headers, headers_len,
			extra, extra_count);
	alloc_fail_resume();
	return rc;
}

void port__log(enum dlq_log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	alloc_fail_pause();
	fake_log_line(level, fmt, ap);
	alloc_fail_resume();
	va_end(ap);
}

void port__log_dead_letter(const char *origin_topic, const char *origin_id, const char *topic,
		unsigned deliveries, const char *reason)
{
	port__log(DLQ_LOG_NOTICE, DLQ_LOG_DEAD_LETTER_FMT, origin_topic, origin_id, topic, deliveries, reason);
}
