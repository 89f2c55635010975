#!/bin/sh
# SPDX-License-Identifier: MIT
# tern bench --world and tern ping --world with 4 ranks in a file world
# (a shared directory), over PROVIDER: rank 0 must print a 4 x 4 matrix
# whose 12 pairs all ran, every byte verified, and the JSON must hold it.
# usage: world_bench.sh shm|tcp
set -u
prov=$1
n=4
dir=$(mktemp -d)
pids=""
trap 'for p in $pids; do kill -9 $p 2>/dev/null; done; rm -rf "$dir"' EXIT
node=""
[ "$prov" = tcp ] && node="--node 127.0.0.1"
fail=0

# run NAME ARGS...: start ranks 0..n-1 of `$TERN ARGS --world file:DIR`,
# logs in $dir/NAME.R; fail unless all exit 0 within 90 s.
run() {
	name=$1
	shift
	mkdir -p "$dir/$name.w"
	pids=""
	r=0
	while [ $r -lt $n ]; do
		# shellcheck disable=SC2086
		TERN_WORLD_RANK=$r TERN_WORLD_SIZE=$n "$TERN" "$@" \
			--provider "$prov" $node --world "file:$dir/$name.w" \
			>"$dir/$name.$r" 2>&1 &
		pids="$pids $!"
		r=$((r + 1))
	done
	r=0
	for p in $pids; do
		if ! wait "$p"; then
			echo "FAIL: $name rank $r exited non-zero:"
			cat "$dir/$name.$r"
			fail=1
		fi
		r=$((r + 1))
	done
	pids=""
	cat "$dir/$name.0"
}

run a2a bench --sizes 8,4K,1M -n 50 --verify --json="$dir/a2a.json"
# 3 sizes, each a matrix of 4 rows, each row 3 figures and a "-"
rows=$(grep -cE '^ +[0-3]( +([0-9]+\.[0-9]+|-)){4}$' "$dir/a2a.0")
[ "$rows" -eq 12 ] || { echo "FAIL: $rows matrix rows, not 12"; fail=1; }
v=$(grep -c 'verified: every byte of every pair' "$dir/a2a.0")
[ "$v" -eq 3 ] || { echo "FAIL: verified at $v of 3 sizes"; fail=1; }
python3 - "$dir/a2a.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["world"] == {"kind": "file", "ranks": 4}, d["world"]
assert [r["size"] for r in d["results"]] == [8, 4096, 1048576]
for r in d["results"]:
    m = r["matrix"]
    assert len(m) == 4 and all(len(x) == 4 for x in m)
    for i in range(4):
        for j in range(4):
            assert (m[i][j] is None) == (i == j), (i, j, m)
            assert i == j or m[i][j] > 0, (i, j, m)
    assert r["verified"] is True and r["min"] <= r["median"] <= r["max"]
print("json: 3 sizes of 4 x 4, all verified")
PY

run ping ping -n 200
rows=$(grep -cE '^ +[0-3]( +([0-9]+\.[0-9]+|-)){4}$' "$dir/ping.0")
[ "$rows" -eq 4 ] || { echo "FAIL: $rows latency rows, not 4"; fail=1; }

# A wrong world is refused, naming the value.
out=$(TERN_WORLD_RANK=0 TERN_WORLD_SIZE=1 "$TERN" bench --world file:"$dir/one" \
	--provider "$prov" $node 2>&1)
echo "$out" | grep -q "a world of 1 ranks" ||
	{ echo "FAIL: a 1-rank world: $out"; fail=1; }
out=$("$TERN" bench --world file:"$dir/x" --listen 2>&1)
echo "$out" | grep -q -- "--world finds its peers" ||
	{ echo "FAIL: --world with --listen: $out"; fail=1; }
[ $fail -eq 0 ] && echo "OK: world bench and ping over $prov"
exit $fail
