#!/bin/sh
# SPDX-License-Identifier: MIT
# Two hosts for real: `tern fill --listen` on host A, clients on B and C,
# over tcp;ofi_rxm across veth links (lib.sh), with faults injected.
# usage: scenario.sh clean|ipv6|lossy|linkdown|kill|vanish|hostile|rails|
#                    railreset|raildown|raildrop|railfill
# Every byte a client reports as delivered is verified by the client (tern
# fill checks each page against MT19937-64 and everything else against
# its canary; tern bench --verify checks the destination).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
prov="tcp"
port=7471
fail=0
scenario=${1:?usage: scenario.sh SCENARIO}

ok() { echo "ok: $*"; }
bad() {
	echo "FAIL: $*"
	fail=1
}

# start_server HOST LISTEN [ARGS...]: tern fill --listen LISTEN there; log in
# $work/server.log
start_server() {
	h=$1 listen=$2
	shift 2
	bg_on "$h" "$work/server.log" "$TERN" fill --provider $prov \
		--listen "$listen" "$@"
	spid=$bgpid
	wait_log "$work/server.log" "serving random-fill" 10 ||
		{ cat "$work/server.log"; bad "server did not start"; exit 1; }
}

stop_server() {
	kill -INT "$spid" 2>/dev/null
	wait "$spid"
	src=$?
}

# fill HOST LOG ARGS...: a client; its exit status in $rc
fill() {
	h=$1 log=$2
	shift 2
	on "$h" timeout 120 "$TERN" fill --provider $prov "$@" >"$log" 2>&1
	rc=$?
}

# shape DEV RATE [HOST]: limit what host A (or HOST) sends on DEV (tc
# tbf), or skip.
shape() {
	on "${3:-$A}" tc qdisc add dev "$1" root tbf rate "$2" burst 64kb \
		latency 100ms || netns_skip "tc tbf unusable here"
}

# link2_end HOST: HOST's end of link 2 (lib.sh: netns_link2)
link2_end() {
	if [ "$1" = "$A" ]; then echo vb2; else echo eth1; fi
}

# link2_down HOST: take HOST's end of link 2 down. The other end loses its
# carrier and keeps its routes (checked), so what it sends there goes
# nowhere, with no error: a cable pulled at the far end. Sets $cut (now).
link2_down() {
	_far=$B _names="A's end (vb2) down; B's end"
	[ "$1" = "$B" ] && _far=$A _names="B's end (eth1) down; A's end"
	on "$1" ip link set dev "$(link2_end "$1")" down
	cut=$(now)
	echo "link 2: $_names now:"
	on "$_far" ip -br link show dev "$(link2_end "$_far")"
	on "$_far" ip route show 192.0.2.128/25 | grep -q "$(link2_end "$_far")" ||
		bad "$_far lost its route over link 2: the link is not silent"
}

# link2_up HOST: bring HOST's end of link 2 up again, its route back
# (checked). Sets $back (now).
link2_up() {
	on "$1" ip link set dev "$(link2_end "$1")" up
	back=$(now)
	echo "link 2 back $(plus "$back" "-$cut") s after it went"
	on "$1" ip route show 192.0.2.128/25 | grep -q "$(link2_end "$1")" ||
		{ on "$1" ip route; bad "$1's route over link 2 did not come back"; }
}

# fill_bg LOG ARGS...: a client on B in the background, its exit status
# appended to LOG as "exit N"; sets $cpid. A 120 s guard catches hangs.
fill_bg() {
	_flog=$1
	shift
	(
		on "$B" timeout 120 "$TERN" fill --provider $prov "$@" >"$_flog" 2>&1
		echo "exit $?" >>"$_flog"
	) &
	cpid=$!
}

show() {
	echo "--- $1"
	cat "$1"
}

netns_up

