#!/bin/sh
# SPDX-License-Identifier: MIT
# Both versions of each function that takes an attr struct are exported
# (docs/api.md, "ABI"), as readelf reads the dynamic symbol table: today's
# as the default, name@@TERN_0.2, and 0.1's as name@TERN_0 (old binaries);
# tern_world_attr_init, an inline now, at TERN_0 only. And a program built
# against 0.1's structs (abi_old_caller) asks for TERN_0 of them all.
#
# usage: tests/abi/versions.sh LIBTERN.SO ABI-OLD-CALLER
set -u
lib=$1
old=$2
fail=0
syms=$(readelf --dyn-syms -W "$lib") || {
	echo "FAIL: readelf --dyn-syms $lib"
	exit 1
}
has() {
	printf '%s\n' "$syms" |
		awk -v s="$1" '$5 == "GLOBAL" && $7 != "UND" && $8 == s { f = 1 }
			END { exit !f }'
}
for fn in tern_ctx_open tern_mr_regattr tern_world_open \
	tern_boot_server_open; do
	for v in "$fn@@TERN_0.2" "$fn@TERN_0"; do
		has "$v" || {
			echo "FAIL: $lib does not export $v"
			fail=1
		}
	done
done
for v in tern_ctx_attr_defaults@@TERN_0.2 tern_mr_attr_defaults@@TERN_0.2 \
	tern_world_attr_defaults@@TERN_0.2 \
	tern_boot_server_attr_defaults@@TERN_0.2 tern_world_attr_init@TERN_0; do
	has "$v" || {
		echo "FAIL: $lib does not export $v"
		fail=1
	}
done
if has tern_world_attr_init@@TERN_0.2; then
	echo "FAIL: tern_world_attr_init has a default version (it is inline)"
	fail=1
fi
need=$(readelf --dyn-syms -W "$old") || {
	echo "FAIL: readelf --dyn-syms $old"
	exit 1
}
for fn in tern_ctx_open tern_mr_regattr tern_world_attr_init \
	tern_world_open tern_boot_server_open; do
	printf '%s\n' "$need" | awk -v s="$fn@TERN_0" '$8 ~ "^" s "( |$)" { f = 1 }
		END { exit !f }' || {
		echo "FAIL: $old does not bind $fn at TERN_0"
		fail=1
	}
done
[ "$fail" -eq 0 ] &&
	echo "ok: the attr functions at TERN_0 and TERN_0.2, the 0.1 caller" \
		"bound at TERN_0"
exit $fail
