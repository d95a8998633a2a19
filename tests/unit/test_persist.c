/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of persist.c, durability as the engine drives it, with a state
 * file in a private temporary directory and the fake port's clocks: a first
 * start writes a snapshot; what is delayed, owed or not yet taken at shutdown
 * comes back at the next start and goes out when due; a targeted copy whose
 * subscriber cannot have a session after the restart becomes a dead letter;
 * a damaged file (or one holding properties MQTT refuses) is kept aside,
 * named in the log, and the start goes on; with
 * state_save_on_change the journal holds every change, so a crash (the files
 * as they were, no shutdown) loses nothing, kept dead letters included (and
 * one deleted stays deleted); snapshots follow the interval;
 * what the broker took is kept until its database file is replaced.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_suite.h"
#include "config/config.h"
#include "engine/dlq.h"
#include "engine/letter_store.h"
#include "engine_calls.h"
#include "fake_port.h"
#include "model/envelope.h"
#include "model/letters.h"
#include "mosquitto_dlq.h"
#include "store/persist.h"
#include "store/state.h"
#include "test_util.h"
#include "util/headers.h"
#include "util/id.h"


static const char *const policies[] = {
	"numbers max_attempts=3 dead_letter=dead/numbers",
	"slow max_attempts=3 dead_letter=dead/slow retry_delay=30s",
	"fixed/+ max_attempts=3 dead_letter=dead/fixed retry_to=fixed/retry retry_delay=30s",
	"once max_attempts=1 dead_letter=dead/once",
};

static char dir[64];
static char state_path[256];
static char journal_path[300];
static struct dlq d;
static bool d_live;

/* Options: the policies, the state file, and extra key/value pairs. */
struct extra {
	const char *key;
	const char *value;
};

/* The same with the fixture's flags (enum engine_flag). */
static int try_start_flags(const char *path, const struct extra *extra, size_t n_extra, unsigned flags,
		char *err, size_t errlen)
{
	struct dlq_option opts[16];
	size_t n = 0;
	for(size_t i = 0; i < ARRAY_LEN(policies); i++){
		opts[n++] = (struct dlq_option){"policy", policies[i]};
	}
	opts[n++] = (struct dlq_option){"state_file", path};
	for(size_t i = 0; i < n_extra; i++){
		opts[n++] = (struct dlq_option){extra[i].key, extra[i].value};
	}
	int rc = engine_try_start(&d, &d_live, opts, n, flags, err, errlen);
	ck_assert_msg(rc == 0 || d_live, "%s", err);
	return rc;
}

static int try_start(const char *path, const struct extra *extra, size_t n_extra, bool broker_persistence,
		char *err, size_t errlen)
{
	return try_start_flags(path, extra, n_extra, broker_persistence ? ENGINE_BROKER_PERSISTENCE : 0, err, errlen);
}

static void start_flags(const struct extra *extra, size_t n_extra, unsigned flags)
{
	char err[512];
	int rc = try_start_flags(state_path, extra, n_extra, flags, err, sizeof(err));
	ck_assert_msg(rc == 0, "dlq__init: %s", err);
}

static void start_with(const struct extra *extra, size_t n_extra, bool broker_persistence)
{
	char err[512];
	int rc = try_start(state_path, extra, n_extra, broker_persistence, err, sizeof(err));
	ck_assert_msg(rc == 0, "dlq__init: %s", err);
}

static void start(void)
{
	start_with(NULL, 0, true);
}

static void stop(void)
{
	engine_stop(&d, &d_live);
}

/* A broker restart: shutdown (saves), both clocks move (the monotonic one
 * to a new base), and a new start. */
static void restart_with(const struct extra *extra, size_t n_extra, bool broker_persistence, uint64_t down_ms)
{
	stop();
	fake.now_ms = 50000000;
	fake.wall_ms += (int64_t)down_ms;
	start_with(extra, n_extra, broker_persistence);
}

static void track(const char *topic, const char *payload, char id[DLQ_ID_LEN + 1])
{
	engine_track(&d, topic, payload, 1, NULL, id);
}

static enum dlq_nack_status nack(const char *id, const char *client, bool persists)
{
	return engine_nack(&d, id, client, persists);
}

static const struct fake_publish *pub(size_t i)
{
	ck_assert_msg(i < fake.publish_count, "publish #%zu missing (%zu made)", i, fake.publish_count);
	return &fake.publishes[i];
}

static const char *hdr(size_t i, const char *name)
{
	return fake_header_value(pub(i), name);
}

static bool exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

static void read_all(const char *path, uint8_t **data, size_t *len)
{
	char err[256];
	ck_assert_int_eq(state_file__read(path, data, len, err, sizeof(err)), 0);
	ck_assert_msg(*data != NULL, "%s does not exist", path);
}

static void write_all(const char *path, const void *data, size_t len)
{
	char err[256];
	ck_assert_msg(state_file__write(path, data, len, err, sizeof(err)) == 0, "%s", err);
}

/* The types of the entries of a journal file, as a string of digits. */
static void journal_types(char *out, size_t size)
{
	uint8_t *data;
	size_t len;
	read_all(journal_path, &data, &len);
	ck_assert_uint_ge(len, 8);
	ck_assert_mem_eq(data, "DLQJRNL1", 8);
	size_t pos = 8, n = 0;
	/* Each journal begins with its generation (type 11): not listed. */
	ck_assert_uint_ge(len - pos, 9);
	ck_assert_uint_eq(data[pos], 11);
	pos += 9 + 8;
	while(pos < len && n + 1 < size){
		ck_assert_uint_ge(len - pos, 9);
		uint32_t blen = ((uint32_t)data[pos + 1] << 24) | ((uint32_t)data[pos + 2] << 16) | ((uint32_t)data[pos + 3] << 8) | data[pos + 4];
		out[n++] = (char)('0' + data[pos]);
		pos += 9 + blen;
	}
	out[n] = '\0';
	ck_assert_uint_eq(pos, len);
	free(data);
}

/* Decodes the state file (and journal, if any) into a fresh engine without
 * a state file, the way a start would, and reports what it found. */
static void decode_files(const char *snapshot, const char *journal, struct state_report *rep, struct dlq *into)
{
	struct dlq_option opts[ARRAY_LEN(policies)];
	for(size_t i = 0; i < ARRAY_LEN(policies); i++){
		opts[i] = (struct dlq_option){"policy", policies[i]};
	}
	engine_start(into, NULL, opts, ARRAY_LEN(opts), 0);
	memset(rep, 0, sizeof(*rep));
	uint8_t *data;
	size_t len;
	read_all(snapshot, &data, &len);
	ck_assert_int_eq(state_read__decode_snapshot(engine__state_view(into), data, len, fake.now_ms, fake.wall_ms, rep), 0);
	free(data);
	if(journal){
		read_all(journal, &data, &len);
		ck_assert_int_eq(state_read__decode_journal(engine__state_view(into), data, len, fake.now_ms, fake.wall_ms, rep), 0);
		free(data);
	}
}

/* Where the entries of a snapshot file begin (the format of state.c:
 * a 16-byte header, then type (1), length (4), body, CRC (4)). */
static size_t entry_offsets(const uint8_t *p, size_t len, size_t *at, size_t max)
{
	size_t n = 0, pos = 16;
	while(pos + 9 <= len && n < max){
		uint32_t blen = ((uint32_t)p[pos + 1] << 24) | ((uint32_t)p[pos + 2] << 16) | ((uint32_t)p[pos + 3] << 8) | p[pos + 4];
		at[n++] = pos;
		pos += 9 + blen;
	}
	ck_assert_uint_eq(pos, len);
	return n;
}

/* The state file holds a whole snapshot with nothing in it. */
static void expect_empty_snapshot(void)
{
	struct dlq replay;
	struct state_report rep;
	decode_files(state_path, NULL, &rep, &replay);
	ck_assert_msg(!rep.damaged, "damaged: %s", rep.problem);
	ck_assert_uint_eq(rep.records + rep.records_skipped + rep.envelopes, 0);
	dlq__cleanup(&replay);
}

static size_t envelopes(const struct dlq *e)
{
	return e->outbox.owed.count + e->outbox.sent.count + e->outbox.settling.count + e->delayed.count;
}

/* Copies the state files as they are now to <dir>/crash, <dir>/crash.journal:
 * what a crash at this moment would leave behind. */
static void crash_image(char *path, size_t size)
{
	snprintf(path, size, "%s/crash", dir);
	uint8_t *data;
	size_t len;
	read_all(state_path, &data, &len);
	write_all(path, data, len);
	free(data);
	char err[256], jpath[200];
	snprintf(jpath, sizeof(jpath), "%s.journal", path);
	ck_assert_int_eq(state_file__read(journal_path, &data, &len, err, sizeof(err)), 0);
	if(data){
		write_all(jpath, data, len);
		free(data);
	}
}