case $scenario in
clean)
	# A fill from B, a bench from C, a ping from B: all across hosts.
	start_server "$A" "192.0.2.1:$port"
	bg_on "$A" "$work/bench.log" "$TERN" bench --provider $prov \
		--listen "192.0.2.1:7472"
	wait_log "$work/bench.log" "listening on" 10 || bad "bench peer did not start"
	fill "$B" "$work/b.log" "192.0.2.1:$port" --count 3 --pages 8
	show "$work/b.log"
	[ $rc -eq 0 ] && grep -q "3 of 3 fill(s) verified" "$work/b.log" &&
		ok "fill B -> A: 3 fills verified" || bad "fill B -> A (exit $rc)"
	grep -q "fabric 192.0.2.0/25" "$work/b.log" ||
		bad "the client's ctx is not on its 192.0.2.x address"
	on "$C" timeout 120 "$TERN" bench --provider $prov --peer "192.0.2.1:7472" \
		--sizes 4K,1M --iters 100 --verify >"$work/c.log" 2>&1
	rc=$?
	show "$work/c.log"
	[ $rc -eq 0 ] && [ "$(grep -c ' ok$' "$work/c.log")" -eq 2 ] &&
		ok "bench C -> A: 2 sizes verified" || bad "bench C -> A (exit $rc)"
	bg_on "$A" "$work/ping.log" "$TERN" ping --provider $prov \
		--listen "192.0.2.1:7473"
	wait_log "$work/ping.log" "listening on" 10 || bad "ping server did not start"
	on "$B" timeout 60 "$TERN" ping --provider $prov "192.0.2.1:7473" \
		--iters 200 --sizes 8,4K >"$work/p.log" 2>&1
	rc=$?
	show "$work/p.log"
	[ $rc -eq 0 ] && ok "ping B -> A" || bad "ping B -> A (exit $rc)"
	stop_server
	show "$work/server.log"
	[ "$src" -eq 0 ] || bad "server exited $src"
	grep -q "client 192.0.2.2:[0-9]* connected" "$work/server.log" ||
		bad "server did not log the client's address"
	;;
ipv6)
	start_server "$A" "[2001:db8::1]:$port"
	fill "$B" "$work/b.log" "[2001:db8::1]:$port" --count 2 --pages 8
	show "$work/b.log"
	[ $rc -eq 0 ] && grep -q "2 of 2 fill(s) verified" "$work/b.log" &&
		ok "fill over IPv6: 2 fills verified" || bad "fill over IPv6 (exit $rc)"
	grep -q "fabric 2001:db8::/64" "$work/b.log" ||
		bad "the client's ctx is not on its IPv6 address"
	stop_server
	show "$work/server.log"
	grep -q "client \[2001:db8::2\]" "$work/server.log" ||
		bad "server did not see the IPv6 client"
	;;
lossy)
	# 2% of TCP packets dropped on arrival at A and at B (nftables: this
	# kernel has no netem), and A's port towards B limited to 100 Mbit/s.
	command -v nft >/dev/null || netns_skip "no nft (nftables)"
	for h in "$A" "$B"; do
		on "$h" nft add table inet loss &&
			on "$h" nft add chain inet loss in \
				'{ type filter hook input priority 0; }' &&
			on "$h" nft add rule inet loss in meta l4proto tcp \
				numgen random mod 100 '<' 2 counter drop ||
			netns_skip "nftables unusable here"
	done
	shape vb 100mbit
	start_server "$A" "192.0.2.1:$port"
	t0=$(date +%s)
	fill "$B" "$work/b.log" "192.0.2.1:$port" --count 4 --pages 8 --timeout 60000
	t1=$(date +%s)
	show "$work/b.log"
	[ $rc -eq 0 ] && grep -q "4 of 4 fill(s) verified" "$work/b.log" &&
		ok "4 fills of 8 MiB verified through 2% loss at 100 Mbit/s ($((t1 - t0)) s)" ||
		bad "fill through loss (exit $rc)"
	drops=0
	for h in "$A" "$B"; do
		d=$(on "$h" nft list chain inet loss in | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
		drops=$((drops + ${d:-0}))
	done
	echo "packets dropped by the loss rules: $drops"
	[ "$drops" -gt 0 ] || bad "no packet was dropped: the loss rule did not act"
	on "$A" tc -s qdisc show dev vb
	stop_server
	;;
linkdown)
	# The link to B goes down for 2 s in the middle of a transfer.
	shape vb 100mbit
	start_server "$A" "192.0.2.1:$port"
	fill_bg "$work/b.log" "192.0.2.1:$port" --count 8 --pages 8 --timeout 20000
	wait_log "$work/b.log" "^fill 1:" 30 || bad "no fill before the link went down"
	on "$A" ip link set vb down
	echo "link A-B down"
	sleep 2
	on "$A" ip link set vb up
	echo "link A-B up"
	wait $cpid
	show "$work/b.log"
	rc=$(sed -n 's/^exit //p' "$work/b.log")
	if [ "$rc" = 124 ]; then
		bad "the client hung (killed by the 120 s guard)"
	elif [ "$rc" = 0 ]; then
		grep -q "8 of 8 fill(s) verified" "$work/b.log" &&
			ok "transfer survived the outage: 8 fills verified" ||
			bad "exit 0 without 8 verified fills"
	else
		grep -q "tern fill: fill [0-9]* (seed [0-9]*): " "$work/b.log" &&
			ok "transfer failed cleanly with a reason (exit $rc)" ||
			bad "exit $rc without a reason"
	fi
	# Whatever happened to that transfer, the path works again.
	fill "$B" "$work/b2.log" "192.0.2.1:$port" --pages 4
	[ $rc -eq 0 ] && ok "a new fill after the outage verifies" ||
		{ show "$work/b2.log"; bad "fill after the outage (exit $rc)"; }
	stop_server
	show "$work/server.log"
	;;
