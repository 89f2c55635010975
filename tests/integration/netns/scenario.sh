#!/bin/sh
# SPDX-License-Identifier: MIT
# Two hosts for real: `tern fill --listen` on host A, clients on B and C,
# over tcp;ofi_rxm across veth links (lib.sh), with faults injected.
# usage: scenario.sh clean|ipv6|lossy|linkdown|kill|vanish|hostile|rails
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

# shape DEV RATE: limit what host A sends on DEV (tc tbf), or skip.
shape() {
	on "$A" tc qdisc add dev "$1" root tbf rate "$2" burst 64kb latency 100ms ||
		netns_skip "tc tbf unusable here"
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
*)
	echo "unknown scenario $scenario"
	exit 2
	;;
esac
[ $fail -eq 0 ] && echo "PASS: netns $scenario"
exit $fail
