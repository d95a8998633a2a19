/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The acknowledgement deadlines suite (issue 35; --only deadlines, not part
 * of the default run): what a policy's ack_timeout costs, in instructions
 * (callgrind), on the real broker with the real plugin. What was decided:
 *   - Brokers: the benchmark's 100 policies, the tracked one (bench/tracked/+
 *     max_attempts=3 dead_letter=dead/bench retry_to=delivery) with or
 *     without ack_timeout=1h, and one more, bench/short/+, with the same
 *     shape and, where the tracked one has a deadline, ack_timeout=10s (the
 *     short clients' topics). On 2.0 a policy with ack_timeout needs
 *     redelivery tracking (the broker shows a delivery only through its
 *     access check): those brokers have plugin_opt_redelivery_tracking
 *     allow, and a case without ack_timeout but with it shows what that
 *     alone costs. nack_window 1h and max_pending_bytes 1GiB: no record
 *     expires or is evicted during a run; sys_interval 0 for the broker and
 *     the plugin, as in the callgrind suite.
 *   - One broker per case, under callgrind; callgrind_control zeroes its
 *     counts and dumps them after each phase (cg_control.c), so each dump
 *     holds one phase alone. Per message: the load driver's workload of
 *     cfg->callgrind_count messages (QoS 1, one publisher, one subscriber,
 *     200 B, 50 in flight) minus one of a tenth of it, the median of
 *     cfg->callgrind_pairs pairs (3, --quick 1) with their range; the
 *     subscriber either only receives (libmosquitto's PUBACK) or ACKs each
 *     delivery on receipt ($CONTROL/dlq/v1/ack, QoS 1, the dlq-id as the
 *     payload), on its own connection, and the message is done when the
 *     broker has acknowledged the ACK. So with ACKs a message is two
 *     PUBLISHes into the broker. Each workload's clients have ids of their
 *     own, as on the callgrind suite's fresh brokers.
 *   - The per-ACK split: one more broker per ACKing case collecting inside
 *     adapter__control only (--toggle-collect), the large workload: the
 *     callback's Ir per ACK, and that less the broker's functions it calls
 *     (cg__split_broker_calls), the plugin's own work.
 *   - Pending deliveries (the ack_timeout case): the broker starts with
 *     its instrumentation off (--instr-atstart=no), which callgrind_control
 *     turns on for each measured phase and off for filling. A holder (an
 *     MQTT v5 client that receives and never settles) subscribes to
 *     bench/tracked/hold, in the tracked policy, so its deliveries await
 *     settlement beside the measured ones, in the same queue; the per-
 *     message figures are taken with 0 held, then after filling it to
 *     1,000 and to 100,000 (--quick 1,000 and 10,000); getStatus's
 *     awaitingAck is shown for each. On 2.1 each held delivery's clock
 *     runs (a clock starts at each send); on 2.0 only the holder's first
 *     delivery's does, and the others wait in its list (a client is taken
 *     to work through its deliveries one at a time).
 *   - Ticks: at each number held, the broker is left alone for 2 s and
 *     dumped: adapter__tick's Ir over the number of ticks (the calls the
 *     profile counts), a tick with nothing running out. Then 1,000 short
 *     clients (--quick 100; MQTT v5, one subscription each, to
 *     bench/short/<k>) receive one message each, the clocks of which start
 *     within a second or so (on both lines: each client's one delivery is
 *     its first); the counts are zeroed, the broker is stopped (SIGSTOP)
 *     before the first of those clocks can run out and continued (SIGCONT)
 *     once the last has, so that all 1,000 run out in the first tick after
 *     it. The phase waits until the 1,000 retry copies have reached their
 *     clients, and 0.5 s more, then dumps: adapter__tick's Ir less the idle
 *     ticks' (their number times an idle tick with 100,000 held) is the
 *     work the timeouts gave the ticks (the expiry tick, and the next
 *     ticks' settling of the copies' envelopes), per expiring delivery;
 *     engine__attempt_failed's share (the retry copy made and published)
 *     beside it; and the broker's whole count over the phase, per
 *     expiring delivery (also the copy's routing, delivery and PUBACK, and
 *     its new clock). The stop is checked: no copy may arrive before
 *     SIGCONT, and all must after it.
 * Nothing is asserted: only a broker or a phase that fails fails the run.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "callgrind.h"
