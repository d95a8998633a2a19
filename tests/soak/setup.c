/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The soak's command line, with its defaults, and its broker: the
 * configuration it is started with (bench/broker.c starts it) and the lines
 * of its log the tally counts.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "setup.h"

#define READY_TIMEOUT_MS 30000

void setup__defaults(struct soak_cfg *cfg)
{
	struct timespec ts;
	*cfg = (struct soak_cfg){
		.plugin = getenv("DLQ_PLUGIN"), .duration_s = 600, .rate = 5000, .publishers = 2, .workers = 6,
		.inflight = 1, .pub_window = 1000, .p_nack = 0.1, .p_crash = 0.002, .poison_nack = 500,
		.poison_crash = 2000, .reconnect_min_ms = 20, .reconnect_max_ms = 200, .restart_at = 0.5,
		.settle_timeout_s = 180, .quiet_ms = 3000, .payload_len = 200, .nack_window = "60s",
		.max_pending = "512MiB", .save_interval = "10s", .retry_delay_direct = "200ms",
		.retry_delay_fixed = "100ms",
	};
	clock_gettime(CLOCK_REALTIME, &ts);
	cfg->seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec;
}

void setup__usage(FILE *f)
{
	fprintf(f,
		"Usage: dlq_soak --plugin PATH [options]\n"
		"  --plugin PATH         the built mosquitto_dlq.so (or $DLQ_PLUGIN)\n"
		"  --mosquitto PATH      the broker (default /usr/sbin/mosquitto)\n"
		"  --duration S          seconds of publishing (default 600)\n"
		"  --rate N              messages per second offered, all publishers (default 5000)\n"
		"  --publishers N        (default 2)\n"
		"  --workers N           $share group members (default 6)\n"
		"  --inflight N          a worker's receive maximum (default 1)\n"
		"  --nack P              probability that a worker NACKs a delivery (default 0.1)\n"
		"  --crash P             probability that a worker crashes on a delivery (default 0.002)\n"
		"  --poison-nack N       every Nth message is always NACKed (default 500; 0: none)\n"
		"  --poison-crash N      every Nth message always crashes its worker (default 2000; 0: none)\n"
		"  --reconnect MIN-MAX   a crashed worker's pause in ms (default 20-200)\n"
		"  --restart-at F        stop the broker with SIGTERM and start it again at this fraction\n"
		"                        of the duration (default 0.5); --no-restart: never\n"
		"  --settle-timeout S    how long the end may take to settle (default 180)\n"
		"  --quiet MS            settled: nothing delivered for this long (default 3000)\n"
		"  --payload N           bytes per message (default 200, at least 32)\n"
		"  --nack-window D       plugin_opt_nack_window (default 60s)\n"
		"  --max-pending D       plugin_opt_max_pending_bytes (default 512MiB)\n"
		"  --save-interval D     plugin_opt_state_save_interval (default 10s)\n"
		"  --retry-delay-direct D  the delivery-topic policy's retry_delay (default 200ms, backoff 2, jitter 0.5)\n"
		"  --retry-delay-fixed D   the fixed-topic policy's retry_delay (default 100ms)\n"
		"  --seed N              the workers' random choices (default: from the clock)\n"
		"  --share-retry         the fixed retry topic's copies to the $share group, not to worker 0\n"
		"                        (on 2.0.11 a copy published after a restart before the workers have\n"
		"                        subscribed again reaches nobody)\n"
		"  --trace FILE          write every publish, delivery, decision, NACK and dead letter to FILE\n"
		"  --log-all             the broker logs every packet (log_type all): for diagnosis, slow\n"
		"  --keep                keep the broker's directory (kept anyway when the soak fails)\n");
}

