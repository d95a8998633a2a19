/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Public constants of mosquitto-dlq: the names of the MQTT v5 user properties
 * the plugin reads and writes, the $CONTROL topics it answers on, and the
 * limits it enforces. A C client includes this header so that it spells the
 * contract exactly as the plugin does; nothing here needs the broker.
 */
#ifndef MOSQUITTO_DLQ_H
#define MOSQUITTO_DLQ_H

#define DLQ_VERSION "0.1.0"

/* User property stamped on every tracked message and every retry copy: the
 * handle a subscriber names when it asks for a retry. */
#define DLQ_PROP_ID "dlq-id"
/* How many times the message had been delivered when the copy or dead letter
 * was made (the first delivery counts as 1). */
#define DLQ_PROP_RETRY_COUNT "retry-count"
/* The topic the chain was first published to, and its first dlq-id. Carried
 * by retry copies and dead letters. */
#define DLQ_PROP_ORIGIN_TOPIC "origin-topic"
#define DLQ_PROP_ORIGIN_ID "origin-id"
/* Carried by dead letters only. */
#define DLQ_PROP_DEAD_LETTER_REASON "dead-letter-reason"
#define DLQ_PROP_DEAD_LETTER_CLIENT "dead-letter-client"
#define DLQ_PROP_DEAD_LETTER_FILTER "dead-letter-filter"
#define DLQ_PROP_DEAD_LETTER_TIME "dead-letter-time"
/* The dead letter's id in the plugin's dead-letter store: what
 * getDeadLetter, redriveDeadLetters and deleteDeadLetters name it by. */
#define DLQ_PROP_DEAD_LETTER_ID "dead-letter-id"
/* Carried by a dead letter made by a final NACK (the subscriber said the
 * message can never succeed: dead-lettered whatever attempts remained),
 * with the value "true". */
#define DLQ_PROP_DEAD_LETTER_FINAL "dead-letter-final"
/* Carried by every dead letter: why it was made, one word of the fixed
 * vocabulary below, for a program to route on (dead-letter-reason is
 * free text). The same word names its counter in getStatus
 * ("deadLettersByCause") and its $SYS topic
 * ($SYS/broker/dlq/dead_letters_by_cause/<word>). */
#define DLQ_PROP_DEAD_LETTER_CAUSE "dead-letter-cause"
/* Carried by every dead letter: the name of the broker whose plugin made
 * it (plugin_opt_broker_name, by default the host name), so that letters
 * of many brokers collected in one place say where each was made. */
#define DLQ_PROP_DEAD_LETTER_BROKER "dead-letter-broker"
/* The dead-letter causes (docs/semantics.md, "Dead-letter causes"). */
/* The subscriber NACKed its last allowed attempt (max_attempts). */
#define DLQ_CAUSE_NACK "nack"
/* A final NACK, at any attempt. */
#define DLQ_CAUSE_FINAL "final"
/* The ack_timeout of the last allowed attempt ran out. */
#define DLQ_CAUSE_ACK_TIMEOUT "ack_timeout"
/* Redelivery tracking: delivered max_attempts times without being
 * acknowledged (a crash loop), removed from its session. */
#define DLQ_CAUSE_REDELIVERY_LIMIT "redelivery_limit"
/* A retry copy for one subscriber whose session ended (it left without a
 * lasting session, or a clean start ended the one it had) before it
 * settled the copy. */
#define DLQ_CAUSE_SUBSCRIBER_GONE "subscriber_gone"
/* A retry copy due for a subscriber the broker has no session for. */
#define DLQ_CAUSE_NO_SESSION "no_session"
/* A QoS 0 retry copy for a subscriber that went offline with a lasting
 * session, which the broker keeps no QoS 0 message for. */
#define DLQ_CAUSE_OFFLINE_QOS0 "offline_qos0"
/* The broker restarted, and the retry copy's subscriber has no session
 * that survived it. */
#define DLQ_CAUSE_RESTART "restart"
/* A dead letter made by a version of the plugin without causes, read
 * from its state file (one made by a final NACK reads as "final"). */
#define DLQ_CAUSE_UNKNOWN "unknown"
/* Every cause's word, in the order above: an initializer, for a client
 * that checks a word before it asks for it (listDeadLetters' "cause"). */
