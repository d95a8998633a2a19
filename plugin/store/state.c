/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Writing the state file format (state_format.h): the CRC, the encoders of
 * entries, snapshots and journal entries. Reading is state_read.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/deadlines.h"
#include "model/deliveries.h"
#include "model/history.h"
#include "model/holds.h"
#include "model/ledger.h"
#include "model/letters.h"
#include "model/outbox.h"
#include "model/redrive_task.h"
#include "model/schedule.h"
#include "model/envelope.h"
#include "store/state.h"
#include "store/state_format.h"

/* The IEEE CRC-32 (reflected, 0xEDB88320) eight bytes at a time: table k
 * gives a byte's contribution k bytes before the end of an 8-byte block,
 * so a block costs eight lookups where the byte-wise loop costs eight
 * dependent steps. A save and a start of 1,000,000 records spent most of
 * their time here byte by byte. */
static uint32_t crc_table[8][256];
static bool crc_ready = false;

static void crc_init(void)
{
	for(uint32_t i = 0; i < 256; i++){
		uint32_t c = i;
		for(int k = 0; k < 8; k++){
			c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
		}
		crc_table[0][i] = c;
	}
	for(int k = 1; k < 8; k++){
		for(int i = 0; i < 256; i++){
			uint32_t c = crc_table[k - 1][i];
			crc_table[k][i] = (c >> 8) ^ crc_table[0][c & 0xFF];
		}
	}
	crc_ready = true;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

uint32_t state__crc32(const uint8_t *data, size_t len)
{
	if(!crc_ready) crc_init();
	uint32_t crc = 0xFFFFFFFFu;
	while(len >= 8){
		uint32_t a = crc ^ le32(data), b = le32(data + 4);
		crc = crc_table[7][a & 0xFF] ^ crc_table[6][(a >> 8) & 0xFF] ^ crc_table[5][(a >> 16) & 0xFF]
				^ crc_table[4][a >> 24] ^ crc_table[3][b & 0xFF] ^ crc_table[2][(b >> 8) & 0xFF]
				^ crc_table[1][(b >> 16) & 0xFF] ^ crc_table[0][b >> 24];
		data += 8;
		len -= 8;
	}
	while(len--){
		crc = crc_table[0][(crc ^ *data++) & 0xFF] ^ (crc >> 8);
	}
	return crc ^ 0xFFFFFFFFu;
}

/* ---- writing ---------------------------------------------------------- */

static int put_raw(struct dlq_headers *b, const void *p, size_t n)
{
	return headers__append_raw(b, p, n);
}

static int put_u(struct dlq_headers *b, uint64_t v, int bytes)
{
	uint8_t tmp[8];
	for(int i = 0; i < bytes; i++){
		tmp[i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
	}
	return put_raw(b, tmp, (size_t)bytes);
}

static int put_str(struct dlq_headers *b, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if(n > UINT16_MAX) return EINVAL;
	return put_u(b, n, 2) || put_raw(b, s, n) ? ENOMEM : 0;
}

static int put_bytes(struct dlq_headers *b, const void *p, uint32_t n)
{
	return put_u(b, n, 4) || put_raw(b, p, n) ? ENOMEM : 0;
}

/* Starts an entry; returns the offset of its type byte. */
static size_t entry_begin(struct dlq_headers *b, enum entry_type type, int *rc)
{
	size_t at = b->len;
	*rc = put_u(b, type, 1) || put_u(b, 0, 4) ? ENOMEM : 0;
	return at;
}

/* Fills in the length and appends the CRC. */
static int entry_end(struct dlq_headers *b, size_t at, int rc)
{
	if(rc) return rc;
	uint32_t len = (uint32_t)(b->len - at - 5);
	for(int i = 0; i < 4; i++){
		b->data[at + 1 + i] = (uint8_t)(len >> (8 * (3 - i)));
	}
	return put_u(b, state__crc32(b->data + at, b->len - at), 4) ? ENOMEM : 0;
}

static int64_t to_wall(uint64_t mono, uint64_t mono_now, int64_t wall_now)
{
	return wall_now - (int64_t)(mono_now - mono);
}

int state__encode_record(const struct dlq_record *r, uint64_t mono_now, int64_t wall_now, struct dlq_headers *b)
{
	int rc;
	size_t at = entry_begin(b, ENTRY_RECORD, &rc);
	if(rc == 0){
		rc = put_raw(b, r->id.raw, DLQ_ID_RAW_LEN) || put_raw(b, record__origin_id(r)->raw, DLQ_ID_RAW_LEN)
				|| put_u(b, (uint64_t)to_wall(r->created_ms, mono_now, wall_now), 8)
				|| put_u(b, (uint64_t)record__first_nack_ms(r), 8)
				|| put_u(b, record__attempt(r), 2) || put_u(b, r->qos, 1)
				|| put_str(b, r->policy->filter) || put_str(b, record__topic(r))
				|| put_str(b, record__origin_topic_len(r) ? record__origin_topic(r) : "")
				|| put_bytes(b, record__payload(r), r->payload_len)
				|| put_bytes(b, record__headers(r), r->headers_len) ? ENOMEM : 0;
	}
	uint16_t n = 0;
	for(const struct dlq_settler *k = r->settlers; k; k = k->next) n++;
	if(rc == 0) rc = put_u(b, n, 2);
	for(const struct dlq_settler *k = r->settlers; rc == 0 && k; k = k->next){
		rc = put_str(b, k->client);
	}
	/* How each settled, in the same order, after the ids: a file written
	 * before ACKs and deadlines has none, and all were NACKs. */
	for(const struct dlq_settler *k = r->settlers; rc == 0 && k; k = k->next){
		rc = put_u(b, k->how, 1);
	}
	return entry_end(b, at, rc);
}

/* An envelope entry of type: an envelope the broker has not taken, or a
 * kept dead letter; the same body for both, so that one reader checks both
 * (state_read.c). */
static int encode_envelope(enum entry_type type, const struct dlq_envelope *e, uint64_t mono_now, int64_t wall_now,
		struct dlq_headers *b)
{
	int rc;
	size_t at = entry_begin(b, type, &rc);
	/* A delayed copy is saved with its due time; anything else is due now. */
	int64_t due = e->due_ms ? to_wall(e->due_ms, mono_now, wall_now) : 0;
	uint8_t flags = (uint8_t)((e->target_persists ? 1 : 0) | (e->recorded ? 2 : 0) | (e->target_settles ? 4 : 0)
			| (e->final ? 8 : 0));
	if(rc == 0){
		rc = put_u(b, e->kind, 1) || put_u(b, e->seq, 8)
				|| put_raw(b, e->id.raw, DLQ_ID_RAW_LEN) || put_raw(b, e->origin_id.raw, DLQ_ID_RAW_LEN)
				|| put_u(b, (uint64_t)e->time_ms, 8) || put_u(b, (uint64_t)e->first_nack_ms, 8)
				|| put_u(b, (uint64_t)due, 8) || put_u(b, e->delay_ms, 8)
				|| put_u(b, e->retry_count, 2) || put_u(b, e->qos, 1) || put_u(b, flags, 1)
				|| put_str(b, e->target_client) || put_str(b, e->topic) || put_str(b, e->origin_topic)
				|| put_str(b, e->filter) || put_str(b, e->dead_letter) || put_str(b, e->reason)
				|| put_str(b, e->client)
				|| put_bytes(b, e->payload, e->payload_len) || put_bytes(b, e->headers, e->headers_len)
				|| put_u(b, e->kind == DLQ_ENV_DEAD_LETTER ? e->cause : 0, 1)
				|| put_str(b, e->kind == DLQ_ENV_DEAD_LETTER ? e->broker : NULL) ? ENOMEM : 0;
	}
	return entry_end(b, at, rc);
}

int state__encode_add(const struct dlq_envelope *e, uint64_t mono_now, int64_t wall_now, struct dlq_headers *b)
{
	return encode_envelope(ENTRY_ENVELOPE, e, mono_now, wall_now, b);
}

int state__encode_letter(const struct dlq_letter *l, uint64_t mono_now, int64_t wall_now, struct dlq_headers *b)
{
	return encode_envelope(ENTRY_LETTER, l->env, mono_now, wall_now, b);
}

int state__encode_history(const struct dlq_history *h, const char *filter, int64_t wall_now, struct dlq_headers *b)
{
	struct dlq_history_minute m[DLQ_HISTORY_MINUTES];
	size_t n = history__minutes(h, wall_now, m);
	if(n == 0) return 0;
	int rc;
	size_t at = entry_begin(b, ENTRY_HISTORY, &rc);
	if(rc == 0) rc = put_str(b, filter) || put_u(b, DLQ_DEAD_CAUSES, 1) || put_u(b, n, 1) ? ENOMEM : 0;
	for(size_t i = 0; rc == 0 && i < n; i++){
		rc = put_u(b, (uint64_t)m[i].minute, 8) || put_u(b, m[i].nacks, 4) || put_u(b, m[i].ack_timeouts, 4)
				|| put_u(b, m[i].redrives, 4) ? ENOMEM : 0;
		for(size_t c = 0; rc == 0 && c < DLQ_DEAD_CAUSES; c++){
			rc = put_u(b, m[i].dead_letters[c], 4);
		}
	}
	return entry_end(b, at, rc);
}

int state__encode_letter_gone(const struct dlq_id *id, struct dlq_headers *b)
{
	int rc;
	size_t at = entry_begin(b, ENTRY_LETTER_GONE, &rc);
	if(rc == 0) rc = put_raw(b, id->raw, DLQ_ID_RAW_LEN);
	return entry_end(b, at, rc);
}

int state__encode_task(const struct dlq_redrive_task *t, struct dlq_headers *b)
{
	int rc;
	size_t at = entry_begin(b, ENTRY_TASK, &rc);
	const struct dlq_letter_match *m = &t->match;
	uint8_t given = (uint8_t)((m->cause_given ? 1 : 0) | (m->since_given ? 2 : 0) | (m->until_given ? 4 : 0));
	if(rc == 0){
		rc = put_u(b, t->id, 8) || put_u(b, t->state, 1) || put_u(b, t->rate, 4)
				|| put_u(b, (uint64_t)t->started_ms, 8) || put_u(b, (uint64_t)t->ended_ms, 8)
				|| put_u(b, t->moved, 8) || put_u(b, t->failed, 8) || put_u(b, t->left, 8)
				|| put_u(b, given, 1) || put_u(b, m->cause_given ? m->cause : 0, 1)
				|| put_u(b, (uint64_t)m->since, 8) || put_u(b, (uint64_t)m->until, 8)
				|| put_str(b, m->filter) || put_str(b, m->dead_letter) || put_str(b, m->reason)
				|| put_str(b, t->to) || put_str(b, t->client) || put_str(b, m->broker) ? ENOMEM : 0;
	}
	/* Where it is: the letters before its place were tried (those still
	 * kept failed), and are not tried again after a restart. Only a task
	 * that walked has one: the others' entries are as plugins older than
	 * places wrote and read them. */
	uint8_t place = TASK_PLACE_OLDEST;
	if(t->state == DLQ_TASK_RUNNING && t->tracked) place = t->cursor.at ? TASK_PLACE_AT : TASK_PLACE_END;
	if(rc == 0 && place != TASK_PLACE_OLDEST){
		rc = put_u(b, place, 1)
				|| (place == TASK_PLACE_AT && put_raw(b, t->cursor.at->env->id.raw, DLQ_ID_RAW_LEN)) ? ENOMEM : 0;
	}
	return entry_end(b, at, rc);
}

/* The tasks of v, oldest first (the list is newest first: restored in
 * this order, it is again). Returns how many, or -1 when out of memory. */
static int64_t encode_tasks(const struct state_view *v, struct dlq_headers *out)
{
	if(v->tasks == NULL) return 0;
	int64_t n = 0;
	for(size_t k = v->tasks->count; k-- > 0;){
		const struct dlq_redrive_task *t = v->tasks->head;
		for(size_t i = 0; t && i < k; i++) t = t->next;
		if(t == NULL) continue;
		if(state__encode_task(t, out)) return -1;
		n++;
	}
	return n;
}

int state__encode_remove(uint64_t seq, struct dlq_headers *b)
{
	int rc;
	size_t at = entry_begin(b, ENTRY_REMOVE, &rc);
	if(rc == 0) rc = put_u(b, seq, 8);
	return entry_end(b, at, rc);
}

int state__encode_settler(const struct dlq_record *r, const char *client, uint8_t how, struct dlq_headers *b)
{
	int rc;
	size_t at = entry_begin(b, ENTRY_SETTLER, &rc);
	if(rc == 0) rc = put_raw(b, r->id.raw, DLQ_ID_RAW_LEN) || put_str(b, client) || put_u(b, how, 1) ? ENOMEM : 0;
	return entry_end(b, at, rc);
}

int state__encode_hold(const struct dlq_record *r, const char *client, struct dlq_headers *b)
{
	int rc;
	size_t at = entry_begin(b, ENTRY_HOLD, &rc);
	if(rc == 0) rc = put_raw(b, r->id.raw, DLQ_ID_RAW_LEN) || put_str(b, client) ? ENOMEM : 0;
	return entry_end(b, at, rc);
}

int state__encode_delivery(const struct dlq_record *r, const struct dlq_delivery_saved *s, struct dlq_headers *b)
{
	int rc;
	size_t at = entry_begin(b, ENTRY_DELIVERY, &rc);
	uint8_t flags = (uint8_t)((s->held_connected ? 1 : 0) | (s->diverted ? 2 : 0));
	if(rc == 0){
		rc = put_raw(b, r->id.raw, DLQ_ID_RAW_LEN) || put_str(b, s->client)
				|| put_u(b, s->redeliveries, 2) || put_u(b, s->sends, 2) || put_u(b, flags, 1) ? ENOMEM : 0;
	}
	return entry_end(b, at, rc);
}

int state__encode_deadline(const struct dlq_deadline *e, uint64_t mono_now, int64_t wall_now, struct dlq_headers *b)
{
	int rc;
	size_t at = entry_begin(b, ENTRY_DEADLINE, &rc);
	int64_t due = e->queue ? to_wall(e->due_ms, mono_now, wall_now) : 0;
	if(rc == 0){
		rc = put_raw(b, e->record->id.raw, DLQ_ID_RAW_LEN) || put_str(b, e->client->id)
				|| put_u(b, (uint64_t)due, 8) ? ENOMEM : 0;
	}
	return entry_end(b, at, rc);
}

/* Every delivery awaiting settlement, each client's in their order.
 * Returns how many, or -1 when out of memory. */
int state__encode_journal_header(struct dlq_headers *out)
{
	return put_raw(out, JOURNAL_MAGIC, MAGIC_LEN);
}

static int encode_generation(uint64_t generation, struct dlq_headers *out)
{
	int rc;
	size_t at = entry_begin(out, ENTRY_GENERATION, &rc);
	if(rc == 0) rc = put_u(out, generation, 8);
	return entry_end(out, at, rc);
}

int state__encode_journal_start(uint64_t generation, struct dlq_headers *out)
{
	if(state__encode_journal_header(out)) return ENOMEM;
	return encode_generation(generation, out);
}

/* Where a snapshot's bytes go as it is encoded: kept in out, or, with
 * flush, handed on whenever out holds chunk bytes or more (whole entries
 * only) and out emptied. */
struct spill {
	struct dlq_headers *out;
	size_t chunk;
	state_flush_fn *flush; /* NULL: everything stays in out */
	void *ctx;
};

/* 0, or the flush's error. */
static int spill_maybe(const struct spill *sp)
{
	if(sp->flush == NULL || sp->out->len < sp->chunk) return 0;
	int rc = sp->flush(sp->ctx, sp->out->data, sp->out->len);
	sp->out->len = 0;
	return rc;
}

static int64_t encode_deadlines_spilled(const struct dlq_deadlines *ds, uint64_t mono_now, int64_t wall_now,
		const struct spill *sp, int *err)
{
	int64_t n = 0;
	for(size_t i = 0; ds && i < chains__count(&ds->clients); i++){
		for(const struct dlq_deadline_client *c = chains__chain(&ds->clients, i); c; c = c->hnext){
			for(const struct dlq_deadline *e = c->head; e; e = e->cnext){
				if(state__encode_deadline(e, mono_now, wall_now, sp->out)){
					*err = ENOMEM;
					return -1;
				}
				if((*err = spill_maybe(sp))) return -1;
				n++;
			}
		}
	}
	return n;
}

static int encode_list(const struct dlq_envelope_list *l, uint64_t mono_now, int64_t wall_now, const struct spill *sp)
{
	for(const struct dlq_envelope *e = l->head; e; e = e->next){
		if(state__encode_add(e, mono_now, wall_now, sp->out)) return ENOMEM;
		int rc = spill_maybe(sp);
		if(rc) return rc;
	}
	return 0;
}

/* A snapshot's delivery entries, counted for its end. */
struct delivery_sink {
	struct dlq_headers *out;
	uint64_t written;
};

static int encode_saved(void *ctx, const struct dlq_record *r, const struct dlq_delivery_saved *s)
{
	struct delivery_sink *sink = ctx;
	sink->written++;
	return state__encode_delivery(r, s, sink->out);
}

static int encode_snapshot(const struct state_view *v, uint64_t mono_now, int64_t wall_now, const struct spill *sp)
{
	struct dlq_headers *out = sp->out;
	struct delivery_sink sink = { .out = out, .written = 0 };
	int rc;
	if(put_raw(out, SNAPSHOT_MAGIC, MAGIC_LEN) || put_u(out, *v->next_seq, 8)) return ENOMEM;
	if(v->journal_covers && encode_generation(v->journal_covers, out)) return ENOMEM;
	for(const struct dlq_record *r = v->ledger->oldest; r; r = r->newer){
		if(state__encode_record(r, mono_now, wall_now, out)) return ENOMEM;
		if(holds__client(r) && state__encode_hold(r, holds__client(r), out)) return ENOMEM;
		if(v->redelivery && deliveries__each_saved(v->redelivery, r, encode_saved, &sink)) return ENOMEM;
		if((rc = spill_maybe(sp))) return rc;
	}
	rc = 0;
	int64_t deadlines = encode_deadlines_spilled(v->deadlines, mono_now, wall_now, sp, &rc);
	if(deadlines < 0) return rc;
	if((rc = encode_list(&v->outbox->owed, mono_now, wall_now, sp))
			|| (rc = encode_list(&v->outbox->sent, mono_now, wall_now, sp))
			|| (rc = encode_list(&v->outbox->settling, mono_now, wall_now, sp))
			|| (rc = encode_list(v->unsaved, mono_now, wall_now, sp))){
		return rc;
	}
	for(size_t i = 0; i < v->delayed->count; i++){
		if(state__encode_add(v->delayed->heap[i], mono_now, wall_now, out)) return ENOMEM;
		if((rc = spill_maybe(sp))) return rc;
	}
	/* Oldest first: restored in this order, they keep their age order. */
	uint64_t letters = 0;
	for(const struct dlq_letter *l = v->letters ? v->letters->oldest : NULL; l; l = l->newer){
		if(state__encode_letter(l, mono_now, wall_now, out)) return ENOMEM;
		if((rc = spill_maybe(sp))) return rc;
		letters++;
	}
	/* Each policy's last hour, as it is at the save (a snapshot only: a
	 * SIGKILL loses what came after the last one). */
	uint64_t histories = 0;
	for(size_t i = 0; v->history && *v->history && i < v->policies->count; i++){
		size_t before = out->len;
		if(state__encode_history(&(*v->history)[i], v->policies->items[i].filter, wall_now, out)) return ENOMEM;
		if(out->len != before) histories++;
		if((rc = spill_maybe(sp))) return rc;
	}
	int64_t tasks = encode_tasks(v, out);
	if(tasks < 0) return ENOMEM;
	uint64_t owed = v->outbox->owed.count + v->outbox->sent.count + v->outbox->settling.count + v->delayed->count;
	uint64_t entries = v->ledger->count + v->holds->records + owed + v->unsaved->count + sink.written + letters
			+ (uint64_t)deadlines + histories + (uint64_t)tasks + (v->journal_covers ? 1 : 0);
	size_t at = entry_begin(out, ENTRY_END, &rc);
	if(rc == 0) rc = put_u(out, entries, 8);
	rc = entry_end(out, at, rc);
	if(rc == 0 && sp->flush && out->len){
		rc = sp->flush(sp->ctx, out->data, out->len);
		out->len = 0;
	}
	return rc;
}

int state__encode_snapshot(const struct state_view *v, uint64_t mono_now, int64_t wall_now, struct dlq_headers *out)
{
	const struct spill sp = { .out = out };
	return encode_snapshot(v, mono_now, wall_now, &sp);
}

int state__encode_snapshot_to(const struct state_view *v, uint64_t mono_now, int64_t wall_now, size_t chunk,
		state_flush_fn *flush, void *ctx)
{
	struct dlq_headers buf = {0};
	const struct spill sp = { .out = &buf, .chunk = chunk, .flush = flush, .ctx = ctx };
	int rc = encode_snapshot(v, mono_now, wall_now, &sp);
	headers__free(&buf);
	return rc;
}
