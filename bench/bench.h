/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The benchmark's shared declarations: the brokers it starts and stops
 * itself (broker.c), the load driver that runs every client of a phase in
 * one thread (load.c, client.c), the suites (suite.c with its tables in
 * report.c, durability.c, memory.c, callgrind.c, growth.c, letters.c, deadlines.c, saves.c, fleet.c), clocks and
 * statistics (stats.c).
 * Nothing here is a test: figures are printed, never asserted.
 */
#ifndef DLQ_BENCH_H
#define DLQ_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define BENCH_MAX_PAIRS 4
/* Subscribers per pair at most: a fan-out case has one publisher and
 * several subscribers of its topic. */
#define BENCH_MAX_FANOUT 4
/* Policies in the plugin broker's configuration: one that matches the
 * tracked topics and this many minus one that match no benchmark topic. */
#define BENCH_POLICIES 100
/* The callgrind suite's large policy set, in the same shapes. */
#define BENCH_POLICIES_LARGE 10000
#define BENCH_PAYLOAD 200
#define BENCH_MAX_ATTEMPTS 3
/* Topics: publisher i publishes to <prefix><i>, subscriber i subscribes to
 * exactly that topic. */
#define BENCH_TOPIC_PLAIN "bench/plain/"
#define BENCH_TOPIC_TRACKED "bench/tracked/"
#define BENCH_FILTER_TRACKED "bench/tracked/+"
#define BENCH_DEAD_LETTER "dead/bench"

/* ---- brokers (broker.c) ---- */

enum broker_kind {
	BROKER_BARE,    /* no plugin: the reference */
	BROKER_PLUGIN,  /* the plugin with BENCH_POLICIES policies */
};

struct broker_opts {
	enum broker_kind kind;
	const char *plugin_path;     /* the built mosquitto_dlq.so */
	const char *mosquitto_bin;   /* default /usr/sbin/mosquitto */
	bool tcp;                    /* a free loopback port instead of a unix socket */
	const char *nack_window;     /* NULL: the plugin's default */
	const char *max_pending;     /* NULL: the plugin's default */
	const char *valgrind_out;    /* not NULL: run under callgrind, writing here */
	/* Not NULL: the root the broker lives in (2.1's); valgrind is then
	 * the root's, run as "chroot ROOT valgrind ... /usr/sbin/mosquitto",
	 * since valgrind on the host would trace mosquitto_bin, a chroot
	 * wrapper. The paths in the configuration must be the same inside
	 * (scripts/brokers.sh mount 2.1 binds /tmp and the project). */
	const char *valgrind_root;
	/* Policies the plugin broker gets (0: BENCH_POLICIES): one for the
	 * tracked topics, the rest decoys. */
	int policy_count;
	/* callgrind --toggle-collect patterns, NULL-terminated (at most 4), or
	 * NULL: collect everything */
	const char *const *valgrind_toggle;
	int cpu;                     /* run on this CPU only; -1: anywhere */
	/* No periodic $SYS publishing, the broker's or the plugin's: under
	 * callgrind, work driven by time would be counted against messages. */
	bool no_sys_topics;
	/* Plugin options written after the policies, each "key value" (key
	 * with or without its plugin_opt_ prefix), "{dir}" in a value standing
	 * for the broker's private directory; both lists NULL-terminated or
	 * NULL: the user's (--plugin-opt), then the suite's own. */
	const char *const *plugin_opts;
	const char *const *suite_opts;
	int ready_timeout_ms;
	/* For other programs that start brokers this way (the soak,
	 * tests/soak): NULL-terminated plugin_opt_policy values written instead
	 * of the benchmark's BENCH_POLICIES, or NULL; more broker configuration
	 * lines (before the plugin line), or NULL; the broker's persistence in
	 * its directory instead of "persistence false"; the directory's name
	 * before its random suffix (NULL: "dlq-bench"). */
	const char *const *policies;
	/* With the benchmark's policies (policies NULL): more options at the
	 * end of the tracked topics' policy line (e.g. "ack_timeout=1h"), or
	 * NULL; and NULL-terminated plugin_opt_policy values written after
	 * them, or NULL (the deadlines suite). */
	const char *tracked_policy_opts;
	const char *const *extra_policies;
	/* More valgrind arguments before the broker's (at most 4,
	 * NULL-terminated), e.g. --instr-atstart=no; or NULL. */
	const char *const *valgrind_args;
	const char *const *broker_conf;
	bool persistence;
	const char *dir_name;
};

struct broker {
	char dir[128];
	char conf_path[192];
	char log_path[192];
	char host[192];              /* socket path, or 127.0.0.1 */
	int port;                    /* 0 for the unix socket */
	pid_t pid;
	bool running;
	/* Set by broker__stop: how long the broker took to exit after SIGTERM,
	 * and the size of watch_file (a name in dir, if set) once it had: the
	 * state file the plugin saves on shutdown. */
	char watch_file[64];
	double stop_ms;
	long long watch_bytes;
	/* Where this start's lines begin in the log file: a broker started
	 * again by broker__restart goes on in the same file. */
	long log_offset;
};

