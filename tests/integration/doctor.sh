#!/bin/sh
# SPDX-License-Identifier: MIT
# tern doctor against the machines of tests/data/doctor/ (written by
# tests/data/gen_doctor.py) and copies of them changed one file at a time:
# every check's findings and the exit status; and this host, whatever it
# has. $FAKEEFA_PROV is the fake efa provider's folder (tests/fakeefa/:
# libfabric then lists the fixtures' EFA devices), $FAKECUDA_DIR holds a
# stand-in libcuda.so.1 (fakecuda.c). Checks that depend on what this host's
# libfabric lists are made certain with $FI_PROVIDER or the fake provider.
set -u
data=$(cd "$(dirname "$0")/../data/doctor" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
t() { # t EXPECTED-RC PATTERN CMD...
	want=$1 pat=$2
	shift 2
	out=$(timeout 60 "$@" 2>&1)
	rc=$?
	if [ $rc -ne "$want" ] || ! printf '%s' "$out" | grep -q -- "$pat"; then
		echo "not ok: $* (rc $rc, want $want, pattern '$pat')"
		printf '%s\n' "$out" | head -20
		fail=1
	else
		echo "ok: $*"
	fi
}
# json RC CHECK CMD...: CMD exits RC and its stdout is JSON for which the
# Python expression CHECK holds, over `j` and `f`, the findings by check
# (each: status, detail, fix).
json() {
	want=$1 check=$2
	shift 2
	timeout 60 "$@" >"$tmp/out.json" 2>"$tmp/err"
	rc=$?
	if [ $rc -eq "$want" ] && python3 -c "import json, sys
j = json.load(open(sys.argv[1]))
f = {x['check']: x for x in j['findings']}
assert $check, 'check failed'" "$tmp/out.json"; then
		echo "ok: $* (json: $check)"
	else
		echo "not ok: $* (rc $rc, want $want; json: $check)"
		head -c 3000 "$tmp/out.json"
		cat "$tmp/err"
		fail=1
	fi
}
# copy FIXTURE NAME: a writable copy of a fixture in $tmp/NAME.
copy() {
	rm -rf "${tmp:?}/$2"
	cp -R -P "$data/$1" "$tmp/$2"
}
# fake: the fake efa provider; real: this host's providers alone. Both
# with a CUDA driver that finds no GPU, so that this host's GPUs do not
# change the verdicts; cuda: the fake efa and 2 GPUs (fakecuda.c).
# (Scripts, not functions: timeout runs them.)
printf '#!/bin/sh\nexec env FI_PROVIDER_PATH="%s" LD_LIBRARY_PATH="%s" FAKE_LIBCUDA_DEVICES=0 "$@"\n' \
	"$FAKEEFA_PROV" "$FAKECUDA_DIR" >"$tmp/fake"
printf '#!/bin/sh\nexec env -u FI_PROVIDER_PATH LD_LIBRARY_PATH="%s" FAKE_LIBCUDA_DEVICES=0 "$@"\n' \
	"$FAKECUDA_DIR" >"$tmp/real"
printf '#!/bin/sh\nexec env FI_PROVIDER_PATH="%s" LD_LIBRARY_PATH="%s" "$@"\n' \
	"$FAKEEFA_PROV" "$FAKECUDA_DIR" >"$tmp/cuda"
chmod +x "$tmp/fake" "$tmp/real" "$tmp/cuda"
fake="$tmp/fake" real="$tmp/real" cuda="$tmp/cuda"

efa="$data/efa-node"
checks='["libfabric", "api", "provider:efa", "provider:verbs", "provider:tcp", "provider:shm", "efa", "memlock", "region", "ptrace", "hugepages", "thp", "cuda"]'
efachecks='["libfabric", "api", "provider:efa", "provider:verbs", "provider:tcp", "provider:shm", "efa", "efa-rdma", "efa-network", "memlock", "region", "ptrace", "hugepages", "thp", "cuda"]'

t 0 "usage: tern doctor" "$TERN" doctor --help
t 0 "-h, --help" "$TERN" doctor --help
t 0 "--region-size SIZE" "$TERN" doctor --help
t 0 "  doctor   " "$TERN" --help
t 0 "TERN_DOCTOR_ROOT" "$TERN" --help

# This host, whatever it has: every check once, the exit status is the
# verdict, and the JSON says the same as the text.
"$TERN" doctor >"$tmp/host.txt" 2>&1
rc=$?
cat "$tmp/host.txt"
nfail=$(grep -c '^fail ' "$tmp/host.txt")
if { [ $rc -eq 0 ] && [ "$nfail" -eq 0 ]; } ||
	{ [ $rc -eq 1 ] && [ "$nfail" -gt 0 ]; }; then
	echo "ok: this host: exit $rc with $nfail failure(s)"
else
	echo "not ok: this host: exit $rc with $nfail failure(s)"
	fail=1
fi
for c in libfabric api provider:efa provider:verbs provider:tcp provider:shm \
	efa memlock ptrace hugepages thp cuda; do
	grep -Eq "^(ok|warn|fail) +$c " "$tmp/host.txt" ||
		{ echo "not ok: this host: no $c line"; fail=1; }
done
json $rc 'sorted(j) == ["findings", "ok"] and j["ok"] == all(x["status"] != "fail" for x in j["findings"]) and all(sorted(x) == ["check", "detail", "fix", "status"] and x["status"] in ("ok", "warn", "fail") and x["detail"] for x in j["findings"]) and all(c in f for c in '"$checks"')' \
	"$TERN" doctor --json
# Without a root, memlock is getrlimit's: a limit of 64 KiB is seen.
t 0 "memlock  *.*64 KiB" sh -c "ulimit -l 64 && \"\$0\" doctor --region-size 4K" "$TERN"

# --- an EFA node as tern wants it ------------------------------------
json 0 '[x["check"] for x in j["findings"]] == '"$efachecks"' and j["ok"] is True' \
	"$fake" "$TERN" doctor --root "$efa" --json
json 0 'f["libfabric"]["status"] == "ok" and "one copy: /opt/amazon/efa/lib/libfabric.so.1.27.0" in f["libfabric"]["detail"]' \
	"$fake" "$TERN" doctor --root "$efa" --json
json 0 'f["provider:efa"]["status"] == "ok" and "rdmap16s27-rdm" in f["provider:efa"]["detail"] and f["provider:verbs"]["status"] == "ok" and "absent, and no InfiniBand/RoCE device" in f["provider:verbs"]["detail"]' \
	"$fake" env FI_PROVIDER='^verbs' "$TERN" doctor --root "$efa" --json
json 0 'f["efa"]["status"] == "ok" and f["efa"]["detail"].startswith("4 EFA device(s): rdmap16s27 (fw 0.0.0.0, uverbs0)") and "driver efa 2.17.3g" in f["efa"]["detail"] and f["efa"]["fix"] == ""' \
	"$fake" "$TERN" doctor --root "$efa" --json
json 0 'f["efa-rdma"]["status"] == "ok" and "device RDMA read and write on all 4 EFA device(s)" in f["efa-rdma"]["detail"]' \
	"$fake" "$TERN" doctor --root "$efa" --json
json 0 'f["efa-network"]["status"] == "ok" and "security group lacks its self-referencing rule" in f["efa-network"]["detail"] and "Unresponsive receiver" in f["efa-network"]["detail"] and "same security group" in f["efa-network"]["fix"]' \
	"$fake" "$TERN" doctor --root "$efa" --json
json 0 'f["memlock"]["status"] == "ok" and "RLIMIT_MEMLOCK unlimited" in f["memlock"]["detail"] and f["ptrace"]["status"] == "warn" and "ptrace_scope 1" in f["ptrace"]["detail"] and "descendants" in f["ptrace"]["detail"] and "kernel.yama.ptrace_scope=0" in f["ptrace"]["fix"]' \
	"$fake" "$TERN" doctor --root "$efa" --json
json 0 'f["hugepages"]["status"] == "ok" and "1000 of 1024 huge page(s) of 2 MiB free" in f["hugepages"]["detail"] and f["thp"]["status"] == "ok" and "madvise" in f["thp"]["detail"]' \
	"$fake" "$TERN" doctor --root "$efa" --json
t 0 "^warn  ptrace " "$fake" "$TERN" doctor --root "$efa"
t 0 "^ok    efa-rdma " "$fake" "$TERN" doctor --root "$efa"
t 0 "no failure, 1 warning(s): tern can run here" "$fake" "$TERN" doctor --root "$efa"
# The root from the environment.
t 0 "driver efa 2.17.3g" "$fake" env TERN_DOCTOR_ROOT="$efa" "$TERN" doctor
# efa-direct absent (the efa fabric alone): device RDMA is not known.
json 0 'f["efa-rdma"]["status"] == "ok" and "could not be determined: libfabric lists no efa-direct fabric" in f["efa-rdma"]["detail"]' \
	"$fake" env TERN_FAKEEFA_PROFILE=efa "$TERN" doctor --root "$efa" --json
json 0 'f["efa-rdma"]["status"] == "warn" and "FI_EFA_USE_DEVICE_RDMA=0" in f["efa-rdma"]["detail"]' \
	"$fake" env FI_EFA_USE_DEVICE_RDMA=0 "$TERN" doctor --root "$efa" --json
# efa left out by $FI_PROVIDER though its devices are there: said so.
json 0 'f["provider:efa"]["status"] == "warn" and "$FI_PROVIDER=^efa leaves it out" in f["provider:efa"]["detail"] and "could not be determined: libfabric lists no efa provider" in f["efa-rdma"]["detail"]' \
	"$fake" env FI_PROVIDER='^efa' "$TERN" doctor --root "$efa" --json
# Nothing tern can use is left: a failure.
json 1 'f["provider:tcp"]["status"] == "fail" and "no provider tern can use is left" in f["provider:tcp"]["detail"] and f["provider:shm"]["status"] == "fail"' \
	"$real" env FI_PROVIDER=nosuch "$TERN" doctor --root "$data/yama3" --json
# A device libfabric cannot open: named, with why.
copy efa-node nodev
rm "$tmp/nodev/dev/infiniband/uverbs2"
json 1 'f["efa"]["status"] == "fail" and "dev/infiniband/uverbs2: No such file or directory" in f["efa"]["detail"]' \
	"$fake" "$TERN" doctor --root "$tmp/nodev" --json
copy efa-node nouverbs
rm -r "$tmp/nouverbs/sys/class/infiniband_verbs/uverbs1"
json 1 'f["efa"]["status"] == "fail" and "rdmap32s27 has no uverbs device" in f["efa"]["detail"] and "modprobe ib_uverbs" in f["efa"]["fix"]' \
	"$fake" "$TERN" doctor --root "$tmp/nouverbs" --json
# A node this user may not open (root opens any file: users only).
if [ "$(id -u)" -ne 0 ]; then
	copy efa-node noperm
	chmod 000 "$tmp/noperm/dev/infiniband/uverbs1"
	json 1 'f["efa"]["status"] == "fail" and "dev/infiniband/uverbs1: Permission denied" in f["efa"]["detail"] and "let this user open the device" in f["efa"]["fix"]' \
		"$fake" "$TERN" doctor --root "$tmp/noperm" --json
fi
# An in-tree driver has no version file.
copy efa-node intree
rm "$tmp/intree/sys/module/efa/version"
t 0 "driver efa version not reported" "$fake" "$TERN" doctor --root "$tmp/intree"

# --- two copies of libfabric in the process ---------------------------
copy efa-node two
echo "7f3be4000000-7f3be4100000 r-xp 0002a000 103:01 1836011    /usr/lib/x86_64-linux-gnu/libfabric.so.1.20.0" \
	>>"$tmp/two/proc/self/maps"
json 1 'f["libfabric"]["status"] == "fail" and "2 copies of libfabric" in f["libfabric"]["detail"] and "/usr/lib/x86_64-linux-gnu/libfabric.so.1.20.0" in f["libfabric"]["detail"] and "/opt/amazon/efa/lib/libfabric.so.1.27.0" in f["libfabric"]["detail"] and "falls back" in f["libfabric"]["detail"] and "LD_LIBRARY_PATH" in f["libfabric"]["fix"] and j["ok"] is False' \
	"$fake" "$TERN" doctor --root "$tmp/two" --json
t 1 "^fail  libfabric " "$fake" "$TERN" doctor --root "$tmp/two"
# One file under two names (a link) is one copy: the loader maps it once.
copy efa-node link
echo "7f3be4000000-7f3be4100000 r-xp 0002a000 103:01 4198725    /opt/amazon/efa/lib64/libfabric.so.1" \
	>>"$tmp/link/proc/self/maps"
json 0 'f["libfabric"]["status"] == "ok"' "$fake" "$TERN" doctor --root "$tmp/link" --json
# The same name with another inode is another file: two copies.
copy efa-node replaced
echo "7f3be4000000-7f3be4100000 r-xp 0002a000 103:01 4198999    /opt/amazon/efa/lib/libfabric.so.1.27.0 (deleted)" \
	>>"$tmp/replaced/proc/self/maps"
json 1 'f["libfabric"]["status"] == "fail" and "(deleted)" in f["libfabric"]["detail"]' \
	"$fake" "$TERN" doctor --root "$tmp/replaced" --json
# Its only copy deleted on disk: loaded before an upgrade.
copy efa-node deleted
sed -i 's|libfabric.so.1.27.0$|libfabric.so.1.27.0 (deleted)|' "$tmp/deleted/proc/self/maps"
json 0 'f["libfabric"]["status"] == "warn" and "replaced or removed" in f["libfabric"]["detail"]' \
	"$fake" "$TERN" doctor --root "$tmp/deleted" --json
# No maps to read.
mkdir -p "$tmp/empty"
json 0 'f["libfabric"]["status"] == "warn" and "could not be counted" in f["libfabric"]["detail"] and f["memlock"]["status"] == "warn" and f["ptrace"]["status"] == "ok" and "no Yama" in f["ptrace"]["detail"]' \
	"$real" env FI_PROVIDER='^efa,verbs' "$TERN" doctor --root "$tmp/empty" --json

# --- a container without /dev/infiniband -----------------------------
json 1 'f["efa"]["status"] == "fail" and "dev/infiniband does not exist" in f["efa"]["detail"] and "fi_info -p efa returns -61" in f["efa"]["detail"] and "--device=/dev/infiniband/uverbs0" in f["efa"]["fix"] and j["ok"] is False' \
	"$fake" "$TERN" doctor --root "$data/container" --json
# Where libfabric lists no efa (this host), the provider line says why.
if ! "$real" "$TERN" info --provider efa >/dev/null 2>&1; then
	json 1 'f["provider:efa"]["status"] == "fail" and "absent, though 4 EFA device(s) are there" in f["provider:efa"]["detail"] and "-61" in f["provider:efa"]["detail"] and "vpc.amazonaws.com/efa" in f["provider:efa"]["fix"]' \
		"$real" "$TERN" doctor --root "$data/container" --json
	t 1 "^fail  provider:efa   absent" "$real" "$TERN" doctor --root "$data/container"
	json 1 'f["provider:efa"]["status"] == "fail" and "built without efa" in f["provider:efa"]["detail"]' \
		"$real" "$TERN" doctor --root "$efa" --json
fi
t 1 "1 failure(s), 0 warning(s): fix the failures" "$fake" "$TERN" doctor --root "$data/container"

# --- memlock ---------------------------------------------------------
lm="$data/lowmemlock"
json 1 'f["memlock"]["status"] == "fail" and "only 64 KiB of memory may be locked" in f["memlock"]["detail"] and "a region of 1 GiB fails to register (ENOMEM)" in f["memlock"]["detail"] and "raise the hard limit" in f["memlock"]["fix"] and "--ulimit memlock=-1" in f["memlock"]["fix"]' \
	"$fake" "$TERN" doctor --root "$lm" --json
t 1 "^fail  memlock " "$fake" "$TERN" doctor --root "$lm"
json 1 '"a region of 2 GiB" in f["memlock"]["detail"]' \
	"$fake" "$TERN" doctor --root "$lm" --region-size 2G --json
json 0 'f["memlock"]["status"] == "ok" and "64 KiB of memory may be locked (RLIMIT_MEMLOCK): enough to register a region of 32 KiB" in f["memlock"]["detail"]' \
	"$fake" "$TERN" doctor --root "$lm" --region-size 32K --json
json 0 'f["memlock"]["status"] == "ok"' "$fake" "$TERN" doctor --root "$lm" --region-size 64K --json
# Regions larger than one registration: the chunks TERN_MR_CHUNK makes,
# and a region whose chunks a descriptor cannot hold, with the size that
# fits; a TERN_MR_CHUNK that is no size.
json 0 'f["region"]["status"] == "ok" and "a region of 64 KiB is registered in 16 chunks of 4 KiB (TERN_MR_CHUNK), on up to 4 rails" in f["region"]["detail"]' \
	env TERN_MR_CHUNK=4K "$fake" "$TERN" doctor --root "$lm" --region-size 64K --json
json 0 'f["region"]["status"] == "ok" and "is one registration" in f["region"]["detail"]' \
	env TERN_MR_CHUNK=64K "$fake" "$TERN" doctor --root "$lm" --region-size 64K --json
json 1 'f["region"]["status"] == "fail" and "needs 128 chunks" in f["region"]["detail"] and f["region"]["fix"].startswith("TERN_MR_CHUNK=8K or more")' \
	env TERN_MR_CHUNK=4K "$fake" "$TERN" doctor --root "$lm" --region-size 512K --json
json 1 'f["region"]["status"] == "fail" and "TERN_MR_CHUNK=2x" in f["region"]["detail"]' \
	env TERN_MR_CHUNK=2x "$fake" "$TERN" doctor --root "$lm" --region-size 32K --json
# The soft limit below, the hard one above: raise it in the shell.
copy lowmemlock softonly
sed -i 's/^\(Max locked memory  *\)65536 *65536 /\165536                unlimited            /' \
	"$tmp/softonly/proc/self/limits"
json 1 'f["memlock"]["fix"].startswith("ulimit -l unlimited")' \
	"$fake" "$TERN" doctor --root "$tmp/softonly" --json
copy lowmemlock hard4g
sed -i 's/^\(Max locked memory  *\)65536 *65536 /\165536                4294967296           /' \
	"$tmp/hard4g/proc/self/limits"
json 1 'f["memlock"]["fix"].startswith("ulimit -l 4194304 (KiB)") and "4 GiB" in f["memlock"]["fix"]' \
	"$fake" "$TERN" doctor --root "$tmp/hard4g" --json
# CAP_IPC_LOCK pins past the limit.
copy lowmemlock ipclock
sed -i 's/^CapEff:.*/CapEff:\t0000000000004000/' "$tmp/ipclock/proc/self/status"
json 0 'f["memlock"]["status"] == "ok" and "CAP_IPC_LOCK" in f["memlock"]["detail"]' \
	"$fake" "$TERN" doctor --root "$tmp/ipclock" --json
# No RDMA device: efa and verbs are not there to pin anything.
json 0 'f["memlock"]["status"] == "warn" and "no RDMA device here" in f["memlock"]["detail"]' \
	"$real" env FI_PROVIDER='^efa,verbs' "$TERN" doctor --root "$data/yama3" --json

# --- Yama and shm's single copy --------------------------------------
y3="$data/yama3"
json 0 'f["ptrace"]["status"] == "warn" and "ptrace_scope 3" in f["ptrace"]["detail"] and "not even root" in f["ptrace"]["detail"] and "until reboot" in f["ptrace"]["detail"] and "reboot" in f["ptrace"]["fix"] and f["efa"]["status"] == "ok" and "not an EFA instance" in f["efa"]["detail"] and "efa-rdma" not in f' \
	"$real" env FI_PROVIDER='^efa,verbs' "$TERN" doctor --root "$y3" --json
t 0 "^warn  ptrace         Yama ptrace_scope 3" "$real" env FI_PROVIDER='^efa,verbs' "$TERN" doctor --root "$y3"
copy yama3 y2
echo 2 >"$tmp/y2/proc/sys/kernel/yama/ptrace_scope"
json 0 'f["ptrace"]["status"] == "warn" and "ptrace_scope 2: only processes with CAP_SYS_PTRACE" in f["ptrace"]["detail"]' \
	"$real" env FI_PROVIDER='^efa,verbs' "$TERN" doctor --root "$tmp/y2" --json
sed -i 's/^CapEff:.*/CapEff:\t0000000000080000/' "$tmp/y2/proc/self/status"
json 0 'f["ptrace"]["status"] == "ok" and "CAP_SYS_PTRACE" in f["ptrace"]["detail"]' \
	"$real" env FI_PROVIDER='^efa,verbs' "$TERN" doctor --root "$tmp/y2" --json
copy yama3 y0
echo 0 >"$tmp/y0/proc/sys/kernel/yama/ptrace_scope"
json 0 'f["ptrace"]["status"] == "ok" and "ptrace_scope 0" in f["ptrace"]["detail"]' \
	"$real" env FI_PROVIDER='^efa,verbs' "$TERN" doctor --root "$tmp/y0" --json
json 0 'f["ptrace"]["status"] == "warn" and "FI_SHM_DISABLE_CMA=1" in f["ptrace"]["detail"]' \
	"$real" env FI_PROVIDER='^efa,verbs' FI_SHM_DISABLE_CMA=1 "$TERN" doctor --root "$tmp/y0" --json

# --- huge pages ------------------------------------------------------
json 0 'f["hugepages"]["status"] == "ok" and "no huge pages reserved" in f["hugepages"]["detail"] and f["thp"]["status"] == "warn" and "never" in f["thp"]["detail"] and "madvise" in f["thp"]["fix"]' \
	"$real" env FI_PROVIDER='^efa,verbs' "$TERN" doctor --root "$y3" --json
copy efa-node nohuge
sed -i 's/^HugePages_Free:.*/HugePages_Free:     0/' "$tmp/nohuge/proc/meminfo"
json 0 'f["hugepages"]["status"] == "warn" and "none free" in f["hugepages"]["detail"] and "vm.nr_hugepages" in f["hugepages"]["fix"]' \
	"$fake" "$TERN" doctor --root "$tmp/nohuge" --json

# --- CUDA, through the stand-in libcuda.so.1 -------------------------
json 0 'f["cuda"]["status"] == "ok" and "CUDA 12.4, 2 GPU(s)" in f["cuda"]["detail"] and "dma-buf on 2 of 2" in f["cuda"]["detail"]' \
	"$cuda" "$TERN" doctor --root "$efa" --json
json 0 'f["cuda"]["status"] == "warn" and "no dma-buf support" in f["cuda"]["detail"] and "modprobe nvidia-peermem" in f["cuda"]["fix"]' \
	"$cuda" env FAKE_LIBCUDA_DMABUF=0 "$TERN" doctor --root "$efa" --json
copy efa-node peermem
mkdir -p "$tmp/peermem/sys/module/efa_nv_peermem"
json 0 'f["cuda"]["status"] == "ok" and "efa_nv_peermem loaded" in f["cuda"]["detail"]' \
	"$cuda" env FAKE_LIBCUDA_DMABUF=0 "$TERN" doctor --root "$tmp/peermem" --json
copy efa-node modules
echo "nvidia_peermem 16384 0 - Live 0x0000000000000000" >"$tmp/modules/proc/modules"
json 0 'f["cuda"]["status"] == "ok" and "nvidia_peermem loaded" in f["cuda"]["detail"]' \
	"$cuda" env FAKE_LIBCUDA_DMABUF=0 "$TERN" doctor --root "$tmp/modules" --json
json 0 'f["cuda"]["status"] == "ok" and "no GPU" in f["cuda"]["detail"]' \
	"$cuda" env FAKE_LIBCUDA_DEVICES=0 "$TERN" doctor --root "$efa" --json
# A GPU without a NIC to reach it: staging is the only path anyway.
json 0 'f["cuda"]["status"] == "ok" and "no RDMA device here" in f["cuda"]["detail"]' \
	"$cuda" env FAKE_LIBCUDA_DMABUF=0 FI_PROVIDER='^efa,verbs' "$TERN" doctor --root "$y3" --json

# --- output and bad values -------------------------------------------
"$fake" "$TERN" doctor --root "$data/container" --json="$tmp/d.json" >"$tmp/d.txt" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "^fail  efa " "$tmp/d.txt" &&
	python3 -c "import json, sys; j = json.load(open(sys.argv[1])); assert j['ok'] is False" "$tmp/d.json"; then
	echo "ok: --json=FILE: the JSON in the file, the text on stdout"
else
	echo "not ok: --json=FILE (rc $rc)"
	fail=1
fi
t 1 "$tmp/no/x.json: No such file" "$TERN" doctor --root "$efa" --json="$tmp/no/x.json"
t 2 "--region-size '0': expected a size from 1" "$TERN" doctor --region-size 0
t 2 "--region-size 'lots': expected a size" "$TERN" doctor --region-size lots
t 2 "--region-size '': empty" "$TERN" doctor --region-size ''
t 2 "--root '$tmp/nope': No such file" "$TERN" doctor --root "$tmp/nope"
t 2 "--root '$0': not a directory" "$TERN" doctor --root "$0"
t 2 "TERN_DOCTOR_ROOT '$tmp/nope': No such file" \
	env TERN_DOCTOR_ROOT="$tmp/nope" "$TERN" doctor
t 2 "unexpected argument 'now'" "$TERN" doctor now
t 2 "not an option of tern doctor" "$TERN" doctor --provider efa
[ $fail -eq 0 ] && echo "PASS: doctor"
exit $fail
