/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Sessions as the broker shows them, where it does (the session and
 * subscription events Mosquitto 2.1 sends; a broker that sends none leaves
 * the table empty): per client id, whether its session outlives its connection,
 * whether it is connected, and the subscriptions it made. 2.1 says at the
 * end of every connection whether the session lasts (CLIENT_OFFLINE) or ends
 * (DISCONNECT), and shows every SUBSCRIBE and UNSUBSCRIBE; a connect with
 * clean_start ends the old session. Its PERSIST_CLIENT_* events, which give
 * the session expiry interval at connect, cannot be had with the broker's
 * own `persistence true` (2.1.2 refuses them then, src/plugin_callbacks.c),
 * so they are not used. Bounded: at most SESSIONS_MAX_BYTES for the whole
 * table; a client that does not fit is unknown, and for an unknown client
 * the callers keep the behaviour of 2.0 (docs/design.md, "Sessions on 2.1").
 */
#ifndef DLQ_SESSIONS_H
#define DLQ_SESSIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* All entries, filters and client ids together. */
#define SESSIONS_MAX_BYTES (16u * 1024u * 1024u)
/* Subscriptions kept per client; past that its subscriptions are unknown. */
#define SESSION_SUBS_MAX 64
/* Subscription identifiers a copy can carry (of as many overlapping
 * subscriptions of one client). */
#define SESSION_IDS_MAX 8

enum dlq_session_life {
	DLQ_SESSION_UNKNOWN, /* nothing reliable is known: use 2.0's rule */
	DLQ_SESSION_ENDS,    /* ends with its connection (not stored: such a session is forgotten) */
	DLQ_SESSION_LASTS,   /* outlives its connection */
};

struct dlq_sub {
	char *filter;         /* owned: as subscribed, "$share/<group>/" included */
	const char *applied;  /* into filter: the filter past any "$share/<group>/" */
	uint32_t identifier;  /* 0: none */
	uint8_t qos;          /* granted */
};

struct dlq_session {
	struct dlq_session *hnext; /* table chain */
	struct dlq_sub *subs;      /* owned, sub_count entries */
	size_t sub_count;
	size_t sub_capacity;
	size_t bytes;              /* accounted: entry, id, filters */
	struct dlq_session *ended_next; /* the list of ended entries, while ended */
	enum dlq_session_life life; /* LASTS once the broker said so */
	bool ended;                /* DISCONNECT seen: forgotten at the next settle unless resumed */
	bool online;               /* connected, as far as the events said */
	bool subs_unknown;         /* a subscription did not fit: the list is incomplete */
	char client[];             /* NUL-terminated */
};

struct dlq_sessions {
	struct dlq_session **table; /* owned */
	size_t size;                /* a power of two, or 0 before the first entry */
	size_t count;
	size_t bytes;
	struct dlq_session *ended;  /* borrowed: entries with ended set (or resumed since), for settle */
};

/* What a targeted copy to one client on one topic is to look like, from
 * that client's subscriptions that match the topic. */
struct dlq_sub_match {
	uint8_t qos;                          /* the highest granted QoS of them */
	size_t id_count;
	uint32_t ids[SESSION_IDS_MAX];        /* their non-zero identifiers, ascending, each once */
};

void sessions__init(struct dlq_sessions *s);
void sessions__cleanup(struct dlq_sessions *s);

/* client connected. clean_start: its old session (lasting or not, and its
 * subscriptions) is gone, and whether the new one lasts is unknown. Returns 0, ENOSPC or ENOMEM (then the client is
 * unknown). */
int sessions__connected(struct dlq_sessions *s, const char *client, bool clean_start);

/* client's connection ended and the broker keeps its session (2.1's
 * CLIENT_OFFLINE). Returns 0, ENOSPC or ENOMEM. */
int sessions__offline(struct dlq_sessions *s, const char *client);

/* A connection of client ended with 2.1's DISCONNECT: its session ended,
 * unless a connect that resumes it follows before sessions__settle. 2.1
 * sends DISCONNECT for the old connection of a session it resumes or takes
 * over too (src/handle_connect.c marks it to expire at once), right before
 * the new connection's CONNECT, in the same loop pass: a connect with
 * clean_start=false of a session known to last resumes it, subscriptions
 * and all; anything else starts afresh. */
void sessions__ended(struct dlq_sessions *s, const char *client);

/* Forgets the sessions that ended and were not resumed (once per tick). */
void sessions__settle(struct dlq_sessions *s);

/* What is known of client's session: LASTS after its CLIENT_OFFLINE until
 * a connect with clean_start; UNKNOWN otherwise (the expiry interval a
 * client asks for at connect is not shown to plugins). */
enum dlq_session_life sessions__life(const struct dlq_sessions *s, const char *client);

/* Whether client is known to be offline (false when unknown). */
bool sessions__offline_known(const struct dlq_sessions *s, const char *client);

/* client subscribed to filter (as it sent it) with granted QoS qos and
 * subscription identifier id (0: none); a subscription to the same filter
 * is replaced, as the broker does. Returns 0, EINVAL (no usable filter),
 * ENOSPC (does not fit: the client's subscriptions are unknown from now on)
 * or ENOMEM (likewise). */
int sessions__subscribe(struct dlq_sessions *s, const char *client, const char *filter, uint8_t qos, uint32_t id);

/* client unsubscribed from filter (as it sent it). */
void sessions__unsubscribe(struct dlq_sessions *s, const char *client, const char *filter);

/* Fills *m for a copy to client on topic (a valid topic name: the
 * broker's or the configuration's, as a record or policy holds it) and
 * returns true, or returns false
 * when nothing is known (no subscription of client seen that matches topic,
 * or its list is incomplete): then the copy goes as on 2.0. A shared
 * subscription of client counts as its own: a targeted copy goes to that
 * member only, as the original did. */
bool sessions__match(const struct dlq_sessions *s, const char *client, const char *topic, struct dlq_sub_match *m);

#endif
