/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Thin adapters between the broker's events and the engine (see
 * adapters.h). Every adapter returns MOSQ_ERR_SUCCESS: an error from a
 * MESSAGE or CONTROL callback would disconnect the client that sent it,
 * and no client is to blame for the plugin's troubles.
 */
#include <errno.h>
#include <string.h>

#include <mosquitto.h>
#include <mosquitto_broker.h>
#include <mqtt_protocol.h>

#include "api/control.h"
#include "broker/adapters.h"
#include "broker/broker_v21.h"
#include "broker/session_life.h"
#include "broker/props.h"
#include "mosquitto_dlq.h"
#include "util/errtext.h"
#include "util/headers.h"
#include "util/port.h"

/* The broker fires TICK about ten times a second; none for this long while
 * traffic flows means it never will (per_listener_settings true). */
#define NO_TICK_WARN_MS 10000

/* A tracked message looks whether ticks came since the last one looked, so
 * that a TICK itself need not read the clock; and it reads the clock only
 * when none came, which under load (a tick per message or so) is rare. */
static void check_ticks(struct dlq_plugin *pl)
{
	if(pl->warned_no_tick) return;
	if(pl->ticks != pl->ticks_seen){
		pl->ticks_seen = pl->ticks;
		pl->ticks_seen_ms = 0;
		return;
	}
	uint64_t now = port__now_ms();
	if(pl->ticks_seen_ms == 0){
		pl->ticks_seen_ms = now;
	}else if(now - pl->ticks_seen_ms > NO_TICK_WARN_MS){
		pl->warned_no_tick = true;
		port__log(DLQ_LOG_ERR, "the broker sends this plugin no TICK events (per_listener_settings true?): "
				"NACK windows will not expire and failed publishes will not be retried");
	}
}

/* An inbound publish that matched policy: recorded and stamped. Apart from
 * adapter__message so that the untracked path, nearly every message on most
 * brokers, pays for none of this one's stack and registers. */
static __attribute__((noinline)) void track_message(struct dlq_plugin *pl, struct mosquitto_evt_message *ed,
		const struct dlq_policy *policy)
{
	check_ticks(pl);

	struct dlq_headers h = {0};
	char id[DLQ_ID_LEN + 1];
	/* Most publishers send no properties: nothing to read or free. */
	int rc = ed->properties ? props__to_headers(&pl->caps.props, ed->properties, &h) : 0;
	if(rc == 0){
		rc = dlq__track(pl->engine, policy, ed->topic, ed->payload, ed->payloadlen, ed->qos, h.data, h.len, id);
	}
	if(h.data) headers__free(&h);
	if(rc == 0){
		/* Appending in place is the one change to the property list that
		 * is safe on every 2.0.x broker. */
		if(mosquitto_property_add_string_pair(&ed->properties, MQTT_PROP_USER_PROPERTY, DLQ_PROP_ID, id)){
			port__log(DLQ_LOG_ERR, "out of memory: message on " QFMT " delivered without a dlq-id", Q(ed->topic));
		}
	}else if(rc == ENOMEM){
		port__log(DLQ_LOG_ERR, "out of memory: message on " QFMT " not tracked", Q(ed->topic));
	}
}

/* A message of no policy on a broker that collects or takes redrive
 * requests: kept in the store when it is on a plugin_opt_collect filter
 * (engine/collect.c), redriven when it is a request on
 * plugin_opt_redrive_from's topic (engine/redrive_request.c). It goes on
 * to its subscribers unchanged whatever the plugin made of it. */
static __attribute__((noinline)) void maybe_collect(struct dlq_plugin *pl, struct mosquitto_evt_message *ed)
{
	bool collect = dlq__collects(pl->engine, ed->topic);
	if(!collect && !dlq__redrive_requested(pl->engine, ed->topic)) return;
	struct dlq_headers h = {0};
	if(ed->properties && props__all_to_headers(&pl->caps.props, ed->properties, &h)){
		headers__free(&h);
		port__log(DLQ_LOG_ERR, "out of memory: the message on " QFMT " (%s) is not read", Q(ed->topic),
				collect ? "plugin_opt_collect" : "plugin_opt_redrive_from");
		return;
	}
	struct dlq_collected_msg m = {
		.topic = ed->topic,
		.client = mosquitto_client_id(ed->client),
		.payload = ed->payload,
		.payload_len = ed->payloadlen,
		.qos = ed->qos,
		.headers = h.data,
		.headers_len = h.len,
	};
	if(collect) dlq__collect(pl->engine, &m);
	else dlq__redrive_request(pl->engine, &m);
	headers__free(&h);
}

