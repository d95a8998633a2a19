/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A fleet (issue 39, "Collecting"): three edge brokers, each its own
 * mosquitto with the plugin, a policy and a worker that NACKs odd numbers,
 * bridge their dead-letter topics with MQTT v5 bridges to a central broker
 * whose plugin collects them (plugin_opt_collect fleet/+/dead/#) into its
 * dead-letter store. Nobody subscribes to dead letters anywhere. The
 * central store holds every edge's letters once, under the edge's name and
 * its letter ids; one edge's link is cut (a TCP relay in this process that
 * the test closes, relay.h) while its worker makes more, and when it returns they
 * arrive, none lost, none twice; the centre stops (SIGTERM, then SIGKILL,
 * with an edge making letters while it is down) and keeps everything; a
 * letter delivered twice is kept once, before and after a restart;
 * garbage on a collected filter is refused with a log line naming the
 * topic, goes on to its subscribers, and the broker lives; a collect
 * filter that would double-keep is refused at start. A redrive at the
 * centre sends an edge's letter home over its bridge
 * (plugin_opt_redrive_home, plugin_opt_redrive_from): that edge's worker
 * gets it again as a new chain, no other edge sees it, and forged or
 * stray requests on an edge are refused.
 *
 * A fleet of mixed broker lines: DLQ_FLEET_CENTRE_BIN and DLQ_FLEET_EDGE_BIN
 * (optional) run the centre and the edges on other broker binaries than
 * MOSQUITTO_BIN, and DLQ_FLEET_CENTRE_LINE and DLQ_FLEET_EDGE_LINE (optional,
 * "2.1", "2.0", "2.0.11") are the lines each must say it is in its log, or
 * the test fails: run-tests.sh --host-build sets them all, edges on the
 * host's broker and the centre on the line asked for (docs/development.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "letters_common.h"
#include "proc.h"
#include "relay.h"
#include "test_util.h"

#define EDGES 3
#define COLLECT "fleet/+/dead/#"
#define REDRIVE_HOME "fleet/%b/redrive"

/* ---- the brokers ---- */

/* Fails unless b's log since its start names a version of the line in the
 * environment variable var ("2.1" takes 2.1.2, not 2.10.0), if var is set;
 * says which version b runs. */
static void expect_line(const struct broker *b, const char *label, const char *var)
{
	const char *line = getenv(var);
	int v = broker_running_version(b);
	char version[48];
	snprintf(version, sizeof(version), "%d.%d.%d", v / 1000000, v / 1000 % 1000, v % 1000);
	printf("fleet: %s runs mosquitto %s\n", label, v ? version : "of no version in its log");
	if(!line || !*line) return;
	size_t n = strlen(line);
	ck_assert_msg(v && !strncmp(version, line, n) && (version[n] == '.' || version[n] == '\0'),
			"%s runs mosquitto %s, not %s (%s): the fleet is not of the lines asked for", label,
			v ? version : "of no version in its log", line, var);
}

/* The central broker: the plugin collecting COLLECT, its state journaled
 * (a SIGKILL loses no letter it acknowledged), a loopback TCP listener for
 * the bridges. */
static struct broker *centre_new(int port)
{
	struct broker *c = broker_new("centre");
	broker_use_bin(c, getenv("DLQ_FLEET_CENTRE_BIN"));
	broker_plugin(c);
	broker_conf(c, "plugin_opt_broker_name centre");
	broker_conf(c, "plugin_opt_collect " COLLECT);
	broker_conf(c, "plugin_opt_redrive_home %s", REDRIVE_HOME);
	broker_conf(c, "plugin_opt_state_file %s", broker_path(c, STATE_NAME));
	broker_conf(c, "plugin_opt_state_save_on_change true");
	broker_conf(c, "plugin_opt_dead_letter_access control");
	broker_conf(c, "listener %d 127.0.0.1", port);
	broker_start(c);
	expect_line(c, "the centre", "DLQ_FLEET_CENTRE_LINE");
	return c;
}

/* Edge n ("edge-<n>"): a policy whose every NACK dead-letters, and a v5
 * bridge carrying dead/# to fleet/edge-<n>/dead/# through port. */
