#!/usr/bin/env bash
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
#
# The soak of issue 7 in one command: installs what is missing (Debian),
# builds the plugin and dlq_soak (tests/soak) in build-soak/, and runs it
# for a duration (default 10 minutes). See --help.
set -euo pipefail

usage() {
	cat <<'TEXT'
Usage: scripts/soak.sh [DURATION] [dlq_soak options...]

DURATION: how long messages are published: 10m (the default), 600s, 1h, or a
bare number of minutes. Settling and the tally take a minute or so more.

What it runs: the real /usr/sbin/mosquitto with the built plugin, broker
persistence on in a private directory, plugin_opt_state_file (snapshot every
10 s), plugin_opt_redelivery_tracking allow, plugin_opt_v5_sessions_persist
true, and two policies, both max_attempts=3: soak/direct/+ (retry copies back
to the NACKing worker, retry_delay 200ms, backoff 2, jitter 0.5) and
soak/fixed/+ (retry copies to the fixed topic soak/retry/fixed, retry_delay
100ms). Two publishers send numbered QoS 1 messages (5,000 a second in all);
six workers with persistent MQTT v5 sessions in a $share group process each
delivery, NACK it (10%, and every 500th message always), or crash (close the
socket without PUBACK: 0.2%, and every 2,000th message always) and reconnect
20-200 ms later; an inspector with a persistent session reads dead/#. Half-way
the broker is stopped with SIGTERM and started again. Then publishing stops,
everything settles (getStatus shows nothing owed or held back, nothing is
delivered for 3 s, and again after every subscriber reconnected once), and
every message is accounted for: processed, dead-lettered (by reason),
duplicated (at-least-once: each explained), pending in the plugin, or
UNACCOUNTED. The tally is printed as Markdown on stdout; the exit status is
non-zero if any message is unaccounted, the run did not settle, a payload
came back altered or the broker did not exit cleanly.

"Hour-equivalent": time is compressed about six-fold. Ten minutes at 5,000
messages a second publish 3 million messages, an hour of a broker taking
830 a second; the plugin's time constants are shortened to match: the state
file is saved every 10 s instead of the default 60 s (60 snapshots, as in an
hour), the NACK window is 60 s instead of 300 s, and retry delays are
hundreds of milliseconds instead of the tens of seconds a deployment would
use. The rate is below the benchmark's saturated throughput (BENCHMARKS.md:
about 100,000 tracked messages a second, 25,000-70,000 NACKs a second, on an
idle core) on purpose: the soak is open-loop, and a broker that falls behind
would only build a queue; the broker runs at 10-15% of a core here. Raise
it with --rate (10,000 a second sustains on this machine).

Environment: DLQ_SOAK_BUILD, the build directory (default build-soak).
Options after DURATION go to dlq_soak (scripts/soak.sh 10m --help lists
them), for example --rate N, --no-restart, --seed N, --trace FILE, --keep.
TEXT
}

case "${1:-}" in
	-h|--help) usage; exit 0 ;;
esac

cd "$(dirname "$0")/.."
BUILD=${DLQ_SOAK_BUILD:-build-soak}

duration=600
if [ $# -gt 0 ] && [[ "$1" != -* ]]; then
	case "$1" in
		*h) duration=$(( ${1%h} * 3600 )) ;;
		*m) duration=$(( ${1%m} * 60 )) ;;
		*s) duration=${1%s} ;;
		*[!0-9]*|'') echo "soak.sh: bad duration \"$1\" (examples: 10m, 600s, 1h, 10)" >&2; exit 2 ;;
		*) duration=$(( $1 * 60 )) ;;
	esac
	shift
fi
if [ "$duration" -le 0 ] 2>/dev/null; then
	echo "soak.sh: bad duration" >&2
	exit 2
fi

# shellcheck source=scripts/install-deps.sh
. scripts/install-deps.sh
install_missing_packages soak.sh >&2

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if [ -f "$BUILD/meson-private/coredata.dat" ]; then
	setup=(meson setup --reconfigure "$BUILD" -Dtests=true)
else
	setup=(meson setup "$BUILD" -Dtests=true)
fi
if ! "${setup[@]}" >"$log" 2>&1 || ! ninja -C "$BUILD" mosquitto_dlq.so tests/soak/dlq_soak >>"$log" 2>&1; then
	cat "$log" >&2
	echo "soak.sh: building failed" >&2
	exit 1
fi
rm -f "$log"
trap - EXIT

echo "== git $(git rev-parse --short HEAD 2>/dev/null || echo '(no commit)'); publishing for ${duration} s" >&2
exec "$BUILD/tests/soak/dlq_soak" --plugin "$BUILD/mosquitto_dlq.so" --duration "$duration" "$@"
