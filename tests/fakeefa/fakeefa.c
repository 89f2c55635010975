// SPDX-License-Identifier: MIT
/*
 * fakeefa: an in-process libfabric DL provider named "efa" that presents
 * the two fabrics libfabric 2.x's efa provider reports on a p5.48xlarge
 * ("efa" and "efa-direct", one domain "rdmapNsM-rdm" per fake NIC) and
 * enforces efa-direct's rules. Data moves by memcpy at post time; every
 * endpoint lives in this process.
 *
 * Sources for every value (libfabric, tag v2.1.0 unless noted):
 *  - prov/efa/src/efa_prov_info.c: EFA_RDM_CAPS (FI_MSG|FI_RMA, FI_SOURCE,
 *    FI_LOCAL_COMM|FI_REMOTE_COMM), FI_CONTEXT2 mode on the direct path,
 *    domain mr_mode OFI_MR_BASIC_MAP|FI_MR_LOCAL (efa-direct), mr_key_size
 *    = sizeof(lkey) = 4, cq_data_size EFA_CQ_DATA_SIZE = 4, max_msg_size =
 *    MAX(port max_msg_sz, max_rdma_size) when FI_RMA, tx size =
 *    rounddown_pow2(max_sq_wr), msg_order 0, FI_HMEM adds FI_MR_HMEM,
 *    the efa fabric adds FI_TAGGED|FI_ATOMIC, drops FI_CONTEXT2 and
 *    FI_MR_LOCAL, max_msg_size UINT64_MAX.
 *  - prov/efa/src/efa_user_info.c: FI_RX_CQ_DATA kept only when the hints
 *    ask for it (then writes with data consume a posted receive).
 *  - prov/efa/docs/efa_fabric_comparison.md and man/fi_efa.7.md: efa-direct
 *    has no tagged messages, sends <= MTU, RMA <= max_rdma_size and one
 *    IOV, no atomics, no fi_cancel, and RMA needs the initiator in the
 *    target's AV; FI_WAIT_FD is refused while shm transfer is on.
 *  - p5 figures (tx 4096, rx 8192, 100 Gbit/s links, MTU 8928 - the
 *    port's max_msg_sz on EFA gen2) from fi_info output on p5 quoted in
 *    the EFA notes of this project; max_rdma_size is ~1 GiB on hardware
 *    and set small here (TERN_FAKEEFA_MAX_RDMA, default 1 MiB) so a test
 *    sees splitting.
 *
 * Order: all efa-direct infos first, then all efa ones, as
 * prov/efa/src/efa_prov.c efa_util_prov_initialize() builds its list
 * ("efa-direct info objects should be returned _before_ efa rdm").
 *
 * Environment: TERN_FAKEEFA_PROFILE=direct|efa|both (default both),
 * TERN_FAKEEFA_NICS (default 4), TERN_FAKEEFA_MAX_RDMA (bytes),
 * TERN_FAKEEFA_REPORT=path: at exit the fake writes
 * "violations N" there (N = rule violations refused or failed).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_prov.h>

/* FI_OPT_MAX_MSG_SIZE ... FI_OPT_INJECT_RMA_SIZE: libfabric 2.x
 * rdma/fi_endpoint.h (the enum after FI_OPT_SHARED_MEMORY_PERMITTED = 11);
 * absent from 1.17's headers, hence the numbers. */
#define FAKE_OPT_MAX_MSG_SIZE	 12
#define FAKE_OPT_MAX_RMA_SIZE	 14
#define FAKE_OPT_INJECT_MSG_SIZE 16
#define FAKE_OPT_INJECT_RMA_SIZE 18
#if FI_MAJOR_VERSION >= 2
_Static_assert(FI_OPT_MAX_MSG_SIZE == FAKE_OPT_MAX_MSG_SIZE &&
		       FI_OPT_MAX_RMA_SIZE == FAKE_OPT_MAX_RMA_SIZE &&
		       FI_OPT_INJECT_MSG_SIZE == FAKE_OPT_INJECT_MSG_SIZE &&
		       FI_OPT_INJECT_RMA_SIZE == FAKE_OPT_INJECT_RMA_SIZE,
	       "libfabric 2.x option numbers");
#endif

#define FAKE_MTU     8928
#define FAKE_TX_SIZE 4096
#define FAKE_RX_SIZE 8192
#define FAKE_ADDRLEN 32
#define FAKE_INLINE  32
#define FAKE_MAX_EP  256
#define FAKE_MAX_MR  4096

static int violations;
static size_t max_rdma = 1 << 20;

static void violate(const char *what)
{
	violations++;
	if (getenv("TERN_FAKEEFA_VERBOSE"))
		fprintf(stderr, "fakeefa: rule broken: %s\n", what);
}

/* For tests: dlopen(RTLD_NOLOAD) this library and look this up. */
int fakeefa_violations(void);
__attribute__((visibility("default"))) int fakeefa_violations(void)
{
	return violations;
}

__attribute__((destructor)) static void fake_report(void)
{
	const char *p = getenv("TERN_FAKEEFA_REPORT");
	FILE *f;

	if (!p || !(f = fopen(p, "a")))
		return;
	fprintf(f, "violations %d\n", violations);
	fclose(f);
}

static ssize_t fake_nosys(void)
{
	return -FI_ENOSYS;
}

/* A tagged or atomic op on efa-direct: refused and counted. */
static ssize_t fake_forbidden(void)
{
	violate("tagged or atomic operation on efa-direct");
	return -FI_ENOSYS;
}

/* Fill every unset function slot of an ops table (after its size field)
 * with a stub returning -FI_ENOSYS. */
static void fill_fn(void *ops, size_t sz, ssize_t (*fn)(void))
{
	char *p = (char *)ops + sizeof(size_t);
	void *zero = NULL;

	for (; p + sizeof(fn) <= (char *)ops + sz; p += sizeof(fn))
		if (!memcmp(p, &zero, sizeof(zero)))
			memcpy(p, &fn, sizeof(fn));
}

static void fill_nosys(void *ops, size_t sz)
{
	fill_fn(ops, sz, fake_nosys);
}

/* ---- objects ---- */
struct fake_cq_ent {
	struct fi_cq_data_entry e;
	int err;
	int prov_errno;
	fi_addr_t src;
};

struct fake_cq {
	struct fid_cq cq;
	struct fake_cq_ent *ents;
	size_t head, tail, cap;
};

struct fake_av {
	struct fid_av av;
	uint8_t (*addr)[FAKE_ADDRLEN];
	size_t n, cap;
};

struct fake_domain;
struct fake_mr {
	struct fid_mr mr;
	struct fake_domain *dom;
	uint8_t *base;
	size_t len;
	uint64_t access;
	uint32_t key;
	int enabled;
};

struct fake_recv {
	void *buf;
	size_t len;
	void *ctx;
	uint64_t tag, ignore;
	int tagged;
};

struct fake_ep {
	struct fid_ep ep;
	struct fake_domain *dom;
	struct fake_cq *tx, *rx;
	struct fake_av *av;
	uint32_t id;
	uint8_t addr[FAKE_ADDRLEN];
	struct fake_recv *rq;
	size_t nrq, caprq;
	int enabled;
};

struct fake_domain {
	struct fid_domain dom;
	struct fi_info *info;
	int direct;
	int rx_cq_data;
	int nic;
};

struct fake_fabric {
	struct fid_fabric fab;
	int direct;
};

static struct fake_ep *eps[FAKE_MAX_EP];
static struct fake_mr *mrs[FAKE_MAX_MR];
static uint32_t next_key = 0x1000;

/* ---- profiles ---- */
static const char *profile(void)
{
	const char *p = getenv("TERN_FAKEEFA_PROFILE");

	return p && *p ? p : "both";
}

static int nnics(void)
{
	const char *n = getenv("TERN_FAKEEFA_NICS");
	int v = n ? atoi(n) : 4;

	return v > 0 && v <= 32 ? v : 4;
}

