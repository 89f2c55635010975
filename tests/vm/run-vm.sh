#!/bin/bash
# SPDX-License-Identifier: MIT
# run-vm.sh: run one shell command inside a throwaway Linux guest that has a
# kernel RDMA stack (Soft-RoCE, optionally soft-iWARP), with the freshly built
# tern in it, and hand back the command's output and exit code.
#
# The guest is Debian's own kernel (linux-image-amd64) under
# qemu-system-x86_64, with an initramfs unpacked from Debian packages
# (`apt-get download` + `dpkg -x`: busybox-static, rdma-core userspace,
# iproute2, libfabric1, hwloc and whatever tern's binaries link). It has no
# network device (-nic none): all RDMA traffic stays inside the guest kernel.
# Inside: dummy0 = 192.0.2.1/24 carries rxe0; with --rdma siw|both, dummy1 =
# 192.0.2.2/24 carries siw0. FI_UNIVERSE_SIZE=16 is set (libfabric's
# verbs;ofi_rxm otherwise asks rxe for a CQ larger than its max_cqe).
#
# usage: tests/vm/run-vm.sh [options] [--] 'command run inside the guest'
#
#   --build DIR     tern build tree put into the guest at the same absolute
#                   path (binaries, libtern.so, test programs, examples);
#                   default: <repo>/build. The repo's tests/ go in as well,
#                   and the command runs in the repo root.
#   --rdma KIND     auto (default: rxe, and siw too where the cache holds a
#                   siw.ko), rxe, siw, both, none. Debian's kernel ships
#                   without siw: --build-siw builds one into the cache.
#   --env NAME=VAL  set NAME in the command's environment (repeatable)
#   --accel A       auto (default: kvm where /dev/kvm boots a kernel, else
#                   tcg), tcg, kvm
#   --mem MB        guest memory (default 2048)
#   --smp N         guest CPUs (default 2)
#   --timeout S     limit for the whole guest run (default 600)
#   --prepare       download packages and build the cached initramfs only
#   --rebuild       rebuild the cached initramfs even if it looks current
#   --build-siw     build siw.ko from linux-source-6.1 into the cache (needs
#                   root: installs the matching linux-headers package)
#   --siw-prepare   --build-siw --prepare, unless a siw.ko is cached already
#   --console       print the guest's kernel console on stderr afterwards
#   --keep DIR      keep console.log and output.log in DIR
#   -h, --help      this text
#
# Environment: TERN_VM_CACHE (default <build>/vm-cache) holds downloaded
# .deb files, the kernel, siw.ko and the initramfs; delete it to start cold.
#
# Exit status: the guest command's; 124 when the guest ran past --timeout;
# 125 when no guest result came back (missing host tool, download failure,
# boot failure: the reason is printed on stderr).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$REPO/build
RDMA=auto
ENVS=()
ACCEL=auto
MEM=2048
SMP=2
TIMEOUT=600
PREPARE=0
REBUILD=0
BUILD_SIW=0
CONSOLE=0
KEEP=

say() { echo "run-vm: $*" >&2; }
die() { say "$*"; exit 125; }
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

while [ $# -gt 0 ]; do
	case $1 in
	--build) BUILD=$2; shift 2 ;;
	--rdma) RDMA=$2; shift 2 ;;
	--env) ENVS+=("$2"); shift 2 ;;
	--accel) ACCEL=$2; shift 2 ;;
	--mem) MEM=$2; shift 2 ;;
	--smp) SMP=$2; shift 2 ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	--prepare) PREPARE=1; shift ;;
	--rebuild) REBUILD=1; shift ;;
	--build-siw) BUILD_SIW=1; shift ;;
	--siw-prepare) BUILD_SIW=2 PREPARE=1; shift ;;
	--console) CONSOLE=1; shift ;;
	--keep) KEEP=$2; shift 2 ;;
	-h | --help) sed -n '3,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	--) shift; break ;;
	-*) die "unknown option $1 (see --help)" ;;
	*) break ;;
	esac
