/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Reading callgrind's profiles for the callgrind suite (see callgrind.h):
 * the figures of a whole run from `callgrind_annotate --inclusive=yes`
 * (the broker's total and the plugin's callbacks, adapter__*), and the
 * costliest functions of a run collected inside the callbacks only. The
 * host's callgrind_annotate reads profiles written by the 2.1 root's
 * valgrind too: the format is the same, and the function names are in
 * the file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "callgrind.h"

#define TOP_FUNCTIONS 20
#define MAX_CALLBACKS 16

static const char *const fn_names[NFN] = { "PROGRAM TOTALS", "adapter__message", "adapter__control", "adapter__tick",
	NULL };

/* Every adapter__* function seen, each once: callgrind_annotate may list
 * a function twice (with and without its file), with the same cost. */
struct callbacks {
	char name[MAX_CALLBACKS][64];
	double ir[MAX_CALLBACKS];
	int n;
};

static void add_callback(struct callbacks *cb, const char *fn, double v)
{
	size_t len = strcspn(fn, " \n");
	for(int i = 0; i < cb->n; i++){
		if(strlen(cb->name[i]) == len && !strncmp(cb->name[i], fn, len)){
			if(v > cb->ir[i]) cb->ir[i] = v;
			return;
		}
	}
	if(cb->n == MAX_CALLBACKS || len >= sizeof(cb->name[0])) return;
	snprintf(cb->name[cb->n], sizeof(cb->name[0]), "%.*s", (int)len, fn);
	cb->ir[cb->n++] = v;
}

/* The count that starts a callgrind_annotate line ("1,234,567 ..."), in
 * *v, and where the rest of the line starts; false if there is none. */
static bool leading_count(const char *line, double *v, const char **rest)
{
	char digits[64];
	size_t nd = 0;
	const char *s = line;
	while(*s == ' ') s++;
	while((*s >= '0' && *s <= '9') || *s == ','){
		if(*s != ',' && nd < sizeof(digits) - 1) digits[nd++] = *s;
		s++;
	}
	if(nd == 0) return false;
	digits[nd] = '\0';
	*v = strtod(digits, NULL);
	*rest = s;
	return true;
}

/* Parses "1,234,567 (12.3%)  file:function [object]" lines: the named
 * callbacks of enum cg_fn (cg__parse_named). */
void cg__parse(const char *file, double ir[NFN])
{
	memset(ir, 0, sizeof(double) * NFN);
	cg__parse_named(file, &fn_names[FN_MESSAGE], FN_PLUGIN - FN_MESSAGE, &ir[FN_MESSAGE], &ir[FN_TOTAL],
			&ir[FN_PLUGIN]);
}

/* The broker's frames that lead to the callbacks: in an inclusive
 * profile of the callbacks they only repeat the total. */
static bool is_caller_frame(const char *line)
{
	static const char *const frames[] = {
		":(below main)", ":__libc_start_main", ":main ", ":mosquitto_main_loop ", ":mux__handle ",
		":mux_epoll__handle ", ":packet__read ", ":handle__packet ", ":handle__publish ",
		":plugin__handle_message ", ":plugin__handle_tick ", ":control__process ", "ld-linux",
		":handle__accepted_publish ", ":plugin__handle_message_in ", ":plugin__handle_control ",
		/* 2.1's MESSAGE_OUT comes from the send of a queued message. */
		":plugin__handle_message_out ", ":send__publish ", ":db__message_write_inflight_out_latest ",
		":db__message_insert_outgoing ", ":db__message_delete_outgoing ", ":sub__messages_queue ",
		":handle__pubackcomp ",
	};
	/* Any other frame holding the whole count is a caller too (2.1's
	 * stripped broker has unnamed ones): only the callbacks themselves
	 * are shown at 100%. */
	/* Unnamed frames of a stripped broker ("???:0x0000000000046940 [.../mosquitto]")
	 * are callers too: the plugin's functions all have names. */
	if(strstr(line, ":0x") && strstr(line, "/mosquitto]")) return true;
	const char *colon = strstr(line, "(100.0%)") ? strchr(strstr(line, "(100.0%)"), ':') : NULL;
	if(strstr(line, "(100.0%)") && (colon == NULL || strncmp(colon + 1, "adapter__", 9))) return true;
	for(size_t i = 0; i < sizeof(frames) / sizeof(frames[0]); i++){
		if(strstr(line, frames[i])) return true;
	}
	return false;
}

