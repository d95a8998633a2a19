#!/usr/bin/env bash
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
#
# The Debian package on real systems:
#   tests/package/test-package.sh [SUITE...]     (default: bookworm trixie testing)
# builds the .deb (scripts/build-deb.sh: dpkg-buildpackage on this Debian 12
# host, lintian), then on a fresh Debian root of each SUITE (12 bookworm:
# Mosquitto 2.0.11; 13 trixie: 2.0.21; testing: 2.1.x, where Debian keeps
# plugins in the package's module folder; tests/package/roots.sh) installs
# Debian's own mosquitto and `apt-get install ./mosquitto-dlq_*.deb`, and
# starts the broker as its systemd unit does (the unit's ExecStartPre and
# ExecStart lines, read from the root: mosquitto -c
# /etc/mosquitto/mosquitto.conf, started as root, running as the mosquitto
# user, with Debian's own files), in a network namespace of its own so that
# Debian's listener on port 1883 meets nothing on the host. It checks:
#   - the conffile as shipped: the broker runs, the plugin says it has no
#     policies, a message arrives unstamped, dlqctl status answers;
#   - a plugin_opt_ line in another conf.d file stops the broker with the
#     error the conffile quotes, 2.0's or 2.1's (why policies go in dlq.conf);
#   - a policy written where the conffile says, and a state file in
#     /var/lib/mosquitto: the quick start's flow (worker, inspector, 1..6)
#     gives its counts, dlqctl status counts 3 dead letters, the state file
#     is the mosquitto user's;
#   - apt-get remove: the broker starts; the conffile is kept, set aside as
#     dlq.conf.removed; a conf.d file naming the missing module stops the
#     broker with Mosquitto's own error; a new install puts the file back
#     with the operator's policy;
#   - apt-get purge: the conffile is gone and the broker starts.
# Needs root (debootstrap, chroot, network namespaces) and Debian's archive.
# Ends with `tests: N passed, M failed`, one check per line above it.
set -euo pipefail

cd "$(dirname "$0")/../.."
here=$PWD
store=${DLQ_BROKERS_DIR:-$here/.brokers}
# Seconds for each wait: an upper bound far above the step's time.
DEADLINE=$((60 * ${DLQ_TEST_SLOWDOWN:-1}))
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(bookworm trixie testing)

[ "$(id -u)" -eq 0 ] || { echo "test-package.sh: needs root (debootstrap, chroot)" >&2; exit 1; }

# shellcheck source=scripts/install-deps.sh
. scripts/install-deps.sh
# shellcheck source=scripts/numbers-check.sh
. scripts/numbers-check.sh
DLQ_PACKAGES=(debootstrap iproute2)
DLQ_COMMANDS=()
install_missing_packages test-package.sh

passed=0 failed=0
ok() {
	passed=$((passed + 1))
	echo "ok: $suite: $1"
}
not_ok() {
	failed=$((failed + 1))
	echo "FAILED: $suite: $1"
	shift
	local f
	for f in "$@"; do
		[ -f "$f" ] || continue
		echo "---- $f (last 30 lines)"
		tail -30 "$f"
	done
}
# check WHAT COMMAND...: one check, passed when COMMAND succeeds.
check() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else not_ok "$what" "$log" "$root/var/log/mosquitto/mosquitto.log"; fi
}

suite=build
echo "==== building the package (scripts/build-deb.sh)"
if scripts/build-deb.sh; then
	ok "the package builds and lintian reports no errors or warnings"
else
	not_ok "the package builds and lintian reports no errors or warnings"
	echo "tests: $passed passed, $failed failed"
	exit 1
fi
deb=$(ls "$here"/dist/mosquitto-dlq_*_"$(dpkg --print-architecture)".deb)

# The quick start's worker and inspector, built on this host (they need
# libmosquitto1, which Debian's mosquitto depends on, and glibc 2.36).
[ -f build/build.ninja ] || meson setup build >/dev/null
meson compile -C build dlq_numbers_worker dlq_inspector >/dev/null

ns="" root="" log="" broker_pid=""
# Ends the suite's network namespace, killing anything still running in it
# (a client of a failed step), and unmounts the root's /proc.
end_suite() {
	if [ -n "$ns" ]; then
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
		ip netns del "$ns" 2>/dev/null || true
		ns=""
	fi
	if [ -n "$root" ] && mountpoint -q "$root/proc"; then umount "$root/proc" || umount -l "$root/proc"; fi
	root=""
}
cleanup() {
	stop_broker || true
	end_suite
}
trap cleanup EXIT

