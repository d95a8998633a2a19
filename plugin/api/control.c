/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The $CONTROL API (see control.h): decodes a compact NACK or a JSON command
 * document, runs each command against the engine, and writes one reply
 * document. Bad input of any kind becomes an "error" entry in the reply;
 * nothing here fails the sender's connection.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "api/control.h"
#include "api/control_input.h"
#include "api/history_report.h"
#include "api/letter_commands.h"
#include "api/status.h"
#include "config/config.h"
#include "mosquitto_dlq.h"
#include "util/errtext.h"
#include "util/port.h"
#include "util/units.h"

/* How much of a client's text (a command name, a response topic) a reply
 * quotes. */
#define ECHO_MAX_BYTES 64

#define DLQ_STR_(x) #x
#define DLQ_STR(x) DLQ_STR_(x)

/* Copies a reason into out (DLQ_REASON_MAX_BYTES + 1 bytes) as text a
 * broker and every client will accept in a user property (errtext__clean).
 * Returns out, or NULL for a NULL or empty reason. */
static const char *clean_reason(const char *in, size_t len, char out[DLQ_REASON_MAX_BYTES + 1])
{
	if(in == NULL || len == 0) return NULL;
	errtext__clean(in, len, out, DLQ_REASON_MAX_BYTES);
	return out;
}

/* The reply being built: {"responses":[...]}, made when the first entry
 * or anything else goes into it. A compact NACK that goes well and wants
 * no reply (the NACK storm's hot path) never makes it. */
struct replies {
	cJSON *root;      /* owned; NULL until needed */
	cJSON *responses; /* borrowed from root */
};

/* The responses array, made on first use; NULL when out of memory. */
static cJSON *replies_array(struct replies *rp)
{
	if(rp->responses) return rp->responses;
	if(rp->root == NULL) rp->root = cJSON_CreateObject();
	rp->responses = rp->root ? cJSON_AddArrayToObject(rp->root, "responses") : NULL;
	return rp->responses;
}

enum dlq_compact control__compact_of(const char *topic)
{
	if(topic == NULL) return DLQ_COMPACT_NONE;
	if(!strcmp(topic, DLQ_NACK_TOPIC)) return DLQ_COMPACT_NACK;
	if(!strcmp(topic, DLQ_ACK_TOPIC)) return DLQ_COMPACT_ACK;
	if(!strcmp(topic, DLQ_PROGRESS_TOPIC)) return DLQ_COMPACT_PROGRESS;
	return DLQ_COMPACT_NONE;
}

/* Appends one response entry. id and correlation may be NULL. */
static int add_response(cJSON *responses, const char *command, const char *id, size_t id_len,
		const cJSON *correlation, const struct dlq_nack_result *res, const char *error)
{
	if(responses == NULL) return ENOMEM;
	cJSON *r = cJSON_CreateObject();
	if(r == NULL) return ENOMEM;
	cJSON_AddItemToArray(responses, r);
	if(command && cJSON_AddStringToObject(r, "command", command) == NULL) return ENOMEM;
	if(id){
		/* The id is echoed only as far as it is printable ASCII of id
		 * length, so a garbage payload is not reflected back whole. */
		char buf[DLQ_ID_LEN + 1];
		size_t n = id_len < DLQ_ID_LEN ? id_len : DLQ_ID_LEN;
		for(size_t i = 0; i < n; i++){
			buf[i] = (id[i] > 0x20 && id[i] < 0x7f) ? id[i] : '?';
		}
		buf[n] = '\0';
		if(cJSON_AddStringToObject(r, "id", buf) == NULL) return ENOMEM;
	}
	if(correlation){
		cJSON *c = cJSON_Duplicate(correlation, true);
		if(c == NULL) return ENOMEM;
		/* Constant keys: nothing to allocate, so the item cannot leak. */
		cJSON_AddItemToObjectCS(r, "correlationData", c);
	}
	if(error){
		if(cJSON_AddStringToObject(r, "error", error) == NULL) return ENOMEM;
	}else if(res){
		if(cJSON_AddStringToObject(r, "result", dlq__nack_status_text(res->status)) == NULL
				|| cJSON_AddNumberToObject(r, "attempt", res->attempt) == NULL
				|| cJSON_AddNumberToObject(r, "maxAttempts", res->max_attempts) == NULL){
			return ENOMEM;
		}
		if(res->status == DLQ_NACK_RETRIED && cJSON_AddNumberToObject(r, "delayMs", (double)res->delay_ms) == NULL){
			return ENOMEM;
		}
		if(res->status == DLQ_NACK_EXTENDED && cJSON_AddNumberToObject(r, "deadlineMs", (double)res->delay_ms) == NULL){
			return ENOMEM;
		}
	}
	return 0;
}