/* Creates a private directory, writes the configuration and starts the
 * broker; returns 0 once its log says it is running, -1 (logged to stderr,
 * with the broker's log) if it exited or was not ready in time. */
int broker__start(struct broker *b, const struct broker_opts *o);
/* SIGTERM, wait (bounded), SIGKILL if needed; removes the directory.
 * Returns the exit status from waitpid, or -1. */
int broker__stop(struct broker *b);
/* Sends sig (SIGTERM: then as broker__stop, SIGKILL if it does not exit
 * in time; SIGKILL: at once) and reaps the broker, keeping its directory
 * (configuration, log, persistence, state files) for broker__restart or
 * for inspection. Sets stop_ms. Returns the exit status from waitpid, or
 * -1 if it was not running. */
int broker__halt(struct broker *b, int sig);
/* Starts a halted broker again in the same directory with the same
 * configuration, and waits for its "running" line as broker__start does
 * (o gives the binary, CPU and timeout; its configuration fields are not
 * used again). Returns 0, or -1 (logged, the directory kept). */
int broker__restart(struct broker *b, const struct broker_opts *o);
/* Removes a halted broker's directory. */
void broker__remove_dir(struct broker *b);
/* Writes b->conf_path for o (broker_conf.c). Sets b->host and b->port.
 * Returns 0, or -1 if it could not be written or no port was free. */
int broker_conf__write(struct broker *b, const struct broker_opts *o);
/* Resident set size in KiB, or -1. */
long broker__rss_kib(const struct broker *b);
/* The "field N kB" line of /proc/pid/file (e.g. "status", "VmRSS:"; or
 * "smaps_rollup", "Pss:"), of any process: N, or -1. */
long broker__proc_kib(pid_t pid, const char *file, const char *field);
/* CPU time used by the broker so far, in nanoseconds (schedstat, else
 * utime + stime). */
uint64_t broker__cpu_ns(const struct broker *b);
/* CPU time used by the children the broker reaped (the plugin's savers),
 * in nanoseconds, clock-tick resolution (cutime + cstime); 0 if unread. */
uint64_t broker__children_cpu_ns(const struct broker *b);
void broker__print_log(const struct broker *b);
/* Kills every broker still running and removes its directory (atexit). */
void broker__stop_all(void);

/* Latency samples in nanoseconds, pooled over phases (stats.c). */
struct bench_samples {
	uint64_t *v;
	size_t n, cap;
};

/* ---- the load driver (load.c) ---- */

enum load_kind {
	LOAD_PLAIN,     /* untracked topics (bare broker or plugin) */
	LOAD_TRACKED,   /* tracked topics; every delivery must carry a dlq-id */
	LOAD_STORM,     /* tracked; every delivery is NACKed until dead-lettered */
	LOAD_ACK,       /* tracked; every delivery is ACKed ($CONTROL/dlq/v1/ack) on receipt */
};

/* What one group of pairs talks to. */
struct load_target {
	const struct broker *broker;
	enum load_kind kind;
};

#define BENCH_MAX_TARGETS 3

struct load_opts {
	/* Each target gets its own pairs. With more than one target and
	 * slice_s, only one target publishes at a time, in turns of slice_s:
	 * A/B alternation fine enough that a pause of the machine falls on
	 * every target alike. A storm has one target. */
	struct load_target target[BENCH_MAX_TARGETS];
	int targets;                 /* 0 counts as 1 */
	double slice_s;
	int qos;
	int pairs;                   /* per target: publishers = pairs */
	int fanout;                  /* subscribers per pair, of its one topic (0 counts as 1; not in a storm) */
	size_t payload_len;          /* at least 16 */
	unsigned window;             /* per pair: messages (chains in a storm) not yet done */
	double rate;                 /* 0: closed loop; else msg/s offered by the publishing target */
	double warmup_s;
	double measure_s;
	/* Not 0: publish exactly this many originals (spread over the pairs),
	 * no warm-up, and wait for all of them to be done (at most timeout_ms);
	 * the result's rates are over the whole run. */
	uint64_t count;
	int timeout_ms;
	bool record_latency;
	/* With record_latency: each sample's arrival time too (the result's
	 * arrived, parallel to lat), for latency per window of time. */
	bool record_arrival;
	bool spin;                   /* poll without sleeping while messages flow */
	const char *label;           /* client id prefix */
};

/* Counters over the measured interval, converted to rates. CPU figures are
 * those of target 0's broker. */
struct load_result {
	double delivered_per_s;      /* every message a subscriber received */
	double copies_per_s;         /* retry copies received */
	double dead_letters_per_s;   /* dead letters received */
	double broker_cpu_util;      /* broker CPU seconds per second */
	double broker_us_per_msg;    /* broker CPU per delivered message */
	double broker_us_per_nack;   /* broker CPU per NACK handled (storm) */
	/* CPU used by other processes than the brokers and this one during
	 * the measured interval, in cores: what disturbed the measurement. */
	double foreign_cpu;
	double target_delivered_per_s[BENCH_MAX_TARGETS];
	double p50_us[BENCH_MAX_TARGETS], p99_us[BENCH_MAX_TARGETS]; /* end to end, originals */
	struct bench_samples lat[BENCH_MAX_TARGETS]; /* owned: load__result_free */
	/* With record_arrival: when each of lat's samples arrived
	 * (bench__now_ns), and when the measured interval began; owned. */
	struct bench_samples arrived[BENCH_MAX_TARGETS];
	uint64_t measure_start_ns;
	uint64_t untagged;           /* tracked deliveries without a dlq-id */
	uint64_t unfinished;         /* originals not done when the drain ended */
};

