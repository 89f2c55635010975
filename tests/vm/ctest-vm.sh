#!/bin/sh
# SPDX-License-Identifier: MIT
# The host side of the CTest label `vm` (tests/vm/vm.cmake): ONE guest boot
# runs the whole guest suite; each test then reports its own result.
#
# usage: ctest-vm.sh boot BUILD-DIR RESULTS-DIR TEST...
#          boot the guest (run-vm.sh), run guest-suite.sh TEST... in it and
#          leave RESULTS-DIR/NAME.log and NAME.rc per test. Exits 77 (skip)
#          with the reason when qemu-system-x86_64 is missing, unless
#          TERN_VM_REQUIRED=1 (CI), which makes that a failure.
#          TERN_VM_SIW=1 builds soft-iWARP's siw.ko first, where none is
#          cached (root: it installs linux-headers); with TERN_VM_REQUIRED=1
#          a siw.ko that cannot be built is a failure too.
#        ctest-vm.sh result RESULTS-DIR NAME
#          print the test's guest output and exit with its status.
set -u
here=$(cd "$(dirname "$0")" && pwd)

case ${1:-} in
boot)
	build=$2 results=$3
	shift 3
	rm -rf "$results"
	mkdir -p "$results"
	if ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
		why="qemu-system-x86_64 is not installed (apt-get install qemu-system-x86, or: sh scripts/deps.sh ci)"
		if [ "${TERN_VM_REQUIRED:-0}" = 1 ]; then
			echo "FAIL: $why, and TERN_VM_REQUIRED=1"
			exit 1
		fi
		echo "$why" >"$results/SKIPPED"
		echo "SKIP: $why"
		exit 77
	fi
	# soft-iWARP: built once into the cache where asked for (it installs
	# linux-headers: root only). Asked for and required (CI), a siw.ko
	# that cannot be built fails the run; otherwise rxe goes on alone.
	if [ "${TERN_VM_SIW:-0}" = 1 ] &&
		! "$here/run-vm.sh" --build "$build" --siw-prepare; then
		if [ "${TERN_VM_REQUIRED:-0}" = 1 ]; then
			echo "FAIL: siw.ko could not be built (above), and TERN_VM_REQUIRED=1 TERN_VM_SIW=1"
			exit 1
		fi
		echo "vm: siw.ko could not be built; going on with rxe only"
	fi
	# what the host says about logging and limits goes into the guest too
	envs=""
	for v in TERN_LOG FI_LOG_LEVEL TERN_VM_TEST_LIMIT; do
		eval "[ -z \"\${$v+x}\" ] || envs=\"\$envs --env $v=\$$v\""
	done
	# shellcheck disable=SC2086
	"$here/run-vm.sh" --build "$build" --timeout "${TERN_VM_TIMEOUT:-600}" \
		$envs -- sh "$here/guest-suite.sh" "$build" "$@" >"$results/guest.log"
	rc=$?
	# split the framed output into one log and one status per test
	awk -v dir="$results" '
		/^@@tern-vm-test [^ ]*@@$/ {
			name = $2; sub(/@@$/, "", name)
			out = dir "/" name ".log"; printf "" > out; next
		}
		/^@@tern-vm-result / {
			split($0, f, " "); sub(/@@$/, "", f[4])
			print f[3] > (dir "/" f[2] ".rc"); close(dir "/" f[2] ".rc")
			printf "(%s s in the guest)\n", f[4] > out; close(out)
			out = ""; next
		}
		out != "" { print > out }
	' "$results/guest.log"
	grep -v '^@@tern-vm-' "$results/guest.log" | tail -n 5
	n=$(find "$results" -name '*.rc' | wc -l)
	echo "vm: guest exit $rc; results for $n of $# tests in $results"
	# the guest's own verdict is per test; here only "did it run at all"
	[ "$n" -eq $# ] || { cat "$results/guest.log"; exit 1; }
	exit 0
	;;
result)
	results=$2 name=$3
	if [ -f "$results/SKIPPED" ]; then
		echo "SKIP: $(cat "$results/SKIPPED")"
		exit 77
	fi
	if [ ! -f "$results/$name.rc" ]; then
		echo "FAIL: no result for $name: the guest did not run it (see the vm_boot test)"
		exit 1
	fi
	cat "$results/$name.log"
	exit "$(cat "$results/$name.rc")"
	;;
*)
	echo "usage: $0 boot BUILD-DIR RESULTS-DIR TEST... | result RESULTS-DIR NAME" >&2
	exit 2
	;;
esac
