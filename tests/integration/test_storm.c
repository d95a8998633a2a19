/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The broker killed (SIGKILL) in the middle of a NACK storm and started
 * again (issue 7): with plugin_opt_state_save_on_change true, every NACK
 * the broker acknowledged before the kill yields its retry copy or dead
 * letter, before the kill or after the restart; none is lost, and
 * duplicates (a successor made twice) are counted and printed, not failed.
 *
 * The storm: a publisher sends messages to a policy whose retry copies go
 * back to the NACKing subscriber after 1 s (so that some are held back
 * when the broker dies) and to one whose copies go at once to a fixed retry
 * topic; one subscriber with a persistent session NACKs every delivery it
 * gets (originals and copies) from libmosquitto's network thread, without
 * waiting, and notes which NACKs the broker acknowledged (PUBACK); the
 * third NACK of a chain makes a dead letter, which an inspector with a
 * persistent session receives. When enough NACKs were acknowledged, the
 * broker gets SIGKILL with NACKs still in flight.
 *
 * A retry copy for one subscriber, or a dead letter, can only reach a
 * session the restarted broker knows: the broker saves its sessions and
 * subscriptions in its own persistence file, which a SIGKILL leaves as the
 * last autosave. So the broker autosaves every second, and the storm
 * starts after a save that holds the subscriptions (docs/durable-state.md says so for
 * operators). The successor of a NACK of delivery n of a chain is the copy
 * with that origin-id and retry-count n, or, for n = max_attempts, the dead
 * letter with retry-count n.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_suite.h"
#include "harness.h"
#include "proc.h"

#define STORMER "stormer"
#define INSPECTOR "inspector"
#define EXPIRY_S 600
#define MAX_ATTEMPTS 3
/* Published at most; the broker is killed once KILL_AFTER NACKs were
 * acknowledged. */
#define MESSAGES 400
#define KILL_AFTER 150
#define MAX_NACKS 4096

/* One NACK: the chain (its first dlq-id) and the delivery it NACKed. */
struct nack {
	char origin[DLQ_ID_LEN + 1];
	unsigned attempt;
	int mid;
};

/* A subscriber that NACKs every delivery from its network thread. */
struct stormer {
	struct mosquitto *mosq;
	pthread_mutex_t lock;
	bool nacking;
	struct nack pending[MAX_NACKS];   /* sent, not yet acknowledged */
	size_t npending;
	struct nack acked[MAX_NACKS];     /* acknowledged by the broker */
	size_t nacked;
	struct nack copies[MAX_NACKS];    /* retry copies received: origin-id, retry-count */
	size_t ncopies;
	unsigned refused;                 /* NACKs the broker refused (PUBACK >= 0x80) */
};

static void storm_on_message(struct mosquitto *mosq, void *obj, const struct mosquitto_message *mm,
		const mosquitto_property *props)
{
	struct stormer *st = obj;
	char id[64], rc[16], origin[64];
	if(strncmp(mm->topic, "storm/", 6)) return; /* a reply */
	const char *dlq_id = props_user(props, DLQ_PROP_ID, id, sizeof(id));
	const char *count = props_user(props, DLQ_PROP_RETRY_COUNT, rc, sizeof(rc));
	const char *chain = count ? props_user(props, DLQ_PROP_ORIGIN_ID, origin, sizeof(origin)) : dlq_id;
	if(dlq_id == NULL || chain == NULL || strlen(dlq_id) != DLQ_ID_LEN || strlen(chain) != DLQ_ID_LEN) return;
	unsigned attempt = count ? (unsigned)strtoul(count, NULL, 10) + 1 : 1;

	pthread_mutex_lock(&st->lock);
	if(count && st->ncopies < MAX_NACKS){
		struct nack *c = &st->copies[st->ncopies++];
		snprintf(c->origin, sizeof(c->origin), "%s", chain);
		c->attempt = attempt - 1;
	}
	if(st->nacking && st->npending < MAX_NACKS){
		struct nack *n = &st->pending[st->npending];
		if(mosquitto_publish_v5(mosq, &n->mid, DLQ_NACK_TOPIC, DLQ_ID_LEN, dlq_id, 1, false, NULL) == MOSQ_ERR_SUCCESS){
			snprintf(n->origin, sizeof(n->origin), "%s", chain);
			n->attempt = attempt;
			st->npending++;
		}
	}
	pthread_mutex_unlock(&st->lock);
}

