#!/bin/sh
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
#
# The 2.1 broker as MOSQUITTO_BIN: runs the Debian testing root's
# /usr/sbin/mosquitto (it needs glibc 2.38) with chroot, as root. The mounts
# it needs (/proc, /tmp and the project folder at the same paths inside as
# outside, so configurations, sockets, logs and the plugin keep their paths)
# are made beforehand by `scripts/brokers.sh mount 2.1`, because this script
# execs: the harness stops brokers by PID, so the PID it started must become
# the broker's, and signals reach the broker itself. Any number may run at
# once. The environment passes through (LD_PRELOAD of a sanitizer runtime
# must then name a library inside the root).
# BROKER_ROOT: the root (default .brokers/2.1 of this project).
here=$(cd "$(dirname "$0")/.." && pwd)
root=${BROKER_ROOT:-$here/.brokers/2.1}
if [ ! -x "$root/usr/sbin/mosquitto" ]; then
	echo "mosquitto-chroot.sh: no broker in $root: run scripts/brokers.sh mount 2.1" >&2
	exit 127
fi
for d in /proc /tmp "$here"; do
	if ! mountpoint -q "$root$d"; then
		echo "mosquitto-chroot.sh: $root$d is not mounted: run scripts/brokers.sh mount 2.1" >&2
		exit 127
	fi
done
# The broker's own working directory is the caller's, which exists inside.
exec chroot "$root" /bin/sh -c 'cd "$1" 2>/dev/null || cd /; shift; exec /usr/sbin/mosquitto "$@"' mosquitto-chroot "$PWD" "$@"
