/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The fake broker port of the unit tests (tests/unit/fake_port.c), with
 * port__publish checking first what the real port and the broker would
 * refuse: no topic, an empty topic or one with wildcards or invalid UTF-8, a
 * QoS above 2, headers that do not become MQTT v5 properties (props.c, as
 * port_mosquitto.c converts them). The plugin never means to publish such a
 * thing, and an envelope the broker refuses stays owed and is tried again on
 * every tick for ever, so a fuzz target treats it as a finding (an abort
 * naming the envelope) rather than letting the fake accept it.
 */
#define port__publish fake_port__publish
#include "../unit/fake_port.c"
#undef port__publish

#include <mosquitto.h>

#include "fuzz.h"
#include "props.h"
#include "topic.h"

int port__publish(const char *client, const char *topic, uint8_t qos, bool retain,
		const void *payload, uint32_t payload_len, const uint8_t *headers, size_t headers_len)
{
	FUZZ_CHECK(topic != NULL, "publish without a topic (client %s, %u bytes)", client ? client : "(none)", payload_len);
	FUZZ_CHECK(topic__valid_publish(topic), "publish to \"%s\", which the broker refuses", topic);
	FUZZ_CHECK(qos <= 2, "publish to \"%s\" with QoS %u, which the broker refuses", topic, qos);
	mosquitto_property *props = NULL;
	int rc = props__from_headers(headers, headers_len, &props);
	mosquitto_property_free_all(&props);
	FUZZ_CHECK(rc == 0, "publish to \"%s\": its headers do not become properties (%d)", topic, rc);
	return fake_port__publish(client, topic, qos, retain, payload, payload_len, headers, headers_len);
}

bool fuzz_port_would_refuse(const char *topic, uint8_t qos, const uint8_t *headers, size_t headers_len)
{
	if(topic == NULL || !topic__valid_publish(topic) || qos > 2) return true;
	mosquitto_property *props = NULL;
	int rc = props__from_headers(headers, headers_len, &props);
	mosquitto_property_free_all(&props);
	return rc != 0;
}
