/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Retry copies for a client that leaves (see dlq.h, dlq__client_gone, and
 * holds.h): a copy for one client whose session does not persist would be
 * lost with the session, silently, by the broker. Copies the broker has not
 * taken yet (owed, delayed, or sent in this loop pass) are replaced by their
 * dead letters; so are the copies it took that the client had not NACKed
 * when it left, which are held on their ledger records until then: nothing
 * in Mosquitto 2.0 says whether the client acknowledged them, and 2.0.11
 * reads one packet per connection per loop pass, so a DISCONNECT sent right
 * after a NACK arrives once the broker has handed the copy to the session
 * that is about to end. Each dead letter says which of these it was: a copy
 * the broker had not taken yet, one it took and (on 2.1, which shows every
 * send: exact counting) had sent to the client or not, or, on 2.0, one it
 * took that the client may have received.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/dlq.h"
#include "engine/engine.h"
#include "engine/letter_store.h"
#include "engine/outbound.h"
#include "util/errtext.h"
#include "util/port.h"

/* The hold of r for client is over: client counts as one of r's settlers,
 * so that a journal replay after a restart does not hold it again (and a
 * late NACK of it by client is refused rather than start a second chain).
 * client may be the holder's own id, freed with the hold: released last. */
static void let_go(struct dlq *d, struct dlq_record *r, const char *client)
{
	int rc = ledger__add_settler(&d->ledger, r, client, DLQ_SETTLED_NACK);
	if(rc == ENOMEM){
		port__log(DLQ_LOG_ERR, "out of memory: after a restart the retry copy on " QFMT " for " QFMT
				" may be dead-lettered a second time", Q(record__topic(r)), Q(client));
	}else if(rc == 0){
		store_port__settler(&d->store, r, client, DLQ_SETTLED_NACK);
	}
	holds__release(&d->holds, r);
}

/* The record of copy e (accepted, then diverted before the broker took it)
 * need not be dead-lettered a second time. */
static void diverted_copy(struct dlq *d, const struct dlq_envelope *e, const char *client)
{
	if(!e->recorded) return;
	struct dlq_record *r = ledger__find(&d->ledger, &e->id);
	const char *holder = r ? holds__client(r) : NULL;
	if(holder && !strcmp(holder, client)) let_go(d, r, client);
}

/* What the plugin knows of a held copy (the broker took it) when its
 * client leaves. */
enum held_fate {
	HELD_MAYBE_RECEIVED, /* 2.0: sends are not shown (no exact counting) */
	HELD_SENT,           /* 2.1: written to the client (MESSAGE_OUT) */
	HELD_NOT_SENT,       /* 2.1: never written to it */
};

static enum held_fate held_fate(struct dlq *d, struct dlq_record *r, const char *client)
{
	if(!d->broker.exact_counting) return HELD_MAYBE_RECEIVED;
	/* A held copy has its own record, whose sends to its client are
	 * counted from the broker's MESSAGE_OUT (exact_counting.c). */
	struct dlq_sent_to st;
	if(deliveries__sent_to(&d->redelivery, r, client, &st) && deliveries__sends(&st) > 0) return HELD_SENT;
	return HELD_NOT_SENT;
}

/* The dead-letter reason of a copy held for client, which left (lasting:
 * went offline with a session that lasts; only QoS 0 copies are then
 * dead-lettered). The client id is cut at a character boundary: the
 * reason becomes a user property, and a cut inside a character would be
 * invalid UTF-8. */
static const char *held_reason(struct dlq *d, struct dlq_record *r, const char *client, bool lasting,
		char *buf, size_t size)
{
	const char *left = lasting ? "went offline" : "left without a session";
	const char *copy = lasting ? "QoS 0 retry copy" : "retry copy";
	switch(held_fate(d, r, client)){
		case HELD_SENT:
			/* 2.1.2 shows MESSAGE_OUT before it checks the client's
			 * Maximum Packet Size (lib/send_publish.c): a copy it then
			 * drops ("Dropping too large outgoing PUBLISH") counts as
			 * sent, and the plugin cannot tell. */
			snprintf(buf, size, "subscriber " QFMT " %s after its %s was sent to it, without NACKing or "
					"confirming it (it may have processed it, unless the broker dropped the copy as too large "
					"for it)", Q(client), left, copy);
			break;
		case HELD_NOT_SENT:
			snprintf(buf, size, "subscriber " QFMT " %s before the broker sent it its %s%s", Q(client), left, copy,
					lasting ? ": the broker keeps no QoS 0 message for an offline session"
						: " (the broker had taken it)");
			break;
		case HELD_MAYBE_RECEIVED:
		default:
			snprintf(buf, size, "subscriber " QFMT " %s before confirming its %s (it may have received it)",
					Q(client), left, copy);
			break;
	}
	return buf;
}

