/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The broker's name (issue 39, part 1) against the real broker:
 * plugin_opt_broker_name (by default the host name) is carried by every
 * dead letter as dead-letter-broker, exactly once, whatever a publisher
 * put there; the dead-letter store shows it (listDeadLetters' summaries,
 * getDeadLetter's properties, dlqctl inspect) and selects by it (listDeadLetters'
 * "broker", dlqctl list --broker, a redrive task's "broker" through
 * dlqctl redrive --all --broker); a letter keeps the name it was made with
 * across a restart under another name (the state file saves it); a name
 * that cannot be one is refused at startup, naming the option.
 *
 * Commands go through v5 clients with a response topic of their own
 * (letters_common.c), and through the built dlqctl.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "harness.h"
#include "letters_common.h"
#include "proc.h"
#include "test_util.h"

#define NAME "plant-7"
#define OTHER_NAME "plant-8"

/* The one dead letter on dead/# that insp received as the n-th (1-based):
 * it carries dead-letter-broker exactly once, with want. */
static void expect_broker_prop(struct client *insp, size_t n, const char *want)
{
	const struct it_msg *m = client_expect(insp, "dead/#", n);
	ck_assert_str_eq(m->topic, "dead/jobs");
	ck_assert_msg(msg_user_count(m, DLQ_PROP_DEAD_LETTER_BROKER) == 1, "the dead letter carries %zu %s",
			msg_user_count(m, DLQ_PROP_DEAD_LETTER_BROKER), DLQ_PROP_DEAD_LETTER_BROKER);
	ck_assert_str_eq(msg_user(m, DLQ_PROP_DEAD_LETTER_BROKER), want);
}

/* A first listDeadLetters page of tmpl's members (NULL: none) holds count
 * letters, all that match, each of the broker want. */
static void expect_page_brokers(struct client *c, const cJSON *tmpl, int count, const char *want)
{
	struct page p = list_page(c, tmpl, 0, false, 0);
	char *t = json_text(p.letters);
	ck_assert_msg(p.count == count && p.matched == count, "expected %d letters of %s: %s", count, want, t);
	for(int i = 0; i < p.count; i++){
		expect_str_member(cJSON_GetArrayItem(p.letters, i), "broker", want);
	}
	free(t);
	cJSON_Delete(p.doc);
}

/* dlqctl inspect shows the name of the broker that made each letter: in
 * its BROKER column (every one of the count rows has it), and as "broker"
 * with --json. The letters wait in the persistent sessions insp-rows and
 * insp-json (made before them) and are consumed. */
static void expect_inspect_brokers(struct broker *b, int count, const char *want)
{
	struct proc *p = dlqctl_expect(0, b, "inspect", "-c", "-i", "insp-rows", "dead/jobs");
	const char *out = proc_out(p);
	ck_assert_msg(strstr(out, " BROKER ") != NULL, "no BROKER column:\n%s", out);
	ck_assert_msg(it_count(out, "\n") == (size_t)count + 1, "expected a header and %d rows:\n%s", count, out);
	char cell[80];
	snprintf(cell, sizeof(cell), "  %s  ", want);
	ck_assert_msg(it_count(out, cell) == (size_t)count, "not every row shows %s:\n%s", want, out);

	p = dlqctl_expect(0, b, "inspect", "-c", "-i", "insp-json", "dead/jobs", "--json");
	const char *at = proc_out(p);
	int lines = 0;
	while(*at){
		const char *end = NULL;
		cJSON *doc = cJSON_ParseWithOpts(at, &end, false);
		ck_assert_msg(doc != NULL, "not JSON: %s", at);
		expect_str_member(doc, "broker", want);
		cJSON_Delete(doc);
		lines++;
		at = end + strspn(end, "\n");
	}
	ck_assert_int_eq(lines, count);
}

/* A dead letter received by a dead/# subscriber carries the configured
 * name; a publisher's own dead-letter-broker on the original is not
 * carried (the plugin's is the only one). The store's summary and the
 * letter's properties say it too. */
