/* SPDX-License-Identifier: MIT */
/*
 * verbs_write_imm: RDMA write with immediate on raw libibverbs, no libfabric.
 *
 * The server registers a buffer open to remote writes and posts two
 * receives; the client connects over TCP, both exchange {QPN, PSN, LID, GID,
 * MTU, rkey, address, length}, move their queue pairs to RTS by hand, and
 * the client writes a large message (a pseudo-random pattern) and a small
 * one (8 bytes) into the server's buffer, each with a 32-bit immediate. The
 * server counts the two immediates (it does not rely on their order: EFA's
 * SRD delivers out of order), verifies every byte, prints what arrived and
 * sends its verdict back; both exit 0 only if everything arrived intact.
 *
 * Reliable-connected (RC) queue pairs by default: InfiniBand, RoCE
 * (Soft-RoCE rxe included), iWARP devices that take a hand-made connection.
 * Built with efadv.h, --efa uses an EFA SRD queue pair instead (address
 * handle + QPN + QKEY per write, through the ibv_wr_* API); that runs only
 * on an EFA device whose firmware offers RDMA write.
 *
 * usage: verbs_write_imm [options]            server
 *        verbs_write_imm [options] SERVER     client
 *   -d, --device NAME     RDMA device (default: the first one)
 *   -i, --ib-port N       device port (default 1)
 *   -g, --gid-index N     GID index (default: the first IPv4-mapped GID,
 *                         as RoCE v2 needs, else 0)
 *   -p, --port N          TCP port of the exchange (default 18515)
 *   -s, --size BYTES      the large write (default 1048576)
 *       --efa             EFA SRD instead of RC
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#ifdef TERN_HAVE_EFADV
#include <infiniband/efadv.h>
#endif

#define IMM_LARGE  0x1a2b3c01u
#define IMM_SMALL  0x1a2b3c02u
#define SMALL_MSG  "verbs:ok"
#define SMALL_LEN  8
#define WIRE_MAGIC "TERNVWI1"
#define WIRE_LEN   64
#define EFA_QKEY   0x11111111u
#define TIMEOUT_MS 20000

struct opts {
	const char *device;
	const char *server;
	int ib_port;
	int gid_index;
	const char *tcp_port;
	size_t size;
	bool efa;
};

/* What one side tells the other. */
struct info {
	uint32_t qpn;
	uint32_t psn;
	uint32_t rkey;
	uint32_t mtu;
	uint64_t addr;
	uint64_t len;
	uint16_t lid;
	union ibv_gid gid;
};

struct res {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	struct ibv_port_attr port;
	uint8_t *buf;
	size_t len;
	int gid_index;
	union ibv_gid gid;
	struct info me;
};

static const char *role = "verbs_write_imm";

#define die(...)                               \
	do {                                   \
		fprintf(stderr, "%s: ", role); \
		fprintf(stderr, __VA_ARGS__);  \
		fputc('\n', stderr);           \
		exit(1);                       \
	} while (0)

static void usage(FILE *f)
{
	fprintf(f,
		"usage: verbs_write_imm [options]          (server)\n"
		"       verbs_write_imm [options] SERVER   (client)\n"
		"  -d, --device NAME    RDMA device (default: the first)\n"
		"  -i, --ib-port N      device port (default 1)\n"
		"  -g, --gid-index N    GID index (default: first "
		"IPv4-mapped, else 0)\n"
		"  -p, --port N         TCP port of the exchange (default "
		"18515)\n"
		"  -s, --size BYTES     the large write (default 1048576)\n"
		"      --efa            EFA SRD queue pair instead of RC%s\n",
#ifdef TERN_HAVE_EFADV
		""
#else
		" (not built: no efadv.h)"
#endif
	);
}

/* --- the pattern: splitmix64 of the word index ---------------------------- */

static uint8_t pattern_byte(size_t i)
{
	uint64_t z = (uint64_t)(i / 8) + 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (uint8_t)(z >> (8 * (i % 8)));
}

/* --- TCP exchange -------------------------------------------------------- */

static void put32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return be32toh(v);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return be64toh(v);
}