#define DLQ_CAUSE_WORDS DLQ_CAUSE_NACK, DLQ_CAUSE_FINAL, DLQ_CAUSE_ACK_TIMEOUT, DLQ_CAUSE_REDELIVERY_LIMIT, \
	DLQ_CAUSE_SUBSCRIBER_GONE, DLQ_CAUSE_NO_SESSION, DLQ_CAUSE_OFFLINE_QOS0, DLQ_CAUSE_RESTART, DLQ_CAUSE_UNKNOWN
/* Carried by a retry copy that was delayed: when its chain was first NACKed
 * (RFC 3339 UTC), so a consumer sees how long the message has been failing. */
#define DLQ_PROP_FIRST_NACK_TIME "first-nack-time"
/* Carried by every send of a tracked message or retry copy on Mosquitto
 * 2.1 (not 2.0) but a subscriber's first: that delivery's attempt number
 * for the receiving subscriber, across resends and retry copies; absent on
 * the first, which reads as 1 (plugin_opt_delivery_count always stamps "1"
 * there too, off turns it off). */
#define DLQ_PROP_DELIVERY_COUNT "delivery-count"
/* Optional user property on a compact NACK: why the subscriber failed. */
#define DLQ_PROP_NACK_REASON "reason"
/* Optional user property on a compact NACK: the delay it asks for before
 * the retry copy, in milliseconds (capped by the policy's retry_max_delay). */
#define DLQ_PROP_NACK_DELAY_MS "delay-ms"
/* Optional user property on a compact NACK: "true" makes it final (the
 * message goes to its dead-letter topic at once, whatever attempts
 * remain); "false" or absent, an ordinary NACK. */
#define DLQ_PROP_NACK_FINAL "final"

/* JSON commands, dynamic-security shape: {"commands":[{"command":"nack",...}]} */
#define DLQ_CONTROL_TOPIC "$CONTROL/dlq/v1"
/* Compact NACK: the payload is the dlq-id, nothing else. */
#define DLQ_NACK_TOPIC "$CONTROL/dlq/v1/nack"
/* Compact ACK: the payload is the dlq-id of a delivery processed. */
#define DLQ_ACK_TOPIC "$CONTROL/dlq/v1/ack"
/* Compact progress: the payload is the dlq-id of a delivery still being
 * worked on; its ack_timeout starts again. */
#define DLQ_PROGRESS_TOPIC "$CONTROL/dlq/v1/progress"
/* Where replies go when the request carried no MQTT v5 response topic. */
#define DLQ_RESPONSE_TOPIC "$CONTROL/dlq/v1/response"

/* Commands on DLQ_CONTROL_TOPIC. */
#define DLQ_COMMAND_NACK "nack"
#define DLQ_COMMAND_ACK "ack"
#define DLQ_COMMAND_PROGRESS "progress"
#define DLQ_COMMAND_LIST_POLICIES "listPolicies"
#define DLQ_COMMAND_GET_STATUS "getStatus"
#define DLQ_COMMAND_RESET_COUNTERS "resetCounters"
/* Each policy's NACKs, ack timeouts, dead letters (by cause) and redrives
 * in each minute of the last hour. */
#define DLQ_COMMAND_GET_HISTORY "getHistory"
/* The dead-letter store's commands. */
#define DLQ_COMMAND_LIST_DEAD_LETTERS "listDeadLetters"
#define DLQ_COMMAND_GET_DEAD_LETTER "getDeadLetter"
#define DLQ_COMMAND_REDRIVE_DEAD_LETTERS "redriveDeadLetters"
#define DLQ_COMMAND_DELETE_DEAD_LETTERS "deleteDeadLetters"
#define DLQ_COMMAND_PURGE_DEAD_LETTERS "purgeDeadLetters"
/* The kept letters by the broker that made them (dead-letter-broker):
 * each broker's letters, bytes and newest letter (docs/fleet.md). */
#define DLQ_COMMAND_LIST_BROKERS "listBrokers"
/* Redrive tasks: every kept letter a filter matches, published again at a
 * paced rate (docs/dead-letter-store.md); their progress is getStatus'
 * "redriveTasks". */
#define DLQ_COMMAND_START_REDRIVE_TASK "startRedriveTask"
#define DLQ_COMMAND_CANCEL_REDRIVE_TASK "cancelRedriveTask"

/* A dlq-id is 16 characters of base64url (RFC 4648 section 5, no padding)
 * encoding 96 bits from the operating system's random source. */
