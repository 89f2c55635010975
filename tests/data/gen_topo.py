#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate the hwloc v2 XML topology fixtures of tests/data/ and what the
topology code must find in each (<name>.expect).

    python3 tests/data/gen_topo.py           # (re)write the fixtures
    python3 tests/data/gen_topo.py --check   # fail if a committed file differs

Each machine is described once, below, as sockets, PCIe switch groups and
devices; the XML and the expectations are both derived from that
description, so they cannot disagree. Shapes follow the published layouts
and real `lstopo --whole-io` captures of the instances (aws-ofi-nccl's
topology files and test fixtures):

- p4d.24xlarge: 2 x 24-core Xeon 8275CL, HT. The hypervisor presents each
  PCIe switch as its own PCI root (host bridge, one bus) holding 2 A100 GPUs,
  1 EFA (efa0) and 1 ENA: 4 groups, 2 per socket, 4 x 100 Gbit/s EFA.
- p5.48xlarge: 2 x 48-core EPYC 7R13, HT. 8 PCIe switches (4 per socket),
  each with 1 H100 and 4 EFA (efa1) at 100 Gbit/s: 32 NICs; switch and NIC
  bus ids as in aws-ofi-nccl's p5 topology (switch 45:00.0, NICs 4f-52).
- p5en.48xlarge: 2 x 48-core Xeon 8488C, HT. 4 switches (2 per socket),
  each with 2 H200, 4 EFA (efa2) at 200 Gbit/s, 4 ENA, 2 NVMe: 16 NICs,
  2 per GPU.
- p6-b200.48xlarge: 2 x 48-core Xeon 8559C, HT. 4 switches, each with
  2 B200 and 2 EFA (efa3) at 400 Gbit/s; the third switch also holds two
  ConnectX-7 (ibp115s0f0, ibp116s0f0) on x1 links, as captured on the
  instance: RDMA devices that are not the EFA rails.
- server-2s: a GPU-less two-socket server (2 x 32-core Xeon 6338, HT, CPUs
  numbered alternately across sockets as Linux does on such machines), a
  dual-port ConnectX-6 on socket 0 (mlx5_0, mlx5_1), one on socket 1
  (mlx5_2), an onboard Broadcom Ethernet without RDMA and an ASPEED BMC VGA
  (a display device that is not a GPU).
- fallback: synthetic, for the fallback rules: 2 sockets x 2 NUMA nodes
  (sub-NUMA clustering), a GPU with a NIC on its switch, one whose NICs are
  only elsewhere on its NUMA node, one on a NUMA node without NICs (the
  nearest node by the NUMA distance matrix has them), and a Broadcom
  bnxt_re RDMA NIC of another kind.

NIC network speeds are not in lstopo captures; they are added as the info
attribute TernLinkSpeedGbps on the RDMA OS device (hwloc-annotate can add
the same to a capture), so bandwidth totals can be checked.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# Vendors and device ids.
AMAZON = 0x1D0F
NVIDIA = 0x10DE
MELLANOX = 0x15B3
BROADCOM = 0x14E4
ASPEED = 0x1A03

# PCIe link speeds as hwloc reports them (GB/s per direction).
GEN1_X1 = 0.250000
CX7_X1 = 3.938462   # as captured on p6-b200
GEN4_X8 = 15.753846
GEN4_X16 = 31.507692
GEN5_X16 = 63.015385


class Dev:
    """A PCI device (function) and its OS devices."""

    def __init__(self, bus, cls, vendor, device, link, model, osdevs=(),
                 dev=0, func=0, subsys=None, rev=0):
        self.bus, self.dev, self.func = bus, dev, func
        self.cls, self.vendor, self.device = cls, vendor, device
        self.subsys = subsys or (vendor, device)
        self.rev = rev
        self.link = link
        self.model = model
        self.osdevs = list(osdevs)
        # Filled in by the machine description.
        self.gpu = False
        self.nic = None

    def busid(self):
        return "0000:%02x:%02x.%x" % (self.bus, self.dev, self.func)


class Bridge:
    """A PCI-to-PCI bridge, or a host bridge (busid None)."""

    def __init__(self, busid, children, link=GEN5_X16):
        self.busid = busid
        self.children = children
        self.link = link


