#!/bin/sh
# SPDX-License-Identifier: MIT
# The ping_<prov>_write case RUNS times in a row: `tern ping --mode write`
# (8 B, 4 KiB, 64 KiB) against `tern ping --listen`, a fresh server every
# PER runs (each stopped with Ctrl-C and checked to exit 0). A run passes
# when the client exits 0 and prints its 64 KiB line, i.e. got its very
# last reply. Over shm with writes that reply was lost about 1 run in 50
# before the same-host redesign (issue 36): 200 runs see such a loss with
# probability 1 - (49/50)^200 > 98%.
# usage: ping_loop.sh PROVIDER RUNS PER [client options...]
set -u
prov=$1 runs=$2 per=$3
shift 3
. "$(dirname "$0")/lib.sh"
fails=0 run=0 servers=0
t0=$(date +%s)
while [ $run -lt "$runs" ]; do
	rm -f "$dir/card"
	start_server ping --listen
	servers=$((servers + 1))
	k=0
	while [ $k -lt "$per" ] && [ $run -lt "$runs" ]; do
		k=$((k + 1)) run=$((run + 1))
		# shellcheck disable=SC2086
		if ! "$TERN" ping --card-file "$dir/card" --provider "$prov" \
			$node --mode write --sizes 8,4K,64K "$@" \
			>"$dir/client.log" 2>&1 ||
			! grep -Eq "^ +65536 +[0-9.]+ +[0-9.]+" "$dir/client.log"; then
			fails=$((fails + 1))
			echo "--- run $run failed:"
			cat "$dir/client.log"
		fi
	done
	stop_server
	if [ $src -ne 0 ]; then
		fails=$((fails + 1))
		echo "--- server $servers exited $src after Ctrl-C:"
		cat "$dir/server.log"
	fi
done
echo "ping_loop: $runs runs over $prov ($servers servers), $fails failed, $(($(date +%s) - t0)) s"
[ $fails -eq 0 ] && echo "PASS: $runs runs of tern ping --mode write over $prov"
[ $fails -eq 0 ]
