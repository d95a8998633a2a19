/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The engine, state and matching helpers the fuzz targets share (fuzz.h).
 * Everything runs on the fake broker port of the unit tests, so a target sees
 * every publish and can check that nothing the engine took on went missing.
 */
#include <errno.h>
#include <string.h>

#include "fake_port.h"
#include "fuzz.h"
#include "model/deliveries.h"
#include "model/envelope.h"
#include "policy_reference.h"
#include "store/state.h"
#include "test_util.h"
#include "util/topic.h"

const struct dlq_option fuzz_standard_options[] = {
	{"policy", "orders/+ max_attempts=3 dead_letter=dead/orders"},
	{"policy", "once max_attempts=1 dead_letter=dead/once"},
	{"policy", "slow/# max_attempts=4 dead_letter=dead/slow retry_delay=2s retry_backoff=2 retry_jitter=0.5 retry_max_delay=10s"},
	{"policy", "fanout max_attempts=2 dead_letter=dead/fanout retry_to=retry/fanout ack_timeout=1s"},
	{"policy", "+/alerts/# max_attempts=2 dead_letter=dead-alerts retry_delay=0s"},
	{"nack_window", "60s"},
	{"max_pending_bytes", "64KiB"},
	/* A small dead-letter store, so that its bound is reached. */
	{"dead_letter_keep", "4KiB"},
	/* No $SYS topics, so that every publish the fake port records is an
	 * envelope (a record's topic may itself start with "$SYS/"). */
	{"sys_interval", "0s"},
};
const size_t fuzz_standard_count = ARRAY_LEN(fuzz_standard_options);

void fuzz_port_clear(void)
{
	uint64_t now = fake.now_ms;
	int64_t wall = fake.wall_ms;
	uint64_t state = fake.random_state;
	uint64_t word = fake.random_word;
	unsigned used = fake.random_used;

	fake_reset();
	fake.now_ms = now;
	fake.wall_ms = wall;
	fake.random_state = state;
	fake.random_word = word;
	fake.random_used = used;
	fake.record_sys = true;
}

void fuzz_engine_start(struct dlq *d, const struct dlq_option *opts, size_t count, unsigned flags)
{
	char err[1100];
	int rc = engine_try_start(d, NULL, opts, count, flags, err, sizeof(err));
	FUZZ_CHECK(rc == 0, "%s", err);
}

void fuzz_engine_init(struct dlq *d)
{
	fake_reset();
	fake.record_sys = true;
	fuzz_engine_start(d, fuzz_standard_options, fuzz_standard_count, 0);
}

void fuzz_engine_fini(struct dlq *d)
{
	dlq__cleanup(d);
	fake_reset();
}

size_t fuzz_owed_count(const struct dlq *d)
{
	return d->outbox.owed.count + d->delayed.count;
}

static void track(struct dlq *d, const char *topic, const char *payload, char id[DLQ_ID_LEN + 1])
{
	const struct dlq_policy *p = dlq__policy_for(d, topic);
	FUZZ_CHECK(p != NULL, "no policy for %s", topic);
	struct dlq_headers h = {0};
	FUZZ_CHECK(headers__add_user(&h, "k", "v") == 0, "headers");
	FUZZ_CHECK(headers__add(&h, DLQ_HDR_CONTENT_TYPE, "text/plain", 10, NULL, 0) == 0, "headers");
	int rc = dlq__track(d, p, topic, payload, (uint32_t)strlen(payload), 1, h.data, h.len, id);
	headers__free(&h);
	FUZZ_CHECK(rc == 0, "dlq__track %s: %d", topic, rc);
}

static struct dlq_record *find(struct dlq *d, const char *id)
{
	struct dlq_id raw;
	FUZZ_CHECK(id__decode(id, DLQ_ID_LEN, &raw), "id");
	struct dlq_record *r = ledger__find(&d->ledger, &raw);
	FUZZ_CHECK(r != NULL, "no record %s", id);
	return r;
}

static void nack(struct dlq *d, const char *id, const char *client, long delay_ms)
{
	struct dlq_nack n = {
		.id = id,
		.id_len = strlen(id),
		.reason = "seed",
		.client = client,
		.delay_requested = delay_ms >= 0,
		.delay_ms = delay_ms >= 0 ? (uint64_t)delay_ms : 0,
	};
	struct dlq_nack_result res;
	dlq__nack(d, &n, &res);
	FUZZ_CHECK(res.status == DLQ_NACK_RETRIED || res.status == DLQ_NACK_DEAD_LETTERED, "nack: %s",
			dlq__nack_status_text(res.status));
}

/* Builds the engine both state seeds describe; the snapshot is taken in the
 * middle, the journal records what happened after it. */
