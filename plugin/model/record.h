/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A ledger record: one tracked delivery (an original or a retry copy) in
 * one allocation holding its topics, payload and headers, with the clients
 * that settled it. Made, sized and freed here; the ledger (ledger.h) files
 * records by id and by age.
 */
#ifndef DLQ_RECORD_H
#define DLQ_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "model/policy.h"
#include "util/id.h"

/* How a client settled its delivery of a record (saved in the state file:
 * the values do not change). */
enum dlq_settled_how {
	DLQ_SETTLED_NACK = 0,         /* NACKed (a final NACK too), or a held copy let go (holds.h) */
	DLQ_SETTLED_ACK = 1,          /* ACKed: processed */
	DLQ_SETTLED_TIMEOUT = 2,      /* its ack_timeout passed: a retry copy was made instead */
	DLQ_SETTLED_TIMEOUT_DEAD = 3, /* its ack_timeout passed at the last attempt: dead-lettered */
	DLQ_SETTLED_DIVERTED = 4,     /* redelivered max_attempts times: removed from its session and
	                               * dead-lettered by redelivery tracking */
};
#define DLQ_SETTLED_HOW_MAX DLQ_SETTLED_DIVERTED

/* A client that has settled its delivery of a record (a NACK, an ACK, or
 * its deadline passing); kept so that the delivery is settled once: a
 * second NACK or ACK by the same client is refused, saying how it was
 * settled. */
struct dlq_settler {
	struct dlq_settler *next;
	uint8_t how;   /* enum dlq_settled_how */
	char client[]; /* NUL-terminated */
};

struct dlq_delivery;
struct dlq_holder;

/* The parts of a record that most records never use: what only a retry
 * copy has (the chain's origin, its attempt, its first NACK), redelivery
 * tracking's fields (plugin_opt_redelivery_tracking on Mosquitto 2.0, off
 * by default) and holds (retry copies for a client whose session does not
 * persist). A record has them, in its own allocation after the struct,
 * only when it is a retry copy (or restored as one) or was made with them
 * (record__make with DLQ_RECORD_MORE); record__more gives NULL otherwise. */
struct dlq_record_more {
	/* Redelivery tracking (redelivery.h), which owns these: */
	struct dlq_delivery *deliveries; /* to the clients that received it */
	struct dlq_record *payload_next; /* chain of the by-payload index */
	struct dlq_record *content_next; /* chain of the by-content index (retry copies) */
	uintptr_t payload_ref;     /* the broker's stored payload; 0: not bound */
	uint64_t content_hash;     /* retry copies: hash of topic, length and payload ends; 0: not indexed */
	uint32_t extra_bytes;      /* bytes of the deliveries, counted in record__bytes */
	/* The chain: */
	uint16_t attempt;          /* deliveries of the chain this record stands for, from 1 */
	uint16_t origin_topic_len; /* 0: the origin topic is the topic */
	/* Held retry copies (holds.h), which owns these: */
	struct dlq_holder *holder; /* the client it is held for; NULL: not held */
	struct dlq_record *hold_next;
	struct dlq_record *hold_prev;
	int64_t first_nack_ms;     /* wall clock of the chain's first NACK; 0: none yet */
	struct dlq_id origin_id;   /* the first id of the chain */
	bool hold_lasting;         /* held for a session that lasts (2.1): see outbound__hold */
};

/* What Mosquitto 2.1's exact counting (exact_counting.c) keeps of an original in
 * the record itself, instead of the more part: the sends to the first
 * client it was written to. Most records go to one subscriber, or few, so
 * the common case makes no allocation per send; the deliveries to other
 * clients are kept by redelivery tracking's table (DLQ_RECORD_SPILLED).
 * Owned by deliveries.c. 4 bytes: a record so made costs 68 bytes, as an
 * original without it did before the chain's fields moved to the more
 * part. */
struct dlq_record_sends {
	uint16_t client;           /* the first client's number (struct dlq_rclient.number); 0: none yet */
	uint16_t sends;            /* PUBLISHes of the record written to it */
};

/* Record flags. */
#define DLQ_RECORD_MORE 1u          /* a struct dlq_record_more follows the struct */
#define DLQ_RECORD_SENDS 2u         /* a struct dlq_record_sends follows the struct (never with MORE) */
#define DLQ_RECORD_FIRST_DIVERTED 4u /* with SENDS: removed from the first client's session (deliveries.c) */
#define DLQ_RECORD_SPILLED 8u       /* with SENDS: deliveries to other clients are in the table (deliveries.c) */
#define DLQ_RECORD_CLOCKED 16u      /* deliveries of it await settlement (deadlines.h) */
#define DLQ_RECORD_SLAB 32u         /* made in a slab (util/slab.h), not by malloc */

/* One tracked delivery, one allocation: the struct, its more part or its
 * sends part if any, then topic NUL [origin_topic NUL] payload headers.
 * What every record keeps is kept small (64 bytes), so that a 100-byte
 * message with a short topic, and its sends part on Mosquitto 2.1, fit
 * one malloc size class lower: a message kept NACKable costs the broker
 * that, its payload, topic and properties, and little else. */
struct dlq_record {
	struct dlq_record *hnext;  /* hash chain */
	struct dlq_record *newer;  /* age list, from the ledger's oldest */
	struct dlq_settler *settlers;/* owned list */
	const struct dlq_policy *policy; /* borrowed from the policy table */
	uint64_t created_ms;
	struct dlq_id id;
	uint32_t payload_len;
	uint32_t headers_len;
	uint16_t topic_len;
	uint8_t qos;
	uint8_t flags;             /* DLQ_RECORD_* */
	/* Without the more and sends parts, the topic and what follows it;
	 * with one, that part is at sizeof(struct dlq_record), then the rest. */
	char data[];
};

