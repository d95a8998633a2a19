// SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
//
// The console in a real browser: the real broker (MOSQUITTO_BIN) with the
// built plugin (DLQ_PLUGIN) and a password file serves console/www itself
// (2.0: the websockets listener's http_dir; 2.1: an http_api listener's,
// beside a websockets listener for MQTT); the quick start's worker
// (DLQ_C_WORKER, logged in) fails the odd numbers of 1..6, so three dead
// letters are kept before the page opens, and one of them (5) is redriven
// and made a dead letter again; Debian's chromium (CHROMIUM),
// headless, driven by puppeteer-core, logs in with the keyboard and the
// test reads the page as an operator would: the policies with their
// ack_timeout, the counters (dead letters by cause among them), the
// letters with their reasons, causes and payloads, the cause filter, the
// charts full on first paint with the NACKs, dead letters and the redrive
// made before the page opened (the plugin's getHistory; the redrives a line
// of their own), the charts split by cause, every listener bound to 127.0.0.1 alone,
// a redrive the worker receives again, a delete behind its confirmation,
// a redrive task of every letter the filter matches (its confirmation and
// progress bar),
// an ACK, a final NACK and an ack timeout on a second policy, and the
// fleet at a glance (the broker also collects: letters of three edge
// brokers published on its collect filter, the Brokers table with each
// one's count and newest letter, a click showing one broker's letters), the
// errors said in words (a wrong password, a broker without the plugin, no
// broker at all), with the basics of accessibility. Screenshots go to
// DLQ_SCREENSHOTS, each path printed ("screenshot: …").
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const net = require('net');
const http = require('http');
const crypto = require('crypto');
const { spawn, execFileSync } = require('child_process');
const puppeteer = require('puppeteer-core');
const mqtt = require('mqtt');
const { Steps } = require('./steps');

const SLOW = Math.max(1, Number(process.env.DLQ_TEST_SLOWDOWN || 1));
// Deadlines: upper bounds far above what a step takes (a second or two).
const WAIT = 60000 * SLOW;
const BROKER = process.env.MOSQUITTO_BIN || '/usr/sbin/mosquitto';
const PLUGIN = process.env.DLQ_PLUGIN;
const WORKER = process.env.DLQ_C_WORKER;
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const WWW = process.env.DLQ_CONSOLE_WWW || path.resolve(__dirname, '../../console/www');
const SHOTS = process.env.DLQ_SCREENSHOTS || path.join(os.tmpdir(), 'dlq-console-screenshots');

const USERS = { operator: 'op-secret-1', worker: 'wk-secret-2', publisher: 'pub-secret-3' };
const REASON = 'odd numbers are not accepted';
// The numbers policy's deadline: far longer than the test, so the worker,
// which processes the even numbers without an ACK, never runs out of it
// (they stay awaiting ACK). The slow/# policy's: short, for one ack
// timeout, yet long enough for the sleeper's ACK and NACK to come first.
const NUMBERS_ACK_TIMEOUT = '1h';
const SLOW_ACK_TIMEOUT = `${Math.ceil(2 * SLOW)}s`;
const SLEEPER = 'console-test-sleeper';
const FINAL_REASON = 'this one can never succeed';
// The plugin's plugin_opt_broker_name: each letter's dead-letter-broker,
// shown in the table's Broker column and the details.
const BROKER_NAME = 'console-edge-1';

// The fleet (docs/fleet.md): the collect filter of the console's broker,
// and the letters of three edge brokers published on it, by broker.
const FLEET_COLLECT = 'fleet/+/dead/#';
const FLEET = { 'edge-1': 3, 'edge-2': 2, 'edge-3': 1 };

function assert(cond, what) {
  if (!cond) throw new Error(what);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what, fn, timeout = WAIT) {
  const end = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      if (e.fatal) throw e;
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out after ${timeout} ms waiting for ${what}${last ? ': ' + last.message : ''}`);
    await sleep(100);
  }
}

// A password file line as mosquitto_passwd writes it ($7$: PBKDF2-SHA512,
// 101 iterations, a 12-byte salt), so that no mosquitto_passwd is needed.
function passwdLine(user, pass) {
  const salt = crypto.randomBytes(12);
  const hash = crypto.pbkdf2Sync(pass, salt, 101, 64, 'sha512');
  return `${user}:$7$101$${salt.toString('base64')}$${hash.toString('base64')}\n`;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function portOpen(port) {
  return new Promise((resolve) => {
    const c = net.connect(port, '127.0.0.1');
    c.on('connect', () => { c.destroy(); resolve(true); });
    c.on('error', () => resolve(false));
  });
}

// The addresses the sockets listening on TCP port are bound to, as
// `ss -ltn` shows them, from /proc/net/tcp and /proc/net/tcp6 (state 0A,
// LISTEN; each address as hex of 32-bit words in the host's order):
// "127.0.0.1", "0.0.0.0", "::", "::ffff:127.0.0.1", ...
function listeningOn(port) {
  const v4 = (hex) => hex.match(/../g).reverse().map((b) => parseInt(b, 16)).join('.');
  const v6 = (hex) => {
    const bytes = hex.match(/.{8}/g).flatMap((w) => w.match(/../g).reverse()).map((b) => parseInt(b, 16));
    if (bytes.every((b) => b === 0)) return '::';
    if (bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 255 && bytes[11] === 255) return '::ffff:' + bytes.slice(12).join('.');
    const groups = [];
    for (let i = 0; i < 16; i += 2) groups.push(((bytes[i] << 8) | bytes[i + 1]).toString(16));
    return groups.join(':');
  };
  const out = [];
  for (const [file, addr] of [['/proc/net/tcp', v4], ['/proc/net/tcp6', v6]]) {
    let table = '';
    try {
      table = fs.readFileSync(file, 'utf8');
    } catch (e) {
      continue; // no IPv6 in this kernel
    }
    for (const line of table.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 4 || f[3] !== '0A') continue;
      const [host, p] = f[1].split(':');
      if (parseInt(p, 16) === port) out.push(addr(host));
    }
  }
  return out.sort();
}

function httpGet(port, urlPath, auth) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: urlPath, auth }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('error', reject);
  });
}

function brokerVersion() {
  const out = (() => {
    try {
      return execFileSync(BROKER, ['-h'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (e) {
      return String(e.stdout || '') + String(e.stderr || '');
    }
  })();
  const m = /mosquitto version (\d+)\.(\d+)\.(\d+)/.exec(out);
  assert(m, `cannot tell the broker's version from ${BROKER} -h: ${out.slice(0, 200)}`);
  return m.slice(1).map(Number);
}

class Broker {
  // withPlugin: load DLQ_PLUGIN with the quick start's policy.
  constructor(dir, name, withPlugin, v21) {
    this.dir = dir;
    this.name = name;
    this.withPlugin = withPlugin;
    this.v21 = v21;
  }

