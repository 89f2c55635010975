#!/bin/sh
# SPDX-License-Identifier: MIT
# Every public header compiles on its own, as C11 and as C++17: a user may
# include any one of them first, from C or from C++.
#
# usage: tests/abi/headers.sh CC INCLUDE-DIR
# C++ is always g++ (scripts/deps.sh check installs it); without it this
# test fails, it does not skip.
set -u
cc=$1
inc=$2
cxx=g++
if ! command -v "$cxx" >/dev/null 2>&1; then
	echo "FAIL: $cxx not found: the public headers cannot be checked as" \
		"C++17 (install it: scripts/deps.sh check, or apt-get install g++)"
	exit 1
fi
if ! command -v "$cc" >/dev/null 2>&1; then
	echo "FAIL: C compiler $cc not found"
	exit 1
fi
fail=0
n=0
for h in "$inc"/tern/*.h; do
	name=tern/$(basename "$h")
	n=$((n + 1))
	if printf '#include <%s>\n' "$name" | "$cc" -std=c11 -Wall -Wextra \
		-Wpedantic -Werror -fsyntax-only -I"$inc" -x c -; then
		echo "ok: $name alone as C11 ($cc)"
	else
		echo "FAIL: $name does not compile alone as C11 ($cc)"
		fail=1
	fi
	if printf '#include <%s>\n' "$name" | "$cxx" -std=c++17 -Wall -Wextra \
		-Wpedantic -Werror -fsyntax-only -I"$inc" -x c++ -; then
		echo "ok: $name alone as C++17 ($cxx)"
	else
		echo "FAIL: $name does not compile alone as C++17 ($cxx)"
		fail=1
	fi
done
if [ "$n" -eq 0 ]; then
	echo "FAIL: no headers in $inc/tern"
	exit 1
fi
exit $fail
