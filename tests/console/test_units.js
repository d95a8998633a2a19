// SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
//
// The console's broker-independent parts in node, without a browser:
// format.js (sizes, payload as text or hex, properties, login errors),
// rates.js (per-minute growth from successive getStatus replies, resets,
// the hour's window), chart.js's words, and letters.js's paging.
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
const status = (nacks, deadLetters) => ({ policies: [{ filter: 'a/#', nacks, deadLetters }] });

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
  r.add(status(10, 2), t0);           // the base: not drawn
  r.add(status(13, 2), t0 + 1000);    // +3 NACKs in minute 0
  r.add(status(14, 3), t0 + MIN);     // +1, +1 in minute 1
  r.add(status(2, 1), t0 + MIN + 5);  // reset: +2, +1
  const s = r.series('a/#', t0 + MIN + 10);
  eq(s.length, 60, 'an hour of minutes');
  eq(s.slice(-2).map((m) => [m.nacks, m.deadLetters]), [[3, 0], [3, 2]], 'last two minutes');
  eq(s.slice(0, -2).every((m) => m.nacks === 0 && m.deadLetters === 0), true, 'older minutes');
  eq(chart.summary(s), 'This minute: 3 NACKs, 2 dead letters; last hour: 6 NACKs, 2 dead letters.', 'words');
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
});

t.run().then((ok) => process.exit(ok ? 0 : 1));
