/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Whether a client's session outlives its connection (session_life.h).
 */
#include <mosquitto.h>
#include <mosquitto_broker.h>

#include "broker/session_life.h"
#include "model/sessions.h"

/* Whether a client's session outlives its connection, as far as is known
 * when it NACKs or is sent a delivery with a deadline. 2.0.11 tells a
 * plugin only the clean-session/clean-start flag, not a v5 client's
 * session expiry interval, and a v5 client with clean_start=false and no
 * expiry interval loses its session when it disconnects. So on 2.0 a v5
 * session counts as persistent only when the operator says its clients
 * set an expiry interval
 * (plugin_opt_v5_sessions_persist true; see docs/design.md). 2.1 says so
 * itself, at the end of each connection (CLIENT_OFFLINE): a session seen
 * to last counts as lasting; one not seen yet counts as ending, and its
 * copies are set to wait for it when the broker says it lasts
 * (dlq__client_offline). The option is not used there. */
bool session_life__persists(enum broker_line line, const struct dlq *engine,
		const struct mosquitto *client)
{
	if(mosquitto_client_clean_session(client)) return false;
	if(mosquitto_client_protocol_version(client) != 5) return true;
	if(line == BROKER_LINE_21){
		const char *id = mosquitto_client_id(client);
		return id && dlq__session_lasts(engine, id);
	}
	return dlq__config(engine)->v5_sessions_persist;
}