static const char *nic_name(int i)
{
	static const char *names[] = {
		"rdmap16s27", "rdmap32s27", "rdmap48s27",  "rdmap64s27",
		"rdmap79s27", "rdmap96s27", "rdmap112s27", "rdmap128s27",
	};

	return names[i % 8];
}

static void nic_gid(int nic, uint8_t *gid)
{
	memset(gid, 0, 16);
	gid[0] = 0xfe;
	gid[1] = 0x80;
	gid[14] = 0xef;
	gid[15] = (uint8_t)nic;
}

/* fi_info->nic: one allocation holding the nic and its attributes, so
 * libfabric's fi_freeinfo (fi_close) and fi_dupinfo (FI_DUP) work. */
struct fake_nic {
	struct fid_nic nic;
	struct fi_device_attr dev;
	struct fi_bus_attr bus;
	struct fi_link_attr link;
	char name[32], addr[64];
};

static int nic_close(struct fid *f)
{
	free(f);
	return 0;
}

static int nic_control(struct fid *f, int cmd, void *arg);

static struct fi_ops nic_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = nic_close,
	.control = nic_control,
};

static struct fid_nic *nic_new(int nic)
{
	struct fake_nic *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->nic.fid.fclass = FI_CLASS_NIC;
	n->nic.fid.ops = &nic_fi_ops;
	snprintf(n->name, sizeof(n->name), "%s", nic_name(nic));
	snprintf(n->addr, sizeof(n->addr), "EFA-fe80::ef:%x", nic);
	n->dev.name = n->name;
	n->dev.device_id = "0xefa1";
	n->dev.vendor_id = "0x1d0f";
	n->dev.driver = "efa";
	n->bus.bus_type = FI_BUS_PCI;
	n->link.address = n->addr;
	n->link.mtu = FAKE_MTU;
	n->link.speed = 100000000000ULL; /* 100 Gbit/s per p5 NIC */
	n->link.state = FI_LINK_UP;
	n->link.network_type = "Ethernet";
	n->nic.device_attr = &n->dev;
	n->nic.bus_attr = &n->bus;
	n->nic.link_attr = &n->link;
	return &n->nic;
}

static int nic_control(struct fid *f, int cmd, void *arg)
{
	struct fake_nic *n = (struct fake_nic *)f, *d;

	if (cmd != FI_DUP)
		return -FI_ENOSYS;
	d = malloc(sizeof(*d));
	if (!d)
		return -FI_ENOMEM;
	*d = *n;
	d->dev.name = d->name;
	d->link.address = d->addr;
	d->nic.device_attr = &d->dev;
	d->nic.bus_attr = &d->bus;
	d->nic.link_attr = &d->link;
	*(struct fid_nic **)arg = &d->nic;
	return 0;
}

static struct fi_info *make_info(int direct, int nic, const struct fi_info *h)
{
	struct fi_info *fi = fi_allocinfo();
	char dom[64];
	uint8_t *src;

	if (!fi)
		return NULL;
	fi->caps = FI_MSG | FI_RMA | FI_SEND | FI_RECV | FI_READ | FI_WRITE |
		   FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SOURCE |
		   FI_LOCAL_COMM | FI_REMOTE_COMM | FI_HMEM;
	if (!direct)
		fi->caps |= FI_TAGGED | FI_ATOMIC | FI_DIRECTED_RECV;
	fi->mode = direct ? FI_CONTEXT2 : 0;
	/* efa_user_info.c: efa-direct keeps FI_RX_CQ_DATA when the app
	 * offers it; the efa fabric never needs it. */
	if (direct && h && (h->mode & FI_RX_CQ_DATA))
		fi->mode |= FI_RX_CQ_DATA;
	fi->addr_format = FI_ADDR_EFA;
	src = calloc(1, FAKE_ADDRLEN);
	nic_gid(nic, src);
	fi->src_addr = src;
	fi->src_addrlen = FAKE_ADDRLEN;

	fi->tx_attr->caps = fi->caps &
			    ~(FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE |
			      FI_SOURCE | FI_DIRECTED_RECV);
	fi->tx_attr->mode = fi->mode;
	fi->tx_attr->op_flags = FI_TRANSMIT_COMPLETE;
	if (!direct)
		fi->tx_attr->op_flags |= FI_INJECT | FI_COMPLETION |
					 FI_DELIVERY_COMPLETE;
	fi->tx_attr->msg_order = direct ? 0 : FI_ORDER_SAS;
	fi->tx_attr->inject_size = direct ? FAKE_INLINE : 4096;
	fi->tx_attr->size = FAKE_TX_SIZE;
	fi->tx_attr->iov_limit = direct ? 2 : 4;
	fi->tx_attr->rma_iov_limit = 1;
	fi->rx_attr->caps = fi->caps & ~(FI_SEND | FI_READ | FI_WRITE);
	fi->rx_attr->mode = fi->mode;
	fi->rx_attr->msg_order = fi->tx_attr->msg_order;
	fi->rx_attr->size = FAKE_RX_SIZE;
	fi->rx_attr->iov_limit = direct ? 1 : 4;

	fi->ep_attr->type = FI_EP_RDM;
	fi->ep_attr->protocol = FI_PROTO_EFA;
	fi->ep_attr->max_msg_size = direct ? (max_rdma > FAKE_MTU ? max_rdma
								  : FAKE_MTU)
					   : UINT64_MAX;
	fi->ep_attr->tx_ctx_cnt = 1;
	fi->ep_attr->rx_ctx_cnt = 1;

	snprintf(dom, sizeof(dom), "%s-rdm", nic_name(nic));
	fi->domain_attr->name = strdup(dom);
	fi->domain_attr->threading = FI_THREAD_SAFE;
	fi->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	fi->domain_attr->data_progress = direct ? FI_PROGRESS_AUTO
						: FI_PROGRESS_MANUAL;
	fi->domain_attr->resource_mgmt = FI_RM_DISABLED;
	fi->domain_attr->av_type = FI_AV_TABLE;
	fi->domain_attr->mr_mode = FI_MR_ALLOCATED | FI_MR_PROV_KEY |
				   FI_MR_VIRT_ADDR | FI_MR_HMEM;
	if (direct)
		fi->domain_attr->mr_mode |= FI_MR_LOCAL;
	fi->domain_attr->mr_key_size = 4;
	fi->domain_attr->cq_data_size = 4;
	fi->domain_attr->cq_cnt = 512;
	fi->domain_attr->ep_cnt = 256;
	fi->domain_attr->tx_ctx_cnt = 256;
	fi->domain_attr->rx_ctx_cnt = 256;
	fi->domain_attr->max_ep_tx_ctx = 1;
	fi->domain_attr->max_ep_rx_ctx = 1;
	fi->domain_attr->mr_iov_limit = 1;
	fi->domain_attr->mr_cnt = 65536;
	fi->domain_attr->caps = FI_LOCAL_COMM | FI_REMOTE_COMM;

	fi->fabric_attr->name = strdup(direct ? "efa-direct" : "efa");
	/* prov_name and prov_version are filled in by libfabric's core */
	fi->nic = nic_new(nic);

	return fi;
}

