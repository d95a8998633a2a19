/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Brokers for the integration tests: the real mosquitto binary, started from
 * a generated configuration in a private directory, waited for until its log
 * says it is running, and stopped by PID. A broker is a child of the test's
 * process and is killed with it (PR_SET_PDEATHSIG), so a failed test leaves
 * nothing running; its directory stays behind for harness_finish to print.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness_int.h"

#define MAX_BROKERS 16
#define MAX_FILES 16
#define MAX_ENV 8

extern char **environ;
#define READY_LINE_PREFIX "mosquitto version "
#define READY_LINE_SUFFIX " running"

struct broker {
	char label[128];
	char dir[128];
	char sock[320];
	char conf_path[320];
	char log_path[320];
	char *extra;           /* configuration lines added by the test */
	size_t extra_len;
	char *files[MAX_FILES];/* paths handed out by broker_file/broker_path */
	size_t nfiles;
	pid_t pid;             /* 0: never started */
	bool reaped;
	int status;            /* waitpid status once reaped */
	bool refusal;          /* started by broker_expect_refusal */
	bool ended;            /* stopped by broker_shutdown or broker_kill */
	long log_start;        /* size of the log when it was last started */
	bool per_listener_settings;
	char *env[MAX_ENV];    /* "NAME=value" (or "NAME" to unset) for the broker */
	size_t nenv;
	char *bin;             /* broker_use_bin's, or NULL: MOSQUITTO_BIN's */
};

/* What the current test (one forked process) started. */
static struct broker *brokers[MAX_BROKERS];
static size_t nbrokers;

/* True if the log has the broker's readiness line. */
static bool log_is_ready(const char *log)
{
	const char *p = log;
	while(p && *p){
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		size_t slen = strlen(READY_LINE_SUFFIX);
		if(len >= slen && memmem(p, len, READY_LINE_PREFIX, strlen(READY_LINE_PREFIX))
				&& !memcmp(p + len - slen, READY_LINE_SUFFIX, slen)){
			return true;
		}
		p = eol ? eol + 1 : NULL;
	}
	return false;
}

static void describe_status(int status, char *buf, size_t len)
{
	if(WIFEXITED(status)){
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
	}else if(WIFSIGNALED(status)){
		snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	}else{
		snprintf(buf, len, "wait status 0x%x", status);
	}
}

static const char *broker_bin(void)
{
	const char *bin = getenv("MOSQUITTO_BIN");
	return bin && *bin ? bin : "/usr/sbin/mosquitto";
}

/* The version in the first "mosquitto version X.Y.Z" of text, as
 * broker_version() gives it, or 0 if there is none. */
static int version_in(const char *text)
{
	for(const char *p = strstr(text, READY_LINE_PREFIX); p; p = strstr(p + 1, READY_LINE_PREFIX)){
		int major, minor, revision;
		if(sscanf(p + strlen(READY_LINE_PREFIX), "%d.%d.%d", &major, &minor, &revision) == 3){
			return major * 1000000 + minor * 1000 + revision;
		}
	}
	return 0;
}

int broker_version(void)
{
	static int version = -1;
	if(version >= 0) return version;
	version = 0;
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "'%s' -h 2>&1", broker_bin());
	FILE *fp = popen(cmd, "r");
	if(fp == NULL) return version;
	char line[512];
	while(version == 0 && fgets(line, sizeof(line), fp)){
		version = version_in(line);
	}
	pclose(fp);
	return version;
}

int broker_running_version(const struct broker *b)
{
	char *log = broker_log_since_start(b);
	int version = version_in(log);
	free(log);
	return version;
}

/* Said when a wait fails, since a crashed broker explains it. */
void broker__health(struct broker *b, char *buf, size_t len)
{
	buf[0] = '\0';
	if(!b || b->pid == 0){
		return;
	}
	if(!b->reaped){
		int status;
		if(waitpid(b->pid, &status, WNOHANG) != b->pid){
			return;
		}
		b->reaped = true;
		b->status = status;
	}
	char st[128];
	describe_status(b->status, st, sizeof(st));
	snprintf(buf, len, ", and broker %s %s", b->label, st);
}