/* The reply entry of a settlement command: its result, or its error. A
 * compact one that went well and wants no reply builds nothing (the NACK
 * storm's hot path). */
static int settle_response(const struct dlq_control_request *req, const char *command, const char *id, size_t id_len,
		const cJSON *correlation, const struct dlq_nack_result *res, bool ok, struct replies *rp, unsigned *errors)
{
	if(ok){
		if(req->compact && !req->reply_wanted) return 0;
		return add_response(replies_array(rp), command, id, id_len, correlation, res, NULL);
	}
	(*errors)++;
	return add_response(replies_array(rp), command, id, id_len, correlation, NULL, dlq__nack_status_text(res->status));
}

static int run_nack(struct dlq *d, const struct dlq_control_request *req, const char *id, size_t id_len,
		const char *reason, size_t reason_len, int64_t delay_ms, bool final, const cJSON *correlation,
		struct replies *rp, unsigned *errors)
{
	char reason_buf[DLQ_REASON_MAX_BYTES + 1];
	struct dlq_nack n = {
		.id = id,
		.id_len = id_len,
		.reason = clean_reason(reason, reason_len, reason_buf),
		.client = req->client,
		.client_persists = req->client_persists,
		.client_settles = req->client_settles,
		.final = final,
		.delay_requested = delay_ms >= 0,
		.delay_ms = delay_ms >= 0 ? (uint64_t)delay_ms : 0,
		.may_read = req->may_read,
		.may_read_ctx = req->may_read_ctx,
	};
	struct dlq_nack_result res;
	dlq__nack(d, &n, &res);
	bool ok = res.status == DLQ_NACK_RETRIED || res.status == DLQ_NACK_DEAD_LETTERED;
	return settle_response(req, DLQ_COMMAND_NACK, id, id_len, correlation, &res, ok, rp, errors);
}

/* An ACK or a progress report. */
static int run_settle(struct dlq *d, const struct dlq_control_request *req, enum dlq_settle_kind kind,
		const char *id, size_t id_len, const cJSON *correlation, struct replies *rp, unsigned *errors)
{
	struct dlq_settle s = {
		.kind = kind,
		.id = id,
		.id_len = id_len,
		.client = req->client,
		.may_read = req->may_read,
		.may_read_ctx = req->may_read_ctx,
	};
	struct dlq_nack_result res;
	dlq__settle(d, &s, &res);
	bool ok = res.status == DLQ_NACK_ACKED || res.status == DLQ_NACK_EXTENDED;
	return settle_response(req, kind == DLQ_SETTLE_ACK ? DLQ_COMMAND_ACK : DLQ_COMMAND_PROGRESS, id, id_len,
			correlation, &res, ok, rp, errors);
}

static int handle_compact(struct dlq *d, const struct dlq_control_request *req, struct replies *rp, unsigned *errors)
{
	/* Surrounding white space is forgiven: `echo ID | mosquitto_pub -l`
	 * and friends add a newline. */
	const char *p = req->payload;
	size_t len = req->payload_len;
	while(len && errtext__is_space(p[0])){
		p++;
		len--;
	}
	while(len && errtext__is_space(p[len - 1])){
		len--;
	}
	if(req->compact == DLQ_COMPACT_ACK) return run_settle(d, req, DLQ_SETTLE_ACK, p, len, NULL, rp, errors);
	if(req->compact == DLQ_COMPACT_PROGRESS) return run_settle(d, req, DLQ_SETTLE_PROGRESS, p, len, NULL, rp, errors);
	bool final = false;
	if(req->final){
		if(strcmp(req->final, "true") && strcmp(req->final, "false")){
			(*errors)++;
			return add_response(replies_array(rp), DLQ_COMMAND_NACK, p, len, NULL, NULL,
					"\"" DLQ_PROP_NACK_FINAL "\" must be \"true\" or \"false\"");
		}
		final = !strcmp(req->final, "true");
	}
	int64_t delay = -1;
	if(req->delay_ms){
		/* Plain digits only: strtoll alone would take a sign and blanks. */
		char *end = NULL;
		bool ok = req->delay_ms[0] >= '0' && req->delay_ms[0] <= '9';
		if(ok){
			errno = 0;
			long long v = strtoll(req->delay_ms, &end, 10);
			ok = *end == '\0' && errno != ERANGE;
			delay = v;
		}
		if(!ok){
			(*errors)++;
			return add_response(replies_array(rp), DLQ_COMMAND_NACK, p, len, NULL, NULL,
					"\"" DLQ_PROP_NACK_DELAY_MS "\" must be a whole number of milliseconds");
		}
	}
	const char *reason = req->reason;
	return run_nack(d, req, p, len, reason, reason ? strlen(reason) : 0, delay, final, NULL, rp, errors);
}

