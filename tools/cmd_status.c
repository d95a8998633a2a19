/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * dlqctl status, policies and reset-counters: one command of the plugin's
 * $CONTROL/dlq/v1 API each (getStatus, listPolicies, resetCounters), sent
 * with an MQTT v5 response topic and correlation data, answered to this
 * client alone; the reply's data printed as a table, or as JSON with
 * --json. A reply that is missing, late, not JSON or not the expected
 * shape is reported, never trusted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <mqtt_protocol.h>

#include "dlqctl.h"
#include "mosquitto_dlq.h"

struct request {
	char corr[33];             /* correlation data, also the JSON correlationData */
	char response_topic[64];
	bool got;
	cJSON *doc;                /* the reply; NULL if it was not JSON */
};

static void on_reply(void *arg, const struct mosquitto_message *m, const mosquitto_property *props)
{
	struct request *r = arg;
	void *cd = NULL;
	uint16_t cdlen = 0;
	if(r->got || m->topic == NULL || strcmp(m->topic, r->response_topic)) return;
	if(mosquitto_property_read_binary(props, MQTT_PROP_CORRELATION_DATA, &cd, &cdlen, false) == NULL) return;
	bool ours = cdlen == strlen(r->corr) && !memcmp(cd, r->corr, cdlen);
	free(cd);
	if(!ours) return;
	r->got = true;
	r->doc = cJSON_ParseWithLength(m->payload, m->payloadlen > 0 ? (size_t)m->payloadlen : 0);
}

static char *command_text(const char *command, const char *corr)
{
	cJSON *doc = cJSON_CreateObject();
	cJSON *list = doc ? cJSON_AddArrayToObject(doc, "commands") : NULL;
	cJSON *cmd = list ? cJSON_CreateObject() : NULL;
	char *text = NULL;
	if(cmd && !cJSON_AddItemToArray(list, cmd)){
		cJSON_Delete(cmd);
		cmd = NULL;
	}
	/* cmd is borrowed from doc from here on. */
	if(cmd && cJSON_AddStringToObject(cmd, "command", command) && cJSON_AddStringToObject(cmd, "correlationData", corr)){
		text = cJSON_PrintUnformatted(doc);
	}
	cJSON_Delete(doc);
	return text;
}

/* Sends command and returns its reply entry's "data" (NULL when it has
 * none) in *data; *doc owns it and is the caller's to free. Returns an exit
 * status, having printed why when it is not 0. */
static int control(const struct dlqctl_opts *o, const char *command, cJSON **doc, const cJSON **data)
{
	struct request r = {0};
	struct conn c;
	mosquitto_property *props = NULL;
	char *text = NULL;
	int reason = 0;
	int ret = DLQCTL_EXIT_FAIL;

	*doc = NULL;
	*data = NULL;
	conn__random_hex(r.corr, 16);
	snprintf(r.response_topic, sizeof(r.response_topic), "dlqctl/reply/%s", r.corr);
	if(conn__open(&c, o, o->id, true, 0, 0, false, NULL, on_reply, &r)) goto out;

	text = command_text(command, r.corr);
	if(text == NULL
			|| mosquitto_property_add_string(&props, MQTT_PROP_RESPONSE_TOPIC, r.response_topic)
			|| mosquitto_property_add_binary(&props, MQTT_PROP_CORRELATION_DATA, r.corr, (uint16_t)strlen(r.corr))){
		fprintf(stderr, "dlqctl: out of memory\n");
		goto out;
	}
	int timeout_ms = (int)(o->timeout_s * 1000);
	int rc = conn__publish(&c, DLQ_CONTROL_TOPIC, text, (int)strlen(text), props, timeout_ms, &reason);
	if(rc != MOSQ_ERR_SUCCESS){
		fprintf(stderr, "dlqctl: sending %s to %s: %s\n", command, DLQ_CONTROL_TOPIC, mosquitto_strerror(rc));
		goto out;
	}
	if(reason >= 0x80){
		fprintf(stderr, "dlqctl: the broker refused %s on %s: %s (this client needs write access to %s)\n",
				command, DLQ_CONTROL_TOPIC, mosquitto_reason_string(reason), DLQ_CONTROL_TOPIC);
		goto out;
	}
	uint64_t deadline = dlqctl_now_ms() + (uint64_t)timeout_ms;
	while(!r.got && !c.lost && !dlqctl_stop && dlqctl_now_ms() < deadline){
		if(conn__run(&c, 50) != MOSQ_ERR_SUCCESS) break;
	}
	if(!r.got){
		fprintf(stderr, "dlqctl: no reply to %s within %g s: is the mosquitto-dlq plugin loaded on this broker?\n",
				command, o->timeout_s);
		goto out;
	}
	const cJSON *responses = cJSON_GetObjectItemCaseSensitive(r.doc, "responses");
	const cJSON *entry = cJSON_GetArrayItem(responses, 0);
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(entry, "command");
	const cJSON *error = cJSON_GetObjectItemCaseSensitive(entry, "error");
	if(r.doc == NULL){
		fprintf(stderr, "dlqctl: the reply to %s is not JSON\n", command);
		goto out;
	}
	if(!cJSON_IsObject(entry)){
		fprintf(stderr, "dlqctl: the reply to %s is not {\"responses\":[{...}]}\n", command);
		goto out;
	}
	if(cJSON_IsString(error)){
		fprintf(stderr, "dlqctl: the plugin answered %s with an error: %s\n", command, error->valuestring);
		goto out;
	}
	if(!cJSON_IsString(name) || strcmp(name->valuestring, command)){
		fprintf(stderr, "dlqctl: the reply is not for %s\n", command);
		goto out;
	}
	*data = cJSON_GetObjectItemCaseSensitive(entry, "data");
	*doc = r.doc;
	r.doc = NULL;
	ret = DLQCTL_EXIT_OK;
out:
	cJSON_Delete(r.doc);
	cJSON_free(text);
	mosquitto_property_free_all(&props);
	conn__close(&c, true);
	return ret;
}

