/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What test_letters.c uses to drive the dead-letter store (issue 24): the
 * spec's error texts, brokers started in the access mode the broker line
 * can honour, commands sent by v5 clients with a reply topic of their own,
 * getStatus figures, letters made by a worker's NACK, and the checks of
 * listDeadLetters pages, summaries, properties and payloads.
 */
#ifndef DLQ_IT_LETTERS_COMMON_H
#define DLQ_IT_LETTERS_COMMON_H

#include <stdbool.h>
#include <stddef.h>

#include "harness.h"

/* The error texts of the spec of issue 24, step 1. */
#define ERR_UNKNOWN "unknown dead-letter id (never kept, or already redriven, deleted or dropped)"
#define ERR_NO_ACL_CHECK "this broker does not export mosquitto_acl_check: set plugin_opt_dead_letter_access " \
	"control to let every client that may publish to $CONTROL/dlq/v1 use the dead-letter store"
#define ERR_OFF "the dead-letter store is off (plugin_opt_dead_letter_keep 0)"
#define ERR_NO_ID "missing or non-string \"id\""
#define ERR_NO_IDS "missing or empty \"ids\" array"
#define ERR_TOO_MANY_IDS "\"ids\" must hold at most 100 ids"
#define ERR_ID_NOT_STRING "each of \"ids\" must be a string"
#define ERR_TOPIC_WILDCARD "\"topic\" must be a topic name without wildcards, not starting with $"
#define ERR_NO_FILTER "missing \"filter\" (a policy filter) or \"all\": true"
/* listDeadLetters' "cause" (issue 38): a word none of the causes has. */
#define ERR_UNKNOWN_CAUSE(word) "\"cause\" \"" word "\" is not a dead-letter cause: it must be one of nack, final, " \
	"ack_timeout, redelivery_limit, subscriber_gone, no_session, offline_qos0, restart, unknown"
/* What the plugin logs: at startup on a broker without mosquitto_acl_check,
 * and when the store's bound drops letters. */
#define LOG_NO_ACL_CHECK "does not export mosquitto_acl_check"
#define LOG_STORE_FULL "dead-letter store full (plugin_opt_dead_letter_keep "

#define STATE_NAME "dlq.state"       /* in the broker's directory */
/* An id of the right shape that names no letter. */
#define UNKNOWN_ID "AAAAAAAAAAAAAAAA"
/* A buffer for an id and its NUL. */
#define ID_BUF (DLQ_ID_LEN + 1)
/* The policies the tests use: every NACK makes a dead letter. */
#define JOBS "policy jobs/# max_attempts=1 dead_letter=dead/jobs"
#define MAIL "policy mail/# max_attempts=1 dead_letter=dead/mail"

/* What a summary must say. */
struct want {
	const char *id;          /* NULL: any dlq-id shaped id */
	const char *dead_letter;
	const char *origin_topic;
	const char *origin_id;
	const char *reason;      /* NULL: any text that mentions attempts */
	const char *client;
	const char *filter;
	int retry_count;
	int qos;
	int payload_bytes;
};

/* The letters of a listDeadLetters response, checked for shape: matched
 * (a number), letters (an array), next (a number when present). */
struct page {
	cJSON *doc;              /* the reply, owned */
	const cJSON *letters;
	int count;
	double matched;
	bool has_next;
	double next;
};

/* Whether the log since b's last start contains needle. */
bool log_has(struct broker *b, const char *needle);

/* Whether the plugin of the running b said the broker has no
 * mosquitto_acl_check (it says so at startup, before "running"). */
bool lacks_acl_check(struct broker *b);

/* Starts b, configured with the plugin. Where the broker does not export
 * mosquitto_acl_check, the default plugin_opt_dead_letter_access check
 * cannot be honoured: b is stopped and started again with access control. */
void start_store(struct broker *b);

/* A started broker with the plugin and one plugin_opt_<opt> line per
 * argument (NULL-terminated), through start_store. */
struct broker *store_broker(const char *label, ...);
#define STORE_BROKER(...) store_broker(__func__, __VA_ARGS__, (const char *)NULL)

/* "replies/<c's id>", c's reply topic, into buf. */
const char *reply_topic(const struct client *c, char *buf, size_t size);

/* A v5 client subscribed to its own reply topic. */
struct client *ops_client(struct broker *b, const char *name);

/* j as compact text; the caller frees it. */
char *json_text(const cJSON *j);

/* A command object {"command": name}. */
cJSON *cmd_new(const char *name);

/* {"ids": [ids...]} added to cmd. */
void cmd_ids(cJSON *cmd, size_t n, const char *const *ids);

/* Sends text (len bytes) to $CONTROL/dlq/v1 from c with its reply topic
 * and returns the reply, which must hold one response. The sender must
 * still be connected, never having been disconnected. */
cJSON *ask_text(struct client *c, const char *text, size_t len);

/* Sends {"commands":[cmd]} (taking cmd) and returns the reply; *e is its
 * response, which must name the command. The caller frees the reply. */
cJSON *ask(struct client *c, cJSON *cmd, const cJSON **e);

