/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Parsing policies (see config.h): one plugin_opt_policy line, or a JSON
 * policy document, into struct dlq_policy values, each field checked on its
 * own with a message that says what is wrong. Checks across policies belong
 * to policy__table_finish.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "errtext.h"
#include "mosquitto_dlq.h"
#include "topic.h"

/* Why a topic (filter or publish topic) is not valid, for a message. */
static const char *topic_problem(const char *s, bool filter)
{
	size_t len = strlen(s);

	if(len == 0) return "it is empty";
	if(len > 65535) return "it is longer than 65535 bytes";
	if(!filter && strpbrk(s, "+#")) return "a topic to publish to must not contain '+' or '#'";
	for(size_t i = 0; filter && i < len; i++){
		if((s[i] == '+' || s[i] == '#') && ((i > 0 && s[i-1] != '/')
				|| (s[i] == '+' && s[i+1] != '\0' && s[i+1] != '/') || (s[i] == '#' && s[i+1] != '\0'))){
			return "'+' and '#' must fill a whole level, and '#' must be the last level";
		}
	}
	return "it is not valid UTF-8 or holds control characters";
}

static int set_filter(struct dlq_policy *p, const char *v, char *err, size_t errlen)
{
	if(!topic__valid_filter(v)){
		errtext__set(err, errlen, "filter " QFMT " is not a valid topic filter: %s", Q(v), topic_problem(v, true));
		return EINVAL;
	}
	p->filter = strdup(v);
	return p->filter ? 0 : ENOMEM;
}

/* dead_letter and retry_to: topics the plugin publishes to, never '$'. */
static int set_target(char **dst, const char *key, const char *v, char *err, size_t errlen)
{
	if(!strcmp(key, "retry_to") && !strcmp(v, DLQ_RETRY_TO_DELIVERY)){
		*dst = NULL;
		return 0;
	}
	if(!topic__valid_publish(v)){
		errtext__set(err, errlen, "%s " QFMT " is not a valid topic: %s", key, Q(v), topic_problem(v, false));
		return EINVAL;
	}
	if(v[0] == '$'){
		errtext__set(err, errlen, "%s " QFMT " must not start with '$'", key, Q(v));
		return EINVAL;
	}
	*dst = strdup(v);
	return *dst ? 0 : ENOMEM;
}

static int set_max_attempts(struct dlq_policy *p, const char *v, char *err, size_t errlen)
{
	char *end = NULL;
	unsigned long n = 0;
	/* strtoul alone would take a sign and leading blanks. */
	bool ok = v[0] >= '0' && v[0] <= '9';

	if(ok){
		errno = 0;
		n = strtoul(v, &end, 10);
		ok = *end == '\0' && errno != ERANGE && n >= DLQ_MAX_ATTEMPTS_MIN && n <= DLQ_MAX_ATTEMPTS_MAX;
	}
	if(!ok){
		errtext__set(err, errlen, "max_attempts must be an integer from %d to %d, got " QFMT,
				DLQ_MAX_ATTEMPTS_MIN, DLQ_MAX_ATTEMPTS_MAX, Q(v));
		return EINVAL;
	}
	p->max_attempts = (unsigned)n;
	return 0;
}

/* Position of the len bytes at name in keys, or count if it is none. */
static size_t key_index(const char *const *keys, size_t count, const char *name, size_t len)
{
	for(size_t k = 0; k < count; k++){
		if(strlen(keys[k]) == len && !memcmp(keys[k], name, len)) return k;
	}
	return count;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t';
}

/* Messages name the reason only: config__parse puts the option and the
 * value in front. */
