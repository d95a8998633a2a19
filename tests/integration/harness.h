/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The integration-test harness: starts the real mosquitto binary with the
 * built plugin from a generated configuration in a private directory, stops
 * it by PID, and drives it with real libmosquitto MQTT v5 and v3.1.1 clients
 * that record every message they receive. Every test runs in its own forked
 * process (Check's fork mode); a broker's directory is removed when its test
 * passes and printed, log included, by harness_finish() when it did not.
 *
 * Environment: DLQ_PLUGIN, the built plugin (meson sets it); MOSQUITTO_BIN,
 * the broker (default /usr/sbin/mosquitto). MOSQUITTO_BIN may name a wrapper
 * that execs the broker under valgrind with --error-exitcode: a broker that
 * does not exit with status 0 on SIGTERM fails its test.
 */
#ifndef DLQ_IT_HARNESS_H
#define DLQ_IT_HARNESS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <check.h>
#include <cjson/cJSON.h>
#include <mosquitto.h>
#include <mqtt_protocol.h>

#include "mosquitto_dlq.h"

/* How long anything that should happen may take, and how long to wait for
 * things that should not happen once the broker provably handled what came
 * before (see clients_settle). HARNESS_WAIT_MS is a deadline, never a
 * measurement: every wait returns as soon as its condition holds, so the
 * deadline only decides how long a test that fails takes to say so. It is
 * 30 s, hundreds of times what any step takes (a round trip through the
 * broker takes milliseconds, a broker's start well under a second), so that
 * a busy two-core machine running another suite at the same time slows the
 * tests but does not fail them; times the environment's DLQ_TEST_SLOWDOWN
 * (a whole factor from 1 to 20, default 1), which the runs that slow
 * everything down set (scripts/sanitize.sh, scripts/valgrind.sh, brokers in
 * a chroot). A longer deadline weakens no assertion. The settling time is
 * not scaled, since waiting longer for what must not come only makes a test
 * slower: it is a quiet period after sync markers proved that the broker
 * handled everything before them, so a slow machine cannot make it fail a
 * correct plugin; it could at worst let work that comes later than 500 ms
 * go unseen, which a fast machine then catches. */
#define HARNESS_WAIT_MS harness_wait_ms()
#define HARNESS_SETTLE_MS 500
/* Check's per-test timeout, in seconds: above a test's own waits (a failing
 * wait should report itself rather than be cut short), and far above the
 * few seconds a test takes, so that only a hung test meets it. Suites whose
 * tests take longer set their own, as large a multiple. */
#define HARNESS_TEST_TIMEOUT 120

/* HARNESS_WAIT_MS; and any other deadline of ms milliseconds, scaled the
 * same way. */
int harness_wait_ms(void);
int harness_deadline_ms(int ms);

/* ---- the test program ---- */

/* Creates the run directory. Call before srunner_run_all. Tests must run in
 * Check's fork mode (its default): a failed test's brokers and clients then
 * die with its process and leave their logs for harness_finish. CK_FORK=no
 * is only for running one test under a debugger. */
void harness_init(SRunner *sr);

/* After srunner_run_all: prints the configuration and log of every broker
 * whose test did not pass, kills what is left of it and removes the run
 * directory. Returns how many such brokers there were. */
int harness_finish(void);

/* A suite's whole main(): runs s with the harness (harness_init, every
 * test, harness_finish), frees it, and returns the exit status. */
int harness_run(Suite *s);

/* The exit status of a suite that cannot run on this broker: meson test
 * reports it as SKIP, neither passed nor failed. */
#define HARNESS_EXIT_SKIP 77

/* For a suite whose every case is Mosquitto 2.1's: true when the broker the
 * tests run is 2.1 or later (BROKER_IS_21). Otherwise prints one line with
 * the suite's name, the broker's version and why, and main() should return
 * HARNESS_EXIT_SKIP before running anything. */
bool harness_needs_21(const char *suite, const char *why);

/* A TCase with the harness's checked fixture and timeout. */
TCase *harness_tcase(const char *name);

/* ---- brokers ---- */

struct broker;

/* A broker not yet started: a private directory and the basic configuration
 * (unix socket listener, anonymous access, log to a file, user root when
 * running as root). label names it in failure output. */
struct broker *broker_new(const char *label);

/* Appends one line to the configuration. */
void broker_conf(struct broker *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends a bridge, connection "<name>-<to>", to 127.0.0.1:port with
 * remote_clientid name, MQTT v5, a lasting session and no notifications;
 * its topic lines (and any other of its settings) are the caller's, after
 * it. */
void broker_bridge(struct broker *b, const char *name, const char *to, int port);

/* Appends "plugin $DLQ_PLUGIN"; fails the test if DLQ_PLUGIN is unset. */
void broker_plugin(struct broker *b);

/* Writes a file into the broker's directory and returns its path (owned by
 * the broker). */
const char *broker_file(struct broker *b, const char *name, const char *content);

/* A path inside the broker's directory (owned by the broker); the file need
 * not exist. */
const char *broker_path(struct broker *b, const char *name);

/* Starts the broker and waits for its "running" line; fails the test if it
 * exits or is not ready within HARNESS_WAIT_MS. */
#define broker_start(b) broker_start_at(__FILE__, __LINE__, (b))
void broker_start_at(const char *file, int line, struct broker *b);

/* Starts the broker expecting it to refuse its configuration: fails the
 * test unless it exits with a non-zero status within HARNESS_WAIT_MS without
 * ever reporting "running". Returns its log (stdout, stderr and log file),
 * which the caller frees. */
#define broker_expect_refusal(b) broker_expect_refusal_at(__FILE__, __LINE__, (b))
char *broker_expect_refusal_at(const char *file, int line, struct broker *b);

/* The whole log so far; the caller frees it. */
char *broker_log(const struct broker *b);

/* The log written since the broker was last started (a broker started again
 * after broker_shutdown or broker_kill goes on in the same log file); the
 * caller frees it. */
char *broker_log_since_start(const struct broker *b);

/* Sets an environment variable for the broker's next start (value NULL:
 * removes it from the environment the broker gets). Without any, the
 * broker inherits the test's environment unchanged. */
void broker_setenv(struct broker *b, const char *name, const char *value);

/* The version of the broker the tests run (MOSQUITTO_BIN -h), as
 * major * 1000000 + minor * 1000 + revision: 2000011, 2001002. Some
 * behaviours are the broker line's, and a test says which it expects. */
int broker_version(void);
#define BROKER_IS_21() (broker_version() >= 2001000)
/* The version b says it is in its log since its last start ("mosquitto
 * version X.Y.Z starting"), as broker_version() gives it, or 0 if it has
 * said none: a broker run with broker_use_bin may be of another line. */
int broker_running_version(const struct broker *b);
/* User properties the plugin adds to each send of a tracked message on its
 * way to an MQTT v5 subscriber, its first to that subscriber excepted:
 * delivery-count on 2.1 (with plugin_opt_delivery_count on, the default),
 * none on 2.0. A first delivery carries none (absent means 1). */
#define IT_PER_SEND_PROPS (BROKER_IS_21() ? 1u : 0u)

/* Makes the generated configuration say "per_listener_settings true"
 * (the broker only accepts it before any security setting, so it replaces
 * the harness's own first line). */
void broker_per_listener_settings(struct broker *b, bool on);

/* Runs b with the broker binary bin (NULL or "": MOSQUITTO_BIN's, the
 * suite's), from its next start on: a fleet whose centre runs another
 * broker line than its edges. */
void broker_use_bin(struct broker *b, const char *bin);

/* Stops a running broker with SIGTERM and waits for it to exit; fails the
 * test unless it exits with status 0 within HARNESS_WAIT_MS. */
#define broker_shutdown(b) broker_shutdown_at(__FILE__, __LINE__, (b))
void broker_shutdown_at(const char *file, int line, struct broker *b);

/* Kills a running broker with SIGKILL (it saves nothing) and reaps it. */
#define broker_kill(b) broker_kill_at(__FILE__, __LINE__, (b))
void broker_kill_at(const char *file, int line, struct broker *b);

/* A broker ended by broker_shutdown or broker_kill may be started again
 * with broker_start: same directory, configuration (regenerated from the
 * same lines) and socket; clients must connect anew. */

/* The path of the broker's unix socket. */
const char *broker_socket(const struct broker *b);

/* Starts a broker with the plugin and one plugin_opt_<key> line per
 * argument ("policy numbers max_attempts=3 dead_letter=dlq/numbers"
 * becomes "plugin_opt_policy numbers max_attempts=3 ..."). */
#define dlq_broker(...) dlq_broker_at(__FILE__, __LINE__, __func__, __VA_ARGS__, (const char *)NULL)
struct broker *dlq_broker_at(const char *file, int line, const char *label, ...);
/* The same broker, configured from the NULL-terminated options in ap, not
 * yet started (for a caller that starts it its own way). */
struct broker *dlq_broker_new_va(const char *label, va_list ap);

/* ---- clients ---- */

struct it_user_prop {
	char *name;
	char *value;
};

#define IT_MSG_SUB_IDS_MAX 8

/* One received message, decoded. Owned by its client. */
struct it_msg {
	char *topic;
	char *payload;              /* payloadlen bytes plus a NUL */
	int payloadlen;
	int qos;
	bool retain;
	struct it_user_prop *users; /* in arrival order */
	size_t nusers;
	char *content_type;         /* NULL when absent */
	char *response_topic;
	void *correlation;          /* NULL when absent */
	uint16_t correlation_len;
	int payload_format;         /* -1 when absent */
	uint32_t sub_ids[IT_MSG_SUB_IDS_MAX]; /* subscription identifiers, in arrival order */
	size_t nsub_ids;
	uint64_t at_ms;             /* monotonic arrival time */
};

struct client;

/* Connects a client named "<name>-<pid>-<n>" with the given protocol
 * (MQTT_PROTOCOL_V5 or MQTT_PROTOCOL_V311) and waits for its CONNACK. The
 * client subscribes to its own sync topic (see client_sync). */
#define client_new(b, name, protocol) client_new_at(__FILE__, __LINE__, (b), (name), (protocol))
struct client *client_new_at(const char *file, int line, struct broker *b, const char *name, int protocol);

/* Connects a client with exactly this id and a session that outlives its
 * connection: clean_session=false (v3.1.1), or clean_start=false with a
 * session expiry interval of expiry_s seconds (v5). Connecting again with
 * the same id resumes the session (see client_session_present). */
#define client_new_session(b, id, protocol, expiry_s) \
	client_new_session_at(__FILE__, __LINE__, (b), (id), (protocol), (expiry_s))
struct client *client_new_session_at(const char *file, int line, struct broker *b, const char *id,
		int protocol, uint32_t expiry_s);

/* Whether the broker's CONNACK said it resumed a session. */
bool client_session_present(struct client *c);

const char *client_id(const struct client *c);

/* Subscribes and waits for a granted SUBACK. */
#define client_subscribe(c, filter, qos) client_subscribe_at(__FILE__, __LINE__, (c), (filter), (qos))
void client_subscribe_at(const char *file, int line, struct client *c, const char *filter, int qos);

/* A client (MQTT v5, as client_new) subscribed to filter at QoS 1 (as
 * client_subscribe): a test's usual worker or watcher, in one call. */
#define client_subscribed(b, name, filter) client_subscribed_at(__FILE__, __LINE__, (b), (name), (filter))
struct client *client_subscribed_at(const char *file, int line, struct broker *b, const char *name,
		const char *filter);

/* Subscribes (MQTT v5) with a subscription identifier (0: none) and waits
 * for a granted SUBACK. */
#define client_subscribe_id(c, filter, qos, id) client_subscribe_id_at(__FILE__, __LINE__, (c), (filter), (qos), (id))
void client_subscribe_id_at(const char *file, int line, struct client *c, const char *filter, int qos, uint32_t id);

/* Unsubscribes from one filter and waits for the UNSUBACK (the client
 * stays connected). */
#define client_unsubscribe(c, filter) client_unsubscribe_at(__FILE__, __LINE__, (c), (filter))
void client_unsubscribe_at(const char *file, int line, struct client *c, const char *filter);
/* Publishes and waits until the publish completed (sent for QoS 0, PUBACK
 * or PUBCOMP otherwise). props stay the caller's. Returns the v5 reason
 * code of the acknowledgement (0 for QoS 0 and v3.1.1). */
#define client_publish(c, topic, payload, len, qos, props) \
	client_publish_at(__FILE__, __LINE__, (c), (topic), (payload), (len), (qos), (props))
int client_publish_at(const char *file, int line, struct client *c, const char *topic,
		const void *payload, int len, int qos, const mosquitto_property *props);
#define client_publish_str(c, topic, payload, qos) \
	client_publish_at(__FILE__, __LINE__, (c), (topic), (payload), (int)strlen(payload), (qos), NULL)

/* A compact NACK: the id as payload to $CONTROL/dlq/v1/nack, QoS 1, with a
 * "reason" user property when reason is not NULL. Fails the test if the
 * broker refuses the publish (a v5 PUBACK reason code >= 0x80). */
#define client_nack(c, id, reason) client_nack_at(__FILE__, __LINE__, (c), (id), (reason))
void client_nack_at(const char *file, int line, struct client *c, const char *id, const char *reason);

/* Messages received on topics matching filter (NULL: all), excluding the
 * harness's own sync traffic. client_msg returns the i-th (0-based) of them
 * in arrival order, or NULL. */
size_t client_count(struct client *c, const char *filter);
const struct it_msg *client_msg(struct client *c, const char *filter, size_t i);

/* Waits until at least n messages matching filter arrived. Returns whether
 * they did within timeout_ms. */
bool client_wait(struct client *c, const char *filter, size_t n, int timeout_ms);

/* client_wait with HARNESS_WAIT_MS; fails the test (listing what did
 * arrive) if they do not. Returns the n-th (last awaited) message. */
#define client_expect(c, filter, n) client_expect_at(__FILE__, __LINE__, (c), (filter), (n))
const struct it_msg *client_expect_at(const char *file, int line, struct client *c, const char *filter, size_t n);

/* Fails the test unless exactly n messages matching filter arrived. Call
 * after clients_settle. */
#define client_expect_exactly(c, filter, n) client_expect_exactly_at(__FILE__, __LINE__, (c), (filter), (n))
void client_expect_exactly_at(const char *file, int line, struct client *c, const char *filter, size_t n);

/* Round trips through the broker: publishes a QoS 1 marker to the client's
 * own sync topic, twice, waiting for each to come back. Everything the broker
 * queued for this client before the first marker was read, including what a
 * plugin published in that loop pass, has then been delivered. */
#define client_sync(c) client_sync_at(__FILE__, __LINE__, (c))
void client_sync_at(const char *file, int line, struct client *c);

/* Syncs every client (in order: the one that acted first), waits
 * HARNESS_SETTLE_MS for anything late (tick-driven work), and syncs them
 * again. After this, "nothing else arrived" can be asserted. The list ends
 * with NULL. */
#define clients_settle(...) clients_settle_at(__FILE__, __LINE__, __VA_ARGS__, (struct client *)NULL)
void clients_settle_at(const char *file, int line, ...);

/* A test's usual end: a and b settled (clients_settle), and each has
 * received exactly na and nb messages in all (client_expect_exactly with no
 * filter): nothing else arrived. */
#define clients_expect_totals(a, na, b, nb) clients_expect_totals_at(__FILE__, __LINE__, (a), (na), (b), (nb))
void clients_expect_totals_at(const char *file, int line, struct client *a, size_t na, struct client *b, size_t nb);

/* Whether the client is connected now, and how often its connection was
 * lost since it was created. */
bool client_connected(struct client *c);
unsigned client_disconnects(struct client *c);

/* The broker's count of messages it dropped because a client's queue was
 * full. c must subscribe to it, and the broker run with sys_interval 1. */
#define BROKER_DROPPED_TOPIC "$SYS/broker/publish/messages/dropped"

/* Waits until the broker's dropped count (BROKER_DROPPED_TOPIC, to which c
 * subscribed) says want; fails the test after HARNESS_WAIT_MS. */
void client_expect_dropped(struct client *c, size_t want);

/* Prints what the client received (matching filter, NULL: all) to stderr. */
void client_dump(struct client *c, const char *filter);

/* Disconnects and frees the client (the fixture does this for any left). */
void client_free(struct client *c);

/* ---- reading messages ---- */

/* The value of the first user property called name, or NULL. */
const char *msg_user(const struct it_msg *m, const char *name);

/* For clients of a test's own (libmosquitto callbacks): the value of the
 * first user property called name in props, copied into buf; NULL if
 * there is none. */
const char *props_user(const mosquitto_property *props, const char *name, char *buf, size_t size);
/* How many user properties are called name. */
size_t msg_user_count(const struct it_msg *m, const char *name);
/* The payload parsed as JSON, or NULL; the caller frees it. */
cJSON *msg_json(const struct it_msg *m);
/* The message whose user property name has value, among those matching
 * filter, or NULL. */
const struct it_msg *client_find(struct client *c, const char *filter, const char *name, const char *value);
/* The message with this payload (a string) among those matching filter, the
 * k-th such (0-based), or NULL. */
const struct it_msg *client_find_payload(struct client *c, const char *filter, const char *payload, size_t k);

/* ---- the plugin's contract ---- */

/* The message's dlq-id: fails the test unless it carries exactly one, of 16
 * base64url characters. */
#define dlq_id_of(m) dlq_id_of_at(__FILE__, __LINE__, (m))
const char *dlq_id_of_at(const char *file, int line, const struct it_msg *m);

/* Fails the test unless m is an original tracked delivery: exactly one
 * valid dlq-id and none of the properties of copies and dead letters.
 * Returns the dlq-id. */
#define expect_original(m) expect_original_at(__FILE__, __LINE__, (m))
const char *expect_original_at(const char *file, int line, const struct it_msg *m);

/* Fails the test unless m is a retry copy: exactly one each of a fresh
 * dlq-id (not origin_id), retry-count, origin-topic, origin-id with these
 * values, and no dead-letter-* property. Returns the copy's dlq-id. */
#define expect_retry_copy(m, origin_topic, origin_id, retry_count) \
	expect_retry_copy_at(__FILE__, __LINE__, (m), (origin_topic), (origin_id), (retry_count))
const char *expect_retry_copy_at(const char *file, int line, const struct it_msg *m,
		const char *origin_topic, const char *origin_id, unsigned retry_count);

/* Fails the test unless m is a dead letter: QoS >= 1, not retained, no
 * dlq-id, exactly one each of retry-count, origin-topic, origin-id,
 * dead-letter-reason, -client, -filter and -time with these values (reason
 * NULL: any non-empty text that mentions attempts; the time must be RFC 3339
 * UTC and within a minute of now). */
#define expect_dead_letter(m, origin_topic, origin_id, retry_count, client, filter, reason) \
	expect_dead_letter_at(__FILE__, __LINE__, (m), (origin_topic), (origin_id), (retry_count), \
			(client), (filter), (reason))
void expect_dead_letter_at(const char *file, int line, const struct it_msg *m,
		const char *origin_topic, const char *origin_id, unsigned retry_count,
		const char *client, const char *filter, const char *reason);

/* Parses the reply m ({"responses":[...]}), failing the test unless it is
 * one with exactly n entries. Returns the document (the caller frees it with
 * cJSON_Delete); entry i is reply_entry(doc, i). */
#define expect_reply(m, n) expect_reply_at(__FILE__, __LINE__, (m), (n))
cJSON *expect_reply_at(const char *file, int line, const struct it_msg *m, int n);
const cJSON *reply_entry(const cJSON *doc, int i);

/* Fails the test unless the reply entry e reports success with this result
 * ("retried" or "dead-lettered") for id, attempt and maxAttempts, and no
 * error. */
#define expect_reply_ok(e, id, result, attempt, max_attempts) \
	expect_reply_ok_at(__FILE__, __LINE__, (e), (id), (result), (attempt), (max_attempts))
void expect_reply_ok_at(const char *file, int line, const cJSON *e, const char *id,
		const char *result, int attempt, int max_attempts);

/* Fails the test unless the reply entry e is a "nack" error whose text
 * contains want (NULL: any non-empty text), and reports no result. */
#define expect_reply_error(e, want) expect_reply_error_at(__FILE__, __LINE__, (e), (want))
void expect_reply_error_at(const char *file, int line, const cJSON *e, const char *want);

/* The string member name of e, or NULL. */
const char *json_str(const cJSON *e, const char *name);

/* The number member name of o; fails the test if there is none. */
double json_num(const cJSON *o, const char *name);

/* Publishes payload (a control document) to $CONTROL/dlq/v1 from c with
 * reply_topic as its response topic, and returns the reply that comes
 * there; what names the request in a failure. */
const struct it_msg *command_reply(struct client *c, const char *reply_topic, const char *payload, const char *what);

/* The data of command (one command's JSON object), asked for by the v5
 * client c with reply_topic as its response topic; *doc is the reply, for
 * the caller to free with cJSON_Delete. Fails the test on an error. */
const cJSON *command_data(struct client *c, const char *reply_topic, const char *command, cJSON **doc);

/* getStatus's data, asked for by the v5 client c (subscribed to
 * reply_topic) with reply_topic as its response topic; *doc is the reply,
 * for the caller to free with cJSON_Delete. Fails the test on an error. */
const cJSON *status_get(struct client *c, const char *reply_topic, cJSON **doc);

/* The entry of filter among a getStatus reply's "policies"; fails the
 * test if there is none. */
const cJSON *status_policy(const cJSON *data, const char *filter);

/* True if s is a dlq-id: 16 characters of base64url. */
bool it_is_dlq_id(const char *s);
/* This machine's host name (gethostname), which the plugin names its
 * broker by without plugin_opt_broker_name (dead-letter-broker); fails the
 * test when it cannot be read. A static buffer. */
const char *it_host_name(void);
/* True if s is an RFC 3339 UTC time ("...Z") within slack_s seconds of
 * now. */
bool it_is_recent_rfc3339(const char *s, int slack_s);
/* The time s names, in milliseconds since the epoch, if it is exactly
 * RFC 3339 UTC with milliseconds ("2025-11-30T03:12:45.123Z"); else -1. */
int64_t it_rfc3339_ms(const char *s);
/* Monotonic milliseconds. */
uint64_t it_now_ms(void);
/* Wall-clock (CLOCK_REALTIME) milliseconds since the epoch. */
int64_t it_wall_ms(void);
/* Sleeps; for settle periods and expiring windows only, never to wait for
 * something that can be observed. */
void it_sleep_ms(unsigned ms);

#endif
