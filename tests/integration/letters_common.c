/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The helpers of test_letters.c (see letters_common.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "letters_common.h"

/* A failure reported at the test's line, which the helpers are given. */
#define fail_here(file, line, ...) _ck_assert_failed((file), (line), "letters", __VA_ARGS__)
#define check_here(file, line, cond, ...) do{ \
		if(!(cond)) fail_here((file), (line), __VA_ARGS__); \
	}while(0)

/* ---- brokers ---- */

/* Whether the log since b's last start contains needle. */
bool log_has(struct broker *b, const char *needle)
{
	char *log = broker_log_since_start(b);
	bool r = strstr(log, needle) != NULL;
	free(log);
	return r;
}

/* Whether the plugin of the running b said the broker has no
 * mosquitto_acl_check (it says so at startup, before "running"). */
bool lacks_acl_check(struct broker *b)
{
	return log_has(b, LOG_NO_ACL_CHECK);
}

/* Starts b, configured with the plugin. Where the broker does not export
 * mosquitto_acl_check, the default plugin_opt_dead_letter_access check
 * cannot be honoured: b is stopped and started again with access control. */
void start_store(struct broker *b)
{
	broker_start(b);
	if(!lacks_acl_check(b)){
		return;
	}
	fprintf(stderr, "letters: mosquitto %d does not export mosquitto_acl_check: "
			"running with plugin_opt_dead_letter_access control\n", broker_version());
	broker_shutdown(b);
	broker_conf(b, "plugin_opt_dead_letter_access control");
	broker_start(b);
}

/* A started broker with the plugin and one plugin_opt_<opt> line per
 * argument (NULL-terminated), through start_store. */
struct broker *store_broker(const char *label, ...)
{
	va_list ap;
	va_start(ap, label);
	struct broker *b = dlq_broker_new_va(label, ap);
	va_end(ap);
	start_store(b);
	return b;
}

/* ---- commands ---- */

const char *reply_topic(const struct client *c, char *buf, size_t size)
{
	snprintf(buf, size, "replies/%s", client_id(c));
	return buf;
}

/* A v5 client subscribed to its own reply topic. */
struct client *ops_client(struct broker *b, const char *name)
{
	struct client *c = client_new(b, name, MQTT_PROTOCOL_V5);
	char topic[192];
	client_subscribe(c, reply_topic(c, topic, sizeof(topic)), 1);
	return c;
}

char *json_text(const cJSON *j)
{
	char *t = cJSON_PrintUnformatted(j);
	ck_assert_ptr_nonnull(t);
	return t;
}

/* A command object {"command": name}. */
cJSON *cmd_new(const char *name)
{
	cJSON *cmd = cJSON_CreateObject();
	ck_assert_ptr_nonnull(cmd);
	ck_assert_ptr_nonnull(cJSON_AddStringToObject(cmd, "command", name));
	return cmd;
}

/* {"ids": [ids...]} added to cmd. */
void cmd_ids(cJSON *cmd, size_t n, const char *const *ids)
{
	cJSON *arr = cJSON_AddArrayToObject(cmd, "ids");
	for(size_t i = 0; i < n; i++){
		cJSON_AddItemToArray(arr, cJSON_CreateString(ids[i]));
	}
}

/* Sends text (len bytes) to $CONTROL/dlq/v1 from c with its reply topic
 * and returns the reply, which must hold one response. The sender must
 * still be connected, never having been disconnected. */
cJSON *ask_text(struct client *c, const char *text, size_t len)
{
	char topic[192];
	reply_topic(c, topic, sizeof(topic));
	mosquitto_property *p = NULL;
	ck_assert_int_eq(mosquitto_property_add_string(&p, MQTT_PROP_RESPONSE_TOPIC, topic), 0);
	size_t n = client_count(c, topic) + 1;
	int rc = client_publish(c, DLQ_CONTROL_TOPIC, text, (int)len, 1, p);
	mosquitto_property_free_all(&p);
	ck_assert_msg(rc < 0x80, "the broker refused a command: %s", mosquitto_reason_string(rc));
	cJSON *doc = expect_reply(client_expect(c, topic, n), 1);
	ck_assert_msg(client_connected(c) && client_disconnects(c) == 0,
			"the broker disconnected %s after a command", client_id(c));
	return doc;
}

