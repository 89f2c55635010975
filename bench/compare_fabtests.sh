#!/bin/bash
# SPDX-License-Identifier: MIT
# tern's 8 B write rate over libfabric against fabtests' fi_rma_bw and
# tern's own raw libfabric loop, in one run.
#
# usage: bench/compare_fabtests.sh [BUILD-DIR] [ROUNDS] [PROVIDERS...]
#        (defaults: build-release if it holds tern, else build; 5 rounds;
#        shm tcp)
#
# tern runs with its same-host path off (TERN_LOCAL=0), so every write
# goes through the provider, as fabtests' and raw's do. For each
# provider it alternates, ROUNDS times, four runs of 8 B RDMA writes at
# a window of 64:
#   fabtests  fi_rma_bw -p PROV -e rdm -o write -S 8 -W 64 -m, a server
#             and a client on 127.0.0.1 trading addresses out of band
#             (-E=PORT); tcp is "tcp;ofi_rxm", as tern opens it
#   explicit  tern bench --op write --sizes 8 --window 64 (a request per
#             write, posted again as it completes)
#   implicit  the same with --implicit (64 tern_write_nbi(), one
#             tern_quiet())
#   raw       bench/raw --op write --sizes 8 --window 64 (fi_writemsg()
#             with a completion per write, no tern code)
# in ABBA order: odd rounds fabtests, explicit, implicit, raw; even
# rounds the reverse, so a drift of the machine inside a round weighs on
# all four alike. All take the same iterations (TERN_FABTESTS_ITERS,
# default 200000, a tenth more as warm-up). It prints each tool's min /
# median / max in Mpps (10^6 writes/s) and, for tern's two models, the
# median of the per-round ratios tern/fabtests and tern/raw with their
# min..max: each round's runs sat side by side in time, so these are
# what the noise moves least (with 5 rounds [min, max] is the whole
# spread, not a confidence interval). The row fabtests.srv is fi_rma_bw's
# server, the other direction (below); raw/fabtests says how far the two
# references sit apart. On a shared machine absolute rates are noise;
# the ratios are the point.
#
# What "window 64" means to each tool, and how to read fabtests' figure:
# - fi_rma_bw writes a size below the provider's inject size with
#   fi_inject_write() (8 B is, on shm and tcp): no completion per write,
#   so -W 64 only sets how often it polls its CQ, and the provider's
#   queue, not the window, bounds what is in flight. Its clock stops
#   when the last inject returns, not when the writes have landed.
# - fi_rma_bw -o write is bidirectional: server and client each write
#   to the other at once. The client's figure (one direction, while the
#   other runs beside it) is the one compared; the server's is printed
#   on the side. tern bench and raw write one way, their target only
#   polls.
# - tern bench explicit keeps 64 requests in flight (an 8 B write is
#   injected by tern where the provider allows); implicit posts 64 then
#   waits for all of them (tern_quiet(); over libfabric an implicit
#   write asks for delivery complete); raw keeps 64 fi_writemsg() in
#   flight and reads a completion for each.
# fabtests is built once from its release tarball into BUILD-DIR/
# fabtests/ (autoreconf, configure, make; needs autoconf, automake,
# libtool and libfabric's headers) and links the libfabric the system
# loads; nothing of it enters the repository. Delete BUILD-DIR/fabtests
# to build it again (another tarball or TERN_FABTESTS_LIBFABRIC).
#
# Environment:
#   TERN_FABTESTS_TARBALL  fabtests' tarball (default
#                          ../shared/third_party/fabtests-1.17.0.tar.gz
#                          beside the checkout); its version should be
#                          the system libfabric's
#   TERN_FABTESTS_LIBFABRIC=PREFIX  configure fabtests with
#                          --with-libfabric=PREFIX (default: the system's)
#   TERN_FABTESTS_ITERS=N  timed writes per run (default 200000)
#   TERN_FABTESTS_PORT=N   first of the 64 TCP ports fi_rma_bw's runs use
#                          (default 20000 + pid % 10000)
#   TERN_BENCH_CPUS=A,B    every tool's initiator on CPU A, its peer on B
#                          (fabtests: client on A, server on B); default
#                          not pinned
#   TERN_FABTESTS_DC=1     a fifth run per round, fabtests_dc:
#                          fi_rma_bw -j 0 -U, no inject, a completion per
#                          write and delivery complete (what tern's
#                          implicit writes ask for over libfabric), with
#                          the ratios tern/fabtests_dc (default 0: off)
#   TERN_COMPARE_QUICK=1   2000 writes per run, to check that the script
#                          runs (its test): no figure then means anything
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
build=${1:-}
if [ -z "$build" ]; then
	build=build
	[ -x "build-release/tern" ] && build="build-release"
