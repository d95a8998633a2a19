/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Child processes and broker-side helpers for the tool, bridge and worker
 * tests (see proc.h). A child's standard output and error go to pipes (its
 * standard output to a pseudo-terminal, for a test of what it shows on
 * one) that are read whenever the test waits on it, so a chatty child never
 * blocks.
 * Every record is on the test's list from its spawn until proc_free, which
 * the checked fixture calls for whatever the test left (proc__free_all).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "harness_int.h"
#include "proc.h"

#define MAX_ARGS 48

struct buf {
	char *data;
	size_t len;
	size_t cap;
};

struct proc {
	struct proc *next;    /* the test's list of processes */
	pid_t pid;
	int fd[2];            /* stdout, stderr; -1 once at EOF */
	struct buf out[2];
	bool reaped;
	int status;           /* exit status, or 128 + signal */
	char cmdline[1024];
};

/* The current test's processes, newest first; each is freed by proc_free. */
static struct proc *procs;

void proc__reset(void)
{
	procs = NULL;
}

void proc__free_all(void)
{
	while(procs){
		proc_free(procs);
	}
}

static void buf_add(struct buf *b, const char *s, size_t n)
{
	if(b->len + n + 1 > b->cap){
		size_t cap = b->cap ? b->cap : 1024;
		while(cap < b->len + n + 1){
			cap *= 2;
		}
		char *grown = realloc(b->data, cap);
		if(!grown){
			abort();
		}
		b->data = grown;
		b->cap = cap;
	}
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

/* Reads what the pipes have, waiting up to timeout_ms for the first bytes. */
static void pump(struct proc *p, int timeout_ms)
{
	struct pollfd pf[2];
	int n = 0;
	int map[2];
	for(int i = 0; i < 2; i++){
		if(p->fd[i] >= 0){
			pf[n].fd = p->fd[i];
			pf[n].events = POLLIN;
			map[n++] = i;
		}
	}
	if(n == 0){
		if(timeout_ms > 0){
			it_sleep_ms((unsigned)timeout_ms);
		}
		return;
	}
	if(poll(pf, (nfds_t)n, timeout_ms) <= 0){
		return;
	}
	for(int k = 0; k < n; k++){
		if(!(pf[k].revents & (POLLIN | POLLHUP | POLLERR))){
			continue;
		}
		char chunk[4096];
		for(;;){
			ssize_t r = read(pf[k].fd, chunk, sizeof(chunk));
			if(r > 0){
				buf_add(&p->out[map[k]], chunk, (size_t)r);
				continue;
			}
			/* The end: a pipe's writers gone, or a terminal's slave
			 * closed (its master then reads EIO, once what was
			 * written is read). */
			if(r == 0 || (r < 0 && errno == EIO)){
				close(pf[k].fd);
				p->fd[map[k]] = -1;
			}
			break;
		}
	}
}

/* Reaps the process if it ended; returns whether it has. */
static bool try_reap(struct proc *p)
{
	if(p->reaped){
		return true;
	}
	int st;
	if(waitpid(p->pid, &st, WNOHANG) != p->pid){
		return false;
	}
	p->reaped = true;
	p->status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 255;
	return true;
}

/* Starts argv[0] (a path) with argv, its output captured; with tty, its
 * standard output a pseudo-terminal's slave in raw mode. */
static struct proc *spawn_argv(const char *file, int line, const char *const *argv, bool tty)
{
	struct proc *p = calloc(1, sizeof(*p));
	if(!p){
		abort();
	}
	p->fd[0] = p->fd[1] = -1;
	p->next = procs;
	procs = p;
	size_t used = 0;
	for(size_t i = 0; argv[i] && used < sizeof(p->cmdline) - 1; i++){
		int n = snprintf(p->cmdline + used, sizeof(p->cmdline) - used, "%s%s", i ? " " : "", argv[i]);
		if(n < 0){
			break;
		}
		used += (size_t)n;
	}
	int out[2], err[2];
	if(tty){
		/* out[0] the master, out[1] the slave, as a pipe's ends. */
		struct termios raw;
		if(openpty(&out[0], &out[1], NULL, NULL, NULL) || tcgetattr(out[1], &raw)){
			fail_at(file, line, "openpty: %s", strerror(errno));
		}
		cfmakeraw(&raw);
		if(tcsetattr(out[1], TCSANOW, &raw) || fcntl(out[0], F_SETFD, FD_CLOEXEC) || fcntl(out[1], F_SETFD, FD_CLOEXEC)){
			fail_at(file, line, "a raw terminal: %s", strerror(errno));
		}
	}else if(pipe2(out, O_CLOEXEC)){
		fail_at(file, line, "pipe: %s", strerror(errno));
	}
	if(pipe2(err, O_CLOEXEC)){
		fail_at(file, line, "pipe: %s", strerror(errno));
	}
	pid_t pid = harness__spawn(file, line, argv[0], (char *const *)argv, NULL, out[1], err[1]);
	close(out[1]);
	close(err[1]);
	p->pid = pid;
	p->fd[0] = out[0];
	p->fd[1] = err[0];
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(err[0], F_SETFL, O_NONBLOCK);
	return p;
}

static struct proc *spawn_v(const char *file, int line, struct broker *b, va_list ap, bool tty)
{
	const char *bin = getenv("DLQCTL");
	if(!bin || !*bin){
		fail_at(file, line, "DLQCTL is not set: run the tests with meson test");
	}
	const char *argv[MAX_ARGS];
	size_t argc = 0;
	argv[argc++] = bin;
	argv[argc++] = "--unix";
	argv[argc++] = broker_socket(b);
	const char *a;
	while((a = va_arg(ap, const char *)) != NULL){
		if(argc + 1 >= MAX_ARGS){
			fail_at(file, line, "too many arguments for dlqctl");
		}
		argv[argc++] = a;
	}
	argv[argc] = NULL;
	return spawn_argv(file, line, argv, tty);
}

struct proc *proc_spawn_at(const char *file, int line, const char *const *argv)
{
	if(!argv[0] || argv[0][0] != '/'){
		fail_at(file, line, "proc_spawn needs an absolute path, not \"%s\"", argv[0] ? argv[0] : "");
	}
	return spawn_argv(file, line, argv, false);
}

struct proc *dlqctl_spawn_at(const char *file, int line, struct broker *b, ...)
{
	va_list ap;
	va_start(ap, b);
	struct proc *p = spawn_v(file, line, b, ap, false);
	va_end(ap);
	return p;
}

bool proc_tty_available(char *why, size_t len)
{
	int master, slave;
	if(openpty(&master, &slave, NULL, NULL, NULL)){
		snprintf(why, len, "openpty: %s", strerror(errno));
		return false;
	}
	close(master);
	close(slave);
	return true;
}

struct proc *dlqctl_spawn_tty_at(const char *file, int line, struct broker *b, ...)
{
	va_list ap;
	va_start(ap, b);
	struct proc *p = spawn_v(file, line, b, ap, true);
	va_end(ap);
	return p;
}

struct proc *dlqctl_run_at(const char *file, int line, struct broker *b, ...)
{
	va_list ap;
	va_start(ap, b);
	struct proc *p = spawn_v(file, line, b, ap, false);
	va_end(ap);
	proc_wait_at(file, line, p, HARNESS_WAIT_MS);
	return p;
}

struct proc *dlqctl_expect_at(const char *file, int line, int want, struct broker *b, ...)
{
	va_list ap;
	va_start(ap, b);
	struct proc *p = spawn_v(file, line, b, ap, false);
	va_end(ap);
	int st = proc_wait_at(file, line, p, HARNESS_WAIT_MS);
	if(st != want){
		proc_dump(p);
		fail_at(file, line, "dlqctl exited with status %d, expected %d", st, want);
	}
	return p;
}

int proc_wait_at(const char *file, int line, struct proc *p, int timeout_ms)
{
	uint64_t deadline = it_now_ms() + (uint64_t)timeout_ms;
	while(!try_reap(p)){
		if(it_now_ms() > deadline){
			kill(p->pid, SIGKILL);
			waitpid(p->pid, NULL, 0);
			p->reaped = true;
			p->status = 128 + SIGKILL;
			pump(p, 0);
			proc_dump(p);
			fail_at(file, line, "%s did not end within %d ms", p->cmdline, timeout_ms);
		}
		pump(p, 20);
	}
	/* What it wrote before it ended is still in the pipes. */
	while(p->fd[0] >= 0 || p->fd[1] >= 0){
		pump(p, 100);
	}
	return p->status;
}

bool proc_ended(struct proc *p)
{
	return try_reap(p);
}

/* Waits until output stream i (0 stdout, 1 stderr) holds needle n times. */
static bool wait_stream(struct proc *p, int i, const char *needle, size_t n, int timeout_ms)
{
	uint64_t deadline = it_now_ms() + (uint64_t)timeout_ms;
	for(;;){
		pump(p, 0);
		if(it_count(p->out[i].data ? p->out[i].data : "", needle) >= n){
			return true;
		}
		if(it_now_ms() > deadline || (try_reap(p) && p->fd[i] < 0)){
			return false;
		}
		pump(p, 20);
	}
}

bool proc_wait_output(struct proc *p, const char *needle, size_t n, int timeout_ms)
{
	return wait_stream(p, 0, needle, n, timeout_ms);
}

bool proc_wait_error(struct proc *p, const char *needle, size_t n, int timeout_ms)
{
	return wait_stream(p, 1, needle, n, timeout_ms);
}

void proc_pump(struct proc *p)
{
	pump(p, 0);
}

void proc_kill(struct proc *p, int sig)
{
	if(!p->reaped){
		kill(p->pid, sig);
	}
}

void proc_free(struct proc *p)
{
	if(!p){
		return;
	}
	for(struct proc **pp = &procs; *pp; pp = &(*pp)->next){
		if(*pp == p){
			*pp = p->next;
			break;
		}
	}
	if(p->pid > 0 && !p->reaped){
		kill(p->pid, SIGKILL);
		waitpid(p->pid, NULL, 0);
	}
	for(int i = 0; i < 2; i++){
		if(p->fd[i] >= 0){
			close(p->fd[i]);
		}
		free(p->out[i].data);
	}
	free(p);
}

int proc_status(const struct proc *p)
{
	return p->status;
}

const char *proc_out(struct proc *p)
{
	return p->out[0].data ? p->out[0].data : "";
}

const char *proc_err(struct proc *p)
{
	return p->out[1].data ? p->out[1].data : "";
}

void proc_dump(struct proc *p)
{
	fprintf(stderr, "---- %s (status %d) ----\n---- stdout ----\n%s---- stderr ----\n%s---- end ----\n",
			p->cmdline, p->reaped ? p->status : -1, proc_out(p), proc_err(p));
}

size_t it_count(const char *text, const char *needle)
{
	size_t n = 0;
	size_t len = strlen(needle);
	if(len == 0){
		return 0;
	}
	for(const char *s = strstr(text, needle); s; s = strstr(s + len, needle)){
		n++;
	}
	return n;
}

size_t it_lines_with(const char *text, const char *needle, char *line, size_t len)
{
	size_t n = 0;
	const char *p = text;
	while(*p){
		const char *eol = strchr(p, '\n');
		size_t l = eol ? (size_t)(eol - p) : strlen(p);
		if(memmem(p, l, needle, strlen(needle))){
			if(n == 0 && line && len){
				size_t c = l < len - 1 ? l : len - 1;
				memcpy(line, p, c);
				line[c] = '\0';
			}
			n++;
		}
		p += l + (eol ? 1 : 0);
	}
	return n;
}

int it_free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0 };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t alen = sizeof(a);
	ck_assert_msg(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "bind: %s", strerror(errno));
	ck_assert_msg(getsockname(fd, (struct sockaddr *)&a, &alen) == 0, "getsockname: %s", strerror(errno));
	close(fd);
	return ntohs(a.sin_port);
}

