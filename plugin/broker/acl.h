/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The opening both broker lines' access-check adapters share (acl_v20.c,
 * acl_v21.c): which checks are the plugin's business at all. Each line then
 * answers in its own way; inline, since the broker asks on every delivery.
 */
#ifndef DLQ_ACL_H
#define DLQ_ACL_H

#include <stdbool.h>
#include <stdint.h>

#include <mosquitto.h>
#include <mosquitto_broker.h>

#include "broker/adapters.h"

/* Fills *c with the READ check of a delivery for the engine to look at and
 * returns true. Returns false, *c untouched, for a check that is none of
 * the plugin's business, which the caller answers with its "no opinion":
 * the plugin's own check (for a NACK: no delivery), one without client or
 * topic (the engine hears of an event), and a publish or subscribe (the
 * engine hears that the client is active). The strings in *c are borrowed
 * from ed. */
static inline bool acl__read_opening(struct dlq_plugin *pl, const struct mosquitto_evt_acl_check *ed,
		struct dlq_read_check *c)
{
	if(pl->own_check) return false;
	const char *client = mosquitto_client_id(ed->client);
	if(client == NULL || ed->topic == NULL){
		dlq__event(pl->engine);
		return false;
	}
	if(ed->access != MOSQ_ACL_READ){
		/* Publishing and subscribing need a live connection. */
		dlq__client_active(pl->engine, client, (uintptr_t)ed->client);
		return false;
	}
	*c = (struct dlq_read_check){
		.client = client,
		.conn = (uintptr_t)ed->client,
		.topic = ed->topic,
		.payload = ed->payload,
		.payload_len = ed->payloadlen,
		.qos = ed->qos,
	};
	return true;
}

#endif
