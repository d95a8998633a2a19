/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What a control document may cost the broker (issue 11, item 3). With
 * 200,000 records kept, three documents of 1000 getStatus each, from three
 * clients at once, held off another client's CONNECT and PINGREQ for some
 * 13 s while each getStatus walked the ledger. Now status is read from
 * running totals and the status commands of one message return at most
 * DLQ_MAX_STATUS_ENTRIES policy entries. The test asserts what a client
 * sees (every reply, the entries that ran and those refused, the gauges
 * right) and prints the latencies as figures ("limits: "); it asserts no
 * time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "flood.h"
#include "harness.h"
#include "limits_common.h"
#include "raw.h"

enum { RECORDS = 200000, DOCS = 3, PER_DOC = DLQ_MAX_COMMANDS };

/* {"commands":[{"command":"getStatus"} x PER_DOC]}; the caller frees it. */
static char *status_document(void)
{
	static const char one[] = "{\"command\":\"" DLQ_COMMAND_GET_STATUS "\"}";
	char *doc = malloc(PER_DOC * sizeof(one) + 32);
	ck_assert_ptr_nonnull(doc);
	size_t o = (size_t)sprintf(doc, "{\"commands\":[");
	for(int i = 0; i < PER_DOC; i++){
		o += (size_t)sprintf(doc + o, "%s%s", i ? "," : "", one);
	}
	strcpy(doc + o, "]}");
	return doc;
}

/* One CONNECT and one PINGREQ of a fresh connection, timed (ms). */
static void probe(struct raw *r, uint64_t *connect_ms, uint64_t *ping_ms)
{
	uint64_t t0 = it_now_ms();
	raw_connect(r);
	uint64_t t1 = it_now_ms();
	ck_assert_msg(raw_ping(r, harness_deadline_ms(60000)), "no PINGRESP");
	*connect_ms = t1 - t0;
	*ping_ms = it_now_ms() - t1;
	raw_disconnect(r);
}

START_TEST(test_status_documents_do_not_stall_the_broker)
{
	struct broker *b = dlq_broker("policy bulk max_attempts=2 dead_letter=dlq/bulk", "nack_window 1h",
			"sys_interval 0s");
	struct client *ops[DOCS];
	for(int i = 0; i < DOCS; i++){
		ops[i] = client_new(b, "ops", MQTT_PROTOCOL_V5);
	}
	struct raw_options o = { .id = "prober", .protocol = MQTT_PROTOCOL_V5, .clean = true };
	struct raw *prober = raw_new(b, &o);

	/* 200,000 records of 40 bytes: about 28 MiB, inside the default bound. */
	struct flood *f = flood_new(b, "bulk");
	static char body[40];
	memset(body, 'b', sizeof(body));
	for(unsigned i = 0; i < RECORDS; i++){
		flood_publish(f, "bulk", body, (int)sizeof(body), 0);
	}
	flood_drain(f, harness_deadline_ms(240000));
	flood_free(f);
	cJSON *data = status(ops[0]);
	ck_assert_int_eq(json_num(totals(data), "records"), RECORDS);
	cJSON_Delete(data);

	uint64_t idle_connect, idle_ping;
	probe(prober, &idle_connect, &idle_ping);

	/* Three documents from three clients: the broker reads them in one
	 * loop pass. */
	char *doc = status_document();
	uint64_t t0 = it_now_ms();
	for(int i = 0; i < DOCS; i++){
		client_publish(ops[i], DLQ_CONTROL_TOPIC, doc, (int)strlen(doc), 0, NULL);
	}
	free(doc);
	uint64_t worst_connect = 0, worst_ping = 0;
	unsigned probes = 0;
	bool all = false;
	while(!all){
		uint64_t c, p;
		probe(prober, &c, &p);
		probes++;
		if(c > worst_connect) worst_connect = c;
		if(p > worst_ping) worst_ping = p;
		all = true;
		for(int i = 0; i < DOCS; i++){
			all = all && client_count(ops[i], DLQ_RESPONSE_TOPIC) >= 1;
		}
		ck_assert_msg(all || it_now_ms() - t0 < (uint64_t)harness_deadline_ms(120000), "the replies did not come");
	}
	uint64_t answered_ms = it_now_ms() - t0;
	fprintf(stderr, "limits: with %d records kept, %d documents of %d getStatus each (from %d clients at once) "
			"were answered in %llu ms; another client's CONNECT took at most %llu ms and its PINGREQ at most %llu ms "
			"over %u probes (idle: %llu and %llu ms)\n",
			RECORDS, DOCS, PER_DOC, DOCS, (unsigned long long)answered_ms, (unsigned long long)worst_connect,
			(unsigned long long)worst_ping, probes, (unsigned long long)idle_connect, (unsigned long long)idle_ping);

	/* One policy: each getStatus costs 2 entries of the 100 a message may
	 * return, so 50 ran in each document and the rest were refused. */
	size_t ran = DLQ_MAX_STATUS_ENTRIES / 2;
	for(int i = 0; i < DOCS; i++){
		cJSON *reply = expect_reply(client_msg(ops[i], DLQ_RESPONSE_TOPIC, 0), PER_DOC);
		for(size_t k = 0; k < PER_DOC; k++){
			const cJSON *e = reply_entry(reply, (int)k);
			const char *err = json_str(e, "error");
			if(k < ran){
				const cJSON *d = cJSON_GetObjectItemCaseSensitive(e, "data");
				ck_assert_msg(err == NULL && d, "entry %zu: %s", k, err ? err : "no data");
				ck_assert_int_eq(json_num(totals(d), "records"), RECORDS);
			}else{
				ck_assert_msg(err && strstr(err, "not run: the status commands of one message may return at most"),
						"entry %zu of document %d ran", k, i);
			}
		}
		cJSON_Delete(reply);
	}
	raw_free(prober);
}
END_TEST

int main(void)
{
	return harness_run(check_suite("control_cost", check_timeout(harness_tcase("control_cost"), 600),
			CHECK_TESTS(test_status_documents_do_not_stall_the_broker)));
}