  async start() {
    this.mqttPort = await freePort();
    this.wsPort = await freePort();
    this.httpPort = this.v21 ? await freePort() : this.wsPort;
    const lines = [
      'per_listener_settings false',
      'allow_anonymous false',
      `password_file ${this.dir}/passwd`,
      'persistence false',
      `log_dest file ${this.dir}/${this.name}.log`,
      'log_type all',
      process.getuid && process.getuid() === 0 ? 'user root' : '',
      `listener ${this.mqttPort} 127.0.0.1`,
      // As docs/console.md says: without socket_domain ipv4, Debian 12's
      // 2.0.11 (libwebsockets 4.1) listens on every address for a
      // websockets listener of 127.0.0.1.
      `listener ${this.wsPort} 127.0.0.1`,
      'socket_domain ipv4',
      'protocol websockets',
    ];
    if (this.v21) lines.push(`listener ${this.httpPort} 127.0.0.1`, 'socket_domain ipv4', 'protocol http_api', `http_dir ${WWW}`);
    else lines.push(`http_dir ${WWW}`);
    if (this.withPlugin) {
      lines.push(`plugin ${PLUGIN}`,
        `plugin_opt_policy numbers max_attempts=3 dead_letter=dead/numbers ack_timeout=${NUMBERS_ACK_TIMEOUT}`,
        `plugin_opt_policy slow/# max_attempts=1 dead_letter=dead/slow ack_timeout=${SLOW_ACK_TIMEOUT}`,
        // Mosquitto 2.0 runs an ack_timeout only with redelivery tracking
        // (2.1 accepts it and only observes); allow, since this broker has
        // no ACL source (a password file authenticates, no acl_file and no
        // other plugin).
        'plugin_opt_redelivery_tracking allow',
        `plugin_opt_broker_name ${BROKER_NAME}`,
        // A fleet's centre too: the dead letters three edges' bridges
        // would carry in, published by the test (fleetLetter).
        `plugin_opt_collect ${FLEET_COLLECT}`,
        // 2.0.21 exports no mosquitto_acl_check: the store's commands are
        // then for whoever may publish to $CONTROL/dlq/v1 (here: every
        // user of the password file; there is no acl_file).
        'plugin_opt_dead_letter_access control');
    }
    this.conf = `${this.dir}/${this.name}.conf`;
    fs.writeFileSync(this.conf, lines.filter(Boolean).join('\n') + '\n');
    this.proc = spawn(BROKER, ['-c', this.conf], { stdio: ['ignore', 'ignore', 'pipe'] });
    this.stderr = '';
    this.proc.stderr.on('data', (d) => { this.stderr += d; });
    this.exited = null;
    this.proc.on('exit', (code, sig) => { this.exited = { code, sig }; });
    await waitFor(`${this.name} listening`, async () => {
      if (this.exited) throw Object.assign(new Error(`the broker exited (${JSON.stringify(this.exited)}): ${this.stderr}`), { fatal: true });
      return (await portOpen(this.mqttPort)) && (await portOpen(this.wsPort)) && (await portOpen(this.httpPort));
    });
  }

  log() {
    try {
      return fs.readFileSync(`${this.dir}/${this.name}.log`, 'utf8');
    } catch (e) {
      return '';
    }
  }

  async stop() {
    if (!this.proc || this.exited) return;
    this.proc.kill('SIGTERM');
    await waitFor(`${this.name} to stop`, () => this.exited, 20000).catch(() => this.proc.kill('SIGKILL'));
  }

  pageUrl(query = '') {
    return `http://127.0.0.1:${this.httpPort}/${query}`;
  }
}

// An MQTT v5 client in node, logged in as user (of USERS); opts adds to
// MQTT.js's options (a clientId).
async function mqttClient(port, user, opts = {}) {
  const c = mqtt.connect(`mqtt://127.0.0.1:${port}`, {
    protocolVersion: 5, username: user, password: USERS[user], reconnectPeriod: 0, connectTimeout: 10000, ...opts,
  });
  await new Promise((resolve, reject) => { c.once('connect', resolve); c.once('error', reject); });
  return c;
}

// The operator's own control client in node: the figures the page must show.
async function controlClient(port) {
  const c = await mqttClient(port, 'operator');
  const waiting = new Map();
  let seq = 0;
  c.on('message', (topic, payload) => {
    if (topic !== '$CONTROL/dlq/v1/response') return;
    for (const r of JSON.parse(payload.toString()).responses || []) {
      const w = waiting.get(r.correlationData);
      if (w) { waiting.delete(r.correlationData); w(r); }
    }
  });
  return {
    run(cmd) {
      const corr = `test-${++seq}`;
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`no reply to ${cmd.command}`)), 10000 * SLOW);
        waiting.set(corr, (r) => {
          clearTimeout(t);
          if (r.error) reject(new Error(`${cmd.command}: ${r.error}`));
          else resolve(r.data);
        });
        c.publish('$CONTROL/dlq/v1', JSON.stringify({ commands: [{ ...cmd, correlationData: corr }] }), { qos: 1 });
      });
    },
    end: () => c.end(true),
  };
}

function policyStatus(status, filter = 'numbers') {
  return (status.policies || []).find((p) => p.filter === filter) || {};
}

// The counters the policies' table shows, by their getStatus names.
const COUNTERS = ['tracked', 'acks', 'nacks', 'finalNacks', 'ackTimeouts', 'awaitingAck', 'retryCopies', 'delayed',
  'deadLetters', 'keptDeadLetters', 'subscribersWithoutNack'];