done
CMD=${*:-}
[ -n "$CMD" ] || CMD='rdma link show; ibv_devices'
case $RDMA in auto | rxe | siw | both | none) ;; *) die "--rdma: auto, rxe, siw, both or none" ;; esac
case $ACCEL in auto | tcg | kvm) ;; *) die "--accel: auto, tcg or kvm" ;; esac
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || die "no build tree at $BUILD (build tern first)"
CACHE=${TERN_VM_CACHE:-$BUILD/vm-cache}
mkdir -p "$CACHE/debs"
CACHE=$(cd "$CACHE" && pwd)
export PATH=$PATH:/usr/sbin:/sbin
export LC_ALL=C

# --- host tools -------------------------------------------------------------
missing=
command -v qemu-system-x86_64 >/dev/null || missing="$missing qemu-system-x86"
command -v cpio >/dev/null || missing="$missing cpio"
command -v depmod >/dev/null || missing="$missing kmod"
command -v apt-get >/dev/null && command -v dpkg >/dev/null || missing="$missing apt+dpkg"
command -v readelf >/dev/null || missing="$missing binutils"
[ -z "$missing" ] || die "missing host tools:$missing (Debian: apt-get install$missing; scripts/deps.sh ci installs them)"

# --- what goes into the guest -----------------------------------------------
# The guest's own tools and the RDMA userspace; the libraries tern's binaries
# link are added from ldd below, so a new dependency follows automatically.
GUEST_PKGS="busybox-static bash libtinfo6 libc6 libgcc-s1
 iproute2 libbpf1 libbsd0 libcap2 libelf1 libmd0 libmnl0 zlib1g
 libibverbs1 ibverbs-providers ibverbs-utils librdmacm1 libnl-3-200 libnl-route-3-200
 libfabric1 libfabric-bin libatomic1 libpsm-infinipath1 libpsm2-2 libnuma1 libuuid1
 libhwloc15 libudev1"
# crc32_generic: rdma_rxe needs the "crc32" hash although modinfo does not
# say so; without it `rdma link add ... type rxe` fails with ENOENT.
GUEST_MODS="rdma_rxe ib_uverbs rdma_ucm dummy crc32_generic crc32c_generic"

