# SPDX-License-Identifier: MIT
# Test hosts from network namespaces: three "hosts" A (server), B and C
# (clients) on one bridge in A, with addresses from TEST-NET-1
# (192.0.2.0/24) and the IPv6 documentation prefix (2001:db8::/64), which
# exist only inside these namespaces. Everything created is removed on
# exit, whatever happens.
#
#   . lib.sh            (sets $A $B $C, the namespace names)
#   netns_up            create the hosts, or skip (exit 77) with a reason
#   on A CMD...         run CMD on host A (B, C)
#   bg_on A LOG CMD...  run it in the background, output to LOG; sets $bgpid
#   wait_log FILE TEXT [SECONDS]  until FILE contains TEXT
#
# Host A: 192.0.2.1, 2001:db8::1 (bridge br0; its ports vb, vc lead to B, C)
# Host B: 192.0.2.2, 2001:db8::2 (eth0)     Host C: 192.0.2.3, 2001:db8::3
# (192.0.2.0/25). netns_link2 adds a second, direct link A-B: A's vb2
# 192.0.2.129 <-> B's eth1 192.0.2.130 (192.0.2.128/25): two NICs each.
# Set TERN_NETNS_REQUIRED=1 to make a skip a failure (CI, running as root).
set -u
id=$$
A="tern${id}a" B="tern${id}b" C="tern${id}c"
TERN=${TERN:-tern}
work=$(mktemp -d)
bgpids=""
made=""

netns_skip() {
	echo "SKIP: $1"
	if [ "${TERN_NETNS_REQUIRED:-0}" = 1 ]; then
		echo "FAIL: TERN_NETNS_REQUIRED=1 and the test hosts cannot be made"
		exit 1
	fi
	exit 77
}

netns_down() {
	for p in $bgpids; do kill -9 "$p" 2>/dev/null; done
	for p in $bgpids; do wait "$p" 2>/dev/null; done
	# Deleting a namespace removes its veth ends, and their peers.
	for ns in $made; do ip netns del "$ns" 2>/dev/null; done
	rm -rf "$work"
}

on() {
	_ns=$1
	shift
	ip netns exec "$_ns" "$@"
}

bg_on() {
	_ns=$1 _log=$2
	shift 2
	ip netns exec "$_ns" "$@" >"$_log" 2>&1 &
	bgpid=$!
	bgpids="$bgpids $bgpid"
}

wait_log() {
	i=0
	while ! grep -q -- "$2" "$1" 2>/dev/null; do
		i=$((i + 1))
		[ $i -gt $((${3:-10} * 10)) ] && return 1
		sleep 0.1
	done
	return 0
}

netns_up() {
	[ "$(id -u)" = 0 ] || netns_skip "needs root to create network namespaces"
	command -v ip >/dev/null || netns_skip "no ip command (iproute2)"
	trap netns_down EXIT
	trap 'exit 1' INT TERM
	ip netns add "$A" 2>/dev/null || netns_skip "cannot create network namespaces here"
	made="$A"
	for h in "$B" "$C"; do
		ip netns add "$h" || exit 1
		made="$made $h"
	done
	on "$A" ip link add br0 type bridge forward_delay 0 ||
		netns_skip "no bridge support"
	on "$A" ip addr add 192.0.2.1/25 dev br0
	on "$A" ip addr add 2001:db8::1/64 dev br0 nodad
	n=2
	for h in "$B" "$C"; do
		brport=v$(printf %s "$h" | tail -c 1) # vb, vc
		ip link add "tn${id}$n" type veth peer name "tp${id}$n" || exit 1
		ip link set "tn${id}$n" netns "$A"
		ip link set "tp${id}$n" netns "$h"
		on "$A" ip link set "tn${id}$n" name "$brport"
		on "$A" ip link set "$brport" master br0 up
		on "$h" ip link set "tp${id}$n" name eth0
		on "$h" ip addr add "192.0.2.$n/25" dev eth0
		on "$h" ip addr add "2001:db8::$n/64" dev eth0 nodad
		on "$h" ip link set eth0 up
		on "$h" ip link set lo up
		n=$((n + 1))
	done
	on "$A" ip link set br0 up
	on "$A" ip link set lo up
	# Providers list only interfaces that are up: wait for the bridge.
	i=0
	until [ "$(on "$A" cat /sys/class/net/br0/operstate)" = up ]; do
		i=$((i + 1))
		[ $i -gt 100 ] && { echo "FAIL: br0 did not come up"; exit 1; }
		sleep 0.1
	done
	echo "hosts: A=192.0.2.1 B=192.0.2.2 C=192.0.2.3 (namespaces $made)"
}

netns_link2() {
	ip link add "tn${id}x" type veth peer name "tp${id}x" || exit 1
	ip link set "tn${id}x" netns "$A"
	ip link set "tp${id}x" netns "$B"
	on "$A" ip link set "tn${id}x" name vb2
	on "$B" ip link set "tp${id}x" name eth1
	on "$A" ip addr add 192.0.2.129/25 dev vb2
	on "$B" ip addr add 192.0.2.130/25 dev eth1
	on "$A" ip link set vb2 up
	on "$B" ip link set eth1 up
}

# tx_bytes DEV: bytes a link of host A has sent (its qdisc's count)
tx_bytes() {
	on "$A" cat "/sys/class/net/$1/statistics/tx_bytes"
}
