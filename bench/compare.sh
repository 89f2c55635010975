#!/bin/bash
# SPDX-License-Identifier: MIT
# tern against a raw libfabric loop doing the same work, in one run.
#
# usage: bench/compare.sh [BUILD-DIR] [ROUNDS] [PROVIDERS...]
#        (defaults: build 3 shm tcp)
#
# For each provider it alternates, ROUNDS times: `tern bench --op write`
# and `raw --op write` at 4 KiB .. 16 MiB (window 64), both at 8 B for the
# message rate, and `tern ping` against `raw --op pingpong` at 8 B. It
# prints min / median / max of each and the ratio of the medians tern/raw.
# Absolute numbers on a shared machine are noise; the ratio is the point.
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
shift $(( $# > 2 ? 2 : $# ))
providers=("$@")
[ ${#providers[@]} -gt 0 ] || providers=(shm tcp)
tern=$build/tern
raw=$build/raw
for b in "$tern" "$raw"; do
	[ -x "$b" ] || { echo "compare: $b not built (cmake --build $build)" >&2; exit 1; }
done
# TERN_BENCH_CPUS="A,B" puts the initiator on CPU A and the peer on CPU B,
# the same for both tools (tern bench and raw honour it; the ping pair is
# started under taskset). Off by default: on this 2-core machine it did
# not narrow the spread (docs/performance.md).
# taskset prefixes for the two sides (empty when not pinned); as arrays,
# so a backgrounded peer is the tern process itself and takes Ctrl-C.
pin_init=() pin_peer=()
if [ -n "${TERN_BENCH_CPUS:-}" ]; then
	pin_init=(taskset -c "${TERN_BENCH_CPUS%,*}")
	pin_peer=(taskset -c "${TERN_BENCH_CPUS#*,}")
fi
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT

# iterations per size, the same for both sides
iters_for() {
	case $1 in
	8) echo 200000 ;;
	4096) echo 50000 ;;
	65536) echo 20000 ;;
	1048576) echo 2000 ;;
	*) echo 200 ;;
	esac
}

# stats FILE -> "min median max" of the numbers in FILE
stats() {
	sort -g "$1" | awk '{ v[NR] = $1 } END {
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.3f %.3f %.3f", v[1], m, v[NR] }'
}

field() { # field NAME LINE -> value of NAME=value
	sed -n "s/.*[[:space:]]$1=\([^[:space:]]*\).*/\1/p" <<<"$2"
}

echo "tern $("$tern" version | cut -d' ' -f2-)"
echo "host $(hostname), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%M:%SZ), $rounds rounds, CPUs initiator,peer: ${TERN_BENCH_CPUS:-not pinned}"
for prov in "${providers[@]}"; do
	node=()
	[ "$prov" = tcp ] && node=(--node 127.0.0.1)
	sizes=(4096 65536 1048576 16777216)
	for r in $(seq 1 "$rounds"); do
		for s in 8 "${sizes[@]}"; do
			it=$(iters_for "$s")
			"$tern" bench --provider "$prov" "${node[@]}" --op write \
				--sizes "$s" --window 64 --iters "$it" \
				--warmup $((it / 10)) --csv "$tmp/t.csv" >/dev/null
			line=$(tail -n 1 "$tmp/t.csv")
			echo "$line" | cut -d, -f5 >>"$tmp/$prov.tern.gbps.$s"
			echo "$line" | cut -d, -f8 >>"$tmp/$prov.tern.mpps.$s"
			line=$("$raw" --provider "$prov" "${node[@]}" --op write \
				--sizes "$s" --window 64 --iters "$it" \
				--warmup $((it / 10)) | grep "size=$s ")
			field gbps "$line" >>"$tmp/$prov.raw.gbps.$s"
			field mpps "$line" >>"$tmp/$prov.raw.mpps.$s"
		done
		# latency: ping-pong at 8 bytes, send/recv
		"${pin_peer[@]}" "$tern" ping serve --provider "$prov" "${node[@]}" \
			--card-file "$tmp/card" >/dev/null 2>&1 &
		spid=$!
		for _ in $(seq 100); do [ -s "$tmp/card" ] && break; sleep 0.05; done
		"${pin_init[@]}" "$tern" ping --card-file "$tmp/card" --provider "$prov" "${node[@]}" \
			--size 8 --iters 20000 --warmup 2000 |
			awk '$1 == 8 { print $3 }' >>"$tmp/$prov.tern.p50"
		kill -INT $spid; wait $spid || true
		rm -f "$tmp/card"
		line=$("$raw" --provider "$prov" "${node[@]}" --op pingpong \
			--sizes 8 --iters 20000 --warmup 2000 | grep "size=8 ")
		field p50_us "$line" >>"$tmp/$prov.raw.p50"
	done
	echo
	echo "== $prov: write bandwidth, Gbit/s (10^9), window 64 =="
	printf "%10s  %-26s  %-26s  %s\n" size "tern min/median/max" "raw min/median/max" "tern/raw"
	for s in "${sizes[@]}"; do
		read -r tmin tmed tmax <<<"$(stats "$tmp/$prov.tern.gbps.$s")"
		read -r rmin rmed rmax <<<"$(stats "$tmp/$prov.raw.gbps.$s")"
		printf "%10s  %8s %8s %8s  %8s %8s %8s  %.3f\n" "$s" \
			"$tmin" "$tmed" "$tmax" "$rmin" "$rmed" "$rmax" \
			"$(awk -v a="$tmed" -v b="$rmed" 'BEGIN { print a / b }')"
	done
	echo "== $prov: message rate at 8 B, Mpps =="
	read -r tmin tmed tmax <<<"$(stats "$tmp/$prov.tern.mpps.8")"
	read -r rmin rmed rmax <<<"$(stats "$tmp/$prov.raw.mpps.8")"
	printf "%10s  %8s %8s %8s  %8s %8s %8s  %.3f\n" 8 "$tmin" "$tmed" "$tmax" \
		"$rmin" "$rmed" "$rmax" "$(awk -v a="$tmed" -v b="$rmed" 'BEGIN { print a / b }')"
	echo "== $prov: ping-pong p50 at 8 B, half round trip, us =="
	read -r tmin tmed tmax <<<"$(stats "$tmp/$prov.tern.p50")"
	read -r rmin rmed rmax <<<"$(stats "$tmp/$prov.raw.p50")"
	printf "%10s  %8s %8s %8s  %8s %8s %8s  %+.3f us\n" 8 "$tmin" "$tmed" "$tmax" \
		"$rmin" "$rmed" "$rmax" "$(awk -v a="$tmed" -v b="$rmed" 'BEGIN { print a - b }')"
done
if [ -x "$build/copy_limit" ]; then
	echo
	echo "== copy limit on this host (bench/copy_limit) =="
	"$build/copy_limit"
fi
