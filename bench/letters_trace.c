/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The dead-letter store suite's traced stop (see letters.h): strace -ttt
 * attached to a broker for its SIGTERM, so that the stop splits into the
 * plugin's snapshot (encoding before the new state file is opened, its
 * write and fsync up to the rename) and the exit after it. Only open,
 * rename and exit are traced, so the write path runs untouched.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "letters.h"

/* Attaches strace to pid, tracing the syscalls of a save and the exit,
 * with their times, into out. Returns strace's pid once it is attached,
 * or -1 (no strace: the save is then only timed from outside). */
static pid_t trace_attach(pid_t pid, const char *out)
{
	char pidtext[16];
	snprintf(pidtext, sizeof(pidtext), "%d", (int)pid);
	pid_t t = fork();
	if(t < 0) return -1;
	if(t == 0){
		int fd = open("/dev/null", O_WRONLY);
		if(fd >= 0){
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		execlp("strace", "strace", "-ttt", "-e", "trace=open,openat,rename,renameat,renameat2,exit_group", "-o", out,
				"-p", pidtext, (char *)NULL);
		_exit(127);
	}
	/* Attached when the broker names a tracer. */
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	for(int i = 0; i < 300; i++){
		FILE *f = fopen(path, "r");
		long tracer = 0;
		while(f && fgets(line, sizeof(line), f)){
			if(!strncmp(line, "TracerPid:", 10)) tracer = strtol(line + 10, NULL, 10);
		}
		if(f) fclose(f);
		if(tracer == t) return t;
		if(waitpid(t, NULL, WNOHANG) == t) return -1;
		bench__sleep_ms(10);
	}
	kill(t, SIGKILL);
	waitpid(t, NULL, 0);
	return -1;
}

int letters__trace_stop(struct broker *b, struct lrun *r)
{
	char out[256], line[1024];
	snprintf(out, sizeof(out), "%s/stop.strace", b->dir);
	pid_t t = trace_attach(b->pid, out);
	broker__halt(b, SIGTERM);
	if(t < 0) return -1;
	waitpid(t, NULL, 0);
	double sig = -1, open_tmp = -1, renamed = -1, exited = -1;
	FILE *f = fopen(out, "r");
	while(f && fgets(line, sizeof(line), f)){
		double ts = strtod(line, NULL);
		if(strstr(line, "--- SIGTERM") && sig < 0) sig = ts;
		else if(strstr(line, "open") && strstr(line, LETTERS_STATE ".tmp") && open_tmp < 0) open_tmp = ts;
		else if(strstr(line, "rename") && strstr(line, LETTERS_STATE ".tmp")) renamed = ts;
		else if(strstr(line, "exit_group") || strstr(line, "+++ exited")) exited = exited < 0 ? ts : exited;
	}
	if(f) fclose(f);
	unlink(out);
	if(sig < 0 || open_tmp < sig || renamed < open_tmp || exited < renamed){
		fprintf(stderr, "dlq_bench: letters: the stop's trace did not show a save\n");
		return -1;
	}
	r->tr_encode = (open_tmp - sig) * 1e3;
	r->tr_write = (renamed - open_tmp) * 1e3;
	r->tr_exit = (exited - renamed) * 1e3;
	return 0;
}