int setup__parse_args(int argc, char **argv, struct soak_cfg *cfg)
{
	enum { O_PLUGIN = 256, O_MOSQ, O_DURATION, O_RATE, O_PUBS, O_WORKERS, O_INFLIGHT, O_NACK, O_CRASH,
		O_PNACK, O_PCRASH, O_RECONNECT, O_RESTART, O_NORESTART, O_SETTLE, O_QUIET, O_PAYLOAD, O_WINDOW,
		O_PENDING, O_SAVE, O_RDD, O_RDF, O_SEED, O_KEEP, O_SHARE_RETRY, O_TRACE, O_LOG_ALL, O_HELP };
	static const struct option opts[] = {
		{ "plugin", required_argument, NULL, O_PLUGIN }, { "mosquitto", required_argument, NULL, O_MOSQ },
		{ "duration", required_argument, NULL, O_DURATION }, { "rate", required_argument, NULL, O_RATE },
		{ "publishers", required_argument, NULL, O_PUBS }, { "workers", required_argument, NULL, O_WORKERS },
		{ "inflight", required_argument, NULL, O_INFLIGHT }, { "nack", required_argument, NULL, O_NACK },
		{ "crash", required_argument, NULL, O_CRASH }, { "poison-nack", required_argument, NULL, O_PNACK },
		{ "poison-crash", required_argument, NULL, O_PCRASH },
		{ "reconnect", required_argument, NULL, O_RECONNECT },
		{ "restart-at", required_argument, NULL, O_RESTART }, { "no-restart", no_argument, NULL, O_NORESTART },
		{ "settle-timeout", required_argument, NULL, O_SETTLE }, { "quiet", required_argument, NULL, O_QUIET },
		{ "payload", required_argument, NULL, O_PAYLOAD }, { "nack-window", required_argument, NULL, O_WINDOW },
		{ "max-pending", required_argument, NULL, O_PENDING },
		{ "save-interval", required_argument, NULL, O_SAVE },
		{ "retry-delay-direct", required_argument, NULL, O_RDD },
		{ "retry-delay-fixed", required_argument, NULL, O_RDF },
		{ "seed", required_argument, NULL, O_SEED }, { "keep", no_argument, NULL, O_KEEP },
		{ "share-retry", no_argument, NULL, O_SHARE_RETRY }, { "trace", required_argument, NULL, O_TRACE },
		{ "log-all", no_argument, NULL, O_LOG_ALL },
		{ "help", no_argument, NULL, O_HELP }, { NULL, 0, NULL, 0 },
	};
	int o;
	while((o = getopt_long(argc, argv, "", opts, NULL)) != -1){
		char *end = NULL;
		switch(o){
			case O_PLUGIN: cfg->plugin = optarg; break;
			case O_MOSQ: cfg->mosquitto = optarg; break;
			case O_DURATION: cfg->duration_s = strtod(optarg, &end); break;
			case O_RATE: cfg->rate = strtod(optarg, &end); break;
			case O_PUBS: cfg->publishers = (int)strtol(optarg, &end, 10); break;
			case O_WORKERS: cfg->workers = (int)strtol(optarg, &end, 10); break;
			case O_INFLIGHT: cfg->inflight = (unsigned)strtoul(optarg, &end, 10); break;
			case O_NACK: cfg->p_nack = strtod(optarg, &end); break;
			case O_CRASH: cfg->p_crash = strtod(optarg, &end); break;
			case O_PNACK: cfg->poison_nack = (unsigned)strtoul(optarg, &end, 10); break;
			case O_PCRASH: cfg->poison_crash = (unsigned)strtoul(optarg, &end, 10); break;
			case O_RECONNECT:
				cfg->reconnect_min_ms = (unsigned)strtoul(optarg, &end, 10);
				if(*end != '-') return -1;
				cfg->reconnect_max_ms = (unsigned)strtoul(end + 1, &end, 10);
				break;
			case O_RESTART: cfg->restart_at = strtod(optarg, &end); break;
			case O_NORESTART: cfg->restart_at = -1; break;
			case O_SETTLE: cfg->settle_timeout_s = strtod(optarg, &end); break;
			case O_QUIET: cfg->quiet_ms = (unsigned)strtoul(optarg, &end, 10); break;
			case O_PAYLOAD: cfg->payload_len = strtoul(optarg, &end, 10); break;
			case O_WINDOW: cfg->nack_window = optarg; break;
			case O_PENDING: cfg->max_pending = optarg; break;
			case O_SAVE: cfg->save_interval = optarg; break;
			case O_RDD: cfg->retry_delay_direct = optarg; break;
			case O_RDF: cfg->retry_delay_fixed = optarg; break;
			case O_SEED: cfg->seed = strtoull(optarg, &end, 10); break;
			case O_KEEP: cfg->keep = true; break;
			case O_SHARE_RETRY: cfg->share_retry = true; break;
			case O_TRACE: cfg->trace = optarg; break;
			case O_LOG_ALL: cfg->log_all = true; break;
			case O_HELP: setup__usage(stdout); exit(0);
			default: return -1;
		}
		if(end && *end){
			fprintf(stderr, "dlq_soak: bad value \"%s\"\n", optarg);
			return -1;
		}
	}
	if(optind != argc || !cfg->plugin || cfg->duration_s <= 0 || cfg->rate <= 0
			|| cfg->publishers < 1 || cfg->publishers > SOAK_MAX_PUBLISHERS
			|| cfg->workers < 1 || cfg->workers > SOAK_MAX_WORKERS || cfg->inflight < 1 || cfg->inflight > 1000
			|| cfg->p_nack < 0 || cfg->p_crash < 0 || cfg->p_nack + cfg->p_crash > 1
			|| cfg->reconnect_max_ms < cfg->reconnect_min_ms || cfg->payload_len < 32
			|| cfg->payload_len > 65536 || cfg->restart_at >= 1){
		return -1;
	}
	return 0;
}

