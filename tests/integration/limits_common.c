/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The helpers of limits_common.h: control commands and their replies, and
 * a timed retry chain.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limits_common.h"

#define REPLY_TOPIC "limits/reply"

cJSON *command(struct client *c, const char *name, size_t *bytes)
{
	char payload[128];
	snprintf(payload, sizeof(payload), "{\"commands\":[{\"command\":\"%s\"}]}", name);
	const struct it_msg *m = command_reply(c, REPLY_TOPIC, payload, name);
	if(bytes){
		*bytes = (size_t)m->payloadlen;
	}
	cJSON *doc = msg_json(m);
	ck_assert_msg(doc != NULL, "%s: the reply is not JSON", name);
	cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "responses"), 0);
	ck_assert_msg(e != NULL && json_str(e, "error") == NULL, "%s: %s", name, e ? json_str(e, "error") : "no entry");
	cJSON *data = cJSON_DetachItemFromObjectCaseSensitive(e, "data");
	cJSON_Delete(doc);
	ck_assert_msg(data != NULL, "%s: no data", name);
	return data;
}

cJSON *status(struct client *c)
{
	return command(c, DLQ_COMMAND_GET_STATUS, NULL);
}

const cJSON *totals(const cJSON *data)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(data, "totals");
	ck_assert_msg(cJSON_IsObject(t), "no totals in the status");
	return t;
}

uint64_t one_chain(struct client *pub, struct client *worker, struct client *dead, const char *topic,
		const char *filter, const char *dead_topic, size_t n, const char **origin)
{
	char payload[32];
	snprintf(payload, sizeof(payload), "chain-%zu", n);
	uint64_t t0 = it_now_ms();
	client_publish_str(pub, topic, payload, 1);
	const char *id = expect_original(client_expect(worker, filter, 2 * n + 1));
	client_nack(worker, id, NULL);
	const char *copy = expect_retry_copy(client_expect(worker, filter, 2 * n + 2), topic, id, 1);
	client_nack(worker, copy, NULL);
	const struct it_msg *dl = client_expect(dead, dead_topic, n + 1);
	ck_assert_str_eq(dl->payload, payload);
	if(origin){
		*origin = id;
	}
	return it_now_ms() - t0;
}
