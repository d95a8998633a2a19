/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * One send's property list on Mosquitto 2.1 (send_props_v21.c): what
 * MESSAGE_OUT hands the broker in place of a stored list when the send
 * carries a delivery-count, built cheaply where the broker's node layout
 * is known to be 2.1.2's.
 */
#ifndef DLQ_SEND_PROPS_V21_H
#define DLQ_SEND_PROPS_V21_H

#include <stdbool.h>
#include <stddef.h>

#include <mosquitto.h>

#include "broker_caps.h"

/* Whether a property list the broker builds reads back through its own
 * accessors (v, all set) as 2.1.2's node layout says. Called once at
 * startup on 2.1 (broker_caps.c); its answer is v->layout_ok. */
bool send_props_v21__check(const struct broker_props_v21 *v);

/* *out: a new list, every property of stored (borrowed, may be NULL) in
 * its order, then the user property delivery-count = count (count_len
 * bytes, digits). The caller owns *out (the broker frees it after the
 * send: mosquitto_property_free_all). Returns MOSQ_ERR_SUCCESS, or
 * MOSQ_ERR_NOMEM (or the broker's error) with *out NULL. */
int send_props_v21__with_count(const struct broker_props_v21 *v, const mosquitto_property *stored,
		const char *count, size_t count_len, mosquitto_property **out);

#endif
