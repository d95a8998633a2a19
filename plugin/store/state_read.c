/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Reading the state file format (state_format.h): decoding a snapshot or a
 * journal into the engine, entry by entry, each checked (its CRC, and what
 * it holds: state_check.h) before anything of it is kept. Damage ends the
 * decode and is reported; what came before it stays restored.
 */
#include <errno.h>
#include <pthread.h>
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
#include "store/state_check.h"
#include "store/state_format.h"
#include "mosquitto_dlq.h"
#include "util/slab.h"
#include "util/topic.h"

struct reader {
	const uint8_t *p;
	size_t left;
	bool bad;
	bool nomem;      /* an allocation failed: the entry is whole, the plugin is not */
	char why[96];    /* what the entry holds that the plugin never writes, or "" */
	const struct dlq_policy **last_policy; /* the policy the last record found (a restore's records come
	                                          policy by policy), or NULL */
	bool ids_new;    /* every record's id is new to the ledger: none is looked up */
	struct slab *slab; /* where records are made, or NULL: by malloc */
};

/* Refuses the entry being read, saying why: what (and what it holds
 * instead, if holding is not NULL). The first reason found wins. */
static void refuse(struct reader *r, const char *what, const char *holding)
{
	if(!r->bad && r->why[0] == '\0'){
		snprintf(r->why, sizeof(r->why), "%s%s%s", what, holding ? " holding " : "", holding ? holding : "");
	}
	r->bad = true;
}

static uint64_t get_u(struct reader *r, int bytes)
{
	if(r->bad || r->left < (size_t)bytes){
		r->bad = true;
		return 0;
	}
	uint64_t v = 0;
	for(int i = 0; i < bytes; i++){
		v = (v << 8) | r->p[i];
	}
	r->p += bytes;
	r->left -= (size_t)bytes;
	return v;
}

static const uint8_t *get_raw(struct reader *r, size_t n)
{
	if(r->bad || r->left < n){
		r->bad = true;
		return NULL;
	}
	const uint8_t *p = r->p;
	r->p += n;
	r->left -= n;
	return p;
}

/* A length-prefixed string, borrowed from the entry (n bytes, no NUL in
 * them, none after). */
static const uint8_t *get_text(struct reader *r, size_t *n)
{
	*n = (size_t)get_u(r, 2);
	const uint8_t *p = get_raw(r, *n);
	if(p == NULL || memchr(p, 0, *n)){
		r->bad = true;
		return NULL;
	}
	return p;
}

/* A length-prefixed string copied NUL-terminated into buf when it fits
 * (a record's topics, a million times at a start), else into *heap
 * (malloc'd, the caller frees it); NULL when empty and empty_is_null. */
