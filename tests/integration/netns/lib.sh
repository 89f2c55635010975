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

# tx_bytes DEV [HOST]: bytes a link of host A (or HOST) has sent
tx_bytes() {
	on "${2:-$A}" cat "/sys/class/net/$1/statistics/tx_bytes"
}

# now: seconds since the epoch, to the millisecond (sample_tx's clock)
now() {
	date +%s.%3N
}

# sample_tx HOST FILE DEV...: in the background, every 0.5 s, a line
# "SECONDS BYTES..." into FILE: the time (as now) and the bytes each DEV of
# HOST has sent so far. Sets $bgpid; kill it before reading FILE.
sample_tx() {
	_h=$1 _f=$2
	shift 2
	bg_on "$_h" "$_f" sh -c 'while :; do
		l=$(date +%s.%3N)
		for d; do l="$l $(cat /sys/class/net/$d/statistics/tx_bytes)"; done
		echo "$l"
		sleep 0.5
	done' sh "$@"
}

# tx_rate FILE T1 T2 COL...: Mbit/s that columns COL (2: sample_tx's first
# DEV) of FILE add up to between its first sample at or after T1 and its
# last at or before T2; 0 with fewer than two samples there.
tx_rate() {
	_f=$1 _t1=$2 _t2=$3
	shift 3
	awk -v t1="$_t1" -v t2="$_t2" -v cols="$*" '
	BEGIN {
		n = split(cols, c, " ")
		for (i = 1; i <= n; i++) if (c[i] > m) m = c[i]
	}
	NF >= m && $1 >= t1 && $1 <= t2 {
		s = 0
		for (i = 1; i <= n; i++) s += $(c[i])
		if (!seen) { ta = $1; sa = s; seen = 1 }
		tb = $1; sb = s
	}
	END {
		if (!seen || tb <= ta) { print "0.0"; exit }
		printf "%.1f\n", (sb - sa) * 8 / (tb - ta) / 1e6
	}' "$_f"
}

# tx_rates FILE T: each interval of sample_tx's FILE as "S R..." (its end,
# in seconds after time T, and each DEV's Mbit/s over it)
tx_rates() {
	awk -v t="$2" '
	NR > 1 && NF == nf && $1 > pt {
		printf "%7.2f", $1 - t
		for (i = 2; i <= NF; i++)
			printf " %6.1f", ($(i) - p[i]) * 8 / ($1 - pt) / 1e6
		printf "\n"
	}
	NR == 1 { nf = NF }
	NF == nf { pt = $1; for (i = 2; i <= NF; i++) p[i] = $(i) }' "$1"
}

# tx_start FILE T COL: the time of the first sample after T at which
# column COL of FILE rose by over 100 kB since the one before (traffic
# began); empty if none.
tx_start() {
	awk -v t="$2" -v c="$3" '
	NF < c { next }
	$1 > t && seen && $(c) - prev > 100000 { print $1; exit }
	{ prev = $(c); seen = 1 }' "$1"
}

# plus T S: time T plus S seconds (decimals)
plus() {
	awk -v t="$1" -v s="$2" 'BEGIN { printf "%.3f\n", t + s }'
}

# at_least X F Y: whether X >= F * Y (decimals)
at_least() {
	awk -v x="$1" -v f="$2" -v y="$3" 'BEGIN { exit !(x >= f * y) }'
}
