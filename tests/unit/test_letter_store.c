/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of letter_store.c (and redrive.c), the engine's dead-letter
 * store, against the fake broker port: every dead letter the broker
 * accepted is kept (named by its dead-letter-id) and found by it, the
 * store's bound and a policy's drop the oldest and count them (warned of
 * once a minute), the age bound (the store's, a policy's) drops letters
 * past it at the tick, counted apart, a page lists what each filter matches in either order
 * and follows its cursor, access answers leave letters out, a delete and a
 * purge let letters go, and a redrive publishes the letter again (tracked
 * again where a policy takes its topic) and only then lets it go, while a
 * refused publish keeps it.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "engine/dlq.h"
#include "engine/letter_store.h"
#include "engine/outbound.h"
#include "engine_calls.h"
#include "fake_port.h"
#include "model/letters.h"
#include "mosquitto_dlq.h"
#include "test_util.h"
#include "util/id.h"

static struct dlq d;
static bool d_live;

/* Starts the engine with the jobs policy, mail/# and the store's bound
 * keep; access (NULL: the default, check) is plugin_opt_dead_letter_access. */
static void start_access(const char *jobs, const char *keep, const char *access)
{
	struct dlq_option opts[] = {
		{"policy", jobs},
		{"policy", "mail/# max_attempts=1 dead_letter=dead/mail"},
		{"dead_letter_keep", keep},
		{"dead_letter_access", access ? access : "check"},
	};
	fake_reset();
	engine_start(&d, &d_live, opts, ARRAY_LEN(opts), ENGINE_NO_SYS);
}

static void start_with(const char *jobs, const char *keep)
{
	start_access(jobs, keep, NULL);
}

static void start(const char *keep)
{
	start_with("jobs/# max_attempts=1 dead_letter=dead/jobs", keep);
}

/* Starts the engine with the store's bound keep (start) and dead-letters
 * a message of payload on each topic of the list, in order. */
#define start_with_letters(keep, payload, ...) \
	start_with_letter_list((keep), (payload), (const char *const[]){__VA_ARGS__, NULL})
static void start_with_letter_list(const char *keep, const char *payload, const char *const *topics)
{
	start(keep);
	for(; *topics; topics++) engine_dead_letter(&d, *topics, payload);
}

static void stop(void)
{
	engine_stop(&d, &d_live);
	fake_reset();
}

/* A text payload of n bytes of c (n at most 2000; the buffer is
 * shared: one at a time). */
static const char *payload_of(size_t n, char c)
{
	static char buf[2001];
	ck_assert_uint_lt(n, sizeof(buf));
	memset(buf, c, n);
	buf[n] = '\0';
	return buf;
}

/* The last publish, which must be a dead letter; its dead-letter-id. */
static const char *last_letter_id(void)
{
	ck_assert_uint_gt(fake.publish_count, 0);
	const char *v = fake_header_value(&fake.publishes[fake.publish_count - 1], DLQ_PROP_DEAD_LETTER_ID);
	ck_assert_ptr_nonnull(v);
	ck_assert_uint_eq(strlen(v), DLQ_ID_LEN);
	return v;
}

START_TEST(every_dead_letter_is_kept_and_found_under_its_published_id)
{
	start("64MB");
	engine_dead_letter(&d, "jobs/a", "one");
	char first[DLQ_ID_LEN + 1];
	strcpy(first, last_letter_id());
	engine_dead_letter(&d, "mail/b", "two");
	ck_assert_uint_eq(d.letters.count, 2);
	struct dlq_letter *l = engine_letter(&d, first);
	ck_assert_ptr_nonnull(l);
	ck_assert_str_eq(l->env->topic, "dead/jobs");
	ck_assert_str_eq(l->env->origin_topic, "jobs/a");
	ck_assert_mem_eq(l->env->payload, "one", 3);
	ck_assert_str_eq(l->env->client, "worker");
	ck_assert_str_eq(l->env->reason, "max_attempts (1) reached");
	ck_assert_uint_eq(l->env->retry_count, 1);
	ck_assert_ptr_eq(d.letters.oldest, l);
	ck_assert_uint_eq(letters__tally(&d.letters, 0).count, 1);
	ck_assert_uint_eq(letters__tally(&d.letters, 1).count, 1);
	/* Deleted: found no more, and not counted as dropped. */
	uint64_t changes = d.changes;
	letter_store__delete(&d, l);
	ck_assert_ptr_null(engine_letter(&d, first));
	ck_assert_uint_eq(d.letters.count, 1);
	ck_assert_uint_eq(letters__tally(&d.letters, 0).count, 0);
	ck_assert_uint_gt(d.changes, changes);
	ck_assert_uint_eq(d.counters.dead_letters_dropped, 0);
	/* An id never kept. */
	struct dlq_id none;
	memset(&none, 0x11, sizeof(none));
	ck_assert_ptr_null(letter_store__find(&d, &none));
	stop();
}
END_TEST

