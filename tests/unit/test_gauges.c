/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of gauges.c, the running gauges a getStatus reads instead of
 * walking the ledger: after every kind of change the engine makes (tracking,
 * NACKs with and without delays, ticks, refused publishes, clients leaving,
 * expiry, eviction, redelivery tracking's deliveries, a reload that moves
 * records to other policies or none, a restore from the state file) they
 * must equal a fresh count (recount__gauges) and the containers' own totals.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/status.h"
#include "check_suite.h"
#include "config/config.h"
#include "engine/dlq.h"
#include "engine/recount.h"
#include "engine_calls.h"
#include "fake_port.h"
#include "mosquitto_dlq.h"

static struct dlq d;
static bool d_live;
static char dir[64];
static char policy_path[128];
static char state_path[128];

static void write_policies(const char *json)
{
	FILE *f = fopen(policy_path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_ge(fputs(json, f), 0);
	ck_assert_int_eq(fclose(f), 0);
}

static const char first_file[] =
	"{\"policies\":[{\"filter\":\"files/+\",\"max_attempts\":3,\"dead_letter\":\"dead/files\"},"
	"{\"filter\":\"gone/#\",\"max_attempts\":3,\"dead_letter\":\"dead/gone\",\"retry_delay\":\"1s\"}]}";
/* gone/# removed, files/+ now behind a new policy that comes first. */
static const char second_file[] =
	"{\"policies\":[{\"filter\":\"new/#\",\"max_attempts\":2,\"dead_letter\":\"dead/new\"},"
	"{\"filter\":\"files/+\",\"max_attempts\":2,\"dead_letter\":\"dead/files\"}]}";

/* The options of the last start, for reloads. */
static struct dlq_option opts[8];
static size_t n_opts;

static void start_with(const char *bound, bool state, const char *tracking)
{
	size_t n = 0;
	opts[n++] = (struct dlq_option){"policy", "jobs/# max_attempts=3 dead_letter=dead/jobs"};
	opts[n++] = (struct dlq_option){"policy", "slow/# max_attempts=3 dead_letter=dead/slow retry_delay=2s"};
	opts[n++] = (struct dlq_option){"policy", "for/me max_attempts=2 dead_letter=dead/me"};
	opts[n++] = (struct dlq_option){"policy_file", policy_path};
	opts[n++] = (struct dlq_option){"nack_window", "10s"};
	opts[n++] = (struct dlq_option){"max_pending_bytes", bound};
	if(state) opts[n++] = (struct dlq_option){"state_file", state_path};
	if(tracking) opts[n++] = (struct dlq_option){"redelivery_tracking", tracking};
	n_opts = n;
	engine_start(&d, &d_live, opts, n, ENGINE_NO_SYS | ENGINE_BROKER_PERSISTENCE);
}

static void stop(void)
{
	engine_stop(&d, &d_live);
}

static void expect_equal(const struct dlq_gauges *a, const struct dlq_gauges *b, const char *what, int line)
{
	ck_assert_msg(a->records == b->records && a->ledger_bytes == b->ledger_bytes && a->pending == b->pending
			&& a->delayed == b->delayed && a->owed_bytes == b->owed_bytes,
			"line %d, %s: running records %llu bytes %llu pending %llu delayed %llu owed %llu; "
			"counted %llu %llu %llu %llu %llu", line, what,
			(unsigned long long)a->records, (unsigned long long)a->ledger_bytes, (unsigned long long)a->pending,
			(unsigned long long)a->delayed, (unsigned long long)a->owed_bytes,
			(unsigned long long)b->records, (unsigned long long)b->ledger_bytes, (unsigned long long)b->pending,
			(unsigned long long)b->delayed, (unsigned long long)b->owed_bytes);
}

/* The running gauges, as getStatus reads them (dlq__figures): per policy
 * (per may be NULL) and in total. */
static void running_gauges(struct dlq_gauges *per, struct dlq_gauges *total)
{
	struct dlq_figures f;
	for(size_t i = 0; per && i < d.cfg.policies.count; i++){
		dlq__figures(&d, (long)i, &f);
		per[i] = f.gauges;
	}
	dlq__figures(&d, -1, &f);
	*total = f.gauges;
}

/* The running gauges against a recount, per policy and in total, and the
 * totals against the containers' own counts. */
#define check_gauges() check_gauges_at(__LINE__)
static void check_gauges_at(int line)
{
	size_t n = d.cfg.policies.count;
	struct dlq_gauges *run = calloc(n, sizeof(*run)), *count = calloc(n, sizeof(*count));
	struct dlq_gauges rt, ct;
	ck_assert(run && count);
	running_gauges(run, &rt);
	recount__gauges(&d, count, &ct);
	expect_equal(&rt, &ct, "totals", line);
	for(size_t i = 0; i < n; i++){
		expect_equal(&run[i], &count[i], d.cfg.policies.items[i].filter, line);
	}
	ck_assert_uint_eq(rt.records, d.ledger.count);
	ck_assert_uint_eq(rt.ledger_bytes, d.ledger.bytes);
	ck_assert_uint_eq(rt.pending + rt.delayed, engine__owed_count(&d));
	ck_assert_uint_eq(rt.delayed, d.delayed.count);
	ck_assert_uint_eq(rt.owed_bytes, engine__owed_bytes(&d));
	free(run);
	free(count);
}

static void track(const char *topic, const char *payload, char id[DLQ_ID_LEN + 1])
{
	engine_track(&d, topic, payload, 1, NULL, id);
}

static enum dlq_nack_status nack(const char *id, const char *client, bool persists)
{
	return engine_nack(&d, id, client, persists);
}

/* The dlq-id of the retry copy published last. */
static void last_copy_id(char out[DLQ_ID_LEN + 1])
{
	ck_assert_uint_gt(fake.publish_count, 0);
	const char *id = fake_header_value(&fake.publishes[fake.publish_count - 1], DLQ_PROP_ID);
	ck_assert_ptr_nonnull(id);
	snprintf(out, DLQ_ID_LEN + 1, "%s", id);
}

static void setup(void)
{
	fake_reset();
	fake.now_ms = 1000000;
	fake.wall_ms = 1700000000000;
	snprintf(dir, sizeof(dir), "/tmp/dlq-gauges-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(policy_path, sizeof(policy_path), "%s/policies.json", dir);
	snprintf(state_path, sizeof(state_path), "%s/state", dir);
	write_policies(first_file);
}

static void teardown(void)
{
	stop();
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
	fake_reset();
}

START_TEST(tracking_nacks_ticks_and_refusals_keep_the_gauges_exact)
{
	start_with("64MiB", false, NULL);
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1], c[DLQ_ID_LEN + 1], e[DLQ_ID_LEN + 1], copy[DLQ_ID_LEN + 1];
	track("jobs/1", "one", a);
	track("slow/1", "two", b);
	track("files/x", "three", c);
	track("gone/y", "four", e);
	check_gauges();
	ck_assert_int_eq(nack(a, "w1", false), DLQ_NACK_RETRIED);   /* a retry copy, sent */
	check_gauges();
	ck_assert_int_eq(nack(a, "w2", false), DLQ_NACK_RETRIED);   /* a second nacker of the same record */
	ck_assert_int_eq(nack(a, "w2", false), DLQ_NACK_DUPLICATE);
	check_gauges();
	ck_assert_int_eq(nack(b, "w1", false), DLQ_NACK_RETRIED);   /* delayed */
	ck_assert_int_eq(nack(e, "w1", true), DLQ_NACK_RETRIED);    /* delayed, from the policy file */
	check_gauges();
	struct dlq_gauges per[5], total;
	running_gauges(per, &total);
	ck_assert_uint_eq(total.delayed, 2);
	ck_assert_uint_eq(per[1].delayed, 1);
	ck_assert_uint_eq(per[4].delayed, 1);
	dlq__tick(&d);                                             /* sent -> settling */
	check_gauges();
	fake.fail_publishes = 3;
	ck_assert_int_eq(nack(c, "w1", false), DLQ_NACK_RETRIED);   /* refused: owed */
	check_gauges();
	dlq__tick(&d);
	dlq__tick(&d);
	check_gauges();
	fake.fail_publishes = 0;
	dlq__tick(&d);
	dlq__tick(&d);
	check_gauges();
	fake.now_ms += 2500;                                       /* the delayed copies are due */
	dlq__tick(&d);
	check_gauges();
	last_copy_id(copy);
	ck_assert_int_eq(nack(copy, "w1", false), DLQ_NACK_RETRIED);
	dlq__tick(&d);
	dlq__tick(&d);
	check_gauges();
	running_gauges(per, &total);
	ck_assert_uint_eq(total.pending + total.delayed, 1);
}
END_TEST

START_TEST(clients_leaving_keep_the_gauges_exact)
{
	start_with("64MiB", false, NULL);
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	track("for/me", "one", a);
	track("slow/2", "two", b);
	ck_assert_int_eq(nack(a, "leaver", false), DLQ_NACK_RETRIED);
	ck_assert_int_eq(nack(b, "leaver", false), DLQ_NACK_RETRIED);
	check_gauges();
	dlq__client_gone(&d, "leaver");                            /* both become dead letters */
	check_gauges();
	dlq__tick(&d);
	dlq__tick(&d);
	check_gauges();
}
END_TEST

START_TEST(expiry_and_eviction_keep_the_gauges_exact)
{
	start_with("2KiB", false, NULL);
	char id[DLQ_ID_LEN + 1];
	char payload[200];
	memset(payload, 'p', sizeof(payload) - 1);
	payload[sizeof(payload) - 1] = '\0';
	for(int i = 0; i < 40; i++){
		track(i % 2 ? "jobs/x" : "files/y", payload, id);        /* the bound evicts */
		check_gauges();
	}
	ck_assert_uint_gt(engine__totals(&d)->evicted, 0);
	ck_assert_int_eq(nack(id, "w", false), DLQ_NACK_RETRIED);
	check_gauges();
	fake.now_ms += 11000;                                      /* the window ends */
	dlq__tick(&d);
	dlq__tick(&d);
	check_gauges();
	ck_assert_uint_gt(engine__totals(&d)->expired, 0);
	ck_assert_uint_eq(d.ledger.count, 0);
}
END_TEST

START_TEST(a_reload_recounts_records_that_change_policy)
{
	start_with("64MiB", false, NULL);
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1], c[DLQ_ID_LEN + 1];
	track("files/x", "f", a);
	track("gone/y", "g", b);
	track("jobs/1", "j", c);
	ck_assert_int_eq(nack(b, "w", true), DLQ_NACK_RETRIED);     /* delayed under gone/# */
	check_gauges();
	write_policies(second_file);
	char err[256];
	ck_assert_int_eq(dlq__reload(&d, opts, n_opts, err, sizeof(err)), 0);
	check_gauges();
	struct dlq_gauges per[5], total;
	running_gauges(per, &total);
	/* Declaration order: jobs/#, slow/#, for/me, then the file: new/#, files/+. */
	ck_assert_str_eq(d.cfg.policies.items[4].filter, "files/+");
	ck_assert_uint_eq(per[4].records, 1);
	ck_assert_uint_eq(per[3].records, 0);
	ck_assert_uint_eq(total.records, 3);                       /* gone/y's in the totals only */
	ck_assert_uint_eq(total.delayed, 1);
	/* After the reload the updates go to the new slots. */
	ck_assert_int_eq(nack(a, "w", false), DLQ_NACK_RETRIED);
	check_gauges();
	fake.now_ms += 1500;
	dlq__tick(&d);
	dlq__tick(&d);
	check_gauges();
}
END_TEST