void broker__reset(void)
{
	nbrokers = 0;
}

static bool broker_stop(struct broker *b, char *why, size_t whylen);

bool broker__stop_all(char *problems, size_t len)
{
	size_t plen = 0;
	bool ok = true;
	problems[0] = '\0';
	for(size_t i = 0; i < nbrokers; i++){
		struct broker *b = brokers[i];
		char why[256] = "";
		if(!broker_stop(b, why, sizeof(why))){
			ok = false;
			int n = snprintf(problems + plen, len - plen, "%sbroker %s %s", plen ? "; " : "", b->label, why);
			if(n > 0 && (size_t)n < len - plen){
				plen += (size_t)n;
			}
			continue; /* keep its directory for harness_finish */
		}
		harness__remove_flat_dir(b->dir);
	}
	for(size_t i = 0; i < nbrokers; i++){
		free(brokers[i]->extra);
		free(brokers[i]->bin);
		for(size_t k = 0; k < brokers[i]->nfiles; k++){
			free(brokers[i]->files[k]);
		}
		for(size_t k = 0; k < brokers[i]->nenv; k++){
			free(brokers[i]->env[k]);
		}
		free(brokers[i]);
	}
	nbrokers = 0;
	return ok;
}

struct broker *broker_new(const char *label)
{
	ck_assert_msg(harness__run_dir()[0] != '\0', "harness_init was not called");
	ck_assert_msg(nbrokers < MAX_BROKERS, "too many brokers in one test");
	struct broker *b = calloc(1, sizeof(*b));
	ck_assert_ptr_nonnull(b);
	snprintf(b->label, sizeof(b->label), "%s", label);
	snprintf(b->dir, sizeof(b->dir), "%s/b-XXXXXX", harness__run_dir());
	ck_assert_msg(mkdtemp(b->dir) != NULL, "mkdtemp in %s: %s", harness__run_dir(), strerror(errno));
	snprintf(b->sock, sizeof(b->sock), "%s/mqtt.sock", b->dir);
	snprintf(b->conf_path, sizeof(b->conf_path), "%s/mosquitto.conf", b->dir);
	snprintf(b->log_path, sizeof(b->log_path), "%s/broker.log", b->dir);
	char path[512];
	snprintf(path, sizeof(path), "%s/label", b->dir);
	harness__write_file(path, label);
	brokers[nbrokers++] = b;
	return b;
}

void broker_conf(struct broker *b, const char *fmt, ...)
{
	char *line = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&line, fmt, ap);
	va_end(ap);
	ck_assert_msg(n >= 0, "vasprintf failed");
	char *grown = realloc(b->extra, b->extra_len + (size_t)n + 2);
	ck_assert_ptr_nonnull(grown);
	b->extra = grown;
	memcpy(b->extra + b->extra_len, line, (size_t)n);
	b->extra_len += (size_t)n;
	b->extra[b->extra_len++] = '\n';
	b->extra[b->extra_len] = '\0';
	free(line);
}

void broker_bridge(struct broker *b, const char *name, const char *to, int port)
{
	broker_conf(b, "connection %s-%s", name, to);
	broker_conf(b, "address 127.0.0.1:%d", port);
	broker_conf(b, "remote_clientid %s", name);
	broker_conf(b, "bridge_protocol_version mqttv50");
	broker_conf(b, "cleansession false");
	broker_conf(b, "notifications false");
}

void broker_plugin(struct broker *b)
{
	const char *plugin = getenv("DLQ_PLUGIN");
	ck_assert_msg(plugin && *plugin, "DLQ_PLUGIN is not set: run the tests with meson test");
	ck_assert_msg(access(plugin, R_OK) == 0, "DLQ_PLUGIN %s: %s", plugin, strerror(errno));
	broker_conf(b, "plugin %s", plugin);
}

