#!/bin/sh
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
#
# The Check results of one meson test log, as "PASSED FAILED":
#   scripts/test-counts.sh build/meson-logs/testlog.txt
# Each Check suite ends its output with "NN%: Checks: X, Failures: Y,
# Errors: Z"; a missing or empty log counts as 0 0. Shared by run-tests.sh
# and scripts/sanitize.sh so that both count the same way.
grep -oE '[0-9]+%: Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+' "$1" 2>/dev/null |
	awk -F'[:,] *' '{ checks += $3; bad += $5 + $7 } END { printf "%d %d\n", checks - bad, bad }'
