#!/bin/bash
# SPDX-License-Identifier: MIT
# Through NIXL: the TERN backend (plugins/nixl, docs/nixl.md) against
# NIXL's UCX backend on one host, with NIXL's own nixlbench.
#
# usage: bench/nixl_compare.sh [PAIRS]      (default 3)
#
# Run it where NIXL is installed with a nixlbench that knows the backend
# TERN: the Debian 13 root of tests/nixl/build.sh (NIXL 1.4.0 under
# /opt/nixl-1.4.0-KEY, its nixlbench patched to accept TERN; `.built`
# there once it is complete). From the host, as root, either through
# scripts/debroot.sh (it copies the checkout to /tern in the root, and
# TERN_* variables pass through):
#   scripts/debroot.sh trixie run bash bench/nixl_compare.sh 3
# or in a private mount namespace of your own, the checkout copied to
# /root/tern in the root (TERN_* passed on by hand):
#   R=/var/cache/tern/trixie
#   unshare -m --propagation private bash -c "
#     mount -t proc proc $R/proc; mount --bind /dev $R/dev
#     mount -t tmpfs -o mode=1777 shm $R/dev/shm
#     mount -t tmpfs -o mode=1777 tmp $R/tmp; mount --rbind /sys $R/sys
#     chroot $R /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin \
#       $(env | grep ^TERN_ | tr '\n' ' ') bash /root/tern/bench/nixl_compare.sh 3"
# It builds tern and the plugin (build-nixlbench/) unless
# TERN_NIXLBENCH_PLUGINS names them; the root needs /proc and its own
# /dev/shm (tern's shm provider and UCX's shared memory).
#
# What it runs: for op in WRITE READ, batch in 1 64, PAIRS pairs of
# nixlbench runs, TERN and UCX in alternating order (TERN UCX, UCX TERN,
# TERN UCX, ...), then one TERN run with TERN_LOCAL=0. A run is two
# nixlbench processes (initiator and target, the same flags) meeting over
# --runtime_type ASIO on 127.0.0.1, DRAM to DRAM, blocks from 4 KiB up
# in powers of two, --start_batch_size = --max_batch_size = the batch:
# up to 64 MiB at batch 1, up to 1 MiB at batch 64 (TERN_NIXLBENCH_BUFFER
# below). nixlbench posts one transfer of BATCH descriptors with a
# notification (which the target waits for), waits for its completion
# and posts it again: one transfer in flight, no progress thread
# (--enable_pt off), so NIXL's UCX progresses inside getXferStatus and
# getNotifs on the calling thread, while TERN's own thread does the work.
#   TERN: TERN_PROVIDER=shm with the same-host path (tern's default:
#         writes and reads are process_vm_writev/readv on the engine's
#         thread, the notification a message over shm); TERN_LOCAL=0:
#         all of it over libfabric's shm provider.
#   UCX:  NIXL's own UCX plugin, UCX_TLS=$TERN_NIXLBENCH_UCX_TLS (default
#         tcp,self). NIXL's UCX backend opens its endpoints with
#         UCP_ERR_HANDLING_MODE_PEER (its ucx_error_handling_mode
#         parameter, which nixlbench does not set), and in UCX 1.18
#         (Debian 13) neither shared-memory transport (posix, sysv: "no
#         peer failure handler") nor cma ("no am bcopy"; for RMA "no RMA
#         memory invalidation") qualifies: UCX_TLS=shm,self or
#         posix,cma,self fails to connect, and UCX's default (all) picks
#         tcp over lo with puts and gets emulated over active messages,
#         rma_am(tcp/lo), as tcp,self does. The report prints the lanes
#         UCX logged (UCX_LOG_LEVEL=info in the data-check runs).
# It prints, per op, batch and block: each backend's median GB/s (10^9
# B/s, nixlbench's unit) over the pairs, the median of the per-pair
# ratios TERN/UCX with their min and max, and the TERN_LOCAL=0 run with
# its ratio to UCX's median. Then the cost per descriptor at batch 64 of
# 4 KiB (nixlbench's "Avg Lat.": the transfer's time divided by its
# descriptors; "Avg Post": the time inside postXferReq, per descriptor)
# against tern's own CLI, `tern bench --provider shm --sizes 4K --window
# 64` (one tern_write/tern_read per descriptor, 64 in flight, busy
# polling; 1/Mpps), PAIRS runs each with TERN_LOCAL=1 and 0. Last, the
# data check: short nixlbench runs per backend (TERN, TERN_LOCAL=0,
# UCX) and op with --check_consistency (blocks 4 KiB to 1 MiB at
# batches 1 to 64, then 2 to 64 MiB at batch 1), PASS or FAIL each.
# nixlbench's check is that every byte of each destination holds the
# source's fill byte after the timed transfers.
#
# A run that fails or gives no figure for a size prints "-" there (its
# logs say why) and the script exits 1 at the end; nothing is guessed.
#
# Environment (TERN_* so that scripts/debroot.sh passes them through):
#   TERN_NIXLBENCH_PREFIX   NIXL's install prefix (default: the newest
#                           /opt/nixl-*/ with a .built file, else the
#                           one with bin/nixlbench)
#   TERN_NIXLBENCH_PLUGINS  a directory with libplugin_TERN.so (default:
#                           tern and the plugin are built here, in
#                           build-nixlbench/, Release, -j2, and
#                           build-nixlbench/nixl-plugins/ gets it and a
#                           link to NIXL's libplugin_UCX.so); it is
#                           NIXL_PLUGIN_DIR for every run
#   TERN_NIXLBENCH_TERN     the tern CLI for the posting comparison
#                           (default: tern beside the plugin's build)
#   TERN_NIXLBENCH_DESCS    descriptors per block size up to 1 MiB
#                           (default 512): --num_iter is DESCS/BATCH (at
#                           least 16), --warmup_iter a quarter of that
#                           (at least 4); blocks above 1 MiB (batch 1
#                           only) run a 64th of both
#                           (--large_blk_iter_ftr 64)
#   TERN_NIXLBENCH_BUFFER   bytes per process (default 67108864): blocks
#                           go up to BUFFER/BATCH, so 64 MiB at batch 1
#                           and 1 MiB at batch 64 (nixlbench allocates
#                           max block x batch; a 4 GiB buffer cost about
#                           60 s of set-up per run here)
#   TERN_NIXLBENCH_UCX_TLS  UCX_TLS for the UCX runs (default tcp,self:
#                           see below)
#   TERN_NIXLBENCH_OPS      default "WRITE READ"
#   TERN_NIXLBENCH_BATCHES  default "1 64"
#   TERN_NIXLBENCH_CHECK    0: skip the --check_consistency runs
#   TERN_NIXLBENCH_OUT      where logs and results.csv go (default
#                           build-nixlbench/run-DATE)
#   TERN_NIXLBENCH_TIMEOUT  seconds per nixlbench run (default 600)
#   TERN_NIXLBENCH_REPORT   DIR: print the report of an earlier run in
#                           DIR again; run nothing
# With PAIRS=3 the runs took 4 to 7 minutes on a shared 2-core machine
# (the build about 80 s more); docs/nixl.md, "Through NIXL: TERN against
# UCX", has the figures and what limits them.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
repo=$(pwd)
pairs=${1:-3}
case "$pairs" in
'' | *[!0-9]* | 0) sed -n '/^# usage:/,/^#$/p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2 ;;
esac
t0=$(date +%s)
note() { echo "nixl_compare: [$(($(date +%s) - t0)) s] $*" >&2; }
die() { echo "nixl_compare: FAIL: $*" >&2; exit 1; }