kill)
	# The server is killed mid-transfer: the client says the peer is gone
	# (its bootstrap socket closes) well before its 20 s fill timeout,
	# then a new server on the same address serves it again.
	shape vb 200mbit
	start_server "$A" "192.0.2.1:$port"
	fill_bg "$work/b.log" "192.0.2.1:$port" --count 12 --pages 8 --timeout 20000 --reconnect 30
	wait_log "$work/b.log" "^fill 2:" 30 || bad "no fill before the kill"
	kill -9 "$spid"
	wait "$spid" 2>/dev/null
	killed=$(date +%s%N)
	echo "server killed"
	wait_log "$work/b.log" "peer gone" 15 &&
		ok "client reported: $(grep -o 'peer gone[^;]*' "$work/b.log" | head -1)" ||
		bad "client did not report the peer gone within 15 s"
	seen=$(date +%s%N)
	echo "peer gone seen by this script $(((seen - killed) / 1000000)) ms after the kill"
	sleep 1
	mv "$work/server.log" "$work/server1.log"
	start_server "$A" "192.0.2.1:$port"
	wait $cpid
	show "$work/b.log"
	grep -q "^exit 0" "$work/b.log" &&
		grep -q "12 of 12 fill(s) verified; 0 failed (refused, or their check); 0 not done; 1 reconnect(s)" "$work/b.log" &&
		ok "after reconnecting, all 12 fills verified" || bad "client did not finish after the restart"
	stop_server
	show "$work/server.log"
	;;
vanish)
	# The server's host vanishes for good mid-transfer (its link goes
	# down and stays down: no reset, no FIN). The bootstrap connection's
	# keepalive (10 s idle, 4 probes 2 s apart) ends the client's wait
	# with peer gone long before its 60 s fill timeout; the server drops
	# the session the same way.
	shape vb 100mbit
	start_server "$A" "192.0.2.1:$port"
	fill_bg "$work/b.log" "192.0.2.1:$port" --count 40 --pages 8 --timeout 60000
	wait_log "$work/b.log" "^fill 2:" 30 || bad "no fill before the link went"
	on "$A" ip link set vb down
	t0=$(date +%s)
	echo "link A-B down for good"
	wait $cpid
	t1=$(date +%s)
	show "$work/b.log"
	grep -q "^exit 124" "$work/b.log" && bad "the client hung"
	grep -q "peer gone: bootstrap connection lost" "$work/b.log" &&
		ok "client reported the peer gone $((t1 - t0)) s after the link went (fill timeout 60 s)" ||
		bad "client did not report the peer gone"
	[ $((t1 - t0)) -lt 45 ] || bad "took $((t1 - t0)) s: longer than keepalive allows"
	wait_log "$work/server.log" "connection lost" 30 &&
		ok "server dropped the vanished client: $(grep 'connection lost' "$work/server.log")" ||
		bad "server did not notice the client vanish"
	grep -q "ended (bootstrap connection closed)" "$work/server.log" ||
		bad "server did not end the session"
	stop_server
	;;
