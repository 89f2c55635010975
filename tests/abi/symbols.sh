#!/bin/sh
# SPDX-License-Identifier: MIT
# libtern.so exports exactly the public API, each name at its version
# (docs/api.md, "ABI: what libtern exports"). These lists must be one:
#   - what the library exports (nm -D: defined functions and data, with
#     their versions: name@@NODE the default, name@NODE an old entry point
#     kept for binaries built against an older release),
#   - the checked-in list, tests/abi/symbols.txt (sorted, name@@NODE and
#     name@NODE lines),
#   - the version script, src/libtern.map: each node's global names are
#     the list's name@@NODE; every name@NODE names a node of the script,
#   - the functions the public headers declare (include/tern/tern.h and
#     every header it includes, preprocessed; static inline ones aside):
#     the names of the list's name@@NODE. A name kept only as an old entry
#     point (no @@) is a static inline of the headers, so that old source
#     still compiles.
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

# nm -D lines: "ADDR TYPE NAME@@VERSION" (or NAME@VERSION); text (T), data
# (D, B, R) and their weak / unique forms; each version node itself is an
# absolute (A) symbol.
if ! nm -D --defined-only "$lib" >"$tmp/nm"; then
	echo "FAIL: nm -D $lib"
	exit 1
fi
awk 'NF == 3 && $2 ~ /^[TtDdBbRrWwVvGgSsiu]$/ { print $3 }' "$tmp/nm" |
	sort -u >"$tmp/exported"
if [ ! -s "$tmp/exported" ]; then
	echo "FAIL: $lib exports nothing (nm -D found no symbols)"
	exit 1
fi
if grep -v '@' "$tmp/exported" >"$tmp/unversioned"; then
	echo "FAIL: $lib exports names without a version (or this nm," \
		"older than binutils 2.35, does not print them):"
	cat "$tmp/unversioned"
	exit 1
fi

if sed 's/@.*//' "$tmp/exported" | grep '^tern__' >"$tmp/internal"; then
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

# The default versions: name@@NODE. The old entry points: name@NODE.
grep '@@' "$tmp/list" >"$tmp/defaults"
grep -v '@@' "$tmp/list" >"$tmp/compat"
sed 's/@.*//' "$tmp/defaults" | sort -u >"$tmp/api"

# The script's nodes ("NODE {" at the start of a line) and the global
# names in each, as name@@NODE.
awk '
/^[A-Za-z_][A-Za-z0-9_.]*[ \t]*\{/ { node = $1; sub(/\{.*/, "", node); g = 0; next }
/^[ \t]*}/ { node = ""; next }
node != "" && /global:/ { g = 1; next }
node != "" && /local:/ { g = 0; next }
node != "" && g && /^[ \t]*[A-Za-z_][A-Za-z0-9_]*;/ {
	n = $1; sub(/;.*/, "", n); print n "@@" node
}' "$map" | sort -u >"$tmp/map"
awk '/^[A-Za-z_][A-Za-z0-9_.]*[ \t]*\{/ { n = $1; sub(/\{.*/, "", n); print n }' \
	"$map" | sort -u >"$tmp/nodes"
if ! diff -u "$tmp/defaults" "$tmp/map" >"$tmp/d"; then
	echo "FAIL: the global names of $map's nodes (+) differ from the" \
		"name@@NODE lines of $list (-):"
	cat "$tmp/d"
	fail=1
fi
sed 's/.*@//' "$tmp/compat" | sort -u | while read -r node; do
	grep -qx "$node" "$tmp/nodes" ||
		echo "FAIL: $list keeps entry points at $node, a node" \
			"$map does not define"
done >"$tmp/d"
if [ -s "$tmp/d" ]; then
	cat "$tmp/d"
	fail=1
fi

# Every function the public headers declare: a name tern_* followed by "(",
# after preprocessing (no comments, no macros); static inline ones apart.
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
tr '\n' ' ' <"$tmp/pp" >"$tmp/pp1"
grep -oE 'static[[:space:]]+inline[^;{}(]*[^A-Za-z0-9_]tern_[A-Za-z0-9_]*[[:space:]]*\(' \
	"$tmp/pp1" | grep -oE 'tern_[A-Za-z0-9_]*[[:space:]]*\($' |
	sed 's/[[:space:]]*($//' | sort -u >"$tmp/inline"
grep -oE '(^|[^A-Za-z0-9_])tern_[A-Za-z0-9_]*[[:space:]]*\(' "$tmp/pp1" |
	sed 's/^[^t]*//; s/[[:space:]]*($//' | sort -u |
	comm -23 - "$tmp/inline" >"$tmp/declared"
if ! diff -u "$tmp/api" "$tmp/declared" >"$tmp/d"; then
	echo "FAIL: the functions include/tern/*.h declare (+) differ from" \
		"the name@@NODE lines of $list (-):"
	cat "$tmp/d"
	fail=1
fi
sed 's/@.*//' "$tmp/compat" | sort -u | comm -23 - "$tmp/api" |
	comm -23 - "$tmp/inline" >"$tmp/d"
if [ -s "$tmp/d" ]; then
	echo "FAIL: kept only as old entry points, neither declared nor a" \
		"static inline of the headers (old source would not compile):"
	cat "$tmp/d"
	fail=1
fi

if [ "$fail" -eq 0 ]; then
	echo "ok: $lib exports the $(wc -l <"$tmp/api") functions of $list" \
		"at their versions, and $(wc -l <"$tmp/compat") old entry" \
		"points, as the headers and $(basename "$map") declare; no tern__"
else
	echo "The public API changes in one commit: the header, docs/api.md," \
		"src/libtern.map and tests/abi/symbols.txt (docs/api.md, \"ABI\")."
fi
exit $fail
