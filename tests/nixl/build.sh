#!/bin/bash
# SPDX-License-Identifier: MIT
# NIXL 1.4.0 (ai-dynamo/nixl), built from the release snapshot, offline, in
# a Debian 13 root, as root: what tern's NIXL backend plugin (plugins/nixl)
# builds against and is tested under (tests/nixl/README.md). Run it there:
#   scripts/debroot.sh trixie run bash tests/nixl/build.sh
# (debroot.sh binds the host's ../shared/third_party at /third_party).
#
# usage: tests/nixl/build.sh          build once (or verify the cached
#                                     build: seconds), print the prefix
#        tests/nixl/build.sh --force  build again even when cached
#
# It installs the Debian packages NIXL needs (apt-get), unpacks the
# snapshot, patches the unpacked copy (never the snapshot; nothing of
# NIXL's is in tern's repository):
#   - test/gtest/test_transfer.cpp: TestTransfer (and TestTransferTelemetry)
#     instantiated for the backend "TERN", as UCX's lines are: tern,
#     tern_no_pt (tern_telemetry, tern_telemetry_no_pt);
#   - test/gtest/error_handling.cpp: TestErrorHandling instantiated for
#     "TERN" (tern), and its check of UCX's own plugin parameter
#     (ucx_error_handling_mode=peer) made UCX's only;
#   - test/gtest/configuration.cpp: the #include <fstream> it lacks;
#   - meson.build: libfabric never looked for (NIXL's libfabric utilities
#     and LIBFABRIC plugin are not built, whatever libfabric-dev the root
#     has: the build is the same in every root);
#   - benchmark/nixlbench: a backend named TERN accepted (no parameters of
#     its own);
# then configures (meson, debug: the gtest binary is built only when
# buildtype is not release; CUDA looked for nowhere), builds with ninja
# -j2 and installs NIXL (UCX and POSIX plugins) and nixlbench into PREFIX.
#
# PREFIX is CACHE/nixl-VERSION-KEY, KEY the first 16 hex digits of the
# SHA-256 of the tarball's SHA-256 and this recipe's options and patch
# level (RECIPE below): a second run with the same tarball only verifies
# the build (files there, every library resolved, the same Debian package
# versions as it was built with) and prints PREFIX. /opt/nixl-VERSION
# links to the latest. Layout (tests/nixl/README.md):
#   PREFIX/include               nixl.h, backend/backend_plugin.h, ...
#   PREFIX/lib                   libnixl.so, libnixl_build.so, ...
#   PREFIX/lib/plugins           libplugin_UCX.so, libplugin_POSIX.so
#   PREFIX/lib/pkgconfig/nixl.pc written here from NIXL's nixl.pc.in
#                                (meson does not install one)
#   PREFIX/bin/gtest             NIXL's gtest binary (--tests_plugin_dirs=)
#   PREFIX/bin/nixlbench         nixlbench, TERN accepted
#   PREFIX/src/nixl-VERSION      the patched source
#   PREFIX/build, build-bench    the build trees (kept: the gtest binary
#                                names PREFIX/build in BUILD_DIR)
#
# Environment: TERN_NIXL_TARBALL (default /third_party/nixl-1.4.0.tar.gz,
# else ../shared/third_party/nixl-1.4.0.tar.gz from the repository's
# root), TERN_NIXL_CACHE (default /opt), TERN_NIXL_JOBS (default 2: the
# machines are shared).
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
force=0
case "${1:-}" in
"") ;;
--force) force=1 ;;
*) sed -n '/^# usage:/,/^#$/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
t0=$(date +%s)
note() { echo "nixl-build: [$(($(date +%s) - t0)) s] $*" >&2; }
die() { echo "nixl-build: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root, inside the Debian 13 root:" \
	"scripts/debroot.sh trixie run bash tests/nixl/build.sh"
case "$(cat /etc/debian_version 2>/dev/null)" in
13.* | trixie*) ;;
*) die "needs Debian 13 (this is $(cat /etc/debian_version 2>/dev/null ||
	echo 'not Debian')): scripts/debroot.sh trixie run bash" \
	"tests/nixl/build.sh" ;;
esac

tarball=${TERN_NIXL_TARBALL:-}
if [ -z "$tarball" ]; then
	for t in /third_party/nixl-1.4.0.tar.gz \
		"$repo/../shared/third_party/nixl-1.4.0.tar.gz"; do
		[ -f "$t" ] && { tarball=$t; break; }
	done
fi
if [ -z "$tarball" ] || [ ! -f "$tarball" ]; then
	where="neither /third_party/nixl-1.4.0.tar.gz (scripts/debroot.sh binds"
	where="$where the host's ../shared/third_party there) nor"
	where="$where ../shared/third_party/nixl-1.4.0.tar.gz"
	die "no NIXL snapshot: ${TERN_NIXL_TARBALL:-$where}"