hostile)
	# A token-protected server; from C a silent client, a garbage sender,
	# a wrong token, and a client by card; from B at the same time a good
	# client, which must be served while the silent one still hangs on:
	# the server's log shows the good session before it drops the silent
	# client (its hello timeout, 5 s), however slow the host is.
	start_server "$A" "192.0.2.1:$port" --token s3cret-token
	card=$(sed -n 's/^card: //p' "$work/server.log")
	bg_on "$C" "$work/silent.log" bash -c \
		"exec 3<>/dev/tcp/192.0.2.1/$port; sleep 30"
	silent=$bgpid
	TERN_TOKEN=s3cret-token fill_bg "$work/b.log" "192.0.2.1:$port" \
		--count 2 --pages 8
	on "$C" bash -c "printf 'GET / HTTP/1.0\r\n\r\n' >/dev/tcp/192.0.2.1/$port"
	fill "$C" "$work/wrong.log" "192.0.2.1:$port" --token guess
	show "$work/wrong.log"
	[ $rc -ne 0 ] && grep -q "the server refused: wrong token" "$work/wrong.log" &&
		ok "wrong token refused" || bad "wrong token (exit $rc)"
	fill "$C" "$work/none.log" "192.0.2.1:$port"
	[ $rc -ne 0 ] && grep -q "requires a token" "$work/none.log" &&
		ok "missing token refused" || { show "$work/none.log"; bad "missing token (exit $rc)"; }
	fill "$C" "$work/card.log" "$card" --node 192.0.2.3 --timeout 5000
	show "$work/card.log"
	[ $rc -ne 0 ] && grep -q "admits only clients that passed" "$work/card.log" &&
		ok "client by card (no handshake) refused" || bad "client by card (exit $rc)"
	wait $cpid
	show "$work/b.log"
	grep -q "^exit 0" "$work/b.log" && grep -q "2 of 2 fill(s) verified" "$work/b.log" &&
		ok "good client (token from \$TERN_TOKEN) served" || bad "good client"
	wait_log "$work/server.log" "no hello within" 30 ||
		bad "the silent client was not dropped"
	served=$(grep -n "session .* connected" "$work/server.log" | head -1 | cut -d: -f1)
	dropped=$(grep -n "no hello within" "$work/server.log" | head -1 | cut -d: -f1)
	[ -n "$served" ] && [ -n "$dropped" ] && [ "$served" -lt "$dropped" ] &&
		ok "... while the silent client was still connected" ||
		bad "the good client was not served before the silent one was dropped"
	kill "$silent" 2>/dev/null
	kill -0 "$spid" 2>/dev/null || bad "server died"
	stop_server
	show "$work/server.log"
	grep -q "not a tern bootstrap message" "$work/server.log" ||
		bad "garbage not logged"
	grep -q "bootstrap: 1 client(s) admitted, 4 refused" "$work/server.log" ||
		bad "expected 1 admitted and 4 refused (silent, garbage, wrong, none)"
	[ "$src" -eq 0 ] || bad "server exited $src"
	;;
