#!/bin/sh
# SPDX-License-Identifier: MIT
# Ctrl-C ends `tern atomic` and its worker processes at once (they used to
# run all their fetch-adds), leaves the lock free and the server serving:
# a normal run right after passes.
# usage: atomic_stop.sh PROVIDER
set -u
prov=$1
. "$(dirname "$0")/lib.sh"
start_server atomic --listen

fail=0
# shellcheck disable=SC2086
"$TERN" atomic --card-file "$dir/card" --provider "$prov" $node --clients 2 \
	--reps 10000000 >"$dir/client.log" 2>&1 &
# To this process alone (a terminal would signal the workers too): it
# passes Ctrl-C on to them.
interrupt $! "$dir/client.log" "starting"
cat "$dir/client.log"
stopped_ok client 1 5000
grep -q "interrupted" "$dir/client.log" || { echo "FAIL: it did not say it was interrupted"; fail=1; }
# shellcheck disable=SC2086
"$TERN" atomic --card-file "$dir/card" --provider "$prov" $node --clients 2 \
	--reps 500 >"$dir/again.log" 2>&1 || { echo "FAIL: the run after it failed"; fail=1; }
cat "$dir/again.log"
grep -q "^atomic: OK" "$dir/again.log" || { echo "FAIL: the run after it is not OK"; fail=1; }
stop_server
echo "--- server log"
cat "$dir/server.log"
[ "$src" -eq 0 ] || { echo "FAIL: server exited $src after Ctrl-C"; fail=1; }
grep -q "lock word 0$" "$dir/server.log" || { echo "FAIL: the lock was left taken"; fail=1; }
[ $fail -eq 0 ] && echo "PASS: Ctrl-C stops tern atomic over $prov"
exit $fail
