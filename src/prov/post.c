/* SPDX-License-Identifier: MIT */
/* Posting to the provider off the hot path, reading its completion errors,
 * and translating its errors into tern's. */
#include <errno.h>
#include <stdio.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "../core/core.h"
#include "prov.h"

/* Every tern message travels with this tag; receives match it exactly. */
#define TERN_TAG_MSG 0x7465726eULL
/* tern's own control messages (docs/protocol.md): "tern" with bit 32 set. */
#define TERN_TAG_CTRL 0x17465726eULL

int tern__err_from_fi(int fi_err)
{
	switch (fi_err) {
	case FI_ECANCELED:
		return -ECANCELED;
	case FI_ETRUNC:
		return -TERN_ETRUNC;
	case FI_EACCES:
	case FI_EPERM:
		return -TERN_EACCESS;
	case FI_ETIMEDOUT:
		return -ETIMEDOUT;
	case FI_ENOMEM:
		return -ENOMEM;
	default:
		return -TERN_EPROV;
	}
}

/* Errors that say a path is gone, whatever the operation: what
 * libfabric's providers report when a link, a NIC or a connection fails
 * (efa: unreachable, unresponsive, unknown peer; tcp, verbs: reset, I/O
 * error, operations flushed after one). A bad key or length is not one. */
static int err_is_path(int fi_err)
{
	switch (fi_err) {
	case FI_EIO:
	case FI_ETIMEDOUT:
	case FI_ECANCELED:
	case FI_ENOTCONN:
	case FI_ECONNRESET:
	case FI_ECONNABORTED:
	case FI_ECONNREFUSED:
	case FI_EHOSTUNREACH:
	case FI_ENETUNREACH:
	case FI_ENETDOWN:
	case FI_ESHUTDOWN:
		return 1;
	default:
		return 0;
	}
}

__attribute__((cold)) int tern__prov_post_error(ssize_t ret, char *msg,
						size_t len, int *prov_errno_p)
{
	if (ret == -FI_EAGAIN)
		return -EAGAIN;
	snprintf(msg, len, "post: %s", fi_strerror((int)-ret));
	*prov_errno_p = (int)-ret;
	return tern__err_from_fi((int)-ret);
}

__attribute__((cold)) int tern__prov_cq_failed(unsigned int idx, ssize_t ret)
{
	tern__warn("rail %u: fi_cq_read: %s", idx, fi_strerror((int)-ret));
	return -TERN_EPROV;
}

__attribute__((cold)) ssize_t tern__prov_rma_no_inject(
	struct tern__prov_rail *r, struct fi_msg_rma *msg, uint64_t flags)
{
	tern__info("fi_inject_write: %s: small writes are posted whole, with "
		   "their completions",
		   fi_strerror(FI_ENOSYS));
	r->rma_inject_off = 1;
	return fi_writemsg(r->ep, msg, flags);
}

void tern__prov_rail_deliver(struct tern__prov_rail *r)
{
	r->tx_flags = FI_DELIVERY_COMPLETE;
}

ssize_t tern__prov_tsend(struct tern__prov_rail *r, void *buf, size_t len,
			 void *desc, uint64_t addr, uint64_t data,
			 void *context, uint64_t flags)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct fi_msg_tagged msg = {
		.msg_iov = &iov,
		.desc = &desc,
		.iov_count = 1,
		.addr = addr,
		.tag = TERN_TAG_MSG,
		.ignore = 0,
		.context = context,
		.data = data,
	};
	struct fi_msg umsg = {
		.msg_iov = &iov,
		.desc = &desc,
		.iov_count = 1,
		.addr = addr,
		.context = context,
		.data = data,
	};

	flags |= r->tx_flags;
	if (!r->tagged)
		return fi_sendmsg(r->ep, &umsg, flags);
	return fi_tsendmsg(r->ep, &msg, flags);
}