START_TEST(the_bound_drops_the_oldest_and_counts_them)
{
	start("4KiB");
	const char *payload = payload_of(1000, 'x');
	char ids[10][DLQ_ID_LEN + 1];
	for(int i = 0; i < 10; i++){
		engine_dead_letter(&d, i % 2 ? "jobs/a" : "mail/b", payload);
		strcpy(ids[i], last_letter_id());
	}
	ck_assert_uint_le(d.letters.bytes, 4096);
	ck_assert_uint_ge(d.letters.count, 2);
	/* Those kept are the newest: every older one was dropped. */
	for(size_t i = 0; i < 10; i++){
		ck_assert_msg((engine_letter(&d, ids[i]) != NULL) == (i >= 10 - d.letters.count), "letter %zu", i);
	}
	ck_assert_uint_eq(d.counters.dead_letters, 10);
	ck_assert_uint_eq(d.counters.dead_letters_dropped + d.letters.count, 10);
	/* The newest is the one kept last. */
	ck_assert_ptr_eq(engine_letter(&d, last_letter_id()), d.letters.newest);
	ck_assert(fake_logged("dead-letter store full"));
	/* Per policy: what each lost adds up. */
	ck_assert_uint_eq(d.policy_counters[0].dead_letters_dropped + d.policy_counters[1].dead_letters_dropped,
			d.counters.dead_letters_dropped);
	stop();
}
END_TEST

/* A dead letter published again (it was owed at a restart) is kept
 * already: nothing is dropped to make room for it, nothing counted. */
START_TEST(a_letter_published_again_makes_no_room)
{
	start("4KiB");
	const char *payload = payload_of(1000, 'x');
	for(int i = 0; i < 3; i++){
		engine_dead_letter(&d, "jobs/a", payload);
	}
	size_t kept = d.letters.count;
	uint64_t dropped = d.counters.dead_letters_dropped;
	struct dlq_letter *newest = d.letters.newest;
	struct dlq_envelope *again = envelope__copy(newest->env);
	ck_assert_ptr_nonnull(again);
	again->policy = &d.cfg.policies.items[0];
	outbound__send(&d, again);
	ck_assert_uint_eq(d.letters.count, kept);
	ck_assert_uint_eq(d.counters.dead_letters_dropped, dropped);
	ck_assert_ptr_eq(d.letters.newest, newest);
	stop();
}
END_TEST

START_TEST(a_letter_larger_than_the_store_is_not_kept_but_counted)
{
	start("1KiB");
	const char *payload = payload_of(2000, 'y');
	engine_dead_letter(&d, "jobs/a", payload);
	ck_assert_uint_eq(d.letters.count, 0);
	ck_assert_uint_eq(d.counters.dead_letters_dropped, 1);
	/* Published all the same. */
	ck_assert_uint_eq(d.counters.dead_letters, 1);
	stop();
}
END_TEST

START_TEST(a_redrive_republishes_tracks_and_then_lets_go)
{
	start_with_letters("64MB", "again", "jobs/a");
	char lid[DLQ_ID_LEN + 1];
	strcpy(lid, last_letter_id());
	struct dlq_letter *l = engine_letter(&d, lid);
	size_t before = fake.publish_count;
	struct dlq_redrive_result res;
	ck_assert_int_eq(dlq__redrive_letter(&d, l, NULL, "operator", false, &res), 0);
	ck_assert(res.tracked);
	ck_assert_ptr_null(engine_letter(&d, lid));
	ck_assert_uint_eq(d.counters.redriven, 1);
	/* Counted in its policy's minute too (getHistory). */
	struct dlq_history_minute m[DLQ_HISTORY_MINUTES];
	const struct dlq_policy *jobs = dlq__policy_for(&d, "jobs/a");
	ck_assert_uint_eq(dlq__history(&d, jobs->index, fake.wall_ms, m), 1);
	ck_assert_uint_eq(m[0].redrives, 1);
	ck_assert_uint_eq(history__dead_letters(&m[0]), 1);
	ck_assert_uint_eq(fake.publish_count, before + 1);
	const struct fake_publish *p = &fake.publishes[before];
	ck_assert_str_eq(p->topic, "jobs/a");
	ck_assert_ptr_null(p->client);
	ck_assert_mem_eq(p->payload, "again", 5);
	ck_assert_str_eq(fake_header_value(p, DLQ_PROP_ID), res.dlq_id);
	/* Tracked again: a NACK of the new id dead-letters it anew, at its
	 * first attempt. */
	ck_assert_int_eq(engine_nack(&d, res.dlq_id, "worker", false), DLQ_NACK_DEAD_LETTERED);
	ck_assert_uint_eq(d.letters.count, 1);
	ck_assert_str_eq(fake_header_value(&fake.publishes[fake.publish_count - 1], DLQ_PROP_RETRY_COUNT), "1");

	/* To a topic no policy takes: published, not tracked. */
	l = d.letters.newest;
	ck_assert_int_eq(dlq__redrive_letter(&d, l, "elsewhere/x", "operator", false, &res), 0);
	ck_assert(!res.tracked);
	ck_assert_str_eq(fake.publishes[fake.publish_count - 1].topic, "elsewhere/x");
	ck_assert_ptr_null(fake_header_value(&fake.publishes[fake.publish_count - 1], DLQ_PROP_ID));
	ck_assert_uint_eq(d.letters.count, 0);
	stop();
}
END_TEST

START_TEST(a_refused_redrive_keeps_the_letter)
{
	start_with_letters("64MB", "kept", "jobs/a");
	struct dlq_letter *l = d.letters.newest;
	size_t owed = engine__owed_count(&d); /* the dead letter itself, not yet taken */
	fake.fail_publishes = 1;
	struct dlq_redrive_result res;
	ck_assert_int_eq(dlq__redrive_letter(&d, l, NULL, "operator", false, &res), EIO);
	ck_assert_ptr_eq(d.letters.newest, l);
	ck_assert_uint_eq(d.letters.count, 1);
	ck_assert_uint_eq(d.counters.redriven, 0);
	/* Nothing owed was left behind for the tick to publish. */
	ck_assert_uint_eq(engine__owed_count(&d), owed);
	letter_store__delete(&d, l);
	ck_assert_uint_eq(d.letters.count, 0);
	ck_assert_uint_eq(d.letters.bytes, 0);
	stop();
}
END_TEST