rails)
	# Two NICs per host (lib.sh: netns_link2), each link limited to
	# 100 Mbit/s from A to B: one rail per NIC on both sides. Fills
	# (whole pages round-robin over the rails) and a bench of striped
	# 4 MiB writes and reads must verify and use both links.
	netns_link2
	for dev in vb vb2; do
		shape $dev 100mbit
	done
	start_server "$A" "192.0.2.1:$port" --rails br0,vb2
	grep -q "domain br0,vb2, 2 rail(s)" "$work/server.log" ||
		bad "server not on two domains"
	bg_on "$A" "$work/bench.log" "$TERN" bench --provider $prov \
		--listen "192.0.2.1:7472" --rails br0,vb2
	wait_log "$work/bench.log" "listening on" 10 || bad "bench peer did not start"
	vb0=$(tx_bytes vb) vb20=$(tx_bytes vb2)
	fill "$B" "$work/b.log" "192.0.2.1:$port" --rails eth0,eth1 --count 2 --pages 16
	show "$work/b.log"
	[ $rc -eq 0 ] && grep -q "2 of 2 fill(s) verified" "$work/b.log" &&
		ok "2 fills of 16 MiB over 2 rails verified" || bad "fill over 2 rails (exit $rc)"
	a=$(($(tx_bytes vb) - vb0)) b=$(($(tx_bytes vb2) - vb20))
	echo "fills: A sent $a bytes on vb (rail 0), $b on vb2 (rail 1)"
	[ $a -gt 8000000 ] && [ $b -gt 8000000 ] &&
		ok "both links carried over 8 MB of the 32 MiB" || bad "a link carried too little"
	vb0=$(tx_bytes vb) vb20=$(tx_bytes vb2)
	on "$B" timeout 120 "$TERN" bench --provider $prov --peer "192.0.2.1:7472" \
		--rails eth0,eth1 --sizes 4M --iters 20 --verify >"$work/c.log" 2>&1
	rc=$?
	show "$work/c.log"
	[ $rc -eq 0 ] && grep -q " ok$" "$work/c.log" &&
		ok "striped 4 MiB writes over 2 rails verified" || bad "bench write (exit $rc)"
	a=$(($(tx_bytes vb) - vb0)) b=$(($(tx_bytes vb2) - vb20))
	echo "bench writes: A sent $a bytes on vb, $b on vb2 (acks and reads' data)"
	on "$B" timeout 120 "$TERN" bench --provider $prov --peer "192.0.2.1:7472" \
		--rails eth0,eth1 --sizes 4M --iters 20 --verify --op read >"$work/r.log" 2>&1
	rc=$?
	show "$work/r.log"
	[ $rc -eq 0 ] && grep -q " ok$" "$work/r.log" &&
		ok "striped 4 MiB reads over 2 rails verified" || bad "bench read (exit $rc)"
	a=$(($(tx_bytes vb) - vb0)) b=$(($(tx_bytes vb2) - vb20))
	echo "bench reads: A sent $a bytes on vb, $b on vb2"
	[ $a -gt 20000000 ] && [ $b -gt 20000000 ] &&
		ok "reads of 80 MiB came back over both links" || bad "reads did not use both links"
	stop_server
	show "$work/server.log"
	;;
railreset)
	# Two NICs per host; B benches striped 1 MiB writes over both for 10
	# s, every byte verified. After 2 s host A answers every TCP packet
	# arriving on vb2 (rail 1) with a reset, for 3 s: B's rail-1
	# connection breaks, tcp;ofi_rxm fails what was on it, and tern must
	# route around it (docs/api.md, "When a rail fails"): no error for
	# the bench, every byte verified, rail 1 reported down (with the
	# log's line).
	command -v nft >/dev/null || netns_skip "no nft (nftables)"
	netns_link2
	bg_on "$A" "$work/bench.log" "$TERN" bench --provider $prov \
		--listen "192.0.2.1:7472" --rails br0,vb2
	wait_log "$work/bench.log" "listening on" 10 || bad "bench peer did not start"
	(
		sleep 2
		on "$A" nft add table inet rst &&
			on "$A" nft add chain inet rst in \
				'{ type filter hook input priority 0; }' &&
			on "$A" nft add rule inet rst in iifname vb2 \
				meta l4proto tcp counter reject with tcp reset
		sleep 3
		on "$A" nft list chain inet rst in >"$work/rst.txt" 2>&1
		on "$A" nft delete table inet rst
	) &
	rstpid=$!
	on "$B" env TERN_RAIL_COOLDOWN_MS=500 timeout 120 "$TERN" bench \
		--provider $prov --peer "192.0.2.1:7472" --rails eth0,eth1 \
		--sizes 1M --duration 10 --verify >"$work/c.log" 2>&1
	rc=$?
	wait $rstpid
	show "$work/c.log"
	cat "$work/rst.txt"
	resets=$(sed -n 's/.*counter packets \([0-9]*\).*/\1/p' "$work/rst.txt")
	[ "${resets:-0}" -gt 0 ] || bad "no packet was answered with a reset"
	[ $rc -eq 0 ] && grep -q " ok$" "$work/c.log" &&
		ok "10 s of striped writes verified across rail 1's resets" ||
		bad "bench across the resets (exit $rc)"
	grep -q "rail health .*rail 1 down" "$work/c.log" &&
		ok "rail 1 reported down: $(sed -n 's/.*rail health *//p' "$work/c.log")" ||
		bad "rail 1 not reported down"
	grep -q "tern warn: rail 1 to peer .* down" "$work/c.log" ||
		bad "no log line for rail 1 going down"
	# Whether it came back once the resets stopped is libfabric's: its
	# tcp;ofi_rxm may not connect again while B's end of the old
	# connection still stands (docs/api.md, "When a rail fails").
	grep -q "rail health .*up at the end" "$work/c.log" &&
		echo "rail 1 came back once the resets stopped" ||
		echo "rail 1 still down at the end (libfabric did not connect again)"
	;;