bool it_wait_log(const struct broker *b, const char *needle, size_t n, int timeout_ms)
{
	uint64_t deadline = it_now_ms() + (uint64_t)timeout_ms;
	for(;;){
		char *log = broker_log_since_start(b);
		size_t got = it_count(log, needle);
		free(log);
		if(got >= n){
			return true;
		}
		if(it_now_ms() > deadline){
			return false;
		}
		it_sleep_ms(20);
	}
}

void it_signal_broker_at(const char *file, int line, struct broker *b, int sig)
{
	char *text = harness__read_file(broker_path(b, "pid"));
	if(!text){
		fail_at(file, line, "broker has no pid file: was it started?");
	}
	long pid = strtol(text, NULL, 10);
	free(text);
	if(pid <= 0 || kill((pid_t)pid, sig) != 0){
		fail_at(file, line, "signal %d to broker pid %ld: %s", sig, pid, strerror(errno));
	}
}

const char *proc_env_or_fail(const char *name)
{
	const char *v = getenv(name);
	ck_assert_msg(v && *v, "%s is not set: run the tests with meson test", name);
	return v;
}

void proc_example_command(const char *example, char *script, size_t size, const char **argv, size_t *n)
{
	const char *examples = proc_env_or_fail("DLQ_EXAMPLES");
	if(!strncmp(example, "node/", 5)){
		char mqtt_pkg[4096];
		snprintf(mqtt_pkg, sizeof(mqtt_pkg), "%s/node/node_modules/mqtt/package.json", examples);
		ck_assert_msg(access(mqtt_pkg, R_OK) == 0,
				"%s is missing: run `npm ci` in examples/node (the build's npm_ci target does)", mqtt_pkg);
		argv[(*n)++] = proc_env_or_fail("NODE");
	}else{
		ck_assert_msg(!strncmp(example, "python/", 7), "no interpreter for the example %s", example);
		argv[(*n)++] = proc_env_or_fail("PYTHON3");
	}
	snprintf(script, size, "%s/%s", examples, example);
	argv[(*n)++] = script;
}
