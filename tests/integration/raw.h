/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A raw MQTT client (v3.1.1 or v5) over the broker's unix socket, for tests
 * that need what libmosquitto will not do: libmosquitto acknowledges a QoS 1
 * message before its on_message callback runs, so a client built on it
 * cannot "die before PUBACK". This one acknowledges nothing by itself: the
 * test reads each PUBLISH, then sends PUBACK, closes the socket abruptly or
 * disconnects cleanly, as it pleases. Everything runs on the test's thread.
 *
 * A struct raw is one client id with its options; it may connect many times
 * (each raw_connect opens a new socket). Every PUBLISH it receives is kept,
 * in arrival order over all its connections, until raw_free: raw_next hands
 * them out one by one, raw_count counts them. Functions that wait fail the
 * test at the caller's line with a message naming the client when the
 * broker breaks the protocol or does not answer within HARNESS_WAIT_MS; the
 * raw_send_* functions and raw_puback never fail the test (they may run
 * while the broker is stopped with SIGSTOP) and return false when the
 * socket refuses the bytes.
 */
#ifndef DLQ_IT_RAW_H
#define DLQ_IT_RAW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"

struct raw_options {
	const char *id;             /* the client id (copied) */
	int protocol;               /* MQTT_PROTOCOL_V311 or MQTT_PROTOCOL_V5 */
	bool clean;                 /* clean_session (v3.1.1), clean_start (v5) */
	uint32_t expiry_s;          /* v5 session expiry interval; 0: not sent */
	uint16_t receive_max;       /* v5 receive maximum; 0: not sent */
	uint32_t max_packet_size;   /* v5 maximum packet size; 0: not sent */
	const char *username;       /* NULL: none (copied) */
};

/* One PUBLISH received, decoded. Owned by its client until raw_free. */
struct raw_msg {
	char *topic;
	char *payload;              /* payloadlen bytes plus a NUL */
	size_t payloadlen;
	int qos;
	bool dup;
	bool retain;
	unsigned mid;               /* packet id; 0 at QoS 0 */
	struct it_user_prop *users; /* v5 user properties, in arrival order */
	size_t nusers;
	unsigned connection;        /* which connection received it, from 1 */
};

/* What raw_next found. */
enum raw_event {
	RAW_PUBLISH,                /* a PUBLISH arrived */
	RAW_TIMEOUT,                /* nothing within the timeout */
	RAW_CLOSED,                 /* the broker closed the connection (or it is not open) */
};

struct raw;

/* A client, not connected. */
struct raw *raw_new(struct broker *b, const struct raw_options *o);
/* Closes its socket, if open, and frees it with everything it received. */
void raw_free(struct raw *r);

const char *raw_id(const struct raw *r);

/* Opens a new socket to the broker (closing the previous one, if any),
 * without sending anything: the broker accepts it in its next loop pass. */
#define raw_open(r) raw_open_at(__FILE__, __LINE__, (r))
void raw_open_at(const char *file, int line, struct raw *r);

/* Sends CONNECT with the client's options. */
bool raw_send_connect(struct raw *r);

/* Waits for the CONNACK; fails the test if none comes. Returns its return
 * code (v3.1.1) or reason code (v5), 0 when accepted, and its
 * session-present flag in *present (may be NULL). */
#define raw_read_connack(r, present) raw_read_connack_at(__FILE__, __LINE__, (r), (present))
unsigned raw_read_connack_at(const char *file, int line, struct raw *r, bool *present);

/* raw_open, raw_send_connect and raw_read_connack; fails the test unless the
 * broker accepts the connection. Returns the session-present flag. */
#define raw_connect(r) raw_connect_at(__FILE__, __LINE__, (r))
bool raw_connect_at(const char *file, int line, struct raw *r);

/* Subscribes to one filter (a "$share/<group>/..." one too) and waits for
 * the SUBACK. Returns its code: the granted QoS, or >= 0x80 when refused. */
#define raw_subscribe(r, filter, qos) raw_subscribe_at(__FILE__, __LINE__, (r), (filter), (qos))
unsigned raw_subscribe_at(const char *file, int line, struct raw *r, const char *filter, int qos);