fi
version=$(basename "$tarball" .tar.gz)
version=${version#nixl-}
cache=${TERN_NIXL_CACHE:-/opt}
jobs=${TERN_NIXL_JOBS:-2}

# What NIXL 1.4.0 needs from Debian 13: meson/ninja/g++/pkg-config; Abseil
# (absl_log), asio (asio.pc), toml++ 3.4, pybind11 and python3-dev (the
# Python bindings cannot be turned off); gtest/gmock (the gtest binary);
# UCX (the UCX plugin, for comparison; ucx-utils: ucx_info); gflags
# (nixlbench, with asio, toml++ and OpenMP: g++'s libgomp). taskflow is a
# pkg-config shim (only GDS_MT, a CUDA plugin, uses it). git: meson runs
# `git rev-parse` for the version string (outside a git tree it fails,
# which is fine; without git, meson stops).
pkgs="meson ninja-build g++ pkg-config git python3 python3-dev pybind11-dev
	libabsl-dev libasio-dev libtomlplusplus-dev libgtest-dev libgmock-dev
	libucx-dev ucx-utils libgflags-dev"

# The recipe: a change to the options or patches below must change it
# (the cache key), as a new tarball does.
meson_opts="--wrap-mode=nodownload -Dbuildtype=debug -Dwerror=false
	-Denable_plugins=UCX,POSIX -Dbuild_examples=false --libdir=lib"
bench_opts="--wrap-mode=nodownload -Dbuildtype=release -Dwerror=false
	--libdir=lib"
RECIPE="tern-nixl-3 $meson_opts | $bench_opts | LDFLAGS=rpath PREFIX/lib,PREFIX/lib/plugins"

missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
if [ -n "$missing" ]; then
	note "installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null
	# shellcheck disable=SC2086
	apt-get install -y -q --no-install-recommends $missing >/dev/null ||
		die "apt-get install failed:$missing"
fi
# the versions it is built with: a cached build is reused only with them
# shellcheck disable=SC2086
pkgstamp=$(dpkg-query -W -f='${Package} ${Version}\n' $pkgs | sort)

sum=$(sha256sum <"$tarball" | cut -d' ' -f1)
key=$(printf '%s\n%s\n' "$sum" "$RECIPE" | sha256sum | cut -c1-16)
prefix=$cache/nixl-$version-$key
mkdir -p "$cache"
exec 9>"$prefix.lock"
flock 9

# verify: the cached build is whole and runs here
verify() {
	local f
	[ -f "$prefix/.built" ] || return 1
	for f in include/nixl.h include/backend/backend_plugin.h \
		lib/libnixl.so lib/libnixl_build.so lib/plugins/libplugin_UCX.so \
		lib/plugins/libplugin_POSIX.so lib/pkgconfig/nixl.pc \
		bin/gtest bin/nixlbench; do
		[ -e "$prefix/$f" ] || { note "cached build lacks $f"; return 1; }
	done
	if [ "$(cat "$prefix/.packages" 2>/dev/null)" != "$pkgstamp" ]; then
		note "cached build was made with other package versions:"
		diff "$prefix/.packages" <(echo "$pkgstamp") >&2 || true
		return 1
	fi
	for f in "$prefix"/lib/libnixl.so "$prefix"/lib/plugins/*.so \
		"$prefix"/bin/gtest "$prefix"/bin/nixlbench; do
		if ldd "$f" 2>&1 | grep -q 'not found'; then
			note "$f: $(ldd "$f" | grep 'not found' | head -3)"
			return 1
		fi
	done
	grep -q '"TERN"' "$prefix/src/nixl-$version/test/gtest/test_transfer.cpp" ||
		return 1
}

if [ $force -eq 0 ] && verify; then
	ln -sfn "$(basename "$prefix")" "$cache/nixl-$version"
	note "cached: $prefix (NIXL $version, tarball sha256 ${sum:0:16}...)"
	echo "$prefix"
	exit 0
fi

log=$prefix.log
note "building NIXL $version into $prefix (log: $log); ninja -j$jobs," \
	"6-11 minutes on 2 cores"
rm -rf "$prefix"
mkdir -p "$prefix/src"
: >"$log"
tar -C "$prefix/src" -xzf "$tarball"
srcdir=$prefix/src/nixl-$version
[ -f "$srcdir/meson.build" ] || die "$tarball: no nixl-$version/meson.build"

# patch FILE: append stdin to FILE; subst FILE OLD NEW: replace the line
# OLD (exactly once there) by NEW; both fail loudly when NIXL changed
subst() {
	local f=$1 old=$2 new=$3 n
	n=$(grep -cxF -- "$old" "$f" || true)
	[ "$n" = 1 ] || die "patch: $f has $n lines '$old' (NIXL changed?)"
	OLD=$old NEW=$new python3 - "$f" <<-'EOF'
		import os, sys
		p = sys.argv[1]
		lines = open(p).read().split("\n")
		lines = [os.environ["NEW"] if l == os.environ["OLD"] else l
		         for l in lines]
		open(p, "w").write("\n".join(lines))
	EOF
}

# gtest: TERN as UCX's first two instantiations (the backend name, the
# agent's progress thread on/off; num_workers 2 and num_threads 0 are
# passed as backend parameters to UCX only)
grep -qxF 'NIXL_INSTANTIATE_TEST(ucx, TestTransfer, "UCX", true, 2, 0, "");' \
	"$srcdir/test/gtest/test_transfer.cpp" ||
	die "patch: test_transfer.cpp has no UCX instantiation (NIXL changed?)"
cat >>"$srcdir/test/gtest/test_transfer.cpp" <<'EOF'

// tern (tests/nixl/build.sh): the TERN backend plugin, as UCX's lines.
namespace gtest {
NIXL_INSTANTIATE_TEST(tern, TestTransfer, "TERN", true, 2, 0, "");
NIXL_INSTANTIATE_TEST(tern_no_pt, TestTransfer, "TERN", false, 2, 0, "");
NIXL_INSTANTIATE_TEST(tern_telemetry, TestTransferTelemetry, "TERN", true, 2, 0, "");
NIXL_INSTANTIATE_TEST(tern_telemetry_no_pt, TestTransferTelemetry, "TERN", false, 2, 0, "");
} // namespace gtest
EOF
# error_handling.cpp: parameterised by backend name (with num_workers and
# num_threads, which it passes as backend parameters, with
# split_batch_size=0, whatever the backend); only its check of the UCX
# plugin's default parameter ucx_error_handling_mode is UCX's own
subst "$srcdir/test/gtest/error_handling.cpp" \
	'        EXPECT_EQ(ucx_err_handling_mode_peer, params[ucx_err_handling_mode_key]);' \
	'        if (backend_name == "UCX") { EXPECT_EQ(ucx_err_handling_mode_peer, params[ucx_err_handling_mode_key]); } // tern: UCX only'
cat >>"$srcdir/test/gtest/error_handling.cpp" <<'EOF'

// tern (tests/nixl/build.sh): the TERN backend plugin, as UCX's first line.
namespace gtest {
INSTANTIATE_TEST_SUITE_P(tern, TestErrorHandling, testing::Values(std::make_tuple("TERN", 1, 0)));
} // namespace gtest
EOF
# configuration.cpp uses std::ofstream without <fstream> (g++ 12 and 14
# alike: libstdc++ no longer brings it in)
subst "$srcdir/test/gtest/configuration.cpp" '#include <limits>' \
	'#include <fstream> // tern: std::ofstream
#include <limits>'
# libfabric: never looked for
subst "$srcdir/meson.build" \
	"  libfabric_dep = dependency('libfabric', required: false)" \
	"  libfabric_dep = dependency('', required: false) # tern: libfabric never looked for"
# nixlbench: a backend named TERN, with no parameters of its own
bench=$srcdir/benchmark/nixlbench
subst "$bench/src/utils/utils.h" \
	'#define XFERBENCH_BACKEND_INFINIA "INFINIA"' \
	'#define XFERBENCH_BACKEND_INFINIA "INFINIA"
#define XFERBENCH_BACKEND_TERN "TERN"'
subst "$bench/src/worker/nixl/nixl_worker.cpp" \
	'        0 == xferBenchConfig::backend.compare(XFERBENCH_BACKEND_UCCL) ||' \
	'        0 == xferBenchConfig::backend.compare(XFERBENCH_BACKEND_UCCL) ||
        0 == xferBenchConfig::backend.compare(XFERBENCH_BACKEND_TERN) ||'
subst "$bench/src/worker/nixl/nixl_worker.cpp" \
	'    } else if (0 == xferBenchConfig::backend.compare(XFERBENCH_BACKEND_UCCL)) {' \
	'    } else if (0 == xferBenchConfig::backend.compare(XFERBENCH_BACKEND_TERN)) {
        std::cout << "TERN backend" << std::endl;
    } else if (0 == xferBenchConfig::backend.compare(XFERBENCH_BACKEND_UCCL)) {'

# taskflow: Debian 13 packages it only for CMake; NIXL asks pkg-config,
# and only the GDS_MT plugin (CUDA) uses it
mkdir -p "$prefix/src/pkgconfig"
cat >"$prefix/src/pkgconfig/taskflow.pc" <<'EOF'
Name: taskflow
Description: shim for NIXL's dependency('taskflow') (tern tests/nixl/build.sh)
Version: 3.9.0
Cflags:
EOF

# ninja's [n/m] once a minute, the rest to the log
progress() {
	local what=$1 line last=$SECONDS
	while IFS= read -r line; do
		printf '%s\n' "$line" >>"$log"
		case "$line" in
		\[*/*\]*)
			if [ $((SECONDS - last)) -ge 60 ]; then
				last=$SECONDS
				note "$what ${line%% *}"
			fi ;;
		esac
	done
}
# run WHAT CMD...: CMD's output to the log; on failure its tail, and stop
run() {
	local what=$1 rc=0
	shift
	"$@" 2>&1 | progress "$what" || rc=$? # pipefail: the command's status
	[ $rc -eq 0 ] && return 0
	tail -40 "$log" >&2
	die "$what failed (log: $log)"
}
# CUDA looked for nowhere: with a toolkit in /usr/local/cuda NIXL builds
# nvcc targets, and no meson option turns that off
export CUDA_PATH=/nonexistent/cuda CUDA_HOME=/nonexistent/cuda
export PKG_CONFIG_PATH=$prefix/src/pkgconfig
# NIXL installs its programs (gtest, nixlbench) without an RPATH, and
# gtest links libplugin_UCX.so: they find their libraries by this one
export LDFLAGS="-Wl,-rpath,$prefix/lib -Wl,-rpath,$prefix/lib/plugins"
export PATH=/usr/bin:/bin:/usr/sbin:/sbin

