/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Redelivery tracking's state (see redelivery.h): the tracker, its clients
 * and its deliveries, shared by the two files that work on them,
 * redelivery.c (counting bursts of READ checks at a reconnect) and
 * deliveries.c (the tables, and counting sends exactly).
 */
#ifndef DLQ_TRACKER_H
#define DLQ_TRACKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/record.h"
#include "util/chains.h"

/* One tracked record delivered to one client. Owned by the tracker; the
 * record's list (dlq_record_more.deliveries, or for a record with the sends
 * part, the list from its delivery that heads_list) and the tracker's
 * table borrow it. */
struct dlq_delivery {
	struct dlq_delivery *hnext;   /* table chain, by (record, client); a list's head by record */
	struct dlq_delivery *rnext;   /* the record's list */
	struct dlq_record *record;    /* borrowed */
	struct dlq_rclient *client;   /* borrowed; holds a reference */
	uint16_t redeliveries;        /* counted so far (2.0's heuristic) */
	uint16_t sends;               /* 2.1: PUBLISHes of it written to the client (MESSAGE_OUT) */
	bool held_connected;          /* the client held it while connected */
	bool diverted;                /* removed from the session and dead-lettered */
	bool heads_list;              /* the head of the list of a record with the sends part (deliveries.c) */
};

/* A client the tracker knows: one with deliveries, or one known to be
 * connected. */
struct dlq_rclient {
	struct dlq_rclient *hnext;
	uintptr_t online;             /* its connection, when known to be connected; else 0 */
	uintptr_t offline;            /* the session object it left behind; else 0 */
	uint64_t burst_event;         /* the event number of its latest burst check */
	unsigned burst_pos;           /* QoS>0 checks seen in that burst */
	size_t deliveries;            /* how many deliveries (and records' sends parts) reference it */
	uint16_t number;              /* its number, by which records' sends parts name it; 0: none yet */
	bool burst_counts;            /* this burst may count (not right after a kick) */
	bool skip_next_burst;         /* it was kicked: its next burst counts nothing */
	char id[];
};

struct dlq_kick {
	struct dlq_kick *next;
	uintptr_t conn;               /* the connection to end: the one whose burst diverted */
	char client[];
};

/* Deliveries are allocated DLQ_DELIVERY_SLAB at a time (deliveries.c):
 * 2.1 makes one for each subscriber of a tracked message but its first, at
 * a send, where a malloc per delivery cost more than the rest of the
 * counting. */
#define DLQ_DELIVERY_SLAB 64
struct dlq_delivery_slab {
	struct dlq_delivery_slab *next;
	struct dlq_delivery items[DLQ_DELIVERY_SLAB];
};

/* The client a connection was last found to be (deliveries.c): 2.1 counts
 * each send for its client, found by the connection and the broker's
 * pointer to its id instead of by hashing the id. */
#define DLQ_CONN_SLOTS 64
struct dlq_conn_slot {
	uintptr_t conn;               /* 0: empty */
	const char *id;               /* the broker's id string for conn: compared, never read */
	struct dlq_rclient *client;   /* borrowed; emptied before it is freed */
};

struct dlq_redelivery {
	struct chains table;          /* of struct dlq_delivery */
	size_t count;                 /* deliveries */
	struct chains clients;        /* of struct dlq_rclient */
	size_t client_count;
	struct chains by_payload;     /* records, through their more part's payload_next */
	size_t bound;                 /* records in by_payload */
	struct chains by_content;     /* retry copies, through content_next */
	size_t indexed;               /* records in by_content */
	/* Client numbers (struct dlq_rclient.number), 1 to 65535, given
	 * when a record's sends part first names a client: */
	struct dlq_rclient **numbered; /* owned array; borrowed entries, by number */
	uint16_t *free_numbers;       /* owned stack of numbers given back */
	size_t numbered_size;         /* entries of both arrays */
	size_t free_count;
	size_t next_number;           /* the lowest never given */
	struct dlq_delivery *last_head; /* borrowed: the head of a record's list last found (deliveries.c) */
	struct dlq_delivery_slab *slabs; /* owned: where deliveries are, given back when none is left */
	struct dlq_delivery *spare;   /* the slabs' unused deliveries, chained through hnext */
	struct dlq_conn_slot by_conn[DLQ_CONN_SLOTS];
	struct dlq_kick *kicks;       /* owned: clients to disconnect at the next tick */
	uint64_t event;               /* numbers every broker event, to see bursts end */
	/* The empty-payload message tracked last, while the run of checks
	 * that routes it lasts (redelivery.c, routed_empty); borrowed. */
	struct dlq_record *routing_empty;
	uint64_t routing_event;       /* the event number of its tracking or its run's latest check */
	bool every_qos;               /* READ checks of QoS 0 messages are looked up too (deadlines.h) */
};

/* The upper bound on how deliveries add to a record's accounted bytes. */
#define DLQ_DELIVERY_BYTES (sizeof(struct dlq_delivery) + 2 * sizeof(void *))

#endif
