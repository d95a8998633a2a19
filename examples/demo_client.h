/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What the two demo programs share: their command line (where the broker
 * is, which topic, which client id, which login), an MQTT v5 libmosquitto
 * client that subscribes with QoS 1 on every connect and says so on stderr
 * once the broker granted it, a loop that ends cleanly on SIGINT or SIGTERM, and
 * reading one user property. Nothing here knows about mosquitto-dlq.
 */
#ifndef DLQ_DEMO_CLIENT_H
#define DLQ_DEMO_CLIENT_H

#include <stddef.h>

#include <mosquitto.h>

struct demo_opts {
	const char *prog;        /* for messages */
	const char *host;        /* -h, default localhost */
	int port;                /* -p, default 1883 */
	const char *unix_path;   /* --unix: a unix socket instead of TCP */
	const char *id;          /* -i: client id */
	const char *topic;       /* -t: the topic to subscribe to */
	const char *username;    /* -u: log in as, or NULL */
	const char *password;    /* -P: its password, or NULL */
};

/* Parses the command line into o, whose prog, id and topic hold the
 * defaults. Returns 0, or exits (usage on stdout with --help and status 0;
 * on stderr with status 2 for a bad argument). */
void demo__parse_args(int argc, char **argv, struct demo_opts *o);

typedef void (*demo_message_cb)(struct mosquitto *m, void *userdata,
		const struct mosquitto_message *msg, const mosquitto_property *props);

/* Creates an MQTT v5 client with o->id and connects it; every connect
 * subscribes to o->topic with QoS 1 and prints "<prog>: subscribed to
 * <topic>" on stderr once the broker granted it. Each message, on that topic
 * or sent to this client alone, goes to on_message with userdata. Returns
 * the client, or NULL after printing why. o is borrowed and must outlive
 * the client. */
struct mosquitto *demo__connect(const struct demo_opts *o, demo_message_cb on_message, void *userdata);

/* Runs the network loop until SIGINT or SIGTERM, reconnecting when the
 * connection drops, then disconnects and destroys the client (and what
 * demo__connect allocated). Returns the process exit status. */
int demo__run(struct mosquitto *m);

/* Copies the value of the last user property called name into buf (size
 * bytes, cut if longer) and returns buf, or returns NULL when the message
 * has no such property. The last, because mosquitto-dlq appends its
 * properties after any a publisher may have set under the same name. */
const char *demo__user_property(const mosquitto_property *props, const char *name, char *buf, size_t size);

#endif
