/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Reading the broker's own configuration (see brokerconf.h). Only the keys
 * the plugin needs are looked at; for settings the last occurrence wins, as
 * in Mosquitto, and plugin lines are kept in order. include_dir files are read in name order after the main file,
 * as Mosquitto does.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/brokerconf.h"
#include "util/errtext.h"

/* Handles one line: the two facts, and include_dir (returned in incdir). */
static void scan_line(struct broker_facts *f, char *line, char *incdir, size_t incdir_size)
{
	while(errtext__is_space(*line)) line++;
	if(*line == '#' || *line == '\0') return;
	char *key = line;
	while(*line && !errtext__is_space(*line)) line++;
	if(*line) *line++ = '\0';
	while(errtext__is_space(*line)) line++;
	char *value = line;
	size_t n = strlen(value);
	while(n > 0 && errtext__is_space(value[n - 1])) value[--n] = '\0';

	if(!strcmp(key, "include_dir")){
		if(incdir) snprintf(incdir, incdir_size, "%s", value);
		return;
	}
	if(!strcmp(key, "acl_file")){
		f->acl_file = n > 0;
		return;
	}
	if(!strcmp(key, "plugin") || !strcmp(key, "auth_plugin")){
		if(f->plugin_count < BROKERCONF_MAX_PLUGINS){
			snprintf(f->plugins[f->plugin_count], sizeof(f->plugins[0]), "%s", value);
		}
		f->plugin_count++;
		/* 2.1 deprecates acl_file for its acl-file plugin, which reads
		 * the same file: an ACL source all the same. */
		if(brokerconf__is_acl_file_plugin(value)) f->acl_file = true;
		return;
	}
	if(!strcmp(key, "persistence_location")){
		snprintf(f->persistence_location, sizeof(f->persistence_location), "%s", value);
		return;
	}
	if(!strcmp(key, "persistence_file")){
		snprintf(f->persistence_file, sizeof(f->persistence_file), "%s", value);
		return;
	}
	if(!strcmp(key, "autosave_interval")){
		/* The broker refuses a value that is not a number; a negative
		 * one it treats as "never", as 0. */
		char *end = NULL;
		errno = 0;
		long v = strtol(value, &end, 10);
		if(end != value && errno == 0) f->autosave_interval = v > 0 ? v : 0;
		return;
	}
	/* Booleans are the first word, "true"/"1" or "false"/"0", as
	 * Mosquitto's conf__parse_bool reads them; anything else is left
	 * alone (the broker refuses such a file anyway). */
	char *end = value;
	while(*end && !errtext__is_space(*end)) end++;
	*end = '\0';
	bool on = !strcmp(value, "true") || !strcmp(value, "1");
	bool off = !strcmp(value, "false") || !strcmp(value, "0");
	if(!on && !off) return;
	if(!strcmp(key, "persistence")){
		f->persistence = on;
	}else if(!strcmp(key, "per_listener_settings")){
		f->per_listener_settings = on;
	}else if(!strcmp(key, "queue_qos0_messages")){
		f->queue_qos0_messages = on;
	}
}

/* The broker's defaults for what no line sets. */
static void defaults(struct broker_facts *f)
{
	memset(f, 0, sizeof(*f));
	f->autosave_interval = 1800;
}

static void scan(struct broker_facts *f, char *text, char *incdir, size_t incdir_size)
{
	char *save = NULL;
	for(char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)){
		scan_line(f, line, incdir, incdir_size);
	}
}

void brokerconf__scan_text(struct broker_facts *f, const char *text)
{
	defaults(f);
	char *copy = strdup(text);
	if(copy == NULL) return;
	scan(f, copy, NULL, 0);
	free(copy);
}