START_TEST(a_policy_bound_drops_only_its_own_oldest)
{
	start_with("jobs/# max_attempts=1 dead_letter=dead/jobs dead_letter_keep=3KiB", "64MB");
	const char *payload = payload_of(1000, 'z');
	for(int i = 0; i < 6; i++){
		engine_dead_letter(&d, "mail/b", payload);
		engine_dead_letter(&d, "jobs/a", payload);
	}
	struct dlq_letter_tally jobs = letters__tally(&d.letters, 0), mail = letters__tally(&d.letters, 1);
	ck_assert_uint_le(jobs.bytes, 3072);
	ck_assert_uint_ge(jobs.count, 1);
	ck_assert_uint_lt(jobs.count, 6);
	ck_assert_uint_eq(mail.count, 6);
	ck_assert_uint_eq(d.policy_counters[0].dead_letters_dropped, 6 - jobs.count);
	ck_assert_uint_eq(d.policy_counters[1].dead_letters_dropped, 0);
	/* The policy's oldest kept is the oldest jobs letter in the list. */
	struct dlq_letter *first = d.letters.oldest;
	while(first && first->policy != 0) first = first->newer;
	ck_assert_ptr_eq(letters__oldest_of(&d.letters, 0), first);
	/* The newest jobs letter, kept last, is among those kept. */
	ck_assert_str_eq(d.letters.newest->env->topic, "dead/jobs");
	ck_assert_int_eq(d.letters.newest->policy, 0);
	stop();
}
END_TEST

START_TEST(with_the_store_off_nothing_is_kept_or_named)
{
	start("0");
	engine_dead_letter(&d, "jobs/a", "gone");
	ck_assert_uint_eq(d.letters.count, 0);
	ck_assert_ptr_null(fake_header_value(&fake.publishes[fake.publish_count - 1], DLQ_PROP_DEAD_LETTER_ID));
	ck_assert_uint_eq(d.counters.dead_letters_dropped, 0);
	stop();
}
END_TEST

/* ---- find, delete, list, access, purge ---- */

/* The broker's answers for an asker: every letter readable and writable,
 * but those on dead/mail when ctx points to true. */
static int answer(void *ctx, const char *topic, const void *payload, uint32_t payload_len, uint8_t qos)
{
	(void)payload;
	(void)payload_len;
	(void)qos;
	const bool *deny_mail = ctx;
	return *deny_mail && !strncmp(topic, "dead/mail", 9) ? 1 : 0;
}

static bool deny_mail;
static const struct letter_store_asker operator = {
	.client = "operator", .may_read = answer, .may_write = answer, .ctx = &deny_mail,
};

/* A dead letter of topic made at wall-clock time wall. */
static void dead_letter_at(const char *topic, int64_t wall)
{
	fake.wall_ms = wall;
	engine_dead_letter(&d, topic, "p");
}

/* The page q lists for the operator. */
static struct letter_store_page list(const struct letter_store_query *q)
{
	struct letter_store_page page;
	letter_store__list(&d, q, &operator, &page);
	return page;
}

/* Five letters listed two at a time, newest first, then three at a time
 * oldest first: each page follows the last, "matched" only on the first. */
START_TEST(pages_follow_their_cursor_in_either_order)
{
	start("64MB");
	const char *topics[] = { "jobs/0", "jobs/1", "jobs/2", "jobs/3", "jobs/4" };
	for(size_t i = 0; i < ARRAY_LEN(topics); i++) engine_dead_letter(&d, topics[i], "p");
	struct letter_store_query q = { .newest_first = true, .limit = 2 };
	const char *want_newest[] = { "jobs/4", "jobs/3", "jobs/2", "jobs/1", "jobs/0" };
	size_t seen = 0;
	for(int n = 0; n < 3; n++){
		struct letter_store_page page = list(&q);
		ck_assert_uint_eq(page.count, n < 2 ? 2 : 1);
		ck_assert_uint_eq(page.matched, n == 0 ? 5 : 0);
		ck_assert(page.more == (n < 2));
		for(size_t i = 0; i < page.count; i++){
			ck_assert_str_eq(page.letters[i]->env->origin_topic, want_newest[seen++]);
		}
		if(page.more) ck_assert_uint_eq(page.next, page.letters[page.count - 1]->order);
		q.cursor_given = true;
		q.cursor = page.next;
	}
	ck_assert_uint_eq(seen, 5);

	struct letter_store_query o = { .newest_first = false, .limit = 3 };
	struct letter_store_page first = list(&o);
	ck_assert_uint_eq(first.count, 3);
	ck_assert_uint_eq(first.matched, 5);
	ck_assert(first.more);
	ck_assert_str_eq(first.letters[0]->env->origin_topic, "jobs/0");
	ck_assert_str_eq(first.letters[2]->env->origin_topic, "jobs/2");
	o.cursor_given = true;
	o.cursor = first.next;
	struct letter_store_page second = list(&o);
	ck_assert_uint_eq(second.count, 2);
	ck_assert(!second.more);
	ck_assert_str_eq(second.letters[0]->env->origin_topic, "jobs/3");
	ck_assert_str_eq(second.letters[1]->env->origin_topic, "jobs/4");
	stop();
}
END_TEST

/* The letter a page ended at is deleted before the next page is asked
 * for: that page still starts after it. */
