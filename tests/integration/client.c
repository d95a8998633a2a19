/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * MQTT clients for the integration tests, on libmosquitto: each runs the
 * library's network thread (mosquitto_loop_start), which records every
 * message and acknowledgement under the client's mutex; the test's thread
 * waits for them with deadlines. A client's own sync markers prove that the
 * broker has delivered everything queued for it before them.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness_int.h"

#define MAX_CLIENTS 64

struct completion {
	int mid;
	int rc;
};

struct client {
	struct mosquitto *mosq;
	struct broker *broker;
	char id[128];
	char sync_topic[192];
	int protocol;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool connack;
	int connack_rc;
	bool session_present;
	bool connected;
	bool closing;
	unsigned disconnects;
	struct it_msg **msgs;
	size_t nmsgs;
	size_t capmsgs;
	unsigned syncs_sent;
	unsigned syncs_seen;
	struct completion *dones;
	size_t ndones;
	size_t capdones;
};

/* What the current test (one forked process) created. */
static struct client *clients[MAX_CLIENTS];
static size_t nclients;
static unsigned client_seq;

void client__reset(void)
{
	nclients = 0;
}

void client__free_all(void)
{
	while(nclients > 0){
		client_free(clients[nclients - 1]);
	}
}

static void on_connect(struct mosquitto *mosq, void *obj, int rc, int flags, const mosquitto_property *props)
{
	(void)mosq;
	(void)props;
	struct client *c = obj;
	pthread_mutex_lock(&c->lock);
	c->connack = true;
	c->connack_rc = rc;
	c->session_present = rc == 0 && (flags & 1);
	c->connected = rc == 0;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void on_disconnect(struct mosquitto *mosq, void *obj, int rc, const mosquitto_property *props)
{
	(void)mosq;
	(void)rc;
	(void)props;
	struct client *c = obj;
	pthread_mutex_lock(&c->lock);
	c->connected = false;
	if(!c->closing){
		c->disconnects++;
	}
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void add_completion(struct client *c, int mid, int rc)
{
	pthread_mutex_lock(&c->lock);
	if(c->ndones == c->capdones){
		c->capdones = c->capdones ? c->capdones * 2 : 32;
		struct completion *nd = realloc(c->dones, c->capdones * sizeof(*nd));
		if(!nd){
			abort();
		}
		c->dones = nd;
	}
	c->dones[c->ndones].mid = mid;
	c->dones[c->ndones].rc = rc;
	c->ndones++;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void on_publish(struct mosquitto *mosq, void *obj, int mid, int reason, const mosquitto_property *props)
{
	(void)mosq;
	(void)props;
	add_completion(obj, mid, reason);
}

static void on_subscribe(struct mosquitto *mosq, void *obj, int mid, int count, const int *granted,
		const mosquitto_property *props)
{
	(void)mosq;
	(void)props;
	add_completion(obj, mid, count > 0 ? granted[0] : 128);
}

static void on_unsubscribe(struct mosquitto *mosq, void *obj, int mid, const mosquitto_property *props)
{
	(void)mosq;
	(void)props;
	add_completion(obj, mid, 0);
}

static void on_message(struct mosquitto *mosq, void *obj, const struct mosquitto_message *mm,
		const mosquitto_property *props)
{
	(void)mosq;
	struct client *c = obj;
	if(!strcmp(mm->topic, c->sync_topic)){
		pthread_mutex_lock(&c->lock);
		c->syncs_seen++;
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->lock);
		return;
	}
	if(!strncmp(mm->topic, SYNC_PREFIX, strlen(SYNC_PREFIX))){
		return; /* another client's marker, seen through a wildcard */
	}
	struct it_msg *m = msg__decode(mm, props);
	pthread_mutex_lock(&c->lock);
	if(c->nmsgs == c->capmsgs){
		c->capmsgs = c->capmsgs ? c->capmsgs * 2 : 32;
		struct it_msg **nm = realloc(c->msgs, c->capmsgs * sizeof(*nm));
		if(!nm){
			abort();
		}
		c->msgs = nm;
	}
	c->msgs[c->nmsgs++] = m;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/* Waits on c->cond until deadline (monotonic ms); false once it passed.
 * Called with c->lock held. */
static bool wait_until(struct client *c, uint64_t deadline)
{
	return it__cond_wait_until(&c->cond, &c->lock, deadline);
}

/* Waits for the completion of mid; true and *rc when it came in time. */
static bool wait_completion(struct client *c, int mid, int *rc)
{
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	bool found = false;
	pthread_mutex_lock(&c->lock);
	for(;;){
		for(size_t i = 0; i < c->ndones; i++){
			if(c->dones[i].mid == mid){
				*rc = c->dones[i].rc;
				c->dones[i] = c->dones[--c->ndones];
				found = true;
				break;
			}
		}
		if(found || !wait_until(c, deadline)){
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return found;
}

/* Connects a client called id (clean: a session that ends with the
 * connection; otherwise one that outlives it, for expiry_s seconds in v5). */
static struct client *client_create(const char *file, int line, struct broker *b, const char *id, int protocol,
		bool clean, uint32_t expiry_s)
{
	if(nclients >= MAX_CLIENTS){
		fail_at(file, line, "too many clients in one test");
	}
	struct client *c = calloc(1, sizeof(*c));
	if(!c){
		abort();
	}
	c->broker = b;
	c->protocol = protocol;
	snprintf(c->id, sizeof(c->id), "%s", id);
	snprintf(c->sync_topic, sizeof(c->sync_topic), SYNC_PREFIX "%s", c->id);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&c->lock, NULL);
	clients[nclients++] = c;

	c->mosq = mosquitto_new(c->id, clean, c);
	if(!c->mosq){
		fail_at(file, line, "mosquitto_new(%s) failed", c->id);
	}
	mosquitto_int_option(c->mosq, MOSQ_OPT_PROTOCOL_VERSION, protocol);
	mosquitto_connect_v5_callback_set(c->mosq, on_connect);
	mosquitto_disconnect_v5_callback_set(c->mosq, on_disconnect);
	mosquitto_publish_v5_callback_set(c->mosq, on_publish);
	mosquitto_subscribe_v5_callback_set(c->mosq, on_subscribe);
	mosquitto_unsubscribe_v5_callback_set(c->mosq, on_unsubscribe);
	mosquitto_message_v5_callback_set(c->mosq, on_message);
	mosquitto_property *props = NULL;
	if(!clean && protocol == MQTT_PROTOCOL_V5
			&& mosquitto_property_add_int32(&props, MQTT_PROP_SESSION_EXPIRY_INTERVAL, expiry_s) != MOSQ_ERR_SUCCESS){
		fail_at(file, line, "mosquitto_property_add_int32 failed");
	}
	int rc = mosquitto_connect_bind_v5(c->mosq, broker_socket(b), 0, 60, NULL, props);
	mosquitto_property_free_all(&props);
	if(rc != MOSQ_ERR_SUCCESS){
		fail_at(file, line, "client %s: connecting to %s: %s", c->id, broker_socket(b), mosquitto_strerror(rc));
	}
	rc = mosquitto_loop_start(c->mosq);
	if(rc != MOSQ_ERR_SUCCESS){
		fail_at(file, line, "client %s: mosquitto_loop_start: %s", c->id, mosquitto_strerror(rc));
	}
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	pthread_mutex_lock(&c->lock);
	while(!c->connack && wait_until(c, deadline)){
	}
	bool got = c->connack;
	int connack_rc = c->connack_rc;
	pthread_mutex_unlock(&c->lock);
	if(!got){
		fail_at(file, line, "client %s: no CONNACK within %d ms", c->id, HARNESS_WAIT_MS);
	}
	if(connack_rc != 0){
		fail_at(file, line, "client %s: CONNACK refused: %s", c->id,
				protocol == MQTT_PROTOCOL_V5 ? mosquitto_reason_string(connack_rc) : mosquitto_connack_string(connack_rc));
	}
	client_subscribe_at(file, line, c, c->sync_topic, 1);
	return c;
}

struct client *client_new_at(const char *file, int line, struct broker *b, const char *name, int protocol)
{
	char id[128];
	snprintf(id, sizeof(id), "%s-%ld-%u", name, (long)getpid(), ++client_seq);
	return client_create(file, line, b, id, protocol, true, 0);
}

struct client *client_new_session_at(const char *file, int line, struct broker *b, const char *id,
		int protocol, uint32_t expiry_s)
{
	return client_create(file, line, b, id, protocol, false, expiry_s);
}

bool client_session_present(struct client *c)
{
	pthread_mutex_lock(&c->lock);
	bool r = c->session_present;
	pthread_mutex_unlock(&c->lock);
	return r;
}

const char *client_id(const struct client *c)
{
	return c->id;
}

void client_subscribe_at(const char *file, int line, struct client *c, const char *filter, int qos)
{
	client_subscribe_id_at(file, line, c, filter, qos, 0);
}

struct client *client_subscribed_at(const char *file, int line, struct broker *b, const char *name,
		const char *filter)
{
	struct client *c = client_new_at(file, line, b, name, MQTT_PROTOCOL_V5);
	client_subscribe_id_at(file, line, c, filter, 1, 0);
	return c;
}

void client_subscribe_id_at(const char *file, int line, struct client *c, const char *filter, int qos, uint32_t id)
{
	int mid = 0, granted = 0;
	mosquitto_property *props = NULL;
	if(id && mosquitto_property_add_varint(&props, MQTT_PROP_SUBSCRIPTION_IDENTIFIER, id) != MOSQ_ERR_SUCCESS){
		fail_at(file, line, "client %s: subscription identifier %u", c->id, (unsigned)id);
	}
	int rc = mosquitto_subscribe_v5(c->mosq, &mid, filter, qos, 0, props);
	mosquitto_property_free_all(&props);
	if(rc != MOSQ_ERR_SUCCESS){
		fail_at(file, line, "client %s: subscribe %s: %s", c->id, filter, mosquitto_strerror(rc));
	}
	if(!wait_completion(c, mid, &granted)){
		char health[256];
		broker__health(c->broker, health, sizeof(health));
		fail_at(file, line, "client %s: no SUBACK for %s within %d ms%s", c->id, filter, HARNESS_WAIT_MS, health);
	}
	if(granted >= 0x80){
		fail_at(file, line, "client %s: subscription to %s refused (0x%02x)", c->id, filter, granted);
	}
}

void client_unsubscribe_at(const char *file, int line, struct client *c, const char *filter)
{
	int mid = 0, ignored = 0;
	int rc = mosquitto_unsubscribe_v5(c->mosq, &mid, filter, NULL);
	if(rc != MOSQ_ERR_SUCCESS){
		fail_at(file, line, "client %s: unsubscribe %s: %s", c->id, filter, mosquitto_strerror(rc));
	}
	if(!wait_completion(c, mid, &ignored)){
		char health[256];
		broker__health(c->broker, health, sizeof(health));
		fail_at(file, line, "client %s: no UNSUBACK for %s within %d ms%s", c->id, filter, HARNESS_WAIT_MS, health);
	}
}

int client_publish_at(const char *file, int line, struct client *c, const char *topic,
		const void *payload, int len, int qos, const mosquitto_property *props)
{
	int mid = 0, reason = 0;
	int rc = mosquitto_publish_v5(c->mosq, &mid, topic, len, payload, qos, false, props);
	if(rc != MOSQ_ERR_SUCCESS){
		fail_at(file, line, "client %s: publish to %s: %s", c->id, topic, mosquitto_strerror(rc));
	}
	if(!wait_completion(c, mid, &reason)){
		char health[256];
		broker__health(c->broker, health, sizeof(health));
		fail_at(file, line, "client %s: publish to %s (QoS %d) not completed within %d ms%s",
				c->id, topic, qos, HARNESS_WAIT_MS, health);
	}
	return reason;
}

void client_nack_at(const char *file, int line, struct client *c, const char *id, const char *reason)
{
	mosquitto_property *props = NULL;
	if(reason){
		if(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, "reason", reason) != MOSQ_ERR_SUCCESS){
			fail_at(file, line, "mosquitto_property_add_string_pair failed");
		}
	}
	int rc = client_publish_at(file, line, c, DLQ_NACK_TOPIC, id, (int)strlen(id), 1, props);
	mosquitto_property_free_all(&props);
	if(rc >= 0x80){
		fail_at(file, line, "client %s: the broker refused the NACK of %s: %s", c->id, id, mosquitto_reason_string(rc));
	}
}

static bool topic_matches(const char *filter, const char *topic)
{
	bool res = false;
	if(!filter){
		return true;
	}
	if(mosquitto_topic_matches_sub(filter, topic, &res) != MOSQ_ERR_SUCCESS){
		return false;
	}
	return res;
}

/* Called with c->lock held. */
static size_t count_locked(struct client *c, const char *filter, const struct it_msg **nth, size_t want)
{
	size_t n = 0;
	for(size_t i = 0; i < c->nmsgs; i++){
		if(topic_matches(filter, c->msgs[i]->topic)){
			if(nth && n == want){
				*nth = c->msgs[i];
			}
			n++;
		}
	}
	return n;
}

size_t client_count(struct client *c, const char *filter)
{
	pthread_mutex_lock(&c->lock);
	size_t n = count_locked(c, filter, NULL, 0);
	pthread_mutex_unlock(&c->lock);
	return n;
}

const struct it_msg *client_msg(struct client *c, const char *filter, size_t i)
{
	const struct it_msg *m = NULL;
	pthread_mutex_lock(&c->lock);
	count_locked(c, filter, &m, i);
	pthread_mutex_unlock(&c->lock);
	return m;
}

bool client_wait(struct client *c, const char *filter, size_t n, int timeout_ms)
{
	uint64_t deadline = it_now_ms() + (uint64_t)timeout_ms;
	bool ok;
	pthread_mutex_lock(&c->lock);
	for(;;){
		ok = count_locked(c, filter, NULL, 0) >= n;
		if(ok || !wait_until(c, deadline)){
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return ok;
}

const struct it_msg *client_expect_at(const char *file, int line, struct client *c, const char *filter, size_t n)
{
	if(!client_wait(c, filter, n, HARNESS_WAIT_MS)){
		size_t got = client_count(c, filter);
		client_dump(c, NULL);
		char health[256];
		broker__health(c->broker, health, sizeof(health));
		fail_at(file, line, "client %s: expected %zu message(s) on %s within %d ms, got %zu%s",
				c->id, n, filter ? filter : "any topic", HARNESS_WAIT_MS, got, health);
	}
	return n > 0 ? client_msg(c, filter, n - 1) : NULL;
}

void client_expect_exactly_at(const char *file, int line, struct client *c, const char *filter, size_t n)
{
	size_t got = client_count(c, filter);
	if(got != n){
		client_dump(c, NULL);
		fail_at(file, line, "client %s: expected exactly %zu message(s) on %s, got %zu",
				c->id, n, filter ? filter : "any topic", got);
	}
}

void client_sync_at(const char *file, int line, struct client *c)
{
	for(int round = 0; round < 2; round++){
		char payload[32];
		pthread_mutex_lock(&c->lock);
		unsigned target = ++c->syncs_sent;
		pthread_mutex_unlock(&c->lock);
		snprintf(payload, sizeof(payload), "sync %u", target);
		client_publish_at(file, line, c, c->sync_topic, payload, (int)strlen(payload), 1, NULL);
		uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
		pthread_mutex_lock(&c->lock);
		while(c->syncs_seen < target && wait_until(c, deadline)){
		}
		bool ok = c->syncs_seen >= target;
		pthread_mutex_unlock(&c->lock);
		if(!ok){
			char health[256];
			broker__health(c->broker, health, sizeof(health));
			fail_at(file, line, "client %s: sync marker %u did not come back within %d ms%s",
					c->id, target, HARNESS_WAIT_MS, health);
		}
	}
}

void clients_settle_at(const char *file, int line, ...)
{
	struct client *list[MAX_CLIENTS];
	size_t n = 0;
	va_list ap;
	va_start(ap, line);
	struct client *c;
	while((c = va_arg(ap, struct client *)) != NULL && n < MAX_CLIENTS){
		list[n++] = c;
	}
	va_end(ap);
	for(size_t i = 0; i < n; i++){
		client_sync_at(file, line, list[i]);
	}
	it_sleep_ms(HARNESS_SETTLE_MS);
	for(size_t i = 0; i < n; i++){
		client_sync_at(file, line, list[i]);
	}
}

void clients_expect_totals_at(const char *file, int line, struct client *a, size_t na, struct client *b, size_t nb)
{
	clients_settle_at(file, line, a, b, (struct client *)NULL);
	client_expect_exactly_at(file, line, a, NULL, na);
	client_expect_exactly_at(file, line, b, NULL, nb);
}

bool client_connected(struct client *c)
{
	pthread_mutex_lock(&c->lock);
	bool r = c->connected;
	pthread_mutex_unlock(&c->lock);
	return r;
}

unsigned client_disconnects(struct client *c)
{
	pthread_mutex_lock(&c->lock);
	unsigned r = c->disconnects;
	pthread_mutex_unlock(&c->lock);
	return r;
}

void client_dump(struct client *c, const char *filter)
{
	pthread_mutex_lock(&c->lock);
	fprintf(stderr, "---- client %s received %zu message(s)%s%s ----\n", c->id, c->nmsgs,
			filter ? "; those matching " : "", filter ? filter : "");
	for(size_t i = 0; i < c->nmsgs; i++){
		if(topic_matches(filter, c->msgs[i]->topic)){
			msg__print(stderr, i, c->msgs[i]);
		}
	}
	fprintf(stderr, "---- end of client %s ----\n", c->id);
	pthread_mutex_unlock(&c->lock);
}

void client_free(struct client *c)
{
	if(!c){
		return;
	}
	for(size_t i = 0; i < nclients; i++){
		if(clients[i] == c){
			clients[i] = clients[--nclients];
			break;
		}
	}
	pthread_mutex_lock(&c->lock);
	c->closing = true;
	pthread_mutex_unlock(&c->lock);
	if(c->mosq){
		mosquitto_disconnect(c->mosq);
		mosquitto_loop_stop(c->mosq, false);
		mosquitto_destroy(c->mosq);
	}
	for(size_t i = 0; i < c->nmsgs; i++){
		msg__free(c->msgs[i]);
	}
	free(c->msgs);
	free(c->dones);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c);
}


const struct it_msg *client_find(struct client *c, const char *filter, const char *name, const char *value)
{
	const struct it_msg *found = NULL;
	pthread_mutex_lock(&c->lock);
	for(size_t i = 0; i < c->nmsgs && !found; i++){
		const struct it_msg *m = c->msgs[i];
		const char *v;
		if(topic_matches(filter, m->topic) && (v = msg_user(m, name)) != NULL && !strcmp(v, value)){
			found = m;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return found;
}

const struct it_msg *client_find_payload(struct client *c, const char *filter, const char *payload, size_t k)
{
	const struct it_msg *found = NULL;
	size_t len = strlen(payload);
	pthread_mutex_lock(&c->lock);
	for(size_t i = 0; i < c->nmsgs && !found; i++){
		const struct it_msg *m = c->msgs[i];
		if(topic_matches(filter, m->topic) && (size_t)m->payloadlen == len && !memcmp(m->payload, payload, len)){
			if(k == 0){
				found = m;
			}else{
				k--;
			}
		}
	}
	pthread_mutex_unlock(&c->lock);
	return found;
}

void client_expect_dropped(struct client *c, size_t want)
{
	char text[32];
	snprintf(text, sizeof(text), "%zu", want);
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	while(client_find_payload(c, BROKER_DROPPED_TOPIC, text, 0) == NULL){
		if(it_now_ms() > deadline){
			client_dump(c, BROKER_DROPPED_TOPIC);
			ck_abort_msg("the broker did not report %s dropped messages", text);
		}
		client_wait(c, BROKER_DROPPED_TOPIC, client_count(c, BROKER_DROPPED_TOPIC) + 1, 100);
	}
}
