/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The integration-test harness (see harness.h). Brokers are children of the
 * test's process, killed with it (PR_SET_PDEATHSIG) if it dies, so a failed
 * test leaves no broker running; its directory stays behind for
 * harness_finish() to print. Clients run libmosquitto's network thread and
 * hand what they receive to the test's thread under a mutex.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define MAX_BROKERS 16
#define MAX_CLIENTS 64
#define MAX_FILES 16
#define READY_LINE_PREFIX "mosquitto version "
#define READY_LINE_SUFFIX " running"
#define SYNC_PREFIX "harness/sync/"

#define fail_at(file, line, ...) _ck_assert_failed((file), (line), "harness", __VA_ARGS__)

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
};

struct completion {
	int mid;
	int rc;
};

struct client {
	struct mosquitto *mosq;
	struct broker *broker;
	char id[128];
	char sync_topic[192];
	int protocol;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool connack;
	int connack_rc;
	bool connected;
	bool closing;
	unsigned disconnects;
	struct it_msg **msgs;
	size_t nmsgs;
	size_t capmsgs;
	unsigned syncs_sent;
	unsigned syncs_seen;
	struct completion *dones;
	size_t ndones;
	size_t capdones;
};

/* The run directory, made by harness_init in the runner's process; each
 * broker gets a directory inside it. */
static char run_dir[64];

/* What the current test (one forked process) created. */
static struct broker *brokers[MAX_BROKERS];
static size_t nbrokers;
static struct client *clients[MAX_CLIENTS];
static size_t nclients;
static unsigned client_seq;

/* ---- small helpers ---- */

uint64_t it_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void it_sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
	while(nanosleep(&ts, &ts) == -1 && errno == EINTR){
	}
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if(!p){
		fprintf(stderr, "harness: out of memory\n");
		abort();
	}
	return p;
}

static char *xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = xmalloc(n);
	memcpy(p, s, n);
	return p;
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if(!f){
		return NULL;
	}
	size_t cap = 4096, len = 0;
	char *buf = xmalloc(cap);
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

static int write_file(const char *path, const char *content)
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

/* Removes a directory holding only files (a broker's). */
static void remove_flat_dir(const char *dir)
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

/* Writes ", and the broker <label> has exited: ..." into buf when the broker
 * is no longer running (reaping it), else an empty string: said when a wait
 * fails, since a crashed broker explains it. */
static void broker_health(struct broker *b, char *buf, size_t len)
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

/* ---- the test program ---- */

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
	char *text = read_file(path);
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
	char *pidtext = read_file(path);
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
			char *label = read_file(path);
			fprintf(stderr, "\n==== broker of failed test %s ====\n", label ? label : "(unknown)");
			free(label);
			snprintf(path, sizeof(path), "%s/mosquitto.conf", dir);
			print_file("configuration", path);
			snprintf(path, sizeof(path), "%s/broker.log", dir);
			print_file("broker log", path);
			fprintf(stderr, "==== end of broker log ====\n");
			remove_flat_dir(dir);
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

static void harness_setup(void)
{
	nbrokers = 0;
	nclients = 0;
}

static bool broker_stop(struct broker *b, char *why, size_t whylen);

static void harness_teardown(void)
{
	char problems[2048] = "";
	size_t plen = 0;
	bool ok = true;

	while(nclients > 0){
		client_free(clients[nclients - 1]);
	}
	for(size_t i = 0; i < nbrokers; i++){
		struct broker *b = brokers[i];
		char why[256] = "";
		if(!broker_stop(b, why, sizeof(why))){
			ok = false;
			int n = snprintf(problems + plen, sizeof(problems) - plen, "%sbroker %s %s",
					plen ? "; " : "", b->label, why);
			if(n > 0 && (size_t)n < sizeof(problems) - plen){
				plen += (size_t)n;
			}
			continue; /* keep its directory for harness_finish */
		}
		remove_flat_dir(b->dir);
	}
	for(size_t i = 0; i < nbrokers; i++){
		free(brokers[i]->extra);
		for(size_t k = 0; k < brokers[i]->nfiles; k++){
			free(brokers[i]->files[k]);
		}
		free(brokers[i]);
	}
	nbrokers = 0;
	ck_assert_msg(ok, "%s", problems);
}

TCase *harness_tcase(const char *name)
{
	TCase *tc = tcase_create(name);
	tcase_add_checked_fixture(tc, harness_setup, harness_teardown);
	tcase_set_timeout(tc, HARNESS_TEST_TIMEOUT);
	return tc;
}

/* ---- brokers ---- */