START_TEST(a_page_goes_on_after_its_last_letter_left)
{
	start("64MB");
	for(int i = 0; i < 4; i++) engine_dead_letter(&d, "jobs/a", "p");
	struct letter_store_query q = { .newest_first = true, .limit = 2 };
	struct letter_store_page page = list(&q);
	ck_assert(page.more);
	const struct dlq_letter *third = page.letters[1]->older;
	letter_store__delete(&d, (struct dlq_letter *)page.letters[1]);
	q.cursor_given = true;
	q.cursor = page.next;
	page = list(&q);
	ck_assert_uint_eq(page.count, 2);
	ck_assert_ptr_eq(page.letters[0], third);
	ck_assert_ptr_eq(page.letters[1], d.letters.oldest);
	ck_assert(!page.more);
	stop();
}
END_TEST

/* A query, how many letters it matches, and the newest it shows. */
struct filter_case {
	struct letter_store_query q;
	size_t matched;
	const char *first;
};

/* Lists each case newest first in one page: all it matches, the newest
 * first, and only letters of its cause when it names one. */
static void expect_cases(struct filter_case *cases, size_t n)
{
	for(size_t i = 0; i < n; i++){
		cases[i].q.newest_first = true;
		cases[i].q.limit = DLQ_MAX_LIST_LIMIT;
		struct letter_store_page page = list(&cases[i].q);
		ck_assert_msg(page.matched == cases[i].matched, "case %zu: %zu matched, expected %zu", i, page.matched,
				cases[i].matched);
		ck_assert_uint_eq(page.count, cases[i].matched);
		ck_assert(!page.more);
		for(size_t k = 0; k < page.count && cases[i].q.match.cause_given; k++){
			ck_assert_uint_eq(page.letters[k]->env->cause, cases[i].q.match.cause);
		}
		if(cases[i].first) ck_assert_str_eq(page.letters[0]->env->origin_topic, cases[i].first);
	}
}

START_TEST(each_filter_narrows_the_page_and_its_count)
{
	start("64MB");
	const int64_t t0 = 1790000000000LL;
	dead_letter_at("jobs/a", t0);
	dead_letter_at("mail/b", t0 + 1000);
	dead_letter_at("jobs/c", t0 + 2000);
	dead_letter_at("mail/d", t0 + 3000);
	struct filter_case cases[] = {
		{ { .match = { .filter = "jobs/#" } }, 2, "jobs/c" },
		{ { .match = { .filter = "mail/+" } }, 0, NULL },
		{ { .match = { .dead_letter = "dead/mail" } }, 2, "mail/d" },
		{ { .match = { .dead_letter = "dead/#" } }, 0, NULL },
		{ { .match = { .reason = "(1) reached" } }, 4, "mail/d" },
		{ { .match = { .reason = "timed out" } }, 0, NULL },
		{ { .match = { .since_given = true, .since = t0 + 1000 } }, 3, "mail/d" },
		{ { .match = { .until_given = true, .until = t0 + 1000 } }, 2, "mail/b" },
		{ { .match = { .since_given = true, .since = t0 + 1000, .until_given = true, .until = t0 + 2000 } }, 2, "jobs/c" },
		{ { .match = { .filter = "jobs/#", .since_given = true, .since = t0 + 1 } }, 1, "jobs/c" },
	};
	expect_cases(cases, ARRAY_LEN(cases));
	stop();
}
END_TEST

/* A final NACK of a message on topic by "worker": a dead letter of cause
 * final. */
static void final_dead_letter(const char *topic)
{
	char id[DLQ_ID_LEN + 1];
	engine_track(&d, topic, "p", 1, NULL, id);
	struct dlq_nack n = { .id = id, .id_len = strlen(id), .client = "worker", .final = true };
	struct dlq_nack_result res;
	dlq__nack(&d, &n, &res);
	ck_assert_int_eq(res.status, DLQ_NACK_DEAD_LETTERED);
}

/* The cause filter lists the letters of one dead-letter-cause, alone, with
 * another filter, and page after page. */
START_TEST(the_cause_filter_lists_one_cause)
{
	start("64MB");
	engine_dead_letter(&d, "jobs/a", "p");
	final_dead_letter("mail/b");
	final_dead_letter("jobs/c");
	engine_dead_letter(&d, "mail/d", "p");
	final_dead_letter("jobs/e");
	struct filter_case cases[] = {
		{ { .match = { .cause_given = true, .cause = DLQ_DEAD_FINAL } }, 3, "jobs/e" },
		{ { .match = { .cause_given = true, .cause = DLQ_DEAD_NACK } }, 2, "mail/d" },
		{ { .match = { .cause_given = true, .cause = DLQ_DEAD_ACK_TIMEOUT } }, 0, NULL },
		{ { .match = { .cause_given = true, .cause = DLQ_DEAD_UNKNOWN } }, 0, NULL },
		{ { .match = { .cause_given = true, .cause = DLQ_DEAD_FINAL, .filter = "mail/#" } }, 1, "mail/b" },
		{ { .match = { .cause_given = true, .cause = DLQ_DEAD_NACK, .dead_letter = "dead/jobs" } }, 1, "jobs/a" },
		{ { .match = { .cause_given = false, .cause = DLQ_DEAD_ACK_TIMEOUT } }, 5, "jobs/e" },
	};
	expect_cases(cases, ARRAY_LEN(cases));
	/* Oldest first, one a page: the final letters in their order, each
	 * page after the last, and no letter of another cause between. */
	struct letter_store_query q = { .match = { .cause_given = true, .cause = DLQ_DEAD_FINAL }, .limit = 1 };
	const char *want[] = { "mail/b", "jobs/c", "jobs/e" };
	for(size_t n = 0; n < ARRAY_LEN(want); n++){
		struct letter_store_page page = list(&q);
		ck_assert_uint_eq(page.count, 1);
		ck_assert_str_eq(page.letters[0]->env->origin_topic, want[n]);
		ck_assert(page.more == (n + 1 < ARRAY_LEN(want)));
		q.cursor_given = true;
		q.cursor = page.next;
	}
	stop();
}
END_TEST