static int hints_ok(int direct, const struct fi_info *h)
{
	uint64_t caps;

	if (!h)
		return 1;
	caps = FI_MSG | FI_RMA | FI_SEND | FI_RECV | FI_READ | FI_WRITE |
	       FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SOURCE | FI_LOCAL_COMM |
	       FI_REMOTE_COMM | FI_HMEM;
	if (!direct)
		caps |= FI_TAGGED | FI_ATOMIC | FI_DIRECTED_RECV;
	if (h->caps & ~caps)
		return 0;
	if (h->ep_attr && h->ep_attr->type != FI_EP_UNSPEC &&
	    h->ep_attr->type != FI_EP_RDM)
		return 0;
	if (direct && !(h->mode & FI_CONTEXT2))
		return 0; /* efa-direct requires FI_CONTEXT2 */
	if (h->domain_attr) {
		uint64_t mm = h->domain_attr->mr_mode;

		if (direct && mm && !(mm & FI_MR_LOCAL))
			return 0;
		if (mm && (mm & (FI_MR_ALLOCATED | FI_MR_PROV_KEY |
				 FI_MR_VIRT_ADDR)) !=
				  (FI_MR_ALLOCATED | FI_MR_PROV_KEY |
				   FI_MR_VIRT_ADDR))
			return 0;
	}
	if (h->fabric_attr) {
		if (h->fabric_attr->name &&
		    strcmp(h->fabric_attr->name, direct ? "efa-direct" : "efa"))
			return 0;
	}
	if (h->addr_format && h->addr_format != FI_ADDR_EFA)
		return 0;
	return 1;
}

/* ---- completion queue ---- */
static void cq_push(struct fake_cq *cq, void *ctx, uint64_t flags, size_t len,
		    void *buf, uint64_t data, int err, fi_addr_t src)
{
	struct fake_cq_ent *e;

	if (!cq)
		return;
	if (cq->tail - cq->head == cq->cap) {
		size_t ncap = cq->cap ? cq->cap * 2 : 64, i;
		struct fake_cq_ent *n = calloc(ncap, sizeof(*n));

		for (i = 0; i < cq->tail - cq->head; i++)
			n[i] = cq->ents[(cq->head + i) % cq->cap];
		free(cq->ents);
		cq->ents = n;
		cq->tail -= cq->head;
		cq->head = 0;
		cq->cap = ncap;
	}
	e = &cq->ents[cq->tail++ % cq->cap];
	memset(e, 0, sizeof(*e));
	e->e.op_context = ctx;
	e->e.flags = flags;
	e->e.len = len;
	e->e.buf = buf;
	e->e.data = data;
	e->err = err;
	e->prov_errno = err;
	e->src = src;
}

static ssize_t cq_readfrom(struct fid_cq *c, void *buf, size_t count,
			   fi_addr_t *src)
{
	struct fake_cq *cq = (struct fake_cq *)c;
	struct fi_cq_data_entry *out = buf;
	size_t n = 0;

	while (n < count && cq->head != cq->tail) {
		struct fake_cq_ent *e = &cq->ents[cq->head % cq->cap];

		if (e->err)
			return n ? (ssize_t)n : -FI_EAVAIL;
		out[n] = e->e;
		if (src)
			src[n] = e->src;
		n++;
		cq->head++;
	}
	return n ? (ssize_t)n : -FI_EAGAIN;
}

static ssize_t cq_read(struct fid_cq *c, void *buf, size_t count)
{
	return cq_readfrom(c, buf, count, NULL);
}

static ssize_t cq_readerr(struct fid_cq *c, struct fi_cq_err_entry *buf,
			  uint64_t flags)
{
	struct fake_cq *cq = (struct fake_cq *)c;
	struct fake_cq_ent *e;

	(void)flags;
	if (cq->head == cq->tail)
		return -FI_EAGAIN;
	e = &cq->ents[cq->head % cq->cap];
	if (!e->err)
		return -FI_EAGAIN;
	memset(buf, 0, sizeof(*buf));
	buf->op_context = e->e.op_context;
	buf->flags = e->e.flags;
	buf->len = e->e.len;
	buf->err = e->err;
	buf->prov_errno = e->prov_errno;
	cq->head++;
	return 1;
}

static const char *cq_strerror(struct fid_cq *c, int prov_errno,
			       const void *err_data, char *buf, size_t len)
{
	static char s[128];

	(void)c;
	(void)err_data;
	snprintf(buf ? buf : s, buf ? len : sizeof(s),
		 "fakeefa: %s (prov_errno %d)", fi_strerror(prov_errno),
		 prov_errno);
	return buf ? buf : s;
}

static int cq_close(struct fid *f)
{
	struct fake_cq *cq = (struct fake_cq *)f;

	free(cq->ents);
	free(cq);
	return 0;
}

static struct fi_ops cq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cq_close,
};
static struct fi_ops_cq cq_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = cq_read,
	.readfrom = cq_readfrom,
	.readerr = cq_readerr,
	.strerror = cq_strerror,
};

static int dom_cq_open(struct fid_domain *d, struct fi_cq_attr *attr,
		       struct fid_cq **out, void *ctx)
{
	struct fake_cq *cq;

	(void)d;
	if (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC)
		return -FI_ENOSYS; /* no FI_WAIT_FD while shm transfer is on */
	if (attr->format != FI_CQ_FORMAT_DATA &&
	    attr->format != FI_CQ_FORMAT_UNSPEC)
		return -FI_ENOSYS;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -FI_ENOMEM;
	cq->cq.fid.fclass = FI_CLASS_CQ;
	cq->cq.fid.context = ctx;
	cq->cq.fid.ops = &cq_fi_ops;
	cq->cq.ops = &cq_ops;
	*out = &cq->cq;
	return 0;
}

/* ---- address vector ---- */
static int av_insert(struct fid_av *a, const void *addr, size_t count,
		     fi_addr_t *fi_addr, uint64_t flags, void *ctx)
{
	struct fake_av *av = (struct fake_av *)a;
	size_t i;

	(void)flags;
	(void)ctx;
	for (i = 0; i < count; i++) {
		if (av->n == av->cap) {
			av->cap = av->cap ? av->cap * 2 : 16;
			av->addr = realloc(av->addr, av->cap * FAKE_ADDRLEN);
		}
		memcpy(av->addr[av->n],
		       (const uint8_t *)addr + i * FAKE_ADDRLEN, FAKE_ADDRLEN);
		if (fi_addr)
			fi_addr[i] = av->n;
		av->n++;
	}
	return (int)count;
}

static int av_remove(struct fid_av *a, fi_addr_t *fi_addr, size_t count,
		     uint64_t flags)
{
	struct fake_av *av = (struct fake_av *)a;
	size_t i;

	(void)flags;
	for (i = 0; i < count; i++)
		if (fi_addr[i] < av->n)
			memset(av->addr[fi_addr[i]], 0, FAKE_ADDRLEN);
	return 0;
}

static int av_lookup(struct fid_av *a, fi_addr_t fa, void *addr,
		     size_t *addrlen)
{
	struct fake_av *av = (struct fake_av *)a;

	if (fa >= av->n)
		return -FI_EINVAL;
	memcpy(addr, av->addr[fa],
	       *addrlen < FAKE_ADDRLEN ? *addrlen : FAKE_ADDRLEN);
	*addrlen = FAKE_ADDRLEN;
	return 0;
}

static const char *av_straddr(struct fid_av *a, const void *addr, char *buf,
			      size_t *len)
{
	const uint8_t *p = addr;

	(void)a;
	snprintf(buf, *len, "fi_addr_efa://[fe80::ef:%x]:%u:0", p[15],
		 (unsigned)(p[16] | p[17] << 8));
	*len = strlen(buf) + 1;
	return buf;
}

static int av_close(struct fid *f)
{
	struct fake_av *av = (struct fake_av *)f;

	free(av->addr);
	free(av);
	return 0;
}

static struct fi_ops av_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = av_close,
};
static struct fi_ops_av av_ops = {
	.size = sizeof(struct fi_ops_av),
	.insert = av_insert,
	.remove = av_remove,
	.lookup = av_lookup,
	.straddr = av_straddr,
};

static int dom_av_open(struct fid_domain *d, struct fi_av_attr *attr,
		       struct fid_av **out, void *ctx)
{
	struct fake_av *av;

	(void)d;
	if (attr->type == FI_AV_MAP)
		return -FI_EINVAL;
	av = calloc(1, sizeof(*av));
	if (!av)
		return -FI_ENOMEM;
	av->av.fid.fclass = FI_CLASS_AV;
	av->av.fid.context = ctx;
	av->av.fid.ops = &av_fi_ops;
	av->av.ops = &av_ops;
	*out = &av->av;
	return 0;
}