static struct broker *edge_new(int n, int port)
{
	char name[16];
	snprintf(name, sizeof(name), "edge-%d", n);
	struct broker *e = broker_new(name);
	broker_use_bin(e, getenv("DLQ_FLEET_EDGE_BIN"));
	broker_plugin(e);
	broker_conf(e, "plugin_opt_broker_name %s", name);
	broker_conf(e, "plugin_opt_policy orders/# max_attempts=1 dead_letter=dead/orders");
	broker_conf(e, "plugin_opt_dead_letter_access control");
	broker_bridge(e, name, "centre", port);
	broker_conf(e, "restart_timeout 1");
	broker_conf(e, "topic dead/# out 1 \"\" fleet/%s/", name);
	/* Redrive requests in: fleet/<edge>/redrive there is redrive here,
	 * from the bridge's local client id (upstream's default). */
	broker_conf(e, "topic redrive in 1 \"\" fleet/%s/", name);
	broker_conf(e, "plugin_opt_redrive_from redrive local.%s", name);
	broker_start(e);
	expect_line(e, name, "DLQ_FLEET_EDGE_LINE");
	return e;
}

/* Waits until the centre's log says the bridge of edge n connected for
 * the k-th time since the centre's start. */
static void wait_bridge(struct broker *centre, int n, size_t k)
{
	char needle[64];
	snprintf(needle, sizeof(needle), " as edge-%d (", n);
	ck_assert_msg(it_wait_log(centre, needle, k, HARNESS_WAIT_MS), "edge-%d's bridge did not connect (%zu)", n, k);
}

/* ---- letters ---- */

/* Publishes numbers from..to on orders/<k> through pub; worker NACKs each
 * odd one ("odd"), which dead-letters it, and leaves the even ones be. */
static void make_letters(struct client *pub, struct client *worker, int from, int to)
{
	for(int k = from; k <= to; k++){
		char topic[32], payload[16];
		snprintf(topic, sizeof(topic), "orders/%d", k);
		snprintf(payload, sizeof(payload), "%d", k);
		size_t have = client_count(worker, "orders/#");
		client_publish_str(pub, topic, payload, 1);
		const struct it_msg *m = client_expect(worker, "orders/#", have + 1);
		ck_assert_str_eq(m->payload, payload);
		if(k % 2) client_nack(worker, dlq_id_of(m), "odd");
	}
}

/* The ids of the letters c's broker keeps of broker (NULL: all), sorted
 * ("id" of each listDeadLetters summary), at most max; returns how many. */
static size_t letter_ids(struct client *c, const char *broker, char (*ids)[ID_BUF], size_t max)
{
	cJSON *tmpl = cJSON_CreateObject();
	if(broker) cJSON_AddStringToObject(tmpl, "broker", broker);
	size_t pages;
	size_t n = list_all(c, tmpl, 100, ids, max, &pages);
	cJSON_Delete(tmpl);
	qsort(ids, n < max ? n : max, ID_BUF, (int (*)(const void *, const void *))strcmp);
	return n;
}

/* Waits until c's broker keeps want letters of broker (NULL: in all). */
static void wait_letters(struct client *c, const char *broker, size_t want)
{
	char ids[64][ID_BUF];
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	size_t n;
	while((n = letter_ids(c, broker, ids, 64)) != want && it_now_ms() < deadline) it_sleep_ms(50);
	ck_assert_msg(n == want, "%zu letters of %s kept, not %zu", n, broker ? broker : "any broker", want);
}

/* The centre keeps each letter edge (its client ed) keeps, once, as
 * edge's, and no other of edge's. */
static void expect_same_letters(struct client *central, struct client *ed, const char *edge, size_t want)
{
	char mine[64][ID_BUF], kept[64][ID_BUF];
	size_t n = letter_ids(ed, NULL, mine, 64);
	ck_assert_msg(n == want, "%s keeps %zu letters, not %zu", edge, n, want);
	wait_letters(central, edge, want);
	ck_assert_uint_eq(letter_ids(central, edge, kept, 64), want);
	for(size_t i = 0; i < want; i++){
		ck_assert_msg(!strcmp(mine[i], kept[i]), "%s's letter %s is kept at the centre as %s", edge, mine[i], kept[i]);
		ck_assert_msg(i == 0 || strcmp(kept[i - 1], kept[i]), "%s's letter %s is kept twice", edge, kept[i]);
	}
}

struct fleet {
	int port;
	struct broker *centre;
	struct client *ops;       /* at the centre */
	struct link *links[EDGES];
	struct broker *edges[EDGES];
	struct client *pubs[EDGES], *workers[EDGES], *edge_ops[EDGES];
};

static void fleet_start(struct fleet *f)
{
	f->port = it_free_port();
	f->centre = centre_new(f->port);
	for(int i = 0; i < EDGES; i++){
		char name[32];
		f->links[i] = link_new(f->port);
		f->edges[i] = edge_new(i + 1, link_port(f->links[i]));
		snprintf(name, sizeof(name), "pub-%d", i + 1);
		f->pubs[i] = client_new(f->edges[i], name, MQTT_PROTOCOL_V5);
		snprintf(name, sizeof(name), "worker-%d", i + 1);
		f->workers[i] = client_subscribed(f->edges[i], name, "orders/#");
		snprintf(name, sizeof(name), "ops-%d", i + 1);
		f->edge_ops[i] = ops_client(f->edges[i], name);
	}
	for(int i = 0; i < EDGES; i++) wait_bridge(f->centre, i + 1, 1);
	f->ops = ops_client(f->centre, "ops");
}

