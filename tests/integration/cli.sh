#!/bin/sh
# SPDX-License-Identifier: MIT
# The command line: help, versions, errors users hit first.
set -u
fail=0
t() { # t EXPECTED-RC PATTERN CMD...
	want=$1 pat=$2
	shift 2
	out=$("$@" 2>&1)
	rc=$?
	if [ $rc -ne "$want" ] || ! printf '%s' "$out" | grep -q -- "$pat"; then
		echo "not ok: $* (rc $rc, want $want, pattern '$pat')"
		printf '%s\n' "$out" | head -5
		fail=1
	else
		echo "ok: $*"
	fi
}
t 0 "usage: tern" "$TERN" --help
t 2 "usage: tern" "$TERN"
t 2 "unknown command" "$TERN" frobnicate
t 0 "libfabric" "$TERN" version
for c in info serve fill demo; do
	t 0 "usage: tern $c" "$TERN" $c --help
done
t 0 "shm" "$TERN" info
t 0 '"provider": "shm"' "$TERN" info --json --provider shm
t 1 "no nosuch offering" "$TERN" info --provider nosuch
t 2 "not hex" "$TERN" fill zzzz --provider shm
t 2 "no server card" "$TERN" fill --provider shm
t 1 "server card unusable" "$TERN" fill 00112233 --provider shm
t 2 "expected a size" "$TERN" fill 00 --page-size 0
t 2 "expected a size" "$TERN" fill 00 --page-size 17M
t 2 "expected an integer" "$TERN" fill 00 --pages 0
t 2 "expected an integer" "$TERN" fill 00 --pages 100000
t 1 "not available" "$TERN" serve --provider nosuch
t 1 "do not fit" "$TERN" demo --page-size 16M --pages 3
[ $fail -eq 0 ] && echo "PASS: cli"
exit $fail