descs=${TERN_NIXLBENCH_DESCS:-512}
bufsz=${TERN_NIXLBENCH_BUFFER:-67108864}
ucx_tls=${TERN_NIXLBENCH_UCX_TLS:-tcp,self}
ops=${TERN_NIXLBENCH_OPS:-WRITE READ}
batches=${TERN_NIXLBENCH_BATCHES:-1 64}
tmo=${TERN_NIXLBENCH_TIMEOUT:-600}

# The nixlbench flags of a batch: blocks 4 KiB to BUFFER/BATCH (at most
# 64 MiB), DESCS descriptors per block size.
batch_flags() {
	local batch=$1 mx=$(($bufsz / $1)) it wu ftr=1
	[ $mx -gt 67108864 ] && mx=67108864
	it=$((descs / batch)); [ $it -lt 16 ] && it=16
	wu=$((it / 4)); [ $wu -lt 4 ] && wu=4
	# nixlbench rounds both up to a multiple of the factor
	if [ $mx -gt 1048576 ]; then
		ftr=64; it=$(((it + 63) / 64 * 64)); wu=$(((wu + 63) / 64 * 64))
	fi
	echo --start_block_size 4096 --max_block_size $mx \
		--start_batch_size "$batch" --max_batch_size "$batch" \
		--num_iter $it --warmup_iter $wu --large_blk_iter_ftr $ftr \
		--total_buffer_size $((mx * batch))
}

