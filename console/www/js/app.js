/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The console's page: login, then the plugin's last hour per minute
 * (getHistory, with the first getStatus) so that the charts are full at
 * once, then every 2 s a getStatus that refreshes the policies' counters (dead letters by cause among them) and the charts
 * (split by cause on demand), and the letters' page when the store
 * changed; one letter's details on click; redrive and delete of the ticked
 * letters after a confirmation; a redrive task of every letter the filter
 * matches after a confirmation that says how many and how fast, its
 * progress bar fed by getStatus; the kept letters by broker (listBrokers,
 * when the store changed), a broker's letters shown on click. Every
 * failure is said in #alert.
 */
(function () {
	'use strict';

	const D = window.DlqConsole;
	const POLL_MS = 2000;
	const $ = (id) => document.getElementById(id);
	const cell = D.letters.cell;
	/* A policy's getStatus counters, in the columns' order. */
	const COUNTERS = ['tracked', 'acks', 'nacks', 'finalNacks', 'ackTimeouts', 'awaitingAck', 'retryCopies', 'delayed',
		'deadLetters', 'deadLettersByCause', 'keptDeadLetters', 'keptDeadLetterBytes', 'subscribersWithoutNack'];

	const state = {
		control: null,
		policies: [],
		rates: new D.Rates(60),
		pages: new D.letters.LetterPages(),
		timer: null,
		polling: false,
		storeMark: null, /* what the store looked like when the letters were last read */
		detailsId: null,
		lastStatus: null,
		byCause: false,  /* the charts split the dead letters by cause */
	};

	function say(text) { $('alert').textContent = text || ''; }
	function tell(text) { $('notice').textContent = text || ''; }

	/* Where to connect: ?broker=…; else, when an http_api listener of
	 * Mosquitto 2.1 served the page, that broker's websockets listener
	 * (its /api/v1/listeners says which); else the listener that served
	 * the page (a websockets listener with http_dir). */
	async function defaultUrl() {
		const q = new URLSearchParams(location.search).get('broker');
		if (q) return q;
		if (location.protocol !== 'http:' && location.protocol !== 'https:') return 'ws://localhost:8080/';
		const tls = location.protocol === 'https:';
		const same = (tls ? 'wss://' : 'ws://') + location.host + '/';
		try {
			const r = await fetch('api/v1/listeners', { cache: 'no-store' });
			if (!r.ok) return same;
			const ws = ((await r.json()).listeners || []).filter((l) => l.protocol === 'websockets' && l.port);
			const pick = ws.find((l) => !!l.tls === tls) || ws[0];
			if (!pick) return same;
			return (pick.tls ? 'wss://' : 'ws://') + location.hostname + ':' + pick.port + '/';
		} catch (e) {
			return same;
		}
	}

	async function connect(ev) {
		ev.preventDefault();
		say('');
		tell('');
		const url = $('broker-url').value.trim();
		const bad = D.format.brokerUrlError(url);
		if (bad) {
			say(bad);
			$('broker-url').focus();
			return;
		}
		$('connect').disabled = true;
		$('conn-state').textContent = 'Connecting to ' + url + '…';
		const control = new D.Control(window.mqtt, D.format);
		try {
			if (!window.mqtt) throw new D.ControlError('The MQTT library (vendor/mqtt.min.js) did not load: run npm ci in console/ and serve console/www.', 'connect');
			await control.connect(url, $('username').value, $('password').value);
			const data = await control.run({ command: 'listPolicies' });
			state.control = control;
			state.policies = data.policies || [];
		} catch (e) {
			control.close();
			$('conn-state').textContent = 'Not connected';
			$('connect').disabled = false;
			say(e.message);
			return;
		}
		control.onLost = (why) => { $('conn-state').textContent = 'Connection lost'; say(why); };
		const connected = 'Connected to ' + url + ' as ' + ($('username').value || 'anonymous');
		control.onBack = () => { $('conn-state').textContent = connected; say(''); };
		$('password').value = '';
		$('conn-state').textContent = connected;
		$('login').hidden = true;
		$('console').hidden = false;
		$('disconnect').hidden = false;
		fillPolicyFilter();
		buildCharts();
		state.storeMark = null;
		await poll(true);
		state.timer = setInterval(poll, POLL_MS);
	}

	function disconnect() {
		clearInterval(state.timer);
		state.timer = null;
		if (state.control) state.control.close();
		state.control = null;
		state.rates = new D.Rates(60);
		state.pages = new D.letters.LetterPages();
		state.lastStatus = null;
		$('console').hidden = true;
		$('login').hidden = false;
		$('disconnect').hidden = true;
		$('connect').disabled = false;
		$('conn-state').textContent = 'Not connected';
		say('');
		tell('');
		$('username').focus();
	}

	function fillPolicyFilter() {
		const sel = $('filter-policy');
		sel.length = 1;
		for (const p of state.policies) {
			const o = document.createElement('option');
			o.value = p.filter;
			o.textContent = p.filter;
			sel.appendChild(o);
		}
	}

	/* The cause filter's choices: the words of getStatus's
	 * deadLettersByCause, in the plugin's order, once. */
	function fillCauseFilter(status) {
		const sel = $('filter-cause');
		const by = status.totals && status.totals.deadLettersByCause;
		if (sel.length > 1 || !by || typeof by !== 'object') return;
		for (const w of Object.keys(by)) {
			const o = document.createElement('option');
			o.value = w;
			o.textContent = w;
			sel.appendChild(o);
		}
	}

	function buildCharts() {
		const box = $('charts');
		box.textContent = '';
		state.policies.forEach((p, i) => {
			const fig = document.createElement('figure');
			const cap = document.createElement('figcaption');
			cap.textContent = p.filter + ' → ' + p.deadLetter;
			const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
			svg.id = 'chart-' + i;
			/* Split by cause: the key of this chart's cause lines. */
			const key = document.createElement('p');
			key.className = 'legend';
			key.id = 'chart-key-' + i;
			key.setAttribute('aria-hidden', 'true');
			const words = document.createElement('p');
			words.className = 'hint';
			words.id = 'chart-words-' + i;
			fig.appendChild(cap);
			fig.appendChild(svg);
			fig.appendChild(key);
			fig.appendChild(words);
			box.appendChild(fig);
		});
	}

	function renderStatus(status) {
		const tbody = $('policies').tBodies[0];
		tbody.textContent = '';
		const byFilter = new Map((status.policies || []).map((p) => [p.filter, p]));
		state.policies.forEach((p, i) => {
			const s = byFilter.get(p.filter) || {};
			const tr = document.createElement('tr');
			tr.dataset.filter = p.filter;
			const th = document.createElement('th');
			th.scope = 'row';
			th.textContent = p.filter;
			tr.appendChild(th);
			tr.appendChild(cell(String(p.maxAttempts), 'num'));
			tr.appendChild(cell(p.deadLetter));
			tr.appendChild(cell(p.retryTo === 'delivery' ? 'the topic it arrived on' : p.retryTo));
			const ack = cell(D.format.ackTimeout(p));
			ack.dataset.field = 'ackTimeout';
			tr.appendChild(ack);
			for (const k of COUNTERS) {
				const c = k === 'deadLettersByCause' ? cell(D.format.byCause(s[k]), 'by-cause')
					: cell(k === 'keptDeadLetterBytes' ? D.format.bytes(s[k]) : D.format.counter(s[k]), 'num');
				c.dataset.counter = k;
				tr.appendChild(c);
			}
			tbody.appendChild(tr);
			const svg = $('chart-' + i);
			if (svg) {
				const series = state.rates.series(p.filter, Date.now());
				const causes = state.byCause ? state.rates.causes : null;
				$('chart-words-' + i).textContent = D.chart.render(svg, series, p.filter, causes);
				const lines = causes ? D.chart.linesFor(series, causes).filter((l) => l.cause) : [];
				D.chart.legend($('chart-key-' + i), lines);
			}
		});
		$('updated').textContent = 'Live: updated ' + D.format.time(Date.now()) + ' every ' + POLL_MS / 1000 + ' s. ' +
			D.format.totals(status.totals);
	}

	/* first: the charts start from the plugin's minutes (getHistory, in
	 * the same message as the getStatus that sets the counters' base); a
	 * plugin without getHistory (older than the page) leaves them to the
	 * polls, as before. */
	async function poll(first) {
		if (state.polling || !state.control) return;
		state.polling = true;
		try {
			const cmds = first ? [{ command: 'getStatus' }, { command: 'getHistory' }] : [{ command: 'getStatus' }];
			const [asked, history] = state.control.runAll(cmds);
			if (history) history.catch(() => {}); /* awaited below, after the status */
			const status = await asked;
			state.rates.add(status, Date.now());
			if (history) {
				try {
					state.rates.seed(await history, Date.now());
				} catch (e) {
					if (!(e instanceof D.ControlError && e.kind === 'command')) throw e;
				}
			}
			state.lastStatus = status;
			fillCauseFilter(status);
			renderStatus(status);
			const tasks = status.redriveTasks || [];
			$('tasks').hidden = tasks.length === 0;
			D.letters.renderTasks($('tasks-list'), tasks);
			const t = status.totals || {};
			const mark = t.keptDeadLetters + '/' + t.deadLetters + '/' + t.redriven + '/' + t.keptDeadLetterBytes + '/' + t.collected;
			if (mark !== state.storeMark) {
				/* New letters show at once on the newest page; on an older
				 * one, the operator chooses when to go back. */
				await loadBrokers();
				if (state.pages.index === 0 || state.storeMark === null) await loadLetters();
				else $('page-info').textContent = 'The store changed: go back to the newest page to see it.';
				state.storeMark = mark;
			}
			if ($('alert').textContent.startsWith('No answer')) say('');
		} catch (e) {
			say(e.message);
		} finally {
			state.polling = false;
		}
	}

	/* The Brokers table, from the counts the store keeps (listBrokers: no
	 * walk of the letters); hidden for a plugin older than the command. */
	async function loadBrokers() {
		let data;
		try {
			data = await state.control.run({ command: 'listBrokers' });
		} catch (e) {
			if (e instanceof D.ControlError && e.kind === 'command') {
				$('brokers').hidden = true;
				return;
			}
			throw e;
		}
		$('brokers').hidden = false;
		D.letters.renderBrokers($('brokers-table').tBodies[0], data.brokers, D.format, showBroker);
	}

	/* Only the letters of broker name, from the newest page on. */
	function showBroker(name) {
		$('filter-broker').value = name;
		applyFilter();
		$('letters-title').scrollIntoView();
	}

	function applyFilter() {
		state.pages.setFilter($('filter-policy').value, $('filter-reason').value.trim(), $('filter-cause').value,
			$('filter-broker').value.trim());
		loadLetters();
	}

	async function loadLetters() {
		const pages = state.pages;
		try {
			const data = await state.control.run(pages.command());
			pages.took(data);
		} catch (e) {
			pages.letters = [];
			$('letters-count').textContent = '';
			$('letters').tBodies[0].textContent = '';
			say(e.message);
			return;
		}
		D.letters.renderTable($('letters').tBodies[0], pages, D.format, openLetter);
		$('letters-count').textContent = pages.describe();
		$('page-newer').disabled = pages.index === 0;
		$('page-older').disabled = pages.next === null;
		$('page-info').textContent = 'Page ' + (pages.index + 1);
	}

	async function openLetter(id) {
		try {
			const l = await state.control.run({ command: 'getDeadLetter', id });
			D.letters.renderDetails({
				title: $('details-title'), fields: $('details-fields'), payload: $('payload'),
				payloadNote: $('payload-note'), props: $('properties').tBodies[0],
			}, l, D.format);
			state.detailsId = id;
			$('details').hidden = false;
			$('details').focus();
		} catch (e) {
			say(e.message);
		}
	}

	function confirmDialog(text, ids) {
		return new Promise((resolve) => {
			const dlg = $('confirm');
			$('confirm-text').textContent = text;
			const list = $('confirm-list');
			list.textContent = '';
			const byId = new Map((state.pages.letters || []).map((l) => [l.id, l]));
			for (const id of ids) {
				const li = document.createElement('li');
				const l = byId.get(id);
				li.textContent = l ? l.originTopic + ' at ' + D.format.time(l.timeMs) + ': ' + (l.reason || '(no reason)') : id;
				list.appendChild(li);
			}
			dlg.addEventListener('close', () => resolve(dlg.returnValue === 'ok'), { once: true });
			dlg.returnValue = '';
			dlg.showModal();
			$('confirm-cancel').focus();
		});
	}

	async function act(redrive) {
		const ids = [...state.pages.selected];
		say('');
		tell('');
		if (!ids.length) {
			say('Select one or more dead letters first (the boxes in the first column).');
			return;
		}
		const topic = $('redrive-topic').value.trim();
		const n = ids.length + ' dead letter' + (ids.length === 1 ? '' : 's');
		const text = redrive
			? 'Redrive ' + n + ' to ' + (topic ? 'the topic ' + topic : 'each one’s origin topic') + '? Each is published again and leaves the store.'
			: 'Delete ' + n + ' from the store? This cannot be undone.';
		if (!(await confirmDialog(text, ids))) {
			tell('Nothing was changed.');
			return;
		}
		const cmd = { command: redrive ? 'redriveDeadLetters' : 'deleteDeadLetters', ids };
		if (redrive && topic) cmd.topic = topic;
		try {
			const data = await state.control.run(cmd);
			const ok = D.letters.renderResults($('results-list'), redrive ? 'redriven' : 'deleted', data.results);
			$('results').hidden = false;
			tell((redrive ? 'Redriven: ' : 'Deleted: ') + ok + ' of ' + ids.length + '.');
			for (const id of ids) state.pages.selected.delete(id);
			if (ids.includes(state.detailsId)) $('details').hidden = true;
		} catch (e) {
			say(e.message);
		}
		state.storeMark = null;
		state.pages.index = 0;
		await poll();
	}

	/* A redrive task of every letter the current filter matches. */
	async function actAll() {
		say('');
		tell('');
		const pages = state.pages;
		const rate = Number($('redrive-rate').value);
		if (!Number.isInteger(rate) || rate < 1 || rate > 10000) {
			say('Letters a second: a whole number from 1 to 10000.');
			return;
		}
		if (!pages.matched) {
			say('No kept dead letter matches the filter.');
			return;
		}
		const topic = $('redrive-topic').value.trim();
		const n = pages.matched + ' dead letter' + (pages.matched === 1 ? '' : 's');
		const text = 'Redrive all ' + n + ' that match the filter to ' + (topic ? 'the topic ' + topic : 'each one’s origin topic') +
			', at ' + rate + ' a second (about ' + Math.ceil(pages.matched / rate) + ' s)? Each is published again and leaves the store.';
		if (!(await confirmDialog(text, []))) {
			tell('Nothing was changed.');
			return;
		}
		try {
			const task = await state.control.run(pages.taskCommand(rate, topic));
			tell('Redrive task ' + task.id + ' started: ' + task.left + ' letters.');
		} catch (e) {
			say(e.message);
		}
		await poll();
	}

	async function init() {
		$('charts-title').textContent = D.chart.title();
		D.chart.legend($('chart-legend'));
		$('login-form').addEventListener('submit', connect);
		$('disconnect').addEventListener('click', disconnect);
		$('letter-filter').addEventListener('submit', (ev) => {
			ev.preventDefault();
			applyFilter();
		});
		$('chart-by-cause').addEventListener('change', () => {
			state.byCause = $('chart-by-cause').checked;
			if (state.lastStatus) renderStatus(state.lastStatus);
		});
		$('page-older').addEventListener('click', () => { if (state.pages.older()) loadLetters(); });
		$('page-newer').addEventListener('click', () => { if (state.pages.newer()) loadLetters(); });
		$('redrive').addEventListener('click', () => act(true));
		$('delete').addEventListener('click', () => act(false));
		$('redrive-all').addEventListener('click', actAll);
		$('details-close').addEventListener('click', () => { $('details').hidden = true; state.detailsId = null; });
		window.addEventListener('error', (e) => say('The console hit an error: ' + e.message));
		window.addEventListener('unhandledrejection', (e) => say('The console hit an error: ' + (e.reason && e.reason.message || e.reason)));
		$('username').focus();
		const url = await defaultUrl();
		if (!$('broker-url').value) $('broker-url').value = url;
	}

	init();
})();