static void make_state(struct dlq_headers *snap, struct dlq_headers *journal)
{
	struct dlq d;
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1], c[DLQ_ID_LEN + 1], s[DLQ_ID_LEN + 1], f[DLQ_ID_LEN + 1];
	char e[DLQ_ID_LEN + 1], x[DLQ_ID_LEN + 1];

	fuzz_engine_init(&d);
	track(&d, "orders/1", "one", a);
	track(&d, "orders/2", "two", b);
	track(&d, "once", "three", c);
	track(&d, "slow/x/y", "four", s);
	track(&d, "fanout", "five", f);
	track(&d, "eu/alerts/fire", "six", e);
	track(&d, "orders/3", "seven", x);
	nack(&d, a, "c1", -1);          /* a retry copy, sent */
	fake.fail_publishes = 2;
	nack(&d, b, "c2", -1);          /* a retry copy the broker refused: owed */
	nack(&d, c, "c1", -1);          /* a dead letter, owed */
	nack(&d, s, "c3", -1);          /* delayed by the policy */
	nack(&d, x, "c1", 5000);        /* delayed on request */
	nack(&d, f, "c4", -1);          /* retry_to: an ordinary publish */
	/* Deliveries awaiting settlement (the fanout policy has an
	 * ack_timeout): one running, one waiting behind it, another client's. */
	char w1[DLQ_ID_LEN + 1], w2[DLQ_ID_LEN + 1];
	track(&d, "fanout", "awaited", w1);
	track(&d, "fanout", "waiting", w2);
	struct dlq_deadline *made;
	FUZZ_CHECK(deadlines__routed(&d.deadlines, find(&d, w1), "c1", true, fake.now_ms, &made) == 0, "deadline");
	FUZZ_CHECK(deadlines__routed(&d.deadlines, find(&d, w2), "c1", true, fake.now_ms, &made) == 0, "deadline");
	FUZZ_CHECK(deadlines__routed(&d.deadlines, find(&d, w2), "c9", true, fake.now_ms, &made) == 0, "deadline");
	FUZZ_CHECK(d.deadlines.count == 3 && d.deadlines.running == 2, "deadlines");
	/* Settled: an ACK, and a NACK's after a record's clock ran out. */
	FUZZ_CHECK(ledger__add_settler(&d.ledger, find(&d, w1), "c5", DLQ_SETTLED_ACK) == 0, "settler");
	FUZZ_CHECK(ledger__add_settler(&d.ledger, find(&d, w1), "c6", DLQ_SETTLED_TIMEOUT) == 0, "settler");
	char k[DLQ_ID_LEN + 1];
	track(&d, "once", "kept", k);
	nack(&d, k, "c6", -1);          /* a dead letter the broker took: kept in the store */
	dlq__tick(&d);
	/* Kept: that one, and the owed one the tick published. */
	FUZZ_CHECK(d.letters.count == 2, "%zu kept dead letters, expected 2", d.letters.count);
	FUZZ_CHECK(state__encode_snapshot(engine__state_view(&d), fake.now_ms, fake.wall_ms, snap) == 0, "encode");

	if(journal){
		uint64_t removed = d.outbox.owed.head ? d.outbox.owed.head->seq : 1;
		FUZZ_CHECK(state__encode_journal_header(journal) == 0, "journal header");
		fake.fail_publishes = 1;
		nack(&d, e, "c5", -1);  /* owed: journaled as an add */
		const struct dlq_envelope *added = d.outbox.owed.tail;
		FUZZ_CHECK(added != NULL, "no owed envelope");
		FUZZ_CHECK(state__encode_add(added, fake.now_ms, fake.wall_ms, journal) == 0, "add");
		FUZZ_CHECK(state__encode_remove(removed, journal) == 0, "remove");
		FUZZ_CHECK(state__encode_remove(999, journal) == 0, "remove");
		/* A letter kept after the snapshot, then the older one taken. */
		char g[DLQ_ID_LEN + 1];
		track(&d, "once", "kept later", g);
		nack(&d, g, "c7", -1);
		FUZZ_CHECK(d.letters.count == 3, "no third kept dead letter");
		FUZZ_CHECK(state__encode_letter(d.letters.newest, fake.now_ms, fake.wall_ms, journal) == 0, "letter");
		FUZZ_CHECK(state__encode_letter_gone(&d.letters.oldest->env->id, journal) == 0, "letter gone");
		/* A copy held for a client that NACKed it since (the hold is
		 * over), and one for a record that is not there. */
		struct dlq_id id;
		FUZZ_CHECK(id__decode(b, DLQ_ID_LEN, &id), "id");
		const struct dlq_record *rb = ledger__find(&d.ledger, &id);
		FUZZ_CHECK(rb != NULL, "no record");
		FUZZ_CHECK(state__encode_hold(rb, "c2", journal) == 0, "hold");
		FUZZ_CHECK(state__encode_settler(rb, "c2", DLQ_SETTLED_NACK, journal) == 0, "nacker");
		FUZZ_CHECK(state__encode_hold(rb, "c8", journal) == 0, "hold");
		/* A deadline started again (progress), one settled by an ACK,
		 * and one that ran out. */
		FUZZ_CHECK(state__encode_deadline(d.deadlines.queues[0].head, fake.now_ms + 500, fake.wall_ms + 500, journal) == 0,
				"deadline");
		FUZZ_CHECK(state__encode_settler(find(&d, w2), "c1", DLQ_SETTLED_ACK, journal) == 0, "settler");
		FUZZ_CHECK(state__encode_settler(find(&d, w2), "c9", DLQ_SETTLED_TIMEOUT_DEAD, journal) == 0, "settler");
		/* Delivery counts: for the retry copies (which keep them), set
		 * twice (the later wins), and for an original made without
		 * tracking (which keeps none). */
		for(const struct dlq_record *r = d.ledger.oldest; r; r = r->newer){
			struct dlq_delivery_saved ds = { .client = "c1", .redeliveries = 1, .sends = 2, .held_connected = true };
			FUZZ_CHECK(state__encode_delivery(r, &ds, journal) == 0, "delivery");
			ds.sends = 3;
			ds.diverted = true;
			FUZZ_CHECK(state__encode_delivery(r, &ds, journal) == 0, "delivery");
		}
	}
	fuzz_engine_fini(&d);
}

