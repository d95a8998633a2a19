/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Durability of the engine (see persist.h), built on the state file format
 * of state.c. Without plugin_opt_state_file every function does nothing.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "model/envelope.h"
#include "model/letters.h"
#include "model/outbox.h"
#include "model/schedule.h"
#include "store/persist.h"
#include "store/state.h"
#include "util/errtext.h"
#include "util/port.h"

static bool enabled(const struct dlq_persist *p)
{
	return p->opt.state_file != NULL;
}

/* Changes whenever anything a snapshot holds may have changed. */
static uint64_t marker(const struct dlq_persist *p)
{
	return *p->opt.changes + p->opt.totals->tracked + p->opt.totals->nacks + p->opt.totals->expired
			+ p->opt.totals->evicted + p->opt.totals->dead_letters + p->opt.totals->ack_timeouts
			+ p->opt.totals->redriven;
}

/* Envelopes not yet taken by the broker: those a snapshot must hold. */
static size_t owed_count(const struct state_view *v)
{
	return v->outbox->owed.count + v->outbox->sent.count + v->outbox->settling.count + v->delayed->count;
}

/* The end of a log line saying how many dead letters are kept: "" when
 * the store is off. */
static void kept_letters(const struct dlq_persist *p, size_t n, char *out, size_t size)
{
	out[0] = '\0';
	if(p->view.letters) snprintf(out, size, ", %zu kept dead letters", n);
}

static void report_failure(struct dlq_persist *p, const char *what, const char *detail)
{
	if(!p->failing){
		port__log(DLQ_LOG_ERR, "state file problem: %s: %s; the state will be saved again at the next chance", what, detail);
	}
	p->failing = true;
}

/* Syncs what was written to the journal and not synced yet. */
/* A fork makes every page the broker wrote since the last fork
 * copy-on-write, and the first save after a start from a large state file
 * paid for every page the restore wrote: at 1,000,000 records its fork
 * took 22-30 ms on 2.0.11 and 2.1.2 (54 ms once) where the next took
 * 8-19. So the start forks once, before any client is connected, a child
 * that exits at once (38 ms at 1,000,000 records): the first save's fork
 * then took 7-17 ms. All measured while a CI run loaded the machine, one
 * start each. */
#define PROTECT_AT_START_RECORDS 100000

