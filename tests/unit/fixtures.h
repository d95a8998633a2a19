/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The fixture of the engine's unit tests (test_track.c, test_nack.c,
 * test_attempts.c, test_tick.c, test_outbound.c, test_gone.c,
 * test_lifecycle.c, one per module of plugin/engine they test): one engine
 * started on a table of options, messages tracked and NACKed through it,
 * and assertions on what it published through the fake broker port.
 */
#ifndef DLQ_TEST_FIXTURES_H
#define DLQ_TEST_FIXTURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "engine/dlq.h"
#include "engine_calls.h"
#include "fake_port.h"
#include "mosquitto_dlq.h"
#include "test_util.h"
#include "util/headers.h"
#include "util/id.h"

/* The engine under test, whether it runs, and a publisher's properties
 * (a content type and a user property "trace"), which setup makes. */
extern struct dlq d;
extern bool d_live;
extern struct dlq_headers original;

/* The policies most engine tests start with. */
static const struct dlq_option standard[] = {
	{"policy", "numbers max_attempts=3 dead_letter=dead/numbers"},
	{"policy", "devices/+/telemetry max_attempts=5 dead_letter=dead/telemetry retry_to=devices/retry/telemetry"},
	{"policy", "once max_attempts=1 dead_letter=dead/once"},
};

/* A bound of 1 KiB on what is tracked and owed. */
static const struct dlq_option small[] = {
	{"policy", "numbers max_attempts=3 dead_letter=dead/numbers"},
	{"policy", "once max_attempts=1 dead_letter=dead/once"},
	{"max_pending_bytes", "1KiB"},
};

/* Policies with delays between their retry copies. */
static const struct dlq_option delayed[] = {
	{"policy", "slow max_attempts=3 dead_letter=dead/slow retry_delay=2s"},
	{"policy", "backoff max_attempts=5 dead_letter=dead/backoff retry_delay=1s retry_backoff=2"},
	{"policy", "capped max_attempts=5 dead_letter=dead/capped retry_delay=1s retry_backoff=10 retry_max_delay=30s"},
	{"policy", "numbers max_attempts=3 dead_letter=dead/numbers"},
	{"policy", "fixed/+ max_attempts=3 dead_letter=dead/fixed retry_to=fixed/retry retry_delay=2s"},
	{"policy", "jitter max_attempts=3 dead_letter=dead/jitter retry_delay=10s retry_jitter=0.5"},
};

static const struct dlq_option delayed_small[] = {
	{"policy", "slow max_attempts=3 dead_letter=dead/slow retry_delay=2s"},
	{"max_pending_bytes", "1KiB"},
};

static const struct dlq_option delayed_short_window[] = {
	{"policy", "slow max_attempts=3 dead_letter=dead/slow retry_delay=5s"},
	{"nack_window", "1s"},
};

/* A delayed retry copy's names when its publisher set "trace". */
static const char *const delayed_copy_names[] = {
	"trace", DLQ_PROP_ID, DLQ_PROP_RETRY_COUNT, DLQ_PROP_ORIGIN_TOPIC, DLQ_PROP_ORIGIN_ID, DLQ_PROP_FIRST_NACK_TIME,
};

/* A retry copy's user property names. */
static const char *const copy_names[] = {
	DLQ_PROP_ID, DLQ_PROP_RETRY_COUNT, DLQ_PROP_ORIGIN_TOPIC, DLQ_PROP_ORIGIN_ID,
};

/* A dead letter's user property names. */
static const char *const dead_letter_names[] = {
	DLQ_PROP_RETRY_COUNT, DLQ_PROP_ORIGIN_TOPIC, DLQ_PROP_ORIGIN_ID, DLQ_PROP_DEAD_LETTER_REASON,
	DLQ_PROP_DEAD_LETTER_CLIENT, DLQ_PROP_DEAD_LETTER_FILTER, DLQ_PROP_DEAD_LETTER_TIME, DLQ_PROP_DEAD_LETTER_CAUSE,
	DLQ_PROP_DEAD_LETTER_ID,
};

/* A dead letter's names when its publisher set a "trace" property. */
static const char *const traced_dead_letter_names[] = {
	"trace", DLQ_PROP_RETRY_COUNT, DLQ_PROP_ORIGIN_TOPIC, DLQ_PROP_ORIGIN_ID, DLQ_PROP_DEAD_LETTER_REASON,
	DLQ_PROP_DEAD_LETTER_CLIENT, DLQ_PROP_DEAD_LETTER_FILTER, DLQ_PROP_DEAD_LETTER_TIME, DLQ_PROP_DEAD_LETTER_CAUSE,
	DLQ_PROP_DEAD_LETTER_ID,
};