static void pack(const struct info *in, uint8_t *w)
{
	memset(w, 0, WIRE_LEN);
	memcpy(w, WIRE_MAGIC, 8);
	put32(w + 8, in->qpn);
	put32(w + 12, in->psn);
	put32(w + 16, in->rkey);
	put32(w + 20, in->mtu);
	put64(w + 24, in->addr);
	put64(w + 32, in->len);
	w[40] = (uint8_t)(in->lid >> 8);
	w[41] = (uint8_t)in->lid;
	memcpy(w + 42, in->gid.raw, 16);
}

static int unpack(const uint8_t *w, struct info *out)
{
	if (memcmp(w, WIRE_MAGIC, 8) != 0)
		return -1;
	out->qpn = get32(w + 8);
	out->psn = get32(w + 12);
	out->rkey = get32(w + 16);
	out->mtu = get32(w + 20);
	out->addr = get64(w + 24);
	out->len = get64(w + 32);
	out->lid = (uint16_t)(w[40] << 8 | w[41]);
	memcpy(out->gid.raw, w + 42, 16);
	if (out->qpn == 0 || out->qpn > 0xffffff || out->mtu < IBV_MTU_256 ||
	    out->mtu > IBV_MTU_4096)
		return -1;
	return 0;
}

static void full_write(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("tcp write: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

static void full_read(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("tcp read: %s", strerror(errno));
		if (n == 0)
			die("tcp: the peer closed the connection");
		p += n;
		len -= (size_t)n;
	}
}

static int tcp_listen_accept(const char *port)
{
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE };
	struct addrinfo *ai;
	int one = 1, lfd, fd, ret;

	ret = getaddrinfo(NULL, port, &hints, &ai);
	if (ret != 0)
		die("port %s: %s", port, gai_strerror(ret));
	lfd = socket(ai->ai_family, ai->ai_socktype, 0);
	if (lfd < 0)
		die("socket: %s", strerror(errno));
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(lfd, 1) < 0)
		die("tcp port %s: %s", port, strerror(errno));
	freeaddrinfo(ai);
	printf("%s: waiting for a client on tcp port %s\n", role, port);
	fflush(stdout);
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		die("accept: %s", strerror(errno));
	close(lfd);
	return fd;
}

/* Connect, retrying for up to 10 s while the server starts. */
static int tcp_connect(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai;
	int fd, ret;

	ret = getaddrinfo(host, port, &hints, &ai);
	if (ret != 0)
		die("%s:%s: %s", host, port, gai_strerror(ret));
	for (int tries = 0;; tries++) {
		fd = socket(ai->ai_family, ai->ai_socktype, 0);
		if (fd < 0)
			die("socket: %s", strerror(errno));
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		if (tries == 100)
			die("connect %s:%s: %s", host, port, strerror(errno));
		close(fd);
		usleep(100 * 1000);
	}
	freeaddrinfo(ai);
	return fd;
}

static void exchange(int fd, const struct info *me, struct info *peer)
{
	uint8_t w[WIRE_LEN];

	pack(me, w);
	full_write(fd, w, sizeof(w));
	full_read(fd, w, sizeof(w));
	if (unpack(w, peer) < 0)
		die("the peer's info is not valid (wrong program or version?)");
}

/* --- device -------------------------------------------------------------- */

static void gid_str(const union ibv_gid *gid, char *s, size_t len)
{
	if (inet_ntop(AF_INET6, gid->raw, s, (socklen_t)len) == NULL)
		snprintf(s, len, "?");
}

static bool gid_is_v4_mapped(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0,    0,
					    0, 0, 0, 0, 0xff, 0xff };

	return memcmp(g->raw, prefix, sizeof(prefix)) == 0;
}

static bool gid_is_zero(const union ibv_gid *g)
{
	static const uint8_t zero[16];

	return memcmp(g->raw, zero, sizeof(zero)) == 0;
}

static struct ibv_context *open_device(const char *name)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int n;

	list = ibv_get_device_list(&n);
	if (list == NULL || n == 0)
		die("no RDMA device (is /dev/infiniband there? is a driver "
		    "such as rdma_rxe loaded?)");
	for (int i = 0; i < n; i++) {
		if (name != NULL &&
		    strcmp(ibv_get_device_name(list[i]), name) != 0)
			continue;
		ctx = ibv_open_device(list[i]);
		if (ctx == NULL)
			die("open %s: %s", ibv_get_device_name(list[i]),
			    strerror(errno));
		break;
	}
	ibv_free_device_list(list);
	if (ctx == NULL)
		die("no RDMA device named %s", name);
	return ctx;
}

