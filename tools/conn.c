/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * dlqctl's MQTT v5 connections (see dlqctl.h). Everything runs on the
 * main thread: an automatic connection is driven by mosquitto_loop, a
 * manual one by poll() and mosquitto_loop_read/_write, so that nothing is
 * written to its socket but what conn__flush writes. That is how redrive
 * acknowledges a dead letter only once its republish was acknowledged:
 * libmosquitto 2.0.11 has no manual acknowledgements, but it queues the
 * PUBACK of a QoS 1 message when it reads it and, with the client marked
 * threaded (mosquitto_threaded_set), leaves the writing to the loop, which
 * here is ours (lib/handle_publish.c and lib/packet_mosq.c, v2.0.11; the
 * same in 2.1.2). What it cannot do is acknowledge one message of several
 * read together: every queued acknowledgement leaves with the next write.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <mqtt_protocol.h>

#include "dlqctl.h"

/* How long closing waits for the last bytes to leave and the broker to
 * close its end. */
#define CONN_CLOSE_WAIT_MS 1000

uint64_t dlqctl_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int64_t dlqctl_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void conn__random_hex(char *out, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char buf[64];
	if(n > sizeof(buf)) n = sizeof(buf);
	if(getrandom(buf, n, 0) != (ssize_t)n){
		/* Only uniqueness matters here (ids of requests and runs), not
		 * secrecy: the clock and the pid will do. */
		uint64_t x = dlqctl_now_ms() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)dlqctl_wall_ms();
		for(size_t i = 0; i < n; i++){
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			buf[i] = (unsigned char)(x >> 56);
		}
	}
	for(size_t i = 0; i < n; i++){
		out[2 * i] = hex[buf[i] >> 4];
		out[2 * i + 1] = hex[buf[i] & 0xf];
	}
	out[2 * n] = '\0';
}

static void on_connect(struct mosquitto *mosq, void *obj, int rc, int flags, const mosquitto_property *props)
{
	struct conn *c = obj;
	(void)mosq;
	(void)props;
	c->connack = true;
	c->connack_rc = rc;
	c->session_present = rc == 0 && (flags & 1);
}

static void on_disconnect(struct mosquitto *mosq, void *obj, int rc, const mosquitto_property *props)
{
	struct conn *c = obj;
	(void)mosq;
	(void)props;
	if(!c->lost){
		c->lost = true;
		c->lost_rc = rc;
	}
}

static void on_subscribe(struct mosquitto *mosq, void *obj, int mid, int count, const int *granted,
		const mosquitto_property *props)
{
	struct conn *c = obj;
	(void)mosq;
	(void)props;
	if(mid == c->sub_mid){
		c->subacked = true;
		c->sub_granted = count > 0 ? granted[0] : MQTT_RC_UNSPECIFIED;
	}
}

static void on_publish(struct mosquitto *mosq, void *obj, int mid, int reason, const mosquitto_property *props)
{
	struct conn *c = obj;
	(void)mosq;
	(void)props;
	if(mid == c->pub_mid){
		c->pub_done = true;
		c->pub_rc = reason;
	}
}

static void on_message(struct mosquitto *mosq, void *obj, const struct mosquitto_message *m,
		const mosquitto_property *props)
{
	struct conn *c = obj;
	(void)mosq;
	if(c->on_message) c->on_message(c->arg, m, props);
}

static const char *where(const struct dlqctl_opts *o, char *buf, size_t len)
{
	if(o->unix_path){
		snprintf(buf, len, "unix socket %s", o->unix_path);
	}else{
		snprintf(buf, len, "%s port %d", o->host, o->port);
	}
	return buf;
}

