/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of letters.c: kept dead letters found by id and listed in the
 * order kept, a second keep of the same id refused, bytes and per-policy
 * tallies kept exact through removals and a new policy table, and many
 * letters growing the table; the tallies by broker sorted by name and
 * exact as letters come and go.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "model/letters.h"
#include "model/policy.h"
#include "util/id.h"

static struct dlq_policy items[2] = {
	{ .filter = "jobs/#", .dead_letter = "dead/jobs", .max_attempts = 3 },
	{ .filter = "mail/#", .dead_letter = "dead/mail", .max_attempts = 3 },
};
static struct dlq_policy_table table = { .items = items, .count = 2, .capacity = 2 };
/* The same filters in the other order, as a reload might leave them. */
static struct dlq_policy swapped_items[3] = {
	{ .filter = "other/#", .dead_letter = "dead/other", .max_attempts = 3 },
	{ .filter = "mail/#", .dead_letter = "dead/mail", .max_attempts = 3 },
	{ .filter = "jobs/#", .dead_letter = "dead/jobs", .max_attempts = 3 },
};
static struct dlq_policy_table swapped = { .items = swapped_items, .count = 3, .capacity = 3 };

/* A dead letter of policy items[p] with id n and a payload of len bytes. */
static struct dlq_envelope *letter(unsigned n, int p, size_t len)
{
	char *payload = malloc(len ? len : 1);
	ck_assert_ptr_nonnull(payload);
	memset(payload, 'a' + (int)(n % 26), len);
	struct dlq_envelope *e = envelope__new(DLQ_ENV_DEAD_LETTER, NULL, items[p].dead_letter, "jobs/x", items[p].filter,
			items[p].dead_letter, "max_attempts (3) reached", "worker", "edge-1", payload, (uint32_t)len, NULL, 0);
	free(payload);
	ck_assert_ptr_nonnull(e);
	memset(&e->id, 0, sizeof(e->id));
	memcpy(e->id.raw, &n, sizeof(n));
	e->id.raw[DLQ_ID_RAW_LEN - 1] = 0x5a; /* never all zero */
	e->retry_count = 3;
	e->time_ms = 1790000000000LL + n;
	e->policy = &items[p];
	return e;
}

static struct dlq_id id_of(unsigned n)
{
	struct dlq_id id;
	memset(&id, 0, sizeof(id));
	memcpy(id.raw, &n, sizeof(n));
	id.raw[DLQ_ID_RAW_LEN - 1] = 0x5a;
	return id;
}

START_TEST(letters_are_kept_in_order_and_found_by_id)
{
	struct dlq_letters s;
	ck_assert_int_eq(letters__init(&s, &table, 1u << 20), 0);
	struct dlq_letter *l;
	for(unsigned n = 1; n <= 3; n++){
		struct dlq_envelope *e = letter(n, 0, 10);
		ck_assert_int_eq(letters__adopt(&s, envelope__copy(e), &table, &l), 0);
		/* The engine's copy, every field of it. */
		ck_assert_ptr_ne(l->env, e);
		ck_assert_ptr_null(l->env->policy);
		ck_assert_int_eq(l->env->retry_count, 3);
		ck_assert_mem_eq(l->env->payload, e->payload, 10);
		ck_assert_str_eq(l->env->reason, "max_attempts (3) reached");
		envelope__free(e);
	}
	ck_assert_uint_eq(s.count, 3);
	unsigned n = 1;
	for(struct dlq_letter *k = s.oldest; k; k = k->newer, n++){
		struct dlq_id want = id_of(n);
		ck_assert_mem_eq(k->env->id.raw, want.raw, DLQ_ID_RAW_LEN);
		if(k->newer) ck_assert_uint_lt(k->order, k->newer->order);
	}
	ck_assert_uint_eq(n, 4);
	struct dlq_id two = id_of(2), nine = id_of(9);
	ck_assert_ptr_nonnull(letters__find(&s, &two));
	ck_assert_ptr_null(letters__find(&s, &nine));

	/* The same id again (a dead letter published again after a restart). */
	struct dlq_envelope *again = letter(2, 0, 10);
	ck_assert_int_eq(letters__adopt(&s, again, &table, &l), EEXIST);
	ck_assert_ptr_eq(l, letters__find(&s, &two));
	ck_assert_uint_eq(s.count, 3);

	/* Removed from the middle: the list and the table stay whole. */
	struct dlq_letter *mid = letters__find(&s, &two);
	letters__remove(&s, mid);
	letters__free(mid);
	ck_assert_ptr_null(letters__find(&s, &two));
	ck_assert_ptr_eq(s.oldest->newer, s.newest);
	ck_assert_ptr_eq(s.newest->older, s.oldest);
	ck_assert_uint_eq(s.count, 2);
	letters__cleanup(&s);
}
END_TEST

