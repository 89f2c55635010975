#!/bin/bash
# SPDX-License-Identifier: MIT
# tern against UCX on one host, two processes, in one run.
#
# usage: bench/compare_ucx.sh [BUILD-DIR] [ROUNDS]   (defaults: build 5)
#
# The UCX side is ucx_perftest from Debian's ucx-utils package
# (apt-get install ucx-utils; UCX 1.13 on Debian 12); it is not a
# dependency of tern's build or CI. Each round alternates, in ABBA order
# (UCX first in odd rounds, last in even ones; with several tern variants
# A B C D E, then E D C B A), per size 8 B, 4 KiB, 64 KiB, 1 MiB and
# 16 MiB:
#   ucp_put_bw            against  tern bench --op write --provider shm
#   ucp_get               against  tern bench --op read  --provider shm
# both with a window of 64 operations in flight (ucx_perftest -O 64,
# tern bench --window 64; ucx_perftest's own default is 32 for
# ucp_put_bw and 1 for ucp_get, UCX 1.13's only get test, which makes
# it a latency test) and the same iteration counts (-n / --iters: 200000
# at 8 B down to 200 at 16 MiB, a tenth more as warm-up, -w /
# --warmup); the 8 B write runs also give the message rate. tern runs
# once per variant in each group: by default in both models, explicit
# (a request per operation, tern_write()/tern_read()) and implicit
# (tern bench --implicit: tern_write_nbi()/tern_read_nbi(), one
# tern_quiet() per window of 64), each into shared memory (--mem and
# --peer-mem shared: TERN_MEM_SHARED, which the same-host peer maps, as
# UCX maps its segments) and into plain host memory (--mem and
# --peer-mem host: reached with cross-memory attach); that is four tern
# runs beside each UCX run. Then
# ucp_put_lat against tern ping at 8 B (p50 of the half round trip,
# 20000 round trips; the model and memory do not apply), and
# bench/copy_limit once per round: one thread's memcpy and
# process_vm_writev at 16 MiB, the best a copy does here.
# ucx_perftest runs as two processes, the server with no host argument
# on the peer CPU, the client with "localhost" on the initiator CPU,
# trading their set-up over TCP (-p PORT); its summary is read from -f -v
# (the final figures as CSV, columns named by its header). It prints per size each side's min / median / max,
# the ratio of the medians tern/UCX and the median of the per-pair ratios
# with an interval (a distribution-free 95% interval of that median from
# order statistics, as bench/compare.sh prints; with fewer than 6 pairs
# it is simply their min and max), for each tern variant; then the
# medians of every variant side by side with their ratios to UCX, and
# per memory the implicit model against the explicit one (per-pair
# ratios); then each goal as MET or NOT MET, per variant: write and read
# bandwidth >= 1.0x UCX at every size, the 8 B message rate >= 1.0x UCX,
# 1 MiB writes and reads >= 1.0x UCX, 16 MiB writes and reads >= 90% of
# the memcpy limit, for an implicit variant its 8 B message rate >= 10x
# the explicit model's in the same memory, and per TERN_LOCAL value ping
# p50 within 0.05 us of ucp_put_lat. A run that gives no figure
# (a tool failed, or ucx_perftest's summary did not parse) is shown with
# what it printed and counted as missing, never guessed; the script then
# prints what it has and exits 1.
#
# Units: bandwidth in GB/s = 10^9 bytes/s for every tool. ucx_perftest
# prints "MB/s" meaning MiB/s (2^20 bytes/s: its message rate times the
# size equals its MB/s times 1048576), converted here, and checked
# against the message rate on every run; tern bench's GB/s is 10^9
# already; copy_limit prints Gbit/s (10^9 bits/s), divided by 8. Message
# rates in Mpps (10^6 operations/s), latencies in microseconds (both
# tools report half a round trip).
#
# UCX runs with UCX_TLS=posix,cma,self: posix is UCX's shared-memory
# transport (the "mm" family over POSIX shm segments; sysv is the same
# over SysV segments, and UCX 1.13 accepts both names), cma is
# process_vm_readv/writev for memory outside such segments, self is the
# loopback. ucx_perftest allocates its buffers through ucp_mem_map, in
# posix segments the peer maps, so UCX picks the rma(posix/memory) lane
# (UCX_LOG_LEVEL=info shows it): a put or get is a load/store straight
# into the peer's memory, without the peer. UCX_TLS=cma,self alone does
# not connect ("Destination is unreachable"). The data layout and memory
# type are ucx_perftest's defaults (contig, host); -D short/bcopy/zcopy
# is for UCT tests only.
#
# tern runs with TERN_LOCAL set for each run: 1 (the default) and, when
# asked, 0 as well, so that one run shows the same-host local path
# against libfabric shm. A tern without the local path ignores
# TERN_LOCAL and runs over libfabric shm either way (the header says
# whether the build mentions TERN_LOCAL at all).
#
# Environment:
#   TERN_UCX_LOCAL=1|0|1,0  the TERN_LOCAL values tern runs with (default
#                    1); each is a variant of its own, with each memory
#                    and model below
#   TERN_UCX_MEM=shared,host  tern bench's --mem and --peer-mem, one
#                    variant each (default both: shared, memory the
#                    same-host peer maps, as UCX's posix transport maps
#                    its segments; host, plain memory, reached with
#                    cross-memory attach)
#   TERN_UCX_MODEL=explicit,implicit  tern bench's models, one variant
#                    each (default both; implicit is --implicit)
#   TERN_BENCH_CPUS=A,B  initiator (UCX client, tern bench / ping client)
#                    on CPU A, peer (UCX server, tern's peer) on CPU B;
#                    default: the second and first CPU this script may
#                    use (taskset 1 and 0 on a 2-core machine);
#                    "none" leaves both unpinned
#   TERN_UCX_PAIRS=N     groups per size and round (default 1)
#   TERN_UCX_PING_MODE=write|send  tern ping's mode (default write: write
#                    with immediate, the closest to ucp_put_lat's put
#                    that the peer polls for)
#   TERN_UCX_TLS=LIST    UCX_TLS for the UCX side (default posix,cma,self)
#   TERN_UCX_PORT=N      first TCP port of ucx_perftest's exchange (default
#                    20000 + PID % 10000; each run takes the next of 64)
#   TERN_UCX_TIMEOUT=S   limit of each single run (default 120 s)
#   TERN_COMPARE_QUICK=1 a hundredth of the iterations (at least 20),
#                    to check that the script runs; its figures mean
#                    nothing
# Absolute figures on a shared machine are noise; the ratios are the point.
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
tern=$build/tern
copy_limit=$build/copy_limit
t_start=$(date +%s)

