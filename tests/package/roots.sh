#!/usr/bin/env bash
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
#
# Fresh Debian roots for the package's install test (test-package.sh):
#   tests/package/roots.sh provision SUITE   make .brokers/pkg-SUITE once (debootstrap minbase)
#   tests/package/roots.sh fresh SUITE DIR   copy it to DIR, a root no test has touched
# SUITE is bookworm (Debian 12), trixie (Debian 13) or testing. The pristine root is
# debootstrap's minimal base and nothing else: what a test installs (Debian's
# mosquitto, the package) goes into a copy, so every run starts on a system
# as fresh as a new server's. The archive's URL is the machine's own apt
# sources' (scripts/brokers.sh archive-url). Needs root.
set -euo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
store=${DLQ_BROKERS_DIR:-$here/.brokers}

die() {
	echo "roots.sh: $*" >&2
	exit 1
}

provision() {
	local suite=$1 root=$store/pkg-$1
	[ -f "$root/.provisioned" ] && return 0
	[ "$(id -u)" -eq 0 ] || die "making a Debian root needs root (debootstrap)"
	command -v debootstrap >/dev/null || die "debootstrap is not installed"
	local url log=$store/debootstrap-pkg-$suite.log
	url=$("$here/scripts/brokers.sh" archive-url)
	echo "== making a fresh Debian $suite root in $root (debootstrap, about 2 minutes)" >&2
	rm -rf --one-file-system "$root"
	mkdir -p "$store"
	if ! debootstrap --variant=minbase "$suite" "$root" "$url" >"$log" 2>&1 </dev/null; then
		tail -20 "$log" >&2
		die "debootstrap of $suite failed; its log: $log"
	fi
	chroot "$root" apt-get clean
	date -u +%FT%TZ >"$root/.provisioned"
}

case ${1:-} in
provision)
	[ $# -eq 2 ] || die "usage: roots.sh provision SUITE"
	provision "$2"
	;;
fresh)
	[ $# -eq 3 ] || die "usage: roots.sh fresh SUITE DIR"
	provision "$2"
	rm -rf --one-file-system "$3"
	cp -a "$store/pkg-$2" "$3"
	rm -f "$3/.provisioned"
	;;
*)
	die "usage: roots.sh provision SUITE | fresh SUITE DIR"
	;;
esac
