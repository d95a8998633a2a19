/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A link the test can cut: a TCP relay on loopback between a bridge and
 * the broker it connects to (test_fleet.c), so that one broker's link goes
 * down and comes back while both brokers run. Failures fail the test.
 */
#ifndef DLQ_IT_RELAY_H
#define DLQ_IT_RELAY_H

struct link;

/* A relay listening on a free loopback port (link_port) that forwards
 * each connection to 127.0.0.1:target; its thread runs until link_free. */
struct link *link_new(int target);
/* The port a client connects to. */
int link_port(const struct link *l);
/* Closes every connection through l and refuses new ones. */
void link_cut(struct link *l);
/* Accepts connections again, on the same port. */
void link_restore(struct link *l);
/* Cuts l, ends its thread and frees it. */
void link_free(struct link *l);

#endif
