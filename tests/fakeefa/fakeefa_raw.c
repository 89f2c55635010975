// SPDX-License-Identifier: MIT
/*
 * Raw libfabric checks of the fake efa provider (no tern): each profile is
 * opened through the system libfabric with FI_PROVIDER_PATH naming the
 * fake's directory, and each efa-direct rule and happy path is proven.
 * Fails (never skips) when the fake is not the provider answering.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

static int failures;

#define CHECK(c)                                                         \
	do {                                                             \
		if (!(c)) {                                              \
			fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, \
				__LINE__, #c);                           \
			failures++;                                      \
		}                                                        \
	} while (0)

#define MUST(c)                                                         \
	do {                                                            \
		if (!(c)) {                                             \
			fprintf(stderr, "%s:%d: FATAL: %s\n", __FILE__, \
				__LINE__, #c);                          \
			exit(1);                                        \
		}                                                       \
	} while (0)

struct node {
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	fi_addr_t peer;
	char addr[64];
};

struct env {
	struct fi_info *info;
	struct fid_fabric *fab;
	struct fid_domain *dom;
};

static struct fi_info *hints_for(const char *fabric, uint64_t caps,
				 uint64_t mode)
{
	struct fi_info *h = fi_allocinfo();

	h->caps = caps;
	h->mode = mode;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED |
				  FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	h->fabric_attr->prov_name = strdup("efa");
	h->fabric_attr->name = strdup(fabric);
	return h;
}

static int getinfo(const char *fabric, uint64_t caps, uint64_t mode,
		   struct fi_info **out)
{
	struct fi_info *h = hints_for(fabric, caps, mode);
	int ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, out);

	fi_freeinfo(h);
	return ret;
}

static void env_open(struct env *e, const char *fabric, uint64_t caps,
		     uint64_t mode)
{
	MUST(getinfo(fabric, caps, mode, &e->info) == 0);
	/* The answer must come from the fake (version 999.0), not from a
	 * builtin efa. */
	MUST(e->info->fabric_attr->prov_version == FI_VERSION(999, 0));
	MUST(!strcmp(e->info->fabric_attr->name, fabric));
	MUST(fi_fabric(e->info->fabric_attr, &e->fab, NULL) == 0);
	MUST(fi_domain(e->fab, e->info, &e->dom, NULL) == 0);
}

static void node_open(struct env *e, struct node *n)
{
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_DATA };
	struct fi_av_attr ava = { .type = FI_AV_TABLE };
	size_t len = sizeof(n->addr);

	memset(n, 0, sizeof(*n));
	MUST(fi_cq_open(e->dom, &cqa, &n->cq, NULL) == 0);
	MUST(fi_av_open(e->dom, &ava, &n->av, NULL) == 0);
	MUST(fi_endpoint(e->dom, e->info, &n->ep, NULL) == 0);
	MUST(fi_ep_bind(n->ep, &n->av->fid, 0) == 0);
	MUST(fi_ep_bind(n->ep, &n->cq->fid, FI_TRANSMIT | FI_RECV) == 0);
	MUST(fi_enable(n->ep) == 0);
	MUST(fi_getname(&n->ep->fid, n->addr, &len) == 0);
	MUST(len == 32);
}

static void insert(struct node *at, struct node *who)
{
	MUST(fi_av_insert(at->av, who->addr, 1, &at->peer, 0, NULL) == 1);
}

static void node_close(struct node *n)
{
	fi_close(&n->ep->fid);
	fi_close(&n->av->fid);
	fi_close(&n->cq->fid);
}

static void env_close(struct env *e)
{
	fi_close(&e->dom->fid);
	fi_close(&e->fab->fid);
	fi_freeinfo(e->info);
}

/* One completion: 1 = ok (into *c), 0 = error (into *err). */
static int wait_one(struct fid_cq *cq, struct fi_cq_data_entry *c,
		    struct fi_cq_err_entry *err)
{
	for (int i = 0; i < 1000; i++) {
		ssize_t r = fi_cq_read(cq, c, 1);

		if (r == 1)
			return 1;
		if (r == -FI_EAVAIL) {
			MUST(fi_cq_readerr(cq, err, 0) == 1);
			return 0;
		}
		MUST(r == -FI_EAGAIN);
	}
	fprintf(stderr, "no completion\n");
	exit(1);
}