static void choose_gid(struct res *r, const struct opts *o)
{
	union ibv_gid g;

	if (o->gid_index >= 0) {
		r->gid_index = o->gid_index;
		if (ibv_query_gid(r->ctx, (uint8_t)o->ib_port, o->gid_index,
				  &r->gid) != 0)
			die("GID index %d: %s", o->gid_index, strerror(errno));
		return;
	}
	r->gid_index = 0;
	memset(&r->gid, 0, sizeof(r->gid));
	ibv_query_gid(r->ctx, (uint8_t)o->ib_port, 0, &r->gid);
	for (int i = 0; i < r->port.gid_tbl_len; i++) {
		if (ibv_query_gid(r->ctx, (uint8_t)o->ib_port, i, &g) != 0)
			break;
		if (gid_is_v4_mapped(&g)) {
			r->gid_index = i;
			r->gid = g;
			return;
		}
	}
}

static void create_qp_rc(struct res *r, const struct opts *o)
{
	struct ibv_qp_init_attr init = {
		.send_cq = r->cq,
		.recv_cq = r->cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4,
			 .max_recv_wr = 4,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = (uint8_t)o->ib_port,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_WRITE,
	};

	r->qp = ibv_create_qp(r->pd, &init);
	if (r->qp == NULL)
		die("create RC QP: %s", strerror(errno));
	if (ibv_modify_qp(r->qp, &attr,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS) != 0)
		die("QP to INIT: %s", strerror(errno));
}

static void fill_ah_attr(const struct res *r, const struct opts *o,
			 const struct info *peer, struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->dlid = peer->lid;
	ah->sl = 0;
	ah->port_num = (uint8_t)o->ib_port;
	/* RoCE and iWARP route by GID: a global route header is a must */
	if (!gid_is_zero(&peer->gid)) {
		ah->is_global = 1;
		ah->grh.dgid = peer->gid;
		ah->grh.sgid_index = (uint8_t)r->gid_index;
		ah->grh.hop_limit = 64;
	}
}

/* INIT -> RTR -> RTS for an RC queue pair, with the peer's numbers. */
static void connect_qp_rc(struct res *r, const struct opts *o,
			  const struct info *peer)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = (enum ibv_mtu)(peer->mtu < r->me.mtu ? peer->mtu
								 : r->me.mtu),
		.dest_qp_num = peer->qpn,
		.rq_psn = peer->psn,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
	};

	fill_ah_attr(r, o, peer, &attr.ah_attr);
	if (ibv_modify_qp(r->qp, &attr,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER) != 0)
		die("QP to RTR: %s", strerror(errno));
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.sq_psn = r->me.psn;
	attr.max_rd_atomic = 1;
	if (ibv_modify_qp(r->qp, &attr,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				  IBV_QP_MAX_QP_RD_ATOMIC) != 0)
		die("QP to RTS: %s", strerror(errno));
}

#ifdef TERN_HAVE_EFADV
/* An SRD queue pair: UD-style addressing, reliable, NOT in order. */
static void create_qp_srd(struct res *r, const struct opts *o)
{
	struct ibv_qp_init_attr_ex init = {
		.send_cq = r->cq,
		.recv_cq = r->cq,
		.qp_type = IBV_QPT_DRIVER,
		.cap = { .max_send_wr = 4,
			 .max_recv_wr = 4,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = r->pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
	};
	struct efadv_qp_init_attr efa = {
		.driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD,
	};
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = (uint8_t)o->ib_port,
		.qkey = EFA_QKEY,
	};

	r->qp = efadv_create_qp_ex(r->ctx, &init, &efa, sizeof(efa));
	if (r->qp == NULL)
		die("create EFA SRD QP with RDMA write: %s (an EFA device "
		    "whose firmware offers RDMA write is needed)",
		    strerror(errno));
	if (ibv_modify_qp(r->qp, &attr,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_QKEY) != 0)
		die("QP to INIT: %s", strerror(errno));
}