note "meson setup (NIXL: UCX and POSIX plugins, gtest)"
# shellcheck disable=SC2086
run "meson setup" meson setup "$prefix/build" "$srcdir" $meson_opts \
	--prefix="$prefix"
grep -q "libplugin_UCX" "$prefix/build/build.ninja" ||
	die "meson did not configure the UCX plugin (log: $log)"
tb=$(date +%s)
note "ninja -j$jobs (NIXL)"
run "NIXL" ninja -C "$prefix/build" -j "$jobs"
run "NIXL install" meson install -C "$prefix/build" --no-rebuild
nixl_s=$(($(date +%s) - tb))
note "NIXL built in $nixl_s s"

# nixl.pc, from NIXL's nixl.pc.in (meson installs none): the libraries
# there; not UCX (a plugin of its own) nor etcd (not in Debian, not built
# with); and include/utils, where the backend headers' "common/nixl_log.h"
# is (nixl_log.h includes Abseil's headers: libabsl-dev)
libs=""
for l in nixl nixl_build nixl_common stream serdes ucx_utils; do
	[ -e "$prefix/lib/lib$l.so" ] && libs="$libs -l$l"
done
mkdir -p "$prefix/lib/pkgconfig"
sed -e "s|@prefix@|$prefix|g" -e 's|@libdir@|lib|' \
	-e 's|@includedir@|include|' -e "s|@version@|$version|" \
	-e '/^Requires.private: etcd-cpp-api/d' -e '/^Requires: ucx$/d' \
	-e 's|^Cflags: -I${includedir} |&-I${includedir}/utils |' \
	-e "s|^Libs: .*|Libs: -L\${libdir} -Wl,-rpath,\${libdir}$libs -lstdc++|" \
	"$srcdir/nixl.pc.in" >"$prefix/lib/pkgconfig/nixl.pc"