static int av_has(struct fake_av *av, const uint8_t *addr)
{
	size_t i;

	for (i = 0; av && i < av->n; i++)
		if (!memcmp(av->addr[i], addr, FAKE_ADDRLEN))
			return 1;
	return 0;
}

/* ---- memory registration ---- */
/* Bytes pinned by the fake's registrations, for TERN_FAKEEFA_MEMLOCK. */
static uint64_t pinned;

/*
 * TERN_FAKEEFA_MEMLOCK=1: registrations pin their pages as EFA's and
 * verbs' do (ib_umem_get()), counted against RLIMIT_MEMLOCK's soft limit:
 * past it the registration fails -FI_ENOMEM, as the kernel's -ENOMEM for
 * a process without CAP_IPC_LOCK (the fake ignores the capability, so
 * that a test run as root meets the limit too).
 */
static int memlock_refuses(uint64_t len)
{
	const char *e = getenv("TERN_FAKEEFA_MEMLOCK");
	struct rlimit rl;

	if (e == NULL || strcmp(e, "1") != 0 ||
	    getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	return pinned + len > (uint64_t)rl.rlim_cur;
}

/*
 * TERN_FAKEEFA_MAX_MR_SIZE=N: a registration longer than N bytes fails
 * -FI_EINVAL, as ibv_reg_mr() past the device's max_mr_size does (EFA,
 * verbs); libfabric reports no such limit, so nothing else says it.
 */
static int max_mr_refuses(uint64_t len)
{
	const char *e = getenv("TERN_FAKEEFA_MAX_MR_SIZE");
	unsigned long long max;
	char *end;

	if (e == NULL)
		return 0;
	max = strtoull(e, &end, 0);
	if (*end != '\0' || max == 0)
		return 0;
	if (len <= max)
		return 0;
	violate("registration past TERN_FAKEEFA_MAX_MR_SIZE");
	return 1;
}

static int mr_close(struct fid *f)
{
	struct fake_mr *mr = (struct fake_mr *)f;

	pinned -= mr->len;
	mrs[mr->key % FAKE_MAX_MR] = NULL;
	free(mr);
	return 0;
}

static int mr_bind(struct fid *f, struct fid *bfid, uint64_t flags)
{
	(void)f;
	(void)bfid;
	(void)flags;
	return 0;
}

static int mr_control(struct fid *f, int cmd, void *arg)
{
	struct fake_mr *mr = (struct fake_mr *)f;

	(void)arg;
	if (cmd != FI_ENABLE)
		return -FI_ENOSYS;
	mr->enabled = 1;
	return 0;
}

static struct fi_ops mr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = mr_close,
	.bind = mr_bind,
	.control = mr_control,
};

static int mr_regattr(struct fid *f, const struct fi_mr_attr *attr,
		      uint64_t flags, struct fid_mr **out)
{
	struct fake_mr *mr;
	uint32_t i;

	(void)flags;
	if (attr->iov_count != 1)
		return -FI_EINVAL;
	if (memlock_refuses(attr->mr_iov[0].iov_len))
		return -FI_ENOMEM;
	if (max_mr_refuses(attr->mr_iov[0].iov_len))
		return -FI_EINVAL;
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -FI_ENOMEM;
	for (i = 0; i < FAKE_MAX_MR; i++, next_key++)
		if (!mrs[next_key % FAKE_MAX_MR])
			break;
	if (i == FAKE_MAX_MR) {
		free(mr);
		return -FI_ENOSPC;
	}
	mr->key = next_key++;
	mrs[mr->key % FAKE_MAX_MR] = mr;
	mr->dom = (struct fake_domain *)f;
	mr->base = attr->mr_iov[0].iov_base;
	mr->len = attr->mr_iov[0].iov_len;
	pinned += mr->len;
	mr->access = attr->access;
	mr->enabled = 1;
	mr->mr.fid.fclass = FI_CLASS_MR;
	mr->mr.fid.context = attr->context;
	mr->mr.fid.ops = &mr_fi_ops;
	mr->mr.mem_desc = mr;
	mr->mr.key = mr->key;
	*out = &mr->mr;
	return 0;
}

static int mr_regv(struct fid *f, const struct iovec *iov, size_t count,
		   uint64_t access, uint64_t offset, uint64_t key,
		   uint64_t flags, struct fid_mr **out, void *ctx)
{
	struct fi_mr_attr a = {
		.mr_iov = iov,
		.iov_count = count,
		.access = access,
		.offset = offset,
		.requested_key = key,
		.context = ctx,
	};

	return mr_regattr(f, &a, flags, out);
}

static int mr_reg(struct fid *f, const void *buf, size_t len, uint64_t access,
		  uint64_t offset, uint64_t key, uint64_t flags,
		  struct fid_mr **out, void *ctx)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	return mr_regv(f, &iov, 1, access, offset, key, flags, out, ctx);
}

static struct fi_ops_mr mr_ops = {
	.size = sizeof(struct fi_ops_mr),
	.reg = mr_reg,
	.regv = mr_regv,
	.regattr = mr_regattr,
};

/* A local descriptor must name a live registration covering the buffer. */
static int desc_ok(struct fake_ep *ep, void *desc, const void *buf, size_t len)
{
	struct fake_mr *mr = desc;

	if (!ep->dom->direct)
		return 1;
	if (!len)
		return 1;
	if (!mr || mrs[mr->key % FAKE_MAX_MR] != mr)
		return 0;
	return (const uint8_t *)buf >= mr->base &&
	       (const uint8_t *)buf + len <= mr->base + mr->len;
}

static struct fake_mr *rkey_find(uint64_t key, uint64_t addr, size_t len,
				 uint64_t access)
{
	struct fake_mr *mr = mrs[key % FAKE_MAX_MR];

	if (getenv("TERN_FAKEEFA_VERBOSE"))
		fprintf(stderr,
			"fakeefa: rkey %#" PRIx64 " addr %#" PRIx64
			" len %zu: mr %p base %p len %zu access %#" PRIx64 "\n",
			key, addr, len, (void *)mr,
			mr ? (void *)mr->base : NULL, mr ? mr->len : 0,
			mr ? mr->access : 0);
	if (!mr || mr->key != key || !mr->enabled)
		return NULL;
	if (!(mr->access & access))
		return NULL;
	if (addr < (uintptr_t)mr->base ||
	    addr + len > (uintptr_t)mr->base + mr->len)
		return NULL;
	return mr;
}

/* ---- endpoint ---- */
static struct fake_ep *ep_of_addr(struct fake_ep *ep, fi_addr_t fa)
{
	uint32_t id;

	if (!ep->av || fa >= ep->av->n)
		return NULL;
	id = (uint32_t)(ep->av->addr[fa][16] | ep->av->addr[fa][17] << 8);
	if (id >= FAKE_MAX_EP || !eps[id] ||
	    memcmp(eps[id]->addr, ep->av->addr[fa], FAKE_ADDRLEN))
		return NULL;
	return eps[id];
}

static fi_addr_t addr_in(struct fake_ep *tgt, const uint8_t *addr)
{
	size_t i;

	for (i = 0; tgt->av && i < tgt->av->n; i++)
		if (!memcmp(tgt->av->addr[i], addr, FAKE_ADDRLEN))
			return i;
	return FI_ADDR_NOTAVAIL;
}

/* Take the first posted receive that matches; -1 if none. */
static int rq_take(struct fake_ep *ep, int tagged, uint64_t tag,
		   struct fake_recv *out)
{
	size_t i;

	for (i = 0; i < ep->nrq; i++) {
		struct fake_recv *r = &ep->rq[i];

		if (r->tagged != tagged)
			continue;
		if (tagged && ((r->tag ^ tag) & ~r->ignore))
			continue;
		*out = *r;
		memmove(r, r + 1, (ep->nrq - i - 1) * sizeof(*r));
		ep->nrq--;
		return 0;
	}
	return -1;
}