ssize_t tern__prov_trecv(struct tern__prov_rail *r, void *buf, size_t len,
			 void *desc, uint64_t addr, void *context,
			 uint64_t flags)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct fi_msg_tagged msg = {
		.msg_iov = &iov,
		.desc = &desc,
		.iov_count = 1,
		.addr = addr,
		.tag = TERN_TAG_MSG,
		.ignore = 0,
		.context = context,
	};

	return fi_trecvmsg(r->ep, &msg, flags);
}

ssize_t tern__prov_ctrl_send(struct tern__prov_rail *r, void *buf, size_t len,
			     void *desc, uint64_t addr, void *context)
{
	return fi_tsend(r->ep, buf, len, desc, addr, TERN_TAG_CTRL, context);
}

ssize_t tern__prov_ctrl_recv(struct tern__prov_rail *r, void *buf, size_t len,
			     void *desc, void *context)
{
	return fi_trecv(r->ep, buf, len, desc, FI_ADDR_UNSPEC, TERN_TAG_CTRL, 0,
			context);
}

ssize_t tern__prov_recv(struct tern__prov_rail *r, void *buf, size_t len,
			void *desc, void *context)
{
	return fi_recv(r->ep, buf, len, desc, FI_ADDR_UNSPEC, context);
}

ssize_t tern__prov_recv_sink(struct tern__prov_rail *r, void *context)
{
	return fi_recv(r->ep, NULL, 0, NULL, FI_ADDR_UNSPEC, context);
}

ssize_t tern__prov_atomic(struct tern__prov_rail *r, int fadd, uint64_t *w,
			  void *desc, uint64_t addr, uint64_t raddr,
			  uint64_t key, void *context, uint64_t flags)
{
	struct fi_ioc op = { .addr = &w[0], .count = 1 };
	struct fi_ioc cmp = { .addr = &w[1], .count = 1 };
	struct fi_ioc res = { .addr = &w[2], .count = 1 };
	struct fi_rma_ioc rioc = { .addr = raddr, .count = 1, .key = key };
	struct fi_msg_atomic msg = {
		.msg_iov = &op,
		.desc = &desc,
		.iov_count = 1,
		.addr = addr,
		.rma_iov = &rioc,
		.rma_iov_count = 1,
		.datatype = FI_UINT64,
		.op = fadd ? FI_SUM : FI_CSWAP,
		.context = context,
	};

	if (fadd)
		return fi_fetch_atomicmsg(r->ep, &msg, &res, &desc, 1, flags);
	return fi_compare_atomicmsg(r->ep, &msg, &cmp, &desc, 1, &res, &desc, 1,
				    flags);
}

int tern__prov_cancel(struct tern__prov_rail *r, void *context)
{
	if (r->ep == NULL) /* closed: what it held is dropped */
		return -EBUSY;
	return fi_cancel(&r->ep->fid, context) == 0 ? 0 : -TERN_EPROV;
}

int tern__prov_cq_readerr(struct tern__prov_rail *r, unsigned int idx,
			  struct tern__prov_cqerr *out)
{
	struct fi_cq_err_entry err = { 0 };
	ssize_t ret;

	ret = fi_cq_readerr(r->cq, &err, 0);
	if (ret == -FI_EAGAIN)
		return 0;
	if (ret < 0) {
		tern__warn("rail %u: fi_cq_readerr: %s", idx,
			   fi_strerror((int)-ret));
		return -TERN_EPROV;
	}
	out->context = err.op_context;
	out->len = err.len;
	out->status = tern__err_from_fi(err.err);
	out->prov_errno = err.prov_errno;
	out->what = fi_strerror(err.err);
	/* A receive's or a target's error carries FI_RECV or FI_REMOTE_*;
	 * a transmit's never does (fi_cq(3)). */
	out->path = err_is_path(err.err);
	out->tx_orphan = err.op_context == NULL &&
			 !(err.flags &
			   (FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE));
	snprintf(out->text, sizeof(out->text), "rail %u: %s%s%s", idx,
		 fi_strerror(err.err), err.prov_errno ? ": " : "",
		 err.prov_errno ? fi_cq_strerror(r->cq, err.prov_errno,
						 err.err_data, NULL, 0)
				: "");
	return 1;
}
