/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * One policy's chart: NACKs, dead letters, ack timeouts and redrives per
 * minute over the last hour (rates.js's series), as an SVG of a line each (LINES) and
 * their key, with the figures also in words (the chart's accessible name
 * and the caption under it) for those who do not see it. Split by cause,
 * the dead letters are drawn as a line per dead-letter cause that had any
 * in the hour (CAUSE_LOOKS), and the words say each cause's count.
 */
(function (root) {
	'use strict';

	const NS = 'http://www.w3.org/2000/svg';
	const W = 600, H = 150, L = 40, R = 8, T = 10, B = 22;
	/* What is drawn, in this order, in the key and in the words: each line
	 * a getStatus counter (rates.js's SERIES), its words for one and many,
	 * its colour (3:1 and more against the white) and its dashes (solid,
	 * dashed, dotted, double in the key: told apart without the colours
	 * too). Redrives are the kept dead letters published again (a single
	 * redrive or a redrive task's), counted in the policy whose topic they
	 * went to. */
	const LINES = [
		{ key: 'nacks', one: 'NACK', label: 'NACKs', color: '#1d4f91', dash: '', style: 'solid' },
		{ key: 'deadLetters', one: 'dead letter', label: 'dead letters', color: '#a4161a', dash: '6 3', style: 'dashed' },
		{ key: 'ackTimeouts', one: 'ack timeout', label: 'ack timeouts', color: '#a65e00', dash: '2 3', style: 'dotted' },
		{ key: 'redrives', one: 'redrive', label: 'redrives', color: '#5f7a00', dash: '10 3 2 3', style: 'double' },
	];
	/* The looks of the cause lines, given out in the order of the causes
	 * (the plugin's): colours of 3:1 and more against the white, none the
	 * NACKs', ack timeouts' or redrives', and dashes of their own. */
	const CAUSE_LOOKS = [
		{ color: '#a4161a', dash: '6 3', style: 'dashed' },
		{ color: '#6a1b9a', dash: '10 3', style: 'dashed' },
		{ color: '#00695c', dash: '1 3', style: 'dotted' },
		{ color: '#ad1457', dash: '8 3 2 3', style: 'dashed' },
		{ color: '#37474f', dash: '4 4', style: 'dashed' },
		{ color: '#2e7d32', dash: '12 2', style: 'dashed' },
		{ color: '#4527a0', dash: '3 6', style: 'dotted' },
		{ color: '#6d4c41', dash: '6 2 1 2', style: 'dashed' },
		{ color: '#c2185b', dash: '2 2', style: 'dotted' },
	];

	function el(name, attrs, text) {
		const e = document.createElementNS(NS, name);
		for (const k in attrs) e.setAttribute(k, attrs[k]);
		if (text !== undefined) e.textContent = text;
		return e;
	}

	const count = (n, one, many) => n + ' ' + (n === 1 ? one : many);
	/* A minute's (or the hour's) figure for one line. */
	const value = (m, line) => (line.cause ? (m.deadLettersByCause || {})[line.cause] : m[line.key]) || 0;
	/* "nack 2, final 1": the causes with dead letters in m. */
	const causeWords = (m) => Object.keys(m.deadLettersByCause || {}).filter((w) => m.deadLettersByCause[w] > 0)
		.map((w) => w + ' ' + m.deadLettersByCause[w]).join(', ');
	/* "3 NACKs, 1 dead letter, 0 ack timeouts, 1 redrive" for m's figures;
	 * split by cause, "3 NACKs, 2 dead letters (nack 1, final 1), 0 ack
	 * timeouts, 1 redrive". */
	const words = (m, split) => LINES.map((l) => {
		const said = count(value(m, l), l.one, l.label);
		const by = split && l.key === 'deadLetters' ? causeWords(m) : '';
		return by ? said + ' (' + by + ')' : said;
	}).join(', ');
	/* "NACKs, dead letters, ack timeouts and redrives": what the chart draws. */
	const what = () => {
		const names = LINES.map((l) => l.label);
		return names.slice(0, -1).join(', ') + ' and ' + names[names.length - 1];
	};

	/* The hour's sums of series: each line's, and each cause's. */
	function hourOf(series) {
		const hour = { deadLettersByCause: {} };
		for (const l of LINES) hour[l.key] = series.reduce((a, m) => a + (m[l.key] || 0), 0);
		for (const m of series) {
			for (const w of Object.keys(m.deadLettersByCause || {})) {
				hour.deadLettersByCause[w] = (hour.deadLettersByCause[w] || 0) + m.deadLettersByCause[w];
			}
		}
		return hour;
	}

	/* split: the dead letters said by cause too. */
	function summary(series, split) {
		const last = series[series.length - 1] || {};
		return 'This minute: ' + words(last, split) + '; last hour: ' + words(hourOf(series), split) + '.';
	}

	/* The lines drawn: LINES, or split by cause (causes: the words, in the
	 * plugin's order), the dead letters' line replaced by a line per cause
	 * with dead letters in the hour, the others as they are. */
	function linesFor(series, causes) {
		if (!causes) return LINES;
		const hour = hourOf(series).deadLettersByCause;
		const byCause = causes.map((w, i) => Object.assign({ key: 'cause-' + w, cause: w, one: w + ' dead letter', label: w + ' dead letters' },
			CAUSE_LOOKS[i % CAUSE_LOOKS.length])).filter((l) => hour[l.cause] > 0);
		return LINES.flatMap((l) => (l.key === 'deadLetters' ? byCause : [l]));
	}

	/* The chart's accessible name: what it draws, for whom, and the figures. */
	function label(filter, said) {
		return what() + ' per minute for ' + filter + ', last hour. ' + said;
	}

	/* Draws series into svg (emptied first), split by cause when causes
	 * (the cause words) is given; returns the summary text. */
	function render(svg, series, filter, causes) {
		while (svg.firstChild) svg.removeChild(svg.firstChild);
		svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
		svg.setAttribute('role', 'img');
		const said = summary(series, !!causes);
		svg.setAttribute('aria-label', label(filter, said));
		/* The figures drawn, for scripts and tests: each minute's start
		 * (Unix seconds) and its count of each line of LINES. */
		svg.setAttribute('data-series', JSON.stringify(series.map((m) => {
			const o = { minute: m.minute * 60 };
			for (const l of LINES) o[l.key] = m[l.key] || 0;
			return o;
		})));
		const lines = linesFor(series, causes);
		let max = 1;
		for (const m of series) for (const l of lines) max = Math.max(max, value(m, l));
		const x = (i) => L + (i * (W - L - R)) / Math.max(1, series.length - 1);
		const y = (v) => T + (H - T - B) * (1 - v / max);
		svg.appendChild(el('line', { x1: L, y1: y(0), x2: W - R, y2: y(0), stroke: '#595959' }));
		svg.appendChild(el('line', { x1: L, y1: T, x2: L, y2: y(0), stroke: '#595959' }));
		svg.appendChild(el('text', { x: L - 4, y: T + 10, 'text-anchor': 'end', 'font-size': 12, fill: '#333' }, String(max)));
		svg.appendChild(el('text', { x: L - 4, y: y(0), 'text-anchor': 'end', 'font-size': 12, fill: '#333' }, '0'));
		svg.appendChild(el('text', { x: L, y: H - 6, 'font-size': 12, fill: '#333' }, '60 min ago'));
		svg.appendChild(el('text', { x: W - R, y: H - 6, 'text-anchor': 'end', 'font-size': 12, fill: '#333' }, 'now (per minute)'));
		for (const line of lines) {
			const pts = series.map((m, i) => x(i).toFixed(1) + ',' + y(value(m, line)).toFixed(1)).join(' ');
			const attrs = { points: pts, fill: 'none', stroke: line.color, 'stroke-width': 2, 'class': 'series-' + line.key };
			if (line.dash) attrs['stroke-dasharray'] = line.dash;
			svg.appendChild(el('polyline', attrs));
		}
		return said;
	}

	/* The lines' key (box emptied first), in the colours render draws:
	 * LINES, or the lines given (a chart's cause lines). */
	function legend(box, lines) {
		box.textContent = '';
		for (const line of lines || LINES) {
			const item = document.createElement('span');
			const swatch = document.createElement('span');
			swatch.className = 'swatch';
			swatch.style.borderColor = line.color;
			swatch.style.borderTopStyle = line.style;
			item.appendChild(swatch);
			item.appendChild(document.createTextNode(line.label));
			box.appendChild(item);
		}
	}

	/* The section's heading: "NACKs, dead letters, ack timeouts and redrives per minute, last hour". */
	function title() {
		return what() + ' per minute, last hour';
	}

	root.chart = { LINES, CAUSE_LOOKS, render, summary, label, legend, title, linesFor };
})(typeof module !== 'undefined' ? module.exports : (window.DlqConsole = window.DlqConsole || {}));
