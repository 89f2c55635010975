/* SPDX-License-Identifier: MIT */
/*
 * What each RDMA NIC counter means (apps/counters.h): the table of the
 * kernel's counter names, their units and meanings, and the look-up that
 * finds a counter's description for its device's driver.
 */
#include <stddef.h>
#include <string.h>

#include "apps/counters.h"

#define EFA  "efa"
#define MLX5 "mlx5"

/*
 * What each counter means. Names are exactly the kernel's:
 *
 * - EFA: drivers/infiniband/hw/efa/efa_verbs.c, EFA_DEFINE_PORT_STATS
 *   (efa_port_stats_descs: DEV/ports/1/hw_counters) and
 *   EFA_DEFINE_DEVICE_STATS (efa_device_stats_descs: DEV/hw_counters), as
 *   of Linux 6.17 (read at commit 0291023e7330 of a mainline mirror). The
 *   retrans_* and *_remote_* counters came with "RDMA/efa: Add Network HW
 *   statistics counters" (2025), rdma_write_* a few releases before:
 *   older kernels show fewer files, and tern prints what is there.
 * - mlx5: drivers/infiniband/hw/mlx5/counters.c (basic_q_cnts,
 *   out_of_seq_q_cnts, retrans_q_cnts, extended_err_cnts, roce_accl_cnts,
 *   cong_cnts, ext_ppcnt_cnts and the optional op counters), same tree.
 * - IB standard port counters (DEV/ports/N/counters, any driver with a
 *   performance-management agent): drivers/infiniband/core/sysfs.c,
 *   PORT_PMA_ATTR and PORT_PMA_ATTR_EXT. port_xmit_data and port_rcv_data
 *   count 4-byte words (IBTA PortXmitData: octets divided by 4): scale 4.
 *
 * The order here is the order of output: traffic first, then errors.
 */
