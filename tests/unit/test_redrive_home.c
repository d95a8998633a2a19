/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Unit tests of a redrive home (issue 39, part 3) against the fake broker
 * port: on a centre with plugin_opt_redrive_home, a redrive of another
 * broker's collected letter without a topic publishes it as kept on its
 * home topic and lets it go, saying where; with a topic, or of the
 * centre's own letter, or without the option, it is a redrive here as
 * before. On an edge with plugin_opt_redrive_from, a request from the
 * configured client that is a dead letter of this broker is published to
 * its origin topic as a new chain, and leaves the edge's store when kept
 * there; one from another client, one of another broker and one that is
 * no dead letter are refused with a warning, and nothing is published.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "engine/dlq.h"
#include "engine/engine.h"
#include "engine/letter_store.h"
#include "engine_calls.h"
#include "fake_port.h"
#include "model/envelope.h"
#include "model/letters.h"
#include "mosquitto_dlq.h"
#include "test_util.h"
#include "util/headers.h"
#include "util/id.h"

static struct dlq d;
static bool d_live;

static void stop(void)
{
	engine_stop(&d, &d_live);
	fake_reset();
}

/* A centre named "centre" collecting fleet/+/dead/#, sending letters home
 * on fleet/%b/redrive when home. */
static void centre(bool home)
{
	struct dlq_option opts[] = {
		{"broker_name", "centre"},
		{"policy", "jobs/# max_attempts=1 dead_letter=dead/jobs"},
		{"collect", "fleet/+/dead/#"},
		{"redrive_home", "fleet/%b/redrive"},
	};
	fake_reset();
	engine_start(&d, &d_live, opts, ARRAY_LEN(opts) - (home ? 0 : 1), ENGINE_NO_SYS);
}

/* Edge "edge-2": orders/# dead-letters at the first NACK; requests on
 * redrive from local.edge-2. */
static void edge(void)
{
	struct dlq_option opts[] = {
		{"broker_name", "edge-2"},
		{"policy", "orders/# max_attempts=1 dead_letter=dead/orders"},
		{"redrive_from", "redrive local.edge-2"},
	};
	fake_reset();
	engine_start(&d, &d_live, opts, ARRAY_LEN(opts), ENGINE_NO_SYS);
}

/* Delivers e's message on topic from client: collected or a request,
 * as the topic is. */
static void deliver(const char *topic, const char *client, const struct dlq_envelope *e)
{
	struct dlq_headers h = {0};
	ck_assert_int_eq(envelope__headers(e, &h), 0);
	struct dlq_collected_msg m = {
		.topic = topic, .client = client, .payload = e->payload, .payload_len = e->payload_len,
		.qos = 1, .headers = h.data, .headers_len = h.len,
	};
	if(dlq__collects(&d, topic)) dlq__collect(&d, &m);
	else if(dlq__redrive_requested(&d, topic)) dlq__redrive_request(&d, &m);
	else ck_abort_msg("%s is neither collected nor a request topic", topic);
	headers__free(&h);
}

/* Collects edge-2's letter AAAAAAAAAAAAAAA2 at the centre. */
static struct dlq_letter *collect_one(void)
{
	struct dlq_envelope *e = engine_edge_letter("edge-2", "AAAAAAAAAAAAAAA2", "odd", "one");
	deliver("fleet/edge-2/dead/orders", "local-bridge", e);
	envelope__free(e);
	struct dlq_letter *l = engine_letter(&d, "AAAAAAAAAAAAAAA2");
	ck_assert_ptr_nonnull(l);
	return l;
}

START_TEST(another_brokers_letter_goes_home)
{
	centre(true);
	struct dlq_letter *l = collect_one();
	char home[DLQ_HOME_TOPIC_MAX];
	ck_assert_str_eq(dlq__redrive_target(&d, l, NULL, home), "fleet/edge-2/redrive");
	ck_assert_str_eq(dlq__redrive_target(&d, l, "elsewhere", home), "elsewhere");
	size_t before = fake.publish_count;
	struct dlq_redrive_result res;
	ck_assert_int_eq(dlq__redrive_letter(&d, l, NULL, "ops", false, &res), 0);
	ck_assert(res.home && !res.tracked);
	ck_assert_str_eq(res.broker, "edge-2");
	ck_assert_str_eq(res.topic, "fleet/edge-2/redrive");
	ck_assert_ptr_null(engine_letter(&d, "AAAAAAAAAAAAAAA2"));
	ck_assert_uint_eq(fake.publish_count, before + 1);
	const struct fake_publish *p = &fake.publishes[before];
	ck_assert_ptr_null(p->client);
	ck_assert_str_eq(p->topic, "fleet/edge-2/redrive");
	ck_assert_uint_eq(p->qos, 1);
	ck_assert_mem_eq(p->payload, "one", 3);
	/* The letter as its maker wrote it: its name and id, its origin. */
	ck_assert_str_eq(fake_header_value(p, DLQ_PROP_DEAD_LETTER_BROKER), "edge-2");
	ck_assert_str_eq(fake_header_value(p, DLQ_PROP_DEAD_LETTER_ID), "AAAAAAAAAAAAAAA2");
	ck_assert_str_eq(fake_header_value(p, DLQ_PROP_ORIGIN_TOPIC), "orders/1");
	ck_assert_ptr_null(fake_header_value(p, DLQ_PROP_ID));
	ck_assert(fake_logged("dead letter AAAAAAAAAAAAAAA2 sent home to \"edge-2\" on \"fleet/edge-2/redrive\" by \"ops\""));
	stop();
}
END_TEST