struct broker *broker_new(const char *label)
{
	ck_assert_msg(run_dir[0] != '\0', "harness_init was not called");
	ck_assert_msg(nbrokers < MAX_BROKERS, "too many brokers in one test");
	struct broker *b = calloc(1, sizeof(*b));
	ck_assert_ptr_nonnull(b);
	snprintf(b->label, sizeof(b->label), "%s", label);
	snprintf(b->dir, sizeof(b->dir), "%s/b-XXXXXX", run_dir);
	ck_assert_msg(mkdtemp(b->dir) != NULL, "mkdtemp in %s: %s", run_dir, strerror(errno));
	snprintf(b->sock, sizeof(b->sock), "%s/mqtt.sock", b->dir);
	snprintf(b->conf_path, sizeof(b->conf_path), "%s/mosquitto.conf", b->dir);
	snprintf(b->log_path, sizeof(b->log_path), "%s/broker.log", b->dir);
	char path[512];
	snprintf(path, sizeof(path), "%s/label", b->dir);
	write_file(path, label);
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
	ck_assert_msg(write_file(path, content) == 0, "writing %s: %s", path, strerror(errno));
	return path;
}

const char *broker_socket(const struct broker *b)
{
	return b->sock;
}

char *broker_log(const struct broker *b)
{
	char *text = read_file(b->log_path);
	return text ? text : xstrdup("");
}

