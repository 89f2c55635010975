#!/bin/sh
# SPDX-License-Identifier: MIT
# A client killed (SIGKILL) in the middle of its fills: the server logs the
# session's end, frees it, and keeps serving: a second client, running all
# along, and a third one started afterwards, verify every fill.
set -u
prov=$1
. "$(dirname "$0")/lib.sh"
# The idle timeout leaves a loaded machine room between the steady
# client's fills; a fill to the dead client is dropped after 3 s.
start_server fill --listen --fill-timeout 3000 --idle-timeout 10000

fail=0
# shellcheck disable=SC2086
"$TERN" fill --provider "$prov" $node --card-file "$dir/card" \
	--page-size 1M --pages 32 --count 100000 >"$dir/victim.log" 2>&1 &
victim=$!
# shellcheck disable=SC2086
"$TERN" fill --provider "$prov" $node --card-file "$dir/card" \
	--page-size 256K --pages 8 --count 40 >"$dir/steady.log" 2>&1 &
steady=$!
i=0
while ! grep -q "verified" "$dir/victim.log" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
grep -q "verified" "$dir/victim.log" || { echo "FAIL: the victim never filled"; fail=1; }
kill -KILL "$victim"
wait "$victim" 2>/dev/null
# shm names a region after its process: a killed one leaves its file.
rm -f "/dev/shm/$victim:"*
echo "killed the client after $(grep -c verified "$dir/victim.log") verified fill(s)"
wait "$steady" || { echo "FAIL: the steady client failed:"; cat "$dir/steady.log"; fail=1; }
# The server drops the dead session within its timeouts (3 s with a fill
# out, 10 s between fills), then serves a new client.
i=0
while [ "$(grep -c 'ended (' "$dir/server.log")" -lt 2 ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done
# shellcheck disable=SC2086
"$TERN" fill --provider "$prov" $node --card-file "$dir/card" \
	--page-size 64K --pages 16 --count 2 >"$dir/after.log" 2>&1 ||
	{ echo "FAIL: a client after the kill failed:"; cat "$dir/after.log"; fail=1; }
kill -0 "$spid" 2>/dev/null || { echo "FAIL: server died"; fail=1; }
stop_server
grep "ended\|failed\|stalled\|served" "$dir/server.log"
[ $src -eq 0 ] || { echo "FAIL: server exited $src"; fail=1; }
[ "$(grep -c 'ended (' "$dir/server.log")" -ge 3 ] ||
	{ echo "FAIL: the killed client's session was not ended"; fail=1; }
[ "$(grep -c 'verified' "$dir/steady.log")" -eq 40 ] || { echo "FAIL: steady client verified $(grep -c verified "$dir/steady.log") of 40"; fail=1; }
if [ $fail -ne 0 ]; then
	echo "--- server log"
	cat "$dir/server.log"
else
	echo "PASS: killed client over $prov"
fi
exit $fail