/* The function name of a callgrind_annotate line's "file:function (Nx)
 * [object]" part (the name only) into out; false if there is none. */
static bool line_function(const char *s, char *out, size_t len)
{
	const char *colon = strchr(s, ':');
	if(colon == NULL) return false;
	size_t n = strcspn(colon + 1, " \n");
	if(n == 0 || n >= len) return false;
	snprintf(out, len, "%.*s", (int)n, colon + 1);
	return true;
}

/* The base name of the line's "[object]" (its length in *len), or NULL. */
static const char *line_object(const char *s, size_t *len)
{
	const char *open = strrchr(s, '[');
	if(open == NULL) return NULL;
	size_t n = strcspn(open + 1, "]\n");
	const char *base = open + 1;
	for(const char *q = open + 1; q < open + 1 + n; q++){
		if(*q == '/') base = q + 1;
	}
	*len = (size_t)(open + 1 + n - base);
	return base;
}

static bool is_plugin_line(const char *s)
{
	return strstr(s, "mosquitto_dlq") || strstr(s, "/plugin/");
}

/* Whether the line's object is the broker (its binary, or a library of
 * its own, 2.1's libmosquitto_common): not the plugin, not libc. */
static bool is_broker_line(const char *s)
{
	size_t len;
	const char *base = line_object(s, &len);
	if(base == NULL) return false;
	return (!strncmp(base, "mosquitto", 9) || !strncmp(base, "libmosquitto", 12)) && strncmp(base, "mosquitto_dlq", 13);
}

/* Prints the costliest functions of a profile collected inside the
 * plugin's callbacks only, per unit (message or NACK), inclusive or self.
 * callgrind_annotate may list a function twice (with and without its
 * file); the first, larger, entry is shown. */
void cg__print_profile(const char *file, bool inclusive, double units, const char *unit)
{
	char cmd[512], line[2048];
	char shown_names[TOP_FUNCTIONS][128];
	int shown = 0;
	bool table = false;

	snprintf(cmd, sizeof(cmd), "callgrind_annotate --auto=no --inclusive=%s --threshold=99 '%s' 2>/dev/null",
			inclusive ? "yes" : "no", file);
	FILE *p = popen(cmd, "r");
	if(p == NULL) return;
	printf("\n%s cost per %s inside the plugin's callbacks:\n\n```\n", inclusive ? "Inclusive" : "Self", unit);
	while(fgets(line, sizeof(line), p) && shown < TOP_FUNCTIONS){
		if(strstr(line, "file:function")){
			table = true;
			continue;
		}
		if(!table || line[0] == '-' || line[0] == '\n' || is_caller_frame(line)) continue;
		double v;
		const char *s;
		if(!leading_count(line, &v, &s)) continue;
		/* "(share)  file:function [object]": keep the share, the
		 * function and the object's base name. */
		const char *share = strchr(s, '(');
		const char *close = share ? strchr(share, ')') : NULL;
		char fn[128];
		if(close == NULL || !line_function(close, fn, sizeof(fn))) continue;
		bool seen = false;
		for(int i = 0; i < shown && !seen; i++){
			seen = !strcmp(shown_names[i], fn);
		}
		if(seen) continue;
		snprintf(shown_names[shown++], sizeof(shown_names[0]), "%s", fn);
		char obj[128] = "";
		size_t obj_len;
		const char *base = line_object(close, &obj_len);
		if(base) snprintf(obj, sizeof(obj), " [%.*s]", (int)obj_len, base);
		printf("%9.0f %.*s  %s%s\n", v / units, (int)(close - share + 1), share, fn, obj);
	}
	printf("```\n");
	pclose(p);
}

