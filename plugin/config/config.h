/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Configuration: the plugin_opt_* options from mosquitto.conf and the JSON
 * policy file, parsed once into one immutable, validated struct. Parsing from
 * strings is kept apart from reading files so that tests need no files.
 */
#ifndef DLQ_CONFIG_H
#define DLQ_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/collect_filters.h"
#include "config/redrive_paths.h"
#include "config/policy_parse.h"
#include "model/policy.h"

/* plugin_opt_redelivery_tracking: whether redeliveries count as attempts,
 * and how the plugin answers the broker's access checks where it has no
 * opinion (see redelivery.h). */
enum dlq_redelivery_mode {
	DLQ_REDELIVERY_OFF,   /* no access-check callback at all */
	DLQ_REDELIVERY_DEFER, /* no opinion: an ACL source loaded after the plugin decides */
	DLQ_REDELIVERY_ALLOW, /* allowed: for brokers with no ACL source */
};

/* "off", "defer", "allow". */
const char *config__redelivery_mode_name(enum dlq_redelivery_mode m);

/* plugin_opt_delivery_count: which sends of a tracked message to an MQTT v5
 * subscriber carry a delivery-count user property (Mosquitto 2.1). */
enum dlq_delivery_count {
	DLQ_DELIVERY_COUNT_OFF,    /* none */
	DLQ_DELIVERY_COUNT_ON,     /* every one but the first to each subscriber: absent means 1 */
	DLQ_DELIVERY_COUNT_ALWAYS, /* every one, "1" on the first */
};

/* "off", "on", "always". */
const char *config__delivery_count_name(enum dlq_delivery_count m);

/* Whether the send that is attempt number attempt (1 for the first) to a
 * subscriber carries delivery-count under mode m. */
static inline bool config__stamps_delivery_count(enum dlq_delivery_count m, unsigned attempt)
{
	return m == DLQ_DELIVERY_COUNT_ALWAYS || (m == DLQ_DELIVERY_COUNT_ON && attempt > 1);
}

/* plugin_opt_dead_letter_access: who may use the dead-letter store's
 * commands. */
enum dlq_letter_access {
	DLQ_LETTER_ACCESS_CHECK,   /* the broker's access control, per letter (default) */
	DLQ_LETTER_ACCESS_CONTROL, /* whoever may publish to $CONTROL/dlq/v1 */
};

struct dlq_option {
	const char *key;   /* without the plugin_opt_ prefix */
	const char *value;
};

struct dlq_config {
	struct dlq_policy_table policies; /* owned; finished (validated, indexed) */
	uint64_t nack_window_ms;          /* plugin_opt_nack_window */
	uint64_t max_pending_bytes;       /* plugin_opt_max_pending_bytes */
	char *policy_file;                /* owned; plugin_opt_policy_file or NULL */
	char *state_file;                 /* owned; plugin_opt_state_file or NULL: no durable state */
	uint64_t state_save_interval_ms;  /* plugin_opt_state_save_interval */
	bool state_save_on_change;        /* plugin_opt_state_save_on_change: journal every change */
	uint64_t state_journal_sync_ms;   /* plugin_opt_state_journal_sync: 0 (always) syncs each change before the
	                                   * broker acknowledges it; else the journal is synced every this long */
	bool state_save_foreground;       /* not an option: every snapshot written on the broker's thread (unit tests) */
	uint64_t state_save_pause_ms;     /* not an option: a background save waits this long first (test hooks) */
	uint64_t sys_interval_ms;         /* plugin_opt_sys_interval; 0: no $SYS topics */
	bool v5_sessions_persist;         /* plugin_opt_v5_sessions_persist: v5 clean_start=false clients set an expiry */
	enum dlq_redelivery_mode redelivery; /* plugin_opt_redelivery_tracking */
	enum dlq_delivery_count delivery_count; /* plugin_opt_delivery_count (default on): stamp delivery-count (2.1) */
	bool delivery_count_given;        /* plugin_opt_delivery_count was in the configuration */
	uint64_t dead_letter_keep;        /* plugin_opt_dead_letter_keep: the dead-letter store's bound; 0: off */
	uint64_t dead_letter_keep_for_ms; /* plugin_opt_dead_letter_keep_for: kept letters' age bound; 0: none */
	enum dlq_letter_access dead_letter_access; /* plugin_opt_dead_letter_access */
	char *broker_name;                /* owned; plugin_opt_broker_name, or NULL until config__name_broker gives it
	                                   * the host name: what every dead letter carries as dead-letter-broker */
	struct dlq_collect_filters collect; /* plugin_opt_collect lines: other brokers' dead letters kept here */
	struct dlq_redrive_paths redrive;   /* plugin_opt_redrive_home, plugin_opt_redrive_from */
};

/* Parses every option (in order) into *out, reading plugin_opt_policy_file
 * if given, and validates the resulting policy table as a whole. Unknown
 * keys, bad values and malformed policies are refused. Returns 0, or EINVAL
 * with a message naming the option, the value and the reason in err (ENOMEM
 * when out of memory). On failure *out holds nothing that needs freeing. */
int config__parse(const struct dlq_option *opts, size_t count, struct dlq_config *out, char *err, size_t errlen);

/* The broker's name when plugin_opt_broker_name did not give one: host (the
 * host name, read once at start by the caller; NULL when it could not be
 * read). Nothing changes when the option gave one. Returns 0, or EINVAL
 * with a message saying why the host name cannot serve and to set the
 * option (ENOMEM when out of memory). */
int config__name_broker(struct dlq_config *c, const char *host, char *err, size_t errlen);

/* Whether the deadlines of c's policies (ack_timeout) can work on a
 * broker that shows each send to each subscriber (sends_shown: Mosquitto
 * 2.1's MESSAGE_OUT) or not (2.0: then only with redelivery tracking's
 * access check). Returns 0, or EINVAL with a message naming the policy, its
 * ack_timeout and what to add. */
int config__check_deadlines(const struct dlq_config *c, bool sends_shown, char *err, size_t errlen);

/* Whether any policy of c has an ack_timeout. */
bool config__has_deadlines(const struct dlq_config *c);

void config__free(struct dlq_config *c);

#endif