static ssize_t do_send(struct fake_ep *ep, const void *buf, size_t len,
		       void *desc, fi_addr_t dest, void *ctx, int tagged,
		       uint64_t tag, int has_data, uint64_t data)
{
	struct fake_ep *tgt;
	struct fake_recv r;
	uint64_t fl;

	if (ep->dom->direct && len > FAKE_MTU) {
		violate("send larger than the MTU");
		return -FI_EMSGSIZE;
	}
	if (!desc_ok(ep, desc, buf, len)) {
		violate("send without a local descriptor (FI_MR_LOCAL)");
		return -FI_EINVAL;
	}
	tgt = ep_of_addr(ep, dest);
	if (!tgt) {
		cq_push(ep->tx, ctx, FI_SEND | FI_MSG, len, NULL, 0,
			FI_EHOSTUNREACH, 0);
		return 0;
	}
	if (rq_take(tgt, tagged, tag, &r)) {
		/* Receiver not ready: real EFA retries (RNR); the fake
		 * tells the sender to retry the post. */
		return -FI_EAGAIN;
	}
	fl = FI_RECV | (tagged ? FI_TAGGED : FI_MSG) |
	     (has_data ? FI_REMOTE_CQ_DATA : 0);
	if (len > r.len) {
		cq_push(tgt->rx, r.ctx, fl, len, NULL, 0, FI_ETRUNC,
			addr_in(tgt, ep->addr));
	} else {
		memcpy(r.buf, buf, len);
		cq_push(tgt->rx, r.ctx, fl, len, NULL, has_data ? data : 0, 0,
			addr_in(tgt, ep->addr));
	}
	cq_push(ep->tx, ctx, FI_SEND | (tagged ? FI_TAGGED : FI_MSG), 0, NULL,
		0, 0, 0);
	return 0;
}

static ssize_t do_recv(struct fake_ep *ep, void *buf, size_t len, void *desc,
		       void *ctx, int tagged, uint64_t tag, uint64_t ignore)
{
	struct fake_recv *r;

	if (!desc_ok(ep, desc, buf, len)) {
		violate("recv without a local descriptor (FI_MR_LOCAL)");
		return -FI_EINVAL;
	}
	if (ep->dom->direct && len > FAKE_MTU)
		len = FAKE_MTU;
	if (ep->nrq == ep->caprq) {
		ep->caprq = ep->caprq ? ep->caprq * 2 : 64;
		ep->rq = realloc(ep->rq, ep->caprq * sizeof(*ep->rq));
	}
	if (ep->nrq >= FAKE_RX_SIZE)
		return -FI_EAGAIN;
	r = &ep->rq[ep->nrq++];
	r->buf = buf;
	r->len = len;
	r->ctx = ctx;
	r->tagged = tagged;
	r->tag = tag;
	r->ignore = ignore;
	return 0;
}

/* An injected write (fi_inject_write(3)): no descriptor, and no
 * completion, neither success nor failure (as tcp's: a failure is
 * dropped). Set around do_rma() by the inject calls. */
static int injecting;

static ssize_t do_rma(struct fake_ep *ep, int write, void *buf, size_t len,
		      void *desc, fi_addr_t dest, uint64_t addr, uint64_t key,
		      void *ctx, int has_data, uint64_t data)
{
	struct fake_ep *tgt;
	struct fake_mr *mr;
	uint64_t fl = FI_RMA | (write ? FI_WRITE : FI_READ);

	if (ep->dom->direct && len > max_rdma) {
		violate("RMA larger than max_rdma_size");
		return -FI_EINVAL;
	}
	if (!injecting && !desc_ok(ep, desc, buf, len)) {
		violate("RMA without a local descriptor (FI_MR_LOCAL)");
		return -FI_EINVAL;
	}
	tgt = ep_of_addr(ep, dest);
	if (injecting && (!tgt || !rkey_find(key, addr, len, FI_REMOTE_WRITE)))
		return 0;
	if (!tgt) {
		cq_push(ep->tx, ctx, fl, len, NULL, 0, FI_EHOSTUNREACH, 0);
		return 0;
	}
	if (ep->dom->direct && !av_has(tgt->av, ep->addr)) {
		/* efa_fabric_comparison.md: the device cannot complete RMA
		 * from a peer the target has not inserted into its AV. */
		violate("RMA to a target whose AV lacks the initiator");
		cq_push(ep->tx, ctx, fl, len, NULL, 0, FI_EIO, 0);
		return 0;
	}
	mr = rkey_find(key, addr, len,
		       write ? FI_REMOTE_WRITE : FI_REMOTE_READ);
	if (!mr) {
		cq_push(ep->tx, ctx, fl, len, NULL, 0, FI_EACCES, 0);
		return 0;
	}
	if (has_data && ep->dom->rx_cq_data) {
		struct fake_recv r;

		if (rq_take(tgt, 0, 0, &r)) {
			violate("write with data and no posted receive "
				"(FI_RX_CQ_DATA)");
			cq_push(ep->tx, ctx, fl, len, NULL, 0, FI_ENOBUFS, 0);
			return 0;
		}
		if (write)
			memcpy((void *)(uintptr_t)addr, buf, len);
		cq_push(tgt->rx, r.ctx,
			FI_REMOTE_CQ_DATA | FI_RMA | FI_REMOTE_WRITE, len, NULL,
			data, 0, addr_in(tgt, ep->addr));
	} else {
		if (write)
			memcpy((void *)(uintptr_t)addr, buf, len);
		else
			memcpy(buf, (void *)(uintptr_t)addr, len);
		if (has_data)
			cq_push(tgt->rx, NULL,
				FI_REMOTE_CQ_DATA | FI_RMA | FI_REMOTE_WRITE,
				len, NULL, data, 0, addr_in(tgt, ep->addr));
	}
	if (!injecting)
		cq_push(ep->tx, ctx, fl, 0, NULL, 0, 0, 0);
	return 0;
}

#define EP(e) ((struct fake_ep *)(e))

static ssize_t ep_send(struct fid_ep *e, const void *buf, size_t len,
		       void *desc, fi_addr_t dest, void *ctx)
{
	return do_send(EP(e), buf, len, desc, dest, ctx, 0, 0, 0, 0);
}

static ssize_t ep_senddata(struct fid_ep *e, const void *buf, size_t len,
			   void *desc, uint64_t data, fi_addr_t dest, void *ctx)
{
	return do_send(EP(e), buf, len, desc, dest, ctx, 0, 0, 1, data);
}

static ssize_t ep_inject(struct fid_ep *e, const void *buf, size_t len,
			 fi_addr_t dest)
{
	struct fake_ep *ep = EP(e);

	if (len > (ep->dom->direct ? FAKE_INLINE : 4096))
		return -FI_EMSGSIZE;
	return do_send(ep, buf, len, NULL, dest, NULL, 0, 0, 0, 0);
}

static ssize_t ep_sendmsg(struct fid_ep *e, const struct fi_msg *m,
			  uint64_t flags)
{
	if (m->iov_count != 1)
		return -FI_ENOSYS;
	return do_send(EP(e), m->msg_iov[0].iov_base, m->msg_iov[0].iov_len,
		       m->desc ? m->desc[0] : NULL, m->addr, m->context, 0, 0,
		       !!(flags & FI_REMOTE_CQ_DATA), m->data);
}

static ssize_t ep_recv(struct fid_ep *e, void *buf, size_t len, void *desc,
		       fi_addr_t src, void *ctx)
{
	(void)src;
	return do_recv(EP(e), buf, len, desc, ctx, 0, 0, 0);
}

static ssize_t ep_recvmsg(struct fid_ep *e, const struct fi_msg *m,
			  uint64_t flags)
{
	(void)flags;
	if (m->iov_count > 1)
		return -FI_ENOSYS;
	return do_recv(EP(e), m->iov_count ? m->msg_iov[0].iov_base : NULL,
		       m->iov_count ? m->msg_iov[0].iov_len : 0,
		       m->desc ? m->desc[0] : NULL, m->context, 0, 0, 0);
}

