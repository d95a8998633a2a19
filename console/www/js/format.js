/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Turning what the plugin answers into words and text for the page: sizes,
 * times, a counter, a policy's ack_timeout, the totals of all policies,
 * dead letters by cause, a payload as text or hex, a property as one line,
 * and an error (from the connection, a publish or a command) as a sentence
 * an operator can act on. No DOM here: tests/console/test_units.js checks it in node.
 */
(function (root) {
	'use strict';

	function bytes(n) {
		if (typeof n !== 'number' || !isFinite(n)) return '—';
		if (n < 1024) return n + ' B';
		if (n < 1024 * 1024) return (n / 1024).toFixed(1) + ' KiB';
		return (n / (1024 * 1024)).toFixed(1) + ' MiB';
	}

	/* A getStatus counter or gauge as its cell shows it: a dash when the
	 * reply has none (a plugin older than the page). */
	function counter(v) {
		return typeof v === 'number' && isFinite(v) ? String(v) : '—';
	}

	/* A listPolicies entry's ack_timeout as configured ("30s"), or "none":
	 * a policy without one has neither ackTimeout nor ackTimeoutMs. */
	function ackTimeout(policy) {
		if (policy && typeof policy.ackTimeout === 'string' && policy.ackTimeout) return policy.ackTimeout;
		if (policy && typeof policy.ackTimeoutMs === 'number' && policy.ackTimeoutMs > 0) return policy.ackTimeoutMs + 'ms';
		return 'none';
	}

	const count = (n, one, many) => counter(n) + ' ' + (n === 1 ? one : many);

	/* getStatus's totals in words: "All policies: 4 dead letters, 3 kept
	 * (1.2 KiB), 0 dropped for size, 1 for age, 1 redriven, 0 pending; 2 ACKs, 1 ack timeout, 0 final
	 * NACKs, 3 awaiting ACK now." */
	function totals(t) {
		t = t || {};
		return 'All policies: ' + count(t.deadLetters, 'dead letter', 'dead letters') + ', ' + counter(t.keptDeadLetters) +
			' kept (' + bytes(t.keptDeadLetterBytes) + '), ' + counter(t.deadLettersDropped) + ' dropped for size, ' +
			counter(t.deadLettersExpired) + ' for age, ' + counter(t.redriven) + ' redriven, ' + counter(t.pending) + ' pending; ' +
			count(t.acks, 'ACK', 'ACKs') + ', ' + count(t.ackTimeouts, 'ack timeout', 'ack timeouts') + ', ' +
			count(t.finalNacks, 'final NACK', 'final NACKs') + ', ' + counter(t.awaitingAck) + ' awaiting ACK now.';
	}

	/* getStatus's deadLettersByCause (a policy's or the totals') in words,
	 * the causes with dead letters in the plugin's order: "nack 2, final 1";
	 * "none" when every one is 0; a dash when the reply has none (a plugin
	 * older than the page). */
	function byCause(by) {
		if (!by || typeof by !== 'object') return '—';
		const some = Object.keys(by).filter((w) => typeof by[w] === 'number' && by[w] > 0);
		return some.length ? some.map((w) => w + ' ' + by[w]).join(', ') : 'none';
	}

	/* "2026-12-03 07:04:05" in the browser's own time zone. */
	function time(ms) {
		if (typeof ms !== 'number' || !isFinite(ms)) return '—';
		const d = new Date(ms);
		const p = (v) => String(v).padStart(2, '0');
		return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + ' ' +
			p(d.getHours()) + ':' + p(d.getMinutes()) + ':' + p(d.getSeconds());
	}

	function base64ToBytes(s) {
		const bin = typeof atob === 'function' ? atob(s) : Buffer.from(s, 'base64').toString('binary');
		const out = new Uint8Array(bin.length);
		for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
		return out;
	}

	/* 16 bytes a line: offset, hex, and the printable ASCII beside. */
	function hexDump(b) {
		const lines = [];
		for (let off = 0; off < b.length; off += 16) {
			const row = b.subarray(off, off + 16);
			let hex = '', text = '';
			for (let i = 0; i < 16; i++) {
				hex += i < row.length ? row[i].toString(16).padStart(2, '0') + ' ' : '   ';
				if (i < row.length) text += row[i] >= 0x20 && row[i] < 0x7f ? String.fromCharCode(row[i]) : '.';
			}
			lines.push(off.toString(16).padStart(8, '0') + '  ' + hex + ' ' + text);
		}
		return lines.join('\n');
	}

	/* A getDeadLetter reply's payload: {kind:'text'|'hex', text, note}. */
	function payloadView(letter) {
		const hex = letter.payloadEncoding === 'base64';
		const b = hex ? base64ToBytes(letter.payload || '') : null;
		const t = hex ? '' : letter.payload || '';
		const cut = letter.payloadTruncated ? ' (cut: the reply holds the first ' +
			bytes(hex ? b.length : t.length) + ' of ' + bytes(letter.payloadBytes) + ')' : '';
		if (hex) return { kind: 'hex', text: b.length ? hexDump(b) : '(empty)', note: 'not UTF-8: shown in hex, ' + bytes(b.length) + cut };
		return { kind: 'text', text: t.length ? t : '(empty)', note: 'UTF-8 text, ' + bytes(letter.payloadBytes) + cut };
	}

	/* A property of a getDeadLetter reply as [name, value]. */
	function property(p) {
		if (p.name === 'user-property') return ['user property “' + p.key + '”', String(p.value)];
		if (p.name) return [p.name, String(p.value)];
		return ['property ' + p.identifier, '(kept, not shown by the plugin)'];
	}

	const CONNACK = {
		128: 'the broker refused the connection (unspecified error)',
		133: 'the broker refused this client id',
		134: 'wrong username or password',
		135: 'not authorised: a wrong username or password, or a user the broker does not let connect',
		136: 'the broker is unavailable',
		137: 'the broker is busy',
		138: 'this user is banned',
		140: 'the broker refused the authentication method',
		151: 'the broker refused: quota exceeded',
		159: 'the broker refused: connection rate exceeded',
	};

	/* Words for a failed connect: err is MQTT.js's error (code = CONNACK
	 * reason code) or null when the connection closed before any CONNACK. */
	function connectError(err, url) {
		const code = err && typeof err.code === 'number' ? err.code : null;
		if (CONNACK[code]) return 'Cannot log in: ' + CONNACK[code] + ' (MQTT reason code ' + code + ').';
		if (code === 5) return 'Cannot log in: not authorised (MQTT 3.1.1 return code 5).';
		if (code === 4) return 'Cannot log in: wrong username or password.';
		return 'Cannot reach the broker at ' + url + ': no MQTT over WebSockets connection could be made' +
			(err && err.message ? ' (' + err.message + ')' : '') +
			'. Check the address, that the broker runs, and that the listener is a websockets listener.';
	}

	/* Words for a broker address the page cannot use, or null when it is a
	 * ws:// or wss:// URL (MQTT over WebSockets is all a browser speaks). */
	function brokerUrlError(url) {
		let u;
		try {
			u = new URL(url);
		} catch (e) {
			return 'The broker address “' + url + '” is not a URL: write it as ws://host:port/ or wss://host:port/.';
		}
		if (u.protocol !== 'ws:' && u.protocol !== 'wss:') {
			return 'The broker address “' + url + '” starts with “' + u.protocol + '”: a browser speaks MQTT over WebSockets only, ' +
				'so write ws://host:port/ or wss://host:port/ (the port of a websockets listener).';
		}
		return null;
	}

	root.format = { bytes, counter, ackTimeout, totals, byCause, time, base64ToBytes, hexDump, payloadView, property, connectError, brokerUrlError };
})(typeof module !== 'undefined' ? module.exports : (window.DlqConsole = window.DlqConsole || {}));
