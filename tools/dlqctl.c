/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * dlqctl: the operator's command-line tool for mosquitto-dlq. This file
 * reads the command line (connection options as mosquitto_sub spells them,
 * a subcommand and its options), checks every value before anything
 * connects, and runs the subcommand: status, policies and reset-counters
 * (the plugin's $CONTROL API, cmd_status.c), inspect (cmd_inspect.c),
 * redrive TOPIC (a session on a dead-letter topic, cmd_redrive.c), and
 * list, show, redrive ID..., delete and purge (the plugin's dead-letter
 * store, cmd_store.c; redrive --all, a redrive task, cmd_task.c). redrive
 * is all three: the store's when every argument is a dead-letter id, a task
 * without arguments, the session's otherwise or with --from-topic. Exit
 * status: 0 done, 1 the broker, the plugin or the network did not do what
 * was asked, 2 a wrong command line.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlqctl.h"
#include "mosquitto_dlq.h"

volatile sig_atomic_t dlqctl_stop;

/* Which subcommand takes which option: one bit per option below. */
enum {
	OPT_JSON = 1 << 0,
	OPT_FOLLOW = 1 << 1,
	OPT_MAX = 1 << 2,
	OPT_IDLE = 1 << 3,
	OPT_PERSISTENT = 1 << 4,
	OPT_RATE = 1 << 5,
	OPT_FILTERS = 1 << 6,      /* --reason-contains, --origin */
	OPT_DRY_RUN = 1 << 7,
	OPT_TO_PREFIX = 1 << 8,
	OPT_SESSION = 1 << 9,      /* --session-expiry */
	OPT_ORDER = 1 << 10,
	OPT_LIMIT = 1 << 11,
	OPT_SELECT = 1 << 12,      /* --dead-letter, --reason, --cause, --since, --until, --broker */
	OPT_FILTER = 1 << 13,
	OPT_ALL = 1 << 14,
	OPT_TO = 1 << 15,
	OPT_YES = 1 << 16,
	OPT_FROM_TOPIC = 1 << 17,
	OPT_CANCEL = 1 << 18,      /* --cancel, --task */
};

/* The arguments a command takes after its options. */
enum args {
	ARGS_NONE,
	ARGS_TOPIC,                /* one TOPIC, a topic or filter */
	ARGS_ID,                   /* one dead-letter id */
	ARGS_IDS,                  /* one dead-letter id or more */
};

/* A name may have two forms (redrive): the first whose arguments fit is
 * taken (see pick). */
static const struct {
	const char *name;
	const char *form;          /* how messages name it */
	enum args args;
	unsigned opts;
	int (*run)(const struct dlqctl_opts *o);
} commands[] = {
	{ "status", "status", ARGS_NONE, OPT_JSON, cmd__status },
	{ "policies", "policies", ARGS_NONE, OPT_JSON, cmd__policies },
	{ "reset-counters", "reset-counters", ARGS_NONE, OPT_JSON, cmd__reset_counters },
	{ "brokers", "brokers", ARGS_NONE, OPT_JSON, cmd__brokers },
	{ "list", "list", ARGS_NONE, OPT_JSON | OPT_ORDER | OPT_LIMIT | OPT_SELECT | OPT_FILTER | OPT_ALL, cmd__list },
	{ "show", "show", ARGS_ID, OPT_JSON, cmd__show },
	{ "redrive", "redrive ID...", ARGS_IDS, OPT_JSON | OPT_TO, cmd__store_redrive },
	{ "redrive", "redrive --all", ARGS_NONE, OPT_JSON | OPT_ALL | OPT_SELECT | OPT_FILTER | OPT_RATE | OPT_TO | OPT_CANCEL,
		cmd__redrive_task },
	{ "delete", "delete", ARGS_IDS, OPT_JSON, cmd__delete },
	{ "purge", "purge", ARGS_NONE, OPT_JSON | OPT_FILTER | OPT_ALL | OPT_YES, cmd__purge },
	{ "inspect", "inspect", ARGS_TOPIC, OPT_JSON | OPT_FOLLOW | OPT_MAX | OPT_IDLE | OPT_PERSISTENT | OPT_SESSION,
		cmd__inspect },
	{ "redrive", "redrive TOPIC", ARGS_TOPIC,
		OPT_MAX | OPT_IDLE | OPT_RATE | OPT_FILTERS | OPT_DRY_RUN | OPT_TO_PREFIX | OPT_SESSION | OPT_FROM_TOPIC,
		cmd__redrive },
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: dlqctl [connection options] COMMAND [options] [TOPIC | ID...]\n"
		"\n"
		"Commands:\n"
		"  status                 counters and gauges per policy and in total (getStatus)\n"
		"  policies               the policies in use (listPolicies)\n"
		"  reset-counters         zero the counters (resetCounters)\n"
		"  list                   the dead letters the plugin keeps, newest first (listDeadLetters)\n"
		"  brokers                the kept dead letters by the broker that made them: letters, bytes,\n"
		"                         the newest letter's time (listBrokers)\n"
		"  show ID                one kept dead letter: every field, its properties and its payload\n"
		"                         (getDeadLetter)\n"
		"  redrive ID...          the plugin republishes these kept dead letters to their origin topic\n"
		"                         (or --to TOPIC) and takes them from its store (redriveDeadLetters);\n"
		"                         this form when every argument is a dead-letter id (16 characters of\n"
		"                         base64url, as in the dead-letter-id user property)\n"
		"  redrive --all          a redrive task: the plugin moves every kept letter the selection\n"
		"                         options (those of list) match to its origin topic (or --to TOPIC)\n"
		"                         at --rate letters a second (startRedriveTask); dlqctl follows it\n"
		"                         to its end (a progress bar on a terminal, a line a second\n"
		"                         otherwise); Ctrl-C stops following, not the task\n"
		"  redrive --cancel       cancel the redrive task of --filter FILTER's policy, or --task N\n"
		"                         (cancelRedriveTask)\n"
		"  delete ID...           take these kept dead letters from the store (deleteDeadLetters)\n"
		"  purge                  take every kept dead letter of --filter FILTER's policy, or --all,\n"
		"                         from the store; without --yes only count them (purgeDeadLetters)\n"
		"  inspect TOPIC          print the dead letters that arrive on TOPIC (a topic or filter)\n"
		"  redrive TOPIC          republish the dead letters parked in the redrive session of TOPIC\n"
		"                         to their origin-topic, without the plugin's properties; this form\n"
		"                         when an argument is not a dead-letter id, or with --from-topic\n"
		"\n"
		"Connection options:\n"
		"  -h HOST                broker host (default localhost)\n"
		"  -p PORT                broker port (default 1883)\n"
		"  --unix PATH            connect to the broker's unix socket instead\n"
		"  -i ID                  client id (redrive: its session's id, default dlqctl-redrive-<hash of TOPIC>)\n"
		"  -u USER, -P PASSWORD   username and password\n"
		"  -k SECONDS             keepalive (default 60)\n"
		"  --timeout SECONDS      how long to wait for a reply or an acknowledgement (default 5)\n"
		"\n"
		"Options:\n"
		"  --json                 status, policies, reset-counters, list, brokers, show, redrive ID...,\n"
		"                         delete, purge: print the plugin's data as JSON (list --all, brokers:\n"
		"                         each page's;\n"
		"                         redrive --all: the task when it ends);\n"
		"                         inspect: one JSON object per dead letter and line\n"
		"  --follow               inspect: keep printing until interrupted\n"
		"  --idle SECONDS         inspect, redrive: stop when nothing came for this long (default 1)\n"
		"  --max N                inspect: stop after N letters; redrive: after N redriven\n"
		"                         (redrive --max 0 only opens the session, so that letters park in it)\n"
		"  -c                     inspect: a session that outlives the connection (needs -i);\n"
		"                         the letters printed are consumed from it\n"
		"  --session-expiry SECONDS  inspect -c, redrive: how long the broker keeps the session\n"
		"                         while no one is connected (default 86400)\n"
		"  --rate N               redrive: at most N redriven messages per second; redrive --all:\n"
		"                         the task's rate, a whole number from 1 to 10000 (default 100)\n"
		"  --reason-contains TEXT redrive: only letters whose dead-letter-reason contains TEXT\n"
		"  --origin FILTER        redrive: only letters whose origin-topic matches FILTER\n"
		"                         (letters passed over are put back into their dead-letter topic)\n"
		"  --to-prefix PREFIX     redrive: republish to PREFIX + origin-topic (for bridges)\n"
		"  --dry-run              redrive: print what would be done; publish and acknowledge nothing\n"
		"  --from-topic           redrive: the argument is a dead-letter TOPIC, even if it looks like\n"
		"                         a dead-letter id\n"
		"  --order ORDER          list: newest (the default) or oldest first\n"
		"  --limit N              list: at most N letters, 1 to 100 (default 20; with --all, a page)\n"
		"  --all                  list: every matching letter, page after page;\n"
		"                         purge: every kept letter; redrive: every matching letter (a task)\n"
		"  --filter FILTER        list, purge, redrive --all, redrive --cancel: the letters of the\n"
		"                         policy whose filter is exactly FILTER\n"
		"  --dead-letter TOPIC    list, redrive --all: only the letters of this dead-letter topic\n"
		"  --reason TEXT          list, redrive --all: only the letters whose reason contains TEXT\n"
		"                         (case-sensitive)\n"
		"  --cause CAUSE          list, redrive --all: only the letters of this dead-letter cause,\n"
		"                         one of nack, final,\n"
		"                         ack_timeout, redelivery_limit, subscriber_gone, no_session,\n"
		"                         offline_qos0, restart, unknown\n"
		"  --broker NAME          list, redrive --all: only the letters made by the broker NAME\n"
		"                         (their dead-letter-broker)\n"
		"  --since TIME, --until TIME  list, redrive --all: only the letters made from or until TIME:\n"
		"                         milliseconds\n"
		"                         since the epoch or RFC 3339 UTC (2026-12-02T10:00:00Z)\n"
		"  --to TOPIC             redrive ID..., redrive --all: republish to TOPIC instead of each\n"
		"                         origin topic\n"
		"  --cancel               redrive: cancel a redrive task (of --filter FILTER, or --task N)\n"
		"  --task N               redrive --cancel: the id of the task to cancel\n"
		"  --yes                  purge: purge them (without it purge only counts)\n"
		"  -v                     say more on stderr\n"
		"\n"
		"Exit status: 0 done; 1 the broker, the plugin or the network did not do what was asked;\n"
		"2 a wrong command line.\n");
}

