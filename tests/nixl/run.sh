#!/bin/bash
# SPDX-License-Identifier: MIT
# tern as a NIXL backend, under NIXL's own gtests, in a Debian 13 root, as
# root (scripts/nixl.sh check runs it there: tests/nixl/README.md):
#   1. NIXL 1.4.0: tests/nixl/build.sh (cached; 6-11 minutes the first
#      time);
#   2. tern: a release build (build-release), installed into
#      build-nixl-tern/ (find_package(tern), tern.pc);
#   3. the plugin: cmake -S plugins/nixl -B build-nixl
#      -DNIXL_PREFIX=NIXL's prefix (also CMAKE_PREFIX_PATH and
#      TERN_PREFIX: tern's, PKG_CONFIG_PATH: both .pc files); it must
#      make a libplugin_TERN.so; no plugins/nixl/CMakeLists.txt is a
#      failure;
#   4. NIXL's gtest binary on the directory of libplugin_TERN.so, with
#      the TERN instantiations build.sh adds: TestTransfer (tern,
#      tern_no_pt), then TestErrorHandling (tern), two runs; then the
#      plugin's own cases (tests/nixl/tern_nixl_test.cpp, built by
#      plugins/nixl: every case its usage line names). All of it once per
#      configuration: TERN_PROVIDER=shm, tcp, then both again with
#      TERN_LOCAL=0 (variables the plugin reads, passed through). A
#      failed, skipped or missing test, an exit status that is not 0 (42:
#      NIXL logged a warning or error no test expected) or a run past the
#      time limit fails the whole run, after the rest has run.
#
# usage: tests/nixl/run.sh        the above
#        tests/nixl/run.sh ucx    NIXL's UCX instantiations of TestTransfer
#                                 (and TestErrorHandling) instead, with
#                                 NIXL's own UCX plugin: for comparison,
#                                 no tern build
#
# Environment: TERN_NIXL_GTEST_FILTER (one gtest run with that filter
# instead of the two), TERN_NIXL_CASES (the plugin's own cases, default
# all), TERN_NIXL_PROVIDERS (default "shm tcp"), TERN_NIXL_TIMEOUT (seconds
# per gtest run or case, default 300; the slowest passing run here takes
# 26 s). Logs and gtest JSON reports go to build-nixl/gtest/.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
mode=${1:-tern}
case "$mode" in
tern | ucx) ;;
*) sed -n '/^# usage:/,/^#$/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
t0=$(date +%s)
note() { echo "nixl-run: [$(($(date +%s) - t0)) s] $*" >&2; }
die() { echo "nixl-run: FAIL: $*" >&2; exit 1; }
jobs=2
timeout_s=${TERN_NIXL_TIMEOUT:-300}

# 1. NIXL
note "NIXL: tests/nixl/build.sh"
prefix=$(bash tests/nixl/build.sh | tail -1)
[ -x "$prefix/bin/gtest" ] || die "no gtest binary in '$prefix'"
gtest=$prefix/bin/gtest
# build-nixl from nothing: no plugin or test binary of an earlier build
# stands in for one this checkout does not build
out=$repo/build-nixl/gtest
rm -rf "$repo/build-nixl"
mkdir -p "$out"
owntest=""
cases=""

if [ "$mode" = ucx ]; then
	# NIXL's own plugin directory (PREFIX/lib/plugins, beside libnixl.so)
	# is always searched: naming it again is a warning (exit 42)
	plugdir=""
	filters=("ucx/TestTransfer.*:ucx_no_pt/TestTransfer.*"
		"ucx/TestErrorHandling.*")
	# Debian 13's UCX is 1.18: every UCX backend logs NIXL's warning "UCX
	# version is less than 1.19, CUDA support is limited", which NIXL's
	# gtest main ignores (its own list) only where AWS_BATCH_JOB_ID is set
	configs=("AWS_BATCH_JOB_ID=tern-nixl-ucx")