static int command_error(cJSON *responses, const char *command, const cJSON *correlation, const char *error, unsigned *errors)
{
	(*errors)++;
	return add_response(responses, command, NULL, 0, correlation, NULL, error);
}

static int command_nack(struct dlq *d, const struct dlq_control_request *req, const cJSON *cmd,
		const cJSON *correlation, cJSON *responses, unsigned *errors)
{
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(cmd, "id");
	if(!cJSON_IsString(id)){
		return command_error(responses, DLQ_COMMAND_NACK, correlation, "missing or non-string \"id\"", errors);
	}
	const cJSON *reason = cJSON_GetObjectItemCaseSensitive(cmd, "reason");
	if(reason && !cJSON_IsString(reason) && !cJSON_IsNull(reason)){
		return command_error(responses, DLQ_COMMAND_NACK, correlation, "\"reason\" must be a string", errors);
	}
	const cJSON *delay = cJSON_GetObjectItemCaseSensitive(cmd, "delay");
	int64_t delay_ms = -1;
	if(delay && !cJSON_IsNull(delay)){
		uint64_t ms = 0;
		if(!cJSON_IsString(delay) || units__parse_delay_ms(delay->valuestring, &ms) || ms > INT64_MAX){
			return command_error(responses, DLQ_COMMAND_NACK, correlation,
					"\"delay\" must be a duration with its unit, e.g. \"30s\" or \"500ms\"", errors);
		}
		delay_ms = (int64_t)ms;
	}
	const cJSON *final = cJSON_GetObjectItemCaseSensitive(cmd, "final");
	if(final && !cJSON_IsBool(final) && !cJSON_IsNull(final)){
		return command_error(responses, DLQ_COMMAND_NACK, correlation, "\"final\" must be true or false", errors);
	}
	const char *r = cJSON_IsString(reason) ? reason->valuestring : NULL;
	struct replies rp = { .responses = responses };
	return run_nack(d, req, id->valuestring, strlen(id->valuestring), r, r ? strlen(r) : 0,
			delay_ms, cJSON_IsTrue(final), correlation, &rp, errors);
}

/* ack and progress: {"command":..., "id":...}. */
static int command_settle(struct dlq *d, const struct dlq_control_request *req, enum dlq_settle_kind kind,
		const cJSON *cmd, const cJSON *correlation, cJSON *responses, unsigned *errors)
{
	const char *name = kind == DLQ_SETTLE_ACK ? DLQ_COMMAND_ACK : DLQ_COMMAND_PROGRESS;
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(cmd, "id");
	if(!cJSON_IsString(id)){
		return command_error(responses, name, correlation, "missing or non-string \"id\"", errors);
	}
	struct replies rp = { .responses = responses };
	return run_settle(d, req, kind, id->valuestring, strlen(id->valuestring), correlation, &rp, errors);
}

static int command_ack(struct dlq *d, const struct dlq_control_request *req, const cJSON *cmd,
		const cJSON *correlation, cJSON *responses, unsigned *errors)
{
	return command_settle(d, req, DLQ_SETTLE_ACK, cmd, correlation, responses, errors);
}

static int command_progress(struct dlq *d, const struct dlq_control_request *req, const cJSON *cmd,
		const cJSON *correlation, cJSON *responses, unsigned *errors)
{
	return command_settle(d, req, DLQ_SETTLE_PROGRESS, cmd, correlation, responses, errors);
}