#define DLQ_ID_LEN 16
#define DLQ_ID_RANDOM_BITS 96

/* Value of retry_to that sends retry copies back to the delivery topic,
 * to the subscriber that asked only. It is the default. */
#define DLQ_RETRY_TO_DELIVERY "delivery"

/* Limits. */
#define DLQ_MAX_ATTEMPTS_MIN 1
#define DLQ_MAX_ATTEMPTS_MAX 1000
/* A reason longer than this is cut at a UTF-8 character boundary. */
#define DLQ_REASON_MAX_BYTES 1024
/* At most this many commands in one $CONTROL/dlq/v1 message. */
#define DLQ_MAX_COMMANDS 1000
/* At most this many bytes in one $CONTROL/dlq/v1 message: parsed, a JSON
 * document takes up to about 40 times its size in memory. */
#define DLQ_MAX_CONTROL_BYTES (1024 * 1024)
/* Policy entries the status commands (getStatus, listPolicies,
 * resetCounters, getHistory) of one JSON message may return together, each costing one
 * per policy plus one; a repeated command beyond that is answered with an
 * error (the first of each always runs). */
#define DLQ_MAX_STATUS_ENTRIES 100
/* The dead-letter store's commands: at most this many letters in one
 * listDeadLetters page and ids in one redrive or delete, and replies cut
 * near these sizes (a page ends early; a payload is cut). */
#define DLQ_MAX_LIST_LIMIT 100
#define DLQ_LIST_DEFAULT_LIMIT 20
#define DLQ_MAX_LETTER_IDS 100
#define DLQ_MAX_LIST_REPLY_BYTES (256 * 1024)
#define DLQ_MAX_LETTER_PAYLOAD_REPLY (256 * 1024)
/* At most this many brokers in one listBrokers reply (about 200 bytes
 * each); its "after" gives the next ones. */
#define DLQ_MAX_BROKERS_LISTED 1000
/* A redrive task's rate, in letters a second: 100 unless its "rate" says
 * otherwise, at most 10,000. It moves at most one burst at once, a tenth of
 * a second's worth and one more (rate / 10 rounded up, plus 1: 21 at 200
 * a second), so that no second moves more than rate plus one burst.
 * getStatus keeps the ended tasks until there are more than this many
 * tasks. */
#define DLQ_REDRIVE_RATE_DEFAULT 100
#define DLQ_REDRIVE_RATE_MAX 10000
#define DLQ_MAX_REDRIVE_TASKS_KEPT 16

/* A policy's ack_timeout: from 100 ms to 7 days. */
#define DLQ_ACK_TIMEOUT_MIN_MS 100
#define DLQ_ACK_TIMEOUT_MAX_MS (7ull * 24 * 3600 * 1000)

/* The age bound of kept dead letters (plugin_opt_dead_letter_keep_for, a
 * policy's dead_letter_keep_for=): from 1 s to 3650 days, or "forever"
 * (no age bound, the default). */
#define DLQ_KEEP_FOR_MIN_MS 1000
#define DLQ_KEEP_FOR_MAX_MS (3650ull * 24 * 3600 * 1000)
#define DLQ_KEEP_FOR_FOREVER "forever"

/* Retry delays. */
#define DLQ_RETRY_BACKOFF_MAX 100.0
#define DLQ_DEFAULT_RETRY_MAX_DELAY_MS (3600 * 1000)

/* A broker's name (plugin_opt_broker_name, dead-letter-broker): 1 to this
 * many bytes of printable ASCII, without space, '/', '+' or '#' (one topic
 * level of a fleet's bridge topics, never a wildcard). */
#define DLQ_MAX_BROKER_NAME_LEN 64

/* Defaults of the global options. */
#define DLQ_DEFAULT_NACK_WINDOW_MS (300 * 1000)
#define DLQ_DEFAULT_MAX_PENDING_BYTES (64ull * 1024 * 1024)
#define DLQ_DEFAULT_DEAD_LETTER_KEEP (64ull * 1024 * 1024)
#define DLQ_DEFAULT_STATE_SAVE_INTERVAL_MS (60 * 1000)
#define DLQ_DEFAULT_SYS_INTERVAL_MS (10 * 1000)

/* Where the plugin publishes its counters (retained). */
#define DLQ_SYS_TOPIC_PREFIX "$SYS/broker/dlq/"

#endif