static void fleet_stop(struct fleet *f)
{
	for(int i = 0; i < EDGES; i++) link_free(f->links[i]);
}

/* Each edge's letters are at the centre, each once. */
static void expect_fleet(struct fleet *f, const size_t want[EDGES])
{
	size_t all = 0;
	for(int i = 0; i < EDGES; i++){
		char name[16];
		snprintf(name, sizeof(name), "edge-%d", i + 1);
		expect_same_letters(f->ops, f->edge_ops[i], name, want[i]);
		all += want[i];
	}
	wait_letters(f->ops, NULL, all);
}

START_TEST(test_fleet_collects_every_letter_once)
{
	struct fleet f;
	fleet_start(&f);
	size_t want[EDGES] = {0};

	/* 1..6 on every edge: 1, 3, 5 are dead letters. */
	for(int i = 0; i < EDGES; i++){
		make_letters(f.pubs[i], f.workers[i], 1, 6);
		want[i] = 3;
	}
	expect_fleet(&f, want);
	ck_assert_msg(log_has(f.centre, "kept the dead letter ") && !log_has(f.centre, "is no dead letter"),
			"the centre's log does not say what it kept");

	/* edge-2's link is cut while its worker makes three more. */
	link_cut(f.links[1]);
	make_letters(f.pubs[1], f.workers[1], 7, 12);
	char ids[64][ID_BUF];
	ck_assert_uint_eq(letter_ids(f.edge_ops[1], NULL, ids, 64), 6);
	ck_assert_uint_eq(letter_ids(f.ops, "edge-2", ids, 64), 3);
	/* The link returns: they arrive, none lost, none twice. */
	link_restore(f.links[1]);
	wait_bridge(f.centre, 2, 2);
	want[1] = 6;
	expect_fleet(&f, want);

	/* The centre stops (SIGTERM) and starts: it keeps them all. */
	broker_shutdown(f.centre);
	broker_start(f.centre);
	f.ops = ops_client(f.centre, "ops-2");
	wait_letters(f.ops, NULL, 12);
	for(int i = 0; i < EDGES; i++) wait_bridge(f.centre, i + 1, 1);
	expect_fleet(&f, want);

	/* It is killed (SIGKILL); edge-3 makes letters while it is down. */
	broker_kill(f.centre);
	make_letters(f.pubs[2], f.workers[2], 7, 10);
	broker_start(f.centre);
	f.ops = ops_client(f.centre, "ops-3");
	want[2] = 5;
	expect_fleet(&f, want);
	ck_assert_msg(!log_has(f.centre, "is no dead letter") && !log_has(f.centre, "not kept"),
			"the centre refused a letter");
	fleet_stop(&f);
}
END_TEST

/* ---- one centre alone ---- */

/* A centre alone, with its ops client and a v5 client subscribed to
 * fleet/# (the letters' subscriber: it must get every message, kept or
 * not). */
static struct broker *centre_alone(struct client **ops, struct client **watch)
{
	struct broker *c = centre_new(it_free_port());
	*ops = ops_client(c, "ops");
	*watch = client_subscribed(c, "watch", "fleet/#");
	return c;
}

/* Publishes from c on topic a dead letter of broker with id, QoS 1, as
 * edge's bridge delivers it (its properties those an edge's plugin
 * writes, after one of the publisher's own). Returns the reason code of
 * its PUBACK. */
static int publish_letter(struct client *c, const char *topic, const char *broker, const char *id,
		const char *payload)
{
	mosquitto_property *p = NULL;
	static const char *const names[] = {
		DLQ_PROP_RETRY_COUNT, DLQ_PROP_ORIGIN_TOPIC, DLQ_PROP_ORIGIN_ID, DLQ_PROP_DEAD_LETTER_REASON,
		DLQ_PROP_DEAD_LETTER_CLIENT, DLQ_PROP_DEAD_LETTER_FILTER, DLQ_PROP_DEAD_LETTER_TIME,
		DLQ_PROP_DEAD_LETTER_CAUSE, DLQ_PROP_DEAD_LETTER_BROKER, DLQ_PROP_DEAD_LETTER_ID,
	};
	const char *values[] = {
		"1", "orders/1", "OOOOOOOOOOOOOOOO", "odd", "worker-9", "orders/#", "2026-12-06T23:00:00.000Z", "nack",
		broker, id,
	};
	ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, "tenant", "acme"), 0);
	for(size_t i = 0; i < ARRAY_LEN(names); i++){
		ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, names[i], values[i]), 0);
	}
	int rc = client_publish(c, topic, payload, (int)strlen(payload), 1, p);
	mosquitto_property_free_all(&p);
	return rc;
}

