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
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mosquitto.h>

#include "bench.h"
#include "suite.h"

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"Usage: %s --plugin PATH [options]\n"
		"  --plugin PATH      the built mosquitto_dlq.so (or $DLQ_PLUGIN)\n"
		"  --mosquitto PATH   the broker (default /usr/sbin/mosquitto)\n"
		"  --quick            a short run (about a minute): 3 rounds, short phases\n"
		"  --rounds N         A/B rounds per cell (default 6, quick 3; durability suite 4, quick 2)\n"
		"  --seconds S        measured seconds per phase (default 1, quick 0.2)\n"
		"  --tcp              a free loopback TCP port instead of a unix socket\n"
		"  --only LIST        comma-separated: throughput,durability,memory,callgrind (default all),\n"
		"                     growth (not in the default: 5 to 8 minutes, up to 1,000,000 kept records,\n"
		"                     restored natively and under callgrind; --quick: 10,000 at most),\n"
		"                     letters (not in the default: about 20 s; the dead-letter store with\n"
		"                     10,000 kept dead letters, --quick 1,000: memory, listing, save, restart),\n"
		"                     deadlines (not in the default: about 2 minutes; acknowledgement deadlines\n"
		"                     under callgrind: ACKs, 1,000 and 100,000 deliveries held, a tick in which\n"
		"                     1,000 run out; --quick: 10,000 held, 100 running out)\n"
		"                     saves (not in the default: about 10 minutes; what a client sees while the\n"
		"                     state is saved, 100,000 and 1,000,000 kept, beside the broker's autosave;\n"
		"                     --quick: 10,000, about 2 minutes)\n"
		"                     fleet (not in the default: about 2 minutes; three edges bridged to a centre,\n"
		"                     bare, collecting, and collecting with its journal: letters/s at the centre,\n"
		"                     its CPU per 1,000 letters, NACK-to-centre time; --quick: one run, shorter)\n"
		"  --letters-count N  dead letters the letters suite keeps (default 10,000, quick 1,000; above\n"
		"                     40,000 its store-on brokers get dead_letter_keep 4GB)\n"
		"  --no-callgrind     skip the callgrind suite, and the growth suite's callgrind runs\n"
		"  --plugin-opt 'KEY VALUE'\n"
		"                     one more plugin option for every plugin broker (repeatable, at most %d):\n"
		"                     plugin_opt_KEY VALUE after the policies; {dir} in VALUE is the broker's\n"
		"                     private directory, e.g. --plugin-opt 'state_file {dir}/dlq.state'\n"
		"  --revision TEXT    what was measured (printed in the header)\n"
		"  --callgrind-dir D  keep the callgrind profiles in D (default: a new /tmp directory)\n"
		"  --floor-plugin PATH  the floor plugin (bench/floor_plugin.c, built as dlq_floor.so): the callgrind\n"
		"                     suite's floor cases, the least the broker's API costs per tracked message\n"
		"  --callgrind-pairs N  pairs of callgrind runs per case, 1..5 (default 3, quick 1): the median is reported\n"
		"  --cases LIST       the callgrind suite runs only these cases (comma-separated names,\n"
		"                     e.g. tracked,floor,bare); the others are shown as skipped\n"
		"  --no-pin           do not pin the brokers to CPU 0 and the load to CPU 1\n"
		"  --valgrind-root R  the broker lives in root R (2.1's): the callgrind suite runs\n"
		"                     chroot R valgrind ... /usr/sbin/mosquitto (run-bench.sh --broker 2.1)\n",
		prog, BENCH_MAX_PLUGIN_OPTS);
}

/* The first line of a command's output, or "?". */
static void first_line(const char *cmd, char *buf, size_t len)
{
	snprintf(buf, len, "?");
	FILE *p = popen(cmd, "r");
	if(p == NULL) return;
	if(fgets(buf, (int)len, p) == NULL) snprintf(buf, len, "?");
	buf[strcspn(buf, "\n")] = '\0';
	pclose(p);
}

