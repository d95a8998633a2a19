/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The dead-letter store suite (issue 24; --only letters, not part of the
 * default run): what the store costs with N kept dead letters (10,000;
 * --quick 1,000). What was decided:
 *   - Brokers: the one policy, `jobs/# max_attempts=1
 *     dead_letter=dead/jobs`, plugin_opt_state_file in the broker's
 *     directory and state_save_interval 1d (no interval save falls in a
 *     run). Two kinds, the same traffic: the store on (the default bound,
 *     64 MiB, which N letters stay under) and the store off
 *     (plugin_opt_dead_letter_keep 0), whose figures are subtracted: what
 *     is left is the store's alone, not the NACK path's (the records the
 *     NACKs leave in the ledger, the dead letters' publishing).
 *   - Traffic: one client (letters_client.c) subscribed to jobs/#, to
 *     dead/jobs and to a reply topic of its own first passes LETTERS_WARMUP
 *     tracked messages it only acknowledges (the connection's buffers, the
 *     ledger's first tables: nothing kept), then N originals of the payload
 *     size at QoS 1, 50 at a time, each NACKed once, so each becomes a dead
 *     letter; it counts them as they come back on dead/jobs, and measures
 *     the first one (topic, payload, properties as published).
 *   - Memory: VmRSS (as memory.c) before and after the N, the store-on
 *     broker's growth less the store-off broker's, per letter; beside it
 *     the dead letter's own bytes and getStatus's keptDeadLetterBytes (what
 *     the store counts against its bound) per letter.
 *   - Listing (store on): every letter through listDeadLetters pages of
 *     100, newest first, following "next" to the end; each page timed from
 *     the command's publish to the reply's arrival at the client, which
 *     checks that the pages held N letters and the first page's "matched"
 *     said N. Then
 *     LETTERS_GETS getDeadLetter of letters from the first page, timed the
 *     same way. The default dead_letter_access check asks the broker's
 *     access control about every letter a page walks (the first page's
 *     "matched" counts them all; a later page starts where the last ended
 *     and walks its own letters); the pages are listed again on the first restarted broker
 *     (check) and on the second, whose configuration says
 *     dead_letter_access control.
 *   - Save: from SIGTERM to the broker's exit (polled every ms), which is
 *     the broker's own shutdown plus the plugin's snapshot of everything
 *     it keeps (encoded into one buffer, written, fsynced, renamed); N = 0
 *     kept (the store-off broker) shows the rest. The state file's size
 *     after it. Restart: the same broker started again in its directory
 *     from that file, from fork to its "running" line (polled every 10
 *     ms): the plugin restores the file, trims it to the bound and saves a
 *     fresh snapshot before the broker goes on (persist__start); its log
 *     line is checked for N kept dead letters. Each restarted broker is
 *     stopped again with SIGTERM, timed: a save of the restored state. The
 *     first of these stops runs under strace -ttt (open, rename and exit
 *     only; skipped without strace), which splits it: SIGTERM's delivery
 *     to the new file's open (the broker's shutdown before the plugin's
 *     cleanup, and the snapshot's encoding), the open to the rename (its
 *     write and fsync), the rename to the exit (the directory's fsync,
 *     freeing everything). Its SIGTERM-to-exit time is not counted.
 *   - Each (payload size, kind) runs LETTERS_RUNS times with fresh brokers
 *     (--quick once); memory and the state file per letter are medians of
 *     the runs' differences, times are medians, page and get times are
 *     pooled over the runs.
 * Nothing is asserted: only a broker or a phase that fails fails the run.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "letters.h"
#include "mosquitto_dlq.h"
#include "suite.h"

#define LETTERS_N 10000
#define LETTERS_N_QUICK 1000
#define LETTERS_READY_MS 60000
/* --letters-count: at most 1,000,000 letters, in pages of 100. */
#define LETTERS_MAX_PAGES 10000
/* Above what the default bound (64 MiB) holds of 1 KiB letters, the
 * store-on brokers get this bound instead, so that none is dropped. */
#define LETTERS_DEFAULT_BOUND_N 40000
#define LETTERS_LARGE_BOUND "dead_letter_keep 4GB"

static void broker_opts_for(const struct bench_config *cfg, enum lkind k, uint64_t letters, const char **suite,
		const char **policies, struct broker_opts *bo)
{
	int n = 0;
	suite[n++] = "state_file {dir}/" LETTERS_STATE;
	suite[n++] = "state_save_interval 1d";
	if(k == K_OFF) suite[n++] = "dead_letter_keep 0";
	else if(letters > LETTERS_DEFAULT_BOUND_N) suite[n++] = LETTERS_LARGE_BOUND;
	suite[n] = NULL;
	policies[0] = LETTERS_POLICY;
	policies[1] = NULL;
	memset(bo, 0, sizeof(*bo));
	bo->kind = BROKER_PLUGIN;
	bo->plugin_path = cfg->plugin_path;
	bo->mosquitto_bin = cfg->mosquitto_bin;
	bo->tcp = cfg->tcp;
	bo->cpu = cfg->broker_cpu;
	bo->plugin_opts = cfg->plugin_opts;
	bo->suite_opts = suite;
	bo->policies = policies;
	bo->ready_timeout_ms = LETTERS_READY_MS;
}

/* The number before " kept dead letters" in this start's log, 0 when the
 * line has none (the store off), -1 without the line. */
static long long restored_letters(const struct broker *b)
{
	char line[1024];
	long long n = -1;
	FILE *f = fopen(b->log_path, "r");
	if(f == NULL) return -1;
	if(b->log_offset > 0) fseek(f, b->log_offset, SEEK_SET);
	while(fgets(line, sizeof(line), f)){
		if(strstr(line, ": restored ") == NULL) continue;
		const char *p = strstr(line, " kept dead letters");
		n = 0;
		if(p){
			while(p > line && p[-1] >= '0' && p[-1] <= '9') p--;
			n = strtoll(p, NULL, 10);
		}
	}
	fclose(f);
	return n;
}

/* Every letter, newest first, in pages of LETTERS_PAGE, their times into
 * pages and r; then, if gets, the gets. */
static int list_all(struct letters_client *c, uint64_t n, struct lcase *lc, struct lrun *r,
		struct bench_samples *pages, bool gets)
{
	char cmd[160], ids[LETTERS_GETS][DLQ_ID_LEN + 1];
	uint64_t page_ns[LETTERS_MAX_PAGES], total = 0, seen = 0;
	int nids = 0;
	double next = -1;
	r->pages = r->page_bytes = 0;
	while(r->pages < LETTERS_MAX_PAGES){
		cJSON *reply;
		const cJSON *data;
		uint64_t ns;
		size_t bytes;
		if(next < 0){
			snprintf(cmd, sizeof(cmd), "\"command\":\"listDeadLetters\",\"limit\":%d", LETTERS_PAGE);
		}else{
			snprintf(cmd, sizeof(cmd), "\"command\":\"listDeadLetters\",\"limit\":%d,\"cursor\":%.0f", LETTERS_PAGE, next);
		}
		if(letters_client__command(c, cmd, &reply, &data, &ns, &bytes)) return -1;
		const cJSON *list = cJSON_GetObjectItemCaseSensitive(data, "letters");
		/* "matched" comes with the first page only. */
		bool first = next < 0;
		double matched = first ? letters__number(data, "matched") : (double)n;
		next = letters__number(data, "next");
		page_ns[r->pages++] = ns;
		total += ns;
		r->page_bytes += bytes;
		for(const cJSON *s = cJSON_IsArray(list) ? list->child : NULL; s; s = s->next){
			const cJSON *id = cJSON_GetObjectItemCaseSensitive(s, "id");
			if(nids < LETTERS_GETS && cJSON_IsString(id) && strlen(id->valuestring) == DLQ_ID_LEN){
				memcpy(ids[nids++], id->valuestring, DLQ_ID_LEN + 1);
			}
			seen++;
		}
		cJSON_Delete(reply);
		if(matched != (double)n){
			fprintf(stderr, "dlq_bench: letters: listDeadLetters matched %.0f letters, not %llu\n", matched,
					(unsigned long long)n);
			return -1;
		}
		if(next < 0) break;
	}
	if(seen != n){
		fprintf(stderr, "dlq_bench: letters: the pages held %llu letters, not %llu\n", (unsigned long long)seen,
				(unsigned long long)n);
		return -1;
	}
	r->list_ms = (double)total / 1e6;
	if(samples__append(pages, page_ns, r->pages)) return -1;
	for(int i = 0; gets && i < nids; i++){
		cJSON *reply;
		const cJSON *data;
		uint64_t ns;
		size_t bytes;
		snprintf(cmd, sizeof(cmd), "\"command\":\"getDeadLetter\",\"id\":\"%s\"", ids[i]);
		if(letters_client__command(c, cmd, &reply, &data, &ns, &bytes)) return -1;
		double got = letters__number(data, "payloadBytes");
		cJSON_Delete(reply);
		if(got != (double)lc->payload){
			fprintf(stderr, "dlq_bench: letters: getDeadLetter gave %.0f payload bytes, not %zu\n", got, lc->payload);
			return -1;
		}
		if(lc->first_get_us <= 0) lc->first_get_us = (double)ns / 1e3;
		if(samples__append(&lc->get_ns, &ns, 1)) return -1;
	}
	r->listed = true;
	return 0;
}
/* The listing again on a restarted broker (its letters restored, so
 * allocated one after the other), pooled into pages, the run's total
 * into ms[*runs]. */
static int list_restarted(const struct broker *b, uint64_t n, struct lcase *lc, struct bench_samples *pages,
		double *ms, int *runs)
{
	struct letters_client c;
	struct lrun scratch;
	memset(&scratch, 0, sizeof(scratch));
	int rc = letters_client__open(&c, b, "letters-again") || list_all(&c, n, lc, &scratch, pages, false) ? -1 : 0;
	letters_client__close(&c);
	if(rc == 0 && *runs < LETTERS_RUNS) ms[(*runs)++] = scratch.list_ms;
	return rc;
}

/* Fills one broker of kind k with n dead letters, measures, and stops and
 * restarts it. */
static int run_one(const struct bench_config *cfg, enum lkind k, uint64_t n, struct lcase *lc, struct lrun *r)
{
	const char *suite[6], *policies[2];
	struct broker_opts bo;
	struct broker b;
	struct letters_client c;
	char path[256];
	struct stat st;
	int rc = -1;

	memset(r, 0, sizeof(*r));
	broker_opts_for(cfg, k, n, suite, policies, &bo);
	if(broker__start(&b, &bo)) return -1;
	if(letters_client__open(&c, &b, "letters") || letters_client__pass(&c, LMODE_ACK, LETTERS_WARMUP, lc->payload)){
		goto fail;
	}
	r->rss0 = broker__rss_kib(&b);
	uint64_t t0 = bench__now_ns();
	if(letters_client__pass(&c, LMODE_NACK, n, lc->payload)) goto fail;
	r->fill_s = (double)(bench__now_ns() - t0) / 1e9;
	/* A dead letter the store does not keep is published without an id. */
	if(c.dead_with_id != (k == K_ON ? n : 0)){
		fprintf(stderr, "dlq_bench: letters: %llu of %llu dead letters carried a dead-letter-id\n",
				(unsigned long long)c.dead_with_id, (unsigned long long)n);
		goto fail;
	}
	if(k == K_ON){
		lc->dl_topic = c.dl_topic;
		lc->dl_payload = c.dl_payload;
		lc->dl_props = c.dl_props;
		lc->dl_nprops = c.dl_nprops;
	}
	cJSON *reply;
	const cJSON *data;
	uint64_t ns;
	size_t bytes;
	if(letters_client__command(&c, "\"command\":\"getStatus\"", &reply, &data, &ns, &bytes)) goto fail;
	const cJSON *totals = cJSON_GetObjectItemCaseSensitive(data, "totals");
	r->kept = letters__number(totals, "keptDeadLetters");
	r->kept_bytes = letters__number(totals, "keptDeadLetterBytes");
	cJSON_Delete(reply);
	r->rss1 = broker__rss_kib(&b);
	if(r->kept != (k == K_ON ? (double)n : 0)){
		fprintf(stderr, "dlq_bench: letters: getStatus says %.0f kept dead letters, not %llu\n", r->kept,
				(unsigned long long)(k == K_ON ? n : 0));
		goto fail;
	}
	if(k == K_ON && list_all(&c, n, lc, r, &lc->page_ns, true)) goto fail;
	letters_client__close(&c);

	broker__halt(&b, SIGTERM);
	r->fill_save_ms = b.stop_ms;
	snprintf(path, sizeof(path), "%s/%s", b.dir, LETTERS_STATE);
	if(stat(path, &st)){
		fprintf(stderr, "dlq_bench: letters: no state file %s after SIGTERM\n", path);
		broker__remove_dir(&b);
		return -1;
	}
	r->state_bytes = (long long)st.st_size;
	for(int i = 0; i < LETTERS_RESTARTS && !bench__interrupted(); i++){
		fprintf(stderr, "letters: %zu B, store %s: restart %d of %d\n", lc->payload, k == K_ON ? "on" : "off", i + 1,
				LETTERS_RESTARTS);
		if(i == 1 && k == K_ON){
			/* The later restarts let every client use the store, so the
			 * listing is timed again without an access check per letter. */
			int end = 0;
			while(suite[end]) end++;
			suite[end] = "dead_letter_access control";
			suite[end + 1] = NULL;
			if(broker_conf__write(&b, &bo)) break;
		}
		t0 = bench__now_ns();
		if(broker__restart(&b, &bo)) break;
		double start_ms = (double)(bench__now_ns() - t0) / 1e6;
		if(i == 0) r->restored_kib = broker__rss_kib(&b);
		long long got = restored_letters(&b);
		/* The restored letters listed again: with the access check
		 * after the first restart, without it after the second. */
		if(k == K_ON && i < 2 && list_restarted(&b, n, lc, i == 0 ? &lc->page_rchk_ns : &lc->page_ctl_ns,
				i == 0 ? lc->list_rchk_ms : lc->list_ctl_ms, i == 0 ? &lc->list_rchk_runs : &lc->list_ctl_runs)){
			broker__halt(&b, SIGTERM);
			break;
		}
		/* The first stop is traced, the others timed from outside only
		 * (strace slows the syscalls it stops at). */
		bool traced = i == 0 && letters__trace_stop(&b, r) == 0;
		if(i == 0 && !traced) r->tr_encode = r->tr_write = r->tr_exit = -1;
		if(i > 0) broker__halt(&b, SIGTERM);
		if(got != (long long)(k == K_ON ? n : 0)){
			fprintf(stderr, "dlq_bench: letters: the restarted broker restored %lld kept dead letters, not %llu\n", got,
					(unsigned long long)(k == K_ON ? n : 0));
			broker__print_log(&b);
			break;
		}
		r->start_ms[r->timed] = start_ms;
		if(i > 0) r->save_ms[r->saves++] = b.stop_ms;
		r->timed++;
	}
	rc = r->timed == LETTERS_RESTARTS ? 0 : -1;
	r->ok = true;
	broker__remove_dir(&b);
	return rc;

fail:
	if(!bench__interrupted()) broker__print_log(&b);
	letters_client__close(&c);
	broker__stop(&b);
	return -1;
}

int suite__letters(const struct bench_config *cfg)
{
	static const size_t sizes[] = { 100, 1024 };
	enum { NCASES = sizeof(sizes) / sizeof(sizes[0]) };
	struct lcase cases[NCASES];
	uint64_t n = cfg->letters_count ? cfg->letters_count : cfg->quick ? LETTERS_N_QUICK : LETTERS_N;
	int runs = cfg->quick ? 1 : LETTERS_RUNS;
	int rc = 0;

	memset(cases, 0, sizeof(cases));
	printf("\n### The dead-letter store: %llu kept dead letters (policy `%s`, QoS 1, one client NACKing each "
			"original once; state file, no journal; the store on with %s, or off)\n", (unsigned long long)n,
			LETTERS_POLICY, n > LETTERS_DEFAULT_BOUND_N ? "`" LETTERS_LARGE_BOUND "`" : "the default bound, 64 MiB");
	for(int i = 0; i < NCASES && !bench__interrupted(); i++){
		cases[i].payload = sizes[i];
		for(int r = 0; r < runs && !bench__interrupted(); r++){
			for(int k = 0; k < NKIND && !bench__interrupted(); k++){
				fprintf(stderr, "letters: %zu B payloads, store %s, run %d of %d\n", sizes[i], k == K_ON ? "on" : "off",
						r + 1, runs);
				if(run_one(cfg, (enum lkind)k, n, &cases[i], &cases[i].run[k][r])) rc = -1;
			}
		}
	}
	letters__print(cases, NCASES, runs, n);
	for(int i = 0; i < NCASES; i++){
		samples__free(&cases[i].page_ns);
		samples__free(&cases[i].get_ns);
		samples__free(&cases[i].page_ctl_ns);
		samples__free(&cases[i].page_rchk_ns);
	}
	return rc;
}
