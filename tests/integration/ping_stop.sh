#!/bin/sh
# SPDX-License-Identifier: MIT
# Ctrl-C ends `tern ping` at once, with the round trips measured so far,
# and ends `tern ping serve` at once even while its session waits for a
# client that stopped answering (it used to finish the whole schedule, or
# wait out its 10 s timeout).
# usage: ping_stop.sh PROVIDER
set -u
prov=$1
. "$(dirname "$0")/lib.sh"
start_server ping serve

ms() { echo $(($(date +%s%N) / 1000000)); }
fail=0
# shellcheck disable=SC2086
"$TERN" ping --card-file "$dir/card" --provider "$prov" $node --size 8 \
	--iters 10000000 --warmup 10 >"$dir/client.log" 2>&1 &
cpid=$!
# Until it measures (the server logs the session), then a second more.
i=0
while ! grep -q "client:" "$dir/server.log" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
sleep 1
t0=$(ms)
kill -INT "$cpid"
wait "$cpid"
crc=$?
took=$(($(ms) - t0))
cat "$dir/client.log"
echo "client: exit $crc, ${took} ms after Ctrl-C"
[ "$crc" -eq 1 ] || { echo "FAIL: an interrupted ping should exit 1"; fail=1; }
[ "$took" -lt 3000 ] || { echo "FAIL: the client took ${took} ms to stop"; fail=1; }
grep -Eq "^ +8 +[0-9.]+ +[0-9.]+ .*\(([1-9][0-9]*) of 10000000 round trips\)" "$dir/client.log" ||
	{ echo "FAIL: no partial result line for 8 B"; fail=1; }
grep -q "interrupted" "$dir/client.log" || { echo "FAIL: the client did not say it was interrupted"; fail=1; }

# The server's session now waits for a ping that will not come.
sleep 0.5
t0=$(ms)
stop_server
took=$(($(ms) - t0))
echo "--- server log"
cat "$dir/server.log"
echo "server: exit $src, ${took} ms after Ctrl-C"
[ "$src" -eq 0 ] || { echo "FAIL: server exited $src after Ctrl-C"; fail=1; }
[ "$took" -lt 3000 ] || { echo "FAIL: the server took ${took} ms to stop"; fail=1; }
grep -q "session interrupted" "$dir/server.log" ||
	{ echo "FAIL: the server did not log its session as interrupted"; fail=1; }
[ $fail -eq 0 ] && echo "PASS: Ctrl-C stops tern ping and tern ping serve over $prov"
exit $fail
