/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A collected message read back into its dead letter (see collected.h):
 * one pass over its properties, each of the plugin's names into its slot
 * (a second of one is refused), the others kept as its original headers in
 * their order, then every slot checked as the plugin that wrote it would
 * have written it.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "model/cause.h"
#include "model/collected.h"
#include "mosquitto_dlq.h"
#include "util/errtext.h"
#include "util/headers.h"
#include "util/id.h"
#include "util/topic.h"

enum slot {
	S_ID, S_BROKER, S_ORIGIN_TOPIC, S_ORIGIN_ID, S_RETRY_COUNT, S_TIME, S_CAUSE, S_REASON, S_CLIENT, S_FILTER,
	S_FINAL, S_COUNT
};

/* The plugin's properties of a dead letter; all but dead-letter-final are
 * on every one (envelope__props). */
static const char *const slot_names[S_COUNT] = {
	[S_ID] = DLQ_PROP_DEAD_LETTER_ID,
	[S_BROKER] = DLQ_PROP_DEAD_LETTER_BROKER,
	[S_ORIGIN_TOPIC] = DLQ_PROP_ORIGIN_TOPIC,
	[S_ORIGIN_ID] = DLQ_PROP_ORIGIN_ID,
	[S_RETRY_COUNT] = DLQ_PROP_RETRY_COUNT,
	[S_TIME] = DLQ_PROP_DEAD_LETTER_TIME,
	[S_CAUSE] = DLQ_PROP_DEAD_LETTER_CAUSE,
	[S_REASON] = DLQ_PROP_DEAD_LETTER_REASON,
	[S_CLIENT] = DLQ_PROP_DEAD_LETTER_CLIENT,
	[S_FILTER] = DLQ_PROP_DEAD_LETTER_FILTER,
	[S_FINAL] = DLQ_PROP_DEAD_LETTER_FINAL,
};

static int slot_of(const char *name)
{
	for(int i = 0; i < S_COUNT; i++){
		if(!strcmp(name, slot_names[i])) return i;
	}
	return -1;
}

/* retry-count: a whole number a dead letter's uint16_t holds, as
 * put_count writes it (no sign, no leading zero but "0"). */
static bool parse_count(const char *s, uint16_t *out)
{
	size_t n = strlen(s);
	if(n == 0 || n > 5 || (n > 1 && s[0] == '0')) return false;
	unsigned long v = 0;
	for(size_t i = 0; i < n; i++){
		if(s[i] < '0' || s[i] > '9') return false;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if(v > UINT16_MAX) return false;
	*out = (uint16_t)v;
	return true;
}

/* Checks each slot's value; returns the name of the first that is wrong
 * (why says how), or NULL. */
static const char *check_slots(const char *const v[S_COUNT], struct dlq_id *id, struct dlq_id *origin_id,
		uint16_t *retry_count, int64_t *time_ms, enum dlq_cause *cause, const char **why)
{
	for(int i = 0; i < S_COUNT; i++){
		if(v[i] == NULL && i != S_FINAL){
			*why = "missing";
			return slot_names[i];
		}
	}
	*why = "not 16 base64url characters";
	if(!id__decode(v[S_ID], strlen(v[S_ID]), id) || id__is_zero(id)) return slot_names[S_ID];
	if(!id__decode(v[S_ORIGIN_ID], strlen(v[S_ORIGIN_ID]), origin_id)) return slot_names[S_ORIGIN_ID];
	if((*why = topic__broker_name_problem(v[S_BROKER])) != NULL) return slot_names[S_BROKER];
	*why = "not a topic a message can be published to";
	if(!topic__valid_publish(v[S_ORIGIN_TOPIC])) return slot_names[S_ORIGIN_TOPIC];
	*why = "not a topic filter";
	if(!topic__valid_filter(v[S_FILTER])) return slot_names[S_FILTER];
	*why = "not a whole number from 0 to 65535";
	if(!parse_count(v[S_RETRY_COUNT], retry_count)) return slot_names[S_RETRY_COUNT];
	*why = "not RFC 3339 UTC time";
	if(!envelope__parse_time(v[S_TIME], time_ms)) return slot_names[S_TIME];
	*why = "not a dead-letter cause";
	if(!cause__parse(v[S_CAUSE], cause)) return slot_names[S_CAUSE];
	*why = "not \"true\"";
	if(v[S_FINAL] && strcmp(v[S_FINAL], "true")) return slot_names[S_FINAL];
	*why = NULL;
	return NULL;
}

int collected__letter(const char *topic, const void *payload, uint32_t payload_len, uint8_t qos,
		const uint8_t *headers, size_t headers_len, struct dlq_envelope **out, char *why, size_t whylen)
{
	const char *v[S_COUNT] = {NULL};
	struct dlq_headers own = {0}; /* the original headers: all but the plugin's */
	struct dlq_header h;
	size_t pos = 0;
	int rc = EINVAL;

	*out = NULL;
	while(headers_len && headers__next(headers, headers_len, &pos, &h)){
		if(h.kind != DLQ_HDR_USER_PROPERTY || !headers__is_reserved(h.a, h.a_len)){
			if(h.kind == DLQ_HDR_SUBSCRIPTION_ID) continue; /* one hop's */
			rc = headers__add(&own, h.kind, h.a, h.a_len, h.b, h.b_len);
			if(rc) goto error;
			continue;
		}
		int s = slot_of(h.a);
		/* Another of the plugin's names (dlq-id, first-nack-time, one a
		 * later version writes): not the dead letter's, not kept. */
		if(s < 0) continue;
		if(v[s]){
			errtext__set(why, whylen, "user property %s given twice", slot_names[s]);
			rc = EINVAL;
			goto error;
		}
		v[s] = h.b;
	}
	if(pos != headers_len){
		errtext__set(why, whylen, "its properties could not be read");
		rc = EINVAL;
		goto error;
	}
	struct dlq_id id, origin_id;
	uint16_t retry_count = 0;
	int64_t time_ms = 0;
	enum dlq_cause cause = DLQ_DEAD_UNKNOWN;
	const char *problem;
	const char *bad = check_slots(v, &id, &origin_id, &retry_count, &time_ms, &cause, &problem);
	if(bad){
		if(v[slot_of(bad)]){
			errtext__set(why, whylen, "user property %s " QFMT ": %s", bad, Q(v[slot_of(bad)]), problem);
		}else{
			errtext__set(why, whylen, "user property %s %s", bad, problem);
		}
		rc = EINVAL;
		goto error;
	}
	struct dlq_envelope *e = envelope__new(DLQ_ENV_DEAD_LETTER, NULL, topic, v[S_ORIGIN_TOPIC], v[S_FILTER], topic,
			v[S_REASON], v[S_CLIENT], v[S_BROKER], payload, payload_len, own.data, (uint32_t)own.len);
	if(e == NULL){
		rc = ENOMEM;
		goto error;
	}
	e->id = id;
	e->origin_id = origin_id;
	e->retry_count = retry_count;
	e->time_ms = time_ms;
	e->cause = (uint8_t)cause;
	e->final = v[S_FINAL] != NULL;
	e->qos = qos;
	headers__free(&own);
	*out = e;
	return 0;

error:
	headers__free(&own);
	return rc;
}
