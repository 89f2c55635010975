/* SPDX-License-Identifier: MIT */
/*
 * RDMA NIC counters from sysfs (apps/counters.h): what the kernel exposes
 * under /sys/class/infiniband, read, subtracted and explained.
 */
#define _GNU_SOURCE /* strverscmp */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "apps/counters.h"
#include "apps/json.h"

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

/* The description table's name for a kernel driver. */
static const char *table_of(const char *driver)
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
	const char *table = table_of(driver);

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

/* ---- devices ------------------------------------------------------- */

/* A path from @fmt into @buf (PATH_MAX). @return 0, or -ENAMETOOLONG. */
__attribute__((format(printf, 2, 3))) static int path_fmt(char *buf,
							  const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, PATH_MAX, fmt, ap);
	va_end(ap);
	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

/* @src is shorter than CTR_NAME_MAX (checked by the callers). */
static void copy_name(char *dst, const char *src)
{
	memcpy(dst, src, strlen(src) + 1);
}

static int cmp_dev(const void *a, const void *b)
{
	return strverscmp(((const struct ctr_dev *)a)->name,
			  ((const struct ctr_dev *)b)->name);
}

static int is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The device's kernel driver: the last part of DEV/device/driver. */
static void read_driver(const char *devdir, char *out, size_t len)
{
	char path[PATH_MAX], link[PATH_MAX];
	const char *base;
	ssize_t n;

	out[0] = '\0';
	if (path_fmt(path, "%s/device/driver", devdir) != 0)
		return;
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return;
	link[n] = '\0';
	base = strrchr(link, '/');
	/* A driver name longer than @out is no driver we know: none. */
	if (snprintf(out, len, "%s", base != NULL ? base + 1 : link) >=
	    (int)len)
		out[0] = '\0';
}

/* Is @name one of the comma-separated @list? */
static int listed(const char *list, const char *name)
{
	size_t len = strlen(name);

	for (const char *p = list; *p != '\0';) {
		size_t n = strcspn(p, ",");

		if (n == len && strncmp(p, name, n) == 0)
			return 1;
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

static void list_names(const struct ctr_dev *devs, size_t n, char *buf,
		       size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && used < len; i++) {
		int w = snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
				 devs[i].name);

		if (w < 0 || (size_t)w >= len - used) {
			snprintf(buf + (len > 4 ? len - 4 : 0),
				 len > 4 ? 4 : len, "...");
			return;
		}
		used += (size_t)w;
	}
}

/* Check @only against the devices found: every name must be there. */
static int check_only(const struct ctr_set *set, const struct ctr_dev *all,
		      size_t nall, const char *only, char *why, size_t len)
{
	char names[512];

	for (const char *p = only; *p != '\0' || p == only;) {
		size_t n = strcspn(p, ",");
		int found = 0;

		if (n == 0) {
			snprintf(why, len, "'%s': an empty device name", only);
			return -EINVAL;
		}
		for (size_t i = 0; i < nall && !found; i++)
			found = strlen(all[i].name) == n &&
				strncmp(all[i].name, p, n) == 0;
		if (!found) {
			list_names(all, nall, names, sizeof(names));
			snprintf(why, len,
				 "'%.*s': no such RDMA device in %s (%s%s)",
				 (int)n, p, set->dir, nall ? "there: " : "",
				 nall ? names : "it has none");
			return -ENODEV;
		}
		p += n;
		if (*p == '\0')
			break;
		p++;
		if (*p == '\0') {
			snprintf(why, len, "'%s': an empty device name", only);
			return -EINVAL;
		}
	}
	return 0;
}

