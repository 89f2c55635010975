#!/bin/sh
# SPDX-License-Identifier: MIT
# tern bench on the same-host path (docs/local.md): writes, reads and
# writes with immediates into the local peer's shared memory (--peer-mem
# shared: memcpy) and into its plain memory (cross-memory attach), every
# byte verified; the header names the path; TERN_LOCAL=0 names the
# provider. usage: bench_local.sh PROVIDER
set -u
prov=$1
: "${TERN:?TERN: the tern binary}"
node=""
[ "$prov" = tcp ] && node="--node 127.0.0.1"
fail=0
for mem in shared host; do
	for op in write read writedata; do
		# shellcheck disable=SC2086
		out=$("$TERN" bench --provider "$prov" $node --op $op \
			--peer-mem $mem --sizes 8,4K,1M --iters 50 --verify 2>&1)
		if ! echo "$out" | grep -q "peer path *same host (local path)" ||
			[ "$(echo "$out" | grep -c ' ok$')" -ne 3 ]; then
			echo "FAIL: $op into $mem memory:"
			echo "$out"
			fail=1
		else
			echo "ok: $op into $mem memory over the local path, verified"
		fi
	done
done
# shellcheck disable=SC2086
out=$(TERN_LOCAL=0 "$TERN" bench --provider "$prov" $node --op write \
	--peer-mem shared --sizes 4K --iters 50 --verify 2>&1)
if echo "$out" | grep -q "peer path *provider" &&
	echo "$out" | grep -q ' ok$'; then
	echo "ok: TERN_LOCAL=0: the provider's path"
else
	echo "FAIL: TERN_LOCAL=0:"
	echo "$out"
	fail=1
fi
exit $fail