static void remove_all(const char *path)
{
	char p[300];
	unlink(path);
	snprintf(p, sizeof(p), "%s.journal", path);
	unlink(p);
	snprintf(p, sizeof(p), "%s.tmp", path);
	unlink(p);
}

/* ------------------------------------------------------------------ */

static const struct extra on_change[] = {{"state_save_on_change", "true"}};

START_TEST(a_first_start_writes_an_empty_snapshot)
{
	ck_assert(!exists(state_path));
	start();
	uint8_t *data;
	size_t len;
	read_all(state_path, &data, &len);
	ck_assert_uint_ge(len, 16);
	ck_assert_mem_eq(data, "DLQSTAT1", 8);
	free(data);
	expect_empty_snapshot();
	/* Without state_save_on_change there is no journal. */
	ck_assert(!exists(journal_path));
	ck_assert_int_eq(d.persist.journal_fd, -1);
	ck_assert_uint_eq(fake.publish_count, 0);
}
END_TEST

START_TEST(a_delayed_copy_comes_back_after_a_restart_and_goes_out_on_time)
{
	start();
	char id[DLQ_ID_LEN + 1];
	track("fixed/1", "later", id);
	int64_t nacked_at = fake.wall_ms;
	ck_assert_int_eq(nack(id, "sub1", false), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(d.delayed.count, 1);
	ck_assert_uint_eq(fake.publish_count, 0);

	restart_with(NULL, 0, true, 10000);
	ck_assert(fake_logged("restored 1 NACKable deliveries"));
	ck_assert(!fake_logged("lost at shutdown"));
	ck_assert_uint_eq(d.delayed.count, 1);
	uint64_t t = fake.now_ms;
	dlq__tick(&d);
	fake.now_ms = t + 19999;
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 0);
	fake.now_ms = t + 20000;
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert_ptr_null(pub(0)->client);
	ck_assert_str_eq(pub(0)->topic, "fixed/retry");
	ck_assert_uint_eq(pub(0)->payload_len, 5);
	ck_assert_mem_eq(pub(0)->payload, "later", 5);
	ck_assert_str_eq(hdr(0, DLQ_PROP_RETRY_COUNT), "1");
	ck_assert_str_eq(hdr(0, DLQ_PROP_ORIGIN_ID), id);
	char when[32];
	envelope__format_time(nacked_at, when);
	ck_assert_str_eq(hdr(0, DLQ_PROP_FIRST_NACK_TIME), when);
	dlq__tick(&d);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 1);

	/* The message delivered before the restart can still be NACKed by
	 * another subscriber, and its first NACKer is still remembered. */
	ck_assert_int_eq(nack(id, "sub1", false), DLQ_NACK_DUPLICATE);
	ck_assert_int_eq(nack(id, "sub2", false), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(d.delayed.count, 1);
}
END_TEST

START_TEST(a_targeted_copy_reaches_a_persisting_session_after_a_restart)
{
	start();
	char id[DLQ_ID_LEN + 1];
	track("slow", "for sub1", id);
	ck_assert_int_eq(nack(id, "sub1", true), DLQ_NACK_RETRIED);
	restart_with(NULL, 0, true, 5000);
	uint64_t t = fake.now_ms;
	dlq__tick(&d);
	fake.now_ms = t + 24999;
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 0);
	fake.now_ms = t + 25000;
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert_str_eq(pub(0)->client, "sub1");
	ck_assert_str_eq(pub(0)->topic, "slow");
	ck_assert_str_eq(hdr(0, DLQ_PROP_RETRY_COUNT), "1");
}
END_TEST

/* Redelivery tracking across a restart, on 2.0: the broker restores a
 * session's message from its own persistence file, at another address than
 * the one the plugin bound when it tracked it. The restored record is found
 * by its content, and its delivery's count is restored with it: a subscriber
 * that keeps crashing on it goes on from the count it had. Sent once before
 * the restart (attempt 1, held while connected on connection 1), the resend
 * right after the reconnect's CONNACK (connection 2, before the client did
 * anything else) is attempt 2, connection 3's is attempt 3, and connection 4
 * gets it no more: a dead letter with retry-count 3. */
static const struct extra tracking[] = { {"redelivery_tracking", "allow"} };
static const struct extra tracking_on_change[] = { {"redelivery_tracking", "allow"}, {"state_save_on_change", "true"} };

/* A crash: the state files as they are now, no shutdown, then a start on
 * them (crash_image) with both clocks moved on. */
static void crash_restart_with(const struct extra *extra, size_t n_extra, unsigned flags)
{
	char crash[200];
	crash_image(crash, sizeof(crash));
	stop();
	remove_all(state_path);
	snprintf(state_path, sizeof(state_path), "%s", crash);
	snprintf(journal_path, sizeof(journal_path), "%s.journal", crash);
	fake.now_ms = 70000000;
	fake.wall_ms += 2000;
	start_flags(extra, n_extra, flags);
}

/* Reconnections of client "s" on connections first..last, each with the
 * READ check of c the broker makes for the message still in flight; each
 * must leave it in the session (counted, not removed). */
static void reconnect_keeping(struct dlq_read_check *c, uintptr_t first, uintptr_t last)
{
	for(uintptr_t conn = first; conn <= last; conn++){
		c->conn = conn;
		ck_assert_msg(!dlq__read_check(&d, c), "removed at connection %u", (unsigned)conn);
		dlq__event(&d);
		dlq__client_left(&d, "s", conn, false);
	}
}

/* The message is diverted at connection conn: its dead letter says it was
 * delivered 3 times. */
static void diverted_at(struct dlq_read_check *c, uintptr_t conn, const char *id)
{
	size_t before = fake.publish_count;
	c->conn = conn;
	ck_assert_msg(dlq__read_check(&d, c), "not removed at connection %u", (unsigned)conn);
	ck_assert_uint_eq(engine__totals(&d)->diverted, 1);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, before + 1);
	ck_assert_str_eq(pub(before)->topic, "dead/numbers");
	ck_assert_str_eq(hdr(before, DLQ_PROP_ORIGIN_ID), id);
	ck_assert_str_eq(hdr(before, DLQ_PROP_RETRY_COUNT), "3");
	ck_assert_msg(strstr(hdr(before, DLQ_PROP_DEAD_LETTER_REASON), "delivered 3 times") != NULL, "reason: %s",
			hdr(before, DLQ_PROP_DEAD_LETTER_REASON));
	ck_assert_str_eq(hdr(before, DLQ_PROP_DEAD_LETTER_CAUSE), DLQ_CAUSE_REDELIVERY_LIMIT);
}

/* 2.0: payload tracked on "numbers" (its dlq-id in id), routed to "s"
 * while it is connected on connection 1 (attempt 1), then "s" leaves; c is
 * the READ check the broker makes for it. */
static void delivered_once(char *payload, char id[DLQ_ID_LEN + 1], struct dlq_read_check *c)
{
	dlq__client_active(&d, "s", 1);
	const struct dlq_policy *p = dlq__policy_for(&d, "numbers");
	ck_assert_int_eq(dlq__track(&d, p, "numbers", payload, (uint32_t)strlen(payload), 1, NULL, 0, id), 0);
	*c = (struct dlq_read_check){ .client = "s", .conn = 1, .topic = "numbers", .payload = payload,
		.payload_len = (uint32_t)strlen(payload), .qos = 1 };
	ck_assert(!dlq__read_check(&d, c));
	dlq__event(&d);
	dlq__client_left(&d, "s", 1, false);
}

START_TEST(a_message_in_a_session_across_a_restart_goes_on_from_its_count)
{
	static char before[] = "poison", after[] = "poison";
	start_with(tracking, 1, true);
	char id[DLQ_ID_LEN + 1];
	struct dlq_read_check c;
	delivered_once(before, id, &c);
	restart_with(tracking, 1, true, 1000);

	c.payload = after;
	reconnect_keeping(&c, 2, 3);
	ck_assert_uint_eq(engine__totals(&d)->redeliveries, 2);
	diverted_at(&c, 4, id);
}
END_TEST

/* The same across a crash with state_save_on_change: the journal holds the
 * delivery's counts as they changed (entries of type 7). Sent on
 * connection 1 and again on 2 (attempt 2) before the crash; after it,
 * connection 3's resend is attempt 3, and connection 4 gets a dead letter. */