/* A whole file, NUL-terminated, and its length (it may hold NULs). */
static char *slurp(const char *path, size_t *len_out)
{
	FILE *fp = fopen(path, "rb");
	if(fp == NULL) return NULL;
	char *buf = NULL;
	size_t len = 0, cap = 0;
	char chunk[4096];
	size_t n;
	while((n = fread(chunk, 1, sizeof(chunk), fp)) > 0){
		if(len + n + 1 > cap){
			cap = (len + n + 1) * 2;
			char *b = realloc(buf, cap);
			if(b == NULL){
				free(buf);
				fclose(fp);
				return NULL;
			}
			buf = b;
		}
		memcpy(buf + len, chunk, n);
		len += n;
	}
	fclose(fp);
	if(buf == NULL) buf = calloc(1, 1);
	else buf[len] = '\0';
	if(len_out) *len_out = len;
	return buf;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/* Mosquitto reads the *.conf files of include_dir. */
static int conf_filter(const struct dirent *e)
{
	size_t n = strlen(e->d_name);
	return n > 5 && !strcmp(e->d_name + n - 5, ".conf");
}

/* The argument after -c or --config-file on the broker's command line. */
static bool config_path(char *out, size_t size)
{
	size_t len = 0;
	char *args = slurp("/proc/self/cmdline", &len);
	if(args == NULL) return false;
	bool found = false;
	for(size_t i = 0; i < len; ){
		const char *arg = args + i;
		size_t n = strlen(arg);
		if((!strcmp(arg, "-c") || !strcmp(arg, "--config-file")) && i + n + 1 < len){
			snprintf(out, size, "%s", args + i + n + 1);
			found = true;
		}
		i += n + 1;
	}
	free(args);
	return found;
}

int brokerconf__plugin_index(const struct broker_facts *f, const char *path)
{
	char want[PATH_MAX], have[PATH_MAX];
	if(path == NULL || realpath(path, want) == NULL) return -1;
	for(unsigned i = 0; i < f->plugin_count && i < BROKERCONF_MAX_PLUGINS; i++){
		if(realpath(f->plugins[i], have) && !strcmp(want, have)) return (int)i;
	}
	return -1;
}

/* The file name of a plugin path. */
static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

bool brokerconf__is_acl_file_plugin(const char *path)
{
	return strstr(base_name(path), "mosquitto_acl_file") != NULL;
}

bool brokerconf__is_password_file_plugin(const char *path)
{
	return strstr(base_name(path), "mosquitto_password_file") != NULL;
}

/* Whether a plugin line other than self's names one of Mosquitto's ACL
 * plugins: dynamic-security (Debian ships it with 2.0 and 2.1) or 2.1's
 * acl-file. */
static bool has_acl_plugin(const struct broker_facts *f, int self)
{
	for(unsigned i = 0; i < f->plugin_count && i < BROKERCONF_MAX_PLUGINS; i++){
		if((int)i == self) continue;
		if(strstr(f->plugins[i], "dynamic_security") || brokerconf__is_acl_file_plugin(f->plugins[i])) return true;
	}
	return false;
}

int brokerconf__check_redelivery(enum dlq_redelivery_mode mode, const struct broker_facts *f, int self,
		char *err, size_t errlen, char *warn, size_t warnlen)
{
	warn[0] = '\0';
	if(mode == DLQ_REDELIVERY_OFF) return 0;
	if(!f->known){
		snprintf(err, errlen, "plugin_opt_redelivery_tracking %s: the broker's configuration file could not be "
				"read, so its other access-control sources are unknown", mode == DLQ_REDELIVERY_ALLOW ? "allow" : "defer");
		return EINVAL;
	}
	unsigned others = f->plugin_count - (self >= 0 ? 1u : 0u);
	if(mode == DLQ_REDELIVERY_ALLOW && (f->acl_file || others)){
		snprintf(err, errlen, "plugin_opt_redelivery_tracking allow would answer every access check before %s%s%s "
				"and so bypass it; use plugin_opt_redelivery_tracking defer (in %s)",
				f->acl_file ? "acl_file" : "", f->acl_file && others ? " and " : "",
				others ? "the other plugins" : "", f->path);
		return EINVAL;
	}
	if(mode == DLQ_REDELIVERY_DEFER && !f->acl_file && others == 0){
		snprintf(err, errlen, "plugin_opt_redelivery_tracking defer leaves every access decision to acl_file or "
				"another plugin, and %s has neither: the broker would deny every publish and subscription; "
				"use plugin_opt_redelivery_tracking allow", f->path);
		return EINVAL;
	}
	if(self > 0){
		snprintf(warn, warnlen, "plugin %s is loaded before this one: it sees every access check first, "
				"and where it answers, redeliveries are not counted (put this plugin's line first)", f->plugins[0]);
	}else if(mode == DLQ_REDELIVERY_DEFER && !f->acl_file && !has_acl_plugin(f, self)){
		snprintf(warn, warnlen, "plugin_opt_redelivery_tracking defer: no acl_file, and no plugin known to answer "
				"access checks (dynamic-security) is loaded after this one; if %s only authenticates, the broker "
				"denies every publish and subscription", f->plugins[self == 0 ? 1 : 0]);
	}else if(self < 0 && others){
		snprintf(warn, warnlen, "this plugin's line was not found in %s: if another plugin is loaded before it "
				"and answers access checks, redeliveries are not counted", f->path);
	}
	return 0;
}

void brokerconf__check_redelivery_v21(const struct broker_facts *f, int self, char *warn, size_t warnlen)
{
	warn[0] = '\0';
	if(self <= 0) return;
	/* Only a plugin loaded before this one that answers access checks
	 * keeps them from it; 2.1's password-file plugin only authenticates. */
	for(int i = 0; i < self && i < BROKERCONF_MAX_PLUGINS; i++){
		if(brokerconf__is_password_file_plugin(f->plugins[i])) continue;
		snprintf(warn, warnlen, "plugin %s is loaded before this one: where it answers an access check, this "
				"plugin does not see it and redeliveries are not counted (put this plugin's line first)",
				f->plugins[i]);
		return;
	}
}

bool brokerconf__db_path(const struct broker_facts *f, char *out, size_t size)
{
	if(!f->persistence) return false;
	const char *file = f->persistence_file[0] ? f->persistence_file : "mosquitto.db";
	int n = f->persistence_location[0] ? snprintf(out, size, "%s/%s", f->persistence_location, file)
			: snprintf(out, size, "%s", file);
	return n > 0 && (size_t)n < size;
}

void brokerconf__read(struct broker_facts *f)
{
	char incdir[4096] = "";
	defaults(f);
	if(!config_path(f->path, sizeof(f->path))) return;
	char *text = slurp(f->path, NULL);
	if(text == NULL) return;
	f->known = true;
	scan(f, text, incdir, sizeof(incdir));
	free(text);
	if(incdir[0] == '\0') return;

	struct dirent **list = NULL;
	int n = scandir(incdir, &list, conf_filter, by_name);
	for(int i = 0; i < n; i++){
		char path[8192];
		snprintf(path, sizeof(path), "%s/%s", incdir, list[i]->d_name);
		char *t = slurp(path, NULL);
		if(t){
			scan(f, t, NULL, 0);
			free(t);
		}
		free(list[i]);
	}
	free(list);
}
