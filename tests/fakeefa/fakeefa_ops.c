// SPDX-License-Identifier: MIT
/*
 * fakeefa's data operations: every fi_ops_msg, fi_ops_tagged, fi_ops_rma
 * and fi_ops_atomic entry point is one call of post(), which a small
 * descriptor per entry point drives (the completion it makes, whether it
 * carries remote CQ data, whether it is a msg or vector call or an inject). The
 * data moves by memcpy when posted, between endpoints of this process;
 * efa-direct's rules are checked here and each broken one counted
 * (fakeefa_rules.c).
 */
#include <stdlib.h>
#include <string.h>

#include "fakeefa.h"

/* Whether an operation carries remote CQ data. */
enum {
	DATA_NONE,
	DATA_ALWAYS,
	DATA_FLAG, /* if the call's flags hold FI_REMOTE_CQ_DATA */
};

/* What one entry point does beyond its arguments. */
struct fake_op {
	/* Its kind, and the flags of its completion at the initiator:
	 * FI_SEND|FI_MSG, FI_RECV|FI_TAGGED, FI_RMA|FI_WRITE, FI_ATOMIC
	 * (read or write as a result buffer is given or not), ... */
	uint64_t flags;
	uint8_t data; /* DATA_* */
	uint8_t msg;  /* a *msg or *v call: one IOV taken from its IOVs */
	/* fi_inject*: within the inject size; for RMA no descriptor and no
	 * completion, neither success nor failure (as tcp's: a failure is
	 * dropped). */
	uint8_t inject;
};

/* One call's arguments, whichever entry point took them (a msg call
 * gives its IOVs, which take_iov() turns into buf, len, desc). */
struct fake_io {
	void *buf;
	size_t len;
	void *desc;
	const struct iovec *iov;
	void **descs;
	size_t iov_count;
	fi_addr_t peer;
	uint64_t addr, key; /* RMA target (msg calls: from rma[0]) */
	const struct fi_rma_iov *rma;
	size_t rma_count;
	uint64_t tag, ignore;
	uint64_t data;	/* remote CQ data, if the op carries it */
	uint64_t flags; /* a msg call's flags */
	void *ctx;
	const struct fi_msg_atomic *amsg; /* atomics */
	const struct fi_ioc *cmp;
	struct fi_ioc *res;
};

enum {
	OP_SEND,
	OP_SENDDATA,
	OP_SENDMSG,
	OP_INJECT,
	OP_RECV,
	OP_RECVMSG,
	OP_TSEND,
	OP_TSENDMSG,
	OP_TRECV,
	OP_TRECVMSG,
	OP_WRITE,
	OP_WRITEDATA,
	OP_WRITEV,
	OP_WRITEMSG,
	OP_INJECT_WRITE,
	OP_INJECT_WRITEDATA,
	OP_READ,
	OP_READMSG,
	OP_ATOMIC,
};

static const struct fake_op ops[] = {
	[OP_SEND] = { FI_SEND | FI_MSG, DATA_NONE, 0, 0 },
	[OP_SENDDATA] = { FI_SEND | FI_MSG, DATA_ALWAYS, 0, 0 },
	[OP_SENDMSG] = { FI_SEND | FI_MSG, DATA_FLAG, 1, 0 },
	[OP_INJECT] = { FI_SEND | FI_MSG, DATA_NONE, 0, 1 },
	[OP_RECV] = { FI_RECV | FI_MSG, DATA_NONE, 0, 0 },
	[OP_RECVMSG] = { FI_RECV | FI_MSG, DATA_NONE, 1, 0 },
	[OP_TSEND] = { FI_SEND | FI_TAGGED, DATA_NONE, 0, 0 },
	[OP_TSENDMSG] = { FI_SEND | FI_TAGGED, DATA_FLAG, 1, 0 },
	[OP_TRECV] = { FI_RECV | FI_TAGGED, DATA_NONE, 0, 0 },
	[OP_TRECVMSG] = { FI_RECV | FI_TAGGED, DATA_NONE, 1, 0 },
	[OP_WRITE] = { FI_RMA | FI_WRITE, DATA_NONE, 0, 0 },
	[OP_WRITEDATA] = { FI_RMA | FI_WRITE, DATA_ALWAYS, 0, 0 },
	[OP_WRITEV] = { FI_RMA | FI_WRITE, DATA_NONE, 1, 0 },
	[OP_WRITEMSG] = { FI_RMA | FI_WRITE, DATA_FLAG, 1, 0 },
	[OP_INJECT_WRITE] = { FI_RMA | FI_WRITE, DATA_NONE, 0, 1 },
	[OP_INJECT_WRITEDATA] = { FI_RMA | FI_WRITE, DATA_ALWAYS, 0, 1 },
	[OP_READ] = { FI_RMA | FI_READ, DATA_NONE, 0, 0 },
	[OP_READMSG] = { FI_RMA | FI_READ, DATA_NONE, 1, 0 },
	[OP_ATOMIC] = { FI_ATOMIC, DATA_NONE, 0, 0 },
};

