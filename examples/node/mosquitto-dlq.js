// SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
//
// mosquitto-dlq for MQTT.js workers: copy this file next to your code. It
// spells the plugin's contract (include/mosquitto_dlq.h) for JavaScript and
// smooths what MQTT.js makes easy to get wrong: MQTT.js connects with MQTT
// 3.1.1 unless told otherwise, and then messages carry no dlq-id (connect
// asks for v5); user properties arrive as an object, so a name a publisher
// set too arrives as an array, the plugin's value last (dlqId takes the last);
// replies of the plugin arrive at the 'message' event like any other message
// (isReply, replyEntries).
'use strict';

const mqtt = require('mqtt');

// User properties (see the README's Properties table).
const PROP_ID = 'dlq-id';
const PROP_RETRY_COUNT = 'retry-count';
const PROP_DELIVERY_COUNT = 'delivery-count';
const PROP_ORIGIN_TOPIC = 'origin-topic';
const PROP_ORIGIN_ID = 'origin-id';
const PROP_DEAD_LETTER_REASON = 'dead-letter-reason';
const PROP_NACK_REASON = 'reason';
const PROP_NACK_DELAY_MS = 'delay-ms';

// Topics.
const CONTROL_TOPIC = '$CONTROL/dlq/v1';
const NACK_TOPIC = '$CONTROL/dlq/v1/nack';
const RESPONSE_TOPIC = '$CONTROL/dlq/v1/response';

// The message carries no dlq-id, so it cannot be NACKed.
class NotTrackedError extends Error {
  constructor (message) {
    super(message);
    this.name = 'NotTrackedError';
  }
}

// mqtt.connect with MQTT v5 forced: with MQTT.js's default, 3.1.1, the
// broker sends no properties and no message can be NACKed.
function connect (options) {
  return mqtt.connect({ ...options, protocolVersion: 5 });
}

// The value of the last user property called name, or undefined. The last,
// because the plugin appends its properties after any a publisher set under
// the same name, and MQTT.js gathers repeated names into an array.
function userProperty (packet, name) {
  const props = packet.properties && packet.properties.userProperties;
  if (!props || !Object.prototype.hasOwnProperty.call(props, name)) {
    return undefined;
  }
  const value = props[name];
  return Array.isArray(value) ? value[value.length - 1] : value;
}

// The message's dlq-id (packet: the third argument of the 'message' event).
// Throws NotTrackedError, saying why, when it has none.
function dlqId (packet) {
  const value = userProperty(packet, PROP_ID);
  if (typeof value === 'string') {
    return value;
  }
  // MQTT.js leaves out packet.properties when a message has none, on a v5
  // connection as on a 3.1.1 one; nack() tells the two apart.
  throw new NotTrackedError(`a message on ${packet.topic} carries no ${PROP_ID}: ` +
    'no policy covers the topic, or the plugin\'s memory bound was full when it was published');
}

// Which delivery of the message this is: 1 for the first, n + 1 for a
// retry copy with retry-count n. Throws a RangeError for a bad count.
function attempt (packet) {
  const count = userProperty(packet, PROP_RETRY_COUNT);
  if (count === undefined) {
    return 1;
  }
  if (typeof count !== 'string' || !/^[0-9]+$/.test(count)) {
    throw new RangeError(`bad ${PROP_RETRY_COUNT} ${JSON.stringify(count)} on ${packet.topic}`);
  }
  return Number(count) + 1;
}

// This delivery's number for this subscriber on Mosquitto 2.1, across
// resends and retry copies: the delivery-count property, which a first
// delivery does not carry (absent means 1, as RabbitMQ's x-delivery-count).
// undefined when the message carries no dlq-id (untracked, or Mosquitto 2.0,
// which stamps no delivery-count: use attempt()). Throws a RangeError for a
// bad count.
function deliveryCount (packet) {
  const count = userProperty(packet, PROP_DELIVERY_COUNT);
  if (count === undefined) {
    return userProperty(packet, PROP_ID) === undefined ? undefined : 1;
  }
  if (typeof count !== 'string' || !/^[1-9][0-9]*$/.test(count)) {
    throw new RangeError(`bad ${PROP_DELIVERY_COUNT} ${JSON.stringify(count)} on ${packet.topic}`);
  }
  return Number(count);
}

// Asks the plugin for a retry of the message (QoS 1 to NACK_TOPIC). reason
// (a string) becomes the dead letter's dead-letter-reason; delayMs holds the
// retry copy back, capped by the policy's retry_max_delay. Returns a promise
// that rejects when the broker refused the publish (its PUBACK reason code,
// e.g. 135 when the ACL denies $CONTROL/dlq/v1/nack); a NACK the plugin
// refuses is answered with a reply instead (see replyEntries). Throws
// NotTrackedError when the client is not on MQTT v5 or the message has no
// dlq-id.
function nack (client, packet, reason, delayMs) {
  if (client.options.protocolVersion !== 5) {
    throw new NotTrackedError('the client is not connected with MQTT v5: messages carry no ' +
      'dlq-id and cannot be NACKed (connect with protocolVersion: 5)');
  }
  const id = dlqId(packet);
  const userProperties = {};
  if (reason !== undefined && reason !== null) {
    userProperties[PROP_NACK_REASON] = String(reason);
  }
  if (delayMs !== undefined && delayMs !== null) {
    userProperties[PROP_NACK_DELAY_MS] = String(Math.max(0, Math.round(delayMs)));
  }
  return client.publishAsync(NACK_TOPIC, id, { qos: 1, properties: { userProperties } });
}

// Whether a message is a reply of the plugin's on $CONTROL/dlq/v1/..., which
// the broker sends to the requesting client alone, with no subscription, so
// it arrives at the 'message' event among the work.
function isReply (topic) {
  return topic.startsWith(CONTROL_TOPIC + '/');
}

// The entries of a reply, {"responses": [...]}: one per command, each with
// command and id, and error when it was refused. Their correlationData member
// is the JSON command's own; the MQTT v5 correlation data property is
// packet.properties.correlationData. Throws when the payload is not a reply.
function replyEntries (payload) {
  const doc = JSON.parse(payload.toString('utf8'));
  if (!doc || !Array.isArray(doc.responses)) {
    throw new SyntaxError(`not a reply: ${payload.toString('utf8').slice(0, 200)}`);
  }
  return doc.responses.filter((e) => e !== null && typeof e === 'object');
}

// What a reply of the plugin's says went wrong, one line each: every entry it
// refused, or that the payload is not a reply at all. A compact NACK without a
// response topic is answered only when it was refused, so a worker logs each
// line.
function replyProblems (payload) {
  let entries;
  try {
    entries = replyEntries(payload);
  } catch (err) {
    return [`unexpected reply: ${payload.toString('utf8').slice(0, 200)}`];
  }
  return entries.filter((e) => typeof e.error === 'string')
    .map((e) => `NACK of ${e.id ?? '?'} refused: ${e.error}`);
}

module.exports = {
  PROP_ID,
  PROP_RETRY_COUNT,
  PROP_ORIGIN_TOPIC,
  PROP_ORIGIN_ID,
  PROP_DEAD_LETTER_REASON,
  PROP_NACK_REASON,
  PROP_NACK_DELAY_MS,
  CONTROL_TOPIC,
  NACK_TOPIC,
  RESPONSE_TOPIC,
  NotTrackedError,
  connect,
  userProperty,
  dlqId,
  attempt,
  deliveryCount,
  nack,
  isReply,
  replyEntries,
  replyProblems
};