static void connect_qp_srd(struct res *r, const struct opts *o,
			   const struct info *peer)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_RTR };
	struct ibv_ah_attr ah;

	if (ibv_modify_qp(r->qp, &attr, IBV_QP_STATE) != 0)
		die("QP to RTR: %s", strerror(errno));
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = r->me.psn;
	if (ibv_modify_qp(r->qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN) != 0)
		die("QP to RTS: %s", strerror(errno));
	fill_ah_attr(r, o, peer, &ah);
	r->ah = ibv_create_ah(r->pd, &ah);
	if (r->ah == NULL)
		die("address handle: %s", strerror(errno));
}
#endif

static void setup(struct res *r, const struct opts *o, size_t len, int access)
{
	r->ctx = open_device(o->device);
	if (ibv_query_port(r->ctx, (uint8_t)o->ib_port, &r->port) != 0)
		die("port %d: %s", o->ib_port, strerror(errno));
	if (r->port.state != IBV_PORT_ACTIVE)
		fprintf(stderr, "%s: warning: port %d is %s\n", role,
			o->ib_port, ibv_port_state_str(r->port.state));
	choose_gid(r, o);
	r->pd = ibv_alloc_pd(r->ctx);
	if (r->pd == NULL)
		die("protection domain: %s", strerror(errno));
	r->cq = ibv_create_cq(r->ctx, 16, NULL, NULL, 0);
	if (r->cq == NULL)
		die("completion queue: %s", strerror(errno));
	r->len = len;
	r->buf = aligned_alloc(4096, (len + 4095) / 4096 * 4096);
	if (r->buf == NULL)
		die("out of memory for %zu bytes", len);
	memset(r->buf, 0, len);
	r->mr = ibv_reg_mr(r->pd, r->buf, len, access);
	if (r->mr == NULL)
		die("register %zu bytes: %s", len, strerror(errno));
	if (o->efa) {
#ifdef TERN_HAVE_EFADV
		create_qp_srd(r, o);
#endif
	} else {
		create_qp_rc(r, o);
	}
	srand48((long)time(NULL) ^ getpid());
	r->me = (struct info){
		.qpn = r->qp->qp_num,
		.psn = (uint32_t)lrand48() & 0xffffff,
		.rkey = r->mr->rkey,
		.mtu = r->port.active_mtu,
		.addr = (uint64_t)(uintptr_t)r->buf,
		.len = len,
		.lid = r->port.lid,
		.gid = r->gid,
	};
}

static void connect_qp(struct res *r, const struct opts *o,
		       const struct info *peer)
{
	char g[INET6_ADDRSTRLEN];

	if (o->efa) {
#ifdef TERN_HAVE_EFADV
		connect_qp_srd(r, o, peer);
#endif
	} else {
		connect_qp_rc(r, o, peer);
	}
	gid_str(&peer->gid, g, sizeof(g));
	printf("%s: %s QP 0x%x -> peer QP 0x%x, gid %s, lid %u, mtu %d\n", role,
	       o->efa ? "SRD" : "RC", r->qp->qp_num, peer->qpn, g, peer->lid,
	       128 << peer->mtu);
}

