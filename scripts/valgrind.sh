#!/usr/bin/env bash
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
#
# The whole test suite under valgrind, the broker included:
#   scripts/valgrind.sh
# Configures build-valgrind/ (an ordinary build), then runs the unit tests
# and the replay of the fuzz corpora and regressions under memcheck
# (CK_FORK=no, so that memcheck sees the tests themselves), and the
# integration tests with the broker under memcheck through
# scripts/mosquitto-valgrind.sh. A memory error or a definite leak makes the
# process exit with status 99, which fails its test; every report is also
# written under build-valgrind/valgrind-logs/, and the run fails if any file
# there is not empty, whatever the tests said. The tests' deadlines
# (DLQ_TEST_SLOWDOWN) and Check's per-test timeouts (CK_TIMEOUT_MULTIPLIER)
# are scaled by 5 unless set: a broker under memcheck is that much slower.
set -euo pipefail

cd "$(dirname "$0")/.."
build=build-valgrind
logs=$PWD/$build/valgrind-logs

if ! command -v valgrind >/dev/null 2>&1; then
	echo "valgrind.sh: valgrind not found: apt-get install valgrind" >&2
	exit 2
fi
if [ ! -f "$build/meson-private/coredata.dat" ]; then
	meson setup "$build" -Dtests=true >/dev/null
fi
meson compile -C "$build" >/dev/null

rm -rf "$logs"
mkdir -p "$logs"
export SANITIZE_LOG_DIR=$logs
export MOSQUITTO_BIN=$PWD/scripts/mosquitto-valgrind.sh
export DLQ_TEST_SLOWDOWN=${DLQ_TEST_SLOWDOWN:-5}
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-5}
memcheck="valgrind --quiet --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite --error-exitcode=99 --log-file=$logs/test.%p"

start=$(date +%s)
rc=0
# Unit tests and replays in the test process itself; integration tests with
# their broker under memcheck (the test programs are not wrapped: their
# forked Check children would each need their own memcheck).
CK_FORK=no meson test -C "$build" --print-errorlogs --suite unit --suite fuzz-regressions \
	--wrapper "$memcheck" --timeout-multiplier 4 || rc=$?
meson test -C "$build" --print-errorlogs --suite integration --num-processes 2 --timeout-multiplier 3 || rc=$?
elapsed=$(( $(date +%s) - start ))

reports=$(find "$logs" -type f -size +0 | sort)
for f in $reports; do
	echo "== $f" >&2
	head -30 "$f" >&2
done
if [ -n "$reports" ] && [ "$rc" -eq 0 ]; then
	rc=1
fi
echo "valgrind.sh: $(echo -n "$reports" | grep -c . || true) report files, meson test status $rc, ${elapsed}s"
exit "$rc"
