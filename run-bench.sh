#!/usr/bin/env bash
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
#
# The benchmark in one command (see BENCHMARKS.md): installs what is missing
# (Debian), builds the plugin and the load generator in build-bench/ with
# meson (debugoptimized: optimized, with the debug info callgrind needs), and
# runs dlq_bench, which starts its own brokers on private unix sockets and
# prints its tables as Markdown on stdout (progress on stderr).
#   ./run-bench.sh                 thorough: about 9 minutes
#   ./run-bench.sh --quick         about a minute
#   ./run-bench.sh --only memory   one suite (throughput, durability, memory, callgrind)
#   ./run-bench.sh --only growth   the growth suite, not part of the default run (5 to 8
#                  minutes: up to 1,000,000 kept records, restored natively and under callgrind)
#   ./run-bench.sh --only letters  the dead-letter store suite (issue 24), not part of the
#                  default run (under a minute): 10,000 kept dead letters, memory, listing,
#                  save and restart with the state file
#   ./run-bench.sh --only saves    the saves suite (issue 36), not part of the default
#                  run (about 10 minutes; --quick about 2): what a client sees while the
#                  plugin saves 100,000 and 1,000,000 kept records, beside the broker's autosave
#   ./run-bench.sh --only fleet    the fleet suite (issue 39), not part of the default run
#                  (about 2 minutes): three edges bridged to a centre that collects their
#                  dead letters: letters/s, the centre's CPU per letter, NACK-to-centre time
#   ./run-bench.sh --plugin-opt 'KEY VALUE'   one more option for every plugin broker
#   ./run-bench.sh --broker LINE  on another broker line (2.0.11, 2.0.21, 2.1;
#                  see run-tests.sh), bare and with the plugin: 2.0.21's build is
#                  against its own headers, in build-bench-2.0.21/; 2.1's broker
#                  runs in its root (scripts/mosquitto-chroot.sh) with the host's
#                  build; its callgrind suite runs the root's valgrind inside
#                  the root (chroot ROOT valgrind ... /usr/sbin/mosquitto; the
#                  host's valgrind would trace the wrapper, not the broker).
# Other arguments are passed to dlq_bench (./run-bench.sh --help lists them).
# Exits non-zero if a broker or a phase failed, never because of a figure.
set -euo pipefail

cd "$(dirname "$0")"

line="" args=()
while [ $# -gt 0 ]; do
	case $1 in
	--broker)
		[ $# -ge 2 ] || { echo "run-bench.sh: --broker needs a line (2.0.11, 2.0.21, 2.1)" >&2; exit 2; }
		line=$2
		shift 2
		;;
	--broker=*) line=${1#*=}; shift ;;
	*) args+=("$1"); shift ;;
	esac
done
set -- "${args[@]}"

# shellcheck source=scripts/install-deps.sh
. scripts/install-deps.sh
# shellcheck source=scripts/broker-lines.sh
. scripts/broker-lines.sh
# The callgrind suite needs valgrind besides what everything else needs, and
# the durability suite strace (to count fdatasync calls; skipped without it).
DLQ_PACKAGES+=(valgrind strace)
# Its progress goes to stderr: stdout is the benchmark's Markdown.
install_missing_packages run-bench.sh >&2

BUILD=${DLQ_BENCH_BUILD:-build-bench}
broker_args=() broker_opts=()
if [ -n "$line" ]; then
	broker_use "$line" >&2
	broker_args=(--mosquitto "$BROKER_BIN")
	if [ "$BROKER_KIND" = extracted ]; then
		BUILD=${DLQ_BENCH_BUILD:-build-bench-$line}
		mapfile -t broker_opts < <(broker_meson_args)
		export LD_LIBRARY_PATH=$BROKER_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	elif [ "$BROKER_KIND" = chroot ]; then
		# For scripts/mosquitto-chroot.sh: DLQ_BROKERS_DIR may put the root
		# outside this folder.
		export BROKER_ROOT
		# scripts/brokers.sh installs valgrind in the root.
		if [ -x "$BROKER_ROOT/usr/bin/valgrind" ]; then
			broker_args+=(--valgrind-root "$BROKER_ROOT")
		else
			echo "run-bench.sh: no valgrind in $BROKER_ROOT: skipping the callgrind suite" >&2
			broker_args+=(--no-callgrind)
		fi
	fi
fi

log="$(mktemp)"
trap 'rm -f "$log"; broker_release' EXIT
if [ -f "$BUILD/meson-private/coredata.dat" ]; then
	setup=(meson setup --reconfigure "$BUILD" -Dtests=false "${broker_opts[@]}")
else
	setup=(meson setup "$BUILD" -Dtests=false --buildtype=debugoptimized "${broker_opts[@]}")
fi
if ! "${setup[@]}" >"$log" 2>&1 || ! ninja -C "$BUILD" mosquitto_dlq.so >>"$log" 2>&1; then
	cat "$log" >&2
	echo "run-bench.sh: building the plugin failed" >&2
	exit 1
fi

# dlq_bench is a meson target once the top-level meson.build has
# subdir('bench'); until then it is compiled here with the same flags.
if grep -q "^subdir('bench')" meson.build; then
	ninja -C "$BUILD" bench/dlq_bench bench/dlq_floor.so >>"$log" 2>&1 || { cat "$log" >&2; exit 1; }
	bench="$BUILD/bench/dlq_bench"
	floor=(--floor-plugin "$BUILD/bench/dlq_floor.so")
else
	bench="$BUILD/dlq_bench"
	floor=()
	# shellcheck disable=SC2046
	gcc -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Iinclude bench/*.c \
		$(pkg-config --cflags --libs libmosquitto) -lpthread -o "$bench"
fi

extra=()
if [[ " ${broker_args[*]} " == *" --no-callgrind "* ]]; then
	:
elif ! command -v valgrind >/dev/null 2>&1 || ! command -v callgrind_annotate >/dev/null 2>&1; then
	echo "run-bench.sh: valgrind not found: skipping the callgrind suite" >&2
	extra+=(--no-callgrind)
fi

# Which code was measured: the commit if any, and a hash of the plugin's
# sources (the tree may differ from the commit).
sources=$(cat plugin/*/*.c plugin/*/*.h include/*.h | sha256sum | cut -c1-12)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo "no commit")
rm -rf "$BUILD/callgrind" "$log"
run=("$bench" --revision "git $commit, plugin sources sha256 $sources" --plugin "$BUILD/mosquitto_dlq.so"
	"${floor[@]}" --callgrind-dir "$BUILD/callgrind" "${broker_args[@]}" "${extra[@]}" "$@")
if ! $broker_mounted_here; then
	trap - EXIT
	exec "${run[@]}"
fi
# The chroot's mounts are undone when the benchmark ends (the EXIT trap).
"${run[@]}"