/* Sends {"commands":[cmd]} (taking cmd) and returns the reply; *e is its
 * response, which must name the command. The caller frees the reply. */
cJSON *ask(struct client *c, cJSON *cmd, const cJSON **e)
{
	char name[64];
	snprintf(name, sizeof(name), "%s", json_str(cmd, "command") ? json_str(cmd, "command") : "");
	cJSON *doc = cJSON_CreateObject();
	cJSON_AddItemToArray(cJSON_AddArrayToObject(doc, "commands"), cmd);
	char *text = json_text(doc);
	cJSON_Delete(doc);
	cJSON *reply = ask_text(c, text, strlen(text));
	*e = reply_entry(reply, 0);
	const char *echo = json_str(*e, "command");
	if(name[0] && (echo == NULL || strcmp(echo, name))){
		char *t = json_text(*e);
		ck_abort_msg("the response to %s names command \"%s\": %s (sent %s)", name, echo ? echo : "(none)", t, text);
	}
	free(text);
	return reply;
}

/* The data of a successful response; fails the test on an error. */
const cJSON *entry_data_at(const char *file, int line, const cJSON *e)
{
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(e, "data");
	if(json_str(e, "error") || !cJSON_IsObject(d)){
		char *t = json_text(e);
		fail_here(file, line, "expected a response with data and no error: %s", t);
	}
	return d;
}

/* Fails the test unless e is an error (and has no data) whose text is want
 * (exact), or contains want (!exact). */
void entry_error_at(const char *file, int line, const cJSON *e, const char *want, bool exact)
{
	const char *err = json_str(e, "error");
	bool ok = err && *err && (exact ? !strcmp(err, want) : strstr(err, want) != NULL)
			&& cJSON_GetObjectItemCaseSensitive(e, "data") == NULL;
	if(!ok){
		char *t = json_text(e);
		fail_here(file, line, "expected an error %s \"%s\" and no data: %s", exact ? "saying exactly" : "containing", want, t);
	}
}

/* The one element of a redrive or delete reply's "results", checked to be
 * for id. */
const cJSON *only_result_at(const char *file, int line, const cJSON *e, const char *id)
{
	const cJSON *results = cJSON_GetObjectItemCaseSensitive(entry_data_at(file, line, e), "results");
	if(!cJSON_IsArray(results) || cJSON_GetArraySize(results) != 1){
		char *t = json_text(e);
		fail_here(file, line, "expected one result: %s", t);
	}
	const cJSON *r = cJSON_GetArrayItem(results, 0);
	const char *rid = json_str(r, "id");
	check_here(file, line, rid && !strcmp(rid, id), "result for \"%s\", expected \"%s\"", rid ? rid : "(none)", id);
	return r;
}

/* Fails unless result r (of redrive or delete) reports an error want
 * (exact or contained) and no result. */
void result_error_at(const char *file, int line, const cJSON *r, const char *want, bool exact)
{
	const char *err = json_str(r, "error");
	bool ok = err && (exact ? !strcmp(err, want) : strstr(err, want) != NULL) && json_str(r, "result") == NULL;
	if(!ok){
		char *t = json_text(r);
		fail_here(file, line, "expected a result with error %s \"%s\": %s", exact ? "saying exactly" : "containing", want, t);
	}
}

/* Fails unless r (of a redrive) says the letter was redriven to topic,
 * tracked again or not. */
void result_redriven_at(const char *file, int line, const cJSON *r, const char *topic, bool tracked)
{
	const char *res = json_str(r, "result");
	const char *t = json_str(r, "topic");
	const cJSON *tr = cJSON_GetObjectItemCaseSensitive(r, "tracked");
	if(!res || strcmp(res, "redriven") || !t || strcmp(t, topic) || !cJSON_IsBool(tr)
			|| cJSON_IsTrue(tr) != tracked || json_str(r, "error")){
		char *text = json_text(r);
		fail_here(file, line, "expected {\"result\":\"redriven\",\"topic\":\"%s\",\"tracked\":%s}: %s", topic,
				tracked ? "true" : "false", text);
	}
}