int setup__start_broker(const struct soak_cfg *cfg, struct broker *b, struct broker_opts *bo)
{
	static char policies[2][512];
	static const char *policy_list[3];
	static char plugin_opts[8][128];
	static const char *opt_list[9];
	/* Enough room for what a worker away for a while, or the inspector,
	 * may have queued: a drop would be a message lost to the tally. */
	static const char *conf[] = { "max_queued_messages 1000000", NULL, NULL };
	if(cfg->log_all) conf[1] = "log_type all";

	snprintf(policies[0], sizeof(policies[0]), "%s max_attempts=%d dead_letter=%s retry_to=delivery "
			"retry_delay=%s retry_backoff=2 retry_jitter=0.5 retry_max_delay=2s",
			SOAK_FILTER_DIRECT, SOAK_MAX_ATTEMPTS, SOAK_DEAD_DIRECT, cfg->retry_delay_direct);
	snprintf(policies[1], sizeof(policies[1]), "%s max_attempts=%d dead_letter=%s retry_to=%s retry_delay=%s",
			SOAK_FILTER_FIXED, SOAK_MAX_ATTEMPTS, SOAK_DEAD_FIXED, SOAK_RETRY_TOPIC, cfg->retry_delay_fixed);
	policy_list[0] = policies[0];
	policy_list[1] = policies[1];
	int n = 0;
	snprintf(plugin_opts[n++], sizeof(plugin_opts[0]), "state_file {dir}/dlq.state");
	snprintf(plugin_opts[n++], sizeof(plugin_opts[0]), "state_save_interval %s", cfg->save_interval);
	snprintf(plugin_opts[n++], sizeof(plugin_opts[0]), "redelivery_tracking allow");
	snprintf(plugin_opts[n++], sizeof(plugin_opts[0]), "v5_sessions_persist true");
	snprintf(plugin_opts[n++], sizeof(plugin_opts[0]), "nack_window %s", cfg->nack_window);
	snprintf(plugin_opts[n++], sizeof(plugin_opts[0]), "max_pending_bytes %s", cfg->max_pending);
	for(int i = 0; i < n; i++){
		opt_list[i] = plugin_opts[i];
	}
	opt_list[n] = NULL;

	*bo = (struct broker_opts){
		.kind = BROKER_PLUGIN, .plugin_path = cfg->plugin, .mosquitto_bin = cfg->mosquitto,
		.cpu = -1, .ready_timeout_ms = READY_TIMEOUT_MS, .policies = policy_list, .suite_opts = opt_list,
		.broker_conf = conf, .persistence = true, .dir_name = "dlq-soak",
	};
	return broker__start(b, bo);
}

void setup__count_log(const struct broker *b, const char *const *needles, uint64_t *counts, size_t n)
{
	FILE *f = fopen(b->log_path, "r");
	char *line = NULL;
	size_t cap = 0;
	memset(counts, 0, n * sizeof(*counts));
	if(f == NULL) return;
	while(getline(&line, &cap, f) > 0){
		for(size_t i = 0; i < n; i++){
			if(strstr(line, needles[i])) counts[i]++;
		}
	}
	free(line);
	fclose(f);
}

