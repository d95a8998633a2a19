/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Allocation failure at every allocation of the NACK, retry-copy, delay,
 * dead-letter, client-gone and state paths. Each scenario runs once per
 * allocation it makes: run N fails the N-th allocation (alloc_fail.c), for
 * N = 1, 2, ... until a run completes with nothing failed. Every run must end
 * with nothing leaked and without a crash, and at every step the outcome must
 * be one a client or an operator can see: the request refused (an error reply
 * or status, and nothing changed, so that it can be made again), or accepted
 * with its envelope published or still owed. A refused step is made again
 * (the failure is one-shot) so that each run goes on to the end of its
 * scenario. FAULTS_VERBOSE=1 prints, per run, where the allocation failed
 * and what came of it.
 *
 * What these runs found and the plugin does not do yet is listed under
 * "Known findings" below: each is checked as it should be once fixed, and
 * reported instead of failing while its flag is 1.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "alloc_fail.h"
#include "api/control.h"
#include "check_suite.h"
#include "engine/dlq.h"
#include "engine_fixture.h"
#include "fake_port.h"
#include "model/envelope.h"
#include "mosquitto_dlq.h"
#include "store/state.h"
#include "test_util.h"

/* ---- Known findings (handed to the lead; set to 0 once fixed) ---- */

/* dlq.c record_copy: when the record of a retry copy cannot be allocated,
 * the copy was published but could not be NACKed ("unknown or expired
 * dlq-id"): its chain could never reach the dead-letter topic. Fixed: the
 * record is allocated before the copy is handed over, and a copy without
 * one waits in the outbox like a refused publish. */
#define KNOWN_COPY_NOT_NACKABLE 0

/* state.c decode_record: a record that cannot be allocated is counted as
 * skipped (as if expired) and the decode goes on: it is dropped without an
 * error. decode_envelope / get_str: an allocation failure marks the entry
 * "malformed": the rest of the file is not restored and the file is set
 * aside as damaged. Either way state__decode_* returns 0, not ENOMEM. */
#define KNOWN_DECODE_OOM_NOT_REPORTED 0

/* control.c handle_json: when cJSON_ParseWithLength fails for want of
 * memory, the reply says "payload is not valid JSON": the request is
 * refused, but the client is told its valid document is invalid. */
#define KNOWN_PARSE_OOM_AS_INVALID_JSON 0

/* control.c: cJSON_AddItemToObject's result is not checked where a built
 * item is attached (add_response's and data_response's "correlationData",
 * data_response's "data", command_list_policies' "policies"): when the copy
 * of the key cannot be allocated, the item is neither attached nor freed. */
#define KNOWN_CONTROL_ITEM_LEAK 0

#define MAX_RUNS 100000

static const struct dlq_option options[] = {
	{"policy", "orders/+ max_attempts=2 dead_letter=dead/orders"},
	{"policy", "slow/+ max_attempts=3 dead_letter=dead/slow retry_delay=1s"},
	{"policy", "fan max_attempts=2 dead_letter=dead/fan retry_to=retry/fan"},
	{"sys_interval", "0s"},
};

static bool verbose;
static unsigned known_hits;   /* known findings met in this scenario */
static unsigned refusals;     /* steps refused with an error, then made again */

/* Check's assertions allocate (in its fork mode): never inside a run. */
#define CHECK(expr, ...) do{ \
		alloc_fail_pause(); \
		ck_assert_msg(expr, __VA_ARGS__); \
		alloc_fail_resume(); \
	}while(0)

#define NOTE(...) do{ if(verbose){ fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } }while(0)

/* ---- helpers: the test's own work is never counted (paused) ---- */

/* Envelope publishes the fake broker took (there are no $SYS topics). */
static size_t published(void)
{
	return fake.publish_count;
}

static size_t owed(const struct dlq *d)
{
	return d->outbox.owed.count + d->delayed.count;
}

/* Every accepted NACK made exactly one envelope: published or owed.
 * extra: dead letters that replaced copies already published. */
static void check_conservation(const struct dlq *d, size_t extra)
{
	CHECK(engine__totals(d)->nacks + extra == published() + owed(d),
			"after the failed allocation at %s: %llu NACKs accepted (+%zu), but %zu published and %zu owed",
			alloc_fail_site(), (unsigned long long)engine__totals(d)->nacks, extra, published(), owed(d));
}

