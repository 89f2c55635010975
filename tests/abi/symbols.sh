#!/bin/sh
# SPDX-License-Identifier: MIT
# libtern.so exports exactly the public API (docs/api.md, "ABI: what libtern
# exports"). Four lists must be one:
#   - what the library exports (nm -D: defined functions and data),
#   - the checked-in list, tests/abi/symbols.txt (sorted),
#   - the version script's global names, src/libtern.map,
#   - the functions the public headers declare (include/tern/tern.h and
#     every header it includes, preprocessed).
# No exported name starts with tern__ (internal).
#
# usage: tests/abi/symbols.sh LIBTERN.SO SYMBOLS.TXT LIBTERN.MAP CC INCLUDE-DIR
set -u
lib=$1
list=$2
map=$3
cc=$4
inc=$5
export LC_ALL=C
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# nm -D lines: "ADDR TYPE NAME@@VERSION"; text (T), data (D, B, R) and their
# weak / unique forms; the version node itself is an absolute (A) symbol.
if ! nm -D --defined-only "$lib" >"$tmp/nm"; then
	echo "FAIL: nm -D $lib"
	exit 1
fi
awk 'NF == 3 && $2 ~ /^[TtDdBbRrWwVvGgSsiu]$/ { sub(/@.*/, "", $3); print $3 }' \
	"$tmp/nm" | sort -u >"$tmp/exported"
if [ ! -s "$tmp/exported" ]; then
	echo "FAIL: $lib exports nothing (nm -D found no symbols)"
	exit 1
fi

if grep '^tern__' "$tmp/exported" >"$tmp/internal"; then
	echo "FAIL: $lib exports internal tern__ names:"
	cat "$tmp/internal"
	fail=1
fi

sort -u "$list" >"$tmp/list"
if ! cmp -s "$tmp/list" "$list"; then
	echo "FAIL: $list is not sorted (LC_ALL=C sort -u) or has duplicates"
	fail=1
fi

if ! diff -u "$tmp/list" "$tmp/exported" >"$tmp/d"; then
	echo "FAIL: what $lib exports (+) differs from $list (-):"
	cat "$tmp/d"
	fail=1
fi

sed -n '/global:/,/local:/p' "$map" | grep -oE '^[[:space:]]*[A-Za-z_][A-Za-z0-9_]*;' |
	tr -d ' \t;' | sort -u >"$tmp/map"
if ! diff -u "$tmp/list" "$tmp/map" >"$tmp/d"; then
	echo "FAIL: the global names of $map (+) differ from $list (-):"
	cat "$tmp/d"
	fail=1
fi

# Every function the public headers declare: a name tern_* followed by "(",
# after preprocessing (no comments, no macros).
if ! printf '#include <tern/tern.h>\n' | "$cc" -E -P -I"$inc" -x c - \
	>"$tmp/pp"; then
	echo "FAIL: $cc -E <tern/tern.h>"
	exit 1
fi
for h in "$inc"/tern/*.h; do
	grep -q "<tern/$(basename "$h")>" "$inc/tern/tern.h" ||
		[ "$(basename "$h")" = tern.h ] || {
		echo "FAIL: tern/tern.h does not include tern/$(basename "$h")"
		fail=1
	}
done
tr '\n' ' ' <"$tmp/pp" | grep -oE '(^|[^A-Za-z0-9_])tern_[A-Za-z0-9_]*[[:space:]]*\(' |
	sed 's/^[^t]*//; s/[[:space:]]*($//' | sort -u >"$tmp/declared"
if ! diff -u "$tmp/list" "$tmp/declared" >"$tmp/d"; then
	echo "FAIL: the functions include/tern/*.h declare (+) differ from" \
		"$list (-):"
	cat "$tmp/d"
	fail=1
fi

if [ "$fail" -eq 0 ]; then
	echo "ok: $lib exports the $(wc -l <"$tmp/list") functions of $list," \
		"as the headers and $(basename "$map") declare; no tern__"
else
	echo "The public API changes in one commit: the header, docs/api.md," \
		"src/libtern.map and tests/abi/symbols.txt (docs/api.md, \"ABI\")."
fi
exit $fail