/* The next PUBLISH not yet handed out (one received while waiting for
 * something else comes first), waiting up to timeout_ms for one. *m is set
 * on RAW_PUBLISH. A v5 DISCONNECT from the broker counts as RAW_CLOSED. */
#define raw_next(r, timeout_ms, m) raw_next_at(__FILE__, __LINE__, (r), (timeout_ms), (m))
enum raw_event raw_next_at(const char *file, int line, struct raw *r, int timeout_ms, const struct raw_msg **m);

/* raw_next with HARNESS_WAIT_MS; fails the test unless a PUBLISH comes. */
#define raw_expect(r) raw_expect_at(__FILE__, __LINE__, (r))
const struct raw_msg *raw_expect_at(const char *file, int line, struct raw *r);

/* Records what arrives for ms milliseconds, or until the connection ends,
 * without handing it out. */
#define raw_drain(r, ms) raw_drain_at(__FILE__, __LINE__, (r), (ms))
void raw_drain_at(const char *file, int line, struct raw *r, int ms);

/* Acknowledges a QoS 1 PUBLISH. */
bool raw_puback(struct raw *r, unsigned mid);

/* Sends a PUBLISH (QoS 0 or 1) without waiting for anything. */
bool raw_send_publish(struct raw *r, const char *topic, const void *payload, size_t len, int qos);
/* The same in v5 with encoded properties (props_len bytes, without their
 * length): what libmosquitto cannot send, such as an empty content type
 * (2.0.11's mosquitto_publish_v5 crashes copying it). */
bool raw_send_publish_props(struct raw *r, const char *topic, const void *payload, size_t len, int qos,
		const void *props, size_t props_len);

/* Publishes (QoS 0 or 1) and, at QoS 1, waits for the PUBACK, failing the
 * test if none comes. Returns its v5 reason code (0 at QoS 0 and in v3.1.1). */
#define raw_publish(r, topic, payload, len, qos) \
	raw_publish_at(__FILE__, __LINE__, (r), (topic), (payload), (len), (qos))
unsigned raw_publish_at(const char *file, int line, struct raw *r, const char *topic,
		const void *payload, size_t len, int qos);

/* The response topic its v5 PUBLISHes carry from now on (borrowed; NULL:
 * none). Any text is sent as it is, "" and wildcards too, which
 * libmosquitto's property functions will not all send. */
void raw_set_response_topic(struct raw *r, const char *topic);

/* Whether its PUBLISHes from now on carry the retain flag. */
void raw_set_retain(struct raw *r, bool retain);

/* Sends PINGREQ and waits up to timeout_ms for the PINGRESP; returns
 * whether it came (PUBLISHes meanwhile are kept). */
#define raw_ping(r, timeout_ms) raw_ping_at(__FILE__, __LINE__, (r), (timeout_ms))
bool raw_ping_at(const char *file, int line, struct raw *r, int timeout_ms);

/* Closes the socket abruptly: no DISCONNECT, nothing acknowledged. */
void raw_close(struct raw *r);

/* Sends DISCONNECT (normal) and closes the socket. */
bool raw_disconnect(struct raw *r);

/* An MQTT v5 DISCONNECT that sets the session's expiry interval to
 * expiry_s (0: the session ends with the connection), then closes. */
bool raw_disconnect_expiry(struct raw *r, uint32_t expiry_s);

/* True when the connection is no longer open: closed by the broker (seen by
 * a read) or by raw_close/raw_disconnect, or never opened. */
bool raw_closed(const struct raw *r);

/* How many PUBLISHes received so far were on topic with this payload (a
 * string); NULL matches any. */
size_t raw_count(const struct raw *r, const char *topic, const char *payload);

/* The i-th (0-based) PUBLISH received so far, or NULL. */
const struct raw_msg *raw_received(const struct raw *r, size_t i);

/* The value of the first user property called name, or NULL. */
const char *raw_user(const struct raw_msg *m, const char *name);

/* "publish", "timeout" or "closed". */
const char *raw_event_name(enum raw_event e);

/* Prints everything the client received to stderr. */
void raw_dump(const struct raw *r);

#endif
