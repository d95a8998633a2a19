/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The dead-letter store suite's tables (see letters.h): medians over the
 * runs, the store-on runs less the store-off runs of the same index, and
 * the Markdown of memory, listing, save and restart.
 */
#include <stdio.h>
#include <string.h>

#include "letters.h"

static const char *const kind_name[NKIND] = { "on", "off (`dead_letter_keep 0`)" };

static double median_of(double *v, int n)
{
	return n ? stats__median(v, (size_t)n) : -1;
}

/* The median over the runs of one figure of the store-on run less the
 * store-off run of the same index. */
static int both_ok(const struct lcase *lc, int runs)
{
	int m = 0;
	for(int i = 0; i < runs; i++) m += lc->run[K_ON][i].ok && lc->run[K_OFF][i].ok;
	return m;
}

static double median_diff(const struct lcase *lc, int runs, double (*f)(const struct lrun *))
{
	double v[LETTERS_RUNS];
	int m = 0;
	for(int i = 0; i < runs; i++){
		if(lc->run[K_ON][i].ok && lc->run[K_OFF][i].ok) v[m++] = f(&lc->run[K_ON][i]) - f(&lc->run[K_OFF][i]);
	}
	return median_of(v, m);
}

static double rss_growth_b(const struct lrun *r)
{
	return (double)(r->rss1 - r->rss0) * 1024.0;
}

static double state_b(const struct lrun *r)
{
	return (double)r->state_bytes;
}

/* The median of one figure of kind k's runs. */
static double median_kind(const struct lcase *lc, enum lkind k, int runs, double (*f)(const struct lrun *))
{
	double v[LETTERS_RUNS];
	int m = 0;
	for(int i = 0; i < runs; i++){
		if(lc->run[k][i].ok) v[m++] = f(&lc->run[k][i]);
	}
	return median_of(v, m);
}

static double rss0_mib(const struct lrun *r) { return (double)r->rss0 / 1024.0; }
static double rss1_mib(const struct lrun *r) { return (double)r->rss1 / 1024.0; }
static double kept_bytes(const struct lrun *r) { return r->kept_bytes; }
static double fill_save(const struct lrun *r) { return r->fill_save_ms; }
static double restored_mib(const struct lrun *r) { return (double)r->restored_kib / 1024.0; }
static double list_ms(const struct lrun *r) { return r->list_ms; }
static double page_kib(const struct lrun *r) { return r->pages ? (double)r->page_bytes / (double)r->pages / 1024.0 : 0; }
static double fill_rate(const struct lrun *r) { return r->fill_s > 0 ? 1.0 / r->fill_s : 0; }
static double tr_encode(const struct lrun *r) { return r->tr_encode; }
static double tr_write(const struct lrun *r) { return r->tr_write; }
static double tr_exit(const struct lrun *r) { return r->tr_exit; }

/* The median of every restart's start (or save) time of kind k. */
static double median_restarts(const struct lcase *lc, enum lkind k, int runs, bool save)
{
	double v[LETTERS_RUNS * LETTERS_RESTARTS];
	int m = 0;
	for(int i = 0; i < runs; i++){
		const struct lrun *r = &lc->run[k][i];
		for(int j = 0; j < (save ? r->saves : r->timed); j++) v[m++] = save ? r->save_ms[j] : r->start_ms[j];
	}
	return median_of(v, m);
}

/* "total (p50 / p99)" of a restarted broker's listing. */
static void restarted_cell(const struct bench_samples *pages, const double *ms, int runs, char *out, size_t size)
{
	double v[LETTERS_RUNS];
	if(runs == 0 || pages->n == 0){
		snprintf(out, size, "failed");
		return;
	}
	memcpy(v, ms, sizeof(v));
	snprintf(out, size, "%.1f (%.2f / %.2f)", median_of(v, runs), stats__percentile_u64(pages->v, pages->n, 50) / 1e6,
			stats__percentile_u64(pages->v, pages->n, 99) / 1e6);
}

