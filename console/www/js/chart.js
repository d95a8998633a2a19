/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * One policy's chart: NACKs, dead letters and ack timeouts per minute over
 * the last hour (rates.js's series), as an SVG of a line each (LINES) and
 * their key, with the figures also in words (the chart's accessible name
 * and the caption under it) for those who do not see it.
 */
(function (root) {
	'use strict';

	const NS = 'http://www.w3.org/2000/svg';
	const W = 600, H = 150, L = 40, R = 8, T = 10, B = 22;
	/* What is drawn, in this order, in the key and in the words: each line
	 * a getStatus counter (rates.js's SERIES), its words for one and many,
	 * its colour (3:1 and more against the white) and its dashes (solid,
	 * dashed, dotted: told apart without the colours too). */
	const LINES = [
		{ key: 'nacks', one: 'NACK', label: 'NACKs', color: '#1d4f91', dash: '', style: 'solid' },
		{ key: 'deadLetters', one: 'dead letter', label: 'dead letters', color: '#a4161a', dash: '6 3', style: 'dashed' },
		{ key: 'ackTimeouts', one: 'ack timeout', label: 'ack timeouts', color: '#a65e00', dash: '2 3', style: 'dotted' },
	];

	function el(name, attrs, text) {
		const e = document.createElementNS(NS, name);
		for (const k in attrs) e.setAttribute(k, attrs[k]);
		if (text !== undefined) e.textContent = text;
		return e;
	}

	const count = (n, one, many) => n + ' ' + (n === 1 ? one : many);
	/* "3 NACKs, 1 dead letter, 0 ack timeouts" for m's figures. */
	const words = (m) => LINES.map((l) => count(m[l.key] || 0, l.one, l.label)).join(', ');
	/* "NACKs, dead letters and ack timeouts": what the chart draws. */
	const what = () => {
		const names = LINES.map((l) => l.label);
		return names.slice(0, -1).join(', ') + ' and ' + names[names.length - 1];
	};

	function summary(series) {
		const last = series[series.length - 1] || {};
		const hour = {};
		for (const l of LINES) hour[l.key] = series.reduce((a, m) => a + (m[l.key] || 0), 0);
		return 'This minute: ' + words(last) + '; last hour: ' + words(hour) + '.';
	}

	/* The chart's accessible name: what it draws, for whom, and the figures. */
	function label(filter, said) {
		return what() + ' per minute for ' + filter + ', last hour. ' + said;
	}

	/* Draws series into svg (emptied first); returns the summary text. */
	function render(svg, series, filter) {
		while (svg.firstChild) svg.removeChild(svg.firstChild);
		svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
		svg.setAttribute('role', 'img');
		const said = summary(series);
		svg.setAttribute('aria-label', label(filter, said));
		let max = 1;
		for (const m of series) for (const l of LINES) max = Math.max(max, m[l.key] || 0);
		const x = (i) => L + (i * (W - L - R)) / Math.max(1, series.length - 1);
		const y = (v) => T + (H - T - B) * (1 - v / max);
		svg.appendChild(el('line', { x1: L, y1: y(0), x2: W - R, y2: y(0), stroke: '#595959' }));
		svg.appendChild(el('line', { x1: L, y1: T, x2: L, y2: y(0), stroke: '#595959' }));
		svg.appendChild(el('text', { x: L - 4, y: T + 10, 'text-anchor': 'end', 'font-size': 12, fill: '#333' }, String(max)));
		svg.appendChild(el('text', { x: L - 4, y: y(0), 'text-anchor': 'end', 'font-size': 12, fill: '#333' }, '0'));
		svg.appendChild(el('text', { x: L, y: H - 6, 'font-size': 12, fill: '#333' }, '60 min ago'));
		svg.appendChild(el('text', { x: W - R, y: H - 6, 'text-anchor': 'end', 'font-size': 12, fill: '#333' }, 'now (per minute)'));
		for (const line of LINES) {
			const pts = series.map((m, i) => x(i).toFixed(1) + ',' + y(m[line.key] || 0).toFixed(1)).join(' ');
			const attrs = { points: pts, fill: 'none', stroke: line.color, 'stroke-width': 2, 'class': 'series-' + line.key };
			if (line.dash) attrs['stroke-dasharray'] = line.dash;
			svg.appendChild(el('polyline', attrs));
		}
		return said;
	}

	/* The lines' key (box emptied first), in the colours render draws. */
	function legend(box) {
		box.textContent = '';
		for (const line of LINES) {
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

	/* The section's heading: "NACKs, dead letters and ack timeouts per minute, last hour". */
	function title() {
		return what() + ' per minute, last hour';
	}

	root.chart = { LINES, render, summary, label, legend, title };
})(typeof module !== 'undefined' ? module.exports : (window.DlqConsole = window.DlqConsole || {}));
