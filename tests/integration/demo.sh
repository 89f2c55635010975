#!/bin/sh
# SPDX-License-Identifier: MIT
# Run `tern demo` with the given options; pass only if it exits 0 AND says
# every byte was verified.
set -u
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$TERN" demo "$@" >"$out" 2>&1
rc=$?
cat "$out"
if [ $rc -ne 0 ]; then
	echo "FAIL: tern demo $* exited $rc"
	exit 1
fi
grep -q '^demo: OK' "$out" || { echo "FAIL: no 'demo: OK'"; exit 1; }
grep -Eq 'verified [1-9][0-9]* bytes' "$out" || { echo "FAIL: nothing verified"; exit 1; }
echo "PASS: tern demo $*"
