/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Redelivery tracking (see redelivery.h): which READ checks come from a
 * reconnecting session, whether a client held a record while connected,
 * and how 2.0 finds a record from a READ check (by the stored payload's
 * address or, for retry copies and restored records, by content). The
 * clients and deliveries themselves are kept by deliveries.c.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "model/deliveries.h"
#include "model/redelivery.h"
#include "util/chains.h"
#include "util/hash.h"

/* Redelivery tracking's fields of a record live in its more part
 * (record.h), which every record has while tracking is on on 2.0: tracked
 * ones are made with it, retry copies always have it. The indexes chain
 * records through it, at a fixed offset from the record. */
#define MORE(r) record__more(r)
#define MORE_OFFSET(field) (sizeof(struct dlq_record) + offsetof(struct dlq_record_more, field))

/* ---- hashing ---- */

static uint64_t fnv(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;
	for(size_t i = 0; i < len; i++){
		h ^= p[i];
		h *= 1099511628211ull;
	}
	return h;
}
#define FNV_START 14695981039346656037ull

/* Retry copies are indexed by topic, length and up to CONTENT_EDGE bytes at
 * each end of the payload: hashing every payload the broker checks would
 * cost as much as the delivery. Candidates are then compared byte for
 * byte, so payloads that differ only in the middle share a chain (slower,
 * still right). */
#define CONTENT_EDGE 64

static uint64_t hash_content(const char *topic, const void *payload, uint32_t len)
{
	uint64_t h = fnv(FNV_START, topic, strlen(topic) + 1);
	h = fnv(h, &len, sizeof(len));
	if(len <= 2 * CONTENT_EDGE){
		h = fnv(h, payload, len);
	}else{
		h = fnv(h, payload, CONTENT_EDGE);
		h = fnv(h, (const char *)payload + len - CONTENT_EDGE, CONTENT_EDGE);
	}
	h = chains__mix(h);
	return h ? h : 1; /* 0 means "not indexed" */
}

static uint64_t payload_key(const void *item)
{
	return chains__mix(MORE((const struct dlq_record *)item)->payload_ref);
}

static uint64_t content_key(const void *item)
{
	return MORE((const struct dlq_record *)item)->content_hash;
}

/* ---- lifetime ---- */

int redelivery__init(struct dlq_redelivery *t)
{
	memset(t, 0, sizeof(*t));
	return 0;
}

void redelivery__cleanup(struct dlq_redelivery *t, struct dlq_ledger *l)
{
	deliveries__cleanup(t, l);
	/* Only an index ever made has entries in records to clear. */
	for(struct dlq_record *r = l && (t->by_payload.table || t->by_content.table) ? l->oldest : NULL; r; r = r->newer){
		if(MORE(r) == NULL) continue;
		MORE(r)->payload_next = NULL;
		MORE(r)->content_next = NULL;
		MORE(r)->payload_ref = 0;
		MORE(r)->content_hash = 0;
	}
	struct dlq_kick *k = t->kicks;
	while(k){
		struct dlq_kick *next = k->next;
		free(k);
		k = next;
	}
	chains__free(&t->by_payload);
	chains__free(&t->by_content);
	memset(t, 0, sizeof(*t));
}

/* ---- connections ---- */

void redelivery__connected(struct dlq_redelivery *t, const char *client, uintptr_t conn)
{
	t->event++;
	struct dlq_rclient *c = deliveries__client_find(t, client);
	/* The connection that just ended is still checked for its will. */
	if(c && c->offline == conn) return;
	if(c == NULL) c = deliveries__client_get(t, client);
	if(c == NULL) return; /* out of memory: the client stays unknown, which only counts less */
	c->online = conn;
	c->offline = 0;
}

/* The connection a queued kick was for has ended: the kick must not reach
 * the session it left (see redelivery__queue_kick). */
static void drop_kick(struct dlq_redelivery *t, const char *client, uintptr_t conn)
{
	for(struct dlq_kick **pk = &t->kicks; *pk; pk = &(*pk)->next){
		struct dlq_kick *k = *pk;
		if(k->conn == conn && !strcmp(k->client, client)){
			*pk = k->next;
			free(k);
			return;
		}
	}
}