/* The broker's version, from the "mosquitto version X" line of its -h
 * output: 2.1 prints a log line ("<time>: mosquitto version 2.1.2
 * terminating") before it, which is not the one. */
static void broker_version(struct bench_config *cfg)
{
	char cmd[400], line[sizeof(cfg->broker_version)];
	snprintf(cmd, sizeof(cmd), "'%s' -h 2>&1 | sed -n 's/^mosquitto version \\([0-9][0-9.]*\\).*/\\1/p' | head -1",
			cfg->mosquitto_bin ? cfg->mosquitto_bin : "/usr/sbin/mosquitto");
	first_line(cmd, line, sizeof(line));
	snprintf(cfg->broker_version, sizeof(cfg->broker_version), "%s", strcmp(line, "?") ? line : "");
}

static void print_machine(const struct bench_config *cfg)
{
	char cpu[256], mem[64], kernel[128], valgrind[64], cmd[300];
	int major, minor, rev;

	first_line("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'", cpu, sizeof(cpu));
	first_line("awk '/MemTotal/ { printf \"%.1f GiB\", $2 / 1048576 }' /proc/meminfo", mem, sizeof(mem));
	first_line("uname -sr", kernel, sizeof(kernel));
	/* The valgrind that runs the broker: the root's, for 2.1. */
	if(cfg->valgrind_root){
		snprintf(cmd, sizeof(cmd), "chroot '%s' valgrind --version 2>/dev/null", cfg->valgrind_root);
	}else{
		snprintf(cmd, sizeof(cmd), "valgrind --version 2>/dev/null");
	}
	first_line(cmd, valgrind, sizeof(valgrind));
	mosquitto_lib_version(&major, &minor, &rev);
	printf("Machine: %ld cores, %s, %s RAM, %s. Broker: mosquitto %s (%s); the load's libmosquitto %d.%d.%d; %s%s.\n",
			sysconf(_SC_NPROCESSORS_ONLN), cpu, mem, kernel, cfg->broker_version[0] ? cfg->broker_version : "(version unknown)",
			cfg->mosquitto_bin ? cfg->mosquitto_bin : "/usr/sbin/mosquitto", major, minor, rev, valgrind,
			cfg->valgrind_root ? " in the broker's root" : "");
}

/* Pins this process to the second CPU it may run on and sets the brokers'
 * to the first. Returns 0, or -1 (nothing pinned) with fewer than two. */
static int pin_self(struct bench_config *cfg)
{
	cpu_set_t set;
	int cpus[2], n = 0;
	if(sched_getaffinity(0, sizeof(set), &set)) return -1;
	for(int i = 0; i < CPU_SETSIZE && n < 2; i++){
		if(CPU_ISSET(i, &set)) cpus[n++] = i;
	}
	if(n < 2) return -1;
	CPU_ZERO(&set);
	CPU_SET(cpus[1], &set);
	if(sched_setaffinity(0, sizeof(set), &set)) return -1;
	cfg->broker_cpu = cpus[0];
	return 0;
}

/* Only sets a flag: the waits notice it within 10 ms and unwind, and the
 * brokers are stopped on the normal path. A second signal kills at once
 * (the brokers die with us, PR_SET_PDEATHSIG). */