/* With a topic, of the centre's own letter, or without the option: a
 * redrive here, as before. */
START_TEST(a_topic_or_an_own_letter_is_redriven_here)
{
	centre(true);
	struct dlq_letter *l = collect_one();
	struct dlq_redrive_result res;
	ck_assert_int_eq(dlq__redrive_letter(&d, l, "jobs/again", "ops", false, &res), 0);
	ck_assert(!res.home && res.tracked);
	ck_assert_str_eq(fake.publishes[fake.publish_count - 1].topic, "jobs/again");
	engine_dead_letter(&d, "jobs/1", "mine");
	l = d.letters.newest;
	char home[DLQ_HOME_TOPIC_MAX];
	ck_assert_str_eq(dlq__redrive_target(&d, l, NULL, home), "jobs/1");
	ck_assert_int_eq(dlq__redrive_letter(&d, l, NULL, "ops", false, &res), 0);
	ck_assert(!res.home && res.tracked);
	ck_assert_str_eq(fake.publishes[fake.publish_count - 1].topic, "jobs/1");
	stop();

	centre(false);
	l = collect_one();
	ck_assert_int_eq(dlq__redrive_letter(&d, l, NULL, "ops", false, &res), 0);
	ck_assert(!res.home);
	ck_assert_str_eq(fake.publishes[fake.publish_count - 1].topic, "orders/1");
	stop();
}
END_TEST

/* A request from the bridge for a letter the edge still keeps: published
 * to its origin topic as a new chain, and let go of here. */
START_TEST(a_request_from_the_bridge_is_redriven_home)
{
	edge();
	engine_dead_letter(&d, "orders/1", "one");
	ck_assert_uint_eq(d.letters.count, 1);
	struct dlq_envelope *kept = envelope__copy(d.letters.newest->env);
	ck_assert_ptr_nonnull(kept);
	size_t before = fake.publish_count;
	deliver("redrive", "local.edge-2", kept);
	ck_assert_uint_eq(d.letters.count, 0);
	ck_assert_uint_eq(fake.publish_count, before + 1);
	const struct fake_publish *p = &fake.publishes[before];
	ck_assert_str_eq(p->topic, "orders/1");
	ck_assert_mem_eq(p->payload, "one", 3);
	ck_assert_str_eq(fake_header_value(p, DLQ_PROP_RETRY_COUNT), "0");
	ck_assert_ptr_nonnull(fake_header_value(p, DLQ_PROP_ID));
	ck_assert_ptr_null(fake_header_value(p, DLQ_PROP_DEAD_LETTER_ID));
	ck_assert(fake_logged("redriven to \"orders/1\" by \"local.edge-2\""));
	envelope__free(kept);

	/* One no longer kept here (deleted, or dropped for the bound) is
	 * published all the same, from the request. */
	struct dlq_envelope *e = engine_edge_letter("edge-2", "BBBBBBBBBBBBBBB2", "odd", "one");
	deliver("redrive", "local.edge-2", e);
	envelope__free(e);
	ck_assert_uint_eq(fake.publish_count, before + 2);
	ck_assert_str_eq(fake.publishes[before + 1].topic, "orders/1");
	ck_assert_ptr_nonnull(fake_header_value(&fake.publishes[before + 1], DLQ_PROP_ID));
	stop();
}
END_TEST

/* From another client, of another broker, or no dead letter: refused with
 * a warning naming topic, sender and why; nothing published, nothing let
 * go of. */
START_TEST(other_requests_are_refused)
{
	edge();
	engine_dead_letter(&d, "orders/1", "one");
	struct dlq_envelope *kept = envelope__copy(d.letters.newest->env);
	ck_assert_ptr_nonnull(kept);
	size_t before = fake.publish_count;
	deliver("redrive", "forger", kept);
	ck_assert(fake_logged("the redrive request on \"redrive\" from \"forger\" is refused (plugin_opt_redrive_from): "
			"it does not come from \"local.edge-2\""));
	struct dlq_envelope *other = engine_edge_letter("edge-1", "CCCCCCCCCCCCCCC1", "odd", "one");
	deliver("redrive", "local.edge-2", other);
	ck_assert(fake_logged("from \"local.edge-2\" is refused (plugin_opt_redrive_from): the dead letter "
			"CCCCCCCCCCCCCCC1 of broker \"edge-1\", not of this broker \"edge-2\""));
	struct dlq_collected_msg junk = { .topic = "redrive", .client = "local.edge-2", .payload = "x", .payload_len = 1 };
	dlq__redrive_request(&d, &junk);
	ck_assert(fake_logged("from \"local.edge-2\" is refused (plugin_opt_redrive_from): no dead letter: user property "
			"dead-letter-id missing"));
	ck_assert_uint_eq(fake.publish_count, before);
	ck_assert_uint_eq(d.letters.count, 1);
	envelope__free(kept);
	envelope__free(other);
	stop();
}
END_TEST

int main(void)
{
	return check_run(check_suite("redrive_home", tcase_create("core"), CHECK_TESTS(
			another_brokers_letter_goes_home, a_topic_or_an_own_letter_is_redriven_here,
			a_request_from_the_bridge_is_redriven_home, other_requests_are_refused)));
}
