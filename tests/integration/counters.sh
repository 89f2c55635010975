#!/bin/sh
# SPDX-License-Identifier: MIT
# tern counters against the sysfs fixtures (tests/data/counters/, written
# by tests/data/gen_counters.py): EFA and mlx5, absolute values, deltas,
# mlx5's 4-byte words, JSON, the ports' links (which are down, since when,
# and their changes between readings), and bad input.
#
# Deltas without timing: a counter file replaced by a FIFO hands tern one
# value per opening. tern reads each directory's files one after the
# other in name order, so a writer that feeds two FIFOs of one directory
# in turn (send_bytes, then send_wrs; again for the second reading) can
# only write a value when tern opens that file: its second opening of the
# first FIFO waits until tern has closed it and moved on.
set -u
data=$(cd "$(dirname "$0")/../data/counters" && pwd)
efa="$data/efa-p5"
mlx="$data/mlx5"
tmp=$(mktemp -d)
writers=""
trap 'for w in $writers; do kill "$w" 2>/dev/null; done; rm -rf "$tmp"' EXIT
fail=0
t() { # t EXPECTED-RC PATTERN CMD...
	want=$1 pat=$2
	shift 2
	out=$(timeout 20 "$@" 2>&1)
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
# expression CHECK (over `j`, and `c`: every counter of the last interval
# as a dict keyed by (device, port, name)) holds.
json() {
	check=$1
	shift
	if timeout 20 "$@" | python3 -c "import json, sys
j = json.load(sys.stdin)
c = {(x['device'], x['port'], x['name']): x
     for x in (j['intervals'][-1]['counters'] if j['intervals'] else [])}
assert $check, 'check failed'"; then
		echo "ok: $* (json: $check)"
	else
		echo "not ok: $* (json: $check)"
		fail=1
	fi
}
# copy FIXTURE NAME: a writable copy of a fixture in $tmp/NAME.
copy() {
	rm -rf "${tmp:?}/$2"
	cp -R -P "$1" "$tmp/$2"
}
# feed DIR A A1 A2 B B1 B2: files A and B of DIR become FIFOs that give
# A1, B1 at tern's first reading and A2, B2 at its second (A < B in name
# order).
feed() {
	rm -f "$1/$2" "$1/$5"
	mkfifo "$1/$2" "$1/$5"
	{
		printf '%s\n' "$3" >"$1/$2"
		printf '%s\n' "$6" >"$1/$5"
		printf '%s\n' "$4" >"$1/$2"
		printf '%s\n' "$7" >"$1/$5"
	} &
	writers="$writers $!"
}
# flip DIR S1 P1 S2 P2 ...: the port directory DIR's state and phys_state
# become FIFOs that give S1, P1 at tern's first reading, S2, P2 at its
# second, and so on (tern reads state, then phys_state).
flip() {
	d=$1
	shift
	rm -f "$d/state" "$d/phys_state"
	mkfifo "$d/state" "$d/phys_state"
	{
		while [ $# -ge 2 ]; do
			printf '%s\n' "$1" >"$d/state"
			printf '%s\n' "$2" >"$d/phys_state"
			shift 2
		done
	} &
	writers="$writers $!"
}

t 0 "usage: tern counters" "$TERN" counters --help
t 0 "counters" "$TERN" --help
t 0 "TERN_COUNTERS_ROOT" "$TERN" --help

# EFA (p5.48xlarge, 4 of its 32 NICs): absolute values, with meanings.
t 0 "rdmap79s0 (efa) port 1" "$TERN" counters --root "$efa" --interval 0
t 0 "rdmap82s0 (efa) device-wide" "$TERN" counters --root "$efa" --interval 0
t 0 "rdma_write_bytes  *893353197568  bytes written to peers by device RDMA write; only device-offloaded" \
	"$TERN" counters --root "$efa" --interval 0
t 0 "send_bytes  *104857600  bytes of SEND work requests" \
	"$TERN" counters --root "$efa" --interval 0 --device rdmap80s0
json 'j["mode"] == "absolute" and [d["name"] for d in j["devices"]] == ["rdmap79s0", "rdmap80s0", "rdmap81s0", "rdmap82s0"] and all(d["driver"] == "efa" for d in j["devices"])' \
	"$TERN" counters --root "$efa" --interval 0 --json
# Every counter the efa driver exposes is known, by its kernel name; the
# "lifespan" files (the kernel's cache time) are not counters.
json 'sorted(n for (d, p, n) in c if d == "rdmap79s0" and p == 1) == sorted(["tx_bytes", "tx_pkts", "rx_bytes", "rx_pkts", "rx_drops", "send_bytes", "send_wrs", "recv_bytes", "recv_wrs", "rdma_read_wrs", "rdma_read_bytes", "rdma_read_wr_err", "rdma_read_resp_bytes", "rdma_write_wrs", "rdma_write_bytes", "rdma_write_wr_err", "rdma_write_recv_bytes", "retrans_bytes", "retrans_pkts", "retrans_timeout_events", "unresponsive_remote_events", "impaired_remote_conn_events"])' \
	"$TERN" counters --root "$efa" --interval 0 --json
json 'all(x["known"] and x["meaning"] != "no description" and x["name"] != "lifespan" for x in c.values())' \
	"$TERN" counters --root "$efa" --interval 0 --json
json 'len([k for k in c if k[0] == "rdmap81s0" and k[1] is None]) == 12 and c[("rdmap81s0", None, "reg_mr_err")]["value"] == 6' \
	"$TERN" counters --root "$efa" --interval 0 --json
json '[d["name"] for d in j["devices"]] == ["rdmap80s0", "rdmap82s0"] and {k[0] for k in c} == {"rdmap80s0", "rdmap82s0"}' \
	"$TERN" counters --root "$efa" --interval 0 --json --device rdmap82s0,rdmap80s0
# The root comes from $TERN_COUNTERS_ROOT when there is no --root.
t 0 "rdmap79s0 (efa) port 1" env TERN_COUNTERS_ROOT="$efa" "$TERN" counters --interval 0

# mlx5: the IB standard counters count 4-byte words; tern shows bytes.
t 0 "port_xmit_data  *1000000000000  bytes sent on the link" \
	"$TERN" counters --root "$mlx" --interval 0 --device mlx5_0
t 0 "mlx5_1 (mlx5_core) port 1" "$TERN" counters --root "$mlx" --interval 0
json 'c[("mlx5_0", 1, "port_xmit_data")]["raw"] == 250000000000 and c[("mlx5_0", 1, "port_xmit_data")]["value"] == 10**12 and c[("mlx5_0", 1, "port_xmit_data")]["scale"] == 4' \
	"$TERN" counters --root "$mlx" --interval 0 --json
json 'c[("mlx5_1", 1, "port_rcv_data")]["value"] == 4 * 480000000000 and c[("mlx5_1", 1, "port_rcv_data")]["unit"] == "bytes" and c[("mlx5_1", 1, "port_xmit_packets")]["scale"] == 1' \
	"$TERN" counters --root "$mlx" --interval 0 --json
json 'all(x["known"] for x in c.values()) and c[("mlx5_0", 1, "np_cnp_sent")]["dir"] == "hw_counters" and c[("mlx5_0", 1, "link_downed")]["dir"] == "counters"' \
	"$TERN" counters --root "$mlx" --interval 0 --json

# Deltas: EFA traffic that moved as sends only, and the note that says so.
copy "$efa" e1
feed "$tmp/e1/sys/class/infiniband/rdmap80s0/ports/1/hw_counters" \
	send_bytes 1000 5001000 send_wrs 7 17
json 'j["mode"] == "delta" and c[("rdmap80s0", 1, "send_bytes")]["delta"] == 5000000 and c[("rdmap80s0", 1, "send_wrs")]["raw_delta"] == 10 and c[("rdmap80s0", 1, "send_bytes")]["per_second"] > 0 and c[("rdmap80s0", 1, "rdma_write_bytes")]["delta"] == 0 and c[("rdmap80s0", 1, "tx_bytes")]["delta"] == 0' \
	"$TERN" counters --root "$tmp/e1" --interval 0.2 --json
copy "$efa" e2
feed "$tmp/e2/sys/class/infiniband/rdmap80s0/ports/1/hw_counters" \
	send_bytes 1000 5001000 send_wrs 7 17
json '[(n["device"], n["port"]) for n in j["intervals"][0]["notes"]] == [("rdmap80s0", 1)] and "SEND/RECV" in j["intervals"][0]["notes"][0]["text"]' \
	"$TERN" counters --root "$tmp/e2" --interval 0.2 --json
copy "$efa" e3
feed "$tmp/e3/sys/class/infiniband/rdmap80s0/ports/1/hw_counters" \
	send_bytes 1000 5001000 send_wrs 7 17
t 0 "send_bytes  *5000000 .*bit/s  bytes of SEND" \
	"$TERN" counters --root "$tmp/e3" --interval 0.2 --device rdmap80s0
copy "$efa" e4
feed "$tmp/e4/sys/class/infiniband/rdmap80s0/ports/1/hw_counters" \
	send_bytes 1000 5001000 send_wrs 7 17
t 0 "note: data moved only as SEND/RECV, no device RDMA" \
	"$TERN" counters --root "$tmp/e4" --interval 0.2 --device rdmap80s0
# Device RDMA moved too: no note.
copy "$efa" e5
feed "$tmp/e5/sys/class/infiniband/rdmap80s0/ports/1/hw_counters" \
	rdma_write_bytes 100 65636 send_bytes 1000 2000
json 'j["intervals"][0]["notes"] == [] and c[("rdmap80s0", 1, "rdma_write_bytes")]["delta"] == 65536' \
	"$TERN" counters --root "$tmp/e5" --interval 0.2 --json --device rdmap80s0
# A counter that went backwards (a reset) says so instead of a delta.
copy "$efa" e6
feed "$tmp/e6/sys/class/infiniband/rdmap79s0/ports/1/hw_counters" \
	send_bytes 500 100 send_wrs 7 17
json 'c[("rdmap79s0", 1, "send_bytes")]["reset"] is True and c[("rdmap79s0", 1, "send_bytes")]["delta"] is None' \
	"$TERN" counters --root "$tmp/e6" --interval 0.2 --json --device rdmap79s0
copy "$efa" e7
feed "$tmp/e7/sys/class/infiniband/rdmap79s0/ports/1/hw_counters" \
	send_bytes 500 100 send_wrs 7 17
t 0 "send_bytes  *reset" \
	"$TERN" counters --root "$tmp/e7" --interval 0.2 --device rdmap79s0

# mlx5 deltas: 250 words moved are 1000 bytes.
copy "$mlx" m1
feed "$tmp/m1/sys/class/infiniband/mlx5_1/ports/1/counters" \
	port_xmit_data 100 350 port_xmit_packets 10 20
json 'c[("mlx5_1", 1, "port_xmit_data")]["raw_delta"] == 250 and c[("mlx5_1", 1, "port_xmit_data")]["delta"] == 1000 and c[("mlx5_1", 1, "port_xmit_packets")]["delta"] == 10 and c[("mlx5_0", 1, "port_xmit_data")]["delta"] == 0' \
	"$TERN" counters --root "$tmp/m1" --interval 0.2 --json
copy "$mlx" m2
feed "$tmp/m2/sys/class/infiniband/mlx5_1/ports/1/counters" \
	port_xmit_data 100 350 port_xmit_packets 10 20
t 0 "port_xmit_data  *1000 .*bit/s  bytes sent on the link" \
	"$TERN" counters --root "$tmp/m2" --interval 0.2 --device mlx5_1

# Links: each port's state and phys_state; a port not ACTIVE is marked and
# listed as down. mlx5_1's port is down in the fixture, from the start.
t 0 "^  mlx5_0 port 1: ACTIVE (LinkUp)$" \
	"$TERN" counters --root "$mlx" --interval 0
t 0 "^! mlx5_1 port 1: DOWN (Disabled), down at start$" \
	"$TERN" counters --root "$mlx" --interval 0
t 0 "^links down: mlx5_1 port 1 (DOWN, Disabled) down at start$" \
	"$TERN" counters --root "$mlx" --interval 0.05
json '[(l["device"], l["port"], l["state"], l["state_name"], l["phys_state"], l["phys_state_name"], l["active"], l["down_since_s"], l["down_at_start"]) for l in j["intervals"][0]["links"]] == [("mlx5_0", 1, 4, "ACTIVE", 5, "LinkUp", True, None, False), ("mlx5_1", 1, 1, "DOWN", 3, "Disabled", False, None, True)] and j["events"] == []' \
	"$TERN" counters --root "$mlx" --interval 0 --json
json 'len(j["intervals"][0]["links"]) == 4 and all(l["active"] and l["phys_state_name"] == "LinkUp" for l in j["intervals"][0]["links"])' \
	"$TERN" counters --root "$efa" --interval 0 --json
# A missing phys_state is not mentioned; a port with neither file has no
# link line.
copy "$efa" l0
rm "$tmp/l0/sys/class/infiniband/rdmap80s0/ports/1/phys_state" \
	"$tmp/l0/sys/class/infiniband/rdmap81s0/ports/1/state" \
	"$tmp/l0/sys/class/infiniband/rdmap81s0/ports/1/phys_state"
t 0 "^  rdmap80s0 port 1: ACTIVE$" "$TERN" counters --root "$tmp/l0" --interval 0
json '[(l["device"], l["state_name"], l["phys_state"], l["phys_state_name"]) for l in j["intervals"][0]["links"]] == [("rdmap79s0", "ACTIVE", 5, "LinkUp"), ("rdmap80s0", "ACTIVE", None, None), ("rdmap82s0", "ACTIVE", 5, "LinkUp")]' \
	"$TERN" counters --root "$tmp/l0" --interval 0 --json
# A change between two readings is reported with when it was seen: after
# the start and as UTC; a port that came up is no longer down.
copy "$mlx" l1
flip "$tmp/l1/sys/class/infiniband/mlx5_0/ports/1" \
	"4: ACTIVE" "5: LinkUp" "1: DOWN" "3: Disabled"
flip "$tmp/l1/sys/class/infiniband/mlx5_1/ports/1" \
	"1: DOWN" "3: Disabled" "4: ACTIVE" "5: LinkUp"
out=$(timeout 20 "$TERN" counters --root "$tmp/l1" --interval 0.2 2>&1)
utc='([0-9]\{4\}-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]Z)'
for pat in "^link change: mlx5_0 port 1: ACTIVE -> DOWN (LinkUp -> Disabled) at +[0-9]*\.[0-9] s $utc$" \
	"^link change: mlx5_1 port 1: DOWN -> ACTIVE (Disabled -> LinkUp) at +[0-9]*\.[0-9] s $utc$" \
	"^! mlx5_0 port 1: DOWN (Disabled), down since +[0-9]*\.[0-9] s $utc$" \
	"^  mlx5_1 port 1: ACTIVE (LinkUp)$" \
	"^links down: mlx5_0 port 1 (DOWN, Disabled) down since +[0-9]*\.[0-9] s $utc$"; do
	if printf '%s\n' "$out" | grep -q -- "$pat"; then
		echo "ok: link change, text: $pat"
	else
		echo "not ok: link change, text: $pat"
		printf '%s\n' "$out" | grep -e "^link" -e "^!" | head -5
		fail=1
	fi
done
# Once per change: the port stays down at the third reading, and the
# second interval still says since when.
copy "$mlx" l2
flip "$tmp/l2/sys/class/infiniband/mlx5_0/ports/1" \
	"4: ACTIVE" "5: LinkUp" "1: DOWN" "3: Disabled" "1: DOWN" "3: Disabled"
json 'len(j["events"]) == 1 and j["events"][0]["device"] == "mlx5_0" and j["events"][0]["port"] == 1 and j["events"][0]["from"] == {"state": 4, "state_name": "ACTIVE", "phys_state": 5, "phys_state_name": "LinkUp"} and j["events"][0]["to"] == {"state": 1, "state_name": "DOWN", "phys_state": 3, "phys_state_name": "Disabled"} and 0 < j["events"][0]["at_s"] < 5 and __import__("re").fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", j["events"][0]["at_utc"]) and [(l["device"], l["active"], l["down_since_s"], l["down_since_utc"], l["down_at_start"]) for l in j["intervals"][1]["links"]] == [("mlx5_0", False, j["events"][0]["at_s"], j["events"][0]["at_utc"], False), ("mlx5_1", False, None, None, True)]' \
	"$TERN" counters --root "$tmp/l2" --interval 0.2 --count 2 --json
copy "$mlx" l3
flip "$tmp/l3/sys/class/infiniband/mlx5_0/ports/1" \
	"4: ACTIVE" "5: LinkUp" "1: DOWN" "3: Disabled" "1: DOWN" "3: Disabled"
out=$(timeout 20 "$TERN" counters --root "$tmp/l3" --interval 0.2 --count 2 2>&1)
n=$(printf '%s\n' "$out" | grep -c "^link change: mlx5_0 port 1: ACTIVE -> DOWN")
if [ "$n" -eq 1 ] && printf '%s\n' "$out" | sed -n '/interval 2 of 2/,$p' |
	grep -q "^! mlx5_0 port 1: DOWN (Disabled), down since +[0-9]*\.[0-9] s "; then
	echo "ok: link change, text: reported once, since when kept"
else
	echo "not ok: link change, text: reported $n times, or since when lost"
	fail=1
fi

# Several intervals; --json=FILE keeps the text on stdout.
json 'len(j["intervals"]) == 3 and [i["index"] for i in j["intervals"]] == [1, 2, 3] and all(i["seconds"] > 0 for i in j["intervals"])' \
	"$TERN" counters --root "$mlx" --interval 0.05 --count 3 --json
t 0 "interval 2 of 2" "$TERN" counters --root "$mlx" --interval 0.05 --count 2 \
	--json="$tmp/out.json"
if python3 -c "import json, sys; j = json.load(open(sys.argv[1])); assert len(j['intervals']) == 2" "$tmp/out.json"; then
	echo "ok: --json=FILE holds both intervals"
else
	echo "not ok: --json=FILE"
	fail=1
fi

# Counters tern does not know, a device without a driver link, a file
# that is not a number: all printed, none fatal.
copy "$efa" u
echo 5 >"$tmp/u/sys/class/infiniband/rdmap79s0/ports/1/hw_counters/made_up_counter"
echo abc >"$tmp/u/sys/class/infiniband/rdmap79s0/ports/1/hw_counters/rx_drops"
mkdir -p "$tmp/u/sys/class/infiniband/rxe0/ports/1/counters" \
	"$tmp/u/sys/class/infiniband/rxe0/ports/1/hw_counters"
echo 40 >"$tmp/u/sys/class/infiniband/rxe0/ports/1/counters/port_xmit_data"
echo 3 >"$tmp/u/sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts"
t 0 "made_up_counter  *5  no description" \
	"$TERN" counters --root "$tmp/u" --interval 0
t 0 "rx_drops  *-  unreadable: not a number" \
	"$TERN" counters --root "$tmp/u" --interval 0
t 0 "made_up_counter  *0  *0/s  no description" \
	"$TERN" counters --root "$tmp/u" --interval 0.05 --device rdmap79s0
json 'c[("rdmap79s0", 1, "made_up_counter")]["known"] is False and c[("rdmap79s0", 1, "rx_drops")]["error"] == "not a number" and c[("rxe0", 1, "port_xmit_data")]["value"] == 160 and c[("rxe0", 1, "sent_pkts")]["known"] is False and c[("rxe0", 1, "sent_pkts")]["driver"] == ""' \
	"$TERN" counters --root "$tmp/u" --interval 0 --json

# Ctrl-C ends a long run at once with what it measured (exit 1).
"$TERN" counters --root "$mlx" --interval 10 --count 5 --json >"$tmp/int.json" 2>&1 &
pid=$!
sleep 0.5
kill -INT $pid
i=0
while kill -0 $pid 2>/dev/null && [ $i -lt 30 ]; do
	sleep 0.1
	i=$((i + 1))
done
if kill -0 $pid 2>/dev/null; then
	kill -KILL $pid
	echo "not ok: Ctrl-C did not stop tern counters within 3 s"
	fail=1
fi
wait $pid
rc=$?
if [ $rc -eq 1 ] && python3 -c "import json, sys; j = json.load(open(sys.argv[1])); assert j['stopped'] and len(j['intervals']) == 1 and j['intervals'][0]['seconds'] < 5" "$tmp/int.json"; then
	echo "ok: Ctrl-C: exit 1, the interval so far in the JSON"
else
	echo "not ok: Ctrl-C (rc $rc)"
	head -3 "$tmp/int.json"
	fail=1
fi

# No RDMA device is an answer (exit 0); what cannot be read is an error.
mkdir -p "$tmp/none" "$tmp/empty/sys/class/infiniband"
t 0 "no RDMA devices: .*/sys/class/infiniband does not exist" \
	"$TERN" counters --root "$tmp/none"
t 0 "no RDMA devices: .*/sys/class/infiniband is empty" \
	"$TERN" counters --root "$tmp/empty"
json 'j["devices"] == [] and j["intervals"] == [] and j["note"].startswith("no RDMA devices")' \
	"$TERN" counters --root "$tmp/none" --json
t 2 "--device 'mlx5_9': no such RDMA device in .* (there: mlx5_0, mlx5_1)" \
	"$TERN" counters --root "$mlx" --device mlx5_9
t 2 "--device 'mlx5_9': no such RDMA device" \
	"$TERN" counters --root "$mlx" --device mlx5_0,mlx5_9
t 2 "--device 'x': no RDMA devices here" \
	"$TERN" counters --root "$tmp/none" --device x
t 2 "an empty device name" "$TERN" counters --root "$mlx" --device mlx5_0,
t 2 "--device '': empty" "$TERN" counters --device ''
t 2 "--root '$tmp/nope': No such file" "$TERN" counters --root "$tmp/nope"
t 2 "--root '$0': not a directory" "$TERN" counters --root "$0"
t 2 "TERN_COUNTERS_ROOT '$tmp/nope': No such file" \
	env TERN_COUNTERS_ROOT="$tmp/nope" "$TERN" counters
for v in x -1 nan inf 1e9 0.001 0x10 " 1" 3601; do
	t 2 "--interval '$v': expected 0 (absolute values once) or seconds from 0.01 to 3600" \
		"$TERN" counters --root "$mlx" --interval "$v"
done
t 2 "--count '0': expected an integer from 1" "$TERN" counters --count 0
t 2 "--count 3 with --interval 0" "$TERN" counters --count 3 --interval 0
t 2 "unexpected argument 'extra'" "$TERN" counters extra
t 2 "not an option of tern counters" "$TERN" counters --provider shm
t 1 "--json=$tmp/no/x.json: No such file" \
	"$TERN" counters --root "$mlx" --json="$tmp/no/x.json"
# docs/cli.md's tables name every counter the fixtures hold.
docs="$(dirname "$0")/../../docs/cli.md"
for root in "$efa" "$mlx"; do
	for n in $("$TERN" counters --root "$root" --interval 0 --json |
		python3 -c "import json, sys
print('\n'.join(sorted({c['name'] for c in json.load(sys.stdin)['intervals'][0]['counters']})))"); do
		grep -q "^| \`$n\` |" "$docs" ||
			{ echo "not ok: docs/cli.md does not describe $n"; fail=1; }
	done
done
echo "ok: docs/cli.md describes every counter of the fixtures"
[ $fail -eq 0 ] && echo "PASS: counters"
exit $fail