START_TEST(after_a_crash_the_journal_continues_a_count)
{
	static char before[] = "poison", after[] = "poison";
	start_with(tracking_on_change, 2, true);
	char id[DLQ_ID_LEN + 1];
	struct dlq_read_check c;
	delivered_once(before, id, &c);
	reconnect_keeping(&c, 2, 2);
	ck_assert_uint_eq(engine__totals(&d)->redeliveries, 1);
	char types[64];
	journal_types(types, sizeof(types));
	ck_assert_msg(strchr(types, '7') != NULL, "no delivery entry in the journal: %s", types);

	crash_restart_with(tracking_on_change, 2, ENGINE_BROKER_PERSISTENCE);
	c.payload = after;
	reconnect_keeping(&c, 3, 3);
	diverted_at(&c, 4, id);
}
END_TEST

/* 2.1's exact counting across a restart: the sends of a record to a client
 * are restored, so the next send is the next attempt (what delivery-count
 * says), and the reconnect's check after the third send removes it. */
static void sent_is_attempt(const char *id, const char *payload, unsigned want)
{
	struct dlq_send s;
	dlq__sent(&d, "s", 0, id, DLQ_ID_LEN, "numbers", payload, (uint32_t)strlen(payload), &s);
	ck_assert_uint_eq(s.attempt, want);
}

static void exact_restart(bool crash)
{
	static char payload[] = "poison";
	unsigned flags = ENGINE_BROKER_PERSISTENCE | ENGINE_EXACT_COUNTING;
	const struct extra *extra = crash ? tracking_on_change : tracking;
	size_t n_extra = crash ? 2 : 1;
	start_flags(extra, n_extra, flags);
	char id[DLQ_ID_LEN + 1];
	const struct dlq_policy *p = dlq__policy_for(&d, "numbers");
	ck_assert_int_eq(dlq__track(&d, p, "numbers", payload, (uint32_t)strlen(payload), 1, NULL, 0, id), 0);
	dlq__client_active(&d, "s", 1);
	sent_is_attempt(id, payload, 1);
	if(crash){
		dlq__client_left(&d, "s", 1, false);
		struct dlq_read_check c = { .client = "s", .conn = 2, .topic = "numbers", .payload = payload,
			.payload_len = (uint32_t)strlen(payload), .qos = 1, .id = id };
		ck_assert(!dlq__read_check(&d, &c));
		dlq__client_active(&d, "s", 2);
		sent_is_attempt(id, payload, 2);
		crash_restart_with(extra, n_extra, flags);
	}else{
		stop();
		fake.now_ms = 50000000;
		fake.wall_ms += 1000;
		start_flags(extra, n_extra, flags);
	}
	/* Reconnections after the restart: the check leaves it, the resend is
	 * the next attempt. */
	for(unsigned attempt = crash ? 3 : 2, conn = 3; attempt <= 3; attempt++, conn++){
		struct dlq_read_check c = { .client = "s", .conn = conn, .topic = "numbers", .payload = payload,
			.payload_len = (uint32_t)strlen(payload), .qos = 1, .id = id };
		ck_assert_msg(!dlq__read_check(&d, &c), "removed before attempt %u", attempt);
		dlq__client_active(&d, "s", conn);
		sent_is_attempt(id, payload, attempt);
		dlq__client_left(&d, "s", conn, false);
	}
	struct dlq_read_check c = { .client = "s", .topic = "numbers", .payload = payload,
		.payload_len = (uint32_t)strlen(payload), .qos = 1, .id = id };
	diverted_at(&c, 9, id);
}

START_TEST(exact_counts_go_on_after_a_restart)
{
	exact_restart(false);
}
END_TEST

START_TEST(exact_counts_go_on_after_a_crash)
{
	exact_restart(true);
}
END_TEST

START_TEST(without_broker_persistence_a_restored_targeted_copy_becomes_a_dead_letter)
{
	start();
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1], c[DLQ_ID_LEN + 1];
	track("slow", "delayed for sub1", a);
	track("numbers", "sent to sub2", b);
	track("fixed/7", "for everyone", c);
	ck_assert_int_eq(nack(a, "sub1", true), DLQ_NACK_RETRIED);
	ck_assert_int_eq(nack(b, "sub2", true), DLQ_NACK_RETRIED); /* accepted, never taken */
	ck_assert_int_eq(nack(c, "sub3", true), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(fake.publish_count, 1);

	restart_with(NULL, 0, false, 1000);
	uint64_t t = fake.now_ms;
	dlq__tick(&d);
	/* Both targeted copies go to the dead-letter topic at once. */
	ck_assert_uint_eq(fake.publish_count, 3);
	bool seen1 = false, seen2 = false;
	for(size_t i = 1; i < 3; i++){
		const struct fake_publish *p = pub(i);
		ck_assert_ptr_null(p->client);
		const char *reason = hdr(i, DLQ_PROP_DEAD_LETTER_REASON);
		ck_assert_ptr_nonnull(reason);
		ck_assert_msg(strstr(reason, "restart") != NULL, "reason \"%s\" does not mention the restart", reason);
		ck_assert_str_eq(hdr(i, DLQ_PROP_DEAD_LETTER_CAUSE), DLQ_CAUSE_RESTART);
		if(!strcmp(p->topic, "dead/slow")){
			seen1 = true;
			ck_assert_str_eq(hdr(i, DLQ_PROP_DEAD_LETTER_CLIENT), "sub1");
			ck_assert_str_eq(hdr(i, DLQ_PROP_ORIGIN_ID), a);
			ck_assert_str_eq(hdr(i, DLQ_PROP_RETRY_COUNT), "1");
			ck_assert_msg(strstr(reason, "sub1") != NULL, "reason \"%s\"", reason);
		}else{
			ck_assert_str_eq(p->topic, "dead/numbers");
			seen2 = true;
			ck_assert_str_eq(hdr(i, DLQ_PROP_DEAD_LETTER_CLIENT), "sub2");
			ck_assert_str_eq(hdr(i, DLQ_PROP_ORIGIN_ID), b);
		}
	}
	ck_assert(seen1 && seen2);
	/* The copy for everyone still goes out when due. */
	fake.now_ms = t + 29000;
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 4);
	ck_assert_str_eq(pub(3)->topic, "fixed/retry");
	ck_assert_ptr_null(pub(3)->client);
	fake.now_ms = t + 60000;
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 4);
}
END_TEST

START_TEST(a_v5_subscriber_has_no_session_after_a_restart)
{
	/* A client whose session is not known to persist (v5: the plugin cannot
	 * tell) loses its copy with the restart, broker persistence or not. */
	start();
	char a[DLQ_ID_LEN + 1];
	track("slow", "x", a);
	ck_assert_int_eq(nack(a, "v5client", false), DLQ_NACK_RETRIED);
	restart_with(NULL, 0, true, 1000);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert_str_eq(pub(0)->topic, "dead/slow");
	const char *reason = hdr(0, DLQ_PROP_DEAD_LETTER_REASON);
	ck_assert_msg(strstr(reason, "restart") && strstr(reason, "v5client"), "reason \"%s\"", reason);
}
END_TEST

/* A copy the broker took for a client whose session does not persist is
 * held until the client NACKs it (holds.h). Its session does not survive a
 * restart, so the restarted plugin dead-letters it, once; the copy is not
 * sent again. */
START_TEST(a_held_copy_becomes_a_dead_letter_after_a_restart)
{
	start();
	char a[DLQ_ID_LEN + 1];
	track("numbers", "held", a);
	ck_assert_int_eq(nack(a, "sub1", false), DLQ_NACK_RETRIED);
	dlq__tick(&d);
	dlq__tick(&d);
	ck_assert_uint_eq(engine__owed_count(&d), 0);
	ck_assert_uint_eq(d.holds.records, 1);
	size_t before = fake.publish_count;
	restart_with(NULL, 0, true, 1000);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, before + 1);
	ck_assert_str_eq(pub(before)->topic, "dead/numbers");
	ck_assert_ptr_null(pub(before)->client);
	ck_assert_str_eq(hdr(before, DLQ_PROP_RETRY_COUNT), "1");
	ck_assert_str_eq(hdr(before, DLQ_PROP_ORIGIN_ID), a);
	ck_assert_str_eq(hdr(before, DLQ_PROP_DEAD_LETTER_CLIENT), "sub1");
	const char *reason = hdr(before, DLQ_PROP_DEAD_LETTER_REASON);
	ck_assert_msg(strstr(reason, "restarted") && strstr(reason, "\"sub1\""), "reason \"%s\"", reason);
	ck_assert_str_eq(hdr(before, DLQ_PROP_DEAD_LETTER_CAUSE), DLQ_CAUSE_RESTART);
	ck_assert_uint_eq(engine__totals(&d)->dead_letters_by_cause[DLQ_DEAD_RESTART], 1);
	ck_assert_uint_eq(d.holds.records, 0);
	dlq__tick(&d); /* the broker took the dead letter */

	restart_with(NULL, 0, true, 1000);
	dlq__tick(&d);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, before + 1);
}
END_TEST

