/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * dlq_soak: the soak of issue 7. Starts the real broker with the built
 * plugin (persistence on, a state file, redelivery tracking "allow", a
 * delivery-topic policy and a fixed-retry-topic policy, max_attempts 3 and
 * retry delays), then for --duration seconds publishers send numbered QoS 1
 * messages at --rate, workers in a $share group process, NACK or crash on
 * them at random, and an inspector reads the dead letters; in the middle the
 * broker is stopped with SIGTERM and started again. Then publishing stops,
 * everything settles (the plugin's getStatus shows nothing owed or held
 * back, and nothing has been delivered for a while), and every sequence
 * number is accounted for (ledger.c). Exits 0 only if none is unaccounted,
 * it settled, no payload came back altered and the broker exited cleanly.
 *
 * Everything runs in this one thread on one ppoll loop; the broker is
 * started and stopped with the benchmark's code (bench/broker.c).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "setup.h"
#include "soak.h"

#define PROGRESS_NS 10000000000ull
#define STATUS_RUN_MS 2000
#define STATUS_SETTLE_MS 500
#define RESTART_ASK_TIMEOUT_MS 5000
#define READY_TIMEOUT_MS 30000
#define MAX_WAIT_NS 100000000ull

struct run {
	struct soak s;
	struct broker broker;
	struct broker_opts bo;
	struct publisher *pubs[SOAK_MAX_PUBLISHERS];
	struct worker *workers[SOAK_MAX_WORKERS];
	struct inspector *inspector;
	struct status_client *status;
	/* Counters of the broker runs before the restart (getStatus, CPU). */
	struct plugin_status before;
	double cpu_before_s;
	int restarts;
	double restart_stop_ms;
	uint64_t restarted_ns;
	double hold_ms;              /* publishing held after the restart */
};

static void on_signal(int sig)
{
	(void)sig;
	bench__interrupt();
}