static struct fi_ops_msg msg_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = ep_recv,
	.recvmsg = ep_recvmsg,
	.send = ep_send,
	.sendmsg = ep_sendmsg,
	.inject = ep_inject,
	.senddata = ep_senddata,
};

static ssize_t ep_tsend(struct fid_ep *e, const void *buf, size_t len,
			void *desc, fi_addr_t dest, uint64_t tag, void *ctx)
{
	return do_send(EP(e), buf, len, desc, dest, ctx, 1, tag, 0, 0);
}

static ssize_t ep_tsendmsg(struct fid_ep *e, const struct fi_msg_tagged *m,
			   uint64_t flags)
{
	if (m->iov_count != 1)
		return -FI_ENOSYS;
	return do_send(EP(e), m->msg_iov[0].iov_base, m->msg_iov[0].iov_len,
		       m->desc ? m->desc[0] : NULL, m->addr, m->context, 1,
		       m->tag, !!(flags & FI_REMOTE_CQ_DATA), m->data);
}

static ssize_t ep_trecv(struct fid_ep *e, void *buf, size_t len, void *desc,
			fi_addr_t src, uint64_t tag, uint64_t ignore, void *ctx)
{
	(void)src;
	return do_recv(EP(e), buf, len, desc, ctx, 1, tag, ignore);
}

static ssize_t ep_trecvmsg(struct fid_ep *e, const struct fi_msg_tagged *m,
			   uint64_t flags)
{
	(void)flags;
	if (m->iov_count > 1)
		return -FI_ENOSYS;
	return do_recv(EP(e), m->iov_count ? m->msg_iov[0].iov_base : NULL,
		       m->iov_count ? m->msg_iov[0].iov_len : 0,
		       m->desc ? m->desc[0] : NULL, m->context, 1, m->tag,
		       m->ignore);
}

static struct fi_ops_tagged tagged_ops = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = ep_trecv,
	.recvmsg = ep_trecvmsg,
	.send = ep_tsend,
	.sendmsg = ep_tsendmsg,
};

static ssize_t ep_write(struct fid_ep *e, const void *buf, size_t len,
			void *desc, fi_addr_t dest, uint64_t addr, uint64_t key,
			void *ctx)
{
	return do_rma(EP(e), 1, (void *)buf, len, desc, dest, addr, key, ctx, 0,
		      0);
}

static ssize_t ep_writedata(struct fid_ep *e, const void *buf, size_t len,
			    void *desc, uint64_t data, fi_addr_t dest,
			    uint64_t addr, uint64_t key, void *ctx)
{
	return do_rma(EP(e), 1, (void *)buf, len, desc, dest, addr, key, ctx, 1,
		      data);
}

static ssize_t inject_rma(struct fid_ep *e, const void *buf, size_t len,
			  fi_addr_t dest, uint64_t addr, uint64_t key,
			  int has_data, uint64_t data)
{
	struct fake_ep *ep = EP(e);
	ssize_t ret;

	/* efa-direct has no RMA inject (libfabric 2.x efa_rma_ops:
	 * fi_no_rma_inject), though it reports an inject size. */
	if (ep->dom->direct)
		return -FI_ENOSYS;
	if (len > 4096)
		return -FI_EMSGSIZE;
	injecting = 1;
	ret = do_rma(ep, 1, (void *)buf, len, NULL, dest, addr, key, NULL,
		     has_data, data);
	injecting = 0;
	return ret;
}

static ssize_t ep_inject_write(struct fid_ep *e, const void *buf, size_t len,
			       fi_addr_t dest, uint64_t addr, uint64_t key)
{
	return inject_rma(e, buf, len, dest, addr, key, 0, 0);
}

static ssize_t ep_inject_writedata(struct fid_ep *e, const void *buf,
				   size_t len, uint64_t data, fi_addr_t dest,
				   uint64_t addr, uint64_t key)
{
	return inject_rma(e, buf, len, dest, addr, key, 1, data);
}

static ssize_t ep_read(struct fid_ep *e, void *buf, size_t len, void *desc,
		       fi_addr_t src, uint64_t addr, uint64_t key, void *ctx)
{
	return do_rma(EP(e), 0, buf, len, desc, src, addr, key, ctx, 0, 0);
}

static ssize_t rma_msg(struct fid_ep *e, const struct fi_msg_rma *m,
		       uint64_t flags, int write)
{
	struct fake_ep *ep = EP(e);

	if (m->iov_count != 1 || m->rma_iov_count != 1) {
		if (ep->dom->direct) {
			violate("RMA with more than one IOV");
			return -FI_EINVAL;
		}
		return -FI_ENOSYS; /* the fake's efa moves one IOV */
	}
	if (m->rma_iov[0].len != m->msg_iov[0].iov_len)
		return -FI_EINVAL;
	return do_rma(ep, write, m->msg_iov[0].iov_base, m->msg_iov[0].iov_len,
		      m->desc ? m->desc[0] : NULL, m->addr, m->rma_iov[0].addr,
		      m->rma_iov[0].key, m->context,
		      write && (flags & FI_REMOTE_CQ_DATA), m->data);
}

static ssize_t ep_writemsg(struct fid_ep *e, const struct fi_msg_rma *m,
			   uint64_t flags)
{
	return rma_msg(e, m, flags, 1);
}

static ssize_t ep_readmsg(struct fid_ep *e, const struct fi_msg_rma *m,
			  uint64_t flags)
{
	return rma_msg(e, m, flags, 0);
}

static ssize_t ep_writev(struct fid_ep *e, const struct iovec *iov, void **desc,
			 size_t count, fi_addr_t dest, uint64_t addr,
			 uint64_t key, void *ctx)
{
	struct fi_rma_iov r = { .addr = addr, .key = key };
	struct fi_msg_rma m = {
		.msg_iov = iov,
		.desc = desc,
		.iov_count = count,
		.addr = dest,
		.rma_iov = &r,
		.rma_iov_count = 1,
		.context = ctx,
	};

	r.len = count ? iov[0].iov_len : 0;
	return rma_msg(e, &m, 0, 1);
}

static struct fi_ops_rma rma_ops = {
	.size = sizeof(struct fi_ops_rma),
	.read = ep_read,
	.readmsg = ep_readmsg,
	.write = ep_write,
	.writev = ep_writev,
	.writemsg = ep_writemsg,
	.inject = ep_inject_write,
	.writedata = ep_writedata,
	.injectdata = ep_inject_writedata,
};

/* efa fabric: 64-bit fetch-add and compare-swap, emulated. */
static ssize_t atomic_do(struct fid_ep *e, const struct fi_msg_atomic *m,
			 const struct fi_ioc *cmp, struct fi_ioc *res)
{
	struct fake_ep *ep = EP(e);
	struct fake_ep *tgt = ep_of_addr(ep, m->addr);
	struct fake_mr *mr;
	uint64_t *p, old;

	if (m->datatype != FI_UINT64 && m->datatype != FI_INT64)
		return -FI_ENOSYS;
	if (!tgt) {
		cq_push(ep->tx, m->context, FI_ATOMIC, 0, NULL, 0,
			FI_EHOSTUNREACH, 0);
		return 0;
	}
	mr = rkey_find(m->rma_iov[0].key, m->rma_iov[0].addr, 8,
		       res ? FI_REMOTE_READ | FI_REMOTE_WRITE
			   : FI_REMOTE_WRITE);
	if (!mr) {
		cq_push(ep->tx, m->context, FI_ATOMIC, 0, NULL, 0, FI_EACCES,
			0);
		return 0;
	}
	p = (uint64_t *)(uintptr_t)m->rma_iov[0].addr;
	old = *p;
	if (m->op == FI_SUM)
		*p = old + *(uint64_t *)m->msg_iov[0].addr;
	else if (m->op == FI_CSWAP) {
		if (old == *(uint64_t *)cmp[0].addr)
			*p = *(uint64_t *)m->msg_iov[0].addr;
	} else if (m->op == FI_ATOMIC_READ) {
	} else
		return -FI_ENOSYS;
	if (res)
		*(uint64_t *)res[0].addr = old;
	cq_push(ep->tx, m->context, FI_ATOMIC | (res ? FI_READ : FI_WRITE), 0,
		NULL, 0, 0, 0);
	return 0;
}