const char *broker_path(struct broker *b, const char *name)
{
	ck_assert_msg(b->nfiles < MAX_FILES, "too many files for one broker");
	char *path = NULL;
	ck_assert_msg(asprintf(&path, "%s/%s", b->dir, name) > 0, "asprintf failed");
	b->files[b->nfiles++] = path;
	return path;
}

const char *broker_file(struct broker *b, const char *name, const char *content)
{
	const char *path = broker_path(b, name);
	ck_assert_msg(harness__write_file(path, content) == 0, "writing %s: %s", path, strerror(errno));
	return path;
}

const char *broker_socket(const struct broker *b)
{
	return b->sock;
}

char *broker_log(const struct broker *b)
{
	char *text = harness__read_file(b->log_path);
	return text ? text : harness__xstrdup("");
}

char *broker_log_since_start(const struct broker *b)
{
	char *text = broker_log(b);
	size_t len = strlen(text);
	if(b->log_start > 0 && (size_t)b->log_start <= len){
		memmove(text, text + b->log_start, len - (size_t)b->log_start + 1);
	}
	return text;
}

/* The test's environment with the broker's own settings applied (the
 * strings are borrowed); NULL-terminated, the caller frees the array. */
static char **build_env(const struct broker *b)
{
	size_t n = 0;
	while(environ[n]){
		n++;
	}
	char **envp = harness__xmalloc((n + b->nenv + 1) * sizeof(*envp));
	size_t k = 0;
	for(size_t i = 0; i < n; i++){
		bool overridden = false;
		for(size_t j = 0; j < b->nenv && !overridden; j++){
			size_t len = strcspn(b->env[j], "=");
			overridden = !strncmp(environ[i], b->env[j], len) && environ[i][len] == '=';
		}
		if(!overridden){
			envp[k++] = environ[i];
		}
	}
	for(size_t j = 0; j < b->nenv; j++){
		if(strchr(b->env[j], '=')){
			envp[k++] = b->env[j];
		}
	}
	envp[k] = NULL;
	return envp;
}

void broker_setenv(struct broker *b, const char *name, const char *value)
{
	ck_assert_msg(*name && !strchr(name, '='), "bad environment variable name \"%s\"", name);
	char *entry = NULL;
	ck_assert_msg(asprintf(&entry, "%s%s%s", name, value ? "=" : "", value ? value : "") > 0, "asprintf failed");
	size_t len = strlen(name);
	for(size_t j = 0; j < b->nenv; j++){
		if(!strncmp(b->env[j], name, len) && (b->env[j][len] == '=' || b->env[j][len] == '\0')){
			free(b->env[j]);
			b->env[j] = entry;
			return;
		}
	}
	ck_assert_msg(b->nenv < MAX_ENV, "too many environment variables for one broker");
	b->env[b->nenv++] = entry;
}

void broker_use_bin(struct broker *b, const char *bin)
{
	free(b->bin);
	b->bin = bin && *bin ? strdup(bin) : NULL;
}

void broker_per_listener_settings(struct broker *b, bool on)
{
	b->per_listener_settings = on;
}