#include "deadlines.h"
#include "suite.h"

#define DL_READY_MS 180000
#define DL_LOAD_TIMEOUT_MS 600000
#define DL_LOAD_WINDOW 50
#define DL_LONG "1h"
#define DL_SHORT "10s"
#define DL_SHORT_MS 10000
#define DL_IDLE_MS 2000
/* Before each dump: the broker finishes the last ACKs and DISCONNECTs. */
#define DL_SETTLE_MS 300
#define DL_EXPIRING 1000
#define DL_EXPIRING_QUICK 100
#define DL_NACK_WINDOW "1h"
#define DL_MAX_PENDING "1GiB"
#define DL_LEVELS 3

/* The functions read from each dump. */
enum dfn { F_MESSAGE, F_CONTROL, F_TICK, F_ACL, F_OUT, F_ATTEMPT, NF };
static const char *const fn_list[NF] = {
	"adapter__message", "adapter__control", "adapter__tick", "adapter__acl_check_v20", "adapter__message_out_v21",
	"engine__attempt_failed",
};

struct dcase {
	const char *name;
	const char *label;
	bool ack_timeout;            /* the tracked policy's ack_timeout=1h, bench/short/+'s 10s */
	bool redelivery;             /* plugin_opt_redelivery_tracking allow (2.0 needs it with ack_timeout) */
	enum load_kind load;
	bool pending;                /* the holder, the numbers held, the ticks */
	bool split;                  /* the per-ACK split */
	bool only20;
};

static const struct dcase cases[] = {
	{ "off", "ack_timeout off, deliveries not settled", false, false, LOAD_TRACKED, false, false, false },
	{ "off-ack", "ack_timeout off, each delivery ACKed", false, false, LOAD_ACK, false, true, false },
	{ "off-ack-redelivery", "ack_timeout off, ACKed, `redelivery_tracking allow`", false, true, LOAD_ACK, false, false,
		true },
	{ "on", "ack_timeout=1h, each delivery ACKed", true, false, LOAD_ACK, true, true, false },
};
enum { NCASES = sizeof(cases) / sizeof(cases[0]) };

/* Per message of a workload pair. */
struct dmeas {
	bool ok;
	double per[NF], total, plugin;  /* medians of the pairs */
	double lo, hi;               /* the range of total over the pairs */
	int pairs;
};

/* Ticks of an idle phase. */
struct dtick {
	bool ok;
	long long ticks;
	double ir;                   /* adapter__tick, all of them */
};

struct dlevel {
	uint64_t held;
	struct dmeas msg;
	struct dtick idle;
	bool st_ok;
	struct dl_status st;
};

struct dexpiry {
	bool ok;
	uint64_t k;
	long long ticks;
	double tick_ir, attempt_ir, total, idle_per_tick;
	double stopped_after_ms;     /* from the first short publish to SIGSTOP */
	double stopped_for_ms;
	uint64_t copies;
	bool st_ok;
	struct dl_status before, after;
};

struct dresult {
	bool ran, ok;
	struct dlevel lv[DL_LEVELS];
	int nlv;
	bool split_ok;
	double split_total, split_n;
	struct cg_broker_calls calls;
	struct dexpiry ex;
};

struct dctx {
	const struct bench_config *cfg;
	bool v21;
	uint64_t n0, n1;
	char dir[192];
};

static bool redelivery_of(const struct dctx *x, const struct dcase *dc)
{
	return dc->redelivery || (dc->ack_timeout && !x->v21);
}

