/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Redelivery tracking (plugin_opt_redelivery_tracking): counting, as
 * attempts, the deliveries the broker repeats because a subscriber with a
 * persistent session went away without acknowledging them.
 *
 * What Mosquitto 2.0.11 shows a plugin (measured: docs/design.md, "Broker versions"; tests/integration/test_redelivery.c): a READ
 * access check for every message routed to a subscriber, and again, when a
 * persistent session reconnects, for every message still in that session:
 * first those that were in flight, then those queued and never sent, in one
 * uninterrupted run of checks (a "burst") from the new connection, before
 * anything else happens. The check carries the stored message's payload
 * pointer, not its properties, and no DUP flag.
 *
 * So this module keeps, per tracked record and client, a delivery: whether
 * the message reached the client while it was known to be connected, and
 * how many redeliveries were counted. At a burst, the first QoS>0 message
 * of the run is the oldest one in flight, and it was sent before if the
 * client ever held it while connected: that one, and only that one, counts
 * as a redelivery. This is exact with an in-flight window of 1, and may
 * count too few (never too many) with a larger window: messages in flight
 * behind the first are redelivered uncounted.
 *
 * Identities: a connection is the broker's context pointer, an opaque
 * number here. On 2.0 a message is found by the payload pointer bound when
 * it was tracked, or, for the plugin's own retry copies (whose stored copy
 * the broker makes) and for records restored after a restart, by topic and
 * payload content. On 2.1 the check carries the stored message's
 * properties, and a message is found by its dlq-id (dlq_read_check.id).
 *
 * Owned by the engine (struct dlq); the functions below are called by the
 * broker adapters through dlq.h.
 */
#ifndef DLQ_REDELIVERY_H
#define DLQ_REDELIVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/deliveries.h"
#include "model/ledger.h"
#include "model/tracker.h"

int redelivery__init(struct dlq_redelivery *t);
/* Frees every delivery and client; the records stay (their lists are
 * emptied). */
void redelivery__cleanup(struct dlq_redelivery *t, struct dlq_ledger *l);

/* Every broker event that is not an access check ends a burst. */
static inline void redelivery__event(struct dlq_redelivery *t){ t->event++; }

/* Binds the broker's stored payload to r, just tracked. */
void redelivery__bind_payload(struct dlq_redelivery *t, struct dlq_record *r, const void *payload);
/* Indexes a retry copy by content, and, for a copy to one client, makes its
 * delivery (held while connected when that client is). Also used, with
 * client NULL, for records restored from the state file (their stored
 * payload's address is gone with the broker that stored it). */
int redelivery__note_copy(struct dlq_redelivery *t, struct dlq_ledger *l, struct dlq_record *r, const char *client);
/* Forgets r (it leaves the ledger): its deliveries, its index entries. */
void redelivery__record_gone(struct dlq_redelivery *t, struct dlq_ledger *l, struct dlq_record *r);

/* A sign that client is connected on conn: it published, subscribed or
 * sent a control message. */
void redelivery__connected(struct dlq_redelivery *t, const char *client, uintptr_t conn);
/* client's connection conn ended. */
void redelivery__disconnected(struct dlq_redelivery *t, const char *client, uintptr_t conn);

/* A READ access check, as the broker gives it. */
struct dlq_read_check {
	const char *client;
	uintptr_t conn;
	const char *topic;
	const void *payload;
	uint32_t payload_len;
	uint8_t qos;
	/* The dlq-id stamped on the stored message, where the broker shows
	 * the message's properties to the check (2.1); NULL on 2.0, where the
	 * message is found by its payload pointer or content instead. On 2.1
	 * a message without one has "" here: it is not the plugin's. */
	const char *id;
	/* For deadlines (deadlines.h), where a policy has an ack_timeout: the
	 * client reads dlq-ids (MQTT v5), and its session outlives its
	 * connection. */
	bool settles;
	bool persists;
};

/* What a READ check is, for the engine to act on. */
struct dlq_read_verdict {
	struct dlq_record *record;     /* borrowed: the tracked message checked (QoS 0 only with every_qos); NULL: none */
	struct dlq_delivery *delivery; /* borrowed; NULL: not a tracked delivery */
	bool live;                     /* the check came from the client's live connection or a reconnect */
	bool burst_start;              /* the check began a reconnecting session's run */
	bool redelivery;               /* the delivery about to be made again was sent before */
	bool in_burst;                 /* the check came from a reconnecting session */
	bool first_in_burst;           /* the oldest message in flight at that reconnect */
	bool held_now;                 /* the delivery is held while connected since this check: worth saving */
};

/* Classifies one READ check and records the delivery (ENOMEM: none made,
 * the check is then answered as if untracked). The engine decides whether
 * to count or divert (dlq__read_check). */
int redelivery__read_check(struct dlq_redelivery *t, struct dlq_ledger *l, const struct dlq_read_check *c,
		struct dlq_read_verdict *v);

/* 2.1: the record whose dlq-id (id_len bytes) a stored message carries,
 * or NULL. The topic and payload must match too: a publisher may put any
 * dlq-id on an untracked message. */
struct dlq_record *redelivery__record_by_id(const struct dlq_ledger *l, const char *id, size_t id_len,
		const char *topic, const void *payload, uint32_t payload_len);

/* Whether client is known to be connected. */
bool redelivery__online(const struct dlq_redelivery *t, const char *client);

/* Queues client's connection conn to be disconnected at the next tick (the
 * 2.0.x in-flight slot workaround); its next burst then counts nothing. A
 * kick is dropped when that connection ends first (redelivery__disconnected):
 * 2.0.11 would "disconnect" the offline session, adding it to its session
 * expiry list a second time, and free it later with an entry still there. */
int redelivery__queue_kick(struct dlq_redelivery *t, struct dlq_rclient *c, uintptr_t conn);
/* Takes the list of clients to disconnect; the caller frees it. */
struct dlq_kick *redelivery__take_kicks(struct dlq_redelivery *t);

#endif
