#!/usr/bin/env bash
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
#
# Runs every fuzz target (tests/fuzz) for a bounded time, with ASan and UBSan:
#   scripts/fuzz.sh [seconds-per-target] [target ...]      (default: 60, all)
# Configures build-fuzz/ with clang (-Dfuzz=true), builds the libFuzzer
# targets and runs each from its committed seed corpus. New inputs go to
# build-fuzz/corpus/<target>/, never into the tree. A crash, leak, timeout or
# UB report is saved under build-fuzz/findings/<target>/; once understood and
# fixed, copy it to tests/fuzz/regressions/<target>/ so that
# `meson test --suite fuzz-regressions` keeps replaying it.
#
# Prints one line per target (executions, coverage, corpus size, findings)
# and exits 1 when any target found something. Not part of the normal tests:
# it needs clang-14 and libclang-rt-14-dev (Debian) and takes minutes.
# FUZZ_JOBS=N runs N targets at once (default 1).
set -euo pipefail

cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(policy_line policy_json config control state_snapshot state_journal props sessions sends packet_size message_out delivery_model collected)
jobs=${FUZZ_JOBS:-1}
build=build-fuzz

cc=${CC:-}
if [ -z "$cc" ]; then
	for c in clang-14 clang; do
		if command -v "$c" >/dev/null 2>&1; then cc=$c; break; fi
	done
fi
if [ -z "$cc" ]; then
	echo "fuzz.sh: clang not found: apt-get install clang-14 libclang-rt-14-dev" >&2
	exit 2
fi

if [ ! -f "$build/meson-private/coredata.dat" ]; then
	CC=$cc meson setup "$build" -Dfuzz=true -Dtests=false -Db_sanitize=address,undefined -Db_lundef=false -Db_lto=false >/dev/null
fi
# A target added since build-fuzz/ was configured is unknown to `meson
# compile` until the build files are regenerated.
ninja -C "$build" build.ninja >/dev/null
# Quiet when it builds; the compiler's words when it does not.
if ! out=$(meson compile -C "$build" $(printf 'tests/fuzz/fuzz_%s ' "${targets[@]}") 2>&1); then
	printf '%s\n' "$out" | tail -40 >&2
	echo "fuzz.sh: the build of the fuzz targets in $build failed" >&2
	exit 1
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
# UBSan stops at the first report (an abort libFuzzer catches) instead of
# printing it and going on; reports already handed on are in ubsan.supp.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1:suppressions=$PWD/tests/fuzz/ubsan.supp}

run_target() {
	local t=$1
	local corpus="$build/corpus/$t" findings="$build/findings/$t" log="$build/fuzz-$t.log"
	mkdir -p "$corpus" "$findings"
	# Fork mode goes on after a finding, so that one run reports all it
	# finds; each is saved under $findings. -max_len: the state seeds are
	# about 2 KiB; room to grow them.
	"$build/tests/fuzz/fuzz_$t" "$corpus" "tests/fuzz/corpus/$t" \
		-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
		-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
		-artifact_prefix="$findings/" -print_final_stats=1 >"$log" 2>&1 || true
}

start=$(date +%s)
running=0
for t in "${targets[@]}"; do
	run_target "$t" &
	running=$((running + 1))
	if [ "$running" -ge "$jobs" ]; then
		wait -n || true
		running=$((running - 1))
	fi
done
wait

status=0
printf '%-16s %12s %8s %8s %8s  %s\n' target executions exec/s coverage corpus findings
for t in "${targets[@]}"; do
	log="$build/fuzz-$t.log"
	execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#' || true)
	execs=${execs:-0}
	cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || true)
	size=$(find "$build/corpus/$t" -type f | wc -l)
	found=$(find "$build/findings/$t" -type f | wc -l)
	what=""
	if [ "$found" -gt 0 ]; then
		status=1
		what="  in $build/findings/$t (log: $log)"
	fi
	printf '%-16s %12s %8s %8s %8s  %s%s\n' "$t" "$execs" "$((execs / seconds))" "${cov:--}" "$size" "$found" "$what"
done
echo "fuzz.sh: ${#targets[@]} targets, ${seconds}s each, $(( $(date +%s) - start ))s in all"
exit "$status"