# report DIR: the tables, from DIR's results.csv, tern_bench.csv,
# check.txt, ucx_tls, flags.txt and the UCX check logs
report() {
	lanes=$(grep -h -o "intra-node cfg#[0-9]* .*" "$1"/check-*-UCX-small.log* \
		2>/dev/null | sed 's/  */ /g' | sort -u | head -1)
	awk -F, -v tls="$(cat "$1/ucx_tls" 2>/dev/null)" \
		-v bf="$(cat "$1/flags.txt" 2>/dev/null)" -v tcsv="$1/tern_bench.csv" \
		-v chk="$1/check.txt" -v lanes="$lanes" '
function med(s,   a, n, i, j, t) {
	n = split(s, a, " ")
	for (i = 2; i <= n; i++) {
		t = a[i] + 0
		for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]
		a[j + 1] = t
	}
	if (n == 0) return ""
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function mn(s,   a, n, i, m) { n = split(s, a, " "); m = a[1] + 0
	for (i = 2; i <= n; i++) if (a[i] + 0 < m) m = a[i] + 0; return m }
function mx(s,   a, n, i, m) { n = split(s, a, " "); m = a[1] + 0
	for (i = 2; i <= n; i++) if (a[i] + 0 > m) m = a[i] + 0; return m }
function hsz(b) { return b >= 1048576 ? (b / 1048576) " MiB" : (b / 1024) " KiB" }
function f(x, d) { return x == "" ? "-" : sprintf("%." d "f", x) }
NR == 1 { next }
{
	if (($3 == "TERN" || $3 == "UCX") && $4 + 0 > pairs) pairs = $4 + 0
	k = $1 SUBSEP $2
	if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
	if (!(($1, $2, $5) in bseen)) { bseen[$1, $2, $5] = 1; blks[k] = blks[k] " " $5 }
	v[$1, $2, $3, $4, $5] = $6
	lat[$1, $2, $3, $4, $5] = $7
	post[$1, $2, $3, $4, $5] = $8
}
END {
	printf "\nnixlbench, TERN (TERN_PROVIDER=shm) against UCX (UCX_TLS=%s): GB/s = 10^9 B/s,\n", tls
	printf "median of %d pairs; TERN/UCX: median of the per-pair ratios [min-max];\n", pairs
	printf "TERN_LOCAL=0: one run, its ratio to UCX'"'"'s median. nixlbench flags:\n%s\n", bf
	if (lanes != "") printf "UCX'"'"'s lanes (UCX_LOG_LEVEL=info): %s\n", lanes
	for (o = 1; o <= nk; o++) {
		k = order[o]; split(k, kk, SUBSEP)
		printf "\n%s, batch %s\n", kk[1], kk[2]
		printf "%10s %9s %9s %8s %15s %9s %8s\n", "block", "TERN", "UCX", "TERN/UCX", "[min-max]", "LOCAL=0", "/UCX"
		nb = split(blks[k], bl, " ")
		for (i = 1; i <= nb; i++) {
			b = bl[i]; ts = ""; us = ""; rs = ""
			for (p = 1; p <= pairs; p++) {
				t = v[kk[1], kk[2], "TERN", p, b]; u = v[kk[1], kk[2], "UCX", p, b]
				if (t != "") ts = ts " " t
				if (u != "") us = us " " u
				if (t != "" && u != "" && u + 0 > 0) rs = rs " " t / u
			}
			z = v[kk[1], kk[2], "TERN_LOCAL0", 1, b]
			mu = med(us)
			zr = (z == "" || mu == "" || mu + 0 == 0) ? "" : z / mu
			printf "%10s %9s %9s %8s %15s %9s %8s\n", hsz(b), f(med(ts), 4), f(mu, 4),
				f(med(rs), 2), rs == "" ? "-" : "[" f(mn(rs), 2) "-" f(mx(rs), 2) "]",
				f(z, 4), f(zr, 2)
			w = kk[1] " batch " kk[2] " " hsz(b)
			if (rs != "" && med(rs) < 1) slow = slow "\n  median: " w " (" f(med(rs), 2) ")"
			else if (rs != "" && mn(rs) < 1) slow = slow "\n  one pair or more: " w " (min " f(mn(rs), 2) ")"
			if (zr != "" && zr < 1) slow0 = slow0 "\n  " w " (" f(zr, 2) ")"
		}
	}
	printf "\nWhere TERN was slower than UCX:%s\n", slow == "" ? " nowhere" : slow
	printf "Where TERN_LOCAL=0 was slower than UCX'"'"'s median:%s\n", slow0 == "" ? " nowhere" : slow0
	printf "\nCost per descriptor, batch 64 of 4 KiB: us per descriptor (nixlbench: Avg Lat.,\n"
	printf "the transfer time / 64; post: Avg Post / 64, inside postXferReq), median of the runs\n"
	printf "%6s %-26s %10s %10s\n", "op", "series", "us/desc", "post/desc"
	for (o = 1; o <= nk; o++) {
		k = order[o]; split(k, kk, SUBSEP)
		if (kk[2] != 64) continue
		for (s = 1; s <= 3; s++) {
			ser = s == 1 ? "TERN" : s == 2 ? "UCX" : "TERN_LOCAL0"
			ls = ""; ps = ""
			for (p = 1; p <= pairs; p++) {
				if ((kk[1], 64, ser, p, 4096) in lat) {
					ls = ls " " lat[kk[1], 64, ser, p, 4096]
					ps = ps " " post[kk[1], 64, ser, p, 4096] / 64
				}
			}
			lab = "nixlbench " (ser == "TERN_LOCAL0" ? "TERN, TERN_LOCAL=0" : ser)
			cost[kk[1], ser] = med(ls)
			printf "%6s %-26s %10s %10s\n", kk[1], lab, f(med(ls), 3), f(med(ps), 3)
		}
	}
	while ((getline line < tcsv) > 0) {
		split(line, a, ",")
		if (a[1] == "op") continue
		tb[a[1], a[2]] = tb[a[1], a[2]] " " (1 / a[4])
		if (!(a[1] in tops)) { tops[a[1]] = 1; topo[++nt] = a[1] }
	}
	for (o = 1; o <= nt; o++) {
		op = topo[o]
		for (l = 1; l >= 0; l--) {
			m = med(tb[op, l])
			printf "%6s %-26s %10s %10s\n", op, "tern bench, TERN_LOCAL=" l, f(m, 3), "-"
			if (m != "" && cost[op, l ? "TERN" : "TERN_LOCAL0"] != "")
				ratio[op, l] = cost[op, l ? "TERN" : "TERN_LOCAL0"] / m
		}
	}
	for (o = 1; o <= nt; o++) {
		op = topo[o]
		for (l = 1; l >= 0; l--)
			if ((op, l) in ratio)
				printf "%s, TERN_LOCAL=%d: through NIXL %.1fx tern bench'"'"'s time per descriptor\n", op, l, ratio[op, l]
	}
	printf "\nData check (--check_consistency, blocks 4 KiB-1 MiB x batches 1-64, 2-64 MiB x 1):\n"
	while ((getline line < chk) > 0) print "  " line
}' "$1/results.csv"
}
if [ -n "${TERN_NIXLBENCH_REPORT:-}" ]; then
	[ -f "$TERN_NIXLBENCH_REPORT/results.csv" ] ||
		die "no results.csv in $TERN_NIXLBENCH_REPORT"
	report "$TERN_NIXLBENCH_REPORT"
	exit 0