class Worker {
  constructor(port) {
    this.out = '';
    this.err = '';
    this.proc = spawn(WORKER, ['-h', '127.0.0.1', '-p', String(port), '-i', 'console-test-worker',
      '-u', 'worker', '-P', USERS.worker], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc.stdout.on('data', (d) => { this.out += d; });
    this.proc.stderr.on('data', (d) => { this.err += d; });
  }

  // How often the worker failed n: each delivery it got of n.
  failures(n) {
    return this.out.split('\n').filter((l) => l.startsWith(`failed ${n} `)).length;
  }

  stop() {
    this.proc.kill('SIGTERM');
  }
}

// Publishes from c, as an edge's MQTT v5 bridge would carry it to the
// centre, the n-th dead letter of the fleet, made by the broker edge: on
// fleet/<edge>/dead/orders with every property an edge's plugin writes
// (model/collected.c reads them all), 10 - n minutes before now.
async function fleetLetter(c, edge, n) {
  const id = ('FLEETLETTER' + String(n).padStart(5, '0')).slice(0, 16);
  const userProperties = {
    'retry-count': '2', 'origin-topic': `orders/${n}`, 'origin-id': id.replace('FLEET', 'ORIGN'),
    'dead-letter-reason': 'the order cannot be shipped', 'dead-letter-client': `${edge}-worker`,
    'dead-letter-filter': 'orders/#', 'dead-letter-time': new Date(Date.now() - (10 - n) * 60000).toISOString(),
    'dead-letter-cause': 'nack', 'dead-letter-broker': edge, 'dead-letter-id': id,
  };
  await new Promise((resolve, reject) => c.publish(`fleet/${edge}/dead/orders`, JSON.stringify({ order: n }),
    { qos: 1, properties: { userProperties } }, (e) => (e ? reject(e) : resolve())));
}

async function shot(page, name) {
  const file = path.join(SHOTS, name);
  await page.screenshot({ path: file, fullPage: true });
  console.log(`screenshot: ${file}`);
}

const text = (page, sel) => page.$eval(sel, (e) => e.textContent);
const visible = (page, sel) => page.$eval(sel, (e) => !e.closest('[hidden]') && e.getClientRects().length > 0);
const counter = (page, name, filter = 'numbers') => page.$eval(`#policies tr[data-filter="${filter}"] td[data-counter="${name}"]`, (e) => e.textContent);
const cells = (page, filter) => page.$$eval(`#policies tr[data-filter="${filter}"] > *`, (c) => c.map((e) => e.textContent));

// Whether the policy's row shows every counter as the plugin's getStatus
// has it now: null when it does, else what differs.
async function rowDiffers(page, control, filter) {
  const s = policyStatus(await control.run({ command: 'getStatus' }), filter);
  const off = [];
  for (const k of COUNTERS) {
    const shown = await counter(page, k, filter);
    if (shown !== String(s[k])) off.push(`${k}: the page shows ${shown}, the plugin ${s[k]}`);
  }
  return off.length ? off.join('; ') : null;
}

// Names of the controls without an accessible name (a label, aria-label,
// aria-labelledby or their own text).
function unlabelled(page) {
  return page.evaluate(() => {
    const out = [];
    for (const e of document.querySelectorAll('input, select, textarea, button')) {
      const named = (e.id && document.querySelector(`label[for="${e.id}"]`)) || e.getAttribute('aria-label') ||
        e.getAttribute('aria-labelledby') || (e.tagName === 'BUTTON' && e.textContent.trim());
      if (!named) out.push(e.outerHTML.slice(0, 80));
    }
    return out;
  });
}

// Text whose contrast with what is behind it is under WCAG AA's 4.5:1
// (3:1 for large text), among the elements shown.
function lowContrast(page) {
  return page.evaluate(() => {
    const rgb = (s) => (s.match(/[\d.]+/g) || []).map(Number);
    const lum = ([r, g, b]) => {
      const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
      return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
    };
    const background = (e) => {
      for (; e; e = e.parentElement) {
        const c = rgb(getComputedStyle(e).backgroundColor);
        if (c.length === 3 || (c.length === 4 && c[3] > 0)) return c.slice(0, 3);
      }
      return [255, 255, 255];
    };
    const out = [];
    let checked = 0;
    for (const e of document.querySelectorAll('body *')) {
      if (!e.getClientRects().length || e.closest('[hidden], svg, .visually-hidden')) continue;
      const own = [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
      if (!own) continue;
      const st = getComputedStyle(e);
      const fg = rgb(st.color).slice(0, 3), bg = background(e);
      const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
      const ratio = (a + 0.05) / (b + 0.05);
      const size = parseFloat(st.fontSize), bold = Number(st.fontWeight) >= 700;
      const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
      checked++;
      if (ratio < need) out.push(`${e.tagName}#${e.id} "${e.textContent.trim().slice(0, 30)}": ${ratio.toFixed(2)} < ${need}`);
    }
    return { checked, out };
  });
}

async function main() {
  for (const [k, v] of Object.entries({ DLQ_PLUGIN: PLUGIN, DLQ_C_WORKER: WORKER })) {
    if (!v) throw new Error(`${k} is not set (meson test sets it)`);
  }
  fs.mkdirSync(SHOTS, { recursive: true });
  for (const f of fs.readdirSync(SHOTS)) if (f.endsWith('.png')) fs.unlinkSync(path.join(SHOTS, f));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dlq-console-'));
  fs.chmodSync(dir, 0o777);
  fs.writeFileSync(`${dir}/passwd`, Object.entries(USERS).map(([u, p]) => passwdLine(u, p)).join(''), { mode: 0o644 });
  const [maj, min] = brokerVersion();
  const v21 = maj > 2 || (maj === 2 && min >= 1);
  console.log(`console test: mosquitto ${maj}.${min} (${BROKER}); the page is served by ${v21 ? 'an http_api' : 'the websockets'} listener; chromium ${CHROMIUM}`);

  const broker = new Broker(dir, 'broker', true, v21);
  const bare = new Broker(dir, 'bare', false, v21);
  let worker, control, browser, page, publisher, sleeper;
  const errors = [];
  const cleanup = async () => {
    if (browser) await browser.close().catch(() => {});
    if (worker) worker.stop();
    if (control) control.end();
    if (publisher) publisher.end(true);
    if (sleeper) sleeper.end(true);
    await broker.stop();
    await bare.stop();
  };

  // Another tab: opens url, waits until the broker address is one that
  // ready(address) accepts, and logs in as the operator.
  const logInOnNewPage = async (url, ready) => {
    const p = await browser.newPage();
    p.setDefaultTimeout(WAIT);
    if (v21) await p.authenticate({ username: 'operator', password: USERS.operator });
    await p.goto(url, { waitUntil: 'load' });
    await waitFor('the broker address', async () => ready(await p.$eval('#broker-url', (e) => e.value)));
    await p.type('#username', 'operator');
    await p.type('#password', USERS.operator);
    await p.keyboard.press('Enter');
    return p;
  };

  const t = new Steps('console', { story: true });
  const ids = {}; // payload -> letter id
  let expected;

  t.step('the broker with the plugin starts with the console in http_dir, every listener on 127.0.0.1 only', async () => {
    await broker.start();
    // Issue 38, part 5: the console's listeners bind where the
    // configuration says, on every broker line.
    for (const [what, port] of [['mqtt', broker.mqttPort], ['websockets', broker.wsPort], ['http_api', broker.httpPort]]) {
      const on = listeningOn(port);
      assert(JSON.stringify(on) === JSON.stringify(['127.0.0.1']), `the ${what} listener on port ${port} listens on ${on.join(', ') || 'nothing'}, not 127.0.0.1 alone`);
    }
    const r = await httpGet(broker.httpPort, '/', v21 ? `operator:${USERS.operator}` : undefined);
    assert(r.status === 200 && r.body.includes('<title>mosquitto-dlq console</title>'), `GET / gave ${r.status}: ${r.body.slice(0, 120)}`);
    const lib = await httpGet(broker.httpPort, '/vendor/mqtt.min.js', v21 ? `operator:${USERS.operator}` : undefined);
    assert(lib.status === 200 && lib.body.length > 100000, `GET /vendor/mqtt.min.js gave ${lib.status}, ${lib.body.length} bytes (npm ci in console/?)`);
  });

  t.step('the quick start: the worker fails 1, 3 and 5 three times each; three dead letters are kept', async () => {
    worker = new Worker(broker.mqttPort);
    await waitFor('the worker to subscribe', () => worker.err.includes('subscribed to numbers'));
    publisher = await mqttClient(broker.mqttPort, 'publisher');
    for (let n = 1; n <= 6; n++) {
      await publisher.publishAsync('numbers', String(n), {
        qos: 1, properties: { contentType: 'text/plain', userProperties: { source: 'console-test' } },
      });
    }
    control = await controlClient(broker.mqttPort);
    await waitFor('3 dead letters', async () => {
      const s = policyStatus(await control.run({ command: 'getStatus' }));
      return s.deadLetters === 3 && s.keptDeadLetters === 3 && s.pending === 0;
    });
    for (const n of [1, 3, 5]) assert(worker.failures(n) === 3, `the worker failed ${n} ${worker.failures(n)} times, not 3`);
    for (const n of [2, 4, 6]) assert(worker.out.includes(`processed ${n}\n`), `the worker did not process ${n}`);
  });

  t.step('a redrive before the page opens: 5 goes back to the worker, fails three times more and is kept again', async () => {
    const kept = (await control.run({ command: 'listDeadLetters' })).letters;
    let five;
    for (const l of kept) if ((await control.run({ command: 'getDeadLetter', id: l.id })).payload === '5') five = l.id;
    assert(five, `no kept letter of 5 among ${kept.map((l) => l.id).join(', ')}`);
    const r = await control.run({ command: 'redriveDeadLetters', ids: [five] });
    assert(JSON.stringify(r.results.map((x) => [x.id, x.result])) === JSON.stringify([[five, 'redriven']]), `redrive: ${JSON.stringify(r)}`);
    await waitFor('the worker to fail 5 three times more, and 4 dead letters', async () => {
      const s = policyStatus(await control.run({ command: 'getStatus' }));
      return worker.failures(5) === 6 && s.deadLetters === 4 && s.keptDeadLetters === 3 && s.pending === 0 && s.redriven === 1;
    });
    expected = policyStatus(await control.run({ command: 'getStatus' }));
  });

  t.step('the page opens in chromium and finds the websockets listener', async () => {
    browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      userDataDir: path.join(dir, 'chromium'),
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--disable-quic',
        '--disable-background-networking', '--disable-component-update', '--disable-sync', '--lang=en-GB'],
      protocolTimeout: WAIT,
    });
    page = await browser.newPage();
    page.setDefaultTimeout(WAIT);
    page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
    page.on('console', (m) => { if (m.type() === 'error') errors.push(`console error: ${m.text()}`); });
    // Every file the page asks for is there, but the probe for a 2.1
    // http_api listener's /api/v1/listeners, which a 2.0 broker has not.
    page.on('response', (r) => {
      if (r.status() >= 400 && !(r.status() === 404 && !v21 && r.url().endsWith('/api/v1/listeners'))) {
        errors.push(`HTTP ${r.status()}: ${r.url()}`);
      }
    });
    await page.setViewport({ width: 1280, height: 900 });
    if (v21) await page.authenticate({ username: 'operator', password: USERS.operator });
    await page.goto(broker.pageUrl(), { waitUntil: 'load' });
    assert((await page.title()) === 'mosquitto-dlq console', `title: ${await page.title()}`);
    await waitFor('the broker address', () => page.$eval('#broker-url', (e) => e.value));
    const url = await page.$eval('#broker-url', (e) => e.value);
    assert(url === `ws://127.0.0.1:${broker.wsPort}/`, `broker address ${url}, not the websockets listener's port ${broker.wsPort}`);
    assert((await page.evaluate(() => document.activeElement.id)) === 'username', 'the username field does not have the focus');
    const missing = await unlabelled(page);
    assert(missing.length === 0, `controls without a label: ${missing.join(', ')}`);
    await shot(page, '01-login.png');
  });

  t.step('a wrong password is said in the page, and nothing is shown', async () => {
    await page.keyboard.type('operator');
    await page.keyboard.press('Tab');
    assert((await page.evaluate(() => document.activeElement.id)) === 'password', 'Tab does not go from the username to the password');
    await page.keyboard.type('not-the-password');
    await page.keyboard.press('Enter');
    await waitFor('the error', async () => (await text(page, '#alert')).includes('Cannot log in'));
    const said = await text(page, '#alert');
    assert(/wrong username or password|not authorised/.test(said), `the error does not say why: ${said}`);
    assert(!(await visible(page, '#console')), 'the console is shown after a refused login');
    await shot(page, '02-wrong-password.png');
  });

  t.step('the right password by keyboard: the policies with their ack_timeout, and the counters (4 dead letters, 3 kept) as the plugin reports them', async () => {
    await page.click('#password', { clickCount: 3 });
    await page.keyboard.press('Backspace');
    await page.keyboard.type(USERS.operator);
    await page.keyboard.press('Enter');
    await waitFor('the console', () => visible(page, '#policies tr[data-filter="numbers"]'));
    assert((await text(page, '#alert')) === '', `an error after logging in: ${await text(page, '#alert')}`);
    // The first paint: the chart already holds the quick start's 9 NACKs and
    // 3 dead letters, and the redrive of 5 with its 3 NACKs and dead letter,
    // made before the page opened, in the minutes the plugin counted them in
    // (its getHistory), the current one included; the redrive in a series of
    // its own.
    const drawn = JSON.parse(await page.$eval('#chart-0', (e) => e.getAttribute('data-series')));
    const history = await control.run({ command: 'getHistory', policy: 'numbers' });
    const minutes = history.policies[0].minutes;
    const sum = (list, k) => list.reduce((a, m) => a + m[k], 0);
    assert(sum(minutes, 'nacks') === 12 && sum(minutes, 'deadLetters') === 4 && sum(minutes, 'redrives') === 1,
      `the plugin's history: ${JSON.stringify(minutes)}`);
    assert(drawn.length === 60 && sum(drawn, 'nacks') === 12 && sum(drawn, 'deadLetters') === 4 && sum(drawn, 'redrives') === 1,
      `the chart on first paint: ${JSON.stringify(drawn.filter((m) => m.nacks || m.deadLetters || m.redrives))}`);
    for (const m of minutes) {
      const at = drawn.find((d) => d.minute === m.minute);
      assert(at && at.nacks === m.nacks && at.deadLetters === m.deadLetters && at.redrives === m.redrives,
        `minute ${m.minute}: the plugin ${JSON.stringify(m)}, the chart ${JSON.stringify(at)}`);
    }
    // The redrives' line: off the zero line at the redrive's minute alone.
    const redriveLine = await page.$eval('#chart-0 polyline.series-redrives',
      (e) => e.getAttribute('points').split(' ').map((pt) => Number(pt.split(',')[1])));
    const zeroAt = Math.max(...redriveLine);
    const redrivenAt = drawn.findIndex((m) => m.redrives === 1);
    assert(redriveLine.length === 60 && redriveLine[redrivenAt] < zeroAt && redriveLine.filter((y) => y < zeroAt).length === 1,
      `the redrives' line: ${redriveLine.join(' ')} (the redrive at minute ${redrivenAt})`);
    const newest = minutes[minutes.length - 1];
    if (newest.minute === history.minute) {
      // NACKed in the minute still running: the chart's last point.
      const now = drawn[drawn.length - 1];
      assert(now.minute === history.minute && now.nacks === newest.nacks && now.nacks > 0, `the current minute: ${JSON.stringify(now)}`);
    }
    assert((await text(page, '#chart-words-0')).includes('last hour: 12 NACKs, 4 dead letters, 0 ack timeouts, 1 redrive.'),
      `the chart's words: ${await text(page, '#chart-words-0')}`);
    const row = await cells(page, 'numbers');
    assert(row[0] === 'numbers' && row[1] === '3' && row[2] === 'dead/numbers' && row[4] === NUMBERS_ACK_TIMEOUT, `policy row: ${row.join(' | ')}`);
    const slow = await cells(page, 'slow/#');
    assert(slow[0] === 'slow/#' && slow[1] === '1' && slow[2] === 'dead/slow' && slow[4] === SLOW_ACK_TIMEOUT, `slow/# row: ${slow.join(' | ')}`);
    const listed = (await control.run({ command: 'listPolicies' })).policies;
    assert(JSON.stringify(listed.map((p) => p.ackTimeout)) === JSON.stringify([NUMBERS_ACK_TIMEOUT, SLOW_ACK_TIMEOUT]),
      `listPolicies: ${JSON.stringify(listed)}`);
    assert((await page.$eval('#policies tr[data-filter="numbers"] [data-field="ackTimeout"]', (e) => e.textContent)) === NUMBERS_ACK_TIMEOUT,
      'the ack timeout cell');
    await waitFor('4 dead letters in the counters', async () => (await counter(page, 'deadLetters')) === '4');
    for (const k of COUNTERS) {
      const shown = await counter(page, k);
      assert(shown === String(expected[k]), `${k}: the page shows ${shown}, the plugin ${expected[k]}`);
    }
    assert((await counter(page, 'keptDeadLetters')) === '3', 'not 3 kept');
    // Dead letters by cause: the plugin's deadLettersByCause, the causes it counted.
    assert(expected.deadLettersByCause && expected.deadLettersByCause.nack === 4, `deadLettersByCause: ${JSON.stringify(expected.deadLettersByCause)}`);
    assert((await counter(page, 'deadLettersByCause')) === 'nack 4', `numbers by cause: ${await counter(page, 'deadLettersByCause')}`);
    assert((await counter(page, 'deadLettersByCause', 'slow/#')) === 'none', `slow/# by cause: ${await counter(page, 'deadLettersByCause', 'slow/#')}`);
    assert(expected.nacks === 12 && expected.retryCopies === 8, `the plugin counted ${expected.nacks} NACKs, ${expected.retryCopies} retry copies`);
    // The worker settles nothing but by NACKs, and 1h runs out of nothing.
    assert(expected.acks === 0 && expected.ackTimeouts === 0 && expected.finalNacks === 0,
      `the plugin counted ${expected.acks} ACKs, ${expected.ackTimeouts} ack timeouts, ${expected.finalNacks} final NACKs`);
    await waitFor('the slow/# policy\'s counters as the plugin has them', async () => !(await rowDiffers(page, control, 'slow/#')));
    for (const k of COUNTERS) assert((await counter(page, k, 'slow/#')) === '0', `slow/# ${k}: ${await counter(page, k, 'slow/#')}`);
    const lines = await page.$$eval('#charts svg', (svgs) => svgs.map((svg) => [...svg.querySelectorAll('polyline')].map((l) => l.getAttribute('class'))));
    assert(JSON.stringify(lines) === JSON.stringify([0, 1].map(() => ['series-nacks', 'series-deadLetters', 'series-ackTimeouts', 'series-redrives'])),
      `chart lines: ${JSON.stringify(lines)}`);
    const key = await page.$$eval('#chart-legend > span', (s) => s.map((e) => e.textContent));
    assert(JSON.stringify(key) === JSON.stringify(['NACKs', 'dead letters', 'ack timeouts', 'redrives']), `the chart's key: ${key.join(', ')}`);
    // Each entry of the key in its line's colour.
    const swatches = await page.$$eval('#chart-legend .swatch', (s) => s.map((e) => getComputedStyle(e).borderTopColor));
    const strokes = await page.$$eval('#chart-0 polyline', (s) => s.map((e) => getComputedStyle(e).stroke));
    assert(JSON.stringify(swatches) === JSON.stringify(strokes), `the key's colours ${swatches.join(', ')}, the lines' ${strokes.join(', ')}`);
    assert((await text(page, '#charts-title')) === 'NACKs, dead letters, ack timeouts and redrives per minute, last hour', `heading: ${await text(page, '#charts-title')}`);
    assert((await text(page, '#updated')).includes('; 0 ACKs, 0 ack timeouts, 0 final NACKs, '), `totals: ${await text(page, '#updated')}`);
  });

  t.step('the three dead letters, made before the page opened: topics, reasons, retry counts, payloads and properties', async () => {
    await waitFor('3 rows', async () => (await page.$$('#letters tbody tr.letter')).length === 3);
    const rows = await page.$$eval('#letters tbody tr.letter', (trs) => trs.map((tr) => ({ id: tr.dataset.id, cells: [...tr.cells].map((c) => c.textContent) })));
    // Newest first, as the plugin lists them, with its retry counts.
    const listed = (await control.run({ command: 'listDeadLetters' })).letters;
    assert(JSON.stringify(listed.map((l) => l.id)) === JSON.stringify(rows.map((r) => r.id)), 'the rows are not the letters newest first');
    const retries = new Map(listed.map((l) => [l.id, String(l.retryCount)]));
    for (const r of rows) {
      assert(r.cells[2] === 'dead/numbers' && r.cells[3] === 'numbers', `row ${r.id}: topics ${r.cells[2]}, ${r.cells[3]}`);
      assert(r.cells[4] === REASON, `row ${r.id}: reason "${r.cells[4]}"`);
      // The worker NACKed the last of its three attempts: cause nack.
      assert(r.cells[5] === 'nack', `row ${r.id}: cause "${r.cells[5]}"`);
      assert(r.cells[6] === retries.get(r.id) && Number(r.cells[6]) >= 2, `row ${r.id}: retry count ${r.cells[6]}, the plugin's ${retries.get(r.id)}`);
      assert(r.cells[7] === 'console-test-worker', `row ${r.id}: client ${r.cells[7]}`);
      // The broker that made it (plugin_opt_broker_name), as the plugin lists it.
      assert(r.cells[8] === BROKER_NAME, `row ${r.id}: broker "${r.cells[8]}"`);
    }
    assert((await text(page, '#letters-count')).includes('of 3'), `count line: ${await text(page, '#letters-count')}`);
    for (let i = 0; i < rows.length; i++) {
      // The first by keyboard (focus, Enter), the others by a click on the row.
      if (i === 0) {
        await page.focus(`#letters tr[data-id="${rows[i].id}"] button.open`);
        await page.keyboard.press('Enter');
      } else {
        await page.click(`#letters tr[data-id="${rows[i].id}"] td:nth-child(5)`);
      }
      await waitFor(`details of ${rows[i].id}`, async () => (await text(page, '#details-title')) === `Dead letter ${rows[i].id}`);
      const payload = await text(page, '#payload');
      ids[payload] = rows[i].id;
      const props = await page.$$eval('#properties tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent).join(' = ')));
      for (const want of ['content-type = text/plain', 'user property “source” = console-test', 'user property “retry-count” = ' + retries.get(rows[i].id),
        'user property “dead-letter-reason” = ' + REASON, 'user property “dead-letter-cause” = nack',
        'user property “dead-letter-broker” = ' + BROKER_NAME]) {
        assert(props.includes(want), `letter ${payload}: no property "${want}" among ${props.join('; ')}`);
      }
      assert((await text(page, '#payload-note')).startsWith('UTF-8 text'), 'the payload is not shown as text');
      const fields = await page.$$eval('#details-fields dt', (dts) => dts.map((dt) => [dt.textContent, dt.nextElementSibling.textContent]));
      assert(fields.some(([k, v]) => k === 'Broker' && v === BROKER_NAME), `letter ${payload}: details ${JSON.stringify(fields)}`);
      if (i === 0) {
        assert((await page.evaluate(() => document.activeElement.id)) === 'details', 'the details do not take the focus');
        await shot(page, '04-details.png');
      }
    }
    assert(['1', '3', '5'].every((p) => ids[p]), `payloads shown: ${Object.keys(ids).join(', ')}`);
    const missing = await unlabelled(page);
    assert(missing.length === 0, `controls without a label: ${missing.join(', ')}`);
    const c = await lowContrast(page);
    assert(c.checked > 50 && c.out.length === 0, `contrast (${c.checked} elements checked): ${c.out.join('; ')}`);
    await page.click('#details-close');
    await shot(page, '03-console.png');
  });

  t.step('a redrive of one, confirmed: the worker receives it again and the counters move', async () => {
    const before = worker.failures(3);
    const nacksBefore = Number(await counter(page, 'nacks'));
    await page.focus(`#letters tr[data-id="${ids['3']}"] input.pick`);
    await page.keyboard.press('Space');
    await page.click('#redrive');
    await waitFor('the confirmation', () => page.$eval('#confirm', (d) => d.open));
    const ask = await text(page, '#confirm-text');
    assert(ask.startsWith('Redrive 1 dead letter to each one’s origin topic'), `confirmation: ${ask}`);
    assert((await text(page, '#confirm-list')).includes(REASON), 'the confirmation does not list the letter');
    await shot(page, '05-confirm-redrive.png');
    await page.click('#confirm-ok');
    await waitFor('the result', async () => (await text(page, '#results-list')) === `${ids['3']}: redriven to numbers`);
    await waitFor('the worker to get 3 again', () => worker.failures(3) > before);
    await waitFor('the totals to count the redrive', async () => (await text(page, '#updated')).includes(' 2 redriven'));
    // The worker fails it again, three times: a fifth dead letter.
    await waitFor('5 dead letters in the counters', async () => (await counter(page, 'deadLetters')) === '5');
    await waitFor('NACKs to go up by 3', async () => Number(await counter(page, 'nacks')) === nacksBefore + 3);
    await waitFor('3 rows again, the newest the redriven 3', async () => {
      const r = await page.$$eval('#letters tbody tr.letter', (trs) => trs.map((tr) => tr.dataset.id));
      return r.length === 3 && !r.includes(ids['3']);
    });
    assert(worker.failures(3) === before + 3, `the worker failed 3 ${worker.failures(3) - before} more times, not 3`);
    // On top of what was made before the page opened, which the chart had from the plugin.
    await waitFor('the chart to count them', async () => (await text(page, '#chart-words-0')).includes('last hour: 15 NACKs, 5 dead letters, 0 ack timeouts, 2 redrives.'));
    const name = await page.$eval('#chart-0', (e) => e.getAttribute('aria-label'));
    assert(name.startsWith('NACKs, dead letters, ack timeouts and redrives per minute for numbers, last hour. ') &&
      name.endsWith('last hour: 15 NACKs, 5 dead letters, 0 ack timeouts, 2 redrives.'), `the chart's accessible name: ${name}`);
    const s = policyStatus(await control.run({ command: 'getStatus' }));
    assert(s.redriven === 2 && s.keptDeadLetters === 3, `plugin: redriven ${s.redriven}, kept ${s.keptDeadLetters}`);
    const drawn = JSON.parse(await page.$eval('#chart-0', (e) => e.getAttribute('data-series')));
    assert(drawn.reduce((a, m) => a + m.redrives, 0) === 2, `the chart's redrives: ${JSON.stringify(drawn.filter((m) => m.redrives))}`);
    await shot(page, '06-after-redrive.png');
  });

  t.step('a delete: cancelled changes nothing; confirmed, the letter goes', async () => {
    const victim = ids['1'];
    await page.click(`#letters tr[data-id="${victim}"] input.pick`);
    await page.click('#delete');
    await waitFor('the confirmation', () => page.$eval('#confirm', (d) => d.open));
    assert((await text(page, '#confirm-text')).startsWith('Delete 1 dead letter from the store?'), 'delete confirmation');
    await page.keyboard.press('Escape');
    await waitFor('the notice', async () => (await text(page, '#notice')) === 'Nothing was changed.');
    assert((await control.run({ command: 'listDeadLetters' })).letters.length === 3, 'a cancelled delete deleted');
    await page.click('#delete');
    await waitFor('the confirmation', () => page.$eval('#confirm', (d) => d.open));
    await page.click('#confirm-ok');
    await waitFor('the result', async () => (await text(page, '#results-list')) === `${victim}: deleted`);
    await waitFor('2 rows', async () => (await page.$$('#letters tbody tr.letter')).length === 2);
    await waitFor('2 kept', async () => (await counter(page, 'keptDeadLetters')) === '2');
    const left = (await control.run({ command: 'listDeadLetters' })).letters.map((l) => l.id);
    assert(left.length === 2 && !left.includes(victim), `the store holds ${left.join(', ')}`);
  });

  t.step('slow/#: an ACK, a final NACK and a delivery nobody settles in time, counted in the row, the chart and the totals', async () => {
    // A subscriber that ACKs slow/ack-me, NACKs slow/give-up as final, and
    // leaves slow/ignore-me: its ack_timeout runs out, the one attempt
    // max_attempts=1 allows, and it is dead-lettered.
    sleeper = await mqttClient(broker.mqttPort, 'worker', { clientId: SLEEPER });
    const got = [];
    sleeper.on('message', (topic, payload, packet) => {
      const props = (packet.properties && packet.properties.userProperties) || {};
      const id = [].concat(props['dlq-id'] || [])[0];
      got.push(topic);
      if (!id) return;
      if (topic === 'slow/ack-me') sleeper.publish('$CONTROL/dlq/v1/ack', id, { qos: 1 });
      if (topic === 'slow/give-up') {
        sleeper.publish('$CONTROL/dlq/v1/nack', id, { qos: 1, properties: { userProperties: { reason: FINAL_REASON, final: 'true' } } });
      }
    });
    await sleeper.subscribeAsync('slow/#', { qos: 1 });
    for (const topic of ['slow/ack-me', 'slow/give-up', 'slow/ignore-me']) await publisher.publishAsync(topic, topic.slice(5), { qos: 1 });
    let s;
    await waitFor('the plugin to count an ACK, a final NACK and an ack timeout', async () => {
      s = policyStatus(await control.run({ command: 'getStatus' }), 'slow/#');
      return s.acks === 1 && s.finalNacks === 1 && s.ackTimeouts === 1 && s.deadLetters === 2 && s.awaitingAck === 0;
    });
    assert(s.nacks === 1 && s.retryCopies === 0, `slow/#: ${s.nacks} NACKs, ${s.retryCopies} retry copies`);
    assert(JSON.stringify(got) === JSON.stringify(['slow/ack-me', 'slow/give-up', 'slow/ignore-me']), `the sleeper got ${got.join(', ')}`);
    await waitFor('the row to show the ack timeout', async () => (await counter(page, 'ackTimeouts', 'slow/#')) === '1');
    await waitFor('the slow/# row as the plugin has it', async () => !(await rowDiffers(page, control, 'slow/#')));
    for (const [k, v] of [['acks', '1'], ['nacks', '1'], ['finalNacks', '1'], ['ackTimeouts', '1'], ['awaitingAck', '0'], ['deadLetters', '2'],
      ['deadLettersByCause', 'final 1, ack_timeout 1']]) {
      assert((await counter(page, k, 'slow/#')) === v, `slow/# ${k}: the page shows ${await counter(page, k, 'slow/#')}, not ${v}`);
    }
    assert(!(await rowDiffers(page, control, 'numbers')), `numbers: ${await rowDiffers(page, control, 'numbers')}`);
    await waitFor('the chart to count them', async () => (await text(page, '#chart-words-1')).includes('last hour: 1 NACK, 2 dead letters, 1 ack timeout, 0 redrives.'));
    const name = await page.$eval('#chart-1', (e) => e.getAttribute('aria-label'));
    assert(name.startsWith('NACKs, dead letters, ack timeouts and redrives per minute for slow/#, last hour. '), `the chart's accessible name: ${name}`);
    const totals = (await control.run({ command: 'getStatus' })).totals;
    await waitFor('the totals', async () => (await text(page, '#updated')).includes(
      `; ${totals.acks} ACK${totals.acks === 1 ? '' : 's'}, 1 ack timeout, 1 final NACK, ${totals.awaitingAck} awaiting ACK now.`));
    // The two dead letters, newest first: the reasons the plugin gave.
    await waitFor('4 rows', async () => (await page.$$('#letters tbody tr.letter')).length === 4);
    const rows = await page.$$eval('#letters tbody tr.letter', (trs) => trs.slice(0, 2).map((tr) => [...tr.cells].slice(2, 8).map((c) => c.textContent)));
    const late = `subscriber "${SLEEPER}" did not acknowledge it within ${SLOW_ACK_TIMEOUT}`;
    const listed = (await control.run({ command: 'listDeadLetters', order: 'newest', filter: 'slow/#' })).letters;
    const want = [['slow/ignore-me', late, 'ack_timeout'], ['slow/give-up', FINAL_REASON, 'final']].map(([topic, reason, cause], i) =>
      ['dead/slow', topic, reason, cause, String(listed[i] && listed[i].retryCount), SLEEPER]);
    assert(JSON.stringify(rows) === JSON.stringify(want), `the newest rows: ${JSON.stringify(rows)}, not ${JSON.stringify(want)}`);
    const c = await lowContrast(page);
    assert(c.out.length === 0, `contrast: ${c.out.join('; ')}`);
    // Eighteen columns, yet no sideways scrolling at 1280 px, of the page
    // or of the policies' own region.
    const wider = await page.evaluate(() => [document.documentElement.scrollWidth, document.getElementById('policies').offsetWidth, window.innerWidth,
      document.getElementById('policies').parentElement.clientWidth]);
    assert(wider[0] <= wider[2] && wider[1] <= wider[2] && wider[1] <= wider[3],
      `the page is ${wider[0]} px wide, the policies ${wider[1]} px, their region ${wider[3]} px, the window ${wider[2]} px`);
    await shot(page, '07-ack-timeout.png');
  });

  t.step('the letters of one cause: the filter offers the plugin\'s causes and lists only the final NACK\'s', async () => {
    const words = Object.keys((await control.run({ command: 'getStatus' })).totals.deadLettersByCause);
    const offered = await page.$$eval('#filter-cause option', (os) => os.map((o) => o.value));
    assert(JSON.stringify(offered) === JSON.stringify(['', ...words]), `cause choices: ${offered.join(', ')}; the plugin's: ${words.join(', ')}`);
    await page.select('#filter-cause', 'final');
    await page.click('#apply-filter');
    await waitFor('one row, the final NACK\'s', async () => {
      const r = await page.$$eval('#letters tbody tr.letter', (trs) => trs.map((tr) => [tr.cells[3].textContent, tr.cells[5].textContent]));
      return JSON.stringify(r) === JSON.stringify([['slow/give-up', 'final']]);
    });
    assert((await text(page, '#letters-count')).includes('of 1'), `count line: ${await text(page, '#letters-count')}`);
    const listed = (await control.run({ command: 'listDeadLetters', cause: 'final' })).letters;
    assert(listed.length === 1 && listed[0].cause === 'final', `the plugin lists ${JSON.stringify(listed)}`);
    await page.select('#filter-cause', 'offline_qos0');
    await page.click('#apply-filter');
    await waitFor('no rows', async () => (await text(page, '#letters-count')) === 'No dead letters kept that match the filter.');
    await page.select('#filter-cause', '');
    await page.click('#apply-filter');
    await waitFor('4 rows again', async () => (await page.$$('#letters tbody tr.letter')).length === 4);
  });

  t.step('the charts split by cause: a line per cause with dead letters in the hour, and the words by cause', async () => {
    await page.click('#chart-by-cause');
    await waitFor('slow/#\'s chart by cause', async () => (await text(page, '#chart-words-1')).includes(
      'last hour: 1 NACK, 2 dead letters (final 1, ack_timeout 1), 1 ack timeout, 0 redrives.'));
    const lines = await page.$$eval('#charts svg', (svgs) => svgs.map((svg) => [...svg.querySelectorAll('polyline')].map((l) => l.getAttribute('class'))));
    assert(JSON.stringify(lines) === JSON.stringify([['series-nacks', 'series-cause-nack', 'series-ackTimeouts', 'series-redrives'],
      ['series-nacks', 'series-cause-final', 'series-cause-ack_timeout', 'series-ackTimeouts', 'series-redrives']]), `chart lines by cause: ${JSON.stringify(lines)}`);
    const keys = await page.$$eval('#charts .legend', (ps) => ps.map((p) => [...p.children].map((e) => e.textContent)));
    assert(JSON.stringify(keys) === JSON.stringify([['nack dead letters'], ['final dead letters', 'ack_timeout dead letters']]), `the charts' keys: ${JSON.stringify(keys)}`);
    const name = await page.$eval('#chart-0', (e) => e.getAttribute('aria-label'));
    assert(name.endsWith('last hour: 15 NACKs, 5 dead letters (nack 5), 0 ack timeouts, 2 redrives.'), `numbers' chart by cause: ${name}`);
    const c = await lowContrast(page);
    assert(c.out.length === 0, `contrast: ${c.out.join('; ')}`);
    await shot(page, '07b-by-cause.png');
    await page.click('#chart-by-cause');
    await waitFor('the chart back to four lines', async () => (await page.$$('#chart-1 polyline')).length === 4);
    assert((await text(page, '#chart-words-1')).includes('last hour: 1 NACK, 2 dead letters, 1 ack timeout, 0 redrives.'), `words: ${await text(page, '#chart-words-1')}`);
  });

  t.step('redrive all matching: numbers\' two letters, behind a confirmation that says how many and how fast, with a progress bar', async () => {
    const before = [worker.failures(3), worker.failures(5)];
    await page.select('#filter-policy', 'numbers');
    await page.click('#apply-filter');
    await waitFor('numbers\' 2 rows', async () => (await text(page, '#letters-count')).includes('of 2'));
    await page.$eval('#redrive-rate', (e) => { e.value = '50'; });
    await page.click('#redrive-all');
    await waitFor('the confirmation', () => page.$eval('#confirm', (d) => d.open));
    const ask = await text(page, '#confirm-text');
    assert(ask === 'Redrive all 2 dead letters that match the filter to each one’s origin topic, at 50 a second (about 1 s)? ' +
      'Each is published again and leaves the store.', `confirmation: ${ask}`);
    await shot(page, '07c-confirm-redrive-all.png');
    await page.click('#confirm-ok');
    await waitFor('the task to end in the page', async () => (await text(page, '#tasks-list')) ===
      'Task 1 (numbers to origin topics, 50/s): done, 2 moved, 0 failed, 0 left');
    const bar = await page.$eval('#tasks-list progress', (e) => [e.value, e.max]);
    assert(JSON.stringify(bar) === JSON.stringify([2, 2]), `the progress bar: ${bar}`);
    await waitFor('the worker to get 3 and 5 again', () => worker.failures(3) > before[0] && worker.failures(5) > before[1]);
    const task = (await control.run({ command: 'getStatus' })).redriveTasks[0];
    assert(task.policy === 'numbers' && task.state === 'done' && task.moved === 2 && task.rate === 50, `the plugin's task: ${JSON.stringify(task)}`);
    // The task's two redrives on the chart, beside the two single ones.
    await waitFor('the chart to count the task\'s redrives', async () => (await text(page, '#chart-words-0')).includes(', 4 redrives.'));
    await shot(page, '07d-redrive-all-done.png');
    await page.select('#filter-policy', '');
    await page.click('#apply-filter');
  });

  t.step('the fleet at a glance: letters of three edge brokers collected, the Brokers table counts each, one broker\'s letters on click', async () => {
    const fleet = await mqttClient(broker.mqttPort, 'publisher', { clientId: 'console-test-bridge' });
    try {
      let n = 0;
      for (const [edge, count] of Object.entries(FLEET)) {
        for (let i = 0; i < count; i++) await fleetLetter(fleet, edge, ++n);
      }
    } finally {
      fleet.end(true);
    }
    const total = Object.values(FLEET).reduce((a, b) => a + b, 0);
    await waitFor('the plugin to keep every fleet letter', async () =>
      (await control.run({ command: 'getStatus' })).totals.collected === total);
    const plugin = (await control.run({ command: 'listBrokers' })).brokers;
    for (const [edge, count] of Object.entries(FLEET)) {
      const b = plugin.find((x) => x.broker === edge);
      assert(b && b.kept === count, `the plugin's listBrokers for ${edge}: ${JSON.stringify(b)}`);
    }
    // A row per broker, by name, as the plugin lists them (this broker's
    // own letters among them), each with its newest letter's time.
    const rowsOf = () => page.$$eval('#brokers-table tbody tr', (trs) => trs.map((tr) => ({
      broker: tr.dataset.broker, cells: [...tr.cells].map((c) => c.textContent) })));
    await waitFor('the Brokers table to list the fleet', async () => {
      const r = await rowsOf();
      return Object.entries(FLEET).every(([edge, count]) => r.some((x) => x.broker === edge && x.cells[1] === String(count)));
    });
    const rows = await rowsOf();
    assert(JSON.stringify(rows.map((r) => r.broker)) === JSON.stringify(plugin.map((b) => b.broker)), `rows ${JSON.stringify(rows.map((r) => r.broker))}, the plugin's ${JSON.stringify(plugin.map((b) => b.broker))}`);
    for (const b of plugin) {
      const r = rows.find((x) => x.broker === b.broker);
      const when = await page.evaluate((ms) => window.DlqConsole.format.time(ms), b.newestTimeMs);
      assert(r.cells[0] === b.broker && r.cells[1] === String(b.kept) && r.cells[3] === when,
        `the row of ${b.broker}: ${JSON.stringify(r.cells)}; the plugin's ${JSON.stringify(b)}`);
    }
    assert(await visible(page, '#brokers-table'), 'the Brokers table is not shown');
    await waitFor('the fleet letters in the list', async () => {
      const shown = await page.$$eval('#letters tbody tr.letter', (trs) => trs.map((tr) => tr.cells[8].textContent));
      return Object.keys(FLEET).every((edge) => shown.includes(edge));
    });
    const c = await lowContrast(page);
    assert(c.out.length === 0, `contrast: ${c.out.join('; ')}`);
    const missing = await unlabelled(page);
    assert(missing.length === 0, `controls without a label: ${missing.join(', ')}`);
    await shot(page, '10-fleet.png');

    // edge-2's button: the list shows its two letters alone, and the
    // filter's Broker field says so.
    await page.click('#brokers-table tr[data-broker="edge-2"] button.pick-broker');
    await waitFor('edge-2\'s letters alone', async () => {
      const shown = await page.$$eval('#letters tbody tr.letter', (trs) => trs.map((tr) => tr.cells[8].textContent));
      return shown.length === FLEET['edge-2'] && shown.every((b) => b === 'edge-2');
    });
    assert((await page.$eval('#filter-broker', (e) => e.value)) === 'edge-2', 'the Broker field does not say edge-2');
    assert((await text(page, '#letters-count')).includes(`of ${FLEET['edge-2']}`), `count line: ${await text(page, '#letters-count')}`);
    await shot(page, '10b-fleet-one-broker.png');
    await page.$eval('#filter-broker', (e) => { e.value = ''; });
    await page.click('#apply-filter');
    await waitFor('every letter again', async () => (await page.$$eval('#letters tbody tr.letter',
      (trs) => trs.map((tr) => tr.cells[8].textContent))).includes('edge-3'));
  });

  t.step('a broker without the plugin: the page says so', async () => {
    await bare.start();
    const p2 = await logInOnNewPage(bare.pageUrl(), (url) => url !== '');
    await waitFor('the error', async () => (await text(p2, '#alert')).includes('is the plugin loaded in this broker?'));
    assert(!(await visible(p2, '#console')), 'the console is shown without the plugin');
    await shot(p2, '08-no-plugin.png');
    await p2.close();
  });

  t.step('no broker at the address, or not a websockets address: the page says so', async () => {
    const closed = await freePort();
    const p3 = await logInOnNewPage(broker.pageUrl(`?broker=ws://127.0.0.1:${closed}/`), (url) => url.includes(String(closed)));
    await waitFor('the error', async () => (await text(p3, '#alert')).includes(`Cannot reach the broker at ws://127.0.0.1:${closed}/`));
    await shot(p3, '09-unreachable.png');
    // An address that is not MQTT over WebSockets is refused before any
    // connection, with what to write instead.
    await p3.$eval('#broker-url', (e, u) => { e.value = u; }, `http://127.0.0.1:${closed}/`);
    await p3.click('#connect');
    await waitFor('the address error', async () => (await text(p3, '#alert')).includes('starts with “http:”'));
    assert((await text(p3, '#alert')).includes('ws://host:port/'), `the address error says nothing to do: ${await text(p3, '#alert')}`);
    assert(!(await visible(p3, '#console')), 'the console is shown for an http:// address');
    await p3.close();
  });

  t.step('no script errors in the page', async () => {
    // A refused login logs the browser's own WebSocket error, and a 404 its
    // "Failed to load resource": not the page's (the responses are checked).
    const own = errors.filter((e) => !/WebSocket connection to .* failed|Failed to load resource: the server responded with a status of 404/.test(e));
    assert(own.length === 0, own.join('\n'));
  });

  let ok = false;
  try {
    ok = await t.run();
  } finally {
    if (!ok) {
      console.log(`broker log:\n${broker.log().split('\n').slice(-60).join('\n')}`);
      if (worker) console.log(`worker stdout:\n${worker.out}\nworker stderr:\n${worker.err}`);
    }
    await cleanup();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  console.log(`console test: screenshots in ${SHOTS}`);
  process.exit(ok ? 0 : 1);
}

main().catch((e) => {
  console.log(`console test: ${e.stack || e}`);
  console.log('0%: Checks: 1, Failures: 1, Errors: 0');
  process.exit(1);
});
