#!/usr/bin/env bash
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
#
# The Mosquitto lines the plugin is tested on, provisioned from Debian's own
# archive into .brokers/ (gitignored), on demand and idempotently:
#   scripts/brokers.sh env LINE      provision LINE, print shell assignments
#   scripts/brokers.sh mount LINE    provision, and for 2.1 mount what the chroot needs
#   scripts/brokers.sh unmount LINE  undo what mount did (2.1)
#   scripts/brokers.sh host          print the host's own line
#   scripts/brokers.sh archive-url   print the Debian archive URL of the machine's apt sources
# LINE is 2.0.11 (Debian 12), 2.0.21 (Debian 13; Debian 12's backports) or
# 2.1 (Debian testing: 2.1.x). The host's own system broker serves its own
# line; 2.0.21 on a Debian 12 host is the backports' packages unpacked with
# dpkg -x (its broker runs on the host: it needs only Debian 12 libraries);
# 2.1 needs glibc 2.38, so it is a debootstrapped Debian testing root with
# its own compiler, run with chroot as root (scripts/mosquitto-chroot.sh).
# The printed assignments (BROKER_LINE, BROKER_KIND=system|extracted|chroot,
# BROKER_ROOT, BROKER_BIN, BROKER_INCLUDE, BROKER_LIBDIR) say where the
# broker, its headers and its client library are.
# The archive's URL is read from the machine's own apt sources at run time;
# apt runs with private lists and caches, so the machine's apt configuration
# and state are left as they were.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
store=${DLQ_BROKERS_DIR:-$here/.brokers}
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)

die() {
	echo "brokers.sh: $*" >&2
	exit 1
}

# A version such as 2.0.11-1.2+deb12u2 or 2.1.2-1 as its line: 2.0.x keeps
# its patch level (2.0.11 and 2.0.21 differ in what they export), 2.1.x is 2.1.
line_of() {
	local v=${1%%-*}
	case $v in
	2.0.*) echo "$v" ;;
	2.1*) echo 2.1 ;;
	*) echo "$v" ;;
	esac
}

host_line() {
	local v
	v=$(dpkg-query -W -f='${Version}' mosquitto 2>/dev/null) || v=""
	[ -n "$v" ] || die "the system mosquitto package is not installed (run-tests.sh installs it)"
	line_of "$v"
}

# The first Debian archive URL of the machine's own apt sources.
archive_url() {
	local url=""
	if [ -f /etc/apt/sources.list.d/debian.sources ]; then
		url=$(awk '/^URIs:/ { for(i = 2; i <= NF; i++) if($i !~ /security/){ print $i; exit } }' \
			/etc/apt/sources.list.d/debian.sources)
	fi
	if [ -z "$url" ] && [ -f /etc/apt/sources.list ]; then
		url=$(awk '$1 == "deb" { for(i = 2; i <= NF; i++) if($i ~ /^[a-z]+:\/\//){ if($i !~ /security/){ print $i; exit } break } }' \
			/etc/apt/sources.list)
	fi
	[ -n "$url" ] || die "no Debian archive URL in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list"
	echo "${url%/}"
}

# apt with its own source list, lists and caches under $1.
private_apt() {
	local dir=$1
	shift
	apt-get -q -o Dir::Etc::sourcelist="$dir/sources.list" -o Dir::Etc::sourceparts=- \
		-o Dir::State::Lists="$dir/lists" -o Dir::Cache="$dir/cache" \
		-o APT::Sandbox::User=root "$@"
}

