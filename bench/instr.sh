#!/bin/bash
# SPDX-License-Identifier: MIT
# Instructions per operation, tern against raw libfabric: deterministic
# where wall-clock runs on a shared machine are not.
#
# usage: bench/instr.sh [BUILD-DIR] [PROVIDER] [SIZE] [N]
#        (defaults: build shm 8 20000; $INSTR_REPS runs of each, default 3;
#        $INSTR_MEM=host|shared both sides' buffers, default host)
#
# Runs the initiator of `tern bench --op write` (explicit: a request per
# write), of `tern bench --op write --implicit` (tern_write_nbi(), one
# tern_quiet() per window) and of `raw --op write` (window 64, the same
# as compare.sh) under callgrind twice, with N and
# 2N timed operations after the same warm-up, and prints the difference
# divided by N: user-space instructions per write, with set-up, warm-up and
# teardown cancelled out (an implicit write's share of its window's quiet
# and progress passes included). Both peers run under callgrind too (raw forks
# its child, tern's peer is a `tern bench --listen`), so both initiators
# see an equally slow target. The figures split per object: the tool's
# own code (tern: libtern + the bench engine; raw: raw itself),
# libfabric, libc (clock reads, locks) and the rest.
#
# How many progress passes it takes for the completions to come depends on
# the peer's pace, even here: tern's total moves by about +-5% from run to
# run (raw's loop, whose peer is lighter, hardly at all). The script runs
# each tool $INSTR_REPS times and shows the run with the median total, and
# every run's total beside it. "passes" is tern_progress() calls per
# write in that run: the passes a waiting initiator spins are counted in
# its total.
#
# Both tern peers run on this host, where tern would take its same-host
# path (docs/local.md), but that path proves its peer with pidfd_open(),
# which valgrind 3.19 (Debian 12) does not know ("unhandled amd64-linux
# syscall: 434"): under callgrind tern says so once and goes over the
# provider, as raw does. The line "tern's peer path" says which path ran.
# Over the provider an implicit write asks for delivery complete (it is
# never injected, where an explicit 8 B write is, completed by tern at
# once): its quiet waits for the target to take the writes, and the passes
# spent waiting are counted with it. $INSTR_MEM=shared puts both sides'
# buffers in shared memory, for a valgrind that has pidfd_open.
set -euo pipefail
build=${1:-build}
prov=${2:-shm}
size=${3:-8}
n=${4:-20000}
reps=${INSTR_REPS:-3}
mem=${INSTR_MEM:-host}
[[ $mem =~ ^(host|shared)$ ]] || { echo "instr: INSTR_MEM must be host or shared" >&2; exit 1; }
tern=$build/tern
raw=$build/raw
command -v valgrind >/dev/null ||
	{ echo "instr: valgrind not installed (apt-get install valgrind)" >&2; exit 1; }
for b in "$tern" "$raw"; do
	[ -x "$b" ] || { echo "instr: $b not built (cmake --build $build)" >&2; exit 1; }
done
node=()
[ "$prov" = tcp ] && node=(--node 127.0.0.1)
tmp=$(mktemp -d)
[ -n "${INSTR_KEEP:-}" ] && echo "instr: profiles kept in $tmp" >&2
trap 'kill $(jobs -p) 2>/dev/null || true; [ -n "${INSTR_KEEP:-}" ] || rm -rf "$tmp"' EXIT
cg=(valgrind --tool=callgrind --dump-instr=no --compress-strings=no)
warm=2000
op=(--op write --sizes "$size" --window 64 --warmup "$warm")

# by_object FILE -> "object<TAB>instructions" for every object in FILE
by_object() {
	awk '
	/^ob=/ { sub(/^ob=(\([0-9]+\) )?/, ""); ob = $0; next }
	/^fn=/ { cur = ob; next }
	/^(cob|cfn|cfi|cfl|calls)=/ { if ($0 ~ /^calls=/) skip = 1; next }
	/^[0-9+*-]/ {
		if (skip) { skip = 0; next }
		n = split($0, f, " ")
		if (n >= 2) tot[cur] += f[2]
	}
	END { for (o in tot) printf "%s\t%d\n", o, tot[o] }' "$1"
}

# class OBJECT -> own | libfabric | libc | other
class() {
	case $1 in
	*libtern.so* | */tern | */raw) echo own ;;
	*libfabric.so*) echo libfabric ;;
	*libc.so* | *vdso*) echo libc ;;
	*) echo other ;;
	esac
}

# split FILE -> "own libfabric libc other total"
split_file() {
	local own=0 lf=0 lc=0 oth=0 o c
	while IFS=$'\t' read -r o c; do
		case $(class "$o") in
		own) own=$((own + c)) ;;
		libfabric) lf=$((lf + c)) ;;
		libc) lc=$((lc + c)) ;;
		*) oth=$((oth + c)) ;;
		esac
	done < <(by_object "$1")
	echo "$own $lf $lc $oth $((own + lf + lc + oth))"
}