/* How a client left, for its held copies. */
enum leave {
	LEAVE_ENDED,          /* its session ended with the connection */
	LEAVE_OFFLINE,        /* its session lasts (2.1's CLIENT_OFFLINE) */
	LEAVE_TAKEN_OVER,     /* 2.1: another connection took its id; the next
	                       * CONNECT says whether the session goes on */
	LEAVE_LASTING_ENDED,  /* 2.1: a clean start ended the session it had kept */
};

/* Dead-letters the records held for client: the broker took each copy for
 * a session that is now gone, and the client did not NACK it. The dead
 * letter says as much as the copy did (its retry-count), and may be a
 * duplicate of a copy the client processed before it left; its reason says
 * whether the copy was sent to the client (held_reason). Not bounded by
 * max_pending_bytes: the records are already counted, and refusing would
 * lose the message.
 * - LEAVE_OFFLINE: the session lasts, and only the copies it does not
 *   keep, of QoS 0, go. 2.0 shows no session's end, so the others are let
 *   go to the session; 2.1 does, so they stay held for the session
 *   (hold_lasting) until the client settles them or the session ends.
 * - LEAVE_ENDED, LEAVE_LASTING_ENDED: of the copies held for a session
 *   that lasted, one the broker never sent (queued behind a hung in-flight
 *   window) is dropped with the session and dead-lettered; one it sent
 *   was the session's to deliver, as any of its messages, and is let go
 *   (its deadline, if it has one, runs on: into a dead letter, since the
 *   client has no session). LEAVE_LASTING_ENDED touches only those.
 * - LEAVE_TAKEN_OVER: as LEAVE_ENDED, but the copies held for a session
 *   that lasted stay held until the next CONNECT says whether the session
 *   goes on (2.1 marks a taken-over session clean, whatever comes next). */
static void dead_letter_held(struct dlq *d, const char *client, enum leave how)
{
	char reason[512];
	struct dlq_holder *k = holds__find(&d->holds, client);
	struct dlq_record *r = k ? k->records : NULL;
	while(r){
		struct dlq_record_more *m = record__more(r); /* held: a retry copy */
		struct dlq_record *next = m->hold_next;
		bool kept = r->qos > 0 || d->broker.queue_qos0_messages;
		bool skip = false;
		if(how == LEAVE_OFFLINE && kept){
			if(d->broker.exact_counting){
				m->hold_lasting = true;
			}else{
				/* The snapshot no longer holds it (a journal replay after
				 * a SIGKILL still does: then the copy is dead-lettered
				 * too, a duplicate, never a loss). */
				holds__release(&d->holds, r);
				d->changes++;
			}
			skip = true;
		}else if(how != LEAVE_OFFLINE && m->hold_lasting){
			if(how == LEAVE_TAKEN_OVER){
				skip = true;
			}else if(held_fate(d, r, client) == HELD_SENT){
				holds__release(&d->holds, r);
				d->changes++;
				skip = true;
			}
		}else if(how == LEAVE_LASTING_ENDED){
			skip = true;
		}
		if(skip){
			r = next;
			continue;
		}
		unsigned delivered = record__attempt(r) > 1 ? record__attempt(r) - 1u : 1u;
		held_reason(d, r, client, how == LEAVE_OFFLINE, reason, sizeof(reason));
		enum dlq_cause cause = how == LEAVE_OFFLINE ? DLQ_DEAD_OFFLINE_QOS0 : DLQ_DEAD_SUBSCRIBER_GONE;
		if(outbound__dead_letter_of(d, r, client, cause, reason, delivered, false)){
			port__log(DLQ_LOG_ERR, "out of memory: the retry copy on " QFMT " for " QFMT " that left is lost",
					Q(record__topic(r)), Q(client));
		}
		/* let_go frees the holder, and client with it, with its last
		 * record: next is NULL then. */
		let_go(d, r, client);
		r = next;
	}
}

void engine__settle_restored_holds(struct dlq *d)
{
	char reason[512];
	for(size_t i = 0; i < d->holds.size && d->holds.records; i++){
		struct dlq_holder *k = d->holds.table[i];
		while(k){
			struct dlq_holder *k_next = k->hnext; /* k is freed with its last record */
			/* 2.1 says which sessions it restored: one that the broker
			 * restored keeps the copy it took (its session outlived the
			 * connection after all: the broker stopped before the plugin
			 * saw it go), as when a lasting session leaves: 2.1 shows
			 * that session's end, so the copy stays held for it. */
			bool kept = d->broker.has_session && d->broker.has_session(d->broker.ctx, k->client);
			struct dlq_record *r = k->records;
			while(r){
				struct dlq_record *next = record__more(r)->hold_next;
				const char *client = k->client; /* freed by let_go with k's last record */
				if(kept && d->broker.exact_counting){
					record__more(r)->hold_lasting = true;
				}else if(kept){
					holds__release(&d->holds, r);
					d->changes++;
				}else{
					snprintf(reason, sizeof(reason), "the broker restarted before subscriber " QFMT
							", whose session does not survive a restart, confirmed its retry copy", Q(client));
					struct dlq_envelope *e = envelope__dead_letter(r, client, d->cfg.broker_name, DLQ_DEAD_RESTART,
							reason, port__wall_ms());
					if(e == NULL){
						port__log(DLQ_LOG_ERR, "out of memory: the restored retry copy on " QFMT " for " QFMT
								" is lost", Q(record__topic(r)), Q(client));
					}else{
						e->seq = d->next_seq++;
						letter_store__name(d, e);
						e->retry_count = record__attempt(r) > 1 ? (uint16_t)(record__attempt(r) - 1) : 1;
						store_port__add(&d->store, e, false);
						outbox__push(&d->outbox, &d->outbox.owed, e);
						d->changes++;
					}
					let_go(d, r, client);
				}
				r = next;
			}
			k = k_next;
		}
	}
}