static struct fid_mr *reg(struct env *e, void *buf, size_t len, uint64_t access)
{
	struct fid_mr *mr;

	MUST(fi_mr_reg(e->dom, buf, len, access, 0, 0, 0, &mr, NULL) == 0);
	return mr;
}

static int (*violations)(void);

/* efa-direct's objects for the checks below: a and b know each other, c
 * knows b, which never inserts c; src and dst are registered (ms, md),
 * mro is 4 KiB of dst read-only. */
struct dir {
	struct env e;
	struct node a, b, c;
	struct fid_mr *ms, *md, *mro;
	char *src, *dst;
	uint64_t ctx2[4];
};

#define DIR_BUF (4 << 20)

/* What efa-direct's infos say, and its objects opened. */
static void direct_open(struct dir *d, uint64_t rx_cq_data)
{
	static char src[DIR_BUF], dst[DIR_BUF];
	struct env *e = &d->e;
	struct fi_info *fi;
	size_t max_rdma = 0, len = sizeof(max_rdma);

	/* Capabilities efa-direct lacks yield nothing. */
	CHECK(getinfo("efa-direct", FI_MSG | FI_TAGGED, FI_CONTEXT2, &fi) ==
	      -FI_ENODATA);
	CHECK(getinfo("efa-direct", FI_MSG | FI_ATOMIC, FI_CONTEXT2, &fi) ==
	      -FI_ENODATA);
	/* FI_CONTEXT2 is required. */
	CHECK(getinfo("efa-direct", FI_MSG | FI_RMA, 0, &fi) == -FI_ENODATA);

	env_open(e, "efa-direct", FI_MSG | FI_RMA, FI_CONTEXT2 | rx_cq_data);
	CHECK(e->info->domain_attr->mr_mode & FI_MR_LOCAL);
	CHECK(e->info->domain_attr->cq_data_size == 4);
	CHECK(e->info->domain_attr->mr_key_size == 4);
	CHECK(e->info->mode & FI_CONTEXT2);
	CHECK(!!(e->info->mode & FI_RX_CQ_DATA) == !!rx_cq_data);
	CHECK(e->info->addr_format == FI_ADDR_EFA);
	CHECK(!(e->info->caps & (FI_TAGGED | FI_ATOMIC)));
	CHECK(e->info->tx_attr->size == 4096 && e->info->rx_attr->size == 8192);
	CHECK(!strcmp(e->info->domain_attr->name, "rdmap16s27-rdm"));
	node_open(e, &d->a);
	node_open(e, &d->b);
	node_open(e, &d->c);
	insert(&d->a, &d->b);
	insert(&d->b, &d->a);
	insert(&d->c, &d->b); /* b never inserts c */
	CHECK(fi_getopt(&d->a.ep->fid, FI_OPT_ENDPOINT,
			14 /* FI_OPT_MAX_RMA_SIZE */, &max_rdma, &len) == 0);
	CHECK(max_rdma == 1 << 20);

	d->src = src;
	d->dst = dst;
	d->ms = reg(e, src, DIR_BUF, FI_SEND | FI_WRITE | FI_READ);
	d->md = reg(e, dst, DIR_BUF,
		    FI_RECV | FI_REMOTE_WRITE | FI_REMOTE_READ);
	d->mro = reg(e, dst + (2 << 20), 4096, FI_REMOTE_READ);
	for (size_t i = 0; i < DIR_BUF; i++)
		src[i] = (char)(i * 7 + 1);
}

/* Messages: one that lands, and each refusal (size, descriptor, tags,
 * atomics, cancel). */