static void teardown(struct res *r)
{
	if (r->ah != NULL)
		ibv_destroy_ah(r->ah);
	ibv_destroy_qp(r->qp);
	ibv_dereg_mr(r->mr);
	ibv_destroy_cq(r->cq);
	ibv_dealloc_pd(r->pd);
	ibv_close_device(r->ctx);
	free(r->buf);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* One completion, busy-polled, at most TIMEOUT_MS. */
static void poll_one(struct res *r, struct ibv_wc *wc, const char *what)
{
	double end = now_ms() + TIMEOUT_MS;
	int n;

	while ((n = ibv_poll_cq(r->cq, 1, wc)) == 0) {
		if (now_ms() > end)
			die("no completion for %s within %d s", what,
			    TIMEOUT_MS / 1000);
	}
	if (n < 0)
		die("poll CQ: %d", n);
	if (wc->status != IBV_WC_SUCCESS)
		die("%s: completion with status %s (%d), vendor error 0x%x",
		    what, ibv_wc_status_str(wc->status), wc->status,
		    wc->vendor_err);
}

/* --- server -------------------------------------------------------------- */

static int run_server(const struct opts *o)
{
	struct res r = { 0 };
	struct info peer;
	char g[INET6_ADDRSTRLEN], small[SMALL_LEN + 1];
	bool seen_large = false, seen_small = false;
	size_t bad = 0, first_bad = 0;
	int fd;
	uint8_t verdict;

	role = "server";
	setup(&r, o, o->size + SMALL_LEN,
	      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	gid_str(&r.gid, g, sizeof(g));
	printf("server: %s port %d, gid[%d] %s, %zu + %d bytes open to remote "
	       "writes at 0x%llx, rkey 0x%x\n",
	       ibv_get_device_name(r.ctx->device), o->ib_port, r.gid_index, g,
	       o->size, SMALL_LEN, (unsigned long long)r.me.addr, r.me.rkey);
	/* A write with immediate consumes a receive: post them first. */
	for (int i = 0; i < 2; i++) {
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i }, *bad_wr;

		if (ibv_post_recv(r.qp, &wr, &bad_wr) != 0)
			die("post receive: %s", strerror(errno));
	}
	fd = tcp_listen_accept(o->tcp_port);
	exchange(fd, &r.me, &peer);
	connect_qp(&r, o, &peer);
	full_write(fd, "R", 1); /* ready: the client may write */

	for (int i = 0; i < 2; i++) {
		struct ibv_wc wc;

		poll_one(&r, &wc, "a write with immediate");
		if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
		    !(wc.wc_flags & IBV_WC_WITH_IMM))
			die("completion %d: opcode %d, not a write with "
			    "immediate",
			    i + 1, wc.opcode);
		uint32_t imm = ntohl(wc.imm_data);

		printf("server: completion %d: write with immediate 0x%08x, "
		       "%u bytes\n",
		       i + 1, imm, wc.byte_len);
		if (imm == IMM_LARGE && !seen_large)
			seen_large = true;
		else if (imm == IMM_SMALL && !seen_small)
			seen_small = true;
		else
			die("unexpected immediate 0x%08x", imm);
	}
	for (size_t i = 0; i < o->size; i++) {
		if (r.buf[i] != pattern_byte(i) && bad++ == 0)
			first_bad = i;
	}
	memcpy(small, r.buf + o->size, SMALL_LEN);
	small[SMALL_LEN] = '\0';
	if (bad == 0)
		printf("server: large write: %zu bytes verified\n", o->size);
	else
		printf("server: large write: %zu of %zu bytes wrong, the first "
		       "at offset %zu\n",
		       bad, o->size, first_bad);
	printf("server: small write: \"%s\"\n", small);
	verdict = bad == 0 && strcmp(small, SMALL_MSG) == 0 ? 'V' : 'X';
	full_write(fd, &verdict, 1);
	close(fd);
	teardown(&r);
	printf("server: %s\n", verdict == 'V' ? "OK" : "FAILED");
	return verdict == 'V' ? 0 : 1;
}

/* --- client -------------------------------------------------------------- */

static void post_write(struct res *r, const struct opts *o,
		       const struct info *peer, uint64_t off, size_t len,
		       uint64_t roff, uint32_t imm)
{
	if (o->efa) {
#ifdef TERN_HAVE_EFADV
		struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(r->qp);

		ibv_wr_start(qpx);
		qpx->wr_id = imm;
		qpx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_write_imm(qpx, peer->rkey, peer->addr + roff,
				      htonl(imm));
		ibv_wr_set_sge(qpx, r->mr->lkey,
			       (uint64_t)(uintptr_t)r->buf + off,
			       (uint32_t)len);
		ibv_wr_set_ud_addr(qpx, r->ah, peer->qpn, EFA_QKEY);
		if (ibv_wr_complete(qpx) != 0)
			die("post write: %s", strerror(errno));
#endif
	} else {
		struct ibv_sge sge = {
			.addr = (uint64_t)(uintptr_t)r->buf + off,
			.length = (uint32_t)len,
			.lkey = r->mr->lkey,
		};
		struct ibv_send_wr wr = {
			.wr_id = imm,
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
			.send_flags = IBV_SEND_SIGNALED,
			.imm_data = htonl(imm),
			.wr.rdma = { .remote_addr = peer->addr + roff,
				     .rkey = peer->rkey },
		},
				   *bad_wr;

		if (ibv_post_send(r->qp, &wr, &bad_wr) != 0)
			die("post write: %s", strerror(errno));
	}
}

