#!/bin/sh
# SPDX-License-Identifier: MIT
# tern bench --batch (each window one tern_write_pieces() or
# tern_read_pieces() of --window pieces, one request), every byte
# verified, so that the option cannot silently break:
#   fabric  over the provider (run with TERN_LOCAL=0): write, writedata
#           (TERN_PIECES_IMM) and read, windows that do not divide the
#           warm-up or the iterations; --duration
#   local   over the same-host path: write, writedata and read into the
#           peer's shared memory and its plain memory (cross-memory attach)
# and in both what is refused (exit 2, naming --batch). The JSON must say
# the model and the path and count every operation; the CSV's last column
# is the model. No speed is asserted.
# usage: bench_batch.sh PROVIDER fabric|local
set -u
prov=$1 mode=$2
: "${TERN:?TERN: the tern binary}"
node=""
[ "$prov" = tcp ] && node="--node 127.0.0.1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0

# check JSON ROUTE OPS SIZES...: what a run's JSON must hold
check() {
	python3 - "$@" <<'PY'
import json, math, sys
f, route, ops = sys.argv[1:4]
want = [int(s) for s in sys.argv[4:]]
r = json.load(open(f))
c = r["context"]
assert c["model"] == "batch", ("model", c["model"])
assert c["route"] == route, ("route", c["route"], route)
got = [p["size"] for p in r["results"]]
assert got == want, (got, want)
for p in r["results"]:
    for k in ("gbps", "mpps", "lat_min_us", "lat_p50_us", "lat_max_us",
              "seconds", "cold_us"):
        v = p[k]
        assert isinstance(v, (int, float)) and math.isfinite(v) and v > 0, (k, v)
    assert p["lat_min_us"] <= p["lat_p50_us"] <= p["lat_max_us"], p
    if ops == "any":
        assert p["ops"] > 0, p
    else:
        assert p["ops"] == int(ops), p
    assert p["verified"] == 1, p
PY
}

# run NAME EXPECT-ROUTE OPS SIZES ARGS...: one verified run, checked
run() {
	name=$1 route=$2 ops=$3 sizes=$4
	shift 4
	rm -f "$dir/b.json" "$dir/b.csv"
	# shellcheck disable=SC2086
	if ! "$TERN" bench --provider "$prov" $node --batch --verify \
		--sizes "$sizes" --json="$dir/b.json" --csv "$dir/b.csv" "$@" \
		>"$dir/out" 2>&1; then
		echo "FAIL: $name: tern bench exited non-zero:"
		cat "$dir/out"
		fail=1
		return
	fi
	# shellcheck disable=SC2046
	if ! check "$dir/b.json" "$route" "$ops" \
		$(echo "$sizes" | sed 's/4K/4096/g; s/1M/1048576/g; s/,/ /g') ||
		! grep -q '^  model  *batch' "$dir/out" ||
		[ "$(tail -n 1 "$dir/b.csv" | awk -F, '{ print $NF }')" != batch ]; then
		echo "FAIL: $name:"
		cat "$dir/out"
		fail=1
		return
	fi
	echo "ok: $name"
}

# refused NAME ARGS...: exit 2, and the message names --batch (an
# accepted --listen would serve until killed: 20 s at most)
refused() {
	name=$1
	shift
	# shellcheck disable=SC2086
	timeout 20 "$TERN" bench --provider "$prov" $node --batch "$@" \
		>"$dir/out" 2>&1
	rc=$?
	if [ $rc -ne 2 ] || ! grep -q -- "--batch" "$dir/out"; then
		echo "FAIL: $name: exit $rc (want 2, naming --batch):"
		cat "$dir/out"
		fail=1
	else
		echo "ok: $name refused: $(head -n 1 "$dir/out")"
	fi
}

case $mode in
fabric)
	# 300 timed and 30 warm-up operations in windows of 16: both end on
	# a shorter batch.
	for op in write writedata read; do
		run "$op over $prov (provider)" provider 300 8,4K,1M \
			--op "$op" --iters 300 --warmup 30 --window 16
	done
	run "--duration over $prov (provider)" provider any 4K \
		--op write --duration 0.2 --window 8
	;;
local)
	for mem in shared host; do
		for op in write writedata read; do
			run "$op into $mem memory over the local path" \
				"same host (local path)" 300 8,4K,1M \
				--op "$op" --mem shared --peer-mem "$mem" \
				--iters 300 --warmup 30 --window 16
		done
	done
	;;
*)
	echo "usage: bench_batch.sh PROVIDER fabric|local" >&2
	exit 2
	;;
esac
refused "--op send" --op send
refused "--op atomic" --op atomic
refused "--listen" --listen
refused "--world" --world file:"$dir/w"
# Both models at once: the message names both.
refused "--implicit" --implicit
grep -q -- "--implicit" "$dir/out" ||
	{ echo "FAIL: --batch --implicit does not name --implicit"; fail=1; }
[ $fail -eq 0 ] && echo "PASS: tern bench --batch over $prov ($mode)"
exit $fail
