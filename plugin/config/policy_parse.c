/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Parsing policies (see config.h): one plugin_opt_policy line, or a JSON
 * policy document, into struct dlq_policy values, each field checked on its
 * own with a message that says what is wrong. Checks across policies belong
 * to policy__table_finish.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "config/policy_parse.h"
#include "mosquitto_dlq.h"
#include "util/errtext.h"
#include "util/topic.h"
#include "util/units.h"

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

enum policy_key {
	K_MAX_ATTEMPTS, K_DEAD_LETTER, K_RETRY_TO, K_RETRY_DELAY, K_RETRY_BACKOFF, K_RETRY_MAX_DELAY, K_RETRY_JITTER,
	K_DEAD_LETTER_KEEP, K_DEAD_LETTER_KEEP_FOR, K_ACK_TIMEOUT, K_COUNT
};
static const char *const policy_keys[K_COUNT] = {
	"max_attempts", "dead_letter", "retry_to", "retry_delay", "retry_backoff", "retry_max_delay", "retry_jitter",
	"dead_letter_keep", "dead_letter_keep_for", "ack_timeout",
};
#define KNOWN_KEYS "max_attempts, dead_letter, retry_to, retry_delay, retry_backoff, retry_max_delay, retry_jitter, " \
	"dead_letter_keep, dead_letter_keep_for, ack_timeout"

static bool all_digits(const char *v)
{
	return v[0] && strspn(v, "0123456789") == strlen(v);
}

/* retry_delay (zero allowed: "0s") and retry_max_delay: a duration with
 * its unit, never a bare number. */
static int set_delay(uint64_t *dst, const char *key, const char *v, bool zero_ok, char *err, size_t errlen)
{
	size_t digits = strspn(v, "0123456789");
	if(all_digits(v)){
		errtext__set(err, errlen, "%s " QFMT ": a unit is required, e.g. \"%.*ss\" (units: ms, s, m, h, d)",
				key, Q(v), (int)digits, v);
		return EINVAL;
	}
	if((zero_ok ? units__parse_delay_ms(v, dst) : units__parse_duration_ms(v, dst)) == 0) return 0;
	errtext__set(err, errlen, "%s must be a duration with a unit (ms, s, m, h, d) such as \"30s\"%s, got " QFMT,
			key, zero_ok ? " or \"0s\"" : "", Q(v));
	return EINVAL;
}

/* A duration that must have its unit, as ack_timeout and
 * dead_letter_keep_for take it: units__duration's answer, but a bare
 * number is UNITS_NO_UNIT (UNITS_ZERO when it is all zeros), and for that
 * one err says so under key, with the number and example_unit as the
 * example. */
static enum units_problem unit_duration(const char *key, const char *v, char example_unit, uint64_t *ms, char *err,
		size_t errlen)
{
	const char *unit;
	enum units_problem rc = units__duration(v, ms, &unit);
	if(all_digits(v)) rc = strspn(v, "0") == strlen(v) ? UNITS_ZERO : UNITS_NO_UNIT;
	if(rc == UNITS_NO_UNIT){
		errtext__set(err, errlen, "%s " QFMT ": a unit is required, e.g. \"%.*s%c\" (units: ms, s, m, h, d)",
				key, Q(v), (int)strspn(v, "0123456789"), v, example_unit);
	}
	return rc;
}

/* ack_timeout: a duration with its unit, from DLQ_ACK_TIMEOUT_MIN_MS to
 * DLQ_ACK_TIMEOUT_MAX_MS; the text is kept as given, for the reason of the
 * dead letters it makes. No deadline is no ack_timeout, not a zero one. */
