// SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
//
// A member of a worker pool in JavaScript with MQTT.js: one of several
// processes that share the jobs of a shared subscription (default
// $share/workers/jobs/#, QoS 1, MQTT v5), each with a persistent session of
// its own, so that a job a worker crashed on stays in that worker's session,
// is delivered to it again, and is counted by mosquitto-dlq's redelivery
// tracking until it is dead-lettered. The client settings are those of
// docs/worker-pool.md: a fixed client id, clean: false
// (MQTT.js's default starts clean on every connection), a session expiry
// interval of 3600 s, Receive Maximum 1, and the subscription made again in
// the 'connect' handler, on every connection (a broker restart gives the
// session back without its $share membership, and MQTT.js resubscribes by
// itself only when the broker has no session).
//
// What it does with a job, by its payload, to show both protections:
// - poison...: the job fails: it is NACKed through $CONTROL/dlq/v1/nack with
//   a reason, then acknowledged (a retry copy follows, until the policy's
//   max_attempts make it a dead letter);
// - crash...: the process exits at once, with status 3, before the
//   acknowledgement, as a worker that segfaults does;
// - anything else: processed (printed) and acknowledged; with --ack also
//   ACKed through $CONTROL/dlq/v1/ack once processed, before the
//   acknowledgement.
// MQTT.js sends a QoS 1 message's PUBACK after the 'message' handlers
// returned, so a job is acknowledged only after it was handled (for
// asynchronous work, set client.handleMessage = (packet, done) => ... and
// call done when finished). The PUBACK is no ACK: a policy with an
// ack_timeout (e.g. ack_timeout=30s) needs --ack, or each good job runs out
// and is retried as a failed attempt; without it the worker only NACKs.
//
// stdout, written synchronously, for each message before acting on it and
// after processing:
//   received PAYLOAD delivery-count=N|- dlq-id=ID|-
//   processed PAYLOAD
// (delivery-count: dlq.deliveryCount(), the plugin's count on Mosquitto 2.1,
// its absence on a first delivery read as 1; 2.0 stamps none, so there it
// reads 1 for every tracked message; - for an untracked one.)
// stderr: each subscription (readiness), lost connections, anything unexpected.
//
//   npm ci    # once, in examples/node: installs the mqtt package it pins
//   node examples/node/pool_worker.js --id worker-1 [--host HOST] [--port PORT]
//       [--group workers] [--filter 'jobs/#'] [--ack]
'use strict';

const fs = require('node:fs');
const { parseArgs } = require('node:util');
const dlq = require('./mosquitto-dlq');

const PROG = 'pool_worker.js';
const NACK_REASON = 'poison job';
const SESSION_EXPIRY_S = 3600;
const CRASH_STATUS = 3;

function warn (text) {
  process.stderr.write(`${PROG}: ${text}\n`);
}

// Synchronous, so that the line is out before the process acts on the job,
// exiting included.
function say (text) {
  fs.writeSync(1, `${text}\n`);
}

function usage () {
  return `Usage: node ${PROG} --id client-id [--host host] [--port port] [--group group] [--filter filter] [--ack]\n` +
    '  --id id          client id, fixed and one per worker (e.g. worker-1)\n' +
    '  --host host      broker host (default localhost)\n' +
    '  --port port      broker port (default 1883)\n' +
    '  --group group    shared subscription group (default workers)\n' +
    '  --filter filter  topic filter of the jobs (default jobs/#)\n' +
    '  --ack            ACK each job once it is processed: for a policy with an\n' +
    '                   ack_timeout; without it the worker only NACKs\n';
}

function options () {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        host: { type: 'string', default: 'localhost' },
        port: { type: 'string', default: '1883' },
        id: { type: 'string' },
        group: { type: 'string', default: 'workers' },
        filter: { type: 'string', default: 'jobs/#' },
        ack: { type: 'boolean', default: false },
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
  if (!values.id) {
    process.stderr.write(`${PROG}: --id is required\n${usage()}`);
    process.exit(2);
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

function onMessage (client, opts, topic, payload, packet) {
  if (dlq.isReply(topic)) {
    onReply(payload);
    return;
  }
  const job = payload.toString('utf8');
  const count = dlq.deliveryCount(packet) ?? '-';
  const id = dlq.userProperty(packet, dlq.PROP_ID) ?? '-';
  say(`received ${job} delivery-count=${count} dlq-id=${id}`);
  if (job.startsWith('crash')) {
    // No PUBACK: the job stays in this worker's session.
    process.exit(CRASH_STATUS);
  }
  if (job.startsWith('poison')) {
    let sent;
    try {
      sent = dlq.nack(client, packet, NACK_REASON);
    } catch (err) {
      if (!(err instanceof dlq.NotTrackedError)) {
        throw err;
      }
      warn(`${job}: cannot NACK: ${err.message}`);
      return;
    }
    sent.catch((err) => warn(`NACK of ${job} refused by the broker: ${err.message}`));
    return;
  }
  say(`processed ${job}`);
  if (opts.ack) {
    // After the work, before returning: the PUBACK, which the plugin does
    // not take for an ACK, goes when the handler returns.
    let sent;
    try {
      sent = dlq.ack(client, packet);
    } catch (err) {
      if (!(err instanceof dlq.NotTrackedError)) {
        throw err;
      }
      warn(`${job}: cannot ACK: ${err.message}`);
      return;
    }
    sent.catch((err) => warn(`ACK of ${job} refused by the broker: ${err.message}`));
  }
  // Returning acknowledges the job.
}

function main () {
  const opts = options();
  const subscription = `$share/${opts.group}/${opts.filter}`;
  const client = dlq.connect({
    host: opts.host,
    port: opts.port,
    clientId: opts.id,
    clean: false,
    properties: { sessionExpiryInterval: SESSION_EXPIRY_S, receiveMaximum: 1 },
    keepalive: 60,
    // Reconnects when the broker goes away, also when it is not there yet.
    reconnectPeriod: 1000,
    // The 'connect' handler subscribes, on every connection.
    resubscribe: false
  });

  client.on('connect', (connack) => {
    warn(`connected (session present: ${connack.sessionPresent ? 'yes' : 'no'})`);
    client.subscribe(subscription, { qos: 1 }, (err, granted) => {
      if (err) {
        warn(`cannot subscribe: ${err.message}`);
      } else if (granted[0].qos >= 0x80) {
        warn(`subscription to ${subscription} refused: reason code ${granted[0].qos}`);
      } else {
        warn(`subscribed to ${subscription}`);
      }
    });
  });
  client.on('message', (topic, payload, packet) => onMessage(client, opts, topic, payload, packet));
  client.on('error', (err) => warn(`connection error: ${err.message}`));
  client.on('offline', () => warn('connection lost, reconnecting'));

  const stop = () => client.end(false, () => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main();