# 2.0.21 on a Debian 12 host: the bookworm-backports packages, unpacked.
provision_extracted() {
	local line=$1 root=$store/$1 apt=$store/apt-$1
	[ -x "$root/usr/sbin/mosquitto" ] && [ -f "$root/usr/include/mosquitto_broker.h" ] && return 0
	local codename
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	[ "$codename" = bookworm ] || die "$line on this host ($codename): only Debian 12's backports are known to carry it"
	echo "== provisioning mosquitto $line into $root (Debian $codename-backports)" >&2
	rm -rf "$apt" "$root.tmp"
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/dl" "$root.tmp"
	# The backports, and the release itself for the libraries the broker
	# needs that this host does not have (libwebsockets17, say: Debian 12's
	# own 2.0.11 is built without websockets).
	{
		echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(archive_url) $codename-backports main"
		echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(archive_url) $codename main"
	} >"$apt/sources.list"
	private_apt "$apt" update >&2 </dev/null
	local p pkgs=()
	for p in mosquitto libmosquitto1 mosquitto-dev libmosquitto-dev mosquitto-clients; do
		pkgs+=("$p/$codename-backports")
	done
	(cd "$apt/dl" && private_apt "$apt" download "${pkgs[@]}" >&2 </dev/null)
	local v
	v=$(dpkg-deb -f "$apt"/dl/mosquitto_*.deb Version)
	[ "$(line_of "$v")" = "$line" ] || die "$codename-backports has mosquitto $v, not $line"
	# Its shared libraries the host lacks are unpacked beside it (the tests
	# run it with LD_LIBRARY_PATH on the root's library folder).
	local dep libs=()
	for dep in $(dpkg-deb -f "$apt"/dl/mosquitto_*.deb Depends | tr ',|' '\n\n' | awk '{ print $1 }'); do
		case $dep in
		libmosquitto1) ;;
		lib*) dpkg-query -W -f='${Status}' "$dep" 2>/dev/null | grep -q 'ok installed' || libs+=("$dep") ;;
		esac
	done
	if [ ${#libs[@]} -gt 0 ]; then
		echo "== $line needs ${libs[*]}, not on this host: unpacked beside it" >&2
		(cd "$apt/dl" && private_apt "$apt" download "${libs[@]}" >&2 </dev/null)
	fi
	for p in "$apt"/dl/*.deb; do
		dpkg-deb -x "$p" "$root.tmp"
	done
	rm -rf "$root"
	mv "$root.tmp" "$root"
}

# A whole root made from a shorter list (what .provisioned's second line
# says) only lacks packages: they are installed into it, and the line is
# rewritten. Returns 1, changing nothing, if the root is not whole, if the
# old list has a package the new one lacks, or if the install fails: the
# root is then made again.
upgrade_chroot() {
	local root=$1 include=$2 p
	shift 2
	[ -f "$root/.provisioned" ] && [ -x "$root/usr/sbin/mosquitto" ] || return 1
	local have version missing=()
	have=,$(sed -n 2p "$root/.provisioned"),
	for p in ${have//,/ }; do
		[[ ",$include," == *",$p,"* ]] || return 1
	done
	for p in "$@"; do
		[[ $have == *",$p,"* ]] || missing+=("$p")
	done
	[ ${#missing[@]} -gt 0 ] || return 1
	[ "$(id -u)" -eq 0 ] || die "adding ${missing[*]} to the $root root needs root (chroot)"
	echo "== adding ${missing[*]} to the root $root" >&2
	local log=$store/upgrade-$(basename "$root").log
	local apt=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive apt-get
		-o Acquire::Check-Valid-Until=false)
	if ! { chroot "$root" "${apt[@]}" update && chroot "$root" "${apt[@]}" install -y --no-install-recommends \
			"${missing[@]}"; } >"$log" 2>&1 </dev/null; then
		tail -20 "$log" >&2
		echo "brokers.sh: adding ${missing[*]} to $root failed (its log: $log); making the root again" >&2
		return 1
	fi
	chroot "$root" apt-get clean
	# The install may have upgraded the broker with its libraries.
	version=$(chroot "$root" dpkg-query -W -f='${Version}' mosquitto) || return 1
	[ "$(line_of "$version")" = 2.1 ] || die "the root's mosquitto is now $version, not 2.1"
	printf '%s\n%s\n' "$version" "$include" >"$root/.provisioned"
}

# 2.1: a Debian testing root with the broker, its headers and a compiler.
provision_chroot() {
	local line=$1 root=$store/$1
	# Everything the build and the tests need is installed when the root is
	# made: install-deps.sh's list, node and npm included (a root never has
	# them from elsewhere); a root made from a shorter list gets what it lacks
	# (upgrade_chroot), one made from another list is made again.
	# debootstrap installs the base (its resolver cannot take npm's
	# dependencies), apt-get in the root the rest. The testing archive a
	# machine reaches may be a snapshot whose Release file has passed its
	# Valid-Until date: apt-get is told to accept it, in the root only.
	# shellcheck source=scripts/install-deps.sh
	. "$here/scripts/install-deps.sh"
	# valgrind: run-bench.sh's callgrind suite runs the 2.1 broker under the
	# root's own valgrind (a valgrind on the host would trace the chroot).
	local wanted=("${DLQ_PACKAGES[@]}") p
	for p in "${DLQ_COMMANDS[@]}"; do
		wanted+=("${p#*:}")
	done
	wanted+=(valgrind "${DLQ_TEST_PACKAGES[@]}")
	local include
	include=$(IFS=,; echo "${wanted[*]}")
	if [ -f "$root/.provisioned" ] && [ "$(sed -n 2p "$root/.provisioned")" = "$include" ]; then
		return 0
	fi
	upgrade_chroot "$root" "$include" "${wanted[@]}" && return 0
	[ "$(id -u)" -eq 0 ] || die "provisioning $line needs root (debootstrap, chroot)"
	if ! command -v debootstrap >/dev/null; then
		DLQ_PACKAGES=(debootstrap)
		DLQ_COMMANDS=()
		install_missing_packages brokers.sh >&2
	fi
	echo "== provisioning mosquitto $line into $root (debootstrap of Debian testing; a few minutes)" >&2
	# A half-made root is started again from scratch, its mounts undone first.
	if [ -d "$root" ]; then
		unmount_chroot "$line"
		rm -rf --one-file-system "$root"
	fi
	mkdir -p "$store"
	local log=$store/debootstrap-$line.log
	if ! debootstrap --variant=minbase \
			--include=mosquitto,mosquitto-dev,libmosquitto-dev,libcjson-dev,gcc,libc6-dev,pkg-config,meson,ninja-build,check,mosquitto-clients \
			testing "$root" "$(archive_url)" >"$log" 2>&1 </dev/null; then
		tail -20 "$log" >&2
		die "debootstrap failed; its log: $log"
	fi
	local apt=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive apt-get
		-o Acquire::Check-Valid-Until=false)
	if ! { chroot "$root" "${apt[@]}" update && chroot "$root" "${apt[@]}" install -y --no-install-recommends \
			"${wanted[@]}"; } >>"$log" 2>&1 </dev/null; then
		tail -20 "$log" >&2
		die "installing the build's packages in the root failed; its log: $log"
	fi
	chroot "$root" apt-get clean
	local v
	v=$(chroot "$root" dpkg-query -W -f='${Version}' mosquitto)
	[ "$(line_of "$v")" = "$line" ] || die "Debian testing has mosquitto $v, not $line"
	printf '%s\n%s\n' "$v" "$include" >"$root/.provisioned"
}

# The folders the tests use, at the same paths inside the root as outside:
# /tmp (brokers' directories, sockets, logs), the project (the plugin, the
# build trees) and the host's pseudo-terminals (/dev/pts: the root's
# /dev/ptmx opens them; dlqctl's progress bar is tested on one). Each is
# mounted only if it is not already, so a second call, or a run beside
# another one, reuses the mounts.
chroot_mounts() {
	echo "proc /proc"
	echo "bind /tmp"
	echo "bind $here"
	if [ -e /dev/pts/ptmx ]; then echo "bind /dev/pts"; fi
}

mount_chroot() {
	local root=$store/$1 kind path target
	while read -r kind path; do
		target=$root$path
		mkdir -p "$target"
		mountpoint -q "$target" && continue
		if [ "$kind" = proc ]; then
			mount -t proc proc "$target"
		elif [ "$path" = /dev/pts ]; then
			# Only the terminal test needs it, and it says when it skips.
			mount --bind "$path" "$target" || echo "brokers.sh: /dev/pts not bound into the root: the terminal test will skip" >&2
		else
			mount --bind "$path" "$target"
		fi
	done < <(chroot_mounts)
}

# Undoes mount_chroot, last mount first. A mount still in use (a broker left
# running) is detached lazily rather than left behind.
unmount_chroot() {
	local root=$store/$1 kind path target
	[ -d "$root" ] || return 0
	while read -r kind path; do
		target=$root$path
		if mountpoint -q "$target"; then
			umount "$target" 2>/dev/null || umount -l "$target"
		fi
	done < <(chroot_mounts | tac)
}

provision() {
	local line=$1
	case $line in
	2.0.11 | 2.0.21 | 2.1) ;;
	*) die "unknown broker line \"$line\" (known: 2.0.11, 2.0.21, 2.1)" ;;
	esac
	if [ "$line" = "$(host_line)" ]; then
		echo "BROKER_KIND=system"
		echo "BROKER_ROOT=/"
		echo "BROKER_BIN=/usr/sbin/mosquitto"
		echo "BROKER_INCLUDE=/usr/include"
		echo "BROKER_LIBDIR=/usr/lib/$multiarch"
	elif [ "$line" = 2.1 ]; then
		provision_chroot "$line"
		echo "BROKER_KIND=chroot"
		echo "BROKER_ROOT=$store/$line"
		echo "BROKER_BIN=$here/scripts/mosquitto-chroot.sh"
		echo "BROKER_INCLUDE=$store/$line/usr/include"
		echo "BROKER_LIBDIR=$store/$line/usr/lib/$multiarch"
	elif [ "$line" = 2.0.21 ]; then
		provision_extracted "$line"
		echo "BROKER_KIND=extracted"
		echo "BROKER_ROOT=$store/$line"
		echo "BROKER_BIN=$store/$line/usr/sbin/mosquitto"
		echo "BROKER_INCLUDE=$store/$line/usr/include"
		echo "BROKER_LIBDIR=$store/$line/usr/lib/$multiarch"
	else
		die "$line is neither this host's line ($(host_line)) nor one this script can provision here"
	fi
	echo "BROKER_LINE=$line"
}

cmd=${1:-}
case $cmd in
host)
	host_line
	;;
archive-url)
	archive_url
	;;
env)
	[ $# -eq 2 ] || die "usage: brokers.sh env LINE"
	provision "$2"
	;;
mount)
	[ $# -eq 2 ] || die "usage: brokers.sh mount LINE"
	out=$(provision "$2")
	echo "$out"
	if grep -qx BROKER_KIND=chroot <<<"$out"; then
		mount_chroot "$2"
	fi
	;;
unmount)
	[ $# -eq 2 ] || die "usage: brokers.sh unmount LINE"
	[ "$2" = 2.1 ] && unmount_chroot "$2"
	;;
*)
	die "usage: brokers.sh env|mount|unmount LINE, or brokers.sh host|archive-url"
	;;
esac