else
	# 2. tern
	if [ ! -f plugins/nixl/CMakeLists.txt ]; then
		die "no plugins/nixl/CMakeLists.txt: the TERN plugin is not" \
			"in this checkout yet (NIXL is built: $prefix)"
	fi
	sh scripts/deps.sh demo
	tp=$repo/build-nixl-tern
	note "tern: release build (build-release), installed into $tp"
	{ cmake --preset release &&
		cmake --build --preset release -j "$jobs" &&
		rm -rf "$tp" &&
		cmake --install build-release --prefix "$tp"; } \
		>"$out/tern-build.log" 2>&1 ||
		{ tail -40 "$out/tern-build.log" >&2; die "tern's build failed"; }

	# 3. the plugin
	note "plugin: cmake -S plugins/nixl -B build-nixl -DNIXL_PREFIX=$prefix"
	export PKG_CONFIG_PATH=$prefix/lib/pkgconfig:$(echo "$tp"/lib*/pkgconfig | tr ' ' ':')
	{ cmake -S plugins/nixl -B build-nixl -DNIXL_PREFIX="$prefix" \
		-DCMAKE_PREFIX_PATH="$tp" -DTERN_PREFIX="$tp" \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo &&
		cmake --build build-nixl -j "$jobs"; } \
		>"$out/plugin-build.log" 2>&1 ||
		{ tail -60 "$out/plugin-build.log" >&2
			die "the plugin's build failed (build-nixl/gtest/plugin-build.log)"; }
	so=$(find build-nixl -name libplugin_TERN.so -type f -print -quit)
	[ -n "$so" ] || die "plugins/nixl built no libplugin_TERN.so"
	if ldd "$so" | grep 'not found' >&2; then
		die "$so: libraries not found"
	fi
	nm -D --defined-only "$so" | grep -qw nixl_plugin_init ||
		die "$so does not export nixl_plugin_init"
	plugdir=$(cd "$(dirname "$so")" && pwd)
	note "plugin: $plugdir/libplugin_TERN.so"
	# TestTransfer apart from TestErrorHandling: a hang in one keeps
	# the other's results
	filters=("tern/TestTransfer.*:tern_no_pt/TestTransfer.*"
		"tern/TestErrorHandling.*")
	# the plugin's own cases (tests/nixl/tern_nixl_test.cpp), built by
	# plugins/nixl beside the plugin; the cases are those its usage names
	if [ -f tests/nixl/tern_nixl_test.cpp ]; then
		owntest=$(find build-nixl -name tern_nixl_test -type f \
			-perm -u+x -print -quit)
		if [ -z "$owntest" ]; then
			missing="tests/nixl/tern_nixl_test.cpp is there but"
			missing="$missing plugins/nixl built no tern_nixl_test"
			note "FAIL: $missing"
		else
			# its usage (exit 2) names the cases
			cases=${TERN_NIXL_CASES:-$({ "$owntest" 2>&1 || true; } |
				sed -n 's/^usage: [^ ]* \([a-z|]*\).*/\1/p' |
				tr '|' ' ')}
			[ -n "$cases" ] || die "$owntest names no cases"
			note "the plugin's own cases: $cases"
		fi
	fi
	configs=()
	for p in ${TERN_NIXL_PROVIDERS:-shm tcp}; do
		configs+=("TERN_PROVIDER=$p")
	done
	for p in ${TERN_NIXL_PROVIDERS:-shm tcp}; do
		configs+=("TERN_PROVIDER=$p TERN_LOCAL=0")
	done
fi
[ -n "${TERN_NIXL_GTEST_FILTER:-}" ] && filters=("$TERN_NIXL_GTEST_FILTER")