static void protect_at_start(void)
{
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid_t pid = fork();
	if(pid == 0) _exit(0);
	while(pid > 0 && waitpid(pid, NULL, 0) < 0 && errno == EINTR){
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	port__log(DLQ_LOG_DEBUG, "state file: the restored state's pages made copy-on-write for the first save in %ld us",
			(long)((t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000));
}

static void journal_sync(struct dlq_persist *p, uint64_t now)
{
	if(!p->journal_unsynced || p->journal_fd < 0) return;
	if(fdatasync(p->journal_fd)) report_failure(p, "journal not synced", strerror(errno));
	p->journal_unsynced = false;
	p->journal_synced_ms = now;
}

/* <state_file>.journal.<generation>, into out. */
static void rotated_path(const struct dlq_persist *p, uint64_t generation, char *out, size_t size)
{
	snprintf(out, size, "%s.%" PRIu64, p->journal_path, generation);
}

static int remember_rotated(struct dlq_persist *p, uint64_t generation)
{
	if(p->rotated_count == p->rotated_capacity){
		size_t cap = p->rotated_capacity ? p->rotated_capacity * 2 : 8;
		uint64_t *r = realloc(p->rotated, cap * sizeof(*r));
		if(r == NULL) return ENOMEM;
		p->rotated = r;
		p->rotated_capacity = cap;
	}
	p->rotated[p->rotated_count++] = generation;
	return 0;
}

/* The journals renamed aside that a snapshot holding every generation up
 * to covers holds go. */
static void drop_rotated_held(struct dlq_persist *p, uint64_t covers)
{
	char path[4096];
	size_t kept = 0;
	for(size_t i = 0; i < p->rotated_count; i++){
		if(p->rotated[i] <= covers){
			rotated_path(p, p->rotated[i], path, sizeof(path));
			(void)unlink(path);
		}else{
			p->rotated[kept++] = p->rotated[i];
		}
	}
	p->rotated_count = kept;
}

/* A snapshot holding every generation up to covers is in place: the
 * journals it holds go (and without a journal, every journal left). */
static void drop_held_journals(struct dlq_persist *p, uint64_t covers)
{
	drop_rotated_held(p, covers);
	if(p->journal_fd < 0 && !p->opt.save_on_change) (void)unlink(p->journal_path);
}

static void saved(struct dlq_persist *p, uint64_t at_ms, uint64_t marker_then, uint64_t covers)
{
	drop_held_journals(p, covers);
	p->last_save_ms = at_ms;
	p->saved_marker = marker_then;
	if(p->failing){
		port__log(DLQ_LOG_NOTICE, "state file saved again: %s", p->opt.state_file);
	}
	p->failing = false;
}

/* Starts the journal's generation p->generation afresh on fd (truncated,
 * its header and generation, synced). */
static int journal_begin(struct dlq_persist *p, int fd)
{
	struct dlq_headers h = {0};
	int rc = 0;
	if(ftruncate(fd, 0) || lseek(fd, 0, SEEK_SET) < 0) rc = errno ? errno : EIO;
	if(rc == 0) rc = state__encode_journal_start(p->generation, &h) ? ENOMEM : 0;
	if(rc == 0) rc = state_file__append(fd, h.data, h.len);
	headers__free(&h);
	return rc;
}

/* The snapshot as a save writes it: encoded in pieces of
 * SAVER_CHUNK bytes, each written as it is ready, so that no save needs a
 * second whole copy of the state. */
#define SAVER_CHUNK (1u << 20)

/* A background save hands what it wrote to the disk as it goes, a piece
 * (SAVER_CHUNK) at a time, and waits for the piece before to be written
 * (sync_file_range: no flush of the disk's cache, no filesystem commit),
 * so that at most two pieces are in flight. Without it the kernel holds
 * hundreds of megabytes dirty and writes them in bursts, and a journal's
 * fdatasync on the broker's thread (save on change), which flushes the
 * disk's cache, waits for whatever burst is in flight. The file is synced
 * once at the end, before the rename, as always. */
struct saver_fill {
	const struct state_view *view;
	uint64_t now;
	int64_t wall;
	bool sync_as_it_goes;
	bool paced;          /* at most SAVER_PACE bytes a second (below) */
};

/* With every change synced as it is made (plugin_opt_state_journal_sync
 * always), a background save writes at most this many bytes a second.
 * Each journal fdatasync on the broker's thread commits the filesystem's
 * journal, which waits for whatever of the save's data is in flight: a
 * save of 300 MiB writing as fast as the disk took it left a journal
 * 260-1,100 fdatasyncs a second (p50 0.9-3.4 ms), where one writing at
 * 100 MiB/s left it 2,200-4,800 (p50 0.15-0.26 ms) (bench/fsync_probe.c,
 * 12 runs of each on the project's test machine; docs/design.md, "Saves
 * in the background"). A snapshot of 1,000,000 records (345 MB) then
 * takes at least 3.3 s, in the child. */
#define SAVER_PACE (100u << 20)

struct saver_out {
	int fd;
	bool sync_as_it_goes;
	bool paced;
	struct timespec started;
	off_t written;       /* bytes so far */
	off_t last_from;     /* the piece in flight */
	off_t last_len;      /* 0: none */
};

/* Sleeps until written bytes are due at SAVER_PACE since o->started. */
static void pace(const struct saver_out *o)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	int64_t due_ns = (int64_t)((uint64_t)o->written * 1000000000u / SAVER_PACE);
	int64_t spent_ns = (int64_t)(now.tv_sec - o->started.tv_sec) * 1000000000 + (now.tv_nsec - o->started.tv_nsec);
	if(spent_ns >= due_ns) return;
	int64_t wait = due_ns - spent_ns;
	struct timespec ts = { (time_t)(wait / 1000000000), (long)(wait % 1000000000) };
	while(nanosleep(&ts, &ts) && errno == EINTR){}
}

static int write_piece(void *ctx, const uint8_t *data, size_t len)
{
	struct saver_out *o = ctx;
	int rc = state_file__write_fd(o->fd, data, len);
	if(rc || !o->sync_as_it_goes) return rc;
	off_t from = o->written;
	o->written += (off_t)len;
	/* Failures here cost only smoothness: the final fdatasync reports. */
	(void)sync_file_range(o->fd, from, (off_t)len, SYNC_FILE_RANGE_WRITE);
	if(o->last_len){
		(void)sync_file_range(o->fd, o->last_from, o->last_len,
				SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
	}
	o->last_from = from;
	o->last_len = (off_t)len;
	if(o->paced) pace(o);
	return 0;
}

static int saver_fill(void *ctx, int fd)
{
	const struct saver_fill *f = ctx;
	struct saver_out out = { .fd = fd, .sync_as_it_goes = f->sync_as_it_goes, .paced = f->paced };
	clock_gettime(CLOCK_MONOTONIC, &out.started);
	return state__encode_snapshot_to(f->view, f->now, f->wall, SAVER_CHUNK, write_piece, &out);
}

/* A snapshot written here and now, holding every journal so far: at
 * shutdown, in tests, and to fold in a journal written before
 * generations. */
static int save_foreground(struct dlq_persist *p)
{
	char err[256];
	uint64_t now = port__now_ms();
	uint64_t covers = p->generation;
	p->view.journal_covers = covers;
	struct saver_fill fill = { &p->view, now, port__wall_ms(), false, false };
	int rc = state_file__write_with(p->opt.state_file, saver_fill, &fill, err, sizeof(err));
	if(rc){
		report_failure(p, "snapshot not saved", err);
		return rc;
	}
	/* The snapshot holds everything the journal said: its next
	 * generation starts afresh in the same file. */
	if(p->journal_fd >= 0){
		p->generation++;
		int jrc = journal_begin(p, p->journal_fd);
		if(jrc) report_failure(p, "journal not restarted", strerror(jrc));
	}
	p->legacy_journal = false;
	saved(p, now, marker(p), covers);
	return 0;
}

/* The background saver, in the child: the state as the fork left it,
 * written, and the result through fd ("0", or "1" and why). Touches
 * nothing of the broker's but its own copy of the memory: every other
 * descriptor closed, the broker's signal handlers reset, and it dies with
 * its parent. Never returns. */
/* The snapshot a save replaced is let go a piece at a time: freeing
 * hundreds of megabytes at once (the rename over it, on the last close) is
 * one filesystem commit that, on a filesystem mounted with discard, trims
 * them all before it ends, and the journal's next fdatasync on the
 * broker's thread waits for that commit (measured: 20-75 ms for a 300 MB
 * file on ext4 with discard). Each piece is its own commit instead. */
#define SAVER_RELEASE_STEP (8 << 20)
#define SAVER_RELEASE_GAP_MS 10

/* old: the replaced snapshot, still open; only an inode no name points to
 * any more is cut (never a file someone linked elsewhere). */
static void release_replaced(int old)
{
	struct stat st;
	if(fstat(old, &st) == 0 && st.st_nlink == 0 && S_ISREG(st.st_mode)){
		for(off_t size = st.st_size; size > 0;){
			size = size > SAVER_RELEASE_STEP ? size - SAVER_RELEASE_STEP : 0;
			if(ftruncate(old, size) || fdatasync(old)) break;
			/* Room for the broker's own syncs between two commits. */
			struct timespec gap = { 0, SAVER_RELEASE_GAP_MS * 1000000L };
			while(nanosleep(&gap, &gap) && errno == EINTR){}
		}
	}
	close(old);
}

static void run_saver(struct dlq_persist *p, int fd, pid_t parent, uint64_t covers, uint64_t now, int64_t wall)
{
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	if(getppid() != parent) _exit(1);
	static const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE};
	for(size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) (void)signal(sigs[i], SIG_DFL);
	if(fd > 3) (void)close_range(3, (unsigned)fd - 1, 0);
	(void)close_range((unsigned)fd + 1, ~0u, 0);

	char msg[256] = "0";
	char err[240];
	if(p->opt.save_pause_ms){
		struct timespec ts = { (time_t)(p->opt.save_pause_ms / 1000), (long)(p->opt.save_pause_ms % 1000) * 1000000L };
		while(nanosleep(&ts, &ts) && errno == EINTR){}
	}
	p->view.journal_covers = covers;
	struct saver_fill fill = { &p->view, now, wall, true, p->opt.save_on_change && !p->opt.journal_sync_ms };
	int old = open(p->opt.state_file, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if(state_file__write_with(p->opt.state_file, saver_fill, &fill, err, sizeof(err))){
		snprintf(msg, sizeof(msg), "1%s", err);
	}else if(old >= 0){
		release_replaced(old);
		old = -1;
	}
	if(old >= 0) close(old);
	size_t n = strlen(msg);
	const char *m = msg;
	while(n > 0){
		ssize_t w = write(fd, m, n);
		if(w < 0 && errno == EINTR) continue;
		if(w <= 0) break;
		m += w;
		n -= (size_t)w;
	}
	_exit(0);
}

/* Starts a snapshot in the background (run_saver). With the journal, the
 * generation it holds is renamed aside and the next one opened, before
 * the fork: what changes after it goes to the next. Returns 0, or an
 * errno (reported) when it could not start; nothing changed then. */
static int save_background(struct dlq_persist *p, uint64_t now)
{
	uint64_t covers = p->generation;
	char aside[4096];
	int next_fd = -1;
	struct timespec r0, t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &r0);
	if(p->journal_fd >= 0){
		rotated_path(p, p->generation, aside, sizeof(aside));
		if(remember_rotated(p, p->generation)){
			report_failure(p, "snapshot not started", "out of memory");
			return ENOMEM;
		}
		int rc = 0;
		if(rename(p->journal_path, aside)) rc = errno;
		if(rc == 0){
			next_fd = open(p->journal_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
			if(next_fd < 0){
				rc = errno;
				(void)rename(aside, p->journal_path);
			}
		}
		if(rc == 0){
			p->generation++;
			rc = journal_begin(p, next_fd);
			if(rc){
				p->generation--;
				close(next_fd);
				(void)unlink(p->journal_path);
				(void)rename(aside, p->journal_path);
			}
		}
		if(rc){
			p->rotated_count--;
			report_failure(p, "journal not rotated for a snapshot", strerror(rc));
			return rc;
		}
		/* The new journal and the renamed one, durable before either is
		 * relied on. */
		state_file__sync_dir(p->journal_path);
		journal_sync(p, now);
		close(p->journal_fd);
		p->journal_fd = next_fd;
	}
	int fds[2];
	if(pipe2(fds, O_CLOEXEC)){
		int rc = errno;
		report_failure(p, "snapshot not started", strerror(rc));
		return rc;
	}
	pid_t parent = getpid();
	uint64_t marker_then = marker(p);
	int64_t wall = port__wall_ms();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid_t pid = fork();
	if(pid == 0){
		close(fds[0]);
		run_saver(p, fds[1], parent, covers, now, wall);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	close(fds[1]);
	if(pid < 0){
		int rc = errno;
		close(fds[0]);
		report_failure(p, "snapshot not started (fork)", strerror(rc));
		return rc;
	}
	(void)fcntl(fds[0], F_SETFL, O_NONBLOCK);
	p->saver_pid = pid;
	p->saver_fd = fds[0];
	p->saver_covers = covers;
	p->saver_marker = marker_then;
	p->saver_started_ms = now;
	p->saver_msg_len = 0;
	p->saver_fork_us = (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000);
	p->saver_rotation_us = (uint64_t)((t0.tv_sec - r0.tv_sec) * 1000000L + (t0.tv_nsec - r0.tv_nsec) / 1000);
	return 0;
}

static void saver_reap(struct dlq_persist *p)
{
	int status;
	while(waitpid(p->saver_pid, &status, 0) < 0 && errno == EINTR){}
	close(p->saver_fd);
	p->saver_pid = 0;
	p->saver_fd = -1;
}

/* What a background save said, once it ended: false while it runs. */
static bool saver_done(struct dlq_persist *p)
{
	for(;;){
		size_t room = sizeof(p->saver_msg) - 1 - p->saver_msg_len;
		char sink[64];
		ssize_t r = room ? read(p->saver_fd, p->saver_msg + p->saver_msg_len, room) : read(p->saver_fd, sink, sizeof(sink));
		if(r > 0){
			if(room) p->saver_msg_len += (size_t)r;
			continue;
		}
		if(r < 0 && errno == EINTR) continue;
		if(r < 0) return false; /* EAGAIN: still writing */
		break;                  /* the end: it exited */
	}
	p->saver_msg[p->saver_msg_len] = '\0';
	saver_reap(p);
	if(p->saver_msg[0] == '0'){
		port__log(DLQ_LOG_INFO, "state file %s saved in the background in %" PRIu64 " ms (the broker paused %" PRIu64
				" us: %" PRIu64 " for the journal's rotation, %" PRIu64 " for the fork)", p->opt.state_file,
				port__now_ms() - p->saver_started_ms, p->saver_rotation_us + p->saver_fork_us, p->saver_rotation_us,
				p->saver_fork_us);
		saved(p, p->saver_started_ms, p->saver_marker, p->saver_covers);
	}else{
		report_failure(p, "snapshot not saved", p->saver_msg[0] == '1' ? p->saver_msg + 1 : "the saving process ended without a word");
		p->last_save_ms = port__now_ms();
	}
	return true;
}

bool persist__saving(const struct dlq_persist *p)
{
	return p->saver_pid != 0;
}

/* Keeps a damaged file for inspection beside the new one. */
static void keep_aside(const char *path, const char *what)
{
	char aside[4096];
	snprintf(aside, sizeof(aside), "%s.damaged-%" PRId64, path, port__wall_ms());
	if(rename(path, aside) == 0){
		port__log(DLQ_LOG_ERR, "%s %s kept for inspection as %s", what, path, aside);
	}
}

/* Restores the snapshot or a journal at path (missing: nothing). A
 * journal's generation goes to *generation (0: none, or written before
 * generations), when given. */
static int restore_file(struct dlq_persist *p, const char *path, bool journal, uint64_t *generation, char *err,
		size_t errlen)
{
	struct state_bytes file;
	if(generation) *generation = 0;
	int rc = state_file__load(path, &file, err, errlen);
	if(rc || file.data == NULL) return rc;
	if(!journal) p->snapshot_read = true;
	const uint8_t *data = file.data;
	size_t len = file.len;

	struct state_report rep;
	memset(&rep, 0, sizeof(rep));
	if(journal){
		rc = state_read__decode_journal(&p->view, data, len, port__now_ms(), port__wall_ms(), &rep);
	}else{
		rc = state_read__decode_snapshot(&p->view, data, len, port__now_ms(), port__wall_ms(), &rep);
	}
	state_file__unload(&file);
	if(rc){
		snprintf(err, errlen, "out of memory restoring \"%s\"", path);
		return rc;
	}
	if(journal){
		if(rep.journal_generation > p->generation) p->generation = rep.journal_generation;
		if(rep.journal_generation == 0 && rep.journal_entries) p->legacy_journal = true;
		if(generation && !rep.damaged) *generation = rep.journal_generation;
		if(rep.journal_held){
			port__log(DLQ_LOG_INFO, "state journal %s: held by the state file already", path);
		}else{
			port__log(DLQ_LOG_NOTICE, "state journal %s: %zu entries applied", path, rep.journal_entries);
		}
	}else{
		char kept[64];
		kept_letters(p, rep.letters, kept, sizeof(kept));
		port__log(DLQ_LOG_NOTICE, "state file %s: restored %zu NACKable deliveries (%zu expired or without their policy "
				"skipped) and %zu retry copies or dead letters%s", path, rep.records, rep.records_skipped,
				rep.envelopes, kept);
	}
	if(rep.damaged){
		port__log(DLQ_LOG_ERR, "state file problem: %s is damaged (%s): what came before it was restored, the rest is lost",
				path, rep.problem);
		keep_aside(path, journal ? "damaged state journal" : "damaged state file");
		p->restored_damaged = true;
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The journals renamed aside for snapshots that did not end
 * (<state_file>.journal.<g>), found in the state file's folder, oldest
 * first into p->rotated. */
static int find_rotated(struct dlq_persist *p)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", p->journal_path);
	const char *slash = strrchr(p->journal_path, '/');
	const char *base = slash ? slash + 1 : p->journal_path;
	if(slash) dir[slash - p->journal_path + (slash == p->journal_path ? 1 : 0)] = '\0';
	else snprintf(dir, sizeof(dir), ".");
	DIR *d = opendir(dir);
	if(d == NULL) return 0;
	size_t blen = strlen(base);
	struct dirent *de;
	int rc = 0;
	while(rc == 0 && (de = readdir(d)) != NULL){
		const char *n = de->d_name;
		if(strncmp(n, base, blen) || n[blen] != '.' || n[blen + 1] < '1' || n[blen + 1] > '9') continue;
		char *end;
		errno = 0;
		unsigned long long g = strtoull(n + blen + 1, &end, 10);
		if(*end || errno) continue;
		rc = remember_rotated(p, g);
	}
	closedir(d);
	if(p->rotated_count) qsort(p->rotated, p->rotated_count, sizeof(p->rotated[0]), cmp_u64);
	return rc;
}

int persist__restore(struct dlq_persist *p, const struct persist_options *o, const struct state_view *view,
		char *err, size_t errlen)
{
	memset(p, 0, sizeof(*p));
	p->journal_fd = -1;
	p->saver_fd = -1;
	p->opt = *o;
	p->view = *view;
	if(!enabled(p)) return 0;

	size_t n = strlen(p->opt.state_file) + sizeof(".journal");
	p->journal_path = malloc(n);
	if(p->journal_path == NULL) return ENOMEM;
	snprintf(p->journal_path, n, "%s.journal", p->opt.state_file);

	int rc = restore_file(p, p->opt.state_file, false, NULL, err, errlen);
	if(p->view.journal_covers > p->generation) p->generation = p->view.journal_covers;
	if(rc == 0) rc = find_rotated(p);
	char path[4096];
	for(size_t i = 0; rc == 0 && i < p->rotated_count; i++){
		rotated_path(p, p->rotated[i], path, sizeof(path));
		rc = restore_file(p, path, true, NULL, err, errlen);
		if(p->rotated[i] > p->generation) p->generation = p->rotated[i];
	}
	if(rc == 0) rc = restore_file(p, p->journal_path, true, &p->current_generation, err, errlen);
	return rc;
}

/* Whether the state file can be written where it is: its .tmp created and
 * removed. */
static int check_writable(const struct dlq_persist *p, char *err, size_t errlen)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", p->opt.state_file);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if(fd < 0){
		int rc = errno;
		snprintf(err, errlen, "cannot write the state file \"%s\": %s", p->opt.state_file, strerror(rc));
		return rc;
	}
	close(fd);
	(void)unlink(tmp);
	return 0;
}

int persist__start(struct dlq_persist *p, char *err, size_t errlen)
{
	int rc;

	if(!enabled(p)) return 0;
	rc = check_writable(p, err, errlen);
	if(rc) return rc;
	if(p->opt.save_on_change){
		/* The journal goes on in its file: restored, of the newest
		 * generation, it goes on being it; anything else starts the next
		 * generation (a journal before generations is folded in by the
		 * snapshot below first). */
		bool go_on = p->legacy_journal || (p->current_generation && p->current_generation == p->generation);
		if(!go_on && p->current_generation){
			/* Older than a journal renamed aside: aside too. */
			char aside[4096];
			rotated_path(p, p->current_generation, aside, sizeof(aside));
			if(remember_rotated(p, p->current_generation) || rename(p->journal_path, aside)){
				rc = errno ? errno : ENOMEM;
				snprintf(err, errlen, "cannot rename \"%s\": %s", p->journal_path, strerror(rc));
				return rc;
			}
		}
		p->journal_fd = open(p->journal_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if(p->journal_fd < 0){
			rc = errno;
			snprintf(err, errlen, "cannot open \"%s\": %s", p->journal_path, strerror(rc));
			return rc;
		}
		if(go_on){
			if(lseek(p->journal_fd, 0, SEEK_END) < 0){
				rc = errno;
				snprintf(err, errlen, "cannot open \"%s\": %s", p->journal_path, strerror(rc));
				return rc;
			}
		}else{
			p->generation++;
			rc = journal_begin(p, p->journal_fd);
			if(rc){
				snprintf(err, errlen, "cannot write \"%s\": %s", p->journal_path, strerror(rc));
				return rc;
			}
			state_file__sync_dir(p->journal_path);
		}
	}
	/* What was restored is on disk as it was read: the snapshot and the
	 * journals it does not hold, which the next save folds in. A start
	 * writes a snapshot, before the broker goes on, only where the files
	 * cannot stay as they are: a journal written before generations (no
	 * snapshot can say it holds it), or a damaged file set aside (what
	 * came before the damage is nowhere else). Without a state file, the
	 * first one is written (in the background but in unit tests): the
	 * file an operator looks for, and nothing to encode yet. */
	if(p->legacy_journal || p->restored_damaged || (!p->snapshot_read && p->opt.foreground)){
		rc = save_foreground(p);
		if(rc) snprintf(err, errlen, "cannot write the state file \"%s\": %s", p->opt.state_file, strerror(rc));
		return rc;
	}
	if(!p->snapshot_read){
		rc = save_background(p, port__now_ms());
		if(rc) snprintf(err, errlen, "cannot save the state file \"%s\": %s", p->opt.state_file, strerror(rc));
		return rc;
	}
	/* Journals the state file holds were skipped: nothing needs them. */
	drop_rotated_held(p, p->view.journal_covers);
	if(!p->opt.foreground && p->view.ledger && p->view.ledger->count >= PROTECT_AT_START_RECORDS) protect_at_start();
	p->last_save_ms = port__now_ms();
	p->saved_marker = marker(p);
	return 0;
}

/* Appends an encoded entry to the journal and frees it; rc is what
 * encoding it returned (nothing is written when that failed), sync says
 * whether the change must be synced before the broker acknowledges what
 * caused it. With plugin_opt_state_journal_sync <duration> nothing is
 * synced here: the tick syncs what was written (journal_sync). */
static void journal_write(struct dlq_persist *p, struct dlq_headers *h, int rc, bool sync)
{
	if(p->opt.journal_sync_ms){
		sync = false;
		p->journal_unsynced = true;
	}
	if(rc == 0) rc = sync ? state_file__append(p->journal_fd, h->data, h->len)
			: state_file__append_nosync(p->journal_fd, h->data, h->len);
	if(rc) report_failure(p, "journal entry not written", strerror(rc));
	headers__free(h);
}

/* The store port's notes: each encodes its entry into h and hands it to
 * journal_write, when a journal is open. */
static void note_add(void *ctx, const struct dlq_envelope *e, bool sync)
{
	struct dlq_persist *p = ctx;
	struct dlq_headers h = {0};
	if(p->journal_fd >= 0) journal_write(p, &h, state__encode_add(e, port__now_ms(), port__wall_ms(), &h), sync);
}

static void note_record(void *ctx, const struct dlq_record *r)
{
	struct dlq_persist *p = ctx;
	struct dlq_headers h = {0};
	if(p->journal_fd >= 0) journal_write(p, &h, state__encode_record(r, port__now_ms(), port__wall_ms(), &h), true);
}

static void note_settler(void *ctx, const struct dlq_record *r, const char *client, uint8_t how)
{
	struct dlq_persist *p = ctx;
	struct dlq_headers h = {0};
	if(p->journal_fd >= 0) journal_write(p, &h, state__encode_settler(r, client, how, &h), true);
}

static void note_hold(void *ctx, const struct dlq_record *r, const char *client)
{
	struct dlq_persist *p = ctx;
	struct dlq_headers h = {0};
	if(p->journal_fd >= 0) journal_write(p, &h, state__encode_hold(r, client, &h), false);
}

static void note_delivery(void *ctx, const struct dlq_record *r, const struct dlq_delivery_saved *saved)
{
	struct dlq_persist *p = ctx;
	struct dlq_headers h = {0};
	if(p->journal_fd >= 0) journal_write(p, &h, state__encode_delivery(r, saved, &h), false);
}

static void note_deadline(void *ctx, const struct dlq_deadline *e)
{
	struct dlq_persist *p = ctx;
	struct dlq_headers h = {0};
	if(p->journal_fd >= 0) journal_write(p, &h, state__encode_deadline(e, port__now_ms(), port__wall_ms(), &h), false);
}

static void note_letter(void *ctx, const struct dlq_letter *l)
{
	struct dlq_persist *p = ctx;
	struct dlq_headers h = {0};
	if(p->journal_fd >= 0) journal_write(p, &h, state__encode_letter(l, port__now_ms(), port__wall_ms(), &h), true);
}

static void note_letter_gone(void *ctx, const struct dlq_id *id)
{
	struct dlq_persist *p = ctx;
	struct dlq_headers h = {0};
	if(p->journal_fd >= 0) journal_write(p, &h, state__encode_letter_gone(id, &h), false);
}

static void note_task(void *ctx, const struct dlq_redrive_task *t, bool sync)
{
	struct dlq_persist *p = ctx;
	struct dlq_headers h = {0};
	if(p->journal_fd >= 0) journal_write(p, &h, state__encode_task(t, &h), sync);
}

static void note_remove(void *ctx, uint64_t seq)
{
	struct dlq_persist *p = ctx;
	if(p->journal_fd < 0) return;
	if(p->removed_count == p->removed_capacity){
		size_t cap = p->removed_capacity ? p->removed_capacity * 2 : 64;
		uint64_t *r = realloc(p->removed, cap * sizeof(*r));
		if(r == NULL){
			/* Not journaled: after a crash it would be published again,
			 * a duplicate, never a loss. */
			return;
		}
		p->removed = r;
		p->removed_capacity = cap;
	}
	p->removed[p->removed_count++] = seq;
}

void persist__tick(struct dlq_persist *p, uint64_t now)
{
	if(!enabled(p)) return;
	if(p->removed_count){
		struct dlq_headers h = {0};
		int rc = 0;
		for(size_t i = 0; rc == 0 && i < p->removed_count; i++){
			rc = state__encode_remove(p->removed[i], &h);
		}
		journal_write(p, &h, rc, true);
		p->removed_count = 0;
	}
	if(p->journal_unsynced && now - p->journal_synced_ms >= p->opt.journal_sync_ms) journal_sync(p, now);
	if(p->saver_pid && !saver_done(p)) return;
	if((now - p->last_save_ms >= p->opt.save_interval_ms && marker(p) != p->saved_marker)
			|| (p->failing && now - p->last_save_ms >= 1000)){
		int rc = p->opt.foreground ? save_foreground(p) : save_background(p, now);
		if(rc) p->last_save_ms = now;
	}
}

static const struct dlq_store_ops journal_ops = {
	.note_add = note_add,
	.note_record = note_record,
	.note_settler = note_settler,
	.note_hold = note_hold,
	.note_remove = note_remove,
	.note_delivery = note_delivery,
	.note_deadline = note_deadline,
	.note_letter = note_letter,
	.note_letter_gone = note_letter_gone,
	.note_task = note_task,
};

struct dlq_store_port persist__port(struct dlq_persist *p)
{
	struct dlq_store_port port = { NULL, NULL };
	if(p->journal_fd >= 0){
		port.ops = &journal_ops;
		port.ctx = p;
	}
	return port;
}

size_t persist__close(struct dlq_persist *p)
{
	size_t owed = p->view.outbox ? owed_count(&p->view) : 0;
	if(p->saver_pid){
		/* What it writes is older than what is saved below. */
		(void)kill(p->saver_pid, SIGKILL);
		saver_reap(p);
	}
	if(enabled(p)){
		uint64_t t0 = port__now_ms();
		if(save_foreground(p) == 0){
			char kept[64];
			kept_letters(p, p->view.letters ? p->view.letters->count : 0, kept, sizeof(kept));
			port__log(DLQ_LOG_NOTICE, "state saved to %s: %zu NACKable deliveries, %zu retry copies or dead "
					"letters%s, in %" PRIu64 " ms", p->opt.state_file, p->view.ledger->count, owed, kept,
					port__now_ms() - t0);
			owed = 0;
		}
	}
	if(p->journal_fd >= 0) close(p->journal_fd);
	free(p->journal_path);
	free(p->removed);
	free(p->rotated);
	memset(p, 0, sizeof(*p));
	p->journal_fd = -1;
	p->saver_fd = -1;
	return owed;
}