# tern's ELF files: everything built at the top of the build tree (tern,
# libtern.so*, raw, ...), the integration test programs and the examples.
tern_elves() {
	local f
	for f in "$BUILD"/* "$BUILD"/tests/integration/* "$BUILD"/examples/*; do
		[ -f "$f" ] && [ ! -L "$f" ] || continue
		head -c 4 "$f" 2>/dev/null | grep -q 'ELF' && echo "$f"
	done
	return 0
}

# Debian packages that own the libraries ldd resolves for tern's binaries.
tern_lib_pkgs() {
	local lib own
	tern_elves | xargs -r ldd 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' |
		sort -u | while read -r lib; do
		case $lib in "$BUILD"/*) continue ;; esac
		lib=$(readlink -f "$lib")
		own=$(dpkg -S "$lib" 2>/dev/null || dpkg -S "${lib#/usr}" 2>/dev/null || true)
		[ -n "$own" ] && echo "${own%%:*}" || say "note: no package owns $lib"
	done | sed 's/:amd64$//' | sort -u
}

kernel_pkg() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ { print $2; exit }'; }
KPKG=$(kernel_pkg)
if [ -z "$KPKG" ]; then
	[ "$(id -u)" = 0 ] || die "apt-cache does not know linux-image-amd64: run 'apt-get update' as root"
	say "apt-get update (to resolve linux-image-amd64)"
	apt-get update -q >&2 || die "apt-get update failed"
	KPKG=$(kernel_pkg)
	[ -n "$KPKG" ] || die "cannot resolve the kernel package behind linux-image-amd64"
fi
KV=${KPKG#linux-image-}
# shellcheck disable=SC2046,SC2086 # word lists, split on purpose
PKGS=$(printf '%s\n' $GUEST_PKGS $(tern_lib_pkgs) | sort -u | tr '\n' ' ')

# deb_of PKG: the cached .deb of PKG (the newest, if several)
deb_of() { ls -1 "$CACHE/debs/${1}_"*.deb 2>/dev/null | sort -V | tail -n 1; }

download() {
	local want=() p
	for p in "$@"; do [ -n "$(deb_of "$p")" ] || want+=("$p"); done
	[ ${#want[@]} -gt 0 ] || return 0
	say "apt-get download ${want[*]}"
	# as root apt drops to _apt for downloads: let it write there
	[ "$(id -u)" = 0 ] && chown _apt "$CACHE/debs" 2>/dev/null || true
	if ! (cd "$CACHE/debs" && apt-get download -q "${want[@]}" >&2); then
		[ "$(id -u)" = 0 ] || die "apt-get download failed (try: apt-get update as root)"
		apt-get update -q >&2 || die "apt-get update failed"
		(cd "$CACHE/debs" && apt-get download -q "${want[@]}" >&2) || die "apt-get download failed"
	fi
}

# --- soft-iWARP (optional) --------------------------------------------------
# Debian's 6.1 kernel is built without CONFIG_RDMA_SIW: build siw.ko out of
# tree from linux-source-6.1 against the matching linux-headers package.
build_siw() {
	[ "$(id -u)" = 0 ] || die "--build-siw installs linux-headers-$KV: run it as root"
	local src=linux-source-${KV%%.0-*} w=$CACHE/siw-build t0
	t0=$(date +%s.%N)
	if [ ! -d "/usr/src/linux-headers-$KV" ]; then
		say "apt-get install linux-headers-$KV"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
			"linux-headers-$KV" >&2 || die "cannot install linux-headers-$KV"
	fi
	download "$src"
	rm -rf "$w"
	mkdir -p "$w" "$CACHE/siw"
	dpkg-deb --fsys-tarfile "$(deb_of "$src")" | tar -xO "./usr/src/$src.tar.xz" |
		tar -xJ -C "$w" "$src/drivers/infiniband/sw/siw"
	make -s -C "/usr/src/linux-headers-$KV" M="$w/$src/drivers/infiniband/sw/siw" \
		CONFIG_RDMA_SIW=m modules -j"$(nproc)" >&2 || die "siw build failed"
	strip --strip-debug -o "$CACHE/siw/siw-$KV.ko" "$w/$src/drivers/infiniband/sw/siw/siw.ko"
	rm -rf "$w" "$(deb_of "$src")" # 140 MB of sources, needed once
	say "built siw.ko for $KV in $(elapsed "$t0") s"
}
SIW_KO=$CACHE/siw/siw-$KV.ko
[ $BUILD_SIW = 0 ] || { [ $BUILD_SIW = 2 ] && [ -f "$SIW_KO" ]; } || build_siw
if [ "$RDMA" = auto ]; then
	RDMA=rxe
	[ ! -f "$SIW_KO" ] || RDMA=both
fi
case $RDMA in siw | both) [ -f "$SIW_KO" ] || die "--rdma $RDMA: no $SIW_KO (run with --build-siw once)" ;; esac

# --- the guest's /init --------------------------------------------------------
guest_init() {
	cat <<'EOF'
#!/bin/sh
# tern-vm guest init: mount, bring up the soft RDMA devices, run the command
# from /tern-vm/cmd.sh with its output on ttyS1, report its status, power off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TERN_VM=1 FI_UNIVERSE_SIZE=16
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
ln -s /proc/self/fd /dev/fd # as udev would: scripts use /dev/fd/N
ln -s /proc/self/fd/0 /dev/stdin
ln -s /proc/self/fd/1 /dev/stdout
ln -s /proc/self/fd/2 /dev/stderr
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
chmod 1777 /tmp # part of the initramfs, which may hold the repo under /tmp
hostname tern-vm
out=/dev/ttyS1
stty -F $out raw -echo 2>/dev/null
note() { echo "tern-vm: $*" >$out; }
rdma_kind=rxe
for a in $(cat /proc/cmdline); do
	case $a in tern.rdma=*) rdma_kind=${a#*=} ;; esac
done
ulimit -l unlimited
/bin/ip link set lo up
for m in crc32_generic crc32c_generic ib_uverbs rdma_ucm; do
	modprobe $m 2>/dev/null || note "modprobe $m failed"
done
modprobe dummy numdummies=0
up_dummy() { # NAME ADDR
	/bin/ip link add $1 type dummy && /bin/ip addr add $2 dev $1 &&
		/bin/ip link set $1 up || note "cannot set up $1"
}
case $rdma_kind in
rxe | both)
	up_dummy dummy0 192.0.2.1/24
	{ modprobe rdma_rxe && rdma link add rxe0 type rxe netdev dummy0; } ||
		note "rxe0 could not be created"
	;;
esac
case $rdma_kind in
siw | both)
	up_dummy dummy1 192.0.2.2/24
	{ modprobe siw && rdma link add siw0 type siw netdev dummy1; } ||
		note "siw0 could not be created"
	;;
esac
cd "$(cat /tern-vm/cwd 2>/dev/null || echo /root)"
# through a pipe, so that the command sees no terminal, as under CI
{
	/bin/bash /tern-vm/cmd.sh 2>&1 </dev/null
	echo $? >/tmp/.tern-vm-rc
} | cat >$out
echo "@@tern-vm-exit=$(cat /tmp/.tern-vm-rc)@@" >$out
sync
poweroff -f
EOF
}

# --- the cached base initramfs ----------------------------------------------
BASE=$CACHE/base-$KV.cpio
VMLINUZ=$CACHE/vmlinuz-$KV

build_base() {
	local t0 kroot=$CACHE/kernel root=$CACHE/root p a m f
	t0=$(date +%s.%N)
	download "$KPKG" $PKGS
	[ -z "$(ls "$CACHE/debs"/*.deb.tmp 2>/dev/null)" ] || rm -f "$CACHE/debs"/*.deb.tmp
	rm -rf "$kroot" "$root"
	mkdir -p "$kroot" "$root"
	say "unpacking $KPKG and $(echo $PKGS | wc -w) packages"
	dpkg -x "$(deb_of "$KPKG")" "$kroot"
	if [ -f "$SIW_KO" ]; then
		mkdir -p "$kroot/lib/modules/$KV/extra"
		cp "$SIW_KO" "$kroot/lib/modules/$KV/extra/siw.ko"
	fi
	depmod -b "$kroot" "$KV"
	for p in $PKGS; do dpkg -x "$(deb_of "$p")" "$root"; done
	rm -rf "$root"/usr/share/{doc,man,info,locale,lintian,bug,bash-completion}
	# dpkg -x runs no maintainer scripts: do what they would have done
	mkdir -p "$root/lib64"
	[ -e "$root/lib64/ld-linux-x86-64.so.2" ] ||
		ln -s /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$root/lib64/ld-linux-x86-64.so.2"
	# libpsm-infinipath1 registers its library with update-alternatives;
	# libfabric does not load without it
	f=$(cd "$root" && ls usr/lib/libpsm1/libpsm_infinipath.so.1.* 2>/dev/null | head -n 1)
	[ -z "$f" ] || ln -sf "/$f" "$root/usr/lib/x86_64-linux-gnu/libpsm_infinipath.so.1"
	# a loader cache is nice, not needed (Debian's ld.so searches the
	# multiarch directories anyway); ldconfig -r needs root
	printf 'include /etc/ld.so.conf.d/*.conf\n' >"$root/etc/ld.so.conf"
	ldconfig -r "$root" 2>/dev/null || true
	# busybox for every command no package brings
	for a in $("$root/bin/busybox" --list-full); do
		local n=${a##*/} d
		for d in bin sbin usr/bin usr/sbin; do [ -e "$root/$d/$n" ] && continue 2; done
		mkdir -p "$root/${a%/*}"
		ln -s /bin/busybox "$root/$a"
	done
	# the kernel modules and what they depend on
	m=$GUEST_MODS
	[ -f "$SIW_KO" ] && m="$m siw"
	for p in $m; do
		modprobe -d "$kroot" -S "$KV" --show-depends "$p" | awk '$1 == "insmod" { print $2 }'
	done | sort -u | while read -r f; do
		mkdir -p "$root/$(dirname "${f#"$kroot"/}")"
		cp "$f" "$root/${f#"$kroot"/}"
	done
	cp "$kroot/lib/modules/$KV"/modules.{order,builtin,builtin.modinfo} "$root/lib/modules/$KV/"
	depmod -b "$root" "$KV"
	mkdir -p "$root"/{proc,sys,dev,tmp,run,root,etc,tern-vm}
	echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
	echo 'root:x:0:' >"$root/etc/group"
	printf '127.0.0.1 localhost tern-vm\n::1 localhost\n' >"$root/etc/hosts"
	guest_init >"$root/init"
	chmod 755 "$root/init"
	# uncompressed: the guest copies it instead of decompressing under TCG;
	# cpio pads to 512 bytes, so the per-run archive appended later starts
	# 4-byte aligned, as the kernel requires
	(cd "$root" && find . ! -path . -print0 | sort -z | cpio --null -o -H newc --quiet) >"$BASE.tmp"
	mv "$BASE.tmp" "$BASE"
	echo "$STAMP" >"$BASE.stamp"
	cp "$kroot/boot/vmlinuz-$KV" "$VMLINUZ"
	rm -rf "$root" "$kroot" # 400 MB unpacked; the .deb stays in the cache
	say "initramfs $(du -h "$BASE" | cut -f1) built in $(elapsed "$t0") s"
}

