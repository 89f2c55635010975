#!/bin/sh
# SPDX-License-Identifier: MIT
# One server, N client processes at once, each doing 4 verified fills:
# every fill of every client must verify, and none may time out waiting
# behind the others (a starved client fails its 30 s fill timeout).
# usage: many.sh PROVIDER N
set -u
prov=$1
n=$2
. "$(dirname "$0")/lib.sh"
start_server fill --listen --max-clients "$n" --parallel 4

fail=0
t0=$(date +%s)
i=1
pids=""
while [ $i -le "$n" ]; do
	# shellcheck disable=SC2086
	"$TERN" fill --provider "$prov" $node --card-file "$dir/card" \
		--page-size 64K --pages 4 --count 4 --seed $((i * 1000)) \
		>"$dir/client.$i.log" 2>&1 &
	pids="$pids $!"
	i=$((i + 1))
done
i=1
for p in $pids; do
	if ! wait "$p"; then
		echo "FAIL: client $i exited non-zero:"
		cat "$dir/client.$i.log"
		fail=1
	fi
	i=$((i + 1))
done
t1=$(date +%s)
ok=$(cat "$dir"/client.*.log | grep -c "verified 262144 bytes")
[ "$ok" -eq $((n * 4)) ] || { echo "FAIL: $ok of $((n * 4)) fills verified"; fail=1; }
kill -0 "$spid" 2>/dev/null || { echo "FAIL: server died"; fail=1; }
stop_server
tail -3 "$dir/server.log"
[ $src -eq 0 ] || { echo "FAIL: server exited $src"; fail=1; }
grep -q "served $n session(s), $((n * 4)) fill(s)" "$dir/server.log" ||
	{ echo "FAIL: server did not serve $n sessions of 4 fills"; fail=1; }
grep -q "at most $n client(s) at once" "$dir/server.log" ||
	echo "note: the clients did not all overlap: $(grep 'at most' "$dir/server.log")"
echo "$n clients x 4 fills over $prov: $ok verified in $((t1 - t0)) s"
[ $fail -eq 0 ] && echo "PASS: $n concurrent clients over $prov"
exit $fail