/* After a crash the journal says which copies were held, and which of them
 * their client NACKed since (that hold is over). */
START_TEST(after_a_crash_the_journal_restores_held_copies)
{
	start_with(on_change, 1, true);
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	track("numbers", "held", a);
	track("numbers", "nacked", b);
	ck_assert_int_eq(nack(a, "sub1", false), DLQ_NACK_RETRIED);
	ck_assert_int_eq(nack(b, "sub2", false), DLQ_NACK_RETRIED);
	char copy_b[DLQ_ID_LEN + 1];
	snprintf(copy_b, sizeof(copy_b), "%s", hdr(1, DLQ_PROP_ID));
	dlq__tick(&d);
	dlq__tick(&d);
	ck_assert_uint_eq(d.holds.records, 2);
	/* sub2 NACKs its copy at its last attempt: a dead letter, no hold. */
	ck_assert_int_eq(nack(copy_b, "sub2", false), DLQ_NACK_RETRIED);
	dlq__tick(&d);
	char copy_b2[DLQ_ID_LEN + 1];
	snprintf(copy_b2, sizeof(copy_b2), "%s", hdr(2, DLQ_PROP_ID));
	ck_assert_int_eq(nack(copy_b2, "sub2", false), DLQ_NACK_DEAD_LETTERED);
	dlq__tick(&d);
	dlq__tick(&d);
	ck_assert_uint_eq(d.holds.records, 1);
	char types[64];
	journal_types(types, sizeof(types));
	ck_assert_msg(strchr(types, '6') != NULL, "no hold entry in the journal: %s", types);

	size_t before = fake.publish_count;
	crash_restart_with(on_change, 1, ENGINE_BROKER_PERSISTENCE);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, before + 1);
	ck_assert_str_eq(pub(before)->topic, "dead/numbers");
	ck_assert_str_eq(hdr(before, DLQ_PROP_ORIGIN_ID), a);
	ck_assert_str_eq(hdr(before, DLQ_PROP_DEAD_LETTER_CLIENT), "sub1");
}
END_TEST

START_TEST(a_dead_letter_not_yet_published_survives_a_restart)
{
	start();
	char a[DLQ_ID_LEN + 1];
	track("once", "park me", a);
	fake.fail_publishes = 1000;
	ck_assert_int_eq(nack(a, "sub1", false), DLQ_NACK_DEAD_LETTERED);
	dlq__tick(&d);
	ck_assert_uint_eq(d.outbox.owed.count, 1);
	fake.fail_publishes = 0;
	restart_with(NULL, 0, true, 1000);
	ck_assert_uint_eq(fake.publish_count, 0);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert_str_eq(pub(0)->topic, "dead/once");
	ck_assert_str_eq(hdr(0, DLQ_PROP_ORIGIN_ID), a);
	ck_assert_str_eq(hdr(0, DLQ_PROP_DEAD_LETTER_CLIENT), "sub1");
	/* Its cause came back with it, and is counted as it is published. */
	ck_assert_str_eq(hdr(0, DLQ_PROP_DEAD_LETTER_CAUSE), DLQ_CAUSE_NACK);
	ck_assert_uint_eq(engine__totals(&d)->dead_letters_by_cause[DLQ_DEAD_NACK], 1);
	ck_assert_uint_eq(engine__totals(&d)->dead_letters, 1);
	/* Published once: the next start has nothing left to send. */
	dlq__tick(&d);
	dlq__tick(&d);
	restart_with(NULL, 0, true, 1000);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 1);
}
END_TEST

START_TEST(a_damaged_file_is_kept_aside_and_the_start_goes_on)
{
	static const char garbage[] = "this is not a state file\n";
	write_all(state_path, garbage, sizeof(garbage) - 1);
	int64_t wall = fake.wall_ms;
	start();
	char aside[320];
	snprintf(aside, sizeof(aside), "%s.damaged-%" PRId64, state_path, wall);
	ck_assert_msg(exists(aside), "%s missing", aside);
	uint8_t *data;
	size_t len;
	read_all(aside, &data, &len);
	ck_assert_uint_eq(len, sizeof(garbage) - 1);
	ck_assert_mem_eq(data, garbage, len);
	free(data);
	/* A fresh snapshot took its place. */
	expect_empty_snapshot();
	ck_assert(fake_logged("damaged"));
	ck_assert(fake_logged(aside));
	/* And the engine works. */
	char a[DLQ_ID_LEN + 1];
	track("numbers", "x", a);
	ck_assert_int_eq(nack(a, "sub1", false), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(fake.publish_count, 1);
	unlink(aside);
}
END_TEST

START_TEST(a_truncated_file_restores_what_precedes_the_damage)
{
	start();
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	track("numbers", "first", a);
	track("numbers", "second", b);
	stop();
	uint8_t *data;
	size_t len, at[8];
	read_all(state_path, &data, &len);
	ck_assert_uint_ge(entry_offsets(data, len, at, 8), 2);
	write_all(state_path, data, at[1] + 10); /* into the second record */
	free(data);

	fake.wall_ms += 1000;
	int64_t wall = fake.wall_ms;
	start();
	char aside[320];
	snprintf(aside, sizeof(aside), "%s.damaged-%" PRId64, state_path, wall);
	ck_assert_msg(exists(aside), "%s missing", aside);
	ck_assert_int_eq(nack(a, "sub1", false), DLQ_NACK_RETRIED);
	ck_assert_int_eq(nack(b, "sub1", false), DLQ_NACK_UNKNOWN_ID);
	ck_assert(fake_logged("restored 1 NACKable deliveries"));
	ck_assert(fake_logged("truncated"));
	unlink(aside);
}
END_TEST

/* A file whose CRCs are right but which holds what the plugin never writes
 * (found by fuzzing: a content type that is not UTF-8, which the broker's
 * property functions refuse, so that the copy made of it was refused on
 * every tick) is damage like any other: kept aside, named in the log, and
 * what came before it restored. */
START_TEST(a_state_file_with_properties_mqtt_refuses_is_kept_aside_and_says_why)
{
	start();
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	struct dlq_headers h = {0};
	ck_assert_int_eq(headers__add(&h, DLQ_HDR_CONTENT_TYPE, "text\xC3(", 6, NULL, 0), 0);
	track("numbers", "first", a);
	const struct dlq_policy *p = dlq__policy_for(&d, "numbers");
	ck_assert_int_eq(dlq__track(&d, p, "numbers", "second", 6, 1, h.data, h.len, b), 0);
	stop();

	fake.wall_ms += 1000;
	int64_t wall = fake.wall_ms;
	start();
	char aside[320];
	snprintf(aside, sizeof(aside), "%s.damaged-%" PRId64, state_path, wall);
	ck_assert_msg(exists(aside), "%s missing", aside);
	ck_assert(fake_logged("restored 1 NACKable deliveries"));
	ck_assert(fake_logged("is damaged (a NACKable delivery with a content type holding ill-formed UTF-8 at byte"));
	ck_assert_int_eq(nack(b, "sub1", false), DLQ_NACK_UNKNOWN_ID);
	ck_assert_int_eq(nack(a, "sub1", false), DLQ_NACK_RETRIED);
	ck_assert_uint_eq(fake.publish_count, 1);
	ck_assert_str_eq(pub(0)->topic, "numbers");
	ck_assert_str_eq(pub(0)->client, "sub1");
	/* Nothing else is owed from the file: ticks publish nothing more. */
	dlq__tick(&d);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 1);
	headers__free(&h);
	unlink(aside);
}
END_TEST

START_TEST(a_state_file_that_cannot_be_written_fails_the_start)
{
	char nowhere[200], err[512];
	snprintf(nowhere, sizeof(nowhere), "%s/missing/state", dir);
	err[0] = '\0';
	int rc = try_start(nowhere, NULL, 0, true, err, sizeof(err));
	ck_assert_int_ne(rc, 0);
	ck_assert_msg(strstr(err, nowhere) != NULL, "error \"%s\" does not name the file", err);
	stop(); /* cleanup is called all the same */
}
END_TEST

/* ---- state_save_on_change --------------------------------------------- */