static const struct ctr_desc descs[] = {
	/* --- EFA, per port (ports/1/hw_counters) --- */
	{ EFA, "tx_bytes", 1, "bytes",
	  "bytes the device sent, all traffic together" },
	{ EFA, "rx_bytes", 1, "bytes",
	  "bytes the device received, all traffic together" },
	{ EFA, "tx_pkts", 1, "packets", "packets the device sent" },
	{ EFA, "rx_pkts", 1, "packets", "packets the device received" },
	{ EFA, "send_bytes", 1, "bytes",
	  "bytes of SEND work requests: messages, and any protocol built on "
	  "them (libfabric's emulated RMA/atomics, handshakes)" },
	{ EFA, "send_wrs", 1, "work requests", "SEND work requests completed" },
	{ EFA, "recv_bytes", 1, "bytes",
	  "bytes that arrived in RECV work requests (peers' SENDs)" },
	{ EFA, "recv_wrs", 1, "work requests", "RECV work requests completed" },
	{ EFA, "rdma_write_bytes", 1, "bytes",
	  "bytes written to peers by device RDMA write; only device-offloaded "
	  "writes (SEND-based protocols count in send_bytes)" },
	{ EFA, "rdma_write_wrs", 1, "work requests",
	  "device RDMA write work requests completed (0 is not an error when "
	  "the traffic was sends)" },
	{ EFA, "rdma_write_recv_bytes", 1, "bytes",
	  "bytes peers wrote into this host's memory by device RDMA write "
	  "(target side)" },
	{ EFA, "rdma_read_bytes", 1, "bytes",
	  "bytes read from peers by device RDMA read; only device-offloaded "
	  "reads (SEND-based protocols count in send_bytes)" },
	{ EFA, "rdma_read_wrs", 1, "work requests",
	  "device RDMA read work requests completed" },
	{ EFA, "rdma_read_resp_bytes", 1, "bytes",
	  "bytes returned in RDMA read responses: what peers read from this "
	  "host's memory (target side)" },
	{ EFA, "rx_drops", 1, "packets",
	  "received packets the device dropped" },
	{ EFA, "rdma_write_wr_err", 1, "work requests",
	  "RDMA write work requests that completed with an error" },
	{ EFA, "rdma_read_wr_err", 1, "work requests",
	  "RDMA read work requests that completed with an error" },
	{ EFA, "retrans_bytes", 1, "bytes",
	  "bytes SRD sent again (lost or unacknowledged packets): the "
	  "network, not the application" },
	{ EFA, "retrans_pkts", 1, "packets", "packets SRD sent again" },
	{ EFA, "retrans_timeout_events", 1, "events",
	  "retransmission timeouts: no acknowledgement came in time" },
	{ EFA, "impaired_remote_conn_events", 1, "events",
	  "times a connection to a peer was found impaired (degraded, still "
	  "answering)" },
	{ EFA, "unresponsive_remote_events", 1, "events",
	  "times a peer stopped answering (libfabric: unresponsive receiver; "
	  "a peer gone, or a security group blocking EFA traffic)" },
	/* --- EFA, device-wide (hw_counters): the control path --- */
	{ EFA, "submitted_cmds", 1, "commands",
	  "admin commands the driver gave the device (create QP/CQ, "
	  "register memory, address handles, ...)" },
	{ EFA, "completed_cmds", 1, "commands",
	  "admin commands the device completed" },
	{ EFA, "cmds_err", 1, "commands", "admin commands that failed" },
	{ EFA, "no_completion_cmds", 1, "commands",
	  "admin commands that never completed (timed out)" },
	{ EFA, "keep_alive_rcvd", 1, "events",
	  "keep-alive events from the device (grows steadily while it lives)" },
	{ EFA, "alloc_pd_err", 1, "errors",
	  "protection domain allocations that failed" },
	{ EFA, "create_qp_err", 1, "errors",
	  "queue pair creations that failed (endpoints)" },
	{ EFA, "create_cq_err", 1, "errors",
	  "completion queue creations that failed" },
	{ EFA, "reg_mr_err", 1, "errors",
	  "memory registrations that failed (locked-memory limit, too many "
	  "or too large regions)" },
	{ EFA, "alloc_ucontext_err", 1, "errors",
	  "user contexts that failed to open (processes opening the device)" },
	{ EFA, "create_ah_err", 1, "errors",
	  "address handle creations that failed (adding peers)" },
	{ EFA, "mmap_err", 1, "errors", "device mappings that failed" },

	/* --- IB standard port counters (ports/N/counters) --- */
	{ NULL, "port_xmit_data", 4, "bytes",
	  "bytes sent on the link, all VLs (the file counts 4-byte words; "
	  "shown in bytes)" },
	{ NULL, "port_rcv_data", 4, "bytes",
	  "bytes received on the link, all VLs (the file counts 4-byte "
	  "words; shown in bytes)" },
	{ NULL, "port_xmit_packets", 1, "packets", "packets sent on the link" },
	{ NULL, "port_rcv_packets", 1, "packets",
	  "packets received on the link" },
	{ NULL, "unicast_xmit_packets", 1, "packets", "unicast packets sent" },
	{ NULL, "unicast_rcv_packets", 1, "packets",
	  "unicast packets received" },
	{ NULL, "multicast_xmit_packets", 1, "packets",
	  "multicast packets sent" },
	{ NULL, "multicast_rcv_packets", 1, "packets",
	  "multicast packets received" },
	{ NULL, "port_xmit_wait", 1, "ticks",
	  "time the port had data to send but no credit: the far end pushed "
	  "back (congestion)" },
	{ NULL, "port_xmit_discards", 1, "packets",
	  "outbound packets discarded (link down, or stuck behind "
	  "congestion)" },
	{ NULL, "port_rcv_errors", 1, "packets",
	  "received packets with errors (bad CRC, malformed)" },
	{ NULL, "symbol_error", 1, "errors",
	  "minor errors on the physical lanes (cable, transceiver)" },
	{ NULL, "link_error_recovery", 1, "events",
	  "times the link retrained to recover from errors" },
	{ NULL, "link_downed", 1, "events",
	  "times the link failed to recover and went down" },
	{ NULL, "port_rcv_remote_physical_errors", 1, "packets",
	  "packets received already marked bad by an earlier hop" },
	{ NULL, "port_rcv_switch_relay_errors", 1, "packets",
	  "received packets a switch could not forward" },
	{ NULL, "port_xmit_constraint_errors", 1, "packets",
	  "packets not sent because of partition or filtering rules" },
	{ NULL, "port_rcv_constraint_errors", 1, "packets",
	  "packets dropped on receipt by partition or filtering rules" },
	{ NULL, "local_link_integrity_errors", 1, "events",
	  "times the link's local error threshold was crossed" },
	{ NULL, "excessive_buffer_overrun_errors", 1, "events",
	  "times the receive buffer overran repeatedly (flow control "
	  "broken)" },
	{ NULL, "VL15_dropped", 1, "packets",
	  "subnet management packets dropped (VL15)" },

	/* --- mlx5, per port (ports/N/hw_counters; also device-wide) --- */
	{ MLX5, "rdma_tx_bytes", 1, "bytes",
	  "RDMA bytes sent (optional counter, off unless enabled)" },
	{ MLX5, "rdma_rx_bytes", 1, "bytes",
	  "RDMA bytes received (optional counter, off unless enabled)" },
	{ MLX5, "rdma_tx_packets", 1, "packets",
	  "RDMA packets sent (optional counter)" },
	{ MLX5, "rdma_rx_packets", 1, "packets",
	  "RDMA packets received (optional counter)" },
	{ MLX5, "rx_write_requests", 1, "packets",
	  "RDMA write requests received: peers writing into this host" },
	{ MLX5, "rx_read_requests", 1, "packets",
	  "RDMA read requests received: peers reading this host's memory" },
	{ MLX5, "rx_atomic_requests", 1, "packets",
	  "atomic requests received from peers" },
	{ MLX5, "rx_dct_connect", 1, "events",
	  "connection requests received by DC targets" },
	{ MLX5, "out_of_buffer", 1, "packets",
	  "packets dropped because no receive was posted (the receive queue "
	  "ran dry)" },
	{ MLX5, "out_of_sequence", 1, "packets",
	  "packets that arrived out of sequence (one before was lost)" },
	{ MLX5, "duplicate_request", 1, "packets",
	  "requests received again after being executed (the sender retried: "
	  "an acknowledgement was lost)" },
	{ MLX5, "rnr_nak_retry_err", 1, "events",
	  "receiver-not-ready NAKs received: the peer had no receive posted, "
	  "retried" },
	{ MLX5, "packet_seq_err", 1, "events",
	  "sequence-error NAKs received: the peer saw a gap (loss), retried" },
	{ MLX5, "implied_nak_seq_err", 1, "events",
	  "read/atomic responses that skipped ahead (an earlier one lost), "
	  "retried" },
	{ MLX5, "local_ack_timeout_err", 1, "events",
	  "acknowledgement timeouts on this side, retried (loss, or a peer "
	  "that went away)" },
	{ MLX5, "req_transport_retries_exceeded", 1, "events",
	  "requests failed after every transport retry (the peer stopped "
	  "answering)" },
	{ MLX5, "req_rnr_retries_exceeded", 1, "events",
	  "requests failed after every receiver-not-ready retry (the peer "
	  "never posted a receive)" },
	{ MLX5, "resp_local_length_error", 1, "errors",
	  "incoming messages longer than the posted receive" },
	{ MLX5, "resp_cqe_error", 1, "errors",
	  "responder completions with an error" },
	{ MLX5, "req_cqe_error", 1, "errors",
	  "requester completions with an error" },
	{ MLX5, "req_remote_invalid_request", 1, "errors",
	  "requests the peer refused as invalid" },
	{ MLX5, "req_remote_access_errors", 1, "errors",
	  "RDMA the peer refused: bad key, address outside its region, or no "
	  "remote read/write permission" },
	{ MLX5, "resp_remote_access_errors", 1, "errors",
	  "peers' RDMA this side refused (bad key or permission)" },
	{ MLX5, "resp_cqe_flush_error", 1, "errors",
	  "receives flushed because their queue pair went to error" },
	{ MLX5, "req_cqe_flush_error", 1, "errors",
	  "requests flushed because their queue pair went to error" },
	{ MLX5, "roce_adp_retrans", 1, "events",
	  "RoCE adaptive retransmissions" },
	{ MLX5, "roce_adp_retrans_to", 1, "events",
	  "RoCE adaptive retransmission timeouts" },
	{ MLX5, "roce_slow_restart", 1, "events",
	  "RoCE slow restarts after retransmission timeouts" },
	{ MLX5, "roce_slow_restart_cnps", 1, "packets",
	  "congestion notifications sent in slow restart" },
	{ MLX5, "roce_slow_restart_trans", 1, "events",
	  "times a queue pair entered slow restart" },
	{ MLX5, "np_ecn_marked_roce_packets", 1, "packets",
	  "RoCE packets received with an ECN congestion mark" },
	{ MLX5, "np_cnp_sent", 1, "packets",
	  "congestion notifications (CNP) sent back to senders of ECN-marked "
	  "packets" },
	{ MLX5, "rp_cnp_handled", 1, "packets",
	  "congestion notifications received and acted on: this side slowed "
	  "down (DCQCN)" },
	{ MLX5, "rp_cnp_ignored", 1, "packets",
	  "congestion notifications received and ignored" },
	{ MLX5, "cc_rx_ce_pkts", 1, "packets",
	  "packets received with congestion experienced (optional counter)" },
	{ MLX5, "cc_rx_cnp_pkts", 1, "packets",
	  "congestion notifications received (optional counter)" },
	{ MLX5, "cc_tx_cnp_pkts", 1, "packets",
	  "congestion notifications sent (optional counter)" },
	{ MLX5, "rx_icrc_encapsulated", 1, "packets",
	  "RoCE packets received with a bad ICRC" },
};

#define NDESCS (sizeof(descs) / sizeof(descs[0]))

const char *ctr_table_of(const char *driver)
{
	if (strcmp(driver, "efa") == 0)
		return EFA;
	if (strcmp(driver, "mlx5_core") == 0 || strcmp(driver, "mlx5") == 0)
		return MLX5;
	return NULL;
}

const struct ctr_desc *ctr_describe(const char *driver, enum ctr_group group,
				    const char *name, size_t *rank_p)
{
	const char *table = ctr_table_of(driver);

	for (size_t i = 0; i < NDESCS; i++) {
		const struct ctr_desc *d = &descs[i];

		if (strcmp(d->name, name) != 0)
			continue;
		if (group == CTR_PORT_PMA
			    ? d->driver != NULL
			    : d->driver == NULL || table == NULL ||
				      strcmp(d->driver, table) != 0)
			continue;
		if (rank_p != NULL)
			*rank_p = i;
		return d;
	}
	if (rank_p != NULL)
		*rank_p = NDESCS;
	return NULL;
}
