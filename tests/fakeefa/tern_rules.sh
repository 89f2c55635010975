#!/bin/sh
# SPDX-License-Identifier: MIT
# Run a tern program over the fake efa provider and fail if it broke any
# rule the fake enforces (the fake writes "violations N" at exit to
# TERN_FAKEEFA_REPORT), not only if it crashed.
# usage: tern_rules.sh PROFILE PROGRAM [ARGS...]
set -eu
profile=$1
shift
report=$(mktemp)
trap 'rm -f "$report"' EXIT
rc=0
TERN_FAKEEFA_PROFILE=$profile TERN_FAKEEFA_REPORT=$report \
	TERN_FAKEEFA_VERBOSE=1 "$@" || rc=$?
[ "$rc" -eq 0 ] || { echo "tern_rules.sh: $1 exited $rc" >&2; exit 1; }
grep -q '^violations ' "$report" ||
	{ echo "tern_rules.sh: the fake efa was not loaded" >&2; exit 1; }
grep -q '^violations 0$' "$report" ||
	{ echo "tern_rules.sh: $(cat "$report")" >&2; exit 1; }
echo "tern_rules.sh: no rule broken"
