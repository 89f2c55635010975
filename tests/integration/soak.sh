#!/bin/sh
# SPDX-License-Identifier: MIT
# Soak: CLIENTS good `tern fill` clients fill without pause for SECONDS
# while hostile clients (tests/integration/hostile.c, every scenario, a
# new card each run) attack the same `tern fill --listen`, one after another.
# Every good fill must verify and every hostile run pass; the server's
# RSS under load must end within 10% of where it stood once warm, its open
# fds once everyone has left within 10% of where they stood before anyone
# came, and it must then sleep (under 1% of a core over 10 s, as idle.sh).
#
# usage: soak.sh PROV [SECONDS [CLIENTS]]   (defaults 120 and 32;
#        $TERN_SOAK_SECONDS overrides SECONDS: docs/testing.md)
set -u
prov=$1
secs=${TERN_SOAK_SECONDS:-${2:-120}}
clients=${3:-32}
. "$(dirname "$0")/lib.sh"
fail=0
pids=""
hpid=""
stop_all() {
	[ -n "$hpid" ] && kill "$hpid" 2>/dev/null
	# shellcheck disable=SC2086
	[ -n "$pids" ] && kill $pids 2>/dev/null
	cleanup
}
trap stop_all EXIT

# The server's own memory: its anonymous pages (heap, pools, stacks).
# Its resident shared memory is reported beside it, not judged: libfabric's
# shm maps the /dev/shm region of each process that sends to it, and
# Debian 13's 2.1 kept such mappings after their processes had gone (15
# hostile runs: 15 more regions, about 6 MB, while the anonymous memory
# stayed within 30 KiB). tern's own shared mappings, its peers' inboxes,
# are counted.
rss() { awk '/^RssAnon:/ { print $2 }' "/proc/$spid/status"; }
rss_parts() { awk '/^(VmRSS|RssShmem):/ { printf "%s %s KiB ", $1, $2 }' "/proc/$spid/status"; }
inboxes() { grep -c 'memfd:tern-inbox' "/proc/$spid/maps"; }
fds() { ls "/proc/$spid/fd" | wc -l; }
ticks() { awk '{ print $14 + $15 }' "/proc/$spid/stat"; }

# A fill's writes that failed unnoticed would end only at --fill-timeout:
# far past the 10 s a hostile run allows for its answer under this load.
start_server fill --listen --fill-timeout 60000
sleep 1
fd0=$(fds)
echo "soak over $prov: $clients clients for ${secs} s; server pid $spid, $fd0 fds before any client"

i=0
while [ $i -lt "$clients" ]; do
	# shellcheck disable=SC2086
	"$TERN" fill --provider "$prov" $node --card-file "$dir/card" \
		--count 1000000 --page-size 512K --pages 16 >"$dir/c$i.log" 2>&1 &
	pids="$pids $!"
	i=$((i + 1))
done

# Hostile runs back to back until told to stop; each must pass.
(
	n=0
	bad=0
	while [ ! -e "$dir/stop" ]; do
		# shellcheck disable=SC2086
		if ! "$HOSTILE" --provider "$prov" $node --answer-ms 10000 \
			"$dir/card" >"$dir/h.log" 2>&1; then
			bad=$((bad + 1))
			cp "$dir/h.log" "$dir/h-failed-$bad.log"
		fi
		n=$((n + 1))
		touch "$dir/h.one"
	done
	echo "$n $bad" >"$dir/hostile.count"
) &
hpid=$!

# Warm: a third of the run, and at least one hostile run done. RSS climbs
# for the first tens of seconds (pools, each writer's buffer touched as
# far as the largest fill, libfabric's own) and then levels off; a leak
# climbs on (the trail below shows which).
warm=$((secs / 3))
[ $warm -lt 5 ] && warm=5
sleep $warm
while [ ! -e "$dir/h.one" ] && [ $warm -lt $((secs * 2 / 3)) ]; do
	sleep 1
	warm=$((warm + 1))