/* Runs one phase: connects the clients, warms up, measures, drains,
 * disconnects. Returns 0, or -1 if the clients could not connect or lost
 * their connection (res then holds nothing). Bounded in time throughout. */
int load__run(const struct load_opts *o, struct load_result *res);
/* Frees the latency samples of a result. */
void load__result_free(struct load_result *res);

/* ---- the suites (suite.c, memory.c, callgrind.c) ---- */

#define BENCH_MAX_ROUNDS 16
#define CG_PAIRS_LIMIT 5     /* --callgrind-pairs */
#define BENCH_MAX_PLUGIN_OPTS 16

struct bench_config {
	const char *plugin_path;
	const char *mosquitto_bin;
	bool tcp;
	bool quick;
	int broker_cpu;              /* brokers run on this CPU only; -1: anywhere */
	int rounds;                  /* A/B rounds per cell */
	double warmup_s;
	double measure_s;
	unsigned window;             /* in flight, all pairs together */
	double latency_load;         /* offered load, fraction of bare throughput */
	uint64_t prefill;            /* tracked messages sent before the rounds */
	uint64_t memory_count;       /* messages per payload size */
	uint64_t callgrind_count;    /* tracked messages in the callgrind run */
	const char *floor_plugin_path; /* bench/floor_plugin.c built, or NULL: no floor cases */
	int callgrind_pairs;         /* pairs of callgrind runs per case, 1..CG_PAIRS_LIMIT; the median is reported */
	const char *callgrind_dir;   /* where the profiles go; NULL: a new /tmp directory */
	const char *callgrind_cases; /* comma-separated case names to run; NULL: all */
	const char *valgrind_root;   /* the broker's root, for valgrind (broker_opts) */
	char broker_version[32];     /* "2.0.11", "2.1.2"; "" if unknown */
	/* --plugin-opt, for every plugin broker; NULL-terminated */
	const char *plugin_opts[BENCH_MAX_PLUGIN_OPTS + 1];
	int durability_rounds;       /* A/B rounds of the durability suite */
	uint64_t sync_count;         /* tracked messages in the fdatasync count run */
	bool run_throughput;
	bool run_memory;
	bool run_callgrind;
	bool run_durability;
	bool run_growth;              /* opt-in: not part of the default run */
	bool run_letters;             /* opt-in (issue 24's dead-letter store): not part of the default run */
	bool run_deadlines;           /* opt-in (issue 35's acknowledgement deadlines): not part of the default run */
	bool run_saves;               /* opt-in (issue 36's background saves): not part of the default run */
	bool run_fleet;               /* opt-in (issue 39's fleet): not part of the default run */
	uint64_t letters_count;       /* --letters-count: dead letters the letters suite keeps; 0: its default */
	bool no_valgrind;             /* --no-callgrind: the growth suite skips its callgrind runs too */
};

/* Each prints its tables to stdout (Markdown) and progress to stderr, and
 * returns 0, or -1 if a broker or a phase failed. */
int suite__throughput(const struct bench_config *cfg);
int suite__memory(const struct bench_config *cfg);
int suite__callgrind(const struct bench_config *cfg);
int suite__durability(const struct bench_config *cfg);
/* One closed-loop phase (suite.c): the cell's QoS and pairs, the configured
 * warm-up and measurement; window: messages (chains in a NACK storm) in
 * flight over all pairs, 0 for the default (cfg->window, at most 800 in a
 * storm); spin: the load polls without sleeping while messages flow. */
int suite__closed_phase(const struct bench_config *cfg, const struct broker *b, int qos, int pairs,
		enum load_kind kind, unsigned window, bool spin, const char *label, struct load_result *res);

/* ---- clocks and statistics (stats.c) ---- */

uint64_t bench__now_ns(void);
/* CPU time of the whole machine (all cores, /proc/stat) and of this
 * process, in nanoseconds. */
uint64_t bench__machine_busy_ns(void);
uint64_t bench__self_cpu_ns(void);
/* Set from the SIGINT/SIGTERM handler; every wait and every suite loop
 * checks it, so an interrupted run still stops its brokers by PID and
 * removes their directories. */
void bench__interrupt(void);
bool bench__interrupted(void);
void bench__sleep_ms(unsigned ms);
double stats__median(double *v, size_t n);
double stats__percentile_u64(uint64_t *v, size_t n, double p);
void stats__range(const double *v, size_t n, double *lo, double *hi);
/* Returns 0, or -1 when out of memory (the samples are then not added). */
int samples__append(struct bench_samples *s, const uint64_t *v, size_t n);
void samples__free(struct bench_samples *s);

#endif
