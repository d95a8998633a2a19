/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The $CONTROL API: decodes a compact settlement ($CONTROL/dlq/v1/nack, .../ack
 * or .../progress, payload = dlq-id) or a JSON command document
 * ($CONTROL/dlq/v1, dynamic-security's shape), runs each command against the
 * engine and writes the JSON reply,
 * {"responses":[...]}. Nothing here touches the broker.
 */
#ifndef DLQ_CONTROL_H
#define DLQ_CONTROL_H

#include <stdbool.h>
#include <stddef.h>

#include "engine/dlq.h"

/* Which compact form a message is: its topic says. */
enum dlq_compact {
	DLQ_COMPACT_NONE = 0,    /* $CONTROL/dlq/v1: JSON commands */
	DLQ_COMPACT_NACK = 1,    /* $CONTROL/dlq/v1/nack */
	DLQ_COMPACT_ACK = 2,     /* $CONTROL/dlq/v1/ack */
	DLQ_COMPACT_PROGRESS = 3,/* $CONTROL/dlq/v1/progress */
};

/* The compact form of a control topic, or DLQ_COMPACT_NONE. */
enum dlq_compact control__compact_of(const char *topic);

struct dlq_control_request {
	enum dlq_compact compact;/* a compact form (payload = dlq-id), or DLQ_COMPACT_NONE: JSON */
	const void *payload;     /* borrowed */
	size_t payload_len;
	const char *client;      /* borrowed: the sender's client id */
	bool client_persists;    /* the sender's session outlives its connection */
	bool client_settles;     /* the sender reads dlq-ids (MQTT v5): its retry copies are held to deadlines */
	const char *reason;      /* borrowed: compact NACK's "reason" user property, or NULL */
	const char *delay_ms;    /* borrowed: compact NACK's "delay-ms" user property, or NULL */
	const char *final;       /* borrowed: compact NACK's "final" user property, or NULL */
	bool reply_wanted;       /* a reply goes out whatever happens (the request has a response topic) */
	const char *response_topic; /* borrowed: the request's v5 response topic as read ("" for an
	                          * empty one, which 2.1 hands over as NULL), or NULL: none */
	dlq_may_read_fn may_read;/* the sender's read permission, for NACKs and kept letters (NULL: not checked) */
	dlq_may_read_fn may_write; /* the sender's write permission, for redrives (NULL: not checked) */
	void *may_read_ctx;      /* for both */
};

struct dlq_control_reply {
	char *json;              /* owned (cJSON's allocator): {"responses":[...]}; NULL when
	                          * must_send is false (a compact NACK that went well and wants
	                          * no reply: the hot path, so nothing is built for it) */
	unsigned errors;         /* how many commands failed */
	bool must_send;          /* JSON commands and errors always get a reply */
	const char *topic;       /* borrowed (req->response_topic or a constant): where the reply
	                          * goes; the default topic when the response topic is not a
	                          * valid topic name, and the reply then says so in
	                          * "responseTopicError" */
};

/* Returns 0 or ENOMEM (then reply->json is NULL). reply->must_send is true
 * for JSON commands, for any error, and when req->reply_wanted. */
int control__handle(struct dlq *d, const struct dlq_control_request *req, struct dlq_control_reply *reply);

void control__reply_free(struct dlq_control_reply *reply);

#endif