/* A letter a bridge delivers twice is kept once, also when the second
 * comes after a restart (the key, broker and id, is in the state file);
 * another broker's letter of the same id is not kept, and said so. The
 * letters go on to the centre's subscribers unchanged. */
START_TEST(test_a_letter_delivered_twice_is_kept_once)
{
	struct client *ops, *watch;
	struct broker *c = centre_alone(&ops, &watch);
	struct client *bridge = client_new(c, "bridge", MQTT_PROTOCOL_V5);
	ck_assert_int_lt(publish_letter(bridge, "fleet/edge-9/dead/orders", "edge-9", "EEEEEEEEEEEEEEE9", "nine"), 0x80);
	wait_letters(ops, "edge-9", 1);
	ck_assert_int_lt(publish_letter(bridge, "fleet/edge-9/dead/orders", "edge-9", "EEEEEEEEEEEEEEE9", "nine"), 0x80);
	ck_assert_msg(it_wait_log(c, "EEEEEEEEEEEEEEE9 of broker \"edge-9\" on \"fleet/edge-9/dead/orders\" is kept already",
			1, HARNESS_WAIT_MS), "the second delivery was not seen as one");
	ck_assert_int_lt(publish_letter(bridge, "fleet/edge-8/dead/orders", "edge-8", "EEEEEEEEEEEEEEE9", "eight"), 0x80);
	ck_assert_msg(it_wait_log(c, "a letter of another broker is kept under the same id", 1, HARNESS_WAIT_MS),
			"a clash was not logged");
	char ids[4][ID_BUF];
	ck_assert_uint_eq(letter_ids(ops, NULL, ids, 4), 1);
	ck_assert_str_eq(ids[0], "EEEEEEEEEEEEEEE9");
	/* Every one went on to the subscriber, as published. */
	client_expect(watch, "fleet/#", 3);
	client_sync(watch);
	client_expect_exactly(watch, "fleet/#", 3);
	ck_assert_str_eq(msg_user(client_msg(watch, "fleet/#", 0), DLQ_PROP_DEAD_LETTER_ID), "EEEEEEEEEEEEEEE9");
	ck_assert_str_eq(msg_user(client_msg(watch, "fleet/#", 0), "tenant"), "acme");

	/* What the store shows of it: the maker's name and letter, the
	 * publisher's own property. */
	cJSON *cmd = cmd_new(DLQ_COMMAND_GET_DEAD_LETTER);
	cJSON_AddStringToObject(cmd, "id", "EEEEEEEEEEEEEEE9");
	const cJSON *e;
	cJSON *doc = ask(ops, cmd, &e);
	char *t = json_text(entry_data(e));
	ck_assert_msg(strstr(t, "\"edge-9\"") && strstr(t, "\"orders/1\"") && strstr(t, "\"tenant\"")
			&& strstr(t, "fleet/edge-9/dead/orders"), "%s", t);
	free(t);
	cJSON_Delete(doc);

	broker_kill(c);
	broker_start(c);
	ops = ops_client(c, "ops-2");
	bridge = client_new(c, "bridge-2", MQTT_PROTOCOL_V5);
	ck_assert_int_lt(publish_letter(bridge, "fleet/edge-9/dead/orders", "edge-9", "EEEEEEEEEEEEEEE9", "nine"), 0x80);
	ck_assert_msg(it_wait_log(c, "is kept already", 1, HARNESS_WAIT_MS), "the restarted centre kept it again");
	ck_assert_uint_eq(letter_ids(ops, NULL, ids, 4), 1);
}
END_TEST

/* Garbage on a collected filter: no properties (v3.1.1 and v5), half a
 * dead letter's, one wrong, 1 MiB without properties, one at QoS 0. Each is refused from the store
 * with a warning naming its topic, goes on to subscribers (the plugin only
 * keeps copies), and the publisher stays connected; the broker lives and
 * keeps a real letter after. */