static int bad(const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "dlqctl: ");
	fprintf(stderr, fmt, a, b);
	fprintf(stderr, "\n(dlqctl --help shows the usage)\n");
	return DLQCTL_EXIT_USAGE;
}

static int parse_long(const char *name, const char *v, long min, long max, long *out)
{
	char *end = NULL;
	errno = 0;
	long n = strtol(v, &end, 10);
	if(v[0] == '\0' || *end != '\0' || errno == ERANGE || n < min || n > max){
		char range[64];
		snprintf(range, sizeof(range), "a whole number from %ld to %ld", min, max);
		fprintf(stderr, "dlqctl: %s \"%s\": expected %s\n", name, v, range);
		return DLQCTL_EXIT_USAGE;
	}
	*out = n;
	return 0;
}

static int parse_double(const char *name, const char *v, double min, double max, double *out)
{
	char *end = NULL;
	errno = 0;
	double d = strtod(v, &end);
	if(v[0] == '\0' || *end != '\0' || errno == ERANGE || !isfinite(d) || d < min || d > max){
		fprintf(stderr, "dlqctl: %s \"%s\": expected a number from %g to %g\n", name, v, min, max);
		return DLQCTL_EXIT_USAGE;
	}
	*out = d;
	return 0;
}

/* A time as --since and --until take it: milliseconds since the epoch, or
 * RFC 3339 UTC (letter__parse_time). */
