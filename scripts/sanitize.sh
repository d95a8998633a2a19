#!/usr/bin/env bash
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
#
# The whole test suite with AddressSanitizer (LeakSanitizer included) and
# UndefinedBehaviorSanitizer, the broker included:
#   scripts/sanitize.sh [meson test arguments]
# Configures build-asan/ (gcc, -Db_sanitize=address,undefined), builds, and
# runs the unit tests, the replay of the fuzz corpora and regressions, and the
# integration tests, whose broker loads the instrumented plugin through
# scripts/mosquitto-asan.sh (ASan preloaded into the uninstrumented broker).
# Every report fails its test (ASan abort, LSan exit status, UBSan abort).
# Belt and braces: the run also fails if the broker wrote a report file under
# build-asan/sanitizer-logs/ or if a report appears anywhere in the test log,
# whatever the tests said.
# SANITIZE_KNOWN=1 steps over the UBSan reports already handed on
# (tests/fuzz/ubsan.supp), to look for new ones.
# --broker 2.1 runs all of it inside the 2.1 root (scripts/brokers.sh), in
# build-asan-2.1/: the ASan runtime preloaded into a broker must be its own
# root's, so the instrumented plugin is built there with the root's gcc.
# Deadlines in the tests are scaled by DLQ_TEST_SLOWDOWN (default here 3) and
# Check's per-test timeouts by CK_TIMEOUT_MULTIPLIER (likewise): everything
# runs several times slower under the sanitizers, on a busy machine more so.
# DLQ_TEST_JOBS suites run at a time (default here 3, run-tests.sh's 4 less
# one for the sanitizers' CPU).
# Ends, like run-tests.sh, with "tests: N passed, M failed".
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/broker-lines.sh
. scripts/broker-lines.sh

line="" args=()
while [ $# -gt 0 ]; do
	case $1 in
	--broker)
		[ $# -ge 2 ] || { echo "sanitize.sh: --broker needs a line (2.0.11, 2.1)" >&2; exit 2; }
		line=$2
		shift 2
		;;
	--broker=*) line=${1#*=}; shift ;;
	*) args+=("$1"); shift ;;
	esac
done
if [ -n "$line" ]; then
	broker_use "$line"
	case $BROKER_KIND in
	chroot)
		echo "== sanitize.sh on mosquitto $line: inside $BROKER_ROOT"
		rc=0
		broker_chroot SANITIZE_BUILD="build-asan-$line" -- scripts/sanitize.sh "${args[@]}" || rc=$?
		exit "$rc"
		;;
	extracted)
		echo "sanitize.sh: --broker $line is not supported (2.0.11 and 2.1 are)" >&2
		exit 2
		;;
	esac
fi

build=${SANITIZE_BUILD:-build-asan}
logs=$PWD/$build/sanitizer-logs
export DLQ_TEST_SLOWDOWN=${DLQ_TEST_SLOWDOWN:-3}
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-3}

if [ ! -f "$build/meson-private/coredata.dat" ]; then
	meson setup "$build" -Dtests=true -Db_sanitize=address,undefined -Db_lundef=false -Db_lto=false >/dev/null
fi
# Quiet when it builds; the compiler's words when it does not.
if ! out=$(meson compile -C "$build" 2>&1); then
	printf '%s\n' "$out" | tail -40 >&2
	echo "sanitize.sh: the build in $build failed" >&2
	echo "tests: 0 passed, 1 failed"
	exit 1
fi

rm -rf "$logs"
mkdir -p "$logs"
supp=""
[ "${SANITIZE_KNOWN:-0}" = 1 ] && supp=$PWD/tests/fuzz/ubsan.supp
export SANITIZE_LOG_DIR=$logs
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=1"
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1${supp:+:suppressions=$supp}"
export UBSAN_SUPPRESSIONS=$supp
export MOSQUITTO_BIN=$PWD/scripts/mosquitto-asan.sh

start=$(date +%s)
rc=0
# Integration tests start brokers under ASan: fewer at once, more time each.
meson test -C "$build" --print-errorlogs --num-processes "${DLQ_TEST_JOBS:-3}" --timeout-multiplier 3 "${args[@]}" || rc=$?
elapsed=$(( $(date +%s) - start ))

reports=$(find "$logs" -type f -size +0 | sort)
for f in $reports; do
	echo "== $f" >&2
	grep -E 'ERROR: |runtime error|SUMMARY' "$f" | head -5 >&2 || true
done
testlog=$build/meson-logs/testlog.txt
in_log=$(grep -cE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$testlog" || true)
if [ "$in_log" -gt 0 ]; then
	echo "sanitize.sh: sanitizer reports in $testlog:" >&2
	grep -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$testlog" | sed 's/==[0-9]*==//' | sort | uniq -c | sort -rn | head -20 >&2
fi
if [ -n "$reports" ] || [ "$in_log" -gt 0 ]; then
	[ "$rc" -eq 0 ] && rc=1
fi
read -r passed failed < <(scripts/test-counts.sh "$testlog")
if [ "$rc" -eq 0 ] && [ "$failed" -ne 0 ]; then
	rc=1
fi
echo "sanitize.sh: $(echo -n "$reports" | grep -c . || true) report files, $in_log reports in the test log, meson test status $rc, ${elapsed}s"
echo "tests: $passed passed, $failed failed"
exit "$rc"
