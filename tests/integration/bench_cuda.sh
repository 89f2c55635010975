#!/bin/sh
# SPDX-License-Identifier: MIT
# `tern bench --mem/--peer-mem` with GPU memory.
# usage: bench_cuda.sh PROVIDER OP   a short --verify run, CUDA on both
#                                    sides (the fake driver: set
#                                    TERN_FAKE_CUDA=1); the JSON must say
#                                    "cuda staged" and verified each size
#        bench_cuda.sh PROVIDER OP gpu  the same on a real GPU (skips,
#                                    77, where `tern info` finds no CUDA)
#        bench_cuda.sh PROVIDER refuse  what must be refused, with the
#                                    reason (fake driver too)
#        bench_cuda.sh PROVIDER nocuda  --mem cuda without CUDA: a clear
#                                    error (skips, 77, where CUDA is real)
set -u
prov=$1 what=$2 driver=${3:-fake}
node=""
[ "$prov" = tcp ] && node="--node 127.0.0.1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# expect_fail WANTED-TEXT ARGS...: tern bench ARGS must exit non-zero and
# say WANTED-TEXT on stderr.
expect_fail() {
	want=$1
	shift
	if "$TERN" bench "$@" >"$dir/out" 2>"$dir/err"; then
		echo "FAIL: tern bench $* succeeded"
		exit 1
	fi
	grep -qF -- "$want" "$dir/err" || {
		echo "FAIL: tern bench $*: no '$want' in:"
		cat "$dir/err"
		exit 1
	}
	echo "ok: tern bench $*: $(head -n 1 "$dir/err")"
}

case $what in
nocuda)
	unset TERN_FAKE_CUDA
	expect_fail "--mem 'gpu': expected host, shared, cuda or cuda:N" \
		--provider "$prov" --mem gpu
	expect_fail "--peer-mem 'cuda:x': expected host, shared, cuda or cuda:N" \
		--provider "$prov" --peer-mem cuda:x
	# shellcheck disable=SC2086
	if "$TERN" bench --provider "$prov" $node --mem cuda --sizes 4K \
		--iters 10 >"$dir/out" 2>"$dir/err"; then
		echo "SKIP: CUDA is available here"
		exit 77
	fi
	grep -qF -- "tern bench: --mem cuda: CUDA not available: " \
		"$dir/err" || {
		echo "FAIL: --mem cuda without CUDA said:"
		cat "$dir/err"
		exit 1
	}
	echo "ok: $(cat "$dir/err")"
	# shellcheck disable=SC2086
	expect_fail "--peer-mem cuda:0: CUDA not available: " \
		--provider "$prov" $node --peer-mem cuda:0 --sizes 4K \
		--iters 10
	echo "PASS: tern bench without CUDA over $prov"
	exit 0
	;;
refuse)
	[ -n "${TERN_FAKE_CUDA:-}" ] || {
		echo "FAIL: set TERN_FAKE_CUDA=1"
		exit 1
	}
	expect_fail "--mem cuda:1: no such device (1 CUDA device)" \
		--provider "$prov" --mem cuda:1
	expect_fail "--peer-mem sets the local peer's memory" \
		--provider "$prov" --listen --peer-mem cuda
	# shellcheck disable=SC2086
	expect_fail "--op atomic needs host memory on the target, or a provider with FI_HMEM" \
		--provider "$prov" $node --op atomic --peer-mem cuda \
		--iters 10
	echo "PASS: tern bench refuses what it cannot do over $prov"
	exit 0
	;;
esac

op=$what
if [ "$driver" = gpu ]; then
	unset TERN_FAKE_CUDA
	"$TERN" info >"$dir/info" 2>&1
	if grep -q "^CUDA not available" "$dir/info"; then
		echo "SKIP: $(grep "^CUDA not available" "$dir/info")"
		exit 77
	fi
else
	[ -n "${TERN_FAKE_CUDA:-}" ] || {
		echo "FAIL: set TERN_FAKE_CUDA=1"
		exit 1
	}
fi
# shellcheck disable=SC2086
"$TERN" bench --provider "$prov" $node --op "$op" --mem cuda \
	--peer-mem cuda --sizes 4K,1M --iters 50 --warmup 5 --window 16 \
	--verify --json="$dir/b.json" >"$dir/out" || {
	cat "$dir/out"
	echo "FAIL: tern bench exited non-zero"
	exit 1
}
grep -q "^  memory  *local cuda:0 (cuda staged), peer cuda:0 (cuda staged)$" \
	"$dir/out" || {
	cat "$dir/out"
	echo "FAIL: no memory line in the table"
	exit 1
}
python3 - "$dir/b.json" "$op" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
c = r["context"]
assert c["op"] == sys.argv[2], c
for side in ("local", "peer"):
    assert c["mem_" + side] == "cuda:0", c
    assert c["path_" + side] == "cuda staged", c
got = [p["size"] for p in r["results"]]
assert got == [4096, 1048576], got
for p in r["results"]:
    assert p["ops"] == 50, p
    assert p["verified"] == 1, p
print("json ok:", len(r["results"]), "sizes, cuda staged on both sides")
PY
echo "PASS: tern bench --op $op --mem cuda --peer-mem cuda over $prov ($driver driver)"
