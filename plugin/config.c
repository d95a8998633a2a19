/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Configuration (see config.h): the plugin_opt_* options and the JSON policy
 * file, parsed into one validated struct or refused with a message that names
 * the option, the value and the reason. Only read_file touches the file
 * system; everything else parses strings, so tests need no files. Policies are
 * numbered in the order the options appear in mosquitto.conf: the entries of
 * plugin_opt_policy_file take the place of that option among the
 * plugin_opt_policy lines. That order breaks ties between equally specific
 * filters (policy.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "mosquitto_dlq.h"
#include "topic.h"

#define NACK_WINDOW_MIN_MS 100ull
#define NACK_WINDOW_MAX_MS (7ull * 24 * 60 * 60 * 1000)
#define MAX_PENDING_BYTES_MIN 1024ull
#define POLICY_FILE_MAX_BYTES (64u * 1024 * 1024)

/* Values are quoted in messages, cut to this many bytes so that the reason
 * after them still fits. QFMT takes Q(s) as its three arguments. */
#define QUOTE_MAX 200
#define QFMT "\"%.*s%s\""
#define Q(s) quote_len(s), (s), (strlen(s) > QUOTE_MAX ? "..." : "")

enum number_problem { NUM_OK, NUM_SYNTAX, NUM_NO_UNIT, NUM_BAD_UNIT, NUM_ZERO, NUM_OVERFLOW };

struct unit {
	const char *name;
	uint64_t factor;
};

static const struct unit duration_units[] = {
	{"ms", 1}, {"s", 1000}, {"m", 60 * 1000}, {"h", 60 * 60 * 1000}, {"d", 24 * 60 * 60 * 1000}, {NULL, 0}
};
static const struct unit size_units[] = {
	{"", 1}, {"B", 1}, {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30},
	{"kB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {NULL, 0}
};

static int quote_len(const char *s)
{
	size_t n = strlen(s);

	if(n <= QUOTE_MAX) return (int)n;
	n = QUOTE_MAX;
	while(n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--; /* whole UTF-8 characters */
	return (int)n;
}

/* Writes a message into err; returns how many bytes it holds, so that a
 * caller can write a prefix and let a callee add the reason after it. */
static size_t set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	int n;

	if(err == NULL || errlen == 0) return 0;
	va_start(ap, fmt);
	n = vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	if(n < 0){
		err[0] = '\0';
		return 0;
	}
	return (size_t)n < errlen ? (size_t)n : errlen - 1;
}

static char *dup_range(const char *s, size_t len)
{
	char *d = malloc(len + 1);

	if(d == NULL) return NULL;
	memcpy(d, s, len);
	d[len] = '\0';
	return d;
}

static char *dup_printf(const char *fmt, ...)
{
	va_list ap;
	int n;
	char *s;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if(n < 0) return NULL;
	s = malloc((size_t)n + 1);
	if(s == NULL) return NULL;
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

/* A whole number (ASCII digits, no sign, no space) followed by one of units;
 * the unit "" is only allowed when units lists it. */
static enum number_problem parse_number(const char *s, const struct unit *units, uint64_t *out, const char **unit)
{
	char *end;
	unsigned long long v;

	*unit = "";
	if(s == NULL || s[0] < '0' || s[0] > '9') return NUM_SYNTAX;
	errno = 0;
	v = strtoull(s, &end, 10);
	*unit = end;
	if(errno == ERANGE) return NUM_OVERFLOW;
	for(const struct unit *u = units; u->name; u++){
		if(strcmp(end, u->name)) continue;
		if(v == 0) return NUM_ZERO;
		if(v > UINT64_MAX / u->factor) return NUM_OVERFLOW;
		*out = v * u->factor;
		return NUM_OK;
	}
	return end[0] == '\0' ? NUM_NO_UNIT : NUM_BAD_UNIT;
}

int config__parse_duration_ms(const char *s, uint64_t *out)
{
	const char *unit;

	return parse_number(s, duration_units, out, &unit) == NUM_OK ? 0 : EINVAL;
}

int config__parse_size(const char *s, uint64_t *out)
{
	const char *unit;

	return parse_number(s, size_units, out, &unit) == NUM_OK ? 0 : EINVAL;
}

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
		set_err(err, errlen, "filter " QFMT " is not a valid topic filter: %s", Q(v), topic_problem(v, true));
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
		set_err(err, errlen, "%s " QFMT " is not a valid topic: %s", key, Q(v), topic_problem(v, false));
		return EINVAL;
	}
	if(v[0] == '$'){
		set_err(err, errlen, "%s " QFMT " must not start with '$'", key, Q(v));
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
		set_err(err, errlen, "max_attempts must be an integer from %d to %d, got " QFMT,
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
		token = dup_range(s, len);
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
				set_err(err, errlen, "missing filter: the value starts with " QFMT ", not a topic filter", Q(token));
				goto error;
			}
			rc = set_filter(out, token, err, errlen);
			if(rc) goto error;
			continue;
		}
		if(eq == NULL || eq == token){
			set_err(err, errlen, "expected key=value, got " QFMT, Q(token));
			goto error;
		}
		if(k == 3){
			*eq = '\0';
			set_err(err, errlen, "unknown key " QFMT " (known: max_attempts, dead_letter, retry_to)", Q(token));
			goto error;
		}
		if(seen[k]){
			set_err(err, errlen, "%s given twice", keys[k]);
			goto error;
		}
		seen[k] = true;
		if(eq[1] == '\0'){
			set_err(err, errlen, "%s has an empty value", keys[k]);
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
		set_err(err, errlen, "missing filter: give \"<filter> max_attempts=<n> dead_letter=<topic>\"");
		goto error;
	}
	for(size_t k = 0; k < 2; k++){
		if(!seen[k]){
			set_err(err, errlen, "%s is required", keys[k]);
			goto error;
		}
	}
	free(token);
	return 0;

error:
	if(rc == ENOMEM) set_err(err, errlen, "out of memory");
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
		set_err(err, errlen, "must be an object, got %s", json_type(obj));
		return EINVAL;
	}
	cJSON_ArrayForEach(j, obj){
		k = key_index(keys, 4, j->string, strlen(j->string));
		if(k == 4){
			set_err(err, errlen, "unknown key " QFMT " (known: filter, max_attempts, dead_letter, retry_to)", Q(j->string));
			return EINVAL;
		}
		if(val[k]){
			set_err(err, errlen, "%s given twice", keys[k]);
			return EINVAL;
		}
		val[k] = j;
	}
	for(k = 0; k < 4; k++){
		if(val[k] == NULL && k < 3){
			set_err(err, errlen, "%s is required", keys[k]);
			return EINVAL;
		}
		if(val[k] && k != 1 && !cJSON_IsString(val[k])){
			set_err(err, errlen, "%s must be a string, got %s", keys[k], json_type(val[k]));
			return EINVAL;
		}
	}
	rc = set_filter(p, val[0]->valuestring, err, errlen);
	if(rc) return rc;
	double d = cJSON_IsNumber(val[1]) ? val[1]->valuedouble : 0;
	/* The range test comes first (NaN fails it), so the cast is defined. */
	if(!cJSON_IsNumber(val[1]) || !(d >= DLQ_MAX_ATTEMPTS_MIN && d <= DLQ_MAX_ATTEMPTS_MAX) || (double)(unsigned)d != d){
		if(cJSON_IsNumber(val[1])){
			set_err(err, errlen, "max_attempts must be an integer from %d to %d, got %g", DLQ_MAX_ATTEMPTS_MIN, DLQ_MAX_ATTEMPTS_MAX, d);
		}else{
			set_err(err, errlen, "max_attempts must be an integer from %d to %d, got %s", DLQ_MAX_ATTEMPTS_MIN, DLQ_MAX_ATTEMPTS_MAX, json_type(val[1]));
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
			set_err(err, errlen, "%s: a string holds \\u0000, which no MQTT topic may contain (%s)", source, where(text, k, pos, sizeof(pos)));
			return EINVAL;
		}
		k++; /* the escaped character, perhaps a backslash */
	}
	/* The Opts variant reports where parsing stopped without cJSON's
	 * global error pointer. */
	cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
	if(root == NULL){
		size_t at = (end && end >= text && end <= text + len) ? (size_t)(end - text) : 0;
		set_err(err, errlen, "%s: not valid JSON (%s)", source, where(text, at, pos, sizeof(pos)));
		return EINVAL;
	}
	if(!cJSON_IsObject(root)){
		set_err(err, errlen, "%s: the document must be an object, {\"policies\":[...]}, got %s", source, json_type(root));
		goto error;
	}
	cJSON_ArrayForEach(j, root){
		if(strcmp(j->string, "policies")){
			set_err(err, errlen, "%s: unknown key " QFMT " (known: policies)", source, Q(j->string));
			goto error;
		}
		if(list){
			set_err(err, errlen, "%s: policies given twice", source);
			goto error;
		}
		list = j;
	}
	if(!cJSON_IsArray(list)){
		set_err(err, errlen, "%s: policies must be an array, got %s", source, list ? json_type(list) : "nothing");
		goto error;
	}
	cJSON_ArrayForEach(j, list){
		memset(&p, 0, sizeof(p));
		n = set_err(err, errlen, "%s: policies[%zu]: ", source, i);
		rc = json_policy(j, &p, err ? err + n : NULL, errlen - n);
		if(rc == 0){
			p.source = dup_printf("%s: policies[%zu]", source, i);
			if(p.source == NULL) rc = ENOMEM;
		}
		if(rc == 0) rc = policy__table_add(t, &p);
		if(rc){
			policy__free(&p);
			if(rc == ENOMEM) set_err(err, errlen, "out of memory");
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

/* The whole file into a malloc'd buffer; the only file I/O of the module. */
static int read_file(const char *path, char **text, size_t *len, char *err, size_t errlen)
{
	FILE *fp = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0;
	size_t n = 0;
	int rc = EINVAL;

	if(fp == NULL){
		set_err(err, errlen, "plugin_opt_policy_file " QFMT ": cannot open: %s", Q(path), strerror(errno));
		return EINVAL;
	}
	for(;;){
		if(n > POLICY_FILE_MAX_BYTES){
			set_err(err, errlen, "plugin_opt_policy_file " QFMT ": larger than %u MiB", Q(path), POLICY_FILE_MAX_BYTES >> 20);
			goto error;
		}
		if(n == cap){
			/* One byte past the limit tells a file that is too large. */
			size_t want = cap ? cap * 2 : 4096;
			if(want > POLICY_FILE_MAX_BYTES + 1) want = POLICY_FILE_MAX_BYTES + 1;
			char *b = realloc(buf, want);
			if(b == NULL){
				rc = ENOMEM;
				set_err(err, errlen, "out of memory");
				goto error;
			}
			buf = b;
			cap = want;
		}
		size_t got = fread(buf + n, 1, cap - n, fp);
		if(got == 0) break;
		n += got;
	}
	if(ferror(fp)){
		set_err(err, errlen, "plugin_opt_policy_file " QFMT ": cannot read: %s", Q(path), strerror(errno));
		goto error;
	}
	fclose(fp);
	*text = buf;
	*len = n;
	return 0;

error:
	fclose(fp);
	free(buf);
	return rc;
}

static int add_policy_line(struct dlq_config *c, unsigned number, const char *value, char *err, size_t errlen)
{
	struct dlq_policy p;
	size_t n = set_err(err, errlen, "plugin_opt_policy #%u " QFMT ": ", number, Q(value));
	int rc = config__parse_policy_line(value, &p, err ? err + n : NULL, errlen - n);

	if(rc) return rc;
	p.source = dup_printf("plugin_opt_policy #%u", number);
	if(p.source == NULL || policy__table_add(&c->policies, &p)){
		policy__free(&p);
		set_err(err, errlen, "out of memory");
		return ENOMEM;
	}
	return 0;
}

static int add_policy_file(struct dlq_config *c, const char *path, char *err, size_t errlen)
{
	char *text = NULL;
	size_t len = 0;
	int rc;

	if(path[0] == '\0'){
		set_err(err, errlen, "plugin_opt_policy_file \"\": the path is empty");
		return EINVAL;
	}
	c->policy_file = strdup(path);
	if(c->policy_file == NULL){
		set_err(err, errlen, "out of memory");
		return ENOMEM;
	}
	rc = read_file(path, &text, &len, err, errlen);
	if(rc) return rc;
	size_t n = set_err(err, errlen, "plugin_opt_policy_file: ");
	rc = config__parse_policy_json(text, len, path, &c->policies, err ? err + n : NULL, errlen - n);
	if(rc == ENOMEM) set_err(err, errlen, "out of memory");
	free(text);
	return rc;
}

static int set_nack_window(struct dlq_config *c, const char *v, char *err, size_t errlen)
{
	const char *unit;
	uint64_t ms = 0;
	enum number_problem why = parse_number(v, duration_units, &ms, &unit);

	if(why == NUM_OK && (ms < NACK_WINDOW_MIN_MS || ms > NACK_WINDOW_MAX_MS)) why = NUM_OVERFLOW;
	switch(why){
		case NUM_OK:
			c->nack_window_ms = ms;
			return 0;
		case NUM_NO_UNIT:
			set_err(err, errlen, "plugin_opt_nack_window " QFMT ": a unit is required, e.g. \"%.*ss\" (units: ms, s, m, h, d)",
					Q(v), (int)(unit - v), v);
			break;
		case NUM_BAD_UNIT:
			set_err(err, errlen, "plugin_opt_nack_window " QFMT ": unknown unit " QFMT " (units: ms, s, m, h, d)", Q(v), Q(unit));
			break;
		case NUM_SYNTAX:
			set_err(err, errlen, "plugin_opt_nack_window " QFMT ": expected a whole number and a unit, e.g. \"300s\"", Q(v));
			break;
		default:
			set_err(err, errlen, "plugin_opt_nack_window " QFMT ": must be from 100ms to 7d", Q(v));
			break;
	}
	return EINVAL;
}

static int set_max_pending_bytes(struct dlq_config *c, const char *v, char *err, size_t errlen)
{
	const char *unit;
	uint64_t bytes = 0;

	switch(parse_number(v, size_units, &bytes, &unit)){
		case NUM_OK:
			if(bytes >= MAX_PENDING_BYTES_MIN){
				c->max_pending_bytes = bytes;
				return 0;
			}
			/* fall through */
		case NUM_ZERO:
			set_err(err, errlen, "plugin_opt_max_pending_bytes " QFMT ": must be at least 1KiB (1024 bytes)", Q(v));
			break;
		case NUM_BAD_UNIT:
			set_err(err, errlen, "plugin_opt_max_pending_bytes " QFMT ": unknown unit " QFMT " (units: B, KiB, MiB, GiB, kB, MB, GB)",
					Q(v), Q(unit));
			break;
		case NUM_OVERFLOW:
			set_err(err, errlen, "plugin_opt_max_pending_bytes " QFMT ": too large", Q(v));
			break;
		default:
			set_err(err, errlen, "plugin_opt_max_pending_bytes " QFMT ": expected a whole number of bytes with an optional unit, e.g. \"64MiB\"", Q(v));
			break;
	}
	return EINVAL;
}

int config__parse(const struct dlq_option *opts, size_t count, struct dlq_config *out, char *err, size_t errlen)
{
	struct dlq_config c;
	const char *first_file = NULL;
	const char *first_window = NULL;
	const char *first_bytes = NULL;
	unsigned lines = 0;
	int rc = EINVAL;

	memset(out, 0, sizeof(*out));
	memset(&c, 0, sizeof(c));
	c.nack_window_ms = DLQ_DEFAULT_NACK_WINDOW_MS;
	c.max_pending_bytes = DLQ_DEFAULT_MAX_PENDING_BYTES;
	if(err && errlen) err[0] = '\0';

	for(size_t i = 0; i < count; i++){
		const char *key = opts[i].key ? opts[i].key : "";
		const char *v = opts[i].value ? opts[i].value : "";
		const char **first = NULL;

		if(!strcmp(key, "policy")){
			rc = add_policy_line(&c, ++lines, v, err, errlen);
		}else if(!strcmp(key, "policy_file")){
			if(first_file){
				first = &first_file;
			}else{
				first_file = v;
				rc = add_policy_file(&c, v, err, errlen);
			}
		}else if(!strcmp(key, "nack_window")){
			if(first_window){
				first = &first_window;
			}else{
				first_window = v;
				rc = set_nack_window(&c, v, err, errlen);
			}
		}else if(!strcmp(key, "max_pending_bytes")){
			if(first_bytes){
				first = &first_bytes;
			}else{
				first_bytes = v;
				rc = set_max_pending_bytes(&c, v, err, errlen);
			}
		}else{
			set_err(err, errlen, "unknown option plugin_opt_%.*s%s", Q(key));
			rc = EINVAL;
		}
		if(first){
			set_err(err, errlen, "plugin_opt_%s " QFMT ": given twice (first " QFMT "); it may be given once", key, Q(v), Q(*first));
			rc = EINVAL;
		}
		if(rc) goto error;
	}
	if(c.policies.count == 0){
		set_err(err, errlen, "no policies: give plugin_opt_policy or plugin_opt_policy_file");
		rc = EINVAL;
		goto error;
	}
	rc = policy__table_finish(&c.policies, err, errlen);
	if(rc) goto error;
	*out = c;
	return 0;

error:
	config__free(&c);
	return rc;
}

void config__free(struct dlq_config *c)
{
	if(c == NULL) return;
	policy__table_free(&c->policies);
	free(c->policy_file);
	memset(c, 0, sizeof(*c));
}
