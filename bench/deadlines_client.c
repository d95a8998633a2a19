/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The deadlines suite's clients (see deadlines.h): MQTT v5 libmosquitto
 * clients on one ppoll loop in this thread. None of them settles anything:
 * the holder and the short clients receive tracked messages, acknowledge
 * them at the MQTT level only (libmosquitto's PUBACK), and so hold one
 * delivery each awaiting settlement per message until its ack_timeout runs
 * out; the publisher publishes to them and sends getStatus. Their keepalive
 * is long: they are left unserved while the load driver's phases run, and
 * the broker is stopped (SIGSTOP) for seconds in the expiry phase.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <mqtt_protocol.h>

#include "deadlines.h"
#include "load.h"
#include "mosquitto_dlq.h"

#define DL_KEEPALIVE 3600
#define DL_WAIT_MS 120000
#define DL_WINDOW 200
#define DL_CONNECT_RETRY_MS 5000
#define DL_READS_PER_PASS 256
#define DL_MISC_NS 500000000ull

static void on_message(struct mosquitto *m, void *ud, const struct mosquitto_message *msg,
		const mosquitto_property *props)
{
	struct dl_client *c = ud;
	struct dl_set *s = c->set;
	char id[DLQ_ID_LEN + 1];
	bool is_copy;
	(void)m;

	if(c->role == DL_PUB){
		if(strcmp(msg->topic, s->reply_topic)) return;
		free(s->reply);
		s->reply = malloc((size_t)msg->payloadlen + 1);
		if(s->reply == NULL){
			c->link.failed = true;
			return;
		}
		memcpy(s->reply, msg->payload, (size_t)msg->payloadlen);
		s->reply[msg->payloadlen] = '\0';
		s->reply_len = (size_t)msg->payloadlen;
		s->got_reply = true;
		return;
	}
	if(!client__read_stamp(props, id, &is_copy)) s->untagged++;
	if(is_copy){
		c->copies++;
		return;
	}
	c->received++;
	if(c->role == DL_SHORT) s->last_short_ns = bench__now_ns();
}

static bool any_failed(const struct dl_set *s)
{
	for(int i = 0; i < s->n; i++){
		if(s->c[i].link.failed) return true;
	}
	return false;
}

/* What pump waits for. */
enum dl_until { DU_CONNECTED, DU_SUBSCRIBED, DU_HOLDER, DU_SHORTS, DU_COPIES, DU_REPLY, DU_TIME };

static bool reached(const struct dl_set *s, enum dl_until u, uint64_t want)
{
	uint64_t sum = 0;
	switch(u){
		case DU_CONNECTED:
		case DU_SUBSCRIBED:
			for(int i = 0; i < s->n; i++){
				if(!(u == DU_CONNECTED ? s->c[i].link.connected : s->c[i].link.subscribed)) return false;
			}
			return true;
		case DU_HOLDER:
			return s->c[s->holder].received >= want;
		case DU_SHORTS:
		case DU_COPIES:
			for(int i = s->first_short; i < s->first_short + s->shorts; i++){
				sum += u == DU_SHORTS ? s->c[i].received : s->c[i].copies;
			}
			return sum >= want;
		case DU_REPLY:
			return s->got_reply;
		case DU_TIME:
			return false;
	}
	return false;
}

/* Serves every client until u reaches want, for at most timeout_ms
 * (DU_TIME: for timeout_ms). publish, if not NULL, is called each pass to
 * publish what its window allows. Returns 0, or -1 (logged) on a client's
 * failure, a timeout or an interruption. */
static int pump(struct dl_set *s, enum dl_until u, uint64_t want, int timeout_ms, const char *what,
		void (*publish)(struct dl_set *s, void *ctx), void *ctx)
{
	struct pollfd *fds = calloc((size_t)s->n, sizeof(*fds));
	if(fds == NULL) return -1;
	uint64_t deadline = bench__now_ns() + (uint64_t)timeout_ms * 1000000ull;
	uint64_t next_misc = bench__now_ns() + DL_MISC_NS;
	int rc = -1;
	for(;;){
		if(any_failed(s) || bench__interrupted()) break;
		if(reached(s, u, want)){
			rc = 0;
			break;
		}
		uint64_t now = bench__now_ns();
		if(now >= deadline){
			if(u == DU_TIME){
				rc = 0;
			}else{
				fprintf(stderr, "dlq_bench: deadlines: timed out waiting for %s\n", what);
			}
			break;
		}
		if(publish) publish(s, ctx);
		for(int i = 0; i < s->n; i++){
			struct mosquitto *m = s->c[i].m;
			if(mosquitto_want_write(m)) mosquitto_loop_write(m, 1);
			fds[i].fd = mosquitto_socket(m);
			fds[i].events = POLLIN | (mosquitto_want_write(m) ? POLLOUT : 0);
			fds[i].revents = 0;
		}
		uint64_t wait = 10000000; /* 10 ms */
		if(deadline - now < wait) wait = deadline - now;
		struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)wait };
		int n = ppoll(fds, (nfds_t)s->n, &ts, NULL);
		if(n < 0 && errno != EINTR) break;
		for(int i = 0; n > 0 && i < s->n; i++){
			struct dl_client *c = &s->c[i];
			if(fds[i].revents & (POLLIN | POLLHUP | POLLERR)){
				for(int k = 0; k < DL_READS_PER_PASS; k++){
					errno = 0;
					int r = mosquitto_loop_read(c->m, 1);
					if(r){
						if(c->link.connected || u == DU_CONNECTED) c->link.failed = true;
						break;
					}
					if(errno == EAGAIN || errno == EWOULDBLOCK) break;
				}
			}
			if(fds[i].revents & POLLOUT) mosquitto_loop_write(c->m, 1);
		}
		if(now >= next_misc){
			for(int i = 0; i < s->n; i++) mosquitto_loop_misc(s->c[i].m);
			next_misc = now + DL_MISC_NS;
		}
	}
	free(fds);
	return rc;
}

