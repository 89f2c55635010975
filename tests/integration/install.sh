#!/bin/sh
# SPDX-License-Identifier: MIT
# What `make install` puts down, used as another project would use it:
# `cmake --install` of the build into a temporary DESTDIR under the prefix
# /usr/local, then examples/paged_write/ built against that tree twice,
# with pkg-config (tern.pc) and with CMake's find_package(tern), and both
# run over shm; man finds the installed pages.
#
# usage: tests/integration/install.sh BUILD-DIR SOURCE-DIR
set -u
build=$1
src=$2
prefix=/usr/local
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
fail=0

no() {
	echo "FAIL: $*"
	fail=1
}

if ! DESTDIR=$root cmake --install "$build" --prefix "$prefix" \
	>"$tmp/install.log" 2>&1; then
	cat "$tmp/install.log"
	no "cmake --install $build failed"
	exit 1
fi
p=$root$prefix

# The tree: the CLI, the library with its soname and links, the headers,
# tern.pc naming the prefix (not the build or DESTDIR), the CMake package.
pc=$(find "$p" -name tern.pc -path '*/pkgconfig/*')
[ -n "$pc" ] || {
	no "no tern.pc under $p"
	exit 1
}
libdir=$(dirname "$(dirname "$pc")")
[ -x "$p/bin/tern" ] || no "no $prefix/bin/tern"
"$p/bin/tern" version | grep -q '^tern ' || no "the installed tern does not run"
for f in libtern.so libtern.so.0; do
	[ -L "$libdir/$f" ] || no "$f is not a link in $libdir"
done
real=$(readlink -f "$libdir/libtern.so")
case $real in
"$libdir"/libtern.so.0.*) ;;
*) no "libtern.so leads to $real, not libtern.so.0.X.Y" ;;
esac
soname=$(objdump -p "$real" | awk '$1 == "SONAME" { print $2 }')
[ "$soname" = libtern.so.0 ] || no "soname is '$soname', not libtern.so.0"
[ -f "$p/include/tern/tern.h" ] || no "no $prefix/include/tern/tern.h"
if grep -l '#include <rdma/' "$p"/include/tern/*.h; then
	no "installed headers include libfabric's: consumers would need it"
fi
grep -qx "prefix=$prefix" "$pc" || no "tern.pc: $(grep '^prefix=' "$pc")"
if grep -q -e "$build" -e "$root" "$pc"; then
	no "tern.pc names the build or DESTDIR"
fi
for f in ternConfig.cmake ternConfigVersion.cmake ternTargets.cmake; do
	[ -f "$libdir/cmake/tern/$f" ] || no "no $f in $libdir/cmake/tern"
done

# The installed tern runs the libfabric the build tree's does: the one it
# was built against (where that is not the system's: the install RPATH of
# a build with TERN_LIBFABRIC, docs/testing.md), never another found on
# the way.
fabric() { # the "libfabric" of `tern info --json`
	"$@" info --json --provider shm 2>/dev/null |
		sed -n 's/.*"libfabric": "\([0-9.]*\)".*/\1/p'
}
want=$(fabric "$build/tern")
got=$(fabric "$p/bin/tern")
[ -n "$want" ] && [ "$got" = "$want" ] ||
	no "the installed tern runs libfabric '$got', the build's '$want'"

# The example, built as another project would: a copy, out of the tree.
# The installed libtern goes before whatever LD_LIBRARY_PATH holds already
# (a libfabric of the user's, say), never instead of it.
lpath=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
run() { # how DIR
	out=$(LD_LIBRARY_PATH=$lpath "$2/paged_write" shm 2>&1)
	rc=$?
	echo "$out" | sed "s/^/  $1: /"
	if [ $rc -ne 0 ] || ! echo "$out" | grep -q '^paged_write: OK$'; then
		no "paged_write built with $1 failed (exit $rc)"
	fi
	LD_LIBRARY_PATH=$lpath ldd "$2/paged_write" >"$tmp/ldd" 2>&1
	grep -q "libtern.so.0 => $libdir/libtern.so.0 " "$tmp/ldd" ||
		no "paged_write ($1) does not load the installed libtern.so.0"
	# and libtern the libfabric the build tree's tern loads
	lf=$(sed -n 's/.*libfabric.so.1 => \([^ ]*\) .*/\1/p' "$tmp/ldd")
	[ "$(readlink -f "$lf")" = "$fabric_so" ] ||
		no "paged_write ($1) loads libfabric $lf, the build's tern $fabric_so"
}
fabric_so=$(ldd "$build/tern" | sed -n 's/.*libfabric.so.1 => \([^ ]*\) .*/\1/p')
fabric_so=$(readlink -f "$fabric_so")
cp -r "$src/examples/paged_write" "$tmp/pc"
if PKG_CONFIG_PATH=$libdir/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root \
	make -C "$tmp/pc" CFLAGS="-O2 -Wall -Wextra -Werror" \
	>"$tmp/pc.log" 2>&1; then
	run pkg-config "$tmp/pc"
else
	cat "$tmp/pc.log"
	no "building paged_write with pkg-config"
fi

cp -r "$src/examples/paged_write" "$tmp/cm"
if cmake -S "$tmp/cm" -B "$tmp/cm/build" -DCMAKE_PREFIX_PATH="$p" \
	-DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$tmp/cm.log" 2>&1 &&
	cmake --build "$tmp/cm/build" >>"$tmp/cm.log" 2>&1; then
	grep -q "^tern_DIR:PATH=$libdir/cmake/tern$" "$tmp/cm/build/CMakeCache.txt" ||
		no "find_package(tern) found $(grep '^tern_DIR' "$tmp/cm/build/CMakeCache.txt")"
	run find_package "$tmp/cm/build"
else
	cat "$tmp/cm.log"
	no "building paged_write with find_package(tern)"
fi

# man finds the installed pages, each section.
export MAN_DISABLE_SECCOMP=1 MANWIDTH=80
for page in "1 tern" "1 tern-bench" "7 tern" "3 tern_write_imm" "3 tern_req"; do
	# shellcheck disable=SC2086
	where=$(man -M "$p/share/man" -w $page 2>&1)
	case $where in
	"$p/share/man/"*) ;;
	*) no "man -M $prefix/share/man $page: $where" ;;
	esac
	# shellcheck disable=SC2086
	man -M "$p/share/man" $page 2>/dev/null | grep -q "^NAME" ||
		no "man $page renders nothing"
done

[ $fail -eq 0 ] && echo "OK: installed under DESTDIR$prefix; paged_write" \
	"built with pkg-config and find_package(tern) runs; man finds the pages"
exit $fail
