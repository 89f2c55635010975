#!/bin/sh
# SPDX-License-Identifier: MIT
# Install what tern needs from Debian/Ubuntu packages, or say exactly what
# to run. usage: scripts/deps.sh demo|install|check|fuzz|ci
# With TERN_LIBFABRIC=PREFIX (make LIBFABRIC=PREFIX: a libfabric installed
# under PREFIX, docs/testing.md), or a PKG_CONFIG_PATH under which
# pkg-config finds a libfabric outside /usr, Debian's libfabric-dev is not
# needed: tern builds against that one.
set -eu
fabric=libfabric-dev
if [ -n "${TERN_LIBFABRIC:-}" ]; then
	fabric=""
elif [ -n "${PKG_CONFIG_PATH:-}" ] && command -v pkg-config >/dev/null &&
	d=$(pkg-config --variable=libdir libfabric 2>/dev/null); then
	case $d in
	"" | /usr/lib*) ;;
	*) fabric="" ;;
	esac
fi
need="gcc make cmake pkg-config $fabric libhwloc-dev"
case "${1:-demo}" in
demo) ;;
# install (make install): the man pages are rendered by scdoc, and their
# section 3 made from the headers by python3 (docs/man/)
install) need="$need scdoc python3" ;;
# check: the network-namespace tests need ip, tc (iproute2) and nft; the
# public headers are compiled as C++ too (g++); the Python package's
# tests need Debian's cffi, numpy, pytest, hypothesis and torch, and pip
# with setuptools for the offline `pip install ./python` test (no index); the
# man pages are rendered (scdoc) and checked with groff and man
# (groff-base, man-db); worlds of N ranks run under Open MPI's mpirun
# (openmpi-bin) through PMIx (libpmix-dev: the header, and libpmix2),
# and in an etcd cluster (etcd-server; libcurl's header for its gateway);
# bench/compare_fabtests.sh's test builds fabtests' fi_rma_bw from its
# snapshot, which has no configure script (autoconf, automake, libtool)
check) need="$need libcmocka-dev python3 libibverbs-dev iproute2 nftables
	autoconf automake libtool
	g++ python3-cffi python3-numpy python3-pytest python3-hypothesis
	python3-torch python3-pip python3-setuptools python3-wheel scdoc
	groff-base man-db libpmix-dev openmpi-bin etcd-server
	libcurl4-openssl-dev" ;;
# ci also boots the verbs test guest (make vm-check): qemu, cpio, kmod, and
# xz-utils to unpack linux-source for soft-iWARP's siw.ko
# fuzz: make fuzz-check builds with clang and links libFuzzer
fuzz) need="$need libcmocka-dev python3 libibverbs-dev clang libclang-rt-dev" ;;
ci) need="$need libcmocka-dev python3 clang libclang-rt-dev clang-format
	autoconf automake libtool
	libibverbs-dev iproute2 nftables qemu-system-x86 cpio kmod xz-utils g++
	python3-cffi python3-numpy python3-pytest python3-hypothesis
	python3-torch python3-pip python3-setuptools python3-wheel scdoc
	groff-base man-db libpmix-dev openmpi-bin etcd-server
	libcurl4-openssl-dev" ;;
*) echo "usage: $0 demo|install|check|fuzz|ci" >&2; exit 2 ;;
esac

missing=""
for p in $need; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
	echo "tern needs:$missing (Debian package names); install them with" \
		"your package manager, then run make again." >&2
	exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "tern needs these packages:$missing" >&2
	echo "run as root:  apt-get update && apt-get install -y --no-install-recommends$missing" >&2
	exit 1
fi
echo "installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
