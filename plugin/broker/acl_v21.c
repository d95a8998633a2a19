/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The access-check adapter on Mosquitto 2.1 (registered with
 * plugin_opt_redelivery_tracking defer or allow, which mean the same here).
 * 2.1 lets a callback answer MOSQ_ERR_PLUGIN_IGNORE, "count me as absent"
 * (src/plugin_acl_check.c), so the plugin observes every check without
 * changing any decision, beside acl-file, dynamic-security or alone; it
 * answers only to remove a diverted message from a session. 2.1's READ
 * checks carry the stored message's properties: the message is found by the
 * dlq-id the plugin stamped on it.
 */
#include <mosquitto.h>
#include <mosquitto_broker.h>

#include "broker/acl.h"
#include "broker/adapters.h"
#include "broker/broker_v21.h"
#include "broker/props.h"
#include "mosquitto_dlq.h"

int adapter__acl_check_v21(int event, void *event_data, void *userdata)
{
	struct mosquitto_evt_acl_check *ed = event_data;
	struct dlq_plugin *pl = userdata;
	char id[DLQ_ID_LEN + 2];
	(void)event;

	struct dlq_read_check c;
	if(!acl__read_opening(pl, ed, &c)) return DLQ_MOSQ_ERR_PLUGIN_IGNORE;
	/* One character more than an id, so that a longer value is no id. */
	const char *stamp = props__last_user_value(&pl->caps.props, ed->properties, DLQ_PROP_ID, id, sizeof(id));
	c.id = stamp ? stamp : "";
	return dlq__read_check(pl->engine, &c) ? MOSQ_ERR_ACL_DENIED : DLQ_MOSQ_ERR_PLUGIN_IGNORE;
}