# in_root COMMAND...: COMMAND inside the root, with a clean environment.
in_root() {
	chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 "$@"
}
# net_exec COMMAND...: this (sub)shell becomes COMMAND, inside the root and
# the test's network namespace (nsenter, chroot and env each exec the next):
# run in the background, $! is COMMAND's own pid, which kill reaches.
net_exec() {
	exec nsenter --net="/run/netns/$ns" chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"
}
# in_net COMMAND...: the same in the foreground.
in_net() {
	(net_exec "$@")
}
apt_root() {
	# The testing archive a machine reaches may be a snapshot whose Release
	# file has passed its Valid-Until date (as in scripts/brokers.sh).
	local valid=()
	[ "$suite" = testing ] && valid=(-o Acquire::Check-Valid-Until=false)
	in_root apt-get -q -y -o Dpkg::Use-Pty=0 "${valid[@]}" "$@" >>"$log" 2>&1 </dev/null
}

broker_log=/var/log/mosquitto/mosquitto.log
# Lines of the broker's log file written since the last start_broker.
log_since_start() {
	tail -c +$((log_mark + 1)) "$root$broker_log" 2>/dev/null || true
}
wait_log() { # PATTERN: true once a line since the start matches
	local i
	for ((i = 0; i < DEADLINE * 10; i++)); do
		log_since_start | grep -qE -- "$1" && return 0
		[ -n "$broker_pid" ] && ! kill -0 "$broker_pid" 2>/dev/null && { log_since_start | grep -qE -- "$1"; return; }
		sleep 0.1
	done
	return 1
}

# The unit's ExecStartPre lines, then its ExecStart in the background, as
# systemd runs them (started as root; the broker drops to the mosquitto
# user itself, before it loads plugins).
unit_lines() { # KEY
	local unit
	for unit in /lib/systemd/system/mosquitto.service /usr/lib/systemd/system/mosquitto.service; do
		[ -f "$root$unit" ] && { sed -n "s/^$1=[-@+!]*//p" "$root$unit"; return; }
	done
}
start_broker() {
	local pre start
	log_mark=$(stat -c %s "$root$broker_log" 2>/dev/null || echo 0)
	while IFS= read -r pre; do
		# shellcheck disable=SC2086
		in_root $pre || return 1
	done < <(unit_lines ExecStartPre)
	start=$(unit_lines ExecStart)
	[ -n "$start" ] || { echo "no ExecStart in the root's mosquitto.service" >>"$log"; return 1; }
	echo "== $start" >>"$log"
	# shellcheck disable=SC2086
	net_exec $start >>"$log" 2>&1 </dev/null &
	broker_pid=$!
}
# Starts the broker and waits for its "running" line.
broker_runs() {
	start_broker || return 1
	wait_log 'mosquitto version [^ ]+ running' && kill -0 "$broker_pid" 2>/dev/null
}
stop_broker() {
	[ -n "$broker_pid" ] || return 0
	local i
	kill -TERM "$broker_pid" 2>/dev/null || true
	for ((i = 0; i < DEADLINE * 10; i++)); do
		kill -0 "$broker_pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$broker_pid" 2>/dev/null || true
	wait "$broker_pid" 2>/dev/null || true
	broker_pid=""
}
# The broker was started and stopped by itself, with a non-zero status.
broker_refuses() {
	start_broker || return 1
	local i
	for ((i = 0; i < DEADLINE * 10; i++)); do
		kill -0 "$broker_pid" 2>/dev/null || break
		sleep 0.1
	done
	local status=0
	wait "$broker_pid" 2>/dev/null || status=$?
	broker_pid=""
	[ "$status" -ne 0 ]
}

runs_as_mosquitto() {
	local uid
	uid=$(awk '/^Uid:/ { print $2 }' "/proc/$broker_pid/status")
	[ "$uid" = "$(in_root id -u mosquitto)" ] && [ "$uid" != 0 ]
}
owned_by_mosquitto() { # PATH in the root (uids: the host's names are not the root's)
	[ "$(stat -c %u "$root$1" 2>/dev/null)" = "$(in_root id -u mosquitto)" ]
}
conffile=/etc/mosquitto/conf.d/dlq.conf
module_named() {
	awk '$1 == "plugin" { print $2 }' "$root$conffile" 2>/dev/null
}
is_conffile() {
	in_root dpkg-query -W -f='${Conffiles}\n' mosquitto-dlq | grep -q " $conffile "
}

