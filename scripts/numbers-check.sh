# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
#
# The quick start's expected outcome, in one place: sourced by run-demo.sh
# and tests/package/test-package.sh. numbers_problems FILE prints one line
# per way in which what the worker and the inspector printed (FILE) differs
# from it, and nothing when it is right: each even number of 1..6 processed
# once; each odd one failed at attempts 1, 2 and 3, then parked once with
# retry-count 3; nothing else.
numbers_problems() {
	local out=$1 n k lines
	count() { grep -cxF -- "$1" "$out" || true; }
	for n in 2 4 6; do
		[ "$(count "processed $n")" -eq 1 ] || echo "'processed $n' not printed exactly once"
	done
	for n in 1 3 5; do
		for k in 1 2 3; do
			[ "$(count "failed $n (attempt $k)")" -eq 1 ] || echo "'failed $n (attempt $k)' not printed exactly once"
		done
		[ "$(count "parked $n from numbers (retry-count 3)")" -eq 1 ] || echo "'parked $n' not printed exactly once"
	done
	lines=$(grep -cvE '^  ' "$out" || true)
	[ "$lines" -eq 15 ] || echo "$lines lines instead of 15 (3 processed, 9 failed, 3 parked)"
}
