// SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
//
// The odd/even demo's worker in JavaScript with MQTT.js, doing what
// examples/numbers_worker.c does: it takes numbers from a topic (default
// numbers, QoS 1, MQTT v5), accepts the even ones and fails the odd ones, and
// asks mosquitto-dlq for a retry of each failure with a compact NACK and a
// reason. A refused NACK is answered on $CONTROL/dlq/v1/response, sent to
// this client alone.
//
// stdout, one line per delivery:  processed N  |  failed N (attempt K)
// stderr: readiness, refused NACKs and anything unexpected.
//
//   npm ci    # once, in examples/node: installs the mqtt package it pins
//   node examples/node/numbers_worker.js --host HOST --port PORT [--topic T] [--id ID]
'use strict';

const { parseArgs } = require('node:util');
const dlq = require('./mosquitto-dlq');

const PROG = 'numbers_worker.js';
const NACK_REASON = 'odd numbers are not accepted';

function warn (text) {
  process.stderr.write(`${PROG}: ${text}\n`);
}

function usage () {
  return `Usage: node ${PROG} [--host host] [--port port] [--topic topic] [--id client-id]\n` +
    '  --host host    broker host (default localhost)\n' +
    '  --port port    broker port (default 1883)\n' +
    '  --topic topic  topic to subscribe to (default numbers)\n' +
    '  --id id        client id (default dlq-demo-worker)\n';
}

function options () {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        host: { type: 'string', default: 'localhost' },
        port: { type: 'string', default: '1883' },
        topic: { type: 'string', default: 'numbers' },
        id: { type: 'string', default: 'dlq-demo-worker' },
        help: { type: 'boolean', default: false }
      }
    }));
  } catch (err) {
    process.stderr.write(`${PROG}: ${err.message}\n${usage()}`);
    process.exit(2);
  }
  if (values.help) {
    process.stdout.write(usage());
    process.exit(0);
  }
  const port = Number(values.port);
  if (!/^[0-9]+$/.test(values.port) || port < 1 || port > 65535) {
    warn(`--port ${values.port}: not a port number (1-65535)`);
    process.exit(2);
  }
  return { ...values, port };
}

function onReply (payload) {
  for (const problem of dlq.replyProblems(payload)) {
    warn(problem);
  }
}

function onMessage (client, topic, payload, packet) {
  if (dlq.isReply(topic)) {
    onReply(payload);
    return;
  }
  // A whole decimal integer, as the C worker's strtol reads it.
  const text = payload.toString('latin1');
  if (!/^\s*[+-]?[0-9]+$/.test(text)) {
    warn(`ignored a message on ${topic} that is not a number`);
    return;
  }
  const n = BigInt(text.trim());
  if (n % 2n === 0n) {
    console.log(`processed ${n}`);
    return;
  }
  let attempt;
  try {
    attempt = dlq.attempt(packet);
  } catch (err) {
    warn(err.message);
    attempt = 1;
  }
  console.log(`failed ${n} (attempt ${attempt})`);
  let sent;
  try {
    sent = dlq.nack(client, packet, NACK_REASON);
  } catch (err) {
    if (!(err instanceof dlq.NotTrackedError)) {
      throw err;
    }
    warn(`${n}: cannot ask for a retry: ${err.message}`);
    return;
  }
  sent.catch((err) => warn(`NACK of ${n} refused by the broker: ${err.message}`));
}

function main () {
  const opts = options();
  let connected = false;
  const client = dlq.connect({
    host: opts.host,
    port: opts.port,
    clientId: opts.id,
    clean: true,
    keepalive: 60,
    reconnectPeriod: 1000,
    // Every connect subscribes itself (below): the session is clean.
    resubscribe: false
  });

  client.on('connect', () => {
    connected = true;
    client.subscribe(opts.topic, { qos: 1 }, (err, granted) => {
      if (err) {
        warn(`cannot subscribe: ${err.message}`);
      } else if (granted[0].qos >= 0x80) {
        warn(`subscription to ${opts.topic} refused: reason code ${granted[0].qos}`);
      } else {
        warn(`subscribed to ${opts.topic}`);
      }
    });
  });
  client.on('message', (topic, payload, packet) => onMessage(client, topic, payload, packet));
  client.on('error', (err) => {
    if (!connected) {
      warn(`cannot connect to ${opts.host}:${opts.port}: ${err.message}`);
      client.end(true, () => process.exit(1));
      return;
    }
    warn(`connection error: ${err.message}`);
  });
  client.on('offline', () => {
    if (connected) {
      warn('connection lost, reconnecting');
    }
  });

  const stop = () => client.end(false, () => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main();