/* The rate history (model/history.h) follows its filter through a reload,
 * as the counters do: a new policy starts with none, a removed one's goes. */
START_TEST(a_reload_keeps_each_filters_rate_history)
{
	start_with("64MiB", false, NULL);
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];
	track("files/x", "f", a);
	track("gone/y", "g", b);
	ck_assert_int_eq(nack(a, "w", false), DLQ_NACK_RETRIED);
	ck_assert_int_eq(nack(b, "w", false), DLQ_NACK_RETRIED);
	struct dlq_history_minute m[DLQ_HISTORY_MINUTES];
	ck_assert_str_eq(d.cfg.policies.items[3].filter, "files/+");
	ck_assert_uint_eq(dlq__history(&d, 3, fake.wall_ms, m), 1);
	ck_assert_uint_eq(dlq__history(&d, 4, fake.wall_ms, m), 1);
	write_policies(second_file);
	char err[256];
	ck_assert_int_eq(dlq__reload(&d, opts, n_opts, err, sizeof(err)), 0);
	ck_assert_str_eq(d.cfg.policies.items[3].filter, "new/#");
	ck_assert_uint_eq(dlq__history(&d, 3, fake.wall_ms, m), 0);
	ck_assert_str_eq(d.cfg.policies.items[4].filter, "files/+");
	ck_assert_uint_eq(dlq__history(&d, 4, fake.wall_ms, m), 1);
	ck_assert_uint_eq(m[0].nacks, 1);
	ck_assert_uint_eq(dlq__history(&d, 5, fake.wall_ms, m), 0); /* past the table */
}
END_TEST

