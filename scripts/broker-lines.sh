# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
# shellcheck shell=bash
#
# What run-tests.sh, scripts/sanitize.sh and run-bench.sh share to run on a
# broker line other than the host's (sourced, from the project folder):
# broker_use LINE provisions it with scripts/brokers.sh and sets BROKER_*
# (BROKER_KIND system, extracted or chroot); for a chroot it mounts what the
# root needs and undoes, when the shell exits, only the mounts it made itself,
# so a run beside another one in the same folder leaves that one's mounts.
# broker_chroot runs a command inside the root, in the same folder, with a
# clean environment (the host's PATH and compiler variables mean nothing
# there) plus the variables named in BROKER_PASS_ENV.
# broker_meson_args prints the meson options that build against the line's
# own headers and client library; broker_test_env the environment the tests
# need to run against its broker.

broker_mounted_here=false

broker_use() {
	local out
	out=$(scripts/brokers.sh env "$1") || exit 1
	eval "$out"
	if [ "$BROKER_KIND" = chroot ]; then
		if ! mountpoint -q "$BROKER_ROOT/proc"; then
			broker_mounted_here=true
			trap 'broker_release' EXIT
		fi
		scripts/brokers.sh mount "$1" >/dev/null || exit 1
	fi
}

broker_release() {
	if $broker_mounted_here; then
		scripts/brokers.sh unmount "$BROKER_LINE" || true
		broker_mounted_here=false
	fi
}

BROKER_PASS_ENV=(CI CK_TIMEOUT_MULTIPLIER DLQ_TEST_JOBS DLQ_TEST_SLOWDOWN SANITIZE_KNOWN)

broker_chroot() {
	local envv=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8) v
	for v in "${BROKER_PASS_ENV[@]}"; do
		if [ -n "${!v+x}" ]; then
			envv+=("$v=${!v}")
		fi
	done
	# The arguments before "--" are more NAME=value settings, the rest the command.
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		envv+=("$1")
		shift
	done
	shift
	# npm (the JavaScript worker's test) must trust what the host trusts:
	# a machine behind a TLS-inspecting proxy has its CA only in its own
	# bundle, not in the root's. The host's bundle goes into the root as
	# extra certificates for Node.js, beside the root's own.
	local ca=${NODE_EXTRA_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}
	if [ -f "$ca" ]; then
		install -D -m 0644 "$ca" "$BROKER_ROOT/etc/ssl/mosquitto-dlq-host-ca.crt"
		envv+=(NODE_EXTRA_CA_CERTS=/etc/ssl/mosquitto-dlq-host-ca.crt)
	fi
	chroot "$BROKER_ROOT" /usr/bin/env -i "${envv[@]}" /bin/bash -c 'cd "$1" && shift && exec "$@"' \
		broker_chroot "$PWD" "$@"
}

broker_meson_args() {
	if [ "$BROKER_KIND" = extracted ]; then
		echo "-Dc_args=-I$BROKER_INCLUDE"
		echo "-Dc_link_args=-L$BROKER_LIBDIR"
	fi
}

broker_test_env() {
	echo "MOSQUITTO_BIN=$BROKER_BIN"
	if [ "$BROKER_KIND" = extracted ]; then
		echo "LD_LIBRARY_PATH=$BROKER_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	fi
}