static int parse_time(const char *name, const char *v, int64_t *out)
{
	if(v[0] >= '0' && v[0] <= '9' && strspn(v, "0123456789") == strlen(v)){
		long n;
		int rc = parse_long(name, v, 0, LONG_MAX, &n);
		*out = n;
		return rc;
	}
	*out = letter__parse_time(v);
	if(*out < 0){
		fprintf(stderr, "dlqctl: %s \"%s\": expected milliseconds since the epoch or an RFC 3339 UTC time "
				"(2026-12-02T10:00:00Z, 2026-12-02T10:00:00.250Z)\n", name, v);
		return DLQCTL_EXIT_USAGE;
	}
	return 0;
}

/* The dead-letter causes list --cause may ask for. */
static const char *const causes[] = { DLQ_CAUSE_WORDS };

/* Whether s is one of causes; when not, words gets them all, joined by
 * ", ", for the message. */
static bool is_cause(const char *s, char *words, size_t size)
{
	size_t used = 0;
	for(size_t i = 0; i < sizeof(causes) / sizeof(causes[0]); i++){
		if(!strcmp(s, causes[i])) return true;
		int n = snprintf(words + used, size - used, "%s%s", i ? ", " : "", causes[i]);
		if(n > 0 && (size_t)n < size - used) used += (size_t)n;
	}
	return false;
}