static int set_ack_timeout(struct dlq_policy *p, const char *key, const char *v, char *err, size_t errlen)
{
	uint64_t ms = 0;
	enum units_problem rc = unit_duration(key, v, 's', &ms, err, errlen);
	if(rc == UNITS_NO_UNIT) return EINVAL;
	if(rc == UNITS_ZERO){
		errtext__set(err, errlen, "%s " QFMT ": a deadline must be longer than zero (leave %s out for none)",
				key, Q(v), key);
		return EINVAL;
	}
	if(rc != UNITS_OK){
		errtext__set(err, errlen, "%s must be a duration with a unit (ms, s, m, h, d) such as \"30s\", got " QFMT,
				key, Q(v));
		return EINVAL;
	}
	if(ms < DLQ_ACK_TIMEOUT_MIN_MS || ms > DLQ_ACK_TIMEOUT_MAX_MS){
		errtext__set(err, errlen, "%s " QFMT " is out of range: from %dms to %dd", key, Q(v),
				DLQ_ACK_TIMEOUT_MIN_MS, (int)(DLQ_ACK_TIMEOUT_MAX_MS / (24 * 3600 * 1000ull)));
		return EINVAL;
	}
	char *text = strdup(v);
	if(text == NULL) return ENOMEM;
	free(p->ack_timeout);
	p->ack_timeout = text;
	p->ack_timeout_ms = ms;
	return 0;
}

/* A decimal number from lo to hi, as retry_backoff and retry_jitter take. */
static int set_decimal(double *dst, const char *key, double d, double lo, double hi, const char *text, char *err, size_t errlen)
{
	if(!(d >= lo && d <= hi)){
		if(text){
			errtext__set(err, errlen, "%s must be a number from %g to %g, got " QFMT, key, lo, hi, Q(text));
		}else{
			errtext__set(err, errlen, "%s must be a number from %g to %g, got %g", key, lo, hi, d);
		}
		return EINVAL;
	}
	*dst = d;
	return 0;
}

/* Text to a decimal; NaN when it is not a plain decimal number. */
static double parse_decimal(const char *v)
{
	char *end = NULL;
	if(!((v[0] >= '0' && v[0] <= '9') || v[0] == '.')) return NAN;
	errno = 0;
	double d = strtod(v, &end);
	if(end == v || *end != '\0' || errno == ERANGE || strpbrk(v, "xXpPnNiI")) return NAN;
	return d;
}

/* dead_letter_keep: a size with an optional unit, or 0 (keep none). */
static int set_keep(uint64_t *dst, const char *key, const char *v, char *err, size_t errlen)
{
	const char *unit;
	uint64_t bytes = 0;
	enum units_problem rc = units__size(v, &bytes, &unit);
	if(rc == UNITS_OK || rc == UNITS_ZERO){
		*dst = rc == UNITS_OK ? bytes : 0;
		return 0;
	}
	errtext__set(err, errlen, "%s must be a size such as \"16MiB\" (units: B, KiB, MiB, GiB, kB, MB, GB) or 0, got " QFMT,
			key, Q(v));
	return EINVAL;
}

int policy_parse__keep_for(const char *name, const char *v, uint64_t *ms, char *err, size_t errlen)
{
	if(!strcmp(v, DLQ_KEEP_FOR_FOREVER)){
		*ms = 0;
		return 0;
	}
	uint64_t age = 0;
	enum units_problem rc = unit_duration(name, v, 'd', &age, err, errlen);
	if(rc == UNITS_OK && (age < DLQ_KEEP_FOR_MIN_MS || age > DLQ_KEEP_FOR_MAX_MS)) rc = UNITS_OVERFLOW;
	switch(rc){
		case UNITS_OK:
			*ms = age;
			return 0;
		case UNITS_NO_UNIT: /* said by unit_duration */
			break;
		case UNITS_ZERO:
			errtext__set(err, errlen, "%s " QFMT ": an age of zero would keep nothing: give " DLQ_KEEP_FOR_FOREVER
					" for no age bound, or a dead_letter_keep of 0 to keep no letters", name, Q(v));
			break;
		case UNITS_OVERFLOW:
			errtext__set(err, errlen, "%s " QFMT ": out of range: from 1s to %llud, or " DLQ_KEEP_FOR_FOREVER, name, Q(v),
					DLQ_KEEP_FOR_MAX_MS / (24 * 3600 * 1000ull));
			break;
		default:
			errtext__set(err, errlen, "%s " QFMT ": expected a duration with a unit (ms, s, m, h, d) such as \"14d\", "
					"or " DLQ_KEEP_FOR_FOREVER, name, Q(v));
			break;
	}
	return EINVAL;
}

