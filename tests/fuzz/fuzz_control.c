/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Fuzz target: the $CONTROL API (control__handle), compact NACKs and JSON
 * command documents, against an engine that holds real deliveries, so that
 * NACKs reach retry copies, delays and dead letters and not only "unknown
 * id". Each input is a small script run on a fresh engine (so that a crash
 * reproduces from its input alone), one operation a line:
 *
 *   T <topic>[ <payload>]  track an inbound publish (its dlq-id is remembered)
 *   Q<0-2>                 QoS of the next tracked publishes
 *   C <client>             the client that sends the next requests
 *   P                      toggle: that client's session persists
 *   R <reason>             "reason" user property of the next compact NACK
 *   D <delay-ms>           "delay-ms" user property of the next compact NACK
 *   W[ <topic>]            v5 response topic of the next request ("W" alone: an empty one)
 *   I <value>              "final" user property of the next compact NACK
 *   V                      toggle: that client reads dlq-ids (MQTT v5)
 *   N <payload>            a compact NACK ($CONTROL/dlq/v1/nack)
 *   K <payload>            a compact ACK ($CONTROL/dlq/v1/ack)
 *   O <payload>            a compact progress report ($CONTROL/dlq/v1/progress)
 *   J <json>               a JSON command document ($CONTROL/dlq/v1)
 *   n / j                  the same, with the rest of the input (raw bytes,
 *                          newlines included) as the payload; ends the script
 *   t                      a tick;  +<ms> advance the clocks
 *   G <client>             the client's connection ended
 *   F<n>                   the broker refuses the next n publishes
 *   X                      the random source fails once
 *
 * In N, n, K, O, J and j payloads "@k" (k a digit) stands for the k-th most recent
 * dlq-id the engine handed out (tracked messages and retry copies), and
 * "%k" for the k-th most recent dead-letter-id (a letter the dead-letter
 * store keeps). A client whose id begins with "x" may read and write
 * nothing, as the broker's access control would say; any other anything.
 *
 * After every operation the target checks what a client and an operator rely
 * on: every request gets a well-formed reply, valid UTF-8 (by the client
 * library's rules), on a valid topic name, with one response per command,
 * the counters agree with the replies and with what was published, and no
 * accepted NACK is lost: each made exactly one envelope that is either
 * published or still owed (unless a client left, when a dead letter may
 * duplicate a copy already sent), a redrive publishes exactly one message
 * and lets its letter go, and the store keeps within its bound with its
 * list, table and tallies agreeing. At the end everything owed is flushed.
 */
#include <errno.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <mosquitto.h>

#include "api/control.h"
#include "api/control_input.h"
#include "fake_port.h"
#include "fuzz.h"
#include "mosquitto_dlq.h"
#include "util/errtext.h"
#include "util/topic.h"

#define MAX_OPS 64
#define RING 10

struct run {
	struct dlq d;
	char ids[RING][DLQ_ID_LEN + 1]; /* most recent last */
	size_t nids;
	char letters[RING][DLQ_ID_LEN + 1]; /* dead-letter-ids, most recent last */
	size_t nletters;
	char client[256];
	bool persists;
	uint8_t qos;
	char *reason;     /* owned, for the next compact NACK */
	char *delay;      /* owned, for the next compact NACK */
	char *final;      /* owned, for the next compact NACK */
	bool settles;     /* the client reads dlq-ids */
	char *response_topic; /* owned, for the next request */
	uint64_t accepted;  /* NACKs the replies said were accepted */
	uint64_t published; /* envelopes the fake broker took */
	uint64_t redriven;  /* of those, kept letters published again */
	bool gone;          /* a client left: diverted copies may add dead letters */
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static void remember(char ring[RING][DLQ_ID_LEN + 1], size_t *n, const char *id)
{
	if(strlen(id) != DLQ_ID_LEN) return;
	if(*n == RING){
		memmove(ring[0], ring[1], sizeof(ring[0]) * (RING - 1));
		(*n)--;
	}
	memcpy(ring[(*n)++], id, DLQ_ID_LEN + 1);
}

static void remember_id(struct run *r, const char *id)
{
	remember(r->ids, &r->nids, id);
}

/* The broker's access control, played: a client whose id begins with "x"
 * may read and write nothing. */
static int may(void *ctx, const char *topic, const void *payload, uint32_t len, uint8_t qos)
{
	(void)topic;
	(void)payload;
	(void)len;
	(void)qos;
	return ((const char *)ctx)[0] == 'x' ? EACCES : 0;
}

/* The store as its invariants say: within its bound, its list and table
 * holding the same letters, the tallies no more than the letters. */
static void check_store(const struct run *r)
{
	const struct dlq_letters *s = &r->d.letters;
	FUZZ_CHECK(s->bytes <= s->max_bytes, "the store holds %llu bytes, bound %llu",
			(unsigned long long)s->bytes, (unsigned long long)s->max_bytes);
	size_t n = 0;
	uint64_t bytes = 0, tallied = 0;
	for(const struct dlq_letter *l = s->oldest; l; l = l->newer){
		FUZZ_CHECK(letters__find(s, &l->env->id) == l, "a listed letter is not found by its id");
		FUZZ_CHECK(l->newer == NULL || l->newer->older == l, "the age list is broken");
		FUZZ_CHECK(l->newer == NULL || l->order < l->newer->order, "the age list is out of order");
		n++;
		bytes += l->bytes;
	}
	for(size_t i = 0; i < s->per_count; i++) tallied += s->per[i].count;
	FUZZ_CHECK(n == s->count && bytes == s->bytes && tallied <= n, "store: %zu listed of %zu, %llu bytes of %llu",
			n, s->count, (unsigned long long)bytes, (unsigned long long)s->bytes);
}

/* Takes what the fake broker recorded: counts it, remembers copies' ids,
 * and checks that the plugin published nothing a broker would refuse. */
static void harvest(struct run *r)
{
	for(size_t i = 0; i < fake.publish_count; i++){
		const struct fake_publish *p = &fake.publishes[i];
		FUZZ_CHECK(p->qos <= 2, "published with QoS %u", p->qos);
		FUZZ_CHECK(topic__valid_publish(p->topic), "published to an invalid topic \"%s\"", p->topic);
		FUZZ_CHECK(!p->retain, "published retained");
		const char *id = fake_header_value(p, DLQ_PROP_ID);
		if(id) remember_id(r, id);
		const char *letter = fake_header_value(p, DLQ_PROP_DEAD_LETTER_ID);
		if(letter) remember(r->letters, &r->nletters, letter);
		r->published++;
	}
	fuzz_port_clear();
}

/* The payload with each "@k" ("%k") replaced by a remembered dlq-id
 * (dead-letter-id), in an exact-size buffer (an MQTT payload has no NUL
 * after it). */
static char *substitute(const struct run *r, const char *in, size_t len, size_t *out_len)
{
	char *out = malloc(len * DLQ_ID_LEN + 1);
	size_t o = 0;
	if(out == NULL) return NULL;
	for(size_t i = 0; i < len; i++){
		size_t k = i + 1 < len && in[i + 1] >= '0' && in[i + 1] <= '9' ? (size_t)(in[i + 1] - '0') : RING;
		if(in[i] == '@' && k < r->nids){
			memcpy(out + o, r->ids[r->nids - 1 - k], DLQ_ID_LEN);
			o += DLQ_ID_LEN;
			i++;
		}else if(in[i] == '%' && k < r->nletters){
			memcpy(out + o, r->letters[r->nletters - 1 - k], DLQ_ID_LEN);
			o += DLQ_ID_LEN;
			i++;
		}else{
			out[o++] = in[i];
		}
	}
	char *exact = malloc(o ? o : 1);
	if(exact && o) memcpy(exact, out, o);
	free(out);
	*out_len = o;
	return exact;
}

/* How many responses a JSON document must get: one per command, or one
 * error for the document as a whole. */
static int expected_responses(const char *payload, size_t len)
{
	char why[160];
	/* Text that is not UTF-8 or holds \u0000 is refused as a whole. */
	if(!control_input__check_json(payload, len, why, sizeof(why))) return 1;
	cJSON *doc = cJSON_ParseWithLength(payload, len);
	int n = 1;
	const cJSON *commands = cJSON_GetObjectItemCaseSensitive(doc, "commands");
	if(cJSON_IsArray(commands) && cJSON_GetArraySize(commands) <= DLQ_MAX_COMMANDS){
		n = cJSON_GetArraySize(commands);
	}
	cJSON_Delete(doc);
	return n;
}

static void request(struct run *r, enum dlq_compact compact, const char *raw, size_t raw_len)
{
	size_t len;
	char *payload = substitute(r, raw, raw_len, &len);
	if(payload == NULL) return;
	struct dlq_control_request req = {
		.compact = compact,
		.payload = payload,
		.payload_len = len,
		.client = r->client,
		.client_persists = r->persists,
		.client_settles = r->settles,
		.reason = compact == DLQ_COMPACT_NACK ? r->reason : NULL,
		.delay_ms = compact == DLQ_COMPACT_NACK ? r->delay : NULL,
		.final = compact == DLQ_COMPACT_NACK ? r->final : NULL,
		/* Every reply is built, so that every one is checked. */
		.reply_wanted = true,
		.response_topic = r->response_topic,
		.may_read = may,
		.may_write = may,
		.may_read_ctx = r->client,
	};
	struct dlq_control_reply reply;
	struct dlq_counters before = *engine__totals(&r->d);
	int want = compact ? 1 : expected_responses(payload, len);

	int rc = control__handle(&r->d, &req, &reply);
	FUZZ_CHECK(rc == 0, "control__handle: %d", rc);
	FUZZ_CHECK(reply.json != NULL, "no reply");
	FUZZ_CHECK(reply.must_send, "must_send");
	/* The client library checks at most an MQTT string's 65535 bytes. */
	size_t reply_len = strlen(reply.json);
	FUZZ_CHECK(reply_len > 65535 ? errtext__utf8_check(reply.json, reply_len) == reply_len
			: mosquitto_validate_utf8(reply.json, (int)reply_len) == MOSQ_ERR_SUCCESS,
			"reply is not valid UTF-8: %.300s", reply.json);
	FUZZ_CHECK(reply.topic && mosquitto_pub_topic_check(reply.topic) == MOSQ_ERR_SUCCESS && reply.topic[0],
			"reply on an invalid topic name \"%s\"", reply.topic ? reply.topic : "(null)");
	cJSON *doc = cJSON_Parse(reply.json);
	/* A response topic the reply cannot go to is named in the reply. */
	bool bad_topic = r->response_topic && (!r->response_topic[0]
			|| mosquitto_validate_utf8(r->response_topic, (int)strlen(r->response_topic)) != MOSQ_ERR_SUCCESS
			|| mosquitto_pub_topic_check(r->response_topic) != MOSQ_ERR_SUCCESS);
	FUZZ_CHECK(cJSON_IsObject(doc) && cJSON_GetArraySize(doc) == 1 + bad_topic, "reply %s", reply.json);
	FUZZ_CHECK(!bad_topic || cJSON_IsString(cJSON_GetObjectItemCaseSensitive(doc, "responseTopicError")),
			"no responseTopicError for \"%s\": %s", r->response_topic, reply.json);
	const cJSON *responses = cJSON_GetObjectItemCaseSensitive(doc, "responses");
	FUZZ_CHECK(cJSON_IsArray(responses), "reply %s", reply.json);
	FUZZ_CHECK(cJSON_GetArraySize(responses) == want, "%d responses, expected %d: %.300s",
			cJSON_GetArraySize(responses), want, reply.json);

	unsigned ok = 0, errors = 0, redriven = 0;
	bool reset = false;
	const cJSON *e;
	cJSON_ArrayForEach(e, responses){
		const cJSON *result = cJSON_GetObjectItemCaseSensitive(e, "result");
		const cJSON *command = cJSON_GetObjectItemCaseSensitive(e, "command");
		if(cJSON_GetObjectItemCaseSensitive(e, "error")) errors++;
		if(cJSON_IsString(result) && (!strcmp(result->valuestring, "retried") || !strcmp(result->valuestring, "dead-lettered"))){
			ok++;
		}
		if(cJSON_IsString(command) && !strcmp(command->valuestring, DLQ_COMMAND_RESET_COUNTERS)) reset = true;
		/* A redrive's results, one per id. */
		const cJSON *data = cJSON_GetObjectItemCaseSensitive(e, "data");
		const cJSON *results = cJSON_GetObjectItemCaseSensitive(data, "results");
		const cJSON *x;
		cJSON_ArrayForEach(x, results){
			const cJSON *res = cJSON_GetObjectItemCaseSensitive(x, "result");
			if(cJSON_IsString(res) && !strcmp(res->valuestring, "redriven")) redriven++;
		}
	}
	FUZZ_CHECK(errors == reply.errors, "%u error entries, reply.errors %u", errors, reply.errors);
	cJSON_Delete(doc);
	control__reply_free(&reply);
	free(payload);

	uint64_t published_before = r->published;
	harvest(r);
	r->accepted += ok;
	r->redriven += redriven;
	if(!reset){
		const struct dlq_counters *after = engine__totals(&r->d);
		FUZZ_CHECK(after->nacks - before.nacks == ok, "counters.nacks +%llu, replies accepted %u",
				(unsigned long long)(after->nacks - before.nacks), ok);
		FUZZ_CHECK(after->retry_copies + after->dead_letters - before.retry_copies - before.dead_letters
				+ after->redriven - before.redriven == r->published - published_before,
				"counters disagree with what was published");
		FUZZ_CHECK(after->redriven - before.redriven == redriven, "counters.redriven +%llu, replies redriven %u",
				(unsigned long long)(after->redriven - before.redriven), redriven);
	}
	free(r->reason);
	free(r->delay);
	free(r->final);
	free(r->response_topic);
	r->reason = NULL;
	r->delay = NULL;
	r->final = NULL;
	r->response_topic = NULL;
}

/* No accepted NACK is lost: its envelope was published or is still owed. */
static void check_conservation(const struct run *r)
{
	/* Redriven letters are published without a NACK. */
	uint64_t held = r->published - r->redriven + fuzz_owed_count(&r->d);
	if(r->gone){
		FUZZ_CHECK(r->accepted <= held, "accepted %llu NACKs, %llu envelopes published or owed",
				(unsigned long long)r->accepted, (unsigned long long)held);
	}else{
		FUZZ_CHECK(r->accepted == held, "accepted %llu NACKs, but %llu envelopes published or owed",
				(unsigned long long)r->accepted, (unsigned long long)held);
	}
	FUZZ_CHECK(r->d.outbox.owed.count + r->d.outbox.sent.count + r->d.outbox.settling.count <= r->accepted + 64 * MAX_OPS,
			"outbox grows");
	check_store(r);
}

static void track(struct run *r, const char *arg, size_t len)
{
	char *line = strndup(arg, len);
	if(line == NULL) return;
	char *sp = strchr(line, ' ');
	const char *payload = "payload";
	if(sp){
		*sp = '\0';
		payload = sp + 1;
	}
	/* The broker hands the plugin valid topics only. */
	const struct dlq_policy *p = topic__valid_publish(line) ? dlq__policy_for(&r->d, line) : NULL;
	if(p){
		char id[DLQ_ID_LEN + 1];
		int rc = dlq__track(&r->d, p, line, payload, (uint32_t)strlen(payload), r->qos, NULL, 0, id);
		FUZZ_CHECK(rc == 0 || rc == ENOSPC || rc == EIO, "dlq__track: %d", rc);
		if(rc == 0) remember_id(r, id);
	}
	free(line);
}

static void set_string(char **dst, const char *arg, size_t len)
{
	free(*dst);
	*dst = strndup(arg, len);
}

static uint64_t number(const char *arg, size_t len, uint64_t max)
{
	uint64_t v = 0;
	for(size_t i = 0; i < len && arg[i] >= '0' && arg[i] <= '9'; i++){
		v = v * 10 + (uint64_t)(arg[i] - '0');
		if(v > max) return max;
	}
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct run r;
	const char *s = (const char *)data;
	size_t pos = 0;

	memset(&r, 0, sizeof(r));
	fuzz_engine_init(&r.d);
	strcpy(r.client, "c1");
	r.qos = 1;
	for(int op = 0; op < MAX_OPS && pos < size; op++){
		const char *nl = memchr(s + pos, '\n', size - pos);
		size_t line_len = nl ? (size_t)(nl - (s + pos)) : size - pos;
		const char *line = s + pos;
		size_t next = pos + line_len + (nl ? 1 : 0);
		/* The argument: after the opcode and one optional space. */
		const char *arg = line + 1;
		size_t arg_len = line_len ? line_len - 1 : 0;
		if(arg_len && arg[0] == ' '){
			arg++;
			arg_len--;
		}
		pos = next;
		if(line_len == 0) continue;

		switch(line[0]){
			case 'T':
				track(&r, arg, arg_len);
				harvest(&r);
				break;
			case 'Q':
				r.qos = (uint8_t)(number(arg, arg_len, 2));
				break;
			case 'C':
				/* The broker hands the plugin valid UTF-8 client ids only. */
				if(arg_len && arg_len < sizeof(r.client) && mosquitto_validate_utf8(arg, (int)arg_len) == MOSQ_ERR_SUCCESS){
					memcpy(r.client, arg, arg_len);
					r.client[arg_len] = '\0';
				}
				break;
			case 'P':
				r.persists = !r.persists;
				break;
			case 'R':
				set_string(&r.reason, arg, arg_len);
				break;
			case 'D':
				set_string(&r.delay, arg, arg_len);
				break;
			case 'W':
				set_string(&r.response_topic, arg, arg_len);
				break;
			case 'I':
				set_string(&r.final, arg, arg_len);
				break;
			case 'V':
				r.settles = !r.settles;
				break;
			case 'N':
			case 'J':
			case 'K':
			case 'O':
				request(&r, line[0] == 'N' ? DLQ_COMPACT_NACK : line[0] == 'K' ? DLQ_COMPACT_ACK
						: line[0] == 'O' ? DLQ_COMPACT_PROGRESS : DLQ_COMPACT_NONE, arg, arg_len);
				break;
			case 'n':
			case 'j':
				request(&r, line[0] == 'n' ? DLQ_COMPACT_NACK : DLQ_COMPACT_NONE, s + pos, size - pos);
				pos = size;
				break;
			case 't':
				dlq__tick(&r.d);
				harvest(&r);
				break;
			case '+': {
				uint64_t ms = number(line + 1, line_len - 1, 10ull * 24 * 3600 * 1000);
				fake.now_ms += ms;
				fake.wall_ms += (int64_t)ms;
				break;
			}
			case 'G': {
				char *client = strndup(arg, arg_len);
				if(client && client[0] && mosquitto_validate_utf8(client, (int)strlen(client)) == MOSQ_ERR_SUCCESS){
					dlq__client_gone(&r.d, client);
					/* Every copy held for it became a dead letter (issue 11). */
					FUZZ_CHECK(holds__find(&r.d.holds, client) == NULL, "copies still held for a client that left");
					r.gone = true;
				}
				free(client);
				harvest(&r);
				break;
			}
			case 'F':
				fake.fail_publishes = (int)number(line + 1, line_len - 1, 10);
				break;
			case 'X':
				fake.fail_random = 1;
				break;
			default:
				break;
		}
		check_conservation(&r);
	}
	fake.fail_random = 0;
	r.published += fuzz_flush(&r.d);
	check_conservation(&r);
	FUZZ_CHECK(fuzz_owed_count(&r.d) == 0, "%zu envelopes still owed after flushing", fuzz_owed_count(&r.d));
	free(r.reason);
	free(r.response_topic);
	free(r.delay);
	free(r.final);
	fuzz_engine_fini(&r.d);
	return 0;
}