static int run_client(const struct opts *o)
{
	struct res r = { 0 };
	struct info peer;
	char g[INET6_ADDRSTRLEN];
	uint8_t ready, verdict;
	double t0, t1;
	int fd;

	role = "client";
	setup(&r, o, o->size + SMALL_LEN, IBV_ACCESS_LOCAL_WRITE);
	for (size_t i = 0; i < o->size; i++)
		r.buf[i] = pattern_byte(i);
	memcpy(r.buf + o->size, SMALL_MSG, SMALL_LEN);
	gid_str(&r.gid, g, sizeof(g));
	printf("client: %s port %d, gid[%d] %s\n",
	       ibv_get_device_name(r.ctx->device), o->ib_port, r.gid_index, g);
	fd = tcp_connect(o->server, o->tcp_port);
	exchange(fd, &r.me, &peer);
	if (peer.len < o->size + SMALL_LEN)
		die("the server offers %llu bytes, %zu needed (same --size "
		    "on both sides?)",
		    (unsigned long long)peer.len, o->size + SMALL_LEN);
	connect_qp(&r, o, &peer);
	full_read(fd, &ready, 1);
	if (ready != 'R')
		die("the server is not ready");

	t0 = now_ms();
	post_write(&r, o, &peer, 0, o->size, 0, IMM_LARGE);
	post_write(&r, o, &peer, o->size, SMALL_LEN, o->size, IMM_SMALL);
	for (int i = 0; i < 2; i++) {
		struct ibv_wc wc;

		poll_one(&r, &wc, "a posted write");
		printf("client: write 0x%08x completed\n", (uint32_t)wc.wr_id);
	}
	t1 = now_ms();
	printf("client: wrote %zu + %d bytes with immediates 0x%08x, 0x%08x "
	       "(%.3f ms)\n",
	       o->size, SMALL_LEN, IMM_LARGE, IMM_SMALL, t1 - t0);
	full_read(fd, &verdict, 1);
	close(fd);
	teardown(&r);
	if (verdict != 'V') {
		printf("client: the server found the data wrong\n");
		return 1;
	}
	printf("client: OK: the server verified every byte\n");
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "device", required_argument, NULL, 'd' },
		{ "ib-port", required_argument, NULL, 'i' },
		{ "gid-index", required_argument, NULL, 'g' },
		{ "port", required_argument, NULL, 'p' },
		{ "size", required_argument, NULL, 's' },
		{ "efa", no_argument, NULL, 'E' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .ib_port = 1,
			  .gid_index = -1,
			  .tcp_port = "18515",
			  .size = 1 << 20 };
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "d:i:g:p:s:h", longopts, NULL)) !=
	       -1) {
		switch (c) {
		case 'd':
			o.device = optarg;
			break;
		case 'i':
			o.ib_port = atoi(optarg);
			break;
		case 'g':
			o.gid_index = atoi(optarg);
			break;
		case 'p':
			o.tcp_port = optarg;
			break;
		case 's':
			o.size = strtoull(optarg, &end, 0);
			if (*end != '\0' || o.size == 0 || o.size > (1u << 30))
				die("--size: 1 .. 1073741824 bytes");
			break;
		case 'E':
			o.efa = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc - 1) {
		usage(stderr);
		return 2;
	}
	o.server = optind < argc ? argv[optind] : NULL;
	if (o.ib_port < 1 || o.ib_port > 255)
		die("--ib-port: 1 .. 255");
#ifndef TERN_HAVE_EFADV
	if (o.efa)
		die("--efa: built without infiniband/efadv.h");
#endif
	setvbuf(stdout, NULL, _IOLBF, 0);
	return o.server != NULL ? run_client(&o) : run_server(&o);
}
