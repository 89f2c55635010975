#!/bin/sh
# SPDX-License-Identifier: MIT
# Start `tern CMD --listen`, run `tern CMD` against it, stop the server.
# usage: pair.sh PROVIDER CMD PATTERN [client options...]
# Passes when the client exits 0, prints a line matching PATTERN, and the
# server stops cleanly on Ctrl-C.
set -u
prov=$1 cmd=$2 pat=$3
shift 3
. "$(dirname "$0")/lib.sh"
start_server "$cmd" --listen

fail=0
# shellcheck disable=SC2086
"$TERN" "$cmd" --card-file "$dir/card" --provider "$prov" $node "$@" >"$dir/client.log" 2>&1 || {
	echo "FAIL: client exited non-zero"; fail=1; }
cat "$dir/client.log"
grep -Eq -- "$pat" "$dir/client.log" || { echo "FAIL: no line matching '$pat'"; fail=1; }
stop_server
echo "--- server log"
cat "$dir/server.log"
[ $src -eq 0 ] || { echo "FAIL: server exited $src after Ctrl-C"; fail=1; }
# The atomic server reads its own memory: the counter must be exact there.
if [ "$cmd" = atomic ]; then
	grep -q "counter $(grep -o 'expected +[0-9]*' "$dir/client.log" | tr -dc 0-9)," "$dir/server.log" ||
		{ echo "FAIL: the server's own counter disagrees"; fail=1; }
fi
[ $fail -eq 0 ] && echo "PASS: tern $cmd over $prov"
exit $fail
