/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * dlqctl: the operator's command-line tool for mosquitto-dlq. This file
 * reads the command line (connection options as mosquitto_sub spells them,
 * a subcommand and its options), checks every value before anything
 * connects, and runs the subcommand: status, policies and reset-counters
 * (the plugin's $CONTROL API, cmd_status.c), inspect (cmd_inspect.c) and
 * redrive (cmd_redrive.c). Exit status: 0 done, 1 the broker, the plugin or
 * the network did not do what was asked, 2 a wrong command line.
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
};

static const struct {
	const char *name;
	bool topic;                /* takes TOPIC */
	unsigned opts;
	int (*run)(const struct dlqctl_opts *o);
} commands[] = {
	{ "status", false, OPT_JSON, cmd__status },
	{ "policies", false, OPT_JSON, cmd__policies },
	{ "reset-counters", false, OPT_JSON, cmd__reset_counters },
	{ "inspect", true, OPT_JSON | OPT_FOLLOW | OPT_MAX | OPT_IDLE | OPT_PERSISTENT | OPT_SESSION, cmd__inspect },
	{ "redrive", true, OPT_MAX | OPT_IDLE | OPT_RATE | OPT_FILTERS | OPT_DRY_RUN | OPT_TO_PREFIX | OPT_SESSION,
		cmd__redrive },
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: dlqctl [connection options] COMMAND [options] [TOPIC]\n"
		"\n"
		"Commands:\n"
		"  status                 counters and gauges per policy and in total (getStatus)\n"
		"  policies               the policies in use (listPolicies)\n"
		"  reset-counters         zero the counters (resetCounters)\n"
		"  inspect TOPIC          print the dead letters that arrive on TOPIC (a topic or filter)\n"
		"  redrive TOPIC          republish the dead letters parked in the redrive session of TOPIC\n"
		"                         to their origin-topic, without the plugin's properties\n"
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
		"  --json                 status, policies: print the plugin's data as JSON;\n"
		"                         inspect: one JSON object per dead letter and line\n"
		"  --follow               inspect: keep printing until interrupted\n"
		"  --idle SECONDS         inspect, redrive: stop when nothing came for this long (default 1)\n"
		"  --max N                inspect: stop after N letters; redrive: after N redriven\n"
		"                         (redrive --max 0 only opens the session, so that letters park in it)\n"
		"  -c                     inspect: a session that outlives the connection (needs -i);\n"
		"                         the letters printed are consumed from it\n"
		"  --session-expiry SECONDS  inspect -c, redrive: how long the broker keeps the session\n"
		"                         while no one is connected (default 86400)\n"
		"  --rate N               redrive: at most N redriven messages per second\n"
		"  --reason-contains TEXT redrive: only letters whose dead-letter-reason contains TEXT\n"
		"  --origin FILTER        redrive: only letters whose origin-topic matches FILTER\n"
		"                         (letters passed over are put back into their dead-letter topic)\n"
		"  --to-prefix PREFIX     redrive: republish to PREFIX + origin-topic (for bridges)\n"
		"  --dry-run              redrive: print what would be done; publish and acknowledge nothing\n"
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

static const char *const option_names[] = {
	"--json", "--follow", "--max", "--idle", "-c", "--rate", "--reason-contains/--origin", "--dry-run",
	"--to-prefix", "--session-expiry",
};

/* Parses argv into o and picks the command (*which). Returns 0 or an exit
 * status (help: DLQCTL_EXIT_OK with *which -1). */
static int parse(int argc, char **argv, struct dlqctl_opts *o, int *which)
{
	enum { L_UNIX = 256, L_JSON, L_FOLLOW, L_DRY_RUN, L_MAX, L_RATE, L_IDLE, L_REASON, L_ORIGIN,
		L_TO_PREFIX, L_TIMEOUT, L_SESSION_EXPIRY, L_HELP };
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
		{NULL, 0, NULL, 0},
	};
	unsigned used = 0;
	long n;
	int c;

	*which = -1;
	opterr = 0;
	while((c = getopt_long(argc, argv, ":h:p:i:u:P:k:cv", longopts, NULL)) != -1){
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
	for(size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++){
		if(!strcmp(o->command, commands[i].name)) *which = (int)i;
	}
	if(*which < 0) return bad("unknown command \"%s\"%s", o->command, "");
	if(commands[*which].topic){
		if(optind >= argc) return bad("%s needs a TOPIC%s", o->command, "");
		o->topic = argv[optind++];
		if(mosquitto_sub_topic_check(o->topic) != MOSQ_ERR_SUCCESS){
			return bad("\"%s\" is not a valid topic or topic filter%s", o->topic, "");
		}
	}
	if(optind < argc) return bad("unexpected argument \"%s\"%s", argv[optind], "");
	unsigned wrong = used & ~commands[*which].opts;
	for(size_t i = 0; wrong && i < sizeof(option_names) / sizeof(option_names[0]); i++){
		if(wrong & (1u << i)) return bad("%s does not apply to %s", option_names[i], o->command);
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
	int which;
	int rc = parse(argc, argv, &o, &which);
	if(rc || which < 0) return rc;

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
	return rc;
}
