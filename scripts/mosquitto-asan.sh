#!/bin/sh
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
#
# The broker for the integration tests of an ASan/UBSan build of the plugin
# (scripts/sanitize.sh sets MOSQUITTO_BIN to this file). mosquitto itself is
# not instrumented, so the ASan runtime is preloaded: it must come first in
# the process for the instrumented plugin to load. An ASan error aborts the
# broker; a leak at exit makes it exit with status 97 (the harness expects 0)
# and is also written to $SANITIZE_LOG_DIR/asan.<pid>; a UBSan report aborts
# it (the report is in the broker's log, which the harness prints when the
# test fails: gcc's runtime does not reliably honour UBSan's log_path).
# REAL_MOSQUITTO: the broker (default /usr/sbin/mosquitto).
asan=$(${SANITIZE_CC:-gcc} -print-file-name=libasan.so)
dir=${SANITIZE_LOG_DIR:-/tmp}
here=$(cd "$(dirname "$0")" && pwd)
LD_PRELOAD="$asan${LD_PRELOAD:+:$LD_PRELOAD}"
ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:exitcode=97:fast_unwind_on_malloc=0:malloc_context_size=30:log_path=$dir/asan"
LSAN_OPTIONS="suppressions=$here/lsan-broker.supp:print_suppressions=0"
UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1${UBSAN_SUPPRESSIONS:+:suppressions=$UBSAN_SUPPRESSIONS}"
export LD_PRELOAD ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS
exec "${REAL_MOSQUITTO:-/usr/sbin/mosquitto}" "$@"
