// SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
//
// mosquitto-dlq for MQTT.js workers: copy this file next to your code. It
// spells the plugin's contract (include/mosquitto_dlq.h) for JavaScript and
// smooths what MQTT.js makes easy to get wrong: MQTT.js connects with MQTT
// 3.1.1 unless told otherwise, and then messages carry no dlq-id (connect
// asks for v5); user properties arrive as an object, so a name a publisher
// set too arrives as an array, the plugin's value last (dlqId takes the last);
// replies of the plugin arrive at the 'message' event like any other message
// (isReply, replyEntries); MQTT.js's PUBACK is no ACK for a policy with an
// ack_timeout (ack, progress).
'use strict';

const mqtt = require('mqtt');

// User properties (see the table in docs/properties.md).
const PROP_ID = 'dlq-id';
const PROP_RETRY_COUNT = 'retry-count';
const PROP_DELIVERY_COUNT = 'delivery-count';
const PROP_ORIGIN_TOPIC = 'origin-topic';
const PROP_ORIGIN_ID = 'origin-id';
const PROP_DEAD_LETTER_REASON = 'dead-letter-reason';
const PROP_DEAD_LETTER_FINAL = 'dead-letter-final';
// One word saying why a dead letter was made (docs/semantics.md, "Dead-letter causes").
const PROP_DEAD_LETTER_CAUSE = 'dead-letter-cause';
// The name of the broker whose plugin made a dead letter (plugin_opt_broker_name).
const PROP_DEAD_LETTER_BROKER = 'dead-letter-broker';
const PROP_NACK_REASON = 'reason';
const PROP_NACK_DELAY_MS = 'delay-ms';
const PROP_NACK_FINAL = 'final';

// Topics.
const CONTROL_TOPIC = '$CONTROL/dlq/v1';
const NACK_TOPIC = '$CONTROL/dlq/v1/nack';
const ACK_TOPIC = '$CONTROL/dlq/v1/ack';
const PROGRESS_TOPIC = '$CONTROL/dlq/v1/progress';
const RESPONSE_TOPIC = '$CONTROL/dlq/v1/response';

// The message carries no dlq-id, so it cannot be NACKed, ACKed or reported on.
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

// The dlq-id to settle the message with: throws NotTrackedError when the
// client is not on MQTT v5 (MQTT.js's default, 3.1.1, carries no user
// properties) or the message has no dlq-id.
function settleId (client, packet, what) {
  if (client.options.protocolVersion !== 5) {
    throw new NotTrackedError('the client is not connected with MQTT v5: messages carry no ' +
      `dlq-id and cannot be ${what} (connect with protocolVersion: 5)`);
  }
  return dlqId(packet);
}

// Asks the plugin for a retry of the message (QoS 1 to NACK_TOPIC). reason
// (a string) becomes the dead letter's dead-letter-reason. The fourth
// argument is either delayMs, a number, or an object { delayMs, final }:
// delayMs holds the retry copy back, capped by the policy's
// retry_max_delay; final: true says that the message can never succeed (a
// malformed job, say), so that it is dead-lettered at once, with
// dead-letter-final "true", instead of taking the attempts it has left.
// Returns a promise that rejects when the broker refused the publish (its
// PUBACK reason code, e.g. 135 when the ACL denies $CONTROL/dlq/v1/nack); a
// NACK the plugin refuses is answered with a reply instead (see
// replyEntries). Throws NotTrackedError when the client is not on MQTT v5 or
// the message has no dlq-id.
function nack (client, packet, reason, options) {
  const id = settleId(client, packet, 'NACKed');
  const { delayMs, final } = typeof options === 'object' && options !== null
    ? options
    : { delayMs: options };
  const userProperties = {};
  if (reason !== undefined && reason !== null) {
    userProperties[PROP_NACK_REASON] = String(reason);
  }
  if (delayMs !== undefined && delayMs !== null) {
    userProperties[PROP_NACK_DELAY_MS] = String(Math.max(0, Math.round(delayMs)));
  }
  if (final) {
    userProperties[PROP_NACK_FINAL] = 'true';
  }
  return client.publishAsync(NACK_TOPIC, id, { qos: 1, properties: { userProperties } });
}

// Tells the plugin that the message was processed (QoS 1 to ACK_TOPIC). A
// policy with an ack_timeout needs it: a delivery neither ACKed nor NACKed
// in time is a failed attempt, as if it had been NACKed, and MQTT.js's
// PUBACK does not count, since it goes when the 'message' handlers return,
// whatever the work did. So ACK once the work is done, before the handler
// returns (or calls handleMessage's done). Without an ack_timeout an ACK is
// accepted too, and the same client's later NACK of that delivery is then
// refused. Returns a promise as nack does; an ACK the plugin refuses (too
// late, say: the deadline ran out first and a retry copy was made) is
// answered with a reply (see replyProblems). Throws NotTrackedError as nack
// does. In a client.handleMessage, call done without waiting for the
// promise: MQTT.js reads nothing more, the PUBACK that settles it included,
// until done is called.
function ack (client, packet) {
  return client.publishAsync(ACK_TOPIC, settleId(client, packet, 'ACKed'), { qos: 1 });
}

// Tells the plugin that the work on the message goes on (QoS 1 to
// PROGRESS_TOPIC), so that its ack_timeout starts again: a job longer than
// the deadline stays alive as long as it reports, from a timer while the
// work runs asynchronously. Returns a promise as nack does; throws
// NotTrackedError as nack does.
function progress (client, packet) {
  return client.publishAsync(PROGRESS_TOPIC, settleId(client, packet, 'reported on'), { qos: 1 });
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

// How replyProblems names the command of a reply entry.
function commandName (entry) {
  if (typeof entry.command !== 'string') {
    return 'command';
  }
  return { nack: 'NACK', ack: 'ACK' }[entry.command] ?? entry.command;
}

// What a reply of the plugin's says went wrong, one line each, naming the
// command ("ACK of <id> refused: ..."): every entry it refused, or that the
// payload is not a reply at all. A compact NACK, ACK or progress without a
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
    .map((e) => `${commandName(e)} of ${e.id ?? '?'} refused: ${e.error}`);
}

module.exports = {
  PROP_ID,
  PROP_RETRY_COUNT,
  PROP_ORIGIN_TOPIC,
  PROP_ORIGIN_ID,
  PROP_DEAD_LETTER_REASON,
  PROP_DEAD_LETTER_FINAL,
  PROP_DEAD_LETTER_CAUSE,
  PROP_DEAD_LETTER_BROKER,
  PROP_NACK_REASON,
  PROP_NACK_DELAY_MS,
  PROP_NACK_FINAL,
  CONTROL_TOPIC,
  NACK_TOPIC,
  ACK_TOPIC,
  PROGRESS_TOPIC,
  RESPONSE_TOPIC,
  NotTrackedError,
  connect,
  userProperty,
  dlqId,
  attempt,
  deliveryCount,
  nack,
  ack,
  progress,
  isReply,
  replyEntries,
  replyProblems
};