/* Initialises d; false when it was refused for want of memory (then d has
 * been cleaned up, as dlq.h asks). */
static bool engine_init(struct dlq *d)
{
	char err[1100];
	bool live;
	int rc = engine_try_start(d, &live, options, ARRAY_LEN(options), 0, err, sizeof(err));
	if(rc){
		CHECK(rc == ENOMEM, "%d %s", rc, err);
		engine_stop(d, &live);
		NOTE("  refused: %s", err);
		return false;
	}
	return true;
}

/* Tracks a publish on topic; a refusal (the broker then delivers it
 * unstamped) leaves the ledger as it was, and the next publish is tracked. */
static void track(struct dlq *d, const char *topic, char id[DLQ_ID_LEN + 1])
{
	for(int attempt = 0; attempt < 2; attempt++){
		size_t count = d->ledger.count;
		int rc = dlq__track(d, dlq__policy_for(d, topic), topic, "payload", 7, 1, NULL, 0, id);
		if(rc == 0){
			CHECK(d->ledger.count == count + 1, "d->ledger.count == count + 1");
			return;
		}
		CHECK(rc == ENOMEM, "dlq__track: %d", rc);
		CHECK(d->ledger.count == count, "a refused track changed the ledger");
		refusals++;
	}
	CHECK(false, "tracking refused twice");
}

/* The reply's single response to a NACK: true if it said "retried" or
 * "dead-lettered", false if it reported an error (which must be "out of
 * memory": nothing else can go wrong here). */
static bool reply_accepted(const char *json)
{
	cJSON *doc = cJSON_Parse(json);
	const cJSON *responses = cJSON_GetObjectItemCaseSensitive(doc, "responses");
	const cJSON *r;
	bool accepted = false;
	bool seen = false;
	CHECK(cJSON_IsArray(responses), "reply %s", json);
	cJSON_ArrayForEach(r, responses){
		const cJSON *command = cJSON_GetObjectItemCaseSensitive(r, "command");
		if(command == NULL){
			/* An error about the document as a whole: nothing ran. */
			const cJSON *error = cJSON_GetObjectItemCaseSensitive(r, "error");
			CHECK(cJSON_IsString(error), "reply %s", json);
			if(strcmp(error->valuestring, "out of memory")){
				CHECK(KNOWN_PARSE_OOM_AS_INVALID_JSON && !strcmp(error->valuestring, "payload is not valid JSON"),
						"document refused for another reason than memory: %s", json);
				NOTE("  known: a valid document refused as \"not valid JSON\" (failed at %s)", alloc_fail_site());
				known_hits++;
			}
			CHECK(!seen, "two NACK responses: %s", json);
			seen = true;
			continue;
		}
		if(!cJSON_IsString(command) || strcmp(command->valuestring, DLQ_COMMAND_NACK)) continue;
		const cJSON *result = cJSON_GetObjectItemCaseSensitive(r, "result");
		const cJSON *error = cJSON_GetObjectItemCaseSensitive(r, "error");
		CHECK(!seen, "two NACK responses: %s", json);
		seen = true;
		if(cJSON_IsString(result)){
			accepted = true;
		}else{
			CHECK(cJSON_IsString(error) && !strcmp(error->valuestring, "out of memory"),
					"NACK refused for another reason than memory: %s", json);
		}
	}
	CHECK(seen, "no NACK response: %s", json);
	cJSON_Delete(doc);
	return accepted;
}

/* NACKs id as client, compact or as a JSON document that also asks for the
 * status and the policies. Refused for want of memory: nothing changed,
 * and the NACK is made again. Returns after it was accepted. */
