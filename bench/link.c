/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The connection state every bench client keeps (link.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <mosquitto.h>
#include <mqtt_protocol.h>

#include "link.h"

static void on_connect(struct mosquitto *m, void *ud, int rc, int flags, const mosquitto_property *props)
{
	struct link *l = ud;
	(void)m;
	(void)flags;
	(void)props;
	if(rc == 0){
		l->connected = true;
	}else{
		l->failed = true;
		fprintf(stderr, "dlq_bench: %s: connection refused: %s\n", l->name, mosquitto_reason_string(rc));
	}
}

static void on_subscribe(struct mosquitto *m, void *ud, int mid, int count, const int *granted,
		const mosquitto_property *props)
{
	struct link *l = ud;
	(void)m;
	(void)mid;
	(void)props;
	if(count == 1 && granted[0] < 0x80){
		l->subscribed++;
	}else{
		l->failed = true;
		fprintf(stderr, "dlq_bench: %s: subscription refused\n", l->name);
	}
}

static void on_disconnect(struct mosquitto *m, void *ud, int rc, const mosquitto_property *props)
{
	struct link *l = ud;
	(void)m;
	(void)props;
	if(l->connected && rc){
		fprintf(stderr, "dlq_bench: %s lost its connection: %s\n", l->name, mosquitto_reason_string(rc));
		l->failed = true;
	}
	l->connected = false;
}

void link__callbacks_set(struct mosquitto *m)
{
	mosquitto_connect_v5_callback_set(m, on_connect);
	mosquitto_subscribe_v5_callback_set(m, on_subscribe);
	mosquitto_disconnect_v5_callback_set(m, on_disconnect);
}

struct mosquitto *link__connect(void *ud, const char *id, const struct broker *b, const char *suite,
		void (*on_message)(struct mosquitto *, void *, const struct mosquitto_message *, const mosquitto_property *))
{
	struct mosquitto *m = mosquitto_new(id, true, ud);
	if(m == NULL) return NULL;
	mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
	link__callbacks_set(m);
	mosquitto_message_v5_callback_set(m, on_message);
	if(mosquitto_connect(m, b->host, b->port, 60)){
		fprintf(stderr, "dlq_bench: %s: cannot connect to %s: %s\n", suite, b->host, strerror(errno));
		mosquitto_destroy(m);
		return NULL;
	}
	return m;
}