/* A dead-letter id: DLQ_ID_LEN characters of base64url. */
static bool is_id(const char *s)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	return strlen(s) == DLQ_ID_LEN && strspn(s, abc) == DLQ_ID_LEN;
}

/* The entry of the command named name for these arguments: of a name with
 * several forms (redrive), the one without arguments when there are none,
 * the one taking ids when every argument is one (and --from-topic was not
 * given), else the other. -1: no such command. */
static int pick(const char *name, char *const *args, int nargs, bool from_topic)
{
	int found = -1;
	bool ids = nargs > 0 && !from_topic;
	for(int i = 0; i < nargs; i++){
		ids = ids && is_id(args[i]);
	}
	for(size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++){
		if(strcmp(name, commands[i].name)) continue;
		if(found < 0) found = (int)i;
		if(nargs == 0 ? commands[i].args == ARGS_NONE : commands[i].args != ARGS_NONE && ids == (commands[i].args == ARGS_IDS)){
			return (int)i;
		}
	}
	return found;
}

static const char *const option_names[] = {
	"--json", "--follow", "--max", "--idle", "-c", "--rate", "--reason-contains/--origin", "--dry-run",
	"--to-prefix", "--session-expiry", "--order", "--limit", "--dead-letter/--reason/--cause/--since/--until/--broker",
	"--filter", "--all", "--to", "--yes", "--from-topic", "--cancel/--task",
};

enum { L_UNIX = 256, L_JSON, L_FOLLOW, L_DRY_RUN, L_MAX, L_RATE, L_IDLE, L_REASON, L_ORIGIN,
	L_TO_PREFIX, L_TIMEOUT, L_SESSION_EXPIRY, L_HELP, L_ORDER, L_LIMIT, L_ALL, L_FILTER, L_DEAD_LETTER,
	L_LIST_REASON, L_CAUSE, L_SINCE, L_UNTIL, L_TO, L_YES, L_FROM_TOPIC, L_CANCEL, L_TASK, L_BROKER };