static ssize_t ep_atomicmsg(struct fid_ep *e, const struct fi_msg_atomic *m,
			    uint64_t flags)
{
	(void)flags;
	return atomic_do(e, m, NULL, NULL);
}

static ssize_t ep_fetch_atomicmsg(struct fid_ep *e,
				  const struct fi_msg_atomic *m,
				  struct fi_ioc *res, void **rdesc,
				  size_t rcount, uint64_t flags)
{
	(void)rdesc;
	(void)rcount;
	(void)flags;
	return atomic_do(e, m, NULL, res);
}

static ssize_t ep_compare_atomicmsg(struct fid_ep *e,
				    const struct fi_msg_atomic *m,
				    const struct fi_ioc *cmp, void **cdesc,
				    size_t ccount, struct fi_ioc *res,
				    void **rdesc, size_t rcount, uint64_t flags)
{
	(void)cdesc;
	(void)ccount;
	(void)rdesc;
	(void)rcount;
	(void)flags;
	return atomic_do(e, m, cmp, res);
}

static int ep_atomicvalid(struct fid_ep *e, enum fi_datatype dt, enum fi_op op,
			  size_t *count)
{
	(void)e;
	if ((dt != FI_UINT64 && dt != FI_INT64) ||
	    (op != FI_SUM && op != FI_CSWAP && op != FI_ATOMIC_READ))
		return -FI_EOPNOTSUPP;
	*count = 1;
	return 0;
}

static int ep_fetch_atomicvalid(struct fid_ep *e, enum fi_datatype dt,
				enum fi_op op, size_t *count)
{
	return ep_atomicvalid(e, dt, op, count);
}

static int ep_compare_atomicvalid(struct fid_ep *e, enum fi_datatype dt,
				  enum fi_op op, size_t *count)
{
	return ep_atomicvalid(e, dt, op, count);
}

static struct fi_ops_atomic atomic_ops = {
	.size = sizeof(struct fi_ops_atomic),
	.writemsg = ep_atomicmsg,
	.readwritemsg = ep_fetch_atomicmsg,
	.compwritemsg = ep_compare_atomicmsg,
	.writevalid = ep_atomicvalid,
	.readwritevalid = ep_fetch_atomicvalid,
	.compwritevalid = ep_compare_atomicvalid,
};

/* Tables for efa-direct: every tagged and atomic op is -FI_ENOSYS. */
static struct fi_ops_tagged tagged_none = {
	.size = sizeof(struct fi_ops_tagged),
};
static struct fi_ops_atomic atomic_none = {
	.size = sizeof(struct fi_ops_atomic),
};

static int ep_getname(fid_t f, void *addr, size_t *len)
{
	struct fake_ep *ep = (struct fake_ep *)f;
	size_t n = *len < FAKE_ADDRLEN ? *len : FAKE_ADDRLEN;

	memcpy(addr, ep->addr, n);
	*len = FAKE_ADDRLEN;
	return n < FAKE_ADDRLEN ? -FI_ETOOSMALL : 0;
}

static struct fi_ops_cm cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.getname = ep_getname,
};

static ssize_t ep_cancel(fid_t f, void *ctx)
{
	struct fake_ep *ep = (struct fake_ep *)f;
	size_t i;

	if (ep->dom->direct) {
		/* fi_efa(7): no fi_cancel on efa-direct */
		violate("fi_cancel on efa-direct");
		return -FI_ENOSYS;
	}
	for (i = 0; i < ep->nrq; i++) {
		if (ep->rq[i].ctx != ctx)
			continue;
		memmove(&ep->rq[i], &ep->rq[i + 1],
			(ep->nrq - i - 1) * sizeof(ep->rq[0]));
		ep->nrq--;
		cq_push(ep->rx, ctx, FI_RECV, 0, NULL, 0, FI_ECANCELED, 0);
		return 0;
	}
	return -FI_ENOENT;
}

static int ep_getopt(fid_t f, int level, int name, void *val, size_t *len)
{
	struct fake_ep *ep = (struct fake_ep *)f;

	if (level != FI_OPT_ENDPOINT || *len < sizeof(size_t))
		return -FI_ENOPROTOOPT;
	if (name == FAKE_OPT_MAX_MSG_SIZE)
		*(size_t *)val = ep->dom->direct ? FAKE_MTU : SIZE_MAX;
	else if (name == FAKE_OPT_MAX_RMA_SIZE)
		*(size_t *)val = ep->dom->direct ? max_rdma : SIZE_MAX;
	else if (name == FAKE_OPT_INJECT_MSG_SIZE)
		*(size_t *)val = ep->dom->direct ? FAKE_INLINE : 4096;
	else if (name == FAKE_OPT_INJECT_RMA_SIZE)
		*(size_t *)val = ep->dom->direct ? 0 : 4096;
	else if (name == FI_OPT_MIN_MULTI_RECV)
		*(size_t *)val = 0;
	else
		return -FI_ENOPROTOOPT;
	*len = sizeof(size_t);
	return 0;
}

static int ep_setopt(fid_t f, int level, int name, const void *val, size_t len)
{
	(void)f;
	(void)val;
	(void)len;
	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	/* accepted and ignored: CUDA_API_PERMITTED, SHARED_MEMORY_PERMITTED,
	 * EFA_RNR_RETRY, ... */
	(void)name;
	return 0;
}

static struct fi_ops_ep ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = ep_cancel,
	.getopt = ep_getopt,
	.setopt = ep_setopt,
};

static int ep_close(struct fid *f)
{
	struct fake_ep *ep = (struct fake_ep *)f;

	eps[ep->id] = NULL;
	free(ep->rq);
	free(ep);
	return 0;
}

static int ep_bind(struct fid *f, struct fid *b, uint64_t flags)
{
	struct fake_ep *ep = (struct fake_ep *)f;

	if (b->fclass == FI_CLASS_AV) {
		ep->av = (struct fake_av *)b;
	} else if (b->fclass == FI_CLASS_CQ) {
		if (flags & FI_TRANSMIT)
			ep->tx = (struct fake_cq *)b;
		if (flags & FI_RECV)
			ep->rx = (struct fake_cq *)b;
	} else {
		return -FI_EINVAL;
	}
	return 0;
}

static int ep_control(struct fid *f, int cmd, void *arg)
{
	struct fake_ep *ep = (struct fake_ep *)f;

	(void)arg;
	if (cmd != FI_ENABLE)
		return -FI_ENOSYS;
	if (!ep->av || !ep->tx || !ep->rx)
		return -FI_ENOCQ;
	ep->enabled = 1;
	return 0;
}

static struct fi_ops ep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = ep_close,
	.bind = ep_bind,
	.control = ep_control,
};

static int dom_endpoint(struct fid_domain *d, struct fi_info *info,
			struct fid_ep **out, void *ctx)
{
	struct fake_domain *dom = (struct fake_domain *)d;
	struct fake_ep *ep;
	uint32_t id;