START_TEST(test_dead_letter_carries_the_name)
{
	struct broker *b = STORE_BROKER(JOBS, "broker_name " NAME);
	ck_assert_msg(log_has(b, "broker name \"" NAME "\""), "the loaded line does not name the broker");
	dlqctl_expect(0, b, "inspect", "-c", "-i", "insp-rows", "dead/jobs", "--max", "0");
	dlqctl_expect(0, b, "inspect", "-c", "-i", "insp-json", "dead/jobs", "--max", "0");
	struct client *insp = ops_client(b, "inspector");
	client_subscribe(insp, "dead/#", 1);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *worker = client_subscribed(b, "worker", "jobs/#");

	char id[ID_BUF];
	make_letter(pub, worker, "jobs/x", "job-1", 5, NULL, "cannot parse", id);
	expect_broker_prop(insp, 1, NAME);

	/* A forged name on the original stays out of the dead letter. */
	mosquitto_property *props = NULL;
	ck_assert_int_eq(mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, DLQ_PROP_DEAD_LETTER_BROKER,
			"forged"), 0);
	ck_assert_int_lt(client_publish(pub, "jobs/y", "job-2", 5, 1, props), 0x80);
	mosquitto_property_free_all(&props);
	const struct it_msg *m = client_expect(worker, "jobs/#", 2);
	ck_assert_str_eq(m->topic, "jobs/y");
	client_nack(worker, dlq_id_of(m), "no");
	expect_broker_prop(insp, 2, NAME);
	clients_settle(insp);
	client_expect_exactly(insp, "dead/#", 2);

	wait_kept(insp, 2);
	expect_page_brokers(insp, NULL, 2, NAME);
	struct page p = list_page(insp, NULL, 0, false, 0);
	const cJSON *d;
	cJSON *doc = get_letter(insp, json_str(cJSON_GetArrayItem(p.letters, 0), "id"), &d);
	expect_str_member(d, "broker", NAME);
	expect_user_prop(cJSON_GetObjectItemCaseSensitive(d, "properties"), DLQ_PROP_DEAD_LETTER_BROKER, NAME);
	cJSON_Delete(doc);
	cJSON_Delete(p.doc);
	expect_inspect_brokers(b, 2, NAME);
}
END_TEST

/* Without the option the name is the host name, on the dead letter and in
 * the store. */
START_TEST(test_default_is_the_host_name)
{
	struct broker *b = STORE_BROKER(JOBS);
	struct client *insp = ops_client(b, "inspector");
	client_subscribe(insp, "dead/#", 1);
	struct client *worker = client_subscribed(b, "worker", "jobs/#");
	char id[ID_BUF];
	make_letter(worker, worker, "jobs/x", "job-1", 5, NULL, NULL, id);
	expect_broker_prop(insp, 1, it_host_name());
	wait_kept(insp, 1);
	expect_page_brokers(insp, NULL, 1, it_host_name());
}
END_TEST

/* A name that cannot be one stops the broker at startup, the log naming
 * the option, the value and why. */
START_TEST(test_bad_names_are_refused)
{
	static const struct {
		const char *value;
		const char *why;
	} cases[] = {
		{ "site/7", "'/', '+' or '#'" },
		{ "edge+", "'/', '+' or '#'" },
		{ "12345678901234567890123456789012345678901234567890123456789012345", "longer than 64 bytes" },
	};
	for(size_t i = 0; i < ARRAY_LEN(cases); i++){
		struct broker *b = broker_new("bad-name");
		broker_plugin(b);
		broker_conf(b, "plugin_opt_%s", JOBS);
		broker_conf(b, "plugin_opt_broker_name %s", cases[i].value);
		char *log = broker_expect_refusal(b);
		char want[160];
		snprintf(want, sizeof(want), "plugin_opt_broker_name \"%s\"", cases[i].value);
		ck_assert_msg(strstr(log, want) && strstr(log, cases[i].why), "%s: the log does not say why:\n%s",
				cases[i].value, log);
		free(log);
	}
}
END_TEST

/* How many letters dlqctl list --all --broker broker shows, each row
 * checked to show broker in its BROKER column (the third). */
static size_t dlqctl_rows(struct broker *b, const char *broker)
{
	struct proc *p = dlqctl_expect(0, b, "list", "--all", "--broker", broker);
	size_t rows = it_count(proc_out(p), "\n");
	ck_assert_msg(rows >= 1, "no header:\n%s", proc_out(p));
	/* Every row but the header shows the name in its BROKER column. */
	size_t shown = 0;
	const char *line = strchr(proc_out(p), '\n');
	while(line && line[1]){
		line++;
		char id[ID_BUF + 1], when[64], name[128];
		ck_assert_msg(sscanf(line, "%17s %63s %127s", id, when, name) == 3, "row: %s", line);
		ck_assert_msg(!strcmp(name, broker), "--broker %s: a row of %s:\n%s", broker, name, proc_out(p));
		shown++;
		line = strchr(line, '\n');
	}
	ck_assert_uint_eq(shown, rows - 1);
	return shown;
}