START_TEST(test_garbage_is_refused_and_logged)
{
	struct client *ops, *watch;
	struct broker *c = centre_alone(&ops, &watch);
	struct client *v3 = client_new(c, "v3", MQTT_PROTOCOL_V311);
	struct client *v5 = client_new(c, "v5", MQTT_PROTOCOL_V5);

	client_publish_str(v3, "fleet/a/dead/x", "no properties", 1);
	client_publish_str(v5, "fleet/b/dead/x", "no properties", 1);
	mosquitto_property *p = NULL;
	ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, DLQ_PROP_DEAD_LETTER_ID, "zzz"),
			0);
	ck_assert_int_eq(mosquitto_property_add_string_pair(&p, MQTT_PROP_USER_PROPERTY, DLQ_PROP_DEAD_LETTER_BROKER,
			"edge/1"), 0);
	client_publish(v5, "fleet/f/dead/x", "half", 4, 1, p);
	mosquitto_property_free_all(&p);
	/* Every property there but one wrong. */
	publish_letter(v5, "fleet/c/dead/x", "edge-1", "zzz", "wrong");
	size_t big_len = 1024 * 1024;
	char *big = malloc(big_len);
	ck_assert_ptr_nonnull(big);
	memset(big, 'g', big_len);
	client_publish(v5, "fleet/d/dead/x", big, (int)big_len, 1, NULL);
	free(big);
	/* One at QoS 0. */
	client_publish_str(v5, "fleet/e/dead/x", "q0", 0);

	static const char *const topics[] = {
		"fleet/a/dead/x", "fleet/b/dead/x", "fleet/f/dead/x", "fleet/c/dead/x", "fleet/d/dead/x", "fleet/e/dead/x",
	};
	for(size_t i = 0; i < ARRAY_LEN(topics); i++){
		char needle[128];
		snprintf(needle, sizeof(needle), "the message on \"%s\" from \"%s\" is no dead letter and is not kept",
				topics[i], client_id(i == 0 ? v3 : v5));
		ck_assert_msg(it_wait_log(c, needle, 1, HARNESS_WAIT_MS), "no warning for %s", topics[i]);
	}
	ck_assert_msg(log_has(c, "fleet/c/dead/x\" from \"") && log_has(c, "(plugin_opt_collect): user property "
			"dead-letter-id \"zzz\": not 16 base64url characters"), "the warning does not say what is wrong");
	ck_assert_msg(log_has(c, "(plugin_opt_collect): user property origin-topic missing"),
			"the warning does not name the missing property");
	client_expect(watch, "fleet/#", ARRAY_LEN(topics));
	client_sync(watch);
	client_expect_exactly(watch, "fleet/#", ARRAY_LEN(topics));
	ck_assert_int_eq(client_msg(watch, "fleet/d/dead/x", 0)->payloadlen, (int)big_len);
	ck_assert_msg(client_connected(v3) && client_connected(v5) && !client_disconnects(v5),
			"a publisher of garbage was disconnected");
	char ids[4][ID_BUF];
	ck_assert_uint_eq(letter_ids(ops, NULL, ids, 4), 0);

	/* The broker lives and keeps a real letter. */
	ck_assert_int_lt(publish_letter(v5, "fleet/edge-1/dead/orders", "edge-1", "EEEEEEEEEEEEEEE1", "one"), 0x80);
	wait_letters(ops, "edge-1", 1);
}
END_TEST

/* ---- redrive home ---- */

/* The one letter c's broker keeps of broker, into id. */
static void only_letter(struct client *c, const char *broker, char id[ID_BUF])
{
	char ids[4][ID_BUF];
	ck_assert_uint_eq(letter_ids(c, broker, ids, 4), 1);
	memcpy(id, ids[0], ID_BUF);
}

/* Waits until edge's log says the redrive request from sender was refused
 * for why. */
static void expect_refused(struct broker *edge, const char *sender, const char *why)
{
	char needle[256];
	snprintf(needle, sizeof(needle), "the redrive request on \"redrive\" from \"%s\" is refused "
			"(plugin_opt_redrive_from): %s", sender, why);
	ck_assert_msg(it_wait_log(edge, needle, 1, HARNESS_WAIT_MS), "not logged: %s", needle);
}

/* A redrive at the centre of edge-2's letter sends it home: edge-2's
 * worker gets it again on its origin topic as a new chain (NACKed, a new
 * dead letter, which the centre collects), it leaves both stores, and
 * edge-1's and edge-3's workers see nothing. A forged request by an
 * ordinary client on edge-1, and one for edge-2's letter on edge-1's home
 * topic, are refused there with a warning, and nothing is published. */
