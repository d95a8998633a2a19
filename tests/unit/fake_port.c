/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The fake broker port (see fake_port.h): the link seam that lets the core's
 * unit tests observe what the plugin would publish and log.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "fake_port.h"
#include "util/headers.h"

struct fake_port fake;

static void *dup_bytes(const void *src, size_t len)
{
	void *p = malloc(len ? len : 1);
	if(p && len) memcpy(p, src, len);
	return p;
}

void fake_reset(void)
{
	for(size_t i = 0; i < fake.publish_count; i++){
		free(fake.publishes[i].client);
		free(fake.publishes[i].topic);
		free(fake.publishes[i].payload);
		free(fake.publishes[i].headers);
	}
	for(size_t i = 0; i < fake.log_count; i++){
		free(fake.logs[i]);
	}
	for(size_t i = 0; i < fake.kick_count; i++){
		free(fake.kicks[i]);
	}
	memset(&fake, 0, sizeof(fake));
	fake.now_ms = 1000000;
	fake.random_used = 8;
	fake.wall_ms = 1790000000000LL; /* 2026-09-21T... */
}

const char *fake_header_value(const struct fake_publish *p, const char *name)
{
	size_t pos = 0;
	struct dlq_header h;
	while(headers__next(p->headers, p->headers_len, &pos, &h)){
		if(h.kind == DLQ_HDR_USER_PROPERTY && !strcmp(h.a, name)){
			return h.b;
		}
	}
	return NULL;
}

bool fake_logged(const char *text)
{
	for(size_t i = 0; i < fake.log_count; i++){
		if(strstr(fake.logs[i], text)) return true;
	}
	return false;
}

int port__kick(const char *client)
{
	if(fake.kick_count < FAKE_MAX_LOGS){
		fake.kicks[fake.kick_count++] = strdup(client);
	}
	return 0;
}

int port__publish(const char *client, const char *topic, uint8_t qos, bool retain,
		const void *payload, uint32_t payload_len, const uint8_t *headers, size_t headers_len)
{
	fake.publish_calls++;
	if(fake.fail_publishes > 0){
		fake.fail_publishes--;
		return EIO;
	}
	if(fake.fail_topic && !strcmp(topic, fake.fail_topic)){
		fake.fail_topic_calls++;
		return EIO;
	}
	/* The plugin's $SYS topics would get in the way of tests that count
	 * what was published; they are recorded only when a test asks. */
	if(!fake.record_sys && !strncmp(topic, "$SYS/", 5)){
		fake.sys_publish_count++;
		return 0;
	}
	if(fake.publish_count == FAKE_MAX_PUBLISHES) return ENOSPC;
	struct fake_publish *p = &fake.publishes[fake.publish_count++];
	p->client = client ? strdup(client) : NULL;
	p->topic = strdup(topic);
	p->qos = qos;
	p->retain = retain;
	p->payload = dup_bytes(payload, payload_len);
	p->payload_len = payload_len;
	p->headers = dup_bytes(headers, headers_len);
	p->headers_len = headers_len;
	return 0;
}

/* port__publish_with ends in FAKE_PORT_PUBLISH_ENTRY: port__publish itself,
 * or, where a file that includes this one wraps port__publish (tests/fuzz),
 * a function of that file that calls its wrapper, so that the wrapper's
 * checks see every publish. */
#ifdef FAKE_PORT_PUBLISH_ENTRY
int FAKE_PORT_PUBLISH_ENTRY(const char *client, const char *topic, uint8_t qos, bool retain,
		const void *payload, uint32_t payload_len, const uint8_t *headers, size_t headers_len);
#else
#define FAKE_PORT_PUBLISH_ENTRY port__publish
#endif

/* The extra properties are encoded after the headers, so a test reads one
 * header list, as the plugin's publishes had before port__publish_with. */
int port__publish_with(const char *client, const char *topic, uint8_t qos, bool retain,
		const void *payload, uint32_t payload_len, const uint8_t *headers, size_t headers_len,
		const struct dlq_user_prop *extra, size_t extra_count)
{
	struct dlq_headers h = {0};
	int rc = headers__append_raw(&h, headers, headers_len);
	for(size_t i = 0; rc == 0 && i < extra_count; i++){
		rc = headers__add_user(&h, extra[i].name, extra[i].value);
	}
	if(rc == 0) rc = FAKE_PORT_PUBLISH_ENTRY(client, topic, qos, retain, payload, payload_len, h.data, h.len);
	headers__free(&h);
	return rc;
}

void port__log_dead_letter(const char *origin_topic, const char *origin_id, const char *topic,
		unsigned deliveries, const char *reason)
{
	port__log(DLQ_LOG_NOTICE, DLQ_LOG_DEAD_LETTER_FMT, origin_topic, origin_id, topic, deliveries, reason);
}

/* Records the line fmt and ap make at level (and echoes it with
 * FAKE_PORT_ECHO): port__log's work, which tests/faults/faults_port.c,
 * including this file, does between its pause and resume. */
static void fake_log_line(enum dlq_log_level level, const char *fmt, va_list ap)
{
	char buf[2048];
	vsnprintf(buf, sizeof(buf), fmt, ap);
	if(getenv("FAKE_PORT_ECHO")) fprintf(stderr, "dlq: %s\n", buf);
	if(fake.log_count < FAKE_MAX_LOGS){
		fake.log_levels[fake.log_count] = level;
		fake.logs[fake.log_count++] = strdup(buf);
	}
}

void port__log(enum dlq_log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fake_log_line(level, fmt, ap);
	va_end(ap);
}

uint64_t port__now_ms(void)
{
	return fake.now_ms;
}

int64_t port__wall_ms(void)
{
	return fake.wall_ms;
}

int port__random(void *buf, size_t len)
{
	if(fake.fail_random > 0){
		fake.fail_random--;
		return EIO;
	}
	if(fake.use_os_random){
		return getrandom(buf, len, 0) == (ssize_t)len ? 0 : EIO;
	}
	/* splitmix64 from a fixed seed: deterministic, and distinct ids. */
	uint8_t *b = buf;
	for(size_t i = 0; i < len; i++){
		if(fake.random_used == 8){
			uint64_t z = (fake.random_state += 0x9e3779b97f4a7c15ULL);
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
			z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
			fake.random_word = z ^ (z >> 31);
			fake.random_used = 0;
		}
		b[i] = (uint8_t)(fake.random_word >> (8 * fake.random_used++));
	}
	return 0;
}
