/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The page's one MQTT connection (MQTT.js over WebSockets) and the
 * plugin's control API on it: commands go to $CONTROL/dlq/v1 as
 * {"commands":[…]} at QoS 1, each with its own correlationData, and the
 * plugin answers the asking client alone on $CONTROL/dlq/v1/response
 * (no subscription needed). A command's reply, or its error, settles its
 * promise; no reply in time means the plugin is not there.
 */
(function (root) {
	'use strict';

	const REQUEST = '$CONTROL/dlq/v1';
	const RESPONSE = '$CONTROL/dlq/v1/response';

	class ControlError extends Error {
		constructor(message, kind) {
			super(message);
			this.kind = kind; /* 'connect' | 'publish' | 'timeout' | 'command' | 'lost' */
		}
	}

	class Control {
		/* mqtt: MQTT.js (window.mqtt); format: format.js. */
		constructor(mqtt, format, opts) {
			this.mqtt = mqtt;
			this.format = format;
			this.replyTimeoutMs = (opts && opts.replyTimeoutMs) || 5000;
			this.client = null;
			this.waiting = new Map(); /* correlationData -> {resolve, reject, timer} */
			this.seq = 0;
			this.onLost = null;       /* (message) when an open connection drops */
			this.onBack = null;       /* () when it is back */
		}

		/* Resolves once the broker accepted the login; rejects with words. */
		connect(url, username, password) {
			this.close();
			return new Promise((resolve, reject) => {
				let settled = false;
				const c = this.mqtt.connect(url, {
					protocolVersion: 5,
					username: username || undefined,
					password: password || undefined,
					clientId: 'dlq-console-' + Math.random().toString(16).slice(2, 10),
					clean: true,
					reconnectPeriod: 0,
					connectTimeout: 8000,
				});
				this.client = c;
				const fail = (err) => {
					if (settled) return;
					settled = true;
					c.end(true);
					if (this.client === c) this.client = null;
					reject(new ControlError(this.format.connectError(err, url), 'connect'));
				};
				c.on('error', (err) => fail(err));
				c.on('close', () => {
					if (!settled) return fail(null);
					if (this.client === c && this.onLost) this.onLost('The connection to the broker at ' + url + ' was lost; trying again every 3 s.');
					this.failAll('the connection to the broker was lost');
				});
				c.on('connect', () => {
					if (!settled) {
						settled = true;
						/* From now on, come back after a drop. */
						c.options.reconnectPeriod = 3000;
						resolve();
					} else if (this.onBack) {
						this.onBack();
					}
				});
				c.on('message', (topic, payload) => this.onMessage(topic, payload));
			});
		}

		close() {
			if (this.client) {
				const c = this.client;
				this.client = null;
				c.end(true);
			}
			this.failAll('disconnected');
		}

		failAll(why) {
			for (const [k, w] of this.waiting) {
				clearTimeout(w.timer);
				w.reject(new ControlError('No answer: ' + why + '.', 'lost'));
				this.waiting.delete(k);
			}
		}

		onMessage(topic, payload) {
			if (topic !== RESPONSE) return;
			let doc;
			try {
				doc = JSON.parse(new TextDecoder().decode(payload));
			} catch (e) {
				return;
			}
			for (const r of (doc && doc.responses) || []) {
				const w = this.waiting.get(r.correlationData);
				if (!w) continue;
				this.waiting.delete(r.correlationData);
				clearTimeout(w.timer);
				if (r.error) w.reject(new ControlError('The plugin refused ' + r.command + ': ' + r.error, 'command'));
				else w.resolve(r.data);
			}
		}

		/* Runs one command ({command:…, …}); resolves with its data. */
		run(cmd) {
			return this.runAll([cmd])[0];
		}

		/* Runs commands in one message, which the plugin carries out
		 * together (nothing else happens between them); returns a promise
		 * of each one's data, in their order. */
		runAll(cmds) {
			const c = this.client;
			if (!c || !c.connected) return cmds.map(() => Promise.reject(new ControlError('Not connected to the broker.', 'lost')));
			const corrs = cmds.map(() => 'console-' + (++this.seq));
			const promises = cmds.map((cmd, i) => new Promise((resolve, reject) => {
				const timer = setTimeout(() => {
					this.waiting.delete(corrs[i]);
					reject(new ControlError('No answer from mosquitto-dlq to ' + cmd.command + ' within ' +
						this.replyTimeoutMs / 1000 + ' s on ' + REQUEST + ': is the plugin loaded in this broker?', 'timeout'));
				}, this.replyTimeoutMs);
				this.waiting.set(corrs[i], { resolve, reject, timer });
			}));
			const body = JSON.stringify({ commands: cmds.map((cmd, i) => Object.assign({}, cmd, { correlationData: corrs[i] })) });
			c.publish(REQUEST, body, { qos: 1 }, (err) => {
				if (!err) return;
				const code = err.code;
				for (const corr of corrs) {
					const w = this.waiting.get(corr);
					if (!w) continue;
					this.waiting.delete(corr);
					clearTimeout(w.timer);
					w.reject(new ControlError(code === 135
						? 'Not authorised: the broker does not let this user publish to ' + REQUEST + '.'
						: 'The broker refused the command on ' + REQUEST + ': ' + err.message, 'publish'));
				}
			});
			return promises;
		}
	}

	root.Control = Control;
	root.ControlError = ControlError;
})(typeof module !== 'undefined' ? module.exports : (window.DlqConsole = window.DlqConsole || {}));
