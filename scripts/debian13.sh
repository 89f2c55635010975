#!/bin/bash
# SPDX-License-Identifier: MIT
# Run tern's checks against Debian 13's libfabric (2.1) from a Debian 12
# (or any Debian/Ubuntu) host, as root: make (or reuse) a Debian 13 root
# with debootstrap, copy this checkout into it (tracked files and untracked
# ones git does not ignore, so uncommitted work is tested too; never a
# build directory of the host) and run a command there.
#
# usage: scripts/debian13.sh check       make check inside (the README's
#                                        test command, as on a pristine
#                                        Debian 13 minbase machine)
#        scripts/debian13.sh crossver [TERN]
#                                        a tern built here (default
#                                        build-release/tern, else
#                                        build/tern) run against Debian
#                                        13's libfabric: scripts/crossver.sh
#        scripts/debian13.sh run CMD...  any command, in the copy
#        scripts/debian13.sh shell       an interactive shell there
#
# Environment: TERN_DEB13_ROOT (default /var/cache/tern/debian13), where
# the root lives and is reused; TERN_DEB13_MIRROR (default
# http://deb.debian.org/debian). TERN_* variables pass through into the
# root (TERN_NETNS_REQUIRED=1 makes the network-namespace tests fail
# instead of skipping). The copy is /tern inside the root; its build
# directories are kept between runs (they were made there).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
root=${TERN_DEB13_ROOT:-/var/cache/tern/debian13}
mirror=${TERN_DEB13_MIRROR:-http://deb.debian.org/debian}
mode=${1:-}
[ $# -gt 0 ] && shift

usage() {
	sed -n '/^# usage:/,/^#$/p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
case "$mode" in
check | crossver | run | shell) ;;
*) usage ;;
esac
[ "$mode" = run ] && [ $# -eq 0 ] && usage
if [ "$(id -u)" -ne 0 ]; then
	echo "$0: needs root (debootstrap, mounts, chroot)" >&2
	exit 1
fi

t0=$(date +%s)
note() { echo "debian13: [$(($(date +%s) - t0)) s] $*"; }

# 1. The root: debootstrap once, then reuse.
if [ ! -f "$root/etc/debian_version" ]; then
	if ! command -v debootstrap >/dev/null 2>&1; then
		note "installing debootstrap"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			--no-install-recommends debootstrap ||
			{ apt-get update -q && DEBIAN_FRONTEND=noninteractive \
				apt-get install -y -q --no-install-recommends \
				debootstrap; }
	fi
	note "debootstrap --variant=minbase trixie $root"
	mkdir -p "$root"
	debootstrap --variant=minbase trixie "$root" "$mirror" >"$root.log" 2>&1 ||
		{ tail -20 "$root.log" >&2; echo "$0: debootstrap failed" \
			"(log: $root.log)" >&2; exit 1; }
fi
case "$(cat "$root/etc/debian_version")" in
13.* | trixie*) ;;
*) echo "$0: $root is not Debian 13 ($(cat "$root/etc/debian_version"))" >&2
	exit 1 ;;
esac
cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

# 2. Mounts, undone on exit whatever happens (in reverse order).
mounted=()
cleanup() {
	local i
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
		umount -R "${mounted[$i]}" 2>/dev/null ||
			umount -Rl "${mounted[$i]}" 2>/dev/null ||
			echo "$0: could not unmount ${mounted[$i]}" >&2
	done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mnt() { # mnt DIR mount-args...: mount unless something is there already
	local dir=$root/$1
	shift
	mkdir -p "$dir"
	mountpoint -q "$dir" && return 0
	mount "$@" "$dir"
	mounted+=("$dir")
}
# The root is a mount point of its own: `ip netns exec` (the
# network-namespace tests) remounts / as a slave, which a plain
# directory refuses.
# Private: nothing mounted under it propagates back to the host's tree.
mnt . --bind "$root"
mount --make-rprivate "$root"
mnt proc -t proc proc
mnt sys --rbind /sys
mount --make-rslave "$root/sys"
mnt dev --bind /dev
mnt dev/pts --bind /dev/pts
# its own /dev/shm: shm endpoints of the root never meet the host's
mnt dev/shm -t tmpfs -o mode=1777 shm
mnt run -t tmpfs -o mode=755 run
mnt tmp -t tmpfs -o mode=1777 tmp

# 3. The checkout, copied in (build directories inside the root are kept).
dst=$root/tern
mkdir -p "$dst"
find "$dst" -mindepth 1 -maxdepth 1 ! -name 'build*' -exec rm -rf {} +
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
	git -C "$src" ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do
			[ -e "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"
		done | tar -C "$src" --null -T - -cf - | tar -C "$dst" -xf -
else
	tar -C "$src" --exclude='./build*' -cf - . | tar -C "$dst" -xf -
fi
note "copied $(find "$dst" -path "$dst/build*" -prune -o -type f -print |
	wc -l) files into $dst"

# 4. The command, with a clean environment plus TERN_* and FI_*.
envs=(HOME=/root TERM=dumb LANG=C.UTF-8
	PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
	DEBIAN_FRONTEND=noninteractive)
while IFS='=' read -r -d '' k v; do
	case "$k" in TERN_DEB13_*) ;; TERN_* | FI_*) envs+=("$k=$v") ;; esac
done < <(env -0)
inroot() { chroot "$root" /usr/bin/env -i "${envs[@]}" "$@"; }

case "$mode" in
check)
	# A pristine minbase system has no make: install it as a user would
	# (README), then make check installs the rest through scripts/deps.sh.
	if ! inroot dpkg-query -W -f='${Status}' make 2>/dev/null |
		grep -q "ok installed"; then
		note "apt-get install make"
		inroot apt-get update -q
		inroot apt-get install -y -q --no-install-recommends make
	fi
	note "installing packages (scripts/deps.sh check)"
	inroot sh -c 'cd /tern && sh scripts/deps.sh check'
	note "make check (libfabric $(inroot dpkg-query -W \
		-f='${Version}' libfabric1 2>/dev/null))"
	rc=0
	inroot sh -c 'cd /tern && make check' || rc=$?
	note "make check exited $rc"
	exit $rc
	;;
crossver)
	# The host's tern (built against the host's libfabric), copied in
	# and run against the root's libfabric only.
	bin=${1:-}
	if [ -z "$bin" ]; then
		for b in build-release/tern build/tern; do
			[ -x "$b" ] && { bin=$b; break; }
		done
	fi
	[ -n "$bin" ] && [ -x "$bin" ] ||
		{ echo "$0: no tern built here (make build-release)" >&2; exit 1; }
	inroot sh -c 'dpkg-query -W -f="\${Status}" libfabric1 2>/dev/null |
		grep -q "ok installed" ||
		{ apt-get update -q && apt-get install -y -q \
			--no-install-recommends libfabric1 libhwloc15 python3; }'
	rm -rf "$dst/host-tern" && mkdir -p "$dst/host-tern"
	cp "$bin" "$dst/host-tern/tern"
	# libtern.so when the tern links it (a dev build), beside the binary
	for so in "$(dirname "$bin")"/libtern.so*; do
		[ -e "$so" ] && cp -P "$so" "$dst/host-tern/"
	done
	note "cross-version run of $bin (built with $(pkg-config --modversion \
		libfabric 2>/dev/null || echo '?'))"
	inroot env LD_LIBRARY_PATH=/tern/host-tern \
		sh /tern/scripts/crossver.sh /tern/host-tern/tern
	;;
run) inroot sh -c 'cd /tern && exec "$@"' sh "$@" ;;
shell) inroot sh -c 'cd /tern && exec bash -i' ;;
esac