/* Writes the configuration and forks the broker. */
static void broker_spawn(const char *file, int line, struct broker *b)
{
	if(b->pid != 0 && !b->ended){
		fail_at(file, line, "broker %s started twice", b->label);
	}
	/* A broker stopped on purpose may start again, in the same directory:
	 * its log goes on in the same file. */
	b->pid = 0;
	b->reaped = false;
	b->status = 0;
	b->ended = false;
	struct stat st;
	b->log_start = stat(b->log_path, &st) == 0 ? (long)st.st_size : 0;
	char *conf = NULL;
	int n = asprintf(&conf,
			"# Generated by tests/integration/harness.c for %s\n"
			"per_listener_settings %s\n"
			"listener 0 %s\n"
			"allow_anonymous true\n"
			"persistence false\n"
			"log_dest file %s\n"
			"log_type all\n"
			"log_timestamp_format %%H:%%M:%%S\n"
			"%s"
			"%s",
			b->label, b->per_listener_settings ? "true" : "false", b->sock, b->log_path,
			geteuid() == 0 ? "user root\n" : "",
			b->extra ? b->extra : "");
	if(n < 0){
		fail_at(file, line, "asprintf failed");
	}
	if(harness__write_file(b->conf_path, conf) != 0){
		fail_at(file, line, "writing %s: %s", b->conf_path, strerror(errno));
	}
	free(conf);

	const char *bin = b->bin ? b->bin : broker_bin();
	/* Everything the child needs is prepared before fork: only
	 * async-signal-safe calls happen between fork and exec. */
	char *argv[] = { (char *)bin, "-c", b->conf_path, NULL };
	char **envp = b->nenv ? build_env(b) : NULL;
	int logfd = open(b->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if(logfd < 0){
		fail_at(file, line, "opening %s: %s", b->log_path, strerror(errno));
	}
	pid_t pid = harness__spawn(file, line, bin, argv, envp, logfd, logfd);
	close(logfd);
	free(envp);
	b->pid = pid;
	char pidpath[512], pidtext[32];
	snprintf(pidpath, sizeof(pidpath), "%s/pid", b->dir);
	snprintf(pidtext, sizeof(pidtext), "%ld\n", (long)pid);
	harness__write_file(pidpath, pidtext);
}

void broker_start_at(const char *file, int line, struct broker *b)
{
	broker_spawn(file, line, b);
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	for(;;){
		char *log = broker_log_since_start(b);
		bool ready = log_is_ready(log);
		free(log);
		if(ready){
			return;
		}
		int status;
		pid_t r = waitpid(b->pid, &status, WNOHANG);
		if(r == b->pid){
			char why[128];
			b->reaped = true;
			b->status = status;
			describe_status(status, why, sizeof(why));
			fail_at(file, line, "broker %s did not start: it %s (its log follows the test summary)",
					b->label, why);
		}
		if(it_now_ms() > deadline){
			fail_at(file, line, "broker %s did not report \"%s...%s\" within %d ms",
					b->label, READY_LINE_PREFIX, READY_LINE_SUFFIX, HARNESS_WAIT_MS);
		}
		it_sleep_ms(10);
	}
}

char *broker_expect_refusal_at(const char *file, int line, struct broker *b)
{
	b->refusal = true;
	broker_spawn(file, line, b);
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	for(;;){
		int status;
		pid_t r = waitpid(b->pid, &status, WNOHANG);
		if(r == b->pid){
			b->reaped = true;
			b->status = status;
			if(WIFEXITED(status) && WEXITSTATUS(status) == 0){
				fail_at(file, line, "broker %s exited with status 0; expected it to refuse its configuration",
						b->label);
			}
			return broker_log(b);
		}
		char *log = broker_log_since_start(b);
		bool ready = log_is_ready(log);
		free(log);
		if(ready){
			fail_at(file, line, "broker %s started (\"running\"); expected it to refuse its configuration",
					b->label);
		}
		if(it_now_ms() > deadline){
			fail_at(file, line, "broker %s neither ran nor exited within %d ms", b->label, HARNESS_WAIT_MS);
		}
		it_sleep_ms(10);
	}
}

/* How often a SIGTERM is sent again while the broker has not exited:
 * Mosquitto 2.0.11 sets its run flag after it logs "running"
 * (src/mosquitto.c, main), so a SIGTERM that comes in between, as one
 * right after a start may, is lost. A second one changes nothing else. */
#define RESIGNAL_MS 2000

/* Sends sig to b (SIGTERM again every RESIGNAL_MS, as a broker busy
 * starting may miss the first) and waits up to HARNESS_WAIT_MS for it to
 * exit; one that does not is killed with SIGKILL. Either way b is reaped
 * (b->status). Returns whether it exited in time. */
static bool signal_and_reap(struct broker *b, int sig)
{
	kill(b->pid, sig);
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	uint64_t again = it_now_ms() + RESIGNAL_MS;
	int status;
	bool in_time = true;
	while(waitpid(b->pid, &status, WNOHANG) != b->pid){
		if(sig == SIGTERM && it_now_ms() > again){
			kill(b->pid, sig);
			again = it_now_ms() + RESIGNAL_MS;
		}
		if(it_now_ms() > deadline){
			kill(b->pid, SIGKILL);
			waitpid(b->pid, &status, 0);
			in_time = false;
			break;
		}
		it_sleep_ms(5);
	}
	b->reaped = true;
	b->status = status;
	return in_time;
}

/* Stops b by PID: SIGTERM, then SIGKILL after HARNESS_WAIT_MS. Returns
 * whether it ended as it should: a started broker still running and exiting
 * with status 0, or a refusing broker that already exited. */
static bool broker_stop(struct broker *b, char *why, size_t whylen)
{
	if(b->pid == 0 || b->ended){
		return true;
	}
	if(b->reaped){
		if(b->refusal){
			return true;
		}
		char st[128];
		describe_status(b->status, st, sizeof(st));
		snprintf(why, whylen, "was no longer running at the end of the test: it %s", st);
		return false;
	}
	int status;
	pid_t r = waitpid(b->pid, &status, WNOHANG);
	if(r == b->pid){
		char st[128];
		b->reaped = true;
		b->status = status;
		describe_status(status, st, sizeof(st));
		snprintf(why, whylen, "was no longer running at the end of the test: it %s", st);
		return false;
	}
	if(!signal_and_reap(b, SIGTERM)){
		snprintf(why, whylen, "did not exit within %d ms of SIGTERM", HARNESS_WAIT_MS);
		return false;
	}
	status = b->status;
	if(!(WIFEXITED(status) && WEXITSTATUS(status) == 0)){
		char st[128];
		describe_status(status, st, sizeof(st));
		snprintf(why, whylen, "on SIGTERM it %s (expected exit status 0)", st);
		return false;
	}
	return true;
}

/* Sends sig to a running broker and waits up to HARNESS_WAIT_MS for it to
 * exit; returns its wait status, or fails the test. */
static int broker_end(const char *file, int line, struct broker *b, int sig)
{
	if(b->pid == 0 || b->ended){
		fail_at(file, line, "broker %s is not running", b->label);
	}
	int status;
	if(b->reaped || waitpid(b->pid, &status, WNOHANG) == b->pid){
		char st[128];
		if(!b->reaped){
			b->reaped = true;
			b->status = status;
		}
		describe_status(b->status, st, sizeof(st));
		fail_at(file, line, "broker %s had already ended: it %s", b->label, st);
	}
	if(!signal_and_reap(b, sig)){
		fail_at(file, line, "broker %s did not exit within %d ms of signal %d", b->label, HARNESS_WAIT_MS, sig);
	}
	return b->status;
}

void broker_shutdown_at(const char *file, int line, struct broker *b)
{
	int status = broker_end(file, line, b, SIGTERM);
	if(!(WIFEXITED(status) && WEXITSTATUS(status) == 0)){
		char st[128];
		describe_status(status, st, sizeof(st));
		fail_at(file, line, "broker %s: on SIGTERM it %s (expected exit status 0)", b->label, st);
	}
	b->ended = true;
}

void broker_kill_at(const char *file, int line, struct broker *b)
{
	int status = broker_end(file, line, b, SIGKILL);
	if(!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)){
		char st[128];
		describe_status(status, st, sizeof(st));
		fail_at(file, line, "broker %s: on SIGKILL it %s", b->label, st);
	}
	b->ended = true;
}

struct broker *dlq_broker_new_va(const char *label, va_list ap)
{
	struct broker *b = broker_new(label);
	broker_plugin(b);
	const char *opt;
	while((opt = va_arg(ap, const char *)) != NULL){
		broker_conf(b, "plugin_opt_%s", opt);
	}
	return b;
}

struct broker *dlq_broker_at(const char *file, int line, const char *label, ...)
{
	va_list ap;
	va_start(ap, label);
	struct broker *b = dlq_broker_new_va(label, ap);
	va_end(ap);
	broker_start_at(file, line, b);
	return b;
}