done
rss0=$(rss)
in0=$(inboxes)
echo "warm after ${warm} s: RssAnon ${rss0} KiB ($(rss_parts)), $(fds) fds, $in0 peer inboxes mapped"
left=$((secs - warm))
step=$((secs / 10))
[ $step -lt 5 ] && step=5
trail=""
while [ $left -gt 0 ]; do
	t=$step
	[ $t -gt $left ] && t=$left
	sleep $t
	left=$((left - t))
	trail="$trail $(rss)"
done
echo "RssAnon (KiB) every ${step} s:$trail"
rss1=$(rss)
in1=$(inboxes)
echo "after ${secs} s: RssAnon ${rss1} KiB ($(rss_parts)), $(fds) fds, $in1 peer inboxes mapped"

touch "$dir/stop"
# shellcheck disable=SC2086
kill -INT $pids
good=0
for p in $pids; do
	wait "$p" || { echo "FAIL: a good client (pid $p) exited non-zero"; fail=1; }
done
pids=""
i=0
while [ $i -lt "$clients" ]; do
	n=$(grep -c "^  verified" "$dir/c$i.log")
	good=$((good + n))
	if grep -q "^tern fill:" "$dir/c$i.log"; then
		echo "FAIL: client $i reported an error:"
		grep "^tern fill:" "$dir/c$i.log" | head -5
		fail=1
	fi
	[ "$n" -gt 0 ] || { echo "FAIL: client $i verified no fill"; tail -5 "$dir/c$i.log"; fail=1; }
	i=$((i + 1))
done
wait "$hpid"
hpid=""
read -r hruns hbad <"$dir/hostile.count"
echo "good fills verified: $good; hostile runs: $hruns ($hbad failed)"
[ "$hruns" -gt 0 ] || { echo "FAIL: no hostile run finished"; fail=1; }
if [ "$hbad" -ne 0 ]; then
	echo "FAIL: $hbad hostile run(s) failed; the first:"
	grep "not ok" "$dir/h-failed-1.log"
	fail=1
fi

# Everyone has left: sessions end on BYE, on their bootstrap connection's
# close, or after --idle-timeout; give the server a moment to settle.
sleep 3
fd1=$(fds)
c0=$(ticks)
sleep 10
c1=$(ticks)
idle=$((c1 - c0))
hz=$(getconf CLK_TCK)
echo "after: $fd1 fds (before any client: $fd0); idle: $idle ticks of CPU in 10 s (CLK_TCK $hz)"

# Memory: within 10% of where it stood once warm. The writers' 32 MiB
# buffers are touched only as far as a fill reaches, so the good clients
# fill 8 MiB, the most a hostile run asks for. The peers' inboxes tern
# maps: no more than once warm, but for a hostile run's own ctxs (a
# leak of one a run would add 15).
[ $((rss1 * 10)) -le $((rss0 * 11)) ] ||
	{ echo "FAIL: RssAnon grew from $rss0 KiB to $rss1 KiB (more than 10%)"; fail=1; }
[ "$in1" -le $((in0 + 8)) ] ||
	{ echo "FAIL: peer inboxes mapped grew from $in0 to $in1"; fail=1; }
[ $((fd1 * 10)) -le $((fd0 * 11)) ] ||
	{ echo "FAIL: open fds grew from $fd0 to $fd1 (more than 10%)"; fail=1; }
[ $((idle * 10)) -lt "$hz" ] ||
	{ echo "FAIL: the server used 1% or more of a core idle after the soak"; fail=1; }
stop_server
[ $src -eq 0 ] || { echo "FAIL: server exited $src after Ctrl-C"; fail=1; }
grep -E "served [0-9]+ session|completion error without" "$dir/server.log" | tail -3
[ $fail -eq 0 ] && echo "PASS: soak over $prov ($clients clients, ${secs} s)"
exit $fail
