#!/bin/bash
# SPDX-License-Identifier: MIT
# One tern against another (two builds, e.g. before and after a change),
# in one run, on the same host.
#
# usage: bench/builds_ab.sh TERN_A TERN_B [PAIRS] [PROVIDER] [MEM]
#        (defaults: 6 pairs, shm, shared)
#
# Runs `tern bench --op write` and `--op read` at 8 B, 4 KiB, 64 KiB,
# 1 MiB and 16 MiB (--mem and --peer-mem MEM; the default iteration
# counts and window of 64) with A and B in ABBA order, PAIRS times per op,
# and prints per op and size each side's median GB/s (Mpps at 8 B) and the
# median and range of the per-pair ratio B/A. On a shared machine absolute
# figures move from run to run; a pair's two runs meet about the same
# load, so their ratio is the figure (docs/performance.md).
set -euo pipefail
a=${1:?usage: builds_ab.sh TERN_A TERN_B [PAIRS] [PROVIDER] [MEM]}
b=${2:?usage: builds_ab.sh TERN_A TERN_B [PAIRS] [PROVIDER] [MEM]}
pairs=${3:-6}
prov=${4:-shm}
mem=${5:-shared}
for t in "$a" "$b"; do
	[ -x "$t" ] || { echo "builds_ab: $t is not a tern binary" >&2; exit 1; }
done
node=()
[ "$prov" = tcp ] && node=(--node 127.0.0.1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sizes=8,4K,64K,1M,16M

run() { # TERN OP OUT
	"$1" bench -p "$prov" "${node[@]}" --op "$2" --mem "$mem" \
		--peer-mem "$mem" -s "$sizes" -j 2>/dev/null |
		python3 -c 'import json,sys
for r in json.load(sys.stdin)["results"]:
    print(r["size"], r["mpps"] if r["size"] == 8 else r["gBps"])' >"$3"
}

for op in write read; do
	for ((i = 0; i < pairs; i++)); do
		# A B, then B A: each order in every other pair.
		if ((i % 2 == 0)); then
			run "$a" "$op" "$tmp/$op.a$i"
			run "$b" "$op" "$tmp/$op.b$i"
		else
			run "$b" "$op" "$tmp/$op.b$i"
			run "$a" "$op" "$tmp/$op.a$i"
		fi
	done
done

python3 - "$tmp" "$pairs" "$a" "$b" "$prov" "$mem" <<'EOF'
import os, statistics, sys
tmp, pairs, a, b, prov, mem = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]
print(f"A = {a}\nB = {b}\n{prov}, --mem/--peer-mem {mem}, {pairs} ABBA pairs")
print(f"{'op':6} {'size':>8} {'A median':>10} {'B median':>10} "
      f"{'B/A median':>11} {'B/A range':>15}")
for op in ("write", "read"):
    def load(side, i):
        with open(os.path.join(tmp, f"{op}.{side}{i}")) as f:
            return {int(s): float(v) for s, v in (l.split() for l in f)}
    A = [load("a", i) for i in range(pairs)]
    B = [load("b", i) for i in range(pairs)]
    for size in sorted(A[0]):
        av = [x[size] for x in A]
        bv = [x[size] for x in B]
        r = [y / x for x, y in zip(av, bv) if x > 0]
        unit = "Mpps" if size == 8 else "GB/s"
        print(f"{op:6} {size:>8} {statistics.median(av):>7.2f} {unit} "
              f"{statistics.median(bv):>5.2f} {unit} "
              f"{statistics.median(r):>11.3f} "
              f"{min(r):>7.3f}-{max(r):.3f}")
EOF
