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
# Both write tools trade a message each way over the fabric before they
# write (tern bench's control exchange, raw's handshake): on tcp that
# alone moves later writes by 6-8% (docs/performance.md).
# Absolute numbers on a shared machine are noise; the ratio is the point.
# The ping pair is pinned alike for both tools (TERN_PING_CPUS, below),
# and each round runs it TERN_PING_PAIRS times (default 3), each pair in
# the round's ABBA order: a loopback round trip here sits in one of two
# modes for a whole run (about 6.0 or 8.4 us on the machine this was
# written on, the same for both tools), so one pair whose two runs fell
# in different modes moves a per-round difference by 2 us; more pairs
# narrow the median of the differences, the figure the target is read
# from. The write runs repeat the same way, TERN_WRITE_PAIRS times per
# size and round (default 3): a run's bandwidth here sits in one of two
# states too (shm at 4 KiB: about 13 or 17 Gbit/s, for raw alone, even
# from one repetition to the next inside one process), so the per-pair
# ratio tern/raw spreads by +-25% and 30 pairs leave a +-5% interval.
# So each provider ends with bench/inproc (when built): one process
# alternates blocks of tern_write()/tern_progress() with fi_writemsg()/
# fi_cq_read() on the same tern endpoint, buffers and target, in ABBA
# pairs a few milliseconds long, and the same for tern against tern (the
# control: what the method can resolve). Both ways meet the same machine
# state, so this is tern's own data path cost with the noise cancelled:
# TERN_INPROC_PAIRS pairs per size (default 40).
# TERN_TARGET_PAUSE=N (default 0) makes both tools' write targets spin N
# pause instructions after each poll that found nothing (`raw
# --target-pause`, tern bench's $TERN_BENCH_TARGET_PAUSE). On tcp the
# target's poll rate alone moves write bandwidth by tens of percent (raw
# against itself at 1 MiB: 0.93x with 25, 1.43x with 400), and the two
# tools' targets poll at different rates: a paced run sets them alike,
# so that what is left is the initiators' data paths
# (docs/performance.md).
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
shift $(( $# > 2 ? 2 : $# ))
providers=("$@")
[ ${#providers[@]} -gt 0 ] || providers=(shm tcp)
tern=$build/tern
raw=$build/raw
inproc=$build/inproc
# tern's provider path against raw's: two tern processes on one host
# otherwise take the same-host path (docs/local.md), which raw has not.
# TERN_LOCAL=1 in the environment compares that path instead.
export TERN_LOCAL=${TERN_LOCAL:-0}
for b in "$tern" "$raw"; do
	[ -x "$b" ] || { echo "compare: $b not built (cmake --build $build)" >&2; exit 1; }
done
# TERN_BENCH_CPUS="A,B" puts the initiator on CPU A and the peer on CPU B,
# the same for both tools (tern bench and raw honour it). Off by default
# for the bandwidth and rate runs: on this 2-core machine it did not
# narrow the spread (docs/performance.md).
# The ping pair runs pinned, both tools alike, unless TERN_PING_CPUS=none.
# Unpinned, a loopback pair sits where its start puts it, and the tools
# start differently: raw forks its peer, which the kernel places on
# another CPU, while tern's server and client are started apart, and
# libfabric as Debian builds it moves every new process to CPU 0 at load
# (libinfinipath's clock calibration). On the 2-core VM this was
# measured on, that, not either tool, decided the ping-pong medians
# (docs/performance.md). Default: the initiator on the second CPU this
# script may use, the peer on the first; TERN_BENCH_CPUS, when set, wins.
first_two_cpus() { # -> "B,A" for the first two allowed CPUs A < B
	local list part a b c parts=() out=()
	list=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
	IFS=, read -ra parts <<<"$list"
	for part in "${parts[@]}"; do
		a=${part%-*} b=${part#*-}
		for ((c = a; c <= b && ${#out[@]} < 2; c++)); do out+=("$c"); done
	done
	[ ${#out[@]} -eq 2 ] && echo "${out[1]},${out[0]}"
}
ping_cpus=${TERN_BENCH_CPUS:-${TERN_PING_CPUS:-$(first_two_cpus || true)}}
[ "$ping_cpus" = none ] && ping_cpus=
ping_init=() ping_peer=()
if [ -n "$ping_cpus" ]; then
	ping_init=(taskset -c "${ping_cpus%,*}")
	ping_peer=(taskset -c "${ping_cpus#*,}")
fi
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT

# iterations per size, the same for both sides; TERN_COMPARE_QUICK=1
# divides them by 100 (at least 20) to check that the script runs, as
# its test does: no figure from a quick run means anything
iters_for() {
	local n
	case $1 in
	8) n=200000 ;;
	4096) n=50000 ;;
	65536) n=20000 ;;
	1048576) n=2000 ;;
	*) n=200 ;;
	esac
	[ -n "${TERN_COMPARE_QUICK:-}" ] && n=$((n / 100 > 20 ? n / 100 : 20))
	echo "$n"
}

# round trips of each ping-pong run, and ping-pong pairs per round
ping_iters=20000
# count VAR DEFAULT -> $VAR (or DEFAULT), refused unless a positive integer
count() {
	local v=${!1:-$2}
	[[ $v =~ ^[1-9][0-9]*$ ]] ||
		{ echo "compare: $1 must be a positive integer" >&2; return 1; }
	echo "$v"
}
target_pause=${TERN_TARGET_PAUSE:-0}
if ! [[ $target_pause =~ ^[0-9]{1,7}$ ]] || ((10#$target_pause > 1000000)); then
	echo "compare: TERN_TARGET_PAUSE must be an integer from 0 to 1000000" >&2
	exit 1
fi
target_pause=$((10#$target_pause))
ping_pairs=$(count TERN_PING_PAIRS 3)
write_pairs=$(count TERN_WRITE_PAIRS 3)
inproc_pairs=$(count TERN_INPROC_PAIRS 40)
inproc_opts=()
if [ -n "${TERN_COMPARE_QUICK:-}" ]; then
	ping_iters=200
	ping_pairs=1
	write_pairs=1
	inproc_pairs=3
	inproc_opts=(--block-bytes 256K)
fi

# stats FILE -> "min median max" of the numbers in FILE
stats() {
	sort -g "$1" | awk '{ v[NR] = $1 } END {
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.3f %.3f %.3f", v[1], m, v[NR] }'
}

field() { # field NAME LINE -> value of NAME=value
	sed -n "s/.*[[:space:]]$1=\([^[:space:]]*\).*/\1/p" <<<"$2"
}

echo "tern $("$tern" version | cut -d' ' -f2-), TERN_LOCAL=$TERN_LOCAL"
echo "host $(hostname), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%M:%SZ), $rounds rounds, CPUs initiator,peer: ${TERN_BENCH_CPUS:-not pinned}; write pairs: $write_pairs per size and round; ping pair: ${ping_cpus:-not pinned}, $ping_pairs per round; write targets' pause: $target_pause"

tern_write() { # tern_write PROV SIZE -> appends to $tmp/PROV.tern.{gbps,mpps}.SIZE
	local it line
	it=$(iters_for "$2")
	TERN_BENCH_TARGET_PAUSE=$target_pause "$tern" bench --provider "$1" "${node[@]}" --op write \
		--sizes "$2" --window 64 --iters "$it" \
		--warmup $((it / 10)) --csv "$tmp/t.csv" >/dev/null
	line=$(tail -n 1 "$tmp/t.csv")
	echo "$line" | cut -d, -f5 >>"$tmp/$1.tern.gbps.$2"
	echo "$line" | cut -d, -f8 >>"$tmp/$1.tern.mpps.$2"
}

raw_write() {
	local it line
	it=$(iters_for "$2")
	line=$("$raw" --provider "$1" "${node[@]}" --op write \
		--sizes "$2" --window 64 --iters "$it" --target-pause "$target_pause" \
		--warmup $((it / 10)) | grep "size=$2 ")
	field gbps "$line" >>"$tmp/$1.raw.gbps.$2"
	field mpps "$line" >>"$tmp/$1.raw.mpps.$2"
}

tern_ping() { # latency: ping-pong at 8 bytes, send/recv
	"${ping_peer[@]}" "$tern" ping --listen --provider "$1" "${node[@]}" \
		--card-file "$tmp/card" >/dev/null 2>&1 &
	local spid=$!
	# Up to 20 s: a loaded machine (a test suite beside it, a sanitizer
	# build) starts a server slowly.
	for _ in $(seq 400); do [ -s "$tmp/card" ] && break; sleep 0.05; done
	"${ping_init[@]}" "$tern" ping --card-file "$tmp/card" --provider "$1" "${node[@]}" \
		--sizes 8 --iters "$ping_iters" --warmup $((ping_iters / 10)) |
		awk '$1 == 8 { print $3 }' >>"$tmp/$1.tern.p50"
	kill -INT $spid; wait $spid || true
	rm -f "$tmp/card"
}

raw_ping() {
	local line
	line=$(TERN_BENCH_CPUS=$ping_cpus "$raw" --provider "$1" "${node[@]}" --op pingpong --tagged \
		--sizes 8 --iters "$ping_iters" --warmup $((ping_iters / 10)) | grep "size=8 ")
	field p50_us "$line" >>"$tmp/$1.raw.p50"
}

# pair A B: run A then B in odd rounds, B then A in even ones (ABBA), so
# a drift of the machine during a round weighs on both alike.
pair() {
	if (($1 % 2)); then "$2" "${@:4}"; "$3" "${@:4}"; else "$3" "${@:4}"; "$2" "${@:4}"; fi
}

# paired FILE-TERN FILE-RAW ratio|diff -> "median [lo, hi]" of the
# per-pair ratios tern/raw (or differences tern - raw): each pair's two
# runs sat side by side in time, so this is what the noise moves least.
# [lo, hi] is a distribution-free 95% confidence interval of that median
# (order statistics k and n+1-k, k = floor((n - 1.96 sqrt(n)) / 2); with
# fewer than 6 rounds it is just min and max).
paired() {
	paste -d' ' "$1" "$2" | awk -v m="$3" '{ print (m == "ratio" ? $1 / $2 : $1 - $2) }' |
		sort -g | awk '{ v[NR] = $1 } END {
		n = NR; med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
		k = int((n - 1.96 * sqrt(n)) / 2); if (k < 1) k = 1
		printf "%.3f [%.3f, %.3f]", med, v[k], v[n + 1 - k] }'
}

for prov in "${providers[@]}"; do
	node=()
	[ "$prov" = tcp ] && node=(--node 127.0.0.1)
	sizes=(4096 65536 1048576 16777216)
	for r in $(seq 1 "$rounds"); do
		for s in 8 "${sizes[@]}"; do
			for _ in $(seq "$write_pairs"); do
				pair "$r" tern_write raw_write "$prov" "$s"
			done
		done
		for _ in $(seq "$ping_pairs"); do
			pair "$r" tern_ping raw_ping "$prov"
		done
	done
	echo
	echo "== $prov: write bandwidth, Gbit/s (10^9), window 64 =="
	printf "%10s  %-26s  %-26s  %-8s  %s\n" size "tern min/median/max" "raw min/median/max" \
		"tern/raw" "per-pair tern/raw: median [95% CI]"
	for s in "${sizes[@]}"; do
		read -r tmin tmed tmax <<<"$(stats "$tmp/$prov.tern.gbps.$s")"
		read -r rmin rmed rmax <<<"$(stats "$tmp/$prov.raw.gbps.$s")"
		printf "%10s  %8s %8s %8s  %8s %8s %8s  %-8.3f  %s\n" "$s" \
			"$tmin" "$tmed" "$tmax" "$rmin" "$rmed" "$rmax" \
			"$(awk -v a="$tmed" -v b="$rmed" 'BEGIN { print a / b }')" \
			"$(paired "$tmp/$prov.tern.gbps.$s" "$tmp/$prov.raw.gbps.$s" ratio)"
	done
	echo "== $prov: message rate at 8 B, Mpps =="
	read -r tmin tmed tmax <<<"$(stats "$tmp/$prov.tern.mpps.8")"
	read -r rmin rmed rmax <<<"$(stats "$tmp/$prov.raw.mpps.8")"
	printf "%10s  %8s %8s %8s  %8s %8s %8s  %-8.3f  %s\n" 8 "$tmin" "$tmed" "$tmax" \
		"$rmin" "$rmed" "$rmax" "$(awk -v a="$tmed" -v b="$rmed" 'BEGIN { print a / b }')" \
		"$(paired "$tmp/$prov.tern.mpps.8" "$tmp/$prov.raw.mpps.8" ratio)"
	echo "== $prov: ping-pong p50 at 8 B, half round trip, us (last: per-pair tern - raw, median [95% CI]) =="
	read -r tmin tmed tmax <<<"$(stats "$tmp/$prov.tern.p50")"
	read -r rmin rmed rmax <<<"$(stats "$tmp/$prov.raw.p50")"
	printf "%10s  %8s %8s %8s  %8s %8s %8s  %+-8.3f  %s\n" 8 "$tmin" "$tmed" "$tmax" \
		"$rmin" "$rmed" "$rmax" "$(awk -v a="$tmed" -v b="$rmed" 'BEGIN { print a - b }')" \
		"$(paired "$tmp/$prov.tern.p50" "$tmp/$prov.raw.p50" diff)"
	echo "   best p50 of the rounds: tern $tmin us, raw $rmin us ($(awk -v a="$tmin" -v b="$rmin" 'BEGIN { printf "%+.3f", a - b }') us)"
	[ -x "$inproc" ] || continue
	echo "== $prov: in one process (bench/inproc), $inproc_pairs ABBA pairs of blocks per size, window 64 =="
	printf "%10s  %10s  %10s  %-32s  %s\n" size "tern Gb/s" "raw Gb/s" \
		"tern/raw: median [95% CI]" "tern/tern control"
	"$inproc" --provider "$prov" "${node[@]}" --sizes "8,$(IFS=,; echo "${sizes[*]}")" \
		--pairs "$inproc_pairs" "${inproc_opts[@]}" --control --idle >"$tmp/inproc.out"
	while read -r line; do
		printf "%10s  %10s  %10s  %-32s  %s\n" "$(field size "$line")" \
			"$(field tern_gbps "$line")" "$(field raw_gbps "$line")" \
			"$(field ratio "$line") [$(field lo "$line"), $(field hi "$line")]" \
			"$(field control "$line") [$(field control_lo "$line"), $(field control_hi "$line")]"
	done < <(grep '^inproc write ' "$tmp/inproc.out")
	# The pass a waiting side spins on, finding nothing: on tcp each one
	# enters the kernel, and what tern adds to it slows its target's reads.
	line=$(grep '^inproc idle ' "$tmp/inproc.out") || true
	[ -z "$line" ] || printf "%10s  %10s  %10s  %s\n" "idle pass" \
		"tern $(field tern_ns "$line") ns" "raw $(field raw_ns "$line") ns" \
		"tern - raw: $(field diff_ns "$line") [$(field lo "$line"), $(field hi "$line")] ns"
done
if [ -x "$build/copy_limit" ]; then
	echo
	echo "== copy limit on this host (bench/copy_limit) =="
	"$build/copy_limit"
fi
