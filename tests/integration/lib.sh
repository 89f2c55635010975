# SPDX-License-Identifier: MIT
# Shared by the integration scripts: a server in the background, its card
# in $dir/card, and cleanup on exit. Source it after setting $prov.
node=""
[ "$prov" = tcp ] && node="--node 127.0.0.1"
dir=$(mktemp -d)
spid=""
cleanup() {
	[ -n "$spid" ] && kill "$spid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT

# start_server ARGS...: run `$TERN ARGS --card-file $dir/card` with its log
# in $dir/server.log; fail the test if no card appears within 10 s.
start_server() {
	# shellcheck disable=SC2086
	"$TERN" "$@" --provider "$prov" $node --card-file "$dir/card" \
		>"$dir/server.log" 2>&1 &
	spid=$!
	i=0
	while [ ! -s "$dir/card" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	[ -s "$dir/card" ] || { cat "$dir/server.log"; echo "FAIL: server did not start"; exit 1; }
}

# stop_server: Ctrl-C it and wait; sets $src to its exit status.
stop_server() {
	kill -INT "$spid"
	wait "$spid"
	src=$?
	spid=""
}

# interrupt PID LOG PATTERN: once LOG has a line matching PATTERN (10 s at
# most), wait a second, Ctrl-C PID alone and wait for it; sets $rc to its
# exit status and $took to the milliseconds it took to exit.
interrupt() {
	i=0
	while ! grep -q "$3" "$2" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	sleep 1
	t0=$(($(date +%s%N) / 1000000))
	kill -INT "$1"
	wait "$1"
	rc=$?
	took=$(($(date +%s%N) / 1000000 - t0))
}

# stopped_ok WHAT WANT LIMIT: $rc must be WANT and $took under LIMIT ms;
# sets fail=1 (and says why) when not.
stopped_ok() {
	echo "$1: exit $rc, ${took} ms after Ctrl-C"
	[ "$rc" -eq "$2" ] || { echo "FAIL: $1 exited $rc after Ctrl-C, not $2"; fail=1; }
	[ "$took" -lt "$3" ] || { echo "FAIL: $1 took ${took} ms to stop"; fail=1; }
}