double soak__random(struct soak *s)
{
	/* xorshift64* */
	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return (double)((s->rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

void soak__trace(struct soak *s, const char *fmt, ...)
{
	if(s->trace == NULL) return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(s->trace, "%.3f ", (double)(s->now_ns - s->start_ns) / 1e6);
	vfprintf(s->trace, fmt, ap);
	fputc('\n', s->trace);
	va_end(ap);
}

uint64_t soak__ms_to_ns(unsigned ms)
{
	return (uint64_t)ms * 1000000u;
}

/* ---- the loop ---- */

static struct mq_conn *conn_at(struct run *R, int i)
{
	const struct soak_cfg *cfg = R->s.cfg;
	if(i < cfg->publishers) return publisher__conn(R->pubs[i]);
	i -= cfg->publishers;
	if(i < cfg->workers) return worker__conn(R->workers[i]);
	i -= cfg->workers;
	return i == 0 ? inspector__conn(R->inspector) : status__conn(R->status);
}

static int nconns(const struct run *R)
{
	return R->s.cfg->publishers + R->s.cfg->workers + 2;
}

static uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* One pass: every client's timers, then poll and I/O. */
static int pass(struct run *R, unsigned status_interval_ms)
{
	const struct soak_cfg *cfg = R->s.cfg;
	struct pollfd fds[SOAK_MAX_PUBLISHERS + SOAK_MAX_WORKERS + 2];
	struct mq_conn *conns[SOAK_MAX_PUBLISHERS + SOAK_MAX_WORKERS + 2];
	uint64_t wait = MAX_WAIT_NS;

	R->s.now_ns = bench__now_ns();
	for(int i = 0; i < cfg->publishers; i++){
		wait = min64(wait, publisher__step(R->pubs[i]));
	}
	for(int i = 0; i < cfg->workers; i++){
		wait = min64(wait, worker__step(R->workers[i]));
	}
	wait = min64(wait, inspector__step(R->inspector));
	wait = min64(wait, status__step(R->status, status_interval_ms));

	nfds_t n = 0;
	for(int i = 0; i < nconns(R); i++){
		struct mq_conn *c = conn_at(R, i);
		if(c->fd < 0) continue;
		conns[n] = c;
		fds[n].fd = c->fd;
		fds[n].events = POLLIN | (mq_want_write(c) ? POLLOUT : 0);
		fds[n].revents = 0;
		n++;
	}
	struct timespec ts = { .tv_sec = (time_t)(wait / 1000000000u), .tv_nsec = (long)(wait % 1000000000u) };
	int ready = ppoll(fds, n, &ts, NULL);
	if(ready < 0 && errno != EINTR){
		perror("dlq_soak: ppoll");
		return -1;
	}
	R->s.now_ns = bench__now_ns();
	for(nfds_t i = 0; ready > 0 && i < n; i++){
		struct mq_conn *c = conns[i];
		if(c->fd != fds[i].fd) continue; /* closed and maybe reopened meanwhile */
		if(fds[i].revents & POLLOUT) mq_flush(c);
		if(c->fd == fds[i].fd && (fds[i].revents & (POLLIN | POLLHUP | POLLERR))) mq_read(c);
	}
	return 0;
}

static void add_status(struct plugin_status *sum, const struct plugin_status *a)
{
	sum->tracked += a->tracked;
	sum->untracked_full += a->untracked_full;
	sum->nacks += a->nacks;
	sum->nacks_refused += a->nacks_refused;
	sum->retry_copies += a->retry_copies;
	sum->delayed_copies += a->delayed_copies;
	sum->dead_letters += a->dead_letters;
	sum->publish_failures += a->publish_failures;
	sum->expired += a->expired;
	sum->evicted += a->evicted;
	sum->redeliveries += a->redeliveries;
	sum->diverted += a->diverted;
	sum->unknown_ids += a->unknown_ids;
	sum->valid = a->valid;
}

/* Asks for getStatus and runs the loop until the answer to that request
 * comes (or timeout_ms passes). Returns whether it came. */
static bool fresh_status(struct run *R, unsigned timeout_ms, unsigned status_interval_ms)
{
	uint64_t t0 = bench__now_ns(), asked;
	R->s.now_ns = t0;
	status__ask(R->status);
	while(bench__now_ns() - t0 < soak__ms_to_ns(timeout_ms) && !bench__interrupted()){
		status__latest(R->status, &asked);
		if(asked >= t0) return true;
		if(pass(R, status_interval_ms)) return false;
		status__ask(R->status);
	}
	return false;
}

/* Stops the broker with SIGTERM and starts it again in its directory. */
static int restart_broker(struct run *R)
{
	/* Publishing pauses from here until every worker has subscribed to
	 * the new broker, so that the first broker's tracked count is whole. */
	R->s.hold_publishing = true;
	if(!fresh_status(R, RESTART_ASK_TIMEOUT_MS, STATUS_RUN_MS)){
		fprintf(stderr, "dlq_soak: no getStatus answer before the restart; its counters are missing from the sums\n");
	}
	R->before = *status__latest(R->status, NULL);
	R->cpu_before_s = (double)broker__cpu_ns(&R->broker) / 1e9;
	fprintf(stderr, "dlq_soak: stopping the broker (SIGTERM) and starting it again\n");
	int status = broker__halt(&R->broker, SIGTERM);
	R->restart_stop_ms = R->broker.stop_ms;
	/* What the broker wrote before it exited is still in the sockets: the
	 * clients read it, then find the connection closed. */
	R->s.now_ns = bench__now_ns();
	for(int i = 0; i < nconns(R); i++){
		struct mq_conn *c = conn_at(R, i);
		while(c->fd >= 0){
			mq_read(c);
		}
	}
	R->s.ledger.restarted = true;
	R->restarts++;
	if(!WIFEXITED(status) || WEXITSTATUS(status) != 0){
		fprintf(stderr, "dlq_soak: the broker did not exit cleanly on SIGTERM (status 0x%x)\n", status);
		return -1;
	}
	if(broker__restart(&R->broker, &R->bo)){
		fprintf(stderr, "dlq_soak: the broker did not start again\n");
		return -1;
	}
	R->restarted_ns = bench__now_ns();
	fprintf(stderr, "dlq_soak: broker running again (stopping took %.0f ms)\n", R->restart_stop_ms);
	return 0;
}

/* Every worker has subscribed again since the restart. */
static bool workers_subscribed(struct run *R)
{
	for(int i = 0; i < R->s.cfg->workers; i++){
		if(worker__subscribed_ns(R->workers[i]) <= R->restarted_ns) return false;
	}
	return true;
}

/* Counters over the last progress interval. */
struct progress {
	uint64_t at_ns;
	struct soak_counts c;
	uint64_t cpu_ns;
};

static void print_progress(struct run *R, struct progress *p, uint64_t start_ns, const char *phase)
{
	uint64_t now = bench__now_ns();
	double dt = (double)(now - p->at_ns) / 1e9;
	const struct soak_counts *c = &R->s.ledger.c;
	uint64_t cpu = broker__cpu_ns(&R->broker);
	const struct plugin_status *st = status__latest(R->status, NULL);
	uint64_t inflight = 0;
	for(int i = 0; i < R->s.cfg->publishers; i++){
		inflight += publisher__inflight(R->pubs[i]);
	}
	double cpu_pct = cpu >= p->cpu_ns ? (double)(cpu - p->cpu_ns) / 1e7 / dt : 0;
	fprintf(stderr, "[%5.0f s %s] published %.0f/s, delivered %.0f/s, NACKs %.0f/s, crashes %.1f/s, dead letters %.1f/s; "
			"publisher window %llu; plugin: %.0f records, %.0f pending, %.0f delayed; broker %.0f%% CPU, %ld MiB\n",
			(double)(now - start_ns) / 1e9, phase,
			(double)(c->published - p->c.published) / dt, (double)(c->deliveries - p->c.deliveries) / dt,
			(double)(c->nacks_acked - p->c.nacks_acked) / dt, (double)(c->crashes - p->c.crashes) / dt,
			(double)(c->dead_letters - p->c.dead_letters) / dt, (unsigned long long)inflight,
			st->records, st->pending, st->delayed, cpu_pct, broker__rss_kib(&R->broker) / 1024);
	p->at_ns = now;
	p->c = *c;
	p->cpu_ns = cpu;
}

/* Whether everything has settled: nothing published waits for its
 * acknowledgement, every client is connected, nothing has been delivered
 * for quiet_ms, and a getStatus asked for after the last delivery shows
 * nothing owed or held back. */
static bool settled(struct run *R)
{
	const struct soak_cfg *cfg = R->s.cfg;
	uint64_t now = R->s.now_ns, asked;
	for(int i = 0; i < cfg->publishers; i++){
		if(publisher__inflight(R->pubs[i]) || publisher__conn(R->pubs[i])->state != MQ_UP) return false;
	}
	for(int i = 0; i < cfg->workers; i++){
		if(!worker__ready(R->workers[i])) return false;
	}
	if(!inspector__ready(R->inspector)) return false;
	if(now - R->s.last_activity_ns < soak__ms_to_ns(cfg->quiet_ms)) return false;
	const struct plugin_status *st = status__latest(R->status, &asked);
	return st->valid && asked > R->s.last_activity_ns && st->pending == 0 && st->delayed == 0;
}

static int run(struct run *R)
{
	const struct soak_cfg *cfg = R->s.cfg;
	uint64_t start = bench__now_ns();
	uint64_t end = start + (uint64_t)(cfg->duration_s * 1e9);
	uint64_t restart_at = cfg->restart_at >= 0 ? start + (uint64_t)(cfg->restart_at * cfg->duration_s * 1e9) : 0;
	struct progress prog = { .at_ns = start, .cpu_ns = broker__cpu_ns(&R->broker) };
	uint64_t next_progress = start + PROGRESS_NS;
	bool restarted = false;

	R->s.now_ns = start;
	R->s.last_activity_ns = start;
	R->s.publishing = true;
	fprintf(stderr, "dlq_soak: publishing for %.0f s at %.0f msg/s; broker directory %s\n",
			cfg->duration_s, cfg->rate, R->broker.dir);
	while(R->s.now_ns < end){
		if(bench__interrupted()) return -1;
		if(restart_at && !restarted && R->s.now_ns >= restart_at){
			restarted = true;
			if(restart_broker(R)) return -1;
			prog.cpu_ns = 0;
		}
		if(pass(R, STATUS_RUN_MS)) return -1;
		if(R->s.hold_publishing && workers_subscribed(R)){
			R->s.hold_publishing = false;
			R->hold_ms = (double)(R->s.now_ns - R->restarted_ns) / 1e6;
			fprintf(stderr, "dlq_soak: every worker subscribed again %.0f ms after the restart; publishing\n", R->hold_ms);
		}
		if(R->s.now_ns >= next_progress){
			print_progress(R, &prog, start, "publishing");
			next_progress += PROGRESS_NS;
		}
	}
	R->s.publishing = false;
	return 0;
}

/* Settles twice: once as above, then once more after every subscriber
 * disconnected and connected again (a final sweep): a message the broker
 * holds in a session without sending it (2.0.11's in-flight quota
 * bookkeeping can leave one queued behind an empty window) is sent at a
 * reconnection. What arrives only then is counted in sweep. */
static bool settle(struct run *R, uint64_t start, struct soak_counts *sweep)
{
	const struct soak_cfg *cfg = R->s.cfg;
	uint64_t t0 = bench__now_ns();
	struct progress prog = { .at_ns = t0, .c = R->s.ledger.c, .cpu_ns = broker__cpu_ns(&R->broker) };
	uint64_t next_progress = t0 + PROGRESS_NS;
	bool swept = false;
	struct soak_counts at_sweep = {0};
	fprintf(stderr, "dlq_soak: publishing stopped; settling\n");
	while(!bench__interrupted()){
		if(pass(R, STATUS_SETTLE_MS)) return false;
		if(R->s.hold_publishing && workers_subscribed(R)){
			R->s.hold_publishing = false;
			R->hold_ms = (double)(R->s.now_ns - R->restarted_ns) / 1e6;
		}
		if(swept){
			sweep->deliveries = R->s.ledger.c.deliveries - at_sweep.deliveries;
			sweep->dead_letters = R->s.ledger.c.dead_letters - at_sweep.dead_letters;
		}
		if(settled(R)){
			if(swept) return true;
			swept = true;
			at_sweep = R->s.ledger.c;
			fprintf(stderr, "dlq_soak: settled after %.1f s; every subscriber reconnects once (final sweep)\n",
					(double)(R->s.now_ns - t0) / 1e9);
			for(int i = 0; i < cfg->workers; i++){
				worker__reconnect(R->workers[i]);
			}
			inspector__reconnect(R->inspector);
			R->s.last_activity_ns = R->s.now_ns;
		}
		if(R->s.now_ns - t0 > (uint64_t)(cfg->settle_timeout_s * 1e9)){
			fprintf(stderr, "dlq_soak: not settled after %.0f s\n", cfg->settle_timeout_s);
			return false;
		}
		if(R->s.now_ns >= next_progress){
			print_progress(R, &prog, start, "settling");
			next_progress += PROGRESS_NS;
		}
	}
	return false;
}

int main(int argc, char **argv)
{
	struct soak_cfg cfg;
	setup__defaults(&cfg);
	if(setup__parse_args(argc, argv, &cfg)){
		setup__usage(stderr);
		return 2;
	}
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	atexit(broker__stop_all);

	static struct run R;
	R.s.cfg = &cfg;
	R.s.rng = cfg.seed ? cfg.seed : 1;
	R.s.sys_dropped = -1;
	R.s.start_ns = bench__now_ns();
	if(cfg.trace && (R.s.trace = fopen(cfg.trace, "w")) == NULL){
		perror(cfg.trace);
		return 2;
	}
	printf("dlq_soak: seed %llu, %.0f s at %.0f msg/s, %d publishers, %d workers (receive maximum %u), "
			"NACK %.3f, crash %.4f per delivery, poison every %u (NACK) and %u (crash), restart at %.2f\n",
			(unsigned long long)cfg.seed, cfg.duration_s, cfg.rate, cfg.publishers, cfg.workers, cfg.inflight,
			cfg.p_nack, cfg.p_crash, cfg.poison_nack, cfg.poison_crash, cfg.restart_at);
	fflush(stdout);
	if(setup__start_broker(&cfg, &R.broker, &R.bo)) return 1;
	char socket_path[256];
	snprintf(socket_path, sizeof(socket_path), "%s", R.broker.host);
	R.s.socket_path = socket_path;
	R.s.now_ns = bench__now_ns();
	for(int i = 0; i < cfg.publishers; i++){
		R.pubs[i] = publisher__new(&R.s, i);
	}
	for(int i = 0; i < cfg.workers; i++){
		R.workers[i] = worker__new(&R.s, i);
	}
	R.inspector = inspector__new(&R.s);
	R.status = status__new(&R.s);

	/* Every subscriber subscribed before the first message. */
	uint64_t t0 = bench__now_ns();
	bool ready = false;
	while(!ready && !bench__interrupted() && bench__now_ns() - t0 < soak__ms_to_ns(READY_TIMEOUT_MS)){
		if(pass(&R, STATUS_RUN_MS)) break;
		ready = inspector__ready(R.inspector);
		for(int i = 0; i < cfg.workers; i++){
			ready = ready && worker__ready(R.workers[i]);
		}
	}
	int rc = 1;
	bool ok_settled = false;
	uint64_t start = bench__now_ns();
	if(!ready){
		fprintf(stderr, "dlq_soak: the clients did not connect and subscribe\n");
	}else if(run(&R) == 0){
		double publish_s = (double)(bench__now_ns() - start) / 1e9;
		struct soak_counts sweep = {0};
		ok_settled = settle(&R, start, &sweep);
		fresh_status(&R, RESTART_ASK_TIMEOUT_MS, STATUS_SETTLE_MS);
		const struct plugin_status *final = status__latest(R.status, NULL);
		struct plugin_status summed = R.before;
		add_status(&summed, final);
		double total_s = (double)(bench__now_ns() - start) / 1e9;
		double cpu_s = R.cpu_before_s + (double)broker__cpu_ns(&R.broker) / 1e9;
		long rss = broker__rss_kib(&R.broker);
		long dropped = R.s.sys_dropped;

		for(int i = 0; i < nconns(&R); i++){
			mq_disconnect(conn_at(&R, i));
		}
		int status = broker__halt(&R.broker, SIGTERM);
		bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
		static const char *const needles[] = { "dead-lettered message from", "recounts its in-flight window" };
		uint64_t counts[2];
		setup__count_log(&R.broker, needles, counts, 2);

		struct tally_context t = {
			.cfg = &cfg, .final = final, .summed = &summed, .publish_s = publish_s, .total_s = total_s,
			.log_dead_lines = counts[0], .log_recount_lines = counts[1], .dropped_sys = dropped,
			.broker_cpu_s = cpu_s, .broker_rss_kib = rss, .restarts = R.restarts,
			.restart_stop_ms = R.restart_stop_ms, .hold_ms = R.hold_ms, .settled = ok_settled,
			.sweep_deliveries = sweep.deliveries, .sweep_dead_letters = sweep.dead_letters,
		};
		uint64_t unaccounted = ledger__tally(&R.s.ledger, &t);
		const struct soak_counts *c = &R.s.ledger.c;
		if(!clean) printf("The broker did not exit cleanly at the end (status 0x%x).\n", status);
		bool ok = unaccounted == 0 && ok_settled && clean && c->corrupt == 0 && c->unknown_seq == 0;
		printf("\nSoak %s.\n", ok ? "passed" : "FAILED");
		rc = ok ? 0 : 1;
	}
	if(R.broker.running) broker__halt(&R.broker, SIGTERM);
	if(rc == 0 && !cfg.keep){
		broker__remove_dir(&R.broker);
	}else{
		printf("Broker directory kept: %s (configuration, broker.log, state file, mosquitto.db)\n", R.broker.dir);
	}
	for(int i = 0; i < cfg.publishers; i++){
		publisher__free(R.pubs[i]);
	}
	for(int i = 0; i < cfg.workers; i++){
		worker__free(R.workers[i]);
	}
	inspector__free(R.inspector);
	status__free(R.status);
	fpset_free(&R.s.nacked);
	fpset_free(&R.s.ledger.processed_ids);
	fpset_free(&R.s.ledger.dead_seen);
	free(R.s.ledger.recs);
	if(R.s.trace) fclose(R.s.trace);
	return rc;
}
