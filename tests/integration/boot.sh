#!/bin/sh
# SPDX-License-Identifier: MIT
# The TCP bootstrap on one host: tern serve/bench/ping --listen on a port
# the kernel picks (:0), clients by HOST:PORT; tokens; IPv6 loopback.
set -u
prov=$1
dir=$(mktemp -d)
pids=""
fail=0
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	rm -rf "$dir"
}
trap cleanup EXIT
bad() {
	echo "FAIL: $*"
	fail=1
}

# start NAME LISTEN ARGS...: a server in the background; $addr: its
# bootstrap address as it printed it.
start() {
	name=$1 listen=$2
	shift 2
	"$TERN" "$@" --provider "$prov" --listen "$listen" >"$dir/$name.log" 2>&1 &
	pids="$pids $!"
	i=0
	until addr=$(sed -n 's/.* \([^ ]*\) (TCP bootstrap.*/\1/p' "$dir/$name.log" 2>/dev/null) &&
		[ -n "$addr" ]; do
		i=$((i + 1))
		[ $i -gt 100 ] && { cat "$dir/$name.log"; bad "$name did not start"; exit 1; }
		sleep 0.1
	done
}

start serve 127.0.0.1:0 serve --token t0ken
"$TERN" fill "$addr" --provider "$prov" --token t0ken --count 2 --pages 4 >"$dir/fill.log" 2>&1 &&
	grep -q "2 of 2 fill(s) verified" "$dir/fill.log" &&
	echo "ok: fill $addr over $prov" || { cat "$dir/fill.log"; bad "fill by address"; }
if "$TERN" fill "$addr" --provider "$prov" --token nope >"$dir/bad.log" 2>&1; then
	bad "a wrong token was accepted"
else
	grep -q "wrong token" "$dir/bad.log" && echo "ok: wrong token refused" ||
		{ cat "$dir/bad.log"; bad "no reason given for the refusal"; }
fi
if "$TERN" fill 127.0.0.1:1 --provider "$prov" >"$dir/nobody.log" 2>&1; then
	bad "a fill with no server succeeded"
else
	grep -q "Connection refused" "$dir/nobody.log" && echo "ok: no server: $(grep "Connection refused" "$dir/nobody.log")" ||
		{ cat "$dir/nobody.log"; bad "no clear error without a server"; }
fi

start bench 127.0.0.1:0 bench
"$TERN" bench --provider "$prov" --peer "$addr" --sizes 64K --iters 50 --verify >"$dir/b.log" 2>&1 &&
	grep -q " ok$" "$dir/b.log" && echo "ok: bench --peer $addr" || { cat "$dir/b.log"; bad "bench by address"; }

start ping '[::1]:0' ping serve
"$TERN" ping "$addr" --provider "$prov" --iters 50 --sizes 8 >"$dir/p.log" 2>&1 &&
	echo "ok: ping $addr (IPv6 bootstrap)" || { cat "$dir/p.log"; bad "ping over IPv6 bootstrap"; }

[ $fail -eq 0 ] && echo "PASS: bootstrap over $prov"
exit $fail
