#!/usr/bin/env bash
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
#
# The odd/even demo in one command, on a fresh Debian 12 machine: installs
# what is missing, builds into build/, starts a private broker with the plugin
# (a unix socket in a temporary directory, so nothing else is disturbed), a
# worker that NACKs odd numbers and an inspector of dead/numbers, publishes 1..6
# to `numbers` and shows what happened: each even number processed once, each
# odd one failed three times and then parked. Exits non-zero if that is not
# what happened.
set -euo pipefail

cd "$(dirname "$0")"

# shellcheck source=scripts/install-deps.sh
. scripts/install-deps.sh
# shellcheck source=scripts/numbers-check.sh
. scripts/numbers-check.sh
DEADLINE=20 # seconds for each wait below

# wait_for FILE PATTERN COUNT WHAT PID...: waits until FILE has COUNT lines
# matching the extended regex PATTERN; fails after DEADLINE seconds, or as
# soon as one of the processes PID... has exited.
wait_for() {
	local file=$1 pattern=$2 count=$3 what=$4 i pid
	shift 4
	for ((i = 0; i < DEADLINE * 10; i++)); do
		if [ "$(grep -cE -- "$pattern" "$file" 2>/dev/null || true)" -ge "$count" ]; then
			return 0
		fi
		for pid in "$@"; do
			if ! kill -0 "$pid" 2>/dev/null; then
				echo "run-demo.sh: a process exited while waiting for $what" >&2
				return 1
			fi
		done
		sleep 0.1
	done
	echo "run-demo.sh: no $what after ${DEADLINE}s" >&2
	return 1
}

install_missing_packages run-demo.sh

if [ -f build/build.ninja ]; then
	: # configured; meson compile reconfigures when a meson.build changed
elif [ -f build/meson-private/coredata.dat ]; then
	meson setup --reconfigure build
else
	meson setup build
fi
meson compile -C build mosquitto_dlq dlq_numbers_worker dlq_inspector

# Debian keeps the broker in /usr/sbin, which is not on a user's PATH.
MOSQUITTO=$(command -v mosquitto || echo /usr/sbin/mosquitto)
PLUGIN=$PWD/build/mosquitto_dlq.so

tmp=$(mktemp -d)
pids=()
cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

sock=$tmp/mosquitto.sock
conf=$(< examples/numbers.conf)
conf=${conf//@SOCKET@/"$sock"}
conf=${conf//@PLUGIN@/"$PLUGIN"}
printf '%s\n' "$conf" > "$tmp/mosquitto.conf"
if [ "$(id -u)" -eq 0 ]; then
	# Started as root, the broker would drop to user mosquitto, which cannot
	# reach this temporary directory.
	echo "user root" >> "$tmp/mosquitto.conf"
fi

show_logs() {
	echo "== output so far:"
	cat "$tmp/out" 2>/dev/null || true
	for f in worker.err inspector.err broker.log; do
		echo "== $f:"
		cat "$tmp/$f" 2>/dev/null || true
	done
}
fail() {
	show_logs
	echo "== FAILED: $1" >&2
	exit 1
}

"$MOSQUITTO" -c "$tmp/mosquitto.conf" > "$tmp/broker.log" 2>&1 &
broker_pid=$!
pids+=("$broker_pid")
wait_for "$tmp/broker.log" 'mosquitto version .* running' 1 "the broker's 'running' line" "$broker_pid" ||
	fail "the broker did not start"

# Both programs append to one file, a line at a time, so it keeps the order
# in which things happened.
: > "$tmp/out"
build/examples/dlq_inspector --unix "$sock" >> "$tmp/out" 2> "$tmp/inspector.err" &
inspector_pid=$!
pids+=("$inspector_pid")
build/examples/dlq_numbers_worker --unix "$sock" >> "$tmp/out" 2> "$tmp/worker.err" &
worker_pid=$!
pids+=("$worker_pid")
wait_for "$tmp/inspector.err" 'subscribed to' 1 "the inspector's subscription" "$broker_pid" "$inspector_pid" ||
	fail "the inspector did not subscribe"
wait_for "$tmp/worker.err" 'subscribed to' 1 "the worker's subscription" "$broker_pid" "$worker_pid" ||
	fail "the worker did not subscribe"

echo "== $(grep -o 'mosquitto version [^ ]*' "$tmp/broker.log" | head -n 1) with $PLUGIN"
echo "   $(grep '^plugin_opt_policy' "$tmp/mosquitto.conf")"
echo "== publishing 1..6 to numbers (QoS 1)"
seq 1 6 | mosquitto_pub --unix "$sock" -V 5 -q 1 -t numbers -l || fail "mosquitto_pub could not publish"

wait_for "$tmp/out" '^parked ' 3 "the third dead letter" "${pids[@]}" || fail "three dead letters did not arrive"
# Anything arriving after the third dead letter (a duplicate, a fourth
# attempt) would be a bug: give it a moment to show up before checking.
sleep 1

echo "== what the worker and the inspector printed, in order:"
cat "$tmp/out"

# Exactly: evens processed once, odds failed at attempts 1..3, then parked.
problems=()
while IFS= read -r line; do
	problems+=("$line")
done < <(numbers_problems "$tmp/out")
if [ -s "$tmp/worker.err" ] && grep -qv 'subscribed to' "$tmp/worker.err"; then
	problems+=("the worker reported problems (worker.err)")
fi
if [ ${#problems[@]} -gt 0 ]; then
	printf '   %s\n' "${problems[@]}" >&2
	fail "the demo did not behave as expected"
fi
echo "== OK: each even number processed once; each odd one failed 3 times, then parked in dead/numbers"