START_TEST(bytes_and_tallies_follow_the_letters_and_a_new_table)
{
	struct dlq_letters s;
	ck_assert_int_eq(letters__init(&s, &table, 1u << 20), 0);
	struct dlq_letter *l;
	uint64_t bytes = 0;
	for(unsigned n = 1; n <= 5; n++){
		struct dlq_envelope *e = letter(n, n % 2 ? 0 : 1, 100 * n);
		bytes += letters__bytes_of(e);
		ck_assert_uint_ge(letters__bytes_of(e), 100 * n);
		ck_assert_int_eq(letters__adopt(&s, e, &table, &l), 0);
	}
	ck_assert_uint_eq(s.bytes, bytes);
	struct dlq_letter_tally jobs = letters__tally(&s, 0), mail = letters__tally(&s, 1);
	ck_assert_uint_eq(jobs.count, 3);
	ck_assert_uint_eq(mail.count, 2);
	ck_assert_uint_eq(jobs.bytes + mail.bytes, bytes);
	ck_assert_uint_eq(letters__tally(&s, 2).count, 0); /* out of range: zero */
	/* Each policy's oldest, and after it goes, the next of that policy. */
	struct dlq_letter *first_jobs = letters__oldest_of(&s, 0), *first_mail = letters__oldest_of(&s, 1);
	ck_assert_ptr_eq(first_jobs, s.oldest);
	ck_assert_ptr_eq(first_mail, s.oldest->newer);
	letters__remove(&s, first_jobs);
	letters__free(first_jobs);
	ck_assert_ptr_eq(letters__oldest_of(&s, 0), s.oldest->newer);
	ck_assert_ptr_eq(letters__oldest_of(&s, 1), s.oldest);
	ck_assert_ptr_null(letters__oldest_of(&s, 2));
	jobs = letters__tally(&s, 0);
	bytes = s.bytes;

	/* A reload puts the filters elsewhere: the tallies follow them. */
	ck_assert_int_eq(letters__retable(&s, &swapped), 0);
	ck_assert_uint_eq(letters__tally(&s, 0).count, 0);
	ck_assert_uint_eq(letters__tally(&s, 1).count, 2);
	ck_assert_uint_eq(letters__tally(&s, 2).count, 2);
	ck_assert_uint_eq(letters__tally(&s, 2).bytes, jobs.bytes);
	ck_assert_ptr_eq(letters__oldest_of(&s, 2), s.oldest->newer);

	/* The oldest dropped, as the engine does for the bound. */
	ck_assert(letters__over(&s, s.max_bytes - s.bytes + 1));
	ck_assert(!letters__over(&s, s.max_bytes - s.bytes));
	while(s.oldest){
		l = s.oldest;
		letters__remove(&s, l);
		letters__free(l);
	}
	ck_assert_uint_eq(s.bytes, 0);
	ck_assert_uint_eq(letters__tally(&s, 1).count, 0);
	ck_assert_uint_eq(letters__tally(&s, 2).bytes, 0);
	ck_assert_ptr_null(s.newest);
	letters__cleanup(&s);
}
END_TEST

START_TEST(a_letter_of_a_filter_no_policy_has_is_kept_untallied)
{
	struct dlq_letters s;
	ck_assert_int_eq(letters__init(&s, &table, 1u << 20), 0);
	struct dlq_envelope *e = envelope__new(DLQ_ENV_DEAD_LETTER, NULL, "dead/gone", "gone/x", "gone/#", "dead/gone",
			"why", "c", "edge-1", "p", 1, NULL, 0);
	ck_assert_ptr_nonnull(e);
	e->id = id_of(77);
	struct dlq_letter *l;
	ck_assert_int_eq(letters__adopt(&s, e, &table, &l), 0);
	ck_assert_int_eq(l->policy, -1);
	ck_assert_uint_eq(letters__tally(&s, 0).count + letters__tally(&s, 1).count, 0);
	ck_assert_uint_eq(s.count, 1);
	/* An adopted envelope of an id already kept is freed, not kept. */
	struct dlq_envelope *dup = envelope__copy(l->env);
	ck_assert_ptr_nonnull(dup);
	ck_assert_int_eq(letters__adopt(&s, dup, &table, &l), EEXIST);
	ck_assert_uint_eq(s.count, 1);
	letters__cleanup(&s);
}
END_TEST

START_TEST(many_letters_grow_the_table)
{
	enum { N = 5000 };
	struct dlq_letters s;
	ck_assert_int_eq(letters__init(&s, &table, 1u << 30), 0);
	struct dlq_letter *l;
	for(unsigned n = 1; n <= N; n++){
		ck_assert_int_eq(letters__adopt(&s, letter(n, 0, 8), &table, &l), 0);
	}
	ck_assert_uint_ge(s.index.size, 4096);
	for(unsigned n = 1; n <= N; n++){
		struct dlq_id id = id_of(n);
		l = letters__find(&s, &id);
		ck_assert_ptr_nonnull(l);
		ck_assert(l->env->time_ms == 1790000000000LL + n);
	}
	ck_assert_uint_eq(letters__tally(&s, 0).count, N);
	letters__cleanup(&s);
	ck_assert_uint_eq(s.count, 0);
}
END_TEST