int ctr_set_init(struct ctr_set *set, const char *root, const char *only,
		 char *why, size_t len)
{
	struct ctr_dev *all = NULL, *grown;
	size_t nall = 0, cap = 0, rlen;
	struct dirent *de;
	DIR *d;
	int ret;

	memset(set, 0, sizeof(*set));
	if (root == NULL)
		root = "";
	rlen = strlen(root);
	while (rlen > 1 && root[rlen - 1] == '/')
		rlen--; /* "DIR/" and "DIR" name the same tree */
	if (rlen == 1 && root[0] == '/')
		rlen = 0;
	if (snprintf(set->dir, sizeof(set->dir), "%.*s/sys/class/infiniband",
		     (int)rlen, root) >= (int)sizeof(set->dir)) {
		snprintf(why, len, "the path is too long");
		return -ENAMETOOLONG;
	}
	d = opendir(set->dir);
	if (d == NULL) {
		ret = -errno;
		if (ret == -ENOENT || ret == -ENOTDIR)
			snprintf(why, len, "%s does not exist", set->dir);
		else
			snprintf(why, len, "%s: %s", set->dir, strerror(-ret));
		return ret == -ENOTDIR ? -ENOENT : ret;
	}
	while ((de = readdir(d)) != NULL) {
		char path[PATH_MAX];

		if (de->d_name[0] == '.' || strlen(de->d_name) >= CTR_NAME_MAX)
			continue;
		if (path_fmt(path, "%s/%s", set->dir, de->d_name) != 0 ||
		    !is_dir(path))
			continue; /* in /sys, each device is a link to one */
		if (nall == cap) {
			cap = cap ? 2 * cap : 16;
			grown = realloc(all, cap * sizeof(*all));
			if (grown == NULL) {
				ret = -ENOMEM;
				goto err_free;
			}
			all = grown;
		}
		copy_name(all[nall].name, de->d_name);
		read_driver(path, all[nall].driver, sizeof(all[nall].driver));
		nall++;
	}
	closedir(d);
	d = NULL;
	if (nall > 1)
		qsort(all, nall, sizeof(*all), cmp_dev);
	if (only != NULL) {
		ret = check_only(set, all, nall, only, why, len);
		if (ret != 0)
			goto err_free;
		for (size_t i = 0; i < nall; i++) {
			if (listed(only, all[i].name))
				all[set->ndevs++] = all[i];
		}
	} else {
		set->ndevs = nall;
	}
	set->devs = all;
	return 0;

err_free:
	if (d != NULL)
		closedir(d);
	free(all);
	if (ret == -ENOMEM)
		snprintf(why, len, "%s", strerror(ENOMEM));
	return ret;
}

void ctr_set_cleanup(struct ctr_set *set)
{
	free(set->devs);
	set->devs = NULL;
	set->ndevs = 0;
}

/* ---- reading -------------------------------------------------------- */

/* One counter file's value. @return 0, or a negative errno (-EINVAL: not
 * a number). */
