#!/bin/sh
# SPDX-License-Identifier: MIT
# Fuzz each parser, and the fill server's sessions, for a bounded time, all
# at once, each on a copy of its seed corpus (tests/fuzz/corpus/ is never
# written). Fails when any fuzzer finds a crash, a leak, undefined
# behaviour or a hang; the input that did it lands in
# BUILD/fuzz/NAME/crashes/ (README.md here).
# usage: tests/fuzz/run.sh BUILD SECONDS [FUZZER...]
set -eu
if [ $# -lt 2 ]; then
	echo "usage: $0 BUILD SECONDS [FUZZER...]" >&2
	exit 2
fi
build=$1
secs=$2
shift 2
src=$(cd "$(dirname "$0")" && pwd)
[ $# -gt 0 ] || set -- fuzz_boot fuzz_ctrl fuzz_desc fuzz_fill fuzz_fill_session \
	fuzz_local

jobs=""
for f in "$@"; do
	bin=$build/tests/fuzz/$f
	work=$build/fuzz/$f
	if [ ! -x "$bin" ]; then
		echo "fuzz: $bin not built (cmake --build --preset fuzz)" >&2
		exit 1
	fi
	rm -rf "$work/corpus"
	mkdir -p "$work/corpus" "$work/crashes"
	cp "$src/corpus/$f/"* "$work/corpus/"
	echo "fuzz: $f for ${secs}s (log: $work/log)"
	# IPATH_NO_BACKTRACE: libfabric's psm provider pulls in
	# libinfinipath, whose SIGABRT handler would hide libFuzzer's.
	IPATH_NO_BACKTRACE=1 UBSAN_OPTIONS=print_stacktrace=1 \
		"$bin" -max_total_time="$secs" -max_len=8192 -timeout=10 \
		-print_final_stats=1 -artifact_prefix="$work/crashes/" \
		"$work/corpus" >"$work/log" 2>&1 &
	jobs="$jobs $f:$!"
done

failed=0
for j in $jobs; do
	f=${j%%:*}
	work=$build/fuzz/$f
	if wait "${j#*:}"; then
		runs=$(sed -n 's/^stat::number_of_executed_units: *//p' \
			"$work/log")
		cov=$(grep -o 'cov: [0-9]*' "$work/log" | tail -n 1)
		echo "fuzz: $f ok: ${runs:-?} runs, $cov," \
			"$(find "$work/corpus" -type f | wc -l) inputs in its corpus"
	else
		failed=1
		echo "fuzz: $f FAILED; the end of $work/log:" >&2
		tail -n 60 "$work/log" >&2
		grep 'Test unit written to' "$work/log" >&2 || true
	fi
done
exit $failed