static void nack(struct dlq *d, const char *id, const char *client, bool compact, size_t extra)
{
	char doc[512];
	if(compact){
		snprintf(doc, sizeof(doc), "%s", id);
	}else{
		snprintf(doc, sizeof(doc), "{\"commands\":[{\"command\":\"nack\",\"id\":\"%s\",\"reason\":\"bad\","
				"\"correlationData\":\"c-1\"},{\"command\":\"getStatus\"},{\"command\":\"listPolicies\"}]}", id);
	}
	for(int attempt = 0; attempt < 2; attempt++){
		uint64_t nacks = engine__totals(d)->nacks;
		size_t before = published() + owed(d);
		struct dlq_control_request req = {
			.compact = compact,
			.payload = doc,
			.payload_len = strlen(doc),
			.client = client,
			.reason = compact ? "could not process" : NULL,
		};
		struct dlq_control_reply reply;
		int rc = control__handle(d, &req, &reply);

		alloc_fail_pause();
		bool applied = engine__totals(d)->nacks == nacks + 1;
		CHECK(engine__totals(d)->nacks - nacks <= 1, "one NACK counted twice");
		if(rc == 0 && !reply.must_send){
			/* A compact NACK that went well and wants no reply. */
			CHECK(compact && reply.json == NULL && reply.errors == 0, "no reply to send, but errors or JSON");
			CHECK(applied, "no reply to send, but the NACK was not accepted (failed at %s)", alloc_fail_site());
		}else if(rc == 0){
			CHECK(reply.json != NULL, "NULL");
			bool accepted = reply_accepted(reply.json);
			CHECK(accepted == applied, "the reply says %s, the counters say %s (failed at %s): %s",
					accepted ? "accepted" : "refused", applied ? "accepted" : "refused", alloc_fail_site(), reply.json);
		}else{
			/* No reply could be built: the NACK was applied or not, and
			 * the envelope count says which. */
			CHECK(rc == ENOMEM, "%d", (int)(rc));
			CHECK(reply.json == NULL, "not NULL");
			NOTE("  control__handle: no reply (failed at %s); NACK %s", alloc_fail_site(), applied ? "accepted" : "refused");
		}
		CHECK(published() + owed(d) == before + (applied ? 1 : 0),
				"NACK %s, but envelopes went from %zu to %zu (failed at %s)", applied ? "accepted" : "refused",
				before, published() + owed(d), alloc_fail_site());
		check_conservation(d, extra);
		control__reply_free(&reply);
		alloc_fail_resume();
		if(applied) return;
		refusals++;
	}
	CHECK(false, "NACK refused twice");
}

/* Ticks until nothing is owed that is due; an envelope whose headers could
 * not be built stays owed and goes on the next tick. */
static void tick_all(struct dlq *d, size_t extra)
{
	for(int i = 0; i < 4; i++){
		dlq__tick(d);
		alloc_fail_pause();
		check_conservation(d, extra);
		alloc_fail_resume();
	}
	CHECK(d->outbox.owed.count == 0, "%zu envelopes still owed after four ticks", d->outbox.owed.count);
}

/* The dlq-id of the last retry copy published. */
static void last_copy_id(char id[DLQ_ID_LEN + 1])
{
	for(size_t i = published(); i-- > 0; ){
		const char *v = fake_header_value(&fake.publishes[i], DLQ_PROP_ID);
		if(v){
			snprintf(id, DLQ_ID_LEN + 1, "%s", v);
			return;
		}
	}
	CHECK(false, "no retry copy published");
}

/* True if the copy with this id can be NACKed (its record was made). */
static bool nackable(const struct dlq *d, const char *id)
{
	struct dlq_id raw;
	CHECK(id__decode(id, strlen(id), &raw), "id__decode(id, strlen(id), &raw)");
	if(ledger__find(&d->ledger, &raw)) return true;
	CHECK(KNOWN_COPY_NOT_NACKABLE, "retry copy %s was published but cannot be NACKed (failed at %s)",
			id, alloc_fail_site());
	NOTE("  known: retry copy published, not NACKable (failed at %s)", alloc_fail_site());
	known_hits++;
	return false;
}

/* The dead letter of the chain was published, on its topic. */
static void expect_dead_letter(const char *topic)
{
	for(size_t i = 0; i < published(); i++){
		if(!strcmp(fake.publishes[i].topic, topic)) return;
	}
	CHECK(false, "no dead letter on %s", topic);
}

/* ---- scenarios: each is one run, failing the allocation given ---- */

/* Track, NACK (compact, with a reason), retry copy, NACK the copy, dead
 * letter: once with the copy for the NACKing client only, once with
 * retry_to (an ordinary publish). */
static void scenario_chain(void)
{
	struct dlq d;
	char id[DLQ_ID_LEN + 1];
	static const char *const topics[2][2] = {{"orders/1", "dead/orders"}, {"fan", "dead/fan"}};

	if(!engine_init(&d)) return;
	for(int i = 0; i < 2; i++){
		track(&d, topics[i][0], id);
		nack(&d, id, "c1", true, 0);
		tick_all(&d, 0);
		last_copy_id(id);
		if(nackable(&d, id)){
			nack(&d, id, "c1", true, 0);
			tick_all(&d, 0);
			expect_dead_letter(topics[i][1]);
		}
	}
	dlq__cleanup(&d);
}

