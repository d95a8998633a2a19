/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * dlq_numbers_worker: the subscriber of the odd/even demo. It takes numbers
 * from `numbers` (QoS 1), accepts the even ones and fails the odd ones, and
 * asks mosquitto-dlq for a retry of each failure with a compact NACK: the
 * message's dlq-id published to $CONTROL/dlq/v1/nack with a `reason`. A
 * refused NACK (an expired id, say) is answered on $CONTROL/dlq/v1/response,
 * sent to this client alone: no subscription is needed to receive it.
 *
 * stdout, one line per delivery:  processed N  |  failed N (attempt K)
 * stderr: readiness, refused NACKs and anything unexpected.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <mosquitto.h>
#include <mqtt_protocol.h>

#include "demo_client.h"
#include "mosquitto_dlq.h"

#define NACK_REASON "odd numbers are not accepted"

/* Parses a whole payload as a decimal integer. */
static int parse_number(const struct mosquitto_message *msg, long *out)
{
	char buf[32];
	char *end;

	if(msg->payloadlen <= 0 || (size_t)msg->payloadlen >= sizeof(buf)) return EINVAL;
	memcpy(buf, msg->payload, (size_t)msg->payloadlen);
	buf[msg->payloadlen] = '\0';
	errno = 0;
	*out = strtol(buf, &end, 10);
	if(errno || end == buf || *end != '\0') return EINVAL;
	return 0;
}

/* Asks for a retry of the delivery named id. */
static void nack(struct mosquitto *m, const struct demo_opts *o, const char *id)
{
	mosquitto_property *props = NULL;
	int rc;

	rc = mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, DLQ_PROP_NACK_REASON, NACK_REASON);
	if(rc == MOSQ_ERR_SUCCESS){
		rc = mosquitto_publish_v5(m, NULL, DLQ_NACK_TOPIC, (int)strlen(id), id, 1, false, props);
	}
	if(rc != MOSQ_ERR_SUCCESS){
		fprintf(stderr, "%s: cannot send NACK for %s: %s\n", o->prog, id, mosquitto_strerror(rc));
	}
	mosquitto_property_free_all(&props);
}

/* A reply from the plugin: {"responses":[{"command":"nack","id":...,
 * "error":...}]}. A compact NACK without a response topic is answered only
 * when it was refused. */
static void on_reply(const struct demo_opts *o, const struct mosquitto_message *msg)
{
	cJSON *doc = cJSON_ParseWithLength(msg->payload, (size_t)msg->payloadlen);
	const cJSON *responses = cJSON_GetObjectItemCaseSensitive(doc, "responses");
	const cJSON *r;

	if(!cJSON_IsArray(responses)){
		fprintf(stderr, "%s: unexpected reply: %.*s\n", o->prog, msg->payloadlen, (const char *)msg->payload);
		cJSON_Delete(doc);
		return;
	}
	cJSON_ArrayForEach(r, responses){
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(r, "id");
		const cJSON *error = cJSON_GetObjectItemCaseSensitive(r, "error");
		if(cJSON_IsString(error)){
			fprintf(stderr, "%s: NACK of %s refused: %s\n", o->prog,
					cJSON_IsString(id) ? id->valuestring : "?", error->valuestring);
		}
	}
	cJSON_Delete(doc);
}

static void on_message(struct mosquitto *m, void *userdata, const struct mosquitto_message *msg,
		const mosquitto_property *props)
{
	const struct demo_opts *o = userdata;
	char id[DLQ_ID_LEN + 8];
	char retry_count[16];
	unsigned long attempt = 1;
	long n;

	if(strcmp(msg->topic, DLQ_RESPONSE_TOPIC) == 0){
		on_reply(o, msg);
		return;
	}
	if(parse_number(msg, &n)){
		fprintf(stderr, "%s: ignored a message on %s that is not a number\n", o->prog, msg->topic);
		return;
	}
	if(n % 2 == 0){
		printf("processed %ld\n", n);
		return;
	}

	/* The first delivery has no retry-count; a retry copy carries how many
	 * deliveries came before it. */
	if(demo__user_property(props, DLQ_PROP_RETRY_COUNT, retry_count, sizeof(retry_count))){
		char *end;
		errno = 0;
		attempt = strtoul(retry_count, &end, 10);
		if(errno || end == retry_count || *end != '\0'){
			fprintf(stderr, "%s: bad %s '%s' on %ld\n", o->prog, DLQ_PROP_RETRY_COUNT, retry_count, n);
			attempt = 0;
		}
		attempt++;
	}
	printf("failed %ld (attempt %lu)\n", n, attempt);

	if(demo__user_property(props, DLQ_PROP_ID, id, sizeof(id)) == NULL){
		fprintf(stderr, "%s: %ld carries no %s (no policy covers %s?): cannot ask for a retry\n",
				o->prog, n, DLQ_PROP_ID, msg->topic);
		return;
	}
	nack(m, o, id);
}

int main(int argc, char **argv)
{
	struct demo_opts o = {
		.prog = "dlq_numbers_worker",
		.id = "dlq-demo-worker",
		.topic = "numbers",
	};
	struct mosquitto *m;
	int rc;

	demo__parse_args(argc, argv, &o);
	/* Lines must reach a redirected stdout as they happen. */
	setvbuf(stdout, NULL, _IOLBF, 0);

	mosquitto_lib_init();
	m = demo__connect(&o, on_message, &o);
	rc = m ? demo__run(m) : 1;
	mosquitto_lib_cleanup();
	return rc;
}