START_TEST(the_journal_gets_an_entry_per_change)
{
	start_with(on_change, 1, true);
	char types[64];
	ck_assert(exists(journal_path));
	journal_types(types, sizeof(types));
	ck_assert_str_eq(types, "");

	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1], c[DLQ_ID_LEN + 1];
	track("fixed/1", "delayed", a);
	track("numbers", "at once", b);
	track("once", "dead", c);
	/* 1: a tracked delivery, 2: an envelope taken on, 3: one the broker
	 * took, 5: a client that NACKed, 8: a dead letter kept (the broker
	 * accepted it). */
	journal_types(types, sizeof(types));
	ck_assert_str_eq(types, "111");
	ck_assert_int_eq(nack(a, "sub1", false), DLQ_NACK_RETRIED);
	journal_types(types, sizeof(types));
	ck_assert_str_eq(types, "11125");
	/* A copy published at once is NACKable in turn: its record too. */
	ck_assert_int_eq(nack(b, "sub1", true), DLQ_NACK_RETRIED);
	journal_types(types, sizeof(types));
	ck_assert_str_eq(types, "11125215");
	ck_assert_int_eq(nack(c, "sub1", false), DLQ_NACK_DEAD_LETTERED);
	journal_types(types, sizeof(types));
	ck_assert_str_eq(types, "11125215285");
	/* A refused NACK changes nothing. */
	ck_assert_int_eq(nack(c, "sub1", false), DLQ_NACK_DUPLICATE);
	journal_types(types, sizeof(types));
	ck_assert_str_eq(types, "11125215285");

	/* What the broker has taken is journaled once per tick. */
	dlq__tick(&d);
	journal_types(types, sizeof(types));
	ck_assert_str_eq(types, "11125215285");
	dlq__tick(&d);
	journal_types(types, sizeof(types));
	ck_assert_str_eq(types, "1112521528533");
	/* The delayed copy, when published (its record) and taken. */
	fake.now_ms += 30000;
	dlq__tick(&d);
	dlq__tick(&d);
	journal_types(types, sizeof(types));
	ck_assert_str_eq(types, "111252152853313");
	/* The journal replays to nothing owed, and the dead letter kept. */
	struct dlq replay;
	struct state_report rep;
	decode_files(state_path, journal_path, &rep, &replay);
	ck_assert(!rep.damaged);
	ck_assert_uint_eq(rep.journal_entries, 15);
	ck_assert_uint_eq(envelopes(&replay), 0);
	ck_assert_uint_eq(replay.letters.count, 1);
	ck_assert_uint_eq(rep.letters, 1);
	dlq__cleanup(&replay);
}
END_TEST

START_TEST(after_a_crash_snapshot_and_journal_restore_every_envelope)
{
	start_with(on_change, 1, true);
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1], c[DLQ_ID_LEN + 1];
	track("fixed/1", "delayed", a);
	track("numbers", "at once", b);
	track("once", "dead", c);
	/* A snapshot holds the records... */
	stop();
	start_with(on_change, 1, true);
	int64_t nacked_at = fake.wall_ms;
	/* ...and the journal what came after it. */
	ck_assert_int_eq(nack(a, "sub1", false), DLQ_NACK_RETRIED);
	ck_assert_int_eq(nack(b, "sub2", true), DLQ_NACK_RETRIED);
	fake.fail_publishes = 1;
	ck_assert_int_eq(nack(c, "sub3", false), DLQ_NACK_DEAD_LETTERED);
	ck_assert_uint_eq(fake.publish_count, 1);

	/* The crash: the files as they are now, no shutdown. */
	char crash[200];
	crash_image(crash, sizeof(crash));

	/* Read directly with the state functions... */
	struct dlq replay;
	struct state_report rep;
	char crash_journal[220];
	snprintf(crash_journal, sizeof(crash_journal), "%s.journal", crash);
	decode_files(crash, crash_journal, &rep, &replay);
	ck_assert(!rep.damaged);
	/* Three from the snapshot, and the copy published after it. */
	ck_assert_uint_eq(rep.records, 4);
	/* Three envelopes, three nackers, and that copy's record. */
	ck_assert_uint_eq(rep.journal_entries, 7);
	ck_assert_uint_eq(envelopes(&replay), 3);
	ck_assert_uint_eq(replay.delayed.count, 1);
	dlq__cleanup(&replay);

	/* ...and by a start on the crash image. */
	stop();
	remove_all(state_path);
	snprintf(state_path, sizeof(state_path), "%s", crash);
	snprintf(journal_path, sizeof(journal_path), "%s.journal", crash);
	size_t before = fake.publish_count;
	fake.now_ms = 70000000;
	fake.wall_ms += 2000;
	start_with(on_change, 1, true);
	ck_assert(fake_logged("7 entries applied"));
	uint64_t t = fake.now_ms;
	dlq__tick(&d);
	/* The copy that was accepted but perhaps never taken, again; the dead
	 * letter the broker refused. */
	ck_assert_uint_eq(fake.publish_count, before + 2);
	bool copy = false, dead = false;
	for(size_t i = before; i < fake.publish_count; i++){
		if(!strcmp(pub(i)->topic, "numbers")){
			copy = true;
			ck_assert_str_eq(pub(i)->client, "sub2");
		}else{
			ck_assert_str_eq(pub(i)->topic, "dead/once");
			dead = true;
		}
	}
	ck_assert(copy && dead);
	/* The delayed one when due: 30 s after the NACK, 2 s of which passed. */
	fake.now_ms = t + 27999;
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, before + 2);
	fake.now_ms = t + 28000;
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, before + 3);
	ck_assert_str_eq(pub(before + 2)->topic, "fixed/retry");
	char when[32];
	envelope__format_time(nacked_at, when);
	ck_assert_str_eq(hdr(before + 2, DLQ_PROP_FIRST_NACK_TIME), when);
	/* The records of the snapshot are NACKable. */
	ck_assert_int_eq(nack(a, "sub9", false), DLQ_NACK_RETRIED);
}
END_TEST

START_TEST(with_save_on_change_a_crash_loses_no_nackable_delivery)
{
	/* Issue 4: state_save_on_change is the option "that loses nothing".
	 * The NACK window's ledger is part of the state; a delivery tracked
	 * after the last snapshot must still be NACKable after a crash. */
	start_with(on_change, 1, true);
	char a[DLQ_ID_LEN + 1];
	track("numbers", "tracked after the snapshot", a);
	crash_restart_with(on_change, 1, ENGINE_BROKER_PERSISTENCE);
	enum dlq_nack_status st = nack(a, "sub1", false);
	ck_assert_msg(st == DLQ_NACK_RETRIED, "NACK after the crash: %s", dlq__nack_status_text(st));
}
END_TEST

/* Issue 36: plugin_opt_state_journal_sync <duration>. Each change is
 * written to the journal at once (a crash of the broker loses nothing the
 * kernel was given) and the journal is synced at the first tick that long
 * after the last sync, not change by change. */
START_TEST(with_a_journal_sync_interval_changes_are_written_at_once_and_synced_by_the_tick)
{
	static const struct extra batched[] = {{"state_save_on_change", "true"}, {"state_journal_sync", "100ms"}};
	start_with(batched, 2, true);
	ck_assert_uint_eq(d.persist.opt.journal_sync_ms, 100);
	dlq__tick(&d);
	ck_assert(!d.persist.journal_unsynced);
	char a[DLQ_ID_LEN + 1], types[64];
	track("numbers", "written at once", a);
	journal_types(types, sizeof(types));
	ck_assert_str_eq(types, "1");
	ck_assert(d.persist.journal_unsynced);
	/* The first change after a quiet spell: synced at the next tick. */
	dlq__tick(&d);
	ck_assert(!d.persist.journal_unsynced);
	ck_assert_uint_eq(d.persist.journal_synced_ms, fake.now_ms);
	/* Then at most once per interval. */
	char b[DLQ_ID_LEN + 1];
	track("numbers", "the next", b);
	journal_types(types, sizeof(types));
	ck_assert_str_eq(types, "11");
	ck_assert(d.persist.journal_unsynced);
	fake.now_ms += 99;
	dlq__tick(&d);
	ck_assert_msg(d.persist.journal_unsynced, "synced before its interval");
	fake.now_ms += 1;
	dlq__tick(&d);
	ck_assert_msg(!d.persist.journal_unsynced, "not synced at the first tick after its interval");
	ck_assert_uint_eq(d.persist.journal_synced_ms, fake.now_ms);

	/* A NACK, written before the tick: a crash then loses nothing. */
	ck_assert_int_eq(nack(a, "sub1", false), DLQ_NACK_RETRIED);
	ck_assert(d.persist.journal_unsynced);
	crash_restart_with(batched, 2, ENGINE_BROKER_PERSISTENCE);
	enum dlq_nack_status st = nack(a, "sub1", false);
	ck_assert_msg(st == DLQ_NACK_DUPLICATE, "the NACK before the crash was not restored: %s", dlq__nack_status_text(st));
}
END_TEST