/* Writes the configuration and forks the broker. */
static void broker_spawn(const char *file, int line, struct broker *b)
{
	if(b->pid != 0){
		fail_at(file, line, "broker %s started twice", b->label);
	}
	char *conf = NULL;
	int n = asprintf(&conf,
			"# Generated by tests/integration/harness.c for %s\n"
			"per_listener_settings false\n"
			"listener 0 %s\n"
			"allow_anonymous true\n"
			"persistence false\n"
			"log_dest file %s\n"
			"log_type all\n"
			"log_timestamp_format %%H:%%M:%%S\n"
			"%s"
			"%s",
			b->label, b->sock, b->log_path,
			geteuid() == 0 ? "user root\n" : "",
			b->extra ? b->extra : "");
	if(n < 0){
		fail_at(file, line, "asprintf failed");
	}
	if(write_file(b->conf_path, conf) != 0){
		fail_at(file, line, "writing %s: %s", b->conf_path, strerror(errno));
	}
	free(conf);

	const char *bin = getenv("MOSQUITTO_BIN");
	if(!bin || !*bin){
		bin = "/usr/sbin/mosquitto";
	}
	/* Everything the child needs is prepared before fork: only
	 * async-signal-safe calls happen between fork and exec. */
	char *argv[] = { (char *)bin, "-c", b->conf_path, NULL };
	pid_t parent = getpid();
	int logfd = open(b->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if(logfd < 0){
		fail_at(file, line, "opening %s: %s", b->log_path, strerror(errno));
	}
	pid_t pid = fork();
	if(pid < 0){
		fail_at(file, line, "fork: %s", strerror(errno));
	}
	if(pid == 0){
		/* The broker dies with the test's process, so a test that fails or
		 * crashes leaves nothing running. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if(getppid() != parent){
			_exit(127);
		}
		int devnull = open("/dev/null", O_RDONLY);
		if(devnull >= 0){
			dup2(devnull, 0);
		}
		dup2(logfd, 1);
		dup2(logfd, 2);
		execv(bin, argv);
		_exit(127);
	}
	close(logfd);
	b->pid = pid;
	char pidpath[512], pidtext[32];
	snprintf(pidpath, sizeof(pidpath), "%s/pid", b->dir);
	snprintf(pidtext, sizeof(pidtext), "%ld\n", (long)pid);
	write_file(pidpath, pidtext);
}

void broker_start_at(const char *file, int line, struct broker *b)
{
	broker_spawn(file, line, b);
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	for(;;){
		char *log = broker_log(b);
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
		char *log = broker_log(b);
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

/* Stops b by PID: SIGTERM, then SIGKILL after HARNESS_WAIT_MS. Returns
 * whether it ended as it should: a started broker still running and exiting
 * with status 0, or a refusing broker that already exited. */
static bool broker_stop(struct broker *b, char *why, size_t whylen)
{
	if(b->pid == 0){
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
	kill(b->pid, SIGTERM);
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	for(;;){
		r = waitpid(b->pid, &status, WNOHANG);
		if(r == b->pid){
			break;
		}
		if(it_now_ms() > deadline){
			kill(b->pid, SIGKILL);
			waitpid(b->pid, &status, 0);
			b->reaped = true;
			b->status = status;
			snprintf(why, whylen, "did not exit within %d ms of SIGTERM", HARNESS_WAIT_MS);
			return false;
		}
		it_sleep_ms(10);
	}
	b->reaped = true;
	b->status = status;
	if(!(WIFEXITED(status) && WEXITSTATUS(status) == 0)){
		char st[128];
		describe_status(status, st, sizeof(st));
		snprintf(why, whylen, "on SIGTERM it %s (expected exit status 0)", st);
		return false;
	}
	return true;
}

struct broker *dlq_broker_at(const char *file, int line, const char *label, ...)
{
	struct broker *b = broker_new(label);
	broker_plugin(b);
	va_list ap;
	va_start(ap, label);
	const char *opt;
	while((opt = va_arg(ap, const char *)) != NULL){
		broker_conf(b, "plugin_opt_%s", opt);
	}
	va_end(ap);
	broker_start_at(file, line, b);
	return b;
}

/* ---- clients ---- */

static void msg_free(struct it_msg *m)
{
	if(!m){
		return;
	}
	free(m->topic);
	free(m->payload);
	for(size_t i = 0; i < m->nusers; i++){
		free(m->users[i].name);
		free(m->users[i].value);
	}
	free(m->users);
	free(m->content_type);
	free(m->response_topic);
	free(m->correlation);
	free(m);
}

static struct it_msg *msg_decode(const struct mosquitto_message *mm, const mosquitto_property *props)
{
	struct it_msg *m = calloc(1, sizeof(*m));
	if(!m){
		abort();
	}
	m->topic = xstrdup(mm->topic);
	m->payloadlen = mm->payloadlen;
	m->payload = xmalloc((size_t)mm->payloadlen + 1);
	if(mm->payloadlen > 0){
		memcpy(m->payload, mm->payload, (size_t)mm->payloadlen);
	}
	m->payload[mm->payloadlen] = '\0';
	m->qos = mm->qos;
	m->retain = mm->retain;
	m->payload_format = -1;
	m->at_ms = it_now_ms();
	/* The properties are decoded here rather than kept with
	 * mosquitto_property_copy_all: libmosquitto 2.0.11's copy_all crashes on
	 * a user property with an empty value (it strdup()s a NULL). */
	size_t nuser = 0;
	for(const mosquitto_property *p = props; p; p = mosquitto_property_next(p)){
		if(mosquitto_property_identifier(p) == MQTT_PROP_USER_PROPERTY){
			nuser++;
		}
	}
	m->users = calloc(nuser ? nuser : 1, sizeof(*m->users));
	if(!m->users){
		abort();
	}
	for(const mosquitto_property *p = props; p; p = mosquitto_property_next(p)){
		int id = mosquitto_property_identifier(p);
		char *name = NULL, *value = NULL;
		uint8_t byte;
		uint16_t len;
		void *bin = NULL;
		switch(id){
		case MQTT_PROP_USER_PROPERTY:
			mosquitto_property_read_string_pair(p, id, &name, &value, false);
			m->users[m->nusers].name = name;
			m->users[m->nusers].value = value;
			m->nusers++;
			break;
		case MQTT_PROP_CONTENT_TYPE:
			free(m->content_type);
			m->content_type = NULL;
			mosquitto_property_read_string(p, id, &m->content_type, false);
			break;
		case MQTT_PROP_RESPONSE_TOPIC:
			free(m->response_topic);
			m->response_topic = NULL;
			mosquitto_property_read_string(p, id, &m->response_topic, false);
			break;
		case MQTT_PROP_CORRELATION_DATA:
			free(m->correlation);
			m->correlation = NULL;
			if(mosquitto_property_read_binary(p, id, &bin, &len, false)){
				m->correlation = bin ? bin : xmalloc(1);
				m->correlation_len = len;
			}
			break;
		case MQTT_PROP_PAYLOAD_FORMAT_INDICATOR:
			if(mosquitto_property_read_byte(p, id, &byte, false)){
				m->payload_format = byte;
			}
			break;
		default:
			break;
		}
	}
	return m;
}

static void on_connect(struct mosquitto *mosq, void *obj, int rc, int flags, const mosquitto_property *props)
{
	(void)mosq;
	(void)flags;
	(void)props;
	struct client *c = obj;
	pthread_mutex_lock(&c->lock);
	c->connack = true;
	c->connack_rc = rc;
	c->connected = rc == 0;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void on_disconnect(struct mosquitto *mosq, void *obj, int rc, const mosquitto_property *props)
{
	(void)mosq;
	(void)rc;
	(void)props;
	struct client *c = obj;
	pthread_mutex_lock(&c->lock);
	c->connected = false;
	if(!c->closing){
		c->disconnects++;
	}
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void add_completion(struct client *c, int mid, int rc)
{
	pthread_mutex_lock(&c->lock);
	if(c->ndones == c->capdones){
		c->capdones = c->capdones ? c->capdones * 2 : 32;
		struct completion *nd = realloc(c->dones, c->capdones * sizeof(*nd));
		if(!nd){
			abort();
		}
		c->dones = nd;
	}
	c->dones[c->ndones].mid = mid;
	c->dones[c->ndones].rc = rc;
	c->ndones++;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void on_publish(struct mosquitto *mosq, void *obj, int mid, int reason, const mosquitto_property *props)
{
	(void)mosq;
	(void)props;
	add_completion(obj, mid, reason);
}

static void on_subscribe(struct mosquitto *mosq, void *obj, int mid, int count, const int *granted,
		const mosquitto_property *props)
{
	(void)mosq;
	(void)props;
	add_completion(obj, mid, count > 0 ? granted[0] : 128);
}

static void on_message(struct mosquitto *mosq, void *obj, const struct mosquitto_message *mm,
		const mosquitto_property *props)
{
	(void)mosq;
	struct client *c = obj;
	if(!strcmp(mm->topic, c->sync_topic)){
		pthread_mutex_lock(&c->lock);
		c->syncs_seen++;
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->lock);
		return;
	}
	if(!strncmp(mm->topic, SYNC_PREFIX, strlen(SYNC_PREFIX))){
		return; /* another client's marker, seen through a wildcard */
	}
	struct it_msg *m = msg_decode(mm, props);
	pthread_mutex_lock(&c->lock);
	if(c->nmsgs == c->capmsgs){
		c->capmsgs = c->capmsgs ? c->capmsgs * 2 : 32;
		struct it_msg **nm = realloc(c->msgs, c->capmsgs * sizeof(*nm));
		if(!nm){
			abort();
		}
		c->msgs = nm;
	}
	c->msgs[c->nmsgs++] = m;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/* Waits on c->cond until deadline (monotonic ms); false on timeout. Called
 * with c->lock held. */
static bool wait_until(struct client *c, uint64_t deadline)
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
	pthread_cond_timedwait(&c->cond, &c->lock, &ts);
	return true;
}

/* Waits for the completion of mid; true and *rc when it came in time. */
static bool wait_completion(struct client *c, int mid, int *rc)
{
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	bool found = false;
	pthread_mutex_lock(&c->lock);
	for(;;){
		for(size_t i = 0; i < c->ndones; i++){
			if(c->dones[i].mid == mid){
				*rc = c->dones[i].rc;
				c->dones[i] = c->dones[--c->ndones];
				found = true;
				break;
			}
		}
		if(found || !wait_until(c, deadline)){
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return found;
}

struct client *client_new_at(const char *file, int line, struct broker *b, const char *name, int protocol)
{
	if(nclients >= MAX_CLIENTS){
		fail_at(file, line, "too many clients in one test");
	}
	struct client *c = calloc(1, sizeof(*c));
	if(!c){
		abort();
	}
	c->broker = b;
	c->protocol = protocol;
	snprintf(c->id, sizeof(c->id), "%s-%ld-%u", name, (long)getpid(), ++client_seq);
	snprintf(c->sync_topic, sizeof(c->sync_topic), SYNC_PREFIX "%s", c->id);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&c->lock, NULL);
	clients[nclients++] = c;

	c->mosq = mosquitto_new(c->id, true, c);
	if(!c->mosq){
		fail_at(file, line, "mosquitto_new(%s) failed", c->id);
	}
	mosquitto_int_option(c->mosq, MOSQ_OPT_PROTOCOL_VERSION, protocol);
	mosquitto_connect_v5_callback_set(c->mosq, on_connect);
	mosquitto_disconnect_v5_callback_set(c->mosq, on_disconnect);
	mosquitto_publish_v5_callback_set(c->mosq, on_publish);
	mosquitto_subscribe_v5_callback_set(c->mosq, on_subscribe);
	mosquitto_message_v5_callback_set(c->mosq, on_message);
	int rc = mosquitto_connect(c->mosq, b->sock, 0, 60);
	if(rc != MOSQ_ERR_SUCCESS){
		fail_at(file, line, "client %s: connecting to %s: %s", c->id, b->sock, mosquitto_strerror(rc));
	}
	rc = mosquitto_loop_start(c->mosq);
	if(rc != MOSQ_ERR_SUCCESS){
		fail_at(file, line, "client %s: mosquitto_loop_start: %s", c->id, mosquitto_strerror(rc));
	}
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	pthread_mutex_lock(&c->lock);
	while(!c->connack && wait_until(c, deadline)){
	}
	bool got = c->connack;
	int connack_rc = c->connack_rc;
	pthread_mutex_unlock(&c->lock);
	if(!got){
		fail_at(file, line, "client %s: no CONNACK within %d ms", c->id, HARNESS_WAIT_MS);
	}
	if(connack_rc != 0){
		fail_at(file, line, "client %s: CONNACK refused: %s", c->id,
				protocol == MQTT_PROTOCOL_V5 ? mosquitto_reason_string(connack_rc) : mosquitto_connack_string(connack_rc));
	}
	client_subscribe_at(file, line, c, c->sync_topic, 1);
	return c;
}

const char *client_id(const struct client *c)
{
	return c->id;
}

void client_subscribe_at(const char *file, int line, struct client *c, const char *filter, int qos)
{
	int mid = 0, granted = 0;
	int rc = mosquitto_subscribe(c->mosq, &mid, filter, qos);
	if(rc != MOSQ_ERR_SUCCESS){
		fail_at(file, line, "client %s: subscribe %s: %s", c->id, filter, mosquitto_strerror(rc));
	}
	if(!wait_completion(c, mid, &granted)){
		char health[256];
		broker_health(c->broker, health, sizeof(health));
		fail_at(file, line, "client %s: no SUBACK for %s within %d ms%s", c->id, filter, HARNESS_WAIT_MS, health);
	}
	if(granted >= 0x80){
		fail_at(file, line, "client %s: subscription to %s refused (0x%02x)", c->id, filter, granted);
	}
}

int client_publish_at(const char *file, int line, struct client *c, const char *topic,
		const void *payload, int len, int qos, const mosquitto_property *props)
{
	int mid = 0, reason = 0;
	int rc = mosquitto_publish_v5(c->mosq, &mid, topic, len, payload, qos, false, props);
	if(rc != MOSQ_ERR_SUCCESS){
		fail_at(file, line, "client %s: publish to %s: %s", c->id, topic, mosquitto_strerror(rc));
	}
	if(!wait_completion(c, mid, &reason)){
		char health[256];
		broker_health(c->broker, health, sizeof(health));
		fail_at(file, line, "client %s: publish to %s (QoS %d) not completed within %d ms%s",
				c->id, topic, qos, HARNESS_WAIT_MS, health);
	}
	return reason;
}

void client_nack_at(const char *file, int line, struct client *c, const char *id, const char *reason)
{
	mosquitto_property *props = NULL;
	if(reason){
		if(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, "reason", reason) != MOSQ_ERR_SUCCESS){
			fail_at(file, line, "mosquitto_property_add_string_pair failed");
		}
	}
	int rc = client_publish_at(file, line, c, DLQ_NACK_TOPIC, id, (int)strlen(id), 1, props);
	mosquitto_property_free_all(&props);
	if(rc >= 0x80){
		fail_at(file, line, "client %s: the broker refused the NACK of %s: %s", c->id, id, mosquitto_reason_string(rc));
	}
}

static bool topic_matches(const char *filter, const char *topic)
{
	bool res = false;
	if(!filter){
		return true;
	}
	if(mosquitto_topic_matches_sub(filter, topic, &res) != MOSQ_ERR_SUCCESS){
		return false;
	}
	return res;
}

/* Called with c->lock held. */
static size_t count_locked(struct client *c, const char *filter, const struct it_msg **nth, size_t want)
{
	size_t n = 0;
	for(size_t i = 0; i < c->nmsgs; i++){
		if(topic_matches(filter, c->msgs[i]->topic)){
			if(nth && n == want){
				*nth = c->msgs[i];
			}
			n++;
		}
	}
	return n;
}

size_t client_count(struct client *c, const char *filter)
{
	pthread_mutex_lock(&c->lock);
	size_t n = count_locked(c, filter, NULL, 0);
	pthread_mutex_unlock(&c->lock);
	return n;
}

const struct it_msg *client_msg(struct client *c, const char *filter, size_t i)
{
	const struct it_msg *m = NULL;
	pthread_mutex_lock(&c->lock);
	count_locked(c, filter, &m, i);
	pthread_mutex_unlock(&c->lock);
	return m;
}

bool client_wait(struct client *c, const char *filter, size_t n, int timeout_ms)
{
	uint64_t deadline = it_now_ms() + (uint64_t)timeout_ms;
	bool ok;
	pthread_mutex_lock(&c->lock);
	for(;;){
		ok = count_locked(c, filter, NULL, 0) >= n;
		if(ok || !wait_until(c, deadline)){
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return ok;
}

const struct it_msg *client_expect_at(const char *file, int line, struct client *c, const char *filter, size_t n)
{
	if(!client_wait(c, filter, n, HARNESS_WAIT_MS)){
		size_t got = client_count(c, filter);
		client_dump(c, NULL);
		char health[256];
		broker_health(c->broker, health, sizeof(health));
		fail_at(file, line, "client %s: expected %zu message(s) on %s within %d ms, got %zu%s",
				c->id, n, filter ? filter : "any topic", HARNESS_WAIT_MS, got, health);
	}
	return n > 0 ? client_msg(c, filter, n - 1) : NULL;
}

void client_expect_exactly_at(const char *file, int line, struct client *c, const char *filter, size_t n)
{
	size_t got = client_count(c, filter);
	if(got != n){
		client_dump(c, NULL);
		fail_at(file, line, "client %s: expected exactly %zu message(s) on %s, got %zu",
				c->id, n, filter ? filter : "any topic", got);
	}
}

void client_sync_at(const char *file, int line, struct client *c)
{
	for(int round = 0; round < 2; round++){
		char payload[32];
		pthread_mutex_lock(&c->lock);
		unsigned target = ++c->syncs_sent;
		pthread_mutex_unlock(&c->lock);
		snprintf(payload, sizeof(payload), "sync %u", target);
		client_publish_at(file, line, c, c->sync_topic, payload, (int)strlen(payload), 1, NULL);
		uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
		pthread_mutex_lock(&c->lock);
		while(c->syncs_seen < target && wait_until(c, deadline)){
		}
		bool ok = c->syncs_seen >= target;
		pthread_mutex_unlock(&c->lock);
		if(!ok){
			char health[256];
			broker_health(c->broker, health, sizeof(health));
			fail_at(file, line, "client %s: sync marker %u did not come back within %d ms%s",
					c->id, target, HARNESS_WAIT_MS, health);
		}
	}
}

void clients_settle_at(const char *file, int line, ...)
{
	struct client *list[MAX_CLIENTS];
	size_t n = 0;
	va_list ap;
	va_start(ap, line);
	struct client *c;
	while((c = va_arg(ap, struct client *)) != NULL && n < MAX_CLIENTS){
		list[n++] = c;
	}
	va_end(ap);
	for(size_t i = 0; i < n; i++){
		client_sync_at(file, line, list[i]);
	}
	it_sleep_ms(HARNESS_SETTLE_MS);
	for(size_t i = 0; i < n; i++){
		client_sync_at(file, line, list[i]);
	}
}

bool client_connected(struct client *c)
{
	pthread_mutex_lock(&c->lock);
	bool r = c->connected;
	pthread_mutex_unlock(&c->lock);
	return r;
}

unsigned client_disconnects(struct client *c)
{
	pthread_mutex_lock(&c->lock);
	unsigned r = c->disconnects;
	pthread_mutex_unlock(&c->lock);
	return r;
}

static void print_escaped(FILE *f, const char *s, size_t len, size_t max)
{
	for(size_t i = 0; i < len && i < max; i++){
		unsigned char ch = (unsigned char)s[i];
		if(ch >= 0x20 && ch < 0x7f && ch != '\\'){
			fputc(ch, f);
		}else{
			fprintf(f, "\\x%02x", ch);
		}
	}
	if(len > max){
		fputs("...", f);
	}
}

void client_dump(struct client *c, const char *filter)
{
	pthread_mutex_lock(&c->lock);
	fprintf(stderr, "---- client %s received %zu message(s)%s%s ----\n", c->id, c->nmsgs,
			filter ? " matching " : "", filter ? filter : "");
	for(size_t i = 0; i < c->nmsgs; i++){
		const struct it_msg *m = c->msgs[i];
		if(!topic_matches(filter, m->topic)){
			continue;
		}
		fprintf(stderr, "  [%zu] %s qos=%d%s payload=\"", i, m->topic, m->qos, m->retain ? " retained" : "");
		print_escaped(stderr, m->payload, (size_t)m->payloadlen, 200);
		fputc('"', stderr);
		for(size_t k = 0; k < m->nusers; k++){
			fprintf(stderr, " %s=%s", m->users[k].name, m->users[k].value);
		}
		if(m->content_type){
			fprintf(stderr, " [content-type %s]", m->content_type);
		}
		if(m->response_topic){
			fprintf(stderr, " [response-topic %s]", m->response_topic);
		}
		if(m->correlation){
			fputs(" [correlation \"", stderr);
			print_escaped(stderr, m->correlation, m->correlation_len, 64);
			fputs("\"]", stderr);
		}
		if(m->payload_format >= 0){
			fprintf(stderr, " [payload-format %d]", m->payload_format);
		}
		fputc('\n', stderr);
	}
	fprintf(stderr, "---- end of client %s ----\n", c->id);
	pthread_mutex_unlock(&c->lock);
}

void client_free(struct client *c)
{
	if(!c){
		return;
	}
	for(size_t i = 0; i < nclients; i++){
		if(clients[i] == c){
			clients[i] = clients[--nclients];
			break;
		}
	}
	pthread_mutex_lock(&c->lock);
	c->closing = true;
	pthread_mutex_unlock(&c->lock);
	if(c->mosq){
		mosquitto_disconnect(c->mosq);
		mosquitto_loop_stop(c->mosq, false);
		mosquitto_destroy(c->mosq);
	}
	for(size_t i = 0; i < c->nmsgs; i++){
		msg_free(c->msgs[i]);
	}
	free(c->msgs);
	free(c->dones);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c);
}

/* ---- reading messages ---- */

const char *msg_user(const struct it_msg *m, const char *name)
{
	for(size_t i = 0; i < m->nusers; i++){
		if(!strcmp(m->users[i].name, name)){
			return m->users[i].value;
		}
	}
	return NULL;
}

size_t msg_user_count(const struct it_msg *m, const char *name)
{
	size_t n = 0;
	for(size_t i = 0; i < m->nusers; i++){
		if(!strcmp(m->users[i].name, name)){
			n++;
		}
	}
	return n;
}

cJSON *msg_json(const struct it_msg *m)
{
	return cJSON_ParseWithLength(m->payload, (size_t)m->payloadlen);
}

const struct it_msg *client_find(struct client *c, const char *filter, const char *name, const char *value)
{
	const struct it_msg *found = NULL;
	pthread_mutex_lock(&c->lock);
	for(size_t i = 0; i < c->nmsgs && !found; i++){
		const struct it_msg *m = c->msgs[i];
		const char *v;
		if(topic_matches(filter, m->topic) && (v = msg_user(m, name)) != NULL && !strcmp(v, value)){
			found = m;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return found;
}

const struct it_msg *client_find_payload(struct client *c, const char *filter, const char *payload, size_t k)
{
	const struct it_msg *found = NULL;
	size_t len = strlen(payload);
	pthread_mutex_lock(&c->lock);
	for(size_t i = 0; i < c->nmsgs && !found; i++){
		const struct it_msg *m = c->msgs[i];
		if(topic_matches(filter, m->topic) && (size_t)m->payloadlen == len && !memcmp(m->payload, payload, len)){
			if(k == 0){
				found = m;
			}else{
				k--;
			}
		}
	}
	pthread_mutex_unlock(&c->lock);
	return found;
}

bool it_is_dlq_id(const char *s)
{
	if(!s || strlen(s) != 16){
		return false;
	}
	for(const char *p = s; *p; p++){
		if(!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')
				|| *p == '-' || *p == '_')){
			return false;
		}
	}
	return true;
}

bool it_is_recent_rfc3339(const char *s, int slack_s)
{
	if(!s){
		return false;
	}
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	int consumed = 0;
	if(sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
				&tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6 || consumed != 19){
		return false;
	}
	const char *p = s + consumed;
	if(*p == '.'){
		p++;
		if(*p < '0' || *p > '9'){
			return false;
		}
		while(*p >= '0' && *p <= '9'){
			p++;
		}
	}
	if(strcmp(p, "Z")){
		return false;
	}
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	time_t t = timegm(&tm);
	time_t now = time(NULL);
	return t >= now - slack_s && t <= now + slack_s;
}

/* ---- the plugin's contract ---- */

const char *dlq_id_of_at(const char *file, int line, const struct it_msg *m)
{
	size_t n = msg_user_count(m, DLQ_PROP_ID);
	const char *id = msg_user(m, DLQ_PROP_ID);
	if(n != 1 || !it_is_dlq_id(id)){
		fail_at(file, line, "message on %s (payload \"%.40s\"): expected exactly one valid %s, got %zu (first \"%s\")",
				m->topic, m->payload, DLQ_PROP_ID, n, id ? id : "(none)");
	}
	return id;
}

static void expect_user_once(const char *file, int line, const struct it_msg *m, const char *name, const char *value)
{
	size_t n = msg_user_count(m, name);
	const char *v = msg_user(m, name);
	if(n != 1){
		fail_at(file, line, "message on %s (payload \"%.40s\"): expected exactly one %s, got %zu",
				m->topic, m->payload, name, n);
	}
	if(value && strcmp(v, value)){
		fail_at(file, line, "message on %s (payload \"%.40s\"): %s is \"%s\", expected \"%s\"",
				m->topic, m->payload, name, v, value);
	}
}

static void expect_user_absent(const char *file, int line, const struct it_msg *m, const char *name)
{
	const char *v = msg_user(m, name);
	if(v){
		fail_at(file, line, "message on %s (payload \"%.40s\"): unexpected %s \"%s\"",
				m->topic, m->payload, name, v);
	}
}

static const char *const dead_letter_only[] = {
	DLQ_PROP_DEAD_LETTER_REASON, DLQ_PROP_DEAD_LETTER_CLIENT,
	DLQ_PROP_DEAD_LETTER_FILTER, DLQ_PROP_DEAD_LETTER_TIME,
};

const char *expect_original_at(const char *file, int line, const struct it_msg *m)
{
	const char *id = dlq_id_of_at(file, line, m);
	expect_user_absent(file, line, m, DLQ_PROP_RETRY_COUNT);
	expect_user_absent(file, line, m, DLQ_PROP_ORIGIN_TOPIC);
	expect_user_absent(file, line, m, DLQ_PROP_ORIGIN_ID);
	for(size_t i = 0; i < sizeof(dead_letter_only) / sizeof(dead_letter_only[0]); i++){
		expect_user_absent(file, line, m, dead_letter_only[i]);
	}
	return id;
}

const char *expect_retry_copy_at(const char *file, int line, const struct it_msg *m,
		const char *origin_topic, const char *origin_id, unsigned retry_count)
{
	char count[16];
	snprintf(count, sizeof(count), "%u", retry_count);
	const char *id = dlq_id_of_at(file, line, m);
	if(origin_id && !strcmp(id, origin_id)){
		fail_at(file, line, "retry copy on %s carries the origin's %s %s; expected a fresh one",
				m->topic, DLQ_PROP_ID, id);
	}
	expect_user_once(file, line, m, DLQ_PROP_RETRY_COUNT, count);
	expect_user_once(file, line, m, DLQ_PROP_ORIGIN_TOPIC, origin_topic);
	expect_user_once(file, line, m, DLQ_PROP_ORIGIN_ID, origin_id);
	for(size_t i = 0; i < sizeof(dead_letter_only) / sizeof(dead_letter_only[0]); i++){
		expect_user_absent(file, line, m, dead_letter_only[i]);
	}
	return id;
}

void expect_dead_letter_at(const char *file, int line, const struct it_msg *m,
		const char *origin_topic, const char *origin_id, unsigned retry_count,
		const char *client, const char *filter, const char *reason)
{
	char count[16];
	snprintf(count, sizeof(count), "%u", retry_count);
	if(m->qos < 1){
		fail_at(file, line, "dead letter on %s arrived at QoS %d; expected at least 1", m->topic, m->qos);
	}
	if(m->retain){
		fail_at(file, line, "dead letter on %s arrived retained", m->topic);
	}
	expect_user_absent(file, line, m, DLQ_PROP_ID);
	expect_user_once(file, line, m, DLQ_PROP_RETRY_COUNT, count);
	expect_user_once(file, line, m, DLQ_PROP_ORIGIN_TOPIC, origin_topic);
	expect_user_once(file, line, m, DLQ_PROP_ORIGIN_ID, origin_id);
	expect_user_once(file, line, m, DLQ_PROP_DEAD_LETTER_CLIENT, client);
	expect_user_once(file, line, m, DLQ_PROP_DEAD_LETTER_FILTER, filter);
	expect_user_once(file, line, m, DLQ_PROP_DEAD_LETTER_REASON, reason);
	expect_user_once(file, line, m, DLQ_PROP_DEAD_LETTER_TIME, NULL);
	const char *why = msg_user(m, DLQ_PROP_DEAD_LETTER_REASON);
	if(!reason && (!*why || !strcasestr(why, "attempt"))){
		fail_at(file, line, "dead letter on %s: %s \"%s\" does not say that attempts ran out",
				m->topic, DLQ_PROP_DEAD_LETTER_REASON, why);
	}
	const char *when = msg_user(m, DLQ_PROP_DEAD_LETTER_TIME);
	if(!it_is_recent_rfc3339(when, 60)){
		fail_at(file, line, "dead letter on %s: %s \"%s\" is not a current RFC 3339 UTC time",
				m->topic, DLQ_PROP_DEAD_LETTER_TIME, when);
	}
}

cJSON *expect_reply_at(const char *file, int line, const struct it_msg *m, int n)
{
	cJSON *doc = msg_json(m);
	if(!doc){
		fail_at(file, line, "reply on %s is not JSON: \"%.200s\"", m->topic, m->payload);
	}
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, "responses");
	if(!cJSON_IsArray(arr)){
		fail_at(file, line, "reply on %s has no \"responses\" array: %.300s", m->topic, m->payload);
	}
	if(cJSON_GetArraySize(arr) != n){
		fail_at(file, line, "reply on %s has %d responses, expected %d: %.300s",
				m->topic, cJSON_GetArraySize(arr), n, m->payload);
	}
	for(int i = 0; i < n; i++){
		if(!cJSON_IsObject(cJSON_GetArrayItem(arr, i))){
			fail_at(file, line, "reply on %s: response %d is not an object: %.300s", m->topic, i, m->payload);
		}
	}
	return doc;
}

const cJSON *reply_entry(const cJSON *doc, int i)
{
	return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "responses"), i);
}

const char *json_str(const cJSON *e, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, name);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static char *json_text(const cJSON *e)
{
	char *t = cJSON_PrintUnformatted(e);
	return t ? t : xstrdup("(unprintable)");
}

void expect_reply_ok_at(const char *file, int line, const cJSON *e, const char *id,
		const char *result, int attempt, int max_attempts)
{
	const char *cmd = json_str(e, "command");
	const char *rid = json_str(e, "id");
	const char *res = json_str(e, "result");
	const cJSON *att = cJSON_GetObjectItemCaseSensitive(e, "attempt");
	const cJSON *max = cJSON_GetObjectItemCaseSensitive(e, "maxAttempts");
	if(!cmd || strcmp(cmd, DLQ_COMMAND_NACK) || !rid || strcmp(rid, id) || !res || strcmp(res, result)
			|| !cJSON_IsNumber(att) || att->valueint != attempt
			|| !cJSON_IsNumber(max) || max->valueint != max_attempts
			|| cJSON_GetObjectItemCaseSensitive(e, "error")){
		fail_at(file, line, "reply entry %s; expected command \"nack\", id \"%s\", result \"%s\", attempt %d, "
				"maxAttempts %d and no error", json_text(e), id, result, attempt, max_attempts);
	}
}

void expect_reply_error_at(const char *file, int line, const cJSON *e, const char *want)
{
	const char *err = json_str(e, "error");
	if(!err || !*err || (want && !strstr(err, want)) || cJSON_GetObjectItemCaseSensitive(e, "result")){
		fail_at(file, line, "reply entry %s; expected an error%s%s%s and no result", json_text(e),
				want ? " containing \"" : "", want ? want : "", want ? "\"" : "");
	}
}