cJSON *one_id_command(const char *command, const char *id, const char *topic)
{
	cJSON *cmd = cmd_new(command);
	cmd_ids(cmd, 1, &id);
	if(topic){
		cJSON_AddStringToObject(cmd, "topic", topic);
	}
	return cmd;
}

/* Redrives (or deletes, with command CMD_DELETE) the one id from c and
 * returns the reply; *r its one result. */
cJSON *one_id(struct client *c, const char *command, const char *id, const char *topic, const cJSON **r)
{
	const cJSON *e;
	cJSON *doc = ask(c, one_id_command(command, id, topic), &e);
	*r = only_result(e, id);
	return doc;
}

/* ---- getStatus ---- */

/* The number member name of getStatus's totals (policy NULL) or of that
 * policy's entry. */
double status_num(struct client *c, const char *policy, const char *name)
{
	char topic[192];
	cJSON *doc;
	const cJSON *data = status_get(c, reply_topic(c, topic, sizeof(topic)), &doc);
	double v = json_num(policy ? status_policy(data, policy) : cJSON_GetObjectItemCaseSensitive(data, "totals"), name);
	cJSON_Delete(doc);
	return v;
}

/* Waits (HARNESS_WAIT_MS) until getStatus's totals say keptDeadLetters is
 * n: a dead letter is kept when the broker accepted it, which a NACK's
 * acknowledgement does not show. */
void wait_kept(struct client *c, double n)
{
	uint64_t deadline = it_now_ms() + (uint64_t)HARNESS_WAIT_MS;
	double v;
	while((v = status_num(c, NULL, "keptDeadLetters")) != n){
		ck_assert_msg(it_now_ms() < deadline, "keptDeadLetters is %g, expected %g", v, n);
		it_sleep_ms(20);
	}
}

/* ---- making letters ---- */

/* Publishes payload (len bytes) to topic from pub, with props, and has
 * worker (subscribed to it) NACK it with reason (NULL: none); with
 * max_attempts=1 it is dead-lettered. Copies the original's dlq-id into id
 * (ID_BUF bytes). */
void make_letter(struct client *pub, struct client *worker, const char *topic, const void *payload, int len,
		const mosquitto_property *props, const char *reason, char *id)
{
	size_t n = client_count(worker, topic) + 1;
	int rc = client_publish(pub, topic, payload, len, 1, props);
	ck_assert_msg(rc < 0x80, "the broker refused a publish to %s", topic);
	const struct it_msg *m = client_expect(worker, topic, n);
	ck_assert_msg(m->payloadlen == len && !memcmp(m->payload, payload, (size_t)len),
			"the worker got another payload on %s", topic);
	snprintf(id, ID_BUF, "%s", expect_original(m));
	client_nack(worker, id, reason);
}

/* ---- letters in replies ---- */


void expect_str_member_at(const char *file, int line, const cJSON *s, const char *name, const char *want)
{
	const char *v = json_str(s, name);
	if(!v || strcmp(v, want)){
		char *t = json_text(s);
		fail_here(file, line, "letter's \"%s\" is \"%s\", expected \"%s\": %s", name, v ? v : "(none)", want, t);
	}
}

/* Fails the test unless s is a letter's summary as w says, with a current
 * time given both ways. */