START_TEST(without_save_on_change_a_crash_loses_what_came_after_the_last_snapshot)
{
	/* What a SIGKILL can lose: at most the save interval. */
	start();
	char a[DLQ_ID_LEN + 1];
	track("once", "x", a);
	ck_assert_int_eq(nack(a, "sub1", false), DLQ_NACK_DEAD_LETTERED);
	struct dlq replay;
	struct state_report rep;
	decode_files(state_path, NULL, &rep, &replay);
	ck_assert_uint_eq(rep.records + rep.envelopes, 0);
	dlq__cleanup(&replay);
	/* After the interval (60 s by default) it is saved, the dead letter
	 * with it, since the broker has not taken it yet. */
	fake.now_ms += 60000;
	dlq__tick(&d);
	decode_files(state_path, NULL, &rep, &replay);
	ck_assert_uint_eq(rep.records, 1);
	ck_assert_uint_eq(rep.envelopes, 1);
	dlq__cleanup(&replay);
}
END_TEST

/* The kept letter of d with payload, or NULL. */
static const struct dlq_letter *letter_with(const struct dlq *e, const char *payload)
{
	for(const struct dlq_letter *l = e->letters.oldest; l; l = l->newer){
		if(l->env->payload_len == strlen(payload) && !memcmp(l->env->payload, payload, l->env->payload_len)) return l;
	}
	return NULL;
}

/* Letter y (restored) is letter x. */
static void same_letter(const struct dlq_letter *x, const struct dlq_letter *y)
{
	ck_assert_ptr_nonnull(x);
	ck_assert_ptr_nonnull(y);
	ck_assert_mem_eq(x->env->id.raw, y->env->id.raw, DLQ_ID_RAW_LEN);
	ck_assert_mem_eq(x->env->origin_id.raw, y->env->origin_id.raw, DLQ_ID_RAW_LEN);
	ck_assert_str_eq(x->env->topic, y->env->topic);
	ck_assert_str_eq(x->env->origin_topic, y->env->origin_topic);
	ck_assert_str_eq(x->env->filter, y->env->filter);
	ck_assert_str_eq(x->env->reason, y->env->reason);
	ck_assert_str_eq(x->env->client, y->env->client);
	ck_assert_int_eq(x->env->time_ms, y->env->time_ms);
	ck_assert_uint_eq(x->env->retry_count, y->env->retry_count);
	ck_assert_uint_eq(x->env->qos, y->env->qos);
	ck_assert_uint_eq(x->env->cause, y->env->cause);
	ck_assert_uint_eq(x->env->final, y->env->final);
	ck_assert_uint_eq(x->bytes, y->bytes);
}

START_TEST(kept_dead_letters_survive_a_crash_and_a_restart)
{
	start_with(on_change, 1, true);
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	track("once", "first", a);
	track("once", "second", b);
	ck_assert_int_eq(nack(a, "sub1", false), DLQ_NACK_DEAD_LETTERED);
	ck_assert_int_eq(nack(b, "sub2", false), DLQ_NACK_DEAD_LETTERED);
	ck_assert_uint_eq(d.letters.count, 2);
	ck_assert_uint_eq(letter_with(&d, "first")->env->cause, DLQ_DEAD_NACK);
	dlq__tick(&d);
	dlq__tick(&d); /* the broker took both */
	/* 8: a dead letter kept, journaled (and synced) as the broker
	 * accepts it. */
	char types[64];
	journal_types(types, sizeof(types));
	ck_assert_str_eq(types, "1128528533");

	/* A crash now: both come back, in their order, as they were. */
	char crash[200];
	crash_image(crash, sizeof(crash));
	char crash_journal[220];
	snprintf(crash_journal, sizeof(crash_journal), "%s.journal", crash);
	struct dlq replay;
	struct state_report rep;
	decode_files(crash, crash_journal, &rep, &replay);
	ck_assert_msg(!rep.damaged, "damaged: %s", rep.problem);
	ck_assert_uint_eq(replay.letters.count, 2);
	same_letter(letter_with(&d, "first"), replay.letters.oldest);
	same_letter(letter_with(&d, "second"), replay.letters.newest);
	dlq__cleanup(&replay);

	/* 9: one deleted; after a crash it stays deleted. */
	letter_store__delete(&d, (struct dlq_letter *)letter_with(&d, "first"));
	journal_types(types, sizeof(types));
	ck_assert_str_eq(types, "11285285339");
	crash_image(crash, sizeof(crash));
	decode_files(crash, crash_journal, &rep, &replay);
	ck_assert_msg(!rep.damaged, "damaged: %s", rep.problem);
	ck_assert_uint_eq(replay.letters.count, 1);
	ck_assert_ptr_null(letter_with(&replay, "first"));
	same_letter(letter_with(&d, "second"), letter_with(&replay, "second"));
	dlq__cleanup(&replay);

	/* A shutdown saves it in the snapshot, and says so. */
	struct dlq_letter kept = *letter_with(&d, "second");
	struct dlq_envelope *env = envelope__copy(kept.env);
	ck_assert_ptr_nonnull(env);
	kept.env = env;
	restart_with(on_change, 1, true, 1000);
	char saved[400];
	snprintf(saved, sizeof(saved), "state saved to %s: 2 NACKable deliveries, 0 retry copies or dead letters, "
			"1 kept dead letters", state_path);
	ck_assert_msg(fake_logged(saved), "no \"%s\" in the log", saved);
	ck_assert(fake_logged("and 0 retry copies or dead letters, 1 kept dead letters"));
	journal_types(types, sizeof(types));
	ck_assert_str_eq(types, "");
	ck_assert_uint_eq(d.letters.count, 1);
	same_letter(&kept, d.letters.oldest);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, 2); /* the two dead letters, not again */
	envelope__free(env);
}
END_TEST

/* Kept dead letters that aged past plugin_opt_dead_letter_keep_for while
 * the broker was down are dropped at the start, counted as expired (not
 * as dropped for the bound) and left out of the snapshot the start
 * writes; a younger one stays, until a later start finds it old too. */
START_TEST(letters_past_their_age_at_a_restart_go_at_the_start)
{
	start();
	fake.wall_ms = 1790000000000LL;
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	track("once", "old", a);
	ck_assert_int_eq(nack(a, "sub1", false), DLQ_NACK_DEAD_LETTERED);
	fake.wall_ms += 20000;
	track("once", "young", b);
	ck_assert_int_eq(nack(b, "sub2", false), DLQ_NACK_DEAD_LETTERED);
	dlq__tick(&d);
	dlq__tick(&d); /* the broker took both */
	ck_assert_uint_eq(d.letters.count, 2);

	/* Down 50 s: the first is 70 s old at the start, the second 50 s. */
	static const struct extra minute[] = {{"dead_letter_keep_for", "1m"}};
	restart_with(minute, 1, true, 50000);
	ck_assert_uint_eq(d.letters.count, 1);
	ck_assert_ptr_nonnull(letter_with(&d, "young"));
	ck_assert_uint_eq(engine__totals(&d)->dead_letters_expired, 1);
	ck_assert_uint_eq(d.policy_counters[3].dead_letters_expired, 1);
	ck_assert_uint_eq(engine__totals(&d)->dead_letters_dropped, 0);
	ck_assert(fake_logged("dropped kept dead letters past their age"));

	/* Gone from the state file: a start without the age bound finds the
	 * young one only. */
	restart_with(NULL, 0, true, 0);
	ck_assert_uint_eq(d.letters.count, 1);
	ck_assert_ptr_nonnull(letter_with(&d, "young"));
	ck_assert_uint_eq(engine__totals(&d)->dead_letters_expired, 0);

	/* 10 s more: it is 60 s old at the next start with the bound. */
	restart_with(minute, 1, true, 10000);
	ck_assert_uint_eq(d.letters.count, 0);
	ck_assert_uint_eq(engine__totals(&d)->dead_letters_expired, 1);
}
END_TEST

/* ---- the interval -------------------------------------------------------- */

