#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate the sysfs fixtures of `tern counters` under tests/data/counters/.

    python3 tests/data/gen_counters.py           # (re)write the fixtures
    python3 tests/data/gen_counters.py --check   # fail if a committed file differs

Each fixture is a root DIR that `tern counters --root DIR` reads as /sys:

- efa-p5: four EFA devices of a p5.48xlarge (which has 32: rdmap79s0 ..
  rdmap82s0 are the four under GPU 0's PCIe switch), each with the port
  counters (ports/1/hw_counters) and device counters (hw_counters) that
  Linux 6.17's efa driver exposes (drivers/infiniband/hw/efa/efa_verbs.c,
  EFA_DEFINE_PORT_STATS and EFA_DEFINE_DEVICE_STATS), a "lifespan" file in
  each hw_counters directory as the kernel writes it, and device/driver a
  link to the efa driver.
- mlx5: a dual-port ConnectX seen as two RDMA devices (mlx5_0, mlx5_1) of
  driver mlx5_core, each with the IB standard port counters
  (ports/1/counters, drivers/infiniband/core/sysfs.c) and mlx5's
  hw_counters (drivers/infiniband/hw/mlx5/counters.c: the queue, retransmit,
  extended error, RoCE and congestion counters). mlx5_1's port is down
  ("1: DOWN", phys_state "3: Disabled": its Ethernet link is down), so
  that the link report has a port to mark.

Each port has its link as the kernel writes it
(drivers/infiniband/core/sysfs.c, state_show and phys_state_show):
ports/N/state "4: ACTIVE" and ports/N/phys_state "5: LinkUp". The efa
driver reports every port so (efa_query_port).

