/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Fuzz target: exact counting on Mosquitto 2.1 (sends.c, d->broker.exact_counting):
 * the sends the broker shows (MESSAGE_OUT, dlq__sent) of messages carrying
 * tracked, forged or malformed dlq-id values, on their own topic and payload
 * or another, the READ checks of 2.1's exact path (dlq__read_check with the
 * stored dlq-id), interleaved with NACKs, ticks, subscriptions (targeted
 * copies take their QoS and identifiers) and clients that connect, go
 * offline or end their session. Each input is a binary script
 * (fuzz_input.h) run on a fresh engine (standard configuration,
 * redelivery_tracking allow), at most MAX_OPS operations:
 *
 *   0 track     topic byte, payload byte, QoS byte
 *   1 send      client, id, content byte (the record's own or another)
 *   2 check     client, id, content byte, connection byte
 *   3 nack      client, id, flags byte (bit 0: the session persists; bit 1:
 *               a delay of the next byte's seconds; bit 2: an ACK instead,
 *               bit 3: a progress report instead; bit 4: a final NACK)
 *   4 tick      (what was published is harvested: copies' ids are kept)
 *   5 connect   client, clean_start byte
 *   6 offline   client
 *   7 gone      client
 *   8 subscribe client, filter byte, QoS byte, identifier byte
 *   9 clock     advance by the next byte's tenths of a second; the broker
 *               refuses the next (byte >> 6) publishes
 *
 * An id is one of the last RING ids handed out (tracked messages and retry
 * copies), or one read from the input (forged: 16 characters, or any
 * length, NUL-free), handed over in an exact-size buffer as 2.1's property
 * API gives it (no NUL after it).
 *
 * Checked: no crash, leak or undefined behaviour; a send of an id never
 * handed out, or on content not the record's, counts nothing; the attempt a
 * send reports never exceeds its record's attempt plus the sends of it to
 * that client; the redeliveries counted never exceed the sends; every
 * diverted message made a dead letter; everything accepted (NACKs, diverted
 * messages, deliveries whose ack_timeout ran out) is published by the end
 * or was still owed; nothing published is refused by the broker
 * (fuzz_port.c). A send of a record whose policy has an ack_timeout starts
 * its deadline as the MESSAGE_OUT adapter does; the deliveries awaiting
 * settlement stay consistent (each of a record in the ledger, by a client
 * that has not settled it; their gauge agreeing), and one settled by an
 * ACK or a NACK awaits nothing.
 */
#include <string.h>

#include <mosquitto.h>

#include "engine/dlq.h"
#include "fake_port.h"
#include "fuzz.h"
#include "fuzz_input.h"
#include "model/ledger.h"
#include "model/redelivery.h"
#include "mosquitto_dlq.h"
#include "test_util.h"
#include "util/id.h"

#define MAX_OPS 200
#define RING 8
#define CLIENTS 4

struct known {
	char id[DLQ_ID_LEN + 1];
	char *topic;        /* owned */
	uint8_t *payload;   /* owned, payload_len bytes */
	uint32_t payload_len;
	unsigned sends[CLIENTS]; /* sends shown per fixed client */
};

struct run {
	struct dlq d;
	struct known ring[RING]; /* most recent last */
	size_t n;
	uint64_t sent_calls;
	uint64_t accepted;   /* NACKs accepted */
	uint64_t published;
};

static const char *const clients[CLIENTS] = {"w1", "w2", "", "$share-ish"};
static const char *const topics[] = {"orders/1", "once", "slow/a/b", "fanout", "eu/alerts/x", "untracked"};
static const char *const payloads[] = {"", "poison", "p\0q", "x"};
static const uint32_t payload_lens[] = {0, 6, 3, 1};
static const char *const filters[] = {"#", "orders/+", "$share/g/orders/#", "+/alerts/#", "once", "slow/#", "fanout",
		"dead/#", "+", "retry/fanout"};

/* FUZZ_TRACE=1 in the environment: each operation is printed (to read a
 * finding with the replay driver). */
static bool trace;
#define TRACE(...) do{ if(trace) fprintf(stderr, __VA_ARGS__); }while(0)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	trace = getenv("FUZZ_TRACE") != NULL;
	return 0;
}

static void forget_known(struct known *k)
{
	free(k->topic);
	free(k->payload);
	memset(k, 0, sizeof(*k));
}

static void remember(struct run *r, const char *id, const char *topic, const void *payload, uint32_t len)
{
	if(strlen(id) != DLQ_ID_LEN) return;
	if(r->n == RING){
		forget_known(&r->ring[0]);
		memmove(&r->ring[0], &r->ring[1], sizeof(r->ring[0]) * (RING - 1));
		memset(&r->ring[RING - 1], 0, sizeof(r->ring[0]));
		r->n--;
	}
	struct known *k = &r->ring[r->n++];
	memcpy(k->id, id, DLQ_ID_LEN + 1);
	k->topic = strdup(topic);
	k->payload = malloc(len ? len : 1);
	FUZZ_CHECK(k->topic && k->payload, "out of memory");
	if(len) memcpy(k->payload, payload, len);
	k->payload_len = len;
}

static void harvest(struct run *r)
{
	for(size_t i = 0; i < fake.publish_count; i++){
		const struct fake_publish *p = &fake.publishes[i];
		const char *id = fake_header_value(p, DLQ_PROP_ID);
		TRACE("  published %s to \"%.20s\" QoS %u: %s\n", p->topic, p->client ? p->client : "(all)", p->qos,
				id ? id : "-");
		if(id && p->client) remember(r, id, p->topic, p->payload, p->payload_len);
		r->published++;
	}
	fuzz_port_clear();
}

/* A client: index into clients (>= 0), or -1 with *owned one of the input
 * (possibly huge), never NULL (the adapters drop a NULL client id). */
static int pick_client(struct fuzz_input *in, char **owned)
{
	uint8_t c = fuzz_input_byte(in);
	*owned = NULL;
	if(c % 6 < CLIENTS) return c % 6;
	*owned = fuzz_input_string(in);
	if(*owned == NULL) *owned = strdup("");
	FUZZ_CHECK(*owned != NULL, "out of memory");
	/* The broker takes only client ids that are MQTT strings: valid
	 * UTF-8 of at most 65535 bytes (its dead letters carry them as
	 * properties); bytes past 0x7F are folded into ASCII when the whole is
	 * not valid. */
	size_t n = strlen(*owned);
	if(n > 65535) (*owned)[n = 65535] = '\0';
	if(mosquitto_validate_utf8(*owned, (int)n) != MOSQ_ERR_SUCCESS){
		for(size_t i = 0; i < n; i++){
			uint8_t v = (uint8_t)(*owned)[i] & 0x7F;
			(*owned)[i] = (char)(v < 0x20 || v == 0x7F ? 'u' : v);
		}
	}
	/* One of the fixed ids given as a string is that client. */
	for(int k = 0; k < CLIENTS; k++){
		if(!strcmp(*owned, clients[k])){
			free(*owned);
			*owned = NULL;
			return k;
		}
	}
	return -1;
}

/* An id in an exact-size buffer (*len bytes, owned), and the ring entry it
 * came from or NULL when forged. */
static char *pick_id(struct run *r, struct fuzz_input *in, size_t *len, struct known **from)
{
	uint8_t c = fuzz_input_byte(in);
	*from = NULL;
	char *s;
	if(c < 200 && r->n > 0){
		*from = &r->ring[r->n - 1 - (c % r->n)];
		s = strdup((*from)->id);
	}else if(c & 1){
		s = malloc(DLQ_ID_LEN + 1);
		FUZZ_CHECK(s != NULL, "out of memory");
		for(size_t i = 0; i < DLQ_ID_LEN; i++){
			uint8_t b = fuzz_input_byte(in);
			s[i] = b ? (char)b : 'A';
		}
		s[DLQ_ID_LEN] = '\0';
	}else{
		s = fuzz_input_string(in);
		if(s == NULL) s = strdup("");
	}
	FUZZ_CHECK(s != NULL, "out of memory");
	*len = strlen(s);
	char *exact = malloc(*len ? *len : 1);
	FUZZ_CHECK(exact != NULL, "out of memory");
	memcpy(exact, s, *len);
	free(s);
	/* A forged id may equal a real one: then it is that one. */
	for(size_t i = 0; *from == NULL && i < r->n; i++){
		if(*len == DLQ_ID_LEN && !memcmp(r->ring[i].id, exact, DLQ_ID_LEN)) *from = &r->ring[i];
	}
	return exact;
}

/* The content a send or check shows: the record's own (byte even), or one
 * of the fixed topics and payloads. */
static void pick_content(struct fuzz_input *in, const struct known *k, const char **topic, const void **payload,
		uint32_t *len)
{
	uint8_t c = fuzz_input_byte(in);
	if(k && !(c & 1)){
		*topic = k->topic;
		*payload = k->payload_len ? k->payload : NULL;
		*len = k->payload_len;
		return;
	}
	*topic = topics[(c >> 1) % ARRAY_LEN(topics)];
	unsigned p = (c >> 4) % 4;
	*payload = payload_lens[p] ? payloads[p] : NULL;
	*len = payload_lens[p];
}

/* Whether id (DLQ_ID_LEN bytes) is a record's in the ledger. */
static bool fuzz_known_id(const struct dlq *d, const char *id)
{
	struct dlq_id v;
	return id__decode(id, DLQ_ID_LEN, &v) && ledger__find(&d->ledger, &v) != NULL;
}

static bool same_content(const struct known *k, const char *topic, const void *payload, uint32_t len)
{
	return k && !strcmp(k->topic, topic) && k->payload_len == len && (len == 0 || !memcmp(k->payload, payload, len));
}

/* The deliveries awaiting settlement, consistent (deadlines.h). */
static void check_deadlines(const struct dlq *d)
{
	const struct dlq_deadlines *ds = &d->deadlines;
	size_t n = 0;
	for(size_t k = 0; k < chains__count(&ds->table); k++){
		for(const struct dlq_deadline *e = chains__chain(&ds->table, k); e; e = e->hnext){
			FUZZ_CHECK(ledger__find(&d->ledger, &e->record->id) == e->record, "a deadline's record is not in the ledger");
			FUZZ_CHECK(!ledger__has_settler(e->record, e->client->id), "a settled delivery awaits settlement");
			FUZZ_CHECK(e->queue != NULL, "2.1: a delivery awaits settlement without a clock");
			n++;
		}
	}
	FUZZ_CHECK(n == ds->count && ds->running == n, "%zu deliveries counted of %zu", n, ds->count);
	FUZZ_CHECK(d->gauges.total.awaiting == n, "awaiting gauge %llu, deliveries %zu",
			(unsigned long long)d->gauges.total.awaiting, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_input in = {data, size, 0};
	static struct run r;
	uintptr_t conn = 1;

	memset(&r, 0, sizeof(r));
	fake_reset();
	fake.record_sys = true;
	struct dlq_option opts[32];
	FUZZ_CHECK(fuzz_standard_count + 1 <= 32, "options");
	memcpy(opts, fuzz_standard_options, fuzz_standard_count * sizeof(opts[0]));
	opts[fuzz_standard_count] = (struct dlq_option){"redelivery_tracking", "allow"};
	fuzz_engine_start(&r.d, opts, fuzz_standard_count + 1, ENGINE_EXACT_COUNTING);
	FUZZ_CHECK(r.d.broker.exact_counting, "exact counting is off");

	for(int op = 0; op < MAX_OPS && fuzz_input_more(&in); op++){
		uint8_t code = fuzz_input_byte(&in) % 10;
		char *owned = NULL, *id = NULL;
		size_t id_len = 0;
		struct known *k = NULL;
		int ci;
		switch(code){
		case 0: {
			const char *topic = topics[fuzz_input_byte(&in) % ARRAY_LEN(topics)];
			unsigned p = fuzz_input_byte(&in) % 4;
			uint8_t qos = fuzz_input_byte(&in) % 3;
			const struct dlq_policy *pol = dlq__policy_for(&r.d, topic);
			char out[DLQ_ID_LEN + 1];
			if(pol && dlq__track(&r.d, pol, topic, payloads[p], payload_lens[p], qos, NULL, 0, out) == 0){
				remember(&r, out, topic, payloads[p], payload_lens[p]);
				TRACE("track %s %u bytes QoS %u: %s\n", topic, payload_lens[p], qos, out);
			}
			break;
		}
		case 1: {
			ci = pick_client(&in, &owned);
			const char *client = ci >= 0 ? clients[ci] : owned;
			id = pick_id(&r, &in, &id_len, &k);
			const char *topic;
			const void *payload;
			uint32_t len;
			pick_content(&in, k, &topic, &payload, &len);
			struct dlq_send s;
			uint64_t redeliveries = engine__totals(&r.d)->redeliveries;
			const struct dlq_record *rec = redelivery__record_by_id(&r.d.ledger, id, id_len, topic, payload, len);
			unsigned base = rec ? record__attempt(rec) : 0;
			dlq__sent(&r.d, client, 0, id, id_len, topic, payload, len, &s);
			/* As the adapter does, for a receiver with MQTT 5. */
			if(s.attempt && s.policy->ack_timeout_ms) dlq__deadline_sent(&r.d, &s, client, true);
			TRACE("send to \"%.20s\" %.*s on %s (%u bytes): attempt %u\n", client, (int)(id_len > 20 ? 20 : id_len), id,
					topic, len, s.attempt);
			r.sent_calls++;
			bool ours = same_content(k, topic, payload, len);
			if(ours && ci >= 0) k->sends[ci]++;
			/* (A 16-character id from the input can be a real one the
			 * ring no longer holds: the ids are drawn from the fake's
			 * fixed random sequence.) */
			FUZZ_CHECK(ours || (k == NULL && rec) || s.attempt == 0,
					"a send of a forged id or other content counted (attempt %u)", s.attempt);
			FUZZ_CHECK(s.attempt == 0 || rec != NULL, "attempt %u of no record", s.attempt);
			FUZZ_CHECK((s.attempt == 0) == (s.policy == NULL), "attempt %u, policy %p", s.attempt, (const void *)s.policy);
			if(ci >= 0 && ours && s.attempt){
				FUZZ_CHECK(s.attempt <= base + k->sends[ci] - 1, "attempt %u after %u sends (record attempt %u)",
						s.attempt, k->sends[ci], base);
			}
			FUZZ_CHECK(engine__totals(&r.d)->redeliveries <= redeliveries + (s.attempt > 0), "redeliveries jumped");
			FUZZ_CHECK(engine__totals(&r.d)->redeliveries <= r.sent_calls, "more redeliveries than sends");
			break;
		}
		case 2: {
			ci = pick_client(&in, &owned);
			const char *client = ci >= 0 ? clients[ci] : owned;
			id = pick_id(&r, &in, &id_len, &k);
			/* The read check's id is a C string (2.1 hands over the
			 * property's value, NUL-terminated). */
			char *cid = malloc(id_len + 1);
			FUZZ_CHECK(cid != NULL, "out of memory");
			memcpy(cid, id, id_len);
			cid[id_len] = '\0';
			struct dlq_read_check c = {.client = client, .qos = 1, .id = cid};
			pick_content(&in, k, &c.topic, &c.payload, &c.payload_len);
			uint8_t which = fuzz_input_byte(&in);
			c.conn = which & 1 ? conn : conn + 1 + which; /* its live connection, or another */
			uint64_t diverted = engine__totals(&r.d)->diverted;
			bool real = k == NULL && redelivery__record_by_id(&r.d.ledger, cid, id_len, c.topic, c.payload, c.payload_len);
			bool removed = dlq__read_check(&r.d, &c);
			TRACE("check \"%.20s\" conn %lu (live %lu) %.20s on %s: %s\n", client, (unsigned long)c.conn,
					(unsigned long)conn, cid, c.topic, removed ? "removed" : "kept");
			FUZZ_CHECK(!removed || real || same_content(k, c.topic, c.payload, c.payload_len),
					"a read check of a forged id or other content removed a message");
			FUZZ_CHECK(engine__totals(&r.d)->diverted <= diverted + 1, "diverted jumped");
			free(cid);
			harvest(&r); /* a diverted message's dead letter */
			break;
		}
		case 3: {
			ci = pick_client(&in, &owned);
			const char *client = ci >= 0 ? clients[ci] : owned;
			id = pick_id(&r, &in, &id_len, &k);
			uint8_t flags = fuzz_input_byte(&in);
			if(flags & 12){
				struct dlq_settle st = {
					.kind = flags & 4 ? DLQ_SETTLE_ACK : DLQ_SETTLE_PROGRESS, .id = id, .id_len = id_len, .client = client,
				};
				struct dlq_nack_result res;
				uint64_t evicted = r.d.counters.evicted;
				dlq__settle(&r.d, &st, &res);
				TRACE("%s \"%.20s\" %.*s: %s\n", flags & 4 ? "ack" : "progress", client, (int)(id_len > 20 ? 20 : id_len),
						id, dlq__nack_status_text(res.status));
				FUZZ_CHECK(res.status != DLQ_NACK_RETRIED && res.status != DLQ_NACK_DEAD_LETTERED, "a settlement made a copy");
				if(res.status == DLQ_NACK_ACKED || res.status == DLQ_NACK_EXTENDED){
					FUZZ_CHECK(k != NULL || (id_len == DLQ_ID_LEN && fuzz_known_id(&r.d, id)),
							"a settlement of a forged id accepted");
				}
				if(res.status == DLQ_NACK_ACKED){
					struct dlq_id raw;
					FUZZ_CHECK(id__decode(id, id_len, &raw), "an ACK of a malformed id");
					const struct dlq_record *rec = ledger__find(&r.d.ledger, &raw);
					/* The ACK's settler entry (the client's id: up to 64 KiB)
					 * can take the ledger past max_pending_bytes: the oldest
					 * records, this one among them, are evicted. */
					FUZZ_CHECK(rec || r.d.counters.evicted > evicted, "an ACKed record gone without an eviction");
					FUZZ_CHECK(rec == NULL || deadlines__find(&r.d.deadlines, rec, client) == NULL,
							"an ACKed delivery awaits settlement");
				}
				FUZZ_CHECK(fake.publish_count == 0, "a settlement published");
				break;
			}
			struct dlq_nack n = {
				.id = id, .id_len = id_len, .reason = "fuzz", .client = client,
				.client_persists = flags & 1,
				.client_settles = true,
				.final = flags & 16,
				.delay_requested = flags & 2,
				.delay_ms = (flags & 2) ? (uint64_t)fuzz_input_byte(&in) * 1000u : 0,
			};
			struct dlq_nack_result res;
			dlq__nack(&r.d, &n, &res);
			TRACE("nack \"%.20s\" %.*s persists %d: %s\n", client, (int)(id_len > 20 ? 20 : id_len), id,
					n.client_persists, dlq__nack_status_text(res.status));
			if(res.status == DLQ_NACK_RETRIED || res.status == DLQ_NACK_DEAD_LETTERED){
				FUZZ_CHECK(k != NULL || (id_len == DLQ_ID_LEN && fuzz_known_id(&r.d, id)),
						"a NACK of a forged id accepted");
				r.accepted++;
			}
			harvest(&r);
			break;
		}
		case 4:
			TRACE("tick\n");
			dlq__tick(&r.d);
			harvest(&r);
			break;
		case 5: {
			ci = pick_client(&in, &owned);
			const char *client = ci >= 0 ? clients[ci] : owned;
			bool clean = fuzz_input_byte(&in) & 1;
			dlq__client_connected(&r.d, client, clean);
			dlq__client_active(&r.d, client, ++conn);
			TRACE("connect \"%.20s\" clean %d conn %lu\n", client, clean, (unsigned long)conn);
			break;
		}
		case 6:
			ci = pick_client(&in, &owned);
			TRACE("offline \"%.20s\"\n", ci >= 0 ? clients[ci] : owned);
			dlq__client_left(&r.d, ci >= 0 ? clients[ci] : owned, conn, false);
			dlq__client_offline(&r.d, ci >= 0 ? clients[ci] : owned);
			harvest(&r);
			break;
		case 7:
			ci = pick_client(&in, &owned);
			TRACE("gone \"%.20s\"\n", ci >= 0 ? clients[ci] : owned);
			dlq__client_left(&r.d, ci >= 0 ? clients[ci] : owned, conn, true);
			dlq__client_gone(&r.d, ci >= 0 ? clients[ci] : owned);
			harvest(&r);
			break;
		case 8: {
			ci = pick_client(&in, &owned);
			const char *filter = filters[fuzz_input_byte(&in) % ARRAY_LEN(filters)];
			uint8_t qos = fuzz_input_byte(&in) % 3;
			uint32_t sid = fuzz_input_byte(&in);
			dlq__subscribed(&r.d, ci >= 0 ? clients[ci] : owned, filter, qos, sid);
			TRACE("subscribe \"%.20s\" %s QoS %u id %u\n", ci >= 0 ? clients[ci] : owned, filter, qos, sid);
			break;
		}
		case 9: {
			uint8_t b = fuzz_input_byte(&in);
			fake.now_ms += (uint64_t)(b & 63) * 100u;
			fake.wall_ms += (int64_t)(b & 63) * 100;
			fake.fail_publishes = b >> 6;
			TRACE("clock +%ums, refuse %d\n", (b & 63) * 100u, b >> 6);
			break;
		}
		}
		free(owned);
		free(id);
		check_deadlines(&r.d);
	}

	harvest(&r);
	r.published += fuzz_flush(&r.d);
	FUZZ_CHECK(fuzz_owed_count(&r.d) == 0, "%zu envelopes still owed after a flush", fuzz_owed_count(&r.d));
	/* Each accepted NACK made one envelope, each diverted message and each
	 * delivery whose ack_timeout ran out one; a client that left may add
	 * dead letters of its copies. */
	const struct dlq_counters *t = engine__totals(&r.d);
	FUZZ_CHECK(r.published >= r.accepted + t->diverted + t->ack_timeouts,
			"%llu published, %llu NACKs, %llu diverted, %llu timed out", (unsigned long long)r.published,
			(unsigned long long)r.accepted, (unsigned long long)t->diverted, (unsigned long long)t->ack_timeouts);
	dlq__cleanup(&r.d);
	for(size_t i = 0; i < r.n; i++) forget_known(&r.ring[i]);
	fake_reset();
	return 0;
}