raildown | raildrop)
	# Two NICs per host, each link limited to 100 Mbit/s from B to A. B
	# benches striped 1 MiB writes over both for 30 s, every byte
	# verified. After 8 s one link goes silent for 5 s, with no error
	# from anything: raildown takes A's end of it down (B's end loses its
	# carrier and keeps its routes: what B sends there goes nowhere, as
	# with a cable pulled at the far end); raildrop drops every IP packet
	# that arrives over it, at both ends (nftables). tern must see the
	# rail stall and route around it (docs/api.md, "When a rail fails"):
	# no error, every byte verified, and, measured from B's links' byte
	# counters, the bench keeps >= 0.8x one link's rate during the
	# outage and is back to >= 1.8x once the link has returned and the
	# rail's cooldown has passed. A window of 16 writes (16 MiB, 0.7 s
	# of both links) keeps them busy; the default 64 would queue 2.7 s
	# on the live link, which would drain through most of the outage
	# even while the bench waits on the dead one.
	[ "$scenario" = raildrop ] && ! command -v nft >/dev/null &&
		netns_skip "no nft (nftables)"
	cool=1000 stall=300
	netns_link2
	for dev in eth0 eth1; do
		shape $dev 100mbit "$B"
	done
	export TERN_RAIL_COOLDOWN_MS=$cool TERN_RAIL_STALL_MS=$stall
	bg_on "$A" "$work/bench.log" "$TERN" bench --provider $prov \
		--listen "192.0.2.1:7472" --rails br0,vb2
	wait_log "$work/bench.log" "listening on" 10 || bad "bench peer did not start"
	sample_tx "$B" "$work/tx.txt" eth0 eth1
	spl=$bgpid
	# One link's rate, measured here: one rail (eth0) for 4 s. Half of
	# the two links' rate would understate it where this host's CPUs,
	# not the links, hold the two back, and so pass an outage more
	# easily.
	t=$(now)
	on "$B" timeout 30 "$TERN" bench --provider $prov --peer "192.0.2.1:7472" \
		--rails eth0 --sizes 1M --window 16 --duration 4 --verify \
		>"$work/one.log" 2>&1 ||
		{ show "$work/one.log"; bad "bench over one link failed"; }
	sleep 0.6
	s1=$(tx_start "$work/tx.txt" "$t" 2)
	[ -n "$s1" ] || { bad "no traffic on eth0 from the one-link bench"; s1=$t; }
	one=$(tx_rate "$work/tx.txt" "$(plus "$s1" 0.5)" "$(plus "$s1" 3)" 2)
	echo "one link (eth0 alone, 0.5 s to 3 s after its traffic began): $one Mbit/s"
	at_least "$one" 1 50 || bad "one link carried only $one Mbit/s (shaped to 100)"
	(
		on "$B" timeout 60 "$TERN" bench --provider $prov \
			--peer "192.0.2.1:7472" --rails eth0,eth1 --sizes 1M \
			--window 16 --duration 30 --verify >"$work/c.log" 2>&1
		echo "exit $?" >>"$work/c.log"
	) &
	cpid=$!
	t0=$(now)
	sleep 8
	if [ "$scenario" = raildown ]; then
		link2_down "$A"
		sleep 5
		link2_up "$A"
	else
		for h in "$A" "$B"; do
			dev=eth1
			[ "$h" = "$A" ] && dev=vb2
			on "$h" nft add table inet deadlink &&
				on "$h" nft add chain inet deadlink in \
					'{ type filter hook input priority 0; }' &&
				on "$h" nft add rule inet deadlink in iifname $dev \
					counter drop ||
				netns_skip "nftables unusable here"
		done
		cut=$(now)
		echo "link 2 (A vb2 - B eth1): every IP packet arriving over it dropped"
		sleep 5
		drops=0
		for h in "$A" "$B"; do
			on "$h" nft list chain inet deadlink in
			d=$(on "$h" nft list chain inet deadlink in |
				sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
			drops=$((drops + ${d:-0}))
			on "$h" nft delete table inet deadlink
		done
		back=$(now)
		echo "link 2 back $(plus "$back" "-$cut") s after it went;" \
			"packets dropped on it: $drops"
		[ "$drops" -gt 0 ] || bad "no packet was dropped: the rule did not act"
	fi
	wait $cpid
	sleep 0.6
	kill "$spl"
	show "$work/c.log"
	rc=$(sed -n 's/^exit //p' "$work/c.log")
	[ "$rc" = 0 ] && grep -q " ok$" "$work/c.log" &&
		ok "30 s of striped writes verified across the outage" ||
		bad "bench across the outage (exit $rc)"
	grep -E "tern error|FAIL|failed" "$work/c.log" &&
		bad "the bench reported an error"
	grep -q "rail health .*rail 1 down [0-9]* time(s), [0-9]* moved off it, up at the end" \
		"$work/c.log" &&
		ok "rail 1 went down and came back: $(sed -n 's/.*rail health *//p' "$work/c.log")" ||
		bad "rail 1 not reported down and back up"
	# Figures from B's counters (data and headers), in Mbit/s.
	s0=$(tx_start "$work/tx.txt" "$t0" 2)
	[ -n "$s0" ] || { bad "no traffic from the bench"; s0=$t0; }
	h1=$(plus "$s0" 1) d1=$(plus "$cut" 1.5) a1=$(plus "$back" $((cool / 1000 + 1)))
	a2=$(plus "$s0" 29.5)
	both=$(tx_rate "$work/tx.txt" "$h1" "$cut" 2 3)
	echo "healthy ($(plus "$h1" "-$t0") s to $(plus "$cut" "-$t0") s after the start):" \
		"eth0 $(tx_rate "$work/tx.txt" "$h1" "$cut" 2)," \
		"eth1 $(tx_rate "$work/tx.txt" "$h1" "$cut" 3), together $both"
	dead=$(tx_rate "$work/tx.txt" "$(plus "$cut" 0.5)" "$back" 3)
	echo "into link 2 while it was out (0.5 s after the cut to its return): $dead"
	during=$(tx_rate "$work/tx.txt" "$d1" "$back" 2)
	echo "during the outage (1.5 s after the cut to the return; link 2" \
		"delivers nothing then, so eth0 alone): $during"
	after=$(tx_rate "$work/tx.txt" "$a1" "$a2" 2 3)
	echo "after ($((cool / 1000 + 1)) s after the return to 29.5 s after the start):" \
		"eth0 $(tx_rate "$work/tx.txt" "$a1" "$a2" 2)," \
		"eth1 $(tx_rate "$work/tx.txt" "$a1" "$a2" 3), together $after"
	echo "--- B's links each 0.5 s (seconds after the cut, Mbit/s on eth0, eth1)"
	tx_rates "$work/tx.txt" "$cut"
	[ "$scenario" = raildown ] && ! at_least 1 1 "$dead" &&
		bad "link 2 was not silent: $dead Mbit/s into it"
	at_least "$both" 1.8 "$one" &&
		ok "two links carry $both Mbit/s, >= 1.8x one ($one)" ||
		bad "two links carry $both Mbit/s, < 1.8x one ($one): this host does not sustain both"
	at_least "$during" 0.8 "$one" &&
		ok "during the outage $during Mbit/s, >= 0.8x one link" ||
		bad "during the outage $during Mbit/s, < 0.8x one link ($one)"
	at_least "$after" 1.8 "$one" &&
		ok "after the return $after Mbit/s, >= 1.8x one link" ||
		bad "after the return $after Mbit/s, < 1.8x one link ($one)"
	;;
railfill)
	# Two NICs per host, each link limited to 100 Mbit/s from A to B:
	# fills over 2 rails (the server writes whole pages round-robin over
	# them, each with an immediate the client counts) for about 20 s,
	# while B's end of link 2 is down for 5 s (A's end loses its
	# carrier and keeps its routes: what A sends there goes nowhere).
	# Immediates are never sent twice (docs/api.md, "When a rail
	# fails"): every fill must still verify with its exact count, and
	# none may fail.
	cool=1000 stall=300 n=14
	netns_link2
	for dev in vb vb2; do
		shape $dev 100mbit
	done
	export TERN_RAIL_COOLDOWN_MS=$cool TERN_RAIL_STALL_MS=$stall
	start_server "$A" "192.0.2.1:$port" --rails br0,vb2
	sample_tx "$A" "$work/tx.txt" vb vb2
	spl=$bgpid
	t0=$(now)
	fill_bg "$work/b.log" "192.0.2.1:$port" --rails eth0,eth1 \
		--count $n --pages 16 --timeout 20000
	sleep 7
	link2_down "$B"
	c1=$(grep -c "^fill [0-9]*:" "$work/b.log")
	sleep 5
	link2_up "$B"
	c2=$(grep -c "^fill [0-9]*:" "$work/b.log")
	echo "fills done: $c1 at the cut, $c2 at the return"
	wait $cpid
	end=$(now)
	sleep 0.6
	kill "$spl"
	show "$work/b.log"
	rc=$(sed -n 's/^exit //p' "$work/b.log")
	[ "$rc" = 0 ] &&
		grep -q "$n of $n fill(s) verified; 0 failed" "$work/b.log" &&
		ok "$n fills of 16 MiB verified, every immediate counted, across the outage" ||
		bad "fills across the outage (exit $rc)"
	grep -E "tern error|FAIL" "$work/b.log" && bad "the client reported an error"
	[ "$c1" -ge 1 ] && [ "$c2" -lt $n ] &&
		ok "the outage fell within the fills ($c1 done before it, $c2 by its end, $n in all)" ||
		bad "the outage did not fall within the fills ($c1 done before it, $c2 by its end)"
	# A's links, Mbit/s: both carry fills before the cut and after the
	# return; link 2 carries nothing while it is out.
	h0=$(tx_rate "$work/tx.txt" "$t0" "$cut" 2) h2=$(tx_rate "$work/tx.txt" "$t0" "$cut" 3)
	d0=$(tx_rate "$work/tx.txt" "$(plus "$cut" 0.5)" "$back" 2)
	dead=$(tx_rate "$work/tx.txt" "$(plus "$cut" 0.5)" "$back" 3)
	a0=$(tx_rate "$work/tx.txt" "$back" "$end" 2) a2=$(tx_rate "$work/tx.txt" "$back" "$end" 3)
	echo "A's links, Mbit/s: before the cut vb $h0, vb2 $h2; while link 2 was" \
		"out (0.5 s after the cut to the return) vb $d0, vb2 $dead; after the" \
		"return vb $a0, vb2 $a2; the fills took $(plus "$end" "-$t0") s"
	echo "--- A's links each 0.5 s (seconds after the cut, Mbit/s on vb, vb2)"
	tx_rates "$work/tx.txt" "$cut"
	at_least 1 1 "$dead" || bad "link 2 was not silent: $dead Mbit/s into it"
	at_least "$h2" 1 10 && at_least "$a2" 1 10 &&
		ok "link 2 carried fills before the cut and after its return" ||
		bad "link 2 idle before the cut or after its return"
	stop_server
	show "$work/server.log"
	[ "$src" -eq 0 ] || bad "server exited $src"
	grep -q "serve: served 1 session(s), $n fill(s)" "$work/server.log" &&
		grep -q " 0 failed, " "$work/server.log" ||
		bad "the server did not serve $n fills without a failure"
	;;
*)
	echo "unknown scenario $scenario"
	exit 2
	;;
esac
[ $fail -eq 0 ] && echo "PASS: netns $scenario"
exit $fail
