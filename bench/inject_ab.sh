#!/bin/bash
# SPDX-License-Identifier: MIT
# Small writes with and without injection ($TERN_INJECT), in one run.
#
# usage: bench/inject_ab.sh [BUILD-DIR] [PAIRS] [PROVIDER] [OP] [A] [B]
#        (defaults: build 6 shm write 0 1)
#
# Runs `tern bench --op OP` at 8 B, 64 B, 1 KiB and 4 KiB with
# TERN_INJECT=A and =B in ABBA order, PAIRS times (so 2*PAIRS runs of
# each), and prints per size the median and the range of the per-pair
# ratio B/A of the message rate (Mpps). On a shared machine absolute rates
# move by several times from one run to the next; a pair's two runs meet
# about the same load, so their ratio is the figure (docs/performance.md,
# "Injection and small writes").
set -euo pipefail
build=${1:-build}
pairs=${2:-6}
prov=${3:-shm}
op=${4:-write}
a=${5:-0}
b=${6:-1}
tern=$build/tern
[ -x "$tern" ] || { echo "inject_ab: $tern not built" >&2; exit 1; }
# Injection is the provider's: two tern processes on one host otherwise
# take the same-host path (docs/local.md), which injects nothing.
export TERN_LOCAL=${TERN_LOCAL:-0}
node=()
[ "$prov" = tcp ] && node=(--node 127.0.0.1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sizes=8,64,1K,4K

run() { # MODE OUT
	TERN_INJECT=$1 "$tern" bench -p "$prov" "${node[@]}" --op "$op" \
		-s "$sizes" -n 20000 -j 2>/dev/null |
		python3 -c 'import json,sys
for r in json.load(sys.stdin)["results"]: print(r["size"], r["mpps"])' >"$2"
}

for ((i = 0; i < pairs; i++)); do
	# A B B A: two pairs per round, each in the other order.
	run "$a" "$tmp/a$((2 * i))"
	run "$b" "$tmp/b$((2 * i))"
	run "$b" "$tmp/b$((2 * i + 1))"
	run "$a" "$tmp/a$((2 * i + 1))"
done
python3 - "$tmp" $((2 * pairs)) "$prov" "$op" "$a" "$b" <<'EOF'
import statistics, sys
tmp, n, prov, op, a, b = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]
def load(f):
    return {int(s): float(m) for s, m in (l.split() for l in open(f))}
ra = [load(f"{tmp}/a{i}") for i in range(n)]
rb = [load(f"{tmp}/b{i}") for i in range(n)]
print(f"{prov} {op}: TERN_INJECT={b} / TERN_INJECT={a}, message rate, "
      f"{n} pairs")
print(f"{'size':>6} {'median':>7} {'min':>6} {'max':>6} {'B>A':>5}")
for s in sorted(ra[0]):
    r = sorted(y[s] / x[s] for x, y in zip(ra, rb))
    up = sum(1 for v in r if v > 1)
    print(f"{s:>6} {statistics.median(r):7.2f} {r[0]:6.2f} {r[-1]:6.2f} "
          f"{up:>2}/{n}")
EOF
