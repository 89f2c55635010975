#!/bin/bash
# SPDX-License-Identifier: MIT
# tern against libfabric 2.6.0 (what AWS's EFA installer ships), built
# from the release snapshot beside the checkout, on this host.
#
# usage: scripts/libfabric26.sh build       build libfabric 2.6.0 (shm, tcp,
#                                           rxm, verbs, efa) once, cached by
#                                           the tarball's SHA-256; print its
#                                           prefix
#        scripts/libfabric26.sh check [CTEST-ARGS...]
#                                           build it, build tern against it
#                                           in build-lf26 (warnings are
#                                           errors, binaries run with it by
#                                           RPATH), run the test suite (all
#                                           but labels vm, the qemu guest's,
#                                           and soak, 2 minutes whose writes
#                                           take the same-host path: both
#                                           run on 1.17), then the
#                                           cross-version run
#                                           (scripts/crossver.sh) of a
#                                           release build against it
#        scripts/libfabric26.sh crossver TERN
#                                           a tern built elsewhere run with
#                                           this libfabric (LD_LIBRARY_PATH)
#
# Environment: TERN_LF_TARBALL (default ../shared/third_party/
# libfabric-2.6.0.tar.gz from the repository's root), TERN_CACHE_DIR
# (default /var/cache/tern as root, else ~/.cache/tern): the build goes
# to CACHE/libfabric-2.6.0-HASH, reused while the tarball's hash is the
# same. As root it installs what the build needs (autoconf, automake,
# libtool, libibverbs-dev, librdmacm-dev) with apt-get; otherwise it
# names the command. TERN_* and FI_* pass through to the tests, as ever.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
mode=${1:-check}
[ $# -gt 0 ] && shift
case "$mode" in
build | check | crossver) ;;
*) sed -n '/^# usage:/,/^#$/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
tarball=${TERN_LF_TARBALL:-$src/../shared/third_party/libfabric-2.6.0.tar.gz}
if [ "$(id -u)" -eq 0 ]; then
	cache=${TERN_CACHE_DIR:-/var/cache/tern}
else
	cache=${TERN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tern}
fi
jobs=$(nproc 2>/dev/null || echo 2)
t0=$(date +%s)
note() { echo "libfabric26: [$(($(date +%s) - t0)) s] $*" >&2; }

# apt PKG...: install what is missing (as root), or name the command
apt() {
	local p missing=""
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q "ok installed" || missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "libfabric26: needs these packages:$missing" >&2
		echo "run as root:  apt-get update && apt-get install -y" \
			"--no-install-recommends$missing" >&2
		exit 1
	fi
	note "installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null
	# shellcheck disable=SC2086
	apt-get install -y -q --no-install-recommends $missing >/dev/null
}

# Only the providers tern uses, and none of the hooks; --disable-X for
# the rest, so a header that happens to be installed never adds one.
confopts="--disable-static --disable-dependency-tracking --enable-shm=yes
	--enable-tcp=yes --enable-rxm=yes --enable-verbs=yes --enable-efa=yes"
for p in psm2 psm3 opx usnic cxi sockets udp rxd mrail sm2 ucx lpp lnx \
	perf trace profile monitor hook_debug hook_hmem dmabuf_peer_mem; do
	confopts="$confopts --disable-$p"
done

# build: libfabric into $prefix, once per tarball hash (and options)
build() {
	[ -f "$tarball" ] || { echo "libfabric26: no $tarball" >&2; exit 1; }
	local hash work
	hash=$( { sha256sum <"$tarball"; echo $confopts; } | sha256sum |
		cut -c1-16)
	prefix=$cache/libfabric-2.6.0-$hash
	if [ -f "$prefix/.built" ] &&
		[ -f "$prefix/lib/pkgconfig/libfabric.pc" ]; then
		note "cached: $prefix"
		return 0
	fi
	# verbs does not configure without librdmacm-dev; efa needs
	# libibverbs-dev's efadv.h; autogen.sh needs the autotools
	apt gcc make pkg-config autoconf automake libtool libibverbs-dev \
		librdmacm-dev
	rm -rf "$prefix" "$prefix.work"
	work=$prefix.work
	mkdir -p "$work"
	tar -C "$work" -xzf "$tarball"
	cd "$work"/libfabric-*
	note "autogen.sh, configure (shm tcp rxm verbs efa) in $work"
	# shellcheck disable=SC2086
	{ ./autogen.sh &&
		./configure --prefix="$prefix" $confopts &&
		make -j "$jobs" && make install; } >"$work.log" 2>&1 ||
		{ tail -30 "$work.log" >&2
			echo "libfabric26: build failed (log: $work.log)" >&2
			exit 1; }
	cd "$src"
	rm -rf "$work"
	touch "$prefix/.built"
	note "built and installed into $prefix"
}

build
fi_info=$prefix/bin/fi_info
provs=$(LD_LIBRARY_PATH=$prefix/lib "$fi_info" -l 2>/dev/null |
	sed -n 's/^\([a-z_;]*\):$/\1/p' | tr '\n' ' ')
note "libfabric $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config \
	--modversion libfabric), providers: $provs"

case "$mode" in
build)
	echo "$prefix"
	;;
crossver)
	bin=${1:?usage: $0 crossver TERN}
	LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
		sh scripts/crossver.sh "$bin"
	;;
check)
	# tern against it: the same dev configuration as `make build`, in its
	# own build directory; TERN_LIBFABRIC makes CMake take this
	# libfabric, and the build tree's binaries find it by RPATH
	TERN_LIBFABRIC=$prefix sh scripts/deps.sh check
	note "building tern against $prefix in build-lf26"
	cmake --preset dev -B build-lf26 -DTERN_LIBFABRIC="$prefix" \
		>build-lf26.log 2>&1 || { cat build-lf26.log >&2; exit 1; }
	cmake --build build-lf26 -j "$jobs" >>build-lf26.log 2>&1 ||
		{ tail -40 build-lf26.log >&2; exit 1; }
	rm -f build-lf26.log
	got=$(build-lf26/tern info --json | python3 -c \
		'import json,sys; print(json.load(sys.stdin)["libfabric"])')
	[ "$got" = 2.6 ] || { echo "libfabric26: build-lf26/tern runs" \
		"libfabric $got, not 2.6" >&2; exit 1; }
	note "build-lf26/tern runs libfabric $got"
	rc=0
	# Not the qemu guest's, the soak or the loop (ping_shm_write_200:
	# a race of the same-host path, which takes no libfabric; it runs in
	# the 1.17 and 2.1 checks)
	ctest --test-dir build-lf26 --output-on-failure -j "$jobs" \
		-LE 'vm|soak|loop' "$@" || rc=$?
	sh scripts/skip-reasons.sh build-lf26 || true
	note "test suite against libfabric 2.6 exited $rc"
	# The cross-version run: a release tern built here against the
	# system's libfabric (1.17 on Debian 12), run against 2.6
	if pkg-config --exists libfabric 2>/dev/null; then
		cmake --preset release >/dev/null
		cmake --build --preset release -j "$jobs" >/dev/null
		note "cross-version: build-release/tern (built with" \
			"$(pkg-config --modversion libfabric)) against 2.6"
		LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
			sh scripts/crossver.sh build-release/tern || rc=1
	fi
	note "done (exit $rc)"
	exit $rc
	;;
esac
