/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * dlqctl status, policies and reset-counters: one command of the plugin's
 * $CONTROL/dlq/v1 API each (getStatus, listPolicies, resetCounters), sent
 * and checked by control.c; the reply's data printed as a table, or as
 * JSON with --json.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "dlqctl.h"
#include "mosquitto_dlq.h"

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

/* One status row: a policy's (or the totals') counters and gauges. */
static int status_row(struct table *t, const char *filter, const cJSON *o)
{
	static const char *const fields[] = {
		"tracked", "nacks", "retryCopies", "deadLetters", "publishFailures",
		"records", "ledgerBytes", "pending", "delayed", "evicted",
		"acks", "ackTimeouts", "finalNacks", "awaitingAck",
	};
	enum { FIELDS = sizeof(fields) / sizeof(fields[0]) };
	char bufs[FIELDS][32];
	const char *cells[FIELDS + 1];
	cells[0] = filter;
	for(size_t i = 0; i < FIELDS; i++){
		cells[i + 1] = num(o, fields[i], bufs[i], sizeof(bufs[i]));
	}
	return table__add(t, cells);
}

int cmd__status(const struct dlqctl_opts *o)
{
	cJSON *doc;
	const cJSON *data;
	int ret = control__run(o, DLQ_COMMAND_GET_STATUS, &doc, &data);
	if(ret) return ret;
	const cJSON *policies = cJSON_GetObjectItemCaseSensitive(data, "policies");
	const cJSON *totals = cJSON_GetObjectItemCaseSensitive(data, "totals");
	if(!cJSON_IsArray(policies) || !cJSON_IsObject(totals)){
		fprintf(stderr, "dlqctl: the getStatus reply has no \"policies\" array or \"totals\" object\n");
		cJSON_Delete(doc);
		return DLQCTL_EXIT_FAIL;
	}
	if(o->json){
		control__print_json(data);
		cJSON_Delete(doc);
		return DLQCTL_EXIT_OK;
	}
	static const char *const titles[] = {
		"FILTER", "TRACKED", "NACKS", "RETRY-COPIES", "DEAD-LETTERS", "PUBLISH-FAILURES",
		"RECORDS", "LEDGER-BYTES", "PENDING", "DELAYED", "EVICTED",
		"ACKS", "ACK-TIMEOUTS", "FINAL-NACKS", "AWAITING-ACK", NULL,
	};
	static const bool right[] = { false, true, true, true, true, true, true, true, true, true, true,
		true, true, true, true };
	struct table *t = table__new(titles, right);
	bool ok = t != NULL;
	const cJSON *p;
	cJSON_ArrayForEach(p, policies){
		ok = ok && status_row(t, str(p, "filter"), p) == 0;
	}
	ok = ok && status_row(t, "TOTAL", totals) == 0;
	if(ok){
		char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32], b7[32];
		const cJSON *state = cJSON_GetObjectItemCaseSensitive(data, "stateFile");
		table__print(t, stdout);
		printf("\nunknown or expired ids NACKed: %s; NACKs refused: %s; nack_window: %s; max_pending_bytes: %s; state file: %s\n",
				num(totals, "unknownIds", b1, sizeof(b1)), num(totals, "nacksRefused", b2, sizeof(b2)),
				duration(data, "nackWindowMs", b3, sizeof(b3)), num(data, "maxPendingBytes", b4, sizeof(b4)),
				cJSON_IsTrue(state) ? "yes" : "no");
		printf("dead letters kept: %s; dropped for the store's size: %s; dropped for their age: %s\n",
				num(totals, "keptDeadLetters", b5, sizeof(b5)), num(totals, "deadLettersDropped", b6, sizeof(b6)),
				num(totals, "deadLettersExpired", b7, sizeof(b7)));
		/* A plugin older than collecting's counters has none. */
		if(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(totals, "collected"))){
			printf("collected from other brokers (plugin_opt_collect): %s; kept already: %s; refused: %s\n",
					num(totals, "collected", b1, sizeof(b1)), num(totals, "collectedDuplicates", b2, sizeof(b2)),
					num(totals, "collectedRefused", b3, sizeof(b3)));
		}
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
	int ret = control__run(o, DLQ_COMMAND_LIST_POLICIES, &doc, &data);
	if(ret) return ret;
	const cJSON *policies = cJSON_GetObjectItemCaseSensitive(data, "policies");
	if(!cJSON_IsArray(policies)){
		fprintf(stderr, "dlqctl: the listPolicies reply has no \"policies\" array\n");
		cJSON_Delete(doc);
		return DLQCTL_EXIT_FAIL;
	}
	if(o->json){
		control__print_json(data);
		cJSON_Delete(doc);
		return DLQCTL_EXIT_OK;
	}
	static const char *const titles[] = {
		"FILTER", "MAX-ATTEMPTS", "DEAD-LETTER", "RETRY-TO", "RETRY-DELAY", "BACKOFF",
		"MAX-DELAY", "JITTER", "ACK-TIMEOUT", "SOURCE", NULL,
	};
	static const bool right[] = { false, true, false, false, true, true, true, true, true, false };
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
			duration(p, "retryMaxDelayMs", maxdelay, sizeof(maxdelay)), jitter, str(p, "ackTimeout"), str(p, "source"),
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
	int ret = control__run(o, DLQ_COMMAND_RESET_COUNTERS, &doc, &data);
	if(ret) return ret;
	if(o->json){
		printf("{}\n");
	}else{
		printf("counters reset\n");
	}
	cJSON_Delete(doc);
	return DLQCTL_EXIT_OK;
}
