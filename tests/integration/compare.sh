#!/bin/sh
# SPDX-License-Identifier: MIT
# bench/compare.sh end to end, one quick round over a provider: it must
# exit 0, print every section with figures for both tools, and leave no
# temporary directory behind. No speed is asserted.
# usage: compare.sh PROVIDER   ($TERN is the tern binary of the build)
set -u
prov=$1
build=$(dirname "$TERN")
top=$(cd "$(dirname "$0")/../.." && pwd)
tmpdir=$(mktemp -d)
trap 'rm -rf "$tmpdir"' EXIT
export TMPDIR="$tmpdir"
out=$tmpdir/out
TERN_COMPARE_QUICK=1 bash "$top/bench/compare.sh" "$build" 1 "$prov" >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 0 ] || { echo "FAIL: compare.sh exited $rc"; exit 1; }
for want in "write targets' pause: 0" "== $prov: write bandwidth" "== $prov: message rate at 8 B" \
	"== $prov: ping-pong p50 at 8 B" "best p50 of the rounds: tern [0-9.]* us, raw [0-9.]* us"; do
	grep -q "$want" "$out" || { echo "FAIL: no '$want'"; exit 1; }
done
# a row per size, each with tern's and raw's min/median/max and a ratio
for size in 4096 65536 1048576 16777216; do
	grep -Eq "^ +$size +([0-9.]+ +){6}[0-9.]+ " "$out" ||
		{ echo "FAIL: no figures for $size B"; exit 1; }
done
# the in-process comparison: a row per size with both bandwidths, a
# ratio with its interval and the control's
grep -q "== $prov: in one process (bench/inproc)" "$out" ||
	{ echo "FAIL: no in-process section"; exit 1; }
for size in 8 4096 65536 1048576 16777216; do
	grep -Eq "^ +$size +[0-9.]+ +[0-9.]+ +[0-9.]+ \[[0-9.]+, [0-9.]+\] +[0-9.]+ \[[0-9.]+, [0-9.]+\]$" "$out" ||
		{ echo "FAIL: no in-process figures for $size B"; exit 1; }
done
grep -Eq "^ +idle pass +tern [0-9.]+ ns +raw [0-9.]+ ns +tern - raw: -?[0-9.]+ \[-?[0-9.]+, -?[0-9.]+\] ns$" "$out" ||
	{ echo "FAIL: no idle pass figures"; exit 1; }
# a bad pair count is refused before anything runs
for var in TERN_PING_PAIRS TERN_WRITE_PAIRS TERN_INPROC_PAIRS; do
	if env "$var=0" bash "$top/bench/compare.sh" "$build" 1 "$prov" >"$out" 2>&1; then
		echo "FAIL: compare.sh accepted $var=0"; exit 1
	fi
	grep -q "$var must be a positive integer" "$out" ||
		{ cat "$out"; echo "FAIL: no clear error for $var=0"; exit 1; }
done
# so is a target pause that is not a count of pause instructions
for v in abc -1 1000001; do
	if TERN_TARGET_PAUSE=$v bash "$top/bench/compare.sh" "$build" 1 "$prov" >"$out" 2>&1; then
		echo "FAIL: compare.sh accepted TERN_TARGET_PAUSE=$v"; exit 1
	fi
	grep -q "TERN_TARGET_PAUSE must be an integer" "$out" ||
		{ cat "$out"; echo "FAIL: no clear error for TERN_TARGET_PAUSE=$v"; exit 1; }
done
left=$(find "$tmpdir" -mindepth 1 -maxdepth 1 -type d | wc -l)
[ "$left" -eq 0 ] || { echo "FAIL: compare.sh left $left temporary directories"; exit 1; }
echo "compare ok"
