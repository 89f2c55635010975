#!/bin/sh
# SPDX-License-Identifier: MIT
# An idle `tern fill --listen` must sleep, not spin: CPU time over 10 s, from
# /proc/PID/stat (utime + stime), must stay under 1% of a core.
set -u
prov=$1
. "$(dirname "$0")/lib.sh"
start_server fill --listen
sleep 1
ticks() { awk '{ print $14 + $15 }' "/proc/$spid/stat"; }
hz=$(getconf CLK_TCK)
c0=$(ticks)
sleep 10
c1=$(ticks)
stop_server
used=$((c1 - c0))
# 1% of 10 s is 0.1 s = hz/10 ticks.
echo "idle tern fill --listen over $prov: $used ticks of CPU in 10 s (CLK_TCK $hz);" \
	"$(awk "BEGIN { printf \"%.2f\", 100 * $used / $hz / 10 }")% of a core"
[ $src -eq 0 ] || { echo "FAIL: server exited $src"; exit 1; }
[ $((used * 10)) -lt "$hz" ] || { echo "FAIL: idle server used 1% or more of a core"; exit 1; }
echo "PASS: idle server over $prov"
