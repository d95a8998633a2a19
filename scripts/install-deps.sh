#!/usr/bin/env bash
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
#
# The Debian packages mosquitto-dlq needs to build, test and run its demo, in
# one place (with node and npm for the JavaScript worker). Sourced by run-tests.sh, run-demo.sh and run-bench.sh;
# install_missing_packages installs whichever are missing with apt-get (sudo
# when not root) and does nothing when all are there.

# man-db: the man test renders the pages as lintian does (man --warnings,
# lexgrog).
# libmosquitto1: on a broker that does not export the property read
# functions (2.0.21), the plugin reads properties with the client library's.
DLQ_PACKAGES=(gcc libc6-dev pkg-config meson ninja-build libcjson-dev libmosquitto-dev libmosquitto1
	mosquitto-dev mosquitto mosquitto-clients check python3-paho-mqtt man-db)
# The JavaScript worker's test needs node and npm. They are looked for as
# commands, not packages: a machine may have them from elsewhere (NodeSource's
# nodejs bundles npm and conflicts with Debian's npm package).
DLQ_COMMANDS=(node:nodejs npm:npm)
# The console's browser test (tests/console) drives Debian's chromium; a font
# so that its screenshots show text. Only the tests need them: run-tests.sh
# and the 2.1 root add them to the list, the demo does not.
DLQ_TEST_PACKAGES=(chromium fonts-dejavu-core)

install_missing_packages() {
	local who=${1:-mosquitto-dlq} missing=() p sudo=()
	if ! command -v dpkg-query >/dev/null 2>&1; then
		echo "$who: not a Debian system; make sure these are installed: ${DLQ_PACKAGES[*]}" >&2
		return 0
	fi
	for p in "${DLQ_PACKAGES[@]}"; do
		if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
			missing+=("$p")
		fi
	done
	for p in "${DLQ_COMMANDS[@]}"; do
		command -v "${p%%:*}" >/dev/null 2>&1 || missing+=("${p#*:}")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		if ! command -v sudo >/dev/null 2>&1; then
			echo "$who: missing packages: ${missing[*]}; run as root or install sudo" >&2
			exit 1
		fi
		sudo=(sudo)
	fi
	echo "== installing ${missing[*]}"
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update </dev/null
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" </dev/null
}