# One message to numbers, received by mosquitto_sub: its user properties
# (mosquitto_sub's %P) are empty when the plugin did not stamp it.
unstamped_delivery() {
	local out=$root/tmp/sub.out
	net_exec mosquitto_sub -V 5 -q 1 -t numbers -C 1 -W "$DEADLINE" -F '%p|%P' >"$out" 2>>"$log" &
	local sub=$!
	sleep 1
	in_net mosquitto_pub -V 5 -q 1 -t numbers -m 42 2>>"$log" || return 1
	wait "$sub" || return 1
	echo "   received: $(cat "$out")"
	[ "$(cat "$out")" = "42|" ]
}
dlqctl_status() { # EXPECT...: dlqctl status succeeds and prints each
	local out=$root/tmp/status.out e
	in_net dlqctl status >"$out" 2>>"$log" || return 1
	sed 's/^/   /' "$out"
	for e in "$@"; do
		grep -qE -- "$e" "$out" || { echo "   dlqctl status: no \"$e\"" >>"$log"; return 1; }
	done
}
dlqctl_dead_letters() { # N: the totals' dead letters, from status --json
	local out=$root/tmp/status.json
	in_net dlqctl status --json >"$out" 2>>"$log" || return 1
	tr -d '[:space:]' <"$out" | grep -qE "\"totals\":\{[^}]*\"deadLetters\":$1[,}]"
}

