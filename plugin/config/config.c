/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Configuration (see config.h): the plugin_opt_* options and the JSON policy
 * file, parsed into one validated struct or refused with a message that names
 * the option, the value and the reason. Only read_file touches the file
 * system; everything else parses strings, so tests need no files. The
 * policies themselves are parsed in policy_parse.c. Policies are
 * numbered in the order the options appear in mosquitto.conf: the entries of
 * plugin_opt_policy_file take the place of that option among the
 * plugin_opt_policy lines. That order breaks ties between equally specific
 * filters (policy.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "mosquitto_dlq.h"
#include "util/errtext.h"
#include "util/topic.h"
#include "util/units.h"

#define NACK_WINDOW_MIN_MS 100ull
#define NACK_WINDOW_MAX_MS (7ull * 24 * 60 * 60 * 1000)
#define MAX_PENDING_BYTES_MIN 1024ull
#define POLICY_FILE_MAX_BYTES (64u * 1024 * 1024)

/* The whole file into a malloc'd buffer; the only file I/O of the module. */
static int read_file(const char *path, char **text, size_t *len, char *err, size_t errlen)
{
	FILE *fp = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0;
	size_t n = 0;
	int rc = EINVAL;

	if(fp == NULL){
		errtext__set(err, errlen, "plugin_opt_policy_file " QFMT ": cannot open: %s", Q(path), strerror(errno));
		return EINVAL;
	}
	for(;;){
		if(n > POLICY_FILE_MAX_BYTES){
			errtext__set(err, errlen, "plugin_opt_policy_file " QFMT ": larger than %u MiB", Q(path), POLICY_FILE_MAX_BYTES >> 20);
			goto error;
		}
		if(n == cap){
			/* One byte past the limit tells a file that is too large. */
			size_t want = cap ? cap * 2 : 4096;
			if(want > POLICY_FILE_MAX_BYTES + 1) want = POLICY_FILE_MAX_BYTES + 1;
			char *b = realloc(buf, want);
			if(b == NULL){
				rc = ENOMEM;
				errtext__set(err, errlen, "out of memory");
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
		errtext__set(err, errlen, "plugin_opt_policy_file " QFMT ": cannot read: %s", Q(path), strerror(errno));
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
	size_t n = errtext__set(err, errlen, "plugin_opt_policy #%u " QFMT ": ", number, Q(value));
	int rc = policy_parse__line(value, &p, err ? err + n : NULL, errlen - n);

	if(rc) return rc;
	p.source = errtext__dup_printf("plugin_opt_policy #%u", number);
	if(p.source == NULL || policy__table_add(&c->policies, &p)){
		policy__free(&p);
		errtext__set(err, errlen, "out of memory");
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
		errtext__set(err, errlen, "plugin_opt_policy_file \"\": the path is empty");
		return EINVAL;
	}
	c->policy_file = strdup(path);
	if(c->policy_file == NULL){
		errtext__set(err, errlen, "out of memory");
		return ENOMEM;
	}
	rc = read_file(path, &text, &len, err, errlen);
	if(rc) return rc;
	size_t n = errtext__set(err, errlen, "plugin_opt_policy_file: ");
	rc = policy_parse__json(text, len, path, &c->policies, err ? err + n : NULL, errlen - n);
	if(rc == ENOMEM) errtext__set(err, errlen, "out of memory");
	free(text);
	return rc;
}

static int set_nack_window(struct dlq_config *c, const char *v, char *err, size_t errlen)
{
	const char *unit;
	uint64_t ms = 0;
	enum units_problem why = units__duration(v, &ms, &unit);

	if(why == UNITS_OK && (ms < NACK_WINDOW_MIN_MS || ms > NACK_WINDOW_MAX_MS)) why = UNITS_OVERFLOW;
	switch(why){
		case UNITS_OK:
			c->nack_window_ms = ms;
			return 0;
		case UNITS_NO_UNIT:
			errtext__set(err, errlen, "plugin_opt_nack_window " QFMT ": a unit is required, e.g. \"%.*ss\" (units: ms, s, m, h, d)",
					Q(v), (int)(unit - v), v);
			break;
		case UNITS_BAD_UNIT:
			errtext__set(err, errlen, "plugin_opt_nack_window " QFMT ": unknown unit " QFMT " (units: ms, s, m, h, d)", Q(v), Q(unit));
			break;
		case UNITS_SYNTAX:
			errtext__set(err, errlen, "plugin_opt_nack_window " QFMT ": expected a whole number and a unit, e.g. \"300s\"", Q(v));
			break;
		default:
			errtext__set(err, errlen, "plugin_opt_nack_window " QFMT ": must be from 100ms to 7d", Q(v));
			break;
	}
	return EINVAL;
}

/* A size option (plugin_opt_<name>): at least min bytes, or 0 when
 * zero_ok. */
static int parse_size(const char *name, const char *v, uint64_t min, bool zero_ok, uint64_t *out,
		char *err, size_t errlen)
{
	const char *unit;
	uint64_t bytes = 0;

	switch(units__size(v, &bytes, &unit)){
		case UNITS_OK:
			if(bytes >= min){
				*out = bytes;
				return 0;
			}
			/* fall through */
		case UNITS_ZERO:
			if(zero_ok && bytes == 0){
				*out = 0;
				return 0;
			}
			errtext__set(err, errlen, "plugin_opt_%s " QFMT ": must be at least 1KiB (1024 bytes)%s", name, Q(v),
					zero_ok ? ", or 0" : "");
			break;
		case UNITS_BAD_UNIT:
			errtext__set(err, errlen, "plugin_opt_%s " QFMT ": unknown unit " QFMT " (units: B, KiB, MiB, GiB, kB, MB, GB)",
					name, Q(v), Q(unit));
			break;
		case UNITS_OVERFLOW:
			errtext__set(err, errlen, "plugin_opt_%s " QFMT ": too large", name, Q(v));
			break;
		default:
			errtext__set(err, errlen, "plugin_opt_%s " QFMT ": expected a whole number of bytes with an optional unit, e.g. \"64MiB\"",
					name, Q(v));
			break;
	}
	return EINVAL;
}

static int set_max_pending_bytes(struct dlq_config *c, const char *v, char *err, size_t errlen)
{
	return parse_size("max_pending_bytes", v, MAX_PENDING_BYTES_MIN, false, &c->max_pending_bytes, err, errlen);
}

static int set_dead_letter_keep(struct dlq_config *c, const char *v, char *err, size_t errlen)
{
	return parse_size("dead_letter_keep", v, MAX_PENDING_BYTES_MIN, true, &c->dead_letter_keep, err, errlen);
}

static int set_dead_letter_keep_for(struct dlq_config *c, const char *v, char *err, size_t errlen)
{
	return policy_parse__keep_for("plugin_opt_dead_letter_keep_for", v, &c->dead_letter_keep_for_ms, err, errlen);
}

static int set_dead_letter_access(struct dlq_config *c, const char *v, char *err, size_t errlen)
{
	if(!strcmp(v, "check")){
		c->dead_letter_access = DLQ_LETTER_ACCESS_CHECK;
	}else if(!strcmp(v, "control")){
		c->dead_letter_access = DLQ_LETTER_ACCESS_CONTROL;
	}else{
		errtext__set(err, errlen, "plugin_opt_dead_letter_access " QFMT ": expected check or control", Q(v));
		return EINVAL;
	}
	return 0;
}

/* A copy of an option's text into *dst. Returns 0, or ENOMEM (said in err). */
static int dup_text(char **dst, const char *v, char *err, size_t errlen)
{
	*dst = strdup(v);
	if(*dst == NULL){
		errtext__set(err, errlen, "out of memory");
		return ENOMEM;
	}
	return 0;
}

static int set_state_file(struct dlq_config *c, const char *v, char *err, size_t errlen)
{
	if(v[0] == '\0'){
		errtext__set(err, errlen, "plugin_opt_state_file \"\": the path is empty");
		return EINVAL;
	}
	return dup_text(&c->state_file, v, err, errlen);
}

static int set_state_save_interval(struct dlq_config *c, const char *v, char *err, size_t errlen)
{
	if(units__parse_duration_ms(v, &c->state_save_interval_ms)){
		errtext__set(err, errlen, "plugin_opt_state_save_interval " QFMT ": expected a duration with its unit, "
				"e.g. \"60s\" (units: ms, s, m, h, d; at least 1s)", Q(v));
		return EINVAL;
	}
	if(c->state_save_interval_ms < 1000){
		errtext__set(err, errlen, "plugin_opt_state_save_interval " QFMT ": must be at least 1s", Q(v));
		return EINVAL;
	}
	return 0;
}

static int set_bool(bool *dst, const char *key, const char *v, char *err, size_t errlen)
{
	if(!strcmp(v, "true")){
		*dst = true;
	}else if(!strcmp(v, "false")){
		*dst = false;
	}else{
		errtext__set(err, errlen, "plugin_opt_%s " QFMT ": expected true or false", key, Q(v));
		return EINVAL;
	}
	return 0;
}

static int set_state_save_on_change(struct dlq_config *c, const char *v, char *err, size_t errlen)
{
	return set_bool(&c->state_save_on_change, "state_save_on_change", v, err, errlen);
}

/* always (the default), or how long a change may stay written but not
 * synced: the journal is then synced at the first tick after that. */
static int set_state_journal_sync(struct dlq_config *c, const char *v, char *err, size_t errlen)
{
	if(!strcmp(v, "always")){
		c->state_journal_sync_ms = 0;
		return 0;
	}
	if(units__parse_delay_ms(v, &c->state_journal_sync_ms) || c->state_journal_sync_ms < 1
			|| c->state_journal_sync_ms > 10000){
		errtext__set(err, errlen, "plugin_opt_state_journal_sync " QFMT ": expected always (each change synced "
				"before the broker acknowledges it) or a duration from 1ms to 10s, e.g. \"100ms\" (changes "
				"synced together at least that often)", Q(v));
		return EINVAL;
	}
	return 0;
}

static int set_v5_sessions_persist(struct dlq_config *c, const char *v, char *err, size_t errlen)
{
	return set_bool(&c->v5_sessions_persist, "v5_sessions_persist", v, err, errlen);
}

/* A mode option's values, spelled as the option takes them, by mode. */
#define MODE_COUNT(names) (sizeof(names) / sizeof((names)[0]))

static const char *mode_name(const char *const *names, size_t count, unsigned m)
{
	return m < count ? names[m] : "?";
}

/* The mode v names, or -1. */
static int mode_of(const char *const *names, size_t count, const char *v)
{
	for(size_t i = 0; i < count; i++){
		if(!strcmp(v, names[i])) return (int)i;
	}
	return -1;
}

static const char *const redelivery_modes[] = {
	[DLQ_REDELIVERY_OFF] = "off",
	[DLQ_REDELIVERY_DEFER] = "defer",
	[DLQ_REDELIVERY_ALLOW] = "allow",
};

const char *config__redelivery_mode_name(enum dlq_redelivery_mode m)
{
	return mode_name(redelivery_modes, MODE_COUNT(redelivery_modes), (unsigned)m);
}

static int set_redelivery(struct dlq_config *c, const char *v, char *err, size_t errlen)
{
	int m = mode_of(redelivery_modes, MODE_COUNT(redelivery_modes), v);
	if(m >= 0){
		c->redelivery = (enum dlq_redelivery_mode)m;
		return 0;
	}
	errtext__set(err, errlen, "plugin_opt_redelivery_tracking " QFMT ": expected off, defer (access checks go on "
			"to acl_file or a plugin loaded after this one) or allow (a broker with no ACL source)", Q(v));
	return EINVAL;
}

static const char *const delivery_count_modes[] = {
	[DLQ_DELIVERY_COUNT_OFF] = "off",
	[DLQ_DELIVERY_COUNT_ON] = "on",
	[DLQ_DELIVERY_COUNT_ALWAYS] = "always",
};

const char *config__delivery_count_name(enum dlq_delivery_count m)
{
	return mode_name(delivery_count_modes, MODE_COUNT(delivery_count_modes), (unsigned)m);
}

static int set_delivery_count(struct dlq_config *c, const char *v, char *err, size_t errlen)
{
	c->delivery_count_given = true;
	int m = mode_of(delivery_count_modes, MODE_COUNT(delivery_count_modes), v);
	if(m >= 0){
		c->delivery_count = (enum dlq_delivery_count)m;
		return 0;
	}
	errtext__set(err, errlen, "plugin_opt_delivery_count " QFMT ": expected on (every delivery of a tracked message "
			"but a subscriber's first carries its attempt number, Mosquitto 2.1; absent means 1), always (the "
			"first too) or off", Q(v));
	return EINVAL;
}

static int set_sys_interval(struct dlq_config *c, const char *v, char *err, size_t errlen)
{
	if(units__parse_delay_ms(v, &c->sys_interval_ms) || (c->sys_interval_ms && c->sys_interval_ms < 1000)){
		errtext__set(err, errlen, "plugin_opt_sys_interval " QFMT ": expected a duration with its unit of at least 1s, "
				"e.g. \"10s\", or \"0s\" for no $SYS topics", Q(v));
		return EINVAL;
	}
	return 0;
}

/* The name every dead letter carries (dead-letter-broker): one topic
 * level, printable, bounded (topic__broker_name_problem says why). */
static int set_broker_name(struct dlq_config *c, const char *v, char *err, size_t errlen)
{
	const char *why = topic__broker_name_problem(v);
	if(why){
		errtext__set(err, errlen, "plugin_opt_broker_name " QFMT ": %s; a broker's name is 1 to %d bytes of printable "
				"ASCII without space, '/', '+' or '#'", Q(v), why, DLQ_MAX_BROKER_NAME_LEN);
		return EINVAL;
	}
	return dup_text(&c->broker_name, v, err, errlen);
}

int config__name_broker(struct dlq_config *c, const char *host, char *err, size_t errlen)
{
	if(c->broker_name) return 0;
	if(host == NULL){
		errtext__set(err, errlen, "the host name cannot be read, and without plugin_opt_broker_name it is the "
				"broker's name (each dead letter's dead-letter-broker): set plugin_opt_broker_name");
		return EINVAL;
	}
	const char *why = topic__broker_name_problem(host);
	if(why){
		errtext__set(err, errlen, "the host name " QFMT " cannot be the broker's name (each dead letter's "
				"dead-letter-broker, the default of plugin_opt_broker_name): %s; set plugin_opt_broker_name",
				Q(host), why);
		return EINVAL;
	}
	return dup_text(&c->broker_name, host, err, errlen);
}

static int set_redrive_home(struct dlq_config *c, const char *v, char *err, size_t errlen)
{
	return redrive_paths__set_home(&c->redrive, v, err, errlen);
}

static int set_redrive_from(struct dlq_config *c, const char *v, char *err, size_t errlen)
{
	return redrive_paths__set_from(&c->redrive, v, err, errlen);
}

/* The options that may be given once, and what sets each. */
static const struct {
	const char *key;
	int (*set)(struct dlq_config *c, const char *v, char *err, size_t errlen);
} single_options[] = {
	{"policy_file", add_policy_file},
	{"nack_window", set_nack_window},
	{"max_pending_bytes", set_max_pending_bytes},
	{"state_file", set_state_file},
	{"state_save_interval", set_state_save_interval},
	{"state_save_on_change", set_state_save_on_change},
	{"state_journal_sync", set_state_journal_sync},
	{"v5_sessions_persist", set_v5_sessions_persist},
	{"sys_interval", set_sys_interval},
	{"redelivery_tracking", set_redelivery},
	{"delivery_count", set_delivery_count},
	{"dead_letter_keep", set_dead_letter_keep},
	{"dead_letter_keep_for", set_dead_letter_keep_for},
	{"dead_letter_access", set_dead_letter_access},
	{"broker_name", set_broker_name},
	{"redrive_home", set_redrive_home},
	{"redrive_from", set_redrive_from},
};
#define SINGLE_COUNT (sizeof(single_options) / sizeof(single_options[0]))

int config__parse(const struct dlq_option *opts, size_t count, struct dlq_config *out, char *err, size_t errlen)
{
	struct dlq_config c;
	const char *first[SINGLE_COUNT] = {NULL};
	unsigned lines = 0;
	unsigned collect_lines = 0;
	int rc = EINVAL;

	memset(out, 0, sizeof(*out));
	memset(&c, 0, sizeof(c));
	c.nack_window_ms = DLQ_DEFAULT_NACK_WINDOW_MS;
	c.max_pending_bytes = DLQ_DEFAULT_MAX_PENDING_BYTES;
	c.dead_letter_keep = DLQ_DEFAULT_DEAD_LETTER_KEEP;
	c.state_save_interval_ms = DLQ_DEFAULT_STATE_SAVE_INTERVAL_MS;
	c.sys_interval_ms = DLQ_DEFAULT_SYS_INTERVAL_MS;
	c.delivery_count = DLQ_DELIVERY_COUNT_ON;
	if(err && errlen) err[0] = '\0';

	for(size_t i = 0; i < count; i++){
		const char *key = opts[i].key ? opts[i].key : "";
		const char *v = opts[i].value ? opts[i].value : "";

		if(!strcmp(key, "policy")){
			rc = add_policy_line(&c, ++lines, v, err, errlen);
			if(rc) goto error;
			continue;
		}
		if(!strcmp(key, "collect")){
			rc = collect_filters__add(&c.collect, ++collect_lines, v, err, errlen);
			if(rc) goto error;
			continue;
		}
		size_t k = 0;
		while(k < SINGLE_COUNT && strcmp(key, single_options[k].key)) k++;
		if(k == SINGLE_COUNT){
			errtext__set(err, errlen, "unknown option plugin_opt_%.*s%s", Q(key));
			rc = EINVAL;
			goto error;
		}
		if(first[k]){
			errtext__set(err, errlen, "plugin_opt_%s " QFMT ": given twice (first " QFMT "); it may be given once", key, Q(v), Q(first[k]));
			rc = EINVAL;
			goto error;
		}
		first[k] = v;
		rc = single_options[k].set(&c, v, err, errlen);
		if(rc) goto error;
	}
	if(c.state_save_on_change && c.state_file == NULL){
		errtext__set(err, errlen, "plugin_opt_state_save_on_change true needs plugin_opt_state_file");
		rc = EINVAL;
		goto error;
	}
	if(c.state_journal_sync_ms && !c.state_save_on_change){
		errtext__set(err, errlen, "plugin_opt_state_journal_sync needs plugin_opt_state_save_on_change true "
				"(without it there is no journal to sync)");
		rc = EINVAL;
		goto error;
	}
	rc = policy__table_finish(&c.policies, err, errlen);
	if(rc) goto error;
	rc = collect_filters__check(&c.collect, &c.policies, c.dead_letter_keep, err, errlen);
	if(rc) goto error;
	rc = redrive_paths__check(&c.redrive, &c.policies, &c.collect, err, errlen);
	if(rc) goto error;
	*out = c;
	return 0;

error:
	config__free(&c);
	return rc;
}

int config__check_deadlines(const struct dlq_config *c, bool sends_shown, char *err, size_t errlen)
{
	if(sends_shown || c->redelivery != DLQ_REDELIVERY_OFF) return 0;
	for(size_t i = 0; i < c->policies.count; i++){
		const struct dlq_policy *p = &c->policies.items[i];
		if(p->ack_timeout_ms == 0) continue;
		errtext__set(err, errlen, "policy " QFMT " (%s) has ack_timeout=%s, which needs plugin_opt_redelivery_tracking "
				"on Mosquitto 2.0: a 2.0 broker shows a plugin that a message reaches a subscriber only through the "
				"access check redelivery tracking registers, and without it a deadline would run for a message still "
				"queued; add \"plugin_opt_redelivery_tracking defer\" (with an acl_file or an ACL plugin loaded after "
				"this one) or \"plugin_opt_redelivery_tracking allow\" (with no ACL source)",
				Q(p->filter), p->source ? p->source : "policy", p->ack_timeout);
		return EINVAL;
	}
	return 0;
}

bool config__has_deadlines(const struct dlq_config *c)
{
	for(size_t i = 0; i < c->policies.count; i++){
		if(c->policies.items[i].ack_timeout_ms) return true;
	}
	return false;
}

void config__free(struct dlq_config *c)
{
	if(c == NULL) return;
	policy__table_free(&c->policies);
	collect_filters__free(&c->collect);
	redrive_paths__free(&c->redrive);
	free(c->policy_file);
	free(c->state_file);
	free(c->broker_name);
	memset(c, 0, sizeof(*c));
}
