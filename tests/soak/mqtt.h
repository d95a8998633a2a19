/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The soak's MQTT v5 client connections: packets built and parsed by hand
 * over a non-blocking unix socket, so that one thread can run every client
 * of the soak on one poll loop, and so that a client acknowledges a message
 * only when it says so. libmosquitto sends PUBACK before its on_message
 * callback runs, so a worker built on it could not "crash before PUBACK";
 * tests/integration/raw.c can, but it blocks and fails a Check test on any
 * surprise, where the soak must count surprises and go on. The packet
 * layouts are the same as there.
 *
 * Only what the soak needs: CONNECT, SUBSCRIBE, PUBLISH (QoS 0 and 1, DUP,
 * one optional user property), PUBACK and DISCONNECT going out; CONNACK,
 * SUBACK, PUBLISH, PUBACK, PINGRESP and DISCONNECT coming in. Keep-alive is
 * off (0), so no PINGREQ is ever due.
 */
#ifndef DLQ_SOAK_MQTT_H
#define DLQ_SOAK_MQTT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MQ_MAX_USERS 16

struct mq_user {
	const char *name;           /* NUL-terminated, borrowed: see mq_msg */
	const char *value;
};

/* A PUBLISH received. Every pointer is borrowed from the connection and
 * valid only during the publish callback. */
struct mq_msg {
	const char *topic;          /* NUL-terminated */
	const unsigned char *payload;
	size_t payloadlen;
	int qos;
	bool dup;
	unsigned mid;               /* 0 at QoS 0 */
	struct mq_user users[MQ_MAX_USERS];
	size_t nusers;              /* user properties beyond MQ_MAX_USERS are dropped */
};

enum mq_state {
	MQ_DOWN,                    /* no socket */
	MQ_CONNECTING,              /* CONNECT sent, no CONNACK yet */
	MQ_UP,                      /* CONNACK accepted */
};

struct mq_conn;

/* What a connection reports; every callback may call mq_close (the
 * connection then reports nothing more from what it had read). */
struct mq_handlers {
	void (*connack)(struct mq_conn *c, bool present);
	void (*publish)(struct mq_conn *c, const struct mq_msg *m);
	void (*puback)(struct mq_conn *c, unsigned mid, unsigned reason);
	void (*suback)(struct mq_conn *c, unsigned mid, const unsigned char *codes, size_t n);
	/* The connection ended: closed by the broker, refused, or broken
	 * (why says which); not called for mq_close. */
	void (*closed)(struct mq_conn *c, const char *why);
};

struct mq_conn {
	/* Set by the owner before mq_open. */
	char id[64];
	const char *path;           /* the broker's unix socket, borrowed */
	bool clean_start;
	uint32_t expiry_s;          /* session expiry interval; 0: not sent */
	uint16_t receive_max;       /* 0: not sent (65535) */
	const struct mq_handlers *h;
	void *owner;
	/* State. */
	int fd;
	enum mq_state state;
	uint16_t server_receive_max; /* from CONNACK (65535 if absent) */
	uint16_t last_mid;
	unsigned char *in;
	size_t inlen, incap;
	unsigned char *out;
	size_t outlen, outcap;
	char *scratch;              /* decoded strings of the current PUBLISH */
	size_t scratchcap;
	/* Statistics. */
	uint64_t opens;             /* sockets connected */
	uint64_t dropped_out;       /* bytes not yet sent when mq_close came */
};

/* Prepares a connection (not connected). */
void mq_init(struct mq_conn *c, const char *id, const char *path, const struct mq_handlers *h, void *owner);
/* Frees its buffers (closing it first). */
void mq_free(struct mq_conn *c);

/* Connects the socket and sends CONNECT with the connection's options.
 * Returns 0 (state MQ_CONNECTING), or -1 with errno set when the broker is
 * not there or its backlog is full: try again later. */
int mq_open(struct mq_conn *c);

/* Closes the socket at once: nothing more is sent (what was not yet
 * written is counted in dropped_out), nothing acknowledged. A crash. */
void mq_close(struct mq_conn *c);

/* Sends DISCONNECT and closes. */
void mq_disconnect(struct mq_conn *c);

/* A new packet id (never 0). */
unsigned mq_next_mid(struct mq_conn *c);

/* Queues packets; they go out as the socket takes them (mq_flush). False
 * when the connection is not open. */
bool mq_subscribe(struct mq_conn *c, unsigned mid, const char *const *filters, size_t n, int qos);
/* user_name/user_value: one user property, or NULL. mid is ignored at
 * QoS 0. */
bool mq_publish(struct mq_conn *c, unsigned mid, const char *topic, const void *payload, size_t len,
		int qos, bool dup, const char *user_name, const char *user_value);
bool mq_puback(struct mq_conn *c, unsigned mid);

/* Whether output waits for the socket (poll for POLLOUT). */
bool mq_want_write(const struct mq_conn *c);
/* Writes what the socket takes now. */
void mq_flush(struct mq_conn *c);
/* Reads what the socket has and reports every whole packet. */
void mq_read(struct mq_conn *c);

#endif
