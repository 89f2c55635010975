#!/bin/sh
# SPDX-License-Identifier: MIT
# bench/compare_fabtests.sh end to end, one quick round over shm and tcp
# with the delivery-complete variant: it must build fi_rma_bw (once, into
# the build's fabtests/), exit 0, print every tool's figures and the
# ratios, and leave no temporary directory behind; a missing tarball and
# bad arguments are refused with a clear message. No speed is asserted.
# Skips (77) where fabtests' tarball or what building it needs is absent.
# usage: compare_fabtests.sh   ($TERN is the tern binary of the build)
set -u
build=$(dirname "$TERN")
top=$(cd "$(dirname "$0")/../.." && pwd)
tarball=${TERN_FABTESTS_TARBALL:-$top/../shared/third_party/fabtests-1.17.0.tar.gz}
[ -f "$tarball" ] || [ -n "${TERN_FABTESTS_TARBALL:-}" ] ||
	tarball=/third_party/fabtests-1.17.0.tar.gz # scripts/debroot.sh
# The snapshot is fabtests 1.17, for Debian 12's libfabric 1.17: against
# a 2.x library (Debian 13's root, libfabric26.sh) it is not the field's
# tool for that release, and need not build.
fabver=$(pkg-config --modversion libfabric 2>/dev/null || echo unknown)
case $fabver in
1.17|1.17.*) ;;
*) echo "SKIP: the fabtests snapshot is 1.17; this build's libfabric is $fabver"
	exit 77 ;;
esac
if [ ! -x "$build/fabtests/fi_rma_bw" ]; then
	[ -f "$tarball" ] || { echo "SKIP: no $tarball"; exit 77; }
	for t in autoreconf automake libtoolize; do
		command -v $t >/dev/null || { echo "SKIP: no $t"; exit 77; }
	done
fi
tmpdir=$(mktemp -d)
trap 'rm -rf "$tmpdir"' EXIT
export TMPDIR="$tmpdir"
out=$tmpdir/out
TERN_FABTESTS_DC=1 TERN_COMPARE_QUICK=1 bash "$top/bench/compare_fabtests.sh" \
	"$build" 1 shm tcp >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 0 ] || { echo "FAIL: compare_fabtests.sh exited $rc"; exit 1; }
num='[0-9]+\.[0-9]+'
for prov in shm tcp; do
	grep -q "^== $prov: 8 B write rate, Mpps, window 64, 1 rounds ==" "$out" ||
		{ echo "FAIL: no $prov section"; exit 1; }
	# the section's rows, in the order printed
	sed -n "/^== $prov:/,/^\$/p" "$out" >"$tmpdir/sec"
	for tool in fabtests fabtests_dc explicit implicit raw fabtests.srv fabtests_dc.srv; do
		grep -Eq "^  $tool +$num +$num +$num( |\$)" "$tmpdir/sec" ||
			{ echo "FAIL: no figures for $tool on $prov"; exit 1; }
	done
	for m in explicit implicit; do
		grep -Eq "^  $m +tern/fabtests $num \[$num, $num\] +tern/raw $num \[$num, $num\] +tern/fabtests_dc $num \[$num, $num\]\$" \
			"$tmpdir/sec" || { echo "FAIL: no $m ratios on $prov"; exit 1; }
	done
done
grep -q "TERN_LOCAL=0" "$out" || { echo "FAIL: no TERN_LOCAL=0 in the header"; exit 1; }
left=$(find "$tmpdir" -mindepth 1 -maxdepth 1 -type d | wc -l)
[ "$left" -eq 0 ] || { echo "FAIL: compare_fabtests.sh left $left temporary directories"; exit 1; }
# refused before anything runs: a build without fi_rma_bw and no tarball,
# and bad arguments
fresh=$tmpdir/fresh
mkdir "$fresh"
ln -s "$(cd "$build" && pwd)/tern" "$fresh/tern"
ln -s "$(cd "$build" && pwd)/raw" "$fresh/raw"
if TERN_FABTESTS_TARBALL=$tmpdir/none.tar.gz bash "$top/bench/compare_fabtests.sh" \
	"$fresh" 1 shm >"$out" 2>&1; then
	echo "FAIL: ran without a tarball"; exit 1
fi
grep -q "no fabtests tarball at $tmpdir/none.tar.gz" "$out" ||
	{ cat "$out"; echo "FAIL: no clear error for a missing tarball"; exit 1; }
check_refused() { # check_refused MESSAGE ENV-ASSIGNMENT ARGS...
	want=$1 envset=$2
	shift 2
	if env "$envset" bash "$top/bench/compare_fabtests.sh" "$build" "$@" >"$out" 2>&1; then
		echo "FAIL: accepted $envset $*"; exit 1
	fi
	grep -q "$want" "$out" || { cat "$out"; echo "FAIL: no '$want' for $envset $*"; exit 1; }
}
check_refused "ROUNDS must be a positive integer" X=1 0 shm
check_refused "only shm and tcp run here" X=1 1 verbs
check_refused "TERN_FABTESTS_DC must be 0 or 1" TERN_FABTESTS_DC=2 1 shm
check_refused "TERN_FABTESTS_ITERS must be a positive integer" TERN_FABTESTS_ITERS=abc 1 shm
check_refused "TERN_FABTESTS_PORT must leave 64 ports" TERN_FABTESTS_PORT=65500 1 shm
echo "compare_fabtests ok"