static const struct option longopts[] = {
	{"unix", required_argument, NULL, L_UNIX},
	{"json", no_argument, NULL, L_JSON},
	{"follow", no_argument, NULL, L_FOLLOW},
	{"dry-run", no_argument, NULL, L_DRY_RUN},
	{"max", required_argument, NULL, L_MAX},
	{"rate", required_argument, NULL, L_RATE},
	{"idle", required_argument, NULL, L_IDLE},
	{"reason-contains", required_argument, NULL, L_REASON},
	{"origin", required_argument, NULL, L_ORIGIN},
	{"to-prefix", required_argument, NULL, L_TO_PREFIX},
	{"timeout", required_argument, NULL, L_TIMEOUT},
	{"session-expiry", required_argument, NULL, L_SESSION_EXPIRY},
	{"help", no_argument, NULL, L_HELP},
	{"order", required_argument, NULL, L_ORDER},
	{"limit", required_argument, NULL, L_LIMIT},
	{"all", no_argument, NULL, L_ALL},
	{"filter", required_argument, NULL, L_FILTER},
	{"dead-letter", required_argument, NULL, L_DEAD_LETTER},
	{"reason", required_argument, NULL, L_LIST_REASON},
	{"cause", required_argument, NULL, L_CAUSE},
	{"broker", required_argument, NULL, L_BROKER},
	{"since", required_argument, NULL, L_SINCE},
	{"until", required_argument, NULL, L_UNTIL},
	{"to", required_argument, NULL, L_TO},
	{"yes", no_argument, NULL, L_YES},
	{"from-topic", no_argument, NULL, L_FROM_TOPIC},
	{"cancel", no_argument, NULL, L_CANCEL},
	{"task", required_argument, NULL, L_TASK},
	{NULL, 0, NULL, 0},
};

/* The short options that take a value (as the optstring of parse says). */
#define SHORT_WITH_VALUE "hpiuPk"
#define SHORT_FLAGS "cv"

/* Whether getopt takes the argument after arg as arg's value. */
static bool takes_value(const char *arg)
{
	if(arg[0] != '-' || arg[1] == '\0') return false;
	if(arg[1] != '-'){
		for(const char *c = arg + 1; *c; c++){
			if(strchr(SHORT_WITH_VALUE, *c)) return c[1] == '\0';
			if(!strchr(SHORT_FLAGS, *c)) return false;
		}
		return false;
	}
	if(strchr(arg, '=') || arg[2] == '\0') return false;
	bool any = false;
	for(const struct option *l = longopts; l->name; l++){
		if(strncmp(l->name, arg + 2, strlen(arg + 2))) continue;
		if(!strcmp(l->name, arg + 2)) return l->has_arg == required_argument;
		if(l->has_arg != required_argument) return false;
		any = true;
	}
	return any;
}

/* Whether getopt would take arg for one of the long options (its name or
 * an abbreviation of it). */
static bool long_option(const char *arg)
{
	size_t n = strcspn(arg + 2, "=");
	for(const struct option *l = longopts; arg[0] == '-' && arg[1] == '-' && n && l->name; l++){
		if(!strncmp(l->name, arg + 2, n)) return true;
	}
	return false;
}

/* Dead-letter ids are base64url, and one in 64 starts with '-': getopt
 * would read it as options ("-hq3x..." as a host). So every argument
 * before "--" that is an id starting with '-', and neither an option's
 * value nor a long option, is moved behind a "--" at the end, where getopt
 * leaves it an argument, in the same order. Returns the new argv (the
 * caller's to free; its strings are argv's) and its length in *nargc, or
 * NULL when out of memory. */
static char **ids_last(int argc, char **argv, int *nargc)
{
	char **out = malloc(((size_t)argc + 2) * sizeof(*out));
	char **moved = malloc(((size_t)argc + 1) * sizeof(*moved));
	int n = 0, m = 0, i = 1;
	if(out == NULL || moved == NULL){
		free(out);
		free(moved);
		return NULL;
	}
	out[n++] = argv[0];
	for(; i < argc && strcmp(argv[i], "--"); i++){
		bool value = i > 1 && takes_value(argv[i - 1]);
		if(!value && argv[i][0] == '-' && is_id(argv[i]) && !long_option(argv[i])){
			moved[m++] = argv[i];
		}else{
			out[n++] = argv[i];
		}
	}
	if(i < argc) i++; /* the "--" */
	if(m || i < argc) out[n++] = "--";
	for(int k = 0; k < m; k++){
		out[n++] = moved[k];
	}
	for(; i < argc; i++){
		out[n++] = argv[i];
	}
	out[n] = NULL;
	free(moved);
	*nargc = n;
	return out;
}