# passes FILE -> calls of tern_progress() in FILE (0 for raw)
passes() {
	awk '/^cfn=/ { f = ($0 ~ /^cfn=(\([0-9]+\) )?tern_progress$/); next }
	/^calls=/ { if (f) { split($0, c, /[= ]/); s += c[2] } f = 0 }
	END { printf "%d\n", s }' "$1"
}

run_tern() { # run_tern ITERS OUT [ARGS...]
	local card it=$1 out=$2
	shift 2
	rm -f "$tmp/card.$it"
	"${cg[@]}" --callgrind-out-file="$tmp/tern-peer.$it" \
		"$tern" bench --listen --provider "$prov" "${node[@]}" \
		--mem "$mem" --card-file "$tmp/card.$it" >/dev/null 2>&1 &
	local peer=$!
	for _ in $(seq 300); do
		grep -q . "$tmp/card.$it" 2>/dev/null && break
		sleep 0.1
	done
	sleep 0.2
	card=$(cat "$tmp/card.$it")
	"${cg[@]}" --callgrind-out-file="$out" "$tern" bench --peer "$card" \
		--provider "$prov" "${node[@]}" "${op[@]}" --mem "$mem" \
		--iters "$it" "$@" >"$tmp/tern.out.$it" 2>&1 ||
		{ cat "$tmp/tern.out.$it" >&2; return 1; }
	if grep -q "^  peer path" "$tmp/tern.out.$it"; then
		sed -n 's/^  peer path *//p' "$tmp/tern.out.$it" >"$tmp/route"
	fi
	kill -INT "$peer" 2>/dev/null || true
	wait "$peer" 2>/dev/null || true
}

run_tern_nbi() { run_tern "$@" --implicit; }

run_raw() { # run_raw ITERS OUT (the parent's profile; the child's is dropped)
	"${cg[@]}" --callgrind-out-file="$tmp/raw.$1.%p" "$raw" \
		--provider "$prov" "${node[@]}" "${op[@]}" --iters "$1" \
		>"$tmp/raw.out.$1" 2>&1 ||
		{ cat "$tmp/raw.out.$1" >&2; return 1; }
	# The parent is the profile whose command line has no child marker:
	# the lower pid (it forked the child).
	mv "$(ls "$tmp"/raw."$1".* | sort -t. -k3 -n | head -n 1)" "$2"
	rm -f "$tmp"/raw."$1".*
}

echo "instructions per write, user space, initiator only (callgrind)"
echo "provider $prov, size $size B, window 64, ($((2 * n)) - $n ops) / $n, median of $reps;" \
	"tern $("$tern" version | cut -d' ' -f2-); tern's buffers: $mem memory, TERN_LOCAL=${TERN_LOCAL:-1}"
echo "tern: explicit (tern_write(), a request each); tern_nbi: implicit (tern_write_nbi(), a tern_quiet() per 64)"
printf "%-8s %9s %10s %9s %9s %9s %7s   %s\n" tool own libfabric libc other total passes "(total, each run)"
for tool in tern tern_nbi raw; do
	: >"$tmp/$tool.runs"
	for _ in $(seq "$reps"); do
		"run_$tool" "$n" "$tmp/$tool.a"
		"run_$tool" $((2 * n)) "$tmp/$tool.b"
		read -r a1 a2 a3 a4 a5 <<<"$(split_file "$tmp/$tool.a")"
		read -r b1 b2 b3 b4 b5 <<<"$(split_file "$tmp/$tool.b")"
		a6=$(passes "$tmp/$tool.a") b6=$(passes "$tmp/$tool.b")
		awk -v n="$n" -v a="$a1 $a2 $a3 $a4 $a5 $a6" -v b="$b1 $b2 $b3 $b4 $b5 $b6" 'BEGIN {
			split(a, x); split(b, y)
			for (i = 1; i <= 5; i++) printf "%.1f ", (y[i] - x[i]) / n
			printf "%.3f\n", (y[6] - x[6]) / n }' >>"$tmp/$tool.runs"
	done
	# the run with the median total, whole
	sort -g -k5 "$tmp/$tool.runs" | sed -n "$(((reps + 1) / 2))p" >"$tmp/$tool.med"
	read -r o l c x t p <"$tmp/$tool.med"
	[ "$tool" = raw ] && p=-
	printf "%-8s %9s %10s %9s %9s %9s %7s   (%s)\n" "$tool" "$o" "$l" "$c" "$x" "$t" "$p" \
		"$(cut -d' ' -f5 "$tmp/$tool.runs" | paste -sd' ')"
	echo "$t" >"$tmp/$tool.total"
done
echo "tern's peer path: $(cat "$tmp/route" 2>/dev/null || echo unknown)"
awk -v t="$(cat "$tmp/tern.total")" -v r="$(cat "$tmp/raw.total")" \
	'BEGIN { printf "tern - raw: %+.1f instructions per write (tern/raw %.3f)\n", t - r, t / r }'
awk -v i="$(cat "$tmp/tern_nbi.total")" -v e="$(cat "$tmp/tern.total")" \
	'BEGIN { printf "implicit - explicit: %+.1f instructions per write (implicit/explicit %.3f): %s\n",
		i - e, i / e, i < e ? "fewer" : "NOT fewer" }'
