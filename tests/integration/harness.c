/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The integration-test harness's program level (see harness.h): the run
 * directory, Check's checked fixture, and the report of the brokers of
 * failed tests after the run; and small file helpers the other harness files
 * share. Brokers live in broker.c, clients in client.c, received messages in
 * message.c, the plugin's contract in contract.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness_int.h"

/* The run directory, made by harness_init in the runner's process; each
 * broker gets a directory inside it. */
static char run_dir[64];

uint64_t it_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

bool it__cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mutex, uint64_t deadline)
{
	uint64_t now = it_now_ms();
	if(now >= deadline){
		return false;
	}
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t left = deadline - now;
	ts.tv_sec += (time_t)(left / 1000);
	ts.tv_nsec += (long)(left % 1000) * 1000000L;
	if(ts.tv_nsec >= 1000000000L){
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(cond, mutex, &ts);
	return true;
}

int64_t it_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void it_sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
	while(nanosleep(&ts, &ts) == -1 && errno == EINTR){
	}
}

void *harness__xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if(!p){
		fprintf(stderr, "harness: out of memory\n");
		abort();
	}
	return p;
}

char *harness__xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = harness__xmalloc(n);
	memcpy(p, s, n);
	return p;
}

char *harness__read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if(!f){
		return NULL;
	}
	size_t cap = 4096, len = 0;
	char *buf = harness__xmalloc(cap);
	for(;;){
		if(cap - len < 2048){
			cap *= 2;
			char *nb = realloc(buf, cap);
			if(!nb){
				abort();
			}
			buf = nb;
		}
		size_t r = fread(buf + len, 1, cap - len - 1, f);
		len += r;
		if(r == 0){
			break;
		}
	}
	fclose(f);
	buf[len] = '\0';
	return buf;
}

int harness__write_file(const char *path, const char *content)
{
	FILE *f = fopen(path, "wb");
	if(!f){
		return -1;
	}
	size_t n = strlen(content);
	int rc = fwrite(content, 1, n, f) == n ? 0 : -1;
	if(fclose(f) != 0){
		rc = -1;
	}
	return rc;
}

void harness__remove_flat_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if(d){
		struct dirent *e;
		char path[1024];
		while((e = readdir(d)) != NULL){
			if(!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")){
				continue;
			}
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			unlink(path);
		}
		closedir(d);
	}
	rmdir(dir);
}

void harness_init(SRunner *sr)
{
	snprintf(run_dir, sizeof(run_dir), "/tmp/dlq-it-XXXXXX");
	if(!mkdtemp(run_dir)){
		perror("harness: mkdtemp");
		exit(EXIT_FAILURE);
	}
	/* Check's default is fork mode (each test in its own process), which
	 * this harness relies on to print a failed test's broker log; CK_FORK=no
	 * is for running a test under a debugger. */
	(void)sr;
	/* A broker whose test died is re-parented to this process, which can
	 * then reap it in harness_finish. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	mosquitto_lib_init();
}

static void print_file(const char *title, const char *path)
{
	char *text = harness__read_file(path);
	fprintf(stderr, "---- %s (%s) ----\n%s%s", title, path,
			text ? text : "(missing)\n",
			text && *text && text[strlen(text) - 1] != '\n' ? "\n" : "");
	free(text);
}

/* Kills a broker left by a test that died, if that pid is still our broker
 * (its command line names the configuration file in its directory). */
static void kill_leftover(const char *dir)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/pid", dir);
	char *pidtext = harness__read_file(path);
	if(!pidtext){
		return;
	}
	long pid = strtol(pidtext, NULL, 10);
	free(pidtext);
	if(pid <= 0){
		return;
	}
	snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
	FILE *f = fopen(path, "rb");
	if(!f){
		return;
	}
	char cmd[2048];
	size_t n = fread(cmd, 1, sizeof(cmd) - 1, f);
	fclose(f);
	for(size_t i = 0; i < n; i++){
		if(cmd[i] == '\0'){
			cmd[i] = ' ';
		}
	}
	cmd[n] = '\0';
	if(strstr(cmd, dir)){
		kill((pid_t)pid, SIGKILL);
		waitpid((pid_t)pid, NULL, 0);
	}
}