fi



# NIXL
prefix=${TERN_NIXLBENCH_PREFIX:-}
if [ -z "$prefix" ]; then
	# the newest complete build (.built), else any with a nixlbench
	for want in .built bin/nixlbench; do
		for d in /opt/nixl-*/ /opt/nixl/; do
			[ -e "$d$want" ] && [ -x "${d}bin/nixlbench" ] || continue
			if [ -z "$prefix" ] || [ "$d" -nt "$prefix" ]; then
				prefix=${d%/}
			fi
		done
		[ -n "$prefix" ] && break
	done
fi
[ -n "$prefix" ] && [ -x "$prefix/bin/nixlbench" ] ||
	die "no NIXL with bin/nixlbench (set TERN_NIXLBENCH_PREFIX)"
nixlbench=$prefix/bin/nixlbench
ucxso=$(find "$prefix/lib" -name libplugin_UCX.so -print -quit 2>/dev/null)
[ -n "$ucxso" ] || die "$prefix has no libplugin_UCX.so"
note "NIXL: $prefix"

# tern and the plugin
plugins=${TERN_NIXLBENCH_PLUGINS:-}
tern=${TERN_NIXLBENCH_TERN:-}
if [ -z "$plugins" ]; then
	b=$repo/build-nixlbench
	sh scripts/deps.sh demo >&2 || die "tern's build dependencies"
	note "tern and plugins/nixl: cmake -B $b -DTERN_NIXL=$prefix (Release, -j2)"
	{ cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Release -DTERN_BUILD_TESTS=OFF \
		-DTERN_NIXL="$prefix" &&
		cmake --build "$b" -j2 --target plugin_TERN tern-cli; } >"$b.log" 2>&1 ||
		{ tail -40 "$b.log" >&2; die "build failed ($b.log)"; }
	plugins=$b/nixl-plugins
	mkdir -p "$plugins"
	so=$(find "$b/plugins" -name libplugin_TERN.so -type f -print -quit)
	[ -n "$so" ] || die "the build made no libplugin_TERN.so"
	ln -sf "$so" "$plugins/libplugin_TERN.so"
	ln -sf "$ucxso" "$plugins/libplugin_UCX.so"
	[ -n "$tern" ] || tern=$b/tern