int config__parse_policy_line(const char *line, struct dlq_policy *out, char *err, size_t errlen)
{
	static const char *const keys[] = {"max_attempts", "dead_letter", "retry_to"};
	bool seen[3] = {false, false, false};
	const char *s = line ? line : "";
	char *token = NULL;
	int rc = EINVAL;

	memset(out, 0, sizeof(*out));
	for(bool first = true; ; first = false){
		while(is_space(*s)) s++;
		if(*s == '\0') break;
		size_t len = 0;
		while(s[len] && !is_space(s[len])) len++;
		free(token);
		token = errtext__dup_range(s, len);
		if(token == NULL){
			rc = ENOMEM;
			goto error;
		}
		s += len;
		rc = EINVAL;

		char *eq = strchr(token, '=');
		size_t k = eq ? key_index(keys, 3, token, (size_t)(eq - token)) : 3;
		if(first){
			/* '=' is legal in a filter, but a known key first means the
			 * filter was left out. */
			if(k < 3){
				errtext__set(err, errlen, "missing filter: the value starts with " QFMT ", not a topic filter", Q(token));
				goto error;
			}
			rc = set_filter(out, token, err, errlen);
			if(rc) goto error;
			continue;
		}
		if(eq == NULL || eq == token){
			errtext__set(err, errlen, "expected key=value, got " QFMT, Q(token));
			goto error;
		}
		if(k == 3){
			*eq = '\0';
			errtext__set(err, errlen, "unknown key " QFMT " (known: max_attempts, dead_letter, retry_to)", Q(token));
			goto error;
		}
		if(seen[k]){
			errtext__set(err, errlen, "%s given twice", keys[k]);
			goto error;
		}
		seen[k] = true;
		if(eq[1] == '\0'){
			errtext__set(err, errlen, "%s has an empty value", keys[k]);
			goto error;
		}
		if(k == 0){
			rc = set_max_attempts(out, eq + 1, err, errlen);
		}else{
			rc = set_target(k == 1 ? &out->dead_letter : &out->retry_to, keys[k], eq + 1, err, errlen);
		}
		if(rc) goto error;
	}
	rc = EINVAL;
	if(out->filter == NULL){
		errtext__set(err, errlen, "missing filter: give \"<filter> max_attempts=<n> dead_letter=<topic>\"");
		goto error;
	}
	for(size_t k = 0; k < 2; k++){
		if(!seen[k]){
			errtext__set(err, errlen, "%s is required", keys[k]);
			goto error;
		}
	}
	free(token);
	return 0;

error:
	if(rc == ENOMEM) errtext__set(err, errlen, "out of memory");
	free(token);
	policy__free(out);
	return rc;
}

static const char *json_type(const cJSON *j)
{
	if(cJSON_IsString(j)) return "a string";
	if(cJSON_IsNumber(j)) return "a number";
	if(cJSON_IsBool(j)) return "a boolean";
	if(cJSON_IsNull(j)) return "null";
	if(cJSON_IsArray(j)) return "an array";
	return "an object";
}

/* One element of "policies" into *p; messages name the reason only. On
 * failure *p may hold strings: the caller frees it. */
static int json_policy(const cJSON *obj, struct dlq_policy *p, char *err, size_t errlen)
{
	static const char *const keys[] = {"filter", "max_attempts", "dead_letter", "retry_to"};
	const cJSON *val[4] = {NULL, NULL, NULL, NULL}; /* borrowed from the tree */
	const cJSON *j;
	size_t k;
	int rc;

	if(!cJSON_IsObject(obj)){
		errtext__set(err, errlen, "must be an object, got %s", json_type(obj));
		return EINVAL;
	}
	cJSON_ArrayForEach(j, obj){
		k = key_index(keys, 4, j->string, strlen(j->string));
		if(k == 4){
			errtext__set(err, errlen, "unknown key " QFMT " (known: filter, max_attempts, dead_letter, retry_to)", Q(j->string));
			return EINVAL;
		}
		if(val[k]){
			errtext__set(err, errlen, "%s given twice", keys[k]);
			return EINVAL;
		}
		val[k] = j;
	}
	for(k = 0; k < 4; k++){
		if(val[k] == NULL && k < 3){
			errtext__set(err, errlen, "%s is required", keys[k]);
			return EINVAL;
		}
		if(val[k] && k != 1 && !cJSON_IsString(val[k])){
			errtext__set(err, errlen, "%s must be a string, got %s", keys[k], json_type(val[k]));
			return EINVAL;
		}
	}
	rc = set_filter(p, val[0]->valuestring, err, errlen);
	if(rc) return rc;
	double d = cJSON_IsNumber(val[1]) ? val[1]->valuedouble : 0;
	/* The range test comes first (NaN fails it), so the cast is defined. */
	if(!cJSON_IsNumber(val[1]) || !(d >= DLQ_MAX_ATTEMPTS_MIN && d <= DLQ_MAX_ATTEMPTS_MAX) || (double)(unsigned)d != d){
		if(cJSON_IsNumber(val[1])){
			errtext__set(err, errlen, "max_attempts must be an integer from %d to %d, got %g", DLQ_MAX_ATTEMPTS_MIN, DLQ_MAX_ATTEMPTS_MAX, d);
		}else{
			errtext__set(err, errlen, "max_attempts must be an integer from %d to %d, got %s", DLQ_MAX_ATTEMPTS_MIN, DLQ_MAX_ATTEMPTS_MAX, json_type(val[1]));
		}
		return EINVAL;
	}
	p->max_attempts = (unsigned)d;
	rc = set_target(&p->dead_letter, "dead_letter", val[2]->valuestring, err, errlen);
	if(rc == 0 && val[3]) rc = set_target(&p->retry_to, "retry_to", val[3]->valuestring, err, errlen);
	return rc;
}

