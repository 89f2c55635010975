#!/bin/sh
# SPDX-License-Identifier: MIT
# Cross-version check: a tern binary built against one libfabric, run
# against the libfabric installed here. It must say which libfabric runs,
# which it was built with, and which API version it negotiated; on a 2.x
# runtime that version must be 1.18 or newer (below 1.18, libfabric 2.x's
# EFA turns device RDMA off and refuses FI_HMEM with FI_ATOMIC). Then
# `tern bench --verify` must pass over shm and over tcp on loopback,
# through libfabric: TERN_LOCAL=0, or the same-host path (docs/local.md)
# would carry every write and read of these one-host runs, and each run
# must say it took the provider's path.
#
# usage: scripts/crossver.sh [TERN]      (default build-release/tern)
# scripts/debian13.sh crossver runs it in a Debian 13 root (libfabric
# 2.1) with the tern built on the host. Needs python3 (JSON). Exits 1
# naming every check that failed.
set -u
tern=${1:-build-release/tern}
# Every byte through the libfabric under test, never the same-host path.
export TERN_LOCAL=0
fails=""
fail() {
	echo "crossver: FAIL: $*" >&2
	fails="$fails
  $*"
}
[ -x "$tern" ] || { echo "crossver: no tern at $tern" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 1. tern info --json: the versions.
if ! timeout 60 "$tern" info --json >"$tmp/info.json" 2>"$tmp/info.err"; then
	cat "$tmp/info.err" >&2
	fail "tern info --json exited non-zero"
fi
if ! python3 - "$tmp/info.json" >"$tmp/versions" 2>&1 <<'EOF'
import json, sys

def ver(s):
    try:
        major, minor = str(s).split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None

with open(sys.argv[1]) as f:
    info = json.load(f)
run, build, api = (info.get(k) for k in
                   ("libfabric", "libfabric_build", "libfabric_api"))
print("crossver: libfabric runtime %s, built with %s, API negotiated %s"
      % (run, build or "(not reported)", api or "(not reported)"))
bad = []
if ver(run) is None:
    bad.append('"libfabric" (the runtime version) missing or malformed: %r'
               % (run,))
if ver(build) is None:
    bad.append('"libfabric_build" (the version tern was built with) '
               'missing or malformed: %r' % (build,))
if ver(run) is not None and ver(run) >= (2, 0):
    if ver(api) is None:
        bad.append('"libfabric_api" (the API version tern asked for) '
                   'missing or malformed: %r; on a %s runtime it must be '
                   '>= 1.18 (below that, EFA turns device RDMA off)'
                   % (api, run))
    elif ver(api) < (1, 18):
        bad.append("negotiated API %s on a libfabric %s runtime: below "
                   "1.18, EFA turns device RDMA off and refuses FI_HMEM "
                   "with FI_ATOMIC" % (api, run))
for b in bad:
    print("FAIL: " + b)
sys.exit(1 if bad else 0)
EOF
then
	sed -n 's/^FAIL: //p' "$tmp/versions" | while IFS= read -r l; do
		echo "crossver: FAIL: $l" >&2
	done
	grep -v '^FAIL: ' "$tmp/versions"
	fails="$fails
$(sed -n 's/^FAIL: /  /p' "$tmp/versions")"
	grep -q '^FAIL: ' "$tmp/versions" || fail "tern info --json: no JSON"
else
	cat "$tmp/versions"
fi

# 2. bench --verify: every byte checked, over shm and tcp on loopback.
bench() { # bench NAME ARGS...: run, check the exit and the verified column
	name=$1
	shift
	if timeout 120 "$tern" bench "$@" --sizes 8,4K,64K,1M --iters 500 \
		--verify --json="$tmp/$name.json" >"$tmp/$name.out" 2>&1 &&
		python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
r = j["results"]
route = j.get("context", {}).get("route")
if route != "provider":
    print("crossver: peer path %r, not the provider" % (route,))
sys.exit(0 if r and all(x["verified"] == 1 for x in r) and
         route == "provider" else 1)' \
			"$tmp/$name.json" >"$tmp/$name.check"; then
		echo "crossver: bench $name: every size verified, through" \
			"the provider"
	else
		cat "$tmp/$name.out" "$tmp/$name.check" >&2 2>/dev/null
		fail "tern bench $* --verify ($name)"
	fi
}
bench shm-write --provider shm --op write
bench shm-writedata --provider shm --op writedata
bench shm-read --provider shm --op read
bench tcp-write --provider tcp --node 127.0.0.1 --op write
bench tcp-writedata --provider tcp --node 127.0.0.1 --op writedata
bench tcp-send --provider tcp --node 127.0.0.1 --op send

if [ -n "$fails" ]; then
	echo "crossver: FAILED:$fails" >&2
	exit 1
fi
echo "crossver: OK"