/* A retry copy for client that would be lost with its session (all of
 * QoS 0 when qos0_only: the session lasts, the broker drops those). */
static bool is_copy_for(const struct dlq_envelope *e, const char *client, bool qos0_only)
{
	return e->kind == DLQ_ENV_RETRY_COPY && e->target_client && (qos0_only ? e->qos == 0 : !e->target_persists)
			&& !strcmp(e->target_client, client);
}

static const char *gone_reason(const char *client, char *buf, size_t size)
{
	/* The client id is cut at a character boundary: the reason becomes a
	 * user property, and a cut inside a character would be invalid UTF-8. */
	snprintf(buf, size, "subscriber " QFMT " left without a session before its retry copy was delivered", Q(client));
	return buf;
}

/* Replaces every retry copy for client in list with its dead letter: all of
 * them, their subscriber gone, or (qos0_only) those of QoS 0, their
 * subscriber offline. */
static void divert_list(struct dlq *d, struct dlq_envelope_list *list, const char *client, const char *reason,
		bool qos0_only)
{
	struct dlq_envelope *e = list->head;
	while(e){
		struct dlq_envelope *next = e->next;
		if(is_copy_for(e, client, qos0_only)){
			/* Unlinked first: divert may push onto this very list. */
			outbox__unlink(&d->outbox, list, e);
			if(outbound__divert_copy(d, e, qos0_only ? DLQ_DEAD_OFFLINE_QOS0 : DLQ_DEAD_SUBSCRIBER_GONE, reason)){
				diverted_copy(d, e, client);
				envelope__free(e);
			}else{
				outbox__push(&d->outbox, list, e);
			}
		}
		e = next;
	}
}

static void client_gone(struct dlq *d, const char *client, enum leave how)
{
	char reason[512];

	if(client == NULL) return;
	nonack__forget(&d->nonack, client);
	deadsubs__forget(&d->deadsubs, client);
	sessions__ended(&d->sessions, client);
	gone_reason(client, reason, sizeof(reason));
	divert_list(d, &d->outbox.sent, client, reason, false);
	divert_list(d, &d->outbox.owed, client, reason, false);
	dead_letter_held(d, client, how);

	/* Delayed copies for the client: collected first, since removing one
	 * reorders the heap. */
	size_t n = 0;
	for(size_t i = 0; i < d->delayed.count; i++){
		if(is_copy_for(d->delayed.heap[i], client, false)) n++;
	}
	if(n == 0) return;
	struct dlq_envelope **found = malloc(n * sizeof(*found));
	if(found == NULL){
		port__log(DLQ_LOG_ERR, "out of memory: %zu delayed retry copies for " QFMT " stay scheduled for a client that has gone",
				n, Q(client));
		return;
	}
	n = 0;
	for(size_t i = 0; i < d->delayed.count; i++){
		if(is_copy_for(d->delayed.heap[i], client, false)) found[n++] = d->delayed.heap[i];
	}
	for(size_t i = 0; i < n; i++){
		schedule__remove(&d->delayed, found[i]);
		if(outbound__divert_copy(d, found[i], DLQ_DEAD_SUBSCRIBER_GONE, reason)){
			envelope__free(found[i]);
		}else if(schedule__push(&d->delayed, found[i])){
			/* The heap only shrank, so this cannot fail; free rather than leak. */
			envelope__free(found[i]);
		}
	}
	free(found);
}

void engine__gone_qos0(struct dlq *d, const char *client)
{
	char reason[512];
	snprintf(reason, sizeof(reason), "subscriber " QFMT " went offline before its QoS 0 retry copy was delivered: "
			"the broker keeps no QoS 0 message for an offline session", Q(client));
	if(!d->broker.queue_qos0_messages) divert_list(d, &d->outbox.sent, client, reason, true);
	dead_letter_held(d, client, LEAVE_OFFLINE);
}

void dlq__client_gone(struct dlq *d, const char *client)
{
	client_gone(d, client, LEAVE_ENDED);
}

void dlq__client_taken_over(struct dlq *d, const char *client)
{
	client_gone(d, client, d->broker.exact_counting ? LEAVE_TAKEN_OVER : LEAVE_ENDED);
}

void engine__lasting_session_ended(struct dlq *d, const char *client)
{
	dead_letter_held(d, client, LEAVE_LASTING_ENDED);
}