/* Letters made under the host name, the broker restarted (SIGTERM, with a
 * state file) as plant-8, one more made: the first keep the host name (the
 * state file saved it; a letter without one would read as plant-8), the
 * new one is plant-8's. listDeadLetters' "broker" and dlqctl list --broker
 * select each broker's; a redrive task of one broker's letters
 * (dlqctl redrive --all --broker) takes only those. */
START_TEST(test_survives_a_restart_and_selects)
{
	const char *host = it_host_name();
	ck_assert_msg(strcmp(host, OTHER_NAME), "the host is called " OTHER_NAME);
	struct broker *b = broker_new(__func__);
	broker_plugin(b);
	broker_conf(b, "plugin_opt_state_file %s", broker_path(b, STATE_NAME));
	broker_conf(b, "plugin_opt_%s", JOBS);
	start_store(b);
	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	struct client *worker = client_subscribed(b, "worker", "jobs/#");
	struct client *insp = ops_client(b, "inspector");
	char id[ID_BUF];
	make_letter(pub, worker, "jobs/a", "a", 1, NULL, "r1", id);
	make_letter(pub, worker, "jobs/b", "b", 1, NULL, "r2", id);
	wait_kept(insp, 2);
	client_free(pub);
	client_free(worker);
	client_free(insp);

	broker_shutdown(b);
	broker_conf(b, "plugin_opt_broker_name " OTHER_NAME);
	broker_start(b);
	ck_assert_msg(!log_has(b, "damage"), "the plugin found damage in its state file");
	pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	worker = client_new(b, "worker", MQTT_PROTOCOL_V5);
	insp = ops_client(b, "inspector");
	client_subscribe(insp, "dead/#", 1);
	client_subscribe(worker, "jobs/#", 1);
	make_letter(pub, worker, "jobs/c", "c", 1, NULL, "r3", id);
	expect_broker_prop(insp, 1, OTHER_NAME);
	wait_kept(insp, 3);

	cJSON *t = tmpl_str("broker", host);
	expect_page_brokers(insp, t, 2, host);
	cJSON_Delete(t);
	t = tmpl_str("broker", OTHER_NAME);
	expect_page_brokers(insp, t, 1, OTHER_NAME);
	cJSON_Delete(t);
	t = tmpl_str("broker", "nobody");
	expect_page_brokers(insp, t, 0, "nobody");
	cJSON_Delete(t);
	/* A broker filter that is not a string is refused by name. */
	const cJSON *e;
	cJSON *cmd = cmd_new(DLQ_COMMAND_LIST_DEAD_LETTERS);
	cJSON_AddNumberToObject(cmd, "broker", 7);
	cJSON *doc = ask(insp, cmd, &e);
	entry_error(e, "\"broker\" must be a string", true);
	cJSON_Delete(doc);
	/* One no broker can have is refused, saying why (a task saved with it
	 * could not be read back). */
	cmd = cmd_new(DLQ_COMMAND_START_REDRIVE_TASK);
	cJSON_AddStringToObject(cmd, "broker", "a/b");
	doc = ask(insp, cmd, &e);
	entry_error(e, "\"broker\" \"a/b\" is not a broker's name: it holds '/'", false);
	cJSON_Delete(doc);
	ck_assert_msg(status_num(insp, NULL, "keptDeadLetters") == 3, "a refused task moved letters");

	ck_assert_uint_eq(dlqctl_rows(b, host), 2);
	ck_assert_uint_eq(dlqctl_rows(b, OTHER_NAME), 1);
	ck_assert_uint_eq(dlqctl_rows(b, "nobody"), 0);

	/* A redrive task of plant-8's letters moves that one alone. */
	struct client *moved = client_subscribed(b, "moved", "moved/#");
	dlqctl_expect(0, b, "redrive", "--all", "--broker", OTHER_NAME, "--to", "moved/x");
	const struct it_msg *m = client_expect(moved, "moved/#", 1);
	ck_assert_str_eq(m->payload, "c");
	wait_kept(insp, 2);
	ck_assert_uint_eq(dlqctl_rows(b, host), 2);
	ck_assert_uint_eq(dlqctl_rows(b, OTHER_NAME), 0);
	clients_settle(moved);
	client_expect_exactly(moved, "moved/#", 1);
}
END_TEST

int main(void)
{
	return harness_run(check_suite("broker_name", harness_tcase("broker name"),
			CHECK_TESTS(test_dead_letter_carries_the_name, test_default_is_the_host_name, test_bad_names_are_refused,
			test_survives_a_restart_and_selects)));
}
