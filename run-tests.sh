#!/usr/bin/env bash
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
#
# The whole test suite in one command, on a fresh Debian 12 machine: installs
# what is missing, configures build/ (with the tests), builds, runs every
# suite (unit tests and integration tests against the real broker), and ends
# with one line summing the Check results of all suites:
#   tests: N passed, M failed
# Exits with meson test's status. Other arguments are passed to `meson test`
# (e.g. ./run-tests.sh --suite unit).
#   --broker LINE   run on another broker line: 2.0.11 (Debian 12), 2.0.21
#                   (Debian 13, Debian 12's backports) or 2.1 (Debian
#                   testing); default the host's own. scripts/brokers.sh
#                   provisions it into .brokers/ on first use (2.1: a
#                   debootstrapped root, a few minutes, as root). The plugin
#                   and the tests are built against that line's own headers
#                   and client library, in build-LINE/: 2.0.21's unpacked
#                   packages on the host; for 2.1 the whole build and run
#                   happen inside its root, whose system broker it is.
#   --host-build    with --broker: build on the host against the host's own
#                   headers, in build/, and run that against the line's
#                   broker (a broker upgraded under a plugin not rebuilt);
#                   its log is build/meson-logs/testlog-on-LINE.txt.
#                   The fleet suite then runs a fleet of mixed lines: its
#                   three edges on the host's own broker (the build's own
#                   line) and its centre on LINE's, and fails unless their
#                   logs say so (DLQ_FLEET_EDGE_BIN, DLQ_FLEET_*_LINE).
# DLQ_BUILD_DIR overrides build/ for the host's own line. DLQ_TEST_JOBS is
# how many suites run at a time (meson's --num-processes; default 4, on two
# cores: the integration suites mostly wait for brokers, clients and real
# delays, about 30% of two cores at 2 at a time, 2026-12-07; the longest
# start first, tests/integration/meson.build's priorities).
set -euo pipefail

cd "$(dirname "$0")"

# shellcheck source=scripts/install-deps.sh
. scripts/install-deps.sh
# shellcheck source=scripts/broker-lines.sh
. scripts/broker-lines.sh

line="" host_build=false args=()
while [ $# -gt 0 ]; do
	case $1 in
	--broker)
		[ $# -ge 2 ] || { echo "run-tests.sh: --broker needs a line (2.0.11, 2.0.21, 2.1)" >&2; exit 2; }
		line=$2
		shift 2
		;;
	--broker=*) line=${1#*=}; shift ;;
	--host-build) host_build=true; shift ;;
	*) args+=("$1"); shift ;;
	esac
done

DLQ_PACKAGES+=("${DLQ_TEST_PACKAGES[@]}")
install_missing_packages run-tests.sh
host=$(scripts/brokers.sh host)
line=${line:-$host}
if $host_build && [ "$line" = "$host" ]; then
	host_build=false
fi
broker_use "$line"

build=${DLQ_BUILD_DIR:-build} logbase=testlog setup=() test_env=()
if $host_build; then
	logbase=testlog-on-$line
	# The host's client library, as a host that upgraded only its broker has.
	test_env=("MOSQUITTO_BIN=$BROKER_BIN")
	# The root scripts/mosquitto-chroot.sh runs (DLQ_BROKERS_DIR may put it
	# outside this folder).
	[ "$BROKER_KIND" = chroot ] && test_env+=("BROKER_ROOT=$BROKER_ROOT")
	# A fleet of mixed lines at no extra cost: the fleet suite's edges on
	# the host's broker, for which the plugin was built, its centre on
	# LINE's, which this run is about (tests/integration/test_fleet.c).
	host_bin=$(scripts/brokers.sh env "$host" | sed -n 's/^BROKER_BIN=//p')
	test_env+=("DLQ_FLEET_EDGE_BIN=$host_bin" "DLQ_FLEET_EDGE_LINE=$host" "DLQ_FLEET_CENTRE_LINE=$line")
elif [ "$BROKER_KIND" = chroot ]; then
	# The root's own compiler, headers, libraries and broker: this script again, inside.
	echo "== mosquitto $line: building and testing inside $BROKER_ROOT"
	rc=0
	broker_chroot DLQ_BUILD_DIR="build-$line" -- ./run-tests.sh "${args[@]}" || rc=$?
	exit "$rc"
elif [ "$BROKER_KIND" = extracted ]; then
	build=build-$line
	mapfile -t setup < <(broker_meson_args)
	mapfile -t test_env < <(broker_test_env)
fi
echo "== mosquitto $line ($BROKER_KIND): $BROKER_BIN; plugin built in $build/"

if [ -f "$build/meson-private/coredata.dat" ]; then
	meson setup --reconfigure "$build" -Dtests=true "${setup[@]}"
else
	meson setup "$build" -Dtests=true "${setup[@]}"
fi
meson compile -C "$build"

# Counts come from this run's log only.
rm -f "$build/meson-logs/$logbase.txt"
rc=0
env "${test_env[@]}" meson test -C "$build" --print-errorlogs --logbase "$logbase" \
	--num-processes "${DLQ_TEST_JOBS:-4}" "${args[@]}" || rc=$?

# The browser test's screenshots (tests/console), named for the CI log.
if grep -q '^screenshot: ' "$build/meson-logs/$logbase.txt" 2>/dev/null; then
	echo "console screenshots (mosquitto $line):"
	grep '^screenshot: ' "$build/meson-logs/$logbase.txt" | sed 's/^screenshot: /  /'
fi

read -r passed failed < <(scripts/test-counts.sh "$build/meson-logs/$logbase.txt")
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
	# A test that crashed, timed out or is not a Check suite failed without
	# a Check summary line: the counts below do not show it.
	echo "run-tests.sh: meson test failed (status $rc) outside the Check counts; see the log above" >&2
elif [ "$rc" -eq 0 ] && [ "$failed" -ne 0 ]; then
	rc=1
fi
# A --suite that names no suite runs nothing and meson exits 0: say so.
if [ "$rc" -eq 0 ] && ! grep -qE '^(Ok|Fail|Timeout|Expected Fail|Unexpected Pass): *[1-9]' \
		"$build/meson-logs/$logbase.txt" 2>/dev/null; then
	echo "run-tests.sh: no test ran (a --suite that names no suite? meson's suite names use '-': see meson test -C $build --list)" >&2
	rc=1
fi
echo "tests: $passed passed, $failed failed"
exit "$rc"
