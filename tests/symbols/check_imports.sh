#!/bin/sh
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
#
# Fails when the plugin module imports a mosquitto_* function that
# Mosquitto does not promise to export. broker-exports.txt is upstream's
# src/linker.syms as 2.0.21 exports it (nm -D of Debian's 2.0.21 broker):
# the plugin must load on every broker of the 2.0 and 2.1 lines, so it
# calls only those directly and looks up anything else at startup
# (plugin/broker/broker_caps.c). Usage: check_imports.sh NM MODULE.so LIST
set -eu
nm=$1
module=$2
list=$3
missing=$("$nm" -D --undefined-only "$module" | awk '{ print $NF }' | sed 's/@.*//' | grep '^mosquitto_' |
	sort -u | grep -vxF -f "$list" || true)
if [ -n "$missing" ]; then
	echo "$module imports mosquitto_* functions not in $list (2.0.21 would refuse to load it):" >&2
	echo "$missing" >&2
	exit 1
fi
echo "$module: every mosquitto_* import is in $list"
