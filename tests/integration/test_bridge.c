/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Several brokers (issue 6, "Many brokers"): edge brokers with the plugin
 * bridge their dead-letter topics out to a central broker with Mosquitto's
 * own MQTT v5 bridge, and their origin topics in from it, as
 * docs/bridging.md shows. On the central broker dlqctl inspect sees the
 * dead letters of every edge, and dlqctl redrive republishes them to their
 * origin topic, which the bridge carries back to the origin edge alone,
 * where the plugin stamps them afresh. Clients use unix sockets; bridges
 * need TCP, on free loopback ports.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "harness.h"
#include "proc.h"

/* The central broker: no plugin, one more listener on a loopback port. */
static struct broker *central_broker(int *port)
{
	struct broker *c = broker_new("central");
	*port = it_free_port();
	broker_conf(c, "listener %d 127.0.0.1", *port);
	broker_start(c);
	return c;
}

/* An edge broker with the plugin and a bridge to the central broker.
 * prefix: the edge's topics on the central broker ("edge-a/"), or NULL to
 * bridge them under their own names. */
static struct broker *edge_broker(const char *name, int central_port, const char *prefix)
{
	struct broker *e = broker_new(name);
	broker_plugin(e);
	broker_conf(e, "plugin_opt_policy orders/# max_attempts=1 dead_letter=dead/orders");
	broker_bridge(e, name, "central", central_port);
	if(prefix){
		broker_conf(e, "topic dead/# out 1 \"\" %s", prefix);
		broker_conf(e, "topic orders/# in 1 \"\" %s", prefix);
	}else{
		broker_conf(e, "topic dead/# out 1");
		broker_conf(e, "topic orders/# in 1");
	}
	broker_start(e);
	return e;
}

/* Waits until the edge's bridge has subscribed on the central broker. */
static void wait_bridge(struct broker *central, const char *name, const char *prefix)
{
	char line[256];
	snprintf(line, sizeof(line), "%s 1 %sorders/#", name, prefix ? prefix : "");
	ck_assert_msg(it_wait_log(central, line, 1, HARNESS_WAIT_MS), "bridge %s did not subscribe (\"%s\")", name, line);
}

/* Publishes payload on the edge, has its worker NACK it once, and returns
 * the original's dlq-id. */
static const char *fail_once(struct client *worker, const char *topic, const char *payload, size_t k)
{
	/* A property of the publisher's, to see it travel both ways. */
	mosquitto_property *props = NULL;
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, "tenant", payload), 0);
	client_publish(worker, topic, payload, (int)strlen(payload), 1, props);
	mosquitto_property_free_all(&props);
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	const struct it_msg *m;
	while((m = client_find_payload(worker, topic, payload, k)) == NULL){
		ck_assert_msg(it_now_ms() < deadline, "\"%s\" did not arrive", payload);
		client_wait(worker, topic, client_count(worker, topic) + 1, 50);
	}
	const char *id = dlq_id_of(m);
	client_nack(worker, id, "edge failure");
	return id;
}

