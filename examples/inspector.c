/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * dlq_inspector: watches a dead-letter topic (default dead/numbers, QoS 1)
 * and prints one line per dead letter from the properties mosquitto-dlq puts
 * on it, then the subscriber's reason indented below:
 *
 *   parked 3 from numbers (retry-count 3)
 *     reason: odd numbers are not accepted
 *
 * The payload is printed as text; it is the original message's, unchanged.
 */
#include <stdio.h>

#include <mosquitto.h>

#include "demo_client.h"
#include "mosquitto_dlq.h"

static void on_message(struct mosquitto *m, void *userdata, const struct mosquitto_message *msg,
		const mosquitto_property *props)
{
	char origin[1024];
	char retry_count[16];
	char reason[DLQ_REASON_MAX_BYTES + 1];
	(void)m;
	(void)userdata;

	if(demo__user_property(props, DLQ_PROP_ORIGIN_TOPIC, origin, sizeof(origin)) == NULL){
		snprintf(origin, sizeof(origin), "?");
	}
	if(demo__user_property(props, DLQ_PROP_RETRY_COUNT, retry_count, sizeof(retry_count)) == NULL){
		snprintf(retry_count, sizeof(retry_count), "?");
	}
	printf("parked %.*s from %s (%s %s)\n", msg->payloadlen, (const char *)msg->payload,
			origin, DLQ_PROP_RETRY_COUNT, retry_count);
	if(demo__user_property(props, DLQ_PROP_DEAD_LETTER_REASON, reason, sizeof(reason))){
		printf("  reason: %s\n", reason);
	}
}

int main(int argc, char **argv)
{
	struct demo_opts o = {
		.prog = "dlq_inspector",
		.id = "dlq-demo-inspector",
		.topic = "dead/numbers",
	};
	struct mosquitto *m;
	int rc;

	demo__parse_args(argc, argv, &o);
	/* Lines must reach a redirected stdout as they happen. */
	setvbuf(stdout, NULL, _IOLBF, 0);

	mosquitto_lib_init();
	m = demo__connect(&o, on_message, NULL);
	rc = m ? demo__run(m) : 1;
	mosquitto_lib_cleanup();
	return rc;
}