# The quick start's flow against the broker: inspector of dead/numbers,
# worker on numbers, 1..6 published; numbers_problems checks the counts.
quick_start_flow() {
	local t=$root/tmp/flow pid_w pid_i i
	rm -rf "$t"
	mkdir -p "$t"
	: >"$t/out"
	net_exec /usr/local/bin/dlq_inspector >>"$t/out" 2>"$t/inspector.err" &
	pid_i=$!
	net_exec /usr/local/bin/dlq_numbers_worker >>"$t/out" 2>"$t/worker.err" &
	pid_w=$!
	for ((i = 0; i < DEADLINE * 10; i++)); do
		grep -q 'subscribed to' "$t/inspector.err" && grep -q 'subscribed to' "$t/worker.err" && break
		sleep 0.1
	done
	seq 1 6 | in_net mosquitto_pub -V 5 -q 1 -t numbers -l 2>>"$log"
	for ((i = 0; i < DEADLINE * 10; i++)); do
		[ "$(grep -c '^parked ' "$t/out")" -ge 3 ] && break
		sleep 0.1
	done
	sleep 1
	kill "$pid_w" "$pid_i" 2>/dev/null || true
	wait "$pid_w" "$pid_i" 2>/dev/null || true
	sed 's/^/   /' "$t/out"
	local problems
	problems=$(numbers_problems "$t/out")
	[ -z "$problems" ] || { echo "$problems" | sed 's/^/   /'; cat "$t"/*.err >>"$log"; return 1; }
}

run_suite() {
	suite=$1
	root=$store/pkg-$suite.run
	log=$store/pkg-$suite.log
	mkdir -p "$store"
	: >"$log"
	echo "==== $suite: a fresh Debian root ($root), Debian's mosquitto, then the package"
	tests/package/roots.sh fresh "$suite" "$root"
	mount -t proc proc "$root/proc"
	cp /etc/resolv.conf "$root/etc/resolv.conf"
	# What Debian's installer writes and debootstrap does not: clients
	# connect to localhost, where Debian's default listener is.
	[ -f "$root/etc/hosts" ] || printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
	# As in any Debian chroot: no service is started by a package's
	# install; the test starts the broker itself, as the unit does.
	printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
	chmod 755 "$root/usr/sbin/policy-rc.d"

	check "apt-get update" apt_root update
	check "apt-get install mosquitto mosquitto-clients (Debian's)" apt_root install mosquitto mosquitto-clients
	echo "   mosquitto $(in_root dpkg-query -W -f='${Version}' mosquitto)"
	cp "$deb" "$root/tmp/"
	check "apt-get install ./$(basename "$deb")" apt_root install "/tmp/$(basename "$deb")"
	check "$conffile is a conffile of the package" is_conffile
	check "the module $(module_named) is where dlq.conf names it" test -f "$root$(module_named)"
	check "dlqctl and the man pages are installed" test -x "$root/usr/bin/dlqctl" -a \
		-f "$root/usr/share/man/man1/dlqctl.1.gz" -a -f "$root/usr/share/man/man7/mosquitto-dlq.7.gz"
	check "the docs and the screenshots they show are installed" test -f "$root/usr/share/doc/mosquitto-dlq/docs/console.png" -a \
		-f "$root/usr/share/doc/mosquitto-dlq/docs/console-task.png" -a -f "$root/usr/share/doc/mosquitto-dlq/docs/console-fleet.png" -a \
		-d "$root/usr/share/doc/mosquitto-dlq/docs" -a -n "$(ls "$root"/usr/share/doc/mosquitto-dlq/README.md* 2>/dev/null)"
	check "README.md and the docs it links to are not compressed (the links work)" test -f "$root/usr/share/doc/mosquitto-dlq/README.md" -a \
		-f "$root/usr/share/doc/mosquitto-dlq/docs/durable-state.md" -a -f "$root/usr/share/doc/mosquitto-dlq/docs/operations.md"
	install -m 755 build/examples/dlq_numbers_worker build/examples/dlq_inspector "$root/usr/local/bin/"

	ns=dlq-pkg-$$
	ip netns add "$ns"
	ip netns exec "$ns" ip link set lo up

	echo "== the conffile as shipped"
	check "the broker starts with the conffile as shipped" broker_runs
	check "it runs as the mosquitto user" runs_as_mosquitto
	check "the plugin loads with no policy and says so" wait_log 'dlq: mosquitto-dlq [^ ]+ loaded: 0 policies'
	check "the notice says where policies go" wait_log 'dlq: no policies: nothing is tracked.*plugin_opt_policy_file'
	check "a message to numbers arrives unstamped" unstamped_delivery
	check "dlqctl status answers, with no policy" dlqctl_status 'unknown or expired ids NACKed: 0'

	echo "== a policy in a conf.d file of its own, which Mosquitto refuses"
	echo "plugin_opt_policy numbers max_attempts=3 dead_letter=dead/numbers" >"$root/etc/mosquitto/conf.d/policies.conf"
	stop_broker
	check "a plugin_opt_ line outside dlq.conf stops the broker" broker_refuses
	check "with the error the conffile quotes" bash -c 'grep -E "An auth_opt_ option exists in the config file without an auth_plugin|The .plugin_opt_policy. option requires plugin/global_plugin/plugin_load to be defined first" <<<"$1" |
		sed "s/^/   /" | grep -q .' _ "$(log_since_start)$(cat "$log")"
	rm "$root/etc/mosquitto/conf.d/policies.conf"

	echo "== a policy written where the conffile says, and a state file in /var/lib/mosquitto"
	sed -i -e 's|^#\(plugin_opt_policy numbers .*\)|\1|' -e 's|^#\(plugin_opt_state_file /var/lib/mosquitto/.*\)|\1|' \
		"$root$conffile"
	grep '^plugin' "$root$conffile" | sed 's/^/   /'
	check "the broker starts with the policy" broker_runs
	check "the plugin has the policy" wait_log 'dlq: mosquitto-dlq [^ ]+ loaded: 1 policies'
	check "the quick start's flow gives its counts" quick_start_flow
	check "dlqctl status shows the policy" dlqctl_status 'numbers'
	check "dlqctl status --json counts 3 dead letters" dlqctl_dead_letters 3
	stop_broker
	check "the state file is in /var/lib/mosquitto, the mosquitto user's" owned_by_mosquitto /var/lib/mosquitto/dlq.state
	check "the broker starts again from its state file" broker_runs
	stop_broker

	echo "== apt-get remove"
	check "apt-get remove mosquitto-dlq" apt_root remove mosquitto-dlq
	check "the module is gone" test ! -e "$root/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/mosquitto/mosquitto_dlq.so"
	check "the conffile is kept as dlq.conf.removed, the policy in it" \
		grep -q '^plugin_opt_policy numbers' "$root$conffile.removed"
	check "no dlq.conf is left for the broker to read" test ! -e "$root$conffile"
	check "the broker starts after the remove" broker_runs
	check "without the plugin" bash -c '! grep -q "dlq:" <<<"$1"' _ "$(log_since_start)"
	stop_broker
	cp "$root$conffile.removed" "$root$conffile"
	check "a conf.d file naming the missing module stops the broker" broker_refuses
	check "with Mosquitto's own error naming the module" bash -c 'grep -E "Error: .*(load|open).*mosquitto_dlq.so" <<<"$1" |
		sed "s/^/   /" | grep -q .' _ "$(log_since_start)$(cat "$log")"
	rm -f "$root$conffile"
	check "apt-get install again" apt_root install "/tmp/$(basename "$deb")"
	check "the conffile is back, with the operator's policy" grep -q '^plugin_opt_policy numbers' "$root$conffile"
	check "the broker starts with the policy again" broker_runs
	check "the plugin has the policy again" wait_log 'dlq: mosquitto-dlq [^ ]+ loaded: 1 policies'
	stop_broker

	echo "== apt-get purge"
	check "apt-get purge mosquitto-dlq" apt_root purge mosquitto-dlq
	check "the conffile is gone" test ! -e "$root$conffile" -a ! -e "$root$conffile.removed"
	check "the broker starts after the purge" broker_runs
	stop_broker

	end_suite
}

for s in "${suites[@]}"; do
	run_suite "$s"
done
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