void fuzz_make_snapshot(struct dlq_headers *out)
{
	make_state(out, NULL);
}

void fuzz_make_journal(struct dlq_headers *out)
{
	struct dlq_headers snap = {0};
	make_state(&snap, out);
	headers__free(&snap);
}

void fuzz_fix_crcs(uint8_t *data, size_t len, size_t hdr)
{
	size_t pos = hdr;
	while(pos < len && len - pos >= 9){
		uint32_t blen = ((uint32_t)data[pos + 1] << 24) | ((uint32_t)data[pos + 2] << 16)
				| ((uint32_t)data[pos + 3] << 8) | data[pos + 4];
		if(len - pos - 9 < blen) return;
		uint32_t crc = state__crc32(data + pos, 5 + (size_t)blen);
		uint8_t *c = data + pos + 5 + blen;
		c[0] = (uint8_t)(crc >> 24);
		c[1] = (uint8_t)(crc >> 16);
		c[2] = (uint8_t)(crc >> 8);
		c[3] = (uint8_t)crc;
		pos += 9 + (size_t)blen;
	}
}

size_t fuzz_flush(struct dlq *d)
{
	size_t published = 0;
	/* Two ticks take what was sent; a few more cover what the fake port
	 * refused for want of room (it records FAKE_MAX_PUBLISHES). */
	for(int round = 0; round < 64; round++){
		uint64_t latest = fake.now_ms;
		for(size_t i = 0; i < d->delayed.count; i++){
			if(d->delayed.heap[i]->due_ms > latest) latest = d->delayed.heap[i]->due_ms;
		}
		fake.now_ms = latest;
		fake.fail_publishes = 0;
		dlq__tick(d);
		published += fake.publish_count;
		fuzz_port_clear();
		if(fuzz_owed_count(d) == 0 && round >= 1) break;
	}
	return published;
}

static void check_topic(const struct dlq_policy_table *t, const char *topic)
{
	const struct dlq_policy *want = policy_reference__match(t, topic);
	const struct dlq_policy *got = policy__match(t, topic);
	FUZZ_CHECK(got == want, "topic \"%s\": policy__match gave \"%s\", a plain walk \"%s\"", topic,
			got ? got->filter : "(none)", want ? want->filter : "(none)");
}

/* Topics a filter matches: wildcards filled in with a level (or two), and
 * "a/#" also as "a". */
static void check_filter_topics(const struct dlq_policy_table *t, const char *filter)
{
	size_t len = strlen(filter);
	char *buf = malloc(len * 4 + 8);
	if(buf == NULL) return;
	for(int variant = 0; variant < 3; variant++){
		size_t o = 0;
		for(size_t i = 0; i < len; i++){
			if(filter[i] == '+'){
				buf[o++] = variant == 2 ? '$' : 'x';
			}else if(filter[i] == '#'){
				if(variant == 1 && o > 0){
					o--; /* "a/#" as "a" */
				}else{
					memcpy(buf + o, "x/y", 3);
					o += 3;
				}
			}else{
				buf[o++] = filter[i];
			}
		}
		buf[o] = '\0';
		if(o > 0) check_topic(t, buf);
	}
	free(buf);
}

void fuzz_check_matching(const struct dlq_policy_table *t)
{
	for(size_t i = 0; i < t->count && i < 64; i++){
		check_filter_topics(t, t->items[i].filter);
		check_topic(t, t->items[i].dead_letter);
		if(t->items[i].retry_to) check_topic(t, t->items[i].retry_to);
	}
	check_topic(t, "x");
	check_topic(t, "$SYS/x");
}

void fuzz_check_finish(struct dlq_policy_table *t)
{
	char err[1024];

	err[0] = '\0';
	int rc = policy__table_finish(t, err, sizeof(err));
	if(rc == 0){
		fuzz_check_matching(t);
	}else{
		FUZZ_CHECK(rc == EINVAL && err[0], "table_finish rc %d", rc);
	}
}
