# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
"""mosquitto-dlq for paho-mqtt workers: copy this file next to your code.

It spells the plugin's contract (include/mosquitto_dlq.h) for Python and
smooths what paho-mqtt makes easy to get wrong: paho connects with MQTT 3.1.1
unless told otherwise, and then messages carry no dlq-id (new_client asks for
v5); a message's ``properties`` attribute is missing on a 3.1.1 connection and
``UserProperty`` is missing, not empty, when there are none (user_property
copes with both); a publisher may set its own ``dlq-id``, and the plugin
appends the real one after it (dlq_id takes the last); replies of the plugin
arrive at ``on_message`` like any other message (is_reply, reply_entries);
paho's PUBACK is no ACK for a policy with an ack_timeout (ack, progress).
Works with paho-mqtt 1.6 (Debian 12) and 2.x (Debian 13).
"""

import datetime
import json

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

# User properties (see the table in docs/properties.md).
PROP_ID = "dlq-id"
PROP_RETRY_COUNT = "retry-count"
PROP_DELIVERY_COUNT = "delivery-count"
PROP_ORIGIN_TOPIC = "origin-topic"
PROP_ORIGIN_ID = "origin-id"
PROP_DEAD_LETTER_REASON = "dead-letter-reason"
PROP_DEAD_LETTER_FINAL = "dead-letter-final"
# One word saying why a dead letter was made (docs/semantics.md, "Dead-letter causes").
PROP_DEAD_LETTER_CAUSE = "dead-letter-cause"
# The name of the broker whose plugin made a dead letter (plugin_opt_broker_name).
PROP_DEAD_LETTER_BROKER = "dead-letter-broker"
PROP_NACK_REASON = "reason"
PROP_NACK_DELAY_MS = "delay-ms"
PROP_NACK_FINAL = "final"

# Topics.
CONTROL_TOPIC = "$CONTROL/dlq/v1"
NACK_TOPIC = "$CONTROL/dlq/v1/nack"
ACK_TOPIC = "$CONTROL/dlq/v1/ack"
PROGRESS_TOPIC = "$CONTROL/dlq/v1/progress"
RESPONSE_TOPIC = "$CONTROL/dlq/v1/response"


class NotTrackedError(ValueError):
    """The message carries no dlq-id, so it cannot be NACKed, ACKed or
    reported on."""


def new_client(client_id, **kwargs):
    """A paho client that speaks MQTT v5: with paho's default, 3.1.1, the
    broker sends no properties and no message can be NACKed. On paho 2.x it
    uses the version 2 callbacks, whose on_connect, on_subscribe and
    on_message have the same arguments as paho 1.6's v5 callbacks."""
    if hasattr(mqtt, "CallbackAPIVersion"):
        return mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id,
                           protocol=mqtt.MQTTv5, **kwargs)
    return mqtt.Client(client_id=client_id, protocol=mqtt.MQTTv5, **kwargs)


def user_property(message, name):
    """The value of the last user property called name, or None. The last,
    because the plugin appends its properties after any a publisher set
    under the same name."""
    # paho leaves out the attribute on a 3.1.1 connection, and UserProperty
    # when the message has none.
    props = getattr(message, "properties", None)
    value = None
    for key, val in getattr(props, "UserProperty", None) or []:
        if key == name:
            value = val
    return value


def dlq_id(message):
    """The message's dlq-id. Raises NotTrackedError, saying why, when it has
    none."""
    value = user_property(message, PROP_ID)
    if value is not None:
        return value
    if getattr(message, "properties", None) is None:
        raise NotTrackedError(
            f"a message on {message.topic} has no MQTT v5 properties: the client is connected "
            "with MQTT 3.1.1 and cannot NACK (create it with protocol=mqtt.MQTTv5)")
    raise NotTrackedError(
        f"a message on {message.topic} carries no {PROP_ID}: no policy covers the topic, "
        "or the plugin's memory bound was full when it was published")


def attempt(message):
    """Which delivery of the message this is: 1 for the first, n + 1 for a
    retry copy with retry-count n. Raises ValueError for a bad count."""
    count = user_property(message, PROP_RETRY_COUNT)
    if count is None:
        return 1
    if not count.isdigit():
        raise ValueError(f"bad {PROP_RETRY_COUNT} {count!r} on {message.topic}")
    return int(count) + 1


def delivery_count(message):
    """This delivery's number for this subscriber on Mosquitto 2.1, across
    resends and retry copies: the delivery-count property, which a first
    delivery does not carry (absent means 1, as RabbitMQ's
    x-delivery-count). None when the message carries no dlq-id (untracked,
    or Mosquitto 2.0, which stamps no delivery-count: use attempt()).
    Raises ValueError for a bad count."""
    count = user_property(message, PROP_DELIVERY_COUNT)
    if count is None:
        return 1 if user_property(message, PROP_ID) is not None else None
    if not count.isdigit() or count == "0":
        raise ValueError(f"bad {PROP_DELIVERY_COUNT} {count!r} on {message.topic}")
    return int(count)