def efa(bus, gen, gbps, link, dev=0):
    name = "rdmap%ds%d" % (bus, dev)
    d = Dev(bus, 0x0200, AMAZON, 0xEFA0 + gen, link,
            "Elastic Fabric Adapter (EFA)",
            [("openfabrics", name, {"TernLinkSpeedGbps": str(gbps)})],
            dev=dev)
    d.nic = {"name": name, "kind": "efa", "gbps": gbps}
    return d


def mlx(bus, func, name, netdev, device, model, link, gbps=None):
    infos = {} if gbps is None else {"TernLinkSpeedGbps": str(gbps)}
    d = Dev(bus, 0x0207, MELLANOX, device, link, model,
            [("network", netdev, {}), ("openfabrics", name, infos)],
            func=func)
    d.nic = {"name": name, "kind": "mlx", "gbps": gbps}
    return d


def ena(bus, link=GEN4_X16, dev=0):
    return Dev(bus, 0x0200, AMAZON, 0xEC20, link,
               "Elastic Network Adapter (ENA)",
               [("network", "enp%ds%d" % (bus, dev), {})], dev=dev)


def nvme(bus, disk, link=GEN4_X8, dev=0):
    return Dev(bus, 0x0108, AMAZON, 0xCD01, link, "NVMe SSD Controller",
               [("block", disk, {})], dev=dev, subsys=(AMAZON, 0))


def nvgpu(bus, device, model, link, index, osdevs, dev=0):
    """An NVIDIA GPU; osdevs picks which OS devices the capture shows."""
    os_list = []
    if "drm" in osdevs:
        os_list += [("gpu", "card%d" % (index + 1), {}),
                    ("gpu", "renderD%d" % (128 + index), {})]
    if "cuda" in osdevs:
        os_list.append(("cuda", "cuda%d" % index, {"GPUModel": model}))
    if "nvml" in osdevs:
        os_list.append(("nvml", "nvml%d" % index, {"GPUModel": model}))
    if "opencl" in osdevs:
        os_list.append(("opencl", "opencl0d%d" % index, {"GPUModel": model}))
    d = Dev(bus, 0x0302, NVIDIA, device, link, model, os_list, dev=dev,
            rev=0xA1)
    d.gpu = True
    return d