/* Letters whose texts are large end a page before its limit, near the
 * reply's bound. */
START_TEST(a_page_ends_early_near_the_reply_bound)
{
	start("64MB");
	static char topic[40006];
	memcpy(topic, "jobs/", 5);
	memset(topic + 5, 'x', 40000);
	topic[40005] = '\0';
	for(int i = 0; i < 6; i++) engine_dead_letter(&d, topic, "p");
	struct letter_store_query q = { .newest_first = true, .limit = DLQ_MAX_LIST_LIMIT };
	struct letter_store_page page = list(&q);
	/* About 40 KB an entry: the fourth passes half the bound. */
	ck_assert_uint_eq(page.count, 4);
	ck_assert(page.more);
	ck_assert_uint_eq(page.matched, 6);
	q.cursor_given = true;
	q.cursor = page.next;
	page = list(&q);
	ck_assert_uint_eq(page.count, 2);
	ck_assert(!page.more);
	stop();
}
END_TEST

START_TEST(what_the_asker_may_not_read_is_left_out)
{
	start_with_letters("64MB", "p", "jobs/a", "mail/b", "jobs/c", "mail/d");
	deny_mail = true;
	ck_assert_int_eq(letter_store__refusal(&d, &operator), LETTER_STORE_OPEN);
	struct letter_store_query q = { .newest_first = true, .limit = DLQ_MAX_LIST_LIMIT };
	struct letter_store_page page = list(&q);
	ck_assert_uint_eq(page.matched, 2);
	ck_assert_uint_eq(page.count, 2);
	ck_assert_str_eq(page.letters[0]->env->origin_topic, "jobs/c");
	ck_assert_str_eq(page.letters[1]->env->origin_topic, "jobs/a");
	ck_assert(!letter_store__may_read(&d, &operator, d.letters.newest));
	ck_assert(letter_store__may_read(&d, &operator, d.letters.oldest));
	ck_assert(letter_store__may_write(&d, &operator, d.letters.oldest, "jobs/again"));
	ck_assert(!letter_store__may_write(&d, &operator, d.letters.oldest, "dead/mail/x"));
	/* A purge of everything takes only what the asker may read. */
	size_t purged, refused;
	letter_store__purge(&d, &operator, NULL, &purged, &refused);
	ck_assert_uint_eq(purged, 2);
	ck_assert_uint_eq(refused, 2);
	ck_assert_uint_eq(d.letters.count, 2);
	ck_assert_str_eq(d.letters.oldest->env->topic, "dead/mail");
	ck_assert_str_eq(d.letters.newest->env->topic, "dead/mail");
	deny_mail = false;
	stop();
}
END_TEST

START_TEST(a_purge_takes_one_policys_letters)
{
	start_with_letters("64MB", "p", "jobs/a", "mail/b", "jobs/c");
	size_t purged, refused;
	letter_store__purge(&d, &operator, "jobs/#", &purged, &refused);
	ck_assert_uint_eq(purged, 2);
	ck_assert_uint_eq(refused, 0);
	ck_assert_uint_eq(d.letters.count, 1);
	ck_assert_str_eq(d.letters.oldest->env->origin_topic, "mail/b");
	ck_assert_uint_eq(letters__tally(&d.letters, 0).count, 0);
	ck_assert_uint_eq(d.counters.dead_letters_dropped, 0);
	stop();
}
END_TEST

/* With plugin_opt_dead_letter_access control nobody is asked; with check
 * the broker must be able to answer; with the store off nobody is
 * answered. */
START_TEST(who_the_store_answers)
{
	const struct letter_store_asker unchecked = { .client = "operator" };
	start_access("jobs/# max_attempts=1 dead_letter=dead/jobs", "64MB", "control");
	engine_dead_letter(&d, "mail/b", "p");
	deny_mail = true;
	ck_assert_int_eq(letter_store__refusal(&d, &unchecked), LETTER_STORE_OPEN);
	ck_assert(letter_store__may_read(&d, &operator, d.letters.newest));
	ck_assert(letter_store__may_write(&d, &operator, d.letters.newest, "dead/mail/x"));
	struct letter_store_query q = { .limit = 10 };
	ck_assert_uint_eq(list(&q).matched, 1);
	deny_mail = false;
	stop();

	start("64MB");
	ck_assert_int_eq(letter_store__refusal(&d, &unchecked), LETTER_STORE_UNCHECKED);
	ck_assert_int_eq(letter_store__refusal(&d, &operator), LETTER_STORE_OPEN);
	stop();

	start("0");
	ck_assert_int_eq(letter_store__refusal(&d, &operator), LETTER_STORE_OFF);
	stop();
}
END_TEST

/* ---- the bounds ---- */

static size_t logged_count(const char *text)
{
	size_t n = 0;
	for(size_t i = 0; i < fake.log_count; i++) n += strstr(fake.logs[i], text) != NULL;
	return n;
}

