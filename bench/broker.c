/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Brokers for the benchmark (see bench.h): each gets a private directory
 * under /tmp with a generated configuration, a unix socket (or a loopback
 * port the kernel chose), and a log file; it is ready when its log says
 * "mosquitto version ... running", and it is stopped by PID. A broker dies
 * with the benchmark (PR_SET_PDEATHSIG), so an interrupted run leaves none.
 * The soak (tests/soak) starts its broker here too, with its own policies
 * and persistence, and halts and restarts it in the same directory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define READY_PREFIX "mosquitto version "
#define READY_SUFFIX " running"
#define STOP_TIMEOUT_MS 10000
#define STOP_TIMEOUT_VALGRIND_MS 120000
#define MAX_LIVE 8
#define PRINT_LOG_LINES 40
#define MAX_TOGGLES 4
#define MAX_VALGRIND_ARGS 4

/* Brokers started and not yet stopped, for broker__stop_all. */
static struct broker *live[MAX_LIVE];
static bool live_valgrind[MAX_LIVE];

/* The file from byte offset on, NUL-terminated (the caller frees it), or
 * NULL. */
static char *slurp_from(const char *path, long offset)
{
	FILE *f = fopen(path, "rb");
	if(f == NULL) return NULL;
	if(offset > 0 && fseek(f, offset, SEEK_SET)){
		fclose(f);
		return NULL;
	}
	size_t cap = 8192, len = 0;
	char *buf = malloc(cap);
	while(buf){
		if(cap - len < 4096){
			char *nb = realloc(buf, cap * 2);
			if(nb == NULL){
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
		size_t r = fread(buf + len, 1, cap - len - 1, f);
		len += r;
		if(r == 0){
			buf[len] = '\0';
			break;
		}
	}
	fclose(f);
	return buf;
}

static char *slurp(const char *path)
{
	return slurp_from(path, 0);
}

/* The size of a file, or 0 if it does not exist. */
static long file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

static bool log_says_running(const char *path, long offset)
{
	char *log = slurp_from(path, offset);
	bool ready = false;
	for(char *line = log; line && *line && !ready;){
		char *eol = strchr(line, '\n');
		if(eol == NULL) break; /* a line still being written */
		*eol = '\0';
		size_t n = strlen(line);
		size_t s = strlen(READY_SUFFIX);
		ready = strstr(line, READY_PREFIX) && n >= s && !strcmp(line + n - s, READY_SUFFIX);
		line = eol + 1;
	}
	free(log);
	return ready;
}

static void track(struct broker *b, bool valgrind)
{
	for(int i = 0; i < MAX_LIVE; i++){
		if(live[i] == NULL){
			live[i] = b;
			live_valgrind[i] = valgrind;
			return;
		}
	}
}

static bool untrack(struct broker *b)
{
	for(int i = 0; i < MAX_LIVE; i++){
		if(live[i] == b){
			live[i] = NULL;
			return live_valgrind[i];
		}
	}
	return false;
}

static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if(d){
		struct dirent *e;
		char path[512];
		while((e = readdir(d)) != NULL){
			if(!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			unlink(path);
		}
		closedir(d);
	}
	rmdir(dir);
}

/* Forks and execs the broker on the configuration in b->dir and waits for
 * the "running" line it writes after b->log_offset. */
static int spawn(struct broker *b, const struct broker_opts *o)
{
	const char *bin = o->mosquitto_bin ? o->mosquitto_bin : "/usr/sbin/mosquitto";
	char out_path[256], cg_arg[320];
	snprintf(out_path, sizeof(out_path), "%s/stdout.log", b->dir);

	pid_t pid = fork();
	if(pid < 0){
		perror("dlq_bench: fork");
		return -1;
	}
	if(pid == 0){
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if(o->cpu >= 0){
			cpu_set_t set;
			CPU_ZERO(&set);
			CPU_SET(o->cpu, &set);
			sched_setaffinity(0, sizeof(set), &set);
		}
		int fd = open(out_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if(fd >= 0){
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
			close(fd);
		}
		if(o->valgrind_out){
			/* [chroot ROOT sh -c 'cd CWD && exec "$@"'] valgrind
			 * --tool=callgrind --quiet --callgrind-out-file=F
			 * [--toggle-collect=P]... mosquitto -c CONF: chroot and sh
			 * exec, so the PID stays the broker's, and relative paths
			 * (the plugin's, the output's) mean the same inside the
			 * root, where the working directory is mounted at its own
			 * path. */
			char *argv[24 + MAX_TOGGLES + MAX_VALGRIND_ARGS];
			char toggles[MAX_TOGGLES][160];
			char cwd[512];
			int n = 0;
			if(o->valgrind_root){
				if(getcwd(cwd, sizeof(cwd)) == NULL) _exit(127);
				argv[n++] = "chroot";
				argv[n++] = (char *)o->valgrind_root;
				argv[n++] = "/bin/sh";
				argv[n++] = "-c";
				argv[n++] = "cd \"$0\" && exec \"$@\"";
				argv[n++] = cwd;
				bin = "/usr/sbin/mosquitto";
			}
			argv[n++] = "valgrind";
			argv[n++] = "--tool=callgrind";
			argv[n++] = "--quiet";
			snprintf(cg_arg, sizeof(cg_arg), "--callgrind-out-file=%s", o->valgrind_out);
			argv[n++] = cg_arg;
			for(int i = 0; o->valgrind_toggle && i < MAX_TOGGLES && o->valgrind_toggle[i]; i++){
				snprintf(toggles[i], sizeof(toggles[i]), "--toggle-collect=%s", o->valgrind_toggle[i]);
				argv[n++] = toggles[i];
			}
			for(int i = 0; o->valgrind_args && i < MAX_VALGRIND_ARGS && o->valgrind_args[i]; i++){
				argv[n++] = (char *)o->valgrind_args[i];
			}
			argv[n++] = (char *)bin;
			argv[n++] = "-c";
			argv[n++] = b->conf_path;
			argv[n] = NULL;
			execvp(argv[0], argv);
		}else{
			execl(bin, bin, "-c", b->conf_path, (char *)NULL);
		}
		_exit(127);
	}
	b->pid = pid;
	b->running = true;
	track(b, o->valgrind_out != NULL);

	uint64_t deadline = bench__now_ns() + (uint64_t)o->ready_timeout_ms * 1000000u;
	while(bench__now_ns() < deadline && !bench__interrupted()){
		if(log_says_running(b->log_path, b->log_offset)) return 0;
		int status;
		if(waitpid(pid, &status, WNOHANG) == pid){
			b->running = false;
			untrack(b);
			fprintf(stderr, "dlq_bench: broker exited during startup (status 0x%x)\n", status);
			broker__print_log(b);
			return -1;
		}
		bench__sleep_ms(10);
	}
	if(!bench__interrupted()){
		fprintf(stderr, "dlq_bench: broker not ready within %d ms\n", o->ready_timeout_ms);
		broker__print_log(b);
	}
	broker__halt(b, SIGKILL);
	return -1;
}

int broker__start(struct broker *b, const struct broker_opts *o)
{
	memset(b, 0, sizeof(*b));
	snprintf(b->dir, sizeof(b->dir), "/tmp/%s-XXXXXX", o->dir_name ? o->dir_name : "dlq-bench");
	if(mkdtemp(b->dir) == NULL){
		perror("dlq_bench: mkdtemp");
		return -1;
	}
	snprintf(b->conf_path, sizeof(b->conf_path), "%s/mosquitto.conf", b->dir);
	snprintf(b->log_path, sizeof(b->log_path), "%s/broker.log", b->dir);
	if(broker_conf__write(b, o)){
		fprintf(stderr, "dlq_bench: cannot write %s\n", b->conf_path);
		remove_dir(b->dir);
		return -1;
	}
	b->log_offset = 0;
	if(spawn(b, o)){
		remove_dir(b->dir);
		return -1;
	}
	return 0;
}

int broker__restart(struct broker *b, const struct broker_opts *o)
{
	if(b->running) return -1;
	b->log_offset = file_size(b->log_path);
	return spawn(b, o);
}

int broker__halt(struct broker *b, int sig)
{
	int status = -1;
	if(b->running){
		bool valgrind = untrack(b);
		uint64_t t0 = bench__now_ns();
		kill(b->pid, sig);
		uint64_t deadline = t0 + (uint64_t)(valgrind ? STOP_TIMEOUT_VALGRIND_MS : STOP_TIMEOUT_MS) * 1000000u;
		bool reaped = false;
		/* Polled every millisecond: the stop time is reported. */
		while(!reaped && bench__now_ns() < deadline){
			if(waitpid(b->pid, &status, WNOHANG) == b->pid){
				reaped = true;
			}else{
				bench__sleep_ms(1);
			}
		}
		b->stop_ms = (double)(bench__now_ns() - t0) / 1e6;
		if(!reaped){
			fprintf(stderr, "dlq_bench: broker %d did not stop on SIGTERM; killing it\n", (int)b->pid);
			kill(b->pid, SIGKILL);
			waitpid(b->pid, &status, 0);
		}
		b->running = false;
	}
	return status;
}

void broker__remove_dir(struct broker *b)
{
	remove_dir(b->dir);
}

int broker__stop(struct broker *b)
{
	int status = broker__halt(b, SIGTERM);
	b->watch_bytes = -1;
	if(b->watch_file[0]){
		char path[256];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", b->dir, b->watch_file);
		if(stat(path, &st) == 0) b->watch_bytes = (long long)st.st_size;
	}
	remove_dir(b->dir);
	return status;
}

void broker__stop_all(void)
{
	for(int i = 0; i < MAX_LIVE; i++){
		if(live[i]){
			kill(live[i]->pid, SIGKILL);
			waitpid(live[i]->pid, NULL, 0);
			live[i]->running = false;
			remove_dir(live[i]->dir);
			live[i] = NULL;
		}
	}
}

long broker__proc_kib(pid_t pid, const char *file, const char *field)
{
	char path[64], line[256];
	long kib = -1;
	size_t len = strlen(field);
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	FILE *f = fopen(path, "r");
	if(f == NULL) return -1;
	while(fgets(line, sizeof(line), f)){
		if(strncmp(line, field, len)) continue;
		char *end;
		kib = strtol(line + len, &end, 10);
		if(end == line + len) kib = -1;
		break;
	}
	fclose(f);
	return kib;
}

long broker__rss_kib(const struct broker *b)
{
	return broker__proc_kib(b->pid, "status", "VmRSS:");
}

/* CPU time from /proc/PID/stat in nanoseconds, clock-tick resolution: the
 * process's own (utime + stime, fields 14 and 15) or that of the children
 * it reaped (cutime + cstime, 16 and 17); 0 if it cannot be read. */
static uint64_t stat_cpu_ns(pid_t pid, bool children)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if(f == NULL) return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The fields after the ")" that ends the command name. */
	char *p = strrchr(buf, ')');
	unsigned long long ut = 0, st = 0, cut = 0, cst = 0;
	if(p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu", &ut, &st, &cut,
			&cst) != 4){
		return 0;
	}
	long hz = sysconf(_SC_CLK_TCK);
	unsigned long long ticks = children ? cut + cst : ut + st;
	return ticks * (1000000000ull / (unsigned long long)(hz > 0 ? hz : 100));
}

uint64_t broker__cpu_ns(const struct broker *b)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)b->pid);
	FILE *f = fopen(path, "r");
	if(f){
		unsigned long long ns;
		int n = fscanf(f, "%llu", &ns);
		fclose(f);
		if(n == 1) return ns;
	}
	return stat_cpu_ns(b->pid, false);
}

uint64_t broker__children_cpu_ns(const struct broker *b)
{
	return stat_cpu_ns(b->pid, true);
}

void broker__print_log(const struct broker *b)
{
	char path[256];
	const char *names[] = { "mosquitto.conf", "broker.log", "stdout.log" };
	for(size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++){
		snprintf(path, sizeof(path), "%s/%s", b->dir, names[i]);
		char *text = slurp(path);
		/* The last lines only: a long run's log is long. */
		const char *tail = text;
		size_t lines = 0;
		for(const char *p = text ? text + strlen(text) : NULL; p && p > text; p--){
			if(p[-1] == '\n' && ++lines > PRINT_LOG_LINES){
				tail = p;
				break;
			}
		}
		fprintf(stderr, "---- %s%s ----\n%s\n", path, tail != text ? " (last lines)" : "", tail ? tail : "(missing)");
		free(text);
	}
}
