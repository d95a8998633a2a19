/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The dead-letter store's operations (see letter_store.h): what the engine
 * does with model/letters.h's container, and every walk of it. Beneath the
 * outbound path, which keeps letters here; every change is noted to the
 * store port, every log line goes through the broker port.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/letter_store.h"
#include "model/policy.h"
#include "store/store_port.h"
#include "util/errtext.h"
#include "util/port.h"

/* At most one "store full" warning, and one "past their age" notice, per
 * this many milliseconds. */
#define DROP_LOG_INTERVAL_MS 60000
/* The age bound is looked at again at least this often while a kept
 * letter has one: a wall clock set forward is followed within it. */
#define AGE_RECHECK_MS 60000

void letter_store__name(struct dlq *d, struct dlq_envelope *e)
{
	if(d->letters.max_bytes && id__gen_next(&d->idgen, &e->id)) memset(e->id.raw, 0, sizeof(e->id.raw));
}

struct dlq_letter *letter_store__find(const struct dlq *d, const struct dlq_id *id)
{
	return letters__find(&d->letters, id);
}

void letter_store__delete(struct dlq *d, struct dlq_letter *l)
{
	store_port__letter_gone(&d->store, &l->env->id);
	letters__remove(&d->letters, l);
	letters__free(l);
	d->changes++;
}

/* ---- the bounds ---- */

/* Counts a kept letter dropped for the store's bound, in the totals and
 * in the counters of the policy with index i (-1: none). */
static void count_dropped(struct dlq *d, long i)
{
	d->counters.dead_letters_dropped++;
	if(i >= 0 && (size_t)i < d->cfg.policies.count && d->policy_counters) d->policy_counters[i].dead_letters_dropped++;
}

/* The policy's own bound (dead_letter_keep=), or the store's. */
static uint64_t policy_keep(const struct dlq *d, long policy)
{
	if(policy < 0 || (size_t)policy >= d->cfg.policies.count) return d->letters.max_bytes;
	uint64_t own = d->cfg.policies.items[policy].dead_letter_keep;
	return own < d->letters.max_bytes ? own : d->letters.max_bytes;
}

unsigned letter_store__room(struct dlq *d, size_t bytes, long policy)
{
	struct dlq_letters *s = &d->letters;
	unsigned dropped = 0;
	uint64_t own = policy_keep(d, policy);
	if(bytes > own){
		/* Larger than its policy's or the whole store's bound: not
		 * kept, and counted as dropped. */
		count_dropped(d, policy);
		dropped++;
	}else{
		/* The policy's own bound first: its own oldest go. */
		struct dlq_letter *l;
		while(own < s->max_bytes && letters__tally(s, (size_t)policy).bytes + bytes > own
				&& (l = letters__oldest_of(s, (size_t)policy)) != NULL){
			count_dropped(d, policy);
			letter_store__delete(d, l);
			dropped++;
		}
		while(letters__over(s, bytes) && s->oldest){
			count_dropped(d, s->oldest->policy);
			letter_store__delete(d, s->oldest);
			dropped++;
		}
	}
	uint64_t now = port__now_ms();
	if(dropped && (d->last_letter_drop_log_ms == 0 || now - d->last_letter_drop_log_ms >= DROP_LOG_INTERVAL_MS)){
		d->last_letter_drop_log_ms = now;
		port__log(DLQ_LOG_WARNING, "dead-letter store full (plugin_opt_dead_letter_keep %" PRIu64 "): dropped the oldest "
				"kept dead letters (%" PRIu64 " so far)", s->max_bytes, d->counters.dead_letters_dropped);
	}
	return dropped;
}

/* ---- the age bound ---- */

uint64_t letter_store__keep_for(const struct dlq *d, long policy)
{
	if(policy >= 0 && (size_t)policy < d->cfg.policies.count){
		uint64_t own = d->cfg.policies.items[policy].dead_letter_keep_for_ms;
		if(own != DLQ_KEEP_FOR_UNSET) return own;
	}
	return d->cfg.dead_letter_keep_for_ms;
}

/* The tick (now's clock) at which a letter of wall-clock time due_wall is
 * due, the wall clock reading wall: at once when it is past, and in
 * AGE_RECHECK_MS at the latest. */
static uint64_t due_tick(uint64_t now, int64_t wall, int64_t due_wall)
{
	if(due_wall <= wall) return now;
	uint64_t wait = (uint64_t)(due_wall - wall);
	return now + (wait < AGE_RECHECK_MS ? wait : AGE_RECHECK_MS);
}

/* The oldest kept letter of the policy with index i (-1: of none). */
static struct dlq_letter *oldest_of(const struct dlq *d, long i)
{
	return i < 0 ? letters__oldest_unpoliced(&d->letters) : letters__oldest_of(&d->letters, (size_t)i);
}

/* Notes when l, just kept, is due for its age bound: a pass may be due
 * sooner than d->letters_due_ms said (a first letter, or one whose time
 * is long past: published again after a restart). */
