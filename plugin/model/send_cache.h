/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Which record a send is of, for Mosquitto 2.1's exact counting
 * (engine/exact_counting.c): 2.1 shows a plugin every PUBLISH it writes
 * (MESSAGE_OUT), with the stored message's own topic and payload, the same
 * addresses for each of its subscribers and resends, and the same ones
 * the inbound publish was tracked with. A slot per 12-bit id prefix
 * remembers a record with the id text and the addresses its stored
 * message was last seen at; a send whose last dlq-id and addresses are a
 * slot's is that record's, found in a compare of the id and two of
 * addresses, instead of decoding the id, looking it up and comparing the
 * topic and payload. Anything else (a retry copy's first send, whose
 * stored message the broker made; a slot taken by another record) is
 * answered the long way, which fills the slot. A record leaves its slot
 * when it leaves the ledger, so a slot's record is always alive; the
 * addresses are compared, never read.
 */
#ifndef DLQ_SEND_CACHE_H
#define DLQ_SEND_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/record.h"
#include "util/id.h"

#define SEND_CACHE_SLOTS 4096u

struct dlq_send_slot {
	struct dlq_record *record; /* borrowed; NULL: empty */
	const void *topic;         /* the stored message's addresses, compared only */
	const void *payload;
	char id[DLQ_ID_LEN];       /* the record's id text */
};

struct dlq_send_cache {
	struct dlq_send_slot *slots; /* owned, SEND_CACHE_SLOTS; NULL: no cache (every send the long way) */
};

/* Allocates the slots; ENOMEM leaves c without a cache (not an error to
 * its users: slower, not wrong). */
int send_cache__init(struct dlq_send_cache *c);
void send_cache__cleanup(struct dlq_send_cache *c);

/* The record of a send whose last dlq-id is id (DLQ_ID_LEN characters) of
 * a stored message at topic and payload (payload_len bytes), if a slot
 * knows it; NULL: ask the long way. */
static inline struct dlq_record *send_cache__find(const struct dlq_send_cache *c, const char *id, const void *topic,
		const void *payload, uint32_t payload_len)
{
	if(c->slots == NULL) return NULL;
	const struct dlq_send_slot *s = &c->slots[id__prefix12_text(id)];
	if(s->record == NULL || s->topic != topic || s->payload != payload || s->record->payload_len != payload_len){
		return NULL;
	}
	/* The id text in two loads a side, not a call. */
	uint64_t a[2], b[2];
	_Static_assert(DLQ_ID_LEN == sizeof(a), "an id's text is 16 bytes");
	memcpy(a, s->id, sizeof(a));
	memcpy(b, id, sizeof(b));
	return a[0] == b[0] && a[1] == b[1] ? s->record : NULL;
}

/* r (whose id text is id) was seen in a stored message at topic and
 * payload: its slot remembers that, in place of what it held. */
void send_cache__remember(struct dlq_send_cache *c, struct dlq_record *r, const char *id, const void *topic,
		const void *payload);

/* r leaves the ledger: its slot, if it holds r, is emptied. */
static inline void send_cache__forget(struct dlq_send_cache *c, const struct dlq_record *r)
{
	if(c->slots == NULL) return;
	struct dlq_send_slot *s = &c->slots[id__prefix12(&r->id)];
	if(s->record == r) s->record = NULL;
}

#endif
