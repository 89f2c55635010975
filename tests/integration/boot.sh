#!/bin/sh
# SPDX-License-Identifier: MIT
# The TCP bootstrap on one host: tern fill/bench/ping/atomic --listen on a
# port the kernel picks (:0), clients by HOST:PORT; tokens; IPv6 loopback.
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

start serve 127.0.0.1:0 fill --token t0ken
grep -q "^run:  tern fill $addr " "$dir/serve.log" &&
	echo "ok: fill --listen suggests the port it bound ($addr), not :0" ||
	{ cat "$dir/serve.log"; bad "fill --listen's run: line does not name $addr"; }
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

start ping '[::1]:0' ping
"$TERN" ping "$addr" --provider "$prov" --iters 50 --sizes 8 >"$dir/p.log" 2>&1 &&
	echo "ok: ping $addr (IPv6 bootstrap)" || { cat "$dir/p.log"; bad "ping over IPv6 bootstrap"; }

# tern atomic by HOST:PORT, as ping and bench (over tcp it runs on
# tcp;ofi_rxm: native tcp has no atomics), with a token; a wrong one is
# refused before any atomic runs.
start atomic 127.0.0.1:0 atomic --token s3cret
"$TERN" atomic "$addr" --provider "$prov" --token s3cret --clients 2 --reps 50 \
	>"$dir/a.log" 2>&1 && grep -q "atomic: OK" "$dir/a.log" &&
	echo "ok: atomic $addr with a token" || { cat "$dir/a.log"; bad "atomic by address"; }
if "$TERN" atomic "$addr" --provider "$prov" --token nope --clients 1 --reps 5 \
	>"$dir/a_bad.log" 2>&1; then
	bad "atomic: a wrong token was accepted"
else
	grep -q "wrong token" "$dir/a_bad.log" && echo "ok: atomic: wrong token refused" ||
		{ cat "$dir/a_bad.log"; bad "atomic: no reason given for the refusal"; }
fi

# A client with a token is welcome at a server that asks for none, and
# $TERN_TOKEN does not upset commands without a handshake.
start open 127.0.0.1:0 fill
TERN_TOKEN=unused "$TERN" fill "$addr" --provider "$prov" --pages 2 >"$dir/open.log" 2>&1 &&
	echo "ok: a token is no obstacle at a server without one" ||
	{ cat "$dir/open.log"; bad "token refused by a tokenless server"; }
TERN_TOKEN=unused "$TERN" demo --provider "$prov" --pages 2 >"$dir/demo.log" 2>&1 &&
	echo "ok: tern demo with \$TERN_TOKEN set" || { cat "$dir/demo.log"; bad "demo with \$TERN_TOKEN"; }
"$TERN" ping --listen --provider "$prov" --token x >/dev/null 2>&1
[ $? -eq 2 ] && echo "ok: ping --listen --token without HOST:PORT is refused" ||
	bad "ping --listen --token without HOST:PORT accepted"

# --reconnect bounds the time without progress, not each wait: against a
# listener that takes TCP and closes at once, it must give up.
python3 -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(64)
print(s.getsockname()[1]); sys.stdout.flush()
while True:
    c, _ = s.accept(); c.close()
' >"$dir/closer.port" &
pids="$pids $!"
i=0
while [ ! -s "$dir/closer.port" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
t0=$(date +%s)
timeout 30 "$TERN" fill "127.0.0.1:$(cat "$dir/closer.port")" --provider "$prov" \
	--reconnect 2 >"$dir/closer.log" 2>&1
rc=$?
t1=$(date +%s)
[ $rc -eq 1 ] && grep -q "giving up" "$dir/closer.log" && [ $((t1 - t0)) -le 10 ] &&
	echo "ok: --reconnect 2 gave up after $((t1 - t0)) s on a server that never answers" ||
	{ tail -5 "$dir/closer.log"; bad "--reconnect against a mute listener (exit $rc, $((t1 - t0)) s)"; }

[ $fail -eq 0 ] && echo "PASS: bootstrap over $prov"
exit $fail