int harness_finish(void)
{
	int left = 0;
	DIR *d = opendir(run_dir);
	if(d){
		struct dirent *e;
		char dir[400], path[512];
		while((e = readdir(d)) != NULL){
			if(strncmp(e->d_name, "b-", 2)){
				continue;
			}
			snprintf(dir, sizeof(dir), "%s/%s", run_dir, e->d_name);
			kill_leftover(dir);
			snprintf(path, sizeof(path), "%s/label", dir);
			char *label = harness__read_file(path);
			fprintf(stderr, "\n==== broker of failed test %s ====\n", label ? label : "(unknown)");
			free(label);
			snprintf(path, sizeof(path), "%s/mosquitto.conf", dir);
			print_file("configuration", path);
			snprintf(path, sizeof(path), "%s/broker.log", dir);
			print_file("broker log", path);
			fprintf(stderr, "==== end of broker log ====\n");
			harness__remove_flat_dir(dir);
			left++;
		}
		closedir(d);
	}
	/* Reap brokers that died with their test (and were re-parented here). */
	while(waitpid(-1, NULL, WNOHANG) > 0){
	}
	rmdir(run_dir);
	mosquitto_lib_cleanup();
	return left;
}

bool harness_needs_21(const char *suite, const char *why)
{
	if(BROKER_IS_21()) return true;
	int v = broker_version();
	printf("%s: skipped on mosquitto %d.%d.%d: %s\n", suite, v / 1000000, v / 1000 % 1000, v % 1000, why);
	return false;
}

int harness_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	harness_init(sr);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	failed += harness_finish();
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

const char *harness__run_dir(void)
{
	return run_dir;
}

static void harness_setup(void)
{
	broker__reset();
	client__reset();
	proc__reset();
	flood__reset();
}

/* Runs only when the test passed (in fork mode a failed test's process
 * exits at the failed assertion): the test fails after all if a broker
 * crashed or did not stop cleanly. */
static void harness_teardown(void)
{
	char problems[2048] = "";
	proc__free_all();
	flood__free_all();
	client__free_all();
	bool ok = broker__stop_all(problems, sizeof(problems));
	ck_assert_msg(ok, "%s", problems);
}

/* DLQ_TEST_SLOWDOWN, read once per process; a value that is not a whole
 * factor from 1 to 20 is refused loudly rather than ignored. */
static int slowdown(void)
{
	static int factor;
	if(factor == 0){
		const char *s = getenv("DLQ_TEST_SLOWDOWN");
		factor = 1;
		if(s && *s){
			char *end = NULL;
			long v = strtol(s, &end, 10);
			if(*end != '\0' || v < 1 || v > 20){
				fprintf(stderr, "harness: DLQ_TEST_SLOWDOWN=\"%s\" is not a whole factor from 1 to 20\n", s);
				exit(2);
			}
			factor = (int)v;
		}
	}
	return factor;
}

int harness_deadline_ms(int ms)
{
	return ms * slowdown();
}

int harness_wait_ms(void)
{
	return harness_deadline_ms(30000);
}

TCase *harness_tcase(const char *name)
{
	TCase *tc = tcase_create(name);
	tcase_add_checked_fixture(tc, harness_setup, harness_teardown);
	tcase_set_timeout(tc, HARNESS_TEST_TIMEOUT);
	return tc;
}

pid_t harness__spawn(const char *file, int line, const char *bin, char *const argv[], char *const envp[], int out_fd,
		int err_fd)
{
	pid_t parent = getpid();
	pid_t pid = fork();
	if(pid < 0){
		fail_at(file, line, "fork: %s", strerror(errno));
	}
	if(pid == 0){
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if(getppid() != parent){
			_exit(127);
		}
		int devnull = open("/dev/null", O_RDONLY);
		if(devnull >= 0){
			dup2(devnull, 0);
		}
		dup2(out_fd, 1);
		dup2(err_fd, 2);
		if(envp){
			execve(bin, argv, envp);
		}else{
			execv(bin, argv);
		}
		_exit(127);
	}
	return pid;
}
