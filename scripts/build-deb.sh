#!/usr/bin/env bash
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
#
# Builds the Debian package from this checkout into dist/:
#   scripts/build-deb.sh
# installs what the build needs (debhelper, lintian and the build's
# packages, with apt-get, through sudo when not root), runs
# `dpkg-buildpackage -us -uc -b` in a copy of the checkout (the tracked and
# new files, so the build leaves no trace in the tree), puts the .deb,
# .buildinfo and .changes in dist/, prints the package's contents
# (dpkg -c) and runs lintian on the .changes: any error or warning fails.
# Install the result with: sudo apt-get install ./dist/mosquitto-dlq_*.deb
set -euo pipefail

cd "$(dirname "$0")/.."
here=$PWD

# shellcheck source=scripts/install-deps.sh
. scripts/install-deps.sh
# What debian/control's Build-Depends names, and the tools that build and
# check the package.
DLQ_PACKAGES=(build-essential debhelper dpkg-dev fakeroot lintian meson ninja-build pkg-config python3
	libcjson-dev libmosquitto-dev mosquitto-dev)
DLQ_COMMANDS=()
install_missing_packages build-deb.sh

version=$(dpkg-parsechangelog -l debian/changelog -S Version)
work=$(mktemp -d /tmp/dlq-deb-XXXXXX)
trap 'rm -rf "$work"' EXIT
src=$work/mosquitto-dlq-$version
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
	[ -e "$f" ] && printf '%s\0' "$f"
done | tar -c --null -T - | tar -x -C "$src"

echo "== dpkg-buildpackage -us -uc -b (mosquitto-dlq $version)"
(cd "$src" && dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1 || {
	tail -40 "$work/build.log" >&2
	echo "build-deb.sh: dpkg-buildpackage failed" >&2
	exit 1
}
mkdir -p dist
rm -f dist/mosquitto-dlq*
mv "$work"/mosquitto-dlq*_"$version"_* dist/
deb=$(ls dist/mosquitto-dlq_"$version"_*.deb)
changes=$(ls dist/mosquitto-dlq_"$version"_*.changes)

echo "== $deb"
dpkg-deb -I "$deb" | sed -n '/^ Package:/,$p'
echo "== dpkg -c $deb"
dpkg -c "$deb"
echo "== lintian $changes ($(dpkg-query -W -f='${Version}' lintian))"
status=0
lintian --fail-on error,warning -I --pedantic "$changes" || status=$?
if [ "$status" -ne 0 ]; then
	echo "build-deb.sh: lintian reported errors or warnings (above)" >&2
	exit 1
fi
echo "== lintian: no errors or warnings (tags above, if any, are of info or pedantic level)"
echo "== built $deb; install it with: sudo apt-get install $here/$deb"