/* What publish i must be: its target client (to NULL: none), topic, QoS
 * and payload; its user property names in order (names NULL: not
 * checked); and the value of every property below that is not NULL. */
struct want {
	const char *to, *topic;
	uint8_t qos;
	const char *payload;
	const char *const *names;
	size_t names_count;
	const char *retry_count, *origin_topic, *origin_id, *first_nack_time;
	const char *dl_reason, *dl_client, *dl_filter, *dl_time, *dl_cause;
};

/* The names every dead letter of a message published without user
 * properties carries. */
#define DEAD_LETTER_NAMES .names = dead_letter_names, .names_count = ARRAY_LEN(dead_letter_names)

/* Checks publish i against the fields of a struct want given as designated
 * initializers: expect(0, .to = "sub1", .topic = "numbers", ...). */
#define expect(i, ...) expect_message((i), &(const struct want){__VA_ARGS__})

/* Starts d on opts, without $SYS publishes among the ones counted here;
 * stop stops it (if it runs). */
void start(const struct dlq_option *opts, size_t count);
void stop(void);

void track_with(const char *topic, const char *payload, uint8_t qos, const struct dlq_headers *h,
		char id[DLQ_ID_LEN + 1]);

void track(const char *topic, const char *payload, uint8_t qos, char id[DLQ_ID_LEN + 1]);

enum dlq_nack_status nack_full(const char *id, const char *client, const char *reason, struct dlq_nack_result *res);

/* A NACK with the session flag and, when requested_ms is not negative, a
 * delay of its own. */
enum dlq_nack_status nack_with(const char *id, const char *client, bool persists, int64_t requested_ms,
		struct dlq_nack_result *res);

enum dlq_nack_status nack(const char *id, const char *client);

bool known(const char *id);

const struct fake_publish *pub(size_t i);

void expect_publish(size_t i, const char *client, const char *topic, uint8_t qos, const char *payload);

const char *hdr(size_t i, const char *name);

void expect_hdr(size_t i, const char *name, const char *value);

/* The exact list of user property names of publish i, in order. */
void expect_user_names(size_t i, const char *const *names, size_t count);

/* The dlq-id a retry copy was stamped with, copied out. */
void copy_id(size_t i, char out[DLQ_ID_LEN + 1]);

void expect_message(size_t i, const struct want *w);

size_t logs_containing(const char *text);

const char *log_containing(const char *text);

void now_time(char out[32]);

/* The standard policies started and payload tracked on topic at qos (its
 * dlq-id in id). */
void start_tracking(const char *topic, const char *payload, uint8_t qos, char id[DLQ_ID_LEN + 1]);
/* The standard policies started, "42" tracked on "numbers" at QoS 1 (its
 * dlq-id in id0) and NACKed once by sub1: a retry copy is made for sub1. */
void start_with_a_copy_for_sub1(char id0[DLQ_ID_LEN + 1]);

/* The delayed policies started, payload tracked on topic at qos with the
 * properties h (or none; its dlq-id in id) and NACKed once by sub1, whose
 * session persists or not: a delayed retry copy waits. Returns the time of
 * the NACK. */
uint64_t start_with_a_delayed_copy(const char *topic, const char *payload, uint8_t qos, const struct dlq_headers *h,
		bool persists, char id[DLQ_ID_LEN + 1]);
/* How many messages start_filled_to_the_bound tracks at the most. */
enum { FILL_MOST = 40 };
/* The small bound started; then empty messages of "once" (max_attempts=1:
 * a NACK dead-letters them) tracked until the first eviction, or
 * FILL_MOST of them: the ledger filled up to the bound; and from then on
 * the broker refuses every publish. Returns how many were tracked, their
 * ids in ids. */
int start_filled_to_the_bound(char (*ids)[DLQ_ID_LEN + 1]);

/* The broker's session check, played: no client has a session. */
int no_session(void *ctx, const char *client);

/* Ticks at t - 1 (nothing new may go out) and at t (exactly one). */
void expect_due_at(uint64_t t, size_t published_before);

/* The checked fixture of every engine test: the fake port reset and the
 * publisher's properties (original) made; then the engine stopped if a test
 * left it running, and everything freed. */
void setup(void);
void teardown(void);

#endif
