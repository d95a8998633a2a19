/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * dlqctl brokers: the plugin's kept dead letters by the broker that made
 * them (listBrokers; a fleet's centre keeps those its edges' bridges
 * carry in, docs/fleet.md): a row per broker with its letters, their
 * bytes and the time of its newest letter, by name. Every broker is
 * shown: a reply holds at most DLQ_MAX_BROKERS_LISTED, and its "next" is
 * asked "after" until there is none. Output: a table, or each reply's
 * data with --json. A broker's name is a publisher's text at a collecting
 * centre: control characters are shown as '.'.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "dlqctl.h"
#include "mosquitto_dlq.h"

#define CMD_BROKERS DLQ_COMMAND_LIST_BROKERS

static int broker_row(struct table *t, const cJSON *b)
{
	char *kept = control__value_text(cJSON_GetObjectItemCaseSensitive(b, "kept"));
	char *bytes = control__value_text(cJSON_GetObjectItemCaseSensitive(b, "bytes"));
	const char *name = control__str(b, "broker");
	const char *newest = control__str(b, "newestTime");
	/* "-": letters made by a plugin without broker names. */
	char *shown = letter__printable(name && *name ? name : "-", false);
	const char *cells[] = { shown, kept, bytes, newest && *newest ? newest : "-" };
	int rc = shown && kept && bytes ? table__add(t, cells) : 1;
	free(shown);
	free(kept);
	free(bytes);
	return rc;
}

int cmd__brokers(const struct dlqctl_opts *o)
{
	static const char *const titles[] = { "BROKER", "KEPT", "BYTES", "NEWEST-LETTER", NULL };
	static const bool right[] = { false, true, true, false };
	struct control ctl;
	struct table *t = NULL;
	cJSON *cmd = NULL, *doc = NULL;
	const cJSON *data;
	char *after = NULL;
	long shown = 0;
	int ret = DLQCTL_EXIT_FAIL;

	if(control__open(&ctl, o)) goto out;
	if(!o->json && (t = table__new(titles, right)) == NULL) goto oom;
	for(;;){
		cmd = control__command(CMD_BROKERS);
		if(cmd == NULL || (after && !cJSON_AddStringToObject(cmd, "after", after))) goto oom;
		if(control__call(&ctl, cmd, &doc, &data)) goto out;
		const cJSON *brokers = cJSON_GetObjectItemCaseSensitive(data, "brokers");
		const cJSON *next = cJSON_GetObjectItemCaseSensitive(data, "next");
		if(!cJSON_IsArray(brokers) || (next && !cJSON_IsString(next))){
			fprintf(stderr, "dlqctl: the %s reply has no \"brokers\" array\n", CMD_BROKERS);
			goto out;
		}
		if(o->json){
			control__print_json(data);
		}else{
			const cJSON *b;
			cJSON_ArrayForEach(b, brokers){
				if(broker_row(t, b)) goto oom;
			}
		}
		shown += cJSON_GetArraySize(brokers);
		if(next == NULL || dlqctl_stop) break;
		if(after && !strcmp(after, next->valuestring)){
			fprintf(stderr, "dlqctl: the %s reply's \"next\" does not move on\n", CMD_BROKERS);
			goto out;
		}
		free(after);
		if((after = strdup(next->valuestring)) == NULL) goto oom;
		cJSON_Delete(cmd);
		cJSON_Delete(doc);
		cmd = NULL;
		doc = NULL;
	}
	if(dlqctl_stop){
		fprintf(stderr, "dlqctl: interrupted\n");
		goto out;
	}
	if(!o->json){
		table__print(t, stdout);
		fprintf(stderr, "dlqctl: %ld broker%s with kept dead letters\n", shown, shown == 1 ? "" : "s");
	}
	ret = DLQCTL_EXIT_OK;
	goto out;
oom:
	fprintf(stderr, "dlqctl: out of memory\n");
out:
	free(after);
	cJSON_Delete(cmd);
	cJSON_Delete(doc);
	table__free(t);
	control__close(&ctl);
	return ret;
}