static void direct_msg(struct dir *d)
{
	struct fi_cq_data_entry ce;
	struct fi_cq_err_entry ee;
	struct fi_atomic_attr aa;
	void *ds = fi_mr_desc(d->ms), *dd = fi_mr_desc(d->md);
	uint64_t *ctx2 = d->ctx2;
	fi_addr_t p = d->a.peer;

	/* send/recv of 100 bytes */
	CHECK(fi_recv(d->b.ep, d->dst, 8192, dd, 0, ctx2) == 0);
	CHECK(fi_send(d->a.ep, d->src, 100, ds, p, ctx2 + 1) == 0);
	CHECK(wait_one(d->a.cq, &ce, &ee) && ce.op_context == ctx2 + 1);
	CHECK(wait_one(d->b.cq, &ce, &ee) && ce.op_context == ctx2 &&
	      ce.len == 100 && (ce.flags & FI_RECV));
	CHECK(!memcmp(d->dst, d->src, 100));

	/* oversize send refused */
	CHECK(fi_send(d->a.ep, d->src, 8929, ds, p, NULL) == -FI_EMSGSIZE);
	/* NULL desc refused under FI_MR_LOCAL */
	CHECK(fi_send(d->a.ep, d->src, 100, NULL, p, NULL) == -FI_EINVAL);
	CHECK(fi_write(d->a.ep, d->src, 100, NULL, p, (uintptr_t)d->dst,
		       fi_mr_key(d->md), NULL) == -FI_EINVAL);
	/* tagged refused, atomics absent, cancel ENOSYS */
	CHECK(fi_tsend(d->a.ep, d->src, 10, ds, p, 1, NULL) == -FI_ENOSYS);
	CHECK(fi_query_atomic(d->e.dom, FI_UINT64, FI_SUM, &aa, 0) != 0);
	CHECK(fi_recv(d->b.ep, d->dst, 64, dd, 0, ctx2 + 2) == 0);
	CHECK(fi_cancel(&d->b.ep->fid, ctx2 + 2) == -FI_ENOSYS);
}

/* RMA: the right bytes, and each refusal (size, IOVs, access, AV). */
static void direct_rma(struct dir *d)
{
	struct fi_cq_data_entry ce;
	struct fi_cq_err_entry ee;
	char *src = d->src, *dst = d->dst;
	void *ds = fi_mr_desc(d->ms);
	uint64_t kd = fi_mr_key(d->md), *ctx2 = d->ctx2;
	fi_addr_t p = d->a.peer;
	struct iovec iov[2] = { { src, 64 }, { src + 64, 64 } };
	void *d2[2] = { ds, ds };
	struct fi_rma_iov r = { (uintptr_t)dst, 128, kd };
	struct fi_msg_rma m = { .msg_iov = iov,
				.desc = d2,
				.iov_count = 2,
				.addr = p,
				.rma_iov = &r,
				.rma_iov_count = 1 };

	/* write and read: the right bytes */
	memset(dst, 0, DIR_BUF);
	CHECK(fi_write(d->a.ep, src, 1 << 20, ds, p, (uintptr_t)dst, kd,
		       ctx2) == 0);
	CHECK(wait_one(d->a.cq, &ce, &ee) && ce.op_context == ctx2);
	CHECK(!memcmp(dst, src, 1 << 20));
	memset(src, 0, 4096);
	CHECK(fi_read(d->a.ep, src, 4096, ds, p, (uintptr_t)dst, kd, ctx2) ==
	      0);
	CHECK(wait_one(d->a.cq, &ce, &ee) && !memcmp(src, dst, 4096));

	/* oversize RMA refused; more than one IOV refused */
	CHECK(fi_write(d->a.ep, src, (1 << 20) + 1, ds, p, (uintptr_t)dst, kd,
		       NULL) < 0);
	CHECK(fi_writemsg(d->a.ep, &m, 0) < 0);
	/* remote access checked: write into a read-only region fails */
	CHECK(fi_write(d->a.ep, src, 64, ds, p, (uintptr_t)dst + (2 << 20),
		       fi_mr_key(d->mro), ctx2) == 0);
	CHECK(!wait_one(d->a.cq, &ce, &ee) && ee.err == FI_EACCES);

	/* RMA from c, which b's AV does not hold, completes in error */
	CHECK(fi_write(d->c.ep, src, 64, ds, d->c.peer, (uintptr_t)dst, kd,
		       ctx2 + 3) == 0);
	CHECK(!wait_one(d->c.cq, &ce, &ee) && ee.op_context == ctx2 + 3);
}

/* A write with data consumes the posted receive only with
 * FI_RX_CQ_DATA. */