static char *get_str_in(struct reader *r, bool empty_is_null, char *buf, size_t size, char **heap)
{
	*heap = NULL;
	size_t n;
	const uint8_t *p = get_text(r, &n);
	if(p == NULL || (n == 0 && empty_is_null)) return NULL;
	char *s = buf;
	if(n >= size){
		s = *heap = malloc(n + 1);
		if(s == NULL){
			r->bad = true;
			r->nomem = true;
			return NULL;
		}
	}
	memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

/* get_str_in, always malloc'd. */
static char *get_str(struct reader *r, bool empty_is_null)
{
	char *heap;
	return get_str_in(r, empty_is_null, NULL, 0, &heap);
}

/* An entry's length or CRC: four bytes, most significant first. */
static uint32_t be32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static const uint8_t *get_bytes(struct reader *r, uint32_t *n)
{
	*n = (uint32_t)get_u(r, 4);
	return get_raw(r, *n);
}

static uint64_t to_mono(int64_t wall, uint64_t mono_now, int64_t wall_now)
{
	if(wall >= wall_now) return mono_now;
	/* Unsigned: a saved time near INT64_MIN must not overflow. */
	uint64_t ago = (uint64_t)wall_now - (uint64_t)wall;
	return ago < mono_now ? mono_now - ago : 0;
}

/* The policy of filter, or NULL. With last (a restore's records come
 * policy by policy), the policy found the time before is tried first, and
 * what this one finds is remembered there. */
static const struct dlq_policy *policy_by_filter(const struct state_view *v, const char *filter,
		const struct dlq_policy **last)
{
	if(filter == NULL) return NULL;
	if(last && *last && !strcmp((*last)->filter, filter)) return *last;
	const struct dlq_policy *found = NULL;
	for(size_t i = 0; found == NULL && i < v->policies->count; i++){
		if(!strcmp(v->policies->items[i].filter, filter)) found = &v->policies->items[i];
	}
	if(last) *last = found;
	return found;
}

static bool decode_record(struct state_view *v, struct reader *r, uint64_t mono_now, int64_t wall_now, struct state_report *rep)
{
	struct dlq_id id, origin;
	const uint8_t *p = get_raw(r, DLQ_ID_RAW_LEN);
	if(p) memcpy(id.raw, p, DLQ_ID_RAW_LEN);
	p = get_raw(r, DLQ_ID_RAW_LEN);
	if(p) memcpy(origin.raw, p, DLQ_ID_RAW_LEN);
	int64_t created = (int64_t)get_u(r, 8);
	int64_t first_nack = (int64_t)get_u(r, 8);
	uint16_t attempt = (uint16_t)get_u(r, 2);
	uint8_t qos = (uint8_t)get_u(r, 1);
	char filter_buf[128], topic_buf[256], origin_buf[256];
	char *filter_heap, *topic_heap, *origin_heap;
	char *filter = get_str_in(r, false, filter_buf, sizeof(filter_buf), &filter_heap);
	char *topic = get_str_in(r, false, topic_buf, sizeof(topic_buf), &topic_heap);
	char *origin_topic = get_str_in(r, true, origin_buf, sizeof(origin_buf), &origin_heap);
	uint32_t plen, hlen;
	const uint8_t *payload = get_bytes(r, &plen);
	const uint8_t *headers = get_bytes(r, &hlen);
	uint16_t n = (uint16_t)get_u(r, 2);
	char why[sizeof(r->why)];
	if(r->bad){
		/* a field is missing: malformed */
	}else if(!state_check__headers(headers, hlen, why, sizeof(why))){
		refuse(r, why, NULL);
	}else if(qos > 2){
		refuse(r, "a QoS above 2", NULL);
	}else if(!topic || !topic__valid_publish(topic)){
		refuse(r, "a topic that is not a topic name", NULL);
	}else if(origin_topic && !topic__valid_publish(origin_topic)){
		refuse(r, "an origin topic that is not a topic name", NULL);
	}
	bool ok = !r->bad;

	const struct dlq_policy *policy = ok ? policy_by_filter(v, filter, r->last_policy) : NULL;
	uint64_t created_mono = to_mono(created, mono_now, wall_now);
	/* The ledger is in age order; a clock that stepped back must not
	 * break that. */
	if(v->ledger->newest && created_mono < v->ledger->newest->created_ms) created_mono = v->ledger->newest->created_ms;
	struct dlq_record *rec = NULL;
	if(ok && policy && mono_now - created_mono <= v->nack_window_ms && (r->ids_new || ledger__find(v->ledger, &id) == NULL)){
		/* Redelivery tracking indexes every restored record (engine/lifecycle.c). */
		const struct dlq_record_init in = { &id, &origin, topic, origin_topic, payload, plen, headers, hlen,
			policy, attempt, qos, created_mono };
		rec = record__make(&in, v->record_part, r->slab);
		if(rec == NULL) r->bad = r->nomem = true;
	}
	if(rec) record__set_first_nack_ms(rec, first_nack);
	/* The settlers made, by their place in the entry (NULL: a repeated id,
	 * kept once), for how each settled, which follows the ids. */
	struct dlq_settler **made = n && rec ? calloc(n, sizeof(*made)) : NULL;
	if(n && rec && made == NULL) r->bad = r->nomem = true;
	for(uint16_t i = 0; i < n && !r->bad; i++){
		char *c = get_str(r, false);
		/* A settler may become a dead letter's dead-letter-client (engine/gone.c). */
		const char *bad = c ? state_check__text_or_null(c) : NULL;
		if(bad) refuse(r, "a client id", bad);
		int rc = rec && c && !r->bad ? ledger__add_settler(NULL, rec, c, DLQ_SETTLED_NACK) : EEXIST;
		if(rc == ENOMEM) r->bad = r->nomem = true;
		else if(rc == 0) made[i] = rec->settlers;
		free(c);
	}
	/* A file written before ACKs and deadlines ends here: every settler
	 * NACKed. */
	for(uint16_t i = 0; i < n && !r->bad && r->left > 0; i++){
		uint8_t how = (uint8_t)get_u(r, 1);
		if(!r->bad && how > DLQ_SETTLED_HOW_MAX) refuse(r, "a settlement the plugin never writes", NULL);
		if(made && made[i]) made[i]->how = how;
	}
	free(made);
	free(filter_heap);
	free(topic_heap);
	free(origin_heap);
	if(r->bad){
		record__free(rec);
		return false;
	}
	if(rec){
		ledger__insert(v->ledger, rec);
		rep->records++;
	}else{
		rep->records_skipped++;
	}
	return true;
}

/* Finds a live envelope by sequence number: owed or delayed (a restore puts
 * nothing in sent or settling). */
static struct dlq_envelope *find_seq(struct state_view *v, uint64_t seq, bool *delayed)
{
	for(struct dlq_envelope *e = v->outbox->owed.head; e; e = e->next){
		if(e->seq == seq){
			*delayed = false;
			return e;
		}
	}
	for(size_t i = 0; i < v->delayed->count; i++){
		if(v->delayed->heap[i]->seq == seq){
			*delayed = true;
			return v->delayed->heap[i];
		}
	}
	return NULL;
}

/* An envelope entry's body (ENTRY_ENVELOPE and ENTRY_LETTER), read and
 * checked; the strings are the reader's to free (envelope_entry_free), the
 * rest points into the entry. */
struct envelope_entry {
	uint8_t kind;
	uint64_t seq;
	const uint8_t *id;
	const uint8_t *origin;
	int64_t time_ms;
	int64_t first_nack;
	int64_t due;
	uint64_t delay;
	uint16_t retry_count;
	uint8_t qos;
	uint8_t flags;
	uint8_t cause;  /* dead letters: enum dlq_cause; retry copies 0 */
	char *s[8]; /* target client, topic, origin topic, filter, dead-letter topic, reason, NACKing client, and
	               a dead letter's broker (NULL: none saved, a file written before broker names) */
	const uint8_t *payload;
	const uint8_t *headers;
	uint32_t plen;
	uint32_t hlen;
};

static void envelope_entry_free(struct envelope_entry *f)
{
	for(int i = 0; i < 8; i++){
		free(f->s[i]);
	}
}

/* Reads an envelope body into f and checks it: whether it is what the
 * plugin writes (and, for a kept letter, a dead letter). On false the entry
 * is refused (r->bad, and why). Free f with envelope_entry_free either way. */
static bool read_envelope(struct reader *r, bool letter, struct envelope_entry *f)
{
	f->kind = (uint8_t)get_u(r, 1);
	f->seq = get_u(r, 8);
	f->id = get_raw(r, DLQ_ID_RAW_LEN);
	f->origin = get_raw(r, DLQ_ID_RAW_LEN);
	f->time_ms = (int64_t)get_u(r, 8);
	f->first_nack = (int64_t)get_u(r, 8);
	f->due = (int64_t)get_u(r, 8);
	f->delay = get_u(r, 8);
	f->retry_count = (uint16_t)get_u(r, 2);
	f->qos = (uint8_t)get_u(r, 1);
	f->flags = (uint8_t)get_u(r, 1);
	char **s = f->s;
	for(int i = 0; i < 7; i++){
		s[i] = get_str(r, true);
	}
	f->payload = get_bytes(r, &f->plen);
	f->headers = get_bytes(r, &f->hlen);
	/* A file written before causes ends here: a dead letter of it is a
	 * final NACK's if it says so, else of a cause unknown. */
	bool has_cause = !r->bad && r->left > 0;
	f->cause = has_cause ? (uint8_t)get_u(r, 1)
			: (f->flags & 8) ? (uint8_t)DLQ_DEAD_FINAL : (uint8_t)DLQ_DEAD_UNKNOWN;
	/* A file written before broker names ends here (the caller gives such
	 * a dead letter the restoring broker's name). */
	if(!r->bad && r->left > 0) s[7] = get_str(r, true);
	/* Only what the plugin itself writes: a publish topic, an origin
	 * topic, a filter, a dead-letter topic and a client, and for a dead
	 * letter its reason, each of them text that can be a property
	 * (envelope__headers); anything else would fail at publish time, on
	 * every tick, crash it, or make its subscribers drop their connection. */
	char why[sizeof(r->why)];
	const char *bad = NULL;
	uint8_t kind = f->kind;
	if(r->bad){
		/* a field is missing: malformed */
	}else if(!state_check__headers(f->headers, f->hlen, why, sizeof(why))){
		refuse(r, why, NULL);
	}else if(kind != DLQ_ENV_RETRY_COPY && kind != DLQ_ENV_DEAD_LETTER){
		refuse(r, "an unknown kind", NULL);
	}else if(letter && kind != DLQ_ENV_DEAD_LETTER){
		refuse(r, "the kind of a retry copy", NULL);
	}else if(f->qos > 2){
		refuse(r, "a QoS above 2", NULL);
	}else if((bad = state_check__text_or_null(s[0]))){
		refuse(r, "a target client id", bad);
	}else if(!s[1] || !topic__valid_publish(s[1])){
		refuse(r, "a topic that is not a topic name", NULL);
	}else if(!s[2] || !topic__valid_publish(s[2])){
		refuse(r, "an origin topic that is not a topic name", NULL);
	}else if(!s[3] || !topic__valid_filter(s[3])){
		refuse(r, "a policy filter that is not a topic filter", NULL);
	}else if(!s[4] || !topic__valid_publish(s[4])){
		refuse(r, "a dead-letter topic that is not a topic name", NULL);
	}else if(kind == DLQ_ENV_DEAD_LETTER && !s[5]){
		refuse(r, "a dead letter without a reason", NULL);
	}else if((bad = state_check__text_or_null(s[5]))){
		refuse(r, "a reason", bad);
	}else if(!s[6]){
		refuse(r, "no NACKing client id", NULL);
	}else if((bad = state_check__text_or_null(s[6]))){
		refuse(r, "a NACKing client id", bad);
	}else if(f->flags > 15 || ((f->flags & 8) && kind != DLQ_ENV_DEAD_LETTER)){
		refuse(r, "flags the plugin never writes", NULL);
	}else if(f->cause >= DLQ_DEAD_CAUSES || (f->cause && kind != DLQ_ENV_DEAD_LETTER)
			|| (kind == DLQ_ENV_DEAD_LETTER && ((f->flags & 8) != 0) != (f->cause == DLQ_DEAD_FINAL))){
		/* A dead letter is a final NACK's (flag 8) exactly when its
		 * cause says so. */
		refuse(r, "a dead-letter cause the plugin never writes", NULL);
	}else if(s[7] && kind != DLQ_ENV_DEAD_LETTER){
		refuse(r, "a broker name on a retry copy", NULL);
	}else if(s[7] && topic__broker_name_problem(s[7])){
		refuse(r, "a broker name the plugin never writes", NULL);
	}else if(f->seq == UINT64_MAX){
		refuse(r, "the largest sequence number, which has no next", NULL);
	}
	return !r->bad;
}

/* The envelope f describes (but for where it waits: due_ms and policy are
 * the caller's), or NULL when out of memory (r->nomem). A dead letter saved
 * without a broker's name is given v's (broker_name). */
static struct dlq_envelope *envelope_of(struct state_view *v, struct reader *r, const struct envelope_entry *f)
{
	const char *const *s = (const char *const *)f->s;
	const char *broker = f->kind != DLQ_ENV_DEAD_LETTER ? NULL : s[7] ? s[7] : v->broker_name;
	struct dlq_envelope *e = envelope__new((enum dlq_envelope_kind)f->kind, s[0], s[1], s[2], s[3], s[4], s[5], s[6],
			broker, f->payload, f->plen, f->headers, f->hlen);
	if(e == NULL){
		r->bad = r->nomem = true;
		return NULL;
	}
	e->seq = f->seq;
	memcpy(e->id.raw, f->id, DLQ_ID_RAW_LEN);
	memcpy(e->origin_id.raw, f->origin, DLQ_ID_RAW_LEN);
	e->time_ms = f->time_ms;
	e->first_nack_ms = f->first_nack;
	e->delay_ms = f->delay;
	e->retry_count = f->retry_count;
	e->qos = f->qos;
	e->target_persists = f->flags & 1;
	e->recorded = f->flags & 2;
	e->target_settles = f->flags & 4;
	e->final = f->flags & 8;
	e->cause = f->kind == DLQ_ENV_DEAD_LETTER ? f->cause : 0;
	return e;
}

static bool decode_envelope(struct state_view *v, struct reader *r, uint64_t mono_now, int64_t wall_now, struct state_report *rep)
{
	struct envelope_entry f = {0};
	bool delayed;
	struct dlq_envelope *e = NULL;
	/* Already there (journal replay): nothing to make. */
	if(read_envelope(r, false, &f) && find_seq(v, f.seq, &delayed) == NULL) e = envelope_of(v, r, &f);
	envelope_entry_free(&f);
	if(r->bad) return false;
	if(e == NULL) return true;
	e->policy = policy_by_filter(v, e->filter, NULL);
	if(f.seq >= *v->next_seq) *v->next_seq = f.seq + 1;
	if(f.due && f.due > wall_now){
		e->due_ms = mono_now + (uint64_t)(f.due - wall_now);
		if(schedule__push(v->delayed, e)){
			envelope__free(e);
			r->bad = r->nomem = true;
			return false;
		}
	}else{
		e->due_ms = 0;
		outbox__push(v->outbox, &v->outbox->owed, e);
	}
	rep->envelopes++;
	return true;
}

/* A kept dead letter: checked as any dead letter, then kept as the newest
 * (a snapshot holds them oldest first). Without a store in v it is read,
 * checked and dropped. */
static void decode_letter(struct state_view *v, struct reader *r, struct state_report *rep)
{
	struct envelope_entry f = {0};
	struct dlq_envelope *e = NULL;
	if(read_envelope(r, true, &f) && v->letters) e = envelope_of(v, r, &f);
	envelope_entry_free(&f);
	if(e == NULL) return;
	/* A kept letter waits for nobody: no due time, no policy pointer
	 * (letters.h: the store finds its policy by filter). */
	e->due_ms = 0;
	e->policy = NULL;
	struct dlq_letter *l;
	int rc = letters__adopt(v->letters, e, v->policies, &l);
	/* EEXIST: already kept (journaled, and in the snapshot after it). */
	if(rc == ENOMEM) r->bad = r->nomem = true;
	else if(rc == 0) rep->letters++;
}

/* A kept dead letter that left the store: its id. One not kept (dropped
 * since, or never restored) is nothing to do. */
static void decode_letter_gone(struct state_view *v, struct reader *r)
{
	struct dlq_id id;
	const uint8_t *p = get_raw(r, DLQ_ID_RAW_LEN);
	if(p == NULL || v->letters == NULL) return;
	memcpy(id.raw, p, DLQ_ID_RAW_LEN);
	struct dlq_letter *l = letters__find(v->letters, &id);
	if(l == NULL) return;
	letters__remove(v->letters, l);
	letters__free(l);
}

/* A running task restored where it was (state_format.h's enum
 * task_place): its cursor registered with the letters at the letter it
 * tries next, so that the letters the rest of the file removes move it on
 * as they move a running task's, or past the newest. From the oldest (its
 * cursor left to its first step) when it had not walked yet, when the file
 * is older than places, and when its letter is not kept (which the plugin
 * never writes: it notes its task while the letter is kept). */
static void place_task(struct state_view *v, struct dlq_redrive_task *t, uint8_t place, const uint8_t *at_id)
{
	if(place == TASK_PLACE_OLDEST || v->letters == NULL) return;
	struct dlq_letter *at = NULL;
	if(place == TASK_PLACE_AT){
		struct dlq_id id;
		memcpy(id.raw, at_id, DLQ_ID_RAW_LEN);
		at = letters__find(v->letters, &id);
		if(at == NULL) return;
	}
	letters__track_at(v->letters, &t->cursor, at);
	t->tracked = true;
}

/* A redrive task: checked (what startRedriveTask accepts), then kept,
 * replacing an earlier entry of its id (whose cursor is let go of first).
 * Without tasks in v it is read, checked and dropped. */
static void decode_task(struct state_view *v, struct reader *r)
{
	uint64_t id = get_u(r, 8);
	uint8_t state = (uint8_t)get_u(r, 1);
	uint64_t rate = get_u(r, 4);
	int64_t started = (int64_t)get_u(r, 8), ended = (int64_t)get_u(r, 8);
	uint64_t moved = get_u(r, 8), failed = get_u(r, 8), left = get_u(r, 8);
	uint8_t given = (uint8_t)get_u(r, 1);
	uint8_t cause = (uint8_t)get_u(r, 1);
	struct dlq_letter_match m = {
		.cause_given = given & 1, .since_given = (given & 2) != 0, .until_given = (given & 4) != 0,
		.cause = (enum dlq_cause)cause,
	};
	m.since = (int64_t)get_u(r, 8);
	m.until = (int64_t)get_u(r, 8);
	/* The filter's broker name, absent in files written before broker
	 * names (no broker in the filter); then the task's place. */
	char *s[6] = {NULL};
	for(int i = 0; i < 5; i++) s[i] = get_str(r, true);
	if(!r->bad && r->left > 0) s[5] = get_str(r, true);
	/* Absent for a task that has not walked, and in files written before
	 * places: from the oldest. */
	bool has_place = !r->bad && r->left > 0;
	uint8_t place = has_place ? (uint8_t)get_u(r, 1) : TASK_PLACE_OLDEST;
	const uint8_t *at_id = place == TASK_PLACE_AT ? get_raw(r, DLQ_ID_RAW_LEN) : NULL;
	const char *bad_text = NULL;
	for(int i = 0; i < 6 && bad_text == NULL; i++) bad_text = state_check__text_or_null(s[i]);
	if(r->bad){
		/* a field is missing: malformed */
	}else if(id == 0 || id > INT64_MAX){
		refuse(r, "an id the plugin never writes", NULL);
	}else if(state >= DLQ_TASK_STATES || rate < 1 || rate > DLQ_REDRIVE_RATE_MAX || given > 7
			|| cause >= DLQ_DEAD_CAUSES || (cause && !(given & 1)) || (state == DLQ_TASK_RUNNING) != (ended == 0)){
		refuse(r, "a state, rate or filter the plugin never writes", NULL);
	}else if(has_place && (place == TASK_PLACE_OLDEST || place > TASK_PLACE_END || state != DLQ_TASK_RUNNING)){
		refuse(r, "a place the plugin never writes", NULL);
	}else if(bad_text){
		refuse(r, "a string", bad_text);
	}else if(s[3] && (!topic__valid_publish(s[3]) || s[3][0] == '$')){
		refuse(r, "a target that is not a topic name", NULL);
	}else if(s[5] && topic__broker_name_problem(s[5])){
		refuse(r, "a broker name the plugin never writes", NULL);
	}
	if(!r->bad && v->tasks){
		m.filter = s[0];
		m.dead_letter = s[1];
		m.reason = s[2];
		m.broker = s[5];
		struct dlq_redrive_task *t = redrive_task__new(&m, s[3], s[4], (uint32_t)rate);
		if(t == NULL){
			r->bad = r->nomem = true;
		}else{
			t->id = id;
			t->state = state;
			t->started_ms = started;
			t->ended_ms = ended;
			t->moved = moved;
			t->failed = failed;
			t->left = left;
			struct dlq_redrive_task *was = redrive_task__find(v->tasks, id);
			if(was && was->tracked && v->letters){
				letters__untrack(v->letters, &was->cursor);
				was->tracked = false;
			}
			if(state == DLQ_TASK_RUNNING) place_task(v, t, place, at_id);
			redrive_task__add(v->tasks, t);
		}
	}
	for(int i = 0; i < 6; i++) free(s[i]);
}

static void decode_remove(struct state_view *v, struct reader *r)
{
	uint64_t seq = get_u(r, 8);
	bool delayed;
	struct dlq_envelope *e = r->bad ? NULL : find_seq(v, seq, &delayed);
	if(e == NULL) return;
	if(delayed){
		schedule__remove(v->delayed, e);
	}else{
		outbox__unlink(v->outbox, &v->outbox->owed, e);
	}
	envelope__free(e);
}

/* The common part of a NACK and a hold entry: a dlq-id and a client id.
 * Returns the record (NULL when it is gone, or the entry is damaged) and
 * the client id in *client, the caller's to free (NULL when damaged). */
static struct dlq_record *decode_client_entry(struct state_view *v, struct reader *r, char **client)
{
	struct dlq_id id;
	const uint8_t *p = get_raw(r, DLQ_ID_RAW_LEN);
	*client = get_str(r, false);
	const char *bad = *client ? state_check__text_or_null(*client) : NULL;
	if(bad) refuse(r, "a client id", bad);
	if(p == NULL || *client == NULL || r->bad) return NULL;
	memcpy(id.raw, p, DLQ_ID_RAW_LEN);
	return ledger__find(v->ledger, &id);
}

static void decode_settler(struct state_view *v, struct reader *r)
{
	char *client;
	struct dlq_record *rec = decode_client_entry(v, r, &client);
	/* How it settled; an older journal's entries were all NACKs. */
	uint8_t how = r->left ? (uint8_t)get_u(r, 1) : DLQ_SETTLED_NACK;
	if(!r->bad && how > DLQ_SETTLED_HOW_MAX) refuse(r, "a settlement the plugin never writes", NULL);
	if(r->bad) rec = NULL;
	/* Gone (expired) or already there: nothing to do. */
	if(rec && ledger__add_settler(v->ledger, rec, client, how) == ENOMEM) r->bad = r->nomem = true;
	/* A settled delivery awaits nothing any more. */
	struct dlq_deadline *e = rec && v->deadlines ? deadlines__find(v->deadlines, rec, client) : NULL;
	if(e) deadlines__remove(v->deadlines, e);
	/* A NACK by the client a copy is held for ends the hold. */
	const char *holder = rec ? holds__client(rec) : NULL;
	if(holder && !strcmp(holder, client)) holds__release(v->holds, rec);
	free(client);
}

static void decode_hold(struct state_view *v, struct reader *r)
{
	char *client;
	struct dlq_record *rec = decode_client_entry(v, r, &client);
	/* Gone (expired), already held, or over (NACKed by its client). */
	if(rec && holds__client(rec) == NULL && !ledger__has_settler(rec, client)
			&& holds__add(v->holds, rec, client) == ENOMEM){
		r->bad = r->nomem = true;
	}
	free(client);
}

static void decode_delivery(struct state_view *v, struct reader *r)
{
	char *client;
	struct dlq_record *rec = decode_client_entry(v, r, &client);
	struct dlq_delivery_saved s = { .client = client };
	s.redeliveries = (uint16_t)get_u(r, 2);
	s.sends = (uint16_t)get_u(r, 2);
	uint8_t flags = (uint8_t)get_u(r, 1);
	if(!r->bad && flags > 3) refuse(r, "flags the plugin never writes", NULL);
	s.held_connected = flags & 1;
	s.diverted = flags & 2;
	/* Gone (expired), or no counts kept (a test's view): nothing to do. */
	if(rec && !r->bad && v->redelivery && deliveries__restore(v->redelivery, v->ledger, rec, &s)){
		r->bad = r->nomem = true;
	}
	free(client);
}

/* A delivery awaiting settlement: its clock runs on from where it was (a
 * clock that ran out while the broker was down runs out at the first
 * tick), or it waits for one. One whose record is gone, or whose policy no
 * longer has an ack_timeout, is nothing to do. */
static void decode_deadline(struct state_view *v, struct reader *r, uint64_t mono_now, int64_t wall_now)
{
	char *client;
	struct dlq_record *rec = decode_client_entry(v, r, &client);
	int64_t due = (int64_t)get_u(r, 8);
	if(!r->bad && due < 0) refuse(r, "a deadline before 1970", NULL);
	if(rec && !r->bad && v->deadlines && rec->policy->ack_timeout_ms && !ledger__has_settler(rec, client)){
		uint64_t mono = 0;
		if(due){
			mono = due > wall_now ? mono_now + (uint64_t)(due - wall_now) : mono_now;
			if(mono == 0) mono = 1; /* 0 means no clock */
		}
		if(deadlines__restore(v->deadlines, rec, client, mono)) r->bad = r->nomem = true;
	}
	free(client);
}

/* A policy's rate history (a snapshot's): each minute within the hour up
 * to wall_now is added to the policy's, found by its filter; a policy no
 * longer configured, or none kept (v->history NULL), is nothing to do.
 * Causes past those this build knows (a later build's) count as unknown. */
static void decode_history(struct state_view *v, struct reader *r, int64_t wall_now)
{
	size_t flen = (size_t)get_u(r, 2);
	const char *filter = (const char *)get_raw(r, flen);
	unsigned causes = (unsigned)get_u(r, 1);
	unsigned n = (unsigned)get_u(r, 1);
	if(r->bad) return;
	const char *bad = state_check__text(filter, flen);
	if(bad){
		refuse(r, "a filter", bad);
		return;
	}
	if(causes == 0){
		refuse(r, "no dead-letter causes", NULL);
		return;
	}
	if(n == 0 || n > DLQ_HISTORY_MINUTES){
		refuse(r, "a number of minutes the plugin never writes", NULL);
		return;
	}
	long policy = -1;
	for(size_t i = 0; i < v->policies->count && policy < 0; i++){
		const char *f = v->policies->items[i].filter;
		if(strlen(f) == flen && !memcmp(f, filter, flen)) policy = (long)i;
	}
	struct dlq_history *h = policy >= 0 && v->history && *v->history ? &(*v->history)[policy] : NULL;
	int64_t last = -1;
	for(unsigned k = 0; k < n && !r->bad; k++){
		struct dlq_history_minute m = {0};
		uint64_t minute = get_u(r, 8);
		m.nacks = (uint32_t)get_u(r, 4);
		m.ack_timeouts = (uint32_t)get_u(r, 4);
		m.redrives = (uint32_t)get_u(r, 4);
		for(unsigned c = 0; c < causes; c++){
			uint32_t count = (uint32_t)get_u(r, 4);
			unsigned into = c < DLQ_DEAD_CAUSES ? c : DLQ_DEAD_UNKNOWN;
			m.dead_letters[into] = m.dead_letters[into] > UINT32_MAX - count ? UINT32_MAX : m.dead_letters[into] + count;
		}
		if(r->bad) return;
		if(minute > INT64_MAX || minute % 60 || (int64_t)minute <= last){
			refuse(r, "minutes the plugin never writes (not on the minute, or out of order)", NULL);
			return;
		}
		last = (int64_t)minute;
		m.minute = last;
		if(h) (void)history__merge(h, &m, wall_now);
	}
}

/* What an entry of type is, for the damage report. */
static const char *entry_name(uint8_t type)
{
	switch(type){
		case ENTRY_RECORD: return "a NACKable delivery";
		case ENTRY_ENVELOPE: return "a retry copy or dead letter";
		case ENTRY_SETTLER: return "a settled delivery";
		case ENTRY_HOLD: return "a held copy";
		case ENTRY_DELIVERY: return "a delivery count";
		case ENTRY_LETTER: return "a kept dead letter";
		case ENTRY_LETTER_GONE: return "a kept dead letter's removal";
		case ENTRY_DEADLINE: return "a delivery awaiting settlement";
		case ENTRY_GENERATION: return "a journal generation";
		case ENTRY_HISTORY: return "a policy's rate history";
		case ENTRY_TASK: return "a redrive task";
		default: return "an entry";
	}
}

static void damaged(struct state_report *rep, size_t at, const char *what)
{
	rep->damaged = true;
	rep->damaged_at = at;
	/* A long description is cut; the problem is still named first. */
	if(snprintf(rep->problem, sizeof(rep->problem), "%s at byte %zu", what, at) >= (int)sizeof(rep->problem)){
		rep->problem[sizeof(rep->problem) - 1] = '\0';
	}
}

/* The records of a snapshot, by their entries' types and lengths alone
 * (the decode checks the rest, and stops where this walk stops): how many
 * (into n), and whether their ids are all distinct (the first bytes of
 * each entry). Returns 0 or ENOMEM. */
static int survey_records(const uint8_t *data, size_t len, size_t pos, size_t *n, bool *distinct, size_t *bytes)
{
	*n = 0;
	*bytes = 0;
	*distinct = false;
	uint64_t *hashes = NULL;
	size_t cap = 0;
	for(size_t at = pos; len - at >= 9;){
		uint32_t blen = be32(data + at + 1);
		if(len - at - 9 < blen) break;
		if(data[at] == ENTRY_RECORD){
			/* Room for the sort's scratch too. */
			if(2 * (*n + 1) > cap){
				cap = cap ? 2 * cap : 1u << 16;
				uint64_t *h = realloc(hashes, cap * sizeof(*h));
				if(h == NULL){
					free(hashes);
					return ENOMEM;
				}
				hashes = h;
			}
			/* One too short for an id is refused by the decode. */
			struct dlq_id id = { { 0 } };
			memcpy(id.raw, data + at + 5, blen < DLQ_ID_RAW_LEN ? blen : DLQ_ID_RAW_LEN);
			hashes[(*n)++] = id__hash(&id);
			/* A record takes its entry's bytes at most, besides its
			 * head (its strings lose their lengths, gain a NUL). */
			*bytes += DLQ_RECORD_HEAD(DLQ_RECORD_MORE) + blen;
		}
		at += 9 + (size_t)blen;
	}
	if(*n) *distinct = id__hashes_distinct(hashes, hashes + *n, *n);
	free(hashes);
	return 0;
}

/* Restores with a slab from this many bytes of records (a few chunks:
 * below it, a chunk's huge page could outlive the few records in it). */
#define RESTORE_SLAB_MIN ((size_t)16 << 20)

/* Whether the entry at e, of blen bytes of body, ends in its own CRC. */
static bool entry_sum_sound(const uint8_t *e, uint32_t blen)
{
	return be32(e + 5 + blen) == state__crc32(e, 5 + (size_t)blen);
}

/* The checker: a thread that verifies the entries' checksums ahead of
 * the walk, on another core (the CRC was a tenth of a start from
 * 1,000,000 records). The walk verifies itself whatever the checker has
 * not reached, so a checker that lags, stops at damage or never starts
 * changes nothing but the time. */
struct checker {
	const uint8_t *data;
	size_t len;
	size_t from;
	size_t checked;  /* atomic: every entry that ends at or before this byte has a sound checksum */
	size_t walked;   /* atomic: the entry the walk is at (a checker behind it jumps there) */
	bool stop;       /* atomic */
	pthread_t thread;
};

static void *check_ahead(void *arg)
{
	struct checker *c = arg;
	size_t at = c->from;
	while(!__atomic_load_n(&c->stop, __ATOMIC_RELAXED)){
		size_t walked = __atomic_load_n(&c->walked, __ATOMIC_RELAXED);
		if(at < walked) at = walked;
		if(c->len - at < 9) break;
		uint32_t blen = be32(c->data + at + 1);
		if(c->len - at - 9 < blen) break;
		if(!entry_sum_sound(c->data + at, blen)) break;
		at += 9 + (size_t)blen;
		__atomic_store_n(&c->checked, at, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* Walks the entries after a header, calling the decoder of each type
 * allowed. */
static int decode_walk(struct state_view *v, const uint8_t *data, size_t len, size_t pos, bool journal, bool ids_new,
		struct slab *slab, struct checker *checker, uint64_t mono_now, int64_t wall_now, struct state_report *rep)
{
	uint64_t seen = 0;
	bool ended = false;
	const struct dlq_policy *last_policy = NULL;
	while(pos < len){
		if(ended){
			damaged(rep, pos, "data after the end of the snapshot");
			return 0;
		}
		if(len - pos < 9){
			damaged(rep, pos, "truncated entry");
			return 0;
		}
		uint8_t type = data[pos];
		uint32_t blen = be32(data + pos + 1);
		if(len - pos - 9 < blen){
			damaged(rep, pos, "truncated entry");
			return 0;
		}
		bool checked = false;
		if(checker){
			__atomic_store_n(&checker->walked, pos, __ATOMIC_RELAXED);
			checked = pos + 9 + (size_t)blen <= __atomic_load_n(&checker->checked, __ATOMIC_RELAXED);
		}
		if(!checked && !entry_sum_sound(data + pos, blen)){
			/* Named by its type byte, which may be what is damaged: a
			 * lead for whoever inspects the file, not a certainty. */
			char what[sizeof(rep->problem)];
			snprintf(what, sizeof(what), "checksum mismatch in %s", entry_name(type));
			damaged(rep, pos, what);
			return 0;
		}
		struct reader r = { .p = data + pos + 5, .left = blen, .bad = false, .last_policy = &last_policy,
			.ids_new = ids_new, .slab = slab };
		bool ok;
		if(type == ENTRY_RECORD){
			ok = decode_record(v, &r, mono_now, wall_now, rep);
		}else if(type == ENTRY_SETTLER && journal){
			decode_settler(v, &r);
			ok = !r.bad;
		}else if(type == ENTRY_HOLD){
			decode_hold(v, &r);
			ok = !r.bad;
		}else if(type == ENTRY_DELIVERY){
			decode_delivery(v, &r);
			ok = !r.bad;
		}else if(type == ENTRY_ENVELOPE){
			ok = decode_envelope(v, &r, mono_now, wall_now, rep);
		}else if(type == ENTRY_REMOVE && journal){
			decode_remove(v, &r);
			ok = !r.bad;
		}else if(type == ENTRY_DEADLINE){
			decode_deadline(v, &r, mono_now, wall_now);
			ok = !r.bad;
		}else if(type == ENTRY_LETTER){
			decode_letter(v, &r, rep);
			ok = !r.bad;
		}else if(type == ENTRY_HISTORY && !journal){
			decode_history(v, &r, wall_now);
			ok = !r.bad;
		}else if(type == ENTRY_LETTER_GONE && journal){
			decode_letter_gone(v, &r);
			ok = !r.bad;
		}else if(type == ENTRY_TASK){
			decode_task(v, &r);
			ok = !r.bad;
		}else if(type == ENTRY_GENERATION && seen == 0){
			/* First in a snapshot: the journals it holds; first in a
			 * journal: its own, not applied when the snapshot holds it. */
			uint64_t g = get_u(&r, 8);
			ok = !r.bad && g > 0;
			if(ok && !journal){
				v->journal_covers = g;
			}else if(ok){
				rep->journal_generation = g;
				if(g <= v->journal_covers){
					rep->journal_held = true;
					return 0;
				}
			}
		}else if(type == ENTRY_END && !journal){
			ok = get_u(&r, 8) == seen && !r.bad;
			ended = true;
		}else{
			ok = false;
		}
		/* Out of memory is not damage: the file stays as it is, and the
		 * caller refuses to start rather than lose what it holds. */
		if(r.nomem) return ENOMEM;
		if(!ok || r.left != 0){
			if(r.why[0]){
				char what[sizeof(rep->problem)];
				snprintf(what, sizeof(what), "%s with %s", entry_name(type), r.why);
				damaged(rep, pos, what);
			}else{
				damaged(rep, pos, "malformed entry");
			}
			return 0;
		}
		if(journal && type != ENTRY_GENERATION) rep->journal_entries++;
		seen++;
		pos += 9 + (size_t)blen;
	}
	if(!journal && !ended) damaged(rep, pos, "truncated (no end of snapshot)");
	return 0;
}

/* Decodes the entries after a header: a snapshot's records first
 * surveyed, then made in a slab when they are many; many entries'
 * checksums verified ahead by the checker. */
static int decode_entries(struct state_view *v, const uint8_t *data, size_t len, size_t pos, bool journal,
		uint64_t mono_now, int64_t wall_now, struct state_report *rep)
{
	/* A start from a million records (perf, the saves benchmark): looking
	 * each up before it goes in took a quarter of the start (a cache miss
	 * or two per record), and they doubled the ledger's table ten times.
	 * A snapshot read first, into an empty ledger, whose ids are all
	 * distinct needs no lookup; the table is sized once. Out of memory
	 * here only leaves the lookups and the doublings. */
	bool ids_new = false;
	/* The same start spent half its time in the kernel's first touch of
	 * each page the records took: many records are made in a slab of
	 * huge pages instead (util/slab.h). Without one they come by
	 * malloc. */
	struct slab *slab = NULL;
	if(!journal){
		size_t n, bytes;
		bool distinct;
		if(survey_records(data, len, pos, &n, &distinct, &bytes) == 0){
			ids_new = distinct && v->ledger->count == 0;
			(void)ledger__reserve(v->ledger, v->ledger->count + n);
			if(bytes >= RESTORE_SLAB_MIN) slab = slab__new(bytes);
			/* Only the chunk being filled loses a record before the
			 * seal (a malformed entry ends the walk). */
			if(slab) (void)slab__prefault(slab);
		}
	}
	struct checker checker = { .data = data, .len = len, .from = pos, .checked = pos, .walked = pos };
	bool checking = len - pos >= RESTORE_SLAB_MIN && pthread_create(&checker.thread, NULL, check_ahead, &checker) == 0;
	int rc = decode_walk(v, data, len, pos, journal, ids_new, slab, checking ? &checker : NULL, mono_now, wall_now,
			rep);
	if(checking){
		__atomic_store_n(&checker.stop, true, __ATOMIC_RELAXED);
		pthread_join(checker.thread, NULL);
	}
	slab__seal(slab);
	return rc;
}

int state_read__decode_snapshot(struct state_view *v, const uint8_t *data, size_t len, uint64_t mono_now, int64_t wall_now,
		struct state_report *rep)
{
	if(len < MAGIC_LEN + 8 || memcmp(data, SNAPSHOT_MAGIC, MAGIC_LEN)){
		damaged(rep, 0, "not a mosquitto-dlq state file (bad header)");
		return 0;
	}
	struct reader r = { .p = data + MAGIC_LEN, .left = 8, .bad = false };
	uint64_t next = get_u(&r, 8);
	if(next > *v->next_seq) *v->next_seq = next;
	return decode_entries(v, data, len, MAGIC_LEN + 8, false, mono_now, wall_now, rep);
}

int state_read__decode_journal(struct state_view *v, const uint8_t *data, size_t len, uint64_t mono_now, int64_t wall_now,
		struct state_report *rep)
{
	if(len < MAGIC_LEN || memcmp(data, JOURNAL_MAGIC, MAGIC_LEN)){
		damaged(rep, 0, "not a mosquitto-dlq journal (bad header)");
		return 0;
	}
	return decode_entries(v, data, len, MAGIC_LEN, true, mono_now, wall_now, rep);
}