void letters__print(const struct lcase *cases, int ncases, int runs, uint64_t n)
{
	printf("\n#### Memory per kept dead letter (RSS before and after the %llu, store on − store off)\n\n",
			(unsigned long long)n);
	printf("| payload B | RSS, 0 kept, MiB | RSS, %llu kept, MiB | RSS growth per letter, on − off, B | the dead letter "
			"as published (payload + topic + properties), B | RSS beyond it, B/letter | keptDeadLetterBytes per letter "
			"| of it beyond the payload |\n|---|---|---|---|---|---|---|---|\n", (unsigned long long)n);
	for(int i = 0; i < ncases; i++){
		const struct lcase *lc = &cases[i];
		double per = median_diff(lc, runs, rss_growth_b) / (double)n;
		double bare = (double)(lc->dl_topic + lc->dl_payload + lc->dl_props);
		double kb = median_kind(lc, K_ON, runs, kept_bytes) / (double)n;
		if(both_ok(lc, runs) == 0){
			printf("| %zu | failed | | | | | | |\n", lc->payload);
			continue;
		}
		printf("| %zu | %.1f | %.1f | %.0f | %.0f (%zu + %zu + %zu in %d properties) | %.0f | %.0f | %.0f |\n",
				lc->payload, median_kind(lc, K_ON, runs, rss0_mib), median_kind(lc, K_ON, runs, rss1_mib), per, bare,
				lc->dl_payload, lc->dl_topic, lc->dl_props, lc->dl_nprops, per - bare, kb, kb - (double)lc->payload);
	}
	printf("\nProperties count their names and values (a user property's key and value), not MQTT's length "
			"prefixes. The store-off broker passed the same traffic (its RSS growth, the NACK path's, is "
			"subtracted); the first %d messages were acknowledged only, before the first reading. Median of %d "
			"runs, each with fresh brokers.\n", LETTERS_WARMUP, runs);

	printf("\n#### Listing all %llu through listDeadLetters (pages of %d, newest first, following \"next\"), "
			"and getDeadLetter\n\n", (unsigned long long)n, LETTERS_PAGE);
	printf("| payload B | pages | all pages, ms | per page p50 / p99, ms | restarted: all pages, ms (p50 / p99 per "
			"page) | restarted with `dead_letter_access control`: all pages, ms (p50 / p99) | reply per page, KiB "
			"| getDeadLetter p50 / p99, µs | the first getDeadLetter, µs |\n|---|---|---|---|---|---|---|---|---|\n");
	for(int i = 0; i < ncases; i++){
		const struct lcase *lc = &cases[i];
		if(lc->page_ns.n == 0 || lc->get_ns.n == 0){
			printf("| %zu | failed | | | | | | | |\n", lc->payload);
			continue;
		}
		char rchk[64], ctl[64];
		restarted_cell(&lc->page_rchk_ns, lc->list_rchk_ms, lc->list_rchk_runs, rchk, sizeof(rchk));
		restarted_cell(&lc->page_ctl_ns, lc->list_ctl_ms, lc->list_ctl_runs, ctl, sizeof(ctl));
		printf("| %zu | %zu | %.1f | %.2f / %.2f | %s | %s | %.1f | %.0f / %.0f | %.0f |\n", lc->payload,
				lc->page_ns.n / (size_t)runs, median_kind(lc, K_ON, runs, list_ms),
				stats__percentile_u64(lc->page_ns.v, lc->page_ns.n, 50) / 1e6,
				stats__percentile_u64(lc->page_ns.v, lc->page_ns.n, 99) / 1e6, rchk, ctl,
				median_kind(lc, K_ON, runs, page_kib),
				stats__percentile_u64(lc->get_ns.v, lc->get_ns.n, 50) / 1e3,
				stats__percentile_u64(lc->get_ns.v, lc->get_ns.n, 99) / 1e3, lc->first_get_us);
	}
	printf("\nTimes from the command's publish to its reply's arrival at the client (unix socket); pages and "
			"gets pooled over the %d runs, \"all pages\" the median of the runs. %d gets, of the first page's "
			"letters. The default `dead_letter_access check` asks the broker's access control "
			"(mosquitto_acl_check, READ) about every letter a page walks (no ACL is configured here); "
			"\"restarted\": the same letters listed on the broker restarted from its state file (the first "
			"restart, then the second with `dead_letter_access control`, which asks nothing).\n", runs, LETTERS_GETS);

	printf("\n#### Save and restart with the state file (`plugin_opt_state_file`)\n\n");
	printf("| payload B | store | state file, MB | state file per letter, on − off, B | save after the %llu "
			"(SIGTERM to exit), ms | save after a restart, ms | under strace: SIGTERM to the new file's open / "
			"its write and fsync to the rename / rename to exit, ms | restart (fork to \"running\"), ms "
			"| RSS restarted, MiB | originals NACKed per s |\n|---|---|---|---|---|---|---|---|---|---|\n",
			(unsigned long long)n);
	for(int i = 0; i < ncases; i++){
		const struct lcase *lc = &cases[i];
		for(int k = 0; k < NKIND; k++){
			double state = median_kind(lc, (enum lkind)k, runs, state_b);
			if(state < 0 || (k == K_ON && both_ok(lc, runs) == 0)){
				printf("| %zu | %s | failed | | | | | | | |\n", lc->payload, kind_name[k]);
				continue;
			}
			char per[32] = "";
			if(k == K_ON) snprintf(per, sizeof(per), "%.0f", median_diff(lc, runs, state_b) / (double)n);
			char tr[64] = "not traced";
			double enc = median_kind(lc, (enum lkind)k, runs, tr_encode);
			if(enc >= 0){
				snprintf(tr, sizeof(tr), "%.1f / %.1f / %.1f", enc, median_kind(lc, (enum lkind)k, runs, tr_write),
						median_kind(lc, (enum lkind)k, runs, tr_exit));
			}
			printf("| %zu | %s | %.2f | %s | %.0f | %.0f | %s | %.0f | %.1f | %.0f |\n", lc->payload, kind_name[k],
					state / 1e6, per, median_kind(lc, (enum lkind)k, runs, fill_save),
					median_restarts(lc, (enum lkind)k, runs, true), tr,
					median_restarts(lc, (enum lkind)k, runs, false),
					median_kind(lc, (enum lkind)k, runs, restored_mib),
					(double)n * median_kind(lc, (enum lkind)k, runs, fill_rate));
		}
	}
	printf("\nSave: the broker's shutdown with the plugin's snapshot of all it keeps (the store-off row is the "
			"rest: the %llu NACKed records, the broker's own exit); \"after a restart\": the untraced stops of the "
			"restarted brokers. Under strace: the first restarted broker's stop, strace -ttt attached, tracing "
			"open, rename and exit only; the plugin encodes the snapshot before it opens the file. Restart: the plugin restores the file and "
			"saves it again before the broker runs; polled every 10 ms. Medians over %d runs (restarts: %d per "
			"run); the restored count of kept letters was checked in the log each time.\n",
			(unsigned long long)n, runs, LETTERS_RESTARTS);
}