/* The number member name of o as a whole number, or "-". */
static const char *num(const cJSON *o, const char *name, char *buf, size_t len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	if(!cJSON_IsNumber(v)) return "-";
	snprintf(buf, len, "%.0f", v->valuedouble);
	return buf;
}

static const char *str(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsString(v) ? v->valuestring : "-";
}

/* Milliseconds in the units the configuration uses: "30s", "500ms", "2h". */
static const char *duration(const cJSON *o, const char *name, char *buf, size_t len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	if(!cJSON_IsNumber(v) || v->valuedouble < 0) return "-";
	unsigned long long ms = (unsigned long long)v->valuedouble;
	static const struct {
		unsigned long long ms;
		const char *unit;
	} units[] = { {86400000ull, "d"}, {3600000ull, "h"}, {60000ull, "m"}, {1000ull, "s"} };
	for(size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++){
		if(ms >= units[i].ms && ms % units[i].ms == 0){
			snprintf(buf, len, "%llu%s", ms / units[i].ms, units[i].unit);
			return buf;
		}
	}
	snprintf(buf, len, ms ? "%llums" : "0s", ms);
	return buf;
}

static void print_json(const cJSON *data)
{
	char *text = cJSON_Print(data);
	if(text){
		printf("%s\n", text);
		cJSON_free(text);
	}
}

/* One status row: a policy's (or the totals') counters and gauges. */
static int status_row(struct table *t, const char *filter, const cJSON *o)
{
	static const char *const fields[] = {
		"tracked", "nacks", "retryCopies", "deadLetters", "publishFailures",
		"records", "ledgerBytes", "pending", "delayed", "evicted",
	};
	char bufs[10][32];
	const char *cells[11];
	cells[0] = filter;
	for(size_t i = 0; i < 10; i++){
		cells[i + 1] = num(o, fields[i], bufs[i], sizeof(bufs[i]));
	}
	return table__add(t, cells);
}

