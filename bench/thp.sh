#!/bin/bash
# SPDX-License-Identifier: MIT
# Transparent huge pages against plain pages, in one run.
#
# usage: bench/thp.sh [BUILD-DIR] [ROUNDS] [PROVIDER]
#        (defaults: build 10 shm)
#
# Each round runs, per operation and size, one pair: the buffers as
# tern_mem_alloc() now places them (2 MiB-aligned, rounded up to whole
# 2 MiB, MADV_HUGEPAGE in THP "madvise" mode) and as before
# ($TERN_THP=0: page-aligned, no advice), in ABBA order (odd rounds new
# first, even rounds old first), so a drift of the machine weighs on both.
# Operations: `tern bench --op write` and `--op read`, and `raw --op
# write` (which places its buffer the same way and honours $TERN_THP
# alike), at 1 MiB and 16 MiB, window 64, compare.sh's iteration counts.
# It prints, per operation and size, the median of the per-pair ratios
# new/old with a distribution-free 95% confidence interval, and their min
# and max. Absolute numbers on a shared machine are noise; the ratio is
# the point. TERN_THP_SIZES overrides the sizes (bytes, space-separated).
set -euo pipefail
build=${1:-build}
rounds=${2:-10}
prov=${3:-shm}
tern=$build/tern
raw=$build/raw
for b in "$tern" "$raw"; do
	[ -x "$b" ] || { echo "thp: $b not built (cmake --build $build)" >&2; exit 1; }
done
read -ra sizes <<<"${TERN_THP_SIZES:-1048576 16777216}"
node=()
[ "$prov" = tcp ] && node=(--node 127.0.0.1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

iters_for() { # as bench/compare.sh
	case $1 in
	8) echo 200000 ;;
	4096) echo 50000 ;;
	65536) echo 20000 ;;
	1048576) echo 2000 ;;
	*) echo 200 ;;
	esac
}

# run THP OP SIZE: one run, its Gbit/s appended to $tmp/OP.SIZE.THP
run() {
	local it line
	it=$(iters_for "$3")
	if [ "$2" = raw ]; then
		line=$(TERN_THP=$1 "$raw" --provider "$prov" "${node[@]}" --op write \
			--sizes "$3" --window 64 --iters "$it" \
			--warmup $((it / 10)) | grep "size=$3 ")
		sed -n 's/.*[[:space:]]gbps=\([^[:space:]]*\).*/\1/p' <<<"$line" \
			>>"$tmp/$2.$3.$1"
	else
		TERN_THP=$1 "$tern" bench --provider "$prov" "${node[@]}" --op "$2" \
			--sizes "$3" --window 64 --iters "$it" \
			--warmup $((it / 10)) --csv "$tmp/t.csv" >/dev/null
		tail -n 1 "$tmp/t.csv" | cut -d, -f5 >>"$tmp/$2.$3.$1"
	fi
}

# per-pair ratios new/old -> "median [lo, hi] min max" (compare.sh's
# order statistics: k = floor((n - 1.96 sqrt(n)) / 2), at least 1)
paired() {
	paste -d' ' "$1" "$2" | awk '{ print $1 / $2 }' | sort -g | awk '
		{ v[NR] = $1 } END {
		n = NR; med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
		k = int((n - 1.96 * sqrt(n)) / 2); if (k < 1) k = 1
		printf "%.3f [%.3f, %.3f]  %.3f %.3f", med, v[k], v[n + 1 - k], v[1], v[n] }'
}

echo "tern $("$tern" version | cut -d' ' -f2-)"
echo "host $(hostname), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%M:%SZ), $rounds rounds, $prov, THP $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo absent)"
for r in $(seq 1 "$rounds"); do
	for op in write read raw; do
		for s in "${sizes[@]}"; do
			if ((r % 2)); then run 1 "$op" "$s"; run 0 "$op" "$s"
			else run 0 "$op" "$s"; run 1 "$op" "$s"; fi
		done
	done
done
# stats FILE -> "min median max" (compare.sh's)
stats() {
	sort -g "$1" | awk '{ v[NR] = $1 } END {
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.1f %.1f %.1f", v[1], m, v[NR] }'
}

echo "Gbit/s (10^9) min/median/max; raw is bench/raw --op write"
printf "%-6s %9s  %-18s  %-18s  %-28s  %s\n" op size "new (huge pages)" \
	"old (TERN_THP=0)" "new/old per pair: median [95% CI]" "min max"
for op in write read raw; do
	for s in "${sizes[@]}"; do
		printf "%-6s %9s  %-18s  %-18s  %s\n" "$op" "$s" \
			"$(stats "$tmp/$op.$s.1")" "$(stats "$tmp/$op.$s.0")" \
			"$(paired "$tmp/$op.$s.1" "$tmp/$op.$s.0")"
	done
done
