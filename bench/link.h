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

#include "bench.h"

struct link {
	const char *name;  /* borrowed, static: who this is, in messages */
	bool connected;    /* CONNACK success, until the connection ends */
	int subscribed;    /* SUBACKs that granted their one subscription */
	bool failed;       /* refused, a subscription refused, or the connection lost */
};

/* Sets m's connect, subscribe and disconnect callbacks to keep the struct
 * link at the start of m's userdata. */
void link__callbacks_set(struct mosquitto *m);

/* A new MQTT v5 client with id, ud its userdata (a client struct starting
 * with its struct link), link__callbacks_set's callbacks and on_message,
 * connecting to b (the CONNACK comes in the caller's loop). Returns it
 * (the caller destroys it), or NULL when it could not be made or could not
 * connect, said on stderr as suite's. */
struct mosquitto *link__connect(void *ud, const char *id, const struct broker *b, const char *suite,
		void (*on_message)(struct mosquitto *, void *, const struct mosquitto_message *, const mosquitto_property *));

#endif
