#!/bin/sh
# SPDX-License-Identifier: MIT
# A short `tern bench` with --verify over a provider; the JSON must parse
# and hold every size with positive, finite figures; CSV and SVG must be
# written. No speed is asserted.
# usage: bench.sh PROVIDER OP
set -u
prov=$1 op=$2
node=""
[ "$prov" = tcp ] && node="--node 127.0.0.1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sizes=8,4K,64K,1M
[ "$op" = atomic ] && sizes=8
# shellcheck disable=SC2086
"$TERN" bench --provider "$prov" $node --op "$op" --sizes $sizes \
	--iters 300 --warmup 30 --window 16 --verify \
	--json="$dir/b.json" --csv "$dir/b.csv" --plot "$dir/b.svg" || {
	echo "FAIL: tern bench exited non-zero"; exit 1; }
python3 - "$dir/b.json" "$op" <<'PY' || exit 1
import json, math, sys
r = json.load(open(sys.argv[1]))
op = sys.argv[2]
want = [8] if op == "atomic" else [8, 4096, 65536, 1048576]
c = r["context"]
assert c["op"] == op and c["provider"] and c["tern_version"], c
# the command line for the record, as typed
assert c["command"].startswith("tern bench --provider "), c["command"]
# busy polling by default, as raw libfabric benchmarks do; --warmup as given
assert c["wait_fd"] == 0 and c["warmup"] == 30, c
got = [p["size"] for p in r["results"]]
assert got == want, (got, want)
for p in r["results"]:
    for k in ("gbps", "gBps", "mpps", "lat_min_us", "lat_p50_us",
              "lat_p99_us", "lat_p999_us", "lat_max_us", "seconds"):
        v = p[k]
        assert isinstance(v, (int, float)) and math.isfinite(v) and v > 0, (k, v)
    assert p["lat_min_us"] <= p["lat_p50_us"] <= p["lat_p99_us"] <= p["lat_max_us"], p
    assert p["ops"] == 300, p
    assert p["verified"] == 1, p
print("json ok:", len(r["results"]), "sizes")
PY
[ "$(head -n 1 "$dir/b.csv" | cut -d, -f1)" = size ] || { echo "FAIL: csv header"; exit 1; }
grep -q '</svg>' "$dir/b.svg" || { echo "FAIL: svg"; exit 1; }
if [ "$op" = write ]; then
	# --wait-fd: completion queues with wait fds where the provider has
	# them (tcp; shm in libfabric 1.17 has none), both sides, still exact
	# shellcheck disable=SC2086
	"$TERN" bench --provider "$prov" $node --sizes 8,64K --iters 300 \
		--window 16 --verify --wait-fd --json="$dir/w.json" >"$dir/w.txt" || {
		echo "FAIL: tern bench --wait-fd exited non-zero"; exit 1; }
	python3 - "$dir/w.json" "$prov" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
c = r["context"]
assert c["wait_fd"] == (1 if sys.argv[2] == "tcp" else 0), c
assert c["warmup"] == 30, c  # a tenth of --iters
assert [p["verified"] for p in r["results"]] == [1, 1], r["results"]
PY
	grep -q "completion .*wait fds\|completion .*busy polling" "$dir/w.txt" ||
		{ echo "FAIL: the table does not say how completions were waited for"; exit 1; }
	# a paced target (TERN_BENCH_TARGET_PAUSE, as compare.sh sets it)
	# still serves every write and the control exchange, exactly
	# shellcheck disable=SC2086
	TERN_BENCH_TARGET_PAUSE=300 "$TERN" bench --provider "$prov" $node \
		--sizes 8,1M --iters 200 --window 16 --verify \
		--json="$dir/p.json" >/dev/null || {
		echo "FAIL: tern bench with a paced target exited non-zero"; exit 1; }
	python3 - "$dir/p.json" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
assert [p["verified"] for p in r["results"]] == [1, 1], r["results"]
assert [p["ops"] for p in r["results"]] == [200, 200], r["results"]
PY
	# a pause that is not a number: said once, then the default
	# shellcheck disable=SC2086
	TERN_BENCH_TARGET_PAUSE=abc "$TERN" bench --provider "$prov" $node \
		--sizes 8,4K --iters 100 >/dev/null 2>"$dir/p.err" || {
		cat "$dir/p.err"; echo "FAIL: a bad TERN_BENCH_TARGET_PAUSE stopped the run"; exit 1; }
	[ "$(grep -c 'ignoring TERN_BENCH_TARGET_PAUSE=abc' "$dir/p.err")" -eq 1 ] || {
		cat "$dir/p.err"; echo "FAIL: a bad TERN_BENCH_TARGET_PAUSE is not said once"; exit 1; }
fi
echo "PASS: tern bench --op $op over $prov"