/* Undoes the appends of a parse that failed, so that nothing is half-read. */
static void table_truncate(struct dlq_policy_table *t, size_t count)
{
	while(t->count > count){
		policy__free(&t->items[--t->count]);
	}
}

/* "line L, column C" of byte at in text, for messages. */
static const char *where(const char *text, size_t at, char *buf, size_t size)
{
	size_t line = 1;
	size_t col = 1;

	for(size_t k = 0; k < at; k++){
		if(text[k] == '\n'){
			line++;
			col = 1;
		}else{
			col++;
		}
	}
	snprintf(buf, size, "line %zu, column %zu", line, col);
	return buf;
}

int config__parse_policy_json(const char *text, size_t len, const char *source, struct dlq_policy_table *t, char *err, size_t errlen)
{
	const char *end = NULL;
	const cJSON *list = NULL; /* borrowed from root */
	const cJSON *j;
	struct dlq_policy p;
	size_t before = t->count;
	size_t i = 0;
	size_t n;
	int rc = EINVAL;
	char pos[64];

	/* cJSON decodes \u0000 into a terminator, which would cut a topic
	 * short without a word; no MQTT topic may hold U+0000 anyway. */
	for(size_t k = 0; k + 1 < len; k++){
		if(text[k] != '\\') continue;
		if(len - k >= 6 && !memcmp(text + k + 1, "u0000", 5)){
			errtext__set(err, errlen, "%s: a string holds \\u0000, which no MQTT topic may contain (%s)", source, where(text, k, pos, sizeof(pos)));
			return EINVAL;
		}
		k++; /* the escaped character, perhaps a backslash */
	}
	/* The Opts variant reports where parsing stopped without cJSON's
	 * global error pointer. */
	cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
	if(root == NULL){
		size_t at = (end && end >= text && end <= text + len) ? (size_t)(end - text) : 0;
		errtext__set(err, errlen, "%s: not valid JSON (%s)", source, where(text, at, pos, sizeof(pos)));
		return EINVAL;
	}
	if(!cJSON_IsObject(root)){
		errtext__set(err, errlen, "%s: the document must be an object, {\"policies\":[...]}, got %s", source, json_type(root));
		goto error;
	}
	cJSON_ArrayForEach(j, root){
		if(strcmp(j->string, "policies")){
			errtext__set(err, errlen, "%s: unknown key " QFMT " (known: policies)", source, Q(j->string));
			goto error;
		}
		if(list){
			errtext__set(err, errlen, "%s: policies given twice", source);
			goto error;
		}
		list = j;
	}
	if(!cJSON_IsArray(list)){
		errtext__set(err, errlen, "%s: policies must be an array, got %s", source, list ? json_type(list) : "nothing");
		goto error;
	}
	cJSON_ArrayForEach(j, list){
		memset(&p, 0, sizeof(p));
		n = errtext__set(err, errlen, "%s: policies[%zu]: ", source, i);
		rc = json_policy(j, &p, err ? err + n : NULL, errlen - n);
		if(rc == 0){
			p.source = errtext__dup_printf("%s: policies[%zu]", source, i);
			if(p.source == NULL) rc = ENOMEM;
		}
		if(rc == 0) rc = policy__table_add(t, &p);
		if(rc){
			policy__free(&p);
			if(rc == ENOMEM) errtext__set(err, errlen, "out of memory");
			goto error;
		}
		i++;
	}
	cJSON_Delete(root);
	if(err && errlen) err[0] = '\0';
	return 0;

error:
	cJSON_Delete(root);
	table_truncate(t, before);
	return rc;
}

