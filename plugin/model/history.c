/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A policy's rate history (see history.h): a ring of 60 minute slots,
 * indexed by the minute, each stamped with the minute it counts.
 */
#include <string.h>

#include "model/history.h"

int64_t history__minute_of(int64_t wall_ms)
{
	if(wall_ms < 0) return 0;
	return wall_ms / 60000 * 60;
}

static struct dlq_history_minute *slot_of(struct dlq_history *h, int64_t minute)
{
	return &h->slots[(minute / 60) % DLQ_HISTORY_MINUTES];
}

static uint32_t sat_add(uint32_t a, uint32_t b)
{
	return a > UINT32_MAX - b ? UINT32_MAX : a + b;
}

/* The slot of minute, emptied and stamped if it held another minute.
 * A clock put back first drops every minute after the new one. */
static struct dlq_history_minute *take_slot(struct dlq_history *h, int64_t minute)
{
	if(minute < h->newest){
		for(size_t i = 0; i < DLQ_HISTORY_MINUTES; i++){
			if(h->slots[i].minute > minute) memset(&h->slots[i], 0, sizeof(h->slots[i]));
		}
	}
	h->newest = minute;
	struct dlq_history_minute *s = slot_of(h, minute);
	if(s->minute != minute){
		memset(s, 0, sizeof(*s));
		s->minute = minute;
	}
	return s;
}

void history__count(struct dlq_history *h, int64_t wall_ms, enum dlq_history_what what, unsigned cause)
{
	struct dlq_history_minute *s = take_slot(h, history__minute_of(wall_ms));
	switch(what){
		case DLQ_HISTORY_NACK: s->nacks = sat_add(s->nacks, 1); break;
		case DLQ_HISTORY_ACK_TIMEOUT: s->ack_timeouts = sat_add(s->ack_timeouts, 1); break;
		case DLQ_HISTORY_REDRIVE: s->redrives = sat_add(s->redrives, 1); break;
		case DLQ_HISTORY_DEAD_LETTER:
			if(cause >= DLQ_DEAD_CAUSES) cause = DLQ_DEAD_UNKNOWN;
			s->dead_letters[cause] = sat_add(s->dead_letters[cause], 1);
			break;
	}
}

bool history__minute_empty(const struct dlq_history_minute *m)
{
	if(m->nacks || m->ack_timeouts || m->redrives) return false;
	for(size_t c = 0; c < DLQ_DEAD_CAUSES; c++){
		if(m->dead_letters[c]) return false;
	}
	return true;
}

uint64_t history__dead_letters(const struct dlq_history_minute *m)
{
	uint64_t n = 0;
	for(size_t c = 0; c < DLQ_DEAD_CAUSES; c++){
		n += m->dead_letters[c];
	}
	return n;
}

size_t history__minutes(const struct dlq_history *h, int64_t wall_ms, struct dlq_history_minute out[DLQ_HISTORY_MINUTES])
{
	int64_t now = history__minute_of(wall_ms);
	size_t n = 0;
	for(int64_t k = DLQ_HISTORY_MINUTES - 1; k >= 0; k--){
		int64_t minute = now - k * 60;
		if(minute < 0) continue;
		const struct dlq_history_minute *s = &h->slots[(minute / 60) % DLQ_HISTORY_MINUTES];
		if(s->minute == minute && !history__minute_empty(s)) out[n++] = *s;
	}
	return n;
}

bool history__merge(struct dlq_history *h, const struct dlq_history_minute *m, int64_t wall_ms)
{
	int64_t now = history__minute_of(wall_ms);
	if(m->minute > now || m->minute <= now - DLQ_HISTORY_MINUTES * 60 || m->minute % 60) return false;
	/* Restored minutes are older than anything counted since: the newest
	 * stays where it is unless none was counted yet. */
	int64_t newest = h->newest > m->minute ? h->newest : m->minute;
	struct dlq_history_minute *s = slot_of(h, m->minute);
	if(s->minute != m->minute){
		memset(s, 0, sizeof(*s));
		s->minute = m->minute;
	}
	h->newest = newest;
	s->nacks = sat_add(s->nacks, m->nacks);
	s->ack_timeouts = sat_add(s->ack_timeouts, m->ack_timeouts);
	s->redrives = sat_add(s->redrives, m->redrives);
	for(size_t c = 0; c < DLQ_DEAD_CAUSES; c++){
		s->dead_letters[c] = sat_add(s->dead_letters[c], m->dead_letters[c]);
	}
	return true;
}
