#!/bin/bash
# SPDX-License-Identifier: MIT
# tern as a NIXL backend, under NIXL's own gtests, in a Debian 13 root, as
# root (scripts/nixl.sh check runs it there: tests/nixl/README.md):
#   1. NIXL 1.4.0: tests/nixl/build.sh (cached; 10-15 minutes the first
#      time);
#   2. tern: a release build (build-release), installed into
#      build-nixl-tern/ (find_package(tern), tern.pc);
#   3. the plugin: cmake -S plugins/nixl -B build-nixl
#      -DNIXL_PREFIX=NIXL's prefix (also CMAKE_PREFIX_PATH and
#      TERN_PREFIX: tern's, PKG_CONFIG_PATH: both .pc files); it must
#      make a libplugin_TERN.so; no plugins/nixl/CMakeLists.txt is a
#      failure;
#   4. NIXL's gtest binary on the directory of libplugin_TERN.so, with
#      the TERN instantiations build.sh adds (default filter below), once
#      per configuration: TERN_PROVIDER=shm, tcp, then both again with
#      TERN_LOCAL=0 (variables the plugin reads, passed through). A failed,
#      skipped or missing test, an exit status that is not 0 (42: NIXL
#      logged a warning or error nobody expected) or a run past the time
#      limit fails the whole run.
#
# usage: tests/nixl/run.sh        the above
#        tests/nixl/run.sh ucx    NIXL's UCX instantiations of TestTransfer
#                                 (and TestErrorHandling) instead, with
#                                 NIXL's own UCX plugin: for comparison,
#                                 no tern build
#
# Environment: TERN_NIXL_GTEST_FILTER (default
# tern/TestTransfer.*:tern_no_pt/TestTransfer.*:tern/TestErrorHandling.*;
# for ucx, the same with ucx), TERN_NIXL_PROVIDERS (default "shm tcp"),
# TERN_NIXL_TIMEOUT (seconds per gtest run, default 900). Logs and gtest
# JSON reports go to build-nixl/gtest/.
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
timeout_s=${TERN_NIXL_TIMEOUT:-900}

# 1. NIXL
note "NIXL: tests/nixl/build.sh"
prefix=$(bash tests/nixl/build.sh | tail -1)
[ -x "$prefix/bin/gtest" ] || die "no gtest binary in '$prefix'"
gtest=$prefix/bin/gtest
out=$repo/build-nixl/gtest
rm -rf "$out"
mkdir -p "$out"

if [ "$mode" = ucx ]; then
	# NIXL's own plugin directory (PREFIX/lib/plugins, beside libnixl.so)
	# is always searched: naming it again is a warning (exit 42)
	plugdir=""
	filter=${TERN_NIXL_GTEST_FILTER:-ucx/TestTransfer.*:ucx_no_pt/TestTransfer.*:ucx/TestErrorHandling.*}
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
	filter=${TERN_NIXL_GTEST_FILTER:-tern/TestTransfer.*:tern_no_pt/TestTransfer.*:tern/TestErrorHandling.*}
	configs=()
	for p in ${TERN_NIXL_PROVIDERS:-shm tcp}; do
		configs+=("TERN_PROVIDER=$p")
	done
	for p in ${TERN_NIXL_PROVIDERS:-shm tcp}; do
		configs+=("TERN_PROVIDER=$p TERN_LOCAL=0")
	done
fi

# 4. the gtests. check NAME JSON: every test selected ran and passed
check() {
	python3 - "$1" "$2" <<-'EOF'
		import json, sys
		name, path = sys.argv[1], sys.argv[2]
		try:
		    r = json.load(open(path))
		except Exception as e:
		    print(f"{name}: no gtest report ({e})"); sys.exit(1)
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

rc=0
summary=()
for cfg in "${configs[@]}"; do
	name=$(echo "$cfg" | tr ' =' '_-')
	vars=()
	for w in $cfg; do
		case $w in *=*) vars+=("$w") ;; esac
	done
	note "gtest [$cfg] --gtest_filter='$filter'"
	trc=0
	tb=$(date +%s)
	env "${vars[@]}" timeout -k 10 "$timeout_s" "$gtest" \
		${plugdir:+"--tests_plugin_dirs=$plugdir"} --gtest_filter="$filter" \
		--gtest_output="json:$out/$name.json" >"$out/$name.log" 2>&1 ||
		trc=$?
	grep -E '^\[ +(OK|FAILED|SKIPPED) +\]' "$out/$name.log" >&2 || true
	sed -n "s/^ATTENTION: Message is /unexpected NIXL log: /p" \
		"$out/$name.log" | sort | uniq -c | sort -rn | head -5 >&2
	res=$(check "$cfg" "$out/$name.json") || { [ "$trc" -ne 0 ] || trc=1; }
	echo "$res" >&2
	case $trc in
	0) ;;
	124 | 137) res="$res; timed out after $timeout_s s" ;;
	42) res="$res; exit 42: NIXL logged unexpected warnings/errors" ;;
	*) res="$res; exit $trc" ;;
	esac
	if [ "$trc" -ne 0 ]; then
		rc=1
		tail -30 "$out/$name.log" >&2
		summary+=("FAIL [$cfg] $res ($(($(date +%s) - tb)) s)")
	else
		summary+=("ok   [$cfg] $res ($(($(date +%s) - tb)) s)")
	fi
done
note "summary (logs: build-nixl/gtest/):"
printf '  %s\n' "${summary[@]}" >&2
[ $rc -eq 0 ] || die "NIXL's gtests ($mode)"
note "ok: NIXL's gtests ($mode)"
