/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Driving a broker that runs under callgrind (see callgrind.h), for the
 * suites that measure phases of one long-lived broker (growth_callgrind.c,
 * deadlines.c): callgrind_control (the root's on 2.1, as valgrind is)
 * zeroes its counts, dumps them as the next part of its profile (OUT.1,
 * OUT.2, ...), or turns its instrumentation on and off; a dump is waited
 * for until its file is complete.
 */
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "callgrind.h"

#define CG_DUMP_TIMEOUT_MS 300000

/* Whether a callgrind profile is complete: its last line is "totals: N". */
static bool profile_written(const char *path)
{
	char tail[256];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if(fd < 0) return false;
	off_t end = lseek(fd, 0, SEEK_END);
	off_t from = end > (off_t)sizeof(tail) - 1 ? end - (off_t)sizeof(tail) + 1 : 0;
	ssize_t r = pread(fd, tail, sizeof(tail) - 1, from);
	close(fd);
	if(r <= 0) return false;
	tail[r] = '\0';
	char *last = tail[r - 1] == '\n' ? tail + r - 1 : NULL;
	if(last == NULL) return false;
	*last = '\0';
	char *start = strrchr(tail, '\n');
	return !strncmp(start ? start + 1 : tail, "totals:", 7);
}

void cg__remove_vgdb_files(pid_t pid)
{
	char pattern[64];
	glob_t g;
	snprintf(pattern, sizeof(pattern), "/tmp/vgdb-pipe-*-%d-by-*", (int)pid);
	if(glob(pattern, 0, NULL, &g) == 0){
		for(size_t i = 0; i < g.gl_pathc; i++) unlink(g.gl_pathv[i]);
	}
	globfree(&g);
}

int cg__control(const char *valgrind_root, pid_t pid, const char *arg)
{
	char pidbuf[16];
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)pid);
	pid_t child = fork();
	if(child < 0) return -1;
	if(child == 0){
		int fd = open("/dev/null", O_WRONLY);
		if(fd >= 0){
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
			close(fd);
		}
		if(valgrind_root){
			execlp("chroot", "chroot", valgrind_root, "callgrind_control", arg, pidbuf, (char *)NULL);
		}else{
			execlp("callgrind_control", "callgrind_control", arg, pidbuf, (char *)NULL);
		}
		_exit(127);
	}
	int status;
	if(waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status)){
		fprintf(stderr, "dlq_bench: callgrind_control %s %s failed\n", arg, pidbuf);
		return -1;
	}
	return 0;
}

int cg__dump_part(const char *valgrind_root, pid_t pid, const char *out, int part, char *path, size_t len)
{
	snprintf(path, len, "%s.%d", out, part);
	if(cg__control(valgrind_root, pid, "-d")) return -1;
	uint64_t deadline = bench__now_ns() + CG_DUMP_TIMEOUT_MS * 1000000ull;
	while(!profile_written(path) && bench__now_ns() < deadline && !bench__interrupted()){
		bench__sleep_ms(20);
	}
	if(!profile_written(path)){
		fprintf(stderr, "dlq_bench: no profile %s after callgrind_control -d\n", path);
		return -1;
	}
	return 0;
}