static void on_signal(int sig)
{
	if(bench__interrupted()){
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	bench__interrupt();
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

/* A whole decimal number, or -1. */
static int parse_int(const char *s)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if(errno || end == s || *end || v < 0 || v > 1000000) return -1;
	return (int)v;
}

static int parse_only(const char *list, struct bench_config *cfg)
{
	cfg->run_throughput = cfg->run_memory = cfg->run_callgrind = cfg->run_durability = cfg->run_growth
			= cfg->run_letters = cfg->run_deadlines = cfg->run_saves = cfg->run_fleet = false;
	char buf[128];
	snprintf(buf, sizeof(buf), "%s", list);
	for(char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)){
		if(!strcmp(t, "throughput")) cfg->run_throughput = true;
		else if(!strcmp(t, "memory")) cfg->run_memory = true;
		else if(!strcmp(t, "callgrind")) cfg->run_callgrind = true;
		else if(!strcmp(t, "durability")) cfg->run_durability = true;
		else if(!strcmp(t, "growth")) cfg->run_growth = true;
		else if(!strcmp(t, "letters")) cfg->run_letters = true;
		else if(!strcmp(t, "deadlines")) cfg->run_deadlines = true;
		else if(!strcmp(t, "saves")) cfg->run_saves = true;
		else if(!strcmp(t, "fleet")) cfg->run_fleet = true;
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
		{ "revision", required_argument, NULL, 'v' },
		{ "callgrind-dir", required_argument, NULL, 'c' },
		{ "callgrind-pairs", required_argument, NULL, 'C' },
		{ "cases", required_argument, NULL, 'K' },
		{ "floor-plugin", required_argument, NULL, 'F' },
		{ "no-pin", no_argument, NULL, 'P' },
		{ "valgrind-root", required_argument, NULL, 'R' },
		{ "plugin-opt", required_argument, NULL, 'O' },
		{ "letters-count", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bench_config cfg = {
		.plugin_path = getenv("DLQ_PLUGIN"),
		.rounds = 0,
		.window = 400,
		.latency_load = 0.3,
		.run_throughput = true,
		.run_memory = true,
		.run_callgrind = true,
		.run_durability = true,
	};
	int nopts = 0;
	double seconds = 0;
	int rounds = 0;
	int cg_pairs = 0;
	const char *revision = NULL;
	bool pin = true;
	int c;

	while((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1){
		switch(c){
			case 'p': cfg.plugin_path = optarg; break;
			case 'm': cfg.mosquitto_bin = optarg; break;
			case 'q': cfg.quick = true; break;
			case 't': cfg.tcp = true; break;
			case 'n': cfg.run_callgrind = false; cfg.no_valgrind = true; break;
			case 'v': revision = optarg; break;
			case 'c': cfg.callgrind_dir = optarg; break;
			case 'K': cfg.callgrind_cases = optarg; break;
			case 'P': pin = false; break;
			case 'R': cfg.valgrind_root = optarg; break;
			case 'F': cfg.floor_plugin_path = optarg; break;
			case 'O': {
				/* "key value": a key, blanks, a value. */
				size_t k = strcspn(optarg, " \t");
				const char *v = optarg + k + strspn(optarg + k, " \t");
				if(k == 0 || *v == '\0' || strchr(optarg, '\n')){
					fprintf(stderr, "%s: --plugin-opt takes 'KEY VALUE', e.g. 'state_file {dir}/dlq.state'\n", argv[0]);
					return 2;
				}
				if(nopts == BENCH_MAX_PLUGIN_OPTS){
					fprintf(stderr, "%s: at most %d --plugin-opt\n", argv[0], BENCH_MAX_PLUGIN_OPTS);
					return 2;
				}
				cfg.plugin_opts[nopts++] = optarg;
				break;
			}
			case 'L': {
				int v = parse_int(optarg);
				if(v < 1){
					fprintf(stderr, "%s: --letters-count must be 1..1000000\n", argv[0]);
					return 2;
				}
				cfg.letters_count = (uint64_t)v;
				break;
			}
			case 'r':
				rounds = parse_int(optarg);
				if(rounds < 1 || rounds > BENCH_MAX_ROUNDS){
					fprintf(stderr, "%s: --rounds must be 1..%d\n", argv[0], BENCH_MAX_ROUNDS);
					return 2;
				}
				break;
			case 'C':
				cg_pairs = parse_int(optarg);
				if(cg_pairs < 1 || cg_pairs > CG_PAIRS_LIMIT){
					fprintf(stderr, "%s: --callgrind-pairs must be 1..%d\n", argv[0], CG_PAIRS_LIMIT);
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
					fprintf(stderr, "%s: --only takes throughput, durability, memory, callgrind, growth, letters, "
							"deadlines, saves, fleet\n", argv[0]);
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

	/* Many short rounds rather than a few long ones: a burst of other
	 * work on the machine then spoils one round, which the median drops. */
	cfg.rounds = rounds ? rounds : (cfg.quick ? 3 : 6);
	cfg.measure_s = seconds > 0 ? seconds : (cfg.quick ? 0.2 : 1.0);
	cfg.warmup_s = cfg.quick ? 0.1 : 0.3;
	/* Enough 200-byte messages to fill the default 64 MiB bound (about
	 * 310 accounted bytes each), so every round evicts as it records. */
	cfg.prefill = cfg.quick ? 0 : 260000;
	cfg.memory_count = cfg.quick ? 5000 : 50000;
	cfg.callgrind_count = cfg.quick ? 200 : 2000;
	cfg.callgrind_pairs = cg_pairs ? cg_pairs : (cfg.quick ? 1 : 3);
	/* The durability suite: fewer rounds (seven phases each), and a
	 * fixed workload under strace for the fdatasync counts. */
	cfg.durability_rounds = rounds ? rounds : (cfg.quick ? 2 : 4);
	cfg.sync_count = cfg.quick ? 400 : 2000;

	/* Brokers on the first CPU, the load on the second: the load polls
	 * without sleeping, and must never take turns with a broker. */
	cfg.broker_cpu = -1;
	if(pin && pin_self(&cfg)){
		fprintf(stderr, "%s: cannot pin to CPUs 0 and 1; running unpinned\n", argv[0]);
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	atexit(broker__stop_all);
	mosquitto_lib_init();

	time_t now = time(NULL);
	char date[64];
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", gmtime(&now));
	printf("## dlq_bench %s, %s\n\n", cfg.quick ? "--quick" : "(default)", date);
	broker_version(&cfg);
	print_machine(&cfg);
	if(revision) printf("Code measured: %s.\n", revision);
	printf("Plugin: %s. Payload %d B, MQTT v5, %s. %d rounds, %.2f s measured per phase. %s.\n",
			cfg.plugin_path, BENCH_PAYLOAD, cfg.tcp ? "loopback TCP" : "unix socket", cfg.rounds, cfg.measure_s,
			cfg.broker_cpu >= 0 ? "Brokers pinned to one CPU, the load to another" : "Not pinned");
	if(nopts){
		printf("Plugin options added to every plugin broker:");
		for(int i = 0; i < nopts; i++){
			printf("%s `%s`", i ? "," : "", cfg.plugin_opts[i]);
		}
		printf(".\n");
	}

	int rc = 0;
	if(cfg.run_throughput && suite__throughput(&cfg)) rc = 1;
	if(cfg.run_durability && !bench__interrupted() && suite__durability(&cfg)) rc = 1;
	if(cfg.run_memory && !bench__interrupted() && suite__memory(&cfg)) rc = 1;
	if(cfg.run_callgrind && !bench__interrupted() && suite__callgrind(&cfg)) rc = 1;
	if(cfg.run_growth && !bench__interrupted() && suite__growth(&cfg)) rc = 1;
	if(cfg.run_letters && !bench__interrupted() && suite__letters(&cfg)) rc = 1;
	if(cfg.run_deadlines && !bench__interrupted() && suite__deadlines(&cfg)) rc = 1;
	if(cfg.run_saves && !bench__interrupted() && suite__saves(&cfg)) rc = 1;
	if(cfg.run_fleet && !bench__interrupted() && suite__fleet(&cfg)) rc = 1;
	mosquitto_lib_cleanup();
	if(bench__interrupted()){
		fprintf(stderr, "%s: interrupted\n", argv[0]);
		return 130;
	}
	return rc;
}
