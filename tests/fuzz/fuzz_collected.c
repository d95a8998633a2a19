/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Fuzz target: a message on a plugin_opt_collect filter read back into
 * the dead letter it carries (collected__letter), the path every client
 * that may publish on a collected filter reaches. The input is the
 * message's properties as the adapter hands them over: an encoded header
 * list (util/headers.h), whole or malformed; the first byte, when there is
 * one, is the QoS (mod 3) and the rest the list.
 *
 * Checks: a message is refused with a reason, or read into a dead letter
 * whose properties, written out again (envelope__headers), read back into
 * the same letter: id, broker, origin, reason, client, filter, time,
 * cause, retry count, final, and the original headers byte for byte.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "model/collected.h"
#include "model/envelope.h"
#include "util/headers.h"
#include "util/id.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static bool same_text(const char *a, const char *b)
{
	return (a == NULL && b == NULL) || (a && b && !strcmp(a, b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t qos = size ? (uint8_t)(data[0] % 3) : 0;
	const uint8_t *list = size ? data + 1 : data;
	size_t len = size ? size - 1 : 0;
	char why[512] = "";
	struct dlq_envelope *e = NULL;
	int rc = collected__letter("fleet/x/dead/y", "p", 1, qos, list, len, &e, why, sizeof(why));
	FUZZ_CHECK(rc == 0 || rc == EINVAL || rc == ENOMEM, "rc %d", rc);
	if(rc){
		FUZZ_CHECK(e == NULL, "refused, and a letter given");
		FUZZ_CHECK(rc != EINVAL || why[0], "refused without a reason");
		return 0;
	}
	struct dlq_headers h = {0};
	if(envelope__headers(e, &h) == 0){
		struct dlq_envelope *again = NULL;
		rc = collected__letter("fleet/x/dead/y", "p", 1, qos, h.data, h.len, &again, why, sizeof(why));
		FUZZ_CHECK(rc == 0 || rc == ENOMEM, "written out again, refused: %s", why);
		if(rc == 0){
			FUZZ_CHECK(id__equal(&e->id, &again->id) && id__equal(&e->origin_id, &again->origin_id), "ids differ");
			FUZZ_CHECK(same_text(e->broker, again->broker) && same_text(e->origin_topic, again->origin_topic)
					&& same_text(e->reason, again->reason) && same_text(e->client, again->client)
					&& same_text(e->filter, again->filter), "texts differ");
			FUZZ_CHECK(e->time_ms == again->time_ms && e->cause == again->cause && e->final == again->final
					&& e->retry_count == again->retry_count, "numbers differ");
			FUZZ_CHECK(e->headers_len == again->headers_len
					&& !memcmp(e->headers, again->headers, e->headers_len), "original headers differ");
			envelope__free(again);
		}
	}
	headers__free(&h);
	envelope__free(e);
	return 0;
}
