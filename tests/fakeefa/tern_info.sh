#!/bin/sh
# SPDX-License-Identifier: MIT
# `tern info` over the fake efa provider: both fabrics of each of the 4
# fake NICs are listed, efa-direct first, with the p5 figures.
set -eu
TERN=$1
out=$(TERN_FAKEEFA_PROFILE=both "$TERN" info 2>&1)
printf '%s\n' "$out"
fail() { echo "tern_info.sh: FAILED: $*" >&2; exit 1; }
for d in rdmap16s27 rdmap32s27 rdmap48s27 rdmap64s27; do
	for f in efa-direct efa; do
		printf '%s\n' "$out" |
			grep -q "^efa  fabric $f  domain $d-rdm\$" ||
			fail "no $f on $d"
	done
done
n=$(printf '%s\n' "$out" | grep -c '^efa  fabric' || true)
[ "$n" -eq 8 ] || fail "$n efa entries, expected 8"
first=$(printf '%s\n' "$out" | grep -m1 '^efa  fabric' | awk '{print $3}')
[ "$first" = efa-direct ] || fail "first fabric is $first"
printf '%s\n' "$out" | grep -q 'cq data 4 B, mr key 4 B' ||
	fail "cq data / mr key sizes"
printf '%s\n' "$out" | grep -q 'queues         tx 4096, rx 8192' ||
	fail "queue sizes"
printf '%s\n' "$out" | grep -q 'link           100 Gb/s (up)' ||
	fail "link speed"
# Only one profile offered when asked.
n=$(TERN_FAKEEFA_PROFILE=direct "$TERN" info 2>&1 |
	grep -c '^efa  fabric efa  ' || true)
[ "$n" -eq 0 ] || fail "efa fabric offered under profile direct"
echo "tern_info.sh: ok"
