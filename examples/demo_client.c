/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The plumbing both demo programs share (see demo_client.h): command line,
 * an MQTT v5 client that (re)subscribes on every connect, and a loop that
 * stops on SIGINT/SIGTERM. The signal handler only sets a flag, which the
 * loop checks between short waits, so nothing unsafe runs in the handler.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mosquitto.h>
#include <mqtt_protocol.h>

#include "demo_client.h"

struct demo_ctx {
	const struct demo_opts *o;      /* borrowed */
	int sub_mid;                    /* mid of the last SUBSCRIBE */
	demo_message_cb on_message;
	void *userdata;                 /* the program's, passed through */
};

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void usage(FILE *f, const struct demo_opts *o)
{
	fprintf(f,
		"Usage: %s [-h host] [-p port] [--unix path] [-i client-id] [-t topic] [-u user [-P password]]\n"
		"  -h, --host host    broker host (default localhost)\n"
		"  -p, --port port    broker port (default 1883)\n"
		"  --unix path        connect to the broker's unix socket instead\n"
		"  -i, --id id        client id (default %s)\n"
		"  -t, --topic topic  topic to subscribe to (default %s)\n"
		"  -u, --username u   log in as u (a broker with a password_file)\n"
		"  -P, --password p   u's password\n",
		o->prog, o->id, o->topic);
}

void demo__parse_args(int argc, char **argv, struct demo_opts *o)
{
	/* The long names are the Python and JavaScript workers' (examples/python,
	 * examples/node), so one command line starts any of the three; only
	 * --username and --password are these programs' own (the console's
	 * test runs the C worker on a broker with a password_file). */
	static const struct option longopts[] = {
		{"host", required_argument, NULL, 'h'},
		{"port", required_argument, NULL, 'p'},
		{"id", required_argument, NULL, 'i'},
		{"topic", required_argument, NULL, 't'},
		{"unix", required_argument, NULL, 'U'},
		{"username", required_argument, NULL, 'u'},
		{"password", required_argument, NULL, 'P'},
		{"help", no_argument, NULL, 'H'},
		{NULL, 0, NULL, 0},
	};
	int c;

	o->host = "localhost";
	o->port = 1883;
	o->unix_path = NULL;
	o->username = NULL;
	o->password = NULL;
	while((c = getopt_long(argc, argv, "h:p:i:t:u:P:", longopts, NULL)) != -1){
		switch(c){
			case 'h':
				o->host = optarg;
				break;
			case 'p': {
				char *end;
				long port;
				errno = 0;
				port = strtol(optarg, &end, 10);
				if(errno || end == optarg || *end != '\0' || port < 1 || port > 65535){
					fprintf(stderr, "%s: -p %s: not a port number (1-65535)\n", o->prog, optarg);
					exit(2);
				}
				o->port = (int)port;
				break;
			}
			case 'U':
				o->unix_path = optarg;
				break;
			case 'i':
				o->id = optarg;
				break;
			case 't':
				o->topic = optarg;
				break;
			case 'u':
				o->username = optarg;
				break;
			case 'P':
				o->password = optarg;
				break;
			case 'H':
				usage(stdout, o);
				exit(0);
			default:
				usage(stderr, o);
				exit(2);
		}
	}
	if(o->password && o->username == NULL){
		fprintf(stderr, "%s: -P needs -u (a password is a user's)\n", o->prog);
		exit(2);
	}
	if(optind < argc){
		fprintf(stderr, "%s: unexpected argument '%s'\n", o->prog, argv[optind]);
		usage(stderr, o);
		exit(2);
	}
}

static void on_connect(struct mosquitto *m, void *userdata, int rc, int flags, const mosquitto_property *props)
{
	struct demo_ctx *ctx = userdata;
	(void)flags;
	(void)props;

	if(rc != 0){
		fprintf(stderr, "%s: connection refused: %s\n", ctx->o->prog, mosquitto_reason_string(rc));
		return;
	}
	rc = mosquitto_subscribe_v5(m, &ctx->sub_mid, ctx->o->topic, 1, 0, NULL);
	if(rc != MOSQ_ERR_SUCCESS){
		fprintf(stderr, "%s: cannot subscribe: %s\n", ctx->o->prog, mosquitto_strerror(rc));
	}
}

