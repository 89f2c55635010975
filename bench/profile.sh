#!/bin/bash
# SPDX-License-Identifier: MIT
# Where the initiator's time goes, tern against raw libfabric: perf samples
# (cpu-clock) of `tern bench --op write` and `raw --op write`, split by
# object as a share of the initiator's own samples.
#
# usage: bench/profile.sh [BUILD-DIR] [PROVIDER] [SIZE] [ITERS]
#        (defaults: build shm 4096 300000)
#
# The share of the initiator's time spent in the tool's own code (tern:
# libtern plus the bench engine; raw: raw itself) is what tern can cost
# at most over raw at that size: the kernel, libfabric and libc work is
# the same calls in both. Unlike wall-clock ratios on a shared machine,
# this share moves little from run to run.
set -euo pipefail
build=${1:-build}
prov=${2:-shm}
size=${3:-4096}
iters=${4:-300000}
command -v perf >/dev/null ||
	{ echo "profile: perf not installed (apt-get install linux-perf)" >&2; exit 1; }
for b in "$build/tern" "$build/raw"; do
	[ -x "$b" ] || { echo "profile: $b not built (cmake --build $build)" >&2; exit 1; }
done
node=()
[ "$prov" = tcp ] && node=(--node 127.0.0.1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(--provider "$prov" "${node[@]}" --op write --sizes "$size" --window 64
	--iters "$iters" --warmup $((iters / 10)))

# shares DATA -> "own libfabric libc kernel other" in % of the initiator's
# samples. The initiator is the parent: the lower pid of the two (the peer
# is forked from it).
shares() {
	perf report -i "$1" --sort pid,dso --stdio 2>/dev/null |
		awk '/^ *[0-9.]+%/ {
			p = $1; sub(/%/, "", p); split($2, id, ":"); d = $3
			pid = id[1] + 0
			if (first == 0 || pid < first) first = pid
			n++; P[n] = pid; V[n] = p; D[n] = d
		} END {
			for (i = 1; i <= n; i++) {
				if (P[i] != first) continue
				d = D[i]; p = V[i]
				if (d ~ /libtern|^tern$|^raw$/) own += p
				else if (d ~ /libfabric/) lf += p
				else if (d ~ /libc\.so|vdso/) lc += p
				else if (d ~ /kernel/) k += p
				else o += p
				tot += p
			}
			if (tot == 0) tot = 1
			printf "%.2f %.2f %.2f %.2f %.2f", own * 100 / tot,
				lf * 100 / tot, lc * 100 / tot, k * 100 / tot, o * 100 / tot
		}'
}

echo "initiator time by object, % of its samples (perf record -e cpu-clock)"
echo "provider $prov, write, size $size B, window 64, $iters ops"
printf "%-6s %8s %10s %8s %8s %8s  %s\n" tool own libfabric libc kernel other rate
for tool in tern raw; do
	if [ "$tool" = tern ]; then
		perf record -q -e cpu-clock -o "$tmp/$tool.data" -- \
			"$build/tern" bench "${args[@]}" --csv "$tmp/t.csv" >/dev/null 2>&1
		rate="$(printf "%.3f" "$(tail -n 1 "$tmp/t.csv" | cut -d, -f5)") Gbit/s"
	else
		rate=$(perf record -q -e cpu-clock -o "$tmp/$tool.data" -- \
			"$build/raw" "${args[@]}" 2>/dev/null | sed -n 's/.* gbps=\([^ ]*\).*/\1 Gbit\/s/p')
	fi
	read -r own lf lc k o <<<"$(shares "$tmp/$tool.data")"
	printf "%-6s %7s%% %9s%% %7s%% %7s%% %7s%%  %s (under perf)\n" \
		"$tool" "$own" "$lf" "$lc" "$k" "$o" "$rate"
done