void redelivery__disconnected(struct dlq_redelivery *t, const char *client, uintptr_t conn)
{
	t->event++;
	drop_kick(t, client, conn);
	struct dlq_rclient *c = deliveries__client_find(t, client);
	if(c == NULL) return;
	/* A DISCONNECT for an older connection than the one known (a takeover
	 * reports the old one after the new one was seen) changes nothing. */
	if(c->online && c->online != conn) return;
	c->online = 0;
	c->offline = conn;
	deliveries__client_release(t, c);
}

/* ---- the indexes ---- */

static void unbind_payload(struct dlq_redelivery *t, struct dlq_record *r)
{
	if(MORE(r)->payload_ref == 0) return;
	chains__unlink(&t->by_payload, r, chains__mix(MORE(r)->payload_ref));
	MORE(r)->payload_ref = 0;
	MORE(r)->payload_next = NULL;
	t->bound--;
}

static void unindex_content(struct dlq_redelivery *t, struct dlq_record *r)
{
	if(MORE(r)->content_hash == 0) return;
	chains__unlink(&t->by_content, r, MORE(r)->content_hash);
	MORE(r)->content_hash = 0;
	MORE(r)->content_next = NULL;
	t->indexed--;
}

static void bind(struct dlq_redelivery *t, struct dlq_record *r, uintptr_t ref)
{
	if(ref == 0 || MORE(r) == NULL) return;
	/* The broker frees stored messages and reuses their addresses: a newer
	 * message at the same address replaces the older binding. */
	for(struct dlq_record *o = chains__first(&t->by_payload, chains__mix(ref)); o; o = MORE(o)->payload_next){
		if(MORE(o)->payload_ref == ref){
			unbind_payload(t, o);
			break;
		}
	}
	unbind_payload(t, r);
	if(chains__grow(&t->by_payload, t->bound, MORE_OFFSET(payload_next), payload_key)){
		return;
	}
	MORE(r)->payload_ref = ref;
	chains__link(&t->by_payload, r, chains__mix(ref));
	t->bound++;
}

void redelivery__bind_payload(struct dlq_redelivery *t, struct dlq_record *r, const void *payload)
{
	t->event++;
	/* An empty payload has no address (the broker stores NULL, and its
	 * checks carry NULL): such a message is found only by the checks that
	 * route it, which come next (routed_empty), and its redeliveries are
	 * not counted. */
	if(r->payload_len == 0){
		t->routing_empty = r;
		t->routing_event = t->event;
		return;
	}
	bind(t, r, (uintptr_t)payload);
}

/* Whether r is the message the broker stored with this topic and payload. */
static bool same_message(const struct dlq_record *r, const char *topic, const void *payload, uint32_t len)
{
	return r->payload_len == len && !strcmp(record__topic(r), topic)
			&& (len == 0 || !memcmp(record__payload(r), payload, len));
}

static struct dlq_record *by_content(const struct dlq_redelivery *t, const char *topic, const void *payload, uint32_t len)
{
	if(t->by_content.table == NULL) return NULL;
	uint64_t h = hash_content(topic, payload, len);
	for(struct dlq_record *r = chains__first(&t->by_content, h); r; r = MORE(r)->content_next){
		if(MORE(r)->content_hash == h && same_message(r, topic, payload, len)) return r;
	}
	return NULL;
}

int redelivery__note_copy(struct dlq_redelivery *t, struct dlq_ledger *l, struct dlq_record *r, const char *client)
{
	t->event++;
	/* No address to find it by later; or an original made for 2.1's
	 * exact counting, which finds messages by their dlq-id. */
	if(r->payload_len == 0 || MORE(r) == NULL) return 0;
	uint64_t h = hash_content(record__topic(r), record__payload(r), r->payload_len);
	/* The newest copy with this content is the one the broker will store
	 * next: it replaces an older one in the index. */
	struct dlq_record *old = by_content(t, record__topic(r), record__payload(r), r->payload_len);
	if(old) unindex_content(t, old);
	if(chains__grow(&t->by_content, t->indexed, MORE_OFFSET(content_next), content_key)){
		return ENOMEM;
	}
	MORE(r)->content_hash = h;
	chains__link(&t->by_content, r, h);
	t->indexed++;

	if(client == NULL) return 0;
	/* A copy for one client gets no READ check when the broker hands it
	 * over, so its delivery is made now. */
	struct dlq_rclient *c = deliveries__client_get(t, client);
	if(c == NULL) return ENOMEM;
	struct dlq_delivery *d = deliveries__find(t, r, c);
	if(d == NULL) d = deliveries__new(t, l, r, c);
	if(d == NULL){
		deliveries__client_release(t, c);
		return ENOMEM;
	}
	d->held_connected = c->online != 0;
	return 0;
}

