#!/bin/sh
# SPDX-License-Identifier: MIT
# After ctest: each skipped test with the reason it gave (its "SKIP: ..."
# line), which ctest's own summary leaves in a log nobody reads.
# usage: scripts/skip-reasons.sh BUILD-DIR
log=${1:-build}/Testing/Temporary/LastTest.log
[ -f "$log" ] || exit 0
awk '
	/^[0-9]+\/[0-9]+ Test: / { name = $3 }
	/^SKIP: / && name != "" {
		sub(/^SKIP: /, "")
		if (!n++)
			print "\nskipped, and why:"
		printf "  %-32s %s\n", name, $0
		name = ""
	}
' "$log"