void expect_summary_at(const char *file, int line, const cJSON *s, const struct want *w)
{
	const char *id = json_str(s, "id");
	char *t = json_text(s);
	check_here(file, line, id && it_is_dlq_id(id), "letter without a dlq-id shaped id: %s", t);
	if(w->id){
		expect_str_member_at(file, line, s, "id", w->id);
	}
	expect_str_member_at(file, line, s, "deadLetter", w->dead_letter);
	expect_str_member_at(file, line, s, "originTopic", w->origin_topic);
	if(w->origin_id){
		expect_str_member_at(file, line, s, "originId", w->origin_id);
	}else{
		check_here(file, line, json_str(s, "originId") && it_is_dlq_id(json_str(s, "originId")), "originId: %s", t);
	}
	if(w->reason){
		expect_str_member_at(file, line, s, "reason", w->reason);
	}else{
		const char *why = json_str(s, "reason");
		check_here(file, line, why && strcasestr(why, "attempt"), "a reason that does not say attempts ran out: %s", t);
	}
	expect_str_member_at(file, line, s, "client", w->client);
	expect_str_member_at(file, line, s, "filter", w->filter);
	check_here(file, line, json_num(s, "retryCount") == w->retry_count, "retryCount, expected %d: %s", w->retry_count, t);
	check_here(file, line, json_num(s, "qos") == w->qos, "qos, expected %d: %s", w->qos, t);
	check_here(file, line, json_num(s, "payloadBytes") == w->payload_bytes, "payloadBytes, expected %d: %s",
			w->payload_bytes, t);
	const char *when = json_str(s, "time");
	check_here(file, line, when && it_is_recent_rfc3339(when, 3600), "time is not a current RFC 3339 UTC time: %s", t);
	check_here(file, line, it_rfc3339_ms(when) >= 0 && json_num(s, "timeMs") == (double)it_rfc3339_ms(when),
			"timeMs is not the time's milliseconds: %s", t);
	free(t);
}


/* Sends listDeadLetters with the members of tmpl (copied; NULL: none),
 * limit (0: none) and cursor (when has_cursor). */
struct page list_page(struct client *c, const cJSON *tmpl, int limit, bool has_cursor, double cursor)
{
	cJSON *cmd = tmpl ? cJSON_Duplicate(tmpl, true) : cJSON_CreateObject();
	ck_assert_ptr_nonnull(cmd);
	cJSON_AddStringToObject(cmd, "command", DLQ_COMMAND_LIST_DEAD_LETTERS);
	if(limit){
		cJSON_AddNumberToObject(cmd, "limit", limit);
	}
	if(has_cursor){
		cJSON_AddNumberToObject(cmd, "cursor", cursor);
	}
	struct page p = { 0 };
	const cJSON *e;
	p.doc = ask(c, cmd, &e);
	const cJSON *d = entry_data(e);
	p.letters = cJSON_GetObjectItemCaseSensitive(d, "letters");
	char *t = json_text(d);
	ck_assert_msg(cJSON_IsArray(p.letters), "no \"letters\" array: %.500s", t);
	p.count = cJSON_GetArraySize(p.letters);
	/* "matched" comes on a first page only; -1 on the others. */
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(d, "matched");
	ck_assert_msg(has_cursor ? m == NULL : cJSON_IsNumber(m), "\"matched\" %s on a %s page: %.500s",
			m ? "given" : "missing", has_cursor ? "later" : "first", t);
	p.matched = m ? m->valuedouble : -1;
	const cJSON *next = cJSON_GetObjectItemCaseSensitive(d, "next");
	p.has_next = next != NULL;
	if(next){
		ck_assert_msg(cJSON_IsNumber(next), "\"next\" is not a number: %.500s", t);
		p.next = next->valuedouble;
	}
	free(t);
	return p;
}

/* Lists everything matching tmpl's members, limit letters a page,
 * following "next": copies the ids in the order given into ids (at most
 * max), and returns how many there were; the first page's "matched"
 * must be the total (later pages give none); each page but the last has limit letters
 * (these letters are small: no page ends early for size). *pages counts
 * the pages. */
size_t list_all(struct client *c, const cJSON *tmpl, int limit, char (*ids)[ID_BUF], size_t max, size_t *pages)
{
	size_t n = 0;
	*pages = 0;
	bool has_cursor = false;
	double cursor = 0, matched = -1;
	for(;;){
		struct page p = list_page(c, tmpl, limit, has_cursor, cursor);
		(*pages)++;
		ck_assert_msg(*pages <= max + 1, "listDeadLetters goes on giving pages");
		if(*pages == 1) matched = p.matched;
		for(int i = 0; i < p.count; i++){
			const char *id = json_str(cJSON_GetArrayItem(p.letters, i), "id");
			ck_assert_msg(id && it_is_dlq_id(id), "page %zu: a letter without an id", *pages);
			ck_assert_msg(n < max, "more letters listed than the %zu expected", max);
			snprintf(ids[n++], ID_BUF, "%s", id);
		}
		if(!p.has_next){
			cJSON_Delete(p.doc);
			break;
		}
		ck_assert_msg(p.count == limit, "page %zu has %d letters and a next: expected %d", *pages, p.count, limit);
		has_cursor = true;
		cursor = p.next;
		cJSON_Delete(p.doc);
	}
	ck_assert_msg(matched == (double)n, "matched %g, but %zu letters were listed", matched, n);
	return n;
}