/* The broker options of a case; suite and extra are filled here and must
 * outlive bo. */
static void case_broker(const struct dctx *x, const struct dcase *dc, const char *suite[2], const char *extra[2],
		struct broker_opts *bo)
{
	static const char short_on[] = DL_SHORT_FILTER " max_attempts=3 dead_letter=" BENCH_DEAD_LETTER
			" retry_to=delivery ack_timeout=" DL_SHORT;
	static const char short_off[] = DL_SHORT_FILTER " max_attempts=3 dead_letter=" BENCH_DEAD_LETTER
			" retry_to=delivery";
	suite[0] = redelivery_of(x, dc) ? "redelivery_tracking allow" : NULL;
	suite[1] = NULL;
	extra[0] = dc->ack_timeout ? short_on : short_off;
	extra[1] = NULL;
	memset(bo, 0, sizeof(*bo));
	bo->kind = BROKER_PLUGIN;
	bo->plugin_path = x->cfg->plugin_path;
	bo->mosquitto_bin = x->cfg->mosquitto_bin;
	bo->tcp = x->cfg->tcp;
	bo->cpu = x->cfg->broker_cpu;
	bo->no_sys_topics = true;
	bo->plugin_opts = x->cfg->plugin_opts;
	bo->suite_opts = suite;
	bo->nack_window = DL_NACK_WINDOW;
	bo->max_pending = DL_MAX_PENDING;
	bo->tracked_policy_opts = dc->ack_timeout ? "ack_timeout=" DL_LONG : NULL;
	bo->extra_policies = extra;
	bo->valgrind_root = x->cfg->valgrind_root;
	bo->ready_timeout_ms = DL_READY_MS;
}

static int workload(const struct dcase *dc, const struct broker *b, uint64_t count)
{
	/* Client ids of their own in each workload, as on the callgrind
	 * suite's fresh brokers: a subscriber's id seen before carries what
	 * the plugin keeps for it (2.1's sends of the last workload's records,
	 * kept for their NACK window). */
	static unsigned runs;
	char label[32];
	snprintf(label, sizeof(label), "dl%u", runs++);
	struct load_opts o = {
		.target = { { .broker = b, .kind = dc->load } }, .targets = 1, .qos = 1, .pairs = 1, .fanout = 1,
		.payload_len = BENCH_PAYLOAD, .window = DL_LOAD_WINDOW, .count = count, .timeout_ms = DL_LOAD_TIMEOUT_MS,
		.label = label,
	};
	struct load_result res;
	int rc = load__run(&o, &res);
	if(rc == 0 && (res.untagged || res.unfinished)){
		fprintf(stderr, "dlq_bench: deadlines: %s: %llu untagged, %llu unfinished\n", dc->name,
				(unsigned long long)res.untagged, (unsigned long long)res.unfinished);
		rc = -1;
	}
	load__result_free(&res);
	return rc;
}

/* Waits ms (serving s's clients, if any). */
static int pause_ms(struct dl_set *s, int ms)
{
	if(s && s->n) return dl_set__idle(s, ms);
	bench__sleep_ms((unsigned)ms);
	return bench__interrupted() ? -1 : 0;
}

/* Dumps the next part and reads it. */
static int dump(const struct dctx *x, const struct broker *b, const char *out, int *part, double ir[NF],
		double *total, double *plugin, long long *ticks)
{
	char path[400];
	if(cg__dump_part(x->cfg->valgrind_root, b->pid, out, ++*part, path, sizeof(path))) return -1;
	cg__parse_named(path, fn_list, NF, ir, total, plugin);
	if(ticks) *ticks = cg__calls(path, "adapter__tick");
	return *total > 0 ? 0 : -1;
}

/* The per-message figures (the median of cfg->callgrind_pairs pairs) and
 * an idle phase's ticks, on b as it is. */