Values are made up but plausible, different per device, so that a test can
tell devices apart; on mlx5 port_xmit_data and port_rcv_data are in 4-byte
words, as the kernel shows them.
"""

import os
import sys

import fixtree

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.join(HERE, "counters")

EFA_PORT = [  # (name, value on the first device)
    ("tx_bytes", 918273645546), ("tx_pkts", 112094),
    ("rx_bytes", 904512338192), ("rx_pkts", 110416),
    ("rx_drops", 3), ("send_bytes", 52428800), ("send_wrs", 6400),
    ("recv_bytes", 52428800), ("recv_wrs", 6400),
    ("rdma_read_wrs", 0), ("rdma_read_bytes", 0),
    ("rdma_read_wr_err", 0), ("rdma_read_resp_bytes", 0),
    ("rdma_write_wrs", 6815744), ("rdma_write_bytes", 893353197568),
    ("rdma_write_wr_err", 0), ("rdma_write_recv_bytes", 880468295680),
    ("retrans_bytes", 65536), ("retrans_pkts", 8),
    ("retrans_timeout_events", 1), ("unresponsive_remote_events", 0),
    ("impaired_remote_conn_events", 0),
]
EFA_DEVICE = [
    ("submitted_cmds", 1210), ("completed_cmds", 1210), ("cmds_err", 0),
    ("no_completion_cmds", 0), ("keep_alive_rcvd", 86400),
    ("alloc_pd_err", 0), ("create_qp_err", 0), ("create_cq_err", 0),
    ("reg_mr_err", 2), ("alloc_ucontext_err", 0), ("create_ah_err", 0),
    ("mmap_err", 0),
]
IB_PMA = [
    ("symbol_error", 0), ("link_error_recovery", 0), ("link_downed", 1),
    ("port_rcv_errors", 0), ("port_rcv_remote_physical_errors", 0),
    ("port_rcv_switch_relay_errors", 0), ("port_xmit_discards", 17),
    ("port_xmit_constraint_errors", 0), ("port_rcv_constraint_errors", 0),
    ("local_link_integrity_errors", 0),
    ("excessive_buffer_overrun_errors", 0), ("VL15_dropped", 0),
    ("port_xmit_data", 250000000000), ("port_rcv_data", 240000000000),
    ("port_xmit_packets", 260000000), ("port_rcv_packets", 250000000),
    ("port_xmit_wait", 4096), ("unicast_xmit_packets", 259999000),
    ("unicast_rcv_packets", 249999000), ("multicast_xmit_packets", 1000),
    ("multicast_rcv_packets", 1000),
]
MLX5_HW = [
    ("rx_write_requests", 12000000), ("rx_read_requests", 4000),
    ("rx_atomic_requests", 0), ("rx_dct_connect", 0),
    ("out_of_buffer", 0), ("out_of_sequence", 2),
    ("duplicate_request", 1), ("rnr_nak_retry_err", 0),
    ("packet_seq_err", 2), ("implied_nak_seq_err", 0),
    ("local_ack_timeout_err", 0), ("resp_local_length_error", 0),
    ("resp_cqe_error", 0), ("req_cqe_error", 0),
    ("req_remote_invalid_request", 0), ("req_remote_access_errors", 0),
    ("resp_remote_access_errors", 0), ("resp_cqe_flush_error", 0),
    ("req_cqe_flush_error", 0), ("req_transport_retries_exceeded", 0),
    ("req_rnr_retries_exceeded", 0), ("roce_adp_retrans", 0),
    ("roce_adp_retrans_to", 0), ("roce_slow_restart", 0),
    ("roce_slow_restart_cnps", 0), ("roce_slow_restart_trans", 0),
    ("rp_cnp_ignored", 0), ("rp_cnp_handled", 35),
    ("np_ecn_marked_roce_packets", 40), ("np_cnp_sent", 40),
    ("rx_icrc_encapsulated", 0),
]


def efa_files():
    files, links = {}, {}
    files["sys/bus/pci/drivers/efa/uevent"] = ""
    for k, dev in enumerate(["rdmap79s0", "rdmap80s0", "rdmap81s0",
                             "rdmap82s0"]):
        d = "sys/class/infiniband/" + dev
        links[d + "/device/driver"] = "../../../../bus/pci/drivers/efa"
        files[d + "/node_type"] = "1: CA\n"
        files[d + "/hw_counters/lifespan"] = "10\n"
        for name, v in EFA_DEVICE:
            files[d + "/hw_counters/" + name] = "%d\n" % (v * (k + 1))
        p = d + "/ports/1"
        files[p + "/state"] = "4: ACTIVE\n"
        files[p + "/phys_state"] = "5: LinkUp\n"
        files[p + "/rate"] = "100 Gb/sec (4X EDR)\n"
        files[p + "/hw_counters/lifespan"] = "10\n"
        for name, v in EFA_PORT:
            files[p + "/hw_counters/" + name] = "%d\n" % (v * (k + 1))
    return files, links


def mlx5_files():
    files, links = {}, {}
    files["sys/bus/pci/drivers/mlx5_core/uevent"] = ""
    for k, dev in enumerate(["mlx5_0", "mlx5_1"]):
        d = "sys/class/infiniband/" + dev
        links[d + "/device/driver"] = "../../../../bus/pci/drivers/mlx5_core"
        files[d + "/node_type"] = "1: CA\n"
        p = d + "/ports/1"
        down = dev == "mlx5_1"
        files[p + "/state"] = "1: DOWN\n" if down else "4: ACTIVE\n"
        files[p + "/phys_state"] = "3: Disabled\n" if down else "5: LinkUp\n"
        files[p + "/rate"] = "200 Gb/sec (2X NDR)\n"
        files[p + "/link_layer"] = "Ethernet\n"
        files[p + "/hw_counters/lifespan"] = "10\n"
        for name, v in IB_PMA:
            files[p + "/counters/" + name] = "%d\n" % (v * (k + 1))
        for name, v in MLX5_HW:
            files[p + "/hw_counters/" + name] = "%d\n" % (v * (k + 1))
    return files, links


FIXTURES = {"efa-p5": efa_files, "mlx5": mlx5_files}


if __name__ == "__main__":
    sys.exit(fixtree.main(TOP, FIXTURES, "gen_counters.py", "counters"))
