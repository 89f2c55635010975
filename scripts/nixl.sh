#!/bin/bash
# SPDX-License-Identifier: MIT
# tern as a NIXL backend plugin, tested under NIXL 1.4.0's own gtests in
# the Debian 13 root of scripts/debroot.sh (tests/nixl/README.md), from
# the host, as root.
#
# usage: scripts/nixl.sh build   NIXL 1.4.0 built from
#                                ../shared/third_party/nixl-1.4.0.tar.gz
#                                in the root (tests/nixl/build.sh: cached
#                                by the tarball's hash under /opt there;
#                                6-11 minutes the first time, seconds
#                                after)
#        scripts/nixl.sh check   build, then tests/nixl/run.sh in the
#                                root: tern and plugins/nixl built, NIXL's
#                                TestTransfer and TestErrorHandling for
#                                TERN over shm and tcp, and with
#                                TERN_LOCAL=0; fails on any failure or skip
#        scripts/nixl.sh ucx     build, then NIXL's UCX instantiations of
#                                the same tests with NIXL's UCX plugin
#                                (Debian's UCX 1.18): for comparison
#        scripts/nixl.sh shell   a shell in the root
#
# Environment: TERN_* passes into the root (scripts/debroot.sh), so
# TERN_NIXL_GTEST_FILTER, TERN_NIXL_PROVIDERS and TERN_NIXL_TIMEOUT reach
# tests/nixl/run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
case "$mode" in
build | check | ucx | shell) ;;
*) sed -n '/^# usage:/,/^#$/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
t0=$(date +%s)
note() { echo "nixl: [$(($(date +%s) - t0)) s] $*" >&2; }

note "NIXL in the Debian 13 root: tests/nixl/build.sh"
scripts/debroot.sh trixie run bash tests/nixl/build.sh
case "$mode" in
build) ;;
check)
	note "tern's NIXL plugin under NIXL's gtests: tests/nixl/run.sh"
	scripts/debroot.sh trixie run bash tests/nixl/run.sh
	;;
ucx)
	note "NIXL's UCX plugin under the same gtests: tests/nixl/run.sh ucx"
	scripts/debroot.sh trixie run bash tests/nixl/run.sh ucx
	;;
shell) scripts/debroot.sh trixie shell ;;
esac
note "done"