/* ---- peers and posted receives ---- */
static struct fake_ep *ep_of_addr(struct fake_ep *ep, fi_addr_t fa)
{
	uint32_t id;

	if (!ep->av || fa >= ep->av->n)
		return NULL;
	id = (uint32_t)(ep->av->addr[fa][16] | ep->av->addr[fa][17] << 8);
	if (id >= FAKE_MAX_EP || !fake_eps[id] ||
	    memcmp(fake_eps[id]->addr, ep->av->addr[fa], FAKE_ADDRLEN))
		return NULL;
	return fake_eps[id];
}

static fi_addr_t addr_in(struct fake_ep *tgt, const uint8_t *addr)
{
	size_t i;

	for (i = 0; tgt->av && i < tgt->av->n; i++)
		if (!memcmp(tgt->av->addr[i], addr, FAKE_ADDRLEN))
			return i;
	return FI_ADDR_NOTAVAIL;
}

static int av_has(struct fake_av *av, const uint8_t *addr)
{
	size_t i;

	for (i = 0; av && i < av->n; i++)
		if (!memcmp(av->addr[i], addr, FAKE_ADDRLEN))
			return 1;
	return 0;
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

/* ---- the operations ---- */
static ssize_t do_send(struct fake_ep *ep, const struct fake_op *op,
		       const struct fake_io *io, int has_data)
{
	int tagged = !!(op->flags & FI_TAGGED);
	struct fake_ep *tgt;
	struct fake_recv r;
	uint64_t fl;

	if (ep->dom->direct && io->len > FAKE_MTU) {
		fake_violate("send larger than the MTU");
		return -FI_EMSGSIZE;
	}
	if (!fake_desc_ok(ep, io->desc, io->buf, io->len)) {
		fake_violate("send without a local descriptor (FI_MR_LOCAL)");
		return -FI_EINVAL;
	}
	tgt = ep_of_addr(ep, io->peer);
	if (!tgt) {
		fake_cq_push(ep->tx, io->ctx, FI_SEND | FI_MSG, io->len, NULL,
			     0, FI_EHOSTUNREACH, 0);
		return 0;
	}
	if (rq_take(tgt, tagged, io->tag, &r)) {
		/* Receiver not ready: real EFA retries (RNR); the fake
		 * tells the sender to retry the post. */
		return -FI_EAGAIN;
	}
	fl = FI_RECV | (op->flags & (FI_MSG | FI_TAGGED)) |
	     (has_data ? FI_REMOTE_CQ_DATA : 0);
	if (io->len > r.len) {
		fake_cq_push(tgt->rx, r.ctx, fl, io->len, NULL, 0, FI_ETRUNC,
			     addr_in(tgt, ep->addr));
	} else {
		memcpy(r.buf, io->buf, io->len);
		fake_cq_push(tgt->rx, r.ctx, fl, io->len, NULL,
			     has_data ? io->data : 0, 0,
			     addr_in(tgt, ep->addr));
	}
	fake_cq_push(ep->tx, io->ctx, op->flags, 0, NULL, 0, 0, 0);
	return 0;
}

static ssize_t do_recv(struct fake_ep *ep, const struct fake_op *op,
		       const struct fake_io *io)
{
	size_t len = io->len;
	struct fake_recv *r;

	if (!fake_desc_ok(ep, io->desc, io->buf, len)) {
		fake_violate("recv without a local descriptor (FI_MR_LOCAL)");
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
	r->buf = io->buf;
	r->len = len;
	r->ctx = io->ctx;
	r->tagged = !!(op->flags & FI_TAGGED);
	r->tag = io->tag;
	r->ignore = io->ignore;
	return 0;
}

static ssize_t do_rma(struct fake_ep *ep, const struct fake_op *op,
		      const struct fake_io *io, int has_data)
{
	int write = !!(op->flags & FI_WRITE);
	uint64_t fl = op->flags;
	size_t len = io->len;
	struct fake_ep *tgt;
	struct fake_recv r;

	if (ep->dom->direct && len > fake_max_rdma) {
		fake_violate("RMA larger than max_rdma_size");
		return -FI_EINVAL;
	}
	if (!op->inject && !fake_desc_ok(ep, io->desc, io->buf, len)) {
		fake_violate("RMA without a local descriptor (FI_MR_LOCAL)");
		return -FI_EINVAL;
	}
	tgt = ep_of_addr(ep, io->peer);
	if (op->inject &&
	    (!tgt || !fake_rkey_find(io->key, io->addr, len, FI_REMOTE_WRITE)))
		return 0;
	if (!tgt || fake_link_down(ep->dom->nic)) {
		fake_cq_push(ep->tx, io->ctx, fl, len, NULL, 0, FI_EHOSTUNREACH,
			     0);
		return 0;
	}
	if (ep->dom->direct && !av_has(tgt->av, ep->addr)) {
		/* efa_fabric_comparison.md: the device cannot complete RMA
		 * from a peer the target has not inserted into its AV. */
		fake_violate("RMA to a target whose AV lacks the initiator");
		fake_cq_push(ep->tx, io->ctx, fl, len, NULL, 0, FI_EIO, 0);
		return 0;
	}
	if (!fake_rkey_find(io->key, io->addr, len,
			    write ? FI_REMOTE_WRITE : FI_REMOTE_READ)) {
		fake_cq_push(ep->tx, io->ctx, fl, len, NULL, 0, FI_EACCES, 0);
		return 0;
	}
	if (has_data && ep->dom->rx_cq_data) {
		if (rq_take(tgt, 0, 0, &r)) {
			fake_violate("write with data and no posted receive "
				     "(FI_RX_CQ_DATA)");
			fake_cq_push(ep->tx, io->ctx, fl, len, NULL, 0,
				     FI_ENOBUFS, 0);
			return 0;
		}
		if (write)
			memcpy((void *)(uintptr_t)io->addr, io->buf, len);
		fake_cq_push(tgt->rx, r.ctx,
			     FI_REMOTE_CQ_DATA | FI_RMA | FI_REMOTE_WRITE, len,
			     NULL, io->data, 0, addr_in(tgt, ep->addr));
	} else {
		if (write)
			memcpy((void *)(uintptr_t)io->addr, io->buf, len);
		else
			memcpy(io->buf, (void *)(uintptr_t)io->addr, len);
		if (has_data)
			fake_cq_push(
				tgt->rx, NULL,
				FI_REMOTE_CQ_DATA | FI_RMA | FI_REMOTE_WRITE,
				len, NULL, io->data, 0, addr_in(tgt, ep->addr));
	}
	if (!op->inject)
		fake_cq_push(ep->tx, io->ctx, fl, 0, NULL, 0, 0, 0);
	return 0;
}

/* efa fabric: 64-bit fetch-add and compare-swap, emulated. */
static ssize_t do_atomic(struct fake_ep *ep, const struct fake_io *io)
{
	const struct fi_msg_atomic *m = io->amsg;
	struct fake_ep *tgt = ep_of_addr(ep, m->addr);
	struct fi_ioc *res = io->res;
	uint64_t *p, old;

	if (m->datatype != FI_UINT64 && m->datatype != FI_INT64)
		return -FI_ENOSYS;
	if (!tgt || fake_link_down(ep->dom->nic)) {
		fake_cq_push(ep->tx, m->context, FI_ATOMIC, 0, NULL, 0,
			     FI_EHOSTUNREACH, 0);
		return 0;
	}
	if (!fake_rkey_find(m->rma_iov[0].key, m->rma_iov[0].addr, 8,
			    res ? FI_REMOTE_READ | FI_REMOTE_WRITE
				: FI_REMOTE_WRITE)) {
		fake_cq_push(ep->tx, m->context, FI_ATOMIC, 0, NULL, 0,
			     FI_EACCES, 0);
		return 0;
	}
	p = (uint64_t *)(uintptr_t)m->rma_iov[0].addr;
	old = *p;
	if (m->op == FI_SUM)
		*p = old + *(uint64_t *)m->msg_iov[0].addr;
	else if (m->op == FI_CSWAP) {
		if (old == *(uint64_t *)io->cmp[0].addr)
			*p = *(uint64_t *)m->msg_iov[0].addr;
	} else if (m->op == FI_ATOMIC_READ) {
	} else
		return -FI_ENOSYS;
	if (res)
		*(uint64_t *)res[0].addr = old;
	fake_cq_push(ep->tx, m->context, FI_ATOMIC | (res ? FI_READ : FI_WRITE),
		     0, NULL, 0, 0, 0);
	return 0;
}

/* ---- the one body of every entry point ---- */
/* A *msg or *v call: the fake moves one IOV (efa-direct: a rule). */
static ssize_t take_iov(struct fake_ep *ep, const struct fake_op *op,
			struct fake_io *io)
{
	if (op->flags & FI_RMA) {
		if (io->iov_count != 1 || io->rma_count != 1) {
			if (ep->dom->direct) {
				fake_violate("RMA with more than one IOV");
				return -FI_EINVAL;
			}
			return -FI_ENOSYS; /* the fake's efa moves one IOV */
		}
		if (io->rma[0].len != io->iov[0].iov_len)
			return -FI_EINVAL;
		io->addr = io->rma[0].addr;
		io->key = io->rma[0].key;
	} else if ((op->flags & FI_SEND) ? io->iov_count != 1
					 : io->iov_count > 1) {
		return -FI_ENOSYS;
	}
	io->buf = io->iov_count ? io->iov[0].iov_base : NULL;
	io->len = io->iov_count ? io->iov[0].iov_len : 0;
	io->desc = io->descs ? io->descs[0] : NULL;
	return 0;
}

/* fi_inject, fi_inject_write(data): within the inject size. */
static ssize_t inject_ok(struct fake_ep *ep, const struct fake_op *op,
			 size_t len)
{
	if (op->flags & FI_SEND)
		return len > (ep->dom->direct ? FAKE_INLINE : FAKE_INJECT)
			       ? -FI_EMSGSIZE
			       : 0;
	/* efa-direct has no RMA inject (libfabric 2.x efa_rma_ops:
	 * fi_no_rma_inject), though it reports an inject size. */
	if (ep->dom->direct)
		return -FI_ENOSYS;
	return len > FAKE_INJECT ? -FI_EMSGSIZE : 0;
}

static ssize_t post(struct fid_ep *e, int which, struct fake_io *io)
{
	const struct fake_op *op = &ops[which];
	struct fake_ep *ep = (struct fake_ep *)e;
	int has_data;
	ssize_t ret;

	if (op->flags & FI_ATOMIC)
		return do_atomic(ep, io);
	if (op->msg && (ret = take_iov(ep, op, io)) != 0)
		return ret;
	if (op->inject && (ret = inject_ok(ep, op, io->len)) != 0)
		return ret;
	has_data = op->data == DATA_ALWAYS ||
		   (op->data == DATA_FLAG && (io->flags & FI_REMOTE_CQ_DATA));
	if (op->flags & FI_RECV)
		return do_recv(ep, op, io);
	if (op->flags & FI_SEND)
		return do_send(ep, op, io, has_data);
	return do_rma(ep, op, io, has_data);
}

#define POST(e, which, ...) post(e, which, &(struct fake_io){ __VA_ARGS__ })

/* The fields of a struct fi_msg* every msg call passes on. */
#define MSG(m, fl)                                                            \
	.iov = (m)->msg_iov, .descs = (m)->desc, .iov_count = (m)->iov_count, \
	.peer = (m)->addr, .ctx = (m)->context, .data = (m)->data,            \
	.flags = (fl)

/* ---- fi_ops_msg ---- */
static ssize_t ep_send(struct fid_ep *e, const void *buf, size_t len,
		       void *desc, fi_addr_t dest, void *ctx)
{
	return POST(e, OP_SEND, .buf = (void *)buf, .len = len, .desc = desc,
		    .peer = dest, .ctx = ctx);
}

static ssize_t ep_senddata(struct fid_ep *e, const void *buf, size_t len,
			   void *desc, uint64_t data, fi_addr_t dest, void *ctx)
{
	return POST(e, OP_SENDDATA, .buf = (void *)buf, .len = len,
		    .desc = desc, .data = data, .peer = dest, .ctx = ctx);
}

static ssize_t ep_inject(struct fid_ep *e, const void *buf, size_t len,
			 fi_addr_t dest)
{
	return POST(e, OP_INJECT, .buf = (void *)buf, .len = len, .peer = dest);
}

static ssize_t ep_sendmsg(struct fid_ep *e, const struct fi_msg *m,
			  uint64_t flags)
{
	return POST(e, OP_SENDMSG, MSG(m, flags));
}

static ssize_t ep_recv(struct fid_ep *e, void *buf, size_t len, void *desc,
		       fi_addr_t src, void *ctx)
{
	(void)src;
	return POST(e, OP_RECV, .buf = buf, .len = len, .desc = desc,
		    .ctx = ctx);
}

static ssize_t ep_recvmsg(struct fid_ep *e, const struct fi_msg *m,
			  uint64_t flags)
{
	return POST(e, OP_RECVMSG, MSG(m, flags));
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

/* ---- fi_ops_tagged ---- */
static ssize_t ep_tsend(struct fid_ep *e, const void *buf, size_t len,
			void *desc, fi_addr_t dest, uint64_t tag, void *ctx)
{
	return POST(e, OP_TSEND, .buf = (void *)buf, .len = len, .desc = desc,
		    .peer = dest, .tag = tag, .ctx = ctx);
}

static ssize_t ep_tsendmsg(struct fid_ep *e, const struct fi_msg_tagged *m,
			   uint64_t flags)
{
	return POST(e, OP_TSENDMSG, MSG(m, flags), .tag = m->tag);
}

static ssize_t ep_trecv(struct fid_ep *e, void *buf, size_t len, void *desc,
			fi_addr_t src, uint64_t tag, uint64_t ignore, void *ctx)
{
	(void)src;
	return POST(e, OP_TRECV, .buf = buf, .len = len, .desc = desc,
		    .tag = tag, .ignore = ignore, .ctx = ctx);
}

static ssize_t ep_trecvmsg(struct fid_ep *e, const struct fi_msg_tagged *m,
			   uint64_t flags)
{
	return POST(e, OP_TRECVMSG, MSG(m, flags), .tag = m->tag,
		    .ignore = m->ignore);
}

static struct fi_ops_tagged tagged_ops = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = ep_trecv,
	.recvmsg = ep_trecvmsg,
	.send = ep_tsend,
	.sendmsg = ep_tsendmsg,
};

/* ---- fi_ops_rma ---- */
static ssize_t ep_write(struct fid_ep *e, const void *buf, size_t len,
			void *desc, fi_addr_t dest, uint64_t addr, uint64_t key,
			void *ctx)
{
	return POST(e, OP_WRITE, .buf = (void *)buf, .len = len, .desc = desc,
		    .peer = dest, .addr = addr, .key = key, .ctx = ctx);
}

static ssize_t ep_writedata(struct fid_ep *e, const void *buf, size_t len,
			    void *desc, uint64_t data, fi_addr_t dest,
			    uint64_t addr, uint64_t key, void *ctx)
{
	return POST(e, OP_WRITEDATA, .buf = (void *)buf, .len = len,
		    .desc = desc, .data = data, .peer = dest, .addr = addr,
		    .key = key, .ctx = ctx);
}

static ssize_t ep_inject_write(struct fid_ep *e, const void *buf, size_t len,
			       fi_addr_t dest, uint64_t addr, uint64_t key)
{
	return POST(e, OP_INJECT_WRITE, .buf = (void *)buf, .len = len,
		    .peer = dest, .addr = addr, .key = key);
}

static ssize_t ep_inject_writedata(struct fid_ep *e, const void *buf,
				   size_t len, uint64_t data, fi_addr_t dest,
				   uint64_t addr, uint64_t key)
{
	return POST(e, OP_INJECT_WRITEDATA, .buf = (void *)buf, .len = len,
		    .data = data, .peer = dest, .addr = addr, .key = key);
}

static ssize_t ep_read(struct fid_ep *e, void *buf, size_t len, void *desc,
		       fi_addr_t src, uint64_t addr, uint64_t key, void *ctx)
{
	return POST(e, OP_READ, .buf = buf, .len = len, .desc = desc,
		    .peer = src, .addr = addr, .key = key, .ctx = ctx);
}

static ssize_t ep_writemsg(struct fid_ep *e, const struct fi_msg_rma *m,
			   uint64_t flags)
{
	return POST(e, OP_WRITEMSG, MSG(m, flags), .rma = m->rma_iov,
		    .rma_count = m->rma_iov_count);
}

static ssize_t ep_readmsg(struct fid_ep *e, const struct fi_msg_rma *m,
			  uint64_t flags)
{
	return POST(e, OP_READMSG, MSG(m, flags), .rma = m->rma_iov,
		    .rma_count = m->rma_iov_count);
}

/* One target IOV as long as the first local one. */
static ssize_t ep_writev(struct fid_ep *e, const struct iovec *iov, void **desc,
			 size_t count, fi_addr_t dest, uint64_t addr,
			 uint64_t key, void *ctx)
{
	struct fi_rma_iov r = { .addr = addr, .key = key };

	r.len = count ? iov[0].iov_len : 0;
	return POST(e, OP_WRITEV, .iov = iov, .descs = desc, .iov_count = count,
		    .peer = dest, .rma = &r, .rma_count = 1, .ctx = ctx);
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

/* ---- fi_ops_atomic ---- */
static ssize_t ep_atomicmsg(struct fid_ep *e, const struct fi_msg_atomic *m,
			    uint64_t flags)
{
	return POST(e, OP_ATOMIC, .amsg = m, .flags = flags);
}

static ssize_t ep_fetch_atomicmsg(struct fid_ep *e,
				  const struct fi_msg_atomic *m,
				  struct fi_ioc *res, void **rdesc,
				  size_t rcount, uint64_t flags)
{
	(void)rdesc;
	(void)rcount;
	return POST(e, OP_ATOMIC, .amsg = m, .res = res, .flags = flags);
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
	return POST(e, OP_ATOMIC, .amsg = m, .cmp = cmp, .res = res,
		    .flags = flags);
}

int fake_atomic_valid(struct fid_ep *e, enum fi_datatype dt, enum fi_op op,
		      size_t *count)
{
	(void)e;
	if ((dt != FI_UINT64 && dt != FI_INT64) ||
	    (op != FI_SUM && op != FI_CSWAP && op != FI_ATOMIC_READ))
		return -FI_EOPNOTSUPP;
	*count = 1;
	return 0;
}

static struct fi_ops_atomic atomic_ops = {
	.size = sizeof(struct fi_ops_atomic),
	.writemsg = ep_atomicmsg,
	.readwritemsg = ep_fetch_atomicmsg,
	.compwritemsg = ep_compare_atomicmsg,
	.writevalid = fake_atomic_valid,
	.readwritevalid = fake_atomic_valid,
	.compwritevalid = fake_atomic_valid,
};

/* Tables for efa-direct: every tagged and atomic op is -FI_ENOSYS, and
 * a broken rule. */
static struct fi_ops_tagged tagged_none = {
	.size = sizeof(struct fi_ops_tagged),
};
static struct fi_ops_atomic atomic_none = {
	.size = sizeof(struct fi_ops_atomic),
};

void fake_ops_attach(struct fake_ep *ep)
{
	ep->ep.msg = &msg_ops;
	ep->ep.rma = &rma_ops;
	ep->ep.tagged = ep->dom->direct ? &tagged_none : &tagged_ops;
	ep->ep.atomic = ep->dom->direct ? &atomic_none : &atomic_ops;
}

void fake_ops_init(void)
{
	fake_fill_nosys(&msg_ops, sizeof(msg_ops));
	fake_fill_nosys(&tagged_ops, sizeof(tagged_ops));
	fake_fill_forbidden(&tagged_none, sizeof(tagged_none));
	fake_fill_nosys(&rma_ops, sizeof(rma_ops));
	fake_fill_nosys(&atomic_ops, sizeof(atomic_ops));
	fake_fill_forbidden(&atomic_none, sizeof(atomic_none));
}
