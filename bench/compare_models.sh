#!/bin/bash
# SPDX-License-Identifier: MIT
# tern bench's three ways to post a window, against each other, in one run.
#
# usage: bench/compare_models.sh [BUILD-DIR] [ROUNDS]   (defaults: build 5)
#
# The models (docs/cli.md): explicit, a request per operation
# (tern_write()/tern_read(), each posted again as it completes); implicit
# (tern bench --implicit: tern_write_nbi()/tern_read_nbi(), one
# tern_quiet() per window); batch (tern bench --batch: one
# tern_write_pieces()/tern_read_pieces() of --window pieces, one request
# per window). Each round runs, per setting, operation and size, the
# three models back to back, in ABC order in odd rounds and CBA in even
# ones, so that a drift of the machine weighs on each alike. Settings:
#   shared  TERN_LOCAL=1, --mem shared --peer-mem shared: the same-host
#           path into memory the peer maps (copied with memcpy)
#   host    TERN_LOCAL=1, --mem host --peer-mem host: the same-host path
#           into plain memory (cross-memory attach)
#   shm     TERN_LOCAL=0, --provider shm, host memory: libfabric shm
#   tcp     TERN_LOCAL=0, --provider tcp --node 127.0.0.1, host memory
# with --op write and --op read at 8 B, 4 KiB, 64 KiB and 1 MiB, window
# 64 (-w), iterations by size (100000 at 8 B, 50000 at 4 KiB, 20000 at
# 64 KiB, 2000 at 1 MiB; a tenth more as warm-up). Every run's JSON must
# name the model and the path asked for (the local path for TERN_LOCAL=1,
# the provider for 0), else the run counts as missing.
#
# It prints per setting, operation and size each model's median
# (GB/s = 10^9 bytes/s; at 8 B the message rate, Mpps: at one size the
# two give the same ratios), and the median of the per-pair ratios
# batch/implicit and batch/explicit with an interval (a distribution-free
# 95% interval of the median from order statistics, as bench/compare.sh;
# under 6 pairs their min and max).
#
# Environment:
#   TERN_MODELS_SETTINGS=shared,host,shm,tcp  which settings (default all)
#   TERN_MODELS_SIZES=8,4096,65536,1048576  which sizes (default these;
#                   iterations as above, 2000 for any other)
#   TERN_MODELS_WINDOW=N  --window (default 64)
#   TERN_BENCH_CPUS=A,B   initiator on CPU A, the peer on CPU B (default:
#                   the second and first CPU this script may use);
#                   "none" leaves both unpinned
#   TERN_MODELS_TIMEOUT=S limit of each run (default 120 s)
#   TERN_COMPARE_QUICK=1  a hundredth of the iterations (at least 20), to
#                   check that the script runs; its figures mean nothing
# Absolute figures on a shared machine are noise; the ratios are the point.
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
tern=$build/tern
t_start=$(date +%s)

die() { echo "compare_models: $*" >&2; exit 1; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer"
[ -x "$tern" ] || die "$tern not built (cmake --build $build)"
command -v python3 >/dev/null || die "python3 not found (it reads the JSON)"

window=${TERN_MODELS_WINDOW:-64}
[[ $window =~ ^[1-9][0-9]*$ ]] || die "TERN_MODELS_WINDOW must be a positive integer"
limit_s=${TERN_MODELS_TIMEOUT:-120}
[[ $limit_s =~ ^[1-9][0-9]*$ ]] || die "TERN_MODELS_TIMEOUT must be a positive integer"
IFS=, read -ra settings <<<"${TERN_MODELS_SETTINGS:-shared,host,shm,tcp}"
for s in "${settings[@]}"; do
	[[ $s =~ ^(shared|host|shm|tcp)$ ]] ||
		die "TERN_MODELS_SETTINGS must list shared, host, shm or tcp"
done
models=(explicit implicit batch)
ops=(write read)
IFS=, read -ra sizes <<<"${TERN_MODELS_SIZES:-8,4096,65536,1048576}"
for s in "${sizes[@]}"; do
	[[ $s =~ ^[1-9][0-9]*$ ]] || die "TERN_MODELS_SIZES must list sizes in bytes"
done

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
[ -z "$cpus" ] || [[ $cpus =~ ^[0-9]+,[0-9]+$ ]] ||
	die "TERN_BENCH_CPUS must be A,B or none"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

iters_for() {
	local n
	case $1 in
	8) n=100000 ;;
	4096) n=50000 ;;
	65536) n=20000 ;;
	*) n=2000 ;;
	esac
	[ -n "${TERN_COMPARE_QUICK:-}" ] && n=$((n / 100 > 20 ? n / 100 : 20))
	echo "$n"
}

# setting_args SETTING -> "TERN_LOCAL ROUTE ARGS..." for tern bench
setting_args() {
	case $1 in
	shared) echo "1 local --provider shm --mem shared --peer-mem shared" ;;
	host) echo "1 local --provider shm --mem host --peer-mem host" ;;
	shm) echo "0 provider --provider shm --mem host --peer-mem host" ;;
	tcp) echo "0 provider --provider tcp --node 127.0.0.1 --mem host --peer-mem host" ;;
	esac
}

