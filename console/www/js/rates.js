/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * NACKs and dead letters per minute, per policy, over the last hour, from
 * the counters of successive getStatus replies. The page keeps them (the
 * plugin keeps totals only): each reply's growth since the one before is
 * added to the minute it arrived in. A counter that went down (reset with
 * resetCounters, or a broker restart) starts again from zero: its whole
 * value is that sample's growth. The first reply only sets the base, so
 * what happened before the page was opened is not drawn as one spike.
 */
(function (root) {
	'use strict';

	const MINUTE = 60 * 1000;
	const SERIES = ['nacks', 'deadLetters'];

	class Rates {
		constructor(minutes) {
			this.minutes = minutes || 60;
			this.last = new Map();    /* filter -> {nacks, deadLetters} of the last reply */
			this.buckets = new Map(); /* filter -> Map(minute index -> {nacks, deadLetters}) */
		}

		/* status: a getStatus reply's data; nowMs: when it arrived. */
		add(status, nowMs) {
			const minute = Math.floor(nowMs / MINUTE);
			for (const p of status.policies || []) {
				const prev = this.last.get(p.filter);
				const cur = { nacks: p.nacks || 0, deadLetters: p.deadLetters || 0 };
				this.last.set(p.filter, cur);
				if (!prev) continue;
				let b = this.buckets.get(p.filter);
				if (!b) this.buckets.set(p.filter, (b = new Map()));
				let m = b.get(minute);
				if (!m) b.set(minute, (m = { nacks: 0, deadLetters: 0 }));
				for (const s of SERIES) m[s] += cur[s] >= prev[s] ? cur[s] - prev[s] : cur[s];
			}
			for (const b of this.buckets.values()) {
				for (const k of b.keys()) if (k <= minute - this.minutes) b.delete(k);
			}
		}

		/* The last hour for one policy, oldest minute first, the current
		 * (unfinished) minute last: [{minute, nacks, deadLetters}]. */
		series(filter, nowMs) {
			const now = Math.floor(nowMs / MINUTE);
			const b = this.buckets.get(filter) || new Map();
			const out = [];
			for (let k = now - this.minutes + 1; k <= now; k++) {
				const m = b.get(k) || { nacks: 0, deadLetters: 0 };
				out.push({ minute: k, nacks: m.nacks, deadLetters: m.deadLetters });
			}
			return out;
		}
	}

	root.Rates = Rates;
})(typeof module !== 'undefined' ? module.exports : (window.DlqConsole = window.DlqConsole || {}));