START_TEST(a_restore_from_the_state_file_counts_what_it_restores)
{
	start_with("64MiB", true, NULL);
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1], c[DLQ_ID_LEN + 1];
	track("jobs/1", "one", a);
	track("slow/1", "two", b);
	track("files/z", "three", c);
	ck_assert_int_eq(nack(b, "w", true), DLQ_NACK_RETRIED);     /* delayed */
	fake.fail_publishes = 10;
	ck_assert_int_eq(nack(c, "w", true), DLQ_NACK_RETRIED);     /* owed */
	fake.fail_publishes = 0;
	check_gauges();
	stop();
	start_with("64MiB", true, NULL);
	check_gauges();
	struct dlq_gauges total;
	running_gauges(NULL, &total);
	ck_assert_uint_eq(total.records, 3);
	ck_assert_uint_eq(total.delayed, 1);
	ck_assert_uint_eq(total.pending, 1);
	dlq__tick(&d);
	dlq__tick(&d);
	check_gauges();
}
END_TEST

START_TEST(redelivery_tracking_bytes_keep_the_gauges_exact)
{
	start_with("64MiB", false, "allow");
	static char payload[] = "tracked";
	char id[DLQ_ID_LEN + 1];
	dlq__client_active(&d, "s", 1);
	dlq__event(&d);
	track("jobs/r", payload, id);
	struct dlq_read_check rc = {
		.client = "s", .conn = 1, .topic = "jobs/r", .payload = payload,
		.payload_len = (uint32_t)strlen(payload), .qos = 1,
	};
	ck_assert(!dlq__read_check(&d, &rc));                      /* a delivery is noted: extra bytes */
	check_gauges();
	ck_assert_uint_gt(record__more(d.ledger.oldest)->extra_bytes, 0);
	fake.now_ms += 11000;
	dlq__tick(&d);
	check_gauges();
	ck_assert_uint_eq(d.ledger.count, 0);
}
END_TEST

int main(void)
{
	return check_run(check_suite("gauges", check_fixture(tcase_create("core"), setup, teardown), CHECK_TESTS(
			tracking_nacks_ticks_and_refusals_keep_the_gauges_exact, clients_leaving_keep_the_gauges_exact,
			expiry_and_eviction_keep_the_gauges_exact, a_reload_keeps_each_filters_rate_history,
			a_reload_recounts_records_that_change_policy, a_restore_from_the_state_file_counts_what_it_restores,
			redelivery_tracking_bytes_keep_the_gauges_exact)));
}