fi
rounds=${2:-5}
shift $(( $# > 2 ? 2 : $# ))
providers=("$@")
[ ${#providers[@]} -gt 0 ] || providers=(shm tcp)

die() { echo "compare_fabtests: $*" >&2; exit 1; }

[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer"
tern=$build/tern
raw=$build/raw
for b in "$tern" "$raw"; do
	[ -x "$b" ] || die "$b not built (cmake --build $build)"
done
for p in "${providers[@]}"; do
	case $p in
	shm | tcp) ;;
	*) die "provider '$p': only shm and tcp run here" ;;
	esac
done
iters=${TERN_FABTESTS_ITERS:-200000}
[[ $iters =~ ^[1-9][0-9]*$ ]] || die "TERN_FABTESTS_ITERS must be a positive integer"
[ -n "${TERN_COMPARE_QUICK:-}" ] && iters=2000
dc=${TERN_FABTESTS_DC:-0}
[[ $dc =~ ^[01]$ ]] || die "TERN_FABTESTS_DC must be 0 or 1"
# fi_rma_bw needs more iterations than its window (its usage says so)
((iters > 64)) || die "TERN_FABTESTS_ITERS must be above the window (64)"
warmup=$((iters / 10))
port_base=${TERN_FABTESTS_PORT:-$((20000 + $$ % 10000))}
if ! [[ $port_base =~ ^[1-9][0-9]{0,4}$ ]] || ((port_base + 64 >= 65536)); then
	die "TERN_FABTESTS_PORT must leave 64 ports below 65536"
fi

# --- fabtests: built once, kept in BUILD-DIR/fabtests -----------------
# beside the checkout, or where scripts/debroot.sh mounts the snapshots
tarball=${TERN_FABTESTS_TARBALL:-}
if [ -z "$tarball" ]; then
	tarball=$top/../shared/third_party/fabtests-1.17.0.tar.gz
	[ -f "$tarball" ] || [ ! -f /third_party/fabtests-1.17.0.tar.gz ] ||
		tarball=/third_party/fabtests-1.17.0.tar.gz
fi
ftdir=$build/fabtests
fab=$ftdir/fi_rma_bw
if [ ! -x "$fab" ]; then
	[ -f "$tarball" ] || die "no fabtests tarball at $tarball (set TERN_FABTESTS_TARBALL to fabtests-1.17.0.tar.gz, the fabtests/ folder of libfabric's v1.17.0 tag)"
	for t in autoreconf automake libtoolize make cc; do
		command -v "$t" >/dev/null ||
			die "$t not found: building fabtests needs autoconf, automake, libtool, make and a C compiler (apt-get install autoconf automake libtool build-essential)"
	done
	if [ -n "${TERN_FABTESTS_LIBFABRIC:-}" ]; then
		[ -f "$TERN_FABTESTS_LIBFABRIC/include/rdma/fabric.h" ] ||
			die "no libfabric headers under TERN_FABTESTS_LIBFABRIC=$TERN_FABTESTS_LIBFABRIC"
	else
		echo '#include <rdma/fabric.h>' | cc -E -x c - >/dev/null 2>&1 ||
			die "libfabric's headers are not installed (apt-get install libfabric-dev)"
	fi
	mkdir -p "$ftdir"
	work=$(mktemp -d "$ftdir/build.XXXXXX")
	log=$ftdir/build.log
	echo "compare_fabtests: building fi_rma_bw from $(basename "$tarball") in $ftdir (log: $log)" >&2
	conf=()
	[ -n "${TERN_FABTESTS_LIBFABRIC:-}" ] && conf=(--with-libfabric="$TERN_FABTESTS_LIBFABRIC")
	if ! (tar -xzf "$tarball" -C "$work" --strip-components=1 &&
		cd "$work" && ./autogen.sh && ./configure "${conf[@]}" &&
		make -j2 benchmarks/fi_rma_bw) >"$log" 2>&1; then
		tail -n 20 "$log" >&2
		rm -rf "$work"
		die "building fabtests failed (whole log: $log)"
	fi
	# the binary itself, not a libtool wrapper: libfabtests is a
	# convenience library, linked in; libfabric stays dynamic
	file_type=$(head -c 4 "$work/benchmarks/fi_rma_bw" | od -An -c | tr -d ' ')
	[ "$file_type" = '177ELF' ] || { rm -rf "$work"; die "benchmarks/fi_rma_bw is not an ELF executable"; }
	cp "$work/benchmarks/fi_rma_bw" "$fab.tmp"
	mv "$fab.tmp" "$fab"
	rm -rf "$work"
fi

tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT

# CPU pinning, the same for all tools (tern bench and raw read
# TERN_BENCH_CPUS themselves; fi_rma_bw runs under taskset)
init_pin=() peer_pin=()
if [ -n "${TERN_BENCH_CPUS:-}" ]; then
	[[ $TERN_BENCH_CPUS =~ ^[0-9]+,[0-9]+$ ]] || die "TERN_BENCH_CPUS must be A,B"
	init_pin=(taskset -c "${TERN_BENCH_CPUS%,*}")
	peer_pin=(taskset -c "${TERN_BENCH_CPUS#*,}")
fi

lib_of() { # lib_of BINARY -> the libfabric it loads
	ldd "$1" 2>/dev/null | awk '/libfabric\.so/ { print $3; exit }'
}
echo "tern $("$tern" version | cut -d' ' -f2-)"
echo "fabtests $fab, loads $(lib_of "$fab"); tern loads $(lib_of "$build/libtern.so.0")"
[ "$(lib_of "$fab")" = "$(lib_of "$build/libtern.so.0")" ] ||
	echo "warning: fi_rma_bw and tern load different libfabrics" >&2
echo "host $(hostname), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%M:%SZ), $rounds rounds, $iters writes of 8 B per run (+$warmup warm-up), window 64, TERN_LOCAL=0, CPUs initiator,peer: ${TERN_BENCH_CPUS:-not pinned}"
echo "load average $(uptime | sed 's/.*load average: *//')"

port_n=0
next_port() { # -> a port of the 64 from port_base, a new one each call
	echo $((port_base + port_n % 64))
	port_n=$((port_n + 1))
}

listening() { # listening PORT -> 0 when a socket listens on PORT (IPv4/6)
	awk -v p="$(printf ':%04X' "$1")" \
		'substr($2, length($2) - 4) == p && $4 == "0A" { f = 1 } END { exit !f }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# fab_rate FILE -> Mxfers/sec of fi_rma_bw -m's result line in FILE
fab_rate() {
	sed -n 's/.*xfer_size: 8, .*Mxfers\/sec: \([0-9.][0-9.]*\) }.*/\1/p' "$1" | tail -n 1
}

# fi_rma_bw PROV NAME [OPTION...] -> appends the client's rate to
# $tmp/PROV.NAME, the server's to $tmp/PROV.NAME_server
fi_rma_bw() {
	local fprov=$1 name=$2 oob port spid rc=0 src=0 rate srate
	[ "$1" = tcp ] && fprov="tcp;ofi_rxm"
	oob=$(next_port)
	port=$(next_port)
	local args=(-p "$fprov" -e rdm -o write -S 8 -I "$iters" -w "$warmup"
		-W 64 -m -E="$oob" -s 127.0.0.1 "${@:3}")
	"${peer_pin[@]}" timeout 120 "$fab" "${args[@]}" -B "$port" \
		>"$tmp/fab.server" 2>&1 &
	spid=$!
	for _ in $(seq 400); do
		listening "$oob" && break
		kill -0 $spid 2>/dev/null || break
		sleep 0.05
	done
	if ! listening "$oob"; then
		cat "$tmp/fab.server" >&2
		die "fi_rma_bw server ($1) did not listen on 127.0.0.1:$oob"
	fi
	"${init_pin[@]}" timeout 120 "$fab" "${args[@]}" -P "$port" 127.0.0.1 \
		>"$tmp/fab.client" 2>&1 || rc=$?
	wait $spid || src=$?
	rate=$(fab_rate "$tmp/fab.client")
	srate=$(fab_rate "$tmp/fab.server")
	if [ $rc -ne 0 ] || [ $src -ne 0 ] || [ -z "$rate" ] || [ -z "$srate" ]; then
		echo "--- client:" >&2; cat "$tmp/fab.client" >&2
		echo "--- server:" >&2; cat "$tmp/fab.server" >&2
		die "fi_rma_bw ${args[*]} failed (client exit $rc, server $src) or printed no rate"
	fi
	echo "$rate" >>"$tmp/$1.$name"
	echo "$srate" >>"$tmp/$1.${name}_server"
}
run_fabtests() { fi_rma_bw "$1" fabtests; }
# -j 0: no inject, a completion per write; -U: delivery complete
run_fabtests_dc() { fi_rma_bw "$1" fabtests_dc -j 0 -U; }

# csv_col FILE NAME -> the last line's column NAME of tern bench's CSV
csv_col() {
	awk -F, -v n="$2" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
		{ v = $c[n] } END { print v }' "$1"
}

tern_run() { # tern_run PROV explicit|implicit -> appends to $tmp/PROV.MODEL
	local node=() model=() mpps
	[ "$1" = tcp ] && node=(--node 127.0.0.1)
	[ "$2" = implicit ] && model=(--implicit)
	if ! TERN_LOCAL=0 timeout 120 "$tern" bench --provider "$1" "${node[@]}" \
		--op write --sizes 8 --window 64 --iters "$iters" \
		--warmup "$warmup" "${model[@]}" --csv "$tmp/t.csv" \
		>"$tmp/t.out" 2>&1; then
		cat "$tmp/t.out" >&2
		die "tern bench ($1, $2) failed"
	fi
	grep -Eq '^  peer path +provider' "$tmp/t.out" ||
		die "tern bench ($1) did not go over the provider: $(grep 'peer path' "$tmp/t.out")"
	[ "$(csv_col "$tmp/t.csv" model)" = "$2" ] ||
		die "tern bench ran model '$(csv_col "$tmp/t.csv" model)', not $2"
	mpps=$(csv_col "$tmp/t.csv" mpps)
	[[ $mpps =~ ^[0-9.]+(e-?[0-9]+)?$ ]] || die "tern bench printed no rate ($mpps)"
	echo "$mpps" >>"$tmp/$1.$2"
}
run_explicit() { tern_run "$1" explicit; }
run_implicit() { tern_run "$1" implicit; }

run_raw() { # -> appends to $tmp/PROV.raw
	local node=() line
	[ "$1" = tcp ] && node=(--node 127.0.0.1)
	line=$(timeout 120 "$raw" --provider "$1" "${node[@]}" --op write --sizes 8 \
		--window 64 --iters "$iters" --warmup "$warmup" | grep 'size=8 ') ||
		die "raw ($1) failed"
	sed -n 's/.*[[:space:]]mpps=\([^[:space:]]*\).*/\1/p' <<<"$line" >>"$tmp/$1.raw"
}

# stats FILE -> "min median max" of the numbers in FILE
stats() {
	sort -g "$1" | awk '{ v[NR] = $1 } END {
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.3f %.3f %.3f", v[1], m, v[NR] }'
}

# paired FILE-A FILE-B -> "median [min, max]" of the per-round ratios A/B
paired() {
	paste -d' ' "$1" "$2" | awk '{ print $1 / $2 }' | sort -g | awk '{ v[NR] = $1 } END {
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.2f [%.2f, %.2f]", m, v[1], v[NR] }'
}

tools=(fabtests explicit implicit raw)
[ "$dc" = 1 ] && tools=(fabtests fabtests_dc explicit implicit raw)
for prov in "${providers[@]}"; do
	for r in $(seq 1 "$rounds"); do
		order=("${tools[@]}")
		if ((r % 2 == 0)); then # the reverse
			order=()
			for ((i = ${#tools[@]} - 1; i >= 0; i--)); do order+=("${tools[i]}"); done
		fi
		for t in "${order[@]}"; do
			"run_$t" "$prov"
		done
	done
	echo
	echo "== $prov: 8 B write rate, Mpps, window 64, $rounds rounds =="
	printf "  %-15s %8s %8s %8s\n" tool min median max
	rows=("${tools[@]}" fabtests_server)
	[ "$dc" = 1 ] && rows+=(fabtests_dc_server)
	for t in "${rows[@]}"; do
		read -r lo med hi <<<"$(stats "$tmp/$prov.$t")"
		printf "  %-15s %8s %8s %8s" "${t/_server/.srv}" "$lo" "$med" "$hi"
		[[ $t == *_server ]] && printf "  fi_rma_bw's other direction, beside the client's"
		echo
	done
	echo "  per-round ratios, median [min, max]:"
	for m in explicit implicit; do
		printf "  %-15s tern/fabtests %-18s tern/raw %s" "$m" \
			"$(paired "$tmp/$prov.$m" "$tmp/$prov.fabtests")" \
			"$(paired "$tmp/$prov.$m" "$tmp/$prov.raw")"
		[ "$dc" = 1 ] &&
			printf "  tern/fabtests_dc %s" "$(paired "$tmp/$prov.$m" "$tmp/$prov.fabtests_dc")"
		echo
	done
	printf "  %-15s %s\n" "raw" "raw/fabtests $(paired "$tmp/$prov.raw" "$tmp/$prov.fabtests")"
done
echo
echo "load average $(uptime | sed 's/.*load average: *//')"
