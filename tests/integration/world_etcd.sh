#!/bin/sh
# SPDX-License-Identifier: MIT
# An etcd world: Debian's etcd on loopback with a temporary data
# directory; over PROVIDER,
# 1. tern bench --world etcd:// with 3 ranks, every byte verified;
# 2. 3 members (lease 2 s) write to each other; one is killed (SIGKILL):
#    the other two must report it gone within the lease and a period
#    (3.5 s) and keep writing to each other; a 4th rank joins: the two
#    must see it and write to it, and it to them, without a restart.
# Without etcd it skips, saying why; with TERN_ETCD_REQUIRED=1 (CI) that
# is a failure. With "netns" (root), etcd runs on host A (192.0.2.1) of
# the network-namespace test hosts and ranks 0, 1, 2 on hosts A, B, C
# (the joiner on C), over tcp. usage: world_etcd.sh shm|tcp [netns]
set -u
prov=$1
where=${2:-loopback}
skip() {
	echo "SKIP: $1"
	[ "${TERN_ETCD_REQUIRED:-0}" = 1 ] && { echo "FAIL: TERN_ETCD_REQUIRED=1"; exit 1; }
	exit 77
}
command -v etcd >/dev/null 2>&1 || skip "no etcd (Debian: etcd-server)"
: "${MEMBER:?MEMBER: the world_member test program}"
dir=$(mktemp -d)
pids=""
epid=""
cleanup() {
	for p in $pids; do kill -9 $p 2>/dev/null; done
	[ -n "$epid" ] && kill $epid 2>/dev/null
	wait 2>/dev/null
	rm -rf "$dir"
}
fail=0
eaddr=127.0.0.1
# host R: where rank R runs (a namespace, or here); addr R: its address
host() { echo ""; }
addr() { echo 127.0.0.1; }
if [ "$where" = netns ]; then
	. "$(dirname "$0")/netns/lib.sh"
	netns_up # sets its own EXIT trap
	trap 'cleanup; netns_down' EXIT
	eaddr=192.0.2.1
	host() { case $1 in 0) echo "$A" ;; 1) echo "$B" ;; *) echo "$C" ;; esac; }
	addr() { case $1 in 0) echo 192.0.2.1 ;; 1) echo 192.0.2.2 ;; *) echo 192.0.2.3 ;; esac; }
else
	trap cleanup EXIT
fi
# at RANK CMD...: run CMD where rank RANK lives
at() {
	h=$(host "$1")
	shift
	if [ -n "$h" ]; then ip netns exec "$h" "$@"; else "$@"; fi
}
node() { [ "$prov" = tcp ] && echo "--node $(addr "$1")"; }

# free loopback ports for the client and peer URLs
port() { at 0 python3 -c 'import socket; s=socket.socket(); s.bind(("'"$eaddr"'",0)); print(s.getsockname()[1])'; }
cp=$(port)
pp=$(port)
at 0 etcd --name t --data-dir "$dir/etcd" \
	--listen-client-urls "http://$eaddr:$cp" --advertise-client-urls "http://$eaddr:$cp" \
	--listen-peer-urls "http://$eaddr:$pp" --initial-advertise-peer-urls "http://$eaddr:$pp" \
	--initial-cluster "t=http://$eaddr:$pp" >"$dir/etcd.log" 2>&1 &
epid=$!
i=0
until at 0 python3 -c "import urllib.request,sys; urllib.request.urlopen(urllib.request.Request('http://$eaddr:$cp/v3/kv/range', data=b'{\"key\":\"eA==\"}'), timeout=1)" 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 100 ] || { cat "$dir/etcd.log"; echo "FAIL: etcd did not start"; exit 1; }
	sleep 0.1
done
echo "etcd on $eaddr:$cp ($where)"
url="etcd://$eaddr:$cp"

# 1. the all-to-all
for r in 0 1 2; do
	# shellcheck disable=SC2046
	at $r env TERN_WORLD_RANK=$r TERN_WORLD_SIZE=3 "$TERN" bench --world "$url/bench" \
		--provider "$prov" $(node $r) --verify --sizes 4K,1M -n 50 >"$dir/b$r" 2>&1 &
	pids="$pids $!"