static void storm_on_publish(struct mosquitto *mosq, void *obj, int mid, int reason, const mosquitto_property *props)
{
	struct stormer *st = obj;
	(void)mosq;
	(void)props;
	pthread_mutex_lock(&st->lock);
	for(size_t i = 0; i < st->npending; i++){
		if(st->pending[i].mid != mid) continue;
		if(reason >= 0x80){
			st->refused++;
		}else if(st->nacked < MAX_NACKS){
			st->acked[st->nacked++] = st->pending[i];
		}
		st->pending[i] = st->pending[--st->npending];
		break;
	}
	pthread_mutex_unlock(&st->lock);
}

static void storm_on_subscribe(struct mosquitto *mosq, void *obj, int mid, int count, const int *granted,
		const mosquitto_property *props)
{
	(void)mosq;
	(void)mid;
	(void)props;
	struct stormer *st = obj;
	pthread_mutex_lock(&st->lock);
	st->nacking = count == 1 && granted[0] == 1;
	pthread_mutex_unlock(&st->lock);
}

/* Connects the stormer (persistent session) and subscribes it to storm/#;
 * NACKing starts with the SUBACK. */
static void stormer_start(struct stormer *st, struct broker *b)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_init(&st->lock, NULL);
	st->mosq = mosquitto_new(STORMER, false, st);
	ck_assert_ptr_nonnull(st->mosq);
	mosquitto_int_option(st->mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
	mosquitto_message_v5_callback_set(st->mosq, storm_on_message);
	mosquitto_publish_v5_callback_set(st->mosq, storm_on_publish);
	mosquitto_subscribe_v5_callback_set(st->mosq, storm_on_subscribe);
	mosquitto_property *props = NULL;
	ck_assert_int_eq(mosquitto_property_add_int32(&props, MQTT_PROP_SESSION_EXPIRY_INTERVAL, EXPIRY_S), 0);
	ck_assert_int_eq(mosquitto_connect_bind_v5(st->mosq, broker_socket(b), 0, 60, NULL, props), 0);
	mosquitto_property_free_all(&props);
	ck_assert_int_eq(mosquitto_loop_start(st->mosq), 0);
	ck_assert_int_eq(mosquitto_subscribe_v5(st->mosq, NULL, "storm/#", 1, 0, NULL), 0);
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	for(;;){
		pthread_mutex_lock(&st->lock);
		bool on = st->nacking;
		pthread_mutex_unlock(&st->lock);
		if(on) break;
		ck_assert_msg(it_now_ms() < deadline, "the stormer did not subscribe");
		it_sleep_ms(10);
	}
}

static size_t stormer_acked(struct stormer *st)
{
	pthread_mutex_lock(&st->lock);
	size_t n = st->nacked;
	pthread_mutex_unlock(&st->lock);
	return n;
}

static void stormer_stop(struct stormer *st)
{
	mosquitto_loop_stop(st->mosq, true);
	mosquitto_destroy(st->mosq);
	st->mosq = NULL;
}

/* Dead letters the inspector received before the kill: origin-id and
 * retry-count. */
struct letters {
	struct nack v[MAX_NACKS];
	size_t n;
};