START_TEST(a_snapshot_is_saved_after_the_interval_when_something_changed)
{
	static const struct extra every_second[] = {{"state_save_interval", "1s"}, {"state_save_on_change", "true"}};
	start_with(every_second, 2, true);
	uint64_t t0 = fake.now_ms;
	char a[DLQ_ID_LEN + 1];
	track("fixed/1", "x", a);
	ck_assert_int_eq(nack(a, "sub1", false), DLQ_NACK_RETRIED);
	char types[32];
	journal_types(types, sizeof(types));
	ck_assert_str_eq(types, "125");

	fake.now_ms = t0 + 999;
	dlq__tick(&d);
	struct dlq replay;
	struct state_report rep;
	decode_files(state_path, NULL, &rep, &replay);
	ck_assert_uint_eq(rep.records + rep.envelopes, 0);
	dlq__cleanup(&replay);

	fake.now_ms = t0 + 1000;
	dlq__tick(&d);
	decode_files(state_path, NULL, &rep, &replay);
	ck_assert(!rep.damaged);
	ck_assert_uint_eq(rep.records, 1);
	ck_assert_uint_eq(rep.envelopes, 1);
	ck_assert_uint_eq(replay.delayed.count, 1);
	dlq__cleanup(&replay);
	/* The snapshot holds what the journal said: it starts afresh. */
	journal_types(types, sizeof(types));
	ck_assert_str_eq(types, "");

	/* Nothing changed: nothing is written, however long. */
	ck_assert_int_eq(unlink(state_path), 0);
	fake.now_ms = t0 + 5000;
	dlq__tick(&d);
	ck_assert(!exists(state_path));
	/* A change is saved at the next tick after the interval. */
	char b[DLQ_ID_LEN + 1];
	track("numbers", "y", b);
	dlq__tick(&d);
	ck_assert(exists(state_path));
	decode_files(state_path, NULL, &rep, &replay);
	ck_assert_uint_eq(rep.records, 2);
	dlq__cleanup(&replay);
}
END_TEST

/* ---- snapshots in the background (issue 36) ---- */

static const struct extra bg_every_second[] = {{"state_save_interval", "1s"}, {"state_save_on_change", "true"}};

/* Until the background save running ends (the child writes on its own
 * clock: real time, bounded far above its step); it saved. */
static void wait_saved(void)
{
	for(int i = 0; i < 3000 && persist__saving(&d.persist); i++){
		usleep(10000);
		persist__tick(&d.persist, fake.now_ms);
	}
	ck_assert_msg(!persist__saving(&d.persist), "the background save did not end in 30 s");
	ck_assert_msg(!d.persist.failing, "the background save failed");
}

static uint64_t journal_generation_of(const char *path)
{
	uint8_t *data;
	size_t len;
	read_all(path, &data, &len);
	ck_assert_uint_ge(len, 8 + 9 + 8);
	ck_assert_mem_eq(data, "DLQJRNL1", 8);
	ck_assert_uint_eq(data[8], 11);
	uint64_t g = 0;
	for(int i = 0; i < 8; i++) g = (g << 8) | data[8 + 5 + i];
	free(data);
	return g;
}

static void copy_file(const char *from, const char *to)
{
	uint8_t *data;
	size_t len;
	read_all(from, &data, &len);
	write_all(to, data, len);
	free(data);
}

/* A save forks and returns at once; what changes meanwhile goes to the
 * journal's next generation; the generation the snapshot holds is renamed
 * aside and removed once the snapshot is in place, which holds it. */
START_TEST(a_background_save_holds_what_came_before_its_fork)
{
	start_flags(bg_every_second, ARRAY_LEN(bg_every_second), ENGINE_BROKER_PERSISTENCE | ENGINE_BACKGROUND_SAVES);
	/* The start's own save folds in what was restored (nothing). */
	wait_saved();
	uint64_t g = journal_generation_of(journal_path);
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	track("numbers", "before the fork", a);
	fake.now_ms += 1000;
	dlq__tick(&d);
	ck_assert(persist__saving(&d.persist));
	ck_assert_uint_eq(d.persist.saver_covers, g);
	char aside[400];
	snprintf(aside, sizeof(aside), "%s.%" PRIu64, journal_path, g);
	ck_assert_uint_eq(journal_generation_of(journal_path), g + 1);
	track("numbers", "after the fork", b);
	wait_saved();
	ck_assert_msg(!exists(aside), "%s is still there: the snapshot holds it", aside);
	ck_assert_uint_eq(journal_generation_of(journal_path), g + 1);

	/* The snapshot alone: a; the journal's new generation: b. */
	struct state_report rep;
	struct dlq e;
	memset(&rep, 0, sizeof(rep));
	decode_files(state_path, NULL, &rep, &e);
	ck_assert_uint_eq(rep.records, 1);
	dlq__cleanup(&e);
	memset(&rep, 0, sizeof(rep));
	decode_files(state_path, journal_path, &rep, &e);
	ck_assert(!rep.journal_held);
	ck_assert_uint_eq(e.ledger.count, 2);
	dlq__cleanup(&e);
}
END_TEST

/* A crash while a background save runs (its child dies with the broker,
 * before it wrote): the previous snapshot, the generation renamed aside and
 * the new one restore everything, once: a delivery from before the fork,
 * NACKed after it, is settled; one tracked after it is NACKable. */
START_TEST(a_crash_during_a_background_save_loses_nothing)
{
	start_flags(bg_every_second, ARRAY_LEN(bg_every_second), ENGINE_BROKER_PERSISTENCE | ENGINE_BACKGROUND_SAVES);
	wait_saved();
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	track("numbers", "before the fork", a);
	d.persist.opt.save_pause_ms = 600000; /* it never gets to write */
	fake.now_ms += 1000;
	dlq__tick(&d);
	ck_assert(persist__saving(&d.persist));
	uint64_t g = d.persist.saver_covers;
	track("numbers", "after the fork", b);
	ck_assert_int_eq(nack(a, "sub1", false), DLQ_NACK_RETRIED);

	/* The files at the crash, in a folder of their own. */
	char crash[300], from[400], to[400];
	snprintf(crash, sizeof(crash), "%s/crash", dir);
	copy_file(state_path, crash);
	snprintf(from, sizeof(from), "%s.%" PRIu64, journal_path, g);
	snprintf(to, sizeof(to), "%s.journal.%" PRIu64, crash, g);
	copy_file(from, to);
	snprintf(to, sizeof(to), "%s.journal", crash);
	copy_file(journal_path, to);
	stop(); /* stops the save, then saves in the foreground: not used */

	fake_reset();
	snprintf(state_path, sizeof(state_path), "%s", crash);
	snprintf(journal_path, sizeof(journal_path), "%s.journal", crash);
	fake.wall_ms += 1000;
	start_with(on_change, 1, true);
	ck_assert_uint_eq(d.ledger.count, 3); /* a, b and a's retry copy */
	ck_assert_int_eq(nack(a, "sub1", false), DLQ_NACK_DUPLICATE);
	ck_assert_int_eq(nack(b, "sub1", false), DLQ_NACK_RETRIED);
}
END_TEST

/* A snapshot that holds a journal's generation is not applied over again:
 * the journal renamed aside and not yet removed when the broker stopped
 * (between the snapshot's rename and the removal) is read and skipped. */
START_TEST(a_journal_the_snapshot_holds_is_not_applied_again)
{
	start_flags(bg_every_second, ARRAY_LEN(bg_every_second), ENGINE_BROKER_PERSISTENCE | ENGINE_BACKGROUND_SAVES);
	wait_saved();
	char a[DLQ_ID_LEN + 1];
	track("numbers", "x", a);
	ck_assert_int_eq(nack(a, "sub1", false), DLQ_NACK_RETRIED);
	uint64_t g = journal_generation_of(journal_path);
	char keep[300], aside[400];
	snprintf(keep, sizeof(keep), "%s/kept-journal", dir);
	copy_file(journal_path, keep);
	fake.now_ms += 1000;
	dlq__tick(&d);
	wait_saved();
	snprintf(aside, sizeof(aside), "%s.%" PRIu64, journal_path, g);
	ck_assert(!exists(aside));
	copy_file(keep, aside); /* as if the removal had not happened */
	size_t copies = d.ledger.count;
	stop();
	fake_reset();
	fake.wall_ms += 1000;
	start_flags(bg_every_second, ARRAY_LEN(bg_every_second), ENGINE_BROKER_PERSISTENCE | ENGINE_BACKGROUND_SAVES);
	ck_assert(fake_logged("held by the state file already"));
	ck_assert_uint_eq(d.ledger.count, copies);
	wait_saved();
	ck_assert(!exists(aside));
}
END_TEST

/* ------------------------------------------------------------------ */