static void direct_writedata(struct dir *d, uint64_t rx_cq_data)
{
	struct fi_cq_data_entry ce;
	struct fi_cq_err_entry ee;
	void *ds = fi_mr_desc(d->ms);
	uint64_t kd = fi_mr_key(d->md), *ctx2 = d->ctx2;
	uintptr_t dst = (uintptr_t)d->dst;
	fi_addr_t p = d->a.peer;

	CHECK(fi_writedata(d->a.ep, d->src, 64, ds, 0xabcd, p, dst, kd, ctx2) ==
	      0);
	CHECK(wait_one(d->a.cq, &ce, &ee));
	CHECK(wait_one(d->b.cq, &ce, &ee) && ce.data == 0xabcd &&
	      (ce.flags & FI_REMOTE_CQ_DATA));
	if (rx_cq_data) {
		/* the receive posted for the cancel test was used */
		CHECK(ce.op_context == ctx2 + 2);
		CHECK(fi_writedata(d->a.ep, d->src, 64, ds, 1, p, dst, kd,
				   ctx2) == 0);
		CHECK(!wait_one(d->a.cq, &ce, &ee)); /* no receive left */
	} else {
		CHECK(ce.op_context == NULL);
		/* the receive is still there: a send lands in it */
		CHECK(fi_send(d->a.ep, d->src, 10, ds, p, NULL) == 0);
		CHECK(wait_one(d->a.cq, &ce, &ee));
		CHECK(wait_one(d->b.cq, &ce, &ee) && ce.op_context == ctx2 + 2);
	}
}

static void direct(uint64_t rx_cq_data)
{
	struct dir d;
	int v0 = violations();

	direct_open(&d, rx_cq_data);
	direct_msg(&d);
	direct_rma(&d);
	direct_writedata(&d, rx_cq_data);
	/* 8 rule violations above: oversize send, 2 NULL descs, tagged
	 * send, cancel, oversize RMA, 2-IOV RMA, RMA outside the target's AV
	 * (+1 with FI_RX_CQ_DATA: write with data and no receive) */
	CHECK(violations() - v0 == 8 + (rx_cq_data ? 1 : 0));
	fi_close(&d.ms->fid);
	fi_close(&d.md->fid);
	fi_close(&d.mro->fid);
	node_close(&d.a);
	node_close(&d.b);
	node_close(&d.c);
	env_close(&d.e);
}

