#!/bin/sh
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
#
# The broker under valgrind for the integration tests (scripts/valgrind.sh
# sets MOSQUITTO_BIN to this file). A memory error or a definite leak makes
# it exit with status 99 when it is stopped, which fails the test; reports
# go to $SANITIZE_LOG_DIR/valgrind.<pid>. REAL_MOSQUITTO: the broker (default
# /usr/sbin/mosquitto).
# Reports that are mosquitto's own are suppressed (valgrind-broker.supp).
dir=${SANITIZE_LOG_DIR:-/tmp}
here=$(cd "$(dirname "$0")" && pwd)
exec valgrind --quiet --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite --error-exitcode=99 \
	--suppressions="$here/valgrind-broker.supp" \
	--log-file="$dir/valgrind.%p" "${REAL_MOSQUITTO:-/usr/sbin/mosquitto}" "$@"