int conn__open(struct conn *c, const struct dlqctl_opts *o, const char *id, bool clean, uint32_t expiry_s,
		int receive_max, bool manual, const char *filter, conn_message_fn handler, void *arg)
{
	char w[600];
	mosquitto_property *props = NULL;
	int rc;

	memset(c, 0, sizeof(*c));
	c->manual = manual;
	c->on_message = handler;
	c->arg = arg;
	c->mosq = mosquitto_new(id, clean, c);
	if(c->mosq == NULL){
		fprintf(stderr, "dlqctl: cannot create a client%s%s: %s\n", id ? " with id " : "", id ? id : "",
				errno == EINVAL ? "invalid client id" : strerror(errno));
		return DLQCTL_EXIT_FAIL;
	}
	mosquitto_int_option(c->mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
	if(receive_max > 0) mosquitto_int_option(c->mosq, MOSQ_OPT_RECEIVE_MAXIMUM, receive_max);
	if(manual) mosquitto_threaded_set(c->mosq, true);
	mosquitto_connect_v5_callback_set(c->mosq, on_connect);
	mosquitto_disconnect_v5_callback_set(c->mosq, on_disconnect);
	mosquitto_subscribe_v5_callback_set(c->mosq, on_subscribe);
	mosquitto_publish_v5_callback_set(c->mosq, on_publish);
	mosquitto_message_v5_callback_set(c->mosq, on_message);
	if(o->username && mosquitto_username_pw_set(c->mosq, o->username, o->password) != MOSQ_ERR_SUCCESS){
		fprintf(stderr, "dlqctl: invalid username or password\n");
		return DLQCTL_EXIT_FAIL;
	}
	if(!clean && mosquitto_property_add_int32(&props, MQTT_PROP_SESSION_EXPIRY_INTERVAL, expiry_s) != MOSQ_ERR_SUCCESS){
		fprintf(stderr, "dlqctl: out of memory\n");
		return DLQCTL_EXIT_FAIL;
	}
	if(o->unix_path){
		rc = mosquitto_connect_bind_v5(c->mosq, o->unix_path, 0, o->keepalive, NULL, props);
	}else{
		rc = mosquitto_connect_bind_v5(c->mosq, o->host, o->port, o->keepalive, NULL, props);
	}
	mosquitto_property_free_all(&props);
	if(rc != MOSQ_ERR_SUCCESS){
		fprintf(stderr, "dlqctl: cannot connect to %s: %s\n", where(o, w, sizeof(w)),
				rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc));
		return DLQCTL_EXIT_FAIL;
	}
	if(manual && filter){
		/* Queued behind the CONNECT, before anything is read: a resumed
		 * session's letters come right after the CONNACK, and 2.1's
		 * libmosquitto reads them with it; a SUBSCRIBE written after that
		 * would take their queued acknowledgements with it. */
		rc = mosquitto_subscribe_v5(c->mosq, &c->sub_mid, filter, 1, 0, NULL);
		if(rc != MOSQ_ERR_SUCCESS){
			fprintf(stderr, "dlqctl: subscribing to %s: %s\n", filter, mosquitto_strerror(rc));
			return DLQCTL_EXIT_FAIL;
		}
	}

	uint64_t deadline = dlqctl_now_ms() + (uint64_t)(o->timeout_s * 1000);
	if(manual) rc = conn__flush(c, (int)(o->timeout_s * 1000));
	while(rc == MOSQ_ERR_SUCCESS && !c->connack && !c->lost && dlqctl_now_ms() < deadline && !dlqctl_stop){
		rc = manual ? conn__read_one(c, 100) : conn__run(c, 100);
	}
	if(!c->connack){
		if(rc != MOSQ_ERR_SUCCESS || c->lost){
			fprintf(stderr, "dlqctl: %s closed the connection before its CONNACK: %s\n", where(o, w, sizeof(w)),
					rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc ? rc : c->lost_rc));
		}else{
			fprintf(stderr, "dlqctl: no CONNACK from %s within %g s\n", where(o, w, sizeof(w)), o->timeout_s);
		}
		return DLQCTL_EXIT_FAIL;
	}
	if(c->connack_rc != 0){
		fprintf(stderr, "dlqctl: %s refused the connection: %s\n", where(o, w, sizeof(w)),
				mosquitto_reason_string(c->connack_rc));
		return DLQCTL_EXIT_FAIL;
	}
	return DLQCTL_EXIT_OK;
}

int conn__run(struct conn *c, int timeout_ms)
{
	return mosquitto_loop(c->mosq, timeout_ms, 1);
}

int conn__read_one(struct conn *c, int timeout_ms)
{
	int fd = mosquitto_socket(c->mosq);
	if(fd < 0) return MOSQ_ERR_NO_CONN;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n = poll(&p, 1, timeout_ms);
	if(n < 0) return errno == EINTR ? MOSQ_ERR_SUCCESS : MOSQ_ERR_ERRNO;
	if(n == 0) return MOSQ_ERR_SUCCESS;
	/* 2.0's libmosquitto reads one packet per call here (as many as it
	 * has QoS > 0 messages queued to process, and a reader has none);
	 * 2.1's reads up to 4 KiB at once and handles every packet in them
	 * (lib/packet_mosq.c packet__read), so callers must expect several. */
	return mosquitto_loop_read(c->mosq, 1);
}

int conn__flush(struct conn *c, int timeout_ms)
{
	uint64_t deadline = dlqctl_now_ms() + (uint64_t)timeout_ms;
	while(mosquitto_want_write(c->mosq)){
		int fd = mosquitto_socket(c->mosq);
		if(fd < 0) return MOSQ_ERR_NO_CONN;
		uint64_t now = dlqctl_now_ms();
		if(now >= deadline) return MOSQ_ERR_TIMEOUT;
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		int n = poll(&p, 1, (int)(deadline - now));
		if(n < 0 && errno != EINTR) return MOSQ_ERR_ERRNO;
		if(n <= 0) continue;
		int rc = mosquitto_loop_write(c->mosq, 1);
		if(rc != MOSQ_ERR_SUCCESS) return rc;
	}
	return MOSQ_ERR_SUCCESS;
}