void redelivery__record_gone(struct dlq_redelivery *t, struct dlq_ledger *l, struct dlq_record *r)
{
	if(t->routing_empty == r) t->routing_empty = NULL;
	if(MORE(r)){
		unbind_payload(t, r);
		unindex_content(t, r);
	}
	deliveries__record_gone(t, l, r);
}

/* ---- READ checks ---- */

/* 2.1: the record whose dlq-id the stored message carries. The topic and
 * payload must match too: a publisher may put any dlq-id on an untracked
 * message (the plugin's own stamp comes last, and is the one read). */
struct dlq_record *redelivery__record_by_id(const struct dlq_ledger *l, const char *id, size_t id_len,
		const char *topic, const void *payload, uint32_t payload_len)
{
	struct dlq_id decoded;
	if(!id__decode(id, id_len, &decoded)) return NULL;
	struct dlq_record *r = ledger__find(l, &decoded);
	return r && same_message(r, topic, payload, payload_len) ? r : NULL;
}

static struct dlq_record *find_by_id(const struct dlq_ledger *l, const struct dlq_read_check *c)
{
	return redelivery__record_by_id(l, c->id, strlen(c->id), c->topic, c->payload, c->payload_len);
}

/* A retry copy newer than r with r's content (the same chain's next copy
 * to the same topic) that the broker has not routed yet: no address bound,
 * no delivery (a copy for one client has its delivery from the start, and
 * no READ check). A check at r's address with r's content is then of that
 * copy: the broker freed r's message and stored the copy at its address
 * (issue 45, case 2: r, run out already, was taken for it, and the copy
 * waited on no clock for ever). NULL if there is none. */
static struct dlq_record *newer_copy(const struct dlq_redelivery *t, const struct dlq_record *r,
		const struct dlq_read_check *c)
{
	struct dlq_record *n = by_content(t, c->topic, c->payload, c->payload_len);
	return n && n != r && MORE(n)->payload_ref == 0 && MORE(n)->deliveries == NULL ? n : NULL;
}

static struct dlq_record *find_record(struct dlq_redelivery *t, const struct dlq_ledger *l,
		const struct dlq_read_check *c)
{
	if(c->id) return find_by_id(l, c);
	uintptr_t ref = (uintptr_t)c->payload;
	if(ref == 0 || c->payload_len == 0) return NULL;
	if(t->by_payload.table){
		for(struct dlq_record *r = chains__first(&t->by_payload, chains__mix(ref)); r; r = MORE(r)->payload_next){
			if(MORE(r)->payload_ref == ref){
				if(same_message(r, c->topic, c->payload, c->payload_len)){
					struct dlq_record *n = newer_copy(t, r, c);
					if(n == NULL) return r;
					bind(t, n, ref);
					return n;
				}
				/* The broker freed the message bound here and stored
				 * another at its address (a will, another plugin's
				 * publish, or a retry copy of this plugin's, which the
				 * content finds below): the binding is stale. */
				unbind_payload(t, r);
				break;
			}
		}
	}
	/* A retry copy: the broker stored its own copy of our payload. */
	struct dlq_record *r = by_content(t, c->topic, c->payload, c->payload_len);
	if(r) bind(t, r, ref);
	return r;
}

/* Whether the check numbered event goes on the run of checks that routes
 * the empty-payload message tracked last: 2.0 routes a QoS 0 or 1 message
 * right after the MESSAGE event that tracked it, one READ check per
 * subscriber with nothing in between (src/handle_publish.c:
 * sub__messages_queue), so such a check, with an empty payload on its
 * topic, is of that message. (A QoS 2 message is routed later, at its
 * PUBREL, which no plugin sees: an empty one is not found.) */
static bool routing_run(struct dlq_redelivery *t, uint64_t event)
{
	if(t->routing_empty == NULL || t->routing_event != event - 1) return false;
	t->routing_event = event;
	return true;
}

static struct dlq_record *routed_empty(const struct dlq_redelivery *t, const struct dlq_read_check *c)
{
	struct dlq_record *r = t->routing_empty;
	return c->payload_len == 0 && !strcmp(record__topic(r), c->topic) ? r : NULL;
}