static int measure(const struct dctx *x, const struct dcase *dc, const struct broker *b, struct dl_set *s,
		const char *out, int *part, struct dlevel *lv)
{
	const char *root = x->cfg->valgrind_root;
	double a[NF], c[NF], ta, tc, pa, pc;
	double per[CG_PAIRS_LIMIT][NF + 2];
	int pairs = x->cfg->callgrind_pairs < 1 ? 1 : x->cfg->callgrind_pairs > CG_PAIRS_LIMIT ? CG_PAIRS_LIMIT
			: x->cfg->callgrind_pairs;
	double d = (double)(x->n1 - x->n0);
	for(int k = 0; k < pairs; k++){
		fprintf(stderr, "deadlines: %s, %llu held: %llu and %llu messages (pair %d of %d)\n", dc->name,
				(unsigned long long)lv->held, (unsigned long long)x->n0, (unsigned long long)x->n1, k + 1, pairs);
		if(cg__control(root, b->pid, "-z") || workload(dc, b, x->n0) || pause_ms(s, DL_SETTLE_MS)
				|| dump(x, b, out, part, a, &ta, &pa, NULL) || workload(dc, b, x->n1) || pause_ms(s, DL_SETTLE_MS)
				|| dump(x, b, out, part, c, &tc, &pc, NULL)){
			return -1;
		}
		for(int f = 0; f < NF; f++) per[k][f] = (c[f] - a[f]) / d;
		per[k][NF] = (tc - ta) / d;
		per[k][NF + 1] = (pc - pa) / d;
	}
	for(int f = 0; f < NF + 2; f++){
		double v[CG_PAIRS_LIMIT];
		for(int k = 0; k < pairs; k++) v[k] = per[k][f];
		double m = stats__median(v, (size_t)pairs);
		if(f < NF) lv->msg.per[f] = m;
		else if(f == NF) lv->msg.total = m;
		else lv->msg.plugin = m;
	}
	lv->msg.lo = lv->msg.hi = per[0][NF];
	for(int k = 1; k < pairs; k++){
		if(per[k][NF] < lv->msg.lo) lv->msg.lo = per[k][NF];
		if(per[k][NF] > lv->msg.hi) lv->msg.hi = per[k][NF];
	}
	lv->msg.pairs = pairs;
	lv->msg.ok = true;
	fprintf(stderr, "deadlines: %s, %llu held: idle ticks\n", dc->name, (unsigned long long)lv->held);
	if(cg__control(root, b->pid, "-z") || pause_ms(s, DL_IDLE_MS)
			|| dump(x, b, out, part, a, &ta, &pa, &lv->idle.ticks)){
		return -1;
	}
	lv->idle.ir = a[F_TICK];
	lv->idle.ok = lv->idle.ticks > 0;
	return 0;
}

/* The expiry phase (see the top of this file), on the broker b with its
 * holder in s. */
