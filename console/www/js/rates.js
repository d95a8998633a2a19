/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * NACKs, dead letters and ack timeouts per minute, per policy, over the
 * last hour, from the counters of successive getStatus replies. The page
 * keeps them (the plugin keeps totals only): each reply's growth since the
 * one before is added to the minute it arrived in. A counter that went down
 * (reset with resetCounters, or a broker restart) starts again from zero:
 * its whole value is that sample's growth. The first reply only sets the
 * base, so what happened before the page was opened is not drawn as one
 * spike. A counter a reply lacks (a plugin older than it) counts as 0.
 */
(function (root) {
	'use strict';

	const MINUTE = 60 * 1000;
	/* The getStatus counters drawn, as chart.js's LINES name them. */
	const SERIES = ['nacks', 'deadLetters', 'ackTimeouts'];

	const zero = () => {
		const m = {};
		for (const s of SERIES) m[s] = 0;
		return m;
	};

	class Rates {
		constructor(minutes) {
			this.minutes = minutes || 60;
			this.last = new Map();    /* filter -> the SERIES counters of the last reply */
			this.buckets = new Map(); /* filter -> Map(minute index -> growth of each of SERIES) */
		}

		/* status: a getStatus reply's data; nowMs: when it arrived. */
		add(status, nowMs) {
			const minute = Math.floor(nowMs / MINUTE);
			for (const p of status.policies || []) {
				const prev = this.last.get(p.filter);
				const cur = zero();
				for (const s of SERIES) cur[s] = typeof p[s] === 'number' ? p[s] : 0;
				this.last.set(p.filter, cur);
				if (!prev) continue;
				let b = this.buckets.get(p.filter);
				if (!b) this.buckets.set(p.filter, (b = new Map()));
				let m = b.get(minute);
				if (!m) b.set(minute, (m = zero()));
				for (const s of SERIES) m[s] += cur[s] >= prev[s] ? cur[s] - prev[s] : cur[s];
			}
			for (const b of this.buckets.values()) {
				for (const k of b.keys()) if (k <= minute - this.minutes) b.delete(k);
			}
		}

		/* The last hour for one policy, oldest minute first, the current
		 * (unfinished) minute last: [{minute, nacks, deadLetters, ackTimeouts}]. */
		series(filter, nowMs) {
			const now = Math.floor(nowMs / MINUTE);
			const b = this.buckets.get(filter) || new Map();
			const out = [];
			for (let k = now - this.minutes + 1; k <= now; k++) out.push(Object.assign({ minute: k }, b.get(k) || zero()));
			return out;
		}
	}

	root.Rates = Rates;
	root.Rates.SERIES = SERIES;
})(typeof module !== 'undefined' ? module.exports : (window.DlqConsole = window.DlqConsole || {}));
