#!/bin/bash
# SPDX-License-Identifier: MIT
# Run tern's README commands and checks in a pristine Debian root made
# with debootstrap --variant=minbase (no make, no compiler: what a fresh
# machine has), from any Debian/Ubuntu host, as root. Debian 12 (bookworm,
# libfabric 1.17) and Debian 13 (trixie, libfabric 2.1). The checkout is
# copied in (tracked files and untracked ones git does not ignore, so
# uncommitted work is tested too; never a build directory of the host).
#
# usage: scripts/debroot.sh SUITE check   the README's test command
#                                         (sh run.sh check), as root
#        scripts/debroot.sh SUITE demo    the README's first command
#                                         (sh run.sh demo), as root
#        scripts/debroot.sh SUITE nonroot the test command as a user who
#                                         is not root, in a throwaway copy
#                                         of the pristine root (whatever
#                                         demo or check installed in the
#                                         kept root): it must stop and
#                                         print the exact apt-get line,
#                                         which then works as root
#        scripts/debroot.sh SUITE crossver [TERN]
#                                         a tern built here (default
#                                         build-release/tern, else
#                                         build/tern) run against that
#                                         suite's libfabric:
#                                         scripts/crossver.sh
#        scripts/debroot.sh SUITE run CMD...  any command, in the copy
#        scripts/debroot.sh SUITE shell       an interactive shell there
#        scripts/debroot.sh SUITE fresh       delete the root and its
#                                             pristine snapshot: the next
#                                             command debootstraps again
# SUITE: bookworm (12) or trixie (13). scripts/debian13.sh is
# `scripts/debroot.sh trixie`.
#
# Environment: TERN_ROOT_DIR (default /var/cache/tern/SUITE), where the
# root lives and is reused (ROOT.pristine beside it is the untouched
# debootstrap, copied for a new root and for every nonroot run); TERN_ROOT_MIRROR (default
# http://deb.debian.org/debian). TERN_* variables pass through into the
# root (TERN_NETNS_REQUIRED=1 makes the network-namespace tests fail
# instead of skipping). The copy is /tern inside the root (for nonroot,
# /home/tern/tern, the user's own); its build directories are kept
# between runs (they were made there). The host's ../shared/third_party
# (release snapshots: NIXL, libfabric), where there is one, is bound
# read-only at /third_party.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
suite=${1:-}
[ $# -gt 0 ] && shift
mode=${1:-}
[ $# -gt 0 ] && shift
case "$suite" in
bookworm | trixie) ;;
*) suite="" ;;
esac
root=${TERN_ROOT_DIR:-/var/cache/tern/$suite}
mirror=${TERN_ROOT_MIRROR:-http://deb.debian.org/debian}

usage() {
	sed -n '/^# usage:/,/^#$/p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
[ -n "$suite" ] || usage
case "$mode" in
check | demo | nonroot | crossver | run | shell | fresh) ;;
*) usage ;;
esac
[ "$mode" = run ] && [ $# -eq 0 ] && usage
if [ "$(id -u)" -ne 0 ]; then
	echo "$0: needs root (debootstrap, mounts, chroot)" >&2
	exit 1
fi

t0=$(date +%s)
note() { echo "$suite: [$(($(date +%s) - t0)) s] $*"; }

# rmroot DIR: delete a root, never through a mount left under it (a
# killed run's bind mount of /dev would take the host's with it)
rmroot() {
	local m
	for m in $(awk -v r="$1/" 'index($2 "/", r) == 1 { print $2 }' \
		/proc/mounts | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
	if awk -v r="$1/" 'index($2 "/", r) == 1 { f = 1 } END { exit !f }' \
		/proc/mounts; then
		echo "$0: something is still mounted under $1; not deleting it" >&2
		return 1
	fi
	rm -rf "$1"
}

if [ "$mode" = fresh ]; then
	for r in "$root" "$root.pristine" "$root.user"; do
		rmroot "$r"
	done
	rm -f "$root.log"
	note "removed $root and $root.pristine"
	exit 0
fi

# 1. The root: debootstrap once into ROOT.pristine, which is never
# entered; the kept root, and each nonroot run's throwaway one, are
# copies of it.
# A debootstrap killed half way leaves /etc/debian_version behind: only
# the marker written after it finished says the snapshot is whole.
pristine=$root.pristine
if [ ! -f "$pristine/.tern-debootstrap-done" ]; then
	rmroot "$pristine"
	if ! command -v debootstrap >/dev/null 2>&1; then
		note "installing debootstrap"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			--no-install-recommends debootstrap ||
			{ apt-get update -q && DEBIAN_FRONTEND=noninteractive \
				apt-get install -y -q --no-install-recommends \
				debootstrap; }
	fi
	note "debootstrap --variant=minbase $suite $pristine"
	mkdir -p "$pristine"
	debootstrap --variant=minbase "$suite" "$pristine" "$mirror" \
		>"$root.log" 2>&1 ||
		{ tail -20 "$root.log" >&2; echo "$0: debootstrap failed" \
			"(log: $root.log)" >&2; rmroot "$pristine"; exit 1; }
	touch "$pristine/.tern-debootstrap-done"
fi
kept=$root
if [ "$mode" = nonroot ]; then
	# Never the kept root: demo or check may have installed everything
	# there, and a root that has the packages proves nothing.
	root=$root.user
	rmroot "$root"
fi
# demo is the README's first command on a pristine machine: always a new
# copy (a kept root that has the packages would prove nothing). A kept
# root whose package database a killed run left half written (dpkg
# "was interrupted", or packages half installed) is made anew too: apt
# refuses to work in it.
# Never while another run uses the root (its mounts are there): that run
# would lose its tree, and a package database it is writing looks broken.
in_use() { awk -v r="$1/" 'index($2 "/", r) == 1 { f = 1 } END { exit !f }' \
	/proc/mounts; }
renew=""
if [ "$mode" = demo ] && [ -e "$root" ]; then
	renew="demo: a new copy of the pristine root"
elif [ -f "$root/etc/debian_version" ] &&
	{ [ ! -f "$root/.tern-debootstrap-done" ] ||
		[ -n "$(ls -A "$root/var/lib/dpkg/updates" 2>/dev/null)" ] ||
		[ -n "$(dpkg --root="$root" --audit 2>&1)" ]; }; then
	renew="$root: package database left broken by an earlier run; a new copy"
fi
if [ -n "$renew" ]; then
	if in_use "$root"; then
		echo "$0: $root is in use by another run (mounts under it);" \
			"not replacing it: wait for that run" >&2
		exit 1
	fi
	note "$renew"
	rmroot "$root"
fi
if [ ! -f "$root/etc/debian_version" ]; then
	note "copying $pristine to $root"
	rmroot "$root"
	cp -a "$pristine" "$root"
fi
case "$suite:$(cat "$root/etc/debian_version")" in
bookworm:12.* | bookworm:bookworm* | trixie:13.* | trixie:trixie*) ;;
*) echo "$0: $root is not $suite ($(cat "$root/etc/debian_version"))" >&2
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
if [ "$mode" = nonroot ]; then
	trap 'cleanup; rmroot "$root"' EXIT