def nitro_switch(root, devices, first_port_bus=None):
    """AWS Nitro PCIe layout as lstopo shows it on p5en/p6: host bridge
    [root..] -> root port root:00.0 -> switch upstream port (root+1):00.0 ->
    one downstream port on bus root+2 per device bus."""
    base = root + 3 if first_port_bus is None else first_port_bus
    ports = []
    for d in devices:
        i = d.bus - base
        assert 0 <= i < 256
        ports.append(Bridge("0000:%02x:%02x.%x" % (root + 2, i // 8, i % 8),
                            [d], link=d.link))
    sw = Bridge("0000:%02x:00.0" % (root + 1), ports)
    rp = Bridge("0000:%02x:00.0" % root, [sw])
    return Bridge(None, [rp])


class Socket:
    def __init__(self, numas, io):
        self.numas = numas  # list of list of (core first PU, [sibling PUs])
        self.io = io        # host bridges attached to the socket


class Machine:
    def __init__(self, name, product, cpu_vendor, cpu_model, sockets,
                 distances, memory, expect_gpus=None):
        self.name = name
        self.product = product
        self.cpu_vendor, self.cpu_model = cpu_vendor, cpu_model
        self.sockets = sockets
        self.distances = distances
        self.memory = memory
        self.expect_gpus = expect_gpus


def cores_ht(first, count, sibling_offset):
    """count cores numbered from first, each with one sibling PU."""
    return [(first + i, [first + i + sibling_offset]) for i in range(count)]


def cores_interleaved(socket, nsockets, count, sibling_offset):
    """Linux numbering on many two-socket Intel servers: PU 0 on socket 0,
    PU 1 on socket 1, ...; siblings after all first threads."""
    return [(socket + nsockets * i, [socket + nsockets * i + sibling_offset])
            for i in range(count)]


# ---------------------------------------------------------------- machines

def p4d():
    sockets = []
    groups = [(0x10, 0), (0x20, 2), (0x90, 4), (0xA0, 6)]
    io = {0: [], 1: []}
    gi = 0
    for bus, g0 in groups:
        devs = []
        if gi < 2:
            # The primary ENA interfaces, where the capture shows them.
            slot = (0x00, 0x01)[gi]
            devs.append(Dev(bus, 0x0200, AMAZON, 0xEC20, 0.0,
                            "Elastic Network Adapter (ENA)",
                            [("network", ("ens32", "ens65")[gi], {})],
                            dev=slot))
        devs += [
            efa(bus, 0, 100, 0.0, dev=0x1B),
            nvgpu(bus, 0x20B0, "NVIDIA A100-SXM4-40GB", GEN4_X16, g0,
                  ["drm", "opencl"], dev=0x1C),
            nvgpu(bus, 0x20B0, "NVIDIA A100-SXM4-40GB", GEN4_X16, g0 + 1,
                  ["drm", "opencl"], dev=0x1D),
            nvme(bus, "nvme%dn1" % gi, link=0.0, dev=0x1E),
        ]
        # Devices sit on the root bus itself: no switch is visible.
        io[gi // 2].append(Bridge(None, devs))
        gi += 1
    for s in range(2):
        sockets.append(Socket([cores_ht(24 * s, 24, 48)], io[s]))
    return Machine("p4d.24xlarge", "p4d.24xlarge", "GenuineIntel",
                   "Intel(R) Xeon(R) Platinum 8275CL CPU @ 3.00GHz", sockets,
                   [[10, 21], [21, 10]], 602206875648)


def p5():
    io = {0: [], 1: []}
    for g in range(8):
        root = 0x44 + 0x11 * g
        devs = []
        if g == 0:
            devs.append(ena(root + 3))
        devs += [efa(root + 0x0B + i, 1, 100, GEN4_X16) for i in range(4)]
        devs.append(nvgpu(root + 0x0F, 0x2330, "NVIDIA H100 80GB HBM3",
                          GEN5_X16, g, ["drm", "cuda", "nvml"]))
        devs.append(nvme(root + 0x10, "nvme%dn1" % (g + 1)))
        io[g // 4].append(nitro_switch(root, devs))
    sockets = [Socket([cores_ht(48 * s, 48, 96)], io[s]) for s in range(2)]
    return Machine("p5.48xlarge", "p5.48xlarge", "AuthenticAMD",
                   "AMD EPYC 7R13 Processor", sockets, [[10, 32], [32, 10]],
                   1081481342976)


def p5en():
    io = {0: [], 1: []}
    for g in range(4):
        root = 0x44 + 0x19 * g
        devs = [ena(root + 3 + i) for i in range(4)]
        devs += [efa(root + 0x11 + i, 2, 200, GEN4_X16) for i in range(4)]
        devs += [nvgpu(root + 0x15 + i, 0x2335, "NVIDIA H200", GEN5_X16,
                       2 * g + i, ["drm", "opencl"]) for i in range(2)]
        devs += [nvme(root + 0x17 + i, "nvme%dn1" % (2 * g + i + 1))
                 for i in range(2)]
        io[g // 2].append(nitro_switch(root, devs))
    sockets = [Socket([cores_ht(48 * s, 48, 96)], io[s]) for s in range(2)]
    return Machine("p5en.48xlarge", "p5en.48xlarge", "GenuineIntel",
                   "Intel(R) Xeon(R) Platinum 8488C", sockets,
                   [[10, 21], [21, 10]], 1073701388288)


def p6b200():
    io = {0: [], 1: []}
    roots = [0x44, 0x55, 0x66, 0x79]
    for g, root in enumerate(roots):
        if root == 0x66:
            # As captured: two ConnectX-7 on x1 links share this switch.
            devs = [ena(root + 4, GEN5_X16), ena(root + 5, GEN5_X16)]
            devs += [efa(root + 0x0B + i, 3, 400, GEN5_X16) for i in range(2)]
            devs += [mlx(root + 0x0D + i, 0, "ibp%ds0f0" % (root + 0x0D + i),
                         "ibp%ds0f0" % (root + 0x0D + i), 0x1021,
                         "MT2910 Family [ConnectX-7]", CX7_X1)
                     for i in range(2)]
            devs += [nvgpu(root + 0x0F + i, 0x2901, "NVIDIA B200", GEN5_X16,
                           2 * g + i, ["drm", "opencl"]) for i in range(2)]
            devs += [nvme(root + 0x11 + i, "nvme%dn1" % (2 * g + i + 1))
                     for i in range(2)]
        else:
            devs = [ena(root + 3 + i, GEN5_X16) for i in range(2)]
            devs += [efa(root + 0x0B + i, 3, 400, GEN5_X16) for i in range(2)]
            devs += [nvgpu(root + 0x0D + i, 0x2901, "NVIDIA B200", GEN5_X16,
                           2 * g + i, ["drm", "opencl"]) for i in range(2)]
            devs += [nvme(root + 0x0F + i, "nvme%dn1" % (2 * g + i + 1))
                     for i in range(2)]
        io[g // 2].append(nitro_switch(root, devs))
    sockets = [Socket([cores_ht(48 * s, 48, 96)], io[s]) for s in range(2)]
    return Machine("p6-b200.48xlarge", "p6-b200.48xlarge", "GenuineIntel",
                   "Intel(R) Xeon(R) Platinum 8559C", sockets,
                   [[10, 21], [21, 10]], 1071588651008)


def server():
    cx6 = "MT28908 Family [ConnectX-6]"
    s0 = [
        Bridge(None, [
            Bridge("0000:00:1c.0", [
                Bridge("0000:01:00.0", [
                    Dev(0x02, 0x0300, ASPEED, 0x2000, GEN1_X1,
                        "ASPEED Graphics Family", [("gpu", "card0", {})],
                        rev=0x41)], link=GEN1_X1)], link=GEN1_X1),
            Bridge("0000:00:1c.5", [
                Dev(0x04, 0x0200, BROADCOM, 0x165F, GEN1_X1,
                    "NetXtreme BCM5720 Gigabit Ethernet PCIe",
                    [("network", "eno8303", {})])], link=GEN1_X1),
        ]),
        Bridge(None, [
            Bridge("0000:30:02.0", [
                mlx(0x31, 0, "mlx5_0", "ibp49s0f0", 0x101B, cx6, GEN4_X16,
                    200),
                mlx(0x31, 1, "mlx5_1", "ibp49s0f1", 0x101B, cx6, GEN4_X16,
                    200),
            ], link=GEN4_X16)]),
        Bridge(None, [
            Bridge("0000:4a:02.0", [nvme(0x4B, "nvme0n1")], link=GEN4_X8)]),
    ]
    s1 = [
        Bridge(None, [
            Bridge("0000:98:02.0", [
                mlx(0x99, 0, "mlx5_2", "ibp153s0f0", 0x101B, cx6, GEN4_X16,
                    200)], link=GEN4_X16)]),
    ]
    sockets = [Socket([cores_interleaved(0, 2, 32, 64)], s0),
               Socket([cores_interleaved(1, 2, 32, 64)], s1)]
    return Machine("server-2s", "PowerEdge R750", "GenuineIntel",
                   "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", sockets,
                   [[10, 20], [20, 10]], 270215172096)


def fallback():
    """Synthetic. NUMA 0..3, 4 cores each (2 sockets x SNC2)."""
    bnxt = Dev(0x41, 0x0200, BROADCOM, 0x1750, GEN4_X16,
               "BCM57508 NetXtreme-E 10Gb/25Gb/40Gb/50Gb/100Gb/200Gb",
               [("network", "ens65f0np0", {}),
                ("openfabrics", "bnxt_re0", {"TernLinkSpeedGbps": "100"})])
    bnxt.nic = {"name": "bnxt_re0", "kind": "rdma", "gbps": 100}
    n0 = [
        # GPU 0 and NIC a share a switch.
        Bridge(None, [Bridge("0000:10:00.0", [Bridge("0000:11:00.0", [
            Bridge("0000:12:00.0", [efa(0x13, 2, 200, GEN4_X16)]),
            Bridge("0000:12:01.0", [nvgpu(0x14, 0x2335, "NVIDIA H200",
                                          GEN5_X16, 0, ["cuda"])]),
        ])])]),
        # GPU 1 alone on its root; NIC b on another root of NUMA 0.
        Bridge(None, [Bridge("0000:20:00.0", [
            nvgpu(0x21, 0x2335, "NVIDIA H200", GEN5_X16, 1, ["cuda"])])]),
        Bridge(None, [Bridge("0000:28:00.0", [
            efa(0x29, 2, 200, GEN4_X16)])]),
    ]
    n1 = [
        # A bnxt_re RDMA NIC: another kind; the map uses the EFA ones.
        Bridge(None, [Bridge("0000:40:00.0", [bnxt])]),
    ]
    n2 = [
        # GPU 2: no NIC on NUMA 2; NUMA 3 is nearest (same socket).
        Bridge(None, [Bridge("0000:80:00.0", [
            nvgpu(0x81, 0x2335, "NVIDIA H200", GEN5_X16, 2, ["cuda"])])]),
    ]
    n3 = [
        Bridge(None, [Bridge("0000:a0:00.0", [
            efa(0xA1, 2, 200, GEN4_X16)])]),
        Bridge(None, [Bridge("0000:a8:00.0", [
            efa(0xA9, 2, 200, GEN4_X16)])]),
    ]
    sockets = [
        Socket([cores_ht(0, 4, 16), cores_ht(4, 4, 16)], [n0, n1]),
        Socket([cores_ht(8, 4, 16), cores_ht(12, 4, 16)], [n2, n3]),
    ]
    d = [[10, 12, 21, 21], [12, 10, 21, 21], [21, 21, 10, 12],
         [21, 21, 12, 10]]
    return Machine("fallback", "synthetic", "GenuineIntel",
                   "synthetic 4-core SNC2", sockets, d, 17179869184)


MACHINES = [p4d, p5, p5en, p6b200, server, fallback]

# ------------------------------------------------------------ XML writing


def bitmap(bits):
    """hwloc's bitmap text: 32-bit words, most significant first."""
    if not bits:
        return "0x0"
    top = max(bits) // 32
    words = []
    for w in range(top, -1, -1):
        v = 0
        for b in bits:
            if b // 32 == w:
                v |= 1 << (b % 32)
        words.append("0x%08x" % v)
    return ",".join(words)


OSDEV_TYPES = {"block": (0, None), "gpu": (1, None), "network": (2, None),
               "openfabrics": (3, None), "cuda": (5, "CUDA"),
               "nvml": (1, "NVML"), "opencl": (5, "OpenCL")}


class Writer:
    def __init__(self):
        self.lines = []
        self.gp = 0

    def gpi(self):
        self.gp += 1
        return self.gp

    def out(self, depth, s):
        self.lines.append("  " * depth + s)

    def info(self, depth, name, value):
        self.out(depth, '<info name="%s" value="%s"/>' % (name, value))


def sets_attrs(cpus, nodes):
    c, n = bitmap(cpus), bitmap(nodes)
    return ('cpuset="%s" complete_cpuset="%s" nodeset="%s" '
            'complete_nodeset="%s"' % (c, c, n, n))


def write_osdev(w, depth, kind, name, infos):
    t, sub = OSDEV_TYPES[kind]
    subtype = ' subtype="%s"' % sub if sub else ""
    w.out(depth, '<object type="OSDev" gp_index="%d" name="%s"%s '
          'osdev_type="%d">' % (w.gpi(), name, subtype, t))
    if kind in ("cuda", "nvml", "opencl"):
        w.info(depth + 1, "Backend", sub)
        w.info(depth + 1, "GPUVendor", "NVIDIA Corporation")
    for k, v in infos.items():
        w.info(depth + 1, k, v)
    w.out(depth, "</object>")


def pci_type(d):
    return "%04x [%04x:%04x] [%04x:%04x] %02x" % (
        d.cls, d.vendor, d.device, d.subsys[0], d.subsys[1], d.rev)


VENDOR_NAMES = {AMAZON: "Amazon.com, Inc.", NVIDIA: "NVIDIA Corporation",
                MELLANOX: "Mellanox Technologies",
                BROADCOM: "Broadcom Inc. and subsidiaries",
                ASPEED: "ASPEED Technology, Inc."}


def bus_range(node):
    """Lowest and highest bus number below a bridge."""
    lo, hi = 255, 0
    for c in node.children:
        if isinstance(c, Dev):
            lo, hi = min(lo, c.bus), max(hi, c.bus)
        else:
            if c.busid is not None:
                b = int(c.busid[5:7], 16)
                lo, hi = min(lo, b), max(hi, b)
            clo, chi = bus_range(c)
            lo, hi = min(lo, clo), max(hi, chi)
    return lo, hi


def write_io(w, depth, node, bdepth):
    if isinstance(node, Dev):
        w.out(depth, '<object type="PCIDev" gp_index="%d" pci_busid="%s" '
              'pci_type="%s" pci_link_speed="%f">'
              % (w.gpi(), node.busid(), pci_type(node), node.link))
        w.info(depth + 1, "PCIVendor", VENDOR_NAMES[node.vendor])
        w.info(depth + 1, "PCIDevice", node.model)
        for kind, name, infos in node.osdevs:
            write_osdev(w, depth + 1, kind, name, infos)
        w.out(depth, "</object>")
        return
    lo, hi = bus_range(node)
    if node.busid is None:
        w.out(depth, '<object type="Bridge" gp_index="%d" bridge_type="0-1" '
              'depth="0" bridge_pci="0000:[%02x-%02x]">' % (w.gpi(), lo, hi))
    else:
        own = int(node.busid[5:7], 16)
        sec = min(c.bus if isinstance(c, Dev) else int(c.busid[5:7], 16)
                  for c in node.children)
        assert sec > own, node.busid
        w.out(depth, '<object type="Bridge" gp_index="%d" bridge_type="1-1" '
              'depth="%d" bridge_pci="0000:[%02x-%02x]" pci_busid="%s" '
              'pci_type="0604 [1d0f:0200] [1d0f:0200] 00" '
              'pci_link_speed="%f">'
              % (w.gpi(), bdepth, sec, hi, node.busid, node.link))
        w.info(depth + 1, "PCIVendor", VENDOR_NAMES[AMAZON])
    for c in node.children:
        write_io(w, depth + 1, c, bdepth + 1)
    w.out(depth, "</object>")


def write_cores(w, depth, cores, node):
    for i, (pu, sibs) in enumerate(cores):
        pus = [pu] + sibs
        w.out(depth, '<object type="Core" os_index="%d" %s gp_index="%d">'
              % (i, sets_attrs(pus, [node]), w.gpi()))
        for p in pus:
            w.out(depth + 1, '<object type="PU" os_index="%d" %s '
                  'gp_index="%d"/>' % (p, sets_attrs([p], [node]), w.gpi()))
        w.out(depth, "</object>")


def all_pus(cores):
    return sorted(p for pu, sibs in cores for p in [pu] + sibs)


def write_xml(m):
    w = Writer()
    w.out(0, '<?xml version="1.0" encoding="UTF-8"?>')
    w.out(0, '<!DOCTYPE topology SYSTEM "hwloc2.dtd">')
    # No XML comment saying so: hwloc's built-in parser (used where the
    # libxml2 plugin, package libhwloc-plugins, is not installed) rejects
    # comments. The Machine's ProcessName info names this script.
    w.out(0, '<topology version="2.0">')
    allnuma = []
    allcpus = []
    for s in m.sockets:
        for cores in s.numas:
            allnuma.append(len(allnuma))
            allcpus += all_pus(cores)
    c, n = bitmap(allcpus), bitmap(allnuma)
    w.out(1, '<object type="Machine" os_index="0" cpuset="%s" '
          'complete_cpuset="%s" allowed_cpuset="%s" nodeset="%s" '
          'complete_nodeset="%s" allowed_nodeset="%s" gp_index="%d">'
          % (c, c, c, n, n, n, w.gpi()))
    w.info(2, "DMIProductName", m.product)
    if m.product.startswith("p"):
        w.info(2, "DMISysVendor", "Amazon EC2")
    w.info(2, "Backend", "Linux")
    w.info(2, "OSName", "Linux")
    w.info(2, "Architecture", "x86_64")
    w.info(2, "ProcessName", "gen_topo.py")
    numa = 0
    for si, s in enumerate(m.sockets):
        spus = sorted(p for cores in s.numas for p in all_pus(cores))
        snodes = list(range(numa, numa + len(s.numas)))
        w.out(2, '<object type="Package" os_index="%d" %s gp_index="%d">'
              % (si, sets_attrs(spus, snodes), w.gpi()))
        w.info(3, "CPUVendor", m.cpu_vendor)
        w.info(3, "CPUModel", m.cpu_model)
        if len(s.numas) == 1:
            cores = s.numas[0]
            w.out(3, '<object type="NUMANode" os_index="%d" %s gp_index="%d" '
                  'local_memory="%d"/>' % (numa, sets_attrs(spus, [numa]),
                                           w.gpi(), m.memory))
            w.out(3, '<object type="L3Cache" %s gp_index="%d" '
                  'cache_size="%d" depth="3" cache_linesize="64" '
                  'cache_associativity="11" cache_type="0">'
                  % (sets_attrs(spus, [numa]), w.gpi(), 37486592))
            write_cores(w, 4, cores, numa)
            w.out(3, "</object>")
            for hb in s.io:
                write_io(w, 3, hb, 0)
            numa += 1
        else:
            # Sub-NUMA clusters: a Group per NUMA node, I/O below it.
            for ni, cores in enumerate(s.numas):
                pus = all_pus(cores)
                w.out(3, '<object type="Group" %s gp_index="%d" kind="1000" '
                      'subkind="0" dont_merge="1">'
                      % (sets_attrs(pus, [numa]), w.gpi()))
                w.out(4, '<object type="NUMANode" os_index="%d" %s '
                      'gp_index="%d" local_memory="%d"/>'
                      % (numa, sets_attrs(pus, [numa]), w.gpi(), m.memory))
                write_cores(w, 4, cores, numa)
                for hb in s.io[ni]:
                    write_io(w, 4, hb, 0)
                w.out(3, "</object>")
                numa += 1
        w.out(2, "</object>")
    w.out(1, "</object>")
    nn = len(m.distances)
    w.out(1, '<distances2 type="NUMANode" nbobjs="%d" kind="5" '
          'name="NUMALatency" indexing="os">' % nn)
    idx = " ".join(str(i) for i in range(nn)) + " "
    w.out(2, '<indexes length="%d">%s</indexes>' % (len(idx), idx))
    vals = " ".join(str(v) for row in m.distances for v in row) + " "
    w.out(2, '<u64values length="%d">%s</u64values>' % (len(vals), vals))
    w.out(1, "</distances2>")
    w.out(0, "</topology>")
    return "\n".join(w.lines) + "\n"


# ---------------------------------------------------------- expectations
#
# What the topology code must find, computed from the description above
# with the rule docs/topo.md states: a GPU's NICs are the RDMA NICs of the
# mapped kind below its nearest bridge that has any (PCIe switch, else host
# bridge); else those of its NUMA node; else those of the nearest NUMA node
# by the distance matrix. GPUs that found the same set the same way divide
# it evenly, in PCI order, when it divides evenly; otherwise they share it.


def walk(node, path, out):
    """Collect (device, [bridges from the root down]) pairs."""
    if isinstance(node, Dev):
        out.append((node, path))
        return
    for c in node.children:
        walk(c, path + [node], out)


def ranges(nums):
    nums = sorted(nums)
    parts = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else "%d-%d" % (nums[i], nums[j]))
        i = j + 1
    return ",".join(parts) if parts else "-"


def bridge_name(b):
    if b.busid is not None:
        return b.busid
    lo, hi = bus_range(b)
    return "0000:[%02x-%02x]" % (lo, hi)


def expect(m):
    numas = []  # (node, first PUs, all PUs)
    devs = []   # (dev, bridges, numa)
    for s in m.sockets:
        for ni, cores in enumerate(s.numas):
            node = len(numas)
            numas.append((node, [pu for pu, _ in cores], all_pus(cores)))
            hbs = s.io if len(s.numas) == 1 else s.io[ni]
            found = []
            for hb in hbs:
                walk(hb, [], found)
            devs += [(d, p, node) for d, p in found]
        if len(s.numas) == 1:
            pass
    nics = [(d, p, n) for d, p, n in devs if d.nic is not None]
    gpus = sorted([(d, p, n) for d, p, n in devs if d.gpu],
                  key=lambda x: x[0].busid())
    kinds = {}
    for d, _, _ in nics:
        kinds[d.nic["kind"]] = kinds.get(d.nic["kind"], 0) + 1
    order = ["efa", "mlx", "rdma"]
    mapped = max(kinds, key=lambda k: (kinds[k], -order.index(k))) \
        if kinds else None
    mnics = sorted([x for x in nics if x[0].nic["kind"] == mapped],
                   key=lambda x: x[0].busid())

    def numa_set(node):
        local = [x for x in mnics if x[2] == node]
        if local or not mnics:
            return local, "numa" if local else "none"
        having = sorted({x[2] for x in mnics})
        best = min(m.distances[node][h] for h in having)
        near = [h for h in having if m.distances[node][h] == best]
        return [x for x in mnics if x[2] in near], "near"

    choice = []
    for g, gpath, gnode in gpus:
        sel, path, via = None, None, None
        for b in reversed(gpath):
            below = [x for x in mnics if b in x[1]]
            if below:
                sel, via = below, b
                path = "switch" if b.busid is not None else "hostbridge"
                break
        if sel is None:
            sel, path = numa_set(gnode)
        choice.append([g, gnode, path, via, [x[0] for x in sel]])
    # Divide identical sets found the same way (same bridge or fallback).
    groups = {}
    for c in choice:
        key = (c[2], id(c[3]), tuple(d.busid() for d in c[4]))
        groups.setdefault(key, []).append(c)
    for key, cs in groups.items():
        k, n = len(cs), len(key[2])
        if k > 1 and n >= k and n % k == 0:
            per = n // k
            for r, c in enumerate(cs):
                c[4] = c[4][r * per:(r + 1) * per]
    users = {}
    for c in choice:
        for d in c[4]:
            users[d.busid()] = users.get(d.busid(), 0) + 1

    lines = ["# Generated by tests/data/gen_topo.py from the same description"
             " as %s.xml: do not edit." % m.name,
             "machine %s" % m.product,
             "counts numa %d gpus %d nics %d mapped %d kind %s" % (
                 len(numas), len(gpus), len(nics), len(mnics),
                 mapped or "none")]
    for node, first, allp in numas:
        sel, path = numa_set(node)
        lines.append("numa %d cores %s pus %d nics %s path %s" % (
            node, ranges(first), len(allp),
            ",".join(x[0].nic["name"] for x in sel) or "-", path))
    def fanout(d, path):
        """The nearest bridge above d that leads to another device (slot):
        the PCIe switch, or the host bridge when there is none."""
        for b in reversed(path):
            below = []
            walk(b, [], below)
            if any((x.bus, x.dev) != (d.bus, d.dev) for x, _ in below):
                return b
        return path[0]

    for d, p, node in sorted(nics, key=lambda x: x[0].busid()):
        sw = bridge_name(fanout(d, p))
        lines.append("nic %s busid %s numa %d kind %s gbps %s switch %s "
                     "pcie %.1f mapped %d" % (
                         d.nic["name"], d.busid(), node, d.nic["kind"],
                         d.nic["gbps"] if d.nic["gbps"] else "-", sw,
                         d.link * 8, 1 if d.nic["kind"] == mapped else 0))
    for i, c in enumerate(choice):
        g, node, path, via, sel = c
        share = max([users[d.busid()] for d in sel] or [0])
        cores = [first for nn, first, _ in numas if nn == node][0]
        lines.append("gpu %d busid %s numa %d path %s via %s share %d "
                     "nics %s cores %s" % (
                         i, g.busid(), node, path,
                         bridge_name(via) if via is not None else "-", share,
                         ",".join(d.nic["name"] for d in sel) or "-",
                         ranges(cores)))
    return "\n".join(lines) + "\n"


def main():
    check = "--check" in sys.argv[1:]
    bad = 0
    for make in MACHINES:
        m = make()
        for ext, text in ((".xml", write_xml(m)), (".expect", expect(m))):
            path = os.path.join(HERE, m.name + ext)
            if check:
                try:
                    with open(path) as f:
                        same = f.read() == text
                except OSError:
                    same = False
                if not same:
                    print("%s: out of date; run %s" % (path, sys.argv[0]))
                    bad = 1
            else:
                with open(path, "w") as f:
                    f.write(text)
    if check and not bad:
        print("fixtures up to date")
    return bad


if __name__ == "__main__":
    sys.exit(main())