# 4. the tests. check NAME JSON: every test selected ran and passed
check() {
	python3 - "$1" "$2" <<-'EOF'
		import json, sys
		name, path = sys.argv[1], sys.argv[2]
		try:
		    r = json.load(open(path))
		except Exception as e:
		    print(f"{name}: no gtest report"); sys.exit(1)
		bad, ran = [], 0
		for suite in r.get("testsuites", []):
		    for t in suite.get("testsuite", []):
		        full = f'{suite["name"]}.{t["name"]}'
		        if t.get("status") != "RUN" or t.get("result") != "COMPLETED":
		            bad.append(f'{full}: {t.get("status")} {t.get("result")}')
		        elif t.get("failures"):
		            bad.append(f"{full}: FAILED")
		        else:
		            ran += 1
		print(f"{name}: {ran} passed, {len(bad)} not" +
		      "".join(f"\n  {b}" for b in bad))
		sys.exit(1 if bad or ran == 0 else 0)
	EOF
}
# limited LOG CMD...: CMD under the time limit, its output to LOG; a
# timeout has a process group of its own, so it is killed by hand when
# this script is stopped
tpid=""
trap '[ -z "$tpid" ] || kill "$tpid" 2>/dev/null || true' EXIT
trap 'exit 130' INT TERM
limited() {
	local log=$1 r=0
	shift
	timeout -k 10 "$timeout_s" "$@" >"$log" 2>&1 </dev/null &
	tpid=$!
	wait "$tpid" || r=$?
	tpid=""
	return $r
}
# why RC: the words for an exit status
why() {
	case $1 in
	124 | 137) echo "timed out after $timeout_s s" ;;
	42) echo "exit 42: NIXL logged warnings/errors no test expected" ;;
	*) echo "exit $1" ;;
	esac
}

rc=0
summary=()
[ -z "${missing:-}" ] || { rc=1; summary+=("FAIL $missing"); }
for cfg in "${configs[@]}"; do
	name=$(echo "$cfg" | tr ' =' '_-')
	vars=()
	for w in $cfg; do
		case $w in *=*) vars+=("$w") ;; esac
	done
	for i in "${!filters[@]}"; do
		filter=${filters[$i]}
		log=$out/$name.$i
		note "gtest [$cfg] --gtest_filter='$filter'"
		tb=$(date +%s)
		trc=0
		limited "$log.log" env "${vars[@]}" "$gtest" \
			${plugdir:+"--tests_plugin_dirs=$plugdir"} \
			--gtest_filter="$filter" --gtest_output="json:$log.json" ||
			trc=$?
		grep -E '^\[ +(OK|FAILED|SKIPPED) +\]' "$log.log" |
			sed 's/, where GetParam() = .*//' >&2 || true
		sed -n "s/^ATTENTION: Message is /unexpected NIXL log: /p" \
			"$log.log" | sort | uniq -c | sort -rn | head -5 >&2
		# the plugin's own errors, however few beside NIXL's
		sed -n "s/^ATTENTION: Message is '\(TERN: .*\)'$/plugin error: \1/p" \
			"$log.log" | sort | uniq -c | sort -rn | head -5 >&2
		res=$(check "$filter" "$log.json") || [ "$trc" -ne 0 ] || trc=1
		[ "$trc" -eq 0 ] || res="$res; $(why "$trc")"
		# a run killed leaves no report: name the test it was in
		if [ ! -f "$log.json" ]; then
			hung=$(sed -n 's/^\[ RUN      \] //p' "$log.log" | tail -1)
			[ -z "$hung" ] || res="$res, in $hung"
		fi
		res="[$cfg] $res ($(($(date +%s) - tb)) s)"
		if [ "$trc" -ne 0 ]; then
			rc=1
			grep -v '^ATTENTION' "$log.log" | tail -15 | cut -c1-300 >&2
			summary+=("FAIL $res")
		else
			summary+=("ok   $res")
		fi
		note "${summary[-1]}"
	done
	# the plugin's own cases, in the same configuration
	for c in $cases; do
		log=$out/$name.own-$c.log
		tb=$(date +%s)
		trc=0
		limited "$log" env NIXL_PLUGIN_DIR="$plugdir" "${vars[@]}" \
			"$owntest" "$c" || trc=$?
		res="[$cfg] tern_nixl_test $c"
		if [ $trc -ne 0 ]; then
			rc=1
			grep -v '^ATTENTION' "$log" | tail -15 | cut -c1-300 >&2
			summary+=("FAIL $res: $(why "$trc") ($(($(date +%s) - tb)) s)")
		else
			summary+=("ok   $res ($(($(date +%s) - tb)) s)")
		fi
		note "${summary[-1]}"
	done
done
note "summary (logs: build-nixl/gtest/):"
printf '  %s\n' "${summary[@]}" >&2
[ $rc -eq 0 ] || die "NIXL's tests ($mode)"
note "ok: NIXL's tests ($mode)"