START_TEST(the_store_full_warning_comes_once_a_minute)
{
	start("4KiB");
	const char *payload = payload_of(1000, 'x');
	for(int i = 0; i < 8; i++) engine_dead_letter(&d, "jobs/a", payload);
	ck_assert_uint_gt(d.counters.dead_letters_dropped, 1);
	ck_assert_uint_eq(logged_count("dead-letter store full"), 1);
	fake.now_ms += 59999;
	engine_dead_letter(&d, "jobs/a", payload);
	ck_assert_uint_eq(logged_count("dead-letter store full"), 1);
	fake.now_ms += 1;
	engine_dead_letter(&d, "jobs/a", payload);
	ck_assert_uint_eq(logged_count("dead-letter store full"), 2);
	char line[160];
	snprintf(line, sizeof(line), "(%llu so far)", (unsigned long long)d.counters.dead_letters_dropped);
	ck_assert(fake_logged(line));
	stop();
}
END_TEST

/* A smaller bound than the letters take (a restart with a smaller
 * plugin_opt_dead_letter_keep): room for nothing brings the store within
 * it, oldest first, counted. */
START_TEST(room_for_nothing_brings_the_store_within_a_smaller_bound)
{
	start("64MB");
	const char *payload = payload_of(1000, 'x');
	for(int i = 0; i < 5; i++) engine_dead_letter(&d, i % 2 ? "mail/b" : "jobs/a", payload);
	struct dlq_letter *newest = d.letters.newest;
	d.letters.max_bytes = 2 * newest->bytes + 1;
	ck_assert_uint_eq(letter_store__room(&d, 0, -1), 3);
	ck_assert_uint_eq(d.letters.count, 2);
	ck_assert_ptr_eq(d.letters.newest, newest);
	ck_assert_uint_eq(d.counters.dead_letters_dropped, 3);
	ck_assert_uint_eq(d.policy_counters[0].dead_letters_dropped, 2);
	ck_assert_uint_eq(d.policy_counters[1].dead_letters_dropped, 1);
	stop();
}
END_TEST

/* ---- the age bound (dead_letter_keep_for) ---- */

/* Starts the engine with the jobs and mail policies, the store's bound
 * keep and its age bound keep_for. */
static void start_aged(const char *jobs, const char *mail, const char *keep, const char *keep_for)
{
	struct dlq_option opts[] = {
		{"policy", jobs},
		{"policy", mail},
		{"dead_letter_keep", keep},
		{"dead_letter_keep_for", keep_for},
	};
	fake_reset();
	engine_start(&d, &d_live, opts, ARRAY_LEN(opts), ENGINE_NO_SYS);
}

#define AGED_JOBS "jobs/# max_attempts=1 dead_letter=dead/jobs"
#define AGED_MAIL "mail/# max_attempts=1 dead_letter=dead/mail"
/* A wall-clock time the tests start at. */
#define T0 1790000000000LL

/* Both clocks move on by ms, and the engine ticks. */
static void tick_after(uint64_t ms)
{
	fake.now_ms += ms;
	fake.wall_ms += (int64_t)ms;
	dlq__tick(&d);
}

/* A dead letter of topic made at T0 + at ms (both clocks set to it). */
static void dead_letter_aged(const char *topic, int64_t at)
{
	fake.wall_ms = T0 + at;
	fake.now_ms = 1000 + (uint64_t)at;
	engine_dead_letter(&d, topic, "p");
}

/* plugin_opt_dead_letter_keep_for 10s: each letter goes at the first
 * tick 10 s after its dead-letter time, not before, counted in
 * dead_letters_expired (in total and for its policy) and not in
 * dead_letters_dropped; the notice comes once in the minute. */
START_TEST(letters_past_the_store_age_go_at_the_tick)
{
	start_aged(AGED_JOBS, AGED_MAIL, "64MB", "10s");
	dead_letter_aged("jobs/a", 0);
	dead_letter_aged("mail/b", 4000);
	dead_letter_aged("jobs/c", 8000);
	ck_assert_uint_eq(d.letters.count, 3);
	tick_after(10000 - 8000 - 1); /* 1 ms short of the first one's age */
	ck_assert_uint_eq(d.letters.count, 3);
	tick_after(1);
	ck_assert_uint_eq(d.letters.count, 2);
	ck_assert_str_eq(d.letters.oldest->env->origin_topic, "mail/b");
	ck_assert_uint_eq(d.counters.dead_letters_expired, 1);
	ck_assert_uint_eq(d.policy_counters[0].dead_letters_expired, 1);
	ck_assert_uint_eq(d.policy_counters[1].dead_letters_expired, 0);
	ck_assert_uint_eq(d.counters.dead_letters_dropped, 0);
	ck_assert_uint_eq(logged_count("dropped kept dead letters past their age"), 1);
	tick_after(3999);
	ck_assert_uint_eq(d.letters.count, 2);
	tick_after(1);
	ck_assert_uint_eq(d.letters.count, 1);
	ck_assert_uint_eq(d.policy_counters[1].dead_letters_expired, 1);
	tick_after(4000);
	ck_assert_uint_eq(d.letters.count, 0);
	ck_assert_uint_eq(d.counters.dead_letters_expired, 3);
	ck_assert_uint_eq(d.policy_counters[0].dead_letters_expired, 2);
	ck_assert_uint_eq(d.counters.dead_letters_dropped, 0);
	/* Once a minute: the second and third did not log again. */
	ck_assert_uint_eq(logged_count("dropped kept dead letters past their age"), 1);
	ck_assert(fake_logged("(plugin_opt_dead_letter_keep_for or a policy's dead_letter_keep_for): 1 so far"));
	/* Nothing left with an age bound: no pass is due. */
	ck_assert_uint_eq(d.letters_due_ms, UINT64_MAX);
	stop();
}
END_TEST

/* A policy's dead_letter_keep_for overrides the store's, shorter (jobs,
 * 5s) or forever (mail); once a reload removes the mail policy, its
 * letters are of no policy and the store's age applies to them. */