static void keep_letters(struct letters *l, struct client *insp)
{
	l->n = 0;
	for(size_t i = 0; i < client_count(insp, "dlq/#") && l->n < MAX_NACKS; i++){
		const struct it_msg *m = client_msg(insp, "dlq/#", i);
		const char *o = msg_user(m, DLQ_PROP_ORIGIN_ID), *c = msg_user(m, DLQ_PROP_RETRY_COUNT);
		if(o == NULL || c == NULL) continue;
		snprintf(l->v[l->n].origin, sizeof(l->v[l->n].origin), "%s", o);
		l->v[l->n].attempt = (unsigned)strtoul(c, NULL, 10);
		l->n++;
	}
}

/* How many times a successor of n was received: before the kill, copies
 * the stormer got and dead letters the inspector got (before); after the
 * restart, copies obs got and dead letters insp got (counted in *after
 * too). */
static unsigned successors(const struct stormer *st, const struct nack *n, const struct letters *before,
		struct client *obs, struct client *insp, unsigned *after)
{
	char count[16];
	unsigned found = 0;
	*after = 0;
	snprintf(count, sizeof(count), "%u", n->attempt);
	if(n->attempt < MAX_ATTEMPTS){
		for(size_t i = 0; i < st->ncopies; i++){
			found += !strcmp(st->copies[i].origin, n->origin) && st->copies[i].attempt == n->attempt;
		}
		for(size_t i = 0; i < client_count(obs, "storm/#"); i++){
			const struct it_msg *m = client_msg(obs, "storm/#", i);
			const char *o = msg_user(m, DLQ_PROP_ORIGIN_ID), *c = msg_user(m, DLQ_PROP_RETRY_COUNT);
			if(o && c && !strcmp(o, n->origin) && !strcmp(c, count)){
				found++;
				(*after)++;
			}
		}
		return found;
	}
	for(size_t i = 0; i < before->n; i++){
		found += !strcmp(before->v[i].origin, n->origin) && before->v[i].attempt == n->attempt;
	}
	for(size_t i = 0; i < client_count(insp, "dlq/#"); i++){
		const struct it_msg *m = client_msg(insp, "dlq/#", i);
		const char *o = msg_user(m, DLQ_PROP_ORIGIN_ID), *c = msg_user(m, DLQ_PROP_RETRY_COUNT);
		if(o && c && !strcmp(o, n->origin) && !strcmp(c, count)){
			found++;
			(*after)++;
		}
	}
	return found;
}