/* Bytes of a record before its topic. */
#define DLQ_RECORD_HEAD(flags) (sizeof(struct dlq_record) \
		+ (((flags) & DLQ_RECORD_MORE) ? sizeof(struct dlq_record_more) : 0) \
		+ (((flags) & DLQ_RECORD_SENDS) ? sizeof(struct dlq_record_sends) : 0))

struct slab;

/* What a record is made of (record__make). */
struct dlq_record_init {
	const struct dlq_id *id;
	const struct dlq_id *origin_id;  /* NULL or id: an original; any other: a retry copy */
	const char *topic;
	const char *origin_topic;        /* NULL or equal to topic: none of its own */
	const void *payload;
	uint32_t payload_len;
	const uint8_t *headers;
	size_t headers_len;
	const struct dlq_policy *policy;
	uint16_t attempt;
	uint8_t qos;
	uint64_t now_ms;
};

/* Allocates a record (not yet in any ledger). in->origin_topic may be
 * NULL or equal to in->topic; in->origin_id NULL or equal to in->id makes
 * an original, any other a retry copy. part is the part an original gets:
 * 0, DLQ_RECORD_MORE (2.0's redelivery tracking needs it on every record)
 * or DLQ_RECORD_SENDS (2.1's exact counting); a retry copy, or any record
 * with an attempt above 1 or an origin topic of its own, gets the more part
 * (record__more) whatever part says. The record is made in slab when it
 * has room (a start's restored records: state_read.c), else by malloc;
 * record__free knows which. Returns NULL when out of memory or when a
 * topic exceeds 65535 bytes. The caller owns the record until
 * ledger__insert. */
struct dlq_record *record__make(const struct dlq_record_init *in, uint8_t part, struct slab *slab);

/* An original just tracked (its own id and topic, attempt 1), made in
 * one pass: part is 0, DLQ_RECORD_MORE or DLQ_RECORD_SENDS, as
 * record__make would give it. *bytes gets what record__bytes would say of
 * it. NULL as record__make. */
struct dlq_record *record__new_original(uint8_t part, const struct dlq_id *id, const char *topic,
		const void *payload, uint32_t payload_len, const uint8_t *headers, size_t headers_len,
		const struct dlq_policy *policy, uint8_t qos, uint64_t now_ms, size_t *bytes);
void record__free(struct dlq_record *r);

static inline struct dlq_record_more *record__more(const struct dlq_record *r)
{
	return (r->flags & DLQ_RECORD_MORE) ? (struct dlq_record_more *)(void *)((char *)(uintptr_t)r + sizeof(*r)) : NULL;
}
static inline struct dlq_record_sends *record__sends(const struct dlq_record *r)
{
	return (r->flags & DLQ_RECORD_SENDS) ? (struct dlq_record_sends *)(void *)((char *)(uintptr_t)r + sizeof(*r)) : NULL;
}
static inline const char *record__data(const struct dlq_record *r)
{
	return (const char *)r + DLQ_RECORD_HEAD(r->flags);
}
/* Deliveries of the chain r stands for, from 1 (1: an original). */
static inline unsigned record__attempt(const struct dlq_record *r)
{
	const struct dlq_record_more *m = record__more(r);
	return m ? m->attempt : 1u;
}
/* Length of the origin topic when it differs from the topic; else 0. */
static inline size_t record__origin_topic_len(const struct dlq_record *r)
{
	const struct dlq_record_more *m = record__more(r);
	return m ? m->origin_topic_len : 0u;
}
static inline const char *record__topic(const struct dlq_record *r){ return record__data(r); }
static inline const char *record__origin_topic(const struct dlq_record *r)
{
	return record__origin_topic_len(r) ? record__data(r) + r->topic_len + 1 : record__data(r);
}
static inline const uint8_t *record__payload(const struct dlq_record *r)
{
	size_t origin_len = record__origin_topic_len(r);
	return (const uint8_t *)record__data(r) + r->topic_len + 1 + (origin_len ? origin_len + 1u : 0u);
}
static inline const uint8_t *record__headers(const struct dlq_record *r)
{
	return record__payload(r) + r->payload_len;
}
/* The first id of r's chain (r's own for an original). Borrowed from r. */
static inline const struct dlq_id *record__origin_id(const struct dlq_record *r)
{
	const struct dlq_record_more *m = record__more(r);
	return m ? &m->origin_id : &r->id;
}
/* Wall clock of the chain's first NACK; 0: none yet (always, for an
 * original without the more part). */
static inline int64_t record__first_nack_ms(const struct dlq_record *r)
{
	const struct dlq_record_more *m = record__more(r);
	return m ? m->first_nack_ms : 0;
}
/* Sets it; a record without the more part (an original: no NACK precedes
 * it) keeps none. */
static inline void record__set_first_nack_ms(struct dlq_record *r, int64_t ms)
{
	struct dlq_record_more *m = record__more(r);
	if(m) m->first_nack_ms = ms;
}

/* Bytes the record accounts for in the memory bound: its allocation, its
 * settlers, its share of the table and, with the more part, its deliveries
 * (extra_bytes). The deliveries of a record with the sends part that are
 * kept in the tracker's table are accounted by the tracker
 * (deliveries__table_bytes), not here. */
size_t record__bytes(const struct dlq_record *r);

/* Bytes a settler accounts for (record__bytes, the ledger's count). */
static inline size_t record__settler_bytes(const struct dlq_settler *n)
{
	return sizeof(*n) + strlen(n->client) + 1;
}

#endif