START_TEST(a_policy_age_overrides_the_store_age)
{
	start_aged(AGED_JOBS " dead_letter_keep_for=5s", AGED_MAIL " dead_letter_keep_for=forever", "64MB", "20s");
	dead_letter_aged("jobs/a", 0);
	dead_letter_aged("mail/b", 0);
	tick_after(4999);
	ck_assert_uint_eq(d.letters.count, 2);
	tick_after(1);
	ck_assert_uint_eq(d.letters.count, 1);
	ck_assert_str_eq(d.letters.oldest->env->origin_topic, "mail/b");
	ck_assert_uint_eq(d.policy_counters[0].dead_letters_expired, 1);
	/* Forever: the mail letter stays past the store's 20 s, whatever
	 * the ticks. */
	for(int i = 0; i < 10; i++) tick_after(30000);
	ck_assert_uint_eq(d.letters.count, 1);
	ck_assert_uint_eq(d.counters.dead_letters_expired, 1);

	const struct dlq_option jobs_only[] = { {"policy", AGED_JOBS " dead_letter_keep_for=5s"} };
	char err[256];
	ck_assert_msg(dlq__reload(&d, jobs_only, ARRAY_LEN(jobs_only), err, sizeof(err)) == 0, "%s", err);
	ck_assert_ptr_eq(letters__oldest_unpoliced(&d.letters), d.letters.oldest);
	tick_after(1);
	ck_assert_uint_eq(d.letters.count, 0);
	ck_assert_uint_eq(d.counters.dead_letters_expired, 2);
	/* Counted in the totals only: it has no policy now. */
	ck_assert_uint_eq(d.policy_counters[0].dead_letters_expired, 1);
	ck_assert_ptr_null(letters__oldest_unpoliced(&d.letters));
	stop();
}
END_TEST

/* The store's bound and the age bound together: what the bound dropped is
 * counted in dead_letters_dropped, what aged out of the rest in
 * dead_letters_expired; each letter once. */
START_TEST(age_drops_are_counted_apart_from_size_drops)
{
	start_aged(AGED_JOBS, AGED_MAIL, "4KiB", "1m");
	const char *payload = payload_of(1000, 'x');
	fake.wall_ms = T0;
	for(int i = 0; i < 10; i++) engine_dead_letter(&d, i % 2 ? "jobs/a" : "mail/b", payload);
	uint64_t dropped = d.counters.dead_letters_dropped;
	size_t kept = d.letters.count;
	ck_assert_uint_gt(dropped, 0);
	ck_assert_uint_eq(dropped + kept, 10);
	ck_assert_uint_eq(d.counters.dead_letters_expired, 0);
	tick_after(60000);
	ck_assert_uint_eq(d.letters.count, 0);
	ck_assert_uint_eq(d.counters.dead_letters_expired, kept);
	ck_assert_uint_eq(d.counters.dead_letters_dropped, dropped);
	ck_assert_uint_eq(d.policy_counters[0].dead_letters_expired + d.policy_counters[1].dead_letters_expired, kept);
	stop();
}
END_TEST

/* A dead letter the broker refused at first and accepted only after its
 * age (owed meanwhile) is kept, then dropped at the next tick, counted. */
START_TEST(a_letter_accepted_after_its_age_goes_at_the_next_tick)
{
	start_aged(AGED_JOBS, AGED_MAIL, "64MB", "10s");
	fake.fail_publishes = 1;
	dead_letter_aged("jobs/a", 0);
	ck_assert_uint_eq(d.letters.count, 0);
	fake.fail_publishes = 1000; /* refused at every tick for 11 s */
	for(int i = 0; i < 11; i++) tick_after(1000);
	ck_assert_uint_eq(d.letters.count, 0);
	fake.fail_publishes = 0;
	tick_after(1);
	ck_assert_uint_eq(d.letters.count, 1); /* accepted now, at 11 s of age */
	tick_after(1);
	ck_assert_uint_eq(d.letters.count, 0);
	ck_assert_uint_eq(d.counters.dead_letters_expired, 1);
	stop();
}
END_TEST

/* n letters a millisecond apart from T0, every tenth of the mail policy
 * (kept forever), the others of jobs (an hour): a jobs letter's walk passes
 * the mail ones. */
static void keep_jobs_and_mail(int n)
{
	start_aged(AGED_JOBS, AGED_MAIL " dead_letter_keep_for=forever", "4GB", "1h");
	fake.wall_ms = T0;
	engine_dead_letter(&d, "jobs/a", payload_of(100, 'x'));
	engine_dead_letter(&d, "mail/b", payload_of(100, 'y'));
	engine_keep_letters(&d, 2, n, T0);
	ck_assert_uint_eq(d.letters.count, (size_t)n);
}

/* Many letters past their age at once (a bound shortened by a reload, a
 * clock set forward): a tick drops at most LETTER_STORE_EXPIRE_PER_TICK
 * and the next ones go on, so that no tick holds the broker for the whole
 * backlog; each letter is dropped and counted once, and once none is past
 * its age no pass is due. */
