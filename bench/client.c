/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The load driver's clients (see load.h): MQTT v5 libmosquitto clients
 * without a thread of their own, and what a subscriber does with each
 * message: count it, time it from the send time in its payload, and in a
 * NACK storm send its dlq-id back to $CONTROL/dlq/v1/nack on its own
 * connection (with LOAD_ACK, to $CONTROL/dlq/v1/ack, the message being
 * done when the broker has acknowledged the ACK).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mosquitto.h>
#include <mqtt_protocol.h>

#include "load.h"
#include "mosquitto_dlq.h"

#define CONNECT_RETRY_MS 5000

bool client__read_stamp(const mosquitto_property *props, char id[DLQ_ID_LEN + 1], bool *is_copy)
{
	bool found = false;
	*is_copy = false;
	for(const mosquitto_property *p = props; p; p = mosquitto_property_next(p)){
		if(mosquitto_property_identifier(p) != MQTT_PROP_USER_PROPERTY) continue;
		char *name = NULL, *value = NULL;
		if(mosquitto_property_read_string_pair(p, MQTT_PROP_USER_PROPERTY, &name, &value, false)){
			if(!strcmp(name, DLQ_PROP_ID) && strlen(value) == DLQ_ID_LEN){
				memcpy(id, value, DLQ_ID_LEN + 1);
				found = true;
			}else if(!strcmp(name, DLQ_PROP_RETRY_COUNT)){
				*is_copy = true;
			}
		}
		free(name);
		free(value);
	}
	return found;
}

static bool has_user_property(const mosquitto_property *props)
{
	for(const mosquitto_property *p = props; p; p = mosquitto_property_next(p)){
		if(mosquitto_property_identifier(p) == MQTT_PROP_USER_PROPERTY) return true;
	}
	return false;
}

static void on_message(struct mosquitto *m, void *ud, const struct mosquitto_message *msg,
		const mosquitto_property *props)
{
	struct client *c = ud;
	struct load *L = c->load;
	uint64_t sent_ns;
	uint32_t idx;

	if(msg->payloadlen < 16){
		L->errors++;
		return;
	}
	memcpy(&sent_ns, msg->payload, 8);
	memcpy(&idx, (const uint8_t *)msg->payload + 8, 4);
	if(idx >= (uint32_t)L->npairs){
		L->errors++;
		return;
	}
	struct pair *p = &L->pairs[idx];
	if(c->role == ROLE_DEAD){
		L->c.dead_letters++;
		p->done++;
		return;
	}

	bool is_copy = false;
	L->c.delivered++;
	if(L->measuring) L->target_delivered[p->target]++;
	if(p->t->kind == LOAD_STORM || p->t->kind == LOAD_ACK){
		char id[DLQ_ID_LEN + 1];
		if(client__read_stamp(props, id, &is_copy)){
			/* The NACK (ACK) goes out on the subscriber's own connection. */
			const char *topic = p->t->kind == LOAD_ACK ? DLQ_ACK_TOPIC : DLQ_NACK_TOPIC;
			if(mosquitto_publish_v5(m, NULL, topic, DLQ_ID_LEN, id, L->o->qos, false, NULL)){
				L->errors++;
			}
		}else{
			L->c.untagged++;
		}
	}else if(p->t->kind == LOAD_TRACKED && !has_user_property(props)){
		L->c.untagged++;
	}
	if(is_copy){
		L->c.copies++;
		return;
	}
	/* An ACKed message is done when the broker has taken its ACK
	 * (on_publish): libmosquitto sends a client's QoS 1 publishes 20 at a
	 * time and drops those still queued when it disconnects. */
	if(p->t->kind != LOAD_STORM && p->t->kind != LOAD_ACK) p->done++;
	int t = p->target;
	if(L->measuring && L->o->record_latency && L->nlat[t] < L->caplat){
		uint64_t now = bench__now_ns();
		if(L->arrived[t]) L->arrived[t][L->nlat[t]] = now;
		L->lat[t][L->nlat[t]++] = now - sent_ns;
	}
}

/* The broker's PUBACK of a subscriber's ACK (LOAD_ACK). */
static void on_publish(struct mosquitto *m, void *ud, int mid, int reason_code, const mosquitto_property *props)
{
	struct client *c = ud;
	struct load *L = c->load;
	(void)m;
	(void)mid;
	(void)props;
	if(c->role != ROLE_SUB || L->pairs[c->index].t->kind != LOAD_ACK) return;
	if(reason_code >= 0x80) L->errors++;
	L->pairs[c->index].done++;
}

int client__open(struct load *L, enum role role, int index)
{
	struct client *c = &L->clients[L->nclients];
	char id[96];
	static const char *names[] = { "pub", "sub", "dead" };

	memset(c, 0, sizeof(*c));
	c->link.name = role == ROLE_PUB ? "publisher" : role == ROLE_SUB ? "subscriber" : "dead-letter consumer";
	c->load = L;
	c->role = role;
	c->index = index;
	/* The client's slot too: a pair's subscribers share its index. */
	snprintf(id, sizeof(id), "%s-%s%d-%d-%d", L->o->label, names[role], index, L->nclients, (int)getpid());
	const struct broker *b = L->pairs[index].t->broker;
	c->mosq = mosquitto_new(id, true, c);
	if(c->mosq == NULL) return -1;
	L->nclients++;
	mosquitto_int_option(c->mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
	link__callbacks_set(c->mosq);
	mosquitto_message_v5_callback_set(c->mosq, on_message);
	mosquitto_publish_v5_callback_set(c->mosq, on_publish);
	/* A unix listener has a short backlog: when a burst of clients
	 * finds it full, connect fails with EAGAIN; try again shortly. */
	int rc;
	uint64_t deadline = bench__now_ns() + CONNECT_RETRY_MS * 1000000ull;
	while((rc = mosquitto_connect(c->mosq, b->host, b->port, 60)) == MOSQ_ERR_ERRNO
			&& (errno == EAGAIN || errno == EWOULDBLOCK) && bench__now_ns() < deadline){
		bench__sleep_ms(2);
	}
	if(rc){
		fprintf(stderr, "dlq_bench: connect to %s: %s\n", b->host,
				rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc));
		return -1;
	}
	int fd = mosquitto_socket(c->mosq);
	int fl = fcntl(fd, F_GETFL);
	if(fl >= 0 && !(fl & O_NONBLOCK)) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	return 0;
}

void client__close_all(struct load *L)
{
	for(int i = 0; i < L->nclients; i++){
		struct client *c = &L->clients[i];
		if(c->link.connected){
			c->link.connected = false;
			mosquitto_disconnect_v5(c->mosq, 0, NULL);
			for(int k = 0; k < 100 && mosquitto_want_write(c->mosq); k++){
				mosquitto_loop_write(c->mosq, 1);
			}
		}
		mosquitto_destroy(c->mosq);
	}
	L->nclients = 0;
}