/* Adds {"command":name,"data":data} (taking data) to responses. */
static int data_response(cJSON *responses, const char *name, const cJSON *correlation, cJSON *data)
{
	cJSON *r = cJSON_CreateObject();
	if(r == NULL || !cJSON_AddItemToArray(responses, r)){
		cJSON_Delete(r);
		cJSON_Delete(data);
		return ENOMEM;
	}
	if(cJSON_AddStringToObject(r, "command", name) == NULL){
		cJSON_Delete(data);
		return ENOMEM;
	}
	if(data) cJSON_AddItemToObjectCS(r, "data", data);
	if(correlation){
		cJSON *c = cJSON_Duplicate(correlation, true);
		if(c == NULL) return ENOMEM;
		/* Constant keys: nothing to allocate, so the item cannot leak. */
		cJSON_AddItemToObjectCS(r, "correlationData", c);
	}
	return 0;
}

static int command_list_policies(struct dlq *d, const struct dlq_control_request *req, const cJSON *cmd,
		const cJSON *correlation, cJSON *responses, unsigned *errors)
{
	(void)req;
	(void)cmd;
	(void)errors;
	cJSON *data = cJSON_CreateObject();
	cJSON *list = status__policies(d);
	if(data == NULL || list == NULL){
		cJSON_Delete(data);
		cJSON_Delete(list);
		return ENOMEM;
	}
	cJSON_AddItemToObjectCS(data, "policies", list);
	return data_response(responses, DLQ_COMMAND_LIST_POLICIES, correlation, data);
}

static int command_get_status(struct dlq *d, const struct dlq_control_request *req, const cJSON *cmd,
		const cJSON *correlation, cJSON *responses, unsigned *errors)
{
	(void)req;
	(void)cmd;
	(void)errors;
	cJSON *data = status__report(d);
	if(data == NULL) return ENOMEM;
	return data_response(responses, DLQ_COMMAND_GET_STATUS, correlation, data);
}

static int command_reset_counters(struct dlq *d, const struct dlq_control_request *req, const cJSON *cmd,
		const cJSON *correlation, cJSON *responses, unsigned *errors)
{
	(void)cmd;
	(void)errors;
	dlq__reset_counters(d);
	port__log(DLQ_LOG_NOTICE, "counters reset by " QFMT, Q(req->client));
	return data_response(responses, DLQ_COMMAND_RESET_COUNTERS, correlation, NULL);
}

/* getHistory, with an optional "policy" (a filter): each policy's minutes
 * of the last hour that hold anything (api/history_report.h). */
static int command_get_history(struct dlq *d, const struct dlq_control_request *req, const cJSON *cmd,
		const cJSON *correlation, cJSON *responses, unsigned *errors)
{
	(void)req;
	const cJSON *policy = cJSON_GetObjectItemCaseSensitive(cmd, "policy");
	if(policy && !cJSON_IsString(policy) && !cJSON_IsNull(policy)){
		return command_error(responses, DLQ_COMMAND_GET_HISTORY, correlation, "\"policy\" must be a policy's filter",
				errors);
	}
	char err[160];
	cJSON *data = NULL;
	int rc = history_report__json(d, cJSON_IsString(policy) ? policy->valuestring : NULL, port__wall_ms(), &data,
			err, sizeof(err));
	if(rc == EINVAL) return command_error(responses, DLQ_COMMAND_GET_HISTORY, correlation, err, errors);
	if(rc) return rc;
	return data_response(responses, DLQ_COMMAND_GET_HISTORY, correlation, data);
}

typedef int (*command_fn)(struct dlq *d, const struct dlq_control_request *req, const cJSON *cmd,
		const cJSON *correlation, cJSON *responses, unsigned *errors);

/* The commands; "lists" marks those whose cost grows with the policies
 * (a reply entry each, or a counter block each), which one message may
 * repeat only as far as DLQ_MAX_STATUS_ENTRIES allows: a document of a
 * thousand of them would otherwise hold the broker for a thousand reports
 * (cJSON prints a number in about a microsecond, and a getStatus has 18 a
 * policy). */
static const struct {
	const char *name;
	command_fn run;
	bool lists;
} commands[] = {
	{ DLQ_COMMAND_NACK, command_nack, false },
	{ DLQ_COMMAND_ACK, command_ack, false },
	{ DLQ_COMMAND_PROGRESS, command_progress, false },
	{ DLQ_COMMAND_LIST_POLICIES, command_list_policies, true },
	{ DLQ_COMMAND_GET_STATUS, command_get_status, true },
	{ DLQ_COMMAND_RESET_COUNTERS, command_reset_counters, true },
	{ DLQ_COMMAND_GET_HISTORY, command_get_history, true },
};

