/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * dlq_fsync_probe: how many fdatasyncs a second a journal gets while a
 * background save writes beside it, as the plugin's save writes (issue 36;
 * docs/design.md, "Saves in the background"). A child writes SIZE MiB to a
 * file in pieces of CHUNK KiB, each handed to the disk as it goes
 * (sync_file_range, one piece in flight), at most RATE MiB a second (0: as
 * fast as the disk takes them), then fdatasyncs it; meanwhile the parent
 * appends 200 bytes to a journal and fdatasyncs it, again and again, and
 * prints how many it did and how long they took. Then the same appends
 * alone, for as long. Not a test: it prints figures.
 *   dlq_fsync_probe DIR [SIZE_MIB [CHUNK_KIB [RATE_MIB]]]   (300 1024 0)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SAMPLES 1000000

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void writer(const char *path, size_t size, size_t chunk, double rate)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	char *buf = malloc(chunk);
	if(fd < 0 || buf == NULL) _exit(1);
	memset(buf, 'x', chunk);
	double t0 = now_s();
	off_t at = 0, last = -1;
	while((size_t)at < size){
		if(write(fd, buf, chunk) != (ssize_t)chunk) _exit(1);
		(void)sync_file_range(fd, at, (off_t)chunk, SYNC_FILE_RANGE_WRITE);
		if(last >= 0){
			(void)sync_file_range(fd, last, (off_t)chunk,
					SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
		}
		last = at;
		at += (off_t)chunk;
		double due = rate > 0 ? t0 + (double)at / rate : 0;
		double wait = due - now_s();
		if(wait > 0){
			struct timespec ts = { (time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9) };
			while(nanosleep(&ts, &ts) && errno == EINTR){}
		}
	}
	if(fdatasync(fd)) _exit(1);
	close(fd);
	_exit(0);
}

/* Appends and syncs until the child ends (child > 0) or for seconds. */
static void journal(const char *path, pid_t child, double seconds, const char *what)
{
	static double lat[MAX_SAMPLES];
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC | O_CLOEXEC, 0600);
	if(fd < 0){
		perror(path);
		exit(1);
	}
	char entry[200];
	memset(entry, 'j', sizeof(entry));
	size_t n = 0;
	double t0 = now_s();
	int status = 0;
	while(n < MAX_SAMPLES){
		if(child > 0 ? waitpid(child, &status, WNOHANG) != 0 : now_s() - t0 >= seconds) break;
		double a = now_s();
		if(write(fd, entry, sizeof(entry)) != (ssize_t)sizeof(entry) || fdatasync(fd)){
			perror(path);
			exit(1);
		}
		lat[n++] = now_s() - a;
	}
	double took = now_s() - t0;
	close(fd);
	if(n == 0) return;
	qsort(lat, n, sizeof(lat[0]), by_value);
	printf("%s: %.2f s, %zu fdatasyncs (%.0f a second), p50 %.2f ms, p99 %.2f ms, max %.2f ms%s\n", what, took, n,
			(double)n / took, lat[n / 2] * 1e3, lat[n * 99 / 100] * 1e3, lat[n - 1] * 1e3,
			child > 0 && (!WIFEXITED(status) || WEXITSTATUS(status)) ? " (the writer failed)" : "");
}

int main(int argc, char **argv)
{
	if(argc < 2){
		fprintf(stderr, "usage: %s DIR [SIZE_MIB [CHUNK_KIB [RATE_MIB]]]\n", argv[0]);
		return 2;
	}
	size_t size = (size_t)(argc > 2 ? atol(argv[2]) : 300) << 20;
	size_t chunk = (size_t)(argc > 3 ? atol(argv[3]) : 1024) << 10;
	double rate = (argc > 4 ? atof(argv[4]) : 0) * 1048576.0;
	if(size == 0 || chunk == 0 || rate < 0){
		fprintf(stderr, "%s: sizes must be positive, the rate not negative\n", argv[0]);
		return 2;
	}
	char snap[4096], jour[4096];
	snprintf(snap, sizeof(snap), "%s/probe.snapshot", argv[1]);
	snprintf(jour, sizeof(jour), "%s/probe.journal", argv[1]);
	double t0 = now_s();
	pid_t pid = fork();
	if(pid < 0){
		perror("fork");
		return 1;
	}
	if(pid == 0) writer(snap, size, chunk, rate);
	char what[160];
	snprintf(what, sizeof(what), "beside a save of %zu MiB in %zu KiB pieces at %s%.0f MiB/s", size >> 20, chunk >> 10,
			rate > 0 ? "" : "up to (unpaced) ", rate > 0 ? rate / 1048576.0 : 0.0);
	journal(jour, pid, 0, what);
	double took = now_s() - t0;
	journal(jour, 0, took, "alone, as long");
	unlink(snap);
	unlink(jour);
	return 0;
}