START_TEST(test_sigkill_mid_nack_storm)
{
	struct broker *b = broker_new(__func__);
	broker_conf(b, "persistence true");
	broker_conf(b, "persistence_location %s", broker_path(b, ""));
	broker_conf(b, "autosave_interval 1");
	broker_plugin(b);
	broker_conf(b, "plugin_opt_state_file %s", broker_path(b, "dlq.state"));
	broker_conf(b, "plugin_opt_state_save_on_change true");
	broker_conf(b, "plugin_opt_v5_sessions_persist true");
	broker_conf(b, "plugin_opt_sys_interval 0s");
	broker_conf(b, "plugin_opt_policy storm/d/# max_attempts=%d dead_letter=dlq/storm retry_delay=1s", MAX_ATTEMPTS);
	broker_conf(b, "plugin_opt_policy storm/f/# max_attempts=%d dead_letter=dlq/storm retry_to=storm/retry",
			MAX_ATTEMPTS);
	broker_start(b);

	struct client *insp = client_new_session(b, INSPECTOR, MQTT_PROTOCOL_V5, EXPIRY_S);
	client_subscribe(insp, "dlq/#", 1);
	static struct stormer st;
	stormer_start(&st, b);
	/* The broker's own save of these sessions and subscriptions: what a
	 * SIGKILL leaves it. */
	char *saved_log = broker_log(b);
	size_t saves = it_count(saved_log, "Saving in-memory database");
	free(saved_log);
	ck_assert_msg(it_wait_log(b, "Saving in-memory database", saves + 1, HARNESS_WAIT_MS),
			"the broker did not autosave");

	struct client *pub = client_new(b, "pub", MQTT_PROTOCOL_V5);
	unsigned published = 0;
	while(published < MESSAGES && stormer_acked(&st) < KILL_AFTER){
		char payload[32];
		snprintf(payload, sizeof(payload), "m%u", published);
		client_publish_str(pub, published % 2 ? "storm/f/x" : "storm/d/x", payload, 1);
		published++;
	}
	/* A slow broker (a sanitizer build) may still be answering NACKs of
	 * what was published: wait for them rather than publish more. */
	uint64_t acked_by = it_now_ms() + HARNESS_WAIT_MS;
	while(stormer_acked(&st) < KILL_AFTER && it_now_ms() < acked_by){
		it_sleep_ms(10);
	}
	ck_assert_msg(stormer_acked(&st) >= KILL_AFTER, "only %zu NACKs acknowledged after %u messages",
			stormer_acked(&st), published);
	broker_kill(b);
	pthread_mutex_lock(&st.lock);
	st.nacking = false;
	size_t acked = st.nacked, in_flight = st.npending;
	pthread_mutex_unlock(&st.lock);
	stormer_stop(&st);
	client_free(pub);
	/* Before the restart: the old clients would connect to it, and take
	 * the sessions over from the new ones. */
	static struct letters before;
	keep_letters(&before, insp);
	client_free(insp);
	fprintf(stderr, "storm: %u messages published, %zu NACKs acknowledged and %zu in flight at the SIGKILL, "
			"%zu retry copies and %zu dead letters received before it\n", published, acked, in_flight,
			st.ncopies, before.n);

	broker_start(b);
	char *log = broker_log_since_start(b);
	fprintf(stderr, "---- plugin log at the restart ----\n");
	for(char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")){
		if(strstr(line, "dlq: ")) fprintf(stderr, "%s\n", line);
	}
	free(log);
	struct client *obs = client_new_session(b, STORMER, MQTT_PROTOCOL_V5, EXPIRY_S);
	insp = client_new_session(b, INSPECTOR, MQTT_PROTOCOL_V5, EXPIRY_S);
	ck_assert_msg(client_session_present(obs) && client_session_present(insp),
			"the broker did not restore the sessions from its autosave");

	/* Every acknowledged NACK's successor, within the delays and then some. */
	uint64_t deadline = it_now_ms() + HARNESS_WAIT_MS;
	size_t missing;
	for(;;){
		missing = 0;
		for(size_t i = 0; i < acked; i++){
			unsigned after;
			missing += successors(&st, &st.acked[i], &before, obs, insp, &after) == 0;
		}
		if(missing == 0 || it_now_ms() > deadline) break;
		it_sleep_ms(100);
	}
	clients_settle(obs, insp);
	unsigned dups = 0, came_after = 0, total = 0;
	for(size_t i = 0; i < acked; i++){
		unsigned after, n = successors(&st, &st.acked[i], &before, obs, insp, &after);
		total += n;
		dups += n > 1 ? n - 1 : 0;
		came_after += after > 0;
		if(n == 0){
			fprintf(stderr, "lost: the NACK of delivery %u of chain %s yielded nothing\n", st.acked[i].attempt,
					st.acked[i].origin);
		}
	}
	fprintf(stderr, "storm: of %zu acknowledged NACKs, %zu yielded nothing; %u successors in all, %u of the NACKs "
			"had theirs after the restart; %u duplicates; %u NACKs refused\n", acked, missing, total, came_after,
			dups, st.refused);
	ck_assert_msg(missing == 0, "%zu acknowledged NACKs yielded neither a retry copy nor a dead letter", missing);
	ck_assert_msg(came_after > 0, "no successor came after the restart: the SIGKILL tested nothing");
}
END_TEST

int main(void)
{
	return harness_run(check_suite("storm", check_timeout(harness_tcase("storm"), 180),
			CHECK_TESTS(test_sigkill_mid_nack_storm)));
}