#define MAX_NAMES 512

struct names {
	char name[MAX_NAMES][96];
	int n;
};

static bool names_has(const struct names *ns, const char *name)
{
	for(int i = 0; i < ns->n; i++){
		if(!strcmp(ns->name[i], name)) return true;
	}
	return false;
}

static void names_add(struct names *ns, const char *name)
{
	if(ns->n < MAX_NAMES && !names_has(ns, name)) snprintf(ns->name[ns->n++], sizeof(ns->name[0]), "%s", name);
}

/* (caller, callee) pairs with their inclusive cost, each once: a function
 * may have two blocks (with and without its file). */
struct calls {
	char caller[MAX_NAMES][96];
	char callee[MAX_NAMES][96];
	double ir[MAX_NAMES];
	int n;
};

static void calls_add(struct calls *c, const char *caller, const char *callee, double v)
{
	for(int i = 0; i < c->n; i++){
		if(!strcmp(c->caller[i], caller) && !strcmp(c->callee[i], callee)){
			if(v > c->ir[i]) c->ir[i] = v;
			return;
		}
	}
	if(c->n == MAX_NAMES) return;
	snprintf(c->caller[c->n], sizeof(c->caller[0]), "%s", caller);
	snprintf(c->callee[c->n], sizeof(c->callee[0]), "%s", callee);
	c->ir[c->n++] = v;
}

int cg__split_broker_calls(const char *file, double *total, struct cg_broker_calls *out)
{
	char cmd[512], line[2048];
	static struct names plugin;
	static struct calls calls;
	memset(out, 0, sizeof(*out));
	plugin.n = 0;
	calls.n = 0;
	*total = 0;
	snprintf(cmd, sizeof(cmd), "callgrind_annotate --auto=no --inclusive=yes --tree=calling --threshold=100 '%s' "
			"2>/dev/null", file);
	/* Two passes over the output: the plugin's functions are known by
	 * any line that names the plugin's object or sources, and callee
	 * lines do not always do so. */
	for(int pass = 0; pass < 2; pass++){
		FILE *p = popen(cmd, "r");
		if(p == NULL) return -1;
		char caller[96] = "";
		bool caller_is_plugin = false;
		while(fgets(line, sizeof(line), p)){
			double v;
			const char *s;
			if(!leading_count(line, &v, &s)) continue;
			if(strstr(s, "PROGRAM TOTALS")){
				*total = v;
				continue;
			}
			const char *close = strchr(s, ')');
			if(close == NULL) continue;
			const char *mark = close + 1;
			while(*mark == ' ') mark++;
			char fn[96];
			if(!line_function(mark, fn, sizeof(fn))) continue;
			if(pass == 0){
				if(is_plugin_line(mark)) names_add(&plugin, fn);
				continue;
			}
			if(*mark == '*'){
				snprintf(caller, sizeof(caller), "%s", fn);
				caller_is_plugin = names_has(&plugin, fn);
			}else if(*mark == '>' && caller_is_plugin && !names_has(&plugin, fn) && is_broker_line(mark)){
				calls_add(&calls, caller, fn, v);
			}
		}
		pclose(p);
	}
	/* By broker function, costliest first (a few). */
	for(int i = 0; i < calls.n; i++){
		out->ir += calls.ir[i];
		int k = 0;
		while(k < out->n && strcmp(out->name[k], calls.callee[i])) k++;
		if(k == out->n){
			if(k == CG_BROKER_CALLS_MAX) continue;
			snprintf(out->name[k], sizeof(out->name[0]), "%s", calls.callee[i]);
			out->n++;
		}
		out->by_name[k] += calls.ir[i];
	}
	for(int i = 1; i < out->n; i++){
		for(int j = i; j > 0 && out->by_name[j] > out->by_name[j - 1]; j--){
			double t = out->by_name[j];
			out->by_name[j] = out->by_name[j - 1];
			out->by_name[j - 1] = t;
			char tmp[96];
			snprintf(tmp, sizeof(tmp), "%s", out->name[j]);
			snprintf(out->name[j], sizeof(out->name[0]), "%s", out->name[j - 1]);
			snprintf(out->name[j - 1], sizeof(out->name[0]), "%s", tmp);
		}
	}
	return *total > 0 ? 0 : -1;
}