def nack(client, message, reason=None, delay=None, final=False):
    """Asks the plugin for a retry of message (QoS 1 to NACK_TOPIC) and
    returns paho's MQTTMessageInfo. reason (a str) becomes the dead letter's
    dead-letter-reason; delay (seconds, or a datetime.timedelta) holds the
    retry copy back, capped by the policy's retry_max_delay; final=True says
    that the message can never succeed (a malformed job, say), so that it is
    dead-lettered at once, with dead-letter-final "true", instead of taking
    the attempts it has left. Raises NotTrackedError when the message has
    no dlq-id.

    A refused NACK is answered with a reply (see reply_entries), except when
    the broker's ACL refused the publish itself: then only paho 2.x's
    on_publish sees it, in its reason code."""
    ident = dlq_id(message)
    props = Properties(PacketTypes.PUBLISH)
    pairs = []
    if reason is not None:
        pairs.append((PROP_NACK_REASON, str(reason)))
    if delay is not None:
        if isinstance(delay, datetime.timedelta):
            delay = delay.total_seconds()
        pairs.append((PROP_NACK_DELAY_MS, str(max(0, round(delay * 1000)))))
    if final:
        pairs.append((PROP_NACK_FINAL, "true"))
    if pairs:
        props.UserProperty = pairs
    return client.publish(NACK_TOPIC, ident, qos=1, properties=props)


def ack(client, message):
    """Tells the plugin that message was processed (QoS 1 to ACK_TOPIC) and
    returns paho's MQTTMessageInfo. A policy with an ack_timeout needs it:
    a delivery neither ACKed nor NACKed in time is a failed attempt, as if
    it had been NACKed, and paho's PUBACK does not count, since paho sends
    it when on_message returns, whatever the work did. So ACK once the work
    is done, before on_message returns. Without an ack_timeout an ACK is
    accepted too, and the same client's later NACK of that delivery is then
    refused. Raises NotTrackedError when the message has no dlq-id.

    A refused ACK (too late, say: the deadline ran out first and a retry
    copy was made) is answered with a reply (see reply_problems)."""
    return client.publish(ACK_TOPIC, dlq_id(message), qos=1)


def progress(client, message):
    """Tells the plugin that the work on message goes on (QoS 1 to
    PROGRESS_TOPIC), so that its ack_timeout starts again: a job longer
    than the deadline stays alive as long as it reports. Returns paho's
    MQTTMessageInfo; raises NotTrackedError when the message has no dlq-id.

    paho writes nothing while on_message runs, whichever thread publishes,
    so progress sent during work done inside on_message leaves only when
    the work is over, too late: run the network loop in paho's own thread
    (loop_start), which then does all the writing, let on_message hand the
    job to a thread of its own and return, and report from that thread
    while the work runs. paho then acknowledges the message before the work
    is done; the ack_timeout, which runs until ack(), is what still catches
    a worker that dies (paho 2.x can hold the PUBACK back with
    manual_ack=True)."""
    return client.publish(PROGRESS_TOPIC, dlq_id(message), qos=1)


def is_reply(message):
    """Whether message is a reply of the plugin's on $CONTROL/dlq/v1/...,
    which the broker sends to the requesting client alone, with no
    subscription, so it arrives at on_message among the work."""
    return message.topic.startswith(CONTROL_TOPIC + "/")


def reply_entries(message):
    """The entries of a reply, {"responses": [...]}, as a list of dicts: one
    per command, each with "command" and "id", and "error" when it was
    refused. Their "correlationData" member is the JSON command's own; the
    MQTT v5 correlation data property is message.properties.CorrelationData.
    Raises ValueError when the payload is not a reply."""
    doc = json.loads(message.payload)
    entries = doc.get("responses") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"not a reply: {message.payload[:200]!r}")
    return [e for e in entries if isinstance(e, dict)]


def _command_name(entry):
    """How reply_problems names the command of a reply entry."""
    name = entry.get("command")
    if not isinstance(name, str):
        return "command"
    return {"nack": "NACK", "ack": "ACK"}.get(name, name)


def reply_problems(message):
    """What a reply of the plugin's says went wrong, one line each, naming
    the command ("ACK of <id> refused: ..."): every entry it refused, or
    that the payload is not a reply at all. A compact NACK, ACK or progress
    without a response topic is answered only when it was refused, so a
    worker logs each line."""
    try:
        entries = reply_entries(message)
    except ValueError:
        return [f"unexpected reply: {message.payload[:200]!r}"]
    return [f"{_command_name(e)} of {e.get('id', '?')} refused: {e['error']}" for e in entries if "error" in e]


def disconnect_reason(*args):
    """The reason an on_disconnect callback was given, as text: paho 1.6
    passes (client, userdata, rc, properties), paho 2.x (client, userdata,
    flags, reason_code, properties); the reason is second from the end in
    both."""
    reason = args[-2]
    return mqtt.error_string(reason) if isinstance(reason, int) else str(reason)