# what a plugin includes compiles with nixl.pc's flags alone
printf '%s\n' '#include <backend/backend_plugin.h>' '#include <nixl.h>' \
	'int main() { return 0; }' >"$prefix/build/nixl-pc-check.cpp"
# shellcheck disable=SC2046
g++ -std=c++20 -fsyntax-only "$prefix/build/nixl-pc-check.cpp" \
	$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags nixl) ||
	die "$prefix/lib/pkgconfig/nixl.pc: the backend headers do not compile"

note "meson setup (nixlbench, TERN accepted)"
tb=$(date +%s)
# shellcheck disable=SC2086
run "meson setup nixlbench" meson setup "$prefix/build-bench" "$bench" \
	$bench_opts --prefix="$prefix" -Dnixl_path="$prefix"
run "nixlbench" ninja -C "$prefix/build-bench" -j "$jobs"
run "nixlbench install" meson install -C "$prefix/build-bench" --no-rebuild
note "nixlbench built in $(($(date +%s) - tb)) s"

echo "$pkgstamp" >"$prefix/.packages"
{
	echo "NIXL $version from $tarball (sha256 $sum)"
	echo "recipe: $RECIPE"
	echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(($(date +%s) - t0)) s" \
		"(NIXL $nixl_s s), ninja -j$jobs"
} >"$prefix/.built"
verify || die "the build in $prefix does not verify"
ln -sfn "$(basename "$prefix")" "$cache/nixl-$version"
note "done: $prefix ($(($(date +%s) - t0)) s)"
echo "$prefix"
