// SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
//
// The console's broker-independent parts in node, without a browser:
// format.js (sizes, counters, ack_timeout, the totals, dead letters by
// cause, payload as text or hex, properties, login errors), rates.js
// (per-minute growth of NACKs, dead letters, also by cause, ack timeouts and
// redrives from successive getStatus replies, resets, the hour's window, the
// plugin's minutes from getHistory as the start), chart.js's
// words, lines (split by cause) and key, and letters.js's paging, filters
// and redrive task.
'use strict';

const path = require('path');
const { Steps } = require('./steps');

const www = process.env.DLQ_CONSOLE_WWW || path.resolve(__dirname, '../../console/www');
const format = require(path.join(www, 'js/format.js')).format;
const { Rates } = require(path.join(www, 'js/rates.js'));
const { chart } = require(path.join(www, 'js/chart.js'));
const { letters } = require(path.join(www, 'js/letters.js'));

function eq(got, want, what) {
  if (JSON.stringify(got) !== JSON.stringify(want)) throw new Error(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}

const t = new Steps('console-units');
const MIN = 60000;
const status = (nacks, deadLetters, ackTimeouts = 0, redriven = 0) => ({ policies: [{ filter: 'a/#', nacks, deadLetters, ackTimeouts, redriven }] });

t.step('format: sizes and the hex of a payload that is not UTF-8', () => {
  eq([format.bytes(0), format.bytes(1023), format.bytes(1536), format.bytes(3 * 1024 * 1024)], ['0 B', '1023 B', '1.5 KiB', '3.0 MiB'], 'bytes');
  const v = format.payloadView({ payload: Buffer.from([0xff, 0x00, 0x41]).toString('base64'), payloadEncoding: 'base64', payloadBytes: 3 });
  eq(v.kind, 'hex', 'kind');
  eq(v.text, '00000000  ff 00 41' + ' '.repeat(3 * 13) + '  ..A', 'hex dump');
  const w = format.payloadView({ payload: 'héllo', payloadEncoding: 'utf-8', payloadBytes: 6 });
  eq([w.kind, w.text], ['text', 'héllo'], 'text');
  eq(format.payloadView({ payload: '', payloadEncoding: 'utf-8', payloadBytes: 0 }).text, '(empty)', 'empty');
  const cut = format.payloadView({ payload: 'ab', payloadEncoding: 'utf-8', payloadBytes: 70000, payloadTruncated: true });
  if (!cut.note.includes('cut')) throw new Error(`a truncated payload is not said to be: ${cut.note}`);
});

t.step('format: a counter, a policy\'s ack_timeout, and the totals of all policies in words', () => {
  eq([format.counter(0), format.counter(12), format.counter(undefined), format.counter(null)], ['0', '12', '—', '—'], 'counters');
  eq(format.ackTimeout({ filter: 'a/#', ackTimeoutMs: 30000, ackTimeout: '30s' }), '30s', 'as configured');
  eq(format.ackTimeout({ filter: 'a/#', ackTimeoutMs: 1500, ackTimeout: '1500ms' }), '1500ms', 'in ms');
  eq(format.ackTimeout({ filter: 'a/#', ackTimeoutMs: 2000 }), '2000ms', 'the ms alone');
  eq([format.ackTimeout({ filter: 'a/#', maxAttempts: 3 }), format.ackTimeout(undefined)], ['none', 'none'], 'none');
  eq(format.totals({ deadLetters: 4, keptDeadLetters: 3, keptDeadLetterBytes: 1229, deadLettersDropped: 0,
    deadLettersExpired: 1, redriven: 1, pending: 0, acks: 2, ackTimeouts: 1, finalNacks: 0, awaitingAck: 3 }),
  'All policies: 4 dead letters, 3 kept (1.2 KiB), 0 dropped for size, 1 for age, 1 redriven, 0 pending; 2 ACKs, 1 ack timeout, 0 final NACKs, 3 awaiting ACK now.', 'totals');
  eq(format.totals({ deadLetters: 1, keptDeadLetters: 1, keptDeadLetterBytes: 10, deadLettersDropped: 7,
    deadLettersExpired: 0, redriven: 0, pending: 2, acks: 1, ackTimeouts: 2, finalNacks: 1, awaitingAck: 0 }),
  'All policies: 1 dead letter, 1 kept (10 B), 7 dropped for size, 0 for age, 0 redriven, 2 pending; 1 ACK, 2 ack timeouts, 1 final NACK, 0 awaiting ACK now.', 'one of each');
  // A plugin older than the page: dashes, not "undefined".
  eq(format.totals({ deadLetters: 0, keptDeadLetters: 0, keptDeadLetterBytes: 0, redriven: 0, pending: 0 }),
    'All policies: 0 dead letters, 0 kept (0 B), — dropped for size, — for age, 0 redriven, 0 pending; — ACKs, — ack timeouts, — final NACKs, — awaiting ACK now.', 'older plugin');
});

t.step('format: dead letters by cause in words, the causes with any in the plugin\'s order', () => {
  eq(format.byCause({ nack: 2, final: 0, ack_timeout: 1, unknown: 0 }), 'nack 2, ack_timeout 1', 'some');
  eq(format.byCause({ nack: 0, final: 0 }), 'none', 'none');
  eq([format.byCause(undefined), format.byCause(7)], ['—', '—'], 'a plugin older than the page');
});

t.step('format: properties as name and value', () => {
  eq(format.property({ name: 'user-property', key: 'k', value: 'v' }), ['user property “k”', 'v'], 'user property');
  eq(format.property({ name: 'content-type', value: 'text/plain' }), ['content-type', 'text/plain'], 'content type');
  eq(format.property({ identifier: 42 })[0], 'property 42', 'unknown');
});

t.step('format: a refused login and an unreachable broker in words', () => {
  if (!format.connectError({ code: 134 }, 'ws://x/').includes('wrong username or password')) throw new Error('134');
  if (!format.connectError({ code: 135 }, 'ws://x/').includes('not authorised')) throw new Error('135');
  if (!format.connectError(null, 'ws://x:1/').startsWith('Cannot reach the broker at ws://x:1/')) throw new Error('unreachable');
});

t.step('format: a broker address that is not ws:// or wss:// is said to be wrong, with what to write', () => {
  eq([format.brokerUrlError('ws://127.0.0.1:9001/'), format.brokerUrlError('wss://broker.example:443/mqtt')], [null, null], 'good addresses');
  for (const [url, want] of [['ftp://x/', 'starts with “ftp:”'], ['http://127.0.0.1:9001/', 'starts with “http:”'],
    ['mqtt://127.0.0.1:1883', 'starts with “mqtt:”'], ['localhost:9001', 'starts with “localhost:”'],
    ['127.0.0.1:9001', 'is not a URL'], ['ws://exa mple/', 'is not a URL'], ['', 'is not a URL']]) {
    const said = format.brokerUrlError(url);
    if (!said || !said.includes(want) || !said.includes('ws://host:port/')) throw new Error(`${JSON.stringify(url)}: ${said}`);
  }
});

t.step('rates: growth per minute; the first reply is the base; a reset starts again from 0', () => {
  const r = new Rates(60);
  const t0 = 1000 * MIN;
  r.add(status(10, 2, 5), t0);          // the base: not drawn
  r.add(status(13, 2, 6), t0 + 1000);   // +3 NACKs, +1 ack timeout in minute 0
  r.add(status(14, 3, 6), t0 + MIN);    // +1, +1, +0 in minute 1
  r.add(status(2, 1, 1), t0 + MIN + 5); // reset: +2, +1, +1
  const s = r.series('a/#', t0 + MIN + 10);
  eq(s.length, 60, 'an hour of minutes');
  eq(s.slice(-2).map((m) => [m.nacks, m.deadLetters, m.ackTimeouts]), [[3, 0, 1], [3, 2, 1]], 'last two minutes');
  eq(s.slice(0, -2).every((m) => m.nacks === 0 && m.deadLetters === 0 && m.ackTimeouts === 0), true, 'older minutes');
  eq(chart.summary(s), 'This minute: 3 NACKs, 2 dead letters, 1 ack timeout, 0 redrives; last hour: 6 NACKs, 2 dead letters, 2 ack timeouts, 0 redrives.', 'words');
});

t.step('rates: redrives are getStatus\'s redriven, growth per minute and reset like the others', () => {
  const r = new Rates(60);
  const t0 = 6000 * MIN;
  r.add(status(0, 3, 0, 4), t0);           // the base: 4 redriven before
  r.add(status(3, 4, 0, 5), t0 + 1000);    // +1 redrive in minute 0
  r.add(status(3, 4, 0, 7), t0 + MIN);     // +2 in minute 1
  r.add(status(0, 0, 0, 1), t0 + MIN + 5); // reset: +1
  const s = r.series('a/#', t0 + MIN + 10);
  eq(s.slice(-2).map((m) => m.redrives), [1, 3], 'redrives, last two minutes');
  eq(chart.summary(s), 'This minute: 0 NACKs, 0 dead letters, 0 ack timeouts, 3 redrives; last hour: 3 NACKs, 1 dead letter, 0 ack timeouts, 4 redrives.', 'words');
  eq(Rates.STATUS_NAMES, { redrives: 'redriven' }, 'the getStatus name');
});

t.step('rates: a reply without ackTimeouts (a plugin older than the page) counts none', () => {
  const r = new Rates(60);
  const t0 = 3000 * MIN;
  const old = (nacks, deadLetters) => ({ policies: [{ filter: 'a/#', nacks, deadLetters }] });
  r.add(old(0, 0), t0);
  r.add(old(4, 1), t0 + 1);
  const last = r.series('a/#', t0 + 2).pop();
  eq([last.nacks, last.deadLetters, last.ackTimeouts, last.redrives], [4, 1, 0, 0], 'this minute');
  eq(chart.summary(r.series('a/#', t0 + 2)), 'This minute: 4 NACKs, 1 dead letter, 0 ack timeouts, 0 redrives; last hour: 4 NACKs, 1 dead letter, 0 ack timeouts, 0 redrives.', 'words');
});

t.step('chart: the lines are rates.js\'s series; the key, the heading and the accessible name say all four', () => {
  eq(chart.LINES.map((l) => l.key), Rates.SERIES, 'the lines drawn are the series counted');
  eq(chart.LINES.map((l) => l.label), ['NACKs', 'dead letters', 'ack timeouts', 'redrives'], 'the key');
  eq(new Set(chart.LINES.map((l) => l.style)).size, chart.LINES.length, 'each line its own dashes');
  eq(new Set(chart.LINES.map((l) => l.color)).size, chart.LINES.length, 'each line its own colour');
  eq(new Set(chart.LINES.map((l) => l.dash)).size, chart.LINES.length, 'each line its own dashes in the chart');
  eq(chart.LINES.every((l) => !chart.CAUSE_LOOKS.some((c) => c.color === l.color && l.key !== 'deadLetters')), true,
    'no cause line looks like another line');
  eq(chart.title(), 'NACKs, dead letters, ack timeouts and redrives per minute, last hour', 'heading');
  const s = Array.from({ length: 60 }, (_, i) => ({ minute: i, nacks: i === 58 ? 3 : 0, deadLetters: i === 59 ? 1 : 0, ackTimeouts: i === 59 ? 2 : 0,
    redrives: i === 57 ? 5 : 0 }));
  eq(chart.label('jobs/#', chart.summary(s)),
    'NACKs, dead letters, ack timeouts and redrives per minute for jobs/#, last hour. ' +
    'This minute: 0 NACKs, 1 dead letter, 2 ack timeouts, 0 redrives; last hour: 3 NACKs, 1 dead letter, 2 ack timeouts, 5 redrives.', 'accessible name');
  eq(chart.summary([]), 'This minute: 0 NACKs, 0 dead letters, 0 ack timeouts, 0 redrives; last hour: 0 NACKs, 0 dead letters, 0 ack timeouts, 0 redrives.', 'no minutes');
});

t.step('rates and chart: dead letters by cause per minute; split, a line per cause with any in the hour', () => {
  const r = new Rates(60);
  const t0 = 4000 * MIN;
  const by = (deadLetters, causes) => ({ policies: [{ filter: 'a/#', nacks: 0, deadLetters, ackTimeouts: 0,
    deadLettersByCause: Object.assign({ nack: 0, final: 0, ack_timeout: 0, restart: 0 }, causes) }] });
  r.add(by(5, { nack: 5 }), t0);                     // the base
  r.add(by(7, { nack: 6, final: 1 }), t0 + 1);       // minute 0: nack +1, final +1
  r.add(by(8, { nack: 6, final: 1, ack_timeout: 1 }), t0 + MIN); // minute 1: ack_timeout +1
  r.add(by(1, { final: 1 }), t0 + MIN + 1);          // reset: final +1
  eq(r.causes, ['nack', 'final', 'ack_timeout', 'restart'], 'the causes, in the plugin\'s order');
  const s = r.series('a/#', t0 + MIN + 2);
  eq(s.slice(-2).map((m) => m.deadLettersByCause), [{ nack: 1, final: 1, ack_timeout: 0, restart: 0 },
    { nack: 0, final: 1, ack_timeout: 1, restart: 0 }], 'by cause, last two minutes (a reset counts all of final)');
  eq(s.slice(-2).map((m) => m.deadLetters), [2, 2], 'dead letters');
  eq(chart.summary(s), 'This minute: 0 NACKs, 2 dead letters, 0 ack timeouts, 0 redrives; last hour: 0 NACKs, 4 dead letters, 0 ack timeouts, 0 redrives.', 'words');
  eq(chart.summary(s, true), 'This minute: 0 NACKs, 2 dead letters (final 1, ack_timeout 1), 0 ack timeouts, 0 redrives; ' +
    'last hour: 0 NACKs, 4 dead letters (nack 1, final 2, ack_timeout 1), 0 ack timeouts, 0 redrives.', 'words by cause');
  const lines = chart.linesFor(s, r.causes);
  eq(lines.map((l) => l.key), ['nacks', 'cause-nack', 'cause-final', 'cause-ack_timeout', 'ackTimeouts', 'redrives'], 'lines by cause: none for restart');
  eq(lines.filter((l) => l.cause).map((l) => l.label), ['nack dead letters', 'final dead letters', 'ack_timeout dead letters'], 'their key');
  eq(new Set(lines.map((l) => l.color)).size, lines.length, 'each line its own colour');
  eq(new Set(lines.map((l) => l.dash)).size, lines.length, 'each line its own dashes');
  eq(chart.linesFor(s, null), chart.LINES, 'not split');
  eq(new Set(chart.CAUSE_LOOKS.map((l) => l.color)).size, chart.CAUSE_LOOKS.length, 'the cause looks differ');
  eq(chart.CAUSE_LOOKS.length >= 9, true, 'a look for each of the nine causes');
});

t.step('rates: the plugin\'s minutes (getHistory) fill the hour at once; the polls add on top', () => {
  const r = new Rates(60);
  const t0 = 5000 * MIN + 30000;      // half a minute into page minute 5000
  const broker = 5000 * 60 + 120;     // the broker's clock two minutes ahead of the page's
  r.add(status(12, 3, 1), t0);        // the base, taken with the history
  r.seed({ minute: broker, minutes: 60, policies: [
    { filter: 'a/#', minutes: [
      { minute: broker - 61 * 60, nacks: 9, deadLetters: 9, ackTimeouts: 9, byCause: { nack: 9 }, redrives: 0 }, // past the hour
      { minute: broker - 3 * 60, nacks: 4, deadLetters: 1, ackTimeouts: 0, byCause: { restart: 1 }, redrives: 0 },
      { minute: broker, nacks: 8, deadLetters: 2, ackTimeouts: 1, byCause: { nack: 1, final: 1 }, redrives: 1 },
      { minute: broker + 60, nacks: 5 },  // after now: not drawn
    ] },
    { filter: 'b/+', minutes: [] },
  ] }, t0);
  let s = r.series('a/#', t0);
  eq(s.slice(-4).map((m) => [m.minute, m.nacks, m.deadLetters, m.ackTimeouts, m.redrives]),
    [[4997, 4, 1, 0, 0], [4998, 0, 0, 0, 0], [4999, 0, 0, 0, 0], [5000, 8, 2, 1, 1]], 'the plugin\'s minutes, on the page\'s clock');
  eq(s.slice(-4)[0].deadLettersByCause, { restart: 1, nack: 0, final: 0 }, 'by cause');
  eq(r.causes, ['restart', 'nack', 'final'], 'the causes the history named');
  eq(chart.summary(s), 'This minute: 8 NACKs, 2 dead letters, 1 ack timeout, 1 redrive; last hour: 12 NACKs, 3 dead letters, 1 ack timeout, 1 redrive.', 'words at once');
  r.add(status(14, 3, 1, 2), t0 + 1000); // +2 NACKs and +2 redrives since the history
  s = r.series('a/#', t0 + 1000);
  eq([s[59].nacks, s[59].redrives], [10, 3], 'the poll adds on top of the plugin\'s minute');
  eq(r.series('b/+', t0).every((m) => m.nacks === 0), true, 'a policy with nothing in the hour');
  // An answer that is not a history changes nothing.
  r.seed({}, t0);
  r.seed({ policies: [{ filter: 'a/#' }] }, t0);
  eq(r.series('a/#', t0 + 1000)[59].nacks, 10, 'kept');
});

t.step('chart: the figures drawn are in the svg\'s data-series too', () => {
  const attrs = {};
  const fakeSvg = {
    firstChild: null, setAttribute: (k, v) => { attrs[k] = v; }, appendChild: () => {}, removeChild: () => {},
  };
  global.document = { createElementNS: () => ({ setAttribute: () => {} }) };
  const s = Array.from({ length: 60 }, (_, i) => ({ minute: 100 + i, nacks: i === 59 ? 9 : 0, deadLetters: i === 58 ? 3 : 0, ackTimeouts: 0,
    redrives: i === 59 ? 2 : 0 }));
  chart.render(fakeSvg, s, 'a/#', null);
  delete global.document;
  const data = JSON.parse(attrs['data-series']);
  eq(data.length, 60, 'every minute');
  eq(data.slice(-2), [{ minute: 158 * 60, nacks: 0, deadLetters: 3, ackTimeouts: 0, redrives: 0 },
    { minute: 159 * 60, nacks: 9, deadLetters: 0, ackTimeouts: 0, redrives: 2 }], 'the last two');
});

t.step('rates: minutes older than the hour are dropped', () => {
  const r = new Rates(60);
  const t0 = 2000 * MIN;
  r.add(status(0, 0), t0);
  r.add(status(5, 1), t0 + 1);
  r.add(status(6, 1), t0 + 61 * MIN);
  const s = r.series('a/#', t0 + 61 * MIN);
  eq(s.reduce((a, m) => a + m.nacks, 0), 1, 'the hour holds only the last NACK');
  eq(r.buckets.get('a/#').size, 1, 'buckets kept');
  eq(r.series('other', t0).every((m) => m.nacks === 0), true, 'an unknown policy');
});

t.step('letters: paging by the plugin\'s cursor, filters, and the count line', () => {
  const p = new letters.LetterPages();
  eq(p.command(), { command: 'listDeadLetters', order: 'newest', limit: letters.PAGE }, 'first page');
  p.took({ letters: new Array(20).fill({}), matched: 45, next: 777 });
  eq(p.describe(), 'Letters 1–20 of 45, newest first.', 'first page words');
  eq(p.older(), true, 'older');
  eq(p.command().cursor, 777, 'cursor');
  p.took({ letters: new Array(20).fill({}), next: 555 });
  eq(p.describe(), 'Letters 21–40 of 45, newest first.', 'second page words');
  p.older();
  p.took({ letters: new Array(5).fill({}) });
  eq([p.next, p.older()], [null, false], 'the last page');
  eq([p.newer(), p.command().cursor], [true, 777], 'back one');
  p.newer();
  eq([p.newer(), 'cursor' in p.command()], [false, false], 'the newest page');
  p.selected.add('x');
  p.setFilter('a/#', 'odd');
  eq(p.command(), { command: 'listDeadLetters', order: 'newest', limit: letters.PAGE, filter: 'a/#', reason: 'odd' }, 'filtered');
  eq(p.selected.size, 0, 'a new filter clears the selection');
  p.took({ letters: [], matched: 0 });
  eq(p.describe(), 'No dead letters kept that match the filter.', 'empty words');
  p.setFilter('', '', 'ack_timeout');
  eq(p.command(), { command: 'listDeadLetters', order: 'newest', limit: letters.PAGE, cause: 'ack_timeout' }, 'one cause');
  p.took({ letters: [], matched: 0 });
  eq(p.describe(), 'No dead letters kept that match the filter.', 'empty words for a cause');
  p.setFilter('', '', '', 'edge-1');
  eq(p.command(), { command: 'listDeadLetters', order: 'newest', limit: letters.PAGE, broker: 'edge-1' }, 'one broker');
  p.took({ letters: [], matched: 0 });
  eq(p.describe(), 'No dead letters kept that match the filter.', 'empty words for a broker');
});

t.step('letters: the redrive task of the current filter, and a task in words', () => {
  const p = new letters.LetterPages();
  eq(p.taskCommand(100, ''), { command: 'startRedriveTask', rate: 100 }, 'every letter');
  p.setFilter('a/#', 'odd', 'nack', 'edge-1');
  eq(p.taskCommand(250, 'b/again'), { command: 'startRedriveTask', rate: 250, filter: 'a/#', reason: 'odd', cause: 'nack', broker: 'edge-1', to: 'b/again' },
    'the filter and a target');
  eq(letters.taskWords({ id: 3, policy: null, to: null, rate: 200, state: 'running', moved: 1200, failed: 1, left: 799 }),
    'Task 3 (every policy to origin topics, 200/s): running, 1200 moved, 1 failed, 799 left', 'words');
});

t.run().then((ok) => process.exit(ok ? 0 : 1));