/* The same with delays and JSON commands (with getStatus and listPolicies
 * in the same document), three deliveries. */
static void scenario_delay(void)
{
	struct dlq d;
	char id[DLQ_ID_LEN + 1];

	if(!engine_init(&d)) return;
	track(&d, "slow/1", id);
	for(int attempt = 1; attempt <= 3; attempt++){
		nack(&d, id, "c1", false, 0);
		if(attempt < 3){
			CHECK(d.delayed.count == 1, "NACK %d: the copy is not delayed", attempt);
			fake.now_ms += 1000;
			fake.wall_ms += 1000;
		}
		tick_all(&d, 0);
		CHECK(d.delayed.count == 0, "d.delayed.count == 0");
		if(attempt < 3){
			last_copy_id(id);
			if(!nackable(&d, id)) break;
		}else{
			expect_dead_letter("dead/slow");
		}
	}
	dlq__cleanup(&d);
}

/* Retry copies for a client that leaves without a session become dead
 * letters: one owed (the broker refused it), one delayed. */
static void scenario_client_gone(void)
{
	struct dlq d;
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1];

	if(!engine_init(&d)) return;
	track(&d, "orders/2", a);
	track(&d, "slow/2", b);
	fake.fail_publishes = 1;
	nack(&d, a, "c9", true, 0);
	nack(&d, b, "c9", true, 0);
	fake.fail_publishes = 0;
	CHECK(d.outbox.owed.count == 1 && d.delayed.count == 1, "d.outbox.owed.count == 1 && d.delayed.count == 1");
	/* A diversion that fails leaves the copy where it was (logged); the
	 * next disconnect of the client diverts it. */
	for(int attempt = 0; attempt < 3 && owed(&d) > 0; attempt++){
		size_t copies = owed(&d);
		dlq__client_gone(&d, "c9");
		alloc_fail_pause();
		check_conservation(&d, 0);
		/* Diverted copies became owed dead letters (a dead letter
		 * the broker took at once is no longer owed). */
		size_t dead = 0;
		for(const struct dlq_envelope *e = d.outbox.owed.head; e; e = e->next){
			if(e->kind == DLQ_ENV_DEAD_LETTER) dead++;
		}
		alloc_fail_resume();
		if(dead == copies || (d.delayed.count == 0 && d.outbox.owed.count == dead)) break;
		refusals++;
	}
	tick_all(&d, 0);
	CHECK(d.delayed.count == 0, "a delayed copy for a client that left is still scheduled");
	expect_dead_letter("dead/orders");
	expect_dead_letter("dead/slow");
	dlq__cleanup(&d);
}

/* Saving and restoring the state: a snapshot of an engine with records, an
 * owed copy, an owed dead letter and a delayed copy, decoded into a fresh
 * engine, must restore all of it or say it ran out of memory. */
