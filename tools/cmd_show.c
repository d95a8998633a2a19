/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * dlqctl show ID: one dead letter of the plugin's store, through its
 * getDeadLetter command (control.c sends it): every field of the reply,
 * those this dlqctl does not know yet by their JSON names, the letter's
 * properties as they were published to its dead-letter topic, and its
 * payload, as text when the plugin gave it as UTF-8 and as a hex dump when
 * it gave base64; or the reply's data with --json. The text is a
 * publisher's, so control characters are shown as '.'.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "dlqctl.h"
#include "mosquitto_dlq.h"

#define CMD_GET DLQ_COMMAND_GET_DEAD_LETTER

/* Prints "label value" with the value made printable. */
static bool print_field(const char *label, const char *value, const char *suffix)
{
	char *v = letter__printable(value, false);
	if(v == NULL) return false;
	printf("%-15s %s%s\n", label, v, suffix ? suffix : "");
	free(v);
	return true;
}

/* The bytes of RFC 4648 base64 text (padding optional); the caller frees
 * them. NULL when out of memory or not base64. */
static unsigned char *unbase64(const char *s, size_t *len)
{
	size_t n = strlen(s), o = 0;
	unsigned char *out = malloc(n / 4 * 3 + 3);
	uint32_t acc = 0;
	int bits = 0;
	if(out == NULL) return NULL;
	for(size_t i = 0; i < n; i++){
		char c = s[i];
		int v;
		if(c >= 'A' && c <= 'Z') v = c - 'A';
		else if(c >= 'a' && c <= 'z') v = c - 'a' + 26;
		else if(c >= '0' && c <= '9') v = c - '0' + 52;
		else if(c == '+') v = 62;
		else if(c == '/') v = 63;
		else if(c == '=' && i + 2 >= n) break;
		else{
			free(out);
			return NULL;
		}
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if(bits >= 8){
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	*len = o;
	return out;
}

/* hexdump -C's layout: offset, 16 bytes in hex, the printable ones. */
static void hex_dump(const unsigned char *p, size_t n)
{
	for(size_t off = 0; off < n; off += 16){
		printf("%08zx ", off);
		for(size_t k = 0; k < 16; k++){
			if(k == 8) putchar(' ');
			if(off + k < n){
				printf(" %02x", p[off + k]);
			}else{
				printf("   ");
			}
		}
		printf("  |");
		for(size_t k = 0; k < 16 && off + k < n; k++){
			unsigned char c = p[off + k];
			putchar(c >= 0x20 && c < 0x7f ? c : '.');
		}
		printf("|\n");
	}
}

static bool print_properties(const cJSON *props)
{
	const cJSON *p;
	if(cJSON_GetArraySize(props) == 0){
		printf("%-15s -\n", "properties:");
		return true;
	}
	printf("properties:\n");
	cJSON_ArrayForEach(p, props){
		char *name = letter__printable(control__str(p, "name"), false);
		char *key = letter__printable(control__str(p, "key"), false);
		char *raw = control__value_text(cJSON_GetObjectItemCaseSensitive(p, "value"));
		char *value = raw ? letter__printable(raw, false) : NULL;
		bool ok = name && key && value;
		if(ok && control__str(p, "key")){
			printf("  %-24s %s: %s\n", name, key, value);
		}else if(ok){
			printf("  %-24s %s%s\n", name, value,
					!strcmp(name, "correlation-data") ? " (base64)" : "");
		}
		free(name);
		free(key);
		free(raw);
		free(value);
		if(!ok) return false;
	}
	return true;
}

static bool print_payload(const cJSON *data)
{
	const char *payload = control__str(data, "payload");
	const char *encoding = control__str(data, "payloadEncoding");
	const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(data, "payloadBytes");
	bool cut = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(data, "payloadTruncated"));
	char note[96] = "";
	if(payload == NULL){
		printf("payload:        -\n");
		return true;
	}
	if(cut && cJSON_IsNumber(bytes)){
		snprintf(note, sizeof(note), ", cut: the first %d KiB of %.0f bytes", DLQ_MAX_LETTER_PAYLOAD_REPLY / 1024,
				bytes->valuedouble);
	}
	if(encoding && !strcmp(encoding, "base64")){
		size_t n;
		unsigned char *raw = unbase64(payload, &n);
		if(raw == NULL){
			fprintf(stderr, "dlqctl: the %s reply's payload is not base64\n", CMD_GET);
			return false;
		}
		printf("payload (binary, %zu bytes%s):\n", n, note);
		hex_dump(raw, n);
		free(raw);
		return true;
	}
	char *text = letter__printable(payload, true);
	if(text == NULL) return false;
	size_t len = strlen(text);
	printf("payload (utf-8%s):\n%s%s", note, text, len && text[len - 1] == '\n' ? "" : "\n");
	free(text);
	return true;
}

/* Every field of a getDeadLetter reply's data, its properties and payload. */
static bool print_letter(const cJSON *data)
{
	static const struct {
		const char *member;
		const char *label;
	} fields[] = {
		{ "id", "id:" }, { "deadLetter", "dead-letter:" }, { "originTopic", "origin-topic:" },
		{ "originId", "origin-id:" }, { "reason", "reason:" }, { "client", "client:" },
		{ "filter", "filter:" }, { "time", "time:" }, { "retryCount", "retry-count:" },
		{ "qos", "qos:" }, { "payloadBytes", "payload-bytes:" },
	};
	/* Shown with the payload, or above as part of another field. */
	static const char *const elsewhere[] = {
		"timeMs", "properties", "payload", "payloadEncoding", "payloadTruncated",
	};
	bool ok = true;
	for(size_t i = 0; ok && i < sizeof(fields) / sizeof(fields[0]); i++){
		char *v = control__value_text(cJSON_GetObjectItemCaseSensitive(data, fields[i].member));
		char age[48] = "";
		const cJSON *ms = cJSON_GetObjectItemCaseSensitive(data, "timeMs");
		if(!strcmp(fields[i].member, "time") && cJSON_IsNumber(ms)){
			struct letter l = { .time = v };
			char a[32];
			letter__age(&l, dlqctl_wall_ms(), a, sizeof(a));
			if(strcmp(a, "-")) snprintf(age, sizeof(age), " (%s ago)", a);
		}
		ok = v && print_field(fields[i].label, v, age);
		free(v);
	}
	/* Members this dlqctl does not know yet, by their JSON names. */
	const cJSON *m;
	cJSON_ArrayForEach(m, data){
		bool known = false;
		for(size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++){
			known = known || !strcmp(m->string, fields[i].member);
		}
		for(size_t i = 0; i < sizeof(elsewhere) / sizeof(elsewhere[0]); i++){
			known = known || !strcmp(m->string, elsewhere[i]);
		}
		if(known || !ok) continue;
		char label[64];
		char *v = control__value_text(m);
		snprintf(label, sizeof(label), "%s:", m->string);
		ok = v && print_field(label, v, NULL);
		free(v);
	}
	ok = ok && print_properties(cJSON_GetObjectItemCaseSensitive(data, "properties"));
	return ok && print_payload(data);
}

int cmd__show(const struct dlqctl_opts *o)
{
	struct control ctl;
	cJSON *cmd = NULL, *doc = NULL;
	const cJSON *data;
	int ret = DLQCTL_EXIT_FAIL;

	if(control__open(&ctl, o)) goto out;
	cmd = control__command(CMD_GET);
	if(cmd == NULL || !cJSON_AddStringToObject(cmd, "id", o->ids[0])){
		fprintf(stderr, "dlqctl: out of memory\n");
		goto out;
	}
	if(control__call(&ctl, cmd, &doc, &data)) goto out;
	if(!cJSON_IsObject(data)){
		fprintf(stderr, "dlqctl: the %s reply has no \"data\" object\n", CMD_GET);
		goto out;
	}
	if(o->json){
		control__print_json(data);
	}else if(!print_letter(data)){
		goto out;
	}
	ret = DLQCTL_EXIT_OK;
out:
	cJSON_Delete(cmd);
	cJSON_Delete(doc);
	control__close(&ctl);
	return ret;
}
