/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The checks the state-file targets share (fuzz_state_common.h). A state file
 * is written by the plugin, but read back from disk: whatever decodes must
 * leave an engine that works as if it had made that state itself.
 */
#include <string.h>

#include "fake_port.h"
#include "fuzz_state_common.h"
#include "model/envelope.h"
#include "util/topic.h"

uint8_t *fuzz_state_begin(struct dlq *d, struct state_report *rep, const uint8_t *data, size_t size, size_t hdr)
{
	uint8_t *copy = malloc(size ? size : 1);
	if(copy == NULL) return NULL;
	memcpy(copy, data, size);
	fuzz_fix_crcs(copy, size, hdr);
	fuzz_engine_init(d);
	memset(rep, 0, sizeof(*rep));
	return copy;
}

static size_t ledger_length(const struct dlq *d)
{
	size_t n = 0;
	for(const struct dlq_record *r = d->ledger.oldest; r; r = r->newer){
		FUZZ_CHECK(r->newer != NULL || r == d->ledger.newest, "age list broken");
		FUZZ_CHECK(n < d->ledger.count, "age list longer than the count");
		n++;
	}
	return n;
}

/* An envelope with the largest sequence number (FUZZ_KNOWN_SEQ_WRAPS). */
static bool has_seq_max(const struct dlq *d)
{
	for(const struct dlq_envelope *e = d->outbox.owed.head; e; e = e->next){
		if(e->seq == UINT64_MAX) return true;
	}
	for(size_t i = 0; i < d->delayed.count; i++){
		if(d->delayed.heap[i]->seq == UINT64_MAX) return true;
	}
	return false;
}

/* A save and a restore at the same clocks give the same state. */
static void check_round_trip(struct dlq *d)
{
	struct dlq_headers buf = {0};
	struct dlq e;
	struct state_report rep;

	FUZZ_CHECK(state__encode_snapshot(engine__state_view(d), fake.now_ms, fake.wall_ms, &buf) == 0, "encode");
	uint64_t now = fake.now_ms;
	int64_t wall = fake.wall_ms;
	fuzz_engine_init(&e);
	memset(&rep, 0, sizeof(rep));
	FUZZ_CHECK(state_read__decode_snapshot(engine__state_view(&e), buf.data, buf.len, now, wall, &rep) == 0, "decode");
	FUZZ_CHECK(!rep.damaged, "a snapshot of a restored state is damaged: %s", rep.problem);
	FUZZ_CHECK(e.ledger.count == d->ledger.count, "round trip: %zu records, before %zu", e.ledger.count, d->ledger.count);
	FUZZ_CHECK(e.outbox.owed.count == d->outbox.owed.count && e.delayed.count == d->delayed.count,
			"round trip: %zu owed %zu delayed, before %zu owed %zu delayed", e.outbox.owed.count, e.delayed.count,
			d->outbox.owed.count, d->delayed.count);
	FUZZ_CHECK(e.next_seq == d->next_seq || (FUZZ_KNOWN_SEQ_WRAPS && has_seq_max(d)), "round trip: next_seq");
	FUZZ_CHECK(e.deadlines.count == d->deadlines.count && e.deadlines.running == d->deadlines.running,
			"round trip: %zu deliveries awaiting settlement (%zu running), before %zu (%zu)", e.deadlines.count,
			e.deadlines.running, d->deadlines.count, d->deadlines.running);
	/* Each policy's rate history: the same minutes, the same counts. */
	for(size_t i = 0; i < dlq__config(d)->policies.count; i++){
		struct dlq_history_minute a[DLQ_HISTORY_MINUTES], b[DLQ_HISTORY_MINUTES];
		size_t n = dlq__history(d, i, wall, a);
		FUZZ_CHECK(dlq__history(&e, i, wall, b) == n && (n == 0 || !memcmp(a, b, n * sizeof(a[0]))),
				"round trip: the rate history of policy %zu", i);
	}
	dlq__cleanup(&e);
	fuzz_port_clear();
	headers__free(&buf);
}

/* A header list the plugin could have written: every entry whole and of a
 * known kind. Anything else may swallow what the plugin appends to it. */