START_TEST(test_a_redrive_goes_home)
{
	struct fleet f;
	fleet_start(&f);
	make_letters(f.pubs[1], f.workers[1], 1, 2);
	wait_letters(f.ops, "edge-2", 1);
	char id[ID_BUF], again[ID_BUF];
	only_letter(f.ops, "edge-2", id);
	char *first = strdup(dlq_id_of(client_msg(f.workers[1], "orders/#", 0)));
	ck_assert_ptr_nonnull(first);

	const cJSON *r;
	cJSON *doc = one_id(f.ops, DLQ_COMMAND_REDRIVE_DEAD_LETTERS, id, NULL, &r);
	expect_str_member(r, "result", "sent home to edge-2");
	expect_str_member(r, "via", "fleet/edge-2/redrive");
	cJSON_Delete(doc);
	ck_assert_uint_eq(letter_ids(f.ops, NULL, &again, 1), 0);
	ck_assert(log_has(f.centre, "sent home to \"edge-2\" on \"fleet/edge-2/redrive\" by \"ops"));

	/* Home: its origin topic, a new chain, and out of edge-2's store. */
	const struct it_msg *m = client_expect(f.workers[1], "orders/#", 3);
	ck_assert_str_eq(m->topic, "orders/1");
	ck_assert_str_eq(m->payload, "1");
	ck_assert_str_eq(msg_user(m, DLQ_PROP_RETRY_COUNT), "0");
	ck_assert_str_eq(msg_user(m, DLQ_PROP_ORIGIN_ID), first);
	ck_assert_str_ne(dlq_id_of(m), first);
	free(first);
	wait_letters(f.edge_ops[1], NULL, 0);
	ck_assert(log_has(f.edges[1], "redriven to \"orders/1\" by \"local.edge-2\""));
	client_nack(f.workers[1], dlq_id_of(m), "odd again");
	wait_letters(f.ops, "edge-2", 1);
	only_letter(f.ops, "edge-2", again);
	ck_assert_str_ne(again, id);

	/* Forged on edge-1 by an ordinary client; edge-2's letter brought to
	 * edge-1 over its bridge. */
	struct client *forger = client_new(f.edges[0], "forger", MQTT_PROTOCOL_V5);
	ck_assert_int_lt(publish_letter(forger, "redrive", "edge-1", "FFFFFFFFFFFFFFF1", "forged"), 0x80);
	expect_refused(f.edges[0], client_id(forger), "it does not come from \"local.edge-1\"");
	struct client *stray = client_new(f.centre, "stray", MQTT_PROTOCOL_V5);
	ck_assert_int_lt(publish_letter(stray, "fleet/edge-1/redrive", "edge-2", "FFFFFFFFFFFFFFF2", "stray"), 0x80);
	expect_refused(f.edges[0], "local.edge-1", "the dead letter FFFFFFFFFFFFFFF2 of broker \"edge-2\", not of "
			"this broker \"edge-1\"");
	ck_assert(client_connected(forger) && !client_disconnects(forger));
	for(int i = 0; i < EDGES; i++){
		client_sync(f.workers[i]);
		client_expect_exactly(f.workers[i], "orders/#", i == 1 ? 3 : 0);
	}
	ck_assert(!log_has(f.edges[0], "redriven to") && !log_has(f.edges[2], "redrive request on"));
	fleet_stop(&f);
}
END_TEST

/* A collect filter that would keep a letter twice, or track what it
 * collects, is refused at start, naming both. */
START_TEST(test_overlapping_collect_is_refused)
{
	struct broker *b = broker_new("overlap");
	broker_plugin(b);
	broker_conf(b, "plugin_opt_policy orders/# max_attempts=1 dead_letter=fleet/here/dead/orders");
	broker_conf(b, "plugin_opt_collect " COLLECT);
	char *log = broker_expect_refusal(b);
	ck_assert_msg(strstr(log, "plugin_opt_collect \"" COLLECT "\" takes \"fleet/here/dead/orders\", the dead-letter "
			"topic of plugin_opt_policy #1"), "%s", log);
	free(log);
}
END_TEST

/* ---- the fleet at a glance: counters, warnings, letters by broker ---- */

/* Garbage messages a test_collecting_at_a_glance burst publishes. */
#define GARBAGE_BURST 200

/* A centre of its own, alone (COLLECT, $SYS every second), with its ops
 * client. */
static struct broker *glance_centre(struct client **ops)
{
	struct broker *c = broker_new("glance");
	broker_use_bin(c, getenv("DLQ_FLEET_CENTRE_BIN"));
	broker_plugin(c);
	broker_conf(c, "plugin_opt_broker_name centre");
	broker_conf(c, "plugin_opt_collect " COLLECT);
	broker_conf(c, "plugin_opt_dead_letter_access control");
	broker_conf(c, "plugin_opt_sys_interval 1s");
	broker_start(c);
	*ops = ops_client(c, "ops");
	return c;
}

