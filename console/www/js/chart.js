/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * One policy's chart: NACKs and dead letters per minute over the last hour
 * (rates.js's series), as an SVG of two lines and their key, with the
 * figures also in words (the chart's accessible name and the caption under
 * it) for those who do not see it.
 */
(function (root) {
	'use strict';

	const NS = 'http://www.w3.org/2000/svg';
	const W = 600, H = 150, L = 40, R = 8, T = 10, B = 22;
	const LINES = [
		{ key: 'nacks', label: 'NACKs', color: '#1d4f91', dash: '' },
		{ key: 'deadLetters', label: 'dead letters', color: '#a4161a', dash: '6 3' },
	];

	function el(name, attrs, text) {
		const e = document.createElementNS(NS, name);
		for (const k in attrs) e.setAttribute(k, attrs[k]);
		if (text !== undefined) e.textContent = text;
		return e;
	}

	const count = (n, one, many) => n + ' ' + (n === 1 ? one : many);
	const words = (nacks, dead) => count(nacks, 'NACK', 'NACKs') + ', ' + count(dead, 'dead letter', 'dead letters');

	function summary(series) {
		const last = series[series.length - 1] || { nacks: 0, deadLetters: 0 };
		const sum = (k) => series.reduce((a, m) => a + m[k], 0);
		return 'This minute: ' + words(last.nacks, last.deadLetters) + '; last hour: ' +
			words(sum('nacks'), sum('deadLetters')) + '.';
	}

	/* Draws series into svg (emptied first); returns the summary text. */
	function render(svg, series, filter) {
		while (svg.firstChild) svg.removeChild(svg.firstChild);
		svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
		svg.setAttribute('role', 'img');
		const said = summary(series);
		svg.setAttribute('aria-label', 'NACKs and dead letters per minute for ' + filter + ', last hour. ' + said);
		let max = 1;
		for (const m of series) max = Math.max(max, m.nacks, m.deadLetters);
		const x = (i) => L + (i * (W - L - R)) / Math.max(1, series.length - 1);
		const y = (v) => T + (H - T - B) * (1 - v / max);
		svg.appendChild(el('line', { x1: L, y1: y(0), x2: W - R, y2: y(0), stroke: '#595959' }));
		svg.appendChild(el('line', { x1: L, y1: T, x2: L, y2: y(0), stroke: '#595959' }));
		svg.appendChild(el('text', { x: L - 4, y: T + 10, 'text-anchor': 'end', 'font-size': 12, fill: '#333' }, String(max)));
		svg.appendChild(el('text', { x: L - 4, y: y(0), 'text-anchor': 'end', 'font-size': 12, fill: '#333' }, '0'));
		svg.appendChild(el('text', { x: L, y: H - 6, 'font-size': 12, fill: '#333' }, '60 min ago'));
		svg.appendChild(el('text', { x: W - R, y: H - 6, 'text-anchor': 'end', 'font-size': 12, fill: '#333' }, 'now (per minute)'));
		for (const line of LINES) {
			const pts = series.map((m, i) => x(i).toFixed(1) + ',' + y(m[line.key]).toFixed(1)).join(' ');
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
			if (line.dash) swatch.style.borderTopStyle = 'dashed';
			item.appendChild(swatch);
			item.appendChild(document.createTextNode(line.label));
			box.appendChild(item);
		}
	}

	root.chart = { render, summary, legend };
})(typeof module !== 'undefined' ? module.exports : (window.DlqConsole = window.DlqConsole || {}));