done
r=0
for p in $pids; do
	wait "$p" || { echo "FAIL: bench rank $r exited non-zero:"; cat "$dir/b$r"; fail=1; }
	r=$((r + 1))
done
pids=""
cat "$dir/b0"
[ "$(grep -c 'verified: every byte of every pair' "$dir/b0")" -eq 2 ] ||
	{ echo "FAIL: the all-to-all over etcd"; cat "$dir/b1" "$dir/b2"; fail=1; }

# 2. membership
start() { # start RANK SIZE [FIRST-ROUND]
	nodev=""
	[ "$prov" = tcp ] && nodev="TERN_NODE=$(addr "$1")"
	h=$(host "$1")
	# not through at(): $! must be the member itself (ip netns exec and
	# env exec it), which the test kills
	# shellcheck disable=SC2086
	if [ -n "$h" ]; then
		ip netns exec "$h" env $nodev "$MEMBER" "$url/members" "$1" "$2" \
			"$prov" "$dir" ${3:-} >"$dir/m$1" 2>&1 &
	else
		env $nodev "$MEMBER" "$url/members" "$1" "$2" "$prov" "$dir" \
			${3:-} >"$dir/m$1" 2>&1 &
	fi
	eval "pid$1=$!"
	pids="$pids $!"
}
wait_for() { # wait_for FILE TEXT SECONDS
	n=0
	while ! grep -q "$2" "$1" 2>/dev/null; do
		n=$((n + 1))
		[ $n -lt $(($3 * 10)) ] || return 1
		sleep 0.1
	done
}
for r in 0 1 2; do start $r 3; done
for r in 0 1 2; do
	wait_for "$dir/m$r" "^open" 20 || { echo "FAIL: rank $r did not open"; cat "$dir/m$r"; exit 1; }
done
touch "$dir/round1"
for r in 0 1 2; do
	wait_for "$dir/m$r" "^round 1:" 20 || { echo "FAIL: rank $r: round 1"; for q in 0 1 2; do echo "--- rank $q"; cat "$dir/m$q"; done; exit 1; }
done
t0=$(date +%s%3N)
kill -9 "$pid2"
for r in 0 1; do
	if wait_for "$dir/m$r" "^event gone 2" 10; then
		t=$(sed -n 's/^event gone 2 at //p' "$dir/m$r")
		echo "rank $r saw rank 2 gone $((t - t0)) ms after the kill (lease 2 s)"
		[ $((t - t0)) -le 3500 ] || { echo "FAIL: later than 3.5 s"; fail=1; }
	else
		echo "FAIL: rank $r never saw rank 2 gone"; fail=1
	fi
done
touch "$dir/round2"
for r in 0 1; do
	wait_for "$dir/m$r" "^round 2: rank 2 gone: peer and write refused" 20 ||
		{ echo "FAIL: rank $r: requests to the gone rank 2 not refused"; cat "$dir/m$r"; fail=1; }
done
for r in 0 1; do
	wait_for "$dir/m$r" "^round 2: wrote to and heard from ranks $((1 - r))\$" 20 ||
		{ echo "FAIL: rank $r: round 2 between the survivors"; cat "$dir/m$r"; fail=1; }
done
start 3 4 3
wait_for "$dir/m3" "^open" 20 || { echo "FAIL: the joiner did not open"; cat "$dir/m3"; exit 1; }
for r in 0 1; do
	wait_for "$dir/m$r" "^event joined 3" 10 ||
		{ echo "FAIL: rank $r never saw rank 3 join"; fail=1; }
done
touch "$dir/round3"
for r in 0 1; do
	wait_for "$dir/m$r" "^round 3: wrote to and heard from ranks .*3" 20 ||
		{ echo "FAIL: rank $r: round 3 with the joiner"; cat "$dir/m$r"; fail=1; }
done
touch "$dir/stop"
for r in 0 1 3; do
	eval "p=\$pid$r"
	wait "$p" || { echo "FAIL: rank $r exited non-zero"; cat "$dir/m$r"; fail=1; }
done
pids=""
for r in 0 1 3; do echo "--- rank $r"; cat "$dir/m$r"; done
[ $fail -eq 0 ] && echo "OK: etcd world over $prov ($where): all-to-all, a killed rank reported gone, a joiner reached"
exit $fail