int cmd__status(const struct dlqctl_opts *o)
{
	cJSON *doc;
	const cJSON *data;
	int ret = control(o, DLQ_COMMAND_GET_STATUS, &doc, &data);
	if(ret) return ret;
	const cJSON *policies = cJSON_GetObjectItemCaseSensitive(data, "policies");
	const cJSON *totals = cJSON_GetObjectItemCaseSensitive(data, "totals");
	if(!cJSON_IsArray(policies) || !cJSON_IsObject(totals)){
		fprintf(stderr, "dlqctl: the getStatus reply has no \"policies\" array or \"totals\" object\n");
		cJSON_Delete(doc);
		return DLQCTL_EXIT_FAIL;
	}
	if(o->json){
		print_json(data);
		cJSON_Delete(doc);
		return DLQCTL_EXIT_OK;
	}
	static const char *const titles[] = {
		"FILTER", "TRACKED", "NACKS", "RETRY-COPIES", "DEAD-LETTERS", "PUBLISH-FAILURES",
		"RECORDS", "LEDGER-BYTES", "PENDING", "DELAYED", "EVICTED", NULL,
	};
	static const bool right[] = { false, true, true, true, true, true, true, true, true, true, true };
	struct table *t = table__new(titles, right);
	bool ok = t != NULL;
	const cJSON *p;
	cJSON_ArrayForEach(p, policies){
		ok = ok && status_row(t, str(p, "filter"), p) == 0;
	}
	ok = ok && status_row(t, "TOTAL", totals) == 0;
	if(ok){
		char b1[32], b2[32], b3[32], b4[32];
		const cJSON *state = cJSON_GetObjectItemCaseSensitive(data, "stateFile");
		table__print(t, stdout);
		printf("\nunknown or expired ids NACKed: %s; NACKs refused: %s; nack_window: %s; max_pending_bytes: %s; state file: %s\n",
				num(totals, "unknownIds", b1, sizeof(b1)), num(totals, "nacksRefused", b2, sizeof(b2)),
				duration(data, "nackWindowMs", b3, sizeof(b3)), num(data, "maxPendingBytes", b4, sizeof(b4)),
				cJSON_IsTrue(state) ? "yes" : "no");
	}else{
		fprintf(stderr, "dlqctl: out of memory\n");
	}
	table__free(t);
	cJSON_Delete(doc);
	return ok ? DLQCTL_EXIT_OK : DLQCTL_EXIT_FAIL;
}

int cmd__policies(const struct dlqctl_opts *o)
{
	cJSON *doc;
	const cJSON *data;
	int ret = control(o, DLQ_COMMAND_LIST_POLICIES, &doc, &data);
	if(ret) return ret;
	const cJSON *policies = cJSON_GetObjectItemCaseSensitive(data, "policies");
	if(!cJSON_IsArray(policies)){
		fprintf(stderr, "dlqctl: the listPolicies reply has no \"policies\" array\n");
		cJSON_Delete(doc);
		return DLQCTL_EXIT_FAIL;
	}
	if(o->json){
		print_json(data);
		cJSON_Delete(doc);
		return DLQCTL_EXIT_OK;
	}
	static const char *const titles[] = {
		"FILTER", "MAX-ATTEMPTS", "DEAD-LETTER", "RETRY-TO", "RETRY-DELAY", "BACKOFF",
		"MAX-DELAY", "JITTER", "SOURCE", NULL,
	};
	static const bool right[] = { false, true, false, false, true, true, true, true, false };
	struct table *t = table__new(titles, right);
	bool ok = t != NULL;
	const cJSON *p;
	cJSON_ArrayForEach(p, policies){
		char max[32], delay[32], maxdelay[32], backoff[32] = "-", jitter[32] = "-";
		const cJSON *b = cJSON_GetObjectItemCaseSensitive(p, "retryBackoff");
		const cJSON *j = cJSON_GetObjectItemCaseSensitive(p, "retryJitter");
		if(cJSON_IsNumber(b)) snprintf(backoff, sizeof(backoff), "%g", b->valuedouble);
		if(cJSON_IsNumber(j)) snprintf(jitter, sizeof(jitter), "%g", j->valuedouble);
		const char *cells[] = {
			str(p, "filter"), num(p, "maxAttempts", max, sizeof(max)), str(p, "deadLetter"), str(p, "retryTo"),
			duration(p, "retryDelayMs", delay, sizeof(delay)), backoff,
			duration(p, "retryMaxDelayMs", maxdelay, sizeof(maxdelay)), jitter, str(p, "source"),
		};
		ok = ok && table__add(t, cells) == 0;
	}
	if(ok){
		table__print(t, stdout);
	}else{
		fprintf(stderr, "dlqctl: out of memory\n");
	}
	table__free(t);
	cJSON_Delete(doc);
	return ok ? DLQCTL_EXIT_OK : DLQCTL_EXIT_FAIL;
}

int cmd__reset_counters(const struct dlqctl_opts *o)
{
	cJSON *doc;
	const cJSON *data;
	int ret = control(o, DLQ_COMMAND_RESET_COUNTERS, &doc, &data);
	if(ret) return ret;
	if(o->json){
		printf("{}\n");
	}else{
		printf("counters reset\n");
	}
	cJSON_Delete(doc);
	return DLQCTL_EXIT_OK;
}