fi
[ -f "$plugins/libplugin_TERN.so" ] || die "no libplugin_TERN.so in $plugins"
if [ -z "$tern" ]; then
	so=$(readlink -f "$plugins/libplugin_TERN.so")
	for c in "$(dirname "$so")/../../tern" "$(dirname "$so")/../tern"; do
		[ -x "$c" ] && { tern=$(readlink -f "$c"); break; }
	done
fi
note "plugins: $plugins; tern CLI: ${tern:-none (no posting comparison)}"

out=${TERN_NIXLBENCH_OUT:-$repo/build-nixlbench/run-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out" || die "cannot make $out"
csv=$out/results.csv
echo "op,batch,series,pair,block,gbps,lat_us,post_us" >"$csv"
echo "$ucx_tls" >"$out/ucx_tls"
for batch in $batches; do
	echo "  batch $batch: $(batch_flags "$batch" | sed 's/--start_block_size [0-9]* //; s/--start_batch_size [0-9]* --max_batch_size [0-9]* //')"
done >"$out/flags.txt"
failed=0

# A free port on 127.0.0.1 (nobody listening: the first nixlbench must
# be the listener, rank 0, the initiator), then the next one up.
port=$((20000 + $$ % 20000))
listening() { grep -qi ":$(printf %04X "$1") 00000000:0000 0A" /proc/net/tcp; }
next_port() {
	port=$((port + 1))
	while listening "$port"; do port=$((port + 1)); done
}

# nb LOG ENV... -- FLAGS...: one nixlbench pair of processes; the
# initiator's log is LOG, the target's LOG.target. Returns 0 when both
# exit 0.
nb() {
	local log=$1 envs=() p0 p1 rc0=0 rc1=0
	shift
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	next_port
	local flags=(--runtime_type ASIO --asio_address 127.0.0.1
		--asio_port "$port" --initiator_seg_type DRAM
		--target_seg_type DRAM "$@")
	echo "env ${envs[*]} NIXL_PLUGIN_DIR=$plugins $nixlbench ${flags[*]}" >"$log.cmd"
	env "${envs[@]}" NIXL_PLUGIN_DIR="$plugins" \
		timeout "$tmo" "$nixlbench" "${flags[@]}" >"$log" 2>&1 &
	p0=$!
	for _ in $(seq 100); do
		listening "$port" && break
		kill -0 "$p0" 2>/dev/null || break
		sleep 0.1
	done
	env "${envs[@]}" NIXL_PLUGIN_DIR="$plugins" \
		timeout "$tmo" "$nixlbench" "${flags[@]}" >"$log.target" 2>&1 &
	p1=$!
	wait "$p0" || rc0=$?
	wait "$p1" || rc1=$?
	# nixlbench's ASIO runtime may throw at exit when the target closes
	# the socket first ("ASIO Read head failed: End of file", abort):
	# after its table, that is no failure of the run.
	if [ $rc0 -eq 134 ] && [ $rc1 -eq 0 ] &&
		grep -q "ASIO Read head failed: End of file" "$log"; then
		echo "nixl_compare: $log: nixlbench's ASIO runtime aborted at exit" \
			"(peer closed first); its table is complete" >&2
		rc0=0
	fi
	[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && return 0
	echo "nixl_compare: $log: exit $rc0 (initiator) / $rc1 (target)" >&2
	grep -h -i -m3 -E "error|fail|abort|unreachable" "$log" "$log.target" >&2
	return 1
}

# The table rows of an initiator's log: block batch GB/s lat prep p99prep
# post p99post tx p99tx.
rows() {
	awk 'NF == 10 && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ &&
		$3 ~ /^[0-9.]+$/ { print $1, $3, $4, $7 }' "$1"
}

# series OP BATCH SERIES PAIR ENV...: one run, its rows into results.csv
series() {
	local op=$1 batch=$2 ser=$3 pair=$4 be=TERN
	shift 4
	[ "$ser" = UCX ] && be=UCX
	local log=$out/$op-b$batch-$ser-p$pair.log
	# shellcheck disable=SC2046
	nb "$log" "$@" -- --backend "$be" --op_type "$op" \
		$(batch_flags "$batch") || failed=1
	rows "$log" | while read -r blk bw lat post; do
		echo "$op,$batch,$ser,$pair,$blk,$bw,$lat,$post"
	done >>"$csv"
	note "$op batch $batch $ser (pair $pair): $(rows "$log" | wc -l) sizes"
}

tern_env=(TERN_PROVIDER=shm TERN_LOCAL=1)
tern0_env=(TERN_PROVIDER=shm TERN_LOCAL=0)
ucx_env=(UCX_TLS="$ucx_tls")
for op in $ops; do
	for batch in $batches; do
		for p in $(seq "$pairs"); do
			if [ $((p % 2)) -eq 1 ]; then
				series "$op" "$batch" TERN "$p" "${tern_env[@]}"
				series "$op" "$batch" UCX "$p" "${ucx_env[@]}"
			else
				series "$op" "$batch" UCX "$p" "${ucx_env[@]}"
				series "$op" "$batch" TERN "$p" "${tern_env[@]}"
			fi
		done
		series "$op" "$batch" TERN_LOCAL0 1 "${tern0_env[@]}"
	done
done

# tern's own CLI: the same 4 KiB, 64 in flight
tcsv=$out/tern_bench.csv
echo "op,local,run,mpps" >"$tcsv"
if [ -n "$tern" ]; then
	for op in $ops; do
		o=$(echo "$op" | tr A-Z a-z)
		for p in $(seq "$pairs"); do
			for l in 1 0; do
				f=$out/tern-bench-$o-local$l-$p.csv
				TERN_LOCAL=$l timeout 300 "$tern" bench --provider shm \
					--op "$o" --sizes 4K --window 64 --iters 100000 \
					--csv "$f" >"$f.log" 2>&1 || { failed=1; continue; }
				awk -F, -v op="$op" -v l="$l" -v p="$p" \
					'NR == 2 { print op "," l "," p "," $8 }' "$f" >>"$tcsv"
			done
		done
	done
fi

# The data check
chk=$out/check.txt
: >"$chk"
if [ "${TERN_NIXLBENCH_CHECK:-1}" != 0 ]; then
	for ser in TERN TERN_LOCAL0 UCX; do
		case $ser in
		TERN) e=("${tern_env[@]}") be=TERN ;;
		TERN_LOCAL0) e=("${tern0_env[@]}") be=TERN ;;
		UCX) e=("${ucx_env[@]}") be=UCX ;;
		esac
		for op in $ops; do
			res=PASS
			for part in small large; do
				if [ $part = small ]; then
					r=(--start_block_size 4096 --max_block_size 1048576
						--start_batch_size 1 --max_batch_size 64
						--total_buffer_size 67108864)
				else
					r=(--start_block_size 2097152 --max_block_size 67108864
						--start_batch_size 1 --max_batch_size 1
						--total_buffer_size 67108864)
				fi
				log=$out/check-$op-$ser-$part.log
				# UCX says which lanes it took (its log, at info)
				li=()
				[ $ser = UCX ] && li=(UCX_LOG_LEVEL=info)
				nb "$log" "${e[@]}" "${li[@]}" -- --backend "$be" \
					--op_type "$op" "${r[@]}" --num_iter 4 \
					--warmup_iter 2 --large_blk_iter_ftr 1 \
					--check_consistency || res=FAIL
				grep -q -i "consistency check failed" "$log" "$log.target" && res=FAIL
				[ "$(rows "$log" | wc -l)" -gt 0 ] || res=FAIL
			done
			echo "$ser $op $res" >>"$chk"
			[ $res = PASS ] || failed=1
		done
	done
fi

# The report
report "$out"
note "done: logs and results.csv in $out"
[ $failed -eq 0 ] || { echo "nixl_compare: some runs failed (see above and $out)" >&2; exit 1; }
