#!/bin/sh
# SPDX-License-Identifier: MIT
# guest-suite.sh: tern's tests over libfabric's verbs provider (RDM over
# verbs;ofi_rxm) on Soft-RoCE, run INSIDE the tern-vm guest (run-vm.sh);
# both processes of every pair run in the guest. Never asserts on timing.
#
# usage (in the guest): guest-suite.sh BUILD-DIR TEST...
#        guest-suite.sh --list
# Each test's output is framed for the host side (ctest-vm.sh):
#   @@tern-vm-test NAME@@ ... @@tern-vm-result NAME RC SECONDS@@
# RC 0 passed, 77 skipped (the reason is printed), anything else failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
it=$(cd "$here/../integration" && pwd)
prov=verbs
dev=rxe0
ip=192.0.2.1
limit=${TERN_VM_TEST_LIMIT:-240} # seconds per test

all="info libs demo demo_odd hw_demo serve_fill hostile regress stripe mr_chunk
 ops_read ops_fadd ops_cswap ops_sendimm ops_pieces ops_access
 ping_send ping_write atomic atomic_churn
 bench_write bench_writedata bench_read bench_send bench_atomic
 verbs_write_imm siw_info"
if [ "${1:-}" = --list ]; then
	echo $all
	exit 0
fi

one= # guest-suite.sh --one BUILD NAME: run one test (internal)
if [ "$1" = --one ]; then
	one=$3
	set -- "$2"
fi
build=$1
shift
export TERN="$build/tern" HOSTILE="$build/tests/integration/hostile"
# These tests are about verbs: both processes of a pair share the guest,
# where the same-host path (docs/local.md) would carry them instead.
export TERN_LOCAL=0
ops="$build/tests/integration/ops"
example="$build/examples/verbs_write_imm"

# --- the tests (each runs in its own shell, output to stdout) ---------------

t_info() {
	rdma link show
	ibv_devices
	ibv_devinfo -d $dev | grep -E 'hca_id|transport|state|active_mtu|link_layer'
	"$TERN" info --provider $prov || return 1
	out=$("$TERN" info --provider $prov --json) || return 1
	echo "$out" | grep -q "\"domain\": \"$dev\"" ||
		{ echo "FAIL: tern info shows no $dev domain"; return 1; }
	echo "$out" | grep -q '"usable": true' ||
		{ echo "FAIL: tern does not find $prov usable"; return 1; }
	echo "PASS: tern info shows $dev, usable"
}