static bool headers_well_formed(const uint8_t *data, size_t len)
{
	size_t pos = 0;
	struct dlq_header h;
	while(headers__next(data, len, &pos, &h)){
		if(h.kind != DLQ_HDR_PAYLOAD_FORMAT && h.kind != DLQ_HDR_CONTENT_TYPE && h.kind != DLQ_HDR_RESPONSE_TOPIC
				&& h.kind != DLQ_HDR_CORRELATION_DATA && h.kind != DLQ_HDR_USER_PROPERTY){
			return false;
		}
	}
	return pos == len;
}

/* What the broker would refuse of e, or of the dead letter it may become. */
static bool envelope_refused(const struct dlq_envelope *e)
{
	if(!headers_well_formed(e->headers, e->headers_len)) return true;
	/* envelope__headers takes these strings as present (FUZZ_KNOWN_NULL_HEADER_FIELD). */
	if(e->origin_topic == NULL) return true;
	if(e->kind == DLQ_ENV_DEAD_LETTER && (e->reason == NULL || e->client == NULL || e->filter == NULL)) return true;
	struct dlq_headers h = {0};
	bool refused = envelope__headers(e, &h) != 0 || fuzz_port_would_refuse(e->topic, envelope__qos(e), h.data, h.len);
	headers__free(&h);
	if(!refused && e->kind == DLQ_ENV_RETRY_COPY){
		if(e->dead_letter == NULL) return true;
		struct dlq_envelope *dl = envelope__dead_letter_from_copy(e, "fuzz", DLQ_DEAD_SUBSCRIBER_GONE, "gone", 0);
		FUZZ_CHECK(dl != NULL, "out of memory");
		refused = envelope_refused(dl);
		envelope__free(dl);
	}
	return refused;
}

/* True if the decoder let through something the broker would refuse once it
 * is published (FUZZ_KNOWN_STATE_NOT_VALIDATED): a record whose retry copy
 * or dead letter could not be published, an envelope that cannot. */
static bool restored_invalid(const struct dlq *d)
{
	for(const struct dlq_record *r = d->ledger.oldest; r; r = r->newer){
		if(!headers_well_formed(record__headers(r), r->headers_len)
				|| fuzz_port_would_refuse(record__topic(r), r->qos, record__headers(r), r->headers_len)
				|| !topic__valid_publish(record__origin_topic(r))){
			return true;
		}
	}
	for(const struct dlq_envelope *e = d->outbox.owed.head; e; e = e->next){
		if(envelope_refused(e)) return true;
	}
	for(size_t i = 0; i < d->delayed.count; i++){
		if(envelope_refused(d->delayed.heap[i])) return true;
	}
	return false;
}

/* The deliveries awaiting settlement, as deadlines.h says they are: each
 * of a record in the ledger whose policy has an ack_timeout, by a client
 * that has not settled it, flagged; each queue in the order its clocks run
 * out; the gauge agreeing. */
static void check_deadlines(const struct dlq *d)
{
	const struct dlq_deadlines *ds = &d->deadlines;
	size_t n = 0, running = 0;
	for(size_t k = 0; k < chains__count(&ds->table); k++){
		for(const struct dlq_deadline *e = chains__chain(&ds->table, k); e; e = e->hnext){
			FUZZ_CHECK(ledger__find(&d->ledger, &e->record->id) == e->record, "a deadline's record is not in the ledger");
			FUZZ_CHECK(e->record->policy->ack_timeout_ms > 0, "a deadline of a policy without ack_timeout");
			FUZZ_CHECK(deadlines__of(e->record), "a record with a deadline is not flagged");
			FUZZ_CHECK(!ledger__has_settler(e->record, e->client->id), "a settled delivery awaits settlement");
			n++;
			running += e->queue != NULL;
		}
	}
	FUZZ_CHECK(n == ds->count && running == ds->running, "deadlines: %zu counted of %zu, %zu running of %zu", n,
			ds->count, running, ds->running);
	for(size_t i = 0; i < ds->queue_count; i++){
		for(const struct dlq_deadline *e = ds->queues[i].head; e && e->qnext; e = e->qnext){
			FUZZ_CHECK(e->due_ms <= e->qnext->due_ms, "a queue of clocks is out of order");
		}
	}
	FUZZ_CHECK(d->gauges.total.awaiting == ds->count, "awaiting gauge %llu, deliveries %zu",
			(unsigned long long)d->gauges.total.awaiting, ds->count);
}