int conn__subscribe(struct conn *c, const char *filter, int qos, int timeout_ms)
{
	c->subacked = false;
	int rc = mosquitto_subscribe_v5(c->mosq, &c->sub_mid, filter, qos, 0, NULL);
	if(rc == MOSQ_ERR_SUCCESS && c->manual){
		/* The SUBACK is read later with the messages (conn__read_one). */
		rc = conn__flush(c, timeout_ms);
	}
	uint64_t deadline = dlqctl_now_ms() + (uint64_t)timeout_ms;
	while(rc == MOSQ_ERR_SUCCESS && !c->manual && !c->subacked && dlqctl_now_ms() < deadline && !dlqctl_stop){
		rc = conn__run(c, 100);
	}
	if(rc != MOSQ_ERR_SUCCESS){
		fprintf(stderr, "dlqctl: subscribing to %s: %s\n", filter, mosquitto_strerror(rc));
		return DLQCTL_EXIT_FAIL;
	}
	if(c->manual) return DLQCTL_EXIT_OK;
	if(!c->subacked){
		fprintf(stderr, "dlqctl: no SUBACK for %s within %d ms\n", filter, timeout_ms);
		return DLQCTL_EXIT_FAIL;
	}
	if(c->sub_granted >= 0x80){
		fprintf(stderr, "dlqctl: the broker refused the subscription to %s: %s\n", filter,
				mosquitto_reason_string(c->sub_granted));
		return DLQCTL_EXIT_FAIL;
	}
	return DLQCTL_EXIT_OK;
}

int conn__publish(struct conn *c, const char *topic, const void *payload, int len,
		const mosquitto_property *props, int timeout_ms, int *reason)
{
	c->pub_done = false;
	*reason = 0;
	int rc = mosquitto_publish_v5(c->mosq, &c->pub_mid, topic, len, payload, 1, false, props);
	uint64_t deadline = dlqctl_now_ms() + (uint64_t)timeout_ms;
	while(rc == MOSQ_ERR_SUCCESS && !c->pub_done){
		if(c->lost) return MOSQ_ERR_CONN_LOST;
		if(dlqctl_now_ms() >= deadline) return MOSQ_ERR_TIMEOUT;
		rc = conn__run(c, 50);
	}
	if(rc == MOSQ_ERR_SUCCESS) *reason = c->pub_rc;
	return rc;
}

/* Reads and discards what the broker still sends on fd until it closes its
 * end or timeout_ms pass. We have shut our writing side, so the broker
 * reads everything we wrote, then the end of the stream, then closes. */
static void drain_until_closed(int fd, int timeout_ms)
{
	uint64_t deadline = dlqctl_now_ms() + (uint64_t)timeout_ms;
	char buf[4096];
	for(;;){
		uint64_t now = dlqctl_now_ms();
		if(now >= deadline) return;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int n = poll(&p, 1, (int)(deadline - now));
		if(n < 0 && errno != EINTR) return;
		if(n <= 0) continue;
		ssize_t got = recv(fd, buf, sizeof(buf), 0);
		if(got == 0) return;
		if(got < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) return;
	}
}

void conn__close(struct conn *c, bool graceful)
{
	if(c->mosq == NULL) return;
	/* A manual connection's last acknowledgements must reach the broker.
	 * Closing the socket right after writing them races it: Mosquitto
	 * 2.0.11 writes what plugins published (dead letters) at the top of
	 * its next loop pass, before it reads its clients, and when that write
	 * finds the socket closed it drops the connection without reading what
	 * the client wrote last, so an acknowledged dead letter stayed in the
	 * session and was redriven twice (seen in CI; tests/integration/
	 * test_dlqctl_conn.c measures it).
	 * So we keep our own descriptor of the socket, let libmosquitto close
	 * its one (it does after writing a DISCONNECT), shut our writing side
	 * and wait for the broker to close its end. */
	int keep = -1;
	if(c->manual && c->connack && !c->lost && mosquitto_socket(c->mosq) >= 0){
		keep = dup(mosquitto_socket(c->mosq));
	}
	if(graceful && c->connack && !c->lost){
		if(mosquitto_disconnect_v5(c->mosq, MQTT_RC_NORMAL_DISCONNECTION, NULL) == MOSQ_ERR_SUCCESS){
			if(c->manual){
				conn__flush(c, CONN_CLOSE_WAIT_MS);
			}else{
				/* Outside a callback and unthreaded, libmosquitto wrote
				 * it already; one pass lets it notice the close. */
				conn__run(c, 10);
			}
		}
	}
	/* Not graceful: the acknowledgement libmosquitto queued for a message
	 * still in hand is never written, and the message stays in the session. */
	mosquitto_destroy(c->mosq);
	c->mosq = NULL;
	if(keep >= 0){
		if(shutdown(keep, SHUT_WR) == 0) drain_until_closed(keep, CONN_CLOSE_WAIT_MS);
		close(keep);
	}
}
