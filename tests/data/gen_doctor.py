#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate the machines `tern doctor` is tested on, under tests/data/doctor/.

    python3 tests/data/gen_doctor.py           # (re)write the fixtures
    python3 tests/data/gen_doctor.py --check   # fail if a committed file differs

Each fixture is a root DIR that `tern doctor --root DIR` reads as / for
/sys, /proc and /dev (tests/integration/doctor.sh):

- efa-node: an EFA instance as tern wants it. Four EFA devices,
  rdmap16s27 .. rdmap64s27 (the domains of the fake efa provider,
  tests/fakeefa/, so that libfabric's view and the files agree), each with
  device/driver a link to the efa driver, fw_ver "0.0.0.0" (what
  ibv_devinfo shows on EFA) and its uverbsN; the efa module's version
  (AWS's out-of-tree driver writes one, as "2.17.3g"); /dev/infiniband
  with uverbs0..3 (plain files: the doctor opens them, nothing more);
  memlock unlimited; Yama ptrace_scope 1 (Ubuntu's default) for a process
  without CAP_SYS_PTRACE; 1024 huge pages of 2 MiB, 1000 free; THP madvise;
  one libfabric (AWS's) mapped into the process.
- container: the same instance seen from a container started without
  --device: /sys shows the EFA devices, /dev/infiniband is not there.
  memlock unlimited (--ulimit memlock=-1), ptrace_scope 0.
- lowmemlock: the EFA instance with a locked-memory limit of 64 KiB,
  soft and hard (a login shell's default).
- yama3: a plain server (no RDMA device) with ptrace_scope 3, THP never,
  no huge pages.
"""

import os
import sys

import fixtree

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.join(HERE, "doctor")

EFA_DEVS = ["rdmap16s27", "rdmap32s27", "rdmap48s27", "rdmap64s27"]


def limits(soft, hard):
    rows = [
        ("Max cpu time", "unlimited", "unlimited", "seconds"),
        ("Max file size", "unlimited", "unlimited", "bytes"),
        ("Max data size", "unlimited", "unlimited", "bytes"),
        ("Max stack size", "8388608", "unlimited", "bytes"),
        ("Max core file size", "0", "unlimited", "bytes"),
        ("Max resident set", "unlimited", "unlimited", "bytes"),
        ("Max processes", "2062606", "2062606", "processes"),
        ("Max open files", "1048576", "1048576", "files"),
        ("Max locked memory", soft, hard, "bytes"),
        ("Max address space", "unlimited", "unlimited", "bytes"),
        ("Max file locks", "unlimited", "unlimited", "locks"),
        ("Max pending signals", "2062606", "2062606", "signals"),
        ("Max msgqueue size", "819200", "819200", "bytes"),
        ("Max nice priority", "0", "0", ""),
        ("Max realtime priority", "0", "0", ""),
        ("Max realtime timeout", "unlimited", "unlimited", "us"),
    ]
    out = "%-25s %-20s %-20s %-10s\n" % ("Limit", "Soft Limit", "Hard Limit",
                                         "Units")
    for name, s, h, u in rows:
        out += "%-25s %-20s %-20s %-10s\n" % (name, s, h, u)
    return out


def status(capeff):
    return ("Name:\ttern\nUmask:\t0022\nState:\tR (running)\n"
            "Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n"
            "CapInh:\t0000000000000000\nCapPrm:\t%s\nCapEff:\t%s\n"
            "CapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\n"
            % (capeff, capeff))


def maps(libfabric, inode):
    lines = [
        "55d0c8a00000-55d0c8a1c000 r--p 00000000 103:01 262401     "
        "/usr/local/bin/tern",
        "55d0c8a1c000-55d0c8a9a000 r-xp 0001c000 103:01 262401     "
        "/usr/local/bin/tern",
        "55d0ca1e6000-55d0ca207000 rw-p 00000000 00:00 0          [heap]",
        "7f3be3330000-7f3be3358000 r--p 00000000 103:01 1835105    "
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "7f3be3358000-7f3be34ed000 r-xp 00028000 103:01 1835105    "
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "7f3be3600000-7f3be362a000 r--p 00000000 103:01 %-10d %s"
        % (inode, libfabric),
        "7f3be362a000-7f3be3700000 r-xp 0002a000 103:01 %-10d %s"
        % (inode, libfabric),
        "7f3be3700000-7f3be3740000 r--p 00100000 103:01 %-10d %s"
        % (inode, libfabric),
        "7f3be3740000-7f3be3744000 rw-p 00140000 103:01 %-10d %s"
        % (inode, libfabric),
        "7ffd1c9e8000-7ffd1ca09000 rw-p 00000000 00:00 0          [stack]",
    ]
    return "\n".join(lines) + "\n"


def meminfo(total, free):
    return ("MemTotal:       2097152000 kB\nMemFree:        1048576000 kB\n"
            "AnonHugePages:          0 kB\nHugePages_Total:    %d\n"
            "HugePages_Free:     %d\nHugePages_Rsvd:        0\n"
            "HugePages_Surp:        0\nHugepagesize:       2048 kB\n"
            "Hugetlb:        %d kB\n" % (total, free, total * 2048))


def thp(mode):
    return " ".join("[%s]" % m if m == mode else m
                    for m in ("always", "madvise", "never")) + "\n"


AWS_LIBFABRIC = "/opt/amazon/efa/lib/libfabric.so.1.27.0"


def efa_node(memlock=("unlimited", "unlimited"), scope="1", devnodes=True):
    files, links = {}, {}
    files["sys/bus/pci/drivers/efa/uevent"] = "DRIVER=efa\n"
    files["sys/module/efa/version"] = "2.17.3g\n"
    files["sys/class/infiniband_verbs/abi_version"] = "6\n"
    for k, dev in enumerate(EFA_DEVS):
        d = "sys/class/infiniband/" + dev
        links[d + "/device/driver"] = "../../../../bus/pci/drivers/efa"
        files[d + "/fw_ver"] = "0.0.0.0\n"
        files[d + "/node_type"] = "1: CA\n"
        files["sys/class/infiniband_verbs/uverbs%d/ibdev" % k] = dev + "\n"
        if devnodes:
            files["dev/infiniband/uverbs%d" % k] = ""
    files["dev/shm/.keep"] = ""
    files["proc/self/limits"] = limits(*memlock)
    files["proc/self/status"] = status("0000000000000000")
    files["proc/self/maps"] = maps(AWS_LIBFABRIC, 4198725)
    files["proc/sys/kernel/yama/ptrace_scope"] = scope + "\n"
    files["proc/meminfo"] = meminfo(1024, 1000)
    files["sys/kernel/mm/transparent_hugepage/enabled"] = thp("madvise")
    return files, links


def container():
    return efa_node(scope="0", devnodes=False)


def lowmemlock():
    return efa_node(memlock=("65536", "65536"))


def yama3():
    files = {
        "dev/shm/.keep": "",
        "proc/self/limits": limits("8388608", "8388608"),
        "proc/self/status": status("0000000000000000"),
        "proc/self/maps": maps("/usr/lib/x86_64-linux-gnu/"
                               "libfabric.so.1.20.0", 1836011),
        "proc/sys/kernel/yama/ptrace_scope": "3\n",
        "proc/meminfo": meminfo(0, 0),
        "sys/kernel/mm/transparent_hugepage/enabled": thp("never"),
    }
    return files, {}


FIXTURES = {"efa-node": efa_node, "container": container,
            "lowmemlock": lowmemlock, "yama3": yama3}


if __name__ == "__main__":
    sys.exit(fixtree.main(TOP, FIXTURES, "gen_doctor.py", "doctor"))