static int expiry(const struct dctx *x, const struct broker *b, struct dl_set *s, const char *out, int *part,
		struct dexpiry *ex)
{
	const char *root = x->cfg->valgrind_root;
	double ir[NF], total, plugin;
	uint64_t first_ns;
	ex->k = x->cfg->quick ? DL_EXPIRING_QUICK : DL_EXPIRING;
	fprintf(stderr, "deadlines: %llu short clients, one delivery each\n", (unsigned long long)ex->k);
	if(cg__control(root, b->pid, "--instr=off") || dl_set__add_shorts(s, (int)ex->k) || dl_set__fill_shorts(s, &first_ns)){
		return -1;
	}
	ex->st_ok = dl_set__status(s, &ex->before) == 0;
	if(cg__control(root, b->pid, "--instr=on") || cg__control(root, b->pid, "-z")) return -1;
	uint64_t t_stop = bench__now_ns();
	ex->stopped_after_ms = (double)(t_stop - first_ns) / 1e6;
	if(ex->stopped_after_ms > DL_SHORT_MS - 1000){
		fprintf(stderr, "dlq_bench: deadlines: %.0f ms from the first short message to the stop: its clock may "
				"have run out already\n", ex->stopped_after_ms);
		return -1;
	}
	fprintf(stderr, "deadlines: broker stopped (SIGSTOP) %.0f ms after the first short message, until all %llu clocks "
			"ran out\n", ex->stopped_after_ms, (unsigned long long)ex->k);
	if(kill(b->pid, SIGSTOP)) return -1;
	/* Every clock started by the last delivery's arrival. */
	uint64_t until = s->last_short_ns + (uint64_t)(DL_SHORT_MS + 1500) * 1000000ull;
	uint64_t now = bench__now_ns();
	int rc = pause_ms(s, until > now ? (int)((until - now) / 1000000) : 0);
	uint64_t early = dl_set__short_copies(s);
	ex->stopped_for_ms = (double)(bench__now_ns() - t_stop) / 1e6;
	kill(b->pid, SIGCONT);
	if(rc) return -1;
	if(early){
		fprintf(stderr, "dlq_bench: deadlines: %llu retry copies came before the broker was continued\n",
				(unsigned long long)early);
		return -1;
	}
	if(dl_set__wait_copies(s, ex->k, 120000) || pause_ms(s, 500) || dump(x, b, out, part, ir, &total, &plugin,
			&ex->ticks)){
		return -1;
	}
	ex->copies = dl_set__short_copies(s);
	ex->tick_ir = ir[F_TICK];
	ex->attempt_ir = ir[F_ATTEMPT];
	ex->total = total;
	ex->st_ok = ex->st_ok && dl_set__status(s, &ex->after) == 0;
	ex->ok = true;
	return 0;
}

/* The per-ACK split: a broker collecting inside adapter__control only. */
static int split(const struct dctx *x, const struct dcase *dc, struct dresult *r)
{
	static const char *const toggle[] = { "adapter__control", NULL };
	const char *suite[2], *extra[2];
	struct broker_opts bo;
	struct broker b;
	char out[320];
	case_broker(x, dc, suite, extra, &bo);
	snprintf(out, sizeof(out), "%s/callgrind.deadlines.%s.control-only", x->dir, dc->name);
	bo.valgrind_out = out;
	bo.valgrind_toggle = toggle;
	fprintf(stderr, "deadlines: %s, the ACK callback only (%llu messages)\n", dc->name, (unsigned long long)x->n1);
	if(broker__start(&b, &bo)) return -1;
	int rc = workload(dc, &b, x->n1);
	if(rc == 0) bench__sleep_ms(DL_SETTLE_MS);
	if(rc && !bench__interrupted()) broker__print_log(&b);
	int status = broker__stop(&b);
	if(rc || status != 0) return -1;
	if(cg__split_broker_calls(out, &r->split_total, &r->calls)) return -1;
	r->split_n = (double)x->n1;
	r->split_ok = true;
	return 0;
}