fi
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
# The release snapshots beside the checkout (../shared/third_party: NIXL,
# libfabric), read-only at /third_party, for builds made in the root
# (tests/nixl/build.sh); nothing when the host has none.
if [ -d "$src/../shared/third_party" ]; then
	mnt third_party --bind "$src/../shared/third_party"
	mount -o remount,bind,ro "$root/third_party"
fi

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
	case "$k" in TERN_ROOT_*) ;; TERN_* | FI_*) envs+=("$k=$v") ;; esac
done < <(env -0)
inroot() { chroot "$root" /usr/bin/env -i "${envs[@]}" "$@"; }

case "$mode" in
check | demo)
	# The README's command as it stands: on a pristine root it installs
	# make and the rest itself (run.sh, scripts/deps.sh).
	note "sh run.sh $mode (as root)"
	rc=0
	inroot sh -c "cd /tern && sh run.sh $mode" || rc=$?
	note "sh run.sh $mode exited $rc (libfabric $(inroot dpkg-query -W \
		-f='${Version}' libfabric1 2>/dev/null || echo 'not installed'))"
	exit $rc
	;;
nonroot)
	# A user who is not root, on a root without the packages: the
	# command must stop, naming the exact apt-get line to run as root.
	# the kept root's downloaded packages, if any, spare the network
	cp "$kept"/var/cache/apt/archives/*.deb \
		"$root/var/cache/apt/archives/" 2>/dev/null || true
	inroot sh -c 'id tern >/dev/null 2>&1 || useradd -m tern'
	rm -rf "$root/home/tern/tern"
	cp -a "$dst" "$root/home/tern/tern"
	rm -rf "$root"/home/tern/tern/build*
	inroot chown -R tern: /home/tern/tern
	note "sh run.sh check (as user tern)"
	rc=0
	out=$(chroot --userspec=tern:tern "$root" /usr/bin/env -i \
		"${envs[@]}" HOME=/home/tern \
		sh -c 'cd /home/tern/tern && sh run.sh check' 2>&1) || rc=$?
	printf '%s\n' "$out"
	line=$(printf '%s\n' "$out" | sed -n 's/^run as root:  //p')
	if [ $rc -eq 0 ] || [ -z "$line" ]; then
		echo "FAIL: as a user, sh run.sh check exited $rc without" \
			"naming the command to run as root (a root that has the" \
			"packages already proves nothing: scripts/debroot.sh" \
			"$suite fresh)" >&2
		exit 1
	fi
	case "$line" in
	*sudo*) echo "FAIL: the command assumes sudo: $line" >&2; exit 1 ;;
	esac
	note "running what it named, as root: $line"
	inroot sh -c "$line" >/dev/null || { echo "FAIL: $line failed" >&2; exit 1; }
	if ! inroot sh -c 'cd /tern && sh scripts/deps.sh check'; then
		echo "FAIL: after $line, packages are still missing" >&2
		exit 1
	fi
	note "ok: the user was told the exact command, and it installs everything"
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