void cg__parse_named(const char *file, const char *const *names, int n, double *ir, double *total, double *plugin)
{
	char cmd[512], line[2048];
	struct callbacks cb = { .n = 0 };
	for(int i = 0; i < n; i++) ir[i] = 0;
	*total = 0;
	*plugin = 0;
	snprintf(cmd, sizeof(cmd), "callgrind_annotate --auto=no --inclusive=yes --threshold=100 '%s' 2>/dev/null", file);
	FILE *p = popen(cmd, "r");
	if(p == NULL) return;
	while(fgets(line, sizeof(line), p)){
		double v;
		const char *s;
		if(!leading_count(line, &v, &s)) continue;
		const char *name = strstr(s, "  ");
		if(name == NULL) continue;
		name += 2;
		if(!strncmp(name, fn_names[FN_TOTAL], strlen(fn_names[FN_TOTAL]))){
			*total = v;
			continue;
		}
		const char *colon = strchr(name, ':');
		if(colon == NULL) continue;
		if(!strncmp(colon + 1, "adapter__", 9)) add_callback(&cb, colon + 1, v);
		for(int i = 0; i < n; i++){
			size_t len = strlen(names[i]);
			char after = colon[1 + len];
			/* Listed twice (with and without its file): the same cost. */
			if(!strncmp(colon + 1, names[i], len) && (after == ' ' || after == '\n' || after == '\0') && v > ir[i]){
				ir[i] = v;
			}
		}
	}
	pclose(p);
	for(int i = 0; i < cb.n; i++){
		*plugin += cb.ir[i];
	}
}

/* The name a "fn=" or "cfn=" line gives or refers to ("(12) name" defines
 * 12, "(12)" refers to it; names compressed or not), into out. */
#define CALLS_MAX_IDS 65536
static void line_name(const char *rest, char (*ids)[80], char *out, size_t len)
{
	out[0] = '\0';
	if(*rest != '('){
		snprintf(out, len, "%.*s", (int)strcspn(rest, "\n"), rest);
		return;
	}
	char *end;
	long id = strtol(rest + 1, &end, 10);
	if(*end != ')' || id < 0 || id >= CALLS_MAX_IDS) return;
	const char *name = end + 1;
	while(*name == ' ') name++;
	size_t n = strcspn(name, "\n");
	if(n){
		snprintf(ids[id], sizeof(ids[0]), "%.*s", (int)n, name);
	}
	snprintf(out, len, "%s", ids[id]);
}

long long cg__calls(const char *file, const char *fn)
{
	static char ids[CALLS_MAX_IDS][80];
	char line[2048], callee[80] = "";
	long long calls = -1;
	FILE *f = fopen(file, "r");
	if(f == NULL) return -1;
	memset(ids, 0, sizeof(ids));
	while(fgets(line, sizeof(line), f)){
		if(!strncmp(line, "fn=", 3)){
			char name[80];
			line_name(line + 3, ids, name, sizeof(name));
			callee[0] = '\0';
		}else if(!strncmp(line, "cfn=", 4)){
			line_name(line + 4, ids, callee, sizeof(callee));
		}else if(!strncmp(line, "calls=", 6)){
			if(!strcmp(callee, fn)) calls = (calls < 0 ? 0 : calls) + strtoll(line + 6, NULL, 10);
			callee[0] = '\0';
		}
	}
	fclose(f);
	return calls < 0 ? 0 : calls;
}
