/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Exact attempt counting on Mosquitto 2.1 (d->broker.exact_counting). 2.1 shows a
 * plugin every PUBLISH it writes to a client (MESSAGE_OUT: the first send,
 * every resend after a reconnect, every retry copy), so an attempt is
 * simply a send: the chain's attempt number for client C is the record's
 * attempt (1 for an original, one more for each retry copy) plus the sends
 * of that record to C after the first. A message queued while C was away
 * and never sent has no send and is no attempt. max_attempts bounds that
 * number: at the reconnect access check of a message C was already sent
 * max_attempts times, the message leaves C's session as a dead letter,
 * instead of being sent once more. This replaces 2.0's burst heuristic
 * (redelivery.h), which stays for 2.0. The sends of an original to its
 * first client live in the record (struct dlq_record_sends); to other
 * clients, and those of retry copies, in the same per-(record, client)
 * deliveries as 2.0's (struct dlq_delivery.sends). Their bytes are counted
 * with the record's and go with it.
 */
#include <string.h>

#include "engine/dlq.h"
#include "engine/engine.h"
#include "engine/outbound.h"
#include "util/errtext.h"
#include "util/port.h"

/* The record the dlq-id id (id_len bytes) names, if it is this message:
 * from the send cache (send_cache.h) when it knows the stored message's
 * addresses, else decoded, looked up and compared, and then remembered
 * there: 2.1 asks about a stored message once for each of its sends and
 * once for each READ check. */
static struct dlq_record *record_of(struct dlq *d, const char *id, size_t id_len, const char *topic,
		const void *payload, uint32_t payload_len)
{
	if(id_len != DLQ_ID_LEN) return NULL;
	struct dlq_record *r = send_cache__find(&d->sends, id, topic, payload, payload_len);
	if(r) return r;
	r = redelivery__record_by_id(&d->ledger, id, id_len, topic, payload, payload_len);
	/* A valid id: its text is the record's. */
	if(r) send_cache__remember(&d->sends, r, id, topic, payload);
	return r;
}

void dlq__sent(struct dlq *d, const char *client, uintptr_t conn, const char *id, size_t id_len, const char *topic,
		const void *payload, uint32_t payload_len, struct dlq_send *s)
{
	memset(s, 0, sizeof(*s));
	struct dlq_record *r = record_of(d, id, id_len, topic, payload, payload_len);
	if(r == NULL) return;
	struct dlq_sent_to st;
	if(deliveries__sent(&d->redelivery, &d->ledger, r, client, conn, &st)){
		port__log(DLQ_LOG_ERR, "out of memory: a delivery on " QFMT " to " QFMT " is not counted", Q(topic), Q(client));
		return;
	}
	/* The same record sent to the same client again: a redelivery,
	 * counted as an attempt. */
	unsigned sends = deliveries__sends(&st);
	if(sends > 1) COUNT(d, r->policy, redeliveries, 1);
	outbound__note_delivery(d, r, client);
	s->attempt = engine__attempt_of(r, sends);
	s->policy = r->policy;
	s->record = r;
}

void dlq__sent_without_stamp(struct dlq *d, const struct dlq_policy *p)
{
	COUNT(d, p, sent_without_stamp, 1);
}

/* Only a reconnect's check diverts: one made from a connection the client
 * is not known to be on (2.1 checks a continued session's messages before
 * the CONNECT event, which marks the connection as the client's). A check
 * from the client's live connection is a new send of a message it may have
 * acknowledged (a retained message again on a new subscription): not the
 * plugin's to remove. */
bool engine__read_check_exact(struct dlq *d, const struct dlq_read_check *c)
{
	if(c->id == NULL || c->id[0] == '\0') return false;
	struct dlq_record *r = record_of(d, c->id, strlen(c->id), c->topic, c->payload, c->payload_len);
	if(r == NULL) return false;
	struct dlq_sent_to st;
	if(!deliveries__sent_to(&d->redelivery, r, c->client, &st)) return false;
	/* Another copy (an overlapping subscription) of a message just removed
	 * from this session goes too: its dead letter is made. */
	if(deliveries__diverted(&st)) return true;
	unsigned sends = deliveries__sends(&st);
	if(sends == 0 || st.client->online == c->conn) return false;
	/* Settled by the client (an ACK, a NACK, a deadline that ran out into
	 * its retry copy or dead letter): the resend of what its session
	 * holds is no attempt of the chain, and no second dead letter. */
	if(ledger__has_settler(r, c->client)) return false;
	unsigned delivered = engine__attempt_of(r, sends);
	if(delivered < r->policy->max_attempts) return false;
	if(!outbound__divert_redelivered(d, r, c->client, delivered)) return false;
	deliveries__set_diverted(&st);
	/* Out of the session and dead-lettered: its clock, if one ran, with
	 * it. */
	struct dlq_deadline *e = deadlines__find(&d->deadlines, r, c->client);
	if(e) deadlines__remove(&d->deadlines, e);
	outbound__note_delivery(d, r, c->client);
	/* A message sent before is in flight, and 2.1.2 still keeps the
	 * in-flight slot of one removed by a reconnect access check
	 * (src/database.c: db__client_messages_check_acl does not give back
	 * the send quota that db__message_reconnect_reset took): as on 2.0,
	 * the client is disconnected once so that the broker recounts it. */
	if(redelivery__queue_kick(&d->redelivery, st.client, c->conn)){
		port__log(DLQ_LOG_ERR, "out of memory: " QFMT " may receive nothing more until it reconnects", Q(c->client));
	}
	st.client->skip_next_burst = false; /* 2.0's burst counting is not used here */
	return true;
}
