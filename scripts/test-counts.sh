#!/bin/sh
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
#
# The results of one meson test log, as "PASSED FAILED":
#   scripts/test-counts.sh build/meson-logs/testlog.txt
# Each Check suite ends its output with "NN%: Checks: X, Failures: Y,
# Errors: Z": X - Y - Z passed, Y + Z failed. A test that failed (its
# "result:" is not exit status 0, or 77 for skipped) without a Check line
# counting a failure - a crash, a timeout, a script - counts as one
# failure, so that no failing test is missing from the counts. A missing or
# empty log counts as 0 0. Shared by run-tests.sh and scripts/sanitize.sh
# so that both count the same way.
[ -r "$1" ] || { echo "0 0"; exit 0; }
awk '
function close_test() {
	if(in_test && failed_run && !checked_bad) bad++
	in_test = 0; failed_run = 0; checked_bad = 0
}
/^=+ [0-9]+\/[0-9]+ =+$/ { close_test(); in_test = 1; next }
/^result: / {
	if($0 !~ /^result: +exit status (0|77)$/) failed_run = 1
	next
}
match($0, /[0-9]+%: Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+/) {
	line = substr($0, RSTART, RLENGTH)
	split(line, f, /[:,] */)
	checks += f[3]; b = f[5] + f[7]; checkbad += b
	if(b > 0) checked_bad = 1
}
END { close_test(); printf "%d %d\n", checks - checkbad, checkbad + bad }
' "$1"