/* A message the match cache had no answer for. */
static __attribute__((noinline)) int message_not_plain(struct dlq_plugin *pl, struct mosquitto_evt_message *ed)
{
	const struct dlq_policy *policy = dlq__policy_missed(pl->engine, ed->topic);
	if(policy) track_message(pl, ed, policy);
	else if(pl->collecting) maybe_collect(pl, ed);
	return MOSQ_ERR_SUCCESS;
}

int adapter__message(int event, void *event_data, void *userdata)
{
	struct mosquitto_evt_message *ed = event_data;
	struct dlq_plugin *pl = userdata;
	(void)event;

	dlq__quiet_event(pl->engine);
	/* The common case, a topic the cache knows to match no policy, in
	 * as few instructions as it takes: no call but strlen. */
	const struct dlq_policy *policy;
	bool hit = dlq__policy_cached(pl->engine, ed->topic, &policy);
	if(hit){
		if(policy) track_message(pl, ed, policy);
		else if(pl->collecting) maybe_collect(pl, ed);
		return MOSQ_ERR_SUCCESS;
	}
	return message_not_plain(pl, ed);
}

/* Sends a reply to the requesting client only, so that one client never sees
 * another's dlq-ids, and so that a response topic cannot be used to publish
 * where the client itself may not. */
static void send_reply(const char *client, const char *topic, const char *json,
		const void *correlation, uint16_t correlation_len)
{
	struct dlq_headers h = {0};
	if(correlation && headers__add(&h, DLQ_HDR_CORRELATION_DATA, correlation, correlation_len, NULL, 0)){
		headers__free(&h);
		port__log(DLQ_LOG_ERR, "out of memory: reply to " QFMT " not sent", Q(client));
		return;
	}
	int rc = port__publish(client, topic, 1, false, json, (uint32_t)strlen(json), h.data, h.len);
	if(rc){
		port__log(DLQ_LOG_WARNING, "reply to " QFMT " on " QFMT " not sent: %s", Q(client), Q(topic), strerror(rc));
	}
	headers__free(&h);
}

struct read_probe {
	struct dlq_plugin *pl;
	struct mosquitto *client;
};

/* The broker's own answer to "may this client read (write) that
 * message", as it would give it for a delivery (a publish): every ACL
 * source in order, this plugin's callback staying out of it. */
static int may(struct read_probe *p, const char *topic, const void *payload, uint32_t len, uint8_t qos, int access)
{
	p->pl->own_check = true;
	int rc = broker_caps__acl_check(&p->pl->caps, p->client, topic, len, (void *)payload, qos, false, access);
	p->pl->own_check = false;
	return rc == MOSQ_ERR_SUCCESS ? 0 : EACCES;
}

static int may_read(void *ctx, const char *topic, const void *payload, uint32_t len, uint8_t qos)
{
	return may(ctx, topic, payload, len, qos, MOSQ_ACL_READ);
}

/* A redrive's target. */
static int may_write(void *ctx, const char *topic, const void *payload, uint32_t len, uint8_t qos)
{
	return may(ctx, topic, payload, len, qos, MOSQ_ACL_WRITE);
}

/* A compact NACK's user property called name, read whole (a value cut to a
 * buffer would be read as another: "0…05000" as 5), or NULL when there is
 * none; *copy is the reader's copy, to free. */
static const char *nack_prop(const struct dlq_plugin *pl, const mosquitto_property *props, const char *name,
		char **copy)
{
	if(!props__user_copy(&pl->caps.props, props, name, copy)) return NULL;
	return *copy ? *copy : ""; /* 2.1's empty value */
}