/* One key=value of a policy line, or a string value of the JSON file. */
static int set_key(struct dlq_policy *p, size_t k, const char *v, char *err, size_t errlen)
{
	switch(k){
		case K_MAX_ATTEMPTS:
			return set_max_attempts(p, v, err, errlen);
		case K_DEAD_LETTER:
			return set_target(&p->dead_letter, policy_keys[k], v, err, errlen);
		case K_RETRY_TO:
			return set_target(&p->retry_to, policy_keys[k], v, err, errlen);
		case K_RETRY_DELAY:
			return set_delay(&p->retry_delay_ms, policy_keys[k], v, true, err, errlen);
		case K_RETRY_MAX_DELAY:
			return set_delay(&p->retry_max_delay_ms, policy_keys[k], v, false, err, errlen);
		case K_RETRY_BACKOFF:
			return set_decimal(&p->retry_backoff, policy_keys[k], parse_decimal(v), 1.0, DLQ_RETRY_BACKOFF_MAX, v, err, errlen);
		case K_RETRY_JITTER:
			return set_decimal(&p->retry_jitter, policy_keys[k], parse_decimal(v), 0.0, 1.0, v, err, errlen);
		case K_DEAD_LETTER_KEEP:
			return set_keep(&p->dead_letter_keep, policy_keys[k], v, err, errlen);
		case K_DEAD_LETTER_KEEP_FOR:
			return policy_parse__keep_for(policy_keys[k], v, &p->dead_letter_keep_for_ms, err, errlen);
		case K_ACK_TIMEOUT:
			return set_ack_timeout(p, policy_keys[k], v, err, errlen);
	}
	return EINVAL;
}