static int run_case(const struct dctx *x, const struct dcase *dc, struct dresult *r)
{
	static const char *const instr_off[] = { "--instr-atstart=no", NULL };
	const uint64_t levels[DL_LEVELS] = { 0, 1000, x->cfg->quick ? 10000 : 100000 };
	const char *suite[2], *extra[2];
	struct broker_opts bo;
	struct broker b;
	struct dl_set s;
	char out[320];
	int part = 0, rc = -1;

	memset(&s, 0, sizeof(s));
	r->ran = true;
	case_broker(x, dc, suite, extra, &bo);
	snprintf(out, sizeof(out), "%s/callgrind.deadlines.%s", x->dir, dc->name);
	bo.valgrind_out = out;
	if(dc->pending) bo.valgrind_args = instr_off;
	fprintf(stderr, "deadlines: %s: a broker under callgrind\n", dc->name);
	if(broker__start(&b, &bo)) return -1;
	if(dc->pending){
		if(dl_set__open(&s, &b, "dl", true)) goto done;
		for(int i = 0; i < DL_LEVELS; i++){
			struct dlevel *lv = &r->lv[i];
			lv->held = levels[i];
			uint64_t more = levels[i] - (i ? levels[i - 1] : 0);
			if(more){
				fprintf(stderr, "deadlines: filling the holder to %llu\n", (unsigned long long)levels[i]);
				if(dl_set__fill_holder(&s, more)) goto done;
			}
			/* getStatus with the instrumentation off: not counted. */
			lv->st_ok = dl_set__status(&s, &lv->st) == 0;
			if(lv->st_ok){
				fprintf(stderr, "deadlines: getStatus: awaitingAck %.0f, acks %.0f, acksRefused %.0f, ackTimeouts %.0f, "
						"records %.0f, evicted %.0f\n", lv->st.awaiting, lv->st.acks, lv->st.acks_refused, lv->st.timeouts,
						lv->st.records, lv->st.evicted);
			}
			if(cg__control(x->cfg->valgrind_root, b.pid, "--instr=on") || measure(x, dc, &b, &s, out, &part, lv)
					|| cg__control(x->cfg->valgrind_root, b.pid, "--instr=off")){
				goto done;
			}
			r->nlv = i + 1;
		}
		if(expiry(x, &b, &s, out, &part, &r->ex)) goto done;
		r->ex.idle_per_tick = r->lv[DL_LEVELS - 1].idle.ok
				? r->lv[DL_LEVELS - 1].idle.ir / (double)r->lv[DL_LEVELS - 1].idle.ticks : 0;
	}else{
		r->lv[0].held = 0;
		if(measure(x, dc, &b, NULL, out, &part, &r->lv[0])) goto done;
		r->nlv = 1;
	}
	rc = 0;

done:
	if(rc && !bench__interrupted()) broker__print_log(&b);
	dl_set__close(&s);
	/* The shutdown is not measured: killed, not waited for. */
	pid_t pid = b.pid;
	broker__halt(&b, SIGKILL);
	broker__remove_dir(&b);
	cg__remove_vgdb_files(pid);
	if(rc == 0 && dc->split && !bench__interrupted()) rc = split(x, dc, r);
	r->ok = rc == 0;
	return rc;
}

/* ---- the tables ---- */

static void cell(char *buf, size_t len, bool ok, double v)
{
	if(ok) snprintf(buf, len, "%.0f", v);
	else snprintf(buf, len, "–");
}

/* The broker's Ir per message, with the range over the pairs. */
static void total_cell(char *buf, size_t len, const struct dmeas *m)
{
	if(m->pairs > 1) snprintf(buf, len, "%.0f [%.0f-%.0f]", m->total, m->lo, m->hi);
	else snprintf(buf, len, "%.0f", m->total);
}