START_TEST(test_two_edges_with_prefixes)
{
	int port;
	struct broker *central = central_broker(&port);
	struct broker *a = edge_broker("edge-a", port, "edge-a/");
	struct broker *b = edge_broker("edge-b", port, "edge-b/");
	wait_bridge(central, "edge-a", "edge-a/");
	wait_bridge(central, "edge-b", "edge-b/");

	/* The sessions that park dead letters on the central broker. */
	dlqctl_expect(0, central, "inspect", "-c", "-i", "fleet-inspector", "+/dead/#", "--max", "0");
	dlqctl_expect(0, central, "redrive", "edge-a/dead/#", "--max", "0");
	dlqctl_expect(0, central, "redrive", "edge-b/dead/#", "--max", "0");
	struct client *watch = client_subscribed(central, "watch", "#");

	struct client *wa = client_subscribed(a, "worker-a", "orders/#");
	struct client *wb = client_subscribed(b, "worker-b", "orders/#");
	const char *ida = fail_once(wa, "orders/1", "from-a", 0);
	const char *idb = fail_once(wb, "orders/1", "from-b", 0);

	/* Both dead letters reach the central broker, properties intact. */
	const struct it_msg *m = client_expect(watch, "+/dead/#", 2);
	const struct it_msg *da = client_find(watch, "edge-a/dead/orders", DLQ_PROP_ORIGIN_ID, ida);
	const struct it_msg *db = client_find(watch, "edge-b/dead/orders", DLQ_PROP_ORIGIN_ID, idb);
	(void)m;
	ck_assert_msg(da && db, "a dead letter arrived without its properties or on another topic");
	expect_dead_letter(da, "orders/1", ida, 1, client_id(wa), "orders/#", "edge failure");
	expect_dead_letter(db, "orders/1", idb, 1, client_id(wb), "orders/#", "edge failure");

	struct proc *p = dlqctl_expect(0, central, "inspect", "-c", "-i", "fleet-inspector", "+/dead/#");
	ck_assert_msg(it_lines_with(proc_out(p), "edge-a/dead/orders", NULL, 0) == 1
			&& it_lines_with(proc_out(p), "edge-b/dead/orders", NULL, 0) == 1, "%s", proc_out(p));
	ck_assert_msg(strstr(proc_out(p), "from-a") && strstr(proc_out(p), "from-b"), "%s", proc_out(p));

	/* Redrive edge-a's letters: back over the bridge to edge-a only. */
	p = dlqctl_expect(0, central, "redrive", "edge-a/dead/#", "--to-prefix", "edge-a/");
	ck_assert_msg(it_lines_with(proc_out(p), "redriven ", NULL, 0) == 1
			&& strstr(proc_out(p), "-> edge-a/orders/1"), "%s", proc_out(p));
	const struct it_msg *back = client_expect(wa, "orders/1", 2);
	ck_assert_str_eq(back->payload, "from-a");
	const char *fresh = expect_original(back);
	ck_assert_msg(strcmp(fresh, ida), "the redriven message kept its old dlq-id");
	ck_assert_str_eq(msg_user(back, "tenant") ? msg_user(back, "tenant") : "(none)", "from-a");
	ck_assert_str_eq(msg_user(da, "tenant") ? msg_user(da, "tenant") : "(none)", "from-a");

	/* It can fail again on its edge, counting from 1. */
	client_nack(wa, fresh, "again");
	const struct it_msg *again = client_find(watch, "edge-a/dead/orders", DLQ_PROP_ORIGIN_ID, fresh);
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	while(again == NULL && it_now_ms() < deadline){
		client_wait(watch, "edge-a/dead/orders", client_count(watch, "edge-a/dead/orders") + 1, 100);
		again = client_find(watch, "edge-a/dead/orders", DLQ_PROP_ORIGIN_ID, fresh);
	}
	ck_assert_msg(again != NULL, "the second dead letter did not reach the central broker");
	expect_dead_letter(again, "orders/1", fresh, 1, client_id(wa), "orders/#", "again");

	clients_settle(wa, wb, watch);
	client_expect_exactly(wa, "orders/#", 2);
	client_expect_exactly(wb, "orders/#", 1);
	/* edge-b's letter still waits for its own redrive. */
	p = dlqctl_expect(0, central, "redrive", "edge-b/dead/#", "--dry-run");
	ck_assert_msg(it_lines_with(proc_out(p), "would-redrive ", NULL, 0) == 1 && strstr(proc_out(p), "from-b"),
			"edge-b's letter is not waiting:\n%s", proc_out(p));
}
END_TEST

/* The simplest fleet: one edge, topics under their own names. */
START_TEST(test_one_edge_same_names)
{
	int port;
	struct broker *central = central_broker(&port);
	struct broker *e = edge_broker("edge-1", port, NULL);
	wait_bridge(central, "edge-1", NULL);
	dlqctl_expect(0, central, "redrive", "dead/#", "--max", "0");
	struct client *watch = client_subscribed(central, "watch", "dead/#");
	struct client *w = client_subscribed(e, "worker", "orders/#");
	const char *id = fail_once(w, "orders/9", "nine", 0);
	expect_dead_letter(client_expect(watch, "dead/orders", 1), "orders/9", id, 1, client_id(w), "orders/#", "edge failure");

	struct proc *p = dlqctl_expect(0, central, "redrive", "dead/#");
	ck_assert_msg(strstr(proc_out(p), "-> orders/9"), "%s", proc_out(p));
	const struct it_msg *back = client_expect(w, "orders/9", 2);
	ck_assert_str_eq(back->payload, "nine");
	ck_assert_msg(strcmp(expect_original(back), id), "the redriven message kept its old dlq-id");
	clients_settle(w, watch);
	client_expect_exactly(w, "orders/#", 2);
	client_expect_exactly(watch, NULL, 1);
}
END_TEST

int main(void)
{
	return harness_run(check_suite("bridge", harness_tcase("bridge"), CHECK_TESTS(test_two_edges_with_prefixes,
			test_one_edge_same_names)));
}