static int read_value(const char *path, uint64_t *v_p)
{
	char buf[64], *end;
	size_t n = 0;
	unsigned long long v;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	/* A sysfs file comes in one read; anything else until its end. */
	while (n < sizeof(buf) - 1) {
		ssize_t r = read(fd, buf + n, sizeof(buf) - 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int err = -errno;

			close(fd);
			return err;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	errno = 0;
	v = strtoull(buf, &end, 10);
	if (end == buf || buf[strspn(buf, " \t")] == '-' || errno != 0)
		return -EINVAL;
	end += strspn(end, " \t\r\n");
	if (*end != '\0')
		return -EINVAL;
	*v_p = v;
	return 0;
}

static int add_entry(struct ctr_snap *snap, struct ctr_entry *e)
{
	if (snap->n == snap->cap) {
		size_t cap = snap->cap ? 2 * snap->cap : 64;
		struct ctr_entry *grown = realloc(snap->ent,
						  cap * sizeof(*grown));

		if (grown == NULL)
			return -ENOMEM;
		snap->ent = grown;
		snap->cap = cap;
	}
	snap->ent[snap->n++] = *e;
	return 0;
}

static int visible(const struct dirent *de)
{
	return de->d_name[0] != '.' && strlen(de->d_name) < CTR_NAME_MAX;
}

/* Every counter file in @dir (a missing directory has none), opened one
 * after the other in name order. */
static int read_group(struct ctr_snap *snap, const struct ctr_set *set,
		      size_t dev, unsigned port, enum ctr_group group,
		      const char *dir)
{
	struct dirent **names;
	int n = scandir(dir, &names, visible, alphasort), ret = 0;

	if (n < 0)
		return n < 0 && errno == ENOMEM ? -ENOMEM : 0;
	for (int i = 0; i < n; i++) {
		struct ctr_entry e = { .dev = dev,
				       .port = port,
				       .group = group };
		const char *name = names[i]->d_name;
		char path[PATH_MAX];
		struct stat st;

		/* The kernel's cache time for hw_counters, in ms. */
		if (ret != 0 ||
		    (group != CTR_PORT_PMA && strcmp(name, "lifespan") == 0) ||
		    path_fmt(path, "%s/%s", dir, name) != 0 ||
		    stat(path, &st) != 0 || S_ISDIR(st.st_mode))
			continue;
		copy_name(e.name, name);
		e.err = read_value(path, &e.raw);
		e.desc = ctr_describe(set->devs[dev].driver, group, e.name,
				      &e.rank);
		ret = add_entry(snap, &e);
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return ret;
}

static int cmp_uint(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return (x > y) - (x < y);
}

/* The port numbers under DEV/ports, sorted; at most @cap. */
static size_t list_ports(const char *devdir, unsigned *ports, size_t cap)
{
	char path[PATH_MAX];
	struct dirent *de;
	size_t n = 0;
	DIR *d;

	if (path_fmt(path, "%s/ports", devdir) != 0)
		return 0;
	d = opendir(path);
	if (d == NULL)
		return 0;
	while ((de = readdir(d)) != NULL && n < cap) {
		char *end;
		unsigned long p;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		p = strtoul(de->d_name, &end, 10);
		if (*end == '\0' && p > 0 && p <= 255)
			ports[n++] = (unsigned)p;
	}
	closedir(d);
	qsort(ports, n, sizeof(*ports), cmp_uint);
	return n;
}

static int group_rank(enum ctr_group g)
{
	return (int)g;
}

/* Device, port, group, the table's order, then the name. */
static int cmp_entry(const void *a, const void *b)
{
	const struct ctr_entry *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	/* Device-wide (port 0) after the ports: traffic first. */
	if (x->port != y->port)
		return x->port - 1u < y->port - 1u ? -1 : 1;
	if (x->group != y->group)
		return group_rank(x->group) - group_rank(y->group);
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return strcmp(x->name, y->name);
}

int ctr_snap_read(const struct ctr_set *set, struct ctr_snap *snap)
{
	struct timespec ts;
	int ret = 0;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	snap->t = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	snap->n = 0;
	for (size_t i = 0; i < set->ndevs && ret == 0; i++) {
		char devdir[PATH_MAX], dir[PATH_MAX];
		unsigned ports[256];
		size_t np;

		if (path_fmt(devdir, "%s/%s", set->dir, set->devs[i].name) != 0)
			continue;
		if (path_fmt(dir, "%s/hw_counters", devdir) == 0)
			ret = read_group(snap, set, i, 0, CTR_DEV_HW, dir);
		np = list_ports(devdir, ports, 256);
		for (size_t p = 0; p < np && ret == 0; p++) {
			if (path_fmt(dir, "%s/ports/%u/counters", devdir,
				     ports[p]) == 0)
				ret = read_group(snap, set, i, ports[p],
						 CTR_PORT_PMA, dir);
			if (ret == 0 && path_fmt(dir, "%s/ports/%u/hw_counters",
						 devdir, ports[p]) == 0)
				ret = read_group(snap, set, i, ports[p],
						 CTR_PORT_HW, dir);
		}
	}
	if (snap->n > 1)
		qsort(snap->ent, snap->n, sizeof(*snap->ent), cmp_entry);
	return ret;
}

void ctr_snap_cleanup(struct ctr_snap *snap)
{
	free(snap->ent);
	snap->ent = NULL;
	snap->n = 0;
	snap->cap = 0;
}

const struct ctr_entry *ctr_snap_find(const struct ctr_snap *prev,
				      const struct ctr_entry *cur)
{
	if (prev == NULL || prev->n == 0)
		return NULL;
	return bsearch(cur, prev->ent, prev->n, sizeof(*prev->ent), cmp_entry);
}

/* ---- output --------------------------------------------------------- */

/* A counter's change, in its unit. */
struct change {
	int have;	/* there is a previous reading to subtract */
	int reset;	/* it went backwards: reset, or wrapped */
	uint64_t raw;	/* raw delta */
	uint64_t value; /* raw delta x scale */
	double secs;
};

static unsigned scale_of(const struct ctr_entry *e)
{
	return e->desc != NULL ? e->desc->scale : 1;
}

static uint64_t scaled(uint64_t raw, unsigned scale)
{
	return raw > UINT64_MAX / scale ? UINT64_MAX : raw * scale;
}

static struct change change_of(const struct ctr_snap *prev,
			       const struct ctr_snap *cur,
			       const struct ctr_entry *e)
{
	const struct ctr_entry *p = ctr_snap_find(prev, e);
	struct change c = { 0 };

	if (p == NULL || p->err != 0 || e->err != 0)
		return c;
	c.have = 1;
	c.secs = cur->t - prev->t;
	if (e->raw < p->raw) {
		c.reset = 1;
		return c;
	}
	c.raw = e->raw - p->raw;
	c.value = scaled(c.raw, scale_of(e));
	return c;
}

static const char *rate_text(const struct ctr_entry *e, const struct change *c,
			     char *buf, size_t len)
{
	double r;
	int bytes = e->desc != NULL && strcmp(e->desc->unit, "bytes") == 0;

	if (!c->have || c->reset || c->secs <= 0.0)
		return "";
	r = (double)c->value / c->secs;
	if (bytes) {
		r *= 8.0;
		if (r >= 1e9)
			snprintf(buf, len, "%.2f Gbit/s", r / 1e9);
		else if (r >= 1e6)
			snprintf(buf, len, "%.2f Mbit/s", r / 1e6);
		else if (r >= 1e3)
			snprintf(buf, len, "%.2f kbit/s", r / 1e3);
		else
			snprintf(buf, len, "%.0f bit/s", r);
	} else if (r >= 1e6) {
		snprintf(buf, len, "%.2fM/s", r / 1e6);
	} else if (r >= 1e3) {
		snprintf(buf, len, "%.2fk/s", r / 1e3);
	} else {
		snprintf(buf, len, "%.0f/s", r);
	}
	return buf;
}

/* The change of counter @name at @dev/@port (hw_counters), or -1 when
 * there is none to tell. */
static int64_t delta_of(const struct ctr_snap *prev, const struct ctr_snap *cur,
			size_t dev, unsigned port, const char *name)
{
	for (size_t i = 0; i < cur->n; i++) {
		const struct ctr_entry *e = &cur->ent[i];
		struct change c;

		if (e->dev != dev || e->port != port ||
		    e->group != CTR_PORT_HW || strcmp(e->name, name) != 0)
			continue;
		c = change_of(prev, cur, e);
		return c.have && !c.reset && c.raw <= INT64_MAX ? (int64_t)c.raw
								: -1;
	}
	return -1;
}

/*
 * The misreading this command exists for: on EFA, rdma_read_* and
 * rdma_write_* count only RDMA the device carries. Traffic that moved as
 * sends (a send/recv workload, or RMA that libfabric carried in messages)
 * leaves them at 0, which is not "RDMA is broken" nor, by itself, proof
 * of emulation. @return the note for @dev/@port, or NULL.
 */
static const char *note_for(const struct ctr_set *set,
			    const struct ctr_snap *prev,
			    const struct ctr_snap *cur, size_t dev,
			    unsigned port)
{
	static const char *const rdma[] = { "rdma_write_bytes",
					    "rdma_read_bytes",
					    "rdma_write_recv_bytes",
					    "rdma_read_resp_bytes" };
	int64_t sent, recvd;

	if (prev == NULL || table_of(set->devs[dev].driver) == NULL ||
	    strcmp(table_of(set->devs[dev].driver), EFA) != 0)
		return NULL;
	sent = delta_of(prev, cur, dev, port, "send_bytes");
	recvd = delta_of(prev, cur, dev, port, "recv_bytes");
	if (sent <= 0 && recvd <= 0)
		return NULL;
	for (size_t i = 0; i < sizeof(rdma) / sizeof(rdma[0]); i++) {
		if (delta_of(prev, cur, dev, port, rdma[i]) != 0)
			return NULL; /* moved, or not exposed here */
	}
	return "data moved only as SEND/RECV, no device RDMA: rdma_read_* and "
	       "rdma_write_* count only RDMA the device carries. Sends from a "
	       "send/recv workload, or RMA that libfabric carried in messages "
	       "(its efa fabric without device RDMA, e.g. an API below 1.18 "
	       "on libfabric 2.x: see docs/efa.md), show in send_bytes and "
	       "recv_bytes";
}

static void block_header(FILE *f, const struct ctr_set *set,
			 const struct ctr_entry *e)
{
	const struct ctr_dev *d = &set->devs[e->dev];

	fprintf(f, "\n%s (%s)", d->name, d->driver[0] ? d->driver : "driver ?");
	if (e->group == CTR_DEV_HW)
		fprintf(f, " device-wide\n");
	else
		fprintf(f, " port %u\n", e->port);
}

static void text_line(FILE *f, const struct ctr_snap *prev,
		      const struct ctr_snap *cur, const struct ctr_entry *e)
{
	const char *meaning = e->desc ? e->desc->meaning : "no description";
	struct change c;
	char val[32], rate[32];

	if (e->err != 0) {
		fprintf(f, "  %-31s %15s %*sunreadable: %s\n", e->name, "-",
			prev != NULL ? 15 : 1, "",
			e->err == -EINVAL ? "not a number" : strerror(-e->err));
		return;
	}
	if (prev == NULL) {
		snprintf(val, sizeof(val), "%" PRIu64,
			 scaled(e->raw, scale_of(e)));
		fprintf(f, "  %-31s %15s  %s\n", e->name, val, meaning);
		return;
	}
	c = change_of(prev, cur, e);
	if (!c.have)
		snprintf(val, sizeof(val), "new");
	else if (c.reset)
		snprintf(val, sizeof(val), "reset");
	else
		snprintf(val, sizeof(val), "%" PRIu64, c.value);
	fprintf(f, "  %-31s %15s %13s  %s\n", e->name, val,
		rate_text(e, &c, rate, sizeof(rate)), meaning);
}

void ctr_print_text(FILE *f, const struct ctr_set *set,
		    const struct ctr_snap *prev, const struct ctr_snap *cur,
		    const char *label)
{
	const struct ctr_entry *last = NULL;
	const char *note;

	if (prev != NULL)
		fprintf(f,
			"counters: deltas over %.3f s (%s), %zu device(s) "
			"under %s\n",
			cur->t - prev->t, label, set->ndevs, set->dir);
	else
		fprintf(f,
			"counters: absolute values (since the driver "
			"loaded), %zu device(s) under %s\n",
			set->ndevs, set->dir);
	if (prev != NULL)
		fprintf(f, "  %-31s %15s %13s  %s\n", "counter", "delta",
			"per second", "meaning");
	else
		fprintf(f, "  %-31s %15s  %s\n", "counter", "value", "meaning");
	for (size_t i = 0; i < cur->n; i++) {
		const struct ctr_entry *e = &cur->ent[i];

		if (last == NULL || last->dev != e->dev ||
		    last->port != e->port ||
		    (last->group == CTR_DEV_HW) != (e->group == CTR_DEV_HW)) {
			if (last != NULL && last->port != 0) {
				note = note_for(set, prev, cur, last->dev,
						last->port);
				if (note != NULL)
					fprintf(f, "  note: %s\n", note);
			}
			block_header(f, set, e);
		}
		text_line(f, prev, cur, e);
		last = e;
	}
	if (last != NULL && last->port != 0) {
		note = note_for(set, prev, cur, last->dev, last->port);
		if (note != NULL)
			fprintf(f, "  note: %s\n", note);
	}
	for (size_t i = 0; i < set->ndevs; i++) {
		int any = 0;

		for (size_t j = 0; j < cur->n && !any; j++)
			any = cur->ent[j].dev == i;
		if (!any)
			fprintf(f,
				"\n%s (%s): no counters (no hw_counters or "
				"ports/N/counters directory)\n",
				set->devs[i].name,
				set->devs[i].driver[0] ? set->devs[i].driver
						       : "driver ?");
	}
	fflush(f);
}

static void json_str(FILE *f, const char *s)
{
	app_json_string(f, s, SIZE_MAX);
}

static const char *group_dir(enum ctr_group g)
{
	return g == CTR_PORT_PMA ? "counters" : "hw_counters";
}

static void json_entry(FILE *f, const struct ctr_set *set,
		       const struct ctr_snap *prev, const struct ctr_snap *cur,
		       const struct ctr_entry *e)
{
	const struct ctr_dev *d = &set->devs[e->dev];
	struct change c = change_of(prev, cur, e);

	fprintf(f, "{\"device\": ");
	json_str(f, d->name);
	fprintf(f, ", \"driver\": ");
	json_str(f, d->driver);
	if (e->group == CTR_DEV_HW)
		fprintf(f, ", \"port\": null");
	else
		fprintf(f, ", \"port\": %u", e->port);
	fprintf(f, ", \"dir\": \"%s\", \"name\": ", group_dir(e->group));
	json_str(f, e->name);
	fprintf(f, ", \"unit\": ");
	json_str(f, e->desc ? e->desc->unit : "");
	fprintf(f, ", \"scale\": %u", scale_of(e));
	if (e->err != 0) {
		fprintf(f, ", \"raw\": null, \"value\": null, \"error\": ");
		json_str(f, e->err == -EINVAL ? "not a number"
					      : strerror(-e->err));
	} else {
		fprintf(f,
			", \"raw\": %" PRIu64 ", \"value\": %" PRIu64
			", \"error\": null",
			e->raw, scaled(e->raw, scale_of(e)));
	}
	if (c.have && !c.reset)
		fprintf(f,
			", \"raw_delta\": %" PRIu64 ", \"delta\": %" PRIu64
			", \"per_second\": %.3f, \"reset\": false",
			c.raw, c.value,
			c.secs > 0.0 ? (double)c.value / c.secs : 0.0);
	else
		fprintf(f,
			", \"raw_delta\": null, \"delta\": null, "
			"\"per_second\": null, \"reset\": %s",
			c.reset ? "true" : "false");
	fprintf(f,
		", \"known\": %s, \"meaning\": ", e->desc ? "true" : "false");
	json_str(f, e->desc ? e->desc->meaning : "no description");
	fprintf(f, "}");
}

void ctr_print_json(FILE *f, const struct ctr_set *set,
		    const struct ctr_snap *prev, const struct ctr_snap *cur,
		    unsigned index)
{
	const struct ctr_entry *last = NULL;
	int nnotes = 0;

	fprintf(f, "{\"index\": %u, \"seconds\": ", index);
	if (prev != NULL)
		fprintf(f, "%.6f", cur->t - prev->t);
	else
		fprintf(f, "null");
	fprintf(f, ",\n   \"counters\": [");
	for (size_t i = 0; i < cur->n; i++) {
		fprintf(f, "%s\n    ", i ? "," : "");
		json_entry(f, set, prev, cur, &cur->ent[i]);
	}
	fprintf(f, "],\n   \"notes\": [");
	for (size_t i = 0; i < cur->n; i++) {
		const struct ctr_entry *e = &cur->ent[i];
		const char *note;

		if (e->port == 0 || (last != NULL && last->dev == e->dev &&
				     last->port == e->port))
			continue;
		last = e;
		note = note_for(set, prev, cur, e->dev, e->port);
		if (note == NULL)
			continue;
		fprintf(f, "%s\n    {\"device\": ", nnotes++ ? "," : "");
		json_str(f, set->devs[e->dev].name);
		fprintf(f, ", \"port\": %u, \"text\": ", e->port);
		json_str(f, note);
		fprintf(f, "}");
	}
	fprintf(f, "]}");
	fflush(f);
}