static void print_tables(const struct dctx *x, const struct dresult *res)
{
	const char *out_fn = x->v21 ? "adapter__message_out_v21" : "adapter__acl_check_v20";
	int fo = x->v21 ? F_OUT : F_ACL;
	const struct dresult *base = &res[0];
	double base_total = base->ok ? base->lv[0].msg.total : 0;

	printf("\n#### Per message (callgrind, Ir per published message: the %llu- minus the %llu-message workload, "
			"median of %d pairs [range])\n\n", (unsigned long long)x->n1, (unsigned long long)x->n0,
			base->lv[0].msg.pairs);
	printf("| case | broker | vs the first row | adapter__message | adapter__control (the ACK) | %s "
			"| adapter__tick | plugin callbacks |\n|---|---|---|---|---|---|---|---|\n", out_fn);
	for(int i = 0; i < NCASES; i++){
		const struct dcase *dc = &cases[i];
		const struct dresult *r = &res[i];
		if(!r->ran){
			printf("| %s | n/a on this line | | | | | | |\n", dc->label);
			continue;
		}
		const struct dmeas *m = &r->lv[0].msg;
		if(!m->ok){
			printf("| %s | failed | | | | | | |\n", dc->label);
			continue;
		}
		char vs[32] = "–";
		if(base_total > 0 && i > 0) snprintf(vs, sizeof(vs), "%+.0f (%.3fx)", m->total - base_total, m->total / base_total);
		char tot[64];
		total_cell(tot, sizeof(tot), m);
		printf("| %s%s | %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f |\n", dc->label,
				redelivery_of(x, dc) && !dc->redelivery ? ", `redelivery_tracking allow`" : "", tot, vs,
				m->per[F_MESSAGE], m->per[F_CONTROL], m->per[fo], m->per[F_TICK], m->plugin);
	}

	printf("\nThe plugin's own work per ACK (a broker collecting inside adapter__control only, %llu ACKs; the "
			"callback less the broker's functions it calls):", (unsigned long long)x->n1);
	bool any = false;
	for(int i = 0; i < NCASES; i++){
		const struct dresult *r = &res[i];
		if(!cases[i].split || !r->ran) continue;
		if(!r->split_ok){
			printf("%s %s: failed", any ? ";" : "", cases[i].label);
			any = true;
			continue;
		}
		double n = r->split_n;
		printf("%s %s: %.0f Ir (the callback %.0f, the broker's functions %.0f:", any ? ";" : "", cases[i].label,
				(r->split_total - r->calls.ir) / n, r->split_total / n, r->calls.ir / n);
		for(int k = 0; k < r->calls.n && k < 4; k++){
			printf("%s `%s` %.0f", k ? "," : "", r->calls.name[k], r->calls.by_name[k] / n);
		}
		printf(")");
		any = true;
	}
	printf(".\n");

	const struct dresult *on = NULL;
	for(int i = 0; i < NCASES; i++){
		if(cases[i].pending && res[i].ran) on = &res[i];
	}
	if(on == NULL) return;
	printf("\n#### With deliveries awaiting settlement (ack_timeout=%s, held by a subscriber that receives and never "
			"settles)\n\n", DL_LONG);
	printf("| held | awaitingAck (getStatus) | broker Ir/msg | adapter__message | adapter__control (the ACK) | %s "
			"| adapter__tick per msg | an idle tick (ticks in %d s) |\n|---|---|---|---|---|---|---|---|\n", out_fn,
			DL_IDLE_MS / 1000);
	for(int i = 0; i < DL_LEVELS; i++){
		const struct dlevel *lv = &on->lv[i];
		char aw[32];
		if(i >= on->nlv && !lv->msg.ok){
			printf("| %llu | failed | | | | | | |\n", (unsigned long long)lv->held);
			continue;
		}
		cell(aw, sizeof(aw), lv->st_ok && lv->st.awaiting >= 0, lv->st.awaiting);
		char idle[64] = "–";
		if(lv->idle.ok) snprintf(idle, sizeof(idle), "%.0f (%lld)", lv->idle.ir / (double)lv->idle.ticks, lv->idle.ticks);
		char tot[64];
		total_cell(tot, sizeof(tot), &lv->msg);
		printf("| %llu | %s | %s | %.0f | %.0f | %.0f | %.0f | %s |\n", (unsigned long long)lv->held, aw,
				tot, lv->msg.per[F_MESSAGE], lv->msg.per[F_CONTROL], lv->msg.per[fo], lv->msg.per[F_TICK],
				idle);
	}
	printf("\nHeld: the holder's deliveries, before the workloads (whose deliveries are ACKed); %s.\n",
			x->v21 ? "on 2.1 the clock of each runs (one queue, ack_timeout=" DL_LONG ")"
			: "on 2.0 only the holder's first delivery's clock runs; the rest wait in its list, in order");

	const struct dexpiry *ex = &on->ex;
	const struct dlevel *top = &on->lv[DL_LEVELS - 1];
	printf("\n#### A tick in which %llu deliveries run out (ack_timeout=%s, one delivery to each of %llu subscribers; "
			"%llu held as above)\n\n", (unsigned long long)ex->k, DL_SHORT, (unsigned long long)ex->k,
			(unsigned long long)top->held);
	if(!ex->ok){
		printf("Failed (see the log on stderr).\n");
		return;
	}
	double extra = ex->tick_ir - (double)ex->ticks * ex->idle_per_tick;
	printf("| figure | Ir | per expiring delivery |\n|---|---|---|\n");
	printf("| an idle tick, %llu held (none running out) | %.0f | – |\n", (unsigned long long)top->held,
			ex->idle_per_tick);
	printf("| adapter__tick over the phase (%lld ticks) | %.0f | %.0f |\n", ex->ticks, ex->tick_ir,
			ex->tick_ir / (double)ex->k);
	printf("| of which beyond %lld idle ticks: the timeouts' work | %.0f | %.0f |\n", ex->ticks, extra,
			extra / (double)ex->k);
	printf("| of which engine__attempt_failed (the retry copy made and published) | %.0f | %.0f |\n", ex->attempt_ir,
			ex->attempt_ir / (double)ex->k);
	printf("| the broker over the phase (also each copy's routing, delivery, PUBACK and new clock) | %.0f | %.0f |\n",
			ex->total, ex->total / (double)ex->k);
	printf("\nThe broker was stopped %.0f ms after the first of the %llu messages and continued %.0f ms later; "
			"%llu retry copies arrived, none before it was continued.",
			ex->stopped_after_ms, (unsigned long long)ex->k, ex->stopped_for_ms, (unsigned long long)ex->copies);
	if(ex->st_ok){
		printf(" getStatus: ackTimeouts %.0f → %.0f, retryCopies %.0f → %.0f, awaitingAck %.0f → %.0f (the copies' "
				"own deliveries await settlement in turn).", ex->before.timeouts, ex->after.timeouts,
				ex->before.retry_copies, ex->after.retry_copies, ex->before.awaiting, ex->after.awaiting);
	}
	printf("\n");
}