int adapter__control(int event, void *event_data, void *userdata)
{
	struct mosquitto_evt_control *ed = event_data;
	struct dlq_plugin *pl = userdata;
	char *reason = NULL;
	char *delay = NULL;
	char *final = NULL;
	char *response_topic = NULL;
	void *correlation = NULL;
	uint16_t correlation_len = 0;
	struct dlq_control_reply reply;
	(void)event;

	dlq__event(pl->engine);
	const char *client = mosquitto_client_id(ed->client);
	if(client == NULL) return MOSQ_ERR_SUCCESS;

	struct dlq_control_request req = {
		.compact = control__compact_of(ed->topic),
		.payload = ed->payload,
		.payload_len = ed->payloadlen,
		.client = client,
		.client_persists = session_life__persists(pl->caps.line, pl->engine, ed->client),
		.client_settles = mosquitto_client_protocol_version(ed->client) == 5,
		.reason = NULL,
		.delay_ms = NULL,
	};
	if(req.compact == DLQ_COMPACT_NACK){
		req.reason = nack_prop(pl, ed->properties, DLQ_PROP_NACK_REASON, &reason);
		req.delay_ms = nack_prop(pl, ed->properties, DLQ_PROP_NACK_DELAY_MS, &delay);
		req.final = nack_prop(pl, ed->properties, DLQ_PROP_NACK_FINAL, &final);
	}
	/* 2.1 gives NULL for an empty response topic or correlation data: the
	 * property is there all the same, and "" it is. */
	bool has_response_topic = props__string(&pl->caps.props, ed->properties, MQTT_PROP_RESPONSE_TOPIC, &response_topic);
	bool has_correlation = props__binary(&pl->caps.props, ed->properties, MQTT_PROP_CORRELATION_DATA, &correlation,
			&correlation_len);
	req.reply_wanted = has_response_topic;
	req.response_topic = has_response_topic ? (response_topic ? response_topic : "") : NULL;
	struct read_probe probe = { .pl = pl, .client = ed->client };
	if(pl->caps.acl_check){
		req.may_read = may_read;
		req.may_write = may_write;
		req.may_read_ctx = &probe;
	}

	if(control__handle(pl->engine, &req, &reply)){
		port__log(DLQ_LOG_ERR, "out of memory handling a control message from " QFMT, Q(client));
	}else if(reply.must_send){
		const void *corr = has_response_topic && has_correlation ? (correlation ? correlation : "") : NULL;
		send_reply(client, reply.topic, reply.json, corr, correlation_len);
	}
	control__reply_free(&reply);
	pl->caps.props.free_copy(reason);
	pl->caps.props.free_copy(delay);
	pl->caps.props.free_copy(final);
	pl->caps.props.free_copy(response_topic);
	pl->caps.props.free_copy(correlation);
	return MOSQ_ERR_SUCCESS;
}

int adapter__tick(int event, void *event_data, void *userdata)
{
	struct dlq_plugin *pl = userdata;
	(void)event;
	(void)event_data;

	pl->ticks++;
	dlq__quiet_event(pl->engine);
	uint64_t now = dlq__tick(pl->engine);
	/* The status topics read the engine after its tick, at its time. */
	if(dlq__config(pl->engine)->sys_interval_ms){
		systopics__tick(&pl->sys, pl->engine, now ? now : port__now_ms());
	}
	return MOSQ_ERR_SUCCESS;
}

void adapter__connection_ended(struct dlq_plugin *pl, struct mosquitto *client, enum adapter_end how)
{
	dlq__event(pl->engine);
	const char *id = mosquitto_client_id(client);
	if(id == NULL) return;
	dlq__client_left(pl->engine, id, (uintptr_t)client, mosquitto_client_clean_session(client));
	switch(how){
		case ADAPTER_END_LASTS:
			dlq__client_offline(pl->engine, id);
			break;
		case ADAPTER_END_TAKEN_OVER:
			dlq__client_taken_over(pl->engine, id);
			break;
		case ADAPTER_END_GONE:
		default:
			dlq__client_gone(pl->engine, id);
			break;
	}
}

int adapter__disconnect(int event, void *event_data, void *userdata)
{
	struct mosquitto_evt_disconnect *ed = event_data;
	(void)event;

	adapter__connection_ended(userdata, ed->client,
			ed->reason == DLQ_MOSQ_ERR_SESSION_TAKEN_OVER ? ADAPTER_END_TAKEN_OVER : ADAPTER_END_GONE);
	return MOSQ_ERR_SUCCESS;
}

void adapter__log_no_policies(void)
{
	port__log(DLQ_LOG_NOTICE, "no policies: nothing is tracked and nothing is changed; write plugin_opt_policy "
			"lines in the file that holds the plugin line, or name a JSON policy file there with "
			"plugin_opt_policy_file (SIGHUP re-reads it)");
}

int adapter__reload(int event, void *event_data, void *userdata)
{
	struct dlq_plugin *pl = userdata;
	char err[1024];
	(void)event;
	(void)event_data;

	dlq__event(pl->engine);
	if(dlq__config(pl->engine)->policy_file == NULL){
		port__log(DLQ_LOG_NOTICE, "reload: policies unchanged (they come from plugin_opt_policy lines only, "
				"which Mosquitto does not pass again; use plugin_opt_policy_file for policies that reload)");
	}else if(dlq__reload(pl->engine, pl->options, pl->option_count, err, sizeof(err))){
		port__log(DLQ_LOG_ERR, "reload refused, the policies in use stay: %s", err);
	}else{
		port__log(DLQ_LOG_NOTICE, "reload: %zu policies in use (%s re-read)", dlq__config(pl->engine)->policies.count,
				dlq__config(pl->engine)->policy_file);
		if(dlq__config(pl->engine)->policies.count == 0) adapter__log_no_policies();
	}
	/* 2.0: any other answer would stop the broker from reloading the
	 * plugins after this one (src/security.c). 2.1 reloads them all and
	 * takes anything but success as an error that ends the broker. */
	return pl->caps.line == BROKER_LINE_21 ? MOSQ_ERR_SUCCESS : MOSQ_ERR_PLUGIN_DEFER;
}
