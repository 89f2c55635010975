#!/bin/sh
# SPDX-License-Identifier: MIT
# bench/raw, the reference loop, end to end over a provider: writes at a
# few sizes (with its fabric handshake, with --target-pause, with
# --no-handshake) and a ping-pong must print
# one line per size with positive finite figures; bad options must be
# refused. No speed is asserted.
# usage: raw.sh PROVIDER   ($TERN is the tern binary of the build)
set -u
prov=$1
raw=$(dirname "$TERN")/raw
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { cat "$tmp/out" 2>/dev/null; echo "FAIL: $*"; exit 1; }
node=""
[ "$prov" = tcp ] && node="--node 127.0.0.1"

# check KEYS SIZES: one line per size, each KEY positive and finite
check() {
	for size in $2; do
		line=$(grep "size=$size " "$tmp/out") || fail "no line for $size B"
		echo "$line" | awk -v keys="$1" '
		{
			for (i = split(keys, k, " "); i > 0; i--) {
				v = ""
				for (j = 1; j <= NF; j++) { split($j, f, "="); if (f[1] == k[i]) v = f[2] }
				if (v == "" || !(v + 0 > 0) || v + 0 > 1e9) { print k[i] " not positive and finite: " v; bad = 1 }
			}
		}
		END { exit bad }' || fail "bad figures for $size B"
	done
}

for extra in "--target-pause 0" "--target-pause 50" "--no-handshake"; do
	# shellcheck disable=SC2086
	timeout 60 "$raw" --provider "$prov" $node --op write --sizes 8,4K,64K \
		--iters 300 --warmup 30 $extra >"$tmp/out" 2>&1 ||
		fail "raw write ($extra) exited $?"
	cat "$tmp/out"
	check "gbps mpps" "8 4096 65536"
done
# shellcheck disable=SC2086
timeout 60 "$raw" --provider "$prov" $node --op pingpong --tagged --sizes 8 \
	--iters 300 --warmup 30 >"$tmp/out" 2>&1 || fail "raw pingpong exited $?"
cat "$tmp/out"
check "p50_us" "8"
# refused, with the usage
for a in "--target-pause -1" "--target-pause 2000000" "--target-pause x" \
	"--window 0" "--op bogus" "--sizes 0"; do
	# shellcheck disable=SC2086
	if "$raw" --provider "$prov" $node --op write $a >"$tmp/out" 2>&1; then
		fail "raw accepted '$a'"
	fi
	grep -q "usage: raw" "$tmp/out" || fail "no usage for '$a'"
done
echo "raw ok"