/* The data of a successful response; fails the test on an error. */
#define entry_data(e) entry_data_at(__FILE__, __LINE__, (e))
const cJSON *entry_data_at(const char *file, int line, const cJSON *e);

/* Fails the test unless e is an error (and has no data) whose text is want
 * (exact), or contains want (!exact). */
#define entry_error(e, want, exact) entry_error_at(__FILE__, __LINE__, (e), (want), (exact))
void entry_error_at(const char *file, int line, const cJSON *e, const char *want, bool exact);

/* The one element of a redrive or delete reply's "results", checked to be
 * for id. */
#define only_result(e, id) only_result_at(__FILE__, __LINE__, (e), (id))
const cJSON *only_result_at(const char *file, int line, const cJSON *e, const char *id);

/* Fails unless result r (of redrive or delete) reports an error want
 * (exact or contained) and no result. */
#define result_error(r, want, exact) result_error_at(__FILE__, __LINE__, (r), (want), (exact))
void result_error_at(const char *file, int line, const cJSON *r, const char *want, bool exact);

/* Fails unless r (of a redrive) says the letter was redriven to topic,
 * tracked again or not. */
#define result_redriven(r, topic, tracked) result_redriven_at(__FILE__, __LINE__, (r), (topic), (tracked))
void result_redriven_at(const char *file, int line, const cJSON *r, const char *topic, bool tracked);

/* Redrives (command: DLQ_COMMAND_REDRIVE_DEAD_LETTERS), or deletes
 * (DLQ_COMMAND_DELETE_DEAD_LETTERS), the one id from c, to topic
 * (NULL: none given), and returns the reply; *r its one result. */
cJSON *one_id(struct client *c, const char *command, const char *id, const char *topic, const cJSON **r);
/* The command of one_id (redrive or delete of the one id, to topic when
 * not NULL), for a caller that sends it its own way. */
cJSON *one_id_command(const char *command, const char *id, const char *topic);

/* The number member name of getStatus's totals (policy NULL) or of that
 * policy's entry. */
double status_num(struct client *c, const char *policy, const char *name);

/* Waits (HARNESS_WAIT_MS) until getStatus's totals say keptDeadLetters is
 * n: a dead letter is kept when the broker accepted it, which a NACK's
 * acknowledgement does not show. */
void wait_kept(struct client *c, double n);

/* Publishes payload (len bytes) to topic from pub, with props, and has
 * worker (subscribed to it) NACK it with reason (NULL: none); with
 * max_attempts=1 it is dead-lettered. Copies the original's dlq-id into id
 * (ID_BUF bytes). */
void make_letter(struct client *pub, struct client *worker, const char *topic, const void *payload, int len,
		const mosquitto_property *props, const char *reason, char *id);

/* Fails unless the string member name of s is want. */
#define expect_str_member(s, name, want) expect_str_member_at(__FILE__, __LINE__, (s), (name), (want))
void expect_str_member_at(const char *file, int line, const cJSON *s, const char *name, const char *want);

/* Fails the test unless s is a letter's summary as w says, with a current
 * time given both ways. */
#define expect_summary(s, w) expect_summary_at(__FILE__, __LINE__, (s), (w))
void expect_summary_at(const char *file, int line, const cJSON *s, const struct want *w);

/* Sends listDeadLetters with the members of tmpl (copied; NULL: none),
 * limit (0: none) and cursor (when has_cursor). */
struct page list_page(struct client *c, const cJSON *tmpl, int limit, bool has_cursor, double cursor);

/* Lists everything matching tmpl's members, limit letters a page,
 * following "next": copies the ids in the order given into ids (at most
 * max), and returns how many there were; every page must say the same
 * "matched", equal to the total; each page but the last has limit letters
 * (these letters are small: no page ends early for size). *pages counts
 * the pages. */
size_t list_all(struct client *c, const cJSON *tmpl, int limit, char (*ids)[ID_BUF], size_t max, size_t *pages);

/* A listDeadLetters template {name: value} (a string). */
cJSON *tmpl_str(const char *name, const char *value);

/* The first of a getDeadLetter reply's properties with this name (and
 * key, for a user property); NULL if none. */
const cJSON *find_prop(const cJSON *props, const char *name, const char *key);

/* Fails unless props hold exactly one user property key, with value. */
#define expect_user_prop(props, key, value) expect_user_prop_at(__FILE__, __LINE__, (props), (key), (value))
void expect_user_prop_at(const char *file, int line, const cJSON *props, const char *key, const char *value);

/* getDeadLetter of id from c; returns the reply (the caller frees it) and
 * its data in *data. */
cJSON *get_letter(struct client *c, const char *id, const cJSON **data);

/* RFC 4648 base64, with padding, of n bytes into out (4 * ceil(n / 3) + 1
 * bytes). */
void b64(const unsigned char *in, size_t n, char *out);

/* Fails unless the getDeadLetter data d gives this payload (len bytes),
 * as text (text) or base64, and not cut. */
#define expect_payload(d, payload, len, text) expect_payload_at(__FILE__, __LINE__, (d), (payload), (len), (text))
void expect_payload_at(const char *file, int line, const cJSON *d, const void *payload, size_t len, bool text);

#endif
