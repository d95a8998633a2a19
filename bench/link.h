/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A bench client's connection, as libmosquitto's v5 callbacks report it
 * (link.c). Each bench client struct (load.h's struct client, struct
 * dl_client, struct letters_client, growth_latency.c's struct lat_client)
 * starts with one, so that the userdata the callbacks get - the client -
 * is also its struct link.
 */
#ifndef DLQ_BENCH_LINK_H
#define DLQ_BENCH_LINK_H

#include <stdbool.h>

#include <mosquitto.h>

struct link {
	const char *name;  /* borrowed, static: who this is, in messages */
	bool connected;    /* CONNACK success, until the connection ends */
	int subscribed;    /* SUBACKs that granted their one subscription */
	bool failed;       /* refused, a subscription refused, or the connection lost */
};

/* Sets m's connect, subscribe and disconnect callbacks to keep the struct
 * link at the start of m's userdata. */
void link__callbacks_set(struct mosquitto *m);

#endif