/* The number getStatus' totals say for name. */
static double status_total(struct client *ops, const char *name)
{
	const cJSON *e;
	cJSON *doc = ask(ops, cmd_new(DLQ_COMMAND_GET_STATUS), &e);
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(entry_data(e), "totals"), name);
	ck_assert_msg(cJSON_IsNumber(v), "getStatus' totals have no number \"%s\"", name);
	double n = v->valuedouble;
	cJSON_Delete(doc);
	return n;
}

/* Waits until sys (subscribed to $SYS/broker/dlq/#) got want on
 * $SYS/broker/dlq/<name>. */
static void wait_sys_value(struct client *sys, const char *name, const char *want)
{
	char topic[128];
	snprintf(topic, sizeof(topic), DLQ_SYS_TOPIC_PREFIX "%s", name);
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	while(client_find_payload(sys, topic, want, 0) == NULL){
		ck_assert_msg(it_now_ms() < deadline, "no \"%s\" on %s", want, topic);
		client_wait(sys, topic, client_count(sys, topic) + 1, 100);
	}
}

/* Collecting is counted (getStatus' collected, collectedDuplicates,
 * collectedRefused; the same on $SYS, whose names are Prometheus metric
 * names; zeroed by resetCounters); a burst of garbage on a collect filter
 * logs a bounded number of warnings (10 and one that says the rest are
 * not logged), every one counted; listBrokers and dlqctl brokers give
 * each broker's letters and newest letter, and dlqctl list --broker only
 * its letters. */