# Rebuild when the package set, modules, init, siw.ko or this builder change.
STAMP=$({
	echo "$KPKG $PKGS $GUEST_MODS"
	guest_init
	declare -f build_base
	[ ! -f "$SIW_KO" ] || cksum <"$SIW_KO"
} | md5sum | cut -d' ' -f1)
if [ $REBUILD = 1 ] || [ ! -f "$BASE" ] || [ ! -f "$VMLINUZ" ] ||
	[ "$(cat "$BASE.stamp" 2>/dev/null)" != "$STAMP" ]; then
	build_base
fi
[ $PREPARE = 0 ] || exit 0

# --- this run: tern and the command -----------------------------------------
RUN=$(mktemp -d "${TMPDIR:-/tmp}/tern-vm.XXXXXX")
QPID=
cleanup() {
	[ -z "$QPID" ] || kill "$QPID" 2>/dev/null || true
	rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ov=$RUN/overlay
mkdir -p "$ov/tern-vm"
tern_elves | while read -r f; do
	mkdir -p "$ov$(dirname "$f")"
	cp -p "$f" "$ov$f"
done
for f in "$BUILD"/*.so*; do # libtern.so.0 -> libtern.so.0.1.0 etc.
	[ -L "$f" ] && cp -P "$f" "$ov$f"
done
mkdir -p "$ov$REPO"
cp -pr "$REPO/tests" "$ov$REPO/"
for e in ${ENVS[@]+"${ENVS[@]}"}; do
	[[ $e == [A-Za-z_]*=* ]] || die "--env $e: NAME=VALUE"
	printf 'export %s=%q\n' "${e%%=*}" "${e#*=}"
done >"$ov/tern-vm/cmd.sh"
printf '%s\n' "$CMD" >>"$ov/tern-vm/cmd.sh"
echo "$REPO" >"$ov/tern-vm/cwd"
(cd "$ov" && find . ! -path . -print0 | cpio --null -o -H newc --quiet) >"$RUN/overlay.cpio"
cat "$BASE" "$RUN/overlay.cpio" >"$RUN/initrd"

# --- accelerator --------------------------------------------------------------
# KVM only where it really boots a kernel: on some hosts /dev/kvm opens but a
# nested guest never gets going. The verdict is cached per host kernel and
# qemu version.
kvm_works() {
	[ -r /dev/kvm ] && [ -w /dev/kvm ] || return 1
	local key verdict=$CACHE/kvm-verdict
	key="$(uname -r) $(qemu-system-x86_64 --version | head -n 1) $KV"
	if [ "$(head -n 1 "$verdict" 2>/dev/null)" != "$key" ]; then
		timeout -k 2 20 qemu-system-x86_64 -accel kvm -cpu host -m 256 -nic none \
			-display none -monitor none -no-reboot -serial file:"$RUN/kvm.log" \
			-kernel "$VMLINUZ" -append 'console=ttyS0 panic=-1' >/dev/null 2>&1 || true
		if grep -q 'Kernel panic\|Unable to mount root' "$RUN/kvm.log" 2>/dev/null; then
			printf '%s\nyes\n' "$key" >"$verdict"
		else
			printf '%s\nno\n' "$key" >"$verdict"
		fi
	fi
	[ "$(sed -n 2p "$verdict")" = yes ]
}
# shellcheck disable=SC2054 # the commas are qemu's
tcg=(-accel tcg,thread=multi -cpu max)
kvm=(-accel kvm -cpu host)
case $ACCEL in
kvm) accel=("${kvm[@]}") ;;
tcg) accel=("${tcg[@]}") ;;
auto) if kvm_works; then accel=("${kvm[@]}"); else accel=("${tcg[@]}"); fi ;;
esac

# --- boot ---------------------------------------------------------------------
: >"$RUN/output.log"
t0=$(date +%s.%N)
say "booting $KV (${accel[1]%%,*}, $SMP cpu, $MEM MiB, rdma $RDMA)"
timeout -k 5 "$TIMEOUT" qemu-system-x86_64 "${accel[@]}" -m "$MEM" -smp "$SMP" \
	-nic none -display none -monitor none -no-reboot \
	-serial file:"$RUN/console.log" -serial file:"$RUN/output.log" \
	-kernel "$VMLINUZ" -initrd "$RUN/initrd" \
	-append "console=ttyS0 panic=-1 quiet loglevel=3 tern.rdma=$RDMA" \
	>"$RUN/qemu.log" 2>&1 &
QPID=$!
# the command's output as it comes
tail -n +1 -s 0.5 -f --pid="$QPID" "$RUN/output.log" | grep --line-buffered -av '^@@tern-vm-exit=' || true
qrc=0
wait "$QPID" || qrc=$?
QPID=
say "guest ran $(elapsed "$t0") s"

[ -z "$KEEP" ] || { mkdir -p "$KEEP" && cp "$RUN"/{console,output,qemu}.log "$KEEP/"; }
[ $CONSOLE = 0 ] || { echo "--- guest console" >&2; cat "$RUN/console.log" >&2; }
rc=$(sed -n 's/^@@tern-vm-exit=\([0-9]*\)@@.*/\1/p' "$RUN/output.log" | tail -n 1)
if [ -z "$rc" ]; then
	if [ $qrc = 124 ] || [ $qrc = 137 ]; then
		say "TIMEOUT: the guest ran past $TIMEOUT s"
		rc=124
	else
		say "no result from the guest (qemu exit $qrc); console tail:"
		rc=125
	fi
	tail -n 40 "$RUN/console.log" >&2 || true
	cat "$RUN/qemu.log" >&2 || true
fi
exit "$rc"