static void note_due(struct dlq *d, const struct dlq_letter *l)
{
	uint64_t age = letter_store__keep_for(d, l->policy);
	if(age == 0) return;
	uint64_t due = due_tick(port__now_ms(), port__wall_ms(), l->env->time_ms + (int64_t)age);
	if(due < d->letters_due_ms){
		d->letters_due_ms = due;
		/* The tick has work from then on, whatever else it has. */
		d->tick_quiet = false;
	}
}

/* Counts a kept letter dropped for its age, in the totals and in the
 * counters of the policy with index i (-1: none). */
static void count_expired(struct dlq *d, long i)
{
	d->counters.dead_letters_expired++;
	if(i >= 0 && (size_t)i < d->cfg.policies.count && d->policy_counters) d->policy_counters[i].dead_letters_expired++;
}

unsigned letter_store__expire(struct dlq *d, uint64_t now, unsigned limit)
{
	int64_t wall = port__wall_ms();
	int64_t next = INT64_MAX; /* the wall-clock time the next letter is due */
	unsigned expired = 0;
	/* The letters of no policy, then each policy's, from their oldest on:
	 * kept in the order the broker accepted them (their time order, but
	 * for one it refused for a while), the first one not past its age
	 * ends the walk. */
	for(long i = -1; i < (long)d->cfg.policies.count && expired < limit; i++){
		uint64_t age = letter_store__keep_for(d, i);
		if(age == 0) continue;
		struct dlq_letter *l;
		while((l = oldest_of(d, i)) != NULL && l->env->time_ms + (int64_t)age <= wall && expired < limit){
			count_expired(d, i);
			letter_store__delete(d, l);
			expired++;
		}
		if(l && l->env->time_ms + (int64_t)age < next) next = l->env->time_ms + (int64_t)age;
	}
	/* At the limit, more may be past their age: the next tick goes on. */
	if(expired >= limit) d->letters_due_ms = now;
	else d->letters_due_ms = next == INT64_MAX ? UINT64_MAX : due_tick(now, wall, next);
	if(expired && (d->last_letter_expire_log_ms == 0 || now - d->last_letter_expire_log_ms >= DROP_LOG_INTERVAL_MS)){
		d->last_letter_expire_log_ms = now;
		port__log(DLQ_LOG_NOTICE, "dropped kept dead letters past their age (plugin_opt_dead_letter_keep_for or a "
				"policy's dead_letter_keep_for): %" PRIu64 " so far", d->counters.dead_letters_expired);
	}
	return expired;
}

/* ---- keeping ---- */

/* Keeps copy (taken) as the newest letter, of the policy with index
 * policy, after making room for it. Returns 0 (*out the letter), E2BIG
 * (larger than its bound: counted as dropped, copy freed) or ENOMEM. */
static int keep_copy(struct dlq *d, struct dlq_envelope *copy, long policy, struct dlq_letter **out)
{
	size_t bytes = letters__bytes_of(copy);
	letter_store__room(d, bytes, policy);
	if(bytes > policy_keep(d, policy)){
		envelope__free(copy);
		return E2BIG;
	}
	if(letters__adopt(&d->letters, copy, &d->cfg.policies, out)) return ENOMEM;
	store_port__letter(&d->store, *out);
	d->changes++;
	note_due(d, *out);
	return 0;
}

void letter_store__keep(struct dlq *d, const struct dlq_envelope *e)
{
	if(d->letters.max_bytes == 0) return;
	if(!id__is_zero(&e->id) && letters__find(&d->letters, &e->id)) return;
	struct dlq_envelope *copy = envelope__copy(e);
	/* Made before the store named its letters (an older state file), or
	 * the random source failed then: named now, or not kept. */
	if(copy && id__is_zero(&copy->id) && id__gen_next(&d->idgen, &copy->id)){
		envelope__free(copy);
		port__log(DLQ_LOG_ERR, "the dead letter on " QFMT " was published but is not kept: the random source failed "
				"(no id for it)", Q(e->topic));
		return;
	}
	struct dlq_letter *l;
	int rc = copy ? keep_copy(d, copy, policy__index_in(&d->cfg.policies, e->policy), &l) : ENOMEM;
	if(rc == ENOMEM){
		port__log(DLQ_LOG_ERR, "out of memory: the dead letter on " QFMT " was published but is not kept", Q(e->topic));
	}
}

