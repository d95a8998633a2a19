/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The model of a delivery's life (issue 45; delivery_model.h says what it
 * covers): the events, driven through the engine's face (dlq.h) against
 * the fake broker port, and the invariants of docs/semantics.md
 * ("Acknowledgement deadlines", Invariants), checked from what can be
 * observed: the counters, the awaiting gauge, the deliveries awaiting
 * settlement, and what the port saw published (retry copies and dead
 * letters, by chain).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "delivery_model.h"
#include "engine/recount.h"
#include "engine_fixture.h"
#include "fake_port.h"
#include "model/deadlines.h"
#include "mosquitto_dlq.h"
#include "test_util.h"

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

/* The model checks the engine's rules, not the disk: it saves its state
 * file thousands of times a run (each restart and reload), and a sync of
 * each made the suite wait for the disk (119 s in the 2.1 chroot, whose
 * /dev/shm is no tmpfs, with other suites running; 1.8 s on a tmpfs). These
 * take the place of libc's in the programs that link the model (its unit
 * suite and its fuzz target): what a save writes, and the order of its
 * rename, are the same; only the wait for the disk is gone. */
int fsync(int fd)
{
	(void)fd;
	return 0;
}

int fdatasync(int fd)
{
	(void)fd;
	return 0;
}

struct model model;
bool model_verbose;
static struct dlq d;
static bool live;

