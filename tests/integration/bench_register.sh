#!/bin/sh
# SPDX-License-Identifier: MIT
# tern bench --op register over a provider (TERN_LOCAL=0 from CTest) or the
# same-host path: the JSON holds the four measures of every size up to
# 64 GiB of untouched address space, each with finite, ordered figures;
# the cached measure is a cache hit (with TERN_MR_CACHE=0, not); --churn
# gives its three medians; the CSV is written; what --op register refuses
# exits 2. No speed is asserted.
# usage: bench_register.sh PROVIDER
set -u
prov=$1
node=""
[ "$prov" = tcp ] && node="--node 127.0.0.1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# shellcheck disable=SC2086
"$TERN" bench --provider "$prov" $node --op register --sizes 4K,1M,64G \
	--iters 30 --warmup 3 --churn 300 --json="$dir/r.json" \
	--csv "$dir/r.csv" >"$dir/r.txt" || {
	cat "$dir/r.txt"; echo "FAIL: tern bench --op register exited non-zero"; exit 1; }
python3 - "$dir/r.json" 1 <<'PY' || exit 1
import json, math, sys
r = json.load(open(sys.argv[1]))
cache = int(sys.argv[2])
c = r["context"]
assert c["op"] == "register" and c["pages"] == "untouched", c
assert c["iters"] == 30 and c["warmup"] == 3 and c["write_bytes"] == 4096, c
assert c["reg_cache"] == cache, c
assert c["command"].startswith("tern bench --provider "), c
assert c["churn_cycles"] == 300, c
for k in ("churn_start_us", "churn_middle_us", "churn_end_us"):
    assert math.isfinite(c[k]) and c[k] > 0, (k, c)
want = [(s, m) for s in (4096, 1 << 20, 64 << 30)
        for m in ("cold", "cached", "first-write", "second-write")]
got = [(p["size"], p["measure"]) for p in r["results"]]
assert got == want, (got, want)
for p in r["results"]:
    v = [p[k] for k in ("lat_min_us", "lat_p50_us", "lat_p99_us",
                        "lat_max_us")]
    assert all(math.isfinite(x) and x > 0 for x in v), p
    assert v == sorted(v), p
    assert p["ops"] == 30, p
    assert "gbps" not in p, p
print("json ok:", len(r["results"]), "points")
PY
[ "$(head -n 1 "$dir/r.csv")" = "size,measure,ops,lat_min_us,lat_p50_us,lat_p99_us,lat_max_us" ] &&
	[ "$(wc -l <"$dir/r.csv")" -eq 13 ] || {
	cat "$dir/r.csv"; echo "FAIL: csv"; exit 1; }
grep -q "pages untouched" "$dir/r.txt" && grep -q "^   64 GiB  cold " "$dir/r.txt" ||
	{ cat "$dir/r.txt"; echo "FAIL: the table"; exit 1; }
# The cache off: the cached measure registers apart, and says so.
# shellcheck disable=SC2086
TERN_MR_CACHE=0 "$TERN" bench --provider "$prov" $node --op register \
	--sizes 1M --iters 5 --json="$dir/o.json" >"$dir/o.txt" || {
	cat "$dir/o.txt"; echo "FAIL: with TERN_MR_CACHE=0"; exit 1; }
python3 - "$dir/o.json" <<'PY' || exit 1
import json, sys
c = json.load(open(sys.argv[1]))["context"]
assert c["reg_cache"] == 0 and c["churn_cycles"] == 0, c
assert c["churn_start_us"] is None, c
PY
grep -q "registered apart (the cache is off" "$dir/o.txt" ||
	{ cat "$dir/o.txt"; echo "FAIL: the table does not say the cache is off"; exit 1; }
# What it refuses, before anything runs.
for bad in "--verify" "--window 8" "--duration 1" "--mem shared" \
	"--implicit" "--plot $dir/x.svg" "--sizes 65G"; do
	# shellcheck disable=SC2086
	"$TERN" bench --provider "$prov" --op register $bad >/dev/null 2>&1
	rc=$?
	[ $rc -eq 2 ] || { echo "FAIL: --op register $bad: exit $rc, not 2"; exit 1; }
done
"$TERN" bench --provider "$prov" --churn 10 >/dev/null 2>&1
[ $? -eq 2 ] || { echo "FAIL: --churn without --op register"; exit 1; }
"$TERN" bench --provider "$prov" --sizes 2G >/dev/null 2>&1
[ $? -eq 2 ] || { echo "FAIL: --sizes 2G for writes"; exit 1; }
echo "PASS: tern bench --op register over $prov"