/* What the policy's fields say together, once all are set. */
static int check_delays(const struct dlq_policy *p, char *err, size_t errlen)
{
	if(p->retry_delay_ms > p->retry_max_delay_ms){
		errtext__set(err, errlen, "retry_delay (%llu ms) exceeds retry_max_delay (%llu ms%s)",
				(unsigned long long)p->retry_delay_ms, (unsigned long long)p->retry_max_delay_ms,
				p->retry_max_delay_ms == DLQ_DEFAULT_RETRY_MAX_DELAY_MS ? ", the default" : "");
		return EINVAL;
	}
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

/* A policy line's words are apart by spaces and tabs only (the C locale's
 * isblank), narrower than errtext__is_space. */
static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* Messages name the reason only: config__parse puts the option and the
 * value in front. */
int policy_parse__line(const char *line, struct dlq_policy *out, char *err, size_t errlen)
{
	bool seen[K_COUNT] = {false};
	const char *s = line ? line : "";
	char *token = NULL;
	int rc = EINVAL;

	memset(out, 0, sizeof(*out));
	policy__set_defaults(out);
	for(bool first = true; ; first = false){
		while(is_blank(*s)) s++;
		if(*s == '\0') break;
		size_t len = 0;
		while(s[len] && !is_blank(s[len])) len++;
		free(token);
		token = errtext__dup_range(s, len);
		if(token == NULL){
			rc = ENOMEM;
			goto error;
		}
		s += len;
		rc = EINVAL;

		char *eq = strchr(token, '=');
		size_t k = eq ? key_index(policy_keys, K_COUNT, token, (size_t)(eq - token)) : K_COUNT;
		if(first){
			/* '=' is legal in a filter, but a known key first means the
			 * filter was left out. */
			if(k < K_COUNT){
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
		if(k == K_COUNT){
			*eq = '\0';
			errtext__set(err, errlen, "unknown key " QFMT " (known: " KNOWN_KEYS ")", Q(token));
			goto error;
		}
		if(seen[k]){
			errtext__set(err, errlen, "%s given twice", policy_keys[k]);
			goto error;
		}
		seen[k] = true;
		if(eq[1] == '\0'){
			errtext__set(err, errlen, "%s has an empty value", policy_keys[k]);
			goto error;
		}
		rc = set_key(out, k, eq + 1, err, errlen);
		if(rc) goto error;
	}
	rc = EINVAL;
	if(out->filter == NULL){
		errtext__set(err, errlen, "missing filter: give \"<filter> max_attempts=<n> dead_letter=<topic>\"");
		goto error;
	}
	for(size_t k = 0; k < 2; k++){
		if(!seen[k]){
			errtext__set(err, errlen, "%s is required", policy_keys[k]);
			goto error;
		}
	}
	if(check_delays(out, err, errlen)) goto error;
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
 * failure *p may hold strings: the caller frees it. "filter" comes first
 * in the JSON keys, then the policy keys of a line; numbers are JSON numbers,
 * durations strings with their unit. */
static int json_policy(const cJSON *obj, struct dlq_policy *p, char *err, size_t errlen)
{
	const cJSON *filter = NULL;       /* borrowed from the tree */
	const cJSON *val[K_COUNT] = {NULL}; /* borrowed from the tree */
	const cJSON *j;
	int rc;

	if(!cJSON_IsObject(obj)){
		errtext__set(err, errlen, "must be an object, got %s", json_type(obj));
		return EINVAL;
	}
	policy__set_defaults(p);
	cJSON_ArrayForEach(j, obj){
		size_t k = key_index(policy_keys, K_COUNT, j->string, strlen(j->string));
		const cJSON **slot = !strcmp(j->string, "filter") ? &filter : (k < K_COUNT ? &val[k] : NULL);
		if(slot == NULL){
			errtext__set(err, errlen, "unknown key " QFMT " (known: filter, " KNOWN_KEYS ")", Q(j->string));
			return EINVAL;
		}
		if(*slot){
			errtext__set(err, errlen, "%s given twice", j->string);
			return EINVAL;
		}
		*slot = j;
	}
	if(filter == NULL){
		errtext__set(err, errlen, "filter is required");
		return EINVAL;
	}
	for(size_t k = 0; k < 2; k++){
		if(val[k] == NULL){
			errtext__set(err, errlen, "%s is required", policy_keys[k]);
			return EINVAL;
		}
	}
	if(!cJSON_IsString(filter)){
		errtext__set(err, errlen, "filter must be a string, got %s", json_type(filter));
		return EINVAL;
	}
	rc = set_filter(p, filter->valuestring, err, errlen);
	for(size_t k = 0; rc == 0 && k < K_COUNT; k++){
		const cJSON *v = val[k];
		if(v == NULL) continue;
		if(k == K_MAX_ATTEMPTS){
			double d = cJSON_IsNumber(v) ? v->valuedouble : 0;
			/* The range test comes first (NaN fails it), so the cast is defined. */
			if(!cJSON_IsNumber(v) || !(d >= DLQ_MAX_ATTEMPTS_MIN && d <= DLQ_MAX_ATTEMPTS_MAX) || (double)(unsigned)d != d){
				if(cJSON_IsNumber(v)){
					errtext__set(err, errlen, "max_attempts must be an integer from %d to %d, got %g", DLQ_MAX_ATTEMPTS_MIN, DLQ_MAX_ATTEMPTS_MAX, d);
				}else{
					errtext__set(err, errlen, "max_attempts must be an integer from %d to %d, got %s", DLQ_MAX_ATTEMPTS_MIN, DLQ_MAX_ATTEMPTS_MAX, json_type(v));
				}
				return EINVAL;
			}
			p->max_attempts = (unsigned)d;
		}else if(k == K_RETRY_BACKOFF || k == K_RETRY_JITTER){
			if(!cJSON_IsNumber(v)){
				errtext__set(err, errlen, "%s must be a number, got %s", policy_keys[k], json_type(v));
				return EINVAL;
			}
			rc = k == K_RETRY_BACKOFF
					? set_decimal(&p->retry_backoff, policy_keys[k], v->valuedouble, 1.0, DLQ_RETRY_BACKOFF_MAX, NULL, err, errlen)
					: set_decimal(&p->retry_jitter, policy_keys[k], v->valuedouble, 0.0, 1.0, NULL, err, errlen);
		}else if(!cJSON_IsString(v)){
			if(cJSON_IsNumber(v) && (k == K_RETRY_DELAY || k == K_RETRY_MAX_DELAY || k == K_ACK_TIMEOUT
					|| k == K_DEAD_LETTER_KEEP_FOR)){
				errtext__set(err, errlen, "%s must be a string with a unit, e.g. \"30s\", got the number %g", policy_keys[k], v->valuedouble);
			}else{
				errtext__set(err, errlen, "%s must be a string, got %s", policy_keys[k], json_type(v));
			}
			return EINVAL;
		}else{
			rc = set_key(p, k, v->valuestring, err, errlen);
		}
	}
	if(rc == 0) rc = check_delays(p, err, errlen);
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

int policy_parse__json(const char *text, size_t len, const char *source, struct dlq_policy_table *t, char *err, size_t errlen)
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