static uint64_t next_rand(void)
{
	uint64_t z = (model.rng += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* A choice in [0, n): from the model's source of choices, or its own
 * generator from model.rng. */
static unsigned below(unsigned n)
{
	return model.below ? model.below(n) : (unsigned)(next_rand() % n);
}

static void note(const char *fmt, ...)
{
	char line[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if(model_verbose) fprintf(stderr, "model %3d: %s\n", model.step, line);
	int n = snprintf(model.trace + model.trace_len, sizeof(model.trace) - model.trace_len, "  %3d %s\n", model.step, line);
	if(n > 0 && model.trace_len + (size_t)n < sizeof(model.trace)) model.trace_len += (size_t)n;
}

static void write_policies(unsigned ack_timeout_s)
{
	FILE *f = fopen(model.policy_path, "w");
	MODEL_EXPECT(f != NULL, "cannot write %s", model.policy_path);
	fprintf(f, "{\"policies\":[{\"filter\":\"jobs/#\",\"max_attempts\":%d,\"dead_letter\":\"dead/jobs\","
			"\"retry_to\":\"delivery\",\"ack_timeout\":\"%us\"}]}", MAX_ATTEMPTS, ack_timeout_s);
	MODEL_EXPECT(fclose(f) == 0, "cannot write %s", model.policy_path);
	model.ack_timeout_s = ack_timeout_s;
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
		if(!strcmp(model.c[i].id, client)) return model.c[i].has_session;
	}
	return 0;
}

static int client_of(const char *id)
{
	for(int i = 0; id && i < CLIENTS; i++){
		if(!strcmp(model.c[i].id, id)) return i;
	}
	return -1;
}

static int origin_of(const char *id)
{
	for(size_t i = 0; id && i < model.n_items; i++){
		if(model.items[i].target < 0 && !strcmp(model.items[i].id, id)) return model.items[i].origin;
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
	for(size_t i = 0; i < model.n_items; i++){
		if(record_of(&model.items[i]) == r) return (int)i;
	}
	return -1;
}

/* Whether the client's session persists, as the adapters would say it
 * (2.1: only once the broker said so, session_life.c). */
static bool persists(int c)
{
	return model.c[c].persists && (!model.v21 || model.c[c].seen_lasting);
}

/* Takes in what the port saw published since the last look: dead
 * letters by chain, at most one each; retry copies as items the broker
 * may deliver, one per failed attempt of a chain. */
static void take_publishes(void)
{
	for(; model.seen < fake.publish_count; model.seen++){
		const struct fake_publish *p = &fake.publishes[model.seen];
		const char *origin = fake_header_value(p, DLQ_PROP_ORIGIN_ID);
		int o = origin_of(origin);
		MODEL_EXPECT(o >= 0, "publish to %s without a known origin-id", p->topic);
		if(!strcmp(p->topic, "dead/jobs")){
			int c = client_of(fake_header_value(p, DLQ_PROP_DEAD_LETTER_CLIENT));
			const char *lid = fake_header_value(p, DLQ_PROP_DEAD_LETTER_ID);
			MODEL_EXPECT(c >= 0, "dead letter of message %d without a known client", o);
			MODEL_EXPECT(lid != NULL, "dead letter of message %d without its id", o);
			model.dead_sent++;
			bool again = false;
			for(uint64_t k = 0; k < model.dead_seen; k++){
				if(!strcmp(model.letters[k], lid)) again = true;
			}
			if(again) continue; /* the same letter again (at least once) */
			MODEL_EXPECT(model.dead_seen < ARRAY_LEN(model.letters), "too many dead letters");
			snprintf(model.letters[model.dead_seen], sizeof(model.letters[0]), "%s", lid);
			model.dead[o][c]++;
			model.dead_seen++;
			note("  -> dead letter of m%d for %s, retry-count %s (%s)", o, model.c[c].id,
					fake_header_value(p, DLQ_PROP_RETRY_COUNT), fake_header_value(p, DLQ_PROP_DEAD_LETTER_REASON));
			MODEL_EXPECT(model.chain[o][c], "dead letter of m%d for %s, which was never held to it", o, model.c[c].id);
			MODEL_EXPECT(model.dead[o][c] == 1, "a second dead letter of m%d for %s", o, model.c[c].id);
			MODEL_EXPECT(!model.acked[o][c], "dead letter of m%d for %s, which ACKed it", o, model.c[c].id);
			continue;
		}
		int c = client_of(p->client);
		MODEL_EXPECT(c >= 0, "retry copy to %s not for a known client", p->topic);
		const char *id = fake_header_value(p, DLQ_PROP_ID);
		const char *rc = fake_header_value(p, DLQ_PROP_RETRY_COUNT);
		MODEL_EXPECT(id && rc, "retry copy without dlq-id or retry-count");
		bool known = false;
		for(size_t i = 0; i < model.n_items; i++){
			if(!strcmp(model.items[i].id, id)) known = true;
		}
		model.copies_sent++;
		if(known){
			note("  -> retry copy %s again (at least once)", id);
			continue;
		}
		unsigned n = (unsigned)strtoul(rc, NULL, 10);
		for(size_t i = 0; i < model.n_items; i++){
			MODEL_EXPECT(!(model.items[i].origin == o && model.items[i].target == c && model.items[i].retry_count == n),
					"two retry copies of m%d for %s at attempt %u", o, model.c[c].id, n);
		}
		MODEL_EXPECT(n >= 1 && n < MAX_ATTEMPTS, "retry copy of m%d with retry-count %u", o, n);
		MODEL_EXPECT(model.chain[o][c], "retry copy of m%d for %s, which was never held to it", o, model.c[c].id);
		MODEL_EXPECT(model.n_items < ITEMS, "too many items");
		struct model_item *it = &model.items[model.n_items++];
		memset(it, 0, sizeof(*it));
		snprintf(it->id, sizeof(it->id), "%s", id);
		snprintf(it->topic, sizeof(it->topic), "%s", p->topic);
		memcpy(it->payload, p->payload, p->payload_len < sizeof(it->payload) ? p->payload_len : sizeof(it->payload) - 1);
		it->origin = o;
		it->target = c;
		it->retry_count = n;
		it->in_session = model.c[c].has_session;
		it->queued[c] = it->in_session;
		it->born = model.ticks;
		model.copies_seen++;
		note("  -> retry copy i%zu of m%d for %s, retry-count %u%s", model.n_items - 1, o, model.c[c].id, n,
				it->in_session ? "" : " (no session: the broker drops it)");
	}
}

/* The invariants that hold after every step. */
void model_check(void)
{
	take_publishes();
	const struct dlq_counters *t = engine__totals(&d);
	/* awaitingAck is the deliveries awaiting settlement. */
	struct dlq_gauges total;
	recount__gauges(&d, NULL, &total);
	MODEL_EXPECT(d.gauges.total.awaiting == d.deadlines.count, "awaitingAck %" PRIu64 " but %zu deliveries awaited",
			(uint64_t)d.gauges.total.awaiting, d.deadlines.count);
	MODEL_EXPECT(total.awaiting == d.deadlines.count, "recounted awaitingAck %" PRIu64 " but %zu deliveries awaited",
			(uint64_t)total.awaiting, d.deadlines.count);
	/* What the counters say left is what the port saw. */
	MODEL_EXPECT(t->dead_letters == model.dead_sent - model.base_dead,
			"deadLetters %" PRIu64 ", %" PRIu64 " published", t->dead_letters, model.dead_sent - model.base_dead);
	MODEL_EXPECT(t->retry_copies == model.copies_sent - model.base_copies,
			"retryCopies %" PRIu64 ", %" PRIu64 " published", t->retry_copies, model.copies_sent - model.base_copies);
	MODEL_EXPECT(t->acks == model.acks_accepted - model.base_acks, "acks %" PRIu64 ", %" PRIu64 " accepted", t->acks,
			model.acks_accepted - model.base_acks);
	/* Every delivery awaiting settlement is on a running clock (2.1), or,
	 * while its subscriber is connected, on one or behind one in its line
	 * (2.0: the subscriber's first delivery runs). */
	for(int c = 0; c < CLIENTS; c++){
		struct dlq_deadline_client *dc = deadlines__client(&d.deadlines, model.c[c].id);
		if(dc == NULL) continue;
		for(struct dlq_deadline *e = dc->head; e; e = e->cnext){
			if(model.v21){
				MODEL_EXPECT(e->queue != NULL, "a delivery to %s awaits settlement on no clock", model.c[c].id);
			}else if(model.c[c].connected){
				MODEL_EXPECT(dc->head->queue != NULL, "%s is connected and its first delivery's clock is not running "
						"(%zu awaited, the first of i%d, the plugin takes it %s)", model.c[c].id, dc->count,
						item_of(dc->head->record), dc->online ? "as connected" : "as away");
			}
		}
	}
	/* Every chain has ended at most once. */
	for(int o = 0; o < model.msgs; o++){
		for(int c = 0; c < CLIENTS; c++){
			MODEL_EXPECT(model.dead[o][c] <= 1, "%u dead letters of m%d for %s", model.dead[o][c], o, model.c[c].id);
			MODEL_EXPECT(!(model.dead[o][c] && model.acked[o][c]), "m%d for %s both ACKed and dead-lettered", o, model.c[c].id);
		}
	}
}

void model_tick_by(uint64_t ms)
{
	model.ticks++;
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
	opts[0].value = model.policy_path;
	opts[1].value = model.state_path;
	MODEL_EXPECT(config__parse(opts, ARRAY_LEN(opts), &cfg, err, sizeof(err)) == 0, "%s", err);
	cfg.sys_interval_ms = 0;
	/* Snapshots in the foreground: a fork per save would be most of the
	 * run (and far more under the sanitizers); what is saved is the same. */
	cfg.state_save_foreground = true;
	struct dlq_broker broker = {
		.persistence = true,
		.exact_counting = model.v21,
		.has_session = model.v21 ? has_session : NULL,
	};
	live = true;
	MODEL_EXPECT(dlq__init(&d, &cfg, &broker, err, sizeof(err)) == 0, "%s", err);
}

/* ---- the events ---- */

void model_publish(void)
{
	int k = model.msgs++;
	struct model_item *it = &model.items[model.n_items++];
	memset(it, 0, sizeof(*it));
	snprintf(it->topic, sizeof(it->topic), "jobs/%d", k);
	snprintf(it->payload, sizeof(it->payload), "m%d", k);
	/* 2.1 finds a message by its dlq-id; 2.0 by its payload, which an
	 * empty one does not give (case 6). */
	if(below(4) == 0 && (model.v21 || !EXCLUDED_CASE_6_EMPTY_PAYLOAD_ON_2_0)) it->payload[0] = '\0';
	it->origin = k;
	it->target = -1;
	const struct dlq_policy *p = dlq__policy_for(&d, it->topic);
	MODEL_EXPECT(p != NULL, "no policy for %s", it->topic);
	MODEL_EXPECT(dlq__track(&d, p, it->topic, it->payload, (uint32_t)strlen(it->payload), 1, NULL, 0, it->id) == 0,
			"m%d not tracked", k);
	/* The broker routes it to every session (all subscribe to jobs/#). */
	for(int c = 0; c < CLIENTS; c++) it->queued[c] = model.c[c].has_session && model.c[c].subscribed;
	note("publish m%d (i%zu, %s)", k, model.n_items - 1, it->id);
}

/* How many records of the message's chains client c has deliveries of,
 * awaiting settlement. */
static unsigned held_of_origin(int o, int c)
{
	unsigned n = 0;
	for(size_t i = 0; i < model.n_items; i++){
		struct dlq_record *r = model.items[i].origin == o ? record_of(&model.items[i]) : NULL;
		if(r && deadlines__find(&d.deadlines, r, model.c[c].id)) n++;
	}
	return n;
}

/* The broker delivers item i to client c: 2.1, a READ check and the send
 * (MESSAGE_OUT), to a connected client; 2.0, the READ check where the
 * message is routed to the client's session (connected, or a lasting
 * session offline). */
void model_deliver(size_t i, int c)
{
	struct model_item *it = &model.items[i];
	struct model_client *mc = &model.c[c];
	struct dlq_read_check rc = {
		.client = mc->id, .conn = mc->conn, .topic = it->topic,
		.payload = it->payload, .payload_len = (uint32_t)strlen(it->payload), .qos = 1,
		.id = model.v21 ? it->id : NULL, .settles = true, .persists = persists(c),
	};
	/* 2.0 finds a message by its payload's address, or by its content,
	 * which the copies of a chain share: the delivery may be taken for
	 * any record of the chain. */
	unsigned held_before = held_of_origin(it->origin, c);
	bool removed = dlq__read_check(&d, &rc);
	note("deliver i%zu (m%d%s) to %s%s%s", i, it->origin, it->target >= 0 ? " copy" : "", mc->id,
			mc->connected ? "" : " (offline session)", removed ? ": removed from its session" : "");
	if(!removed && model.v21){
		struct dlq_send s;
		dlq__sent(&d, mc->id, mc->conn, it->id, strlen(it->id), it->topic, it->payload,
				(uint32_t)strlen(it->payload), &s);
		if(s.attempt && s.policy && s.policy->ack_timeout_ms){
			dlq__deadline_sent(&d, &s, mc->id, persists(c));
		}
		it->sends[c]++;
	}
	if(held_of_origin(it->origin, c) > held_before) model.chain[it->origin][c] = true;
	/* A delivery to a subscriber that settles is held to its deadline,
	 * unless the subscriber settled it before. */
	struct dlq_record *r = record_of(it);
	if(!removed && r && !ledger__has_settler(r, mc->id)){
		MODEL_EXPECT(model.v21 ? deadlines__find(&d.deadlines, r, mc->id) != NULL : held_of_origin(it->origin, c) > 0,
				"i%zu (m%d) delivered to %s is not held to its deadline", i, it->origin, mc->id);
	}
	it->queued[c] = false;
	if(mc->connected) it->got[c] = true;
	if(removed) model.chain[it->origin][c] = true;
}

void model_settle(size_t i, int c, unsigned how)
{
	struct model_item *it = &model.items[i];
	struct dlq_nack_result res;
	static const char *names[] = {"ACK", "progress", "NACK", "final NACK"};
	if(how < 2){
		struct dlq_settle s = {.kind = how ? DLQ_SETTLE_PROGRESS : DLQ_SETTLE_ACK, .id = it->id,
			.id_len = strlen(it->id), .client = model.c[c].id};
		dlq__settle(&d, &s, &res);
	}else{
		struct dlq_nack n = {.id = it->id, .id_len = strlen(it->id), .client = model.c[c].id,
			.client_persists = persists(c), .client_settles = true, .final = how == 3};
		dlq__nack(&d, &n, &res);
	}
	note("%s of i%zu (m%d%s) by %s: %s", names[how], i, it->origin, it->target >= 0 ? " copy" : "", model.c[c].id,
			dlq__nack_status_text(res.status));
	bool ours = it->target < 0 || it->target == c;
	if(how != 1) it->settled[c] = true;
	if(res.status == DLQ_NACK_ACKED){
		model.acks_accepted++;
		if(ours && model.chain[it->origin][c]) model.acked[it->origin][c] = true;
	}
	if((res.status == DLQ_NACK_RETRIED || res.status == DLQ_NACK_DEAD_LETTERED) && ours){
		model.chain[it->origin][c] = true;
	}
}

static void ev_tick(void)
{
	uint64_t ms = below(4) == 0 ? 1 : below(model.ack_timeout_s * 1000u + 3000u);
	note("tick +%" PRIu64 " ms", ms);
	model_tick_by(ms);
}

/* Client c's session is gone: what it held with it. */
static void session_gone(int c)
{
	for(size_t i = 0; i < model.n_items; i++){
		struct model_item *it = &model.items[i];
		if(it->target == c) it->in_session = false;
		it->queued[c] = false;
		it->got[c] = false;
	}
}

/* The client's connection ends: 2.1, CLIENT_OFFLINE for a lasting
 * session, DISCONNECT for one that ends; 2.0, DISCONNECT. */
void model_leave(int c, bool end_session)
{
	struct model_client *mc = &model.c[c];
	bool lasts = mc->persists && !end_session;
	note("%s leaves%s", mc->id, lasts ? " (its session lasts)" : " (its session ends)");
	dlq__client_left(&d, mc->id, mc->conn, !mc->persists);
	mc->connected = false;
	mc->has_session = lasts;
	if(!lasts) session_gone(c);
	if(model.v21 && lasts){
		dlq__client_offline(&d, mc->id);
		mc->seen_lasting = true;
	}else{
		dlq__client_gone(&d, mc->id);
	}
}

/* The client connects again (a lasting session resumed unless it is
 * clean), and subscribes (2.0: the plugin sees it connected). */
void model_return(int c, bool clean)
{
	struct model_client *mc = &model.c[c];
	bool resumed = mc->has_session && !clean;
	mc->conn += 16;
	mc->connected = true;
	if(!resumed){
		session_gone(c);
	}else{
		/* The broker resends what it sent and the client did not
		 * settle (a hung subscriber sends no PUBACK either), and sends
		 * what was queued while it was away. */
		for(size_t i = 0; i < model.n_items; i++){
			struct model_item *it = &model.items[i];
			if(it->got[c] && !it->settled[c]) it->queued[c] = true;
		}
	}
	mc->has_session = true;
	note("%s connects%s", mc->id, resumed ? ", resuming its session" : " with a new session, and subscribes");
	if(model.v21) dlq__client_connected(&d, mc->id, !resumed);
	if(!resumed){
		mc->subscribed = true;
		if(model.v21) dlq__subscribed(&d, mc->id, "jobs/#", 1, 0);
	}
	/* 2.0 sees a client back only from a publish, a subscribe or an
	 * access check: one that resumes its session and sends nothing is
	 * not seen (case 3). */
	if(!model.v21 && resumed && !EXCLUDED_CASE_3_RESUME_UNSEEN_ON_2_0 && below(2) == 0){
		note("  (it sends nothing: not seen)");
		return;
	}
	dlq__client_active(&d, mc->id, mc->conn);
}

/* The broker stops (SIGTERM: the plugin saves its state) and starts
 * again: every connection is gone, the lasting sessions are restored
 * (persistence), the clean ones are not. */
void model_restart(void)
{
	note("restart");
	engine_stop(&d, &live);
	for(int c = 0; c < CLIENTS; c++){
		struct model_client *mc = &model.c[c];
		mc->connected = false;
		mc->has_session = mc->has_session && mc->persists;
		mc->seen_lasting = false;
		if(!mc->has_session) session_gone(c);
	}
	/* Ids drawn after the restart must not repeat those before it. */
	fake.random_state = model.seed + 0x5eed0000u * ++model.restarts;
	model.base_dead = model.dead_sent;
	model.base_copies = model.copies_sent;
	model.base_acks = model.acks_accepted;
	start_engine();
}

/* The client subscribes to jobs/# again, or unsubscribes (it stays
 * connected): what its session holds stays there; new messages come, or
 * do not. 2.0 shows either as an access check of the live connection. */
static void ev_subscription(int c)
{
	struct model_client *mc = &model.c[c];
	mc->subscribed = !mc->subscribed;
	note("%s %s", mc->id, mc->subscribed ? "subscribes" : "unsubscribes");
	if(model.v21 && mc->subscribed){
		dlq__subscribed(&d, mc->id, "jobs/#", 1, 0);
	}else if(model.v21){
		dlq__unsubscribed(&d, mc->id, "jobs/#");
	}else{
		dlq__client_active(&d, mc->id, mc->conn);
	}
}

static void ev_reload(void)
{
	unsigned t = model.ack_timeout_s == 5 ? 7 : 5;
	char err[512];
	write_policies(t);
	note("reload: ack_timeout %us", t);
	MODEL_EXPECT(dlq__reload(&d, opts, ARRAY_LEN(opts), err, sizeof(err)) == 0, "reload refused: %s", err);
}

/* Whether item i may be delivered to client c now. */
static bool deliverable(size_t i, int c)
{
	const struct model_item *it = &model.items[i];
	if(!it->queued[c]) return false;
	if(it->target >= 0){
		/* A copy goes to its target alone, once the broker took it (at
		 * the top of the loop pass after the tick it was handed over
		 * in); 2.0 shows no access check of it (single_publish): its
		 * clock started when it was handed over. */
		return model.v21 && it->target == c && it->in_session && model.c[c].connected && model.ticks > it->born;
	}
	if(model.v21) return model.c[c].connected;
	if(EXCLUDED_2_0_ORIGINAL_TAKEN_FOR_ITS_COPY_AFTER_A_RESTART && model.restarts){
		for(size_t k = 0; k < model.n_items; k++){
			if(model.items[k].origin == it->origin && model.items[k].target >= 0) return false;
		}
	}
	return model.c[c].connected || model.c[c].has_session;
}

void model_step(void)
{
	int c = (int)below(CLIENTS);
	size_t i = model.n_items ? below((unsigned)model.n_items) : 0;
	unsigned roll = below(100);
	if(roll < 10 && model.msgs < MSGS){
		model_publish();
	}else if(roll < 35 && model.n_items){
		if(deliverable(i, c)) model_deliver(i, c);
	}else if(roll < 55 && model.n_items){
		/* A client settles an original (delivered to it or not: a
		 * foreign ACK settles only its own part), or a copy for it: a
		 * copy for another client is not delivered to it, so it does
		 * not know its dlq-id. */
		if(model.items[i].target >= 0 && model.items[i].target != c) return;
		if(!model.c[c].connected) return; /* settling is a publish */
		if(model.items[i].target == c && !(model.v21 ? model.items[i].got[c] : model.ticks > model.items[i].born)) return;
		unsigned how = below(10);
		model_settle(i, c, how < 4 ? 0 : how < 6 ? 1 : how < 9 ? 2 : 3);
	}else if(roll < 73){
		ev_tick();
	}else if(roll < 82){
		if(model.c[c].connected){
			bool end_session = below(4) == 0;
#if EXCLUDED_2_0_LASTING_SESSION_ENDED_AT_DISCONNECT
			if(!model.v21 && model.c[c].persists && end_session) return;
#endif
			model_leave(c, end_session);
		}
	}else if(roll < 91){
		bool clean = below(5) == 0;
		if(!model.c[c].connected) model_return(c, clean);
	}else if(roll < 95){
		if(model.c[c].connected) ev_subscription(c);
	}else if(roll < 97){
		ev_reload();
	}else{
		model_restart();
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
		if(!model.c[c].connected && model.c[c].has_session) model_return(c, false);
	}
	for(int round = 0; round < 4 * MAX_ATTEMPTS * MSGS + 8; round++){
		for(int c = 0; c < CLIENTS; c++){
			for(size_t i = 0; i < model.n_items; i++){
				if(deliverable(i, c)) model_deliver(i, c);
			}
		}
		model_tick_by(model.ack_timeout_s * 1000u + 1000u);
		model_tick_by(1);
		note("tick past the deadlines");
		model_check();
	}
	for(int c = 0; c < CLIENTS; c++){
		if(!model.c[c].connected) model_return(c, true);
		model_leave(c, true);
		model_check();
	}
	for(int round = 0; round < 3; round++){
		model_tick_by(model.ack_timeout_s * 1000u + 1000u);
		model_tick_by(1);
		model_check();
	}
	MODEL_EXPECT(d.deadlines.count == 0, "%zu deliveries still awaited at quiescence", d.deadlines.count);
	MODEL_EXPECT(engine__owed_count(&d) == 0, "%zu copies or dead letters still owed at quiescence", engine__owed_count(&d));
	for(int o = 0; o < model.msgs; o++){
		for(int c = 0; c < CLIENTS; c++){
			if(!model.chain[o][c]) continue;
			MODEL_EXPECT(model.acked[o][c] || model.dead[o][c] == 1,
					"m%d for %s neither ACKed nor dead-lettered at quiescence (dead letters: %u)", o, model.c[c].id,
					model.dead[o][c]);
		}
	}
}

static void remove_state(void)
{
	char journal[128];
	unlink(model.state_path);
	snprintf(journal, sizeof(journal), "%s.journal", model.state_path);
	unlink(journal);
}

static void setup_path(void)
{
	const char *dir = access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm";
	snprintf(model.policy_path, sizeof(model.policy_path), "%s/dlq-model-%ld.json", dir, (long)getpid());
	snprintf(model.state_path, sizeof(model.state_path), "%s/dlq-model-%ld.state", dir, (long)getpid());
}

/* Starts a sequence on a line: the engine from nothing, the clients
 * connected, lasting or clean as persists says (a bit per client). */
void model_begin(uint64_t seed, bool v21, unsigned persists)
{
	static const char *ids[CLIENTS] = {"a", "b", "c"};
	memset(&model.c, 0, sizeof(model.c));
	model.seed = seed;
	model.v21 = v21;
	model.n_items = 0;
	model.msgs = 0;
	model.seen = 0;
	memset(model.chain, 0, sizeof(model.chain));
	memset(model.acked, 0, sizeof(model.acked));
	memset(model.dead, 0, sizeof(model.dead));
	model.dead_seen = model.copies_seen = model.acks_accepted = model.copies_sent = model.dead_sent = 0;
	model.base_dead = model.base_copies = model.base_acks = 0;
	model.restarts = 0;
	model.trace_len = 0;
	model.trace[0] = '\0';
	model.step = 0;
	model.ticks = 0;

	setup_path();
	fake_reset();
	fake.now_ms = 1000;
	fake.wall_ms = 1700000000000;
	fake.random_state = seed;
	write_policies(5);
	remove_state();
	start_engine();
	for(int c = 0; c < CLIENTS; c++){
		snprintf(model.c[c].id, sizeof(model.c[c].id), "%s", ids[c]);
		model.c[c].persists = (persists >> c) & 1;
		model.c[c].conn = 0x1000u * (uintptr_t)(c + 1);
		note("%s: %s session", model.c[c].id, model.c[c].persists ? "lasting" : "clean");
		model_return(c, true);
	}
	model_check();
}

/* Ends a sequence: to quiescence, and the checks there. */
void model_end(void)
{
	quiesce();
	engine_stop(&d, &live);
	fake_reset();
	unlink(model.policy_path);
	remove_state();
}

void model_run(uint64_t seed, int steps)
{
	model.below = NULL;
	model.rng = seed * 0x2545f4914f6cdd1dULL + 1;
	model_begin(seed, seed & 1, below(1u << CLIENTS));
	for(model.step = 1; model.step <= steps; model.step++){
		model_step();
		model_check();
	}
	model_end();
}

void model_checked(void)
{
	model_check();
	model.step++;
}

void model_ticked(uint64_t ms)
{
	note("tick +%" PRIu64 " ms", ms);
	model_tick_by(ms);
	model_checked();
}