static void setup(void)
{
	fake_reset();
	snprintf(dir, sizeof(dir), "/tmp/dlq-persist-test-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(state_path, sizeof(state_path), "%s/state", dir);
	snprintf(journal_path, sizeof(journal_path), "%s/state.journal", dir);
}

static void teardown(void)
{
	stop();
	/* Whatever a test left in its directory (a failed one may leave
	 * anything). */
	DIR *dp = opendir(dir);
	if(dp){
		struct dirent *de;
		char p[400];
		while((de = readdir(dp)) != NULL){
			if(!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
			snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
			if(unlink(p)) rmdir(p);
		}
		closedir(dp);
	}
	rmdir(dir);
	fake_reset();
}

/* ---- what the broker took, until the broker saves it (unsaved.c) ------ */

/* Watches a file standing for the broker's database, as plugin.c sets it
 * up for a broker with persistence and an autosave_interval. */
static void watch_db(char *db, size_t size)
{
	snprintf(db, size, "%s/mosquitto.db", dir);
	write_all(db, "save 1", 6);
	d.broker.db_path = strdup(db);
	ck_assert_ptr_nonnull(d.broker.db_path);
}

/* How many envelopes a start on a crash image now would find owed. */
static size_t owed_after_crash(void)
{
	char crash[200], crash_journal[220];
	crash_image(crash, sizeof(crash));
	snprintf(crash_journal, sizeof(crash_journal), "%s.journal", crash);
	struct dlq replay;
	struct state_report rep;
	decode_files(crash, crash_journal, &rep, &replay);
	ck_assert(!rep.damaged);
	size_t n = envelopes(&replay);
	dlq__cleanup(&replay);
	return n;
}

START_TEST(a_taken_copy_is_kept_until_the_broker_saves_its_database)
{
	/* Issue 12: 2.0.21 queues what passes a client's in-flight window in
	 * memory only; a SIGKILL before its next autosave lost it. */
	start_with(on_change, 1, true);
	char db[200], a[DLQ_ID_LEN + 1], types[64];
	watch_db(db, sizeof(db));
	track("numbers", "at once", a);
	ck_assert_int_eq(nack(a, "sub1", true), DLQ_NACK_RETRIED);
	dlq__tick(&d);
	dlq__tick(&d);
	dlq__tick(&d);
	/* Taken, but not journaled as taken: a crash now gives it back. */
	journal_types(types, sizeof(types));
	ck_assert_str_eq(types, "1215");
	ck_assert_uint_eq(d.unsaved.list.count, 1);
	ck_assert_uint_eq(owed_after_crash(), 1);
	/* A snapshot holds it too (it folds the journal in). */
	fake.now_ms += 120000;
	dlq__tick(&d);
	ck_assert_uint_eq(owed_after_crash(), 1);

	/* The broker replaced its database: it holds the copy now. */
	write_all(db, "save 2", 6);
	dlq__tick(&d);
	ck_assert_uint_eq(d.unsaved.list.count, 0);
	journal_types(types, sizeof(types));
	ck_assert_str_eq(types, "3");
	ck_assert_uint_eq(owed_after_crash(), 0);
}
END_TEST

START_TEST(a_save_seen_when_a_copy_is_taken_does_not_count_for_it)
{
	start_with(on_change, 1, true);
	char db[200], a[DLQ_ID_LEN + 1];
	watch_db(db, sizeof(db));
	track("numbers", "at once", a);
	ck_assert_int_eq(nack(a, "sub1", true), DLQ_NACK_RETRIED);
	dlq__tick(&d);
	/* A save before the broker took the copy, seen in the tick that finds
	 * it taken, does not hold it. */
	write_all(db, "save 2", 6);
	dlq__tick(&d);
	dlq__tick(&d);
	ck_assert_uint_eq(d.unsaved.list.count, 1);
	write_all(db, "save 3", 6);
	dlq__tick(&d);
	ck_assert_uint_eq(d.unsaved.list.count, 0);
}
END_TEST

START_TEST(a_held_copy_and_a_broker_that_does_not_save_keep_nothing)
{
	start_with(on_change, 1, true);
	char db[200], a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	watch_db(db, sizeof(db));
	/* For a session that does not persist no broker save can carry it:
	 * its hold dead-letters it after a restart. */
	track("numbers", "held", a);
	ck_assert_int_eq(nack(a, "sub1", false), DLQ_NACK_RETRIED);
	dlq__tick(&d);
	dlq__tick(&d);
	ck_assert_uint_eq(d.unsaved.list.count, 0);
	ck_assert_uint_eq(owed_after_crash(), 0);
	/* No database to watch (no persistence, or autosave_interval 0). */
	free(d.broker.db_path);
	d.broker.db_path = NULL;
	track("numbers", "kept", b);
	ck_assert_int_eq(nack(b, "sub1", true), DLQ_NACK_RETRIED);
	dlq__tick(&d);
	dlq__tick(&d);
	ck_assert_uint_eq(d.unsaved.list.count, 0);
	ck_assert_uint_eq(owed_after_crash(), 0);
}
END_TEST

START_TEST(what_is_kept_is_bounded_and_not_saved_at_shutdown)
{
	start_with(on_change, 1, true);
	char db[200], a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	watch_db(db, sizeof(db));
	track("numbers", "first", a);
	track("numbers", "second", b);
	ck_assert_int_eq(nack(a, "sub1", true), DLQ_NACK_RETRIED);
	ck_assert_int_eq(nack(b, "sub1", true), DLQ_NACK_RETRIED);
	dlq__tick(&d);
	/* Room for one: the oldest is let go, with a warning. */
	d.cfg.max_pending_bytes = d.outbox.settling.head->bytes + d.outbox.settling.head->next->bytes - 1;
	dlq__tick(&d);
	ck_assert_uint_eq(d.unsaved.list.count, 1);
	ck_assert(fake_logged("1 of them are no longer kept"));
	ck_assert_uint_eq(owed_after_crash(), 1);
	/* At shutdown the broker saves its database before it unloads the
	 * plugin: the final snapshot keeps nothing it took. */
	size_t before = fake.publish_count;
	restart_with(on_change, 1, true, 1000);
	dlq__tick(&d);
	ck_assert_uint_eq(fake.publish_count, before);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("persist");
	check_add(s, check_fixture(tcase_create("restart"), setup, teardown),
			CHECK_TESTS(a_first_start_writes_an_empty_snapshot,
			a_delayed_copy_comes_back_after_a_restart_and_goes_out_on_time,
			a_targeted_copy_reaches_a_persisting_session_after_a_restart,
			without_broker_persistence_a_restored_targeted_copy_becomes_a_dead_letter,
			a_v5_subscriber_has_no_session_after_a_restart, a_dead_letter_not_yet_published_survives_a_restart,
			a_message_in_a_session_across_a_restart_goes_on_from_its_count, exact_counts_go_on_after_a_restart,
			a_held_copy_becomes_a_dead_letter_after_a_restart));

	check_add(s, check_fixture(tcase_create("damage"), setup, teardown),
			CHECK_TESTS(a_damaged_file_is_kept_aside_and_the_start_goes_on,
			a_truncated_file_restores_what_precedes_the_damage,
			a_state_file_with_properties_mqtt_refuses_is_kept_aside_and_says_why,
			a_state_file_that_cannot_be_written_fails_the_start));

	check_add(s, check_fixture(tcase_create("crash"), setup, teardown),
			CHECK_TESTS(the_journal_gets_an_entry_per_change, kept_dead_letters_survive_a_crash_and_a_restart,
			letters_past_their_age_at_a_restart_go_at_the_start,
			after_a_crash_snapshot_and_journal_restore_every_envelope,
			with_save_on_change_a_crash_loses_no_nackable_delivery,
			with_a_journal_sync_interval_changes_are_written_at_once_and_synced_by_the_tick,
			after_a_crash_the_journal_restores_held_copies, after_a_crash_the_journal_continues_a_count,
			exact_counts_go_on_after_a_crash, without_save_on_change_a_crash_loses_what_came_after_the_last_snapshot,
			a_snapshot_is_saved_after_the_interval_when_something_changed));

	check_add(s, check_fixture(tcase_create("background"), setup, teardown),
			CHECK_TESTS(a_background_save_holds_what_came_before_its_fork,
			a_crash_during_a_background_save_loses_nothing, a_journal_the_snapshot_holds_is_not_applied_again));

	check_add(s, check_fixture(tcase_create("broker saves"), setup, teardown),
			CHECK_TESTS(a_taken_copy_is_kept_until_the_broker_saves_its_database,
			a_save_seen_when_a_copy_is_taken_does_not_count_for_it,
			a_held_copy_and_a_broker_that_does_not_save_keep_nothing,
			what_is_kept_is_bounded_and_not_saved_at_shutdown));
	return check_run(s);
}