/* At most this many of the dead-letter store's commands in one message:
 * each may walk every kept letter. */
#define STORE_COMMANDS_MAX 10

static int command_store(struct dlq *d, const struct dlq_control_request *req, const char *name, const cJSON *cmd,
		const cJSON *correlation, cJSON *responses, unsigned *errors)
{
	char err[512];
	cJSON *data = NULL;
	struct letter_store_asker asker = {
		.client = req->client, .may_read = req->may_read, .may_write = req->may_write, .ctx = req->may_read_ctx,
	};
	int rc = letter_commands__run(d, &asker, name, cmd, &data, err, sizeof(err));
	if(rc == EINVAL) return command_error(responses, name, correlation, err, errors);
	if(rc) return rc;
	return data_response(responses, name, correlation, data);
}

/* Room for the names of every command, ", " between them. */
#define KNOWN_MAX 280

/* "nack, ack, ...": the names of the table's commands, then the store's,
 * for the reply to an unknown one. */
static void known_commands(char *buf, size_t size)
{
	size_t n = 0;
	const char *name;
	buf[0] = '\0';
	for(size_t i = 0; i < sizeof(commands) / sizeof(commands[0]) && n < size; i++){
		n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? ", " : "", commands[i].name);
	}
	for(size_t i = 0; (name = letter_commands__name(i)) != NULL && n < size; i++){
		n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? ", " : "", name);
	}
}

/* listed: the policy entries this message's status commands returned so
 * far; ran: which commands of the table ran in it, one bit each; stored:
 * the store commands run in it. */
static int handle_command(struct dlq *d, const struct dlq_control_request *req, const cJSON *cmd, cJSON *responses,
		size_t *listed, unsigned *ran, unsigned *stored, unsigned *errors)
{
	if(!cJSON_IsObject(cmd)){
		return command_error(responses, NULL, NULL, "each command must be a JSON object", errors);
	}
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(cmd, "command");
	const cJSON *correlation = cJSON_GetObjectItemCaseSensitive(cmd, "correlationData");
	if(!cJSON_IsString(name)){
		return command_error(responses, NULL, correlation, "missing or non-string \"command\"", errors);
	}
	if(letter_commands__is(name->valuestring)){
		if(++*stored > STORE_COMMANDS_MAX){
			return command_error(responses, name->valuestring, correlation, "not run: at most " DLQ_STR(STORE_COMMANDS_MAX)
					" dead-letter store commands in one message; send the rest in another message", errors);
		}
		return command_store(d, req, name->valuestring, cmd, correlation, responses, errors);
	}
	for(size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++){
		if(strcmp(name->valuestring, commands[i].name)) continue;
		if(commands[i].lists){
			/* A listing costs one entry per policy and one for the
			 * totals; the first of each command always runs, so that
			 * a broker with many policies can still be asked. */
			size_t cost = dlq__config(d)->policies.count + 1;
			bool repeat = *ran & (1u << i);
			*ran |= 1u << i;
			if(repeat && *listed + cost > DLQ_MAX_STATUS_ENTRIES){
				return command_error(responses, commands[i].name, correlation, "not run: the status commands of one message "
						"may return at most " DLQ_STR(DLQ_MAX_STATUS_ENTRIES) " policy entries together; "
						"send the rest in another message", errors);
			}
			*listed += cost;
		}
		return commands[i].run(d, req, cmd, correlation, responses, errors);
	}
	/* The name is echoed, cut at a character boundary: the reply must be
	 * valid UTF-8 for a strict JSON parser. */
	char shown[ECHO_MAX_BYTES + 1];
	size_t len = strlen(name->valuestring);
	bool cut = errtext__clean(name->valuestring, len, shown, ECHO_MAX_BYTES) < len;
	char known[KNOWN_MAX];
	known_commands(known, sizeof(known));
	char msg[ECHO_MAX_BYTES + KNOWN_MAX + 40];
	snprintf(msg, sizeof(msg), "unknown command \"%s%s\" (known: %s)", shown, cut ? "..." : "", known);
	return command_error(responses, shown, correlation, msg, errors);
}