enum letter_store_collected letter_store__keep_collected(struct dlq *d, struct dlq_envelope *e)
{
	if(d->letters.max_bytes == 0){
		envelope__free(e);
		return LETTER_STORE_COLLECTED_OFF;
	}
	/* Its maker's id names it here too: a second delivery of it (a QoS 1
	 * bridge's resend, a link that came back) finds it, also after a
	 * restart, since the state file keeps both id and broker. */
	struct dlq_letter *same = letters__find(&d->letters, &e->id);
	if(same){
		bool dup = same->env->broker && e->broker && !strcmp(same->env->broker, e->broker);
		envelope__free(e);
		return dup ? LETTER_STORE_COLLECTED_DUPLICATE : LETTER_STORE_COLLECTED_CLASH;
	}
	struct dlq_letter *l;
	int rc = keep_copy(d, e, letters__policy_of(&d->cfg.policies, e->filter), &l);
	if(rc == E2BIG) return LETTER_STORE_COLLECTED_TOO_LARGE;
	return rc ? LETTER_STORE_COLLECTED_NOMEM : LETTER_STORE_COLLECTED_KEPT;
}

/* ---- access ---- */

enum letter_store_refusal letter_store__refusal(const struct dlq *d, const struct letter_store_asker *who)
{
	if(d->letters.max_bytes == 0) return LETTER_STORE_OFF;
	if(d->cfg.dead_letter_access == DLQ_LETTER_ACCESS_CHECK && (who->may_read == NULL || who->may_write == NULL)){
		return LETTER_STORE_UNCHECKED;
	}
	return LETTER_STORE_OPEN;
}

bool letter_store__may_read(const struct dlq *d, const struct letter_store_asker *who, const struct dlq_letter *l)
{
	if(d->cfg.dead_letter_access == DLQ_LETTER_ACCESS_CONTROL) return true;
	const struct dlq_envelope *e = l->env;
	return who->may_read(who->ctx, e->topic, e->payload, e->payload_len, envelope__qos(e)) == 0;
}

bool letter_store__may_write(const struct dlq *d, const struct letter_store_asker *who, const struct dlq_letter *l,
		const char *topic)
{
	if(d->cfg.dead_letter_access == DLQ_LETTER_ACCESS_CONTROL) return true;
	const struct dlq_envelope *e = l->env;
	return who->may_write(who->ctx, topic, e->payload, e->payload_len, e->qos) == 0;
}

/* ---- walks ---- */

static bool matches(const struct letter_store_query *q, const struct dlq_letter *l)
{
	return letters__matches(&q->match, l->env);
}

void letter_store__list(struct dlq *d, const struct letter_store_query *q, const struct letter_store_asker *who,
		struct letter_store_page *page)
{
	page->count = 0;
	page->matched = 0;
	page->more = false;
	page->next = 0;
	bool newest = q->newest_first;
	size_t limit = q->limit < DLQ_MAX_LIST_LIMIT ? q->limit : DLQ_MAX_LIST_LIMIT;
	/* "matched" is counted on a first page only (a walk of every letter,
	 * an access check each): a later page costs its own letters, starting
	 * where the last page ended when that is its cursor. */
	size_t bytes = 0;
	struct dlq_letter *last = NULL;
	struct dlq_letter *l = newest ? d->letters.newest : d->letters.oldest;
	if(q->cursor_given){
		struct dlq_letter *end = d->letters.page_end;
		if(end && end->order == q->cursor){
			l = newest ? end->older : end->newer;
		}else{
			while(l && (newest ? l->order >= q->cursor : l->order <= q->cursor)) l = newest ? l->older : l->newer;
		}
	}
	for(; l; l = newest ? l->older : l->newer){
		if(!matches(q, l) || !letter_store__may_read(d, who, l)) continue;
		if(!q->cursor_given) page->matched++;
		if(page->more) continue;
		if(page->count == limit || bytes > DLQ_MAX_LIST_REPLY_BYTES - 2 * 65536){
			page->more = true;
			if(q->cursor_given) break;
			continue;
		}
		page->letters[page->count++] = l;
		/* What the entry's texts take in a reply, its size told ahead. */
		const struct dlq_envelope *e = l->env;
		bytes += 300 + strlen(e->topic) + strlen(e->origin_topic) + (e->reason ? strlen(e->reason) * 2 : 0)
				+ (e->client ? strlen(e->client) : 0) + (e->filter ? strlen(e->filter) : 0)
				+ (e->broker ? strlen(e->broker) : 0);
		last = l;
	}
	if(page->more){
		/* The next page starts here (forgotten when it leaves). */
		d->letters.page_end = last;
		page->next = last->order;
	}
}

const struct dlq_broker_tally *letter_store__brokers(const struct dlq *d, size_t *count)
{
	return letters__brokers(&d->letters, count);
}

void letter_store__purge(struct dlq *d, const struct letter_store_asker *who, const char *filter, size_t *purged,
		size_t *refused)
{
	*purged = *refused = 0;
	for(struct dlq_letter *l = d->letters.oldest; l;){
		struct dlq_letter *next = l->newer;
		if(filter == NULL || (l->env->filter && !strcmp(l->env->filter, filter))){
			if(letter_store__may_read(d, who, l)){
				letter_store__delete(d, l);
				(*purged)++;
			}else{
				(*refused)++;
			}
		}
		l = next;
	}
}
