#!/bin/sh
# SPDX-License-Identifier: MIT
# tern topo: this host (whatever it has), the fixtures, and bad input.
set -u
data=$(cd "$(dirname "$0")/../data" && pwd)
fail=0
t() { # t EXPECTED-RC PATTERN CMD...
	want=$1 pat=$2
	shift 2
	out=$("$@" 2>&1)
	rc=$?
	if [ $rc -ne "$want" ] || ! printf '%s' "$out" | grep -q -- "$pat"; then
		echo "not ok: $* (rc $rc, want $want, pattern '$pat')"
		printf '%s\n' "$out" | head -5
		fail=1
	else
		echo "ok: $*"
	fi
}
# json CHECK CMD...: CMD's stdout must be JSON for which the Python
# expression CHECK (over `j`) holds.
json() {
	check=$1
	shift
	if "$@" | python3 -c "import json, sys; j = json.load(sys.stdin)
assert $check, 'check failed: $check'"; then
		echo "ok: $* (json: $check)"
	else
		echo "not ok: $* (json: $check)"
		fail=1
	fi
}

t 0 "usage: tern topo" "$TERN" topo --help
t 0 "topo" "$TERN" --help
# This host: a map whatever it has (here: no GPU, no RDMA NIC).
t 0 "NUMA node [0-9]*: [0-9]* cores" "$TERN" topo
t 0 "GPU" "$TERN" topo
json 'len(j["numa"]) >= 1 and all(len(n["cores"]) >= 1 for n in j["numa"])' \
	"$TERN" topo --json
json 'j["source"] == "this host" and isinstance(j["gpus"], list)' \
	"$TERN" topo --json

# p5.48xlarge: 8 GPUs x 4 EFA NICs under their own switches.
p5="$data/p5.48xlarge.xml"
json 'len(j["gpus"]) == 8 and all(len(g["nics"]) == 4 for g in j["gpus"])' \
	"$TERN" topo --json --xml "$p5"
json 'len({n for g in j["gpus"] for n in g["nics"]}) == 32' \
	"$TERN" topo --json --xml "$p5"
json 'all(g["nic_bps"] == 400 * 10**9 and g["nic_path"] == "switch" for g in j["gpus"])' \
	"$TERN" topo --json --xml "$p5"
json 'j["total_nic_bps"] == 3200 * 10**9 and j["nic_kind"] == "efa"' \
	"$TERN" topo --json --xml "$p5"
t 0 "NICs: 4, 400 Gbit/s, under its PCIe switch 0000:45:00.0" \
	"$TERN" topo --xml "$p5"
t 0 "shared with 1 other GPU" "$TERN" topo --xml "$data/p4d.24xlarge.xml"
t 0 "GPUs: none" "$TERN" topo --xml "$data/server-2s.xml"
json 'j["gpus"] == [] and [len(n["nics"]) for n in j["numa"]] == [2, 1]' \
	"$TERN" topo --json --xml "$data/server-2s.xml"
json 'any("ibp115s0f0" in g["nics"] for g in j["gpus"])' \
	"$TERN" topo --json --nics all --xml "$data/p6-b200.48xlarge.xml"

# Pinning before the domains open (shm has no NIC: this thread's node),
# over 2 rails with a striped 1 MiB write, verified.
t 0 "bench: pinned: cores [0-9]" "$TERN" bench --provider shm --pin \
	--rails 2 --sizes 1M --iters 20 --verify

# Bad input: clear errors, no crash.
t 1 "cannot read /nonexistent.xml: No such file" \
	"$TERN" topo --xml /nonexistent.xml
t 1 "cannot read /: Is a directory" "$TERN" topo --xml /
t 1 "is not an hwloc XML topology" "$TERN" topo --xml "$0"
t 2 "--xml '': empty, expected FILE" "$TERN" topo --xml ""
t 2 "expected auto, efa, mlx, rdma or all" "$TERN" topo --nics foo
t 2 "unexpected argument" "$TERN" topo extra
[ $fail -eq 0 ] && echo "PASS: topo"
exit $fail