/* A new client of role (index: a short client's topic number), connecting. */
static struct dl_client *add_client(struct dl_set *s, const char *label, enum dl_role role, int index)
{
	static const char *const names[] = { "pub", "holder", "short" };
	if(s->n == s->cap){
		int cap = s->cap ? s->cap * 2 : 8;
		struct dl_client *c = realloc(s->c, (size_t)cap * sizeof(*c));
		if(c == NULL) return NULL;
		/* Each libmosquitto client points at its slot: set again. */
		for(int i = 0; i < s->n; i++) mosquitto_user_data_set(c[i].m, &c[i]);
		s->c = c;
		s->cap = cap;
	}
	struct dl_client *c = &s->c[s->n];
	char id[96];
	memset(c, 0, sizeof(*c));
	c->link.name = "deadlines client";
	c->set = s;
	c->role = role;
	c->index = index;
	snprintf(id, sizeof(id), "%s-%s%d-%d", label, names[role], index, (int)getpid());
	c->m = mosquitto_new(id, true, c);
	if(c->m == NULL) return NULL;
	s->n++;
	mosquitto_int_option(c->m, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
	link__callbacks_set(c->m);
	mosquitto_message_v5_callback_set(c->m, on_message);
	int rc;
	uint64_t deadline = bench__now_ns() + DL_CONNECT_RETRY_MS * 1000000ull;
	while((rc = mosquitto_connect(c->m, s->b->host, s->b->port, DL_KEEPALIVE)) == MOSQ_ERR_ERRNO
			&& (errno == EAGAIN || errno == EWOULDBLOCK) && bench__now_ns() < deadline){
		bench__sleep_ms(2);
	}
	if(rc){
		fprintf(stderr, "dlq_bench: deadlines: connect to %s: %s\n", s->b->host,
				rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc));
		return NULL;
	}
	int fd = mosquitto_socket(c->m);
	int fl = fcntl(fd, F_GETFL);
	if(fl >= 0 && !(fl & O_NONBLOCK)) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	return c;
}

/* Connects the clients from `from` on and subscribes each to its topic. */
static int connect_and_subscribe(struct dl_set *s, int from)
{
	if(pump(s, DU_CONNECTED, 0, DL_WAIT_MS, "the connections", NULL, NULL)) return -1;
	for(int i = from; i < s->n; i++){
		struct dl_client *c = &s->c[i];
		char topic[64];
		if(c->role == DL_PUB){
			snprintf(topic, sizeof(topic), "%s", s->reply_topic);
		}else if(c->role == DL_HOLDER){
			snprintf(topic, sizeof(topic), "%s", DL_HOLD_TOPIC);
		}else{
			snprintf(topic, sizeof(topic), DL_SHORT_PREFIX "%d", c->index);
		}
		if(mosquitto_subscribe_v5(c->m, NULL, topic, 1, 0, NULL)) return -1;
	}
	return pump(s, DU_SUBSCRIBED, 0, DL_WAIT_MS, "the subscriptions", NULL, NULL);
}

int dl_set__open(struct dl_set *s, const struct broker *b, const char *label, bool holder)
{
	memset(s, 0, sizeof(*s));
	s->b = b;
	s->pub = s->holder = -1;
	memset(s->payload, 'x', sizeof(s->payload));
	snprintf(s->reply_topic, sizeof(s->reply_topic), "bench/deadlines/reply/%d", (int)getpid());
	s->pub = s->n;
	if(add_client(s, label, DL_PUB, 0) == NULL) return -1;
	if(holder){
		s->holder = s->n;
		if(add_client(s, label, DL_HOLDER, 0) == NULL) return -1;
	}
	return connect_and_subscribe(s, 0);
}

int dl_set__add_shorts(struct dl_set *s, int n)
{
	int from = s->n;
	s->first_short = from;
	for(int k = 0; k < n; k++){
		if(add_client(s, "dl", DL_SHORT, k) == NULL) return -1;
		s->shorts++;
		/* A unix listener's backlog is short: let the broker accept
		 * the connections as they come. */
		if(k % 50 == 49 && pump(s, DU_CONNECTED, 0, DL_WAIT_MS, "the connections", NULL, NULL)) return -1;
	}
	return connect_and_subscribe(s, from);
}