/* What redrive --all and redrive --cancel need (used: the option bits
 * given). Returns 0 or DLQCTL_EXIT_USAGE. */
static int check_task(const struct dlqctl_opts *o, unsigned used)
{
	if(!o->all && !o->cancel){
		return bad("redrive needs a TOPIC, the ids of kept dead letters, or --all (a redrive task of every letter "
				"the selection options match)%s%s", "", "");
	}
	if(o->cancel){
		if(o->all || (used & (OPT_SELECT | OPT_RATE | OPT_TO))){
			return bad("redrive --cancel takes --filter FILTER or --task N, and no other selection%s%s", "", "");
		}
		if(!o->policy_filter == !o->task_id){
			return bad("redrive --cancel takes --filter FILTER (the policy of the running task) or --task N, "
					"one of them%s%s", "", "");
		}
	}else if(o->task_id){
		return bad("--task goes with --cancel%s%s", "", "");
	}
	if((used & OPT_RATE) && (o->rate != floor(o->rate) || o->rate < 1 || o->rate > DLQ_REDRIVE_RATE_MAX)){
		char range[64];
		snprintf(range, sizeof(range), "from 1 to %d (default %d)", DLQ_REDRIVE_RATE_MAX, DLQ_REDRIVE_RATE_DEFAULT);
		return bad("--rate for redrive --all: a whole number of letters a second %s%s", range, "");
	}
	return 0;
}

/* Parses argv into o and picks the command (*which). Returns 0 or an exit
 * status (help: DLQCTL_EXIT_OK with *which -1). */
