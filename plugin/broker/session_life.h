/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Whether a client's session outlives its connection. Apart from the
 * adapters (adapters.h) so that the MESSAGE_OUT adapter and its fuzz
 * replay link without the capability probe's calls into the broker.
 */
#ifndef DLQ_SESSION_LIFE_H
#define DLQ_SESSION_LIFE_H

#include <stdbool.h>

#include <mosquitto_broker.h>

#include "broker/broker_caps.h"
#include "engine/dlq.h"

/* Whether client's session outlives its connection, as far as the broker
 * running (line) says: 2.0, the clean-session flag and, for MQTT v5,
 * plugin_opt_v5_sessions_persist (engine's configuration); 2.1, the
 * sessions it showed at CLIENT_OFFLINE (engine's sessions). */
bool session_life__persists(enum broker_line line, const struct dlq *engine,
		const struct mosquitto *client);

#endif
