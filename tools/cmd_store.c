/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * dlqctl list, redrive ID..., delete and purge: the plugin's dead-letter
 * store, through its commands on $CONTROL/dlq/v1 (listDeadLetters,
 * redriveDeadLetters, deleteDeadLetters, purgeDeadLetters; control.c sends
 * them; show and getDeadLetter are cmd_show.c's). The store keeps a copy of every
 * dead letter the plugin made, whether or not anyone was subscribed to its
 * dead-letter topic, until it is redriven, deleted, purged or dropped to
 * make room; these commands find letters there by their id (the
 * dead-letter-id user property). Unlike the session-based redrive
 * (cmd_redrive.c) the plugin itself republishes a letter, and takes it from
 * the store only when the broker accepted the publish.
 * Output: a table, or the replies' data with --json.
 * An error the plugin answers for one id is printed on stderr in its words
 * and makes the exit status 1; the other ids are still done. Text in the
 * replies (topics, reasons, client ids, payloads) is a publisher's, so
 * control characters are shown as '.'.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "dlqctl.h"
#include "mosquitto_dlq.h"

#define CMD_LIST DLQ_COMMAND_LIST_DEAD_LETTERS
#define CMD_REDRIVE DLQ_COMMAND_REDRIVE_DEAD_LETTERS
#define CMD_DELETE DLQ_COMMAND_DELETE_DEAD_LETTERS
#define CMD_PURGE DLQ_COMMAND_PURGE_DEAD_LETTERS

/* At most this many ids go in one redriveDeadLetters or
 * deleteDeadLetters: more are sent in several. */
#define STORE_MAX_IDS DLQ_MAX_LETTER_IDS
/* Letters a page of list --all asks for when --limit is not given: the
 * most the plugin gives. */
#define LIST_PAGE_ALL DLQ_MAX_LIST_LIMIT

/* Adds a row whose cells are made printable. */
static int add_printable_row(struct table *t, const char *const *cells, size_t n)
{
	char *shown[16] = {0};
	int rc = 0;
	for(size_t i = 0; i < n && rc == 0; i++){
		shown[i] = letter__printable(cells[i], false);
		if(shown[i] == NULL) rc = 1;
	}
	if(rc == 0) rc = table__add(t, (const char *const *)shown);
	for(size_t i = 0; i < n; i++){
		free(shown[i]);
	}
	return rc;
}

/* ---- list ---- */

int store__add_selection(cJSON *cmd, const struct dlqctl_opts *o)
{
	bool ok = (!o->policy_filter || cJSON_AddStringToObject(cmd, "filter", o->policy_filter))
			&& (!o->dead_letter || cJSON_AddStringToObject(cmd, "deadLetter", o->dead_letter))
			&& (!o->reason || cJSON_AddStringToObject(cmd, "reason", o->reason))
			&& (!o->cause || cJSON_AddStringToObject(cmd, "cause", o->cause))
			&& (!o->broker || cJSON_AddStringToObject(cmd, "broker", o->broker))
			&& (!o->has_since || cJSON_AddNumberToObject(cmd, "since", (double)o->since_ms))
			&& (!o->has_until || cJSON_AddNumberToObject(cmd, "until", (double)o->until_ms));
	return ok ? 0 : 1;
}

static cJSON *list_command(const struct dlqctl_opts *o, long limit, bool has_cursor, double cursor)
{
	cJSON *cmd = control__command(CMD_LIST);
	bool ok = cmd != NULL
			&& (!o->oldest || cJSON_AddStringToObject(cmd, "order", "oldest"))
			&& (limit == 0 || cJSON_AddNumberToObject(cmd, "limit", (double)limit))
			&& (!has_cursor || cJSON_AddNumberToObject(cmd, "cursor", cursor))
			&& store__add_selection(cmd, o) == 0;
	if(!ok){
		cJSON_Delete(cmd);
		cmd = NULL;
	}
	return cmd;
}

static int list_row(struct table *t, const cJSON *l)
{
	char *retries = control__value_text(cJSON_GetObjectItemCaseSensitive(l, "retryCount"));
	/* "-": a plugin older than broker names says none. */
	const char *broker = control__str(l, "broker");
	const char *cells[] = {
		control__str(l, "id"), control__str(l, "time"), broker && *broker ? broker : "-", control__str(l, "deadLetter"),
		control__str(l, "originTopic"), retries, control__str(l, "cause"), control__str(l, "client"), control__str(l, "reason"),
	};
	int rc = retries ? add_printable_row(t, cells, sizeof(cells) / sizeof(cells[0])) : 1;
	free(retries);
	return rc;
}

int cmd__list(const struct dlqctl_opts *o)
{
	static const char *const titles[] = {
		"ID", "TIME", "BROKER", "DEAD-LETTER", "ORIGIN-TOPIC", "RETRY-COUNT", "CAUSE", "CLIENT", "REASON", NULL,
	};
	static const bool right[] = { false, false, false, false, false, true, false, false, false };
	struct control ctl;
	struct table *t = NULL;
	cJSON *cmd = NULL, *doc = NULL;
	const cJSON *data;
	long limit = o->limit ? o->limit : (o->all ? LIST_PAGE_ALL : 0);
	long shown = 0;
	double matched = 0, cursor = 0;
	bool has_cursor = false, more = false;
	int ret = DLQCTL_EXIT_FAIL;

	if(control__open(&ctl, o)) goto out;
	if(!o->json && (t = table__new(titles, right)) == NULL) goto oom;
	for(;;){
		cmd = list_command(o, limit, has_cursor, cursor);
		if(cmd == NULL) goto oom;
		if(control__call(&ctl, cmd, &doc, &data)) goto out;
		const cJSON *letters = cJSON_GetObjectItemCaseSensitive(data, "letters");
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(data, "matched");
		const cJSON *next = cJSON_GetObjectItemCaseSensitive(data, "next");
		/* "matched" comes with the first page only. */
		if(!cJSON_IsArray(letters) || (!has_cursor && !cJSON_IsNumber(m)) || (next && !cJSON_IsNumber(next))){
			fprintf(stderr, "dlqctl: the %s reply has no \"letters\" array or \"matched\" number\n", CMD_LIST);
			goto out;
		}
		if(!has_cursor) matched = m->valuedouble;
		if(o->json){
			control__print_json(data);
		}else{
			const cJSON *l;
			cJSON_ArrayForEach(l, letters){
				if(list_row(t, l)) goto oom;
			}
		}
		shown += cJSON_GetArraySize(letters);
		more = next != NULL;
		if(!more || !o->all || dlqctl_stop) break;
		if(has_cursor && next->valuedouble == cursor){
			fprintf(stderr, "dlqctl: the %s reply's \"next\" does not move on (%.0f)\n", CMD_LIST, cursor);
			goto out;
		}
		cursor = next->valuedouble;
		has_cursor = true;
		cJSON_Delete(cmd);
		cJSON_Delete(doc);
		cmd = NULL;
		doc = NULL;
	}
	if(dlqctl_stop && more){
		fprintf(stderr, "dlqctl: interrupted\n");
		goto out;
	}
	if(!o->json){
		table__print(t, stdout);
		if(more){
			fprintf(stderr, "dlqctl: %ld of %.0f matching dead letters shown; --all shows every one\n", shown, matched);
		}else{
			fprintf(stderr, "dlqctl: %ld dead letter%s\n", shown, shown == 1 ? "" : "s");
		}
	}
	ret = DLQCTL_EXIT_OK;
	goto out;
oom:
	fprintf(stderr, "dlqctl: out of memory\n");
out:
	cJSON_Delete(cmd);
	cJSON_Delete(doc);
	table__free(t);
	control__close(&ctl);
	return ret;
}

/* ---- redrive ID..., delete ---- */

struct by_ids {
	const char *command;       /* CMD_REDRIVE or CMD_DELETE */
	const char *done;          /* the result of an id done: "redriven", "deleted" */
	const char *verb;          /* for the summary: "redrove", "deleted" */
	bool redrive;
};

/* One batch: ids[0 .. n-1]. Adds a row per id done to t (NULL with
 * --json), counts them in *done and says why on stderr for each other.
 * Returns an exit status: 1 when the command failed as a whole. */
static int by_ids_batch(struct control *ctl, const struct by_ids *b, char *const *ids, size_t n,
		struct table *t, size_t *done)
{
	const struct dlqctl_opts *o = ctl->o;
	cJSON *cmd = control__command(b->command);
	cJSON *list = cmd ? cJSON_AddArrayToObject(cmd, "ids") : NULL;
	cJSON *doc = NULL;
	const cJSON *data;
	int ret = DLQCTL_EXIT_FAIL;
	bool ok = list != NULL && (!o->to || cJSON_AddStringToObject(cmd, "topic", o->to));
	for(size_t i = 0; ok && i < n; i++){
		cJSON *id = cJSON_CreateString(ids[i]);
		ok = id && cJSON_AddItemToArray(list, id);
		if(id && !ok) cJSON_Delete(id);
	}
	if(!ok){
		fprintf(stderr, "dlqctl: out of memory\n");
		goto out;
	}
	if(control__call(ctl, cmd, &doc, &data)) goto out;
	const cJSON *results = cJSON_GetObjectItemCaseSensitive(data, "results");
	if(!cJSON_IsArray(results)){
		fprintf(stderr, "dlqctl: the %s reply has no \"results\" array\n", b->command);
		goto out;
	}
	if(o->json) control__print_json(data);
	const cJSON *r;
	size_t answered = 0;
	cJSON_ArrayForEach(r, results){
		const char *id = control__str(r, "id");
		const char *result = control__str(r, "result");
		const char *error = control__str(r, "error");
		char *shown = letter__printable(id, false);
		char *why = letter__printable(error ? error : "the reply says neither \"result\" nor \"error\"", false);
		answered++;
		/* A letter of another broker redriven at a centre with
		 * plugin_opt_redrive_home: "sent home to <broker>", published
		 * "via" its home topic. */
		bool home = b->redrive && result && !strncmp(result, "sent home to ", 13);
		if(result && (home || !strcmp(result, b->done)) && !error){
			(*done)++;
			if(t){
				const cJSON *tracked = cJSON_GetObjectItemCaseSensitive(r, "tracked");
				const char *cells[] = {
					id, result, control__str(r, home ? "via" : "topic"),
					cJSON_IsBool(tracked) ? (cJSON_IsTrue(tracked) ? "yes" : "no") : NULL,
				};
				if(add_printable_row(t, cells, b->redrive ? 4 : 2)) ok = false;
			}
		}else if(shown && why){
			fprintf(stderr, "dlqctl: dead letter %s not %s: %s\n", shown, b->done, why);
		}
		free(shown);
		free(why);
	}
	if(!ok){
		fprintf(stderr, "dlqctl: out of memory\n");
		goto out;
	}
	if(answered != n){
		fprintf(stderr, "dlqctl: the %s reply has %zu results for the %zu ids sent\n", b->command, answered, n);
	}
	ret = DLQCTL_EXIT_OK;
out:
	cJSON_Delete(cmd);
	cJSON_Delete(doc);
	return ret;
}

static int by_ids(const struct dlqctl_opts *o, const struct by_ids *b)
{
	static const char *const titles[] = { "ID", "RESULT", "TOPIC", "TRACKED", NULL };
	static const char *const short_titles[] = { "ID", "RESULT", NULL };
	struct control ctl;
	struct table *t = NULL;
	size_t done = 0, sent = 0;
	int ret = DLQCTL_EXIT_FAIL;

	if(control__open(&ctl, o)) goto out;
	if(!o->json && (t = table__new(b->redrive ? titles : short_titles, NULL)) == NULL){
		fprintf(stderr, "dlqctl: out of memory\n");
		goto out;
	}
	while(sent < o->nids && !dlqctl_stop){
		size_t n = o->nids - sent < STORE_MAX_IDS ? o->nids - sent : STORE_MAX_IDS;
		int rc = by_ids_batch(&ctl, b, o->ids + sent, n, t, &done);
		sent += n;
		if(rc) break;
	}
	if(t && done) table__print(t, stdout);
	if(!o->json || done < o->nids){
		fprintf(stderr, "dlqctl: %s %zu of %zu dead letter%s%s\n", b->verb, done, o->nids, o->nids == 1 ? "" : "s",
				sent < o->nids ? " (stopped)" : "");
	}
	ret = done == o->nids ? DLQCTL_EXIT_OK : DLQCTL_EXIT_FAIL;
out:
	table__free(t);
	control__close(&ctl);
	return ret;
}

int cmd__store_redrive(const struct dlqctl_opts *o)
{
	static const struct by_ids b = { CMD_REDRIVE, "redriven", "redrove", true };
	return by_ids(o, &b);
}

int cmd__delete(const struct dlqctl_opts *o)
{
	static const struct by_ids b = { CMD_DELETE, "deleted", "deleted", false };
	return by_ids(o, &b);
}

/* ---- purge ---- */

int cmd__purge(const struct dlqctl_opts *o)
{
	struct control ctl;
	cJSON *cmd = NULL, *doc = NULL;
	const cJSON *data;
	int ret = DLQCTL_EXIT_FAIL;
	char what[600];

	if(o->all){
		snprintf(what, sizeof(what), "kept dead letters");
	}else{
		char *f = letter__printable(o->policy_filter, false);
		snprintf(what, sizeof(what), "kept dead letters of the policy \"%s\"", f ? f : "?");
		free(f);
	}
	if(control__open(&ctl, o)) goto out;
	if(!o->yes){
		/* Only count them: the letters of the policy this client may read,
		 * which are those a purge would take. */
		struct dlqctl_opts count = *o;
		count.policy_filter = o->all ? NULL : o->policy_filter;
		count.oldest = false;
		count.dead_letter = count.reason = NULL;
		count.has_since = count.has_until = false;
		cmd = list_command(&count, 1, false, 0);
		if(cmd == NULL) goto oom;
		if(control__call(&ctl, cmd, &doc, &data)) goto out;
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(data, "matched");
		if(!cJSON_IsNumber(m)){
			fprintf(stderr, "dlqctl: the %s reply has no \"matched\" number\n", CMD_LIST);
			goto out;
		}
		if(o->json){
			printf("{\"matched\": %.0f, \"purged\": 0}\n", m->valuedouble);
		}else{
			printf("%.0f %s would be purged; nothing was: add --yes to purge them\n", m->valuedouble, what);
		}
		ret = DLQCTL_EXIT_OK;
		goto out;
	}
	cmd = control__command(CMD_PURGE);
	if(cmd == NULL) goto oom;
	if(o->all ? !cJSON_AddBoolToObject(cmd, "all", 1) : !cJSON_AddStringToObject(cmd, "filter", o->policy_filter)){
		goto oom;
	}
	if(control__call(&ctl, cmd, &doc, &data)) goto out;
	const cJSON *purged = cJSON_GetObjectItemCaseSensitive(data, "purged");
	const cJSON *refused = cJSON_GetObjectItemCaseSensitive(data, "notPermitted");
	if(!cJSON_IsNumber(purged)){
		fprintf(stderr, "dlqctl: the %s reply has no \"purged\" number\n", CMD_PURGE);
		goto out;
	}
	if(o->json){
		control__print_json(data);
	}else{
		printf("purged %.0f %s\n", purged->valuedouble, what);
	}
	if(cJSON_IsNumber(refused) && refused->valuedouble > 0){
		fprintf(stderr, "dlqctl: %.0f %s were left: this client may not read their dead-letter topics\n",
				refused->valuedouble, what);
		goto out;
	}
	ret = DLQCTL_EXIT_OK;
	goto out;
oom:
	fprintf(stderr, "dlqctl: out of memory\n");
out:
	cJSON_Delete(cmd);
	cJSON_Delete(doc);
	control__close(&ctl);
	return ret;
}