die() { echo "compare_ucx: $*" >&2; exit 1; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer"
command -v ucx_perftest >/dev/null ||
	die "ucx_perftest not found: install Debian's ucx-utils (apt-get install ucx-utils)"
for b in "$tern" "$copy_limit"; do
	[ -x "$b" ] || die "$b not built (cmake --build $build)"
done
command -v taskset >/dev/null || die "taskset not found (util-linux)"

# count VAR DEFAULT -> $VAR (or DEFAULT), refused unless a positive integer
count() {
	local v=${!1:-$2}
	[[ $v =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive integer"
	echo "$v"
}
pairs=$(count TERN_UCX_PAIRS 1)
limit_s=$(count TERN_UCX_TIMEOUT 120)
port_base=$(count TERN_UCX_PORT $((20000 + $$ % 10000)))
((port_base + 64 < 65536)) || die "TERN_UCX_PORT must leave 64 ports below 65536"
ucx_tls=${TERN_UCX_TLS:-posix,cma,self}
# list ARRAY NAME DEFAULT PATTERN: the comma-separated values of $NAME
# (or DEFAULT) into ARRAY, refused unless each matches PATTERN, once
list() {
	local -n out=$1
	local v=${!2:-$3} x seen=,
	IFS=, read -ra out <<<"$v"
	[ ${#out[@]} -ge 1 ] || die "$2 is empty"
	for x in "${out[@]}"; do
		[[ $x =~ ^($4)$ ]] || die "$2 must list $4, comma-separated"
		[[ $seen == *,$x,* ]] && die "$2 names $x twice"
		seen+=$x,
	done
}
mems=() models=() locals=() # filled by list
# tern's buffers on both sides: shared (TERN_MEM_SHARED, what a same-host
# peer maps: the counterpart of UCX's mapped segments) and/or host
list mems TERN_UCX_MEM shared,host 'shared|host'
list models TERN_UCX_MODEL explicit,implicit 'explicit|implicit'
ping_mode=${TERN_UCX_PING_MODE:-write}
[[ $ping_mode =~ ^(write|send)$ ]] || die "TERN_UCX_PING_MODE must be write or send"
list locals TERN_UCX_LOCAL 1 '0|1'
window=64

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
cpus=${TERN_BENCH_CPUS:-$(first_two_cpus || true)}
[ "$cpus" = none ] && cpus=
pin_init=() pin_peer=()
if [ -n "$cpus" ]; then
	[[ $cpus =~ ^[0-9]+,[0-9]+$ ]] || die "TERN_BENCH_CPUS must be A,B or none"
	pin_init=(taskset -c "${cpus%,*}")
	pin_peer=(taskset -c "${cpus#*,}")
fi

tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT

iters_for() { # the same for both sides, as bench/compare.sh
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
ping_iters=20000
[ -n "${TERN_COMPARE_QUICK:-}" ] && ping_iters=200
sizes=(8 4096 65536 1048576 16777216)

# --- the UCX side -------------------------------------------------------

port_n=0
next_port() { echo $((port_base + port_n % 64)); }

listening() { # listening PORT -> 0 when a socket listens on PORT (IPv4/6)
	awk -v p="$(printf ':%04X' "$1")" \
		'substr($2, length($2) - 4) == p && $4 == "0A" { f = 1 } END { exit !f }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# ucx_parse SIZE < output -> "p50_us GB/s Mpps" from ucx_perftest -f -v:
# its CSV header names the columns, the line after it holds the figures
# (UCX's log lines may come between). Fails when either is missing or a
# figure is not a number; warns when MB/s and the message rate disagree
# about the unit.
ucx_parse() {
	awk -F, -v size="$1" '
	function num(s) { gsub(/^ +| +$/, "", s); return s ~ /^[0-9]+(\.[0-9]+)?$/ ? s : "" }
	/^iterations,/ {
		for (i = 1; i <= NF; i++) col[$i] = i
		for (k in col) if (k ~ /percentile_lat$/) pc = col[k]
		hdr = NF; next
	}
	hdr && NF == hdr && num($1) != "" { n = split($0, v, ",") }
	END {
		if (!n || !pc || !("overall_bw" in col) || !("overall_mr" in col)) exit 1
		p50 = num(v[pc]); mbps = num(v[col["overall_bw"]]); mr = num(v[col["overall_mr"]])
		if (p50 == "" || mbps == "" || mr == "") exit 1
		gbs = mbps * 1048576 / 1e9
		if (mr + 0 > 0 && (mr * size / 1e9 / gbs > 1.02 || mr * size / 1e9 / gbs < 0.98))
			printf "compare_ucx: ucx_perftest: %s MB/s is not %s msg/s x %s B in MiB/s\n",
				mbps, mr, size > "/dev/stderr"
		printf "%s %.6f %.6f\n", p50, gbs, mr / 1e6
	}'
}

# ucx_run TEST SIZE ITERS [ARGS...] -> "p50_us GB/s Mpps", or fails
# having shown what ucx_perftest printed
ucx_run() {
	local test=$1 size=$2 it=$3 port spid rc=0
	shift 3
	port=$(next_port)
	port_n=$((port_n + 1))
	UCX_TLS=$ucx_tls "${pin_peer[@]}" timeout "$limit_s" \
		ucx_perftest -p "$port" >"$tmp/ucx.server" 2>&1 &
	spid=$!
	for _ in $(seq 400); do
		listening "$port" && break
		kill -0 $spid 2>/dev/null || break
		sleep 0.05
	done
	if ! kill -0 $spid 2>/dev/null || ! listening "$port"; then
		kill $spid 2>/dev/null || true
		wait $spid 2>/dev/null || true
		echo "compare_ucx: ucx_perftest server on port $port did not listen:" >&2
		sed 's/^/  | /' "$tmp/ucx.server" >&2
		return 1
	fi
	UCX_TLS=$ucx_tls "${pin_init[@]}" timeout "$limit_s" \
		ucx_perftest localhost -p "$port" -t "$test" -s "$size" \
		-n "$it" -w $((it / 10)) -f -v "$@" >"$tmp/ucx.client" 2>&1 || rc=$?
	wait $spid || rc=$((rc ? rc : $?))
	if [ $rc -ne 0 ] || ! ucx_parse "$size" <"$tmp/ucx.client"; then
		echo "compare_ucx: no result from ucx_perftest -t $test -s $size (rc $rc); its output:" >&2
		sed 's/^/  | /' "$tmp/ucx.client" >&2
		sed 's/^/  | server: /' "$tmp/ucx.server" >&2
		return 1
	fi
}

# --- the tern side ------------------------------------------------------

# tern_csv FILE COLUMN -> that column of the last line of tern bench's CSV
tern_csv() {
	awk -F, -v c="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next }
		{ v = $k } END { if (!k || v !~ /^[0-9.eE+-]+$/) exit 1; print v }' "$1"
}

# tern_bw LOCAL MEM MODEL OP SIZE -> "GB/s Mpps", or fails having said why
tern_bw() {
	local it gbs mpps implicit=()
	it=$(iters_for "$5")
	[ "$3" = implicit ] && implicit=(--implicit)
	rm -f "$tmp/t.csv"
	if ! TERN_LOCAL=$1 TERN_BENCH_CPUS=$cpus timeout "$limit_s" "$tern" bench \
		--provider shm --op "$4" --sizes "$5" --window "$window" --iters "$it" \
		--mem "$2" --peer-mem "$2" "${implicit[@]}" \
		--warmup $((it / 10)) --csv "$tmp/t.csv" >"$tmp/t.out" 2>&1 ||
		! gbs=$(tern_csv "$tmp/t.csv" gBps) || ! mpps=$(tern_csv "$tmp/t.csv" mpps); then
		echo "compare_ucx: no result from tern bench --op $4 --sizes $5 --mem $2 ${implicit[*]} (TERN_LOCAL=$1); its output:" >&2
		sed 's/^/  | /' "$tmp/t.out" >&2
		return 1
	fi
	echo "$gbs $mpps"
}

tern_ping() { # tern_ping LOCAL -> p50 in us, or fails having said why
	local spid p50 rc=0
	rm -f "$tmp/card"
	TERN_LOCAL=$1 "${pin_peer[@]}" timeout "$limit_s" "$tern" ping --listen \
		--provider shm --card-file "$tmp/card" >"$tmp/ping.server" 2>&1 &
	spid=$!
	for _ in $(seq 400); do
		[ -s "$tmp/card" ] && break
		kill -0 $spid 2>/dev/null || break
		sleep 0.05
	done
	TERN_LOCAL=$1 "${pin_init[@]}" timeout "$limit_s" "$tern" ping \
		--card-file "$tmp/card" --provider shm --mode "$ping_mode" --sizes 8 \
		--iters "$ping_iters" --warmup $((ping_iters / 10)) >"$tmp/ping.out" 2>&1 || rc=$?
	kill -INT $spid 2>/dev/null || true
	wait $spid 2>/dev/null || true
	p50=$(awk '$1 == 8 && $3 ~ /^[0-9.]+$/ { print $3 }' "$tmp/ping.out")
	if [ $rc -ne 0 ] || [ -z "$p50" ]; then
		echo "compare_ucx: no result from tern ping (TERN_LOCAL=$1, rc $rc); its output:" >&2
		sed 's/^/  | /' "$tmp/ping.out" "$tmp/ping.server" >&2
		return 1
	fi
	echo "$p50"
}

# --- one run of a side; results go to $tmp/SIDE.KIND, one line per run,
# NA where a run gave nothing, so that pairs stay aligned. A bandwidth
# side is ucx or tern<LOCAL>.<MEM>.<MODEL> (tern1.shared.implicit); a
# latency side ucx or tern<LOCAL> ---------------------------------------------

bw() { # bw SIDE OP SIZE
	local r test gbs mpps t mem model
	if [ "$1" = ucx ]; then
		test=ucp_put_bw
		[ "$2" = read ] && test=ucp_get
		if r=$(ucx_run "$test" "$3" "$(iters_for "$3")" -O "$window"); then
			read -r _ gbs mpps <<<"$r"
		else
			gbs=NA mpps=NA
		fi
	else
		IFS=. read -r t mem model <<<"$1"
		if r=$(tern_bw "${t#tern}" "$mem" "$model" "$2" "$3"); then
			read -r gbs mpps <<<"$r"
		else
			gbs=NA mpps=NA
		fi
	fi
	echo "$gbs" >>"$tmp/$1.$2.gbs.$3"
	echo "$mpps" >>"$tmp/$1.$2.mpps.$3"
}

lat() { # lat SIDE
	local r
	if [ "$1" = ucx ]; then
		if r=$(ucx_run ucp_put_lat 8 "$ping_iters"); then
			r=${r%% *}
		else
			r=NA
		fi
	else
		r=$(tern_ping "${1#tern}") || r=NA
	fi
	echo "$r" >>"$tmp/$1.lat"
}

limit() { # the copy limit at 16 MiB, GB/s
	local line
	line=$("$copy_limit" | grep 'size=16777216 ') || line=
	sed -n 's/.*memcpy_gbps=\([0-9.]*\).*/\1/p' <<<"$line" |
		awk '{ print $1 / 8 }' >>"$tmp/limit.memcpy"
	sed -n 's/.*vm_writev_gbps=\([0-9.]*\).*/\1/p' <<<"$line" |
		awk '{ print $1 / 8 }' >>"$tmp/limit.vm_writev"
	[ -n "$line" ] || echo "compare_ucx: copy_limit gave no 16 MiB line" >&2
}

sides=(ucx) lat_sides=(ucx)
for l in "${locals[@]}"; do
	lat_sides+=("tern$l")
	for mem in "${mems[@]}"; do
		for model in "${models[@]}"; do sides+=("tern$l.$mem.$model"); done
	done
done
tern_sides=("${sides[@]:1}")

# group ROUND ARRAY FN ARGS...: FN for each side of ARRAY, in order in
# odd rounds and reversed in even ones (ABBA; with more variants ABCDE
# EDCBA), so a drift of the machine during a round weighs on every side
# alike
group() {
	local r=$1 fn=$3 i n
	local -n gs=$2
	n=${#gs[@]}
	shift 3
	for ((i = 0; i < n; i++)); do
		if ((r % 2)); then "$fn" "${gs[i]}" "$@"; else "$fn" "${gs[n - 1 - i]}" "$@"; fi
	done
}

# --- figures -------------------------------------------------------------

# stats FILE -> "min median max" of its numbers (NA lines left out), to
# 4 significant digits (an 8 B write moves a few MB/s), or "n/a n/a n/a"
stats() {
	{ grep -vx NA "$1" 2>/dev/null || true; } | sort -g | awk '{ v[NR] = $1 } END {
		if (!NR) { print "n/a n/a n/a"; exit }
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.4g %.4g %.4g", v[1], m, v[NR] }'
}

# paired FILE-A FILE-B ratio|diff -> "median [lo, hi]" of the per-pair
# ratios A/B (or differences A - B) over the pairs where both ran: [lo,
# hi] is a distribution-free 95% interval of that median (order
# statistics k and n+1-k, k = floor((n - 1.96 sqrt(n)) / 2); under 6
# pairs, min and max)
paired() {
	paste -d' ' "$1" "$2" | awk -v m="$3" '$1 != "NA" && $2 != "NA" && ($2 > 0 || m != "ratio") {
		print (m == "ratio" ? $1 / $2 : $1 - $2) }' |
		sort -g | awk '{ v[NR] = $1 } END {
		n = NR; if (!n) { print "n/a"; exit }
		med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
		k = int((n - 1.96 * sqrt(n)) / 2); if (k < 1) k = 1
		printf "%.3f [%.3f, %.3f]", med, v[k], v[n + 1 - k] }'
}

ratio() { # ratio A B -> A / B, or n/a
	awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a" || b == "n/a" || b + 0 == 0) print "n/a"
		else printf "%.3f", a / b }'
}

ucx_version=$(ucx_info -v 2>/dev/null | sed -n 's/^# Version //p' | head -n 1)
if grep -aq TERN_LOCAL "$tern" 2>/dev/null; then
	local_note="this build reads TERN_LOCAL"
else
	local_note="this build does not mention TERN_LOCAL: no local path, every tern run is libfabric shm"
fi
echo "tern $("$tern" version | cut -d' ' -f2-); UCX ${ucx_version:-unknown} (ucx_perftest, UCX_TLS=$ucx_tls)"
echo "host $(hostname), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%M:%SZ), $rounds rounds, $pairs group(s) per size and round; CPUs initiator,peer: ${cpus:-not pinned}; window $window; tern ping --mode $ping_mode"
echo "tern runs with TERN_LOCAL=${locals[*]} ($local_note), memory ${mems[*]}, models ${models[*]}: ${#tern_sides[@]} tern run(s) beside each UCX run"
echo "bandwidth in GB/s = 10^9 bytes/s (UCX's MB/s is MiB/s, converted); rate in Mpps; latency: half round trip, us"

for r in $(seq 1 "$rounds"); do
	for op in write read; do
		for s in "${sizes[@]}"; do
			for _ in $(seq "$pairs"); do group "$r" sides bw "$op" "$s"; done
		done
	done
	for _ in $(seq "$pairs"); do group "$r" lat_sides lat; done
	limit
done

name() { # name SIDE -> how the tables call it
	local t mem model
	case $1 in
	ucx) echo UCX ;;
	*.*)
		IFS=. read -r t mem model <<<"$1"
		echo "tern (TERN_LOCAL=${t#tern}, $mem memory, $model)"
		;;
	*) echo "tern (TERN_LOCAL=${1#tern})" ;;
	esac
}

short() { # short SIDE -> a column head: shared/implicit, L0 host/explicit
	local t mem model
	IFS=. read -r t mem model <<<"$1"
	if [ ${#locals[@]} -gt 1 ]; then echo "L${t#tern} $mem/$model"; else echo "$mem/$model"; fi
}

# row LABEL FILE-TERN FILE-UCX ratio|diff: one line of a table
row() {
	local tmin tmed tmax umin umed umax cmp
	read -r umin umed umax <<<"$(stats "$3")"
	read -r tmin tmed tmax <<<"$(stats "$2")"
	if [ "$4" = ratio ]; then
		cmp=$(ratio "$tmed" "$umed")
	else
		cmp=$(awk -v a="$tmed" -v b="$umed" 'BEGIN { if (a == "n/a" || b == "n/a") print "n/a"
			else printf "%+.3f", a - b }')
	fi
	printf "%14s  %8s %8s %8s  %8s %8s %8s  %8s  %s\n" "$1" "$umin" "$umed" "$umax" \
		"$tmin" "$tmed" "$tmax" "$cmp" "$(paired "$2" "$3" "$4")"
}

head_row() { # head_row LEFT RIGHT COMPARISON
	printf "%14s  %-26s  %-26s  %8s  %s\n" size "$1 min/median/max" "$2 min/median/max" \
		"$3" "per-pair: median [interval]"
}

med() { # med FILE -> its median, or n/a
	local m
	read -r _ m _ <<<"$(stats "$1")"
	echo "$m"
}

declare -A ucx_test=([write]=ucp_put_bw [read]=ucp_get)
for t in "${tern_sides[@]}"; do
	for op in write read; do
		echo
		echo "== $op bandwidth, GB/s: ${ucx_test[$op]} against tern bench --op $op, $(name "$t") =="
		head_row UCX tern tern/UCX
		for s in "${sizes[@]}"; do
			row "$s" "$tmp/$t.$op.gbs.$s" "$tmp/ucx.$op.gbs.$s" ratio
		done
	done
	echo "== message rate at 8 B, Mpps: ucp_put_bw against tern bench --op write, $(name "$t") =="
	head_row UCX tern tern/UCX
	row 8 "$tmp/$t.write.mpps.8" "$tmp/ucx.write.mpps.8" ratio
done
for t in "${lat_sides[@]:1}"; do
	echo
	echo "== latency at 8 B, p50 us: ucp_put_lat against tern ping --mode $ping_mode, $(name "$t") =="
	head_row UCX tern tern-UCX
	row 8 "$tmp/$t.lat" "$tmp/ucx.lat" diff
done

# Every variant side by side: medians, and each one's ratio to UCX's.
echo
echo "== side by side: medians (GB/s; rate Mpps), and tern/UCX =="
line=$(printf "%-14s %9s" "" UCX)
for t in "${tern_sides[@]}"; do line+=$(printf "  %-22s" "$(short "$t")"); done
echo "$line"
for op in write read rate; do
	list_sizes=("${sizes[@]}")
	[ "$op" = rate ] && list_sizes=(8)
	for s in "${list_sizes[@]}"; do
		kind=$op.gbs.$s
		[ "$op" = rate ] && kind=write.mpps.8
		um=$(med "$tmp/ucx.$kind")
		line=$(printf "%-14s %9s" "$op $s" "$um")
		for t in "${tern_sides[@]}"; do
			tm=$(med "$tmp/$t.$kind")
			line+=$(printf "  %-22s" "$tm ($(ratio "$tm" "$um")x)")
		done
		echo "$line"
	done
done

# The implicit model against the explicit one, in the same memory and
# the same groups.
if [ ${#models[@]} -eq 2 ]; then
	for l in "${locals[@]}"; do
		for mem in "${mems[@]}"; do
			e=tern$l.$mem.explicit i=tern$l.$mem.implicit
			echo
			echo "== implicit against explicit: $mem memory, TERN_LOCAL=$l (GB/s; rate Mpps) =="
			head_row explicit implicit "impl/expl"
			for op in write read; do
				for s in "${sizes[@]}"; do
					row "$op $s" "$tmp/$i.$op.gbs.$s" "$tmp/$e.$op.gbs.$s" ratio
				done
			done
			row "rate 8" "$tmp/$i.write.mpps.8" "$tmp/$e.write.mpps.8" ratio
		done
	done
fi

if [ ${#locals[@]} -eq 2 ]; then
	for mem in "${mems[@]}"; do
		for model in "${models[@]}"; do
			echo
			echo "== the local path's gain: tern with TERN_LOCAL=1 against TERN_LOCAL=0, $mem memory, $model (GB/s; rate Mpps) =="
			head_row "TERN_LOCAL=0" "TERN_LOCAL=1" "1/0"
			for op in write read; do
				for s in "${sizes[@]}"; do
					row "$op $s" "$tmp/tern1.$mem.$model.$op.gbs.$s" \
						"$tmp/tern0.$mem.$model.$op.gbs.$s" ratio
				done
			done
			row "rate 8" "$tmp/tern1.$mem.$model.write.mpps.8" \
				"$tmp/tern0.$mem.$model.write.mpps.8" ratio
		done
	done
	echo
	echo "== ping: TERN_LOCAL=1 against TERN_LOCAL=0, p50 us =="
	head_row "TERN_LOCAL=0" "TERN_LOCAL=1" "1-0"
	row "p50 8" "$tmp/tern1.lat" "$tmp/tern0.lat" diff
fi

echo
echo "== copy limit at 16 MiB (bench/copy_limit, one per round), GB/s =="
read -r mmin mmed mmax <<<"$(stats "$tmp/limit.memcpy")"
read -r vmin vmed vmax <<<"$(stats "$tmp/limit.vm_writev")"
echo "   memcpy (one thread)         $mmin / $mmed / $mmax (min / median / max)"
echo "   process_vm_writev           $vmin / $vmed / $vmax"
for op in write read; do
	for t in "${sides[@]}"; do
		m=$(med "$tmp/$t.$op.gbs.16777216")
		printf "   %-48s %8s GB/s = %s of memcpy, %s of process_vm_writev\n" \
			"$(name "$t") $op" "$m" "$(ratio "$m" "$mmed")" "$(ratio "$m" "$vmed")"
	done
done

# --- the goals -------------------------------------------------------------

verdict() { # verdict OK MISSING -> MET / NOT MET / NOT JUDGED
	if [ "$2" -gt 0 ]; then echo "NOT JUDGED (figures missing)"
	elif [ "$1" -eq 1 ]; then echo MET
	else echo "NOT MET"; fi
}

# at_least A B FACTOR -> "ok miss q": whether median A >= FACTOR x median
# B (ok 1), whether a figure is missing (miss 1), and A/B
at_least() {
	local q ok=0 miss=0
	q=$(ratio "$1" "$2")
	if [ "$q" = n/a ]; then miss=1
	elif awk -v q="$q" -v f="$3" 'BEGIN { exit !(q >= f) }'; then ok=1; fi
	echo "$ok $miss $q"
}

echo
echo "== goals (medians; per-pair intervals above) =="
for t in "${tern_sides[@]}"; do
	echo "$(name "$t"):"
	for op in write read; do
		ok=1 miss=0 list=
		for s in "${sizes[@]}"; do
			read -r o m q <<<"$(at_least "$(med "$tmp/$t.$op.gbs.$s")" \
				"$(med "$tmp/ucx.$op.gbs.$s")" 1.0)"
			list+=" $s:$q"
			[ "$q" = n/a ] || list+=x
			miss=$((miss + m))
			[ "$o" -eq 1 ] || [ "$m" -eq 1 ] || ok=0
		done
		printf "   %-48s %s (%s)\n" "$op bandwidth >= 1.0x UCX at every size" \
			"$(verdict "$ok" "$miss")" "${list# }"
	done
	tm=$(med "$tmp/$t.write.mpps.8") um=$(med "$tmp/ucx.write.mpps.8")
	read -r ok miss q <<<"$(at_least "$tm" "$um" 1.0)"
	printf "   %-48s %s (%s: %s / %s Mpps)\n" "8 B message rate >= 1.0x UCX" \
		"$(verdict "$ok" "$miss")" "$q$([ "$q" = n/a ] || echo x)" "$tm" "$um"
	ok=1 miss=0 list=
	for op in write read; do
		read -r o m q <<<"$(at_least "$(med "$tmp/$t.$op.gbs.1048576")" \
			"$(med "$tmp/ucx.$op.gbs.1048576")" 1.0)"
		list+=" $op $q$([ "$q" = n/a ] || echo x)"
		miss=$((miss + m))
		[ "$o" -eq 1 ] || [ "$m" -eq 1 ] || ok=0
	done
	printf "   %-48s %s (%s)\n" "1 MiB write and read >= 1.0x UCX" \
		"$(verdict "$ok" "$miss")" "${list# }"
	if [[ $t == *.implicit && " ${tern_sides[*]} " == *" ${t%.implicit}.explicit "* ]]; then
		e=${t%.implicit}.explicit
		tm=$(med "$tmp/$t.write.mpps.8") em=$(med "$tmp/$e.write.mpps.8")
		read -r ok miss q <<<"$(at_least "$tm" "$em" 10.0)"
		printf "   %-48s %s (%s: %s / %s Mpps)\n" "8 B message rate >= 10x the explicit model's" \
			"$(verdict "$ok" "$miss")" "$q$([ "$q" = n/a ] || echo x)" "$tm" "$em"
	fi
	for op in write read; do
		read -r ok miss q <<<"$(at_least "$(med "$tmp/$t.$op.gbs.16777216")" "$mmed" 0.9)"
		printf "   %-48s %s (%s of %s GB/s)\n" "16 MiB $op >= 90% of the memcpy limit" \
			"$(verdict "$ok" "$miss")" "$q" "$mmed"
	done
done
for t in "${lat_sides[@]:1}"; do
	tm=$(med "$tmp/$t.lat") um=$(med "$tmp/ucx.lat")
	ok=0 miss=0
	if [ "$tm" = n/a ] || [ "$um" = n/a ]; then miss=1
	elif awk -v a="$tm" -v b="$um" 'BEGIN { exit !(a - b <= 0.05) }'; then ok=1; fi
	printf "%-51s %s (%s - %s us)\n" "$(name "$t"): ping p50 within 0.05 us of ucp_put_lat" \
		"$(verdict "$ok" "$miss")" "$tm" "$um"
done
echo
echo "wall clock: $(($(date +%s) - t_start)) s"
missing=$(cat "$tmp"/*.gbs.* "$tmp"/*.lat | grep -cx NA || true)
if [ "$missing" -gt 0 ]; then
	echo "compare_ucx: $missing run(s) gave no figure (what they printed is above)" >&2
	exit 1
fi
