#!/usr/bin/env bash
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
#
# The whole test suite in one command, on a fresh Debian 12 machine: installs
# what is missing, configures build/ (with the tests), builds, runs every
# suite (unit tests and integration tests against the real broker), and ends
# with one line summing the Check results of all suites:
#   tests: N passed, M failed
# Exits with meson test's status. Arguments are passed to `meson test`
# (e.g. ./run-tests.sh --suite unit).
set -euo pipefail

cd "$(dirname "$0")"

# shellcheck source=scripts/install-deps.sh
. scripts/install-deps.sh

install_missing_packages run-tests.sh

if [ -f build/meson-private/coredata.dat ]; then
	meson setup --reconfigure build -Dtests=true
else
	meson setup build -Dtests=true
fi
meson compile -C build

# Counts come from this run's log only.
rm -f build/meson-logs/testlog.txt
rc=0
meson test -C build --print-errorlogs "$@" || rc=$?

# Each Check suite ends its output with "NN%: Checks: X, Failures: Y, Errors: Z".
read -r passed failed < <(
	grep -oE '[0-9]+%: Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+' build/meson-logs/testlog.txt 2>/dev/null |
	awk -F'[:,] *' '{ checks += $3; bad += $5 + $7 } END { printf "%d %d\n", checks - bad, bad }'
)
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
	# A test that crashed, timed out or is not a Check suite failed without
	# a Check summary line: the counts below do not show it.
	echo "run-tests.sh: meson test failed (status $rc) outside the Check counts; see the log above" >&2
elif [ "$rc" -eq 0 ] && [ "$failed" -ne 0 ]; then
	rc=1
fi
echo "tests: $passed passed, $failed failed"
exit "$rc"