static int handle_json(struct dlq *d, const struct dlq_control_request *req, cJSON *responses, unsigned *errors)
{
	/* Refused before parsing: cJSON spends about 64 bytes on a value that
	 * can take 2 bytes of text, so a large document would cost the broker
	 * some 40 times its size. */
	if(req->payload_len > DLQ_MAX_CONTROL_BYTES){
		char msg[80];
		snprintf(msg, sizeof(msg), "payload larger than %d bytes", DLQ_MAX_CONTROL_BYTES);
		return command_error(responses, NULL, NULL, msg, errors);
	}
	/* Text cJSON would take but a reply could not echo faithfully:
	 * ill-formed UTF-8 (RFC 8259 wants UTF-8), and strings holding U+0000,
	 * which cJSON's NUL-terminated strings silently cut. */
	char why[160];
	if(!control_input__check_json(req->payload, req->payload_len, why, sizeof(why))){
		return command_error(responses, NULL, NULL, why, errors);
	}
	/* cJSON says only "no document"; an allocator that failed says ENOMEM
	 * (glibc's does), and then the document may well be valid. */
	errno = 0;
	cJSON *doc = cJSON_ParseWithLength(req->payload, req->payload_len);
	if(doc == NULL){
		return command_error(responses, NULL, NULL, errno == ENOMEM ? "out of memory" : "payload is not valid JSON", errors);
	}
	int rc = 0;
	const cJSON *commands = cJSON_GetObjectItemCaseSensitive(doc, "commands");
	if(!cJSON_IsArray(commands)){
		rc = command_error(responses, NULL, NULL, "payload must be an object with a \"commands\" array", errors);
	}else if(cJSON_GetArraySize(commands) > DLQ_MAX_COMMANDS){
		rc = command_error(responses, NULL, NULL, "too many commands in one message", errors);
	}else{
		const cJSON *cmd;
		size_t listed = 0;
		unsigned ran = 0, stored = 0;
		cJSON_ArrayForEach(cmd, commands){
			rc = handle_command(d, req, cmd, responses, &listed, &ran, &stored, errors);
			if(rc) break;
		}
	}
	cJSON_Delete(doc);
	return rc;
}

int control__handle(struct dlq *d, const struct dlq_control_request *req, struct dlq_control_reply *reply)
{
	struct replies rp = {0};
	memset(reply, 0, sizeof(*reply));
	/* A compact NACK that wants no reply makes one only if it fails. */
	if(!(req->compact && !req->reply_wanted) && replies_array(&rp) == NULL){
		cJSON_Delete(rp.root);
		return ENOMEM;
	}
	/* A response topic the reply cannot go to: the default topic instead,
	 * and the reply says why. */
	reply->topic = req->response_topic ? req->response_topic : DLQ_RESPONSE_TOPIC;
	const char *problem = req->response_topic ? control_input__topic_problem(req->response_topic) : NULL;
	if(problem){
		char shown[ECHO_MAX_BYTES + 1];
		size_t len = strlen(req->response_topic);
		bool cut = errtext__clean(req->response_topic, len, shown, ECHO_MAX_BYTES) < len;
		char msg[ECHO_MAX_BYTES + 160];
		snprintf(msg, sizeof(msg), "response topic \"%s%s\" %s: replied on " DLQ_RESPONSE_TOPIC " instead",
				shown, cut ? "..." : "", problem);
		reply->topic = DLQ_RESPONSE_TOPIC;
		if(replies_array(&rp) == NULL || cJSON_AddStringToObject(rp.root, "responseTopicError", msg) == NULL){
			cJSON_Delete(rp.root);
			return ENOMEM;
		}
	}
	int rc;
	if(req->compact){
		rc = handle_compact(d, req, &rp, &reply->errors);
	}else{
		rc = handle_json(d, req, rp.responses, &reply->errors);
	}
	if(rc == 0){
		reply->must_send = !req->compact || reply->errors > 0 || req->reply_wanted;
		if(reply->must_send){
			/* Whatever must be sent has an entry, so the reply was made. */
			reply->json = rp.root ? cJSON_PrintUnformatted(rp.root) : NULL;
			if(reply->json == NULL) rc = ENOMEM;
		}
	}
	cJSON_Delete(rp.root);
	return rc;
}

void control__reply_free(struct dlq_control_reply *reply)
{
	/* cJSON_PrintUnformatted allocates with cJSON's allocator: free it
	 * with cJSON's own. */
	cJSON_free(reply->json);
	reply->json = NULL;
}