# json_figures FILE MODEL ROUTE -> "GB/s Mpps", or fails when the JSON
# does not say that model and route or has no figure
json_figures() {
	python3 - "$@" <<'PY'
import json, sys
f, model, route = sys.argv[1:4]
r = json.load(open(f))
c = r["context"]
want = "same host (local path)" if route == "local" else "provider"
if c["model"] != model or c["route"] != want or len(r["results"]) != 1:
    sys.exit("model %s, route %s" % (c["model"], c["route"]))
p = r["results"][0]
print("%.6f %.6f" % (p["gBps"], p["mpps"]))
PY
}

# one MODEL SETTING OP SIZE: one run; its GB/s and Mpps, or NA, appended
# to $tmp/SETTING.OP.SIZE.MODEL.{gbs,mpps}
one() {
	local model=$1 setting=$2 op=$3 size=$4 it l route r gbs=NA mpps=NA
	local margs=() args
	it=$(iters_for "$size")
	read -r l route args <<<"$(setting_args "$setting")"
	[ "$model" = explicit ] || margs=(--"$model")
	rm -f "$tmp/t.json"
	# shellcheck disable=SC2086
	if TERN_LOCAL=$l TERN_BENCH_CPUS=$cpus timeout "$limit_s" "$tern" bench \
		$args --op "$op" --sizes "$size" --window "$window" \
		--iters "$it" --warmup $((it / 10)) "${margs[@]}" \
		--json="$tmp/t.json" >"$tmp/t.out" 2>&1 &&
		r=$(json_figures "$tmp/t.json" "$model" "$route" 2>>"$tmp/t.out"); then
		read -r gbs mpps <<<"$r"
	else
		echo "compare_models: no result from $setting $op $size $model (TERN_LOCAL=$l tern bench $args ${margs[*]}); its output:" >&2
		sed 's/^/  | /' "$tmp/t.out" >&2
	fi
	echo "$gbs" >>"$tmp/$setting.$op.$size.$model.gbs"
	echo "$mpps" >>"$tmp/$setting.$op.$size.$model.mpps"
}

# --- figures (as bench/compare_ucx.sh) ---------------------------------

# stats FILE -> "min median max" of its numbers (NA lines left out)
stats() {
	{ grep -vx NA "$1" 2>/dev/null || true; } | sort -g | awk '{ v[NR] = $1 } END {
		if (!NR) { print "n/a n/a n/a"; exit }
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.4g %.4g %.4g", v[1], m, v[NR] }'
}

med() { # med FILE -> its median, or n/a
	local m
	read -r _ m _ <<<"$(stats "$1")"
	echo "$m"
}

# paired FILE-A FILE-B -> "median [lo, hi]" of the per-pair ratios A/B
# over the pairs where both ran: [lo, hi] a distribution-free 95%
# interval of that median (order statistics k and n+1-k, k = floor((n -
# 1.96 sqrt(n)) / 2); under 6 pairs, min and max)
paired() {
	paste -d' ' "$1" "$2" | awk '$1 != "NA" && $2 != "NA" && $2 > 0 { print $1 / $2 }' |
		sort -g | awk '{ v[NR] = $1 } END {
		n = NR; if (!n) { print "n/a"; exit }
		med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
		k = int((n - 1.96 * sqrt(n)) / 2); if (k < 1) k = 1
		printf "%.2f [%.2f, %.2f]", med, v[k], v[n + 1 - k] }'
}

echo "tern $("$tern" version | cut -d' ' -f2-); host $(hostname), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ), $rounds rounds; CPUs initiator,peer: ${cpus:-not pinned}; window $window; settings ${settings[*]}; sizes ${sizes[*]}"
echo "medians: GB/s = 10^9 bytes/s, at 8 B Mpps; ratios: median of the per-pair ratios [95% interval; under 6 pairs min, max]"

for r in $(seq 1 "$rounds"); do
	for setting in "${settings[@]}"; do
		for op in "${ops[@]}"; do
			for size in "${sizes[@]}"; do
				for ((i = 0; i < 3; i++)); do
					if ((r % 2)); then m=${models[i]}; else m=${models[2 - i]}; fi
					one "$m" "$setting" "$op" "$size"
				done
			done
		done
	done
	echo "round $r of $rounds done ($(($(date +%s) - t_start)) s, load $(cut -d' ' -f1 /proc/loadavg))" >&2
done

echo
printf "%-7s %-5s %8s %5s  %9s %9s %9s  %-20s %-20s\n" setting op size unit \
	explicit implicit batch "batch/implicit" "batch/explicit"
for setting in "${settings[@]}"; do
	for op in "${ops[@]}"; do
		for size in "${sizes[@]}"; do
			kind=gbs unit=GB/s
			[ "$size" = 8 ] && kind=mpps unit=Mpps
			f=$tmp/$setting.$op.$size
			printf "%-7s %-5s %8s %5s  %9s %9s %9s  %-20s %-20s\n" \
				"$setting" "$op" "$size" "$unit" \
				"$(med "$f.explicit.$kind")" "$(med "$f.implicit.$kind")" \
				"$(med "$f.batch.$kind")" \
				"$(paired "$f.batch.$kind" "$f.implicit.$kind")" \
				"$(paired "$f.batch.$kind" "$f.explicit.$kind")"
		done
	done
done
echo
echo "wall clock: $(($(date +%s) - t_start)) s"
missing=$(cat "$tmp"/*.gbs | grep -cx NA || true)
if [ "$missing" -gt 0 ]; then
	echo "compare_models: $missing run(s) gave no figure (what they printed is above)" >&2
	exit 1
fi