t_libs() {
	fail=0
	for f in "$build"/tern "$build"/libtern.so.* "$build"/tests/integration/* \
		"$build"/examples/*; do
		[ -f "$f" ] && [ ! -L "$f" ] && [ -x "$f" ] || continue
		missing=$(/lib64/ld-linux-x86-64.so.2 --list "$f" 2>&1 | grep 'not found')
		if [ -n "$missing" ]; then
			echo "FAIL: $f: $missing"
			fail=1
		else
			echo "ok: $f loads"
		fi
	done
	return $fail
}

t_demo() { sh "$it/demo.sh" --provider $prov; }
t_demo_odd() { sh "$it/demo.sh" --provider $prov --page-size 3000 --pages 37 --count 3; }
t_hw_demo() { sh "$it/hw.sh" $prov; }
t_hostile() { sh "$it/hostile.sh" $prov; }
t_regress() { "$build/tests/integration/regress" $prov; }
t_stripe() { "$build/tests/integration/stripe" $prov 2; }
# A region registered in chunks of 1 MiB over verbs (mr_chunk.c): every
# operation across the chunks, byte by byte.
t_mr_chunk() {
	TERN_MR_CHUNK=1M "$build/tests/integration/mr_chunk" --provider $prov \
		--size 32M --chunk 1M --expect-chunks 32
}

# `tern fill --listen` serving two `tern fill` clients one after the other.
# shellcheck disable=SC2154 # $dir and $src come from lib.sh
t_serve_fill() {
	# shellcheck source=../integration/lib.sh
	. "$it/lib.sh"
	start_server fill --listen
	fail=0
	"$TERN" fill --provider $prov --card-file "$dir/card" --page-size 64K \
		--pages 32 --seed 7 --count 2 || fail=1
	"$TERN" fill --provider $prov --card-file "$dir/card" --page-size 1M \
		--pages 4 --seed 9 || fail=1
	stop_server
	echo "--- server log"
	cat "$dir/server.log"
	[ $src -eq 0 ] || { echo "FAIL: server exited $src"; fail=1; }
	grep -q "served 2 session(s), 3 fill(s)" "$dir/server.log" ||
		{ echo "FAIL: expected 2 sessions, 3 fills"; fail=1; }
	[ $fail -eq 0 ] && echo "PASS: tern fill --listen + tern fill over $prov"
	return $fail
}

t_ops() { "$ops" --provider $prov "$1"; }
t_ops_read() { t_ops read; }
t_ops_fadd() { t_ops fadd; }
t_ops_cswap() { t_ops cswap; }
t_ops_sendimm() { t_ops sendimm; }
t_ops_pieces() { t_ops pieces; }
t_ops_access() { t_ops access; }

t_ping_send() {
	sh "$it/pair.sh" $prov ping "^ +4096 +[0-9.]+ +[0-9.]+" \
		--sizes 8,4K,64K --iters 100 --warmup 10
}
t_ping_write() {
	sh "$it/pair.sh" $prov ping "^ +65536 +[0-9.]+ +[0-9.]+" \
		--mode write --sizes 8,4K,64K --iters 100 --warmup 10
}
t_atomic() { sh "$it/pair.sh" $prov atomic "^atomic: OK" --clients 4 --reps 250; }

# Clients that leave one after the other must never take the server (or
# themselves) down. libfabric's rxm over verbs crashed closing a connection
# while a flow-control credit from the peer was still queued; tern now
# progresses a while before its endpoints close (src/engine/ctx.c,
# TERN_VERBS_LINGER_MS; 0 brings the crash back).
# A worker of `tern atomic --clients 1 --reps R` sends 1 HELLO, R
# fetch-adds, 4 atomics per lock round (R/10 rounds) and a BYE; the server
# returns credits once 64 of a connection's 128 receive buffers are used.
# R = 38..52 moves that spot across the goodbye: without the fix, R = 45
# crashed on every boot tried (3 of 3).
t_atomic_churn() {
	# shellcheck source=../integration/lib.sh
	. "$it/lib.sh"
	start_server atomic --listen
	fail=0 total=0 runs=0
	for r in $(seq "${TERN_CHURN_FROM:-38}" "${TERN_CHURN_TO:-52}"); do
		if ! "$TERN" atomic --card-file "$dir/card" --provider $prov \
			--clients 1 --reps "$r" >"$dir/c.log" 2>&1; then
			cat "$dir/c.log"
			echo "FAIL: client run $r (--reps $r) exited non-zero"
			fail=1
			break
		fi
		total=$((total + r)) runs=$((runs + 1))
		kill -0 "$spid" 2>/dev/null ||
			{ echo "FAIL: the server died after client run $r"; fail=1; break; }
	done
	stop_server
	echo "--- server log"
	cat "$dir/server.log"
	[ $src -eq 0 ] || { echo "FAIL: server exited $src"; fail=1; }
	grep -q "counter $total," "$dir/server.log" ||
		{ echo "FAIL: the server's counter is not $total"; fail=1; }
	[ $fail -eq 0 ] && echo "PASS: $runs atomic clients came and went over $prov"
	return $fail
}

# A short `tern bench --verify`; the CSV must hold every size, every
# operation done and verified. No speed is asserted.
t_bench() {
	op=$1
	sizes=8,4K,64K,1M want="8 4096 65536 1048576"
	[ "$op" = atomic ] && sizes=8 want=8
	d=$(mktemp -d)
	"$TERN" bench --provider $prov --op "$op" --sizes $sizes --iters 40 \
		--warmup 8 --window 8 --verify --csv "$d/b.csv" ||
		{ echo "FAIL: tern bench exited non-zero"; return 1; }
	got=$(awk -F, 'NR > 1 && $2 == 40 && $15 == 1 { printf "%s ", $1 }' "$d/b.csv")
	rm -rf "$d"
	[ "$got" = "$want " ] ||
		{ echo "FAIL: sizes done and verified: '$got', want '$want'"; return 1; }
	echo "PASS: tern bench --op $op --verify over $prov"
}
t_bench_write() { t_bench write; }
t_bench_writedata() { t_bench writedata; }
t_bench_read() { t_bench read; }
t_bench_send() { t_bench send; }
t_bench_atomic() { t_bench atomic; }

# The raw-verbs example: RC queue pairs on rxe0, addressed by the GID of
# 192.0.2.1; the exchange of QPN/GID/rkey/address goes over TCP.
t_verbs_write_imm() {
	[ -x "$example" ] || { echo "SKIP: $example not built (no libibverbs-dev)"; return 77; }
	log=$(mktemp)
	"$example" --device $dev >"$log" 2>&1 &
	spid=$!
	"$example" --device $dev $ip
	crc=$?
	wait $spid
	src=$?
	echo "--- server"
	cat "$log"
	rm -f "$log"
	[ $crc -eq 0 ] && [ $src -eq 0 ] ||
		{ echo "FAIL: client exited $crc, server $src"; return 1; }
	echo "PASS: verbs_write_imm over $dev"
}

# soft-iWARP, where the guest has it (siw.ko built: TERN_VM_SIW=1). iWARP
# has no immediate data, so tern must show siw0 and refuse it for that reason.
t_siw_info() {
	[ -e /sys/class/infiniband/siw0 ] || {
		echo "SKIP: no siw0 in this guest: Debian's kernel has no siw.ko;" \
			"TERN_VM_SIW=1 builds one (docs/vm.md)"
		return 77
	}
	rdma link show
	ibv_devinfo -d siw0 | grep -E 'hca_id|transport|state|atomic_cap'
	FI_VERBS_DEVICE_NAME=siw0 "$TERN" info --provider $prov --all
	out=$(FI_VERBS_DEVICE_NAME=siw0 "$TERN" info --provider $prov --all --json)
	echo "$out" | grep -q '"domain": "siw0"' ||
		{ echo "FAIL: tern info shows no siw0 domain"; return 1; }
	echo "$out" | grep '"domain": "siw0"' | grep -q '"usable": false.*remote CQ data' ||
		{ echo "FAIL: tern should refuse siw0 (no remote CQ data on iWARP)"; return 1; }
	echo "PASS: tern info shows siw0 and why it cannot carry tern's immediates"
}

# --- runner -------------------------------------------------------------------

if [ -n "$one" ]; then
	"t_$one"
	exit $?
fi
[ $# -gt 0 ] || set -- $all
pass=0 fail=0 skip=0
for name in "$@"; do
	case " $(echo $all) " in
	*" $name "*) ;;
	*)
		echo "@@tern-vm-test $name@@"
		echo "FAIL: no test named $name in $0"
		echo "@@tern-vm-result $name 1 0@@"
		fail=$((fail + 1))
		continue
		;;
	esac
	echo "@@tern-vm-test $name@@"
	s=$(date +%s)
	timeout -s KILL $limit sh "$0" --one "$build" "$name" 2>&1
	rc=$?
	[ $rc -eq 137 ] && echo "FAIL: killed after $limit s"
	echo "@@tern-vm-result $name $rc $(($(date +%s) - s))@@"
	case $rc in
	0) pass=$((pass + 1)) ;;
	77) skip=$((skip + 1)) ;;
	*) fail=$((fail + 1)) ;;
	esac
done
echo "guest: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