/* A dead letter with id n made by the broker named broker (NULL: none). */
static struct dlq_envelope *letter_of(unsigned n, const char *broker)
{
	struct dlq_envelope *e = envelope__new(DLQ_ENV_DEAD_LETTER, NULL, "dead/jobs", "jobs/x", "jobs/#", "dead/jobs",
			"max_attempts (3) reached", "worker", broker, "x", 1, NULL, 0);
	ck_assert_ptr_nonnull(e);
	struct dlq_id id = id_of(n);
	e->id = id;
	e->time_ms = 1790000000000LL + n;
	return e;
}

/* The tally of broker name, which must be there. */
static const struct dlq_broker_tally *tally_of(const struct dlq_letters *s, const char *name)
{
	size_t n;
	const struct dlq_broker_tally *t = letters__brokers(s, &n);
	for(size_t i = 0; i < n; i++){
		if(!strcmp(t[i].name, name)) return &t[i];
	}
	ck_abort_msg("no tally of broker \"%s\"", name);
	return NULL;
}

START_TEST(each_brokers_letters_are_tallied_as_they_come_and_go)
{
	struct dlq_letters s;
	ck_assert_int_eq(letters__init(&s, &table, 1u << 20), 0);
	const char *makers[] = { "edge-2", "edge-1", "edge-3", "edge-1", NULL, "edge-1" };
	struct dlq_letter *kept[6];
	for(unsigned n = 0; n < 6; n++){
		ck_assert_int_eq(letters__adopt(&s, letter_of(n + 1, makers[n]), &table, &kept[n]), 0);
	}
	size_t count;
	const struct dlq_broker_tally *t = letters__brokers(&s, &count);
	/* By name; a letter without a broker's name under "". */
	ck_assert_uint_eq(count, 4);
	ck_assert_str_eq(t[0].name, "");
	ck_assert_str_eq(t[1].name, "edge-1");
	ck_assert_str_eq(t[2].name, "edge-2");
	ck_assert_str_eq(t[3].name, "edge-3");
	ck_assert_uint_eq(tally_of(&s, "edge-1")->count, 3);
	ck_assert_ptr_eq(tally_of(&s, "edge-1")->newest, kept[5]);
	ck_assert_uint_eq(tally_of(&s, "edge-2")->count, 1);
	uint64_t bytes = 0;
	for(size_t i = 0; i < count; i++){
		bytes += t[i].bytes;
	}
	ck_assert_uint_eq(bytes, s.bytes);
	/* edge-1's newest deleted: its next newest is found older. */
	letters__remove(&s, kept[5]);
	letters__free(kept[5]);
	ck_assert_uint_eq(tally_of(&s, "edge-1")->count, 2);
	ck_assert_ptr_eq(tally_of(&s, "edge-1")->newest, kept[3]);
	ck_assert_uint_eq(tally_of(&s, "edge-1")->bytes, kept[1]->bytes + kept[3]->bytes);
	/* An older one of edge-1 leaves: the newest stays. */
	letters__remove(&s, kept[1]);
	letters__free(kept[1]);
	ck_assert_ptr_eq(tally_of(&s, "edge-1")->newest, kept[3]);
	/* edge-2's only letter leaves: so does its tally. */
	letters__remove(&s, kept[0]);
	letters__free(kept[0]);
	t = letters__brokers(&s, &count);
	ck_assert_uint_eq(count, 3);
	ck_assert_str_eq(t[2].name, "edge-3");
	/* Many brokers stay sorted. */
	for(unsigned n = 100; n < 400; n++){
		char name[16];
		snprintf(name, sizeof(name), "b%u", (n * 7919u) % 1000u);
		struct dlq_letter *l;
		ck_assert_int_eq(letters__adopt(&s, letter_of(n, name), &table, &l), 0);
	}
	t = letters__brokers(&s, &count);
	ck_assert_uint_eq(count, 303);
	for(size_t i = 1; i < count; i++){
		ck_assert_int_lt(strcmp(t[i - 1].name, t[i].name), 0);
	}
	letters__cleanup(&s);
	ck_assert_uint_eq(s.broker_count, 0);
}
END_TEST

int main(void)
{
	return check_run(check_suite("letters", tcase_create("letters"),
			CHECK_TESTS(letters_are_kept_in_order_and_found_by_id, bytes_and_tallies_follow_the_letters_and_a_new_table,
			a_letter_of_a_filter_no_policy_has_is_kept_untallied, many_letters_grow_the_table,
			each_brokers_letters_are_tallied_as_they_come_and_go)));
}
