/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The fake broker port of the unit tests (tests/unit/fake_port.c), with
 * port__publish checking first what the real port and the broker would
 * refuse: no topic, an empty topic or one with wildcards or invalid UTF-8, a
 * QoS above 2, headers that do not become MQTT v5 properties (props.c, as
 * port_mosquitto.c converts them); and what a subscriber would refuse: a
 * property string that is not valid UTF-8. The plugin never means to publish
 * such a thing (an envelope the broker refuses stays owed and is tried again
 * on every tick for ever; one a subscriber refuses disconnects it), so a fuzz
 * target treats it as a finding (an abort naming the envelope) rather than
 * letting the fake accept it.
 */
#define port__publish fake_port__publish
#define FAKE_PORT_PUBLISH_ENTRY fuzz_port__publish_entry
#include "../unit/fake_port.c"
#undef port__publish

#include <mosquitto.h>

#include "broker/props.h"
#include "fuzz.h"
#include "util/headers.h"
#include "util/topic.h"

/* True if every string of the header list is valid UTF-8, as a subscriber
 * checks it (libmosquitto's packet reader, for one): a client that receives
 * an invalid one must close its connection (MQTT 5, 1.5.4). The broker's
 * property API does not check it, so the broker would send it. */
static bool headers_valid_utf8(const uint8_t *headers, size_t headers_len, char *what, size_t what_len)
{
	size_t pos = 0;
	struct dlq_header h;
	while(headers__next(headers, headers_len, &pos, &h)){
		bool text = h.kind == DLQ_HDR_CONTENT_TYPE || h.kind == DLQ_HDR_RESPONSE_TOPIC || h.kind == DLQ_HDR_USER_PROPERTY;
		bool bad_a = text && mosquitto_validate_utf8(h.a, h.a_len) != MOSQ_ERR_SUCCESS;
		bool bad_b = h.b && mosquitto_validate_utf8(h.b, h.b_len) != MOSQ_ERR_SUCCESS;
		if(bad_a || bad_b){
			snprintf(what, what_len, "header %u \"%.40s\" = \"%.40s...\" (%u bytes)", h.kind, h.a, h.b ? h.b : "",
					(unsigned)(h.b ? h.b_len : h.a_len));
			return false;
		}
	}
	return true;
}

int port__publish(const char *client, const char *topic, uint8_t qos, bool retain,
		const void *payload, uint32_t payload_len, const uint8_t *headers, size_t headers_len)
{
	char what[160];

	FUZZ_CHECK(topic != NULL, "publish without a topic (client %s, %u bytes)", client ? client : "(none)", payload_len);
	FUZZ_CHECK(topic__valid_publish(topic), "publish to \"%s\", which the broker refuses", topic);
	FUZZ_CHECK(qos <= 2, "publish to \"%s\" with QoS %u, which the broker refuses", topic, qos);
	mosquitto_property *props = NULL;
	int rc = props__from_headers(headers, headers_len, &props);
	mosquitto_property_free_all(&props);
	FUZZ_CHECK(rc == 0, "publish to \"%s\": its headers do not become properties (%d)", topic, rc);
	FUZZ_CHECK(headers_valid_utf8(headers, headers_len, what, sizeof(what)),
			"publish to \"%s\" with invalid UTF-8 in %s: its subscribers must drop the connection", topic, what);
	return fake_port__publish(client, topic, qos, retain, payload, payload_len, headers, headers_len);
}

/* Where the fake's port__publish_with ends: the checks above. */
int fuzz_port__publish_entry(const char *client, const char *topic, uint8_t qos, bool retain,
		const void *payload, uint32_t payload_len, const uint8_t *headers, size_t headers_len)
{
	return port__publish(client, topic, qos, retain, payload, payload_len, headers, headers_len);
}

bool fuzz_port_would_refuse(const char *topic, uint8_t qos, const uint8_t *headers, size_t headers_len)
{
	char what[160];

	if(topic == NULL || !topic__valid_publish(topic) || qos > 2) return true;
	mosquitto_property *props = NULL;
	int rc = props__from_headers(headers, headers_len, &props);
	mosquitto_property_free_all(&props);
	return rc != 0 || !headers_valid_utf8(headers, headers_len, what, sizeof(what));
}
