/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The memory suite (see bench.h): broker RSS growth per tracked message
 * kept NACKable. For each payload size, a fresh bare broker and a fresh
 * plugin broker (nack_window 300s, max_pending_bytes 1GiB, so nothing
 * leaves the ledger) each receive a warm-up batch, then N messages at QoS 1
 * from one publisher to one subscriber; VmRSS is read before and after the
 * N. The bare broker's growth (allocator slack, buffers) is subtracted;
 * each size runs MEMORY_RUNS times, and the medians are shown.
 * Of what is left, a record must at least keep the payload, the topic and
 * the message's properties (the publisher here sends none, so 0): the rest
 * is the plugin's overhead per kept record, which issue 14 budgets.
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"

#define WARMUP_COUNT 1000
/* Few messages in flight: the broker's own buffers for them are not
 * counted against the ledger (100 in flight at 16 KiB would be 80 B per
 * message of 20000). */
#define MEMORY_WINDOW 10
/* Issue 14: bytes per kept record beyond payload + topic + properties. */
#define BUDGET_RECORD_BYTES 96
/* What the tracked publisher sends: pair 0's topic, no properties. */
#define MEMORY_TOPIC BENCH_TOPIC_TRACKED "0"
#define MEMORY_PROPERTY_BYTES 0
/* Fresh brokers per payload size, each figure the median: the allocator's
 * state at the two readings moves a single run by some ±10 B. */
#define MEMORY_RUNS 3

struct growth {
	long rss0, rss1;   /* KiB */
	double per_msg;    /* bytes */
};

static int measure(const struct bench_config *cfg, enum broker_kind kind, size_t size, struct growth *g)
{
	struct broker b;
	struct broker_opts bo = {
		.kind = kind, .plugin_path = cfg->plugin_path, .mosquitto_bin = cfg->mosquitto_bin,
		.tcp = cfg->tcp, .cpu = cfg->broker_cpu, .nack_window = "300s", .max_pending = "1GiB",
		.plugin_opts = cfg->plugin_opts,
		.ready_timeout_ms = 10000,
	};
	struct load_opts o = {
		.target = { { .broker = &b, .kind = kind == BROKER_PLUGIN ? LOAD_TRACKED : LOAD_PLAIN } }, .targets = 1,
		.qos = 1, .pairs = 1,
		.payload_len = size, .window = MEMORY_WINDOW, .count = WARMUP_COUNT, .timeout_ms = 60000, .label = "mem",
	};
	struct load_result res;
	int rc = -1;

	if(broker__start(&b, &bo)) return -1;
	if(load__run(&o, &res)) goto done;
	g->rss0 = broker__rss_kib(&b);
	o.count = cfg->memory_count;
	if(load__run(&o, &res) || res.untagged) goto done;
	g->rss1 = broker__rss_kib(&b);
	if(g->rss0 < 0 || g->rss1 < 0) goto done;
	g->per_msg = (double)(g->rss1 - g->rss0) * 1024.0 / (double)cfg->memory_count;
	rc = 0;
done:
	broker__stop(&b);
	return rc;
}

int suite__memory(const struct bench_config *cfg)
{
	static const size_t sizes[] = { 100, 1024, 16384 };
	int rc = 0;

	printf("\n### Memory: broker RSS growth per tracked message kept NACKable (%llu messages per size, QoS 1)\n\n",
			(unsigned long long)cfg->memory_count);
	size_t topic = strlen(MEMORY_TOPIC);
	printf("| payload B | bare growth B/msg | plugin growth B/msg | plugin − bare B/msg | beyond the payload B/msg "
			"| target ≤ payload + 160 | beyond payload + topic + properties B/record | budget ≤ %d B |\n",
			BUDGET_RECORD_BYTES);
	printf("|---|---|---|---|---|---|---|---|\n");
	for(size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]) && !bench__interrupted(); i++){
		struct growth bare[MEMORY_RUNS] = {0}, plugin[MEMORY_RUNS] = {0};
		int failed = 0;
		for(int k = 0; k < MEMORY_RUNS && !failed; k++){
			fprintf(stderr, "memory: %zu B payloads, run %d of %d\n", sizes[i], k + 1, MEMORY_RUNS);
			failed = measure(cfg, BROKER_BARE, sizes[i], &bare[k]) || measure(cfg, BROKER_PLUGIN, sizes[i], &plugin[k]);
		}
		if(failed){
			printf("| %zu | failed | | | | | | |\n", sizes[i]);
			rc = -1;
			continue;
		}
		double bare_v[MEMORY_RUNS], plugin_v[MEMORY_RUNS];
		for(int k = 0; k < MEMORY_RUNS; k++){
			bare_v[k] = bare[k].per_msg;
			plugin_v[k] = plugin[k].per_msg;
		}
		double bare_per = stats__median(bare_v, MEMORY_RUNS);
		double plugin_per = stats__median(plugin_v, MEMORY_RUNS);
		double net = plugin_per - bare_per;
		double beyond = net - (double)sizes[i];
		double overhead = beyond - (double)topic - MEMORY_PROPERTY_BYTES;
		printf("| %zu | %.0f | %.0f | %.0f | %.0f | %s | %.0f | %s |\n", sizes[i], bare_per, plugin_per, net,
				beyond, beyond <= 160 ? "met" : "missed", overhead,
				overhead <= BUDGET_RECORD_BYTES ? "met" : "**missed**");
	}
	printf("\nTopic `%s` (%zu B); the publisher sends no properties (0 B). Each figure is the median of %d runs, "
			"each with fresh brokers. RSS grows in pages, and the allocator's rounding is counted: a single run "
			"moves by some ±10 B.\n", MEMORY_TOPIC, topic, MEMORY_RUNS);
	return rc;
}