static int parse(int argc, char **argv, struct dlqctl_opts *o, int *which)
{
	unsigned used = 0;
	const char *order = NULL; /* checked once it is known to apply */
	long n;
	int c;

	*which = -1;
	opterr = 0;
	while((c = getopt_long(argc, argv, ":h:p:i:u:P:k:" SHORT_FLAGS, longopts, NULL)) != -1){
		int rc = 0;
		switch(c){
			case 'h': o->host = optarg; break;
			case 'p': rc = parse_long("-p", optarg, 1, 65535, &n); o->port = (int)n; break;
			case 'i': o->id = optarg; break;
			case 'u': o->username = optarg; break;
			case 'P': o->password = optarg; break;
			case 'k': rc = parse_long("-k", optarg, 5, 65535, &n); o->keepalive = (int)n; break;
			case 'c': o->persistent = true; used |= OPT_PERSISTENT; break;
			case 'v': o->verbose = true; break;
			case L_UNIX: o->unix_path = optarg; break;
			case L_JSON: o->json = true; used |= OPT_JSON; break;
			case L_FOLLOW: o->follow = true; used |= OPT_FOLLOW; break;
			case L_DRY_RUN: o->dry_run = true; used |= OPT_DRY_RUN; break;
			case L_MAX: rc = parse_long("--max", optarg, 0, LONG_MAX, &o->max); used |= OPT_MAX; break;
			case L_RATE: rc = parse_double("--rate", optarg, 0.001, 1e6, &o->rate); used |= OPT_RATE; break;
			case L_IDLE: rc = parse_double("--idle", optarg, 0.01, 86400, &o->idle_s); used |= OPT_IDLE; break;
			case L_REASON: o->reason_contains = optarg; used |= OPT_FILTERS; break;
			case L_ORIGIN: o->origin_filter = optarg; used |= OPT_FILTERS; break;
			case L_TO_PREFIX: o->to_prefix = optarg; used |= OPT_TO_PREFIX; break;
			case L_TIMEOUT: rc = parse_double("--timeout", optarg, 0.1, 3600, &o->timeout_s); break;
			case L_SESSION_EXPIRY:
				rc = parse_long("--session-expiry", optarg, 1, (long)UINT32_MAX, &n);
				o->session_expiry_s = (uint32_t)n;
				used |= OPT_SESSION;
				break;
			case L_ORDER: order = optarg; used |= OPT_ORDER; break;
			case L_LIMIT: rc = parse_long("--limit", optarg, 1, DLQ_MAX_LIST_LIMIT, &o->limit); used |= OPT_LIMIT; break;
			case L_ALL: o->all = true; used |= OPT_ALL; break;
			case L_FILTER: o->policy_filter = optarg; used |= OPT_FILTER; break;
			case L_DEAD_LETTER: o->dead_letter = optarg; used |= OPT_SELECT; break;
			case L_LIST_REASON: o->reason = optarg; used |= OPT_SELECT; break;
			case L_CAUSE: o->cause = optarg; used |= OPT_SELECT; break;
			case L_BROKER: o->broker = optarg; used |= OPT_SELECT; break;
			case L_SINCE: rc = parse_time("--since", optarg, &o->since_ms); o->has_since = true; used |= OPT_SELECT; break;
			case L_UNTIL: rc = parse_time("--until", optarg, &o->until_ms); o->has_until = true; used |= OPT_SELECT; break;
			case L_TO: o->to = optarg; used |= OPT_TO; break;
			case L_YES: o->yes = true; used |= OPT_YES; break;
			case L_FROM_TOPIC: o->from_topic = true; used |= OPT_FROM_TOPIC; break;
			case L_CANCEL: o->cancel = true; used |= OPT_CANCEL; break;
			case L_TASK: rc = parse_long("--task", optarg, 1, LONG_MAX, &o->task_id); used |= OPT_CANCEL; break;
			case L_HELP:
				usage(stdout);
				return DLQCTL_EXIT_OK;
			case ':':
				return bad("option %s needs a value%s", argv[optind - 1], "");
			default:
				return bad("unknown option %s%s", argv[optind - 1], "");
		}
		if(rc) return rc;
	}
	if(optind >= argc) return bad("no command given%s%s", "", "");
	o->command = argv[optind++];
	*which = pick(o->command, argv + optind, argc - optind, o->from_topic);
	if(*which < 0) return bad("unknown command \"%s\"%s", o->command, "");
	bool two_forms = !strcmp(o->command, "redrive");
	switch(commands[*which].args){
		case ARGS_NONE:
			break;
		case ARGS_TOPIC:
			if(optind >= argc){
				return bad(two_forms ? "%s needs a TOPIC, or the ids of kept dead letters%s" : "%s needs a TOPIC%s",
						o->command, "");
			}
			if(two_forms && argc - optind > 1){
				for(int i = optind; i < argc; i++){
					if(!is_id(argv[i])){
						return bad("redrive takes one TOPIC, or dead-letter ids: \"%s\" is not a dead-letter id "
								"(16 characters of base64url)%s", argv[i], "");
					}
				}
				return bad("redrive --from-topic takes one TOPIC%s%s", "", "");
			}
			o->topic = argv[optind++];
			if(mosquitto_sub_topic_check(o->topic) != MOSQ_ERR_SUCCESS){
				return bad("\"%s\" is not a valid topic or topic filter%s", o->topic, "");
			}
			break;
		case ARGS_ID:
		case ARGS_IDS:
			if(optind >= argc) return bad("%s needs the id of a kept dead letter%s", o->command, "");
			if(commands[*which].args == ARGS_ID && argc - optind > 1){
				return bad("%s takes one id%s", o->command, "");
			}
			for(int i = optind; i < argc; i++){
				if(!is_id(argv[i])){
					return bad("\"%s\" is not a dead-letter id (16 characters of base64url, as in the "
							"dead-letter-id user property)%s", argv[i], "");
				}
			}
			o->ids = argv + optind;
			o->nids = (size_t)(argc - optind);
			optind = argc;
			break;
	}
	if(optind < argc) return bad("unexpected argument \"%s\"%s", argv[optind], "");
	unsigned wrong = used & ~commands[*which].opts;
	for(size_t i = 0; wrong && i < sizeof(option_names) / sizeof(option_names[0]); i++){
		if(wrong & (1u << i)) return bad("%s does not apply to %s", option_names[i], commands[*which].form);
	}
	if(o->password && !o->username) return bad("-P needs -u%s%s", "", "");
	if(o->persistent && !o->id) return bad("-c needs -i: a session is found again by its client id%s%s", "", "");
	if(o->origin_filter && mosquitto_sub_topic_check(o->origin_filter) != MOSQ_ERR_SUCCESS){
		return bad("--origin \"%s\" is not a valid topic filter%s", o->origin_filter, "");
	}
	if(o->to_prefix && strpbrk(o->to_prefix, "+#")){
		return bad("--to-prefix \"%s\" may not contain + or #%s", o->to_prefix, "");
	}
	if(o->follow && (used & OPT_MAX)) return bad("--follow and --max do not go together%s%s", "", "");
	if(order && strcmp(order, "newest") && strcmp(order, "oldest")){
		return bad("--order \"%s\": expected newest or oldest%s", order, "");
	}
	o->oldest = order && !strcmp(order, "oldest");
	if(o->policy_filter && mosquitto_sub_topic_check(o->policy_filter) != MOSQ_ERR_SUCCESS){
		return bad("--filter \"%s\" is not a valid topic filter%s", o->policy_filter, "");
	}
	if(o->dead_letter && mosquitto_pub_topic_check(o->dead_letter) != MOSQ_ERR_SUCCESS){
		return bad("--dead-letter \"%s\" is not a topic name (no + or #)%s", o->dead_letter, "");
	}
	char words[160] = "";
	if(o->cause && !is_cause(o->cause, words, sizeof(words))){
		return bad("--cause \"%s\": expected one of %s", o->cause, words);
	}
	if(o->to && mosquitto_pub_topic_check(o->to) != MOSQ_ERR_SUCCESS){
		return bad("--to \"%s\" is not a topic name (no + or #)%s", o->to, "");
	}
	if(o->has_since && o->has_until && o->since_ms > o->until_ms){
		return bad("--since is later than --until%s%s", "", "");
	}
	if(commands[*which].run == cmd__redrive_task){
		int trc = check_task(o, used);
		if(trc) return trc;
	}
	if(!strcmp(o->command, "purge") && !o->policy_filter == !o->all){
		return bad("purge takes --filter FILTER (a policy's filter) or --all, one of them%s%s", "", "");
	}
	return 0;
}

static void on_signal(int sig)
{
	(void)sig;
	dlqctl_stop = 1;
}

int main(int argc, char **argv)
{
	struct dlqctl_opts o = {
		.host = "localhost",
		.port = 1883,
		.keepalive = 60,
		.timeout_s = 5,
		.max = -1,
		.idle_s = 1,
		.session_expiry_s = DLQCTL_DEFAULT_SESSION_EXPIRY_S,
	};
	int which, nargc;
	char **args = ids_last(argc, argv, &nargc);
	if(args == NULL){
		fprintf(stderr, "dlqctl: out of memory\n");
		return DLQCTL_EXIT_FAIL;
	}
	int rc = parse(nargc, args, &o, &which);
	if(rc || which < 0){
		free(args);
		return rc;
	}

	/* No SA_RESTART: a signal ends the wait in poll() at once. */
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* Rows must reach a pipe as they are printed. */
	setvbuf(stdout, NULL, _IOLBF, 0);

	mosquitto_lib_init();
	rc = commands[which].run(&o);
	mosquitto_lib_cleanup();
	free(args);
	return rc;
}
