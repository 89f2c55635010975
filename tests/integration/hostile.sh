#!/bin/sh
# SPDX-License-Identifier: MIT
# A server faces a hostile client, then must still serve a good one.
set -u
prov=$1
. "$(dirname "$0")/lib.sh"
start_server serve --fill-timeout 2000

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
grep -q "served 2 session(s)" "$dir/server.log" || { echo "FAIL: expected 2 sessions"; fail=1; }
[ $fail -eq 0 ] && echo "PASS: hostile client over $prov"
exit $fail
