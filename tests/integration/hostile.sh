#!/bin/sh
# SPDX-License-Identifier: MIT
# A server faces a hostile client, then must still serve a good one; then
# a --token server faces the same client, which must bring the ticket of
# its handshake to be admitted.
set -u
prov=$1
. "$(dirname "$0")/lib.sh"
start_server fill --listen --fill-timeout 2000

fail=0
# shellcheck disable=SC2086
"$HOSTILE" --provider "$prov" $node "$dir/card" || fail=1
# shellcheck disable=SC2086
"$TERN" fill --provider "$prov" $node --card-file "$dir/card" --page-size 64K --pages 32 --seed 7 || fail=1
kill -0 "$spid" 2>/dev/null || { echo "FAIL: server died"; fail=1; }
stop_server
echo "--- server log"
cat "$dir/server.log"
[ $src -eq 0 ] || { echo "FAIL: server exited $src after Ctrl-C"; fail=1; }
grep -q "refused" "$dir/server.log" || { echo "FAIL: server logged no refusal"; fail=1; }
# the hostile session, 3 more of its card (the 5th refused), the good one;
# over shm 4 more cards of 4 sessions each, 3 of them into unmapped memory
want=5
[ "$prov" = shm ] && "$TERN" version | grep -q "libfabric 1.17 at run time" && want=21
grep -q "served $want session(s)" "$dir/server.log" || { echo "FAIL: expected $want sessions"; fail=1; }
grep -q "own card" "$dir/server.log" || { echo "FAIL: no log of the CONNECT with the server's own card"; fail=1; }
n=$(grep -c "unexpected message type" "$dir/server.log")
[ "$n" -le 2 ] || { echo "FAIL: the server answered itself ($n 'unexpected message type' lines)"; fail=1; }

# The token server: the card alone is not enough.
"$TERN" fill --provider "$prov" $node --listen 127.0.0.1:0 --token t0k --fill-timeout 2000 >"$dir/tok.log" 2>&1 &
tpid=$!
i=0
until addr=$(sed -n 's/.* \([^ ]*\) (TCP bootstrap.*/\1/p' "$dir/tok.log" 2>/dev/null) && [ -n "$addr" ]; do
	i=$((i + 1))
	[ $i -gt 100 ] && { cat "$dir/tok.log"; echo "FAIL: token server did not start"; kill "$tpid"; exit 1; }
	sleep 0.1
done
# shellcheck disable=SC2086
"$HOSTILE" --provider "$prov" $node --addr "$addr" --token t0k "$dir/card" || fail=1
# shellcheck disable=SC2086
"$TERN" fill "$addr" --provider "$prov" $node --token t0k --pages 4 >"$dir/tokfill.log" 2>&1 ||
	{ cat "$dir/tokfill.log"; echo "FAIL: a good client of the token server"; fail=1; }
kill -INT "$tpid"
wait "$tpid" || { echo "FAIL: token server exited $?"; fail=1; }
echo "--- token server log"
cat "$dir/tok.log"
[ $fail -eq 0 ] && echo "PASS: hostile client over $prov"
exit $fail
