/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The persistent session of the saves suite's autosave broker (see
 * saves.h): a libmosquitto client with clean session false subscribes at
 * QoS 1 and leaves, so that the broker queues every message of the topic
 * for it, keeps the queue in its database at every autosave, and restores
 * it when it starts again. MQTT 3.1.1, whose persistent session never
 * expires unless the broker's persistent_client_expiration says so.
 */
#include <stdio.h>

#include <mosquitto.h>

#include "link.h"
#include "saves.h"

#define QUEUE_CLIENT_ID "dlq-bench-saves-queued"
#define QUEUE_TIMEOUT_MS 10000

struct queue_client {
	struct link link;            /* first: the callbacks' userdata */
	struct mosquitto *m;
};

/* Runs the client's loop until it is connected (connected given) or its
 * subscription granted (subscribed given): 0, or -1 if it failed or timed
 * out. */
static int wait_for(struct queue_client *c, const bool *connected, const int *subscribed)
{
	uint64_t deadline = bench__now_ns() + QUEUE_TIMEOUT_MS * 1000000ull;
	while(!c->link.failed && bench__now_ns() < deadline && !bench__interrupted()){
		if(connected && *connected) return 0;
		if(subscribed && *subscribed) return 0;
		if(mosquitto_loop(c->m, 100, 1) != MOSQ_ERR_SUCCESS) return -1;
	}
	return -1;
}

int saves_queue__subscribe(const struct broker *b, const char *topic)
{
	struct queue_client c = { .link = { .name = "queued session" } };
	int rc = -1;

	c.m = mosquitto_new(QUEUE_CLIENT_ID, false, &c);
	if(c.m == NULL) return -1;
	link__callbacks_set(c.m);
	if(mosquitto_connect(c.m, b->host, b->port, 60) || wait_for(&c, &c.link.connected, NULL)){
		fprintf(stderr, "dlq_bench: saves: the queued session did not connect\n");
		goto done;
	}
	if(mosquitto_subscribe(c.m, NULL, topic, 1) || wait_for(&c, NULL, &c.link.subscribed)){
		fprintf(stderr, "dlq_bench: saves: the queued session did not subscribe to %s\n", topic);
		goto done;
	}
	rc = 0;
done:
	c.link.connected = false;
	mosquitto_disconnect(c.m);
	for(int k = 0; k < 10 && mosquitto_want_write(c.m); k++){
		mosquitto_loop_write(c.m, 1);
	}
	mosquitto_destroy(c.m);
	return rc;
}