START_TEST(test_collecting_at_a_glance)
{
	struct client *ops;
	struct broker *c = glance_centre(&ops);
	struct client *sys = ops_client(c, "sys");
	client_subscribe(sys, DLQ_SYS_TOPIC_PREFIX "#", 1);
	struct client *bridge = client_new(c, "bridge", MQTT_PROTOCOL_V5);
	static const struct { const char *broker, *id; } letters[] = {
		{ "edge-1", "GGGGGGGGGGGGGGG1" }, { "edge-2", "GGGGGGGGGGGGGGG2" }, { "edge-3", "GGGGGGGGGGGGGGG3" },
		{ "edge-1", "GGGGGGGGGGGGGGG4" },
	};
	for(size_t i = 0; i < ARRAY_LEN(letters); i++){
		char topic[64];
		snprintf(topic, sizeof(topic), "fleet/%s/dead/orders", letters[i].broker);
		ck_assert_int_lt(publish_letter(bridge, topic, letters[i].broker, letters[i].id, "order"), 0x80);
	}
	wait_letters(ops, NULL, ARRAY_LEN(letters));
	/* One delivered again. */
	ck_assert_int_lt(publish_letter(bridge, "fleet/edge-2/dead/orders", "edge-2", "GGGGGGGGGGGGGGG2", "order"), 0x80);
	ck_assert_msg(it_wait_log(c, "is kept already", 1, HARNESS_WAIT_MS), "the second delivery was not seen as one");

	/* A burst of garbage, then a real letter: once it is kept, the
	 * plugin has seen the whole burst. */
	for(int i = 0; i < GARBAGE_BURST; i++){
		client_publish_str(bridge, "fleet/junk/dead/x", "garbage", 1);
	}
	ck_assert_int_lt(publish_letter(bridge, "fleet/edge-3/dead/orders", "edge-3", "GGGGGGGGGGGGGGG5", "order"), 0x80);
	wait_letters(ops, "edge-3", 2);
	ck_assert_uint_eq((unsigned)status_total(ops, "collected"), ARRAY_LEN(letters) + 1);
	ck_assert_uint_eq((unsigned)status_total(ops, "collectedDuplicates"), 1);
	ck_assert_uint_eq((unsigned)status_total(ops, "collectedRefused"), GARBAGE_BURST);
	char *log = broker_log_since_start(c);
	size_t warned = it_count(log, "is no dead letter and is not kept");
	size_t quiet = it_count(log, "messages on plugin_opt_collect \"" COLLECT "\" refused within 60 s: the next ones "
			"are counted (collectedRefused) and not logged");
	free(log);
	ck_assert_msg(warned == 10 && quiet == 1, "%d garbage messages logged %zu warnings and %zu notes that the rest "
			"are not logged; want 10 and 1", GARBAGE_BURST, warned, quiet);
	wait_sys_value(sys, "collected", "5");
	wait_sys_value(sys, "collected_duplicates", "1");
	char burst[16];
	snprintf(burst, sizeof(burst), "%d", GARBAGE_BURST);
	wait_sys_value(sys, "collected_refused", burst);

	/* By broker: by name, each one's letters and newest letter. */
	const cJSON *e;
	cJSON *doc = ask(ops, cmd_new(DLQ_COMMAND_LIST_BROKERS), &e);
	const cJSON *data = entry_data(e);
	const cJSON *brokers = cJSON_GetObjectItemCaseSensitive(data, "brokers");
	static const struct { const char *broker, *newest; int kept; } want[] = {
		{ "edge-1", "GGGGGGGGGGGGGGG4", 2 }, { "edge-2", "GGGGGGGGGGGGGGG2", 1 }, { "edge-3", "GGGGGGGGGGGGGGG5", 2 },
	};
	ck_assert_int_eq(cJSON_GetArraySize(brokers), ARRAY_LEN(want));
	ck_assert_int_eq((int)cJSON_GetObjectItemCaseSensitive(data, "count")->valuedouble, ARRAY_LEN(want));
	ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(data, "next"));
	for(size_t i = 0; i < ARRAY_LEN(want); i++){
		const cJSON *b = cJSON_GetArrayItem(brokers, (int)i);
		expect_str_member(b, "broker", want[i].broker);
		expect_str_member(b, "newestId", want[i].newest);
		expect_str_member(b, "newestTime", "2026-12-06T23:00:00.000Z");
		ck_assert_int_eq((int)cJSON_GetObjectItemCaseSensitive(b, "kept")->valuedouble, want[i].kept);
		ck_assert_int_gt((int)cJSON_GetObjectItemCaseSensitive(b, "bytes")->valuedouble, 0);
	}
	cJSON_Delete(doc);
	struct proc *p = dlqctl_expect(0, c, "brokers");
	const char *out = proc_out(p);
	ck_assert_msg(it_count(out, "\n") == 4 && strstr(out, "BROKER") && strstr(out, "NEWEST-LETTER"), "%s", out);
	for(size_t i = 0; i < ARRAY_LEN(want); i++){
		char row[64];
		snprintf(row, sizeof(row), "%s ", want[i].broker);
		ck_assert_msg(strstr(out, row), "no row of %s:\n%s", want[i].broker, out);
	}
	p = dlqctl_expect(0, c, "list", "--broker", "edge-1");
	out = proc_out(p);
	ck_assert_msg(it_count(out, "\n") == 3 && strstr(out, "GGGGGGGGGGGGGGG1") && strstr(out, "GGGGGGGGGGGGGGG4")
			&& !strstr(out, "edge-2") && !strstr(out, "edge-3"), "%s", out);

	/* One letter deleted: its broker's count and newest follow. */
	cJSON *del = cmd_new(DLQ_COMMAND_DELETE_DEAD_LETTERS);
	cJSON *ids = cJSON_AddArrayToObject(del, "ids");
	cJSON_AddItemToArray(ids, cJSON_CreateString("GGGGGGGGGGGGGGG4"));
	cJSON_Delete(ask(ops, del, &e));
	doc = ask(ops, cmd_new(DLQ_COMMAND_LIST_BROKERS), &e);
	const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(entry_data(e), "brokers"), 0);
	expect_str_member(first, "newestId", "GGGGGGGGGGGGGGG1");
	ck_assert_int_eq((int)cJSON_GetObjectItemCaseSensitive(first, "kept")->valuedouble, 1);
	cJSON_Delete(doc);

	p = dlqctl_expect(0, c, "status");
	ck_assert_msg(strstr(proc_out(p), "collected from other brokers (plugin_opt_collect): 5; kept already: 1; "
			"refused: 200\n"), "%s", proc_out(p));

	/* resetCounters zeroes them as the others. */
	cJSON_Delete(ask(ops, cmd_new(DLQ_COMMAND_RESET_COUNTERS), &e));
	ck_assert_uint_eq((unsigned)status_total(ops, "collected"), 0);
	ck_assert_uint_eq((unsigned)status_total(ops, "collectedDuplicates"), 0);
	ck_assert_uint_eq((unsigned)status_total(ops, "collectedRefused"), 0);
	wait_sys_value(sys, "collected_refused", "0");
}
END_TEST

static Suite *fleet_suite(void)
{
	Suite *s = suite_create("fleet");
	TCase *tc = harness_tcase("fleet");
	tcase_add_test(tc, test_fleet_collects_every_letter_once);
	tcase_add_test(tc, test_a_letter_delivered_twice_is_kept_once);
	tcase_add_test(tc, test_garbage_is_refused_and_logged);
	tcase_add_test(tc, test_overlapping_collect_is_refused);
	tcase_add_test(tc, test_collecting_at_a_glance);
	tcase_add_test(tc, test_a_redrive_goes_home);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return harness_run(fleet_suite());
}
