#!/bin/bash
# SPDX-License-Identifier: MIT
# Instructions of one empty progress pass, one libtern against another:
# deterministic, where wall-clock runs on a shared machine are not.
#
# usage: bench/pass_instr.sh LIBDIR_A LIBDIR_B [PROVIDER] [N]
#        (defaults: shm, 100000; LIBDIR: a build directory holding
#        libtern.so.0, e.g. build-release)
#
# Builds a small program that opens a ctx (no peer, nothing posted) and
# calls tern_progress() N times, then 2N times, each under callgrind with
# --toggle-collect=tern_progress (only instructions inside tern_progress()
# and what it calls count: the provider's empty completion-queue read
# included); prints (2N run - N run) / N for each library: what a pass
# that finds nothing costs, the pass a waiting side spins on. It is what
# tern_task_submit() added to every pass of a single-threaded program
# (docs/performance.md, "Threads: what the submission path costs").
set -euo pipefail
a=${1:?usage: pass_instr.sh LIBDIR_A LIBDIR_B [PROVIDER] [N]}
b=${2:?usage: pass_instr.sh LIBDIR_A LIBDIR_B [PROVIDER] [N]}
prov=${3:-shm}
n=${4:-100000}
src=$(cd "$(dirname "$0")/.." && pwd)
command -v valgrind >/dev/null ||
	{ echo "pass_instr: valgrind not installed (apt-get install valgrind)" >&2; exit 1; }
for d in "$a" "$b"; do
	[ -e "$d/libtern.so.0" ] || { echo "pass_instr: no $d/libtern.so.0" >&2; exit 1; }
done
node=""
[ "$prov" = tcp ] && node=127.0.0.1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/pass.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <tern/tern.h>
int main(int argc, char **argv)
{
	struct tern_ctx_attr attr = { .provider = argv[1],
				      .node = argv[2][0] ? argv[2] : NULL };
	struct tern_ctx *ctx;
	long n = atol(argv[3]);

	(void)argc;
	if (tern_ctx_open(&attr, &ctx) != 0)
		return 1;
	for (long i = 0; i < n; i++)
		if (tern_progress(ctx) != 0)
			return 2; /* something happened: not an empty pass */
	return tern_ctx_close(ctx) != 0;
}
EOF
cc -O2 -I"$src/include" -o "$tmp/pass" "$tmp/pass.c" -L"$a" -l:libtern.so.0
count() { # LIBDIR ITERS -> instructions inside tern_progress()
	LD_LIBRARY_PATH="$1" valgrind --tool=callgrind --toggle-collect=tern_progress \
		--callgrind-out-file="$tmp/cg" "$tmp/pass" "$prov" "$node" "$2" \
		>/dev/null 2>&1 || { echo "pass_instr: run failed ($1)" >&2; exit 1; }
	awk '/^summary:/ { print $2 }' "$tmp/cg"
}
echo "instructions per empty tern_progress() pass, provider $prov, ($((2 * n)) - $n) / $n (callgrind)"
for d in "$a" "$b"; do
	x=$(count "$d" "$n")
	y=$(count "$d" $((2 * n)))
	awk -v d="$d" -v x="$x" -v y="$y" -v n="$n" \
		'BEGIN { printf "%-50s %8.2f\n", d, (y - x) / n }'
done
