/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * dlq_bench: what mosquitto-dlq costs the broker, measured against the bare
 * broker in the same run (see BENCHMARKS.md). Parses the command line, runs
 * the suites it asks for and prints their tables as Markdown on stdout;
 * progress goes to stderr. Every broker it starts is its own, on a private
 * unix socket (or a free loopback port with --tcp), and is stopped by PID,
 * also when the run is interrupted.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mosquitto.h>

#include "bench.h"

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"Usage: %s --plugin PATH [options]\n"
		"  --plugin PATH      the built mosquitto_dlq.so (or $DLQ_PLUGIN)\n"
		"  --mosquitto PATH   the broker (default /usr/sbin/mosquitto)\n"
		"  --quick            a short run (under a minute): 2 rounds, short phases\n"
		"  --rounds N         A/B rounds per cell (default 4, quick 2)\n"
		"  --seconds S        measured seconds per phase (default 2, quick 0.4)\n"
		"  --tcp              a free loopback TCP port instead of a unix socket\n"
		"  --only LIST        comma-separated: throughput,memory,callgrind (default all)\n"
		"  --no-callgrind     skip the callgrind suite\n",
		prog);
}

static void on_signal(int sig)
{
	broker__stop_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int parse_double(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if(errno || end == s || *end || v <= 0) return -1;
	*out = v;
	return 0;
}

static int parse_only(const char *list, struct bench_config *cfg)
{
	cfg->run_throughput = cfg->run_memory = cfg->run_callgrind = false;
	char buf[128];
	snprintf(buf, sizeof(buf), "%s", list);
	for(char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)){
		if(!strcmp(t, "throughput")) cfg->run_throughput = true;
		else if(!strcmp(t, "memory")) cfg->run_memory = true;
		else if(!strcmp(t, "callgrind")) cfg->run_callgrind = true;
		else return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "plugin", required_argument, NULL, 'p' },
		{ "mosquitto", required_argument, NULL, 'm' },
		{ "quick", no_argument, NULL, 'q' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "seconds", required_argument, NULL, 's' },
		{ "tcp", no_argument, NULL, 't' },
		{ "only", required_argument, NULL, 'o' },
		{ "no-callgrind", no_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bench_config cfg = {
		.plugin_path = getenv("DLQ_PLUGIN"),
		.rounds = 0,
		.window = 400,
		.latency_load = 0.5,
		.run_throughput = true,
		.run_memory = true,
		.run_callgrind = true,
	};
	double seconds = 0;
	int rounds = 0;
	int c;

	while((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1){
		switch(c){
			case 'p': cfg.plugin_path = optarg; break;
			case 'm': cfg.mosquitto_bin = optarg; break;
			case 'q': cfg.quick = true; break;
			case 't': cfg.tcp = true; break;
			case 'n': cfg.run_callgrind = false; break;
			case 'r':
				rounds = atoi(optarg);
				if(rounds < 1 || rounds > BENCH_MAX_ROUNDS){
					fprintf(stderr, "%s: --rounds must be 1..%d\n", argv[0], BENCH_MAX_ROUNDS);
					return 2;
				}
				break;
			case 's':
				if(parse_double(optarg, &seconds) || seconds > 60){
					fprintf(stderr, "%s: --seconds must be a number in (0, 60]\n", argv[0]);
					return 2;
				}
				break;
			case 'o':
				if(parse_only(optarg, &cfg)){
					fprintf(stderr, "%s: --only takes throughput, memory, callgrind\n", argv[0]);
					return 2;
				}
				break;
			case 'h': usage(stdout, argv[0]); return 0;
			default: usage(stderr, argv[0]); return 2;
		}
	}
	if(cfg.plugin_path == NULL || access(cfg.plugin_path, R_OK)){
		fprintf(stderr, "%s: the plugin (--plugin or $DLQ_PLUGIN) is missing or unreadable\n", argv[0]);
		return 2;
	}

	cfg.rounds = rounds ? rounds : (cfg.quick ? 2 : 4);
	cfg.measure_s = seconds > 0 ? seconds : (cfg.quick ? 0.4 : 2.0);
	cfg.warmup_s = cfg.quick ? 0.15 : 0.5;
	cfg.prefill = cfg.quick ? 0 : 260000;
	cfg.memory_count = cfg.quick ? 4000 : 20000;
	cfg.callgrind_count = cfg.quick ? 500 : 2000;

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	atexit(broker__stop_all);
	mosquitto_lib_init();

	time_t now = time(NULL);
	char date[64];
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", gmtime(&now));
	printf("## dlq_bench %s, %s\n\n", cfg.quick ? "--quick" : "(default)", date);
	printf("Plugin: %s. Payload %d B, MQTT v5, %s. %d rounds, %.2f s measured per phase.\n",
			cfg.plugin_path, BENCH_PAYLOAD, cfg.tcp ? "loopback TCP" : "unix socket", cfg.rounds, cfg.measure_s);

	int rc = 0;
	if(cfg.run_throughput && suite__throughput(&cfg)) rc = 1;
	if(cfg.run_memory && suite__memory(&cfg)) rc = 1;
	if(cfg.run_callgrind && suite__callgrind(&cfg)) rc = 1;
	mosquitto_lib_cleanup();
	return rc;
}