/* A listDeadLetters template {name: value} (a string). */
cJSON *tmpl_str(const char *name, const char *value)
{
	cJSON *t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, name, value);
	return t;
}

/* The first of a getDeadLetter reply's properties with this name (and
 * key, for a user property); NULL if none. */
const cJSON *find_prop(const cJSON *props, const char *name, const char *key)
{
	const cJSON *p;
	cJSON_ArrayForEach(p, props){
		const char *n = json_str(p, "name");
		if(!n || strcmp(n, name)) continue;
		if(key){
			const char *k = json_str(p, "key");
			if(!k || strcmp(k, key)) continue;
		}
		return p;
	}
	return NULL;
}

/* Fails unless props hold exactly one user property key, with value. */
void expect_user_prop_at(const char *file, int line, const cJSON *props, const char *key, const char *value)
{
	size_t n = 0;
	const cJSON *p, *found = NULL;
	cJSON_ArrayForEach(p, props){
		const char *nm = json_str(p, "name");
		const char *k = json_str(p, "key");
		if(nm && !strcmp(nm, "user-property") && k && !strcmp(k, key)){
			n++;
			found = p;
		}
	}
	char *t = json_text(props);
	check_here(file, line, n == 1, "%zu user properties \"%s\" in the letter's properties: %s", n, key, t);
	const char *v = json_str(found, "value");
	check_here(file, line, v && !strcmp(v, value), "user property \"%s\" is \"%s\", expected \"%s\": %s", key,
			v ? v : "(none)", value, t);
	free(t);
}

/* getDeadLetter of id from c; returns the reply (the caller frees it) and
 * its data in *data. */
cJSON *get_letter(struct client *c, const char *id, const cJSON **data)
{
	cJSON *cmd = cmd_new(DLQ_COMMAND_GET_DEAD_LETTER);
	cJSON_AddStringToObject(cmd, "id", id);
	const cJSON *e;
	cJSON *doc = ask(c, cmd, &e);
	*data = entry_data(e);
	return doc;
}

/* RFC 4648 base64, with padding, of n bytes into out (4 * ceil(n / 3) + 1
 * bytes). */
void b64(const unsigned char *in, size_t n, char *out)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;
	for(size_t i = 0; i < n; i += 3){
		unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);
		out[o++] = abc[v >> 18 & 63];
		out[o++] = abc[v >> 12 & 63];
		out[o++] = i + 1 < n ? abc[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? abc[v & 63] : '=';
	}
	out[o] = '\0';
}

/* Fails unless the getDeadLetter data d gives this payload (len bytes),
 * as text (text) or base64, and not cut. */
void expect_payload_at(const char *file, int line, const cJSON *d, const void *payload, size_t len, bool text)
{
	char *t = json_text(d);
	const char *enc = json_str(d, "payloadEncoding");
	const char *got = json_str(d, "payload");
	check_here(file, line, enc && !strcmp(enc, text ? "utf-8" : "base64"), "payloadEncoding, expected %s: %.500s",
			text ? "utf-8" : "base64", t);
	check_here(file, line, got != NULL, "no payload: %.500s", t);
	if(text){
		check_here(file, line, strlen(got) == len && !memcmp(got, payload, len), "payload, expected \"%.*s\": %.500s",
				(int)len, (const char *)payload, t);
	}else{
		char *want = malloc(len / 3 * 4 + 8);
		ck_assert_ptr_nonnull(want);
		b64(payload, len, want);
		check_here(file, line, !strcmp(got, want), "payload, expected base64 \"%s\": %.500s", want, t);
		free(want);
	}
	const cJSON *cut = cJSON_GetObjectItemCaseSensitive(d, "payloadTruncated");
	check_here(file, line, cut == NULL || cJSON_IsFalse(cut), "a short payload marked truncated: %.500s", t);
	free(t);
}