void fuzz_state_exercise(struct dlq *d, const struct state_report *rep, size_t envelopes_before)
{
	/* As dlq__init does after a restore. */
	deadlines__restored(&d->deadlines);
	check_deadlines(d);
	FUZZ_CHECK(ledger_length(d) == d->ledger.count, "ledger count");
	FUZZ_CHECK(rep->records <= d->ledger.count, "report: %zu records, ledger %zu", rep->records, d->ledger.count);
	FUZZ_CHECK(fuzz_owed_count(d) <= envelopes_before + rep->envelopes, "more envelopes than restored");
	FUZZ_CHECK(d->outbox.sent.count == 0 && d->outbox.settling.count == 0, "a restore put envelopes in sent");
	bool seq_max = has_seq_max(d);
	for(const struct dlq_envelope *e = d->outbox.owed.head; e && !(FUZZ_KNOWN_SEQ_WRAPS && seq_max); e = e->next){
		FUZZ_CHECK(e->seq < d->next_seq, "envelope seq %llu >= next_seq %llu", (unsigned long long)e->seq,
				(unsigned long long)d->next_seq);
	}
	for(size_t i = 0; i < d->delayed.count && !(FUZZ_KNOWN_SEQ_WRAPS && seq_max); i++){
		FUZZ_CHECK(d->delayed.heap[i]->seq < d->next_seq, "delayed envelope seq %llu >= next_seq %llu",
				(unsigned long long)d->delayed.heap[i]->seq, (unsigned long long)d->next_seq);
	}
	check_round_trip(d);
	if((FUZZ_KNOWN_STATE_NOT_VALIDATED || FUZZ_KNOWN_NULL_HEADER_FIELD) && restored_invalid(d)){
		fuzz_engine_fini(d);
		return;
	}

	/* NACK every restored record, as a client would after the restart. */
	size_t restored = fuzz_owed_count(d);
	char ids[32][DLQ_ID_LEN + 1];
	size_t n = 0;
	for(const struct dlq_record *r = d->ledger.oldest; r && n < 32; r = r->newer){
		id__encode(&r->id, ids[n++]);
	}
	uint64_t accepted = 0;
	for(size_t i = 0; i < n; i++){
		struct dlq_nack nack = {
			.id = ids[i],
			.id_len = DLQ_ID_LEN,
			.reason = "fuzz",
			.client = "fuzz-client",
		};
		struct dlq_nack_result res;
		dlq__nack(d, &nack, &res);
		FUZZ_CHECK(res.status != DLQ_NACK_MALFORMED_ID && res.status != DLQ_NACK_NOMEM
				&& res.status != DLQ_NACK_RANDOM_FAILED, "NACK of a restored record: %s", dlq__nack_status_text(res.status));
		if(res.status == DLQ_NACK_RETRIED || res.status == DLQ_NACK_DEAD_LETTERED) accepted++;
	}
	size_t published = fake.publish_count;
	fuzz_port_clear();

	/* The clients the restored copies are for leave without a session. */
	const char *targets[8];
	size_t nt = 0;
	for(const struct dlq_envelope *e = d->outbox.owed.head; e && nt < 8; e = e->next){
		if(e->target_client) targets[nt++] = e->target_client;
	}
	char *copies[8];
	for(size_t i = 0; i < nt; i++){
		copies[i] = strdup(targets[i]); /* the envelope goes away */
	}
	for(size_t i = 0; i < nt; i++){
		if(copies[i]) dlq__client_gone(d, copies[i]);
		free(copies[i]);
	}
	published += fake.publish_count;
	fuzz_port_clear();

	size_t flushed = fuzz_flush(d);
	published += flushed;
	FUZZ_CHECK(fuzz_owed_count(d) == 0, "%zu envelopes still owed after flushing", fuzz_owed_count(d));
	/* Every restored envelope and every accepted NACK's envelope went out
	 * (a client leaving may add a dead letter for a copy already sent). */
	FUZZ_CHECK(published >= restored + accepted, "%zu restored envelopes and %llu accepted NACKs, but %zu published",
			restored, (unsigned long long)accepted, published);
	fuzz_engine_fini(d);
}
