#!/bin/sh
# SPDX-License-Identifier: MIT
# tern bench --world pmix under Open MPI's mpirun: 4 ranks on one host
# over PROVIDER, every byte verified, a 4 x 4 matrix. Without mpirun (or
# a tern built without PMIx's header) it skips, saying why; with
# TERN_PMIX_REQUIRED=1 (CI) that is a failure.
# usage: world_pmix.sh shm|tcp
set -u
prov=$1
skip() {
	echo "SKIP: $1"
	[ "${TERN_PMIX_REQUIRED:-0}" = 1 ] && { echo "FAIL: TERN_PMIX_REQUIRED=1"; exit 1; }
	exit 77
}
command -v mpirun >/dev/null 2>&1 || skip "no mpirun (Debian: openmpi-bin)"
out=$(mktemp)
trap 'rm -f "$out" "$out.json"' EXIT
node=""
[ "$prov" = tcp ] && node="--node 127.0.0.1"
# Open MPI refuses root without --allow-run-as-root; --oversubscribe lets
# 4 ranks share fewer cores.
# mpirun hands its ranks only the variables named with -x: the
# sanitizer build's options (the leak suppressions) and tern's own.
fwd=""
for v in $(env | sed -n 's/^\(ASAN_OPTIONS\|LSAN_OPTIONS\|UBSAN_OPTIONS\|TERN_[A-Z_]*\|FI_[A-Z_]*\)=.*/\1/p'); do
	fwd="$fwd -x $v"
done
# shellcheck disable=SC2086
timeout 120 mpirun --allow-run-as-root --oversubscribe $fwd -np 4 \
	"$TERN" bench --world pmix --provider "$prov" $node --verify \
	--sizes 8,64K,1M -n 50 --json="$out.json" >"$out" 2>&1
rc=$?
cat "$out"
if grep -q "no pmix backend" "$out"; then
	skip "this tern was built without PMIx's header (libpmix-dev)"
fi
[ $rc -eq 0 ] || { echo "FAIL: mpirun exited $rc"; exit 1; }
rows=$(grep -cE '^ +[0-3]( +([0-9]+\.[0-9]+|-)){4}$' "$out")
[ "$rows" -eq 12 ] || { echo "FAIL: $rows matrix rows, not 12"; exit 1; }
v=$(grep -c 'verified: every byte of every pair' "$out")
[ "$v" -eq 3 ] || { echo "FAIL: verified at $v of 3 sizes"; exit 1; }
grep -q '"kind":"pmix","ranks":4' "$out.json" ||
	{ echo "FAIL: the JSON does not say a pmix world of 4"; exit 1; }
echo "OK: 4 ranks under mpirun (pmix) over $prov, all verified"
