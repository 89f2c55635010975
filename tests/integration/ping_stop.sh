#!/bin/sh
# SPDX-License-Identifier: MIT
# Ctrl-C ends `tern ping` at once, with the round trips measured so far,
# and ends `tern ping --listen` at once even while its session waits for a
# client that stopped answering (it used to finish the whole schedule, or
# wait out its 10 s timeout).
# usage: ping_stop.sh PROVIDER
set -u
prov=$1
. "$(dirname "$0")/lib.sh"
start_server ping --listen

fail=0
# shellcheck disable=SC2086
"$TERN" ping --card-file "$dir/card" --provider "$prov" $node --sizes 8 \
	--iters 10000000 --warmup 10 >"$dir/client.log" 2>&1 &
# A second after the session starts (the server logs it).
interrupt $! "$dir/server.log" "client:"
cat "$dir/client.log"
stopped_ok client 1 3000
grep -Eq "^ +8 +[0-9.]+ +[0-9.]+ .*\(([1-9][0-9]*) of 10000000 round trips\)" "$dir/client.log" ||
	{ echo "FAIL: no partial result line for 8 B"; fail=1; }
grep -q "interrupted" "$dir/client.log" || { echo "FAIL: the client did not say it was interrupted"; fail=1; }

# The server's session now waits for a ping that will not come.
interrupt "$spid" "$dir/server.log" "client:"
spid=""
echo "--- server log"
cat "$dir/server.log"
stopped_ok server 0 3000
grep -q "session interrupted" "$dir/server.log" ||
	{ echo "FAIL: the server did not log its session as interrupted"; fail=1; }
[ $fail -eq 0 ] && echo "PASS: Ctrl-C stops tern ping and tern ping --listen over $prov"
exit $fail
