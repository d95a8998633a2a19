/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The access-check adapter on Mosquitto 2.0 (registered with
 * plugin_opt_redelivery_tracking defer or allow). 2.0 has no way for a
 * callback to stay out of a decision, and its READ checks carry no
 * properties: the message is found by its payload (redelivery.h).
 */
#include <mosquitto.h>
#include <mosquitto_broker.h>

#include "broker/acl.h"
#include "broker/adapters.h"
#include "broker/session_life.h"

/* The broker's access check. The answer is a decision, not an observation
 * (measured: docs/design.md, "Broker versions"; tests/integration/test_redelivery.c): where the plugin has no opinion it answers
 * as the operator chose, "no opinion" (defer: acl_file or a later plugin
 * decides) or "allowed" (allow: there is no other ACL source, which the
 * plugin checked at startup). It denies only a READ check for a message it
 * removes from a session (see redelivery.h). */
int adapter__acl_check_v20(int event, void *event_data, void *userdata)
{
	struct mosquitto_evt_acl_check *ed = event_data;
	struct dlq_plugin *pl = userdata;
	(void)event;

	int no_opinion = dlq__config(pl->engine)->redelivery == DLQ_REDELIVERY_ALLOW ? MOSQ_ERR_SUCCESS : MOSQ_ERR_PLUGIN_DEFER;
	struct dlq_read_check c;
	if(!acl__read_opening(pl, ed, &c)) return no_opinion;
	/* Deadlines hold only subscribers that can settle, and a delivery
	 * routed to a session that ends is not waited for. */
	if(dlq__any_deadlines(pl->engine)){
		c.settles = mosquitto_client_protocol_version(ed->client) == 5;
		c.persists = session_life__persists(pl->caps.line, pl->engine, ed->client);
	}
	return dlq__read_check(pl->engine, &c) ? MOSQ_ERR_ACL_DENIED : no_opinion;
}