START_TEST(a_backlog_of_aged_letters_goes_over_several_ticks)
{
	enum { N = 10000 };
	keep_jobs_and_mail(N);
	uint64_t aged = 0;
	for(struct dlq_letter *l = d.letters.oldest; l; l = l->newer) aged += l->policy == 0;
	ck_assert_uint_gt(aged, 2 * LETTER_STORE_EXPIRE_PER_TICK);

	tick_after(3600 * 1000 + N); /* every jobs letter is past its hour */
	ck_assert_uint_eq(d.counters.dead_letters_expired, LETTER_STORE_EXPIRE_PER_TICK);
	ck_assert_uint_le(d.letters_due_ms, fake.now_ms);
	unsigned ticks = 1;
	while(d.counters.dead_letters_expired < aged && ticks < 100){
		uint64_t before = d.counters.dead_letters_expired;
		tick_after(1);
		ticks++;
		ck_assert_uint_le(d.counters.dead_letters_expired - before, LETTER_STORE_EXPIRE_PER_TICK);
	}
	ck_assert_uint_eq(ticks, (aged + LETTER_STORE_EXPIRE_PER_TICK - 1) / LETTER_STORE_EXPIRE_PER_TICK);
	ck_assert_uint_eq(d.counters.dead_letters_expired, aged);
	ck_assert_uint_eq(d.policy_counters[0].dead_letters_expired, aged);
	ck_assert_uint_eq(d.letters.count, N - aged);
	/* Only the mail letters are left, kept forever: no pass is due. */
	ck_assert_uint_eq(d.letters_due_ms, UINT64_MAX);
	tick_after(1);
	ck_assert_uint_eq(d.counters.dead_letters_expired, aged);
	stop();
}
END_TEST

/* The tick's cost with 100,000 letters kept under an age bound (printed,
 * not asserted: figures for BENCHMARKS.md): a tick with no pass due, a
 * pass that drops nothing (once a minute, or at a letter's time), and
 * passes that drop 1,000 letters and the rest. */
START_TEST(the_tick_cost_with_100000_letters_kept)
{
	enum { N = 100000, ROUNDS = 1000000, PASSES = 100000 };
	keep_jobs_and_mail(N);
	fake.now_ms += 1000;
	fake.wall_ms += 1000;

	uint64_t t = test_clock_ns();
	for(int i = 0; i < ROUNDS; i++) dlq__tick(&d);
	double idle_ns = (double)(test_clock_ns() - t) / ROUNDS;
	t = test_clock_ns();
	for(int i = 0; i < PASSES; i++) letter_store__expire(&d, fake.now_ms, LETTER_STORE_EXPIRE_PER_TICK);
	double pass_ns = (double)(test_clock_ns() - t) / PASSES;
	ck_assert_uint_eq(d.letters.count, N);

	/* An hour later the first 1,000 letters (by time) are past it. */
	fake.wall_ms = T0 + 3600 * 1000 + 999;
	t = test_clock_ns();
	unsigned dropped = letter_store__expire(&d, fake.now_ms, LETTER_STORE_EXPIRE_PER_TICK);
	double thousand_ns = (double)(test_clock_ns() - t);
	ck_assert_uint_eq(dropped, 1000 - 100);
	/* The other 89,100 jobs letters, a pass a tick at most
	 * LETTER_STORE_EXPIRE_PER_TICK each. */
	fake.wall_ms = T0 + 3600 * 1000 + N;
	double rest_ns = 0, longest_ns = 0;
	unsigned passes = 0;
	dropped = 0;
	while(dropped < N - N / 10 - 900 && passes < 1000){
		t = test_clock_ns();
		unsigned n = letter_store__expire(&d, fake.now_ms, LETTER_STORE_EXPIRE_PER_TICK);
		double ns = (double)(test_clock_ns() - t);
		ck_assert_uint_le(n, LETTER_STORE_EXPIRE_PER_TICK);
		rest_ns += ns;
		if(ns > longest_ns) longest_ns = ns;
		dropped += n;
		passes++;
	}
	ck_assert_uint_eq(dropped, N - N / 10 - 900);
	ck_assert_uint_eq(d.letters.count, N / 10);
	printf("letter_store: %d letters kept under an age bound: a tick with no pass due %.1f ns; a pass that drops "
			"nothing %.1f ns; a pass that drops 900 (walking 1,000) %.1f us (%.0f ns a letter); the other %d jobs "
			"letters in %u passes, the longest %.2f ms, %.1f ms in all (%.0f ns a letter)\n", N, idle_ns, pass_ns,
			thousand_ns / 1e3, thousand_ns / 900, N - N / 10 - 900, passes, longest_ns / 1e6, rest_ns / 1e6,
			rest_ns / (N - N / 10 - 900));
	stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("letter_store");
	check_add(s, tcase_create("letter_store"), CHECK_TESTS(every_dead_letter_is_kept_and_found_under_its_published_id,
			the_bound_drops_the_oldest_and_counts_them, a_letter_larger_than_the_store_is_not_kept_but_counted,
			a_redrive_republishes_tracks_and_then_lets_go, a_refused_redrive_keeps_the_letter,
			with_the_store_off_nothing_is_kept_or_named, a_policy_bound_drops_only_its_own_oldest,
			a_letter_published_again_makes_no_room, pages_follow_their_cursor_in_either_order,
			a_page_goes_on_after_its_last_letter_left, each_filter_narrows_the_page_and_its_count,
			the_cause_filter_lists_one_cause, a_page_ends_early_near_the_reply_bound,
			what_the_asker_may_not_read_is_left_out, a_purge_takes_one_policys_letters, who_the_store_answers,
			the_store_full_warning_comes_once_a_minute, room_for_nothing_brings_the_store_within_a_smaller_bound));

	check_add(s, tcase_create("age"), CHECK_TESTS(letters_past_the_store_age_go_at_the_tick,
			a_policy_age_overrides_the_store_age, age_drops_are_counted_apart_from_size_drops,
			a_letter_accepted_after_its_age_goes_at_the_next_tick, a_backlog_of_aged_letters_goes_over_several_ticks,
			the_tick_cost_with_100000_letters_kept));
	return check_run(s);
}