static void efa(void)
{
	struct env e;
	struct node a, b;
	struct fi_cq_data_entry ce;
	struct fi_cq_err_entry ee;
	static char src[4 << 20], dst[4 << 20];
	static uint64_t word, res, cmp, op;
	struct fid_mr *mw;
	uint64_t ctx[4];
	int v0 = violations();

	env_open(&e, "efa", FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC,
		 FI_RX_CQ_DATA);
	CHECK(!(e.info->mode & FI_RX_CQ_DATA));
	CHECK(e.info->ep_attr->max_msg_size == UINT64_MAX);
	CHECK(!(e.info->domain_attr->mr_mode & FI_MR_LOCAL));
	CHECK(!(e.info->mode & FI_CONTEXT2));
	node_open(&e, &a);
	node_open(&e, &b);
	insert(&a, &b); /* b does not insert a: no AV rule on efa */
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (char)(i * 3 + 5);
	mw = reg(&e, dst, sizeof(dst), FI_REMOTE_WRITE | FI_REMOTE_READ);

	/* tagged message of 1 MiB, no descriptors */
	CHECK(fi_trecv(b.ep, dst, 1 << 20, NULL, 0, 7, 0, ctx) == 0);
	CHECK(fi_tsend(a.ep, src, 1 << 20, NULL, a.peer, 7, ctx + 1) == 0);
	CHECK(wait_one(b.cq, &ce, &ee) && ce.op_context == ctx &&
	      (ce.flags & FI_TAGGED));
	CHECK(wait_one(a.cq, &ce, &ee));
	CHECK(!memcmp(dst, src, 1 << 20));
	/* RMA of 4 MiB */
	memset(dst, 0, sizeof(dst));
	CHECK(fi_write(a.ep, src, 4 << 20, NULL, a.peer, (uintptr_t)dst,
		       fi_mr_key(mw), ctx) == 0);
	CHECK(wait_one(a.cq, &ce, &ee) && !memcmp(dst, src, 4 << 20));
	/* out of bounds write fails */
	CHECK(fi_write(a.ep, src, 64, NULL, a.peer,
		       (uintptr_t)dst + (4 << 20) - 32, fi_mr_key(mw),
		       ctx) == 0);
	CHECK(!wait_one(a.cq, &ce, &ee) && ee.err == FI_EACCES);
	/* cancel a posted receive */
	CHECK(fi_recv(b.ep, dst, 64, NULL, 0, ctx + 2) == 0);
	CHECK(fi_cancel(&b.ep->fid, ctx + 2) == 0);
	CHECK(!wait_one(b.cq, &ce, &ee) && ee.err == FI_ECANCELED &&
	      ee.op_context == ctx + 2);
	/* atomics: fetch-add and compare-swap */
	{
		struct fid_mr *mwd = reg(&e, &word, 8,
					 FI_REMOTE_WRITE | FI_REMOTE_READ);
		struct fi_ioc o = { &op, 1 }, r = { &res, 1 }, cc = { &cmp, 1 };
		struct fi_rma_ioc ri = { (uintptr_t)&word, 1, fi_mr_key(mwd) };
		struct fi_msg_atomic m = { .msg_iov = &o,
					   .iov_count = 1,
					   .addr = a.peer,
					   .rma_iov = &ri,
					   .rma_iov_count = 1,
					   .datatype = FI_UINT64,
					   .op = FI_SUM };

		word = 40;
		op = 2;
		CHECK(fi_fetch_atomicmsg(a.ep, &m, &r, NULL, 1, 0) == 0);
		CHECK(wait_one(a.cq, &ce, &ee) && res == 40 && word == 42);
		m.op = FI_CSWAP;
		cmp = 42;
		op = 7;
		CHECK(fi_compare_atomicmsg(a.ep, &m, &cc, NULL, 1, &r, NULL, 1,
					   0) == 0);
		CHECK(wait_one(a.cq, &ce, &ee) && res == 42 && word == 7);
		fi_close(&mwd->fid);
	}
	CHECK(violations() == v0);
	fi_close(&mw->fid);
	node_close(&a);
	node_close(&b);
	env_close(&e);
}

int main(void)
{
	const char *dir = getenv("FI_PROVIDER_PATH");
	struct fi_info *fi = NULL, *i;
	char path[4096];
	void *h;
	int ndirect = 0, nefa = 0, first_direct = -1;

	MUST(dir);
	setenv("TERN_FAKEEFA_PROFILE", "both", 1);
	MUST(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, NULL, &fi) == 0);
	for (i = fi; i; i = i->next) {
		if (strcmp(i->fabric_attr->prov_name, "efa"))
			continue;
		MUST(i->fabric_attr->prov_version == FI_VERSION(999, 0));
		if (!strcmp(i->fabric_attr->name, "efa-direct")) {
			ndirect++;
			if (first_direct < 0)
				first_direct = !nefa;
		} else {
			nefa++;
		}
	}
	fi_freeinfo(fi);
	CHECK(ndirect == 4 && nefa == 4 && first_direct == 1);

	snprintf(path, sizeof(path), "%s/libefa-fi.so", dir);
	h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
	MUST(h);
	*(void **)&violations = dlsym(h, "fakeefa_violations");
	MUST(violations);

	/* a domain name in the hints selects that NIC only */
	{
		struct fi_info *hd = hints_for("efa", FI_MSG, 0);

		hd->domain_attr->name = strdup("rdmap48s27-rdm");
		CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hd, &fi) ==
			      0 &&
		      !fi->next &&
		      !strcmp(fi->domain_attr->name, "rdmap48s27-rdm"));
		fi_freeinfo(fi);
		fi_freeinfo(hd);
	}

	setenv("TERN_FAKEEFA_PROFILE", "direct", 1);
	CHECK(getinfo("efa", FI_MSG, 0, &fi) == -FI_ENODATA);
	direct(0);
	direct(FI_RX_CQ_DATA);
	setenv("TERN_FAKEEFA_PROFILE", "efa", 1);
	CHECK(getinfo("efa-direct", FI_MSG, FI_CONTEXT2, &fi) == -FI_ENODATA);
	efa();
	printf("fakeefa_raw: %d failure(s)\n", failures);
	return failures ? 1 : 0;
}
