/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The kept dead letters: the page being shown (listDeadLetters, newest
 * first, paged by the plugin's cursor, filtered by policy, reason,
 * dead-letter cause and the broker that made them), which letters are ticked, the redrive task the
 * current filter makes (startRedriveTask), and the DOM of the table, of
 * one letter's details, of an action's results, of the tasks' progress and
 * of the kept letters by broker (listBrokers).
 * Everything a client controls (topics, reasons, payloads, properties)
 * goes into the page as text (textContent), never as markup.
 */
(function (root) {
	'use strict';

	const PAGE = 20;

	/* Paging state: cursors[i] is what page i was asked from (null: the
	 * newest); filters apply to every page. Pure, so node tests it. */
	class LetterPages {
		constructor() {
			this.cursors = [null];
			this.index = 0;
			this.next = null;       /* the current page's "next", or null: last page */
			this.matched = null;    /* from the first page */
			this.filter = { policy: '', reason: '', cause: '', broker: '' };
			this.selected = new Set();
		}

		command() {
			const c = { command: 'listDeadLetters', order: 'newest', limit: PAGE };
			if (this.cursors[this.index] !== null) c.cursor = this.cursors[this.index];
			if (this.filter.policy) c.filter = this.filter.policy;
			if (this.filter.reason) c.reason = this.filter.reason;
			if (this.filter.cause) c.cause = this.filter.cause;
			if (this.filter.broker) c.broker = this.filter.broker;
			return c;
		}

		took(data) {
			this.next = typeof data.next === 'number' ? data.next : null;
			if (this.index === 0 && typeof data.matched === 'number') this.matched = data.matched;
			this.letters = data.letters || [];
		}

		older() {
			if (this.next === null) return false;
			this.cursors.length = this.index + 1;
			this.cursors.push(this.next);
			this.index++;
			return true;
		}

		newer() {
			if (this.index === 0) return false;
			this.index--;
			return true;
		}

		/* The redrive task of every letter the current filter matches, at
		 * rate letters a second, to topic ('' or absent: each letter's
		 * origin topic). */
		taskCommand(rate, topic) {
			const c = { command: 'startRedriveTask', rate };
			if (this.filter.policy) c.filter = this.filter.policy;
			if (this.filter.reason) c.reason = this.filter.reason;
			if (this.filter.cause) c.cause = this.filter.cause;
			if (this.filter.broker) c.broker = this.filter.broker;
			if (topic) c.to = topic;
			return c;
		}

		/* cause: a dead-letter cause's word, or '' for any; broker: the name of
		 * the broker that made the letters (dead-letter-broker), or '' for any. */
		setFilter(policy, reason, cause, broker) {
			this.filter = { policy, reason, cause: cause || '', broker: broker || '' };
			this.cursors = [null];
			this.index = 0;
			this.selected.clear();
		}

		/* "Letters 21–40 of 57" */
		describe() {
			const n = (this.letters || []).length;
			const from = this.index * PAGE + 1;
			const filtered = this.filter.policy || this.filter.reason || this.filter.cause || this.filter.broker;
			if (this.matched === 0) return 'No dead letters kept' + (filtered ? ' that match the filter.' : '.');
			if (n === 0) return 'No letters on this page.';
			return 'Letters ' + from + '–' + (from + n - 1) + ' of ' + this.matched + ', newest first.';
		}
	}

	/* A table cell holding text (also the page's policies table). */
	function td(text, cls) {
		const c = document.createElement('td');
		c.textContent = text;
		if (cls) c.className = cls;
		return c;
	}

	/* Fills tbody with pages.letters; onOpen(id) shows one. */
	function renderTable(tbody, pages, format, onOpen) {
		tbody.textContent = '';
		for (const l of pages.letters || []) {
			const tr = document.createElement('tr');
			tr.className = 'letter';
			tr.dataset.id = l.id;
			const pick = document.createElement('td');
			const box = document.createElement('input');
			box.type = 'checkbox';
			box.className = 'pick';
			box.checked = pages.selected.has(l.id);
			box.setAttribute('aria-label', 'Select the dead letter from ' + l.originTopic + ' at ' + format.time(l.timeMs));
			box.addEventListener('change', () => { if (box.checked) pages.selected.add(l.id); else pages.selected.delete(l.id); });
			box.addEventListener('click', (e) => e.stopPropagation());
			pick.appendChild(box);
			tr.appendChild(pick);
			tr.appendChild(td(format.time(l.timeMs)));
			tr.appendChild(td(l.deadLetter));
			tr.appendChild(td(l.originTopic));
			tr.appendChild(td(l.reason || '(none given)', 'reason'));
			tr.appendChild(td(l.cause || '—', 'cause'));
			tr.appendChild(td(String(l.retryCount), 'num'));
			tr.appendChild(td(l.client || '—'));
			tr.appendChild(td(l.broker || '—', 'broker'));
			const open = document.createElement('td');
			const b = document.createElement('button');
			b.type = 'button';
			b.className = 'plain open';
			b.textContent = 'Details';
			b.setAttribute('aria-label', 'Details of the dead letter from ' + l.originTopic + ' at ' + format.time(l.timeMs));
			b.addEventListener('click', (e) => { e.stopPropagation(); onOpen(l.id); });
			open.appendChild(b);
			tr.appendChild(open);
			tr.addEventListener('click', () => onOpen(l.id));
			tbody.appendChild(tr);
		}
	}

	/* One letter (a getDeadLetter reply) into the details section. */
	function renderDetails(els, l, format) {
		els.title.textContent = 'Dead letter ' + l.id;
		els.fields.textContent = '';
		const rows = [
			['Broker', l.broker || '—'], ['Dead-letter topic', l.deadLetter], ['Origin topic', l.originTopic], ['Policy', l.filter],
			['Reason', l.reason || '(none given)'], ['Cause', l.cause || '—'], ['Retry count', String(l.retryCount)], ['Client', l.client || '—'],
			['Time', format.time(l.timeMs) + ' (' + l.time + ')'], ['QoS', String(l.qos)],
			['Origin dlq-id', l.originId], ['Letter id', l.id],
		];
		for (const [k, v] of rows) {
			const dt = document.createElement('dt');
			dt.textContent = k;
			const dd = document.createElement('dd');
			dd.textContent = v;
			els.fields.appendChild(dt);
			els.fields.appendChild(dd);
		}
		const p = format.payloadView(l);
		els.payload.textContent = p.text;
		els.payload.dataset.kind = p.kind;
		els.payloadNote.textContent = p.note;
		els.props.textContent = '';
		const props = l.properties || [];
		for (const prop of props) {
			const [k, v] = format.property(prop);
			const tr = document.createElement('tr');
			tr.appendChild(td(k));
			tr.appendChild(td(v));
			els.props.appendChild(tr);
		}
		if (!props.length || l.propertiesTruncated) {
			const tr = document.createElement('tr');
			const c = td(props.length ? 'Some of the publisher’s properties were too large for the reply and are left out.' : 'No properties.');
			c.colSpan = 2;
			tr.appendChild(c);
			els.props.appendChild(tr);
		}
	}

	/* A redrive or delete reply's per-id results as list items. */
	function renderResults(list, verb, results) {
		list.textContent = '';
		let ok = 0;
		for (const r of results || []) {
			const li = document.createElement('li');
			if (r.error) {
				li.textContent = r.id + ': not ' + verb + ': ' + r.error;
				li.className = 'failed';
			} else {
				ok++;
				li.textContent = r.id + ': ' + r.result + (r.topic ? ' to ' + r.topic : '');
				li.className = 'done';
			}
			list.appendChild(li);
		}
		return ok;
	}

	/* A task of getStatus's redriveTasks in words. */
	function taskWords(t) {
		return 'Task ' + t.id + ' (' + (t.policy || 'every policy') + ' to ' + (t.to || 'origin topics') + ', ' + t.rate +
			'/s): ' + t.state + ', ' + t.moved + ' moved, ' + t.failed + ' failed, ' + t.left + ' left';
	}

	/* getStatus's redriveTasks as list items, each with a progress bar. */
	function renderTasks(list, tasks) {
		list.textContent = '';
		for (const t of tasks || []) {
			const li = document.createElement('li');
			li.className = 'task ' + t.state;
			li.dataset.task = String(t.id);
			const bar = document.createElement('progress');
			bar.max = Math.max(1, t.moved + t.failed + t.left);
			bar.value = t.moved + t.failed;
			bar.setAttribute('aria-label', 'Progress of redrive task ' + t.id);
			const words = document.createElement('span');
			words.textContent = taskWords(t);
			li.appendChild(bar);
			li.appendChild(words);
			list.appendChild(li);
		}
	}

	/* listBrokers' brokers into tbody: a row per broker (its name, letters
	 * kept, their bytes, the newest letter's time) with a button that
	 * shows only its letters, onPick(name). */
	function renderBrokers(tbody, brokers, format, onPick) {
		tbody.textContent = '';
		for (const b of brokers || []) {
			const tr = document.createElement('tr');
			tr.dataset.broker = b.broker;
			const th = document.createElement('th');
			th.scope = 'row';
			th.textContent = b.broker || '(no name)';
			tr.appendChild(th);
			tr.appendChild(td(format.counter(b.kept), 'num kept'));
			tr.appendChild(td(format.bytes(b.bytes), 'num'));
			tr.appendChild(td(b.newestTimeMs ? format.time(b.newestTimeMs) : '—', 'newest'));
			const show = document.createElement('td');
			const btn = document.createElement('button');
			btn.type = 'button';
			btn.className = 'plain pick-broker';
			btn.textContent = 'Show its letters';
			btn.setAttribute('aria-label', 'Show only the dead letters of broker ' + (b.broker || '(no name)'));
			btn.disabled = !b.broker;
			btn.addEventListener('click', () => onPick(b.broker));
			show.appendChild(btn);
			tr.appendChild(show);
			tbody.appendChild(tr);
		}
	}

	root.letters = { LetterPages, cell: td, renderTable, renderDetails, renderResults, renderTasks, renderBrokers, taskWords, PAGE };
})(typeof module !== 'undefined' ? module.exports : (window.DlqConsole = window.DlqConsole || {}));