	(void)info;
	for (id = 1; id < FAKE_MAX_EP && eps[id]; id++)
		;
	if (id == FAKE_MAX_EP)
		return -FI_ENOSPC;
	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -FI_ENOMEM;
	ep->id = id;
	ep->dom = dom;
	nic_gid(dom->nic, ep->addr);
	ep->addr[16] = (uint8_t)id;
	ep->addr[17] = (uint8_t)(id >> 8);
	ep->addr[20] = 0x11; /* qkey */
	/* bytes 24..27: this process, so that a peer in another process
	 * (unreachable for an in-process fake) never aliases a local one */
	{
		uint32_t pid = (uint32_t)getpid();

		memcpy(ep->addr + 24, &pid, sizeof(pid));
	}
	ep->ep.fid.fclass = FI_CLASS_EP;
	ep->ep.fid.context = ctx;
	ep->ep.fid.ops = &ep_fi_ops;
	ep->ep.ops = &ep_ops;
	ep->ep.cm = &cm_ops;
	ep->ep.msg = &msg_ops;
	ep->ep.rma = &rma_ops;
	ep->ep.tagged = dom->direct ? &tagged_none : &tagged_ops;
	ep->ep.atomic = dom->direct ? &atomic_none : &atomic_ops;
	eps[id] = ep;
	*out = &ep->ep;
	return 0;
}

static int dom_query_atomic(struct fid_domain *d, enum fi_datatype dt,
			    enum fi_op op, struct fi_atomic_attr *attr,
			    uint64_t flags)
{
	struct fake_domain *dom = (struct fake_domain *)d;
	size_t cnt;
	int ret;

	(void)flags;
	if (dom->direct)
		return -FI_EOPNOTSUPP;
	ret = ep_atomicvalid(NULL, dt, op, &cnt);
	if (ret)
		return ret;
	attr->count = 1;
	attr->size = 8;
	return 0;
}

static int dom_close(struct fid *f)
{
	struct fake_domain *dom = (struct fake_domain *)f;

	fi_freeinfo(dom->info);
	free(dom);
	return 0;
}

static struct fi_ops dom_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = dom_close,
};
static struct fi_ops_domain dom_ops = {
	.size = sizeof(struct fi_ops_domain),
	.av_open = dom_av_open,
	.cq_open = dom_cq_open,
	.endpoint = dom_endpoint,
	.query_atomic = dom_query_atomic,
};

static int fab_domain(struct fid_fabric *f, struct fi_info *info,
		      struct fid_domain **out, void *ctx)
{
	struct fake_fabric *fab = (struct fake_fabric *)f;
	struct fake_domain *dom = calloc(1, sizeof(*dom));
	const char *n = info->domain_attr->name;
	int i;

	if (!dom)
		return -FI_ENOMEM;
	dom->direct = fab->direct;
	dom->rx_cq_data = !!(info->mode & FI_RX_CQ_DATA) ||
			  !!(info->rx_attr &&
			     (info->rx_attr->mode & FI_RX_CQ_DATA));
	for (i = 0; i < nnics(); i++) {
		char name[64];

		snprintf(name, sizeof(name), "%s-rdm", nic_name(i));
		if (n && !strcmp(n, name))
			dom->nic = i;
	}
	dom->info = fi_dupinfo(info);
	dom->dom.fid.fclass = FI_CLASS_DOMAIN;
	dom->dom.fid.context = ctx;
	dom->dom.fid.ops = &dom_fi_ops;
	dom->dom.ops = &dom_ops;
	dom->dom.mr = &mr_ops;
	*out = &dom->dom;
	return 0;
}

static int fab_close(struct fid *f)
{
	free(f);
	return 0;
}

static int fab_trywait(struct fid_fabric *f, struct fid **fids, int count)
{
	(void)f;
	(void)fids;
	(void)count;
	return -FI_ENOSYS; /* no wait objects: the caller polls */
}

static struct fi_ops fab_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = fab_close,
};
static struct fi_ops_fabric fab_ops = {
	.size = sizeof(struct fi_ops_fabric),
	.domain = fab_domain,
	.trywait = fab_trywait,
};

static int prov_fabric(struct fi_fabric_attr *attr, struct fid_fabric **out,
		       void *ctx)
{
	struct fake_fabric *fab = calloc(1, sizeof(*fab));

	if (!fab)
		return -FI_ENOMEM;
	fab->direct = attr->name && !strcmp(attr->name, "efa-direct");
	fab->fab.fid.fclass = FI_CLASS_FABRIC;
	fab->fab.fid.context = ctx;
	fab->fab.fid.ops = &fab_fi_ops;
	fab->fab.ops = &fab_ops;
	*out = &fab->fab;
	return 0;
}

static int prov_getinfo(uint32_t version, const char *node, const char *service,
			uint64_t flags, const struct fi_info *hints,
			struct fi_info **info)
{
	const char *p = profile();
	struct fi_info *head = NULL, **tail = &head;
	int order[2] = { 1, 0 }, k, i;

	(void)version;
	(void)node;
	(void)service;
	(void)flags;
	for (k = 0; k < 2; k++) {
		int direct = order[k];

		if (direct && !strcmp(p, "efa"))
			continue;
		if (!direct && !strcmp(p, "direct"))
			continue;
		if (!hints_ok(direct, hints))
			continue;
		for (i = 0; i < nnics(); i++) {
			struct fi_info *fi;
			char dom[64];

			snprintf(dom, sizeof(dom), "%s-rdm", nic_name(i));
			if (hints && hints->domain_attr &&
			    hints->domain_attr->name &&
			    strcmp(hints->domain_attr->name, dom))
				continue;
			fi = make_info(direct, i, hints);
			if (!fi)
				break;
			if (hints && hints->caps) {
				/* report what was asked for, as the
				 * provider's info filter does */
				fi->caps = (fi->caps & hints->caps) |
					   (fi->caps &
					    (FI_LOCAL_COMM | FI_REMOTE_COMM));
			}
			*tail = fi;
			tail = &fi->next;
		}
	}
	*info = head;
	return head ? 0 : -FI_ENODATA;
}

static void prov_cleanup(void)
{
}

static struct fi_provider fake_prov = {
	.name = "efa",
	/* Higher than any real efa's OFI_VERSION_DEF_PROV (1.17: 117.0,
	 * 2.1: 201.0): src/fabric.c ofi_insert_prov() keeps the newer of two
	 * providers of one name and hides the other. */
	.version = FI_VERSION(999, 0),
	.getinfo = prov_getinfo,
	.fabric = prov_fabric,
	.cleanup = prov_cleanup,
};

FI_EXT_INI
{
	const char *m = getenv("TERN_FAKEEFA_MAX_RDMA");

	if (m && strtoull(m, NULL, 0))
		max_rdma = strtoull(m, NULL, 0);
	fill_nosys(&cq_fi_ops, sizeof(cq_fi_ops));
	fill_nosys(&cq_ops, sizeof(cq_ops));
	fill_nosys(&av_fi_ops, sizeof(av_fi_ops));
	fill_nosys(&av_ops, sizeof(av_ops));
	fill_nosys(&mr_fi_ops, sizeof(mr_fi_ops));
	fill_nosys(&mr_ops, sizeof(mr_ops));
	fill_nosys(&msg_ops, sizeof(msg_ops));
	fill_nosys(&tagged_ops, sizeof(tagged_ops));
	fill_fn(&tagged_none, sizeof(tagged_none), fake_forbidden);
	fill_nosys(&rma_ops, sizeof(rma_ops));
	fill_nosys(&atomic_ops, sizeof(atomic_ops));
	fill_fn(&atomic_none, sizeof(atomic_none), fake_forbidden);
	fill_nosys(&cm_ops, sizeof(cm_ops));
	fill_nosys(&ep_ops, sizeof(ep_ops));
	fill_nosys(&ep_fi_ops, sizeof(ep_fi_ops));
	fill_nosys(&dom_fi_ops, sizeof(dom_fi_ops));
	fill_nosys(&dom_ops, sizeof(dom_ops));
	fill_nosys(&fab_fi_ops, sizeof(fab_fi_ops));
	fill_nosys(&fab_ops, sizeof(fab_ops));
	fill_nosys(&nic_fi_ops, sizeof(nic_fi_ops));
	/* The API this libfabric speaks, so fi_getinfo never skips us. */
	fake_prov.fi_version = fi_version();
	return &fake_prov;
}