int redelivery__read_check(struct dlq_redelivery *t, struct dlq_ledger *l, const struct dlq_read_check *c,
		struct dlq_read_verdict *v)
{
	memset(v, 0, sizeof(*v));
	uint64_t event = ++t->event;
	bool routing = c->id == NULL && routing_run(t, event);
	struct dlq_rclient *cl = deliveries__client_find(t, c->client);

	/* The QoS is the stored message's. 2.0.11 stores a plugin's publish to
	 * one client with QoS 0 whatever it is delivered with (src/loop.c,
	 * single_publish), so a retry copy's own QoS is taken from its record.
	 * A copy's client is known to the tracker (redelivery__note_copy). */
	uint8_t qos = c->qos;
	struct dlq_record *r = NULL;
	if(qos > 0 || cl || t->every_qos){
		r = find_record(t, l, c);
		if(qos == 0 && r) qos = r->qos;
	}
	v->record = r;

	if(cl && cl->offline && c->conn != cl->offline){
		/* A check from a connection other than the session object the
		 * client left behind: it has reconnected, and this is the first
		 * check of the run the broker makes for what its session holds. */
		cl->online = c->conn;
		cl->offline = 0;
		cl->burst_event = event;
		cl->burst_pos = 0;
		cl->burst_counts = !cl->skip_next_burst;
		cl->skip_next_burst = false;
		v->in_burst = true;
		v->burst_start = true;
	}else if(cl && cl->burst_event && cl->burst_event == event - 1 && cl->online == c->conn){
		/* The run goes on: nothing else happened in between. */
		cl->burst_event = event;
		v->in_burst = true;
	}else if(cl){
		cl->burst_event = 0;
	}
	if(v->in_burst && qos > 0){
		v->first_in_burst = cl->burst_pos == 0 && cl->burst_counts;
		cl->burst_pos++;
	}
	v->live = v->in_burst || (cl && cl->online && cl->online == c->conn);
	/* A reconnect's run is of what the session holds, older messages
	 * too: an empty payload there is not known to be the one just
	 * routed. */
	if(r == NULL && routing && !v->in_burst && (c->qos > 0 || cl || t->every_qos)){
		r = routed_empty(t, c);
		v->record = r;
	}

	if(qos == 0 || r == NULL) return 0; /* QoS 0 is never redelivered */
	if(cl == NULL){
		cl = deliveries__client_get(t, c->client);
		if(cl == NULL) return ENOMEM;
		/* Nothing says whether this connection is live or a session
		 * left behind (restored at startup, or offline since before the
		 * client was known): taken as left behind, a reconnect from
		 * elsewhere is then seen, and nothing is counted that was not
		 * sent. */
		cl->offline = c->conn;
	}
	struct dlq_delivery *d = deliveries__find(t, r, cl);
	if(d == NULL){
		d = deliveries__new(t, l, r, cl);
		if(d == NULL){
			deliveries__client_release(t, cl);
			return ENOMEM;
		}
	}else if(v->first_in_burst && d->held_connected){
		/* The oldest message in flight when the client left, sent to it
		 * while connected: the broker is about to send it again. */
		v->redelivery = true;
	}
	/* In a reconnecting session, or routed to a client known to be on
	 * this connection, it is now held while connected. */
	if(!d->held_connected && (v->in_burst || (cl->online && cl->online == c->conn))){
		d->held_connected = true;
		v->held_now = true;
	}
	v->delivery = d;
	return 0;
}

bool redelivery__online(const struct dlq_redelivery *t, const char *client)
{
	const struct dlq_rclient *c = deliveries__client_find(t, client);
	return c && c->online;
}

/* ---- kicks ---- */

int redelivery__queue_kick(struct dlq_redelivery *t, struct dlq_rclient *c, uintptr_t conn)
{
	for(struct dlq_kick *k = t->kicks; k; k = k->next){
		if(!strcmp(k->client, c->id)) return 0;
	}
	size_t len = strlen(c->id);
	struct dlq_kick *k = malloc(sizeof(*k) + len + 1);
	if(k == NULL) return ENOMEM;
	k->conn = conn;
	memcpy(k->client, c->id, len + 1);
	k->next = t->kicks;
	t->kicks = k;
	c->skip_next_burst = true;
	return 0;
}

struct dlq_kick *redelivery__take_kicks(struct dlq_redelivery *t)
{
	struct dlq_kick *k = t->kicks;
	t->kicks = NULL;
	return k;
}

