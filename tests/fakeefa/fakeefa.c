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
 * The knobs (TERN_FAKEEFA_*) and the rules it counts: fakeefa_rules.c;
 * this file builds the fi_info list, the fabric and the domain; the
 * other objects and the data operations live in the files fakeefa.h
 * names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakeefa.h"

/* ---- fi_info ---- */
static const char *nic_name(int i)
{
	static const char *names[] = {
		"rdmap16s27", "rdmap32s27", "rdmap48s27",  "rdmap64s27",
		"rdmap79s27", "rdmap96s27", "rdmap112s27", "rdmap128s27",
	};

	return names[i % 8];
}

void fake_nic_gid(int nic, uint8_t *gid)
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
	fake_nic_gid(nic, src);
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
	fi->tx_attr->inject_size = direct ? FAKE_INLINE : FAKE_INJECT;
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
	fi->ep_attr->max_msg_size = direct ? (fake_max_rdma > FAKE_MTU
						      ? fake_max_rdma
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

/* ---- domain and fabric ---- */
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
	ret = fake_atomic_valid(NULL, dt, op, &cnt);
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
	.av_open = fake_av_open,
	.cq_open = fake_cq_open,
	.endpoint = fake_ep_open,
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
	for (i = 0; i < fake_nnics(); i++) {
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
	fake_mr_attach(dom);
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
	const char *p = fake_profile();
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
		for (i = 0; i < fake_nnics(); i++) {
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
	fake_rules_init();
	fake_cq_init();
	fake_mr_init();
	fake_ep_init();
	fake_ops_init();
	fake_fill_nosys(&dom_fi_ops, sizeof(dom_fi_ops));
	fake_fill_nosys(&dom_ops, sizeof(dom_ops));
	fake_fill_nosys(&fab_fi_ops, sizeof(fab_fi_ops));
	fake_fill_nosys(&fab_ops, sizeof(fab_ops));
	fake_fill_nosys(&nic_fi_ops, sizeof(nic_fi_ops));
	/* The API this libfabric speaks, so fi_getinfo never skips us. */
	fake_prov.fi_version = fi_version();
	return &fake_prov;
}