static void scenario_state(void)
{
	struct dlq d, e;
	char a[DLQ_ID_LEN + 1], b[DLQ_ID_LEN + 1], c[DLQ_ID_LEN + 1], x[DLQ_ID_LEN + 1];
	struct dlq_headers buf = {0};

	/* The engine to save is built without failures. */
	alloc_fail_pause();
	CHECK(engine_init(&d), "engine_init(&d)");
	track(&d, "orders/3", a);
	track(&d, "slow/3", b);
	track(&d, "fan", c);
	track(&d, "orders/4", x);
	fake.fail_publishes = 2;
	nack(&d, a, "c1", true, 0);      /* owed copy */
	nack(&d, c, "c1", true, 0);      /* owed copy, retry_to */
	nack(&d, b, "c2", true, 0);      /* delayed */
	fake.fail_publishes = 0;
	size_t records = d.ledger.count;
	size_t owed_count = d.outbox.owed.count;
	size_t delayed_count = d.delayed.count;
	alloc_fail_resume();

	int rc = state__encode_snapshot(engine__state_view(&d), fake.now_ms, fake.wall_ms, &buf);
	if(rc){
		/* persist.c keeps the old file and tries again later. */
		CHECK(rc == ENOMEM, "%d", (int)(rc));
		headers__free(&buf);
		refusals++;
		rc = state__encode_snapshot(engine__state_view(&d), fake.now_ms, fake.wall_ms, &buf);
		CHECK(rc == 0, "%d", (int)(rc));
	}
	alloc_fail_pause();
	dlq__cleanup(&d);
	alloc_fail_resume();

	if(engine_init(&e)){
		struct state_report rep;
		memset(&rep, 0, sizeof(rep));
		rc = state_read__decode_snapshot(engine__state_view(&e), buf.data, buf.len, fake.now_ms, fake.wall_ms, &rep);
		alloc_fail_pause();
		bool complete = e.ledger.count == records && e.outbox.owed.count == owed_count && e.delayed.count == delayed_count;
		if(rc == ENOMEM){
			NOTE("  decode refused: out of memory (failed at %s)", alloc_fail_site());
		}else{
			CHECK(rc == 0, "%d", (int)(rc));
			if(!complete || rep.damaged){
				CHECK(KNOWN_DECODE_OOM_NOT_REPORTED,
						"decode returned 0 after the failed allocation at %s: %zu/%zu records, %zu/%zu owed, "
						"%zu/%zu delayed, damaged %d (%s)", alloc_fail_site(), e.ledger.count, records,
						e.outbox.owed.count, owed_count, e.delayed.count, delayed_count, rep.damaged, rep.problem);
				NOTE("  known: decode lost state without ENOMEM (failed at %s): %zu/%zu records, %zu/%zu owed, "
						"%zu/%zu delayed, damaged %d", alloc_fail_site(), e.ledger.count, records, e.outbox.owed.count,
						owed_count, e.delayed.count, delayed_count, rep.damaged);
				known_hits++;
			}
		}
		alloc_fail_resume();
		dlq__cleanup(&e);
	}
	alloc_fail_pause();
	headers__free(&buf);
	alloc_fail_resume();
}

/* ---- the driver ---- */

static void run_scenario(const char *name, void (*scenario)(void))
{
	unsigned long n;
	unsigned known = 0, refused = 0, leaks = 0;
	bool keep_going = getenv("FAULTS_KEEP_GOING") != NULL;

	for(n = 1; n <= MAX_RUNS; n++){
		fake_reset();
		known_hits = 0;
		refusals = 0;
		alloc_fail_start(n);
		scenario();
		alloc_fail_stop();
		bool injected = alloc_fail_injected();
		const char *site = alloc_fail_site();
		alloc_fail_pause();
		fake_reset();
		alloc_fail_resume();
		bool in_cjson;
		size_t leaked = alloc_fail_live(&in_cjson);
		if(leaked){
			leaks++;
			fprintf(stderr, "%s: run %lu (failed allocation at %s): %zu allocations leaked\n", name, n,
					injected ? site : "none", leaked);
			if(KNOWN_CONTROL_ITEM_LEAK && in_cjson){
				known_hits++;
			}else{
				ck_assert_msg(keep_going, "%s: run %lu (failed allocation at %s): %zu allocations leaked", name, n,
						injected ? site : "none", leaked);
			}
		}
		NOTE("%s: run %lu: %s%s: %u refused and made again%s", name, n, injected ? "failed allocation at " : "no failure",
				injected ? site : "", refusals, known_hits ? " [known finding]" : "");
		if(known_hits) known++;
		if(refusals) refused++;
		if(!injected) break;
	}
	ck_assert_msg(n <= MAX_RUNS, "%s never ran to the end", name);
	printf("%s: %lu allocations failed one at a time: no crash, nothing lost; %u runs leaked; "
			"%u runs refused a step and made it again, %u met a known finding\n", name, n - 1, leaks, refused, known);
	ck_assert_msg(leaks == 0 || KNOWN_CONTROL_ITEM_LEAK, "%s: %u runs leaked", name, leaks);
}

START_TEST(test_chain)
{
	run_scenario("nack-copy-nack-dead-letter", scenario_chain);
}
END_TEST

START_TEST(test_delay)
{
	run_scenario("delayed-copies-json", scenario_delay);
}
END_TEST

START_TEST(test_client_gone)
{
	run_scenario("client-gone", scenario_client_gone);
}
END_TEST

START_TEST(test_state)
{
	run_scenario("state-save-restore", scenario_state);
}
END_TEST

int main(void)
{
	verbose = getenv("FAULTS_VERBOSE") != NULL;
	alloc_fail_hook_cjson();
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 600);
	return check_run(check_suite("alloc_faults", tc, CHECK_TESTS(test_chain, test_delay, test_client_gone,
			test_state)));
}
