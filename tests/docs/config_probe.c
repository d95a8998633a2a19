/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * config_probe: the plugin's own configuration parser (config__parse), run
 * on the plugin_opt_ lines of standard input, for tests/docs/check_man.py,
 * which checks the man page's options, defaults and examples with it
 * instead of reading them out of the C source. A line is
 * "plugin_opt_KEY VALUE" as in mosquitto.conf; blank lines and lines
 * starting with '#' are skipped. When the parser accepts the lines, it
 * prints one line per setting, "option KEY VALUE" (durations in ms, sizes
 * in bytes, "-" for a path not given), then one per policy, its fields as
 * KEY=VALUE separated by tabs (a filter may hold spaces), the keys named as
 * the options and policy keys are. When it refuses them it prints
 * "refused: " and the parser's message.
 * Exit status: 0 accepted, 1 refused, 2 an input line that is not an
 * option, or out of memory.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

#define PREFIX "plugin_opt_"

static const char *or_dash(const char *s)
{
	return s ? s : "-";
}

static const char *yes_no(bool b, const char *yes, const char *no)
{
	return b ? yes : no;
}

static void print_config(const struct dlq_config *c)
{
	printf("option policy_file %s\n", or_dash(c->policy_file));
	printf("option nack_window %llu\n", (unsigned long long)c->nack_window_ms);
	printf("option max_pending_bytes %llu\n", (unsigned long long)c->max_pending_bytes);
	printf("option state_file %s\n", or_dash(c->state_file));
	printf("option state_save_interval %llu\n", (unsigned long long)c->state_save_interval_ms);
	printf("option state_save_on_change %s\n", yes_no(c->state_save_on_change, "true", "false"));
	if(c->state_journal_sync_ms) printf("option state_journal_sync %llu\n", (unsigned long long)c->state_journal_sync_ms);
	else printf("option state_journal_sync always\n");
	printf("option sys_interval %llu\n", (unsigned long long)c->sys_interval_ms);
	printf("option v5_sessions_persist %s\n", yes_no(c->v5_sessions_persist, "true", "false"));
	printf("option redelivery_tracking %s\n", config__redelivery_mode_name(c->redelivery));
	printf("option delivery_count %s\n", yes_no(c->delivery_count, "on", "off"));
	printf("option dead_letter_keep %llu\n", (unsigned long long)c->dead_letter_keep);
	if(c->dead_letter_keep_for_ms) printf("option dead_letter_keep_for %llu\n", (unsigned long long)c->dead_letter_keep_for_ms);
	else printf("option dead_letter_keep_for forever\n");
	printf("option dead_letter_access %s\n", c->dead_letter_access == DLQ_LETTER_ACCESS_CONTROL ? "control" : "check");
	/* "-": not given, the host name at start (config__name_broker). */
	printf("option broker_name %s\n", or_dash(c->broker_name));
	/* One line of the filters, "-" for none (the default). */
	printf("option collect ");
	for(size_t i = 0; i < c->collect.count; i++) printf("%s%s", i ? " " : "", c->collect.items[i]);
	printf("%s\n", c->collect.count ? "" : "-");
	printf("option redrive_home %s\n", or_dash(c->redrive.home));
	if(c->redrive.from_topic) printf("option redrive_from %s %s\n", c->redrive.from_topic, c->redrive.from_client);
	else printf("option redrive_from -\n");
	for(size_t i = 0; i < c->policies.count; i++){
		const struct dlq_policy *p = &c->policies.items[i];
		char keep[24] = "none";
		if(p->dead_letter_keep != DLQ_KEEP_UNSET) snprintf(keep, sizeof(keep), "%llu", (unsigned long long)p->dead_letter_keep);
		char keep_for[24] = "none";
		if(p->dead_letter_keep_for_ms == 0){
			snprintf(keep_for, sizeof(keep_for), "forever");
		}else if(p->dead_letter_keep_for_ms != DLQ_KEEP_FOR_UNSET){
			snprintf(keep_for, sizeof(keep_for), "%llu", (unsigned long long)p->dead_letter_keep_for_ms);
		}
		char ack[24] = "none";
		if(p->ack_timeout_ms) snprintf(ack, sizeof(ack), "%llu", (unsigned long long)p->ack_timeout_ms);
		printf("policy filter=%s\tmax_attempts=%u\tdead_letter=%s\tretry_to=%s\tretry_delay=%llu\t"
				"retry_backoff=%.17g\tretry_max_delay=%llu\tretry_jitter=%.17g\tdead_letter_keep=%s\t"
				"dead_letter_keep_for=%s\tack_timeout=%s\n",
				p->filter, p->max_attempts, p->dead_letter, p->retry_to ? p->retry_to : "delivery",
				(unsigned long long)p->retry_delay_ms, p->retry_backoff,
				(unsigned long long)p->retry_max_delay_ms, p->retry_jitter, keep, keep_for, ack);
	}
}

/* Splits a line as mosquitto.conf does a plugin_opt_ line: the key up to
 * the first blank, the value after the blanks that follow, trailing blanks
 * dropped. The strings point into line. Returns 0, or -1 if it is no
 * option line. */
static int split(char *line, struct dlq_option *o)
{
	size_t n = strlen(line);

	while(n && strchr(" \t\r\n", line[n - 1])) line[--n] = '\0';
	if(strncmp(line, PREFIX, strlen(PREFIX))) return -1;
	char *key = line + strlen(PREFIX);
	char *v = key + strcspn(key, " \t");
	if(*v){
		*v++ = '\0';
		v += strspn(v, " \t");
	}
	o->key = key;
	o->value = v;
	return 0;
}

int main(void)
{
	struct dlq_option *opts = NULL;
	char **lines = NULL;
	size_t count = 0;
	char *line = NULL;
	size_t cap = 0;
	int ret = 2;

	while(getline(&line, &cap, stdin) != -1){
		if(line[strspn(line, " \t\r\n")] == '\0' || line[0] == '#') continue;
		struct dlq_option *o = realloc(opts, (count + 1) * sizeof(*opts));
		char **l = o ? realloc(lines, (count + 1) * sizeof(*lines)) : NULL;
		if(o) opts = o;
		if(l) lines = l;
		if(o == NULL || l == NULL || (lines[count] = strdup(line)) == NULL){
			fprintf(stderr, "config_probe: out of memory\n");
			goto out;
		}
		count++;
		if(split(lines[count - 1], &opts[count - 1])){
			fprintf(stderr, "config_probe: not a plugin_opt_ line: %s", line);
			goto out;
		}
	}

	struct dlq_config c;
	char err[1024];
	int rc = config__parse(opts, count, &c, err, sizeof(err));
	if(rc == 0){
		print_config(&c);
		config__free(&c);
		ret = 0;
	}else if(rc == EINVAL){
		printf("refused: %s\n", err);
		ret = 1;
	}else{
		fprintf(stderr, "config_probe: %s\n", err);
	}
out:
	for(size_t i = 0; i < count; i++) free(lines[i]);
	free(lines);
	free(opts);
	free(line);
	return ret;
}