static void on_subscribe(struct mosquitto *m, void *userdata, int mid, int count, const int *granted,
		const mosquitto_property *props)
{
	struct demo_ctx *ctx = userdata;
	(void)m;
	(void)props;

	if(mid != ctx->sub_mid || count != 1) return;
	if(granted[0] > 2){
		fprintf(stderr, "%s: subscription to %s refused: %s\n", ctx->o->prog, ctx->o->topic,
				mosquitto_reason_string(granted[0]));
		return;
	}
	fprintf(stderr, "%s: subscribed to %s\n", ctx->o->prog, ctx->o->topic);
}

static void on_message(struct mosquitto *m, void *userdata, const struct mosquitto_message *msg,
		const mosquitto_property *props)
{
	struct demo_ctx *ctx = userdata;
	ctx->on_message(m, ctx->userdata, msg, props);
}

struct mosquitto *demo__connect(const struct demo_opts *o, demo_message_cb message_cb, void *userdata)
{
	struct demo_ctx *ctx;
	struct mosquitto *m;
	int rc;

	ctx = calloc(1, sizeof(*ctx));
	if(ctx == NULL){
		fprintf(stderr, "%s: out of memory\n", o->prog);
		return NULL;
	}
	ctx->o = o;
	ctx->sub_mid = -1;
	ctx->on_message = message_cb;
	ctx->userdata = userdata;

	m = mosquitto_new(o->id, true, ctx);
	if(m == NULL){
		fprintf(stderr, "%s: cannot create a client: %s\n", o->prog, strerror(errno));
		free(ctx);
		return NULL;
	}
	mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
	mosquitto_connect_v5_callback_set(m, on_connect);
	mosquitto_subscribe_v5_callback_set(m, on_subscribe);
	mosquitto_message_v5_callback_set(m, on_message);
	rc = o->username ? mosquitto_username_pw_set(m, o->username, o->password) : MOSQ_ERR_SUCCESS;
	if(rc != MOSQ_ERR_SUCCESS){
		/* Not valid UTF-8, or out of memory. */
		fprintf(stderr, "%s: cannot use the username '%s': %s\n", o->prog, o->username, mosquitto_strerror(rc));
		mosquitto_destroy(m);
		free(ctx);
		return NULL;
	}

	/* libmosquitto takes port 0 to mean: host is a unix socket path. */
	if(o->unix_path){
		rc = mosquitto_connect(m, o->unix_path, 0, 60);
	}else{
		rc = mosquitto_connect(m, o->host, o->port, 60);
	}
	if(rc != MOSQ_ERR_SUCCESS){
		if(o->unix_path){
			fprintf(stderr, "%s: cannot connect to %s: %s\n", o->prog, o->unix_path,
					rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc));
		}else{
			fprintf(stderr, "%s: cannot connect to %s:%d: %s\n", o->prog, o->host, o->port,
					rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc));
		}
		mosquitto_destroy(m);
		free(ctx);
		return NULL;
	}
	return m;
}

int demo__run(struct mosquitto *m)
{
	struct demo_ctx *ctx = mosquitto_userdata(m);
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	while(!stop_requested){
		int rc = mosquitto_loop(m, 100, 1);
		if(rc == MOSQ_ERR_SUCCESS || stop_requested) continue;
		/* The broker went away or the connection broke: try again each
		 * second. A new connection subscribes again (on_connect). */
		fprintf(stderr, "%s: connection lost (%s), reconnecting\n", ctx->o->prog,
				rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc));
		do{
			sleep(1);
		}while(!stop_requested && mosquitto_reconnect(m) != MOSQ_ERR_SUCCESS);
	}
	if(mosquitto_disconnect(m) == MOSQ_ERR_SUCCESS){
		/* Let the DISCONNECT packet go out. */
		mosquitto_loop(m, 100, 1);
	}
	mosquitto_destroy(m);
	free(ctx);
	return 0;
}

const char *demo__user_property(const mosquitto_property *props, const char *name, char *buf, size_t size)
{
	const mosquitto_property *p = props;
	bool skip_first = false;
	const char *found = NULL;

	if(size == 0) return NULL;
	/* Each read copies name and value (malloc); both are freed here. */
	for(;;){
		char *pname = NULL;
		char *pvalue = NULL;
		p = mosquitto_property_read_string_pair(p, MQTT_PROP_USER_PROPERTY, &pname, &pvalue, skip_first);
		if(p == NULL) break;
		if(strcmp(pname, name) == 0){
			snprintf(buf, size, "%s", pvalue);
			found = buf;
		}
		free(pname);
		free(pvalue);
		skip_first = true;
	}
	return found;
}
