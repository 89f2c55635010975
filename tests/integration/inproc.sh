#!/bin/sh
# SPDX-License-Identifier: MIT
# bench/inproc end to end over a provider, a few short pairs: it must exit
# 0 and print, per size, positive finite bandwidths, a ratio inside its
# interval and the control's and the peer loop's, and the idle pass each
# way (ns, positive, the difference inside its interval); bad options
# must be refused with a message.
# No speed is asserted.
# usage: inproc.sh PROVIDER   ($TERN is the tern binary of the build)
set -u
prov=$1
inproc=$(dirname "$TERN")/inproc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { cat "$tmp/out" 2>/dev/null; echo "FAIL: $*"; exit 1; }

"$inproc" --provider "$prov" --sizes 8,4K,64K --pairs 3 --block-bytes 256K \
	--control --peer-loop --idle >"$tmp/out" 2>&1 || fail "inproc exited $?"
cat "$tmp/out"
[ "$(grep -c '^inproc write size=' "$tmp/out")" -eq 3 ] || fail "not one line per size"
for size in 8 4096 65536; do
	line=$(grep "^inproc write size=$size " "$tmp/out") || fail "no line for $size B"
	echo "$line" | awk '
	function num(k,   i, f) {
		for (i = 1; i <= NF; i++) { split($i, f, "="); if (f[1] == k) return f[2] }
		print "missing " k; bad = 1
	}
	{
		for (i = split("tern_gbps raw_gbps tern_mpps raw_mpps ratio lo hi control control_lo control_hi peer peer_lo peer_hi", k, " "); i > 0; i--) {
			v = num(k[i])
			if (!(v + 0 > 0) || v + 0 > 1e9) { print k[i] " not positive and finite: " v; bad = 1 }
		}
		if (num("lo") + 0 > num("ratio") + 0 || num("ratio") + 0 > num("hi") + 0) { print "ratio outside its interval"; bad = 1 }
		if (num("peer_lo") + 0 > num("peer") + 0 || num("peer") + 0 > num("peer_hi") + 0) { print "peer outside its interval"; bad = 1 }
		if (num("pairs") != 3) { print "pairs != 3"; bad = 1 }
	}
	END { exit bad }' || fail "bad figures for $size B"
done
# the idle pass: ns per pass each way, and tern - raw inside its interval
grep '^inproc idle ' "$tmp/out" | awk '
	function num(k,   i, f) {
		for (i = 1; i <= NF; i++) { split($i, f, "="); if (f[1] == k) return f[2] }
		print "missing " k; bad = 1
	}
	{
		n++
		for (i = split("passes tern_ns raw_ns", k, " "); i > 0; i--) {
			v = num(k[i])
			if (!(v + 0 > 0) || v + 0 > 1e9) { print k[i] " not positive and finite: " v; bad = 1 }
		}
		if (num("lo") + 0 > num("diff_ns") + 0 || num("diff_ns") + 0 > num("hi") + 0) { print "diff_ns outside its interval"; bad = 1 }
		if (num("pairs") != 3) { print "pairs != 3"; bad = 1 }
	}
	END { if (n != 1) { print "not one idle line"; bad = 1 } exit bad }' || fail "bad idle figures"
# refused, each with a message naming the problem
for args in "--pairs 0:--pairs" "--sizes 0:--sizes" "--window 0:--window" \
	"--block-bytes 2G:--block-bytes" "--bogus:usage" "extra:unexpected argument"; do
	a=${args%%:*}
	want=${args#*:}
	# shellcheck disable=SC2086
	if "$inproc" --provider "$prov" $a >"$tmp/out" 2>&1; then
		fail "inproc accepted '$a'"
	fi
	grep -q -- "$want" "$tmp/out" || fail "no clear error for '$a'"
done
# a provider that does not exist: an error from the target, not a hang
timeout 60 "$inproc" --provider nosuch --sizes 8 --pairs 1 >"$tmp/out" 2>&1 &&
	fail "inproc ran with provider nosuch"
grep -q "inproc:" "$tmp/out" || fail "no error for provider nosuch"
echo "inproc ok"