void dl_set__close(struct dl_set *s)
{
	for(int i = 0; i < s->n; i++){
		struct dl_client *c = &s->c[i];
		if(c->link.connected){
			c->link.connected = false;
			mosquitto_disconnect_v5(c->m, 0, NULL);
			for(int k = 0; k < 100 && mosquitto_want_write(c->m); k++) mosquitto_loop_write(c->m, 1);
		}
		mosquitto_destroy(c->m);
	}
	free(s->c);
	free(s->reply);
	memset(s, 0, sizeof(*s));
}

struct fill {
	uint64_t want, sent, base;
	int next_short;
	bool shorts;
	uint64_t first_ns;
};

static void publish_fill(struct dl_set *s, void *ctx)
{
	struct fill *f = ctx;
	struct mosquitto *m = s->c[s->pub].m;
	for(int burst = 0; burst < 32 && f->sent < f->want; burst++){
		uint64_t done = 0;
		char topic[64];
		if(f->shorts){
			for(int i = s->first_short; i < s->first_short + s->shorts; i++) done += s->c[i].received;
			snprintf(topic, sizeof(topic), DL_SHORT_PREFIX "%d", f->next_short);
		}else{
			done = s->c[s->holder].received;
			snprintf(topic, sizeof(topic), "%s", DL_HOLD_TOPIC);
		}
		if(f->sent - (done - f->base) >= DL_WINDOW) break;
		if(f->first_ns == 0) f->first_ns = bench__now_ns();
		if(mosquitto_publish_v5(m, NULL, topic, (int)sizeof(s->payload), s->payload, 1, false, NULL)){
			s->c[s->pub].link.failed = true;
			return;
		}
		f->sent++;
		f->next_short++;
	}
}

int dl_set__fill_holder(struct dl_set *s, uint64_t n)
{
	struct fill f = { .want = n, .base = s->c[s->holder].received };
	/* Generous: under callgrind, 100,000 messages take a while. */
	return pump(s, DU_HOLDER, f.base + n, DL_WAIT_MS * 10, "the holder's messages", publish_fill, &f);
}

int dl_set__fill_shorts(struct dl_set *s, uint64_t *first_ns)
{
	uint64_t base = 0;
	for(int i = s->first_short; i < s->first_short + s->shorts; i++) base += s->c[i].received;
	struct fill f = { .want = (uint64_t)s->shorts, .base = base, .shorts = true };
	int rc = pump(s, DU_SHORTS, base + (uint64_t)s->shorts, DL_WAIT_MS, "the short clients' messages", publish_fill,
			&f);
	*first_ns = f.first_ns;
	return rc;
}

uint64_t dl_set__short_copies(const struct dl_set *s)
{
	uint64_t n = 0;
	for(int i = s->first_short; i < s->first_short + s->shorts; i++) n += s->c[i].copies;
	return n;
}

int dl_set__wait_copies(struct dl_set *s, uint64_t copies, int timeout_ms)
{
	return pump(s, DU_COPIES, copies, timeout_ms, "the retry copies", NULL, NULL);
}

int dl_set__idle(struct dl_set *s, int ms)
{
	return pump(s, DU_TIME, 0, ms, "time", NULL, NULL);
}

static double number(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

int dl_set__status(struct dl_set *s, struct dl_status *st)
{
	static const char cmd[] = "{\"commands\":[{\"command\":\"getStatus\"}]}";
	mosquitto_property *props = NULL;
	int rc = mosquitto_property_add_string(&props, MQTT_PROP_RESPONSE_TOPIC, s->reply_topic);
	s->got_reply = false;
	if(rc == 0) rc = mosquitto_publish_v5(s->c[s->pub].m, NULL, DLQ_CONTROL_TOPIC, (int)strlen(cmd), cmd, 1, false, props);
	mosquitto_property_free_all(&props);
	if(rc || pump(s, DU_REPLY, 1, DL_WAIT_MS, "getStatus's reply", NULL, NULL)) return -1;
	cJSON *reply = cJSON_ParseWithLength(s->reply, s->reply_len);
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(reply, "responses");
	const cJSON *first = cJSON_IsArray(list) ? cJSON_GetArrayItem(list, 0) : NULL;
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(first, "data");
	const cJSON *totals = cJSON_GetObjectItemCaseSensitive(data, "totals");
	rc = cJSON_IsObject(totals) ? 0 : -1;
	if(rc){
		fprintf(stderr, "dlq_bench: deadlines: getStatus was answered %.300s\n", s->reply);
	}else{
		st->awaiting = number(totals, "awaitingAck");
		st->acks = number(totals, "acks");
		st->acks_refused = number(totals, "acksRefused");
		st->timeouts = number(totals, "ackTimeouts");
		st->retry_copies = number(totals, "retryCopies");
		st->dead_letters = number(totals, "deadLetters");
		st->records = number(totals, "records");
		st->evicted = number(totals, "evicted");
	}
	cJSON_Delete(reply);
	return rc;
}
