/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * NACKs, dead letters (also by cause), ack timeouts and redrives per
 * minute, per policy, over the last hour: the plugin's own minutes (a getHistory reply,
 * taken when the page connects, seed), then the growth of the counters of
 * successive getStatus replies, each reply's growth since the one before
 * added to the minute it arrived in. The plugin's minutes are the truth:
 * a seed replaces the whole hour the page counted for each policy it has. A
 * counter that went down (reset with resetCounters, or a broker restart)
 * starts again from zero: its whole value is that sample's growth. The
 * first reply only sets the base, so what happened before the page was
 * opened is not drawn as one spike. A counter a reply lacks (a plugin older
 * than it) counts as 0. Redrives are getStatus' redriven and getHistory's
 * redrives (STATUS_NAMES: a series of another name in a getStatus
 * policy). Dead letters by cause come from a policy's
 * deadLettersByCause, one counter per cause word, in the plugin's order;
 * they are reset with the dead letters they add up to.
 */
(function (root) {
	'use strict';

	const MINUTE = 60 * 1000;
	/* The counters drawn, as chart.js's LINES and getHistory's minutes
	 * name them. */
	const SERIES = ['nacks', 'deadLetters', 'ackTimeouts', 'redrives'];
	/* The getStatus names of those it names otherwise. */
	const STATUS_NAMES = { redrives: 'redriven' };

	const zero = () => {
		const m = {};
		for (const s of SERIES) m[s] = 0;
		m.deadLettersByCause = {};
		return m;
	};

	/* A counter's growth from prev to cur (a reset: cur is all of it). */
	const growth = (cur, prev) => (cur >= prev ? cur - prev : cur);

	class Rates {
		constructor(minutes) {
			this.minutes = minutes || 60;
			this.last = new Map();    /* filter -> the SERIES counters (and by cause) of the last reply */
			this.buckets = new Map(); /* filter -> Map(minute index -> growth of each of SERIES, and by cause) */
			this.causes = [];         /* every cause word a reply named, in the plugin's order */
		}

		/* The SERIES figures of o (a getStatus policy, names STATUS_NAMES,
		 * or a getHistory minute) and its dead letters by cause (by:
		 * {word: n}), a figure it lacks (a plugin older than the page) as
		 * 0; every cause word named joins this.causes. */
		figures(o, by, names) {
			const f = zero();
			for (const s of SERIES) {
				const v = o[(names && names[s]) || s];
				f[s] = typeof v === 'number' ? v : 0;
			}
			const words = by && typeof by === 'object' ? by : {};
			for (const w of Object.keys(words)) {
				if (typeof words[w] !== 'number') continue;
				f.deadLettersByCause[w] = words[w];
				if (!this.causes.includes(w)) this.causes.push(w);
			}
			return f;
		}

		/* status: a getStatus reply's data; nowMs: when it arrived. */
		add(status, nowMs) {
			const minute = Math.floor(nowMs / MINUTE);
			for (const p of status.policies || []) {
				const prev = this.last.get(p.filter);
				const cur = this.figures(p, p.deadLettersByCause, STATUS_NAMES);
				this.last.set(p.filter, cur);
				if (!prev) continue;
				let b = this.buckets.get(p.filter);
				if (!b) this.buckets.set(p.filter, (b = new Map()));
				let m = b.get(minute);
				if (!m) b.set(minute, (m = zero()));
				for (const s of SERIES) m[s] += growth(cur[s], prev[s]);
				/* The causes reset together with the dead letters they add up
				 * to: a cause that stayed level across a reset grew by all. */
				const words = Object.keys(cur.deadLettersByCause);
				const reset = cur.deadLetters < prev.deadLetters ||
					words.some((w) => cur.deadLettersByCause[w] < (prev.deadLettersByCause[w] || 0));
				for (const w of words) {
					const g = reset ? cur.deadLettersByCause[w] : cur.deadLettersByCause[w] - (prev.deadLettersByCause[w] || 0);
					if (g) m.deadLettersByCause[w] = (m.deadLettersByCause[w] || 0) + g;
				}
			}
			for (const b of this.buckets.values()) {
				for (const k of b.keys()) if (k <= minute - this.minutes) b.delete(k);
			}
		}

		/* history: a getHistory reply's data, taken with the getStatus
		 * reply last given to add (one message: the same instant), so
		 * that the growth counted from there on comes on top; nowMs: when
		 * it arrived. The plugin's minutes (Unix seconds, on the broker's
		 * clock) are moved by the difference between its current minute
		 * and the page's, so that a clock set apart from the broker's
		 * still draws the broker's current minute as now. A policy the
		 * reply lacks keeps what the page counted. */
		seed(history, nowMs) {
			const now = Math.floor(nowMs / MINUTE);
			const shift = typeof history.minute === 'number' ? now - Math.floor(history.minute / 60) : 0;
			for (const p of history.policies || []) {
				if (!Array.isArray(p.minutes)) continue;
				const b = new Map();
				for (const m of p.minutes) {
					if (typeof m.minute !== 'number') continue;
					const k = Math.floor(m.minute / 60) + shift;
					if (k <= now - this.minutes || k > now) continue;
					b.set(k, this.figures(m, m.byCause));
				}
				this.buckets.set(p.filter, b);
			}
		}

		/* The last hour for one policy, oldest minute first, the current
		 * (unfinished) minute last: [{minute, nacks, deadLetters,
		 * ackTimeouts, redrives, deadLettersByCause: {word: n}}], every cause a reply
		 * named in each deadLettersByCause, in the plugin's order. */
		series(filter, nowMs) {
			const now = Math.floor(nowMs / MINUTE);
			const b = this.buckets.get(filter) || new Map();
			const out = [];
			for (let k = now - this.minutes + 1; k <= now; k++) {
				const m = b.get(k) || zero();
				const by = {};
				for (const w of this.causes) by[w] = m.deadLettersByCause[w] || 0;
				out.push(Object.assign({ minute: k }, m, { deadLettersByCause: by }));
			}
			return out;
		}
	}

	root.Rates = Rates;
	root.Rates.SERIES = SERIES;
	root.Rates.STATUS_NAMES = STATUS_NAMES;
})(typeof module !== 'undefined' ? module.exports : (window.DlqConsole = window.DlqConsole || {}));
