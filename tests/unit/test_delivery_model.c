/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A model check of a delivery's life (issue 45): seeded random sequences of
 * what happens to tracked messages under an ack_timeout (a message routed,
 * sent, ACKed, NACKed, finally NACKed, reported in progress, its clock
 * running out, its subscriber leaving, coming back, subscribing or
 * unsubscribing, its session ending, a reload, a restart from the state
 * file) over three subscribers and up to four messages, on Mosquitto
 * 2.1's rule (a clock per send) and 2.0's (one delivery at a time per
 * subscriber, from redelivery tracking's access checks), driven through
 * the engine's face (dlq.h) against the fake broker port. After every step
 * the invariants of docs/semantics.md ("Acknowledgement deadlines",
 * Invariants) are checked from what can be observed: the counters, the
 * awaiting gauge, the deliveries awaiting settlement, and what the port
 * saw published (retry copies and dead letters, by chain). At the end of
 * each sequence it is driven to quiescence (every lasting session back and
 * sent what waits for it, ticks past every deadline, every session ended)
 * and every chain must have ended ACKed or dead-lettered exactly once.
 *
 * A failure prints the sequence's seed and its steps. DLQ_MODEL_SEED=<seed>
 * replays that one sequence (printing its steps); DLQ_MODEL_RUNS=<n> runs
 * n sequences per line instead of the default. A sequence it finds is
 * kept below as a named case, shrunk to the steps that matter.
 */
#include <check.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "engine/dlq.h"
#include "engine/recount.h"
#include "engine_calls.h"
#include "fake_port.h"
#include "model/deadlines.h"
#include "mosquitto_dlq.h"
#include "test_util.h"

enum {
	CLIENTS = 3,
	MSGS = 4,
	ITEMS = 64,
	STEPS = 40,
	RUNS = 1500,      /* sequences per broker line by default */
	TRACE = 4096,
	MAX_ATTEMPTS = 3,
};

/* Event patterns of issue 45's known cases (and one more this model
 * found), left out of the generated sequences until they are fixed: each
 * names its case, and set to 0 lets the model find it again. */
/* What is left of case 1 (a clean session leaving on 2.0 is fixed and in
 * the sequences): a lasting session that ends at this DISCONNECT (session
 * expiry 0), which 2.0 does not show a plugin: what it was routed waits
 * for a subscriber that will not come back. A limit of the line. */
#define EXCLUDED_2_0_LASTING_SESSION_ENDED_AT_DISCONNECT 1
/* Case 3: a session resumed without a SUBSCRIBE on 2.0 is not seen
 * back: its line waits on no clock while it is connected. */
#define EXCLUDED_CASE_3_RESUME_UNSEEN_ON_2_0 1
/* Case 6: an empty payload on 2.0 is not found by its READ check: its
 * delivery is not held to a deadline. */
#define EXCLUDED_CASE_6_EMPTY_PAYLOAD_ON_2_0 1
/* 2.0, found by this model: after a restart the broker holds its messages
 * at new addresses, and a READ check is matched by topic and payload,
 * which a message and its retry copies (retry_to=delivery) share: a resend
 * of the original can be counted as an attempt of a copy (another chain's,
 * or a later one of its own), so a chain gets two retry copies at one
 * attempt, or starts at a later attempt. Left out: after a restart on
 * 2.0, an original with retry copies is not delivered again. */
#define EXCLUDED_2_0_ORIGINAL_TAKEN_FOR_ITS_COPY_AFTER_A_RESTART 1

struct model_client {
	char id[4];
	bool persists;    /* its sessions outlive their connections */
	bool connected;
	bool has_session; /* the broker holds a session for it */
	bool subscribed;  /* its session subscribes to jobs/# */
	bool seen_lasting;/* 2.1: the engine was told its session lasts (CLIENT_OFFLINE) */
	uintptr_t conn;
};

/* A tracked message the broker may deliver: an original, or a retry copy
 * for one client (retry_to=delivery). */
struct model_item {
	char id[DLQ_ID_LEN + 1];
	char topic[16];
	char payload[8];
	int origin;       /* the original message's index */
	int target;       /* a copy's client; -1: an original */
	unsigned retry_count;
	bool in_session;  /* a copy the target's session holds (2.1) */
	unsigned sends[CLIENTS];
	unsigned born;    /* a copy: the ticks before it was handed over */
	bool queued[CLIENTS];  /* the client's session holds it, to be sent (again) */
	bool got[CLIENTS];     /* the client received it: it knows its dlq-id */
	bool settled[CLIENTS]; /* the client settled it: it is not resent */
};

struct model {
	uint64_t seed;
	uint64_t rng;
	bool v21;
	struct model_client c[CLIENTS];
	struct model_item items[ITEMS];
	size_t n_items;
	int msgs;
	size_t seen;                   /* fake publishes taken in */
	bool chain[MSGS][CLIENTS];     /* the client was held to the message: its chain runs */
	bool acked[MSGS][CLIENTS];     /* an ACK of the chain was accepted */
	unsigned dead[MSGS][CLIENTS];  /* dead letters of the chain */
	uint64_t dead_seen, copies_seen, acks_accepted;
	uint64_t dead_sent;            /* dead-letter publishes, one published again after a restart included */
	char letters[MSGS * CLIENTS * 2][DLQ_ID_LEN + 1]; /* the dead letters' ids */
	uint64_t copies_sent;          /* copy publishes, a copy published again after a restart included */
	/* What the port saw and the engine accepted before the last restart
	 * (the counters start again at a restart). */
	uint64_t base_dead, base_copies, base_acks;
	unsigned restarts;
	unsigned ack_timeout_s;
	char policy_path[96];
	char state_path[96];
	char trace[TRACE];
	size_t trace_len;
	int step;
	unsigned ticks;
};

static struct dlq d;
static bool live;
static struct model m;
static bool verbose;

static uint64_t next_rand(void)
{
	uint64_t z = (m.rng += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static unsigned below(unsigned n)
{
	return (unsigned)(next_rand() % n);
}

static void note(const char *fmt, ...)
{
	char line[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if(verbose) fprintf(stderr, "model %3d: %s\n", m.step, line);
	int n = snprintf(m.trace + m.trace_len, sizeof(m.trace) - m.trace_len, "  %3d %s\n", m.step, line);
	if(n > 0 && m.trace_len + (size_t)n < sizeof(m.trace)) m.trace_len += (size_t)n;
}

/* Fails with the seed, the line and the steps so far. */
#define EXPECT(cond, ...) do{ \
		if(!(cond)){ \
			char what_[256]; \
			snprintf(what_, sizeof(what_), __VA_ARGS__); \
			fprintf(stderr, "model: seed %" PRIu64 " (%s) failed at step %d: %s\n" \
					"replay: DLQ_MODEL_SEED=%" PRIu64 "\nsteps:\n%s", m.seed, m.v21 ? "2.1" : "2.0", \
					m.step, what_, m.seed, m.trace); \
			ck_abort_msg("seed %" PRIu64 ": %s", m.seed, what_); \
		} \
	}while(0)

static void write_policies(unsigned ack_timeout_s)
{
	FILE *f = fopen(m.policy_path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "{\"policies\":[{\"filter\":\"jobs/#\",\"max_attempts\":%d,\"dead_letter\":\"dead/jobs\","
			"\"retry_to\":\"delivery\",\"ack_timeout\":\"%us\"}]}", MAX_ATTEMPTS, ack_timeout_s);
	ck_assert_int_eq(fclose(f), 0);
	m.ack_timeout_s = ack_timeout_s;
}

static struct dlq_option opts[] = {
	{"policy_file", NULL},
	{"state_file", NULL},
	{"redelivery_tracking", "allow"},
	{"nack_window", "1h"},
	{"dead_letter_keep", "1MiB"}, /* each dead letter has an id: one published again is known */
};

/* 2.1: whether the broker holds a session for the client. */
static int has_session(void *ctx, const char *client)
{
	(void)ctx;
	for(int i = 0; i < CLIENTS; i++){
		if(!strcmp(m.c[i].id, client)) return m.c[i].has_session;
	}
	return 0;
}

static int client_of(const char *id)
{
	for(int i = 0; id && i < CLIENTS; i++){
		if(!strcmp(m.c[i].id, id)) return i;
	}
	return -1;
}

static int origin_of(const char *id)
{
	for(size_t i = 0; id && i < m.n_items; i++){
		if(m.items[i].target < 0 && !strcmp(m.items[i].id, id)) return m.items[i].origin;
	}
	return -1;
}

static struct dlq_record *record_of(const struct model_item *it)
{
	struct dlq_id id;
	if(!id__decode(it->id, strlen(it->id), &id)) return NULL;
	return ledger__find(&d.ledger, &id);
}

/* The item a record is of, or -1. */
static int item_of(const struct dlq_record *r)
{
	for(size_t i = 0; i < m.n_items; i++){
		if(record_of(&m.items[i]) == r) return (int)i;
	}
	return -1;
}

/* Whether the client's session persists, as the adapters would say it
 * (2.1: only once the broker said so, session_life.c). */
static bool persists(int c)
{
	return m.c[c].persists && (!m.v21 || m.c[c].seen_lasting);
}

/* Takes in what the port saw published since the last look: dead
 * letters by chain, at most one each; retry copies as items the broker
 * may deliver, one per failed attempt of a chain. */
static void take_publishes(void)
{
	for(; m.seen < fake.publish_count; m.seen++){
		const struct fake_publish *p = &fake.publishes[m.seen];
		const char *origin = fake_header_value(p, DLQ_PROP_ORIGIN_ID);
		int o = origin_of(origin);
		EXPECT(o >= 0, "publish to %s without a known origin-id", p->topic);
		if(!strcmp(p->topic, "dead/jobs")){
			int c = client_of(fake_header_value(p, DLQ_PROP_DEAD_LETTER_CLIENT));
			const char *lid = fake_header_value(p, DLQ_PROP_DEAD_LETTER_ID);
			EXPECT(c >= 0, "dead letter of message %d without a known client", o);
			EXPECT(lid != NULL, "dead letter of message %d without its id", o);
			m.dead_sent++;
			bool again = false;
			for(uint64_t k = 0; k < m.dead_seen; k++){
				if(!strcmp(m.letters[k], lid)) again = true;
			}
			if(again) continue; /* the same letter again (at least once) */
			EXPECT(m.dead_seen < ARRAY_LEN(m.letters), "too many dead letters");
			snprintf(m.letters[m.dead_seen], sizeof(m.letters[0]), "%s", lid);
			m.dead[o][c]++;
			m.dead_seen++;
			note("  -> dead letter of m%d for %s, retry-count %s (%s)", o, m.c[c].id,
					fake_header_value(p, DLQ_PROP_RETRY_COUNT), fake_header_value(p, DLQ_PROP_DEAD_LETTER_REASON));
			EXPECT(m.chain[o][c], "dead letter of m%d for %s, which was never held to it", o, m.c[c].id);
			EXPECT(m.dead[o][c] == 1, "a second dead letter of m%d for %s", o, m.c[c].id);
			EXPECT(!m.acked[o][c], "dead letter of m%d for %s, which ACKed it", o, m.c[c].id);
			continue;
		}
		int c = client_of(p->client);
		EXPECT(c >= 0, "retry copy to %s not for a known client", p->topic);
		const char *id = fake_header_value(p, DLQ_PROP_ID);
		const char *rc = fake_header_value(p, DLQ_PROP_RETRY_COUNT);
		EXPECT(id && rc, "retry copy without dlq-id or retry-count");
		bool known = false;
		for(size_t i = 0; i < m.n_items; i++){
			if(!strcmp(m.items[i].id, id)) known = true;
		}
		m.copies_sent++;
		if(known){
			note("  -> retry copy %s again (at least once)", id);
			continue;
		}
		unsigned n = (unsigned)strtoul(rc, NULL, 10);
		for(size_t i = 0; i < m.n_items; i++){
			EXPECT(!(m.items[i].origin == o && m.items[i].target == c && m.items[i].retry_count == n),
					"two retry copies of m%d for %s at attempt %u", o, m.c[c].id, n);
		}
		EXPECT(n >= 1 && n < MAX_ATTEMPTS, "retry copy of m%d with retry-count %u", o, n);
		EXPECT(m.chain[o][c], "retry copy of m%d for %s, which was never held to it", o, m.c[c].id);
		EXPECT(m.n_items < ITEMS, "too many items");
		struct model_item *it = &m.items[m.n_items++];
		memset(it, 0, sizeof(*it));
		snprintf(it->id, sizeof(it->id), "%s", id);
		snprintf(it->topic, sizeof(it->topic), "%s", p->topic);
		memcpy(it->payload, p->payload, p->payload_len < sizeof(it->payload) ? p->payload_len : sizeof(it->payload) - 1);
		it->origin = o;
		it->target = c;
		it->retry_count = n;
		it->in_session = m.c[c].has_session;
		it->queued[c] = it->in_session;
		it->born = m.ticks;
		m.copies_seen++;
		note("  -> retry copy i%zu of m%d for %s, retry-count %u%s", m.n_items - 1, o, m.c[c].id, n,
				it->in_session ? "" : " (no session: the broker drops it)");
	}
}

/* The invariants that hold after every step. */
static void check_invariants(void)
{
	take_publishes();
	const struct dlq_counters *t = dlq__totals(&d);
	/* awaitingAck is the deliveries awaiting settlement. */
	struct dlq_gauges total;
	dlq__count_gauges(&d, NULL, &total);
	EXPECT(d.gauges.total.awaiting == d.deadlines.count, "awaitingAck %" PRIu64 " but %zu deliveries awaited",
			(uint64_t)d.gauges.total.awaiting, d.deadlines.count);
	EXPECT(total.awaiting == d.deadlines.count, "recounted awaitingAck %" PRIu64 " but %zu deliveries awaited",
			(uint64_t)total.awaiting, d.deadlines.count);
	/* What the counters say left is what the port saw. */
	EXPECT(t->dead_letters == m.dead_sent - m.base_dead, "deadLetters %" PRIu64 ", %" PRIu64 " published",
			t->dead_letters, m.dead_sent - m.base_dead);
	EXPECT(t->retry_copies == m.copies_sent - m.base_copies, "retryCopies %" PRIu64 ", %" PRIu64 " published",
			t->retry_copies, m.copies_sent - m.base_copies);
	EXPECT(t->acks == m.acks_accepted - m.base_acks, "acks %" PRIu64 ", %" PRIu64 " accepted", t->acks,
			m.acks_accepted - m.base_acks);
	/* Every delivery awaiting settlement is on a running clock (2.1), or,
	 * while its subscriber is connected, on one or behind one in its line
	 * (2.0: the subscriber's first delivery runs). */
	for(int c = 0; c < CLIENTS; c++){
		struct dlq_deadline_client *dc = deadlines__client(&d.deadlines, m.c[c].id);
		if(dc == NULL) continue;
		for(struct dlq_deadline *e = dc->head; e; e = e->cnext){
			if(m.v21){
				EXPECT(e->queue != NULL, "a delivery to %s awaits settlement on no clock", m.c[c].id);
			}else if(m.c[c].connected){
				EXPECT(dc->head->queue != NULL, "%s is connected and its first delivery's clock is not running "
						"(%zu awaited, the first of i%d, the plugin takes it %s)", m.c[c].id, dc->count,
						item_of(dc->head->record), dc->online ? "as connected" : "as away");
			}
		}
	}
	/* Every chain has ended at most once. */
	for(int o = 0; o < m.msgs; o++){
		for(int c = 0; c < CLIENTS; c++){
			EXPECT(m.dead[o][c] <= 1, "%u dead letters of m%d for %s", m.dead[o][c], o, m.c[c].id);
			EXPECT(!(m.dead[o][c] && m.acked[o][c]), "m%d for %s both ACKed and dead-lettered", o, m.c[c].id);
		}
	}
}

static void tick_by(uint64_t ms)
{
	m.ticks++;
	fake.now_ms += ms;
	fake.wall_ms += (int64_t)ms;
	dlq__tick(&d);
}

/* Starts the engine as the broker would: with persistence, 2.1 saying
 * which sessions it holds (restored ones, after a restart). */
static void start_engine(void)
{
	struct dlq_config cfg;
	char err[1024];
	opts[0].value = m.policy_path;
	opts[1].value = m.state_path;
	ck_assert_msg(config__parse(opts, ARRAY_LEN(opts), &cfg, err, sizeof(err)) == 0, "%s", err);
	cfg.sys_interval_ms = 0;
	/* Snapshots in the foreground: a fork per save would be most of the
	 * run (and far more under the sanitizers); what is saved is the same. */
	cfg.state_save_foreground = true;
	struct dlq_broker broker = {
		.persistence = true,
		.exact_counting = m.v21,
		.has_session = m.v21 ? has_session : NULL,
	};
	live = true;
	ck_assert_msg(dlq__init(&d, &cfg, &broker, err, sizeof(err)) == 0, "%s", err);
}

/* ---- the events ---- */

static void ev_publish(void)
{
	int k = m.msgs++;
	struct model_item *it = &m.items[m.n_items++];
	memset(it, 0, sizeof(*it));
	snprintf(it->topic, sizeof(it->topic), "jobs/%d", k);
	snprintf(it->payload, sizeof(it->payload), "m%d", k);
	/* 2.1 finds a message by its dlq-id; 2.0 by its payload, which an
	 * empty one does not give (case 6). */
	if(below(4) == 0 && (m.v21 || !EXCLUDED_CASE_6_EMPTY_PAYLOAD_ON_2_0)) it->payload[0] = '\0';
	it->origin = k;
	it->target = -1;
	engine_track(&d, it->topic, it->payload, 1, NULL, it->id);
	/* The broker routes it to every session (all subscribe to jobs/#). */
	for(int c = 0; c < CLIENTS; c++) it->queued[c] = m.c[c].has_session && m.c[c].subscribed;
	note("publish m%d (i%zu, %s)", k, m.n_items - 1, it->id);
}

/* How many records of the message's chains client c has deliveries of,
 * awaiting settlement. */
static unsigned held_of_origin(int o, int c)
{
	unsigned n = 0;
	for(size_t i = 0; i < m.n_items; i++){
		struct dlq_record *r = m.items[i].origin == o ? record_of(&m.items[i]) : NULL;
		if(r && deadlines__find(&d.deadlines, r, m.c[c].id)) n++;
	}
	return n;
}

/* The broker delivers item i to client c: 2.1, a READ check and the send
 * (MESSAGE_OUT), to a connected client; 2.0, the READ check where the
 * message is routed to the client's session (connected, or a lasting
 * session offline). */
static void ev_deliver(size_t i, int c)
{
	struct model_item *it = &m.items[i];
	struct model_client *mc = &m.c[c];
	struct dlq_read_check rc = {
		.client = mc->id, .conn = mc->conn, .topic = it->topic,
		.payload = it->payload, .payload_len = (uint32_t)strlen(it->payload), .qos = 1,
		.id = m.v21 ? it->id : NULL, .settles = true, .persists = persists(c),
	};
	/* 2.0 finds a message by its payload's address, or by its content,
	 * which the copies of a chain share: the delivery may be taken for
	 * any record of the chain. */
	unsigned held_before = held_of_origin(it->origin, c);
	bool removed = dlq__read_check(&d, &rc);
	note("deliver i%zu (m%d%s) to %s%s%s", i, it->origin, it->target >= 0 ? " copy" : "", mc->id,
			mc->connected ? "" : " (offline session)", removed ? ": removed from its session" : "");
	if(!removed && m.v21){
		struct dlq_send s;
		dlq__sent(&d, mc->id, mc->conn, it->id, strlen(it->id), it->topic, it->payload,
				(uint32_t)strlen(it->payload), &s);
		if(s.attempt && s.policy && s.policy->ack_timeout_ms){
			dlq__deadline_sent(&d, &s, mc->id, persists(c));
		}
		it->sends[c]++;
	}
	if(held_of_origin(it->origin, c) > held_before) m.chain[it->origin][c] = true;
	/* A delivery to a subscriber that settles is held to its deadline,
	 * unless the subscriber settled it before. */
	struct dlq_record *r = record_of(it);
	if(!removed && r && !ledger__has_settler(r, mc->id)){
		EXPECT(m.v21 ? deadlines__find(&d.deadlines, r, mc->id) != NULL : held_of_origin(it->origin, c) > 0,
				"i%zu (m%d) delivered to %s is not held to its deadline", i, it->origin, mc->id);
	}
	it->queued[c] = false;
	if(mc->connected) it->got[c] = true;
	if(removed) m.chain[it->origin][c] = true;
}

static void ev_settle(size_t i, int c, unsigned how)
{
	struct model_item *it = &m.items[i];
	struct dlq_nack_result res;
	static const char *names[] = {"ACK", "progress", "NACK", "final NACK"};
	if(how < 2){
		struct dlq_settle s = {.kind = how ? DLQ_SETTLE_PROGRESS : DLQ_SETTLE_ACK, .id = it->id,
			.id_len = strlen(it->id), .client = m.c[c].id};
		dlq__settle(&d, &s, &res);
	}else{
		struct dlq_nack n = {.id = it->id, .id_len = strlen(it->id), .client = m.c[c].id,
			.client_persists = persists(c), .client_settles = true, .final = how == 3};
		dlq__nack(&d, &n, &res);
	}
	note("%s of i%zu (m%d%s) by %s: %s", names[how], i, it->origin, it->target >= 0 ? " copy" : "", m.c[c].id,
			dlq__nack_status_text(res.status));
	bool ours = it->target < 0 || it->target == c;
	if(how != 1) it->settled[c] = true;
	if(res.status == DLQ_NACK_ACKED){
		m.acks_accepted++;
		if(ours && m.chain[it->origin][c]) m.acked[it->origin][c] = true;
	}
	if((res.status == DLQ_NACK_RETRIED || res.status == DLQ_NACK_DEAD_LETTERED) && ours){
		m.chain[it->origin][c] = true;
	}
}

static void ev_tick(void)
{
	uint64_t ms = below(4) == 0 ? 1 : below(m.ack_timeout_s * 1000u + 3000u);
	note("tick +%" PRIu64 " ms", ms);
	tick_by(ms);
}

/* Client c's session is gone: what it held with it. */
static void session_gone(int c)
{
	for(size_t i = 0; i < m.n_items; i++){
		struct model_item *it = &m.items[i];
		if(it->target == c) it->in_session = false;
		it->queued[c] = false;
		it->got[c] = false;
	}
}

/* The client's connection ends: 2.1, CLIENT_OFFLINE for a lasting
 * session, DISCONNECT for one that ends; 2.0, DISCONNECT. */
static void ev_leave(int c, bool end_session)
{
	struct model_client *mc = &m.c[c];
	bool lasts = mc->persists && !end_session;
	note("%s leaves%s", mc->id, lasts ? " (its session lasts)" : " (its session ends)");
	dlq__client_left(&d, mc->id, mc->conn, !mc->persists);
	mc->connected = false;
	mc->has_session = lasts;
	if(!lasts) session_gone(c);
	if(m.v21 && lasts){
		dlq__client_offline(&d, mc->id);
		mc->seen_lasting = true;
	}else{
		dlq__client_gone(&d, mc->id);
	}
}

/* The client connects again (a lasting session resumed unless it is
 * clean), and subscribes (2.0: the plugin sees it connected). */
static void ev_return(int c, bool clean)
{
	struct model_client *mc = &m.c[c];
	bool resumed = mc->has_session && !clean;
	mc->conn += 16;
	mc->connected = true;
	if(!resumed){
		session_gone(c);
	}else{
		/* The broker resends what it sent and the client did not
		 * settle (a hung subscriber sends no PUBACK either), and sends
		 * what was queued while it was away. */
		for(size_t i = 0; i < m.n_items; i++){
			struct model_item *it = &m.items[i];
			if(it->got[c] && !it->settled[c]) it->queued[c] = true;
		}
	}
	mc->has_session = true;
	note("%s connects%s", mc->id, resumed ? ", resuming its session" : " with a new session, and subscribes");
	if(m.v21) dlq__client_connected(&d, mc->id, !resumed);
	if(!resumed){
		mc->subscribed = true;
		if(m.v21) dlq__subscribed(&d, mc->id, "jobs/#", 1, 0);
	}
	/* 2.0 sees a client back only from a publish, a subscribe or an
	 * access check: one that resumes its session and sends nothing is
	 * not seen (case 3). */
	if(!m.v21 && resumed && !EXCLUDED_CASE_3_RESUME_UNSEEN_ON_2_0 && below(2) == 0){
		note("  (it sends nothing: not seen)");
		return;
	}
	dlq__client_active(&d, mc->id, mc->conn);
}

/* The broker stops (SIGTERM: the plugin saves its state) and starts
 * again: every connection is gone, the lasting sessions are restored
 * (persistence), the clean ones are not. */
static void ev_restart(void)
{
	note("restart");
	engine_stop(&d, &live);
	for(int c = 0; c < CLIENTS; c++){
		struct model_client *mc = &m.c[c];
		mc->connected = false;
		mc->has_session = mc->has_session && mc->persists;
		mc->seen_lasting = false;
		if(!mc->has_session) session_gone(c);
	}
	/* Ids drawn after the restart must not repeat those before it. */
	fake.random_state = m.seed + 0x5eed0000u * ++m.restarts;
	m.base_dead = m.dead_sent;
	m.base_copies = m.copies_sent;
	m.base_acks = m.acks_accepted;
	start_engine();
}

/* The client subscribes to jobs/# again, or unsubscribes (it stays
 * connected): what its session holds stays there; new messages come, or
 * do not. 2.0 shows either as an access check of the live connection. */
static void ev_subscription(int c)
{
	struct model_client *mc = &m.c[c];
	mc->subscribed = !mc->subscribed;
	note("%s %s", mc->id, mc->subscribed ? "subscribes" : "unsubscribes");
	if(m.v21 && mc->subscribed){
		dlq__subscribed(&d, mc->id, "jobs/#", 1, 0);
	}else if(m.v21){
		dlq__unsubscribed(&d, mc->id, "jobs/#");
	}else{
		dlq__client_active(&d, mc->id, mc->conn);
	}
}

static void ev_reload(void)
{
	unsigned t = m.ack_timeout_s == 5 ? 7 : 5;
	char err[512];
	write_policies(t);
	note("reload: ack_timeout %us", t);
	EXPECT(dlq__reload(&d, opts, ARRAY_LEN(opts), err, sizeof(err)) == 0, "reload refused: %s", err);
}

/* Whether item i may be delivered to client c now. */
static bool deliverable(size_t i, int c)
{
	const struct model_item *it = &m.items[i];
	if(!it->queued[c]) return false;
	if(it->target >= 0){
		/* A copy goes to its target alone, once the broker took it (at
		 * the top of the loop pass after the tick it was handed over
		 * in); 2.0 shows no access check of it (single_publish): its
		 * clock started when it was handed over. */
		return m.v21 && it->target == c && it->in_session && m.c[c].connected && m.ticks > it->born;
	}
	if(m.v21) return m.c[c].connected;
	if(EXCLUDED_2_0_ORIGINAL_TAKEN_FOR_ITS_COPY_AFTER_A_RESTART && m.restarts){
		for(size_t k = 0; k < m.n_items; k++){
			if(m.items[k].origin == it->origin && m.items[k].target >= 0) return false;
		}
	}
	return m.c[c].connected || m.c[c].has_session;
}

static void random_step(void)
{
	int c = (int)below(CLIENTS);
	size_t i = m.n_items ? below((unsigned)m.n_items) : 0;
	unsigned roll = below(100);
	if(roll < 10 && m.msgs < MSGS){
		ev_publish();
	}else if(roll < 35 && m.n_items){
		if(deliverable(i, c)) ev_deliver(i, c);
	}else if(roll < 55 && m.n_items){
		/* A client settles an original (delivered to it or not: a
		 * foreign ACK settles only its own part), or a copy for it: a
		 * copy for another client is not delivered to it, so it does
		 * not know its dlq-id. */
		if(m.items[i].target >= 0 && m.items[i].target != c) return;
		if(!m.c[c].connected) return; /* settling is a publish */
		if(m.items[i].target == c && !(m.v21 ? m.items[i].got[c] : m.ticks > m.items[i].born)) return;
		unsigned how = below(10);
		ev_settle(i, c, how < 4 ? 0 : how < 6 ? 1 : how < 9 ? 2 : 3);
	}else if(roll < 73){
		ev_tick();
	}else if(roll < 82){
		if(m.c[c].connected){
			bool end_session = below(4) == 0;
#if EXCLUDED_2_0_LASTING_SESSION_ENDED_AT_DISCONNECT
			if(!m.v21 && m.c[c].persists && end_session) return;
#endif
			ev_leave(c, end_session);
		}
	}else if(roll < 91){
		bool clean = below(5) == 0;
		if(!m.c[c].connected) ev_return(c, clean);
	}else if(roll < 95){
		if(m.c[c].connected) ev_subscription(c);
	}else if(roll < 97){
		ev_reload();
	}else{
		ev_restart();
	}
}

/* Drives the sequence to quiescence: every lasting session comes back
 * and is sent what waits for it, ticks run past every deadline; then
 * every session ends and ticks run again. Then every chain has ended:
 * ACKed, or dead-lettered exactly once, with nothing awaited or owed. */
static void quiesce(void)
{
	note("-- quiescence");
	for(int c = 0; c < CLIENTS; c++){
		if(!m.c[c].connected && m.c[c].has_session) ev_return(c, false);
	}
	for(int round = 0; round < 4 * MAX_ATTEMPTS * MSGS + 8; round++){
		for(int c = 0; c < CLIENTS; c++){
			for(size_t i = 0; i < m.n_items; i++){
				if(deliverable(i, c)) ev_deliver(i, c);
			}
		}
		tick_by(m.ack_timeout_s * 1000u + 1000u);
		tick_by(1);
		note("tick past the deadlines");
		check_invariants();
	}
	for(int c = 0; c < CLIENTS; c++){
		if(!m.c[c].connected) ev_return(c, true);
		ev_leave(c, true);
		check_invariants();
	}
	for(int round = 0; round < 3; round++){
		tick_by(m.ack_timeout_s * 1000u + 1000u);
		tick_by(1);
		check_invariants();
	}
	EXPECT(d.deadlines.count == 0, "%zu deliveries still awaited at quiescence", d.deadlines.count);
	EXPECT(dlq__owed_count(&d) == 0, "%zu copies or dead letters still owed at quiescence", dlq__owed_count(&d));
	for(int o = 0; o < m.msgs; o++){
		for(int c = 0; c < CLIENTS; c++){
			if(!m.chain[o][c]) continue;
			EXPECT(m.acked[o][c] || m.dead[o][c] == 1,
					"m%d for %s neither ACKed nor dead-lettered at quiescence (dead letters: %u)", o, m.c[c].id,
					m.dead[o][c]);
		}
	}
}

static void remove_state(void)
{
	char journal[128];
	unlink(m.state_path);
	snprintf(journal, sizeof(journal), "%s.journal", m.state_path);
	unlink(journal);
}

static void setup_path(void)
{
	snprintf(m.policy_path, sizeof(m.policy_path), "%s/dlq-model-%ld.json", access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm", (long)getpid());
	snprintf(m.state_path, sizeof(m.state_path), "%s/dlq-model-%ld.state", access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm", (long)getpid());
}

/* Starts a sequence on a line: the engine from nothing, the clients
 * connected, lasting or clean as persists says (a bit per client). */
static void begin(uint64_t seed, bool v21, unsigned persists)
{
	static const char *ids[CLIENTS] = {"a", "b", "c"};
	memset(&m.c, 0, sizeof(m.c));
	m.seed = seed;
	m.v21 = v21;
	m.n_items = 0;
	m.msgs = 0;
	m.seen = 0;
	memset(m.chain, 0, sizeof(m.chain));
	memset(m.acked, 0, sizeof(m.acked));
	memset(m.dead, 0, sizeof(m.dead));
	m.dead_seen = m.copies_seen = m.acks_accepted = m.copies_sent = m.dead_sent = 0;
	m.base_dead = m.base_copies = m.base_acks = 0;
	m.restarts = 0;
	m.trace_len = 0;
	m.trace[0] = '\0';
	m.step = 0;
	m.ticks = 0;

	setup_path();
	fake_reset();
	fake.now_ms = 1000;
	fake.wall_ms = 1700000000000;
	fake.random_state = seed;
	write_policies(5);
	remove_state();
	start_engine();
	for(int c = 0; c < CLIENTS; c++){
		snprintf(m.c[c].id, sizeof(m.c[c].id), "%s", ids[c]);
		m.c[c].persists = (persists >> c) & 1;
		m.c[c].conn = 0x1000u * (uintptr_t)(c + 1);
		note("%s: %s session", m.c[c].id, m.c[c].persists ? "lasting" : "clean");
		ev_return(c, true);
	}
	check_invariants();
}

/* Ends a sequence: to quiescence, and the checks there. */
static void end(void)
{
	quiesce();
	engine_stop(&d, &live);
	fake_reset();
	unlink(m.policy_path);
	remove_state();
}

/* One sequence from seed: the line is the seed's lowest bit. */
static void run_sequence(uint64_t seed)
{
	m.rng = seed * 0x2545f4914f6cdd1dULL + 1;
	begin(seed, seed & 1, below(1u << CLIENTS));
	for(m.step = 1; m.step <= STEPS; m.step++){
		random_step();
		check_invariants();
	}
	end();
}

static unsigned runs(void)
{
	const char *s = getenv("DLQ_MODEL_RUNS");
	return s ? (unsigned)strtoul(s, NULL, 10) : RUNS;
}

static void run_line(bool v21)
{
	const char *replay = getenv("DLQ_MODEL_SEED");
	if(replay){
		uint64_t seed = strtoull(replay, NULL, 10);
		if(((seed & 1) != 0) == v21){
			verbose = true;
			run_sequence(seed);
		}
	}else{
		for(unsigned k = 0; k < runs(); k++){
			run_sequence(2 * (uint64_t)k + (v21 ? 1 : 0));
		}
	}
}

/* ---- sequences the model found, kept as they were shrunk ---- */

/* The next step of a written sequence: its invariants are checked. */
static void checked(void)
{
	check_invariants();
	m.step++;
}

/* A tick of ms, a step of its own. */
static void ticked(uint64_t ms)
{
	note("tick +%" PRIu64 " ms", ms);
	tick_by(ms);
	checked();
}

/* The start of the sequences below: m0 is sent to b (clean, as all), and
 * its clock runs out: the retry copy for b is handed over in that tick. */
static void copy_for_b_handed_over(uint64_t seed, bool v21)
{
	m.rng = 1;
	begin(seed, v21, 0);
	ev_publish();
	checked();
	ev_deliver(0, 1);
	checked();
	ticked(6000);
	EXPECT(m.n_items == 2 && m.items[1].target == 1, "no retry copy for b");
}

/* Found by the model (seed 21, on 2.1; on 2.0 too): a retry copy the
 * broker accepted in the loop pass it stopped in, for a client whose
 * session does not survive a restart, was both owed (to be published
 * again) and held for its client, and the restart made a dead letter of
 * each: two for one chain. */
static void copy_owed_at_a_restart(bool v21)
{
	copy_for_b_handed_over(1, v21);
	ev_restart();
	checked();
	ticked(1);
	EXPECT(m.dead[0][1] == 1, "%u dead letters of m0 for b after the restart", m.dead[0][1]);
	end();
}

START_TEST(a_copy_owed_at_a_restart_is_dead_lettered_once_on_2_1)
{
	copy_owed_at_a_restart(true);
}
END_TEST

START_TEST(a_copy_owed_at_a_restart_is_dead_lettered_once_on_2_0)
{
	copy_owed_at_a_restart(false);
}
END_TEST

/* Found by the model (seed 129, on 2.1): a retry copy the broker took
 * for a client that then left without a session was dead-lettered then
 * (it was held); a restart in the same loop pass saved it owed all the
 * same, and it was published again, for a client without a session, and
 * dead-lettered a second time. */
START_TEST(a_copy_dead_lettered_at_a_leave_is_not_again_at_a_restart_on_2_1)
{
	copy_for_b_handed_over(3, true);
	ev_leave(1, true);   /* before the broker sent it: dead-lettered */
	checked();
	EXPECT(m.dead[0][1] == 1, "m0's copy for b not dead-lettered when b left");
	ev_restart();
	checked();
	ticked(1);
	end();
}
END_TEST

/* Found by the model (seed 59693, on 2.1): a retry copy for a lasting
 * session, owed at a restart (the broker had taken it, and restored it in
 * the session), was published again at the first tick after the restart;
 * by then the client had received the session's copy and ended its
 * session: the copy published again was dead-lettered for want of a
 * session, and the delivery of the session's copy ran out into the
 * chain's next attempt and its own dead letter: two for one chain. */
START_TEST(a_copy_published_again_after_a_restart_that_reached_its_client_is_dropped_on_2_1)
{
	m.rng = 1;
	begin(4, true, 2);   /* b's session lasts */
	ev_publish();
	checked();
	ev_deliver(0, 1);
	checked();
	ev_settle(0, 1, 2);  /* b NACKs m0: its copy is handed over */
	checked();
	ticked(1);
	ev_restart();        /* the copy is owed, and in b's session */
	checked();
	ev_return(1, false);
	checked();
	ev_deliver(1, 1);    /* the session's copy is sent to b */
	checked();
	ev_leave(1, true);   /* and b ends its session */
	checked();
	ticked(1);           /* the owed copy falls due: b has no session */
	EXPECT(m.dead[0][1] == 0, "the copy b received was dead-lettered when it was published again");
	end();
}
END_TEST

/* Found by the model (seed 0, on 2.0): a delivery in a client's line
 * that was settled while it waited (here a retry copy for a clean session
 * that a restart dead-lettered, its hold let go) was dropped from the line
 * when its clock ran out, without starting the next one's: a connected
 * client's next delivery then waited on no clock, for ever. */
START_TEST(the_line_goes_on_past_a_delivery_settled_while_it_waited_on_2_0)
{
	m.rng = 1;
	begin(2, false, 0);
	ev_publish();
	checked();
	ev_publish();
	checked();
	ev_deliver(0, 2);        /* c's line: m0, running */
	checked();
	ev_settle(1, 2, 2);      /* c NACKs m1: its copy waits behind m0 */
	checked();
	EXPECT(m.n_items == 3 && m.items[2].target == 2, "no retry copy for c");
	ev_restart();            /* the copy's hold is let go with its dead letter; c comes back */
	checked();
	for(int k = 0; k < 4; k++){
		ticked(6000);        /* m0 runs out (a copy behind), then the let-go copy's clock */
	}
	EXPECT(m.dead[1][2] == 1, "m1's copy for c not dead-lettered at the restart");
	end();
}
END_TEST

START_TEST(random_sequences_on_2_1)
{
	run_line(true);
}
END_TEST

START_TEST(random_sequences_on_2_0)
{
	run_line(false);
}
END_TEST

static Suite *model_suite(void)
{
	Suite *s = suite_create("delivery_model");
	TCase *tc = tcase_create("random");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, random_sequences_on_2_1);
	tcase_add_test(tc, random_sequences_on_2_0);
	suite_add_tcase(s, tc);
	tc = tcase_create("found");
	tcase_add_test(tc, a_copy_owed_at_a_restart_is_dead_lettered_once_on_2_1);
	tcase_add_test(tc, a_copy_owed_at_a_restart_is_dead_lettered_once_on_2_0);
	tcase_add_test(tc, the_line_goes_on_past_a_delivery_settled_while_it_waited_on_2_0);
	tcase_add_test(tc, a_copy_dead_lettered_at_a_leave_is_not_again_at_a_restart_on_2_1);
	tcase_add_test(tc, a_copy_published_again_after_a_restart_that_reached_its_client_is_dropped_on_2_1);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(model_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
