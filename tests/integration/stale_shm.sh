#!/bin/sh
# SPDX-License-Identifier: MIT
# A process killed with SIGKILL leaves its shm regions behind, named after
# its pid and its endpoint count ("PID:0:0", "PID:0:1", ...). A later
# process that gets the same pid finds every one of them "in use" and shm
# refuses its endpoint (EBUSY) until it is past them. Pids repeat on any
# busy machine; here they are made to repeat: each run gets a fresh pid
# namespace (same pids every time) and a private /dev/shm that only this
# test sees. A 2-rail listener killed leaves 2 regions; the next bench,
# whose peer has that pid, must start anyway, with 1 rail and with 2.
#
# Needs root (namespaces, a tmpfs mount): exits 77 elsewhere, and fails
# instead where TERN_NETNS_REQUIRED=1 (CI runs as root).
set -u
skip() {
	if [ "${TERN_NETNS_REQUIRED:-0}" = 1 ]; then
		echo "FAIL: $* (TERN_NETNS_REQUIRED=1)"
		exit 1
	fi
	echo "SKIP: $*"
	exit 77
}
[ "$(id -u)" = 0 ] || skip "needs root (pid and mount namespaces)"
command -v unshare >/dev/null || skip "no unshare(1)"
unshare --mount --pid --fork --mount-proc true 2>/dev/null ||
	skip "cannot create pid and mount namespaces here"

# Everything below runs in one private mount namespace: its /dev/shm is a
# fresh tmpfs, so the stale regions are ours alone.
exec unshare --mount --propagation private sh -s "$TERN" <<'EOF'
set -u
TERN=$1
mount -t tmpfs -o size=512m tern-stale /dev/shm || { echo "FAIL: tmpfs on /dev/shm"; exit 1; }
fail=0

# run ARGS...: tern bench in a new pid namespace: bench is pid 1 there (as a
# container's first process is), and its local peer, forked first, pid 2:
# the pid whose regions the victim left.
run() {
	unshare --pid --fork --mount-proc "$TERN" bench --provider shm "$@"
}

# The victim: a 2-rail bench listener (pid 2: endpoints 2:0:0 and 2:0:1),
# killed once it is listening.
unshare --pid --fork --mount-proc sh -c '
	"$0" bench --listen --provider shm --rails 2 >/dev/null 2>&1 &
	i=0
	while [ "$(ls /dev/shm | wc -l)" -lt 2 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	kill -KILL -1' "$TERN"
stale=$(ls /dev/shm | tr '\n' ' ')
echo "left behind: $stale"
if ! [ -e /dev/shm/2:0:0 ] || ! [ -e /dev/shm/2:0:1 ]; then
	echo "FAIL: the killed listener (pid 2) did not leave 2:0:0 and 2:0:1"
	fail=1
fi

# verified WHAT ARGS...: a verified bench run must pass, or FAIL with its log
verified() {
	what=$1
	shift
	if run "$@" --verify >/tmp/stale.$$ 2>&1 && grep -q " ok$" /tmp/stale.$$; then
		echo "ok: $what"
	else
		cat /tmp/stale.$$
		echo "FAIL: $what"
		fail=1
	fi
}

for rails in 1 2; do
	verified "--rails $rails over the stale regions of its pid" \
		--rails $rails --sizes 8,4K --iters 200
done

# A killed 12-rail listener leaves 2:0:0 .. 2:0:11: the next peer with
# pid 2 ends up with names "2:0:12" and up, one character longer than its
# bench's "1:0:0": cards must carry names of any length.
unshare --pid --fork --mount-proc sh -c '
	"$0" bench --listen --provider shm --rails 12 >/dev/null 2>&1 &
	i=0
	while [ "$(ls /dev/shm | grep -c "^2:")" -lt 12 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	kill -KILL -1' "$TERN"
[ -e /dev/shm/2:0:11 ] || { echo "FAIL: the 12-rail listener did not leave 2:0:11"; fail=1; }
verified "bench and a peer whose shm names are longer than its own" \
	--rails 2 --sizes 8,64K --iters 100
rm -f /tmp/stale.$$
[ $fail -eq 0 ] && echo "PASS: stale shm regions of a killed process"
exit $fail
EOF
