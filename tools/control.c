/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The plugin's $CONTROL/dlq/v1 JSON commands as dlqctl sends them (see
 * dlqctl.h): one connection may carry several, one after the other (the
 * pages of a list, the batches of a redrive). Each goes out with an MQTT v5
 * response topic of the connection's own and fresh correlation data, so
 * its reply comes to this client alone and cannot be taken for another's.
 * A reply that is missing, late, not JSON or not the expected shape is
 * reported, never trusted; an error the plugin answers is printed in its
 * own words. Also the small readers of reply members the commands share.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <mqtt_protocol.h>

#include "dlqctl.h"
#include "mosquitto_dlq.h"

static void on_reply(void *arg, const struct mosquitto_message *m, const mosquitto_property *props)
{
	struct control *ctl = arg;
	void *cd = NULL;
	uint16_t cdlen = 0;
	if(ctl->got || m->topic == NULL || strcmp(m->topic, ctl->response_topic)) return;
	if(mosquitto_property_read_binary(props, MQTT_PROP_CORRELATION_DATA, &cd, &cdlen, false) == NULL) return;
	bool ours = cdlen == strlen(ctl->corr) && !memcmp(cd, ctl->corr, cdlen);
	free(cd);
	if(!ours) return;
	ctl->got = true;
	ctl->doc = cJSON_ParseWithLength(m->payload, m->payloadlen > 0 ? (size_t)m->payloadlen : 0);
}

int control__open(struct control *ctl, const struct dlqctl_opts *o)
{
	char rnd[33];
	memset(ctl, 0, sizeof(*ctl));
	ctl->o = o;
	conn__random_hex(rnd, 16);
	snprintf(ctl->response_topic, sizeof(ctl->response_topic), "dlqctl/reply/%s", rnd);
	return conn__open(&ctl->c, o, o->id, true, 0, 0, false, NULL, on_reply, ctl);
}

cJSON *control__command(const char *name)
{
	cJSON *cmd = cJSON_CreateObject();
	if(cmd && !cJSON_AddStringToObject(cmd, "command", name)){
		cJSON_Delete(cmd);
		cmd = NULL;
	}
	return cmd;
}

/* {"commands":[cmd]} as text, with correlationData added to cmd; NULL when
 * out of memory. cmd stays the caller's. */
static char *request_text(cJSON *cmd, const char *corr)
{
	cJSON *doc = cJSON_CreateObject();
	cJSON *list = doc ? cJSON_AddArrayToObject(doc, "commands") : NULL;
	char *text = NULL;
	cJSON_DeleteItemFromObjectCaseSensitive(cmd, "correlationData");
	/* cmd is lent to doc for the printing only. */
	if(list && cJSON_AddStringToObject(cmd, "correlationData", corr) && cJSON_AddItemReferenceToArray(list, cmd)){
		text = cJSON_PrintUnformatted(doc);
	}
	cJSON_Delete(doc);
	return text;
}

int control__call(struct control *ctl, cJSON *cmd, cJSON **doc, const cJSON **data)
{
	const struct dlqctl_opts *o = ctl->o;
	const cJSON *member = cJSON_GetObjectItemCaseSensitive(cmd, "command");
	const char *command = cJSON_IsString(member) ? member->valuestring : "?";
	mosquitto_property *props = NULL;
	char *text = NULL;
	int reason = 0;
	int ret = DLQCTL_EXIT_FAIL;

	*doc = NULL;
	*data = NULL;
	ctl->got = false;
	cJSON_Delete(ctl->doc);
	ctl->doc = NULL;
	conn__random_hex(ctl->corr, 16);
	text = request_text(cmd, ctl->corr);
	if(text == NULL
			|| mosquitto_property_add_string(&props, MQTT_PROP_RESPONSE_TOPIC, ctl->response_topic)
			|| mosquitto_property_add_binary(&props, MQTT_PROP_CORRELATION_DATA, ctl->corr, (uint16_t)strlen(ctl->corr))){
		fprintf(stderr, "dlqctl: out of memory\n");
		goto out;
	}
	int timeout_ms = (int)(o->timeout_s * 1000);
	int rc = conn__publish(&ctl->c, DLQ_CONTROL_TOPIC, text, (int)strlen(text), props, timeout_ms, &reason);
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
	while(!ctl->got && !ctl->c.lost && !dlqctl_stop && dlqctl_now_ms() < deadline){
		if(conn__run(&ctl->c, 50) != MOSQ_ERR_SUCCESS) break;
	}
	if(!ctl->got){
		fprintf(stderr, "dlqctl: no reply to %s within %g s: is the mosquitto-dlq plugin loaded on this broker?\n",
				command, o->timeout_s);
		goto out;
	}
	const cJSON *responses = cJSON_GetObjectItemCaseSensitive(ctl->doc, "responses");
	const cJSON *entry = cJSON_GetArrayItem(responses, 0);
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(entry, "command");
	const cJSON *error = cJSON_GetObjectItemCaseSensitive(entry, "error");
	if(ctl->doc == NULL){
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
	*doc = ctl->doc;
	ctl->doc = NULL;
	ret = DLQCTL_EXIT_OK;
out:
	cJSON_free(text);
	mosquitto_property_free_all(&props);
	return ret;
}

void control__close(struct control *ctl)
{
	cJSON_Delete(ctl->doc);
	ctl->doc = NULL;
	conn__close(&ctl->c, true);
}

int control__run(const struct dlqctl_opts *o, const char *command, cJSON **doc, const cJSON **data)
{
	struct control ctl;
	cJSON *cmd = NULL;
	int ret = control__open(&ctl, o);
	*doc = NULL;
	*data = NULL;
	if(ret == DLQCTL_EXIT_OK){
		cmd = control__command(command);
		if(cmd == NULL){
			fprintf(stderr, "dlqctl: out of memory\n");
			ret = DLQCTL_EXIT_FAIL;
		}else{
			ret = control__call(&ctl, cmd, doc, data);
		}
	}
	cJSON_Delete(cmd);
	control__close(&ctl);
	return ret;
}

void control__print_json(const cJSON *data)
{
	char *text = cJSON_Print(data);
	if(text){
		printf("%s\n", text);
		cJSON_free(text);
	}
}

const char *control__str(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

char *control__value_text(const cJSON *v)
{
	char buf[64];
	if(cJSON_IsString(v)) return strdup(v->valuestring);
	if(cJSON_IsNumber(v)){
		if(v->valuedouble == (double)(long long)v->valuedouble){
			snprintf(buf, sizeof(buf), "%lld", (long long)v->valuedouble);
		}else{
			snprintf(buf, sizeof(buf), "%g", v->valuedouble);
		}
		return strdup(buf);
	}
	if(v == NULL) return strdup("-");
	char *json = cJSON_PrintUnformatted(v);
	char *text = json ? strdup(json) : NULL;
	cJSON_free(json);
	return text;
}