int suite__deadlines(const struct bench_config *cfg)
{
	struct dctx x = { .cfg = cfg };
	struct dresult res[NCASES];
	int rc = 0;

	memset(res, 0, sizeof(res));
	x.v21 = !strncmp(cfg->broker_version, "2.1", 3);
	x.n1 = cfg->callgrind_count;
	x.n0 = x.n1 / 10;
	printf("\n### Acknowledgement deadlines (issue 35): callgrind, QoS 1, 1→1, %d B, %d policies + bench/short/+, "
			"nack_window %s, broker %s\n", BENCH_PAYLOAD, BENCH_POLICIES, DL_NACK_WINDOW,
			cfg->broker_version[0] ? cfg->broker_version : "?");
	if(cfg->no_valgrind){
		printf("\nSkipped: --no-callgrind (every figure of this suite is callgrind's).\n");
		return 0;
	}
	if(cfg->callgrind_dir){
		snprintf(x.dir, sizeof(x.dir), "%s", cfg->callgrind_dir);
		mkdir(x.dir, 0755);
	}else{
		snprintf(x.dir, sizeof(x.dir), "/tmp/dlq-bench-deadlines-XXXXXX");
		if(mkdtemp(x.dir) == NULL){
			perror("dlq_bench: mkdtemp");
			return -1;
		}
	}
	for(int i = 0; i < NCASES && !bench__interrupted(); i++){
		if(cases[i].only20 && x.v21) continue;
		if(run_case(&x, &cases[i], &res[i])) rc = -1;
	}
	print_tables(&x, res);
	printf("\ncallgrind profiles kept in %s (callgrind.deadlines.CASE.N: one part per phase).\n", x.dir);
	return rc;
}
